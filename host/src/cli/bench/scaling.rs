//! The scaling rows of `vak bench`: raw and lifecycle calls per second from one thread and from
//! every core at once, each thread calling one call after another on a runtime of its own.

use super::BenchError;
use std::time::Instant;
use vak_host::bench_support::{self, RawCall};
use vak_host::{Host, Proposal, Status};

/// Calls per second from one thread and from `threads` threads at once, each thread calling one
/// call after another on a tokio runtime of its own: what a host gains from more cores. Medians
/// of the rounds; the ratio is `many / one` (ideal: `threads`).
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Scaling {
    /// The threads of the "many" runs: every core, at least two.
    pub(crate) threads: usize,
    /// Raw calls per second from one thread, and from `threads`; and their ratio.
    pub(crate) raw_one: f64,
    pub(crate) raw_many: f64,
    pub(crate) raw_ratio: f64,
    /// Lifecycle calls per second from one thread, and from `threads`; and their ratio.
    pub(crate) vak_one: f64,
    pub(crate) vak_many: f64,
    pub(crate) vak_ratio: f64,
}

/// Threads for the scaling rows: every core, at least two.
fn scaling_threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().max(2))
}

/// Raw and lifecycle throughput on one thread and on every core, rounds alternating so that drift
/// in the machine's speed falls on all four.
pub(super) fn measure(
    host: &Host,
    raw: &RawCall<'_>,
    tool: &str,
    arguments: &str,
    rounds: usize,
    (raw_calls, vak_calls): (usize, usize),
) -> Result<Scaling, BenchError> {
    let threads = scaling_threads();
    let vak_once = || async {
        let r = host.call(Proposal::new(tool, arguments)).await;
        match r.status {
            Status::Completed => Ok(()),
            other => Err(BenchError::CallEnded(other.as_str())),
        }
    };
    let (mut raw_one, mut raw_many, mut vak_one, mut vak_many) = (vec![], vec![], vec![], vec![]);
    // The threads block; on a multi-threaded runtime the caller's worker is handed over first.
    // One thread of work per core: a key's nonce thread (`--nonces-ahead`) would lend the
    // one-thread runs a second core (the lifecycle row above is measured with it).
    bench_support::set_nonces_ahead(bench_support::host_key(host), false);
    let mut measure = || -> Result<(), BenchError> {
        for _ in 0..rounds {
            raw_one.push(throughput(1, raw_calls, || raw.once())?);
            raw_many.push(throughput(threads, raw_calls, || raw.once())?);
            vak_one.push(throughput(1, vak_calls, vak_once)?);
            vak_many.push(throughput(threads, vak_calls, vak_once)?);
        }
        Ok(())
    };
    let measured = match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(measure),
        Ok(_) => Err(BenchError::NeedsMultiThread),
        Err(_) => measure(),
    };
    bench_support::set_nonces_ahead(bench_support::host_key(host), true);
    measured?;
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (raw_one, raw_many, vak_one, vak_many) = (
        median(raw_one),
        median(raw_many),
        median(vak_one),
        median(vak_many),
    );
    Ok(Scaling {
        threads,
        raw_one,
        raw_many,
        raw_ratio: raw_many / raw_one,
        vak_one,
        vak_many,
        vak_ratio: vak_many / vak_one,
    })
}

/// Calls per second of `threads` threads each making `per_thread` calls one after another, each
/// on a current-thread runtime of its own, all released at once.
fn throughput<F, Fut, E>(threads: usize, per_thread: usize, call: F) -> Result<f64, BenchError>
where
    F: Fn() -> Fut + Sync,
    Fut: std::future::Future<Output = Result<(), E>>,
    BenchError: From<E>,
{
    let start = std::sync::Barrier::new(threads + 1);
    let (start, call) = (&start, &call);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(move || -> Result<(), BenchError> {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .map_err(BenchError::Runtime)?;
                    start.wait();
                    rt.block_on(async {
                        for _ in 0..per_thread {
                            call().await?;
                        }
                        Ok(())
                    })
                })
            })
            .collect();
        start.wait();
        let t = Instant::now();
        for w in workers {
            w.join().map_err(|_| BenchError::ThreadPanicked)??;
        }
        Ok((threads * per_thread) as f64 / t.elapsed().as_secs_f64())
    })
}

//! `vak bench`: the whole lifecycle against the raw wasmtime limit, measured side by side in one
//! process on the same engine, component and arguments. Figures are medians over rounds, and the
//! result is a ratio: absolute times depend on the machine, the ratio is what vak adds.
//!
//! Here the lifecycle and the raw call; in `parts` what a call's record costs apart (signing,
//! JSON, the journal); in `scaling` the throughput from one thread and from every core.

mod parts;
mod scaling;

use super::render;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use vak_host::bench_support::{RawCall, RawCallError};
use vak_host::journal::JournalError;
use vak_host::signing::KeyError;
use vak_host::{Host, Proposal, Stage, Status};

/// Why `vak bench` could not measure.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BenchError {
    #[error("no admitted tool is named `{0}`")]
    NoTool(String),
    #[error("the benchmark call does not complete ({status}): {message}")]
    DoesNotComplete {
        status: &'static str,
        message: String,
    },
    #[error("a benchmark call ended {0}")]
    CallEnded(&'static str),
    #[error("the call has no limits")]
    NoLimits,
    #[error("the arguments are not JSON: {0}")]
    NotJson(serde_json::Error),
    #[error(transparent)]
    Raw(#[from] RawCallError),
    #[error("a copy of the host's key: {0}")]
    KeyCopy(KeyError),
    #[error(transparent)]
    Key(#[from] KeyError),
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error("cannot start a runtime: {0}")]
    Runtime(std::io::Error),
    #[error("a benchmark thread panicked")]
    ThreadPanicked,
    #[error("the scaling rows need a multi-threaded tokio runtime")]
    NeedsMultiThread,
}

/// One measured line.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Row {
    /// What was measured, as the table shows it.
    pub(crate) name: String,
    /// Median time per operation over the rounds, in nanoseconds.
    pub(crate) median_ns: u64,
    /// Fastest and slowest round, per operation.
    pub(crate) min_ns: u64,
    pub(crate) max_ns: u64,
    /// Operations timed in all the rounds.
    pub(crate) operations: u64,
}

/// The bench report.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Report {
    /// The tool called, with the same arguments every time.
    pub(crate) tool: String,
    /// Rounds, and calls (or operations) in each.
    pub(crate) rounds: usize,
    pub(crate) per_round: usize,
    /// Raw first, then the lifecycle, its stages, and the parts measured apart.
    pub(crate) rows: Vec<Row>,
    /// vak lifecycle median / raw median.
    pub(crate) lifecycle_ratio: f64,
    /// Throughput from one thread and from several at once.
    pub(crate) scaling: scaling::Scaling,
    /// The tool's instances for as many calls as the host takes at once, held together.
    pub(crate) at_once: AtOnce,
}

/// As many instances of the tool as calls in flight hold when the host is full
/// (`max_concurrent_calls`), each made and called, and held together, and the resident memory
/// they add: what a call in flight costs in memory, and proof that the pool takes that many of
/// this tool. Measured before the other rows, on cold slots.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct AtOnce {
    pub(crate) calls: usize,
    /// Resident bytes of this process before and while they are held (`None` where the system
    /// does not say: only Linux's `/proc/self/status` is read).
    pub(crate) resident_before: Option<u64>,
    pub(crate) resident_held: Option<u64>,
}

impl AtOnce {
    async fn measure(raw: &RawCall<'_>, calls: usize) -> Result<AtOnce, BenchError> {
        let resident_before = resident_bytes();
        let resident_held = raw.hold(calls, resident_bytes).await?;
        Ok(AtOnce {
            calls,
            resident_before,
            resident_held,
        })
    }

    /// Resident bytes added per call held.
    pub(crate) fn per_call(&self) -> Option<u64> {
        let added = self.resident_held?.saturating_sub(self.resident_before?);
        Some(added / self.calls.max(1) as u64)
    }
}

/// This process's resident memory (`VmRSS`), where the system says.
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// `vak bench TOOL ARGS`: measure and print; exit 1 when the benchmark call cannot run.
pub(super) async fn run(
    host: &Host,
    tool: &str,
    arguments: &str,
    rounds: usize,
    calls: usize,
    json: bool,
) -> ExitCode {
    match lifecycle_vs_raw(host, tool, arguments, rounds, calls).await {
        Ok(report) => {
            if json {
                say!("{}", render::json(&report));
            } else {
                say_raw!("{}", render::bench(&report));
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            say_err!("vak bench: {}", render::neutralise_line(&e.to_string()));
            ExitCode::from(1)
        }
    }
}

/// The row `name` from the time per operation of each round (at least one), `per_round`
/// operations a round.
fn summarize(name: &str, mut per_op: Vec<u64>, per_round: usize) -> Row {
    per_op.sort_unstable();
    Row {
        name: name.to_string(),
        median_ns: per_op[per_op.len() / 2],
        min_ns: per_op[0],
        max_ns: per_op[per_op.len() - 1],
        operations: (per_op.len() * per_round) as u64,
    }
}

/// Nanoseconds per operation of `n` operations that took `elapsed`.
fn per_op(elapsed: Duration, n: usize) -> u64 {
    (elapsed.as_nanos() / n as u128) as u64
}

/// Measure `tool` called with `arguments`: raw fresh instance + call, the full vak lifecycle
/// (with the host's journal, if it has one), the schema check alone, and the journal's own cost
/// per record. Rounds alternate between the
/// raw and vak loops so that drift in the machine's speed falls on both.
async fn lifecycle_vs_raw(
    host: &Host,
    tool: &str,
    arguments: &str,
    rounds: usize,
    per_round: usize,
) -> Result<Report, BenchError> {
    let rounds = rounds.max(1);
    let per_round = per_round.max(1);
    let admitted = host
        .tool(tool)
        .ok_or_else(|| BenchError::NoTool(tool.to_string()))?;
    let first = host.call(Proposal::new(tool, arguments)).await;
    if first.status != Status::Completed {
        return Err(BenchError::DoesNotComplete {
            status: first.status.as_str(),
            message: first.error.map(|e| e.message).unwrap_or_default(),
        });
    }
    let limits = first.limits.ok_or(BenchError::NoLimits)?;
    let args_value: serde_json::Value =
        serde_json::from_str(arguments).map_err(BenchError::NotJson)?;

    let raw_call = RawCall::new(host, tool, arguments, limits)
        .ok_or_else(|| BenchError::NoTool(tool.to_string()))?;
    let raw_once = || raw_call.once();
    // Before the rounds, while the pool's slots are cold: what the calls themselves make
    // resident, not pages kept from earlier calls.
    let at_once = AtOnce::measure(&raw_call, raw_call.max_concurrent_calls()).await?;

    let (mut raw, mut vak, mut schema) = (Vec::new(), Vec::new(), Vec::new());
    // Per stage, as each record timed it: where the lifecycle's time goes.
    let mut stages: std::collections::BTreeMap<Stage, Vec<u64>> = Default::default();
    // Warm-up: the pool's slots, the allocator, the caches.
    for _ in 0..per_round.min(50) {
        raw_once().await?;
        let _ = host.call(Proposal::new(tool, arguments)).await;
    }
    for _ in 0..rounds {
        let t = Instant::now();
        for _ in 0..per_round {
            raw_once().await?;
        }
        raw.push(per_op(t.elapsed(), per_round));

        let t = Instant::now();
        for _ in 0..per_round {
            let r = host.call(Proposal::new(tool, arguments)).await;
            if r.status != Status::Completed {
                return Err(BenchError::CallEnded(r.status.as_str()));
            }
            for s in &r.stages {
                stages.entry(s.stage).or_default().push(s.elapsed_ns);
            }
        }
        vak.push(per_op(t.elapsed(), per_round));

        let n = per_round * 100;
        let t = Instant::now();
        for _ in 0..n {
            std::hint::black_box(
                admitted
                    .schema
                    .validate_value(std::hint::black_box(&args_value))
                    .is_ok(),
            );
        }
        schema.push(per_op(t.elapsed(), n));
    }
    let raw = summarize(
        "raw wasmtime: fresh store + instance + call",
        raw,
        per_round,
    );
    let vak = summarize("vak: whole lifecycle, one record per call", vak, per_round);
    let schema = summarize(
        "vak: schema check of the arguments alone",
        schema,
        per_round * 100,
    );
    let lifecycle_ratio = vak.median_ns as f64 / raw.median_ns.max(1) as f64;
    let mut rows = vec![raw, vak];
    for (stage, times) in stages {
        rows.push(summarize(
            &format!("  stage {stage}, as its records timed it"),
            times,
            1,
        ));
    }
    rows.push(schema);
    let parts = parts::Parts {
        host,
        record: &first,
        rounds,
        per_round,
    };
    rows.push(parts.sign_whole()?);
    rows.push(parts.sign_ahead()?);
    rows.push(parts.sign_batch());
    rows.extend(parts.chain_in_memory()?);
    rows.push(parts.serialize());
    rows.extend(parts.journal().await?);
    // Each throughput run lasts about 100 ms at least: thread start-up and the VM's jitter would
    // otherwise weigh on runs of a few milliseconds.
    let calls_for = |row: &Row| ((100_000_000 / row.median_ns.max(1)) as usize).max(per_round);
    let counts = (calls_for(&rows[0]), calls_for(&rows[1]));
    let scaling = scaling::measure(host, &raw_call, tool, arguments, rounds, counts)?;
    Ok(Report {
        tool: tool.to_string(),
        rounds,
        per_round,
        rows,
        lifecycle_ratio,
        scaling,
        at_once,
    })
}

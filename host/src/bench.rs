//! `vak bench`: the whole lifecycle against the raw wasmtime limit, measured side by side in one
//! process on the same engine, component and arguments. Figures are medians over rounds, and the
//! result is a ratio: absolute times depend on the machine, the ratio is what vak adds.

use crate::capabilities::Broker;
use crate::dispatch::state::CallState;
use crate::{Host, Proposal, Status};
use std::time::{Duration, Instant};
use wasmtime::Store;

/// One measured line.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Row {
    pub name: String,
    /// Median time per operation over the rounds, in nanoseconds.
    pub median_ns: u64,
    /// Fastest and slowest round, per operation.
    pub min_ns: u64,
    pub max_ns: u64,
    pub operations: u64,
}

/// The bench report.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    pub tool: String,
    pub rounds: usize,
    pub per_round: usize,
    pub rows: Vec<Row>,
    /// vak lifecycle median / raw median.
    pub lifecycle_ratio: f64,
    /// Throughput from one thread and from several at once.
    pub scaling: Scaling,
}

/// Calls per second from one thread and from `threads` threads at once, each thread calling one
/// call after another on a tokio runtime of its own: what a host gains from more cores. Medians
/// of the rounds; the ratio is `many / one` (ideal: `threads`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Scaling {
    pub threads: usize,
    pub raw_one: f64,
    pub raw_many: f64,
    pub raw_ratio: f64,
    pub vak_one: f64,
    pub vak_many: f64,
    pub vak_ratio: f64,
}

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

/// The baseline: a fresh store and instance of the tool's pre-linked component, and a call, on
/// the same engine and with the same limits as the lifecycle, and nothing else (no proposal,
/// schema, permission, budget, evidence, outcome, projection, record, signature or journal).
pub struct RawCall<'a> {
    tool: &'a crate::AdmittedTool,
    runtime: &'a crate::dispatch::Runtime,
    limits: crate::record::Limits,
    arguments: &'a str,
}

impl<'a> RawCall<'a> {
    /// The raw call of `tool` on `host` with `arguments`, under `limits`.
    pub fn new(
        host: &'a Host,
        tool: &str,
        arguments: &'a str,
        limits: crate::record::Limits,
    ) -> Option<RawCall<'a>> {
        Some(RawCall {
            tool: host.tool(tool)?,
            runtime: host.runtime(),
            limits,
            arguments,
        })
    }

    /// One fresh instance and call.
    pub async fn once(&self) -> Result<(), String> {
        fresh_call(
            &self.runtime.engine,
            &self.tool.pre,
            &self.tool.grant,
            crate::dispatch::engine::Metering::BOTH,
            &self.limits,
            self.arguments,
        )
        .await
    }
}

/// The raw call of a tool on an engine of its own, configured with `allocation` and `metering`
/// (otherwise as vak's, from the same [`EngineSettings`](crate::EngineSettings)): what each
/// engine setting buys, measured by `cargo bench -p vak-bench --bench lifecycle`. The component
/// is compiled again for that engine; nothing ticks its epoch, so the deadline check is paid and
/// never fires.
pub struct EngineVariantCall {
    engine: wasmtime::Engine,
    pre: crate::dispatch::bindings::SandboxedToolPre<CallState>,
    grant: std::sync::Arc<crate::policy::ToolGrant>,
    metering: crate::dispatch::engine::Metering,
    limits: crate::record::Limits,
    arguments: String,
}

impl EngineVariantCall {
    /// Compile `component` (the bytes of `host`'s tool `tool`) for the variant engine.
    pub fn new(
        host: &Host,
        tool: &str,
        component: &[u8],
        arguments: &str,
        limits: crate::record::Limits,
        allocation: crate::dispatch::engine::Allocation,
        metering: crate::dispatch::engine::Metering,
    ) -> Result<EngineVariantCall, String> {
        let admitted = host.tool(tool).ok_or_else(|| format!("no tool `{tool}`"))?;
        let config =
            crate::dispatch::engine::engine_config(&host.runtime().settings, allocation, metering);
        let engine = wasmtime::Engine::new(&config).map_err(|e| format!("{e:#}"))?;
        let component = wasmtime::component::Component::new(&engine, component)
            .map_err(|e| format!("{e:#}"))?;
        // The capabilities admission linked, as its verdict recorded them.
        let grants: crate::dispatch::linker::GrantSet = match &admitted.examination.verdict {
            crate::admission::Verdict::Admitted { granted } => granted.iter().copied().collect(),
            crate::admission::Verdict::Refused { .. } => Default::default(),
        };
        let linker = crate::dispatch::linker::Linkers::default()
            .for_grants(&engine, &grants)
            .map_err(|e| format!("{e:#}"))?;
        let pre = linker
            .instantiate_pre(&component)
            .map_err(|e| format!("{e:#}"))?;
        let pre =
            crate::dispatch::bindings::SandboxedToolPre::new(pre).map_err(|e| format!("{e:#}"))?;
        Ok(EngineVariantCall {
            engine,
            pre,
            grant: admitted.grant.clone(),
            metering,
            limits,
            arguments: arguments.to_string(),
        })
    }

    /// One fresh instance and call, as [`RawCall::once`].
    pub async fn once(&self) -> Result<(), String> {
        fresh_call(
            &self.engine,
            &self.pre,
            &self.grant,
            self.metering,
            &self.limits,
            &self.arguments,
        )
        .await
    }
}

/// A fresh store and instance of `pre` and one call: the baseline, with the meters `metering`
/// names armed as the lifecycle arms them.
async fn fresh_call(
    engine: &wasmtime::Engine,
    pre: &crate::dispatch::bindings::SandboxedToolPre<CallState>,
    grant: &std::sync::Arc<crate::policy::ToolGrant>,
    metering: crate::dispatch::engine::Metering,
    limits: &crate::record::Limits,
    arguments: &str,
) -> Result<(), String> {
    let broker = Broker::new("bench".into(), Some(grant.clone()));
    let mut store = Store::new(engine, CallState::new(broker, limits.memory_bytes));
    store.limiter(|s| &mut s.limiter);
    if metering.fuel {
        store.set_fuel(limits.fuel).map_err(|e| e.to_string())?;
    }
    if metering.epoch {
        store.set_epoch_deadline(limits.wall_time_ms + 1);
        store.epoch_deadline_trap();
    }
    let instance = pre
        .instantiate_async(&mut store)
        .await
        .map_err(|e| e.to_string())?;
    instance
        .vak_tool_tool()
        .call_call(&mut store, arguments)
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.message)?;
    Ok(())
}

/// Measure `tool` called with `arguments`: raw fresh instance + call, the full vak lifecycle
/// (with the host's journal, if it has one), the schema check alone, and the journal's own cost
/// per record. Rounds alternate between the
/// raw and vak loops so that drift in the machine's speed falls on both.
pub async fn lifecycle_vs_raw(
    host: &Host,
    tool: &str,
    arguments: &str,
    rounds: usize,
    per_round: usize,
) -> Result<Report, String> {
    let rounds = rounds.max(1);
    let per_round = per_round.max(1);
    let admitted = host
        .tool(tool)
        .ok_or_else(|| format!("no admitted tool is named `{tool}`"))?;
    let first = host.call(Proposal::new(tool, arguments)).await;
    if first.status != Status::Completed {
        return Err(format!(
            "the benchmark call does not complete ({}): {}",
            first.status.as_str(),
            first.error.map(|e| e.message).unwrap_or_default()
        ));
    }
    let limits = first.limits.ok_or("the call has no limits")?;
    let runtime = host.runtime();
    let args_value: serde_json::Value =
        serde_json::from_str(arguments).map_err(|e| format!("the arguments are not JSON: {e}"))?;

    let raw_call = RawCall {
        tool: admitted,
        runtime,
        limits,
        arguments,
    };
    let raw_once = || raw_call.once();

    let (mut raw, mut vak, mut schema) = (Vec::new(), Vec::new(), Vec::new());
    // Per stage, as each record timed it: where the lifecycle's time goes.
    let mut stages: std::collections::BTreeMap<crate::Stage, Vec<u64>> = Default::default();
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
                return Err(format!("a benchmark call ended {}", r.status.as_str()));
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
    rows.push(sign_row(host, &first, rounds, per_round)?);
    rows.push(sign_ahead_row(host, &first, rounds, per_round)?);
    rows.push(sign_batch_row(host, &first, rounds, per_round));
    rows.push(serialize_row(&first, rounds, per_round));
    rows.extend(journal_rows(&first, rounds, per_round).await?);
    // Each throughput run lasts about 100 ms at least: thread start-up and the VM's jitter would
    // otherwise weigh on runs of a few milliseconds.
    let calls_for = |row: &Row| ((100_000_000 / row.median_ns.max(1)) as usize).max(per_round);
    let counts = (calls_for(&rows[0]), calls_for(&rows[1]));
    let scaling = scaling(host, &raw_call, tool, arguments, rounds, counts)?;
    Ok(Report {
        tool: tool.to_string(),
        rounds,
        per_round,
        rows,
        lifecycle_ratio,
        scaling,
    })
}

/// Threads for the scaling rows: every core, at least two.
fn scaling_threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().max(2))
}

/// Raw and lifecycle throughput on one thread and on every core, rounds alternating so that drift
/// in the machine's speed falls on all four.
fn scaling(
    host: &Host,
    raw: &RawCall<'_>,
    tool: &str,
    arguments: &str,
    rounds: usize,
    (raw_calls, vak_calls): (usize, usize),
) -> Result<Scaling, String> {
    let threads = scaling_threads();
    let vak_once = || async {
        let r = host.call(Proposal::new(tool, arguments)).await;
        match r.status {
            Status::Completed => Ok(()),
            other => Err(format!("a benchmark call ended {}", other.as_str())),
        }
    };
    let (mut raw_one, mut raw_many, mut vak_one, mut vak_many) = (vec![], vec![], vec![], vec![]);
    // The threads block; on a multi-threaded runtime the caller's worker is handed over first.
    // One thread of work per core: a key's nonce thread (`--nonces-ahead`) would lend the
    // one-thread runs a second core (the lifecycle row above is measured with it).
    host.inner_key().set_nonces_ahead(false);
    let mut measure = || -> Result<(), String> {
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
        Ok(_) => Err("the scaling rows need a multi-threaded tokio runtime".into()),
        Err(_) => measure(),
    };
    host.inner_key().set_nonces_ahead(true);
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
fn throughput<F, Fut>(threads: usize, per_thread: usize, call: F) -> Result<f64, String>
where
    F: Fn() -> Fut + Sync,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let start = std::sync::Barrier::new(threads + 1);
    let (start, call) = (&start, &call);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(move || -> Result<(), String> {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .map_err(|e| format!("cannot start a runtime: {e}"))?;
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
            w.join()
                .map_err(|_| "a benchmark thread panicked".to_string())??;
        }
        Ok((threads * per_thread) as f64 / t.elapsed().as_secs_f64())
    })
}

/// Signing one record (canonical JSON of the record, then ed25519) whole: RFC 8032's
/// deterministic nonce, the point multiplication included (what a call pays when its key has no
/// nonce ready).
fn sign_row(
    host: &Host,
    record: &crate::CallRecord,
    rounds: usize,
    per_round: usize,
) -> Result<Row, String> {
    let mut copy = record.clone();
    let whole = key_copy(host)?;
    let times = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..per_round {
                whole.sign(std::hint::black_box(&mut copy));
            }
            per_op(t.elapsed(), per_round)
        })
        .collect();
    Ok(summarize(
        "vak: signing the record alone, whole",
        times,
        per_round,
    ))
}

/// The host's key, without the host's pool of nonces if it has one.
fn key_copy(host: &Host) -> Result<crate::signing::HostKey, String> {
    crate::signing::HostKey::from_seed_hex(&host.inner_key().seed_hex())
        .map_err(|e| format!("a copy of the host's key: {e}"))
}

/// Signing one record with a nonce made ahead: the part the call path pays (the nonce's point
/// multiplication ran before, on the key's own thread). Timed in runs of 32, each started on a
/// full pool, so that every signature of a run takes a nonce.
fn sign_ahead_row(
    host: &Host,
    record: &crate::CallRecord,
    rounds: usize,
    per_round: usize,
) -> Result<Row, String> {
    const RUN: usize = 32;
    let mut copy = record.clone();
    // A pool of its own: the host's key may sign whole.
    let key = key_copy(host)?.with_nonces_ahead();
    let runs = per_round.div_ceil(RUN);
    let times = (0..rounds)
        .map(|_| {
            let mut spent = Duration::ZERO;
            for _ in 0..runs {
                key.await_nonces(RUN);
                let t = Instant::now();
                for _ in 0..RUN {
                    key.sign(std::hint::black_box(&mut copy));
                }
                spent += t.elapsed();
            }
            per_op(spent, runs * RUN)
        })
        .collect();
    Ok(summarize(
        "vak: signing the record alone, nonce made ahead",
        times,
        runs * RUN,
    ))
}

/// Signing records as the journal does when BATCH of them share a commit: one signature over
/// their Merkle root, and each record's inclusion path. Per record.
fn sign_batch_row(host: &Host, record: &crate::CallRecord, rounds: usize, per_round: usize) -> Row {
    const BATCH: usize = 16;
    let text = serde_json::to_string(record).unwrap_or_default();
    let digests = vec![crate::signing::text_digest(&text); BATCH];
    let batches = per_round.div_ceil(BATCH);
    let times = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..batches {
                std::hint::black_box(
                    host.inner_key()
                        .sign_digests(std::hint::black_box(&digests)),
                );
            }
            per_op(t.elapsed(), batches * BATCH)
        })
        .collect();
    summarize(
        &format!("vak: signing {BATCH} records as one batch, per record"),
        times,
        batches * BATCH,
    )
}

/// Serializing one record to JSON (what signing and the journal each do once).
fn serialize_row(record: &crate::CallRecord, rounds: usize, per_round: usize) -> Row {
    let times = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..per_round {
                std::hint::black_box(serde_json::to_vec(std::hint::black_box(record)).ok());
            }
            per_op(t.elapsed(), per_round)
        })
        .collect();
    summarize("vak: the record as JSON alone", times, per_round)
}

/// The journal's cost per record, apart from the lifecycle: one append at a time in both
/// durability modes, and `CONCURRENT` appends at once when synced (group commit shares each disk
/// flush among the records waiting); then the same per call with the write-ahead entry, as a call
/// now journals it: its `started` entry (signed by the writer) and its record. Journals are
/// written in a temporary folder, then removed.
const CONCURRENT: usize = 32;

async fn journal_rows(
    record: &crate::CallRecord,
    rounds: usize,
    per_round: usize,
) -> Result<Vec<Row>, String> {
    use crate::journal::{Durability, Journal, Started};
    let dir = std::env::temp_dir().join(format!("vak-bench-journal-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let key = std::sync::Arc::new(crate::signing::HostKey::generate().map_err(|e| e.to_string())?);
    let limits = record.limits.ok_or("the record has no limits")?;
    let started = Started::of(record, "bench".into(), limits);
    let mut rows = Vec::new();
    // The call waits for its record to be in the journal's log; the indexer inserts it into
    // SQLite after. The second row also waits for that (a read of the journal does), so the two
    // show what the call pays and what the journal costs in all.
    for (name, durability, concurrent, indexed, write_ahead) in [
        (
            "journal: append to the log, one at a time",
            Durability::Committed,
            1,
            false,
            false,
        ),
        (
            "journal: same, and indexed into SQLite",
            Durability::Committed,
            1,
            true,
            false,
        ),
        (
            "journal: append, synced to disk",
            Durability::Synced,
            1,
            false,
            false,
        ),
        (
            "journal: synced, 32 at once (per record)",
            Durability::Synced,
            CONCURRENT,
            false,
            false,
        ),
        (
            "journal: a call's started entry + record, one call at a time",
            Durability::Committed,
            1,
            false,
            true,
        ),
        (
            "journal: same, synced to disk",
            Durability::Synced,
            1,
            false,
            true,
        ),
        (
            "journal: synced, 32 calls at once, started + record (per call)",
            Durability::Synced,
            CONCURRENT,
            false,
            true,
        ),
    ] {
        let path = dir.join(format!(
            "{}-{concurrent}-{indexed}-{write_ahead}.sqlite",
            durability_name(durability)
        ));
        let journal =
            std::sync::Arc::new(Journal::open(&path, durability).map_err(|e| e.to_string())?);
        let once = || {
            let (journal, key, mut started) = (journal.clone(), key.clone(), started.clone());
            async move {
                if write_ahead {
                    journal.append_started(&mut started, &key).await?;
                }
                journal.append_async(record).await
            }
        };
        let mut times = Vec::new();
        for _ in 0..rounds {
            let t = Instant::now();
            let mut left = per_round;
            while left > 0 {
                let batch = left.min(concurrent);
                let appends = (0..batch).map(|_| once());
                for r in futures::future::join_all(appends).await {
                    r.map_err(|e| e.to_string())?;
                }
                left -= batch;
            }
            if indexed {
                let last = crate::journal::Filter {
                    limit: Some(1),
                    ..Default::default()
                };
                journal.list(&last).map_err(|e| e.to_string())?;
            }
            times.push(per_op(t.elapsed(), per_round));
        }
        let stats = journal.commit_stats();
        let mut row = summarize(name, times, per_round);
        if concurrent > 1 {
            row.name = format!(
                "{} ({:.1} entries per write)",
                row.name,
                stats.records as f64 / stats.commits.max(1) as f64
            );
        }
        rows.push(row);
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(rows)
}

fn durability_name(d: crate::journal::Durability) -> &'static str {
    match d {
        crate::journal::Durability::Committed => "committed",
        crate::journal::Durability::Synced => "synced",
    }
}

fn per_op(elapsed: Duration, n: usize) -> u64 {
    (elapsed.as_nanos() / n as u128) as u64
}

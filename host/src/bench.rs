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

/// Measure `tool` called with `arguments`: raw fresh instance + call, the full vak lifecycle
/// (journal off: there is none yet), and the schema check alone. Rounds alternate between the
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

    let raw_once = || async {
        let broker = Broker::new("bench".into(), Some(admitted.grant.clone()));
        let mut store = Store::new(&runtime.engine, CallState::new(broker, limits.memory_bytes));
        store.limiter(|s| &mut s.limiter);
        store.set_fuel(limits.fuel).map_err(|e| e.to_string())?;
        store.set_epoch_deadline(limits.wall_time_ms + 1);
        store.epoch_deadline_trap();
        let instance = admitted
            .pre
            .instantiate_async(&mut store)
            .await
            .map_err(|e| e.to_string())?;
        instance
            .vak_tool_tool()
            .call_call(&mut store, arguments)
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.message)?;
        Ok::<(), String>(())
    };

    let (mut raw, mut vak, mut schema) = (Vec::new(), Vec::new(), Vec::new());
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
    Ok(Report {
        tool: tool.to_string(),
        rounds,
        per_round,
        rows: vec![raw, vak, schema],
        lifecycle_ratio,
    })
}

fn per_op(elapsed: Duration, n: usize) -> u64 {
    (elapsed.as_nanos() / n as u128) as u64
}

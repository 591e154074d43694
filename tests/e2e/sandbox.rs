//! End to end through real components: completed calls with receipts, tool errors, and hostile
//! guests each contained with its own typed error while the host keeps serving.

use serde_json::Value;
use vak_host::capabilities::{Capability, MAX_RECEIPTS_PER_CALL};
use vak_host::{CallRecord, Host, Proposal, Stage, Status};
use vak_tests::{bundled, guest, guests, host_with};

const POLICY: &str = r#"
[tools.clock]
capabilities.clock = { zones = ["*"] }

[tools.hostile]
capabilities.clock = { zones = ["UTC"] }
capabilities.log = {}
caps = { fuel = 50_000_000, wall_time_ms = 3_000, memory_bytes = 33_554_432, result_bytes = 65_536 }
"#;

/// Fuel so large that only the wall-clock deadline can stop a loop.
const NO_FUEL_POLICY: &str = r#"
[tools.clock]
capabilities.clock = { zones = ["*"] }

[tools.hostile]
capabilities.clock = { zones = ["UTC"] }
capabilities.log = {}
caps = { fuel = 1_000_000_000_000_000, wall_time_ms = 300 }
"#;

async fn host(policy: &str, cache: &tempfile::TempDir) -> Host {
    let host = host_with(
        &[
            ("clock", bundled("clock")),
            ("hostile", guest(guests::HOSTILE)),
        ],
        policy,
        cache.path(),
    )
    .await;
    assert!(
        host.tool("clock").is_some() && host.tool("hostile").is_some(),
        "{:#?}",
        host.examinations()
    );
    host
}

async fn hostile(host: &Host, mode: &str, n: u64) -> CallRecord {
    let args = format!(r#"{{"mode":"{mode}","n":{n}}}"#);
    host.call(Proposal::new("hostile", args)).await
}

/// The host still serves an honest call after whatever came before.
async fn assert_still_serving(host: &Host) {
    let r = host.call(Proposal::new("clock", r#"{"zone":"UTC"}"#)).await;
    assert_eq!(r.status, Status::Completed, "{}", r.to_json_pretty());
    let r = hostile(host, "ok", 0).await;
    assert_eq!(r.status, Status::Completed, "{}", r.to_json_pretty());
}

fn error_kind(r: &CallRecord) -> &str {
    r.error
        .as_ref()
        .map(|e| e.kind.as_str())
        .unwrap_or("<none>")
}

#[tokio::test(flavor = "multi_thread")]
async fn clock_completes_with_a_receipt_its_evidence_cites() {
    let cache = tempfile::tempdir().unwrap();
    let host = host(POLICY, &cache).await;
    let r = host
        .call(Proposal::new("clock", r#"{"zone":"Europe/Paris"}"#))
        .await;
    assert_eq!(r.status, Status::Completed, "{}", r.to_json_pretty());
    assert_eq!(r.stage, Stage::Projection);
    assert!(r.error.is_none());
    assert!(r.usage.fuel > 0, "fuel used is reported");
    assert!(r.usage.memory_bytes > 0, "peak memory is reported");
    assert_eq!(r.receipts.len(), 1);
    let receipt = &r.receipts[0];
    assert_eq!(receipt.capability, Capability::Clock);
    assert!(receipt.ok);
    assert_eq!(receipt.call_id, r.call_id);
    assert_eq!(receipt.outcome["zone"], "Europe/Paris");
    let result = r.result.as_ref().expect("a result");
    assert_eq!(
        result.payload_schema.as_deref(),
        Some("vak.temporal.instant/1")
    );
    let payload: Value = serde_json::from_str(result.payload_json.as_deref().unwrap()).unwrap();
    assert_eq!(payload["zone"], "Europe/Paris");
    assert_eq!(
        payload["instant"], receipt.outcome["instant"],
        "the payload is the host's reading"
    );
    assert_eq!(r.evidence[0].item.kind, "observed");
    assert_eq!(
        r.evidence[0].support,
        vak_host::evidence::Support::Supported
    );
    assert_eq!(
        r.evidence[0].item.receipt.as_deref(),
        Some(receipt.id.as_str())
    );

    // The record's JSON contract.
    let json: Value = serde_json::from_str(&r.to_json_pretty()).unwrap();
    for field in [
        "call_id",
        "tool",
        "status",
        "stage",
        "error",
        "usage",
        "receipts",
        "evidence",
        "outcome",
        "projection",
    ] {
        assert!(json.get(field).is_some(), "record lacks `{field}`");
    }
    assert_eq!(json["status"], "completed");
    for field in ["fuel", "wall_ns", "memory_bytes"] {
        assert!(
            json["usage"][field].as_u64().is_some(),
            "usage lacks `{field}`"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_zone_is_a_tool_error_never_a_default() {
    let cache = tempfile::tempdir().unwrap();
    let host = host(POLICY, &cache).await;
    let r = host
        .call(Proposal::new("clock", r#"{"zone":"Mars/Olympus_Mons"}"#))
        .await;
    assert_eq!(r.status, Status::ToolError, "{}", r.to_json_pretty());
    let e = r.error.as_ref().unwrap();
    assert_eq!(
        (e.kind.as_str(), e.stage, e.retryable),
        ("tool_error", Stage::Result, false)
    );
    assert_eq!(r.tool_error.as_ref().unwrap().code, "unknown-zone");
    assert!(r.result.is_none());
    // The refused lookup still left a receipt.
    assert_eq!(r.receipts.len(), 1);
    assert!(!r.receipts[0].ok);

    // A missing zone never reaches the tool.
    let before = host.runtime().instances_created();
    let r = host.call(Proposal::new("clock", "{}")).await;
    assert_eq!(r.status, Status::Refused);
    assert_eq!(r.stage, Stage::Schema);
    assert_eq!(
        host.runtime().instances_created(),
        before,
        "no instance for a refused call"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_infinite_loop_runs_out_of_fuel() {
    let cache = tempfile::tempdir().unwrap();
    let host = host(POLICY, &cache).await;
    let r = hostile(&host, "spin", 0).await;
    assert_eq!(r.status, Status::Failed);
    assert_eq!(error_kind(&r), "fuel_exhausted", "{}", r.to_json_pretty());
    assert_eq!(r.error.as_ref().unwrap().details["limit"], 50_000_000);
    assert_eq!(r.usage.fuel, 50_000_000);
    assert!(!r.error.as_ref().unwrap().retryable);
    assert_still_serving(&host).await;
}

/// A call stopped by its deadline reports the fuel it burnt (and is charged it), not what the
/// store held when its loop began: compiled code keeps its fuel count in a register between
/// calls, so before fuel was handed out in slices a 300 ms spin read 2,494 units.
#[tokio::test(flavor = "multi_thread")]
async fn a_call_stopped_by_its_deadline_reports_the_fuel_it_burnt() {
    let cache = tempfile::tempdir().unwrap();
    // The same loop, stopped once by its fuel (an exact figure) and once by its deadline: both
    // burn fuel at the same rate, so the fuel per second of the two agree.
    let capped = host(POLICY, &cache).await;
    let by_fuel = hostile(&capped, "spin", 0).await;
    assert_eq!(error_kind(&by_fuel), "fuel_exhausted");
    let rate = |r: &CallRecord| r.usage.fuel as f64 / r.usage.wall_ns as f64;
    let by_deadline = hostile(&host(NO_FUEL_POLICY, &cache).await, "spin", 0).await;
    assert_eq!(error_kind(&by_deadline), "deadline_exceeded");
    let ratio = rate(&by_deadline) / rate(&by_fuel);
    assert!(
        (0.4..2.5).contains(&ratio),
        "fuel per second stopped by the deadline ({} in {} ns) against stopped by fuel ({} in {} ns): {ratio:.3}",
        by_deadline.usage.fuel,
        by_deadline.usage.wall_ns,
        by_fuel.usage.fuel,
        by_fuel.usage.wall_ns
    );
    // Short of what was burnt by less than one slice of fuel.
    assert!(
        by_deadline.usage.fuel >= vak_host::dispatch::run::FUEL_SLICE,
        "{}",
        by_deadline.usage.fuel
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn loops_without_a_fuel_limit_hit_the_deadline_in_wasm_and_in_host_calls() {
    let cache = tempfile::tempdir().unwrap();
    let host = host(NO_FUEL_POLICY, &cache).await;
    for mode in ["spin", "spin-host", "sleep"] {
        let started = std::time::Instant::now();
        let r = hostile(&host, mode, 0).await;
        let elapsed = started.elapsed();
        assert_eq!(
            error_kind(&r),
            "deadline_exceeded",
            "{mode}: {}",
            r.to_json_pretty()
        );
        assert_eq!(r.error.as_ref().unwrap().details["limit_ms"], 300);
        assert!(
            elapsed.as_millis() >= 300,
            "{mode} stopped before its deadline: {elapsed:?}"
        );
        assert!(
            elapsed.as_secs() < 5,
            "{mode} was not stopped near its deadline: {elapsed:?}"
        );
        assert!(
            r.receipts.len() <= MAX_RECEIPTS_PER_CALL,
            "receipts are bounded"
        );
    }
    assert_still_serving(&host).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn memory_growth_stops_at_the_memory_limit() {
    let cache = tempfile::tempdir().unwrap();
    let host = host(POLICY, &cache).await;
    let r = hostile(&host, "grow", 0).await;
    assert_eq!(
        error_kind(&r),
        "memory_limit_exceeded",
        "{}",
        r.to_json_pretty()
    );
    let details = &r.error.as_ref().unwrap().details;
    assert_eq!(details["limit"], 33_554_432);
    assert!(details["requested"].as_u64().unwrap() > 33_554_432);
    assert!(r.usage.memory_bytes <= 33_554_432);
    assert_still_serving(&host).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn deep_recursion_is_a_clean_stack_overflow() {
    let cache = tempfile::tempdir().unwrap();
    let host = host(POLICY, &cache).await;
    let r = hostile(&host, "recurse", 0).await;
    assert_eq!(error_kind(&r), "stack_overflow", "{}", r.to_json_pretty());
    assert_still_serving(&host).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_result_over_the_cap_is_refused_with_its_size() {
    let cache = tempfile::tempdir().unwrap();
    let host = host(POLICY, &cache).await;
    let r = hostile(&host, "big-result", 100_000).await;
    assert_eq!(error_kind(&r), "result_too_large", "{}", r.to_json_pretty());
    assert_eq!(r.stage, Stage::Result);
    let details = &r.error.as_ref().unwrap().details;
    assert_eq!(
        (details["limit"].as_u64(), details["actual"].as_u64()),
        (Some(65_536), Some(100_000))
    );
    assert!(r.result.is_none(), "an oversized result is not kept");
    // Just under the cap is fine.
    let r = hostile(&host, "big-result", 60_000).await;
    assert_eq!(r.status, Status::Completed, "{}", r.to_json_pretty());
    assert_still_serving(&host).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn stdout_floods_and_log_floods_are_bounded() {
    let cache = tempfile::tempdir().unwrap();
    let host = host(POLICY, &cache).await;
    let r = hostile(&host, "flood", 2_000).await;
    assert_eq!(r.status, Status::Completed, "{}", r.to_json_pretty());
    assert!(r.logs.stdout.text.len() <= 64 << 10);
    assert!(
        r.logs.stdout.dropped_bytes > 1_000_000,
        "dropped {}",
        r.logs.stdout.dropped_bytes
    );

    let r = hostile(&host, "log-flood", 1_000).await;
    assert_eq!(r.status, Status::Completed, "{}", r.to_json_pretty());
    assert_eq!(r.logs.lines.len(), 256);
    assert_eq!(r.logs.dropped_lines, 744);
    assert_still_serving(&host).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_guest_panic_is_reported_with_its_message() {
    let cache = tempfile::tempdir().unwrap();
    let host = host(POLICY, &cache).await;
    let r = hostile(&host, "panic", 0).await;
    assert_eq!(error_kind(&r), "guest_panicked", "{}", r.to_json_pretty());
    assert!(r.error.as_ref().unwrap().message.contains("boom"));
    assert_still_serving(&host).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_zone_outside_the_grant_is_refused_at_the_broker_with_a_receipt() {
    let cache = tempfile::tempdir().unwrap();
    let host = host(POLICY, &cache).await;
    let r = hostile(&host, "forbidden-zone", 0).await;
    assert_eq!(r.status, Status::ToolError, "{}", r.to_json_pretty());
    assert!(r.tool_error.as_ref().unwrap().message.contains("denied"));
    assert_eq!(r.receipts.len(), 1);
    assert!(!r.receipts[0].ok);
    let r = hostile(&host, "receipts", 0).await;
    assert_eq!(r.status, Status::Completed, "{}", r.to_json_pretty());
    assert_eq!(
        r.evidence[0].item.receipt.as_deref(),
        Some(r.receipts[0].id.as_str())
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_honest_call_completes_while_a_hostile_one_runs() {
    let cache = tempfile::tempdir().unwrap();
    let host = host(NO_FUEL_POLICY, &cache).await;
    let spinning = {
        let host = host.clone();
        tokio::spawn(async move { hostile(&host, "spin", 0).await })
    };
    let honest = host
        .call(Proposal::new("clock", r#"{"zone":"Asia/Tokyo"}"#))
        .await;
    assert_eq!(
        honest.status,
        Status::Completed,
        "{}",
        honest.to_json_pretty()
    );
    let spun = spinning.await.unwrap();
    assert_eq!(error_kind(&spun), "deadline_exceeded");
}

#[tokio::test(flavor = "multi_thread")]
async fn fabricated_evidence_is_downgraded_and_honest_evidence_kept() {
    use vak_host::evidence::Support;
    let cache = tempfile::tempdir().unwrap();
    let host = host(POLICY, &cache).await;
    // A receipt of an earlier call, replayed by the tool in a later one.
    let earlier = hostile(&host, "receipts", 0).await;
    let old_receipt = earlier.receipts[0].id.clone();
    let args = format!(r#"{{"mode":"evidence","receipt":"{old_receipt}"}}"#);
    let r = host.call(Proposal::new("hostile", args)).await;
    assert_eq!(r.status, Status::Completed, "{}", r.to_json_pretty());
    let verdict = |id: &str| {
        let e = r.evidence.iter().find(|e| e.item.id == id).unwrap();
        (e.support, e.diagnostics.join("; "))
    };
    assert_eq!(verdict("honest").0, Support::Supported);
    assert_eq!(verdict("derived").0, Support::Supported);
    assert_eq!(verdict("summary").0, Support::Synthesized);
    for (id, why) in [
        ("invented", "no such receipt"),
        ("replayed", "no such receipt"),
        ("wrong-digest", "digest"),
        ("clock-as-source", "citation"),
        ("derived-from-invented", "unsupported"),
    ] {
        let (support, diagnostics) = verdict(id);
        assert_eq!(support, Support::Unsupported, "{id}");
        assert!(diagnostics.contains(why), "{id}: {diagnostics}");
    }
    // The tool's own result is kept byte for byte: its evidence list is the one it returned.
    let result = r.result.as_ref().unwrap();
    assert_eq!(result.evidence.len(), 8);
    assert_eq!(
        result.evidence.iter().map(|e| &e.id).collect::<Vec<_>>(),
        r.evidence.iter().map(|e| &e.item.id).collect::<Vec<_>>()
    );
}

/// Room for the longest chains the evidence cap admits.
const CHAIN_POLICY: &str = r#"
[tools.clock]
capabilities.clock = { zones = ["*"] }

[tools.hostile]
capabilities.clock = { zones = ["UTC"] }
capabilities.log = {}
caps = { fuel = 2_000_000_000, wall_time_ms = 20_000, result_bytes = 4_194_304 }
"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_chain_of_computed_items_is_settled_in_linear_time_and_bounded() {
    let cache = tempfile::tempdir().unwrap();
    let host = host(CHAIN_POLICY, &cache).await;
    let max = vak_host::evidence::MAX_EVIDENCE_ITEMS as u64;
    // The result stage's time for a chain of `n`: the least of five calls (the machine may be
    // shared; the least is the one least disturbed).
    let result_stage = async |n: u64| {
        let mut best = u64::MAX;
        for _ in 0..5 {
            let r = hostile(&host, "chain", n).await;
            assert_eq!(r.status, Status::Completed, "{}", r.to_json_pretty());
            assert_eq!(r.evidence.len() as u64, n);
            assert!(
                r.evidence[1..]
                    .iter()
                    .all(|e| e.support == vak_host::evidence::Support::Unsupported),
                "every link stands on a synthesized root"
            );
            let stage = r
                .stages
                .iter()
                .find(|s| s.stage == vak_host::Stage::Result)
                .unwrap();
            best = best.min(stage.elapsed_ns);
        }
        best
    };
    let small = result_stage(max / 10).await;
    let large = result_stage(max).await;
    eprintln!(
        "result stage: {} items {:.2} ms, {max} items {:.2} ms, ratio {:.1}",
        max / 10,
        small as f64 / 1e6,
        large as f64 / 1e6,
        large as f64 / small as f64
    );
    assert!(
        large < small.saturating_mul(20),
        "10x the items cost {large} ns against {small} ns"
    );
    // Past the cap (the chain of 30,000 of issue #30 among them): stopped at `result`, typed.
    let r = hostile(&host, "chain", 30_000).await;
    assert_eq!(r.status, Status::Failed, "{}", r.to_json_pretty());
    assert_eq!(error_kind(&r), "too_much_evidence");
    let e = r.error.as_ref().unwrap();
    assert_eq!((e.stage, e.retryable), (vak_host::Stage::Result, false));
    assert_eq!(e.details["limit"], max);
    assert_still_serving(&host).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn effects_done_before_a_trap_stay_in_the_record() {
    let cache = tempfile::tempdir().unwrap();
    let host = host(POLICY, &cache).await;
    let r = hostile(&host, "read-then-panic", 0).await;
    assert_eq!(error_kind(&r), "guest_panicked", "{}", r.to_json_pretty());
    assert_eq!(r.receipts.len(), 2, "both readings are on record");
    assert!(r.receipts.iter().all(|x| x.ok && x.call_id == r.call_id));
}

#[tokio::test(flavor = "multi_thread")]
async fn bulk_memory_copies_are_stopped_at_the_deadline_within_one_copy() {
    let cache = tempfile::tempdir().unwrap();
    let host = host(NO_FUEL_POLICY, &cache).await;
    // 16 MiB copied back and forth: each `memory.copy` moves 8 MiB, and the epoch can only stop
    // the guest between two of them, so the overshoot is bounded by what one copy of at most the
    // memory cap costs.
    let started = std::time::Instant::now();
    let r = hostile(&host, "bulk-copy", 16).await;
    let elapsed = started.elapsed();
    assert_eq!(
        error_kind(&r),
        "deadline_exceeded",
        "{}",
        r.to_json_pretty()
    );
    assert!(elapsed.as_millis() >= 300, "{elapsed:?}");
    assert!(
        elapsed.as_millis() < 300 + 1_500,
        "a bulk copy loop overshot its 300 ms deadline: {elapsed:?}"
    );
    assert_still_serving(&host).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_flood_of_host_handles_stops_at_the_handle_cap() {
    let cache = tempfile::tempdir().unwrap();
    let host = host(POLICY, &cache).await;
    let r = hostile(&host, "handles", 1_000_000).await;
    assert_eq!(error_kind(&r), "too_many_handles", "{}", r.to_json_pretty());
    assert_eq!(r.error.as_ref().unwrap().details["limit"], 4096);
    assert!(!r.error.as_ref().unwrap().retryable);
    // A tool that needs a few handles is not affected.
    let r = hostile(&host, "handles", 100).await;
    assert_eq!(r.status, Status::Completed, "{}", r.to_json_pretty());
    assert_still_serving(&host).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_table_with_a_huge_minimum_is_refused_at_admission_and_the_rest_is_served() {
    let cache = tempfile::tempdir().unwrap();
    let policy = format!("{POLICY}\n[tools.table_bomb]\n");
    let host = host_with(
        &[
            ("clock", bundled("clock")),
            ("hostile", guest(guests::HOSTILE)),
            ("table_bomb", guest(guests::TABLE_BOMB)),
        ],
        &policy,
        cache.path(),
    )
    .await;
    assert!(host.tool("table_bomb").is_none());
    let exam = host
        .examinations()
        .iter()
        .find(|e| e.source == "table_bomb")
        .expect("examined");
    let vak_host::Verdict::Refused { kind, reason, .. } = &exam.verdict else {
        panic!("admitted: {exam:?}");
    };
    assert_eq!(kind, "compile_failed");
    assert!(
        reason.contains("table") && reason.contains("50000"),
        "{reason}"
    );
    assert_still_serving(&host).await;
}

/// Every call starts from the component's initial memory, whichever way the pool resets a slot
/// (`--memory-reset`): a call finds nothing of an earlier one in its statics, its zeroed data,
/// its memory's size or the pages it grows, though the slot (two of them, so calls reuse them)
/// ran the calls before it.
#[tokio::test(flavor = "multi_thread")]
async fn no_call_finds_anything_of_an_earlier_one_whichever_the_memory_reset() {
    for reset in [
        vak_host::MemoryReset::Zero,
        vak_host::MemoryReset::DirtyPages,
    ] {
        let cache = tempfile::tempdir().unwrap();
        let policy = vak_host::Policy::parse(POLICY, "test policy").unwrap();
        let host = vak_host::HostBuilder::new()
            .engine_settings(vak_host::EngineSettings {
                max_concurrent_calls: 2,
                memory_reset: reset,
                cache_dir: Some(cache.path().to_path_buf()),
                ..Default::default()
            })
            .policy(policy)
            .component("hostile", guest(guests::HOSTILE))
            .build()
            .await
            .expect("host builds");
        let first = hostile(&host, "residue", 4 << 20).await;
        assert_eq!(
            first.status,
            Status::Completed,
            "{}",
            first.to_json_pretty()
        );
        let md = first.result.as_ref().unwrap().markdown.clone();
        let (found, pages) = md
            .split_once("; pages at start: ")
            .expect("the guest's report");
        assert_eq!(found, "calls before: 0; marked bytes: 0", "{reset:?}");
        let pages = pages
            .strip_suffix("; marked grown bytes: 0")
            .expect("grown pages zero");
        let expected = format!(
            "calls before: 0; marked bytes: 0; pages at start: {pages}; marked grown bytes: 0"
        );
        let fresh = |r: &CallRecord| {
            assert_eq!(r.status, Status::Completed, "{}", r.to_json_pretty());
            let md = &r.result.as_ref().unwrap().markdown;
            assert_eq!(md, &expected, "{reset:?}");
        };
        for _ in 0..5 {
            fresh(&hostile(&host, "residue", 4 << 20).await);
        }
        let (a, b) = tokio::join!(
            hostile(&host, "residue", 4 << 20),
            hostile(&host, "residue", 1 << 20)
        );
        fresh(&a);
        fresh(&b);
    }
}

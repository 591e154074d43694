//! Bounded host work: whatever a guest returns or says about itself, the host stores, parses and
//! prints only what its documented caps allow (issue 30, points 3-5).

use vak_host::admission::descriptor_bounds;
use vak_host::record::max_record_bytes;
use vak_host::result::{MAX_PAYLOAD_DEPTH, MAX_TOOL_ERROR_MESSAGE_BYTES};
use vak_host::{Proposal, Stage, Status, Verdict};
use vak_tests::{guest, guests, host_with};

const POLICY: &str = r#"
[tools.bulky]
capabilities.log = {}
caps = { memory_bytes = 268_435_456, wall_time_ms = 60_000, fuel = 20_000_000_000, result_bytes = 1_048_576 }
"#;

async fn bulky() -> (vak_host::Host, tempfile::TempDir) {
    let cache = tempfile::tempdir().unwrap();
    let host = host_with(&[("bulky", guest(guests::BULKY))], POLICY, cache.path()).await;
    assert!(host.tool("bulky").is_some(), "{:#?}", host.examinations());
    (host, cache)
}

fn call(mode: &str, n: u64) -> Proposal {
    Proposal::new("bulky", format!(r#"{{"mode":"{mode}","n":{n}}}"#))
}

/// The record's size as JSON, checked against its documented maximum; the ratio is printed.
fn assert_within_bound(r: &vak_host::CallRecord, what: &str) -> f64 {
    let size = serde_json::to_string(r).unwrap().len() as u64;
    let limits = r.limits.expect("the call was admitted");
    let max = max_record_bytes(&limits);
    let ratio = size as f64 / max as f64;
    eprintln!(
        "{what}: record {size} bytes, {:.3} of its maximum {max}",
        ratio
    );
    assert!(size <= max, "{what}: {size} > {max}");
    ratio
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_error_of_any_size_is_kept_once_cut_to_its_cap_with_its_digest() {
    let (host, _cache) = bulky().await;
    // 8 MiB of control characters: 48 MiB of JSON if kept, 96 MiB if kept twice.
    let n = 8u64 << 20;
    let r = host.call(call("tool-error", n)).await;
    assert_eq!((r.status, r.stage), (Status::ToolError, Stage::Result));
    let kept = r.tool_error.as_ref().unwrap();
    assert!(kept.message.len() <= MAX_TOOL_ERROR_MESSAGE_BYTES);
    assert!(kept.message.contains("[cut: "), "a note says it was cut");
    assert_eq!(kept.message_bytes, Some(n));
    let whole = "\u{1}".repeat(n as usize);
    assert_eq!(
        kept.message_sha256.as_deref(),
        Some(vak_host::digest::sha256_hex(whole.as_bytes()).as_str())
    );
    // The call's error names the code; the message is stored once, in `tool_error`.
    let error = r.error.as_ref().unwrap();
    // (The code, cut to its 128 bytes, is in it; the 8 MiB message is not.)
    assert!(error.message.len() < 400, "{}", error.message.len());
    assert_within_bound(&r, "tool error of 8 MiB");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_records_size_never_exceeds_its_documented_maximum_whatever_the_guest_returns() {
    let (host, _cache) = bulky().await;
    let mut worst: f64 = 0.0;
    for (mode, n) in [
        // A result at the cap: half document, half evidence items citing receipts that do
        // not exist (each comes back with the host's diagnostics).
        ("result", 1 << 20),
        // Logs, stdout and stderr at their caps, and a tool error over its cap.
        ("everything", 4 << 20),
        // Logs and outputs at their caps, and a document just within the result cap.
        ("everything-result", (1 << 20) - 64),
    ] {
        let r = host.call(call(mode, n)).await;
        assert!(
            matches!(
                r.status,
                Status::Completed | Status::ToolError | Status::Failed
            ),
            "{mode}"
        );
        worst = worst.max(assert_within_bound(&r, mode));
    }
    eprintln!("largest record: {worst:.3} of its maximum");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_payload_deeper_than_arguments_may_be_is_refused_at_the_result_stage() {
    let (host, _cache) = bulky().await;
    let r = host.call(call("deep-payload", 100_000)).await;
    assert_eq!((r.status, r.stage), (Status::Failed, Stage::Result));
    let e = r.error.unwrap();
    assert_eq!((e.kind.as_str(), e.retryable), ("payload_too_deep", false));
    assert_eq!(e.details["limit"], MAX_PAYLOAD_DEPTH);
    assert_eq!(e.details["depth"], 100_000);
    // At the bound, the payload passes this stage (it claims no registered schema, so it is
    // shown as a document).
    let r = host
        .call(call("deep-payload", MAX_PAYLOAD_DEPTH as u64))
        .await;
    assert_eq!(r.status, Status::Completed, "{:?}", r.error);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_descriptor_without_end_is_refused_with_a_short_reason_and_a_short_inspection() {
    let cache = tempfile::tempdir().unwrap();
    let policy = "[tools.descriptor_bomb]\ncapabilities.clock = { zones = [\"*\"] }\n";
    let host = host_with(
        &[("bomb", guest(guests::DESCRIPTOR_BOMB))],
        policy,
        cache.path(),
    )
    .await;
    let exam = &host.examinations()[0];
    let Verdict::Refused {
        stage,
        kind,
        reason,
        retryable,
    } = &exam.verdict
    else {
        panic!("admitted: {exam:#?}");
    };
    eprintln!("{kind}: {reason}");
    assert_eq!(
        (stage.as_str(), kind.as_str(), *retryable),
        ("admission", "bad_descriptor", false)
    );
    assert!(reason.len() < 300, "{} bytes: {reason}", reason.len());
    assert!(reason.len() <= descriptor_bounds::MAX_REASON_BYTES);
    assert!(reason.contains("at most"), "{reason}");
    assert!(exam.descriptor.is_none(), "nothing of it is kept");
    let inspected = serde_json::to_string(exam).unwrap();
    assert!(inspected.len() < 16 << 10, "{} bytes", inspected.len());

    // The same through `vak inspect`, as a reviewer reads it.
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("bomb.wasm");
    std::fs::write(&wasm, guest(guests::DESCRIPTOR_BOMB)).unwrap();
    std::fs::write(dir.path().join("policy.toml"), policy).unwrap();
    for json in [true, false] {
        let mut cmd = std::process::Command::new(vak_tests::vak_binary());
        cmd.arg("--policy")
            .arg(dir.path().join("policy.toml"))
            .arg("--cache-dir")
            .arg(cache.path())
            .arg("inspect")
            .arg(&wasm);
        if json {
            cmd.arg("--json");
        }
        let out = cmd.output().unwrap();
        assert_eq!(out.status.code(), Some(2), "refused");
        assert!(
            out.stdout.len() < 16 << 10,
            "vak inspect printed {} bytes",
            out.stdout.len()
        );
    }
}

//! Evidence that binds values: a receipt backs a payload field only when the value agrees with
//! what the host witnessed.
//!
//! - The corpus (`tests/data/evidence/*.json`): crafted results over real receipts of their own
//!   call (the `forger` guest carries out the effects, then returns the payload and items the
//!   case gives). Each fabricated result ends with its item `unsupported`, with the diagnostic
//!   the case names, and is never labelled `verified`; each honest twin keeps every item upheld.
//! - A property: payloads made from real receipts are `verified`; mutating any material field's
//!   value to one the host did not witness turns the label away from `verified`.
//! - Every bundled tool's typical call ends with the label its evidence deserves.

use proptest::prelude::*;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use vak_host::evidence::bodies::Bodies;
use vak_host::evidence::{Subject, Support};
use vak_host::outcome::Requirement;
use vak_host::registry::{Backing, Registry};
use vak_host::{CallRecord, Host, Proposal, Status};
use vak_tests::{bundled, guest, guests, host_with};

const PAGE: &str = "<html><head><title>Test page</title></head><body>hi</body></html>";
const OTHER: &str = "<html><head><title>Other page</title></head><body>other</body></html>";
const DATA: &str =
    "p99 latency in ms, week 2026-11-16 to 2026-11-22: last week 120, this week 95.\n";
const FILE: &str = "hello world\n";

/// A one-thread HTTP/1.1 server of the three bodies above; its port.
fn serve() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut buf = Vec::new();
            let mut chunk = [0u8; 1024];
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            let head = String::from_utf8_lossy(&buf).to_string();
            let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
            let (status, body) = match body_of(&path) {
                Some(b) => ("200 OK", b),
                None => ("404 Not Found", "no"),
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

fn body_of(path: &str) -> Option<&'static str> {
    match path {
        "/page" => Some(PAGE),
        "/other" => Some(OTHER),
        "/data" => Some(DATA),
        _ => None,
    }
}

struct Fixture {
    host: Host,
    port: u16,
    project: PathBuf,
    _dir: tempfile::TempDir,
}

async fn fixture() -> Fixture {
    let port = serve();
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("main.txt"), FILE).unwrap();
    let http =
        format!(r#"{{ origins = ["http://127.0.0.1:{port}"], allow_addresses = ["127.0.0.1"] }}"#);
    let root = format!(
        r#"{{ roots = [{{ name = "project", path = "{}", mode = "read-write" }}] }}"#,
        project.display()
    );
    let policy = format!(
        r#"
[tools.forger]
capabilities.clock = {{ zones = ["*"] }}
capabilities.http = {http}
capabilities.workspace = {root}

[tools.clock]
capabilities.clock = {{ zones = ["*"] }}
[tools.stats]
[tools.compare]
[tools.research]
capabilities.http = {http}
[tools.replace]
capabilities.workspace = {root}
"#
    );
    let host = host_with(
        &[
            ("forger", guest(guests::FORGER)),
            ("clock", bundled("clock")),
            ("stats", bundled("stats")),
            ("compare", bundled("compare")),
            ("research", bundled("research")),
            ("replace", bundled("replace")),
        ],
        &policy,
        &dir.path().join("cache"),
    )
    .await;
    let admitted: Vec<&str> = host.tools().map(|t| t.name()).collect();
    assert_eq!(admitted.len(), 6, "{:#?}", host.examinations());
    Fixture {
        host,
        port,
        project,
        _dir: dir,
    }
}

fn requirements(spec: &Value) -> Vec<Requirement> {
    spec["require"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|r| Requirement::parse(r.as_str().unwrap()).unwrap())
                .collect()
        })
        .unwrap_or_default()
}

/// Run one spec of the corpus through the forger, the file restored first.
async fn forge(f: &Fixture, spec: &Value) -> CallRecord {
    std::fs::write(f.project.join("main.txt"), FILE).unwrap();
    let text = spec
        .to_string()
        .replace("{server}", &format!("http://127.0.0.1:{}", f.port));
    let mut p = Proposal::new("forger", json!({ "spec": text }).to_string());
    for r in requirements(spec) {
        p = p.require(r);
    }
    let r = f.host.call(p).await;
    assert_eq!(r.status, Status::Completed, "{}", r.to_json_pretty());
    r
}

fn requirement(r: &CallRecord, name: &str) -> Value {
    let outcome = r.outcome.as_ref().expect("an outcome");
    let found = outcome.requirements.iter().find(|o| o.requirement == name);
    let found = found.unwrap_or_else(|| panic!("no requirement {name}: {outcome:?}"));
    serde_json::to_value(found).unwrap()
}

/// The record's label as records spell it (empty before the outcome stage).
fn label(r: &CallRecord) -> &'static str {
    r.outcome.as_ref().map_or("", |o| o.label.as_str())
}

fn corpus() -> Vec<(String, Value)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/evidence");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let name = p.file_stem().unwrap().to_string_lossy().to_string();
            let case: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap())
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            (name, case)
        })
        .collect()
}

/// What is wrong with requirement `expect` of `r`, if anything.
fn requirement_problem(r: &CallRecord, expect: &Value) -> Option<String> {
    if expect.is_null() {
        return None;
    }
    let name = expect["name"].as_str().unwrap();
    let o = requirement(r, name);
    let d = o["diagnostic"].as_str().unwrap_or_default();
    (o["decision"] != expect["decision"] || !d.contains(expect["diagnostic"].as_str().unwrap()))
        .then(|| format!("requirement {name}: expected {expect}, got {o}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn every_crafted_result_is_refused_and_every_honest_twin_upheld() {
    let f = fixture().await;
    let cases = corpus();
    assert!(cases.len() >= 14, "the corpus is {} cases", cases.len());
    // Every case is run; the failures are reported together.
    let mut failures = Vec::new();
    for (name, case) in &cases {
        let mut fail = |what: String| failures.push(format!("{name}: {what}"));
        let forged = forge(&f, &case["forged"]).await;
        let expect = &case["expect"];
        if label(&forged) == "verified" {
            fail("the crafted result is labelled verified".into());
        }
        if let Some(id) = expect["item"].as_str() {
            match forged.evidence.iter().find(|e| e.item.id == id) {
                None => fail(format!("no item {id}")),
                Some(item) => {
                    let diagnostics = item.diagnostics.join("\n");
                    eprintln!("{name}: {id}: {diagnostics}");
                    if item.support != Support::Unsupported {
                        fail(format!("item {id} is {:?}", item.support));
                    }
                    let wanted = expect["diagnostic"].as_str().unwrap();
                    if !diagnostics.contains(wanted) {
                        fail(format!("item {id}: no {wanted:?} in {diagnostics:?}"));
                    }
                }
            }
        }
        if let Some(p) = requirement_problem(&forged, &expect["requirement"]) {
            fail(p);
        }

        let honest = forge(&f, &case["honest"]).await;
        for e in &honest.evidence {
            let expected = if e.item.kind == "synthesized" {
                Support::Synthesized
            } else {
                Support::Supported
            };
            if e.support != expected {
                fail(format!(
                    "honest item {} is {:?}: {:?}",
                    e.item.id, e.support, e.diagnostics
                ));
            }
        }
        if case["honest"]["label"] != label(&honest) {
            fail(format!("the honest twin is labelled {:?}", honest.outcome));
        }
        if let Some(p) = requirement_problem(&honest, &case["honest"]["requirement"]) {
            fail(format!("honest: {p}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread")]
async fn every_bundled_tool_earns_its_label() {
    let f = fixture().await;
    let server = format!("http://127.0.0.1:{}", f.port);
    let figure = |name: &str, value: f64| json!({"name": name, "period": {"start": "2026-11-16", "end": "2026-11-22"}, "unit": "ms", "basis": "p99", "value": value});
    let calls = [
        // A reading the host witnessed, every field of it backed: verified.
        (
            "clock",
            json!({"zone": "Europe/Paris"}),
            vec![Requirement::Freshness {
                max_age_seconds: 60,
            }],
            "verified",
        ),
        // The caller's numbers, summarised: the host checks the arithmetic, but no receipt
        // backs the numbers.
        (
            "stats",
            json!({"values": [3, 1, 2], "unit": "ms"}),
            vec![],
            "unverified",
        ),
        // The caller's figures, compared: the same.
        (
            "compare",
            json!({"baseline": figure("last week", 120.0), "current": figure("this week", 95.0)}),
            vec![],
            "unverified",
        ),
        // A title read from a page the host fetched: verified, every claim cited.
        (
            "research",
            json!({"urls": [format!("{server}/page")]}),
            vec![Requirement::EveryClaimCited],
            "verified",
        ),
        // An edit with its write and read-back receipts: verified.
        (
            "replace",
            json!({"root": "project", "path": "main.txt", "find": "hello", "replace": "bye"}),
            vec![Requirement::VerifiedChange],
            "verified",
        ),
    ];
    for (tool, args, reqs, expected) in calls {
        let mut p = Proposal::new(tool, args.to_string());
        for r in reqs {
            p = p.require(r);
        }
        let r = f.host.call(p).await;
        assert_eq!(
            r.status,
            Status::Completed,
            "{tool}: {}",
            r.to_json_pretty()
        );
        assert_eq!(label(&r), expected, "{tool}: {}", r.to_json_pretty());
        // Every bundled tool names a payload schema the host knows, and its payload passes it.
        assert_eq!(
            requirement(&r, "payload_schema")["decision"],
            "met",
            "{tool}: {:?}",
            r.outcome
        );
        // Its items are what it says they are: none is refused, the computed ones recomputed.
        for e in &r.evidence {
            assert_ne!(
                e.support,
                Support::Unsupported,
                "{tool}: {}: {:?}",
                e.item.id,
                e.diagnostics
            );
            if e.item.kind == "computed" {
                assert!(!e.upholds.is_empty(), "{tool}: {} recomputed", e.item.id);
            }
        }
    }
}

/// Honest results over real receipts: the record, and the bodies behind its receipts.
async fn honest_records(f: &Fixture) -> Vec<(CallRecord, Bodies)> {
    let mut out = Vec::new();
    let cases = corpus();
    let honest = |n: &str| {
        cases
            .iter()
            .find(|(name, _)| name.starts_with(n))
            .map(|(_, c)| c["honest"].clone())
            .unwrap()
    };
    for spec in [
        honest("01"),
        honest("05"),
        honest("11"),
        honest("12"),
        json!({"effects": ["clock:Asia/Kolkata"], "schema": "vak.temporal.instant/1",
            "payload": {"instant": "$0.instant", "unix_seconds": "$0.unix_seconds", "offset_seconds": "$0.offset_seconds",
                        "zone": "$0.zone", "observed_at": "$0.instant", "max_age_seconds": 60},
            "evidence": [{"id": "r", "kind": "observed", "receipt": "$0.receipt", "supports": [""]}]}),
    ] {
        let r = forge(f, &spec).await;
        let bodies = Bodies::from_pairs(r.receipts.iter().filter_map(|x| {
            let url = x.outcome["final_url"].as_str()?;
            let path = url.rsplit_once('/').map(|(_, p)| format!("/{p}"))?;
            Some((x.id.clone(), body_of(&path)?.as_bytes().to_vec()))
        }));
        out.push((r, bodies));
    }
    out
}

/// The label the host gives `payload` with the record's own items, receipts and bodies.
fn relabel(registry: &Registry, r: &CallRecord, bodies: &Bodies, payload: &Value) -> String {
    let result = r.result.as_ref().unwrap();
    let schema = result.payload_schema.as_deref();
    let receipts = r.all_receipts();
    let subject = Subject {
        schema_id: schema,
        payload: Some(payload),
        registry,
        bodies,
    };
    let checked = vak_host::evidence::check(&result.evidence, &receipts, &subject).unwrap();
    let outcome = vak_host::outcome::evaluate(
        registry,
        schema,
        Some(payload),
        &checked,
        &receipts,
        &[],
        jiff::Timestamp::now().as_second(),
    );
    serde_json::to_value(outcome.label)
        .unwrap()
        .as_str()
        .unwrap()
        .to_string()
}

/// A value of the same type as `v` that differs from it.
fn mutation(v: &Value, seed: (u64, String)) -> Value {
    let (n, text) = seed;
    match v {
        Value::Bool(b) => json!(!b),
        Value::Number(x) if x.is_i64() => json!(x.as_i64().unwrap() + 1 + (n % 1_000_000) as i64),
        Value::Number(x) => json!(x.as_f64().unwrap() + 1.5 + (n % 1_000_000) as f64),
        Value::String(s) => {
            let t = format!("~{text}");
            if &t == s {
                json!(format!("{t}~"))
            } else {
                json!(t)
            }
        }
        other => panic!("a bound field of another type: {other}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn mutating_any_material_field_of_a_real_result_loses_verified() {
    let f = fixture().await;
    let records = honest_records(&f).await;
    let registry = Registry::builtin();
    // Each record, with the material fields its schema binds.
    let mut subjects = Vec::new();
    for (r, bodies) in &records {
        let result = r.result.as_ref().unwrap();
        let payload: Value = serde_json::from_str(result.payload_json.as_deref().unwrap()).unwrap();
        let schema = registry
            .get(result.payload_schema.as_deref().unwrap())
            .unwrap();
        assert_eq!(
            relabel(&registry, r, bodies, &payload),
            "verified",
            "the honest result: {}",
            r.to_json_pretty()
        );
        let fields: Vec<String> = vak_host::evidence::bound_fields(schema, &payload)
            .into_iter()
            .filter(|(_, b)| b.material && !matches!(b.backing, Backing::Declared))
            .map(|(p, _)| p)
            .collect();
        assert!(!fields.is_empty());
        subjects.push((r, bodies, payload, fields));
    }
    let total: usize = subjects.iter().map(|s| s.3.len()).sum();
    eprintln!("{} results, {total} material fields", subjects.len());
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 512,
        ..ProptestConfig::default()
    });
    let strategy = (
        0..subjects.len(),
        any::<prop::sample::Index>(),
        any::<u64>(),
        "[A-Za-z0-9 :.+-]{0,24}",
    );
    runner
        .run(&strategy, |(s, field, n, text)| {
            let (r, bodies, payload, fields) = &subjects[s];
            let pointer = field.get(fields);
            let mut mutated = payload.clone();
            let slot = mutated.pointer_mut(pointer).unwrap();
            let new = mutation(slot, (n, text));
            *slot = new.clone();
            // A value the host did not witness: never one a body it fetched holds.
            if let Some(t) = new.as_str() {
                prop_assume!(![PAGE, OTHER, DATA, FILE].iter().any(|b| b.contains(t)));
            }
            let label = relabel(&registry, r, bodies, &mutated);
            prop_assert_ne!(label, "verified", "{} mutated to {}", pointer, new);
            Ok(())
        })
        .unwrap();
}

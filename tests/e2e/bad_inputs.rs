//! A generated corpus of malformed argument documents and provider proposals: every one ends in
//! a typed refusal at the proposal or schema stage, none reaches a tool (no instance is created),
//! none panics, and the host goes on serving.

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Value, json};
use vak_host::proposal::providers::parse_document;
use vak_host::{Host, Proposal, Stage, Status};
use vak_tests::{bundled, host_with};

const POLICY: &str = r#"
[tools.stats]

[tools.compare]
"#;

async fn host(cache: &std::path::Path) -> Host {
    host_with(
        &[("stats", bundled("stats")), ("compare", bundled("compare"))],
        POLICY,
        cache,
    )
    .await
}

/// Any JSON value, nested up to `depth`.
fn any_json(depth: u32) -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        "[a-z]{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(depth, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,6}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A `stats` argument document that the schema must refuse: `values` missing, of a wrong type,
/// or holding a non-number at some position; or an unknown key beside a valid `values`.
fn wrong_stats_arguments() -> impl Strategy<Value = Value> {
    prop_oneof![
        // `values` is not an array.
        any_json(3)
            .prop_filter("not an array", |v| !v.is_array())
            .prop_map(|v| json!({ "values": v })),
        // An array with one non-number somewhere.
        (
            prop::collection::vec(any::<i32>(), 0..8),
            any_json(3).prop_filter("not a number", |v| !v.is_number()),
            any::<prop::sample::Index>()
        )
            .prop_map(|(nums, bad, at)| {
                let mut items: Vec<Value> = nums.into_iter().map(|n| json!(n)).collect();
                let i = at.index(items.len() + 1);
                items.insert(i, bad);
                json!({ "values": items })
            }),
        // No `values` at all.
        prop::collection::btree_map("[a-uw-z][a-z]{0,5}", any_json(2), 0..4)
            .prop_map(|m| Value::Object(m.into_iter().collect())),
    ]
}

/// Argument texts that are not a well-formed JSON object within the bounds.
fn malformed_texts() -> impl Strategy<Value = String> {
    prop_oneof![
        // Numbers JSON can spell but no f64 holds.
        "[1-9][0-9]{0,2}e[4-9][0-9]{2}".prop_map(|n| format!(r#"{{"values":[{n}]}}"#)),
        // Lone surrogates.
        "d[89ab][0-9a-f]{2}".prop_map(|s| format!(r#"{{"values":[1],"note":"\u{s}"}}"#)),
        // Duplicate keys: the host must validate the very value the tool reads.
        (any::<i32>(), any::<i32>())
            .prop_map(|(a, b)| format!(r#"{{"values":[{a}],"values":[{b}]}}"#)),
        // Nesting past the depth bound.
        (65usize..200).prop_map(|d| format!(r#"{{"values":{}1{}}}"#, "[".repeat(d), "]".repeat(d))),
        // Roots that are not objects.
        any_json(2)
            .prop_filter("not an object", |v| !v.is_object())
            .prop_map(|v| v.to_string()),
        // Truncated documents.
        (any_json(3), any::<prop::sample::Index>()).prop_filter_map(
            "a proper prefix that is not JSON",
            |(v, at)| {
                let text = json!({ "values": v }).to_string();
                let cut = at.index(text.len());
                let prefix = text.get(..cut)?.to_string();
                serde_json::from_str::<Value>(&prefix)
                    .is_err()
                    .then_some(prefix)
            }
        ),
        // Bytes that are not text JSON at all.
        "[^{\\[\"0-9tfn ]{1,20}",
    ]
}

fn refused_before_dispatch(record: &vak_host::CallRecord, what: &str) {
    assert_eq!(
        record.status,
        Status::Refused,
        "{what}: {}",
        record.to_json_pretty()
    );
    assert!(
        matches!(record.stage, Stage::Proposal | Stage::Schema),
        "{what}: refused at {}",
        record.stage
    );
    let error = record.error.as_ref().expect("a refusal carries its error");
    assert!(
        !error.retryable,
        "{what}: a malformed call is never retryable"
    );
    assert!(!error.kind.is_empty() && !error.message.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn generated_malformed_calls_are_refused_before_any_instance() {
    let cache = tempfile::tempdir().unwrap();
    let host = host(cache.path()).await;
    let before = host.runtime().instances_created();
    let mut runner = TestRunner::new(Config {
        cases: 300,
        ..Config::default()
    });

    let mut cases: Vec<(String, String)> = Vec::new();
    let wrong = wrong_stats_arguments();
    let texts = malformed_texts();
    for _ in 0..300 {
        let v = wrong.new_tree(&mut runner).expect("a case").current();
        cases.push(("stats".into(), v.to_string()));
        let t = texts.new_tree(&mut runner).expect("a case").current();
        cases.push(("stats".into(), t));
    }
    // Oversize documents: just past the 1 MiB bound.
    let big = format!(
        r#"{{"values":[{}1]}}"#,
        "1,".repeat(vak_host::proposal::MAX_ARGUMENT_BYTES / 2)
    );
    cases.push(("stats".into(), big));
    // Unknown and empty tool names.
    cases.push(("no_such_tool".into(), "{}".into()));
    cases.push(("".into(), r#"{"values":[1]}"#.into()));

    let session = host.session(None);
    for (tool, arguments) in &cases {
        let r = session
            .call(Proposal::new(tool.clone(), arguments.clone()))
            .await;
        let shown: String = arguments.chars().take(120).collect();
        refused_before_dispatch(&r, &format!("{tool} {shown}"));
    }
    assert_eq!(
        host.runtime().instances_created(),
        before,
        "a malformed call reached a tool"
    );
    // The host goes on serving.
    let ok = session
        .call(Proposal::new("stats", r#"{"values":[1,2]}"#))
        .await;
    assert_eq!(ok.status, Status::Completed, "{}", ok.to_json_pretty());
}

#[tokio::test(flavor = "multi_thread")]
async fn generated_provider_documents_never_panic_and_defects_are_refused() {
    let cache = tempfile::tempdir().unwrap();
    let host = host(cache.path()).await;
    let before = host.runtime().instances_created();
    let mut runner = TestRunner::new(Config::default());
    let strategy = (any_json(3), wrong_stats_arguments(), 0usize..5);
    let session = host.session(None);
    let (mut refused, mut dispatched) = (0, 0u64);
    for _ in 0..200 {
        let (noise, wrong, shape) = strategy.new_tree(&mut runner).expect("a case").current();
        let args_text = wrong.to_string();
        // Each provider's shape, with a malformed call in it, and pure noise.
        let doc = match shape {
            0 => {
                json!({"choices":[{"message":{"tool_calls":[{"id":"c","type":"function","function":{"name":"stats","arguments": args_text}}]}}]})
            }
            1 => {
                json!({"output":[{"type":"function_call","call_id":"c","name":"stats","arguments": noise}]})
            }
            2 => json!({"content":[{"type":"tool_use","id":"c","name":"stats","input": wrong}]}),
            3 => {
                json!({"candidates":[{"content":{"parts":[{"functionCall":{"name":"stats","args": noise}}]}}]})
            }
            _ => noise,
        };
        // Parsing may refuse the whole document; it must never panic.
        let Ok(proposals) = parse_document(&doc.to_string(), None) else {
            continue;
        };
        for p in proposals {
            let r = session.call(p).await;
            if r.status == Status::Refused {
                refused += 1;
                refused_before_dispatch(&r, &doc.to_string());
            } else {
                // Noise that happens to be a valid call is a call.
                dispatched += 1;
            }
        }
    }
    assert!(refused > 0, "the corpus produced refusals");
    assert_eq!(
        host.runtime().instances_created() - before,
        dispatched,
        "a refused provider call reached a tool"
    );
}

/// The error for `policy`, as an operator sees it.
fn policy_error(policy: &str) -> String {
    match vak_host::Policy::parse(policy, "vak.toml") {
        Ok(_) => panic!("accepted:\n{policy}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn policy_mistakes_are_refused_with_the_line_they_are_on() {
    // Unknown keys, at the top, in a tool, in a capability: toml names the line and column.
    let e = policy_error("[defaults]\nfuel = 1\n\n[tools.clock]\nfule = 5\n");
    assert!(
        e.contains("vak.toml") && e.contains("line 5") && e.contains("fule"),
        "{e}"
    );
    let e =
        policy_error("[tools.clock]\ncapabilities.clock = { zones = [\"UTC\"], zone = \"x\" }\n");
    assert!(e.contains("line 2") && e.contains("zone"), "{e}");
    let e = policy_error("[tools.clock]\ncapabilities.teleport = {}\n");
    assert!(e.contains("line 2") && e.contains("teleport"), "{e}");
    // Wrong types.
    let e = policy_error("[tools.clock]\ncaps = { fuel = \"lots\" }\n");
    assert!(e.contains("line 2") && e.contains("fuel"), "{e}");

    // Bad scopes: the line of the tool's table and the tool's name.
    let text = "[tools.clock]\ncapabilities.clock = { zones = [\"UTC\"] }\n\n[tools.mars]\ncapabilities.clock = { zones = [\"Mars/Olympus_Mons\"] }\n";
    let e = policy_error(text);
    assert!(
        e.contains("line 4") && e.contains("`mars`") && e.contains("Mars/Olympus_Mons"),
        "{e}"
    );
    let e = policy_error(
        "\n[tools.fetch]\ncapabilities.http = { origins = [\"ftp://example.org\"] }\n",
    );
    assert!(
        e.contains("line 2") && e.contains("not http or https"),
        "{e}"
    );
    let e = policy_error("[tools.self]\ncapabilities.invoke = { tools = [\"self\"] }\n");
    assert!(e.contains("line 1") && e.contains("call itself"), "{e}");

    // Overlapping grants: the same files under two roots, the same origin twice.
    let e = policy_error(
        "[tools.files]\ncapabilities.workspace = { roots = [\n  { name = \"all\", path = \"/srv\", mode = \"read-only\" },\n  { name = \"out\", path = \"/srv/out\", mode = \"read-write\" },\n] }\n",
    );
    assert!(
        e.contains("line 1")
            && e.contains("overlap")
            && e.contains("\"all\"")
            && e.contains("\"out\""),
        "{e}"
    );
    let e = policy_error(
        "[tools.fetch]\ncapabilities.http = { origins = [\"https://example.org\", \"https://example.org:443\"] }\n",
    );
    assert!(e.contains("same origin twice"), "{e}");
    // A table given twice is a TOML error, with its line.
    let e = policy_error("[tools.a]\n\n[tools.a]\n");
    assert!(e.contains("line 3"), "{e}");
}

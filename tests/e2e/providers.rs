//! What real provider SDKs print parses (issue 32): every document under tests/data/providers/
//! (each provider's API response, its official SDK's dump, text-only answers, parallel calls,
//! and the error paths) reads as the calls it holds, or as none; through `vak call --proposal`
//! a text-only answer runs nothing and exits 0, and every SDK dump's calls complete, Gemini's
//! `"times": 3.0` included (an integer argument the guest SDK reads as 3).

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use vak_host::proposal::providers::{DocumentError, Provider, parse_document};
use vak_host::stage::StageError;
use vak_tests::{bundled, guest, guests, vak_binary};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data/providers")
}

fn read(name: &str) -> String {
    std::fs::read_to_string(fixtures().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// What a document holds: calls as (tool, the provider's call id, arguments text, defect kind).
enum Expect {
    Calls(
        &'static [(
            &'static str,
            Option<&'static str>,
            &'static str,
            Option<&'static str>,
        )],
    ),
    NoCalls,
    UnknownShape,
}

const CHAT_PARALLEL: Expect = Expect::Calls(&[
    (
        "clock",
        Some("call_Xq1"),
        r#"{"zone":"Europe/Paris"}"#,
        None,
    ),
    (
        "shapes",
        Some("call_Xq2"),
        r#"{"times":3,"word":"hi"}"#,
        None,
    ),
]);
const GEMINI_PARALLEL: Expect = Expect::Calls(&[
    ("clock", None, r#"{"zone":"America/New_York"}"#, None),
    // The integral float is passed on as the model wrote it: nothing is repaired.
    ("shapes", None, r#"{"times":3.0,"word":"hi"}"#, None),
]);

/// Every fixture, with the provider it is written for and what it holds.
const FIXTURES: &[(&str, Option<Provider>, Expect)] = &[
    (
        "openai-chat-rest-parallel.json",
        Some(Provider::OpenAiChat),
        CHAT_PARALLEL,
    ),
    (
        "openai-chat-sdk-parallel.json",
        Some(Provider::OpenAiChat),
        CHAT_PARALLEL,
    ),
    (
        "openai-chat-sdk-text-only.json",
        Some(Provider::OpenAiChat),
        Expect::NoCalls,
    ),
    (
        "openai-chat-legacy-function-call.json",
        Some(Provider::OpenAiChat),
        Expect::Calls(&[("clock", None, r#"{"zone":"UTC"}"#, None)]),
    ),
    (
        "openai-chat-error-arguments-object.json",
        Some(Provider::OpenAiChat),
        Expect::Calls(&[
            ("clock", Some("call_ok"), r#"{"zone":"UTC"}"#, None),
            (
                "clock",
                Some("call_obj"),
                r#"{"zone":"UTC"}"#,
                Some("arguments_not_json_text"),
            ),
            ("", Some("call_noname"), "{}", Some("missing_tool_name")),
        ]),
    ),
    (
        "openai-responses-sdk-parallel.json",
        Some(Provider::OpenAiResponses),
        Expect::Calls(&[
            ("clock", Some("call_Rq1"), r#"{"zone":"UTC"}"#, None),
            (
                "shapes",
                Some("call_Rq2"),
                r#"{"times":2,"word":"ok"}"#,
                None,
            ),
        ]),
    ),
    (
        "openai-responses-sdk-text-only.json",
        Some(Provider::OpenAiResponses),
        Expect::NoCalls,
    ),
    (
        "anthropic-sdk-parallel.json",
        Some(Provider::Anthropic),
        Expect::Calls(&[
            ("clock", Some("toolu_01"), r#"{"zone":"Asia/Tokyo"}"#, None),
            (
                "shapes",
                Some("toolu_02"),
                r#"{"times":1,"word":"yo"}"#,
                None,
            ),
        ]),
    ),
    (
        "anthropic-sdk-text-only.json",
        Some(Provider::Anthropic),
        Expect::NoCalls,
    ),
    (
        "anthropic-error-tool-use-without-input.json",
        Some(Provider::Anthropic),
        Expect::Calls(&[("clock", Some("toolu_03"), "", Some("missing_arguments"))]),
    ),
    (
        "gemini-rest-parallel.json",
        Some(Provider::Gemini),
        GEMINI_PARALLEL,
    ),
    (
        "gemini-sdk-parallel.json",
        Some(Provider::Gemini),
        GEMINI_PARALLEL,
    ),
    (
        "gemini-sdk-parallel-json-dict.json",
        Some(Provider::Gemini),
        GEMINI_PARALLEL,
    ),
    (
        "gemini-sdk-text-only.json",
        Some(Provider::Gemini),
        Expect::NoCalls,
    ),
    (
        "mcp-tools-call.json",
        Some(Provider::Mcp),
        Expect::Calls(&[("shapes", None, r#"{"times":2,"word":"mcp"}"#, None)]),
    ),
    ("error-unknown-shape.json", None, Expect::UnknownShape),
];

#[test]
fn every_fixture_reads_as_the_calls_it_holds() {
    // Every document in the folder has its expectation here.
    let mut files: Vec<String> = std::fs::read_dir(fixtures())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".json"))
        .collect();
    files.sort();
    let mut listed: Vec<String> = FIXTURES.iter().map(|(f, _, _)| f.to_string()).collect();
    listed.sort();
    assert_eq!(files, listed, "tests/data/providers and FIXTURES differ");

    for (file, provider, expect) in FIXTURES {
        let text = read(file);
        // Detected, and read with the provider named (as `--provider` does).
        let hints = [None, *provider];
        for hint in hints {
            let got = parse_document(&text, hint);
            let at = format!("{file} (hint {:?})", hint.map(Provider::name));
            match expect {
                Expect::UnknownShape => {
                    assert!(
                        matches!(got, Err(DocumentError::UnknownShape(_))),
                        "{at}: {got:?}"
                    )
                }
                Expect::NoCalls => assert_eq!(got.map(|p| p.len()), Ok(0), "{at}"),
                Expect::Calls(calls) => {
                    let got = got.unwrap_or_else(|e| panic!("{at}: {e}"));
                    let read: Vec<_> = got
                        .iter()
                        .map(|p| {
                            (
                                p.tool.as_str(),
                                p.provider_call_id.as_deref(),
                                p.arguments.as_str(),
                                p.defect.as_ref().map(|d| d.kind()),
                            )
                        })
                        .collect();
                    assert_eq!(read, calls.to_vec(), "{at}");
                    let name = provider.map(Provider::name).unwrap_or_default();
                    assert!(got.iter().all(|p| p.provider == name), "{at}: {got:?}");
                }
            }
        }
    }
}

/// `vak` over `dir`'s tools (clock and the `shapes` guest) and policy, with no journal.
fn vak(dir: &Path) -> Command {
    let tools = dir.join("tools");
    if !tools.is_dir() {
        std::fs::create_dir_all(&tools).unwrap();
        std::fs::write(tools.join("clock.wasm"), bundled("clock")).unwrap();
        std::fs::write(tools.join("shapes.wasm"), guest(guests::SHAPES)).unwrap();
        std::fs::write(
            dir.join("policy.toml"),
            "[tools.clock]\ncapabilities.clock = { zones = [\"*\"] }\n[tools.shapes]\n",
        )
        .unwrap();
    }
    let mut cmd = Command::new(vak_binary());
    cmd.arg("--tools")
        .arg(&tools)
        .arg("--policy")
        .arg(dir.join("policy.toml"))
        .arg("--cache-dir")
        .arg(dir.join("cache"))
        .arg("--state-dir")
        .arg(dir.join("state"))
        .arg("--no-journal");
    cmd
}

#[test]
fn a_text_only_answer_runs_nothing_and_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    for (file, provider, expect) in FIXTURES {
        if !matches!(expect, Expect::NoCalls) {
            continue;
        }
        let path = fixtures().join(file);
        let provider = provider.map(Provider::name).unwrap_or_default();
        let out = vak(dir.path())
            .args(["call", "--proposal"])
            .arg(&path)
            .args(["--provider", provider])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{file}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains("no tool calls"), "{file}: {stdout}");
        let out = vak(dir.path())
            .args(["call", "--json", "--proposal"])
            .arg(&path)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{file}");
        let records: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert_eq!(
            records,
            serde_json::json!([]),
            "{file}: no record, refused or other"
        );
    }
}

#[test]
fn every_sdk_dump_runs_its_calls_to_completion() {
    let dir = tempfile::tempdir().unwrap();
    for (file, _, expect) in FIXTURES {
        let Expect::Calls(calls) = expect else {
            continue;
        };
        if calls.iter().any(|c| c.3.is_some()) {
            continue;
        }
        let out = vak(dir.path())
            .args(["call", "--json", "--proposal"])
            .arg(fixtures().join(file))
            .output()
            .unwrap();
        let records: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{file}: {e}: {}", String::from_utf8_lossy(&out.stderr)));
        let records = records.as_array().expect("an array of records");
        assert_eq!(records.len(), calls.len(), "{file}");
        for r in records {
            assert_eq!(r["status"], "completed", "{file}: {r:#}");
        }
        assert_eq!(out.status.code(), Some(0), "{file}");
        if file.starts_with("gemini") {
            // `"times": 3.0` passed the schema stage as an integer and the tool read it as 3.
            let shapes = records
                .iter()
                .find(|r| r["tool"] == "shapes")
                .expect("shapes");
            let md = shapes["result"]["markdown"].as_str().unwrap_or_default();
            assert!(md.starts_with("hi hi hi\n"), "{file}: {md}");
            assert!(md.contains(r#""times":3,"#), "{file}: {md}");
        }
    }
}

#[test]
fn a_defective_call_is_refused_with_its_own_record_beside_the_good_one() {
    let dir = tempfile::tempdir().unwrap();
    let out = vak(dir.path())
        .args(["call", "--json", "--proposal"])
        .arg(fixtures().join("openai-chat-error-arguments-object.json"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "refused before dispatch");
    let records: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let got: Vec<(&str, &str)> = records
        .as_array()
        .expect("records")
        .iter()
        .map(|r| {
            (
                r["status"].as_str().unwrap_or_default(),
                r["error"]["kind"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("completed", ""),
            ("refused", "arguments_not_json_text"),
            ("refused", "missing_tool_name")
        ]
    );
    let out = vak(dir.path())
        .args(["call", "--proposal"])
        .arg(fixtures().join("error-unknown-shape.json"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "bad usage");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no tool call of a known provider shape"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn for_and_provider_take_the_same_names_and_print_one_shape_each() {
    let dir = tempfile::tempdir().unwrap();
    for name in Provider::NAMES {
        let out = vak(dir.path())
            .args(["tools", "--for", name])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "--for {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let keys: Vec<&String> = doc.as_object().expect("an object").keys().collect();
        assert_eq!(keys, ["tools"], "--for {name}");
        let entries = doc["tools"].as_array().expect("tools");
        let first = match Provider::from_name(name).expect("known") {
            Provider::Gemini => {
                assert_eq!(entries.len(), 1, "one Gemini tool holding the declarations");
                &entries[0]["functionDeclarations"][0]
            }
            _ => &entries[0],
        };
        let tool_name = first
            .get("name")
            .or_else(|| first["function"].get("name"))
            .and_then(Value::as_str);
        assert_eq!(tool_name, Some("clock"), "--for {name}: {doc}");

        // --provider takes the same name.
        let out = vak(dir.path())
            .args(["call", "--proposal"])
            .arg(fixtures().join("anthropic-sdk-text-only.json"))
            .args(["--provider", name])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.contains("invalid value"),
            "--provider {name} is accepted: {stderr}"
        );
    }
    // The notes go to stderr, and into `notes` with --json.
    let out = vak(dir.path())
        .args(["tools", "--for", "openai-chat"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr
            .contains("shapes: declared non-strict: /properties/upper: optional and not nullable"),
        "{stderr}"
    );
    let out = vak(dir.path())
        .args(["tools", "--for", "openai-chat", "--json"])
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(doc["provider"], "openai-chat");
    let shapes = doc["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["function"]["name"] == "shapes")
        .expect("shapes");
    assert_eq!(shapes["function"]["strict"], false);
    assert!(
        doc["notes"]
            .as_array()
            .expect("notes")
            .iter()
            .any(|n| n["tool"] == "shapes"
                && n["note"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("/properties/upper")),
        "{doc}"
    );
}

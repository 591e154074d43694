//! Components built for other hosts ("foreign": no `vak:tool/tool` export) under vak's contract:
//! each exported function a tool with a schema derived from its WIT types, arguments converted
//! exactly, results as the payload and a lossless document, limits as for any tool, and
//! hostile components refused or stopped with typed errors.

use serde_json::{Value, json};
use vak_host::{CallRecord, Host, Proposal, Stage, Status};
use vak_tests::byo::{Hostile, hostile};
use vak_tests::{guest, guests, host_with};

/// Every function of the foreign-types guest, granted with the defaults and a small fuel cap
/// for `spin`, and a result cap `big` can pass.
const TYPES_POLICY: &str = r#"
[defaults]
fuel = 500_000_000
memory_bytes = 67_108_864
wall_time_ms = 10_000
result_bytes = 65_536

[tools.add]
[tools.shout]
[tools.describe]
[tools.pick]
[tools.shape-area]
[tools.perms]
[tools.pair]
[tools.first-char]
[tools.divide]
[tools.echo-list]
[tools.big]
[tools.spin]
caps = { fuel = 50_000_000 }
"#;

async fn types_host(cache: &tempfile::TempDir) -> Host {
    let host = host_with(
        &[("foreign-types", guest(guests::FOREIGN_TYPES))],
        TYPES_POLICY,
        cache.path(),
    )
    .await;
    assert!(host.tool("add").is_some(), "{:#?}", host.examinations());
    host
}

async fn call(host: &Host, tool: &str, args: Value) -> CallRecord {
    host.call(Proposal::new(tool, args.to_string())).await
}

/// The payload of a completed call, as JSON.
fn payload(record: &CallRecord) -> Value {
    assert_eq!(record.status, Status::Completed, "{record:#?}");
    let result = record.result.as_ref().expect("a result");
    assert_eq!(result.payload_schema.as_deref(), Some("wit.value"));
    serde_json::from_str(result.payload_json.as_deref().expect("a payload")).expect("JSON")
}

/// The stage and kind that refused a call.
fn refused(record: &CallRecord) -> (Stage, String) {
    let e = record
        .error
        .as_ref()
        .unwrap_or_else(|| panic!("refused: {record:#?}"));
    (e.stage, e.kind.clone())
}

#[tokio::test(flavor = "multi_thread")]
async fn each_exported_function_is_a_tool_with_a_schema_from_its_types() {
    let cache = tempfile::tempdir().unwrap();
    let host = types_host(&cache).await;
    let add = host.tool("add").unwrap();
    assert_eq!(
        add.descriptor.input_schema,
        json!({
            "type": "object",
            "properties": {
                "a": { "type": "integer", "minimum": 0, "maximum": 255 },
                "b": { "type": "integer", "minimum": 0, "maximum": 255 },
            },
            "required": ["a", "b"],
            "additionalProperties": false,
        })
    );
    // Every function of the component is listed with its verdict.
    let exam = &host.examinations()[0];
    assert!(exam.descriptor.is_none());
    assert!(exam.functions.len() >= 12, "{:#?}", exam.functions);

    assert_eq!(
        payload(&call(&host, "add", json!({"a": 200, "b": 100})).await),
        json!(300)
    );
    assert_eq!(
        payload(&call(&host, "shout", json!({"s": "héllo"})).await),
        json!("HÉLLO")
    );
    let described = call(
        &host,
        "describe",
        json!({"p": {"x": 1, "y": -2, "label": null}}),
    )
    .await;
    assert!(
        payload(&described)
            .as_str()
            .is_some_and(|s| s.contains("-2"))
    );
    assert_eq!(
        payload(&call(&host, "pick", json!({"c": "green"})).await),
        json!("green")
    );
    assert_eq!(
        payload(
            &call(
                &host,
                "shape-area",
                json!({"s": {"tag": "square", "val": 3.0}})
            )
            .await
        ),
        json!(9.0)
    );
    assert_eq!(
        payload(&call(&host, "shape-area", json!({"s": {"tag": "empty"}})).await),
        json!(0.0)
    );
    let perms = payload(&call(&host, "perms", json!({"p": {"read": true, "exec": true}})).await);
    assert_eq!(perms["read"], json!(true));
    assert_ne!(perms["write"], json!(true));
    assert_eq!(
        payload(&call(&host, "pair", json!({"t": ["x", 3]})).await),
        json!(["x", "3"])
    );
    assert_eq!(
        payload(&call(&host, "first-char", json!({"s": "ñu"})).await),
        json!("ñ")
    );
    assert_eq!(
        payload(&call(&host, "first-char", json!({"s": ""})).await),
        json!(null)
    );
    assert_eq!(
        payload(&call(&host, "echo-list", json!({"xs": [1, 4294967295_u64]})).await),
        json!([1, 4294967295_u64])
    );
    assert_eq!(
        payload(&call(&host, "divide", json!({"a": -9, "b": 3})).await),
        json!(-3)
    );
    // The document is the value, losslessly.
    let shouted = call(&host, "shout", json!({"s": "a `tick` and <b>"})).await;
    let markdown = &shouted.result.as_ref().unwrap().markdown;
    assert!(markdown.contains("A `TICK` AND <B>"), "{markdown}");
    // Nothing is called verified that the tool did not earn.
    let label = shouted.outcome.as_ref().map(|o| o.label);
    assert_eq!(label, Some(vak_host::outcome::Label::Unverified));
}

#[tokio::test(flavor = "multi_thread")]
async fn arguments_are_converted_exactly_or_refused_at_the_schema() {
    let cache = tempfile::tempdir().unwrap();
    let host = types_host(&cache).await;
    for args in [
        json!({"a": "3", "b": 1}),
        json!({"a": 3.5, "b": 1}),
        json!({"a": 256, "b": 1}),
        json!({"a": -1, "b": 1}),
        json!({"a": 1}),
        json!({"a": 1, "b": 1, "c": 1}),
    ] {
        let record = call(&host, "add", args.clone()).await;
        assert_eq!(refused(&record).0, Stage::Schema, "{args}: {record:#?}");
        assert!(record.usage.fuel == 0, "no instance ran for {args}");
    }
    for (tool, args) in [
        ("first-char", json!({"s": 1})),
        ("pick", json!({"c": "purple"})),
        ("shape-area", json!({"s": {"tag": "circle"}})),
        ("shape-area", json!({"s": {"tag": "hexagon", "val": 1.0}})),
        ("perms", json!({"p": {"read": 1}})),
        ("perms", json!({"p": {"admin": true}})),
        ("pair", json!({"t": ["x"]})),
        ("pair", json!({"t": ["x", 1, 2]})),
        ("describe", json!({"p": {"x": 1, "y": 2}})),
    ] {
        let record = call(&host, tool, args.clone()).await;
        assert_eq!(
            refused(&record).0,
            Stage::Schema,
            "{tool} {args}: {record:#?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_result_err_is_the_tools_error_and_limits_hold() {
    let cache = tempfile::tempdir().unwrap();
    let host = types_host(&cache).await;
    let divided = call(&host, "divide", json!({"a": 1, "b": 0})).await;
    assert_eq!(divided.status, Status::ToolError, "{divided:#?}");
    let e = divided.tool_error.as_ref().unwrap();
    assert_eq!(
        (e.code.as_str(), e.message.as_str()),
        ("err", "division by zero")
    );

    // 64 KiB result cap: 100,000 bytes as a JSON array pass it while converting.
    let big = call(&host, "big", json!({"n": 100_000})).await;
    assert_eq!(
        refused(&big),
        (Stage::Result, "result_too_large".to_string()),
        "{big:#?}"
    );
    assert_eq!(
        payload(&call(&host, "big", json!({"n": 3})).await),
        json!([0, 1, 2])
    );

    let spun = call(&host, "spin", json!({})).await;
    assert_eq!(
        refused(&spun),
        (Stage::Dispatch, "fuel_exhausted".to_string())
    );
    // The host goes on serving.
    assert_eq!(
        payload(&call(&host, "add", json!({"a": 1, "b": 2})).await),
        json!(3)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_foreign_components_are_refused_or_stopped() {
    let cache = tempfile::tempdir().unwrap();
    let policy = "[tools.ok]\n[tools.fine]\n[tools.takes-resource]\n[tools.f]\ncaps = { fuel = 20_000_000, wall_time_ms = 2_000 }\n";
    let host = host_with(
        &[
            ("ungranted", hostile(Hostile::UngrantedImport)),
            ("unrepresentable", hostile(Hostile::Unrepresentable)),
            ("spinning-start", hostile(Hostile::SpinningStart)),
        ],
        policy,
        cache.path(),
    )
    .await;
    let exams = host.examinations();
    // An import vak does not provide: refused before anything runs, the import named.
    let verdict = serde_json::to_value(&exams[0].verdict).unwrap();
    assert_eq!(verdict["kind"], "forbidden_imports", "{verdict}");
    assert!(
        verdict["reason"].as_str().unwrap().contains("sockets")
            || verdict["reason"].as_str().unwrap().contains("evil")
    );
    assert!(host.tool("ok").is_none());

    // A function with a resource parameter is unavailable, with the reason; its sibling serves.
    let functions = &exams[1].functions;
    let resource = functions
        .iter()
        .find(|f| f.tool == "takes-resource")
        .unwrap();
    let why = serde_json::to_value(resource).unwrap();
    assert_eq!(why["status"], "unavailable", "{why}");
    assert!(
        why["reason"].as_str().unwrap().contains("resource"),
        "{why}"
    );
    assert!(host.tool("takes-resource").is_none());
    let fine = host.call(Proposal::new("fine", r#"{"a": 7}"#)).await;
    assert_eq!(payload(&fine), json!(7));

    // A start function that spins: stopped at instantiation by its fuel, with a typed error.
    let spun = host.call(Proposal::new("f", "{}")).await;
    let (stage, kind) = refused(&spun);
    assert_eq!(stage, Stage::Dispatch);
    assert!(
        ["fuel_exhausted", "deadline_exceeded"].contains(&kind.as_str()),
        "{spun:#?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_foreign_tool_is_served_over_mcp_with_its_derived_schema() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = vak_tests::serve_command(
        dir.path(),
        &[("foreign-types", guest(guests::FOREIGN_TYPES))],
        TYPES_POLICY,
        &[],
        std::process::Stdio::null(),
    )
    .spawn()
    .expect("spawn vak serve");
    let stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");
    let mut client = vak_tests::mcp::Client::new(stdout, stdin);
    client.initialize("2025-11-25").await;
    let listed = client.request("tools/list", json!({})).await;
    let tools = listed["result"]["tools"].as_array().expect("tools");
    let add = tools
        .iter()
        .find(|t| t["name"] == "add")
        .expect("add is listed");
    assert_eq!(add["inputSchema"]["properties"]["a"]["maximum"], json!(255));
    let called = client
        .request(
            "tools/call",
            json!({"name": "add", "arguments": {"a": 40, "b": 2}}),
        )
        .await;
    assert_eq!(called["result"]["isError"], json!(false), "{called}");
    let text = called["result"]["content"].to_string();
    assert!(text.contains("42"), "{called}");
    // Refused at the schema stage, as an error the model can act on.
    let refused = client
        .request(
            "tools/call",
            json!({"name": "add", "arguments": {"a": 256, "b": 2}}),
        )
        .await;
    assert_eq!(refused["result"]["isError"], json!(true), "{refused}");
    assert!(refused["result"]["content"].to_string().contains("maximum"));
}

/// A one-thread HTTP server: `/ok` answers 200 with a body, anything else 404.
fn server() -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut buf = [0u8; 4096];
            let n = stream.read(&mut buf).unwrap_or(0);
            let head = String::from_utf8_lossy(&buf[..n]).to_string();
            let (status, body) = if head.starts_with("GET /ok ") {
                ("200 OK", "plain body")
            } else {
                ("404 Not Found", "no")
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plain_wasi_http_fetcher_goes_through_the_broker() {
    let port = server();
    let policy = format!(
        "[tools.fetch]\ncapabilities.http = {{ origins = [\"http://127.0.0.1:{port}\"], allow_addresses = [\"127.0.0.1\"] }}\n"
    );
    let cache = tempfile::tempdir().unwrap();
    let host = host_with(
        &[("foreign-fetch", guest(guests::FOREIGN_FETCH))],
        &policy,
        cache.path(),
    )
    .await;
    assert!(host.tool("fetch").is_some(), "{:#?}", host.examinations());
    let ok = call(
        &host,
        "fetch",
        json!({"url": format!("http://127.0.0.1:{port}/ok")}),
    )
    .await;
    assert_eq!(payload(&ok), json!("plain body"));
    let receipt = &ok.receipts[0];
    assert!(receipt.ok);
    assert_eq!(
        receipt.digest,
        vak_host::digest::sha256_hex(b"plain body"),
        "the receipt binds the body"
    );
    let missing = call(
        &host,
        "fetch",
        json!({"url": format!("http://127.0.0.1:{port}/x")}),
    )
    .await;
    assert_eq!(missing.status, Status::ToolError);
    assert_eq!(missing.tool_error.as_ref().unwrap().message, "status 404");
    // Without an http grant, a component importing wasi:http is not served, with the reason.
    let ungranted = host_with(
        &[("foreign-fetch", guest(guests::FOREIGN_FETCH))],
        "[tools.fetch]\n",
        cache.path(),
    )
    .await;
    assert!(ungranted.tool("fetch").is_none());
    let why = serde_json::to_value(&ungranted.examinations()[0].functions).unwrap();
    assert!(why.to_string().contains("wasi:http"), "{why}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_policy_may_serve_a_function_under_another_name() {
    let cache = tempfile::tempdir().unwrap();
    let host = host_with(
        &[("foreign-types", guest(guests::FOREIGN_TYPES))],
        "[tools.plus]\nexport = \"add\"\n",
        cache.path(),
    )
    .await;
    assert!(host.tool("add").is_none());
    assert!(host.tool("plus").is_some(), "{:#?}", host.examinations());
    assert_eq!(
        payload(&call(&host, "plus", json!({"a": 2, "b": 3})).await),
        json!(5)
    );
    let listed = &host.examinations()[0].functions;
    assert!(listed.iter().any(|f| f.export == "add" && f.tool == "plus"));
}

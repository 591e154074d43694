//! Wassette's example tools (`../shared/byo`, built here with cargo, jco and componentize-py)
//! under vak, each with a policy made by `vak policy import` from its own `policy.yaml`, its
//! paths and hosts pointed at this test's temporary folder and a server on 127.0.0.1.

use serde_json::{Value, json};
use std::io::{Read, Write};
use std::sync::Arc;
use vak_host::capabilities::Capability;
use vak_host::{CallRecord, Host, HostBuilder, Policy, Proposal, Stage, Status};
use vak_tests::{OneSecret, byo, skipped, vak_binary};

/// The example's component, or `None` (skipped, with the reason) where its toolchain is missing.
fn component(name: &str) -> Option<Vec<u8>> {
    match byo::component(name) {
        Ok(path) => Some(std::fs::read(&path).expect("the built component")),
        Err(why) => {
            skipped(format!("{name} could not be built: {why}"));
            None
        }
    }
}

/// `vak policy import` of `yaml` for `tools`: the policy text it prints.
fn import(yaml: &str, tools: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("policy.yaml");
    std::fs::write(&file, yaml).unwrap();
    let mut cmd = std::process::Command::new(vak_binary());
    cmd.args(["policy", "import"]).arg(&file);
    for t in tools {
        cmd.args(["--tool", t]);
    }
    let out = cmd.output().expect("vak runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
}

/// `policy` with `edit` applied to each tool's table (as TOML values).
fn edited(policy: &str, edit: impl Fn(&mut toml::Table)) -> String {
    let mut doc: toml::Table = policy.parse().expect("the imported policy is TOML");
    if let Some(toml::Value::Table(tools)) = doc.get_mut("tools") {
        for (_, table) in tools.iter_mut() {
            if let toml::Value::Table(t) = table {
                edit(t);
            }
        }
    }
    toml::to_string(&doc).unwrap()
}

async fn host(component: Vec<u8>, policy: &str, cache: &tempfile::TempDir) -> Host {
    let policy = Policy::parse(policy, "imported policy").expect("the policy parses");
    HostBuilder::new()
        .policy(policy)
        .cache_dir(Some(cache.path().to_path_buf()))
        .secrets(Arc::new(OneSecret {
            name: "openweather",
            value: "owm-key-5f2b9c0d1e",
        }))
        .component("example", component)
        .build()
        .await
        .expect("host builds")
}

async fn call(host: &Host, tool: &str, args: Value) -> CallRecord {
    host.call(Proposal::new(tool, args.to_string())).await
}

fn text(record: &CallRecord) -> String {
    assert_eq!(record.status, Status::Completed, "{record:#?}");
    let json = record
        .result
        .as_ref()
        .unwrap()
        .payload_json
        .as_deref()
        .unwrap();
    match serde_json::from_str::<Value>(json).unwrap() {
        Value::String(s) => s,
        other => other.to_string(),
    }
}

/// A one-thread HTTP server answering every request with a small HTML page.
fn page_server() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let body = "<html><body><p>hello from the test server</p></body></html>";
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

#[tokio::test(flavor = "multi_thread")]
async fn fetch_rs_fetches_through_the_broker_with_receipts() {
    let Some(wasm) = component("fetch-rs") else {
        return;
    };
    let port = page_server();
    let yaml = format!(
        "version: \"1.0\"\npermissions:\n  network:\n    allow:\n      - host: \"http://127.0.0.1:{port}/\"\n"
    );
    let policy = edited(&import(&yaml, &["fetch"]), |t| {
        let caps = t
            .get_mut("capabilities")
            .and_then(|c| c.as_table_mut())
            .unwrap();
        let http = caps.get_mut("http").and_then(|h| h.as_table_mut()).unwrap();
        http.insert(
            "allow_addresses".into(),
            toml::Value::Array(vec!["127.0.0.1".into()]),
        );
    });
    let cache = tempfile::tempdir().unwrap();
    let host = host(wasm, &policy, &cache).await;
    assert!(host.tool("fetch").is_some(), "{:#?}", host.examinations());

    let fetched = call(
        &host,
        "fetch",
        json!({"url": format!("http://127.0.0.1:{port}/page")}),
    )
    .await;
    assert!(text(&fetched).contains("hello from the test server"));
    let receipt = fetched
        .receipts
        .iter()
        .find(|r| r.capability == Capability::Http)
        .expect("an http receipt");
    assert!(receipt.ok);
    assert_eq!(receipt.digest.len(), 64, "the body's SHA-256");

    // Outside the allow-list: refused by the broker, with a receipt; the tool reports an error.
    let outside = call(&host, "fetch", json!({"url": "http://127.0.0.1:1/other"})).await;
    assert_eq!(outside.status, Status::ToolError, "{outside:#?}");
    assert!(
        outside
            .receipts
            .iter()
            .any(|r| r.capability == Capability::Http && !r.ok)
    );

    // The argument's type is checked before any instance exists.
    let typed = call(&host, "fetch", json!({"url": 42})).await;
    assert_eq!(typed.error.as_ref().map(|e| e.stage), Some(Stage::Schema));
}

#[tokio::test(flavor = "multi_thread")]
async fn fetch_rs_is_refused_an_internal_address_the_policy_does_not_name() {
    let Some(wasm) = component("fetch-rs") else {
        return;
    };
    let port = page_server();
    let yaml = format!(
        "version: \"1.0\"\npermissions:\n  network:\n    allow:\n      - host: \"http://localhost:{port}/\"\n"
    );
    let policy = import(&yaml, &["fetch"]);
    let cache = tempfile::tempdir().unwrap();
    let host = host(wasm, &policy, &cache).await;
    let refused = call(
        &host,
        "fetch",
        json!({"url": format!("http://localhost:{port}/page")}),
    )
    .await;
    assert_eq!(refused.status, Status::ToolError, "{refused:#?}");
    let receipt = refused
        .receipts
        .iter()
        .find(|r| r.capability == Capability::Http)
        .expect("a receipt of the refusal");
    assert!(!receipt.ok);
    assert!(
        receipt.outcome.to_string().contains("loopback"),
        "{receipt:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn filesystem_rs_reads_inside_its_root_and_nothing_outside() {
    let Some(wasm) = component("filesystem-rs") else {
        return;
    };
    let base = tempfile::tempdir().unwrap();
    let root = base.path().join("root");
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::write(root.join("notes.txt"), "inside the root").unwrap();
    std::fs::write(base.path().join("secret.txt"), "outside the root").unwrap();
    let yaml = format!(
        "version: \"1.0\"\npermissions:\n  storage:\n    allow:\n      - uri: \"fs://{}\"\n        access: [\"read\"]\n",
        root.display()
    );
    let tools = [
        "list-directory",
        "read-file",
        "search-file",
        "get-file-info",
    ];
    let policy = import(&yaml, &tools);
    let cache = tempfile::tempdir().unwrap();
    let host = host(wasm, &policy, &cache).await;
    for t in tools {
        assert!(host.tool(t).is_some(), "{t}: {:#?}", host.examinations());
    }
    let root_text = root.display().to_string();
    let listed = call(&host, "list-directory", json!({"path": root_text})).await;
    let listing = text(&listed);
    assert!(
        listing.contains("notes.txt") && listing.contains("sub"),
        "{listing}"
    );
    assert!(
        listed
            .receipts
            .iter()
            .any(|r| r.capability == Capability::Workspace && r.ok)
    );
    let read = call(
        &host,
        "read-file",
        json!({"path": format!("{root_text}/notes.txt")}),
    )
    .await;
    assert_eq!(text(&read), "inside the root");
    assert!(
        listed
            .receipts
            .iter()
            .any(|r| r.operation == "wasi:filesystem read-directory" && r.ok),
        "a receipt of the listing: {listed:#?}"
    );
    // The file opened is witnessed, by the path the guest reached it by.
    let opened = read
        .receipts
        .iter()
        .find(|r| r.operation == "wasi:filesystem open")
        .expect("a receipt of the open");
    assert_eq!(opened.request["path"], format!("{root_text}/notes.txt"));
    assert_eq!(opened.request["write"], false);

    for path in [
        format!("{root_text}/../secret.txt"),
        base.path().join("secret.txt").display().to_string(),
        "/etc/passwd".to_string(),
    ] {
        let record = call(&host, "read-file", json!({"path": path})).await;
        assert_eq!(record.status, Status::ToolError, "{path}: {record:#?}");
        assert!(
            !serde_json::to_string(&record)
                .unwrap()
                .contains("outside the root")
        );
    }

    // Once `workspace` is revoked, the preopened root is refused at its next operation, with the
    // refusal on record: the same barrier as vak's own workspace broker.
    revoke(&host, "read-file", Capability::Workspace).await;
    let record = call(
        &host,
        "read-file",
        json!({"path": format!("{root_text}/notes.txt")}),
    )
    .await;
    assert_eq!(record.status, Status::ToolError, "{record:#?}");
    assert!(
        !serde_json::to_string(&record)
            .unwrap()
            .contains("inside the root"),
        "{record:#?}"
    );
    let refused = record
        .receipts
        .iter()
        .find(|r| r.capability == Capability::Workspace && !r.ok)
        .unwrap_or_else(|| panic!("a receipt of the refusal: {record:#?}"));
    assert!(
        refused.outcome.to_string().contains("revoked"),
        "{refused:#?}"
    );
    // The other tools of the component are not touched by this tool's revocation.
    let listed = call(&host, "list-directory", json!({"path": root_text})).await;
    assert!(text(&listed).contains("notes.txt"));
}

/// Revoke `capability` of `tool` on `host`.
async fn revoke(host: &Host, tool: &str, capability: Capability) {
    host.revocations()
        .revoke(
            vak_host::revocation::Revocation::Capability {
                tool: tool.into(),
                capability,
            },
            "test",
        )
        .await
        .expect("the revocation is recorded");
}

#[tokio::test(flavor = "multi_thread")]
async fn time_server_js_reads_the_real_clock_only_when_granted() {
    let Some(wasm) = component("time-server-js") else {
        return;
    };
    let tool = "time_get-current-time";
    let policy = import("version: \"1.0\"\npermissions: {}\n", &[tool]);
    let cache = tempfile::tempdir().unwrap();
    let frozen = host(wasm.clone(), &policy, &cache).await;
    let record = call(&frozen, tool, json!({})).await;
    assert!(text(&record).starts_with("1970-01-01"), "{record:#?}");
    assert!(
        !record
            .receipts
            .iter()
            .any(|r| r.capability == Capability::Clock)
    );

    let granted = format!("{policy}\ncapabilities.clock = {{ zones = [\"UTC\"] }}\n");
    let real = host(wasm, &granted, &cache).await;
    let record = call(&real, tool, json!({})).await;
    let now = text(&record);
    assert!(now.starts_with("20"), "{now}");
    let reading = record
        .receipts
        .iter()
        .find(|r| r.capability == Capability::Clock)
        .expect("a receipt of the reading");
    assert!(reading.ok);

    // Revoked, the clock reads frozen again, and the refused reading is on record.
    revoke(&real, tool, Capability::Clock).await;
    let record = call(&real, tool, json!({})).await;
    assert!(text(&record).starts_with("1970-01-01"), "{record:#?}");
    let refused = record
        .receipts
        .iter()
        .find(|r| r.capability == Capability::Clock)
        .expect("a receipt of the refused reading");
    assert!(
        !refused.ok && refused.outcome.to_string().contains("revoked"),
        "{refused:#?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn get_weather_js_reads_its_key_only_when_named_and_never_records_it() {
    let Some(wasm) = component("get-weather-js") else {
        return;
    };
    let yaml = std::fs::read_to_string(format!(
        "{}/../../shared/byo/wassette-8940e27/get-weather-js/policy.yaml",
        env!("CARGO_MANIFEST_DIR")
    ))
    .expect("the example's policy");
    let imported = import(&yaml, &["get-weather"]);
    // Without the key in the policy, the component finds it unset.
    let unnamed = edited(&imported, |t| {
        if let Some(c) = t.get_mut("capabilities").and_then(|c| c.as_table_mut()) {
            c.remove("environment");
        }
    });
    let cache = tempfile::tempdir().unwrap();
    let host_without = host(wasm.clone(), &unnamed, &cache).await;
    let record = call(&host_without, "get-weather", json!({"city": "Paris"})).await;
    assert_eq!(record.status, Status::ToolError, "{record:#?}");
    assert!(
        record
            .tool_error
            .as_ref()
            .unwrap()
            .message
            .contains("OPENWEATHER_API_KEY")
    );

    // Named (bound to a stored secret here): the component reads it and sends it to its origin;
    // whatever the network does, the value is nowhere in the record.
    let named = edited(&imported, |t| {
        let caps = t
            .get_mut("capabilities")
            .and_then(|c| c.as_table_mut())
            .unwrap();
        let env: toml::Table = "keys = { OPENWEATHER_API_KEY = { secret = \"openweather\" } }"
            .parse()
            .unwrap();
        caps.insert("environment".into(), toml::Value::Table(env));
    });
    let host_with_key = host(wasm, &named, &cache).await;
    let record = call(&host_with_key, "get-weather", json!({"city": "Paris"})).await;
    assert!(
        record
            .receipts
            .iter()
            .any(|r| r.capability == Capability::Http),
        "the request went to the broker: {record:#?}"
    );
    let text = serde_json::to_string(&record).unwrap();
    assert!(
        !text.contains("owm-key-5f2b9c0d1e"),
        "the key leaked: {text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn eval_py_evaluates_and_a_spinning_exec_is_stopped_by_fuel() {
    let Some(wasm) = component("eval-py") else {
        return;
    };
    let policy = import("version: \"1.0\"\npermissions: {}\n", &["eval", "exec"]);
    let policy = edited(&policy, |t| {
        let caps: toml::Table =
            "fuel = 3_000_000_000\nwall_time_ms = 20_000\nmemory_bytes = 268_435_456"
                .parse()
                .unwrap();
        t.insert("caps".into(), toml::Value::Table(caps));
    });
    let cache = tempfile::tempdir().unwrap();
    let host = host(wasm, &policy, &cache).await;
    assert_eq!(
        text(&call(&host, "eval", json!({"expression": "6 * 7"})).await),
        "42"
    );
    let spun = call(
        &host,
        "exec",
        json!({"statements": "while True:\n    pass"}),
    )
    .await;
    let e = spun.error.as_ref().expect("stopped");
    assert_eq!(
        (e.stage, e.kind.as_str()),
        (Stage::Dispatch, "fuel_exhausted"),
        "{spun:#?}"
    );
}

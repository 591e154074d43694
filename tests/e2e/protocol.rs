//! MCP and JSON-RPC as the specifications say, through a real `vak serve` on both transports: a
//! line or body that is not JSON is answered `-32700` with `"id": null`, a batch `-32600` with
//! `"id": null`, an unknown method `-32601` naming the method and what is served; a session's
//! DELETE succeeds as the SDKs expect; `tools/list` is in name order; `--http localhost:PORT` is
//! accepted; and a tool refused at admission is named at start and by `vak call`.

use serde_json::{Value, json};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use vak_tests::{bundled, serve_command, vak_in};

const POLICY: &str = r#"
[tools.clock]
capabilities.clock = { zones = ["*"] }
[tools.stats]
[tools.compare]
"#;

fn tools() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("stats", bundled("stats")),
        ("clock", bundled("clock")),
        ("compare", bundled("compare")),
    ]
}

async fn next_json(lines: &mut tokio::io::Lines<impl tokio::io::AsyncBufRead + Unpin>) -> Value {
    let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .expect("an answer in time")
        .expect("read stdout")
        .expect("vak serve answered");
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON-RPC ({e}): {line}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn stdio_answers_broken_lines_and_unknown_methods_as_json_rpc_says() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = serve_command(
        dir.path(),
        &tools(),
        POLICY,
        &[],
        std::process::Stdio::null(),
    )
    .spawn()
    .expect("spawn vak serve");
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();

    stdin.write_all(b"this is not JSON\n").await.unwrap();
    let a = next_json(&mut lines).await;
    assert_eq!(
        (a["error"]["code"].clone(), a["id"].clone()),
        (json!(-32700), Value::Null),
        "{a}"
    );
    assert!(
        a.as_object().unwrap().contains_key("id"),
        "`id` is there, null: {a}"
    );

    stdin
        .write_all(b"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]\n")
        .await
        .unwrap();
    let a = next_json(&mut lines).await;
    assert_eq!(
        (a["error"]["code"].clone(), a["id"].clone()),
        (json!(-32600), Value::Null),
        "{a}"
    );

    let init = json!({ "jsonrpc": "2.0", "id": 2, "method": "initialize",
        "params": { "protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": { "name": "t", "version": "0" } } });
    stdin
        .write_all(format!("{init}\n").as_bytes())
        .await
        .unwrap();
    assert_eq!(next_json(&mut lines).await["id"], 2);
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .await
        .unwrap();

    for (id, method) in [(3, "frobnicate/now"), (4, "prompts/list")] {
        let m = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": {} });
        stdin.write_all(format!("{m}\n").as_bytes()).await.unwrap();
        let a = next_json(&mut lines).await;
        assert_eq!(a["id"], id, "{a}");
        assert_eq!(a["error"]["code"], -32601, "{a}");
        let message = a["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(method) && message.contains("tools/call"),
            "the method and what is served: {message}"
        );
    }

    // In name order, on every call.
    for id in [5, 6] {
        let m = json!({ "jsonrpc": "2.0", "id": id, "method": "tools/list", "params": {} });
        stdin.write_all(format!("{m}\n").as_bytes()).await.unwrap();
        let a = next_json(&mut lines).await;
        let names: Vec<&str> = a["result"]["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["clock", "compare", "stats"], "{a}");
        for t in a["result"]["tools"].as_array().unwrap() {
            assert_ne!(t["inputSchema"]["title"], "Args", "no Rust type name: {t}");
        }
    }
    child.kill().await.ok();
}

/// One raw HTTP/1.1 request to `/mcp`; the status, the headers and the body as text.
async fn raw(
    addr: std::net::SocketAddr,
    method: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let mut request = format!(
        "{method} /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    s.write_all(request.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out).await;
    let out = String::from_utf8_lossy(&out).into_owned();
    let status = out
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, out)
}

/// The JSON-RPC message of a response: its JSON body, or the `data:` line of an SSE stream (a
/// request inside a handshake-era session is answered as a stream).
fn json_body(response: &str) -> Value {
    let body = response.split("\r\n\r\n").nth(1).unwrap_or("");
    if let Some(data) = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .find(|d| d.starts_with('{'))
    {
        return serde_json::from_str(data)
            .unwrap_or_else(|e| panic!("bad SSE data ({e}): {response}"));
    }
    serde_json::from_str(body.trim()).unwrap_or_else(|e| panic!("no JSON body ({e}): {response}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn http_answers_as_json_rpc_says_and_listens_on_localhost() {
    let dir = tempfile::tempdir().unwrap();
    // `localhost:PORT`, as people type it.
    let mut child = serve_command(
        dir.path(),
        &tools(),
        POLICY,
        &["--http", "localhost:0"],
        std::process::Stdio::piped(),
    )
    .spawn()
    .expect("spawn vak serve --http localhost:0");
    let mut err = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let addr: std::net::SocketAddr = loop {
        let line = tokio::time::timeout(Duration::from_secs(120), err.next_line())
            .await
            .expect("the address in time")
            .unwrap()
            .expect("vak serve printed its address");
        if let Some(url) = line.strip_prefix("vak: serving MCP at http://") {
            break url.trim_end_matches("/mcp").parse().expect("an address");
        }
    };
    tokio::spawn(async move { while let Ok(Some(_)) = err.next_line().await {} });
    assert!(addr.ip().is_loopback(), "{addr}");

    let (status, r) = raw(addr, "POST", &[], "{this is not json").await;
    assert_eq!(status, 400, "{r}");
    let a = json_body(&r);
    assert_eq!(
        (a["error"]["code"].clone(), a["id"].clone()),
        (json!(-32700), Value::Null),
        "{a}"
    );

    let (status, r) = raw(
        addr,
        "POST",
        &[],
        r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
    )
    .await;
    assert_eq!(status, 400, "{r}");
    let a = json_body(&r);
    assert_eq!(
        (a["error"]["code"].clone(), a["id"].clone()),
        (json!(-32600), Value::Null),
        "{a}"
    );

    // A foreign Origin is still refused first, whatever the body.
    let (status, r) = raw(addr, "POST", &[("Origin", "http://evil.example")], "{nope").await;
    assert_eq!(status, 403, "{r}");

    let init = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": { "protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": { "name": "t", "version": "0" } } });
    let (status, r) = raw(addr, "POST", &[], &init.to_string()).await;
    assert_eq!(status, 200, "{r}");
    let session = r
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("mcp-session-id")
                .then(|| v.trim().to_string())
        })
        .expect("a session id");
    let headers = [
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let note = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
    raw(addr, "POST", &headers, &note.to_string()).await;
    let unknown = json!({ "jsonrpc": "2.0", "id": 9, "method": "frobnicate/now", "params": {} });
    let (status, r) = raw(addr, "POST", &headers, &unknown.to_string()).await;
    assert_eq!(status, 200, "{r}");
    let a = json_body(&r);
    assert_eq!(a["error"]["code"], -32601, "{a}");
    let message = a["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("frobnicate/now") && message.contains("tools/list"),
        "{message}"
    );

    // Ending the session succeeds with a status the SDKs accept (200 or 204).
    let (status, r) = raw(addr, "DELETE", &headers, "").await;
    assert!(status == 200 || status == 204, "{r}");
    child.kill().await.ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_refused_at_admission_is_named_at_start_and_by_call() {
    let dir = tempfile::tempdir().unwrap();
    // `compare` is loaded but the policy does not grant it.
    let policy = "[tools.clock]\ncapabilities.clock = { zones = [\"*\"] }\n";
    let mut child = serve_command(
        dir.path(),
        &[("clock", bundled("clock")), ("compare", bundled("compare"))],
        policy,
        &[],
        std::process::Stdio::piped(),
    )
    .spawn()
    .expect("spawn vak serve");
    let mut err = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(120), err.next_line())
        .await
        .expect("a line in time")
        .unwrap()
        .expect("vak serve says what it does not serve");
    assert!(
        line.contains("not serving") && line.contains("compare"),
        "{line}"
    );
    child.kill().await.ok();

    let o = vak_in(dir.path())
        .args(["call", "compare", r#"{"a":[1],"b":[2]}"#, "--json"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "refused before dispatch: {o:?}");
    let record: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(record["error"]["kind"], "tool_not_admitted", "{record}");
    assert_eq!(record["error"]["stage"], "proposal");
    assert!(
        record["error"]["details"]["admission_kind"].is_string(),
        "the admission's own refusal: {record}"
    );
}

/// The configuration blocks of docs/mcp.md ("Configuring an MCP host"): each is JSON, and each
/// stdio server it names starts and answers `tools/list` with the bundled tools.
#[tokio::test(flavor = "multi_thread")]
async fn the_documented_host_configurations_run() {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/mcp.md"),
    )
    .expect("docs/mcp.md");
    let mut blocks = Vec::new();
    let mut rest = doc.as_str();
    while let Some(at) = rest.find("<!-- mcp-host: ") {
        rest = &rest[at..];
        let hosts = rest["<!-- mcp-host: ".len()..]
            .split_once(" -->")
            .expect("a closed marker")
            .0
            .to_string();
        let start = rest
            .find("```json\n")
            .expect("a JSON block after the marker")
            + 8;
        let end = start + rest[start..].find("```").expect("a closed block");
        let config: Value = serde_json::from_str(&rest[start..end])
            .unwrap_or_else(|e| panic!("{hosts}: not JSON: {e}"));
        blocks.push((hosts, config));
        rest = &rest[end..];
    }
    assert!(blocks.len() >= 3, "the blocks of every host: {blocks:?}");
    let mut ran = 0;
    for (hosts, config) in &blocks {
        let servers = config
            .get("mcpServers")
            .or_else(|| config.get("servers"))
            .and_then(Value::as_object)
            .unwrap_or_else(|| panic!("{hosts}: no servers"));
        for (name, server) in servers {
            if let Some(url) = server.get("url").and_then(Value::as_str) {
                assert!(
                    url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
                    "{hosts}/{name}: {url}"
                );
                continue;
            }
            assert_eq!(server["command"], "vak", "{hosts}/{name}");
            let args: Vec<&str> = server["args"]
                .as_array()
                .expect("args")
                .iter()
                .map(|a| a.as_str().expect("a string"))
                .collect();
            let dir = tempfile::tempdir().unwrap();
            let mut child = tokio::process::Command::new(vak_tests::vak_binary())
                .args(&args)
                .env("VAK_STATE_DIR", dir.path().join("state"))
                .env("VAK_CACHE_DIR", dir.path().join("cache"))
                .env_remove("VAK_STORE")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .expect("spawn the configured command");
            let mut stdin = child.stdin.take().unwrap();
            let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
            let init = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": { "protocolVersion": "2025-11-25", "capabilities": {},
                            "clientInfo": { "name": hosts, "version": "0" } } });
            let list = json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {} });
            let note = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
            for m in [&init, &note, &list] {
                stdin.write_all(format!("{m}\n").as_bytes()).await.unwrap();
            }
            let mut listed = None;
            for _ in 0..4 {
                let a = next_json(&mut lines).await;
                if a["id"] == 2 {
                    listed = Some(a);
                    break;
                }
            }
            let listed = listed.unwrap_or_else(|| panic!("{hosts}/{name}: no tools/list answer"));
            let tools = listed["result"]["tools"].as_array().expect("tools");
            assert!(
                tools.iter().any(|t| t["name"] == "clock"),
                "{hosts}/{name}: {listed}"
            );
            ran += 1;
            child.kill().await.ok();
        }
    }
    assert!(ran >= 3, "every stdio configuration ran");
}

//! `vak serve` as an MCP client meets it: both protocol eras, the tool contract (structured
//! results, `isError` for anything the model can correct, JSON-RPC errors for unknown tools),
//! progress and cancellation, one connection per session, guest output kept off the protocol
//! stream, and a `kill -9` under load that loses no acknowledged record.

use serde_json::{Value, json};
use std::time::{Duration, Instant};
use vak_host::mcp::{Catalog, VakMcp};
use vak_host::{Host, HostBuilder, Policy};
use vak_tests::mcp::{Client, stateless_meta};
use vak_tests::{bundled, guest, guests, serve_command, spawn_http};

const POLICY: &str = r#"
[session]
calls = 50

[tools.clock]
capabilities.clock = { zones = ["*"] }

[tools.stats]

[tools.hostile]
capabilities.clock = { zones = ["UTC"] }
capabilities.log = {}
caps = { fuel = 1_000_000_000_000_000, wall_time_ms = 60_000 }
"#;

async fn host(policy: &str, cache: &std::path::Path, journal: Option<&std::path::Path>) -> Host {
    let mut b = HostBuilder::new()
        .policy(Policy::parse(policy, "test policy").expect("policy"))
        .cache_dir(Some(cache.to_path_buf()))
        .component("clock", bundled("clock"))
        .component("stats", bundled("stats"))
        .component("hostile", guest(guests::HOSTILE));
    if let Some(path) = journal {
        let j = vak_host::journal::Journal::open(path, vak_host::journal::Durability::Committed)
            .expect("journal");
        b = b.journal(std::sync::Arc::new(j));
    }
    b.build().await.expect("host")
}

/// A client connected in process to a fresh connection (one session) of `host`.
async fn connect(host: &Host) -> Client {
    use rmcp::ServiceExt;
    let (client_end, server_end) = tokio::io::duplex(1 << 20);
    let handler = VakMcp::new(host, Catalog::of(host).expect("catalog"), None);
    tokio::spawn(async move {
        let (r, w) = tokio::io::split(server_end);
        if let Ok(running) = handler.serve((r, w)).await {
            let _ = running.waiting().await;
        }
    });
    let (r, w) = tokio::io::split(client_end);
    Client::new(r, w)
}

fn call(name: &str, arguments: Value) -> Value {
    json!({ "name": name, "arguments": arguments })
}

fn text_of(result: &Value) -> String {
    result["content"]
        .as_array()
        .map(|c| {
            c.iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn handshake_era_lists_tools_and_keeps_the_call_contract() {
    let cache = tempfile::tempdir().unwrap();
    let host = host(POLICY, cache.path(), None).await;
    let mut c = connect(&host).await;
    let init = c.initialize("2025-11-25").await;
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    assert_eq!(init["result"]["serverInfo"]["name"], "vak");
    assert!(init["result"]["capabilities"]["tools"].is_object());

    let list = c.request("tools/list", json!({})).await;
    let tools = list["result"]["tools"].as_array().expect("tools").clone();
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, ["clock", "hostile", "stats"]);
    let clock = &tools[0];
    assert_eq!(clock["inputSchema"]["required"], json!(["zone"]));
    assert_eq!(
        clock["outputSchema"]["type"], "object",
        "clock's payload schema is registered"
    );
    assert_eq!(clock["annotations"]["readOnlyHint"], true);
    assert_eq!(clock["annotations"]["openWorldHint"], false);
    assert!(clock["title"].is_string());
    // stats names `vak.data.summary/1`, which the host registers: its schema is promised.
    assert!(
        tools[2]["outputSchema"]["required"]
            .as_array()
            .is_some_and(|r| r.contains(&json!("mean"))),
        "{}",
        tools[2]
    );

    // Completed: the payload as structured content, the document and a JSON copy as content.
    let ok = c
        .request("tools/call", call("clock", json!({ "zone": "Asia/Tokyo" })))
        .await;
    let result = &ok["result"];
    assert_eq!(result["isError"], false, "{ok}");
    assert_eq!(result["structuredContent"]["zone"], "Asia/Tokyo");
    assert!(text_of(result).contains("Asia/Tokyo"));
    let meta = &result["_meta"];
    assert!(
        meta["dev.vak/call_id"]
            .as_str()
            .is_some_and(|id| id.starts_with("call_"))
    );
    assert_eq!(meta["dev.vak/status"], "completed");
    assert_eq!(meta["dev.vak/receipts"][0]["capability"], "clock");
    assert!(meta["dev.vak/label"].is_string());

    // A schema violation is a tool execution error the model can read: pointers, stage, retry.
    let bad = c
        .request("tools/call", call("clock", json!({ "zone": 7 })))
        .await;
    assert_eq!(bad["result"]["isError"], true, "{bad}");
    let text = text_of(&bad["result"]);
    assert!(text.contains("schema stage"), "{text}");
    assert!(text.contains("at `/zone`"), "{text}");
    assert!(text.contains("will fail the same way"), "{text}");
    assert_eq!(
        bad["result"]["_meta"]["dev.vak/error"]["kind"],
        "schema_violation"
    );

    // Missing arguments are the empty object: refused by the schema (`zone` is required).
    let none = c.request("tools/call", json!({ "name": "clock" })).await;
    assert_eq!(none["result"]["isError"], true, "{none}");

    // The tool's own error.
    let te = c
        .request(
            "tools/call",
            call("clock", json!({ "zone": "Nowhere/Land" })),
        )
        .await;
    assert_eq!(te["result"]["isError"], true);
    assert!(text_of(&te["result"]).contains("unknown-zone"), "{te}");

    // An unknown tool is a protocol error.
    let unknown = c.request("tools/call", call("nope", json!({}))).await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    assert!(
        unknown["error"]["data"]["call_id"].is_string(),
        "the refusal has a record"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_2026_07_28_revision_needs_no_handshake() {
    let cache = tempfile::tempdir().unwrap();
    let host = host(POLICY, cache.path(), None).await;
    let mut c = connect(&host).await;
    let list = c
        .request("tools/list", json!({ "_meta": stateless_meta() }))
        .await;
    assert_eq!(
        list["result"]["tools"].as_array().map(Vec::len),
        Some(3),
        "{list}"
    );
    let mut params = call("stats", json!({ "values": [1, 2, 3, 4] }));
    params["_meta"] = stateless_meta();
    let r = c.request("tools/call", params).await;
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    assert!(r["result"]["structuredContent"].is_object());
}

#[tokio::test(flavor = "multi_thread")]
async fn one_connection_is_one_budget_session() {
    let cache = tempfile::tempdir().unwrap();
    let policy = POLICY.replace("calls = 50", "calls = 2");
    let host = host(&policy, cache.path(), None).await;
    let mut first = connect(&host).await;
    first.initialize("2025-11-25").await;
    for _ in 0..2 {
        let r = first
            .request("tools/call", call("stats", json!({ "values": [1] })))
            .await;
        assert_eq!(r["result"]["isError"], false, "{r}");
    }
    let over = first
        .request("tools/call", call("stats", json!({ "values": [1] })))
        .await;
    assert_eq!(over["result"]["isError"], true);
    assert_eq!(over["result"]["_meta"]["dev.vak/stage"], "budget", "{over}");

    let mut second = connect(&host).await;
    second.initialize("2025-11-25").await;
    let fresh = second
        .request("tools/call", call("stats", json!({ "values": [1] })))
        .await;
    assert_eq!(
        fresh["result"]["isError"], false,
        "a new connection has its own budget"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn progress_while_running_and_cancellation_stops_the_guest() {
    let cache = tempfile::tempdir().unwrap();
    let journal = cache.path().join("journal.sqlite");
    let host = host(POLICY, cache.path(), Some(&journal)).await;
    let mut c = connect(&host).await;
    c.initialize("2025-11-25").await;
    let mut params = call("hostile", json!({ "mode": "spin" }));
    params["_meta"] = json!({ "progressToken": "spin-1" });
    let id = c.start("tools/call", params).await;
    // Progress arrives while the guest spins.
    let mut progress = Vec::new();
    while progress.len() < 2 {
        let m = c.next(Duration::from_secs(10)).await.expect("progress");
        if m["method"] == "notifications/progress" {
            assert_eq!(m["params"]["progressToken"], "spin-1");
            progress.push(m["params"]["progress"].as_f64().unwrap_or(-1.0));
        }
    }
    assert!(
        progress[1] > progress[0],
        "progress increases: {progress:?}"
    );

    let cancelled_at = Instant::now();
    c.send(&json!({
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": { "requestId": id, "reason": "the user moved on" },
    }))
    .await;
    // The guest stops at once and its record says so (the spin would run for 60 s).
    let j = vak_host::journal::Journal::open(&journal, vak_host::journal::Durability::Committed)
        .unwrap();
    let record = loop {
        let rows = j
            .list(&vak_host::journal::Filter {
                tool: Some("hostile".into()),
                ..Default::default()
            })
            .unwrap();
        // Its `started` entry shows it running until its record is in.
        if let Some(row) = rows.first().filter(|r| r.status != "running") {
            let shown = j.show(&row.call_id).unwrap().pop().expect("shown");
            break serde_json::from_str::<Value>(&shown.text).unwrap();
        }
        assert!(
            cancelled_at.elapsed() < Duration::from_secs(5),
            "the cancelled call left no record within 5 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(record["error"]["kind"], "cancelled", "{record}");
    assert_eq!(record["stage"], "dispatch");
    assert_eq!(record["error"]["retryable"], true);
    // The connection goes on serving.
    let r = c
        .request("tools/call", call("stats", json!({ "values": [2] })))
        .await;
    assert_eq!(r["result"]["isError"], false, "{r}");
}

/// `vak serve` on stdio with the hostile guest and the bundled `stats`.
fn spawn_serve(dir: &std::path::Path) -> tokio::process::Child {
    serve_command(
        dir,
        &[
            ("hostile", guest(guests::HOSTILE)),
            ("stats", bundled("stats")),
        ],
        &POLICY.replace("calls = 50", "calls = 100000"),
        &[],
        std::process::Stdio::null(),
    )
    .spawn()
    .expect("spawn vak serve")
}

fn client_of(child: &mut tokio::process::Child) -> Client {
    let stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");
    Client::new(stdout, stdin)
}

#[tokio::test(flavor = "multi_thread")]
async fn guest_stdout_never_reaches_the_protocol_stream() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = spawn_serve(dir.path());
    let mut c = client_of(&mut child);
    c.initialize("2025-11-25").await;
    let r = c
        .request(
            "tools/call",
            call("hostile", json!({ "mode": "flood", "n": 5000 })),
        )
        .await;
    assert_eq!(r["result"]["isError"], false, "{r}");
    let ok = c
        .request("tools/call", call("stats", json!({ "values": [1, 2] })))
        .await;
    assert_eq!(ok["result"]["isError"], false);
    assert!(
        c.other.iter().all(|m| m.get("not_json").is_none()),
        "guest output on the protocol stream: {:?}",
        c.other.iter().find(|m| m.get("not_json").is_some())
    );
    child.kill().await.ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_under_load_loses_no_acknowledged_record() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = spawn_serve(dir.path());
    let mut c = client_of(&mut child);
    c.initialize("2025-11-25").await;
    // 400 calls in flight at once; kill the server once 100 are answered.
    let mut ids = Vec::new();
    for i in 0..400 {
        ids.push(
            c.start("tools/call", call("stats", json!({ "values": [i, 1, 2] })))
                .await,
        );
    }
    let mut acknowledged = Vec::new();
    while acknowledged.len() < 100 {
        let m = c.next(Duration::from_secs(60)).await.expect("responses");
        if let Some(id) = m["result"]["_meta"]["dev.vak/call_id"].as_str() {
            acknowledged.push(id.to_string());
        }
    }
    child.start_kill().expect("kill -9");
    child.wait().await.ok();
    // Responses already in the pipe were acknowledged too.
    while let Some(m) = c.next(Duration::from_millis(200)).await {
        if let Some(id) = m["result"]["_meta"]["dev.vak/call_id"].as_str() {
            acknowledged.push(id.to_string());
        }
    }
    let j = vak_host::journal::Journal::open(
        &dir.path().join("state/journal.sqlite"),
        vak_host::journal::Durability::Committed,
    )
    .expect("journal reopens after the crash");
    let v = j.verify(None).expect("verify");
    assert_eq!(v.first_bad, None, "the chain verifies after kill -9");
    // Entries the killed server's indexer had not signed yet are reported, and only at the end
    // of its chain (the milliseconds before the kill): every other entry checked out.
    for u in &v.unsigned {
        let head = v
            .heads
            .iter()
            .find(|h| h.node == u.chain)
            .expect("its chain");
        assert_eq!(u.to, head.seq, "an unsigned run before the crash: {v:?}");
    }
    eprintln!(
        "after kill -9: {} entries, {} of them unsigned at the end",
        v.entries,
        v.unsigned_entries()
    );
    for id in &acknowledged {
        let shown = j.show(id).unwrap();
        assert!(
            shown.len() == 1 && shown[0].kind == vak_host::journal::Kind::Record,
            "acknowledged call {id} has no record in the journal: {shown:?}"
        );
    }
    assert!(v.entries as usize >= acknowledged.len());
}

/// A `vak call` on the state directory of a running `vak serve` is journaled at once, in a
/// chain of its own, while the server keeps its own chain: two chains, every call's `started`
/// entry and record, which verify.
#[tokio::test(flavor = "multi_thread")]
async fn vak_call_beside_a_serve_is_journaled_in_its_own_chain() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = spawn_serve(dir.path());
    let mut c = client_of(&mut child);
    c.initialize("2025-11-25").await;
    let r = c
        .request("tools/call", call("stats", json!({ "values": [1, 2] })))
        .await;
    assert_eq!(r["result"]["isError"], false, "{r}");
    let started = Instant::now();
    let out = vak_tests::vak_in(dir.path())
        .args(["call", "stats", r#"{"values":[3,4]}"#])
        .output()
        .expect("run vak");
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{printed}");
    assert!(!printed.contains("NOT JOURNALED"), "{printed}");
    assert!(printed.contains("journal chain"), "{printed}");
    eprintln!("vak call beside a serve took {:?}", started.elapsed());
    let r = c
        .request("tools/call", call("stats", json!({ "values": [5] })))
        .await;
    assert_eq!(r["result"]["isError"], false, "{r}");
    child.kill().await.ok();
    child.wait().await.ok();
    let j = vak_host::journal::Journal::open(
        &dir.path().join("state/journal.sqlite"),
        vak_host::journal::Durability::Committed,
    )
    .expect("journal");
    let v = j.verify(None).expect("verify");
    assert_eq!(
        (v.records, v.started, v.first_bad.clone()),
        (3, 3, None),
        "{v:?}"
    );
    assert_eq!(v.heads.len(), 2, "the server's chain and the call's: {v:?}");
}

/// `vak serve --http 127.0.0.1:0` with `stats`, and the address it listens on.
async fn http_server(dir: &std::path::Path) -> (tokio::process::Child, std::net::SocketAddr) {
    let cmd = serve_command(
        dir,
        &[("stats", bundled("stats"))],
        POLICY,
        &[],
        std::process::Stdio::null(),
    );
    let (child, url) = spawn_http(cmd).await;
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .parse()
        .expect("an address");
    (child, addr)
}

/// One HTTP/1.1 POST of `body` to `/mcp` with `headers`; the status and the body.
async fn post(addr: std::net::SocketAddr, headers: &[(&str, &str)], body: &Value) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let body = body.to_string();
    let mut request = format!(
        "POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        request.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(&body);
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    s.write_all(request.as_bytes()).await.unwrap();
    // The server may answer (403) and close before reading the body: keep what arrived.
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw).await;
    let out = String::from_utf8_lossy(&raw).into_owned();
    let status = out
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, out)
}

#[tokio::test(flavor = "multi_thread")]
async fn http_checks_host_and_origin_and_serves_both_eras() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, addr) = http_server(dir.path()).await;
    let init = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": { "protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": { "name": "t", "version": "0" } },
    });
    let (status, body) = post(addr, &[], &init).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("mcp-session-id") || body.contains("Mcp-Session-Id"),
        "{body}"
    );

    // DNS rebinding: a foreign Host or Origin is refused before any MCP handling.
    let (status, body) = post(addr, &[("Host", "evil.example:80")], &init).await;
    assert_eq!(status, 403, "{body}");
    let (status, body) = post(addr, &[("Origin", "http://evil.example")], &init).await;
    assert_eq!(status, 403, "{body}");
    let own = format!("http://127.0.0.1:{}", addr.port());
    let (status, _) = post(addr, &[("Origin", own.as_str())], &init).await;
    assert_eq!(status, 200, "the server's own loopback origin is allowed");

    // 2026-07-28: a stateless tools/call, no session.
    let mut params = call("stats", json!({ "values": [3, 4] }));
    params["_meta"] = stateless_meta();
    let (status, body) = post(
        addr,
        &[
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "stats"),
        ],
        &json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params }),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"isError\":false"), "{body}");
    child.kill().await.ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn http_server_keeps_answering_when_its_stderr_is_closed() {
    use tokio::io::AsyncBufReadExt;
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = serve_command(
        dir.path(),
        &[("stats", bundled("stats"))],
        POLICY,
        &["--http", "127.0.0.1:0"],
        std::process::Stdio::piped(),
    );
    let mut child = cmd.spawn().expect("spawn");
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let line = lines.next_line().await.unwrap().expect("the address line");
    let addr: std::net::SocketAddr = line
        .trim_start_matches("vak: serving MCP at http://")
        .trim_end_matches("/mcp")
        .parse()
        .expect("an address");
    drop(lines); // The operator's terminal went away.
    let init = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": { "protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": { "name": "t", "version": "0" } } });
    // A refused Host is logged as a warning: the log line is lost, the answer is not.
    let (status, body) = post(addr, &[("Host", "evil.example:80")], &init).await;
    assert_eq!(status, 403, "{body}");
    let (status, body) = post(addr, &[], &init).await;
    assert_eq!(status, 200, "{body}");
    child.kill().await.ok();
}

//! A tool marked `ask = true`, called by a stateless (2026-07-28) client: the approval is an
//! input-required elicitation showing the call it approves (tool, principal, arguments), and the
//! answer the next round brings approves or denies exactly that call, before anything of the
//! tool runs. An answer sent ahead of the question is not taken.

use super::{call_id, record};
use serde_json::{Value, json};
use vak_tests::http_mcp::HttpMcp;
use vak_tests::{guest, guests, serve_command, spawn_http};

const TOOL: &str = "test_simple_text";

async fn call(mcp: &mut HttpMcp, responses: Option<Value>, state: Option<&str>) -> Value {
    let mut params = json!({
        "name": TOOL,
        "arguments": {},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": { "elicitation": {} },
        },
    });
    if let Some(r) = responses {
        params["inputResponses"] = r;
    }
    if let Some(s) = state {
        params["requestState"] = json!(s);
    }
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params });
    let headers = [
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", TOOL),
    ];
    let (status, body) = mcp.post(&body, &headers).await.expect("an HTTP response");
    assert_eq!(status, 200, "{body}");
    body
}

/// The approval question of an input-required result, and the state.
fn approval_asked(body: &Value) -> (Value, String) {
    assert_eq!(body["result"]["resultType"], "input_required", "{body}");
    let requests = body["result"]["inputRequests"]
        .as_object()
        .expect("inputRequests");
    assert_eq!(requests.len(), 1, "{body}");
    let request = requests
        .get("approval-1")
        .unwrap_or_else(|| panic!("approval-1: {body}"));
    assert_eq!(request["method"], "elicitation/create");
    let state = body["result"]["requestState"].as_str().expect("a state");
    (request["params"].clone(), state.to_string())
}

fn answer(approve: bool) -> Value {
    json!({ "approval-1": { "action": "accept", "content": { "approve": approve } } })
}

#[tokio::test(flavor = "multi_thread")]
async fn an_ask_tool_is_approved_or_denied_over_an_input_required_round() {
    let dir = tempfile::tempdir().unwrap();
    let policy = format!("[tools.{TOOL}]\nask = true\n");
    let tools = [("simple", guest(guests::CONF_SIMPLE_TEXT))];
    let cmd = serve_command(
        dir.path(),
        &tools,
        &policy,
        &[],
        std::process::Stdio::null(),
    );
    let (mut child, url) = spawn_http(cmd).await;
    let mut mcp = HttpMcp::new(&url);

    // Round 1: the question shows the call it approves; nothing of the tool ran.
    let first = call(&mut mcp, None, None).await;
    let (params, state) = approval_asked(&first);
    let message = params["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!("tool `{TOOL}` asks for approval"))
            && message.contains("principal:")
            && message.contains("arguments (2 bytes, SHA-256"),
        "{message}"
    );
    assert_eq!(params["requestedSchema"]["required"], json!(["approve"]));
    let r1 = record(dir.path(), &call_id(&first));
    assert_eq!(r1["approvals"][0]["decision"], "input_required", "{r1}");
    assert!(r1["receipts"].as_array().is_none_or(Vec::is_empty), "{r1}");

    // Round 2 approves that call: it runs, on record as approved by the stateless client.
    let second = call(&mut mcp, Some(answer(true)), Some(&state)).await;
    assert_eq!(second["result"]["isError"], false, "{second}");
    assert_ne!(second["result"]["resultType"], "input_required", "{second}");
    let r2 = record(dir.path(), &call_id(&second));
    assert_eq!(r2["status"], "completed", "{r2}");
    assert_eq!(r2["round"]["previous_call_id"], call_id(&first));
    assert_eq!(r2["approvals"][0]["decision"], "approved", "{r2}");
    let by = r2["approvals"][0]["by"].as_str().unwrap_or_default();
    assert!(by.contains("stateless MCP client"), "{r2}");
    // `vak audit show` of round 2 shows both rounds and the approval each ended with.
    let out = vak_tests::vak_in(dir.path())
        .args(["audit", "show", &call_id(&second)])
        .output()
        .expect("vak audit show");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("approval: input_required")
            && err.contains("approval: approved by the stateless MCP client")
            && err.contains(&format!("(after {})", call_id(&first))),
        "{err}"
    );

    // A denial ends the call at permission: the tool never runs.
    let (_, state) = approval_asked(&call(&mut mcp, None, None).await);
    let denied = call(&mut mcp, Some(answer(false)), Some(&state)).await;
    assert_eq!(denied["result"]["isError"], true, "{denied}");
    let r3 = record(dir.path(), &call_id(&denied));
    assert_eq!(r3["approvals"][0]["decision"], "denied", "{r3}");

    // An approval sent ahead of the question, without a state, is not taken.
    let ahead = call(&mut mcp, Some(answer(true)), None).await;
    approval_asked(&ahead);
    child.kill().await.ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_ask_tool_that_writes_is_approved_in_a_round_and_runs_once() {
    let dir = tempfile::tempdir().unwrap();
    let (project, docs) = (dir.path().join("project"), dir.path().join("docs"));
    std::fs::create_dir_all(&project).unwrap();
    std::fs::create_dir_all(&docs).unwrap();
    let policy = format!(
        "[tools.files]\nask = true\ncapabilities.workspace = {{ roots = [\n  \
         {{ name = \"project\", path = \"{}\", mode = \"read-write\" }},\n  \
         {{ name = \"docs\", path = \"{}\" }},\n] }}\n",
        project.display(),
        docs.display()
    );
    let cmd = serve_command(
        dir.path(),
        &[("files", guest(guests::FILES))],
        &policy,
        &[],
        std::process::Stdio::null(),
    );
    let (mut child, url) = spawn_http(cmd).await;
    let mut mcp = HttpMcp::new(&url);
    let args = json!({ "op": "write", "root": "project", "path": "out.txt", "content": "once" });
    let request = |responses: Option<Value>, state: Option<&str>| {
        let mut params = json!({
            "name": "files",
            "arguments": args,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": { "elicitation": {} },
            },
        });
        if let Some(r) = responses {
            params["inputResponses"] = r;
        }
        if let Some(s) = state {
            params["requestState"] = json!(s);
        }
        json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params })
    };
    let headers = [
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "files"),
    ];
    let out = project.join("out.txt");

    // Round 1 asks; nothing is written.
    let (_, first) = mcp.post(&request(None, None), &headers).await.unwrap();
    let (_, state) = approval_asked(&first);
    assert!(!out.exists(), "nothing ran before the approval");

    // Round 2 approves: the write runs, once.
    let (_, second) = mcp
        .post(&request(Some(answer(true)), Some(&state)), &headers)
        .await
        .unwrap();
    assert_eq!(second["result"]["isError"], false, "{second}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "once");
    let r2 = record(dir.path(), &call_id(&second));
    assert_eq!(r2["approvals"][0]["decision"], "approved", "{r2}");
    assert_eq!(r2["round"]["round"], 2, "{r2}");

    // The same answered state again: refused as replayed, and the write is not repeated.
    std::fs::remove_file(&out).unwrap();
    let (_, again) = mcp
        .post(&request(Some(answer(true)), Some(&state)), &headers)
        .await
        .unwrap();
    assert_eq!(again["error"]["data"]["kind"], "state_replayed", "{again}");
    assert!(!out.exists(), "the approved write ran once");
    let refused = record(
        dir.path(),
        again["error"]["data"]["call_id"].as_str().unwrap(),
    );
    assert_eq!(refused["error"]["kind"], "state_replayed", "{refused}");
    child.kill().await.ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_root_that_asks_during_a_writing_call_is_not_put_in_a_round() {
    let dir = tempfile::tempdir().unwrap();
    let (project, docs) = (dir.path().join("project"), dir.path().join("docs"));
    std::fs::create_dir_all(&project).unwrap();
    std::fs::create_dir_all(&docs).unwrap();
    let policy = format!(
        "[tools.files]\ncapabilities.workspace = {{ roots = [\n  {{ name = \"project\", path = \
         \"{}\", mode = \"read-write\", ask = true }},\n  {{ name = \"docs\", path = \"{}\" }},\n] }}\n",
        project.display(),
        docs.display()
    );
    let cmd = serve_command(
        dir.path(),
        &[("files", guest(guests::FILES))],
        &policy,
        &[],
        std::process::Stdio::null(),
    );
    let (mut child, url) = spawn_http(cmd).await;
    let mut mcp = HttpMcp::new(&url);
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "files",
        "arguments": { "op": "write", "root": "project", "path": "out.txt", "content": "x" },
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": { "elicitation": {} },
        },
    }});
    let headers = [
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "files"),
    ];
    let (_, answered) = mcp.post(&body, &headers).await.unwrap();
    // Asked mid-call, a new round would re-run what the tool did before: refused, not a round.
    assert_ne!(
        answered["result"]["resultType"], "input_required",
        "{answered}"
    );
    assert_eq!(answered["result"]["isError"], true, "{answered}");
    assert!(
        answered.to_string().contains("during the call"),
        "{answered}"
    );
    assert!(!project.join("out.txt").exists());
    child.kill().await.ok();
}

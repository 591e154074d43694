//! MCP 2026-07-28 input-required rounds over `vak serve --http`: a stateless client answers a
//! tool's form and completion requests across rounds (the tool runs again from the start each
//! round, answered from what the client sent); each round is a record linked to the one before;
//! a tampered state, or a state sent back with other arguments, is refused with a JSON-RPC error
//! and a record; a tool whose grant could change something is not run again.

#[path = "mcp_rounds/approvals.rs"]
mod approvals;
#[path = "mcp_rounds/asked_together.rs"]
mod asked_together;
#[path = "mcp_rounds/single_use.rs"]
mod single_use;

use serde_json::{Value, json};
use vak_tests::http_mcp::HttpMcp;
use vak_tests::{guest, guests, serve_command, spawn_http, vak_in};

const POLICY: &str = r#"
[tools.test_sampling]
capabilities.client = { requests = ["sampling"] }
[tools.test_elicitation]
capabilities.client = { requests = ["elicitation"] }
"#;

/// `vak serve --http` in `dir` with the conformance sampling and elicitation tools.
async fn server(dir: &std::path::Path, policy: &str) -> (tokio::process::Child, HttpMcp) {
    let cmd = serve_command(
        dir,
        &[
            ("sampling", guest(guests::CONF_SAMPLING)),
            ("elicitation", guest(guests::CONF_ELICITATION)),
        ],
        policy,
        &[],
        std::process::Stdio::null(),
    );
    let (child, url) = spawn_http(cmd).await;
    (child, HttpMcp::new(&url))
}

/// A stateless `tools/call` from a client that answers forms and completions; `retry` is the
/// answers and the `requestState` of the round before.
async fn call(
    mcp: &mut HttpMcp,
    tool: &str,
    arguments: Value,
    retry: Option<(Value, &str)>,
) -> Value {
    let mut params = json!({
        "name": tool,
        "arguments": arguments,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": { "name": "vak-tests", "version": "0" },
            "io.modelcontextprotocol/clientCapabilities": { "elicitation": {}, "sampling": {} },
        },
    });
    if let Some((responses, state)) = retry {
        params["inputResponses"] = responses;
        params["requestState"] = json!(state);
    }
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params });
    let (status, body) = mcp
        .post(
            &body,
            &[
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", tool),
            ],
        )
        .await
        .expect("an HTTP response");
    assert_eq!(status, 200, "{body}");
    body
}

/// The record of `call_id`, as `vak audit show` prints it (the server's indexer inserts an entry
/// within its index delay of the answer: waited for, past the call's `started` entry).
fn record(dir: &std::path::Path, call_id: &str) -> Value {
    let mut tries = 0;
    loop {
        let out = vak_in(dir)
            .args(["audit", "show", call_id])
            .output()
            .expect("vak audit show");
        let err = String::from_utf8_lossy(&out.stderr);
        tries += 1;
        if out.status.success() {
            let shown: Value = serde_json::from_slice(&out.stdout).expect("the record, as JSON");
            // The call's `started` entry, its record not yet indexed: wait for the record.
            if shown["entry"] != "started" || tries >= 50 {
                return shown;
            }
        } else {
            assert!(err.contains("no record") && tries < 50, "{err}");
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// The input-required result of `body`: the one question's key and request, and the state.
fn asked(body: &Value) -> (String, Value, String) {
    let result = &body["result"];
    assert_eq!(result["resultType"], "input_required", "{body}");
    let requests = result["inputRequests"].as_object().expect("inputRequests");
    assert_eq!(requests.len(), 1, "one question a round: {body}");
    let (key, request) = requests.iter().next().expect("a request");
    let state = result["requestState"].as_str().expect("a requestState");
    (key.clone(), request.clone(), state.to_string())
}

fn call_id(body: &Value) -> String {
    body["result"]["_meta"]["dev.vak/call_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no call id: {body}"))
        .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn elicitation_and_sampling_tools_complete_over_input_required_rounds() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, mut mcp) = server(dir.path(), POLICY).await;

    // Elicitation: round 1 asks, round 2 (the tool run again) completes with the answer.
    let args = json!({ "message": "Who are you?" });
    let first = call(&mut mcp, "test_elicitation", args.clone(), None).await;
    let (key, request, state) = asked(&first);
    assert_eq!(key, "elicitation-1");
    assert_eq!(request["method"], "elicitation/create", "{request}");
    assert_eq!(request["params"]["message"], "Who are you?");
    assert_eq!(request["params"]["mode"], "form");
    assert!(
        request["params"]["requestedSchema"]["properties"]["username"].is_object(),
        "{request}"
    );
    let answer = json!({ key.as_str(): { "action": "accept",
        "content": { "username": "ada", "email": "ada@example.org" } } });
    let second = call(&mut mcp, "test_elicitation", args, Some((answer, &state))).await;
    let result = &second["result"];
    assert_eq!(result["isError"], false, "{second}");
    assert_ne!(result["resultType"], "input_required", "{second}");
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("action: accept") && text.contains("ada@example.org"),
        "{second}"
    );

    // Each round is a record: the first stopped for the question, the second linked to it.
    let (round1, round2) = (call_id(&first), call_id(&second));
    let r1 = record(dir.path(), &round1);
    assert_eq!(r1["error"]["kind"], "input_required", "{r1}");
    assert_eq!(r1["error"]["details"]["asked"], "elicitation-1", "{r1}");
    assert_eq!(r1["round"], json!({ "round": 1, "previous_call_id": null }));
    let r2 = record(dir.path(), &round2);
    assert_eq!(r2["status"], "completed", "{r2}");
    assert_eq!(
        r2["round"],
        json!({ "round": 2, "previous_call_id": round1 })
    );
    let receipt = r2["receipts"]
        .as_array()
        .and_then(|all| all.iter().find(|r| r["operation"] == "elicit"))
        .unwrap_or_else(|| panic!("the answer has a receipt: {r2}"));
    assert_eq!(
        receipt["outcome"]["content"]["username"], "ada",
        "{receipt}"
    );

    // Sampling: the same, with a completion for an answer.
    let args = json!({ "prompt": "Capital of France?" });
    let first = call(&mut mcp, "test_sampling", args.clone(), None).await;
    let (key, request, state) = asked(&first);
    assert_eq!(key, "sampling-1");
    assert_eq!(request["method"], "sampling/createMessage", "{request}");
    assert_eq!(
        request["params"]["messages"][0]["content"]["text"],
        "Capital of France?"
    );
    let answer = json!({ key.as_str(): { "role": "assistant",
        "content": { "type": "text", "text": "Paris" }, "model": "m-1", "stopReason": "endTurn" } });
    let second = call(&mut mcp, "test_sampling", args, Some((answer, &state))).await;
    assert_eq!(second["result"]["isError"], false, "{second}");
    assert_eq!(
        second["result"]["content"][0]["text"], "LLM response: Paris",
        "{second}"
    );
    child.kill().await.ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tampered_or_rebound_request_state_is_refused_and_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, mut mcp) = server(dir.path(), POLICY).await;
    let args = json!({ "message": "Who are you?" });
    let first = call(&mut mcp, "test_elicitation", args.clone(), None).await;
    let (key, _, state) = asked(&first);
    let answer = json!({ key.as_str(): { "action": "accept",
        "content": { "username": "ada", "email": "ada@example.org" } } });

    // One character of the sealed state changed.
    let mut tampered: Vec<char> = state.chars().collect();
    let at = tampered.len() / 2;
    tampered[at] = if tampered[at] == 'A' { 'B' } else { 'A' };
    let tampered: String = tampered.into_iter().collect();
    let refused = call(
        &mut mcp,
        "test_elicitation",
        args.clone(),
        Some((answer.clone(), &tampered)),
    )
    .await;
    let error = &refused["error"];
    assert_eq!(error["code"], -32602, "{refused}");
    assert_eq!(error["data"]["kind"], "request_state_refused", "{refused}");
    assert_eq!(error["data"]["journaled"], true, "{refused}");
    let r = record(dir.path(), error["data"]["call_id"].as_str().unwrap());
    assert_eq!(r["status"], "refused", "{r}");
    assert_eq!(r["error"]["kind"], "request_state_refused", "{r}");
    assert!(
        r["receipts"].as_array().is_some_and(Vec::is_empty),
        "the tool never ran: {r}"
    );

    // The genuine state, sent back with other arguments.
    let other = json!({ "message": "Something else?" });
    let refused = call(
        &mut mcp,
        "test_elicitation",
        other,
        Some((answer.clone(), &state)),
    )
    .await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("arguments"), "{refused}");
    let r = record(
        dir.path(),
        refused["error"]["data"]["call_id"].as_str().unwrap(),
    );
    assert_eq!(r["error"]["kind"], "request_state_refused", "{r}");

    // The genuine state for another tool.
    let refused = call(
        &mut mcp,
        "test_sampling",
        json!({ "prompt": "Who are you?" }),
        Some((answer.clone(), &state)),
    )
    .await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");

    // The genuine state without the answer: the question is asked again, in a round of its own.
    let again = call(
        &mut mcp,
        "test_elicitation",
        args.clone(),
        Some((json!({ "wrong-key": {} }), &state)),
    )
    .await;
    let (key_again, _, state_again) = asked(&again);
    assert_eq!(key_again, key);
    let done = call(
        &mut mcp,
        "test_elicitation",
        args,
        Some((answer, &state_again)),
    )
    .await;
    assert_eq!(done["result"]["isError"], false, "{done}");
    let r = record(dir.path(), &call_id(&done));
    assert_eq!(r["round"]["round"], 3, "{r}");
    child.kill().await.ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_that_could_write_is_not_run_again_for_a_round() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    let policy = format!(
        "{POLICY}capabilities.workspace = {{ roots = [{{ name = \"w\", path = \"{}\", mode = \"read-write\" }}] }}\n",
        root.display()
    );
    let (mut child, mut mcp) = server(dir.path(), &policy).await;
    let body = call(
        &mut mcp,
        "test_elicitation",
        json!({ "message": "Who are you?" }),
        None,
    )
    .await;
    // No round: the tool's request is refused, and the tool says so in its result.
    let result = &body["result"];
    assert_ne!(result["resultType"], "input_required", "{body}");
    assert_eq!(result["isError"], true, "{body}");
    let text = body.to_string();
    assert!(
        text.contains("may change things outside the call") && text.contains("handshake"),
        "{body}"
    );
    let r = record(dir.path(), &call_id(&body));
    assert!(r["round"].is_null(), "not a round of anything: {r}");
    assert!(
        r["session_id"]
            .as_str()
            .is_some_and(|s| s.starts_with("session_")),
        "charged as any stateless call: {r}"
    );
    child.kill().await.ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_headerless_stdio_client_gets_the_same_rounds() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = serve_command(
        dir.path(),
        &[("elicitation", guest(guests::CONF_ELICITATION))],
        POLICY,
        &[],
        std::process::Stdio::null(),
    )
    .spawn()
    .expect("spawn vak serve");
    let (stdin, stdout) = (child.stdin.take().unwrap(), child.stdout.take().unwrap());
    let mut client = vak_tests::mcp::Client::new(stdout, stdin);
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": { "name": "vak-tests", "version": "0" },
        "io.modelcontextprotocol/clientCapabilities": { "elicitation": {} },
    });
    let args = json!({ "message": "Who are you?" });
    let first = client
        .request(
            "tools/call",
            json!({ "name": "test_elicitation", "arguments": args, "_meta": meta }),
        )
        .await;
    let (key, _, state) = asked(&first);
    let second = client
        .request(
            "tools/call",
            json!({ "name": "test_elicitation", "arguments": args, "_meta": meta,
                "inputResponses": { key.as_str(): { "action": "decline" } },
                "requestState": state }),
        )
        .await;
    let text = second["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("action: decline"), "{second}");
    child.kill().await.ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn two_questions_take_two_rounds_and_the_first_answer_is_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let cmd = serve_command(
        dir.path(),
        &[("multi", guest(guests::CONF_IR_MULTI_ROUND))],
        "[tools.test_input_required_result_multi_round]\ncapabilities.client = { requests = [\"elicitation\"] }\n",
        &[],
        std::process::Stdio::null(),
    );
    let (mut child, url) = spawn_http(cmd).await;
    let mut mcp = HttpMcp::new(&url);
    let tool = "test_input_required_result_multi_round";
    let first = call(&mut mcp, tool, json!({}), None).await;
    let (key1, request1, state1) = asked(&first);
    assert_eq!(key1, "elicitation-1");
    assert_eq!(request1["params"]["message"], "Step 1: What is your name?");
    let second = call(
        &mut mcp,
        tool,
        json!({}),
        Some((
            json!({ key1.as_str(): { "action": "accept", "content": { "name": "Alice" } } }),
            &state1,
        )),
    )
    .await;
    // The tool ran again: its first question was answered from the state, the second is asked.
    let (key2, request2, state2) = asked(&second);
    assert_eq!(key2, "elicitation-2");
    assert_eq!(
        request2["params"]["message"],
        "Step 2: What is your favorite color?"
    );
    assert_ne!(state2, state1);
    // Round 3 brings only the second answer; the first comes from the state.
    let third = call(
        &mut mcp,
        tool,
        json!({}),
        Some((
            json!({ key2.as_str(): { "action": "accept", "content": { "color": "blue" } } }),
            &state2,
        )),
    )
    .await;
    let text = third["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("Alice") && text.contains("blue"), "{third}");
    let r3 = record(dir.path(), &call_id(&third));
    assert_eq!(r3["round"]["round"], 3, "{r3}");
    assert_eq!(r3["round"]["previous_call_id"], json!(call_id(&second)));
    let answered = r3["receipts"].as_array().map(|all| {
        all.iter()
            .filter(|r| r["operation"] == "elicit" && r["ok"] == true)
            .count()
    });
    assert_eq!(
        answered,
        Some(2),
        "both answers have receipts in the last round: {r3}"
    );
    // `vak audit show` of the last round lists every round, each from its own checked entry.
    let out = vak_in(dir.path())
        .args(["audit", "show", &call_id(&third)])
        .output()
        .expect("vak audit show");
    let err = String::from_utf8_lossy(&out.stderr);
    println!("{err}");
    for (n, body) in [(1, &first), (2, &second), (3, &third)] {
        let line = err
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("round {n} ")))
            .unwrap_or_else(|| panic!("no round {n}: {err}"));
        assert!(line.contains(&call_id(body)), "{err}");
    }
    assert!(
        err.contains("failed (input_required), asked elicitation-1, 0 answers")
            && err.contains("asked elicitation-2, 1 answer from")
            && err.contains("completed, 2 answers"),
        "{err}"
    );
    // Each round names the one before it, and shows the questions it answered and the answers.
    let lines: Vec<&str> = err.lines().collect();
    let at = |n: usize| {
        lines
            .iter()
            .position(|l| l.trim_start().starts_with(&format!("round {n} ")))
            .unwrap_or_else(|| panic!("no round {n}: {err}"))
    };
    assert!(
        lines[at(2)].contains(&format!("(after {})", call_id(&first))),
        "{err}"
    );
    assert!(
        lines[at(3)].contains(&format!("(after {})", call_id(&second))),
        "{err}"
    );
    let round3 = lines[at(3) + 1..].join("\n");
    let (q1, q2) = (
        round3.find("Step 1: What is your name?"),
        round3.find("Step 2: What is your favorite color?"),
    );
    assert!(
        q1.is_some() && q2.is_some() && q1 < q2,
        "both questions, in order: {err}"
    );
    assert!(
        round3.contains("answered") && round3.contains("Alice") && round3.contains("blue"),
        "{err}"
    );
    child.kill().await.ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_rounds_of_one_call_are_charged_to_one_session() {
    let dir = tempfile::tempdir().unwrap();
    // Two calls a session: a call that needs three rounds runs out in its third.
    let cmd = serve_command(
        dir.path(),
        &[("multi", guest(guests::CONF_IR_MULTI_ROUND))],
        "[session]\ncalls = 2\n[tools.test_input_required_result_multi_round]\ncapabilities.client = { requests = [\"elicitation\"] }\n",
        &[],
        std::process::Stdio::null(),
    );
    let (mut child, url) = spawn_http(cmd).await;
    let mut mcp = HttpMcp::new(&url);
    let tool = "test_input_required_result_multi_round";
    let first = call(&mut mcp, tool, json!({}), None).await;
    let (key1, _, state1) = asked(&first);
    let answer1 = json!({ key1.as_str(): { "action": "accept", "content": { "name": "Alice" } } });
    let second = call(&mut mcp, tool, json!({}), Some((answer1, &state1))).await;
    let (key2, _, state2) = asked(&second);
    let answer2 = json!({ key2.as_str(): { "action": "accept", "content": { "color": "blue" } } });
    let third = call(&mut mcp, tool, json!({}), Some((answer2, &state2))).await;
    assert_eq!(third["result"]["isError"], true, "{third}");
    assert_eq!(
        third["result"]["_meta"]["dev.vak/error"]["kind"], "session_calls_exhausted",
        "{third}"
    );
    // One session, named after the first round's call, in every round's record.
    let session = format!("rounds:{}", call_id(&first));
    for body in [&first, &second, &third] {
        let r = record(dir.path(), &call_id(body));
        assert_eq!(r["session_id"], json!(session), "{r}");
    }
    // A request naming another session cannot take the state with it.
    let mut params = json!({ "name": tool, "arguments": {},
        "inputResponses": {}, "requestState": state2,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": { "elicitation": {} },
            "dev.vak/session": "fresh-budget",
        } });
    params["_meta"]["io.modelcontextprotocol/clientInfo"] = json!({ "name": "t", "version": "0" });
    let (_, refused) = mcp
        .post(
            &json!({ "jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params }),
            &[
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", tool),
            ],
        )
        .await
        .expect("an HTTP response");
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("session")),
        "{refused}"
    );
    // A call started afresh is a new logical call, with a session of its own.
    let again = call(&mut mcp, tool, json!({}), None).await;
    asked(&again);
    child.kill().await.ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn rounds_cross_nodes_that_share_a_signing_key_and_no_others() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("host.key");
    let made = std::process::Command::new(vak_tests::vak_binary())
        .args(["keygen", key.to_str().unwrap()])
        .output()
        .expect("vak keygen");
    assert!(made.status.success(), "{made:?}");
    // Three nodes: two given the same key, one with a key of its own.
    let mut nodes = Vec::new();
    for (name, shared) in [("a", true), ("b", true), ("c", false)] {
        let node = dir.path().join(name);
        let mut cmd = serve_command(
            &node,
            &[("elicitation", guest(guests::CONF_ELICITATION))],
            POLICY,
            &[],
            std::process::Stdio::null(),
        );
        if shared {
            cmd.env("VAK_SIGNING_KEY_FILE", &key);
        }
        nodes.push(spawn_http(cmd).await);
    }
    let mut a = HttpMcp::new(&nodes[0].1);
    let mut b = HttpMcp::new(&nodes[1].1);
    let mut c = HttpMcp::new(&nodes[2].1);
    let args = json!({ "message": "Who are you?" });
    let first = call(&mut a, "test_elicitation", args.clone(), None).await;
    let (key1, _, state) = asked(&first);
    let answer = json!({ key1.as_str(): { "action": "accept",
        "content": { "username": "ada", "email": "ada@example.org" } } });
    // The node with another key refuses the state as not its own.
    let foreign = call(
        &mut c,
        "test_elicitation",
        args.clone(),
        Some((answer.clone(), &state)),
    )
    .await;
    assert_eq!(foreign["error"]["code"], -32602, "{foreign}");
    assert!(
        foreign["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("not issued by this host")),
        "{foreign}"
    );
    // A node with the same key takes the next round.
    let done = call(&mut b, "test_elicitation", args, Some((answer, &state))).await;
    assert_eq!(done["result"]["isError"], false, "{done}");
    let r = record(&dir.path().join("b"), &call_id(&done));
    assert_eq!(
        r["round"]["previous_call_id"],
        json!(call_id(&first)),
        "{r}"
    );
    for (mut child, _) in nodes {
        child.kill().await.ok();
    }
}

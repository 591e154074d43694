//! Requests a tool asks together (`client::ask`, under keys of its own) go to a stateless client
//! in one round, roots among them; each answer leaves its receipt; a capability the client did
//! not declare and the tool could not do without is a `-32021` naming it.

use super::{call_id, record};
use serde_json::{Value, json};
use vak_tests::http_mcp::HttpMcp;
use vak_tests::{guest, guests, serve_command, spawn_http};

const POLICY: &str = r#"
[tools.test_input_required_result_multiple_inputs]
capabilities.client = { requests = ["elicitation", "sampling", "roots"] }
"#;
const TOOL: &str = "test_input_required_result_multiple_inputs";

/// A stateless `tools/call` of the tool from a client declaring `capabilities`: the HTTP status
/// and the body.
async fn call(
    mcp: &mut HttpMcp,
    capabilities: Value,
    retry: Option<(Value, &str)>,
) -> (u16, Value) {
    let mut params = json!({
        "name": TOOL,
        "arguments": {},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": capabilities,
        },
    });
    if let Some((responses, state)) = retry {
        params["inputResponses"] = responses;
        params["requestState"] = json!(state);
    }
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params });
    let headers = [
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", TOOL),
    ];
    mcp.post(&body, &headers).await.expect("an HTTP response")
}

fn keys(body: &Value) -> Vec<(String, String)> {
    assert_eq!(body["result"]["resultType"], "input_required", "{body}");
    let requests = body["result"]["inputRequests"]
        .as_object()
        .expect("inputRequests");
    requests
        .iter()
        .map(|(k, r)| {
            (
                k.clone(),
                r["method"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn requests_asked_together_are_one_round_and_each_answer_has_its_receipt() {
    let dir = tempfile::tempdir().unwrap();
    let tools = [("multiple", guest(guests::CONF_IR_MULTIPLE_INPUTS))];
    let cmd = serve_command(dir.path(), &tools, POLICY, &[], std::process::Stdio::null());
    let (mut child, url) = spawn_http(cmd).await;
    let mut mcp = HttpMcp::new(&url);
    let all = json!({ "elicitation": {}, "sampling": {}, "roots": {} });

    let (_, first) = call(&mut mcp, all.clone(), None).await;
    assert_eq!(
        keys(&first),
        [
            ("client_roots".to_string(), "roots/list".to_string()),
            ("greeting".into(), "sampling/createMessage".into()),
            ("user_name".into(), "elicitation/create".into()),
        ]
    );
    let state = first["result"]["requestState"].as_str().expect("a state");
    let name = json!({ "action": "accept", "content": { "name": "Ada" } });
    let greeting = json!({ "role": "assistant", "model": "m-1",
        "content": { "type": "text", "text": "Hi there" } });
    let roots = json!({ "roots": [{ "uri": "file:///home/ada/project", "name": "project" }] });

    // One answer of three: the round asks all three again.
    let partial = json!({ "user_name": name });
    let (_, again) = call(&mut mcp, all.clone(), Some((partial, state))).await;
    assert_eq!(keys(&again).len(), 3, "{again}");
    // That round spent the first state: the answers go with the state it issued.
    let state = again["result"]["requestState"].as_str().expect("a state");

    let answers = json!({ "user_name": name, "greeting": greeting, "client_roots": roots });
    let (_, done) = call(&mut mcp, all, Some((answers, state))).await;
    let text = done["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert_eq!(done["result"]["isError"], false, "{done}");
    assert!(
        text.contains("Ada") && text.contains("greeting: Hi there") && text.contains("roots: 1"),
        "{done}"
    );
    let r = record(dir.path(), &call_id(&done));
    let receipts = r["receipts"].as_array().expect("receipts");
    let by = |op: &str| {
        receipts
            .iter()
            .find(|x| x["operation"] == op)
            .unwrap_or_else(|| panic!("a `{op}` receipt: {r}"))
    };
    assert_eq!(by("elicit")["request"]["key"], "user_name");
    assert_eq!(by("sample")["outcome"]["text"], "Hi there");
    assert_eq!(
        by("roots")["outcome"]["roots"][0]["uri"],
        "file:///home/ada/project"
    );

    // A client that does not answer roots: the others are asked, and the tool, which cannot do
    // without roots, ends in a -32021 naming them (HTTP 400).
    let (_, first) = call(&mut mcp, json!({ "elicitation": {}, "sampling": {} }), None).await;
    assert_eq!(keys(&first).len(), 2, "{first}");
    let state = first["result"]["requestState"].as_str().expect("a state");
    let answers = json!({ "user_name": name, "greeting": greeting });
    let caps = json!({ "elicitation": {}, "sampling": {} });
    let (status, refused) = call(&mut mcp, caps, Some((answers, state))).await;
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
    assert_eq!(
        refused["error"]["data"]["requiredCapabilities"],
        json!({ "roots": {} })
    );
    child.kill().await.ok();
}

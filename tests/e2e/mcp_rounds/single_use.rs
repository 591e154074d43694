//! A `requestState` is single-use: the round it opens runs once. Sent back again (to the same
//! process, to another process on the same state directory, or to another node on the same
//! PostgreSQL store) it is refused with a JSON-RPC error naming `state_replayed`, and the
//! refusal is a record of its own; of two requests racing with one state, one runs.

use super::{POLICY, asked, call, call_id, record};
use serde_json::{Value, json};
use vak_tests::http_mcp::HttpMcp;
use vak_tests::{guest, guests, serve_command, spawn_http};

const TOOL: &str = "test_elicitation";

fn args() -> Value {
    json!({ "message": "Who are you?" })
}

fn answer(key: &str) -> Value {
    json!({ key: { "action": "accept",
        "content": { "username": "ada", "email": "ada@example.org" } } })
}

/// A signing key made by `vak keygen` in `dir`: servers given it seal and open the same states.
fn keygen(dir: &std::path::Path) -> std::path::PathBuf {
    let key = dir.join("host.key");
    let made = std::process::Command::new(vak_tests::vak_binary())
        .arg("keygen")
        .arg(&key)
        .output()
        .expect("vak keygen");
    assert!(made.status.success(), "{made:?}");
    key
}

/// `vak serve --http ARGS` on the state directory of `dir`, signing with `key`.
async fn server(
    dir: &std::path::Path,
    key: &std::path::Path,
    args: &[&str],
) -> (tokio::process::Child, HttpMcp) {
    let mut cmd = serve_command(
        dir,
        &[("elicitation", guest(guests::CONF_ELICITATION))],
        POLICY,
        args,
        std::process::Stdio::null(),
    );
    cmd.env("VAK_SIGNING_KEY_FILE", key);
    let (child, url) = spawn_http(cmd).await;
    (child, HttpMcp::new(&url))
}

/// `body` is the refusal of a replayed state; its record's id.
fn replayed(body: &Value) -> String {
    let error = &body["error"];
    assert_eq!(error["code"], -32602, "{body}");
    assert_eq!(error["data"]["kind"], "state_replayed", "{body}");
    assert_eq!(error["data"]["retryable"], false, "{body}");
    assert_eq!(error["data"]["journaled"], true, "{body}");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(message.contains("already used"), "{body}");
    error["data"]["call_id"]
        .as_str()
        .expect("the refusal's call id")
        .to_string()
}

fn completed(body: &Value) -> bool {
    body["result"]["isError"] == false && body["result"]["resultType"] != "input_required"
}

#[tokio::test(flavor = "multi_thread")]
async fn an_answered_state_sent_again_is_refused_on_any_process_of_the_state_dir() {
    let dir = tempfile::tempdir().unwrap();
    let key = keygen(dir.path());
    let (mut child_a, mut a) = server(dir.path(), &key, &[]).await;
    let (mut child_b, mut b) = server(dir.path(), &key, &[]).await;

    // Answered once on A: the call completes.
    let first = call(&mut a, TOOL, args(), None).await;
    let (key1, _, state) = asked(&first);
    let done = call(&mut a, TOOL, args(), Some((answer(&key1), &state))).await;
    assert!(completed(&done), "{done}");

    // The same answered state again, to A and to B: refused, on record, the tool not run.
    for mcp in [&mut a, &mut b] {
        let again = call(mcp, TOOL, args(), Some((answer(&key1), &state))).await;
        let r = record(dir.path(), &replayed(&again));
        assert_eq!(r["status"], "refused", "{r}");
        assert_eq!(r["stage"], "proposal", "{r}");
        assert_eq!(r["error"]["kind"], "state_replayed", "{r}");
        assert_eq!(r["error"]["retryable"], false, "{r}");
        assert_eq!(r["round"]["previous_call_id"], call_id(&first), "{r}");
        assert!(
            r["receipts"].as_array().is_none_or(Vec::is_empty),
            "the tool never ran: {r}"
        );
    }

    // Issued by A, answered on B, then refused on A.
    let first = call(&mut a, TOOL, args(), None).await;
    let (key1, _, state) = asked(&first);
    let done = call(&mut b, TOOL, args(), Some((answer(&key1), &state))).await;
    assert!(completed(&done), "{done}");
    replayed(&call(&mut a, TOOL, args(), Some((answer(&key1), &state))).await);

    // One state sent to both at once: one round runs, the other is refused.
    let first = call(&mut a, TOOL, args(), None).await;
    let (key1, _, state) = asked(&first);
    let (one, two) = tokio::join!(
        call(&mut a, TOOL, args(), Some((answer(&key1), &state))),
        call(&mut b, TOOL, args(), Some((answer(&key1), &state))),
    );
    let ran = [&one, &two].iter().filter(|b| completed(b)).count();
    assert_eq!(ran, 1, "{one}\n{two}");
    replayed(if completed(&one) { &two } else { &one });
    child_a.kill().await.ok();
    child_b.kill().await.ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_state_spent_on_one_node_is_refused_on_the_other_of_one_postgres_store() {
    let Some(cluster) = vak_tests::pg_cluster() else {
        return;
    };
    // Two nodes on one database, given one signing key: either opens the other's states.
    let dir = tempfile::tempdir().unwrap();
    let key = keygen(dir.path());
    let url = cluster.url();
    let node_a = ["--store", url.as_str(), "--node", "a"];
    let node_b = ["--store", url.as_str(), "--node", "b"];
    let (mut child_a, mut a) = server(&dir.path().join("a"), &key, &node_a).await;
    let (mut child_b, mut b) = server(&dir.path().join("b"), &key, &node_b).await;
    let first = call(&mut a, TOOL, args(), None).await;
    let (key1, _, state) = asked(&first);
    let done = call(&mut b, TOOL, args(), Some((answer(&key1), &state))).await;
    assert!(completed(&done), "{done}");
    for mcp in [&mut a, &mut b] {
        replayed(&call(mcp, TOOL, args(), Some((answer(&key1), &state))).await);
    }
    child_a.kill().await.ok();
    child_b.kill().await.ok();
}

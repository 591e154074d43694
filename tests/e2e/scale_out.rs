//! Several `vak serve --http` processes on one PostgreSQL database (docs/scale-out.md): one
//! budget per named session whichever node takes its calls, a revocation on one node refusing
//! the next call on the other, one journal that verifies with every node's chain, no acknowledged
//! record lost to a `kill -9` of a node, and typed, retryable errors while the database is down,
//! then full service again. Each test starts a throwaway cluster of its own; where PostgreSQL is
//! not installed they are skipped, saying so.

use serde_json::{Value, json};
use std::time::{Duration, Instant};
use vak_host::store::postgres::{PgOptions, PgStore};
use vak_pg_cluster::Cluster;
use vak_tests::http_mcp::HttpMcp;
use vak_tests::{bundled, serve_command, spawn_http, vak_binary};

#[path = "scale_out/barrier.rs"]
mod barrier;
use barrier::*;

const POLICY: &str = r#"
[session]
calls = 7

[tools.stats]
"#;

/// A node: `vak serve --http` on `cluster` named `node`, serving `stats` under `policy`.
struct Node {
    child: tokio::process::Child,
    url: String,
    _dir: tempfile::TempDir,
}

async fn node(cluster: &Cluster, name: &str, policy: &str) -> Node {
    node_with(cluster, name, &["stats"], policy).await
}

/// A node serving the bundled `tools` under `policy` (`{dir}` in it: a folder of the node's).
async fn node_with(cluster: &Cluster, name: &str, tools: &[&str], policy: &str) -> Node {
    let dir = tempfile::tempdir().unwrap();
    let url = cluster.url();
    let tools: Vec<(&str, Vec<u8>)> = tools.iter().map(|t| (*t, bundled(t))).collect();
    let policy = policy.replace("{dir}", &dir.path().display().to_string());
    let cmd = serve_command(
        dir.path(),
        &tools,
        &policy,
        &["--store", &url, "--node", name],
        std::process::Stdio::null(),
    );
    let (child, url) = spawn_http(cmd).await;
    Node {
        child,
        url,
        _dir: dir,
    }
}

/// The call id of an acknowledged call (one that was answered with a result).
fn acknowledged(response: &Value) -> Option<String> {
    response["result"]["_meta"]["dev.vak/call_id"]
        .as_str()
        .map(str::to_string)
}

/// A reader of the store that serves nothing.
async fn reader(cluster: &Cluster) -> std::sync::Arc<PgStore> {
    let mut options = PgOptions::new("test-reader");
    options.register = false;
    PgStore::connect(&cluster.url(), options)
        .await
        .expect("the store connects")
}

/// `vak --store URL ARGS…`: its exit status and standard output.
fn vak(cluster: &Cluster, args: &[&str]) -> (i32, String) {
    let out = std::process::Command::new(vak_binary())
        .arg("--store")
        .arg(cluster.url())
        .args(args)
        .output()
        .expect("vak runs");
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn two_nodes_share_one_budget_one_journal_and_every_revocation() {
    let Some(cluster) = vak_tests::pg_cluster() else {
        return;
    };
    // Both start at once: the schema is migrated once, under the store's lock.
    let (a, b) = tokio::join!(node(&cluster, "a", POLICY), node(&cluster, "b", POLICY));
    let urls = [a.url.clone(), b.url.clone()];

    // 40 concurrent calls of one session, alternating nodes; the policy allows 7.
    let mut calls = Vec::new();
    for i in 0..40u64 {
        let url = urls[i as usize % 2].clone();
        calls.push(tokio::spawn(async move {
            HttpMcp::new(&url)
                .call(i, "stats", json!({ "values": [i, 1] }), Some("shared-1"))
                .await
                .expect("an HTTP answer")
        }));
    }
    let (mut completed, mut refused) = (0, 0);
    for c in calls {
        let (status, body) = c.await.unwrap();
        assert_eq!(status, 200, "{body}");
        let result = &body["result"];
        assert_eq!(result["_meta"]["dev.vak/session"], "shared-1", "{body}");
        if result["isError"] == false {
            completed += 1;
        } else {
            let error = &result["_meta"]["dev.vak/error"];
            assert_eq!(error["kind"], "session_calls_exhausted", "{body}");
            assert_eq!(error["details"]["limit"], 7, "{body}");
            refused += 1;
        }
    }
    assert_eq!(
        (completed, refused),
        (7, 33),
        "exactly the session's calls, across both nodes"
    );

    // A revocation written by one process reaches the other node's next call.
    let mut other = HttpMcp::new(&urls[1]);
    let (_, ok) = other
        .call(100, "stats", json!({ "values": [1] }), None)
        .await
        .unwrap();
    assert_eq!(ok["result"]["isError"], false, "{ok}");
    let (code, out) = vak(
        &cluster,
        &["revoke", "tool", "stats", "--reason", "scale-out test"],
    );
    assert_eq!(code, 0, "{out}");
    let revoked = Instant::now();
    let delay = loop {
        let (_, r) = other
            .call(101, "stats", json!({ "values": [1] }), None)
            .await
            .unwrap();
        if r["result"]["_meta"]["dev.vak/error"]["kind"] == "revoked" {
            break revoked.elapsed();
        }
        assert_eq!(r["result"]["isError"], false, "{r}");
        assert!(
            revoked.elapsed() < Duration::from_secs(2),
            "the revocation did not reach node b within the 2 s staleness bound"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    eprintln!("a revocation by another process refused node b's next call after {delay:?}");

    // One journal, both chains, every signature.
    let (code, out) = vak(&cluster, &["audit", "verify"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("in 2 chains"), "{out}");
    let (code, out) = vak(&cluster, &["audit", "--limit", "500"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("  a  ") && out.contains("  b  "), "{out}");
    let (code, out) = vak(&cluster, &["store", "status"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("node a:") && out.contains("node b:"), "{out}");
    drop((a, b));
}

/// Keep `inflight` calls going to `urls` until `stop`; every response, in order of arrival.
fn load(
    urls: Vec<String>,
    inflight: usize,
    stop: tokio_util::sync::CancellationToken,
) -> tokio::sync::mpsc::UnboundedReceiver<(usize, Result<Value, String>)> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    for worker in 0..inflight {
        let (url, node, tx, stop) = (
            urls[worker % urls.len()].clone(),
            worker % urls.len(),
            tx.clone(),
            stop.clone(),
        );
        tokio::spawn(async move {
            let mut client = HttpMcp::new(&url);
            let mut i = 0u64;
            while !stop.is_cancelled() {
                i += 1;
                let answer = client
                    .call(i, "stats", json!({ "values": [i, worker] }), None)
                    .await
                    .map(|(_, body)| body)
                    .map_err(|e| e.to_string());
                if answer.is_err() {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                if tx.send((node, answer)).is_err() {
                    return;
                }
            }
        });
    }
    rx
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_of_a_node_under_load_loses_no_acknowledged_record() {
    let Some(cluster) = vak_tests::pg_cluster() else {
        return;
    };
    let policy = POLICY.replace("calls = 7", "");
    let (mut a, b) = tokio::join!(node(&cluster, "a", &policy), node(&cluster, "b", &policy));
    let stop = tokio_util::sync::CancellationToken::new();
    let mut answers = load(vec![a.url.clone(), b.url.clone()], 16, stop.clone());
    let mut acked = Vec::new();
    let (mut from_a, mut after_kill_from_b, mut killed) = (0, 0, false);
    while let Some((node, answer)) = answers.recv().await {
        if let Some(id) = answer.as_ref().ok().and_then(acknowledged) {
            acked.push(id);
            match (node, killed) {
                (0, _) => from_a += 1,
                (_, true) => after_kill_from_b += 1,
                _ => {}
            }
        }
        if !killed && from_a >= 150 {
            a.child.start_kill().expect("kill -9 node a");
            a.child.wait().await.ok();
            killed = true;
        }
        if after_kill_from_b >= 150 {
            break;
        }
    }
    stop.cancel();
    assert!(
        killed && after_kill_from_b >= 150,
        "node b kept serving after node a was killed"
    );
    let store = reader(&cluster).await;
    for id in &acked {
        let shown = store.show(id).await.unwrap();
        assert!(
            shown.len() == 1 && shown[0].kind == vak_host::journal::Kind::Record,
            "acknowledged call {id} has no record in the journal: {shown:?}"
        );
    }
    let v = store.verify(&[]).await.unwrap();
    assert_eq!(v.first_bad, None, "the journal verifies after kill -9");
    assert!(v.records as usize >= acked.len());
    drop(b);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_database_outage_is_typed_and_retryable_and_service_comes_back() {
    let Some(cluster) = vak_tests::pg_cluster() else {
        return;
    };
    let policy = POLICY.replace("calls = 7", "");
    let (mut a, mut b) = tokio::join!(node(&cluster, "a", &policy), node(&cluster, "b", &policy));
    let stop = tokio_util::sync::CancellationToken::new();
    let mut answers = load(vec![a.url.clone(), b.url.clone()], 8, stop.clone());
    let mut acked = Vec::new();
    let mut unavailable = 0;
    // Phase 1: served. Phase 2: the database is stopped. Phase 3: it is back.
    let mut phase = 1;
    let mut phase_started = Instant::now();
    let mut since_back = 0;
    while let Some((_, answer)) = answers.recv().await {
        let body = answer.expect("every node answers every request, whatever the database does");
        if let Some(id) = acknowledged(&body) {
            acked.push(id);
            if phase == 3 {
                since_back += 1;
            }
        } else {
            // Anything not acknowledged is the typed, retryable store error, and only while the
            // database is (or was just) down.
            let data = &body["error"]["data"];
            assert_eq!(data["kind"], "store_unavailable", "{body}");
            assert_eq!(data["retryable"], true, "{body}");
            assert!(phase >= 2, "an error before the outage: {body}");
            unavailable += 1;
        }
        if phase == 1 && acked.len() >= 100 {
            cluster.stop().expect("stop the database");
            phase = 2;
            phase_started = Instant::now();
        } else if phase == 2 && phase_started.elapsed() > Duration::from_secs(4) {
            assert!(unavailable > 0, "no call noticed the outage");
            cluster.restart().expect("start the database again");
            phase = 3;
            phase_started = Instant::now();
        } else if phase == 3 {
            if since_back >= 100 {
                break;
            }
            assert!(
                phase_started.elapsed() < Duration::from_secs(30),
                "service did not come back within 30 s of the database"
            );
        }
    }
    stop.cancel();
    assert!(
        a.child.try_wait().unwrap().is_none(),
        "node a is still running"
    );
    assert!(
        b.child.try_wait().unwrap().is_none(),
        "node b is still running"
    );
    eprintln!(
        "{} calls acknowledged, {unavailable} answered store_unavailable during the outage",
        acked.len()
    );
    let store = reader(&cluster).await;
    for id in &acked {
        let shown = store.show(id).await.unwrap();
        assert!(
            shown.len() == 1 && shown[0].kind == vak_host::journal::Kind::Record,
            "acknowledged call {id} has no record in the journal: {shown:?}"
        );
    }
    assert_eq!(store.verify(&[]).await.unwrap().first_bad, None);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hung_database_answers_every_call_within_the_bound() {
    let Some(cluster) = vak_tests::pg_cluster() else {
        return;
    };
    // The documented bound on a wait for the store (the default), and the margin allowed for
    // the HTTP round trip and a loaded machine.
    let (bound, margin) = (Duration::from_secs(5), Duration::from_millis(1000));
    let policy = "[session]\ncalls = 1000000\n\n[tools.stats]\n";
    let (a, b) = tokio::join!(node(&cluster, "a", policy), node(&cluster, "b", policy));
    let urls = [a.url.clone(), b.url.clone()];
    let stop = tokio_util::sync::CancellationToken::new();
    // Half the clients in one capped session (a reservation before each call), half unnamed.
    let workers = stream(
        &urls,
        8,
        ("stats", json!({ "values": [1, 2] })),
        Some("hung-1"),
        &stop,
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let frozen = cluster.freeze().expect("SIGSTOP the database");
    let froze = Instant::now();
    tokio::time::sleep(Duration::from_secs(12)).await;
    drop(frozen);
    let thawed = Instant::now();
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.cancel();
    let calls = gather(workers).await;

    let over: Vec<&Sent> = calls.iter().filter(|c| c.took > bound + margin).collect();
    let during = calls
        .iter()
        .filter(|c| c.sent >= froze && c.sent < thawed)
        .count();
    let slowest = calls.iter().map(|c| c.took).max().unwrap_or_default();
    let acked: Vec<String> = calls
        .iter()
        .filter_map(|c| c.answer.as_ref().ok().and_then(acknowledged))
        .collect();
    let after = calls
        .iter()
        .filter(|c| c.sent > thawed && c.answer.as_ref().ok().and_then(acknowledged).is_some())
        .count();
    eprintln!(
        "{} calls, {during} sent while the database was stopped, {} acknowledged ({after} after), \
         slowest answer {slowest:?}, {} over {:?}",
        calls.len(),
        acked.len(),
        over.len(),
        bound + margin
    );
    assert!(
        during > 0,
        "no call was sent while the database was stopped"
    );
    assert!(
        over.is_empty(),
        "{} answers took longer than the bound and its margin, e.g. {:?} for {:?}",
        over.len(),
        over[0].took,
        over[0].answer
    );
    for c in &calls {
        let body = c.answer.as_ref().expect("every call is answered");
        if acknowledged(body).is_none() {
            let data = &body["error"]["data"];
            assert_eq!(data["retryable"], true, "{body}");
            assert!(
                ["store_unavailable", "journal_unavailable"]
                    .contains(&data["kind"].as_str().unwrap_or("")),
                "{body}"
            );
        }
    }
    assert!(
        after > 0,
        "no call was acknowledged once the database was back"
    );

    // Every acknowledged call has its record; the chains verify.
    let store = reader(&cluster).await;
    for id in &acked {
        let shown = store.show(id).await.unwrap();
        assert!(
            shown
                .iter()
                .any(|s| s.kind == vak_host::journal::Kind::Record),
            "acknowledged call {id} has no record: {shown:?}"
        );
    }
    assert_eq!(store.verify(&[]).await.unwrap().first_bad, None);

    // Nothing stays reserved: the calls that ran but could not commit were charged when the
    // store came back (their records were kept and committed), the others released.
    let mut reserved = String::new();
    for _ in 0..40 {
        reserved = cluster
            .psql("SELECT calls_reserved, calls_used FROM vak_ledgers")
            .expect("the ledger");
        if reserved.starts_with("0|") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    eprintln!("the session's ledger (reserved|used): {reserved}");
    assert!(
        reserved.starts_with("0|"),
        "reservations left held: {reserved}"
    );
    drop((a, b));
}

#[tokio::test(flavor = "multi_thread")]
async fn one_node_name_is_held_by_one_live_process() {
    let Some(cluster) = vak_tests::pg_cluster() else {
        return;
    };
    let policy = POLICY.replace("calls = 7", "");
    let mut a = node(&cluster, "a", &policy).await;
    let pid = a.child.id().expect("node a's pid");

    // A second process started under the live name is refused at start, naming the holder.
    let dir = tempfile::tempdir().unwrap();
    let mut second = serve_command(
        dir.path(),
        &[("stats", bundled("stats"))],
        &policy,
        &[
            "--store",
            &cluster.url(),
            "--node",
            "a",
            "--http",
            "127.0.0.1:0",
        ],
        std::process::Stdio::piped(),
    );
    let started = Instant::now();
    let out = tokio::time::timeout(Duration::from_secs(60), second.output())
        .await
        .expect("the second process ends")
        .expect("vak serve runs");
    let text = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        !out.status.success(),
        "a second `--node a` was not refused: {text}"
    );
    assert!(
        text.contains("node `a` is held by another live process")
            && text.contains(&format!("pid {pid} ")),
        "{text}"
    );
    eprintln!(
        "a second process under a live name was refused in {:?}",
        started.elapsed()
    );

    // The name taken from under node a (as by a process that found its lease lapsed): from then
    // on nothing is committed to a's chain, and no call runs on a.
    let mut client = HttpMcp::new(&a.url);
    let (_, ok) = client
        .call(1, "stats", json!({ "values": [1] }), None)
        .await
        .unwrap();
    assert!(acknowledged(&ok).is_some(), "{ok}");
    cluster
        .psql("UPDATE vak_nodes SET holder = 'intruder', holder_info = 'a test', heartbeat_at = now() WHERE node = 'a'")
        .unwrap();
    let stolen_at = cluster.psql("SELECT now()").unwrap();
    let mut refused = 0;
    for i in 0..40u64 {
        let (_, body) = client
            .call(10 + i, "stats", json!({ "values": [i] }), None)
            .await
            .unwrap();
        assert!(
            acknowledged(&body).is_none(),
            "node a ran a call after losing its name: {body}"
        );
        refused += 1;
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let committed = cluster
        .psql(&format!(
            "SELECT count(*) FROM vak_records WHERE node = 'a' AND committed_at >= '{stolen_at}'"
        ))
        .unwrap();
    assert_eq!(
        committed, "0",
        "entries committed to a's chain after the name was taken"
    );
    eprintln!("{refused} calls refused by node a after its name was taken");

    // Node a killed; the name's holder stopped renewing it: a new process waits for the lease to
    // lapse, then takes the name and continues the chain.
    a.child.start_kill().unwrap();
    a.child.wait().await.ok();
    let restarted = Instant::now();
    let again = node(&cluster, "a", &policy).await;
    eprintln!(
        "a process under a name whose holder stopped took it after {:?}",
        restarted.elapsed()
    );
    let (_, ok) = HttpMcp::new(&again.url)
        .call(100, "stats", json!({ "values": [1] }), None)
        .await
        .unwrap();
    assert!(acknowledged(&ok).is_some(), "{ok}");
    let v = reader(&cluster).await.verify(&[]).await.unwrap();
    assert_eq!(v.first_bad, None);
    assert_eq!(v.heads.len(), 1, "one chain, never forked");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_store_of_one_process_under_a_live_name_is_refused() {
    let Some(cluster) = vak_tests::pg_cluster() else {
        return;
    };
    let first = PgStore::connect(&cluster.url(), PgOptions::new("same"))
        .await
        .expect("the store connects");
    let err = PgStore::connect(&cluster.url(), PgOptions::new("same"))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), "store_node_held", "{err}");
    assert!(!err.retryable());
    assert!(
        err.to_string()
            .contains(&format!("pid {} ", std::process::id())),
        "{err}"
    );
    // Once the first is closed, the name is free at once.
    first.close().await;
    drop(first);
    PgStore::connect(&cluster.url(), PgOptions::new("same"))
        .await
        .expect("the name is free once its holder closed");
}

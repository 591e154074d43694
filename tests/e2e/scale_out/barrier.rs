//! Calls streamed at the nodes while a revocation is applied: what each answer says about
//! admission, and the barrier `vak revoke` promises (every call sent after it returns is
//! refused, on every node).

use super::*;

/// What an answer says about admission.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Admission {
    /// The call ran (completed, or failed once running).
    Admitted,
    /// Refused before it ran, as this kind (a revocation, a view too old to tell, the store).
    Refused(String),
    /// No answer a client can read.
    Lost(String),
}

pub(crate) fn admission(answer: &Result<Value, String>) -> Admission {
    let body = match answer {
        Ok(b) => b,
        Err(e) => return Admission::Lost(e.clone()),
    };
    if let Some(kind) = body["error"]["data"]["kind"].as_str() {
        return Admission::Refused(kind.to_string());
    }
    if !body["result"].is_object() {
        return Admission::Lost(body.to_string());
    }
    let error = &body["result"]["_meta"]["dev.vak/error"];
    match error["stage"].as_str() {
        None => Admission::Admitted,
        Some("proposal" | "schema" | "permission" | "budget") => {
            Admission::Refused(error["kind"].as_str().unwrap_or("?").to_string())
        }
        Some(_) => Admission::Admitted,
    }
}

/// One call of a stream: its node, when it was sent, how long its answer took, the answer.
pub(crate) struct Sent {
    pub(crate) node: usize,
    pub(crate) sent: Instant,
    pub(crate) took: Duration,
    pub(crate) answer: Result<Value, String>,
}

/// `per_node` clients to each of `urls`, each calling `tool` with `arguments` (in `session`
/// for every other client when given) one call after the other until `stop`; every call.
pub(crate) fn stream(
    urls: &[String],
    per_node: usize,
    (tool, arguments): (&'static str, Value),
    session: Option<&'static str>,
    stop: &tokio_util::sync::CancellationToken,
) -> Vec<tokio::task::JoinHandle<Vec<Sent>>> {
    let mut workers = Vec::new();
    for worker in 0..per_node * urls.len() {
        let (node, url) = (worker % urls.len(), urls[worker % urls.len()].clone());
        let (stop, arguments) = (stop.clone(), arguments.clone());
        let session = session.filter(|_| worker % 2 == 0);
        workers.push(tokio::spawn(async move {
            let mut client = HttpMcp::new(&url);
            let mut sent = Vec::new();
            let mut i = 0u64;
            while !stop.is_cancelled() {
                i += 1;
                let at = Instant::now();
                let answer = client
                    .call(i, tool, arguments.clone(), session)
                    .await
                    .map(|(_, body)| body)
                    .map_err(|e| e.to_string());
                if answer.is_err() {
                    client = HttpMcp::new(&url);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                sent.push(Sent {
                    node,
                    sent: at,
                    took: at.elapsed(),
                    answer,
                });
            }
            sent
        }));
    }
    workers
}

pub(crate) async fn gather(workers: Vec<tokio::task::JoinHandle<Vec<Sent>>>) -> Vec<Sent> {
    let mut all = Vec::new();
    for w in workers {
        all.extend(w.await.expect("a client task"));
    }
    all
}

/// The pid of node `name`'s revocation listener connection, on the server.
pub(crate) fn listener_pid(cluster: &Cluster, name: &str) -> u32 {
    let out = cluster
        .psql(&format!(
            "SELECT pid FROM pg_stat_activity WHERE application_name = 'vak revocations {name}'"
        ))
        .expect("pg_stat_activity");
    out.lines()
        .next()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("node {name} has no revocation listener connection: {out:?}"))
}

/// One trial of the barrier: clients streaming `tool` calls to every node, `disturb` run, then
/// `vak revoke tool TOOL`; after it returned, every call sent is refused. The output of `vak
/// revoke`.
pub(crate) async fn barrier_trial<D>(
    cluster: &Cluster,
    urls: &[String],
    (tool, arguments): (&'static str, Value),
    disturb: impl FnOnce() -> D,
) -> String {
    let stop = tokio_util::sync::CancellationToken::new();
    let workers = stream(urls, 4, (tool, arguments), None, &stop);
    tokio::time::sleep(Duration::from_millis(700)).await;
    let disturbed = disturb();
    let began = Instant::now();
    let out = tokio::process::Command::new(vak_binary())
        .args(["--store", &cluster.url(), "revoke", "tool", tool])
        .args(["--reason", "barrier test"])
        .output()
        .await
        .expect("vak revoke runs");
    let returned = Instant::now();
    tokio::time::sleep(Duration::from_millis(400)).await;
    stop.cancel();
    let calls = gather(workers).await;
    drop(disturbed);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "vak revoke: {text}");
    let before = calls
        .iter()
        .filter(|c| c.sent < began && admission(&c.answer) == Admission::Admitted)
        .count();
    assert!(
        before > 0,
        "{tool}: no call was admitted before the revocation"
    );
    for node in 0..urls.len() {
        let after: Vec<&Sent> = calls
            .iter()
            .filter(|c| c.node == node && c.sent > returned)
            .collect();
        assert!(
            after.len() >= 4,
            "{tool}: only {} calls were sent to node {node} after vak revoke returned",
            after.len()
        );
        for c in &after {
            assert!(
                matches!(admission(&c.answer), Admission::Refused(_)),
                "{tool}: a call sent to node {node} {:?} after vak revoke returned was not refused: {:?}",
                c.sent - returned,
                c.answer
            );
        }
    }
    let after = calls.iter().filter(|c| c.sent > returned).count();
    eprintln!(
        "{tool}: vak revoke took {:?}; {before} calls admitted before it, {after} sent after it returned, all refused",
        returned - began
    );
    text
}

#[tokio::test(flavor = "multi_thread")]
async fn a_revocation_is_a_barrier_every_call_sent_after_vak_revoke_returns_is_refused() {
    let Some(cluster) = vak_tests::pg_cluster() else {
        return;
    };
    let policy = r#"
[tools.stats]

[tools.clock]
capabilities.clock = { zones = ["*"] }

[tools.replace]
capabilities.workspace = { roots = [{ name = "project", path = "{dir}", mode = "read-write" }] }
"#;
    let tools = ["stats", "clock", "replace"];
    let (a, b) = tokio::join!(
        node_with(&cluster, "a", &tools, policy),
        node_with(&cluster, "b", &tools, policy)
    );
    let urls = [a.url.clone(), b.url.clone()];

    // Both nodes listening: both confirm before `vak revoke` returns.
    let plain = barrier_trial(
        &cluster,
        &urls,
        ("stats", json!({ "values": [1, 2] })),
        || (),
    )
    .await;

    // Node b's notification connection killed just before: it reconnects and reads, and `vak
    // revoke` waits for it.
    let killed = barrier_trial(&cluster, &urls, ("clock", json!({ "zone": "UTC" })), || {
        let pid = listener_pid(&cluster, "b");
        cluster
            .psql(&format!("SELECT pg_terminate_backend({pid})"))
            .expect("terminate b's listener");
    })
    .await;

    // Node b's notification connection hung (its backend stopped): b cannot confirm, so
    // `vak revoke` waits until b's view has lapsed (b then refuses every call on its own), and
    // says so.
    let hung = barrier_trial(
        &cluster,
        &urls,
        (
            "replace",
            json!({ "root": "project", "path": "none.txt", "find": "a", "replace": "b" }),
        ),
        || {
            cluster
                .freeze_backend(listener_pid(&cluster, "b"))
                .expect("stop b's listener backend")
        },
    )
    .await;
    // What `vak revoke` said of each.
    for out in [&plain, &killed] {
        assert!(out.contains("applied by every live node (a, b)"), "{out}");
    }
    assert!(hung.contains("not confirmed by b"), "{hung}");
    assert!(hung.contains("applied by every live node (a)"), "{hung}");
    drop((a, b));
}

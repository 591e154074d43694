//! One suite, both stores. Every test here runs against the local store (SQLite journal,
//! revocations file, ledgers in this process) and against the shared PostgreSQL store (a
//! throwaway cluster of the test's own, with two nodes in this process), and asserts the same
//! behaviour of both. Where PostgreSQL is not installed the shared half is skipped, saying so.

use std::sync::Arc;
use std::time::{Duration, Instant};
use vak_host::capabilities::Capability;
use vak_host::journal::{Durability, Journal};
use vak_host::store::postgres::{PgOptions, PgStore};
use vak_host::store::{Local, Store};
use vak_host::{Host, HostBuilder, Policy, Proposal, Revocation, Revocations, Stage, Status};
use vak_pg_cluster::Cluster;
use vak_tests::{bundled, guest, guests};

/// Where a test's store lives.
enum Backend {
    Local(tempfile::TempDir),
    Postgres(Cluster),
}

impl Backend {
    /// The local store, and the shared one when a cluster can be started here.
    fn all() -> Vec<Backend> {
        let mut all = vec![Backend::Local(tempfile::tempdir().expect("tempdir"))];
        all.extend(vak_tests::pg_cluster().map(Backend::Postgres));
        all
    }

    fn name(&self) -> &'static str {
        match self {
            Backend::Local(_) => "local",
            Backend::Postgres(_) => "postgres",
        }
    }

    /// The store as node `node` sees it (opened anew: what a restarted node finds).
    async fn open(&self, node: &str) -> Store {
        match self {
            Backend::Local(dir) => Store::Local(Local {
                journal: Some(Arc::new(
                    Journal::open(&dir.path().join("journal.sqlite"), Durability::Committed)
                        .expect("journal opens"),
                )),
                revocations: Arc::new(
                    Revocations::open(&dir.path().join("revocations.jsonl"))
                        .expect("revocations open"),
                ),
            }),
            Backend::Postgres(cluster) => Store::Postgres(
                PgStore::connect(&cluster.url(), PgOptions::new(node))
                    .await
                    .expect("the shared store connects"),
            ),
        }
    }

    /// The nodes serving from this store: one for the local store (it is one machine's), two
    /// for the shared one.
    async fn hosts(&self, policy: &str, cache: &std::path::Path) -> Vec<Host> {
        let nodes: &[&str] = match self {
            Backend::Local(_) => &["local"],
            Backend::Postgres(_) => &["node-a", "node-b"],
        };
        let mut hosts = Vec::new();
        for node in nodes {
            let host = HostBuilder::new()
                .policy(Policy::parse(policy, "test policy").expect("policy"))
                .cache_dir(Some(cache.to_path_buf()))
                .store(self.open(node).await)
                .component("stats", bundled("stats"))
                .component("clock", bundled("clock"))
                .component("hostile", guest(guests::HOSTILE))
                .build()
                .await
                .expect("host builds");
            hosts.push(host);
        }
        hosts
    }

    /// Rewrite the stored record of `call_id` as an attacker with write access to the store would.
    fn tamper(&self, call_id: &str) {
        let sql = format!(
            "UPDATE {} SET record = replace(record, '\"tool\":\"stats\"', '\"tool\":\"clock\"') WHERE call_id = '{call_id}' AND kind = 'record'",
            match self {
                Backend::Local(_) => "records",
                Backend::Postgres(_) => "vak_records",
            }
        );
        match self {
            Backend::Local(dir) => {
                let db = rusqlite::Connection::open(dir.path().join("journal.sqlite"))
                    .expect("sqlite opens");
                assert_eq!(db.execute(&sql, []).expect("update"), 1);
            }
            Backend::Postgres(cluster) => {
                cluster.psql(&sql).expect("update");
            }
        }
    }
}

const POLICY: &str = r#"
[session]
calls = 5

[tools.stats]
caps = { calls_per_session = 50 }

[tools.clock]
capabilities.clock = { zones = ["*"] }

[tools.hostile]
capabilities.clock = { zones = ["UTC"] }
capabilities.log = {}
caps = { wall_time_ms = 8_000 }
"#;

fn stats(n: i64) -> Proposal {
    Proposal::new("stats", format!(r#"{{"values":[{n},1,2]}}"#))
}

#[tokio::test(flavor = "multi_thread")]
async fn the_journal_keeps_every_record_and_names_a_tampered_one() {
    let cache = tempfile::tempdir().unwrap();
    for backend in Backend::all() {
        let name = backend.name();
        let hosts = backend
            .hosts(&POLICY.replace("calls = 5", ""), cache.path())
            .await;
        // Concurrent calls on every node: each acknowledged one is in the journal.
        let mut calls = Vec::new();
        for i in 0..24 {
            let host = hosts[i % hosts.len()].clone();
            calls.push(tokio::spawn(
                async move { host.call(stats(i as i64)).await },
            ));
        }
        let mut ids = Vec::new();
        for c in calls {
            let r = c.await.unwrap();
            assert_eq!(r.status, Status::Completed, "{name}");
            let entry = r
                .journaled
                .as_ref()
                .expect("journaled")
                .as_ref()
                .expect("committed");
            // Its place in its chain (a node's, or this process's).
            assert!(entry.node.as_ref().is_some_and(|n| n.1 > 0), "{name}");
            ids.push(r.call_id);
        }
        let store = hosts[0].store();
        for id in &ids {
            let shown = store.show(id).await.unwrap();
            let text = &shown.first().expect("the record is stored").text;
            assert_eq!(shown[0].check, Ok(()), "{name}");
            assert!(text.contains(id.as_str()), "{name}");
        }
        let listed = store
            .list(&vak_host::journal::Filter {
                tool: Some("stats".into()),
                limit: Some(100),
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(listed.len(), 24, "{name}");
        assert!(
            listed
                .windows(2)
                .all(|w| w[0].received_at >= w[1].received_at),
            "{name}: newest first"
        );
        let v = store.verify(&[]).await.unwrap();
        assert_eq!(
            (v.records, v.started, v.first_bad.clone()),
            (24, 24, None),
            "{name}: every call's started entry and record"
        );
        assert_eq!(v.heads.len(), hosts.len(), "{name}: one chain per node");
        let keys: Vec<String> = hosts.iter().map(|h| h.public_key()).collect();
        assert_eq!(store.verify(&keys).await.unwrap().first_bad, None, "{name}");
        assert!(
            store
                .verify(&["11".repeat(32)])
                .await
                .unwrap()
                .first_bad
                .is_some(),
            "{name}: a foreign key is named"
        );

        // A node restarted on the same store goes on with its chain.
        drop(hosts);
        let again = backend.hosts(POLICY, cache.path()).await;
        let r = again[0].call(stats(7)).await;
        assert!(matches!(r.journaled, Some(Ok(_))), "{name}");
        let v = again[0].store().verify(&[]).await.unwrap();
        assert_eq!((v.records, v.first_bad), (25, None), "{name}");

        backend.tamper(&ids[5]);
        let v = again[0].store().verify(&[]).await.unwrap();
        let (_, why) = v.first_bad.expect("the tampered entry is named");
        assert!(why.contains("does not match its hash"), "{name}: {why}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_budget_admits_exactly_its_calls_across_nodes() {
    let cache = tempfile::tempdir().unwrap();
    for backend in Backend::all() {
        let name = backend.name();
        let hosts = backend.hosts(POLICY, cache.path()).await;
        // 24 concurrent calls of one named session, spread over the nodes; the policy allows 5.
        let mut calls = Vec::new();
        for i in 0..24 {
            let session = hosts[i % hosts.len()]
                .session_named("conversation-1", Some("alice"))
                .unwrap();
            calls.push(tokio::spawn(
                async move { session.call(stats(i as i64)).await },
            ));
        }
        let mut completed = 0;
        for c in calls {
            let r = c.await.unwrap();
            match r.status {
                Status::Completed => completed += 1,
                _ => {
                    let e = r.error.expect("a refusal says why");
                    assert_eq!(
                        (e.stage, e.kind.as_str()),
                        (Stage::Budget, "session_calls_exhausted"),
                        "{name}"
                    );
                    assert!(!e.retryable, "{name}");
                    assert_eq!(e.details["limit"], 5, "{name}");
                    assert!(
                        e.details["used"].as_u64().unwrap() >= 5,
                        "{name}: {}",
                        e.details
                    );
                }
            }
        }
        assert_eq!(
            completed, 5,
            "{name}: exactly the session's calls, never one more"
        );
        let session = hosts[0]
            .session_named("conversation-1", Some("alice"))
            .unwrap();
        assert_eq!(session.used().await.unwrap().calls, 5, "{name}");
        assert!(
            session.used().await.unwrap().fuel > 0,
            "{name}: what was used is charged"
        );

        // Session names are each principal's own: mallory's `conversation-1` is another
        // session, and alice's stays spent.
        let r = hosts[hosts.len() - 1]
            .session_named("conversation-1", Some("mallory"))
            .unwrap()
            .call(stats(1))
            .await;
        assert_eq!(r.status, Status::Completed, "{name}");
        let r = hosts[hosts.len() - 1]
            .session_named("conversation-1", Some("alice"))
            .unwrap()
            .call(stats(1))
            .await;
        assert_eq!(r.error.unwrap().kind, "session_calls_exhausted", "{name}");
        assert!(hosts[0].session_named("no spaces", None).is_err());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn fuel_and_per_tool_caps_hold_across_nodes() {
    let cache = tempfile::tempdir().unwrap();
    for backend in Backend::all() {
        let name = backend.name();
        let policy = POLICY.replace("calls = 5", "fuel = 200_000").replace(
            "calls_per_session = 50",
            "calls_per_session = 50, fuel = 1_000_000",
        );
        let hosts = backend.hosts(&policy, cache.path()).await;
        // One call at a time, alternating nodes, until the session's fuel is spent.
        let mut outcomes = Vec::new();
        for i in 0..12 {
            let session = hosts[i % hosts.len()]
                .session_named("fuel-1", None)
                .unwrap();
            outcomes.push(session.call(stats(i as i64)).await);
        }
        let completed = outcomes
            .iter()
            .filter(|r| r.status == Status::Completed)
            .count();
        assert!(completed >= 2, "{name}: {completed}");
        let last = outcomes
            .last()
            .unwrap()
            .error
            .clone()
            .expect("the budget ran out");
        assert_eq!(
            (
                last.stage,
                last.kind.as_str(),
                last.details["resource"].as_str()
            ),
            (Stage::Budget, "session_budget_exhausted", Some("fuel")),
            "{name}"
        );
        let used = hosts[0]
            .session_named("fuel-1", None)
            .unwrap()
            .used()
            .await
            .unwrap();
        assert!(
            used.fuel <= 200_000,
            "{name}: never more than the cap: {used:?}"
        );
        assert_eq!(last.details["limit"], 200_000);

        // A per-tool cap, across nodes (the nodes restarted: a name is one live process's).
        drop(hosts);
        let policy = POLICY
            .replace("calls = 5", "calls = 100")
            .replace("calls_per_session = 50", "calls_per_session = 3");
        let hosts = backend.hosts(&policy, cache.path()).await;
        let mut kinds = Vec::new();
        for i in 0..5 {
            let session = hosts[i % hosts.len()]
                .session_named("tools-1", None)
                .unwrap();
            let r = session.call(stats(i as i64)).await;
            kinds.push(
                r.error
                    .map(|e| e.kind)
                    .unwrap_or_else(|| "completed".into()),
            );
        }
        assert_eq!(
            kinds,
            [
                "completed",
                "completed",
                "completed",
                "tool_calls_exhausted",
                "tool_calls_exhausted"
            ],
            "{name}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_revocation_reaches_new_and_running_calls_on_every_node() {
    let cache = tempfile::tempdir().unwrap();
    for backend in Backend::all() {
        let name = backend.name();
        let hosts = backend
            .hosts(&POLICY.replace("calls = 5", ""), cache.path())
            .await;
        let (first, last) = (&hosts[0], &hosts[hosts.len() - 1]);
        assert_eq!(last.call(stats(1)).await.status, Status::Completed);

        // A call running on the last node, reading the clock until it is refused.
        let running = {
            let host = last.clone();
            tokio::spawn(async move {
                host.call(Proposal::new("hostile", r#"{"mode":"poll-clock"}"#))
                    .await
            })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        let revoked_at = Instant::now();
        first
            .revocations()
            .revoke(
                Revocation::Capability {
                    tool: "hostile".into(),
                    capability: Capability::Clock,
                },
                "suite",
            )
            .await
            .unwrap();
        let r = running.await.unwrap();
        assert_eq!(
            r.status,
            Status::ToolError,
            "{name}: {}",
            r.to_json_pretty()
        );
        assert_eq!(r.tool_error.as_ref().unwrap().code, "revoked", "{name}");

        // A new call on the other node is refused once the revocation reached it.
        first
            .revocations()
            .revoke(
                Revocation::Tool {
                    tool: "stats".into(),
                },
                "suite",
            )
            .await
            .unwrap();
        // `revoke` returned: every node has applied it, so the other node's very next call is
        // refused (a barrier, not a race with its listener).
        let refused = last.call(stats(2)).await;
        eprintln!(
            "{name}: the capability revocation reached a running call within {:?}",
            revoked_at.elapsed(),
        );
        assert_eq!(
            (
                refused.status,
                refused.stage,
                refused.error.map(|e| e.kind).as_deref()
            ),
            (Status::Refused, Stage::Permission, Some("revoked")),
            "{name}"
        );

        // Recorded durably: a node started afterwards knows it.
        drop(hosts);
        let again = backend.hosts(POLICY, cache.path()).await;
        let r = again[0].call(stats(3)).await;
        assert_eq!(r.error.unwrap().kind, "revoked", "{name}");
        assert_eq!(again[0].revocations().list().len(), 2, "{name}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn migrations_apply_once_step_by_step_and_a_newer_schema_is_refused() {
    let Some(cluster) = vak_tests::pg_cluster() else {
        return;
    };
    let url = cluster.url();
    let first = vak_host::store::postgres::migrate(&url).await.unwrap();
    assert_eq!(first.from, 0);
    let latest = *first.applied.last().expect("migrations applied");
    let again = vak_host::store::postgres::migrate(&url).await.unwrap();
    assert_eq!(
        (again.from, again.applied.len()),
        (latest, 0),
        "applied once"
    );

    // A database one step behind gets the last step only.
    cluster
        .psql(&format!(
            "DROP INDEX vak_records_tool_gseq, vak_records_stage_gseq,
                 vak_records_principal_gseq, vak_records_session_gseq;
             DELETE FROM vak_schema WHERE version = {latest}"
        ))
        .unwrap();
    let step = vak_host::store::postgres::migrate(&url).await.unwrap();
    assert_eq!((step.from, step.applied), (latest - 1, vec![latest]));

    // A schema from a newer vak is refused rather than written to.
    cluster
        .psql("INSERT INTO vak_schema (version, applied_by) VALUES (99, 'a newer vak')")
        .unwrap();
    let err = PgStore::connect(&url, PgOptions::new("n"))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), "store_schema_too_new", "{err}");
    assert!(!err.retryable());

    // A database out of reach at start: typed, retryable, never a panic.
    cluster.stop().unwrap();
    let err = PgStore::connect(&url, PgOptions::new("n"))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), "store_unavailable", "{err}");
    assert!(err.retryable());
}

//! Faults from the caller's side: call futures dropped at random points, and a full pool. The
//! host never panics, every started call leaves its record, and a full host says `busy`
//! (retryable) and recovers.

use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use vak_host::journal::{Durability, Filter, Journal};
use vak_host::{EngineSettings, HostBuilder, Policy, Proposal, Status};
use vak_tests::{guest, guests};

const POLICY: &str = r#"
[tools.hostile]
capabilities.clock = { zones = ["UTC"] }
capabilities.log = {}
caps = { wall_time_ms = 5_000 }
"#;

async fn host(dir: &std::path::Path, max_concurrent_calls: u32) -> (vak_host::Host, Arc<Journal>) {
    let journal = Arc::new(Journal::open(&dir.join("journal.db"), Durability::Committed).unwrap());
    let settings = EngineSettings {
        max_concurrent_calls,
        cache_dir: Some(dir.join("cache")),
        ..EngineSettings::default()
    };
    let host = HostBuilder::new()
        .policy(Policy::parse(POLICY, "test").unwrap())
        .engine_settings(settings)
        .cache_dir(Some(dir.join("cache")))
        .journal(journal.clone())
        .component("hostile", guest(guests::HOSTILE))
        .build()
        .await
        .unwrap();
    assert!(host.tool("hostile").is_some(), "{:#?}", host.examinations());
    (host, journal)
}

fn proposal(mode: &str) -> Proposal {
    Proposal::new("hostile", format!(r#"{{"mode":"{mode}","n":0}}"#))
}

#[tokio::test(flavor = "multi_thread")]
async fn dropped_call_futures_never_panic_and_every_call_leaves_its_record() {
    let dir = tempfile::tempdir().unwrap();
    let (host, journal) = host(dir.path(), 64).await;
    let session = host.session(None);
    // A small linear congruential generator: reproducible "random" drop points, no dependency.
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        seed >> 33
    };
    let modes = ["sleep", "spin-host", "ok", "poll-clock"];
    let mut ids = Vec::new();
    let mut tasks = tokio::task::JoinSet::new();
    let permits = Arc::new(tokio::sync::Semaphore::new(32));
    for i in 0..120 {
        let p = proposal(modes[i % modes.len()]);
        ids.push(p.call_id.clone());
        // Dropped after 0 to 40 ms: before the schema stage, during instantiation, mid-call.
        let after = Duration::from_micros(next() % 40_000);
        let session = session.clone();
        // At most 32 in flight, half the pool: a dropped call frees its slot only once its
        // task has seen the cancellation, and `busy` is not what this test is about.
        let permits = permits.clone();
        tasks.spawn(async move {
            let _permit = permits.acquire_owned().await.expect("open");
            tokio::time::timeout(after, session.call(p)).await.ok()
        });
    }
    let mut finished = 0;
    while let Some(joined) = tasks.join_next().await {
        // A panic anywhere in the lifecycle would surface here.
        if joined.expect("no call panics").is_some() {
            finished += 1;
        }
    }
    assert!(finished < ids.len(), "some calls must have been dropped");
    // Every call reaches its record, dropped or not: cancelled ones end promptly.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let everything = Filter {
            limit: Some(10_000),
            ..Filter::default()
        };
        let listed = journal.list(&everything).unwrap();
        // A call that is running shows by its `started` entry until its record is in.
        let all = ids.iter().all(|id| {
            listed
                .iter()
                .any(|l| &l.call_id == id && l.status != "running")
        });
        if all {
            let mut cancelled = 0;
            for id in &ids {
                let text = journal.show(id).unwrap().pop().expect("journaled").text;
                let record: serde_json::Value = serde_json::from_str(&text).unwrap();
                let record = record.get("record").unwrap_or(&record);
                if record["status"] == "completed" {
                    continue;
                }
                assert_eq!(record["error"]["kind"], "cancelled", "{record}");
                assert_eq!(record["error"]["retryable"], true, "{record}");
                cancelled += 1;
            }
            // Only `ok` can finish inside 40 ms; the other modes run until stopped, so each of
            // them was dropped and must say so. (A dropped `ok` may still have completed: its
            // task can end between the drop and the cancellation.)
            let long_running = ids.len() - ids.len() / modes.len();
            assert!(
                cancelled >= long_running,
                "{cancelled} cancelled, {long_running} long-running"
            );
            assert!(
                cancelled <= ids.len() - finished,
                "only dropped calls are cancelled"
            );
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "records missing after 20 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let verified = journal.verify(Some(&host.public_key())).unwrap();
    assert_eq!(verified.first_bad, None);
    assert_eq!(verified.records, ids.len() as u64);
    assert!(verified.interrupted.is_empty() && verified.running.is_empty());
    // And the host goes on serving.
    let r = session.call(proposal("ok")).await;
    assert_eq!(r.status, Status::Completed);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_full_pool_refuses_with_a_retryable_busy_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let (host, _journal) = host(dir.path(), 2).await;
    let stop = CancellationToken::new();
    let sleepers: Vec<_> = (0..2)
        .map(|_| {
            let (host, stop) = (host.clone(), stop.clone());
            tokio::spawn(async move {
                host.session(None)
                    .call_cancellable(proposal("sleep"), stop)
                    .await
            })
        })
        .collect();
    // Wait until both sleepers hold their pool slots.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let r = host.call(proposal("ok")).await;
    assert_eq!(r.status, Status::Failed, "{}", r.to_json_pretty());
    let e = r.error.as_ref().unwrap();
    assert_eq!((e.kind.as_str(), e.retryable), ("busy", true), "{e:?}");
    assert_eq!(e.details["limit"], 2);
    stop.cancel();
    for s in sleepers {
        assert_eq!(s.await.unwrap().status, Status::Failed);
    }
    let r = host.call(proposal("ok")).await;
    assert_eq!(r.status, Status::Completed, "{}", r.to_json_pretty());
}

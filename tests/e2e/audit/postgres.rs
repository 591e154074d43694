//! `vak audit serve --store postgres://…`: the same pages over every node's chain of a shared
//! store (a throwaway PostgreSQL cluster; skipped where PostgreSQL is not installed, mandatory
//! with `VAK_REQUIRE_PG`).

use super::support::{Answer, listed, request, serve, verified};
use serde_json::json;
use std::time::Duration;
use vak_host::store::Store;
use vak_host::store::postgres::{PgOptions, PgStore};
use vak_host::{HostBuilder, Policy, Proposal, Status};
use vak_tests::bundled;

/// The href of the page's "older" link, when it has one.
fn next_link(body: &str) -> Option<String> {
    let end = body.find("\" rel=\"next\"")?;
    let start = body[..end].rfind("href=\"")? + "href=\"".len();
    Some(body[start..end].replace("&amp;", "&"))
}

/// Two nodes write to one store; `vak audit serve --store` lists both nodes' calls (newest
/// committed first, paged without gap or overlap), filters by node, status and id text, shows
/// one call's record checked, verifies both chains on the integrity page and names a row
/// changed in the database; `--approvals` with `--store` is refused.
#[tokio::test(flavor = "multi_thread")]
async fn a_reviewer_reads_every_node_of_a_shared_store() {
    let Some(cluster) = vak_tests::pg_cluster() else {
        return;
    };
    let url = cluster.url();
    let dir = tempfile::tempdir().unwrap();

    // Calls, one after another, alternately on node-a and node-b: (id, node, status).
    let mut hosts = Vec::new();
    for node in ["node-a", "node-b"] {
        let store = PgStore::connect(&url, PgOptions::new(node))
            .await
            .expect("the shared store connects");
        let host = HostBuilder::new()
            .policy(Policy::parse("[tools.stats]\n", "test policy").unwrap())
            .cache_dir(Some(dir.path().join("cache")))
            .store(Store::Postgres(store))
            .component("stats", bundled("stats"))
            .build()
            .await
            .expect("host builds");
        hosts.push((node, host));
    }
    let proposals = [
        ("stats", json!({ "values": [1, 2, 3] }), Status::Completed),
        ("stats", json!({ "values": [4, 5] }), Status::Completed),
        ("stats", json!({ "values": [] }), Status::ToolError),
        ("no_such_tool", json!({}), Status::Refused),
        ("stats", json!({ "values": [6] }), Status::Completed),
    ];
    let mut made: Vec<(String, &str, Status)> = Vec::new();
    for (i, (tool, args, status)) in proposals.into_iter().enumerate() {
        let (node, host) = &hosts[i % 2];
        let r = host.call(Proposal::new(tool, args.to_string())).await;
        assert_eq!(r.status, status, "{r:?}");
        assert!(matches!(r.journaled, Some(Ok(_))), "{r:?}");
        made.push((r.call_id.clone(), node, status));
    }
    for (_, host) in &hosts {
        if let Store::Postgres(pg) = host.store() {
            pg.close().await;
        }
    }
    drop(hosts);

    let (_server, addr) = serve(dir.path(), &["--store", &url]).await;
    let get = |path: String| {
        let addr = addr.clone();
        async move { request(&addr, "GET", path, "127.0.0.1").await }
    };
    let ids = |of: &dyn Fn(&(String, &str, Status)) -> bool| -> Vec<String> {
        made.iter()
            .rev()
            .filter(|m| of(m))
            .map(|m| m.0.clone())
            .collect()
    };

    // Every node's calls, newest first.
    let all = get("/calls".into()).await;
    assert_eq!(all.status, 200, "{}", all.body);
    assert_eq!(listed(&all.body), ids(&|_| true), "{}", all.body);
    for node in ["node-a", "node-b"] {
        let page = get(format!("/calls?node={node}")).await;
        assert_eq!(
            listed(&page.body),
            ids(&|m| m.1 == node),
            "only {node}'s calls"
        );
    }
    let refused = get("/calls?status=refused".into()).await;
    assert_eq!(
        listed(&refused.body),
        ids(&|m| m.2 == Status::Refused),
        "{}",
        refused.body
    );
    let some = &made[2].0;
    let by_text = get(format!("/calls?q={}", &some[some.len() - 8..])).await;
    assert_eq!(listed(&by_text.body), vec![some.clone()]);

    // Pages of two follow each other without a gap or an overlap.
    let mut paged = Vec::new();
    let mut next = Some("/calls?size=2".to_string());
    while let Some(path) = next.take() {
        let page = get(path).await;
        assert_eq!(page.status, 200, "{}", page.body);
        let rows = listed(&page.body);
        assert!(rows.len() <= 2);
        paged.extend(rows);
        next = next_link(&page.body);
        assert!(paged.len() <= made.len() + 2, "paging ends");
    }
    assert_eq!(paged, ids(&|_| true), "every call once, in order");

    // One call's record, checked, on its node's chain.
    let (id, node, _) = &made[1];
    let call = get(format!("/call?id={id}")).await;
    assert_eq!(call.status, 200, "{}", call.body);
    assert!(call.body.contains("This entry checks out"), "{}", call.body);
    assert!(
        call.body.contains(&format!("chain {node} #")),
        "{}",
        call.body
    );

    let pictures = get("/pictures".into()).await;
    assert_eq!(pictures.status, 200, "{}", pictures.body);
    assert!(pictures.body.contains("<svg"), "{}", pictures.body);

    // Both chains shown and verified.
    let integrity = verified(&addr).await;
    assert!(integrity.body.contains("Journal ok"), "{}", integrity.body);
    for node in ["node-a", "node-b"] {
        assert!(
            integrity.body.contains(&format!(">{node}</a>")),
            "{node}'s chain is shown: {}",
            integrity.body
        );
    }

    // A row changed behind the store's back is named, on the integrity page and its call's.
    let (tampered, node, _) = &made[4];
    let place = cluster
        .psql(&format!(
            "SELECT node_seq FROM vak_records WHERE call_id = '{tampered}' AND kind = 'record'"
        ))
        .expect("psql");
    let place = place.trim();
    cluster
        .psql(&format!(
            "UPDATE vak_records SET record = replace(record, '[6]', '[7]') \
             WHERE call_id = '{tampered}' AND kind = 'record'"
        ))
        .expect("update");
    let integrity = verified_again(&addr).await;
    assert!(
        integrity.body.contains("Journal BAD at entry #")
            && integrity.body.contains(&format!(
                "chain {node} entry {place}: its content does not match"
            )),
        "{}",
        integrity.body
    );
    let call = get(format!("/call?id={tampered}")).await;
    assert!(
        call.body.contains("This entry does NOT check out"),
        "{}",
        call.body
    );

    // The inbox is one machine's state, not the shared store's.
    let refused = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(vak_tests::vak_binary())
            .args(["--store", &url, "audit", "serve", "--approvals"])
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("refused at once")
    .unwrap();
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("--approvals serves the inbox"), "{said}");
}

/// [`verified`], after a change the verifier may learn of late (PostgreSQL's table statistics
/// reach other sessions within about a second): asked again until the verdict is new.
async fn verified_again(addr: &str) -> Answer {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let page = verified(addr).await;
        if !page.body.contains("Journal ok") || std::time::Instant::now() > deadline {
            return page;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

//! The call contract before dispatch: provider proposals, permission and revocation, session
//! budgets. Each refusal names its stage and is never retryable.

use vak_host::capabilities::Capability;
use vak_host::proposal::providers::parse_document;
use vak_host::{Host, Proposal, Revocation, Stage, Status};
use vak_tests::{bundled, guest, guests, host_with};

async fn host(policy: &str, cache: &tempfile::TempDir) -> Host {
    host_with(
        &[
            ("clock", bundled("clock")),
            ("stats", bundled("stats")),
            ("hostile", guest(guests::HOSTILE)),
        ],
        policy,
        cache.path(),
    )
    .await
}

const POLICY: &str = r#"
[session]
calls = 3

[tools.clock]
capabilities.clock = { zones = ["*"] }

[tools.stats]
principals = ["alice"]
caps = { calls_per_session = 1 }

[tools.hostile]
capabilities.clock = { zones = ["UTC"] }
capabilities.log = {}
caps = { wall_time_ms = 5_000 }
"#;

#[tokio::test(flavor = "multi_thread")]
async fn every_provider_shape_runs_one_record_per_call() {
    let cache = tempfile::tempdir().unwrap();
    let host = host(POLICY, &cache).await;
    let docs = [
        (
            r#"{"choices":[{"message":{"tool_calls":[{"id":"c1","type":"function","function":{"name":"clock","arguments":"{\"zone\":\"UTC\"}"}},{"id":"c2","type":"function","function":{"name":"clock","arguments":"{\"zone\":"}}]}}]}"#,
            "openai-chat",
        ),
        (
            r#"{"output":[{"type":"function_call","call_id":"c1","name":"clock","arguments":"{\"zone\":\"UTC\"}"},{"type":"function_call","call_id":"c2","name":"nope","arguments":"{}"}]}"#,
            "openai-responses",
        ),
        (
            r#"{"content":[{"type":"tool_use","id":"c1","name":"clock","input":{"zone":"UTC"}},{"type":"tool_use","id":"c2","name":"clock","input":"UTC"}]}"#,
            "anthropic",
        ),
        (
            r#"{"candidates":[{"content":{"parts":[{"functionCall":{"name":"clock","args":{"zone":"UTC"}}},{"functionCall":{"args":{}}}]}}]}"#,
            "gemini",
        ),
    ];
    for (doc, provider) in docs {
        let proposals = parse_document(doc, None).unwrap();
        assert_eq!(proposals.len(), 2, "{provider}");
        let before = host.runtime().instances_created();
        let session = host.session(None);
        let good = session.call(proposals[0].clone()).await;
        assert_eq!(
            good.status,
            Status::Completed,
            "{provider}: {}",
            good.to_json_pretty()
        );
        assert_eq!(good.provider, provider);
        let bad = session.call(proposals[1].clone()).await;
        assert_eq!(
            (bad.status, bad.stage),
            (Status::Refused, Stage::Proposal),
            "{provider}"
        );
        assert!(!bad.error.as_ref().unwrap().retryable);
        assert_eq!(
            host.runtime().instances_created(),
            before + 1,
            "{provider}: the malformed call reached no instance"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_admits_exactly_its_budget() {
    let cache = tempfile::tempdir().unwrap();
    let host = host(POLICY, &cache).await;
    let session = host.session(Some("alice"));
    for _ in 0..3 {
        let r = session
            .call(Proposal::new("clock", r#"{"zone":"UTC"}"#))
            .await;
        assert_eq!(r.status, Status::Completed, "{}", r.to_json_pretty());
        assert_eq!(r.session_id, session.id());
    }
    let r = session
        .call(Proposal::new("clock", r#"{"zone":"UTC"}"#))
        .await;
    assert_eq!((r.status, r.stage), (Status::Refused, Stage::Budget));
    let e = r.error.unwrap();
    assert_eq!(e.kind, "session_calls_exhausted");
    assert_eq!(
        (e.details["limit"].as_u64(), e.details["used"].as_u64()),
        (Some(3), Some(3))
    );
    assert!(!e.retryable);
    assert_eq!(session.used().await.unwrap().calls, 3);
    assert!(
        session.used().await.unwrap().fuel > 0,
        "the ledger is charged with the fuel really used"
    );

    // Concurrent calls of one session: exactly 3 of 8 are admitted.
    let session = host.session(None);
    let calls = (0..8).map(|_| {
        let s = session.clone();
        tokio::spawn(async move { s.call(Proposal::new("clock", r#"{"zone":"UTC"}"#)).await })
    });
    let mut completed = 0;
    for c in calls {
        if c.await.unwrap().status == Status::Completed {
            completed += 1;
        }
    }
    assert_eq!(completed, 3);

    // A per-tool cap within a session.
    let session = host.session(Some("alice"));
    assert_eq!(
        session
            .call(Proposal::new("stats", r#"{"values":[1]}"#))
            .await
            .status,
        Status::Completed
    );
    let r = session
        .call(Proposal::new("stats", r#"{"values":[1]}"#))
        .await;
    assert_eq!(r.error.unwrap().kind, "tool_calls_exhausted");
}

#[tokio::test(flavor = "multi_thread")]
async fn principals_and_revocations_refuse_new_calls_at_permission() {
    let cache = tempfile::tempdir().unwrap();
    let host = host(POLICY, &cache).await;
    let r = host
        .session(Some("bob"))
        .call(Proposal::new("stats", r#"{"values":[1]}"#))
        .await;
    assert_eq!(
        (r.stage, r.error.unwrap().kind.as_str()),
        (Stage::Permission, "principal_not_allowed")
    );

    host.revocations()
        .revoke(
            Revocation::Tool {
                tool: "clock".into(),
            },
            "test",
        )
        .await
        .unwrap();
    let before = host.runtime().instances_created();
    let r = host.call(Proposal::new("clock", r#"{"zone":"UTC"}"#)).await;
    assert_eq!((r.status, r.stage), (Status::Refused, Stage::Permission));
    assert_eq!(r.error.unwrap().kind, "revoked");
    assert_eq!(host.runtime().instances_created(), before);

    host.revocations()
        .revoke(
            Revocation::Principal {
                principal: "alice".into(),
            },
            "test",
        )
        .await
        .unwrap();
    let r = host
        .session(Some("alice"))
        .call(Proposal::new("stats", r#"{"values":[1]}"#))
        .await;
    assert_eq!(r.error.unwrap().kind, "revoked");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_capability_revoked_mid_call_is_refused_at_its_next_use() {
    let cache = tempfile::tempdir().unwrap();
    let host = host(POLICY, &cache).await;
    let running = {
        let host = host.clone();
        tokio::spawn(async move {
            host.call(Proposal::new("hostile", r#"{"mode":"poll-clock"}"#))
                .await
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    host.revocations()
        .revoke(
            Revocation::Capability {
                tool: "hostile".into(),
                capability: Capability::Clock,
            },
            "mid-call",
        )
        .await
        .unwrap();
    let r = running.await.unwrap();
    assert_eq!(r.status, Status::ToolError, "{}", r.to_json_pretty());
    assert_eq!(r.tool_error.as_ref().unwrap().code, "revoked");
    let (ok, refused): (Vec<_>, Vec<_>) = r.receipts.iter().partition(|x| x.ok);
    assert!(!ok.is_empty(), "readings before the revocation");
    assert_eq!(
        refused.len(),
        1,
        "one refused use after it, then the tool stopped"
    );
    assert!(
        refused[0].outcome["revoked"]
            .as_str()
            .unwrap()
            .contains("mid-call")
    );
    // Every reading came before the refusal.
    assert!(r.receipts.last().is_some_and(|x| !x.ok));
}

const INVOKE_POLICY: &str = r#"
[session]
calls = 10

[tools.clock]
capabilities.clock = { zones = ["*"] }

[tools.stats]

[tools.parent]
capabilities.invoke = { tools = ["clock"] }
"#;

async fn parent_host(cache: &tempfile::TempDir) -> Host {
    let host = host_with(
        &[
            ("clock", bundled("clock")),
            ("stats", bundled("stats")),
            ("parent", guest(guests::PARENT)),
        ],
        INVOKE_POLICY,
        cache.path(),
    )
    .await;
    assert!(host.tool("parent").is_some(), "{:#?}", host.examinations());
    host
}

#[tokio::test(flavor = "multi_thread")]
async fn a_child_run_goes_through_the_lifecycle_and_is_nested_in_the_record() {
    use vak_host::evidence::Support;
    let cache = tempfile::tempdir().unwrap();
    let host = parent_host(&cache).await;
    let session = host.session(None);
    let r = session
        .call(Proposal::new("parent", r#"{"mode":"invoke"}"#))
        .await;
    assert_eq!(r.status, Status::Completed, "{}", r.to_json_pretty());
    assert_eq!(r.children.len(), 1);
    let child = &r.children[0];
    assert_eq!((child.status, child.depth), (Status::Completed, 1));
    assert_eq!(child.parent_call_id.as_deref(), Some(r.call_id.as_str()));
    assert_eq!(child.provider, "invoke");
    assert_eq!(child.receipts.len(), 1, "the child's clock reading");
    assert!(
        child.limits.unwrap().fuel <= r.limits.unwrap().fuel,
        "the child lives within the parent's fuel"
    );
    assert_eq!(r.receipts[0].capability, Capability::Invoke);
    assert_eq!(r.evidence[0].support, Support::Supported);
    assert_eq!(
        session.used().await.unwrap().calls,
        2,
        "the child is charged to the session"
    );

    // A tool the policy does not let it invoke.
    let r = host
        .call(Proposal::new("parent", r#"{"mode":"invoke-other"}"#))
        .await;
    assert_eq!(r.status, Status::ToolError);
    assert!(r.tool_error.unwrap().message.contains("does not let"));
    assert!(r.children.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_childs_record_survives_its_parent_trapping() {
    let cache = tempfile::tempdir().unwrap();
    let host = parent_host(&cache).await;
    let r = host
        .call(Proposal::new("parent", r#"{"mode":"invoke-then-panic"}"#))
        .await;
    assert_eq!(
        r.error.as_ref().unwrap().kind,
        "guest_panicked",
        "{}",
        r.to_json_pretty()
    );
    assert_eq!(r.children.len(), 1);
    assert_eq!(r.children[0].status, Status::Completed);
    assert_eq!(r.children[0].receipts.len(), 1);
    assert_eq!(
        r.all_receipts().len(),
        2,
        "the parent's invoke receipt and the child's reading"
    );
}

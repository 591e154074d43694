//! Admission: imports ⊆ claims ⊆ policy, refusals that name what is wrong, the AOT cache.

use vak_host::admission::ImportClass;
use vak_host::capabilities::Capability;
use vak_host::{HostBuilder, Policy, Proposal, Stage, Status, Verdict};
use vak_tests::{bundled, guest, guests, host_with};

fn refusal(exam: &vak_host::Examination) -> (String, String) {
    match &exam.verdict {
        Verdict::Refused { kind, reason } => (kind.clone(), reason.clone()),
        Verdict::Admitted { .. } => panic!("{} was admitted", exam.source),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_component_importing_an_unclaimed_capability_is_refused() {
    let cache = tempfile::tempdir().unwrap();
    let policy = "[tools.undeclared]\ncapabilities.clock = { zones = [\"*\"] }\n";
    let host = host_with(
        &[("undeclared", guest(guests::UNDECLARED))],
        policy,
        cache.path(),
    )
    .await;
    assert!(host.tool("undeclared").is_none());
    let (kind, reason) = refusal(&host.examinations()[0]);
    assert_eq!(kind, "unclaimed_imports");
    assert!(reason.contains("vak:tool/clock@0.2.0"), "{reason}");
    // The reviewer still sees what it imports.
    assert!(host.examinations()[0].imports.iter().any(|i| i.class
        == ImportClass::Capability {
            capability: Capability::Clock
        }));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_claim_the_policy_does_not_grant_is_refused() {
    let cache = tempfile::tempdir().unwrap();
    // clock claims any zone; this policy grants one.
    let narrow = "[tools.clock]\ncapabilities.clock = { zones = [\"Europe/Paris\"] }\n";
    let host = host_with(&[("clock", bundled("clock"))], narrow, cache.path()).await;
    let (kind, reason) = refusal(&host.examinations()[0]);
    assert_eq!(kind, "not_granted");
    assert!(
        reason.contains("clock") && reason.contains("Europe/Paris"),
        "{reason}"
    );

    // Named, but without the capability.
    let host = host_with(
        &[("clock", bundled("clock"))],
        "[tools.clock]\n",
        cache.path(),
    )
    .await;
    assert_eq!(refusal(&host.examinations()[0]).0, "not_granted");

    // Not named at all: deny by default.
    let host = host_with(
        &[("clock", bundled("clock"))],
        "[tools.stats]\n",
        cache.path(),
    )
    .await;
    assert_eq!(refusal(&host.examinations()[0]).0, "not_in_policy");
    let r = host.call(Proposal::new("clock", r#"{"zone":"UTC"}"#)).await;
    assert_eq!((r.status, r.stage), (Status::Refused, Stage::Proposal));
    assert_eq!(r.error.unwrap().kind, "unknown_tool");
}

#[tokio::test(flavor = "multi_thread")]
async fn bytes_that_are_not_a_component_are_refused() {
    let cache = tempfile::tempdir().unwrap();
    let host = host_with(&[("junk", b"\0asm not really".to_vec())], "", cache.path()).await;
    assert_eq!(refusal(&host.examinations()[0]).0, "compile_failed");
    assert_eq!(host.tools().count(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_second_start_loads_from_the_aot_cache_without_compiling() {
    let cache = tempfile::tempdir().unwrap();
    let build = || async {
        HostBuilder::new()
            .policy(Policy::default_policy())
            .bundled_tools()
            .cache_dir(Some(cache.path().to_path_buf()))
            .build()
            .await
            .unwrap()
    };
    let first = build().await;
    let bundled = vak_host::bundled::TOOLS.len() as u64;
    assert_eq!(first.runtime().cache().compiles(), bundled);
    assert_eq!(first.runtime().cache().hits(), 0);
    let second = build().await;
    assert_eq!(
        second.runtime().cache().compiles(),
        0,
        "nothing is recompiled"
    );
    assert_eq!(second.runtime().cache().hits(), bundled);
    let r = second
        .call(Proposal::new("stats", r#"{"values":[1,2,3]}"#))
        .await;
    assert_eq!(r.status, Status::Completed, "{}", r.to_json_pretty());

    // A corrupt artifact is recompiled, not trusted.
    for entry in std::fs::read_dir(cache.path()).unwrap() {
        std::fs::write(entry.unwrap().path(), b"garbage").unwrap();
    }
    let third = build().await;
    assert_eq!(third.runtime().cache().compiles(), bundled);
    assert_eq!(
        third.tools().count(),
        3,
        "clock, stats, compare; replace and research need a policy"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_tool_or_malformed_arguments_never_reach_an_instance() {
    let cache = tempfile::tempdir().unwrap();
    let host = host_with(
        &[("clock", bundled("clock"))],
        vak_host::policy::DEFAULT_POLICY,
        cache.path(),
    )
    .await;
    let before = host.runtime().instances_created();
    for (tool, args, kind) in [
        ("nope", "{}", "unknown_tool"),
        ("", "{}", "missing_tool_name"),
        ("clock", "{\"zone\":", "arguments_not_json"),
        ("clock", "[\"UTC\"]", "arguments_not_object"),
        (
            "clock",
            r#"{"zone":"UTC","zone":"Mars/Olympus"}"#,
            "arguments_not_json",
        ),
    ] {
        let r = host.call(Proposal::new(tool, args)).await;
        assert_eq!(r.status, Status::Refused);
        let e = r.error.unwrap();
        assert_eq!(
            (e.kind.as_str(), e.stage, e.retryable),
            (kind, Stage::Proposal, false)
        );
    }
    assert_eq!(host.runtime().instances_created(), before);
}

#[tokio::test(flavor = "multi_thread")]
async fn schema_violations_name_both_pointers_and_never_reach_the_tool() {
    let cache = tempfile::tempdir().unwrap();
    let host = host_with(
        &[("clock", bundled("clock")), ("stats", bundled("stats"))],
        vak_host::policy::DEFAULT_POLICY,
        cache.path(),
    )
    .await;
    let before = host.runtime().instances_created();
    let cases = [
        ("clock", r#"{"zone":5}"#, "/zone", "/properties/zone/type"),
        (
            "clock",
            r#"{"zone":"UTC","extra":1}"#,
            "/extra",
            "/additionalProperties",
        ),
        (
            "stats",
            r#"{"values":[1,"2",3]}"#,
            "/values/1",
            "/properties/values/items/type",
        ),
    ];
    for (tool, args, instance, keyword) in cases {
        let r = host.call(Proposal::new(tool, args)).await;
        assert_eq!(
            (r.status, r.stage),
            (Status::Refused, Stage::Schema),
            "{args}"
        );
        let e = r.error.unwrap();
        assert_eq!((e.kind.as_str(), e.retryable), ("schema_violation", false));
        let v = &e.details["violations"][0];
        assert_eq!(
            (v["instance"].as_str(), v["keyword"].as_str()),
            (Some(instance), Some(keyword)),
            "{args}"
        );
    }
    assert_eq!(
        host.runtime().instances_created(),
        before,
        "no instance for a refused call"
    );
    // Keywords the boundary does not enforce are reported at admission (schemars emits `format`).
    let stats = host.tool("stats").unwrap();
    assert!(
        stats
            .schema
            .not_enforced
            .iter()
            .any(|p| p.ends_with("/format")),
        "{:?}",
        stats.schema.not_enforced
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_schema_with_a_remote_ref_is_refused_at_admission() {
    let cache = tempfile::tempdir().unwrap();
    let host = host_with(
        &[("remote-ref", guest(guests::REMOTE_REF))],
        "[tools.remote-ref]\n",
        cache.path(),
    )
    .await;
    let (kind, reason) = refusal(&host.examinations()[0]);
    assert_eq!(kind, "schema_refused");
    assert!(
        reason.contains("https://schemas.example.com/x.json") && reason.contains("never resolved"),
        "{reason}"
    );
    assert!(host.tool("remote-ref").is_none());
}

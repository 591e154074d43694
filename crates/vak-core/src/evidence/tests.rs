use super::*;
use serde_json::json;

fn receipt(id: &str, capability: Capability, ok: bool) -> Receipt {
    Receipt {
        id: id.into(),
        call_id: id.rsplit_once('/').map(|p| p.0).unwrap_or("c").into(),
        capability,
        operation: "now".into(),
        request: json!({}),
        outcome: json!({}),
        ok,
        digest: "ab".repeat(32),
        at: String::new(),
    }
}

/// A clock reading of 2026-12-02T10:00:00Z in `zone`, as the clock broker records it.
fn reading(id: &str, zone: &str) -> Receipt {
    let at: jiff::Timestamp = "2026-12-02T10:00:00Z".parse().unwrap();
    let zoned = at.to_zoned_datetime(jiff::tz::TimeZone::get(zone).unwrap());
    let mut r = receipt(id, Capability::Clock, true);
    r.request = json!({ "zone": zone });
    r.outcome = json!({
        "instant": zoned.to_string(),
        "unix_seconds": at.as_second(),
        "nanos": 0,
        "offset_seconds": zoned.offset().seconds(),
        "zone": zone,
    });
    r
}

fn item(
    id: &str,
    kind: &str,
    receipt: Option<&str>,
    supports: &[&str],
    from: &[&str],
) -> EvidenceRecord {
    EvidenceRecord {
        id: id.into(),
        kind: kind.into(),
        supports: supports.iter().map(|s| s.to_string()).collect(),
        receipt: receipt.map(str::to_string),
        digest: None,
        derived_from: from.iter().map(|s| s.to_string()).collect(),
        note: String::new(),
    }
}

fn run(
    items: &[EvidenceRecord],
    receipts: &[Receipt],
    schema: Option<&str>,
    payload: Option<&serde_json::Value>,
) -> Vec<CheckedEvidence> {
    let registry = Registry::builtin();
    let bodies = Bodies::none();
    let subject = Subject {
        schema_id: schema,
        payload,
        registry: &registry,
        bodies: &bodies,
    };
    check(items, receipts, &subject).unwrap()
}

#[test]
fn a_models_completion_backs_no_observation_or_citation() {
    let mut sample = receipt("c/1", Capability::Client, true);
    sample.operation = "sample".into();
    let mut elicit = receipt("c/2", Capability::Client, true);
    elicit.operation = "elicit".into();
    let items = [
        item("seen", "observed", Some("c/1"), &[], &[]),
        item("cited", "cited", Some("c/1"), &[], &[]),
        item("answer", "observed", Some("c/2"), &[], &[]),
    ];
    let checked = run(&items, &[sample, elicit], None, None);
    assert_eq!(checked[0].support, Support::Unsupported);
    assert!(
        checked[0]
            .diagnostics
            .iter()
            .any(|d| d.contains("synthesized")),
        "{:?}",
        checked[0].diagnostics
    );
    assert_eq!(checked[1].support, Support::Unsupported);
    // The person's answer is something the host witnessed.
    assert_eq!(
        checked[2].support,
        Support::Supported,
        "{:?}",
        checked[2].diagnostics
    );
}

#[test]
fn each_item_is_held_against_this_calls_receipts() {
    let receipts = [
        reading("c/1", "UTC"),
        receipt("c/2", Capability::Clock, false),
    ];
    let payload = json!({"instant": receipts[0].outcome["instant"], "unix_seconds": 1, "offset_seconds": 0,
        "zone": "UTC", "observed_at": "2026-12-02T10:00:00Z", "max_age_seconds": 60});
    let mut wrong_digest = item("digest", "observed", Some("c/1"), &["/zone"], &[]);
    wrong_digest.digest = Some("00".repeat(32));
    let items = [
        item("ok", "observed", Some("c/1"), &["/instant", "/zone"], &[]),
        item("fake", "observed", Some("c/9"), &[], &[]),
        item("other", "observed", Some("d/1"), &[], &[]),
        item("refused", "observed", Some("c/2"), &[], &[]),
        item("cite-clock", "cited", Some("c/1"), &[], &[]),
        item("dangling", "observed", Some("c/1"), &["/missing"], &[]),
        wrong_digest,
        item("sum", "computed", None, &["/unix_seconds"], &["ok"]),
        item("bad-sum", "computed", None, &[], &["fake"]),
        item("chain", "computed", None, &[], &["bad-sum"]),
        item("nothing", "computed", None, &[], &[]),
        item("opinion", "synthesized", None, &[], &[]),
        item("ok", "observed", Some("c/1"), &[], &[]),
        item(
            "forged-unix",
            "observed",
            Some("c/1"),
            &["/unix_seconds"],
            &[],
        ),
        item(
            "contract",
            "observed",
            Some("c/1"),
            &["/max_age_seconds"],
            &[],
        ),
    ];
    let checked = run(
        &items,
        &receipts,
        Some("vak.temporal.instant/1"),
        Some(&payload),
    );
    let verdicts: Vec<(&str, Support)> = checked
        .iter()
        .map(|c| (c.item.id.as_str(), c.support))
        .collect();
    use Support::*;
    assert_eq!(
        verdicts,
        [
            ("ok", Supported),
            ("fake", Unsupported),
            ("other", Unsupported),
            ("refused", Unsupported),
            ("cite-clock", Unsupported),
            ("dangling", Unsupported),
            ("digest", Unsupported),
            ("sum", Supported),
            ("bad-sum", Unsupported),
            ("chain", Unsupported),
            ("nothing", Unsupported),
            ("opinion", Synthesized),
            ("ok", Unsupported),
            ("forged-unix", Unsupported),
            ("contract", Unsupported),
        ]
    );
    assert_eq!(checked[0].upholds, ["/instant", "/zone"]);
    assert!(checked[1].diagnostics[0].contains("no such receipt"));
    assert!(checked[2].diagnostics[0].contains("no such receipt"));
    assert!(checked[6].diagnostics[0].contains("digest"));
    // An unknown computation stands on its sources but backs no field.
    assert!(checked[7].upholds.is_empty());
    assert!(
        checked[13].diagnostics[0].contains("/unix_seconds is 1")
            && checked[13].diagnostics[0]
                .contains(&receipts[0].outcome["unix_seconds"].to_string()),
        "{:?}",
        checked[13].diagnostics
    );
    assert!(
        checked[14].diagnostics[0].contains("tool's own statement"),
        "{:?}",
        checked[14].diagnostics
    );
    assert!(
        checked
            .iter()
            .filter(|c| c.support == Unsupported)
            .all(|c| !c.diagnostics.is_empty())
    );
    // The tool's items are carried unchanged.
    assert!(checked.iter().zip(&items).all(|(c, i)| &c.item == i));
}

#[test]
fn an_embedders_bindings_are_held_like_the_builtin_ones() {
    use crate::registry::{FieldBinding, Relation, Source};
    let mut registry = Registry::builtin();
    registry
        .register_bound(
            "acme.meeting/1",
            json!({"type": "object", "required": ["zone", "title"]}),
            vec!["/zone".into(), "/title".into()],
            vec![
                FieldBinding::receipt(
                    "/zone",
                    &[ItemKind::Observed],
                    &[Source::new(Capability::Clock, "now")],
                    Relation::Outcome("/zone".into()),
                ),
                FieldBinding::declared("/title"),
            ],
        )
        .unwrap();
    let receipts = [reading("c/1", "Europe/Paris")];
    let bodies = Bodies::none();
    let verdict = |zone: &str| {
        let payload = json!({"zone": zone, "title": "standup"});
        let subject = Subject {
            schema_id: Some("acme.meeting/1"),
            payload: Some(&payload),
            registry: &registry,
            bodies: &bodies,
        };
        let items = [item("r", "observed", Some("c/1"), &[""], &[])];
        check(&items, &receipts, &subject).unwrap().remove(0)
    };
    let honest = verdict("Europe/Paris");
    assert_eq!(honest.support, Support::Supported, "{honest:?}");
    assert_eq!(honest.upholds, ["/zone"]);
    let forged = verdict("Asia/Tokyo");
    assert_eq!(forged.support, Support::Unsupported);
    assert!(
        forged.diagnostics[0].contains("\"Asia/Tokyo\""),
        "{forged:?}"
    );
    assert!(
        registry
            .register_bound(
                "acme.bad/1",
                json!({}),
                vec![],
                vec![FieldBinding::computed(
                    "zone",
                    crate::registry::Computation::Mean,
                    &["/x"]
                )],
            )
            .is_err(),
        "a pattern is a JSON Pointer"
    );
}

#[test]
fn a_cycle_of_computed_items_stands_on_nothing() {
    let items = [
        item("a", "computed", None, &[], &["b"]),
        item("b", "computed", None, &[], &["c"]),
        item("c", "computed", None, &[], &["a"]),
        item("d", "computed", None, &[], &["a"]),
    ];
    let checked = run(&items, &[], None, None);
    assert!(
        checked.iter().all(|c| c.support == Support::Unsupported),
        "{checked:#?}"
    );
}

fn chain(n: usize) -> Vec<CheckedEvidence> {
    let mut items = vec![item("0", "synthesized", None, &[], &[])];
    for i in 1..n {
        items.push(item(
            &i.to_string(),
            "computed",
            None,
            &[],
            &[&(i - 1).to_string()],
        ));
    }
    // A synthesized root: an unknown computation on it is unsupported, and so is every
    // item after it, each settled once.
    items
        .into_iter()
        .map(|i| CheckedEvidence {
            support: if i.kind == "computed" {
                Support::Supported
            } else {
                Support::Synthesized
            },
            item: i,
            stored_item: None,
            diagnostics: Vec::new(),
            upholds: Vec::new(),
            recomputed: Vec::new(),
        })
        .collect()
}

#[test]
fn settling_a_chain_is_linear_in_its_length() {
    // Built from the end, so a walk that started at the front would meet each item late.
    let mut small = chain(3_000);
    small.reverse();
    let mut large = chain(30_000);
    large.reverse();
    let flags = vec![false; small.len()];
    let steps_small = settle_computed(&mut small, &flags);
    let flags = vec![false; large.len()];
    let steps_large = settle_computed(&mut large, &flags);
    assert!(
        small
            .iter()
            .chain(&large)
            .filter(|c| c.item.kind == "computed")
            .all(|c| c.support == Support::Unsupported)
    );
    assert!(
        steps_large <= 20 * steps_small,
        "10x the items took {steps_large} steps against {steps_small}"
    );
    // Linear exactly: each item is entered once and each reference followed once.
    assert!(steps_large <= 2 * 30_000 + 30_000, "{steps_large}");
}

#[test]
fn too_much_evidence_is_refused_as_a_whole() {
    let registry = Registry::builtin();
    let bodies = Bodies::none();
    let subject = Subject {
        schema_id: None,
        payload: None,
        registry: &registry,
        bodies: &bodies,
    };
    let many: Vec<EvidenceRecord> = (0..=MAX_EVIDENCE_ITEMS)
        .map(|i| item(&i.to_string(), "synthesized", None, &[], &[]))
        .collect();
    let e = check(&many, &[], &subject).unwrap_err();
    assert_eq!(e.kind(), "too_much_evidence");
    assert_eq!(e.stage(), Stage::Result);
    assert!(!e.retryable());
    let wide = [item(
        "wide",
        "computed",
        None,
        &[],
        &vec!["x"; MAX_REFERENCES + 1],
    )];
    assert!(matches!(
        check(&wide, &[], &subject),
        Err(EvidenceError::TooManyReferences { .. })
    ));
}

//! Outcome and projection: a card only where it is earned, a label that never says verified
//! without host-backed evidence, no domain guessed from field names, no delta from unaligned
//! series, and the tool's own document and bytes unchanged whatever the renderer.

use serde_json::{Value, json};
use vak_host::outcome::Requirement;
use vak_host::projection::RendererCaps;
use vak_host::{CallRecord, Host, Proposal, Status};
use vak_tests::{bundled, guest, guests, host_with};

const POLICY: &str = r#"
[tools.clock]
capabilities.clock = { zones = ["*"] }
[tools.compare]
[tools.echo]
capabilities.clock = { zones = ["UTC"] }
"#;

async fn host(cache: &tempfile::TempDir) -> Host {
    host_with(
        &[
            ("clock", bundled("clock")),
            ("compare", bundled("compare")),
            ("echo", guest(guests::ECHO)),
        ],
        POLICY,
        cache.path(),
    )
    .await
}

fn echo(schema: Option<&str>, payload: Value, markdown: &str, observed: &[&str]) -> Proposal {
    let mut args = json!({ "markdown": markdown, "observed": observed });
    if let Some(s) = schema {
        args["schema"] = json!(s);
        args["payload"] = json!(payload.to_string());
    }
    Proposal::new("echo", args.to_string())
}

fn form(r: &CallRecord) -> (&str, &str) {
    (
        r.projection.as_ref().map_or("", |p| p.form.as_str()),
        r.outcome.as_ref().map_or("", |o| o.label.as_str()),
    )
}

fn projection(r: &CallRecord) -> &vak_host::projection::Projection {
    r.projection.as_ref().expect("a projection")
}

fn temporal(now: i64) -> Value {
    json!({"instant": "2026-12-02T10:00:00Z", "unix_seconds": now, "offset_seconds": 0, "zone": "UTC",
           "observed_at": "2026-12-02T10:00:00Z", "max_age_seconds": 60})
}

#[tokio::test(flavor = "multi_thread")]
async fn each_domain_earns_a_card_only_with_its_material_fields() {
    let cache = tempfile::tempdir().unwrap();
    let host = host(&cache).await;
    let now = jiff::Timestamp::now().as_second();
    let cards = RendererCaps::terminal();

    // temporal: the bundled clock, checked for freshness
    let r = host
        .call(
            Proposal::new("clock", r#"{"zone":"UTC"}"#)
                .require(Requirement::Freshness {
                    max_age_seconds: 60,
                })
                .render_for(cards.clone()),
        )
        .await;
    assert_eq!(form(&r), ("card", "verified"), "{}", r.to_json_pretty());

    let cases = [
        (
            "vak.temporal.instant/1",
            temporal(now),
            vec!["/instant", "/zone"],
        ),
        (
            "vak.research.findings/1",
            json!({"findings": [{"claim": "c", "sources": [{"url": "u"}], "evidence": ["reading"]}]}),
            vec!["/findings"],
        ),
        (
            "vak.coding.change/1",
            json!({"files": [{"path": "a", "before_sha256": "x", "after_sha256": "y"}], "verification": {"method": "read-back", "matches": true}}),
            vec!["/files", "/verification"],
        ),
        (
            "vak.data.comparison/1",
            json!({"series": [
            {"name": "a", "period": {"start": "2026-11-01", "end": "2026-11-07"}, "unit": "ms", "basis": "mean", "value": 3.0},
            {"name": "b", "period": {"start": "2026-11-01", "end": "2026-11-07"}, "unit": "ms", "basis": "mean", "value": 4.0}]}),
            vec!["/series"],
        ),
    ];
    for (schema, payload, observed) in cases {
        // The fields are there: a card. But the echo's clock reading recorded none of these
        // values, so the item resting on it is refused and the label is not `verified` (the
        // honest twins, over receipts that did record them, are in tests/e2e/evidence.rs).
        let r = host
            .call(echo(Some(schema), payload.clone(), "doc", &observed).render_for(cards.clone()))
            .await;
        assert_eq!(
            form(&r),
            ("card", "unverified"),
            "{schema}: {}",
            r.to_json_pretty()
        );
        assert_eq!(
            r.evidence[0].support,
            vak_host::evidence::Support::Unsupported,
            "{schema}"
        );

        // The same payload with a material field removed: a document, with a diagnostic.
        let mut broken = payload.clone();
        let first_material = observed[0].trim_start_matches('/');
        broken.as_object_mut().unwrap().remove(first_material);
        let r = host
            .call(echo(Some(schema), broken, "doc", &observed).render_for(cards.clone()))
            .await;
        assert_eq!(r.status, Status::Completed);
        assert_eq!(form(&r).0, "document", "{schema}");
        assert_ne!(form(&r).1, "verified", "{schema}");
        assert!(!projection(&r).diagnostics.is_empty(), "{schema}");

        // Without host-backed evidence: still a card (its fields are there), never verified.
        let r = host
            .call(echo(Some(schema), payload, "doc", &[]).render_for(cards.clone()))
            .await;
        assert_eq!(
            form(&r),
            ("card", "unverified"),
            "{schema}: {}",
            r.to_json_pretty()
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn no_domain_is_guessed_and_no_delta_is_invented() {
    let cache = tempfile::tempdir().unwrap();
    let host = host(&cache).await;
    let now = jiff::Timestamp::now().as_second();
    // Looks temporal, names no registered schema.
    let r = host
        .call(
            echo(Some("acme.time/7"), temporal(now), "doc", &["/instant"])
                .render_for(RendererCaps::terminal()),
        )
        .await;
    assert_eq!(form(&r).0, "document");
    assert_ne!(form(&r).1, "verified");

    // Unaligned periods: the aligned requirement is unmet, no card, and no delta anywhere.
    let unaligned = json!({"series": [
        {"name": "this week", "period": {"start": "2026-11-23", "end": "2026-11-29"}, "unit": "ms", "basis": "mean", "value": 3.0},
        {"name": "last month", "period": {"start": "2026-10-01", "end": "2026-10-31"}, "unit": "s", "basis": "p99", "value": 4.0}]});
    let r = host
        .call(
            echo(
                Some("vak.data.comparison/1"),
                unaligned,
                "two figures",
                &["/series"],
            )
            .require(Requirement::AlignedComparison)
            .render_for(RendererCaps::html()),
        )
        .await;
    assert_eq!(form(&r).0, "document", "{}", r.to_json_pretty());
    assert!(
        r.outcome
            .as_ref()
            .expect("an outcome")
            .requirements
            .iter()
            .any(|o| o.requirement == "aligned_comparison"
                && o.decision == vak_host::outcome::Decision::Unmet)
    );
    let projection = serde_json::to_string(&r.projection).unwrap();
    assert!(
        !projection.contains("delta"),
        "no delta in the projection: {projection}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_renderer_decides_the_form_and_the_original_never_changes() {
    let cache = tempfile::tempdir().unwrap();
    let host = host(&cache).await;
    let now = jiff::Timestamp::now().as_second();
    let mut kept = Vec::new();
    for (caps, expected) in [
        (RendererCaps::terminal(), "card"),
        (RendererCaps::markdown(), "document"),
        (RendererCaps::plain_text(), "plain_text"),
        (
            RendererCaps {
                name: "other".into(),
                markdown: true,
                html: false,
                cards: vec!["vak.coding.change/1".into()],
            },
            "document",
        ),
    ] {
        let r = host
            .call(
                echo(
                    Some("vak.temporal.instant/1"),
                    temporal(now),
                    "**same** doc",
                    &["/instant"],
                )
                .render_for(caps.clone()),
            )
            .await;
        assert_eq!(form(&r).0, expected, "{}", caps.name);
        let result = r.result.as_ref().unwrap();
        assert_eq!(
            result.markdown, "**same** doc",
            "the document is kept unchanged"
        );
        assert_eq!(projection(&r).original_digest, result.digest);
        kept.push((result.markdown.clone(), result.payload_json.clone()));
    }
    assert!(
        kept.windows(2).all(|w| w[0] == w[1]),
        "the same document and payload bytes every time"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn html_escapes_what_a_tool_returns() {
    let cache = tempfile::tempdir().unwrap();
    let host = host(&cache).await;
    let now = jiff::Timestamp::now().as_second();
    let mut payload = temporal(now);
    payload["zone"] = json!("<script>alert(1)</script>");
    let r = host
        .call(
            echo(
                Some("vak.temporal.instant/1"),
                payload,
                "<img src=x onerror=alert(2)>",
                &["/instant", "/zone"],
            )
            .render_for(RendererCaps::html()),
        )
        .await;
    let page = &projection(&r).rendered;
    assert!(
        !page.contains("<script>") && !page.contains("<img"),
        "{page}"
    );
    assert!(
        page.contains("&lt;script&gt;") && page.contains("&lt;img"),
        "{page}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_compare_tool_compares_only_aligned_figures() {
    let cache = tempfile::tempdir().unwrap();
    let host = host(&cache).await;
    let figure = |name: &str, start: &str, end: &str, unit: &str, basis: &str, value: f64| json!({"name": name, "period": {"start": start, "end": end}, "unit": unit, "basis": basis, "value": value});
    let aligned = json!({
        "baseline": figure("last week", "2026-11-16", "2026-11-22", "ms", "p99", 120.0),
        "current": figure("this week", "2026-11-16", "2026-11-22", "ms", "p99", 95.0)});
    let r = host
        .call(Proposal::new("compare", aligned.to_string()).render_for(RendererCaps::terminal()))
        .await;
    assert_eq!(
        form(&r),
        ("card", "unverified"),
        "caller-given figures are never verified: {}",
        r.to_json_pretty()
    );
    assert!(projection(&r).rendered.contains("/delta/value: -25"));

    let unaligned = json!({
        "baseline": figure("last month", "2026-10-01", "2026-10-31", "ms", "mean", 120.0),
        "current": figure("this week", "2026-11-23", "2026-11-29", "s", "p99", 0.095)});
    let r = host
        .call(Proposal::new("compare", unaligned.to_string()).render_for(RendererCaps::html()))
        .await;
    assert_eq!(form(&r).0, "document");
    let payload: Value =
        serde_json::from_str(r.result.as_ref().unwrap().payload_json.as_deref().unwrap()).unwrap();
    assert!(
        payload.get("delta").is_none(),
        "no delta from unaligned figures"
    );
    assert!(
        !serde_json::to_string(&r.projection)
            .unwrap()
            .contains("delta")
    );
}

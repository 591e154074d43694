//! One call: its record laid out (stages, limits against usage, the grant, the arguments as
//! recorded, receipts, evidence with verdicts, outcome and projection), with the entry's check
//! (its hash, its links in its chain, its signature) and links to related calls.
//!
//! The record is read as JSON, not as a `CallRecord`: an entry changed in the database, or
//! written by another version, is still shown (with its failed check) rather than hidden.

use super::super::Source;
use super::payload::{self, Payload};
use super::{Page, call_href, param, query_href, shown};
use crate::journal::{Kind, Shown};
use maud::{Markup, html};
use serde_json::Value;

/// The page of the call `?id=` names (vak's call id, or a provider's: a list when several
/// calls have it).
pub fn page(journal: &dyn Source, query: &[(String, String)]) -> Page {
    let Some(id) = param(query, "id") else {
        return Page::bad_request("Which call? /call?id=CALL_ID");
    };
    let found = match journal.show(id) {
        Ok(f) => f,
        Err(e) => return Page::error(&e.to_string()),
    };
    // vak's own id first: a provider's id (a model's choice) may equal it.
    let own: Vec<&Shown> = found.iter().filter(|s| s.call_id == id).collect();
    let one = match (own.as_slice(), found.as_slice()) {
        ([one], _) => Some(*one),
        (_, [one]) => Some(one),
        _ => None,
    };
    if let Some(one) = one {
        return Page::ok(&format!("Call {}", one.call_id), entry(one));
    }
    match found.as_slice() {
        [] => Page::not_found(&format!("No call {id} in the journal.")),
        several => Page::ok(
            "Calls with this provider call id",
            html! {
                p { (several.len()) " calls have the provider call id " code { (shown(id)) } ":" }
                ul { @for s in several {
                    li { a href=(call_href(&s.call_id)) { (shown(&s.call_id)) } " " (shown(&s.tool)) " " (shown(&s.status)) }
                } }
            },
        ),
    }
}

/// A field of `v` as text: a string as it is, anything else as JSON, absent as `-`.
fn text(v: &Value, key: &str) -> String {
    match v.get(key) {
        None | Some(Value::Null) => "-".to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

fn json(v: &Value) -> Markup {
    html! { pre { (shown(&serde_json::to_string_pretty(v).unwrap_or_default())) } }
}

fn items<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// The whole entry.
fn entry(s: &Shown) -> Markup {
    let v: Value = serde_json::from_str(&s.text).unwrap_or(Value::Null);
    let place = match &s.node {
        Some(chain) => format!("chain {chain} #{} (journal #{})", s.chain_seq, s.seq),
        None => format!("#{} (journal #{})", s.chain_seq, s.seq),
    };
    html! {
        section #check {
            h2 { "Check" }
            @match &s.check {
                Ok(()) => p.ok { "This entry checks out: its hash, its links in its chain and its signature." },
                Err(why) => p.bad { "This entry does NOT check out: " (shown(why)) ". What is shown is not what the host wrote." },
            }
            (signature(&v, s.check.is_ok()))
        }
        section #summary {
            h2 { "Summary" }
            table { tbody {
                tr { th { "call id" } td.mono { (shown(&s.call_id)) } }
                tr { th { "entry" } td { @if s.kind == Kind::Started { "started entry, no final record" } @else { "final record" } " at " (shown(&place)) } }
                tr { th { "tool" } td { a href=(query_href("/calls", &[("tool", &s.tool)])) { (shown(&s.tool)) } } }
                tr { th { "status" } td class=(format!("st-{}", shown(&s.status))) { (shown(&s.status)) } }
                tr { th { "stage" } td { (shown(&text(&v, "stage"))) } }
                tr { th { "received" } td.mono { (shown(&s.received_at)) } }
                tr { th { "provider" } td { (shown(&text(&v, "provider"))) } }
                tr { th { "provider call id" } td.mono {
                    @if let Some(p) = v.get("provider_call_id").and_then(Value::as_str) {
                        a href=(query_href("/calls", &[("q", p)])) { (shown(p)) }
                    } @else { "-" }
                } }
                tr { th { "principal" } td {
                    @if let Some(p) = v.get("principal").and_then(Value::as_str) {
                        a href=(query_href("/calls", &[("principal", p)])) { (shown(p)) }
                    } @else { "-" }
                } }
                tr { th { "session" } td.mono {
                    @if let Some(p) = v.get("session_id").and_then(Value::as_str) {
                        a href=(query_href("/calls", &[("session", p)])) { (shown(p)) }
                    } @else { "-" }
                } }
                tr { th { "parent call" } td.mono {
                    @if let Some(p) = v.get("parent_call_id").and_then(Value::as_str) {
                        a href=(call_href(p)) { (shown(p)) }
                    } @else { "-" }
                } }
                @if let Some(round) = v.get("round").filter(|r| !r.is_null()) {
                    tr #round { th { "round" } td.mono {
                        (shown(&text(round, "round")))
                        @if let Some(p) = round.get("previous_call_id").and_then(Value::as_str) {
                            ", after " a href=(call_href(p)) { (shown(p)) }
                        }
                    } }
                }
            } }
        }
        @if let Some(error) = v.get("error").filter(|e| !e.is_null()) {
            section #error {
                h2 { "Error" }
                p.bad { (shown(&text(error, "kind"))) " at " (shown(&text(error, "stage"))) ": " (shown(&text(error, "message"))) }
                (json(error))
            }
        }
        (stages(&v))
        (limits(&v))
        section #grant {
            h2 { "Grant" }
            table { tbody {
                tr { th { "granted" } td { @for g in items(&v, "granted") { code { (shown(&g.as_str().map(str::to_string).unwrap_or_else(|| g.to_string()))) } " " } } }
                tr { th { "component digest" } td.mono { (shown(&text(&v, "component_digest"))) } }
                @if v.get("grant_digest").is_some() {
                    tr { th { "grant digest" } td.mono { (shown(&text(&v, "grant_digest"))) } }
                }
                tr { th { "arguments digest" } td.mono { (shown(&text(&v, "arguments_digest"))) } }
            } }
        }
        section #arguments {
            h2 { "Arguments (as recorded, redacted)" }
            @match v.get("arguments") {
                None | Some(Value::Null) => p { "Not recorded." },
                Some(a) => (json(a)),
            }
            @let redacted = items(&v, "redacted");
            @if !redacted.is_empty() { p { "Redacted: " @for r in redacted { code { (shown(&r.to_string())) } " " } } }
        }
        (receipts(&v))
        (evidence(&v))
        (outcome(&v))
        @for key in ["result", "tool_error", "approvals", "logs"] {
            @if let Some(part) = v.get(key).filter(|p| !p.is_null() && p.as_array().is_none_or(|a| !a.is_empty())) {
                section id=(key) { h2 { (key.replace('_', " ")) } (json(part)) }
            }
        }
        @let children = items(&v, "children");
        @if !children.is_empty() {
            section #children {
                h2 { "Child runs" }
                ul { @for c in children {
                    li { a href=(call_href(&text(c, "call_id"))) { (shown(&text(c, "call_id"))) } " " (shown(&text(c, "tool"))) " " (shown(&text(c, "status"))) }
                } }
            }
        }
        details { summary { "The entry as stored" } pre { (shown(&s.text)) } }
    }
}

/// The signature's fields (its check is the entry's, above), or what signs an entry written
/// without one.
fn signature(v: &Value, checks_out: bool) -> Markup {
    let Some(sig) = v.get("signature").filter(|s| !s.is_null()) else {
        return match checks_out {
            true => html! { p { "Written unsigned; the journal checkpoint that covers it signs it \
            (the Merkle root of its batch's entry hashes). `vak audit show ID --proof` exports \
            the record with that proof." } },
            false => html! { p.bad { "The entry carries no signature." } },
        };
    };
    html! {
        table { tbody {
            tr { th { "algorithm" } td { (shown(&text(sig, "algorithm"))) } }
            tr { th { "public key" } td.mono { (shown(&text(sig, "public_key"))) } }
            @if let Some(batch) = sig.get("batch").filter(|b| !b.is_null()) {
                tr { th { "batch" } td { "leaf " (shown(&text(batch, "index"))) " of " (shown(&text(batch, "size"))) ", inclusion path of " (items(batch, "path").len()) " hashes" } }
            }
        } }
    }
}

fn stages(v: &Value) -> Markup {
    let stages = items(v, "stages");
    html! {
        @if !stages.is_empty() {
            section #stages {
                h2 { "Stages" }
                table {
                    thead { tr { th { "stage" } th { "decision" } th { "time" } th { "note" } } }
                    tbody { @for st in stages {
                        @let decision = text(st, "decision");
                        tr {
                            td { (shown(&text(st, "stage"))) }
                            td class=(if decision == "passed" { "ok" } else { "bad" }) { (shown(&decision)) }
                            td.mono { (micros(st.get("elapsed_ns").and_then(Value::as_u64).unwrap_or(0))) }
                            td { (shown(&text(st, "note"))) }
                        }
                    } }
                }
            }
        }
    }
}

fn micros(ns: u64) -> String {
    format!("{:.1} µs", ns as f64 / 1000.0)
}

/// Limits against usage, as `<meter>` bars (no inline style: the CSP allows none).
fn limits(v: &Value) -> Markup {
    let Some(limits) = v.get("limits").filter(|l| !l.is_null()) else {
        return html! {};
    };
    let usage = v.get("usage").cloned().unwrap_or(Value::Null);
    let n = |o: &Value, k: &str| o.get(k).and_then(Value::as_u64).unwrap_or(0);
    let rows = [
        ("fuel", n(&usage, "fuel"), n(limits, "fuel"), ""),
        (
            "memory",
            n(&usage, "memory_bytes"),
            n(limits, "memory_bytes"),
            " bytes",
        ),
        (
            "wall time",
            n(&usage, "wall_ns") / 1_000_000,
            n(limits, "wall_time_ms"),
            " ms",
        ),
        (
            "result size",
            n(&usage, "result_bytes"),
            n(limits, "result_bytes"),
            " bytes",
        ),
    ];
    html! {
        section #limits {
            h2 { "Limits and usage" }
            table {
                thead { tr { th { "resource" } th { "used" } th { "limit" } th { "" } } }
                tbody { @for (name, used, limit, unit) in rows {
                    tr {
                        td { (name) }
                        td.mono { (used) (unit) }
                        td.mono { (limit) (unit) }
                        td { meter min="0" max=(limit.max(1)) value=(used.min(limit.max(1))) title=(format!("{used} of {limit}{unit}")) {} }
                    }
                } }
            }
        }
    }
}

fn receipts(v: &Value) -> Markup {
    let receipts = items(v, "receipts");
    html! {
        @if !receipts.is_empty() {
            section #receipts {
                h2 { "Receipts" }
                table {
                    thead { tr { th { "id" } th { "capability" } th { "operation" } th { "carried out" } th { "at" } th { "request and outcome" } } }
                    tbody { @for r in receipts {
                        tr id=(format!("receipt-{}", shown(&text(r, "id")))) {
                            td.mono { (shown(&text(r, "id"))) }
                            td { (shown(&text(r, "capability"))) }
                            td { (shown(&text(r, "operation"))) }
                            td { @if r.get("ok") == Some(&Value::Bool(true)) { span.ok { "yes" } } @else { span.bad { "no" } } }
                            td.mono { (shown(&text(r, "at"))) }
                            td { details { summary { "digest " code { (shown(&text(r, "digest"))) } }
                                (json(r.get("request").unwrap_or(&Value::Null)))
                                (json(r.get("outcome").unwrap_or(&Value::Null))) } }
                        }
                    } }
                }
            }
        }
    }
}

/// The payload with the fields evidence speaks for marked, and the evidence: each item beside
/// its verdict, linking to its marks.
fn evidence(v: &Value) -> Markup {
    let evidence = items(v, "evidence");
    // A version-2 record keeps each item once, in the result; its verdicts are in the same order.
    let returned = v
        .pointer("/result/evidence")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let pairs: Vec<(Value, &Value)> = evidence
        .iter()
        .enumerate()
        .map(|(n, e)| match (e.get("kind"), returned.get(n)) {
            (None, Some(item)) => (item.clone(), e),
            _ => (e.clone(), e),
        })
        .collect();
    let payload = Payload::of(v, &pairs);
    html! {
        @if let Some(markup) = &payload.markup {
            section #payload {
                h2 { "Payload" }
                @if !evidence.is_empty() { (payload::legend()) }
                @if payload.cut {
                    p.bad #cut { "The payload is shown cut: at most " (payload::MAX_NODES) " values and "
                        (payload::MAX_DEPTH) " levels are written here. The whole is in the entry as stored, below." }
                }
                pre.payload { (markup) }
            }
        }
        @if !evidence.is_empty() {
            section #evidence {
                h2 { "Evidence" }
                table {
                    thead { tr { th { "item" } th { "verdict" } th { "upholds" } th { "in the payload" } th { "diagnostics" } } }
                    tbody { @for (n, (item, e)) in pairs.iter().enumerate() {
                        @let support = text(e, "support");
                        tr id=(format!("evidence-{n}")) {
                            td { (json(item)) }
                            td class=(if support == "supported" { "ok" } else { "bad" }) { (shown(&support)) }
                            td.mono { @for u in items(e, "upholds") { (shown(u.as_str().unwrap_or_default())) br; } }
                            td.mono { @for l in payload.links.get(n).map_or(&[][..], Vec::as_slice) {
                                @if l.shown {
                                    a.mark-link class=(if l.upheld { "upheld" } else { "claimed" }) href=(format!("#{}", l.anchor)) { (shown(&l.pointer)) }
                                } @else {
                                    span.bad title="not in the payload, or past where it is cut" { (shown(&l.pointer)) " (not shown)" }
                                }
                                br;
                            } }
                            td { @for d in items(e, "diagnostics") { (shown(d.as_str().unwrap_or_default())) br; } }
                        }
                    } }
                }
            }
        }
    }
}

fn outcome(v: &Value) -> Markup {
    html! {
        @if let Some(o) = v.get("outcome").filter(|o| !o.is_null()) {
            section #outcome {
                h2 { "Outcome" }
                p { "label " strong { (shown(&text(o, "label"))) } "; payload passed its schema: " (shown(&text(o, "payload_passed"))) }
                (json(o.get("requirements").unwrap_or(&Value::Null)))
            }
        }
        @if let Some(p) = v.get("projection").filter(|p| !p.is_null()) {
            section #projection {
                h2 { "Projection" }
                p { (shown(&text(p, "form"))) " by " (shown(&text(p, "renderer"))) ", label " (shown(&text(p, "label"))) }
                @for d in items(p, "diagnostics") { p.bad { (shown(d.as_str().unwrap_or_default())) } }
                pre { (shown(&rendered(v, p))) }
            }
        }
    }
}

/// The text the renderer was given: kept in a version-1 record; made again from a version-2
/// record (which keeps only the plan), when the entry reads as a record.
fn rendered(v: &Value, projection: &Value) -> String {
    if projection.get("rendered").is_some() {
        return text(projection, "rendered");
    }
    match serde_json::from_value::<crate::record::CallRecord>(v.clone()) {
        Ok(mut record) => {
            record.link();
            record.projection.map(|p| p.rendered).unwrap_or_default()
        }
        Err(_) => "-".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::Kind;

    #[test]
    fn a_later_round_links_the_round_before_it() {
        let record = serde_json::json!({
            "call_id": "call_2",
            "tool": "t",
            "status": "completed",
            "round": { "round": 2, "previous_call_id": "call_<1>" },
        });
        let shown = Shown {
            seq: 2,
            node: None,
            chain_seq: 2,
            kind: Kind::Record,
            call_id: "call_2".into(),
            tool: "t".into(),
            status: "completed".into(),
            received_at: "2026-12-07T00:00:00Z".into(),
            text: record.to_string(),
            check: Ok(()),
        };
        let html = entry(&shown).into_string();
        assert!(html.contains("<tr id=\"round\">"), "{html}");
        assert!(html.contains(">2, after <a href=\""), "{html}");
        // The id is escaped where it is shown.
        assert!(html.contains("call_&lt;1&gt;</a>"), "{html}");
        // A call of one request has no round row.
        let single = Shown {
            text: serde_json::json!({ "call_id": "c", "status": "completed" }).to_string(),
            ..shown
        };
        assert!(!entry(&single).into_string().contains("id=\"round\""));
    }
}

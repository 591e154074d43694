//! The approvals inbox's page: each question waiting, with what its answer is bound to (tool,
//! call, principal, scope, arguments digest, grant digest, the binding) and the prompt the
//! terminal would show, and a yes and a no (one form, POSTed with the session's CSRF token);
//! below, the questions answered or given up.

use super::{Page, call_href, shown};
use crate::approval::inbox::Question;
use maud::{Markup, html};

/// The page, for a session whose forms carry `csrf`.
pub fn page(waiting: &[Question], settled: &[Question], csrf: &str, notice: Option<&str>) -> Page {
    let content = html! {
        @if let Some(id) = notice {
            p.ok #notice { "Answered " code { (shown(id)) } "." }
        }
        p { "Calls of tools marked " code { "ask" } " that a " code { "vak serve --approvals inbox" }
            " is holding until a person answers. A yes lets that one call go ahead, once, with exactly these arguments and this grant." }
        p { a href="/approvals" { "Refresh" } }
        h2 { "Waiting (" (waiting.len()) ")" }
        @if waiting.is_empty() { p #none-waiting { "No call is waiting." } }
        @for q in waiting { (question(q, csrf)) }
        h2 { "Answered or given up" }
        @if settled.is_empty() { p { "None yet." } } @else {
            table #settled {
                thead { tr { th { "asked" } th { "tool" } th { "call" } th { "state" } th { "by" } th { "at" } } }
                tbody { @for q in settled {
                    tr {
                        td.mono { (shown(&q.asked_at)) }
                        td { (shown(&q.tool)) }
                        td.mono { a href=(call_href(&q.call_id)) { (shown(&q.call_id)) } }
                        td class=(if q.state == "approved" { "ok" } else { "bad" }) {
                            (shown(if q.state == "pending" { "expired" } else { &q.state }))
                        }
                        td { (shown(q.answered_by.as_deref().unwrap_or("-"))) }
                        td.mono { (shown(q.answered_at.as_deref().unwrap_or("-"))) }
                    }
                } }
            }
        }
    };
    Page::ok("Approvals", content)
}

fn question(q: &Question, csrf: &str) -> Markup {
    html! {
        section.question id=(format!("q-{}", shown(&q.id))) {
            h3 { "Tool " code { (shown(&q.tool)) } " asks for approval of " (shown(&q.scope)) }
            table.binding { tbody {
                tr { th { "tool" } td { (shown(&q.tool)) } }
                tr { th { "call" } td.mono { (shown(&q.call_id)) } }
                tr { th { "principal" } td { (shown(q.principal.as_deref().unwrap_or("(none)"))) } }
                tr { th { "scope" } td { (shown(&q.scope)) } }
                tr { th { "can reach" } td { @if q.reach.is_empty() { "no network origin" } @else { @for o in &q.reach { code { (shown(o)) } " " } } } }
                tr { th { "arguments SHA-256" } td.mono { (shown(&q.arguments_sha256)) } }
                tr { th { "grant SHA-256" } td.mono { (shown(&q.grant_sha256)) } }
                tr { th { "binding" } td.mono { (shown(&q.binding)) } }
                tr { th { "asked" } td.mono { (shown(&q.asked_at)) " by process " (q.pid) } }
                tr { th { "expires" } td.mono { (shown(&q.expires_at)) } }
            } }
            details open { summary { "The question, as the terminal would ask it" } pre { (shown(&q.prompt)) } }
            form.answer method="post" action="/approvals/answer" {
                input type="hidden" name="csrf" value=(csrf);
                input type="hidden" name="id" value=(shown(&q.id));
                input type="hidden" name="binding" value=(shown(&q.binding));
                button.yes type="submit" name="decision" value="yes" { "Yes: let this call run" }
                " "
                button.no type="submit" name="decision" value="no" { "No: refuse it" }
            }
        }
    }
}

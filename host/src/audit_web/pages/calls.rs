//! The calls: newest first, filtered, paged on the server ([`Source::page`]: keyset paging on
//! the indexed `received_at` of a local journal, on the commit order `gseq` of a shared store).

use super::super::Source;
use super::{Page, call_href, param, query_href, shown, text_fields, time_range};
use crate::journal::{Cursor, Filter, Page as Query, STATUSES};
use crate::stage::Stage;
use maud::html;

/// The filters a query carries (the form's fields), in the order the form has them.
const FIELDS: [&str; 9] = [
    "tool",
    "status",
    "stage",
    "principal",
    "session",
    "node",
    "q",
    "since",
    "until",
];

/// The page of calls that `query` asks for.
pub fn page(journal: &dyn Source, query: &[(String, String)]) -> Page {
    let get = |name| param(query, name).map(str::to_string);
    let status = get("status");
    if status.as_deref().is_some_and(|s| !STATUSES.contains(&s)) {
        return Page::bad_request("Unknown status.");
    }
    let stage = get("stage");
    if stage
        .as_deref()
        .is_some_and(|s| !Stage::ALL.iter().any(|st| st.as_str() == s))
    {
        return Page::bad_request("Unknown stage.");
    }
    let size = match param(query, "size").map(str::parse::<u32>) {
        None => 50,
        Some(Ok(n)) if (1..=super::super::PAGE_SIZE).contains(&n) => n,
        Some(_) => {
            return Page::bad_request(&format!(
                "size is a number from 1 to {}.",
                super::super::PAGE_SIZE
            ));
        }
    };
    // As `vak audit --since` reads it: a time with any offset, or a duration back from now.
    let since = match param(query, "since").map(crate::journal::since) {
        None => None,
        Some(Ok(t)) => Some(t),
        Some(Err(e)) => return Page::bad_request(&format!("since {e}.")),
    };
    // The end of the range, read as `since` is: a time, or a duration back from now.
    let until = match param(query, "until").map(crate::journal::since) {
        None => None,
        Some(Ok(t)) => Some(t),
        Some(Err(e)) => return Page::bad_request(&format!("until {e}.")),
    };
    let before = match (param(query, "before_at"), param(query, "before_seq")) {
        (Some(at), Some(seq)) => match seq.parse::<i64>() {
            Ok(seq) => Some(Cursor {
                received_at: at.to_string(),
                seq,
            }),
            Err(_) => return Page::bad_request("before_seq is a number."),
        },
        _ => None,
    };
    let filter = Filter {
        tool: get("tool"),
        status,
        stage,
        principal: get("principal"),
        since,
        limit: Some(size),
    };
    let q = Query {
        session: get("session"),
        text: get("q"),
        node: get("node"),
        until,
        before: before.clone(),
    };
    let paged = match journal.page(&filter, &q) {
        Ok(p) => p,
        Err(e) => return Page::error(&e.to_string()),
    };
    // The filters as given, for the form and the pager's links.
    let given: Vec<(&str, &str)> = FIELDS
        .iter()
        .filter_map(|f| param(query, f).map(|v| (*f, v)))
        .collect();
    let size_text = size.to_string();
    let next = paged.next.as_ref().map(|c| {
        let seq = c.seq.to_string();
        let mut pairs = given.clone();
        pairs.push(("size", &size_text));
        pairs.push(("before_at", &c.received_at));
        pairs.push(("before_seq", &seq));
        query_href("/calls", &pairs)
    });
    let first = query_href("/calls", &given);
    let value = |name: &str| param(query, name).unwrap_or("");
    let content = html! {
        form.filters method="get" action="/calls" {
            label { "tool " input name="tool" value=(shown(value("tool"))); }
            label { "status "
                select name="status" {
                    option value="" { "any" }
                    @for s in STATUSES { option value=(s) selected[value("status") == s] { (s) } }
                }
            }
            label { "stage "
                select name="stage" {
                    option value="" { "any" }
                    @for s in Stage::ALL.map(Stage::as_str) { option value=(s) selected[value("stage") == s] { (s) } }
                }
            }
            (text_fields(query, &[
                ("principal", "principal"),
                ("session", "session"),
                ("node", "node"),
                ("call id contains", "q"),
            ]))
            (time_range(query))
            button type="submit" { "Filter" }
            " " a href="/calls" { "clear" }
        }
        p { (paged.rows.len()) " calls on this page" @if before.is_some() { ", older than the first page" } "." }
        table {
            thead { tr {
                th { "#" } th { "received" } th { "tool" } th { "status" } th { "stage" }
                th { "call id" } th { "principal" } th { "chain" }
            } }
            tbody {
                @for r in &paged.rows {
                    tr {
                        td.mono { (r.seq) }
                        td.mono { (shown(&r.received_at)) }
                        td { (shown(&r.tool)) }
                        td class=(format!("st-{}", shown(&r.status))) { (shown(&r.status)) }
                        td { (shown(&r.stage)) }
                        td.mono { a href=(call_href(&r.call_id)) { (shown(&r.call_id)) } }
                        td { (shown(r.principal.as_deref().unwrap_or("-"))) }
                        td.mono { @match &r.node {
                            Some(n) => a.node href=(query_href("/calls", &[("node", n)])) { (shown(n)) },
                            None => "-",
                        } }
                    }
                }
            }
        }
        nav.pager {
            @if before.is_some() { a href=(first) { "newest" } }
            @if let Some(next) = &next { a href=(next) rel="next" { "older" } }
        }
    };
    Page::ok("Calls", content)
}

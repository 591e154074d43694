//! The pages of `vak audit serve`, written with maud: every value interpolated is escaped by
//! the template, and first made visible by [`shown`] (a record holds what models and guests
//! wrote: markup, terminal escapes, bidirectional overrides). Nothing here is ever
//! `PreEscaped` but constant markup.

pub(super) mod approvals;
pub(super) mod call;
pub(super) mod calls;
pub(super) mod integrity;
mod payload;
pub(super) mod pictures;
mod svg;

use hyper::StatusCode;
use maud::{DOCTYPE, Markup, html};

/// The one stylesheet, served at `/style.css` (the CSP allows `style-src 'self'` and nothing
/// inline).
pub const STYLE: &str = "\
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#111;background:#fff}
header{background:#1f2937;color:#fff;padding:.5em 1em}
header a{color:#fff;margin-right:1.5em;text-decoration:none;font-weight:600}
main{padding:1em}
table{border-collapse:collapse;width:100%}
th,td{border-bottom:1px solid #ddd;padding:.25em .5em;text-align:left;vertical-align:top}
th{background:#f3f4f6}
code,pre,.mono{font-family:ui-monospace,monospace;font-size:13px}
pre{background:#f8f8f8;border:1px solid #ddd;padding:.5em;overflow:auto;white-space:pre-wrap;word-break:break-all}
form.filters label{margin-right:1em}
.ok{color:#065f46;font-weight:600}
.bad{color:#991b1b;font-weight:600}
.st-completed{color:#065f46}
.st-tool_error,.st-failed,.st-interrupted{color:#92400e}
.st-refused{color:#991b1b}
.mono,td{overflow-wrap:anywhere}
meter{width:12em}
nav.pager a{margin-right:1em}
.stale{color:#92400e;font-weight:600}
progress{width:30em;height:1.2em}
section.question{border:2px solid #92400e;padding:.5em 1em;margin:1em 0}
form.answer button{font-size:15px;padding:.3em 1em;margin-right:1em}
button.yes{border:2px solid #065f46}
button.no{border:2px dashed #991b1b}
mark.upheld{background:#bbf7d0;color:#111;outline:2px solid #065f46}
mark.claimed{background:#fef3c7;color:#111;outline:2px dashed #92400e}
mark:target{outline-width:4px}
a.mark-link.claimed{text-decoration-style:dashed}
svg.picture{max-width:100%;height:auto;display:block;margin:.5em 0 1.5em}
svg.picture a:hover rect,svg.picture a:focus rect{stroke-width:2}
";

/// A page made: its status and its HTML.
pub struct Page {
    pub status: StatusCode,
    pub body: Markup,
}

impl Page {
    fn ok(title: &str, content: Markup) -> Page {
        Page {
            status: StatusCode::OK,
            body: layout(title, content),
        }
    }

    pub fn not_found(why: &str) -> Page {
        Page {
            status: StatusCode::NOT_FOUND,
            body: layout("Not found", html! { p { (shown(why)) } }),
        }
    }

    pub fn bad_request(why: &str) -> Page {
        Page {
            status: StatusCode::BAD_REQUEST,
            body: layout("Bad request", html! { p { (shown(why)) } }),
        }
    }

    pub fn error(why: &str) -> Page {
        Page {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            body: layout("Error", html! { p.bad { (shown(why)) } }),
        }
    }
}

/// The frame of every page: title, navigation, the stylesheet.
fn layout(title: &str, content: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="referrer" content="same-origin";
                title { (shown(title)) " · vak audit" }
                link rel="stylesheet" href="/style.css";
            }
            body {
                header {
                    a href="/calls" { "Calls" }
                    a href="/pictures" { "Pictures" }
                    a href="/integrity" { "Integrity" }
                    a href="/approvals" { "Approvals" }
                }
                main {
                    h1 { (shown(title)) }
                    (content)
                }
            }
        }
    }
}

/// `text` with every control character (but newline and tab) and every bidirectional
/// formatting character written as `\u{..}`: what a terminal escape or a right-to-left override
/// in a record says is shown, never acted on. maud escapes the result for HTML.
pub fn shown(text: &str) -> String {
    let hidden = |c: char| {
        (c.is_control() && c != '\n' && c != '\t')
            || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    if !text.chars().any(hidden) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match hidden(c) {
            true => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            false => out.push(c),
        }
    }
    out
}

/// The link to one call's page.
fn call_href(call_id: &str) -> String {
    query_href("/call", &[("id", call_id)])
}

/// `path` with `pairs` as its query, encoded.
fn query_href(path: &str, pairs: &[(&str, &str)]) -> String {
    if pairs.is_empty() {
        return path.to_string();
    }
    let mut q = url::form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        q.append_pair(k, v);
    }
    format!("{path}?{}", q.finish())
}

/// A filter form's text fields, `(label, name)` each, holding what the query gave.
fn text_fields(query: &[(String, String)], fields: &[(&str, &str)]) -> Markup {
    let value = |name: &str| shown(param(query, name).unwrap_or(""));
    html! {
        @for (label, name) in fields {
            label { (label) " " input name=(name) value=(value(name)); }
        }
    }
}

/// A filter form's `since` and `until` fields, holding what the query gave.
fn time_range(query: &[(String, String)]) -> Markup {
    let value = |name: &str| shown(param(query, name).unwrap_or(""));
    html! {
        label { "since " input name="since" placeholder="2026-12-06T10:00:00Z or 2h" value=(value("since")); }
        label { "until " input name="until" placeholder="2026-12-06T12:00:00Z or 1h" value=(value("until")); }
    }
}

/// The value of `name` in a query, when given and not empty.
pub(super) fn param<'a>(query: &'a [(String, String)], name: &str) -> Option<&'a str> {
    query
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.trim())
        .filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_escapes_in_a_value_are_shown_inert() {
        let page = layout(
            "t",
            html! { p { (shown("<script>alert(1)</script>\u{1b}[31m\u{202e}x")) } },
        )
        .into_string();
        assert!(
            page.contains("&lt;script&gt;alert(1)&lt;/script&gt;\\u{1b}[31m\\u{202e}x"),
            "{page}"
        );
        assert!(!page.contains("<script"), "{page}");
        assert!(!page.contains('\u{1b}'), "{page}");
    }
}

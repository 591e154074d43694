//! Presentation projection: capability-driven renderer planning. A renderer declares what it can
//! show; the planner picks a native card only when the renderer has a card for the payload's
//! registered schema, the payload passed it and its material fields are there; otherwise the
//! tool's Markdown document, with a diagnostic saying why no card was shown; plain text for a
//! renderer that can do nothing else. The tool's document is never rewritten: a card is shown
//! beside it, and the record keeps the original's digest.

use crate::evidence::{CheckedEvidence, Support};
use crate::outcome::{Decision, Label, Outcome};
use crate::returned::ToolResultRecord;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// What a renderer can show.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RendererCaps {
    pub name: String,
    pub markdown: bool,
    pub html: bool,
    /// Payload schema ids it has native cards for.
    pub cards: Vec<String>,
}

const BUILTIN_CARDS: [&str; 4] = [
    "vak.temporal.instant/1",
    "vak.research.findings/1",
    "vak.coding.change/1",
    "vak.data.comparison/1",
];

impl RendererCaps {
    /// The `vak` terminal: cards for the built-in schemas as text, the Markdown source as is.
    pub fn terminal() -> Self {
        RendererCaps {
            name: "terminal".into(),
            markdown: true,
            html: false,
            cards: BUILTIN_CARDS.map(String::from).to_vec(),
        }
    }
    /// Markdown only, no cards.
    pub fn markdown() -> Self {
        RendererCaps {
            name: "markdown".into(),
            markdown: true,
            html: false,
            cards: Vec::new(),
        }
    }
    /// HTML with cards for the built-in schemas.
    pub fn html() -> Self {
        RendererCaps {
            name: "html".into(),
            markdown: true,
            html: true,
            cards: BUILTIN_CARDS.map(String::from).to_vec(),
        }
    }
    /// Plain text only.
    pub fn plain_text() -> Self {
        RendererCaps {
            name: "plain-text".into(),
            markdown: false,
            html: false,
            cards: Vec::new(),
        }
    }
}

/// The form chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Form {
    Card,
    Document,
    PlainText,
}

impl Form {
    /// The form as records spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Form::Card => "card",
            Form::Document => "document",
            Form::PlainText => "plain_text",
        }
    }
}

/// What the renderer's text is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Medium {
    Markdown,
    Html,
    PlainText,
}

impl Medium {
    fn of(caps: &RendererCaps) -> Medium {
        if caps.html {
            Medium::Html
        } else if caps.markdown {
            Medium::Markdown
        } else {
            Medium::PlainText
        }
    }
}

/// The projection kept in the record.
///
/// The record keeps the plan (renderer, form, card, label, diagnostics, medium), not the text
/// shown: that is a function of the plan and the record's result, outcome and evidence, so
/// keeping it would store the tool's document twice. [`Projection::rendered`] is made when the
/// projection is, and again by [`crate::record::CallRecord::link`] when a record is read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Projection {
    pub renderer: String,
    pub form: Form,
    pub card_schema: Option<String>,
    pub label: Label,
    pub diagnostics: Vec<String>,
    /// The digest of the tool's result the projection was made from (unchanged).
    pub original_digest: String,
    /// What the text shown is written in (absent from version-1 records, which kept the text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub medium: Option<Medium>,
    /// The text as a version-1 record kept it; read back, such a record keeps it, so that it
    /// serializes, and verifies, as it was signed.
    #[serde(rename = "rendered", default, skip_serializing_if = "Option::is_none")]
    pub stored_rendered: Option<String>,
    /// What the renderer shows (in memory; see above).
    #[serde(skip)]
    pub rendered: String,
}

impl Projection {
    /// Make [`Projection::rendered`] again for a projection read back from a record.
    pub fn render_again(
        &mut self,
        result: &ToolResultRecord,
        outcome: &Outcome,
        evidence: &[CheckedEvidence],
    ) {
        self.rendered = match (&self.stored_rendered, self.medium) {
            (Some(text), _) => text.clone(),
            (None, Some(medium)) => render(
                medium,
                self.card_schema.as_deref(),
                result,
                outcome,
                evidence,
                &self.diagnostics,
            ),
            (None, None) => String::new(),
        };
    }
}

/// Plan and render `result` for `caps`.
pub fn project(
    caps: &RendererCaps,
    result: &ToolResultRecord,
    outcome: &Outcome,
    evidence: &[CheckedEvidence],
) -> Projection {
    let mut diagnostics = Vec::new();
    let mut card = None;
    match &result.payload_schema {
        None => diagnostics.push("the result has no typed payload; the document is shown".into()),
        Some(id) if !caps.cards.contains(id) => {
            diagnostics.push(format!("renderer `{}` has no card for `{id}`; the document is shown", caps.name))
        }
        Some(id) if !outcome.payload_passed => {
            diagnostics.push(format!("the payload did not pass `{id}` (or `{id}` is not registered); the document is shown, not labelled verified"))
        }
        Some(id) => {
            let material = outcome.requirements.iter().find(|r| r.requirement == "material_fields");
            match material {
                Some(m) if m.decision != Decision::Met => {
                    diagnostics.push(format!("no card: {}", m.diagnostic))
                }
                _ => card = Some(id.clone()),
            }
        }
    }
    let medium = Medium::of(caps);
    let form = if card.is_some() {
        Form::Card
    } else if medium == Medium::PlainText {
        Form::PlainText
    } else {
        Form::Document
    };
    let rendered = render(
        medium,
        card.as_deref(),
        result,
        outcome,
        evidence,
        &diagnostics,
    );
    Projection {
        renderer: caps.name.clone(),
        form,
        card_schema: card,
        label: outcome.label,
        diagnostics,
        original_digest: result.digest.clone(),
        medium: Some(medium),
        stored_rendered: None,
        rendered,
    }
}

/// The text shown in `medium`: the card of `card` when there is one, then the tool's document.
fn render(
    medium: Medium,
    card: Option<&str>,
    result: &ToolResultRecord,
    outcome: &Outcome,
    evidence: &[CheckedEvidence],
    diagnostics: &[String],
) -> String {
    // Only a card and the HTML page show the payload's fields: a document is not parsed.
    let payload: serde_json::Value = match (card, medium) {
        (None, Medium::Markdown | Medium::PlainText) => serde_json::Value::Null,
        _ => result
            .payload_json
            .as_deref()
            .and_then(|p| serde_json::from_str(p).ok())
            .unwrap_or(serde_json::Value::Null),
    };
    if medium == Medium::Html {
        return html_page(result, outcome, evidence, card, &payload, diagnostics);
    }
    let mut text = String::new();
    if let Some(id) = card {
        text.push_str(&text_card(id, outcome, &payload));
        text.push('\n');
    }
    if medium == Medium::Markdown {
        text.push_str(&result.markdown);
    } else {
        text.push_str(&plain_text(&result.markdown));
    }
    if !result.attachments.is_empty() {
        text.push_str("\n\n");
        text.push_str(&attachment_lines(result));
    }
    text
}

/// One line per attachment: what it is and the digest of its content (the content itself goes
/// to clients that show media, such as MCP clients).
pub fn attachment_lines(result: &ToolResultRecord) -> String {
    result
        .attachments
        .iter()
        .map(|a| {
            let uri = a
                .uri
                .as_deref()
                .map(|u| format!(" {u}"))
                .unwrap_or_default();
            format!(
                "[attachment: {} {}{uri}, {} bytes, sha256 {}]",
                a.kind, a.mime_type, a.size, a.sha256
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Markdown, shown as plain text: emphasis and heading marks dropped, the words kept.
pub fn plain_text(markdown: &str) -> String {
    markdown
        .lines()
        .map(|l| {
            l.trim_start_matches('#')
                .trim_start()
                .replace("**", "")
                .replace('`', "")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn label_text(l: Label) -> &'static str {
    match l {
        Label::Verified => "verified",
        Label::PartiallySupported => "partially supported",
        Label::Unverified => "unverified",
        Label::Failed => "failed",
    }
}

/// The scalar fields of a payload, as (pointer, value) pairs, in order.
fn figures(payload: &serde_json::Value) -> Vec<(String, String)> {
    fn walk(v: &serde_json::Value, at: String, out: &mut Vec<(String, String)>) {
        match v {
            serde_json::Value::Object(m) => m
                .iter()
                .for_each(|(k, v)| walk(v, format!("{at}/{k}"), out)),
            serde_json::Value::Array(a) => a
                .iter()
                .enumerate()
                .for_each(|(i, v)| walk(v, format!("{at}/{i}"), out)),
            serde_json::Value::String(s) => out.push((at, s.clone())),
            other => out.push((at, other.to_string())),
        }
    }
    let mut out = Vec::new();
    walk(payload, String::new(), &mut out);
    out
}

fn text_card(id: &str, outcome: &Outcome, payload: &serde_json::Value) -> String {
    let mut s = format!("┌ {id} · {}\n", label_text(outcome.label));
    for (pointer, value) in figures(payload) {
        let _ = writeln!(s, "│ {pointer}: {value}");
    }
    s.push_str("└\n");
    s
}

/// `text` for a terminal: every character that could act on the terminal or hide or reorder what
/// a reader sees is shown as a visible `\u{..}` escape instead (see [`hidden_or_acting`]);
/// newline and tab are kept. A tool, a model or a provider document then cannot move the cursor,
/// recolour or clear the screen, forge a line, or reorder or hide text. Every human-facing output
/// of vak goes through this function.
pub fn neutralise(text: &str) -> String {
    if !text.chars().any(hidden_or_acting) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if hidden_or_acting(c) {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        } else {
            out.push(c);
        }
    }
    out
}

/// `text` for one field of a line ([`neutralise`], and newline and tab escaped too): a value
/// printed inside a line (an id, a tool name, a reason) cannot end it and forge the next.
pub fn neutralise_line(text: &str) -> String {
    let mut out = neutralise(text);
    if out.contains(['\n', '\t']) {
        out = out.replace('\n', "\\u{a}").replace('\t', "\\u{9}");
    }
    out
}

/// Whether `c` is shown escaped by [`neutralise`]: every control character but newline and tab
/// (C0, DEL, and C1, which holds the 8-bit CSI U+009B), the line and paragraph separators, and
/// every format character of Unicode's category Cf (the bidirectional marks, embeddings,
/// overrides and isolates, U+061C, zero-width spaces, the invisible operators, the byte order
/// mark, the tag characters that can carry hidden text), but the zero-width joiner and
/// non-joiner, which only join what is around them (emoji, Indic scripts).
pub fn hidden_or_acting(c: char) -> bool {
    if c == '\n' || c == '\t' {
        return false;
    }
    if c.is_control() {
        return true;
    }
    matches!(
        c as u32,
        0x00ad
            | 0x0600..=0x0605
            | 0x061c
            | 0x06dd
            | 0x070f
            | 0x0890..=0x0891
            | 0x08e2
            | 0x180e
            | 0x200b
            | 0x200e..=0x200f
            | 0x2028..=0x202e
            | 0x2060..=0x2064
            | 0x2066..=0x206f
            | 0xfeff
            | 0xfff9..=0xfffb
            | 0x110bd
            | 0x110cd
            | 0x13430..=0x1343f
            | 0x1bca0..=0x1bca3
            | 0x1d173..=0x1d17a
            | 0xe0001
            | 0xe0020..=0xe007f
    )
}

/// `text` with HTML's special characters escaped.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // A character reference would still act (reorder, hide): shown as its escape.
            c if hidden_or_acting(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

fn html_page(
    result: &ToolResultRecord,
    outcome: &Outcome,
    evidence: &[CheckedEvidence],
    card: Option<&str>,
    payload: &serde_json::Value,
    diagnostics: &[String],
) -> String {
    let mut h = String::from(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>vak result</title>\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\
         <style>body{font-family:sans-serif;max-width:48rem;margin:2rem auto}.card{border:1px solid #888;border-radius:6px;padding:1rem}\
         .label{font-weight:bold}pre{white-space:pre-wrap;background:#f4f4f4;padding:1rem}</style></head><body>\n",
    );
    let _ = writeln!(
        h,
        "<p class=\"label\">{}</p>",
        escape(label_text(outcome.label))
    );
    if let Some(id) = card {
        let _ = writeln!(h, "<section class=\"card\"><h2>{}</h2><table>", escape(id));
        for (pointer, value) in figures(payload) {
            let backing: Vec<&str> = result
                .evidence
                .iter()
                .filter(|e| {
                    e.supports
                        .iter()
                        .any(|s| pointer == *s || pointer.starts_with(&format!("{s}/")))
                })
                .map(|e| e.id.as_str())
                .collect();
            let links: String = backing
                .iter()
                .map(|id| format!(" <a href=\"#evidence-{0}\">[{0}]</a>", escape(id)))
                .collect();
            let _ = writeln!(
                h,
                "<tr><th>{}</th><td>{}{links}</td></tr>",
                escape(&pointer),
                escape(&value)
            );
        }
        h.push_str("</table></section>\n");
    }
    for d in diagnostics {
        let _ = writeln!(h, "<p class=\"diagnostic\">{}</p>", escape(d));
    }
    let _ = writeln!(
        h,
        "<h2>Document</h2><pre>{}</pre>",
        escape(&result.markdown)
    );
    if !result.attachments.is_empty() {
        let _ = writeln!(
            h,
            "<h2>Attachments</h2><pre>{}</pre>",
            escape(&attachment_lines(result))
        );
    }
    h.push_str("<h2>Evidence</h2><ul>\n");
    for e in evidence {
        let verdict = match e.support {
            Support::Supported => "supported".to_string(),
            Support::Synthesized => "synthesized".to_string(),
            Support::Unsupported => format!("UNSUPPORTED: {}", e.diagnostics.join("; ")),
        };
        let _ = writeln!(
            h,
            "<li id=\"evidence-{0}\">{0}: {1}, {2}. {3}</li>",
            escape(&e.item.id),
            escape(&e.item.kind),
            escape(&verdict),
            escape(&e.item.note)
        );
    }
    h.push_str("</ul></body></html>\n");
    h
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn html_special_characters_are_escaped() {
        assert_eq!(
            escape("<script>alert('x')</script>&\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;"
        );
    }
}

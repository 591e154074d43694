//! A call's payload with the fields its evidence speaks for marked: each node at a JSON pointer
//! an evidence item backs is wrapped in a `<mark>` (one per item and pointer, with an anchor the
//! item's row links to). An item marks the fields the host found it upholds (`upheld`), or, when
//! it upholds none, the pointers it claims to support (`claimed`: not backed by the host).
//!
//! Written out here, not by `serde_json`'s printer, so that the marks sit around the values;
//! every key and value goes through [`shown`] and maud's escaping. Bounded: at most
//! [`MAX_NODES`] values and [`MAX_DEPTH`] levels are written (the page says when it is cut), and
//! at most [`MAX_MARKS`] marks are placed.

use super::shown;
use maud::{Markup, html};
use serde_json::Value;
use std::collections::{HashMap, HashSet};

/// Most JSON values written.
pub const MAX_NODES: usize = 5_000;
/// Most levels of nesting written.
pub const MAX_DEPTH: usize = 32;
/// Most marks placed (pointers over all items).
pub const MAX_MARKS: usize = 2_000;

/// One item's mark on one pointer.
struct Mark {
    anchor: String,
    item: String,
    upheld: bool,
    verdict: String,
}

/// What an evidence item's row links to: each pointer it marks and its anchor, and whether the
/// mark is on the page (not past a cut, and the pointer is in the payload).
pub struct Link {
    pub pointer: String,
    pub anchor: String,
    pub shown: bool,
    pub upheld: bool,
}

/// The payload as written, and each item's links.
pub struct Payload {
    pub markup: Option<Markup>,
    pub cut: bool,
    /// Per evidence item (in the record's order), its links.
    pub links: Vec<Vec<Link>>,
}

impl Payload {
    /// The payload of record `v` (its `result.payload_json`), marked for `items`: each evidence
    /// item as returned beside the host's verdict on it.
    pub fn of(v: &Value, items: &[(Value, &Value)]) -> Payload {
        let payload = v
            .pointer("/result/payload_json")
            .and_then(Value::as_str)
            .and_then(|t| serde_json::from_str::<Value>(t).ok());
        let mut marks: HashMap<String, Vec<Mark>> = HashMap::new();
        let mut links = Vec::with_capacity(items.len());
        let mut placed = 0usize;
        for (n, (item, verdict)) in items.iter().enumerate() {
            let strings = |o: &Value, key: &str| -> Vec<String> {
                o.get(key)
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default()
            };
            let upholds = strings(verdict, "upholds");
            let (pointers, upheld) = match upholds.is_empty() {
                false => (upholds, true),
                true => (strings(item, "supports"), false),
            };
            let id = item.get("id").and_then(Value::as_str).unwrap_or("-");
            let verdict_text = verdict
                .get("support")
                .and_then(Value::as_str)
                .unwrap_or("-");
            let mut mine = Vec::new();
            for (k, pointer) in pointers.into_iter().enumerate() {
                if placed >= MAX_MARKS {
                    break;
                }
                placed += 1;
                let anchor = format!("mark-{n}-{k}");
                let present = payload
                    .as_ref()
                    .is_some_and(|p| p.pointer(&pointer).is_some());
                mine.push(Link {
                    pointer: pointer.clone(),
                    anchor: anchor.clone(),
                    shown: present,
                    upheld,
                });
                marks.entry(pointer).or_default().push(Mark {
                    anchor,
                    item: id.to_string(),
                    upheld,
                    verdict: verdict_text.to_string(),
                });
            }
            links.push(mine);
        }
        let Some(payload) = payload else {
            return Payload {
                markup: None,
                cut: false,
                links,
            };
        };
        let mut w = Writer {
            marks: &marks,
            nodes: 0,
            cut: false,
            written: HashSet::new(),
        };
        let markup = w.node(&payload, "", 0, 0);
        for l in links.iter_mut().flatten() {
            l.shown = l.shown && w.written.contains(&l.anchor);
        }
        Payload {
            markup: Some(markup),
            cut: w.cut,
            links,
        }
    }
}

struct Writer<'a> {
    marks: &'a HashMap<String, Vec<Mark>>,
    nodes: usize,
    cut: bool,
    /// The anchors written.
    written: HashSet<String>,
}

impl Writer<'_> {
    /// `v` (at `pointer`, `indent` levels in) as pretty JSON, in its marks.
    fn node(&mut self, v: &Value, pointer: &str, indent: usize, depth: usize) -> Markup {
        self.nodes += 1;
        if self.nodes > MAX_NODES || depth > MAX_DEPTH {
            self.cut = true;
            return html! { span.cut { "…" } };
        }
        let inner = match v {
            Value::Object(o) if !o.is_empty() => {
                let pad = "  ".repeat(indent + 1);
                let last = o.len() - 1;
                let mut parts = Vec::with_capacity(o.len());
                for (i, (k, child)) in o.iter().enumerate() {
                    if self.nodes >= MAX_NODES {
                        self.cut = true;
                        parts.push(html! { (pad) span.cut { "… (" (o.len() - i) " more)" } "\n" });
                        break;
                    }
                    let at = format!("{pointer}/{}", k.replace('~', "~0").replace('/', "~1"));
                    let key = serde_json::to_string(k).unwrap_or_default();
                    let value = self.node(child, &at, indent + 1, depth + 1);
                    parts.push(html! { (pad) span.key { (shown(&key)) } ": " (value) @if i < last { "," } "\n" });
                }
                html! { "{\n" @for p in parts { (p) } ("  ".repeat(indent)) "}" }
            }
            Value::Array(a) if !a.is_empty() => {
                let pad = "  ".repeat(indent + 1);
                let last = a.len() - 1;
                let mut parts = Vec::with_capacity(a.len());
                for (i, child) in a.iter().enumerate() {
                    if self.nodes >= MAX_NODES {
                        self.cut = true;
                        parts.push(html! { (pad) span.cut { "… (" (a.len() - i) " more)" } "\n" });
                        break;
                    }
                    let value = self.node(child, &format!("{pointer}/{i}"), indent + 1, depth + 1);
                    parts.push(html! { (pad) (value) @if i < last { "," } "\n" });
                }
                html! { "[\n" @for p in parts { (p) } ("  ".repeat(indent)) "]" }
            }
            scalar => html! { (shown(&serde_json::to_string(scalar).unwrap_or_default())) },
        };
        match self.marks.get(pointer) {
            None => inner,
            Some(marks) => {
                // The first item's mark outermost; each its own anchor.
                let mut out = inner;
                for m in marks.iter().rev() {
                    self.written.insert(m.anchor.clone());
                    let class = if m.upheld { "upheld" } else { "claimed" };
                    let title = format!(
                        "evidence {} ({}): {}",
                        m.item,
                        m.verdict,
                        if m.upheld {
                            "the host found this value backed"
                        } else {
                            "claimed by the tool, not backed by the host"
                        }
                    );
                    out = html! {
                        mark id=(m.anchor) class=(class) data-evidence=(shown(&m.item)) data-pointer=(shown(pointer)) title=(shown(&title)) { (out) }
                    };
                }
                out
            }
        }
    }
}

/// The constant part of the page around a payload (no value of the record in it).
pub fn legend() -> Markup {
    html! {
        p.legend {
            mark.upheld { "framed" } " a value an evidence item upholds (the host checked it); "
            mark.claimed { "dashed" } " a value an item claims to support that the host did not back."
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn supported_values_are_marked_and_everything_is_escaped() {
        let record = json!({ "result": { "payload_json":
            json!({ "count": 3, "a/b": "<script>x</script>", "list": [1, 2] }).to_string() } });
        let item = json!({ "id": "summary<", "supports": ["/count", "/list/1", "/nowhere"] });
        let verdict = json!({ "support": "unsupported" });
        let p = Payload::of(&record, &[(item, &verdict)]);
        let html = p.markup.unwrap().into_string();
        assert!(html.contains("data-pointer=\"/count\""), "{html}");
        assert!(html.contains("class=\"claimed\""), "{html}");
        assert!(html.contains(">3</mark>"), "{html}");
        assert!(html.contains(">2</mark>"), "{html}");
        assert!(
            html.contains("&lt;script&gt;") && !html.contains("<script"),
            "{html}"
        );
        assert!(html.contains("data-evidence=\"summary&lt;\""), "{html}");
        let shown: Vec<bool> = p.links[0].iter().map(|l| l.shown).collect();
        assert_eq!(shown, [true, true, false]);
        assert!(!p.cut);
    }

    #[test]
    fn a_large_payload_is_cut_and_says_so() {
        let big: Vec<u32> = (0..(MAX_NODES as u32 + 10)).collect();
        let record = json!({ "result": { "payload_json": json!({ "v": big }).to_string() } });
        let item = json!({ "id": "e", "supports": ["/v/9000"] });
        let verdict = json!({ "support": "supported", "upholds": ["/v/9000"] });
        let p = Payload::of(&record, &[(item, &verdict)]);
        assert!(p.cut);
        assert!(
            !p.links[0][0].shown,
            "a mark past the cut is not linked as shown"
        );
        let html = p.markup.unwrap().into_string();
        assert!(html.contains("more)"), "{}", &html[html.len() - 200..]);
    }
}

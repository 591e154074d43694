//! The doc comments of a component's exported functions, from its `package-docs` custom
//! section.
//!
//! wit-parser's `PackageMetadata` writes this section when it encodes a WIT package (a version
//! byte, 0 or 1, then JSON); tools such as Wassette's `wit-docs-inject` put it at the top level
//! of a built component. Its layout, from `wit-parser/src/metadata.rs` (0.254):
//!
//! ```json
//! {"worlds": {"W": {
//!     "func_exports": {"NAME": {"docs": "…"}},       // v1 world exports
//!     "funcs": {"NAME": {"docs": "…"} or "…"},        // imports (and v0 exports)
//!     "interface_exports": {"NAME": {"funcs": {…}}},  // inline `export name: interface {…}`
//!     "interfaces": {"NAME": {"funcs": {…}}}},        // the same, for imports (and v0)
//!  "interfaces": {"I": {"funcs": {"NAME": {"docs": "…"}}}}}   // the package's interfaces
//! ```
//!
//! The section does not name its package, so an export `ns:pkg/I@v` is matched to the
//! package's interface `I` by that short name, and only when no other exported interface has
//! the same short name.

use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap};
use wasmparser::{ComponentExternalKind, Parser, Payload};

/// The custom section wit-parser writes a WIT package's docs to.
const SECTION: &str = "package-docs";

/// A `package-docs` section larger than this is ignored.
pub const MAX_DOCS_SECTION_BYTES: usize = 1 << 20;

/// Longest description kept for one function (longer ones are cut, marked `…`).
pub const MAX_DOC_BYTES: usize = 8 << 10;

/// The doc comment of each exported function the component documents: keyed by the function's
/// name for a top-level function export, and by `EXPORT#FUNCTION` for a function of an exported
/// interface, where `EXPORT` is the interface's export name exactly as the component exports it
/// (`local:time-server/time#get-current-time`, `time#now` for an inline interface). Functions
/// without docs, and everything of a component without the section (or with a malformed one),
/// are absent: this never fails.
pub fn function_docs(wasm: &[u8]) -> BTreeMap<String, String> {
    let top = scan(wasm);
    let mut out = BTreeMap::new();
    let Some(docs) = top.docs.and_then(parse_section) else {
        return out;
    };
    let worlds: Vec<&Map<String, Value>> = member(&docs, "worlds")
        .map(|w| w.values().filter_map(Value::as_object).collect())
        .unwrap_or_default();
    // A world's own function exports (v1), else the map v0 kept them in.
    for name in &top.funcs {
        let found = worlds.iter().find_map(|w| {
            lookup(w, "func_exports", name)
                .or_else(|| lookup(w, "funcs", name))
                .and_then(function_doc)
        });
        if let Some(doc) = found {
            out.insert(name.clone(), doc);
        }
    }
    let mut shared: HashMap<&str, usize> = HashMap::new();
    for export in &top.instances {
        *shared.entry(short_name(export)).or_default() += 1;
    }
    for export in &top.instances {
        let interface = if export.contains(':') {
            let short = short_name(export);
            let unique = shared.get(short) == Some(&1);
            unique
                .then(|| member(&docs, "interfaces").and_then(|i| i.get(short)))
                .flatten()
        } else {
            // An inline interface (`export time: interface {…}`) is the world's own.
            worlds.iter().find_map(|w| {
                lookup(w, "interface_exports", export).or_else(|| lookup(w, "interfaces", export))
            })
        };
        let Some(funcs) = interface.and_then(|i| member(i, "funcs")) else {
            continue;
        };
        for (name, meta) in funcs {
            if let Some(doc) = function_doc(meta) {
                out.insert(format!("{export}#{name}"), doc);
            }
        }
    }
    out
}

/// What the component's top level holds: its docs section and its exports' names.
#[derive(Default)]
struct Top<'a> {
    docs: Option<&'a [u8]>,
    funcs: Vec<String>,
    instances: Vec<String>,
}

/// One pass over the binary's sections, reading only the outermost component's (nested modules
/// and components have docs and exports of their own). Stops at the first malformed section.
fn scan(wasm: &[u8]) -> Top<'_> {
    let mut top = Top::default();
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(wasm) {
        let Ok(payload) = payload else { break };
        match payload {
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) if depth == 0 => break,
            Payload::End(_) => depth -= 1,
            Payload::CustomSection(section) if depth == 0 && section.name() == SECTION => {
                // wit-parser refuses a second section; the first one is kept here.
                top.docs.get_or_insert(section.data());
            }
            Payload::ComponentExportSection(reader) if depth == 0 => {
                for export in reader {
                    let Ok(export) = export else { break };
                    let name = export.name.name.to_string();
                    match export.kind {
                        ComponentExternalKind::Func => top.funcs.push(name),
                        ComponentExternalKind::Instance => top.instances.push(name),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    top
}

/// The section's JSON, if it is of a version this reads (0 or 1) and not too large.
fn parse_section(data: &[u8]) -> Option<Value> {
    if data.len() > MAX_DOCS_SECTION_BYTES {
        tracing::debug!(
            bytes = data.len(),
            "package-docs section larger than {MAX_DOCS_SECTION_BYTES} bytes: ignored"
        );
        return None;
    }
    match data.split_first() {
        Some((0 | 1, json)) => serde_json::from_slice(json).ok(),
        _ => None,
    }
}

fn member<'v>(value: &'v Value, key: &str) -> Option<&'v Map<String, Value>> {
    value.get(key).and_then(Value::as_object)
}

fn lookup<'v>(world: &'v Map<String, Value>, map: &str, name: &str) -> Option<&'v Value> {
    world.get(map).and_then(|m| m.get(name))
}

/// A function's docs: `{"docs": "…"}` (v1), or the string itself (v0).
fn function_doc(meta: &Value) -> Option<String> {
    let doc = match meta {
        Value::String(s) => s,
        Value::Object(m) => m.get("docs")?.as_str()?,
        _ => return None,
    };
    Some(super::cut(doc, MAX_DOC_BYTES))
}

/// `I` of an interface export name `ns:pkg/I` or `ns:pkg/I@version`.
fn short_name(export: &str) -> &str {
    let path = export.rsplit_once('/').map_or(export, |(_, i)| i);
    path.split_once('@').map_or(path, |(i, _)| i)
}

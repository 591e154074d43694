//! Doc comments from the `package-docs` section wit-parser writes, keyed as the component
//! exports its functions.

use super::kit;
use crate::foreign::{MAX_DOC_BYTES, MAX_DOCS_SECTION_BYTES, function_docs};
use serde_json::json;
use std::collections::BTreeMap;

const DOCUMENTED: &str = r#"
package local:time-server;

/// The time interface.
interface time {
    /// Returns the current time.
    ///
    /// As an ISO 8601 string.
    get-current-time: func() -> string;
    undocumented: func();
}

world w {
    /// Fetch a URL.
    export fetch: func(url: string) -> result<string, string>;
    export plain: func();
    export time;
    export clock: interface {
        /// Now, inline.
        now: func() -> u64;
    }
}
"#;

#[test]
fn docs_of_top_level_and_interface_functions_are_keyed_by_export_name() {
    let built = kit::build(DOCUMENTED);
    // The keys are the names wasmtime reports for the exports.
    assert!(built.funcs.contains_key("fetch"));
    assert!(
        built
            .funcs
            .contains_key("local:time-server/time#get-current-time")
    );
    assert!(built.funcs.contains_key("clock#now"));
    let wasm = kit::with_custom_section(
        built.wasm.clone(),
        "package-docs",
        &kit::package_docs(&built),
    );
    let expected: BTreeMap<String, String> = [
        ("fetch", "Fetch a URL."),
        (
            "local:time-server/time#get-current-time",
            "Returns the current time.\n\nAs an ISO 8601 string.",
        ),
        ("clock#now", "Now, inline."),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(function_docs(&wasm), expected);
}

#[test]
fn a_component_without_docs_has_none() {
    let built = kit::build(DOCUMENTED);
    assert!(function_docs(&built.wasm).is_empty());
    assert!(function_docs(b"not wasm at all").is_empty());
    assert!(function_docs(&[]).is_empty());
}

fn with_docs(doc_section: &[u8]) -> BTreeMap<String, String> {
    let built = kit::build(DOCUMENTED);
    function_docs(&kit::with_custom_section(
        built.wasm.clone(),
        "package-docs",
        doc_section,
    ))
}

#[test]
fn the_v0_layout_is_read_too() {
    // Version 0: a world's exports in `funcs`, a function's metadata its docs string.
    let section = [
        &[0u8][..],
        json!({"worlds": {"w": {"funcs": {"fetch": "Fetch, v0."}}}})
            .to_string()
            .as_bytes(),
    ]
    .concat();
    let docs = with_docs(&section);
    assert_eq!(docs.get("fetch").map(String::as_str), Some("Fetch, v0."));
    assert_eq!(docs.len(), 1);
}

#[test]
fn malformed_unknown_or_oversized_sections_are_ignored() {
    let good =
        json!({"worlds": {"w": {"func_exports": {"fetch": {"docs": "Fetch."}}}}}).to_string();
    assert_eq!(with_docs(&[&[1u8][..], good.as_bytes()].concat()).len(), 1);
    assert!(
        with_docs(&[&[2u8][..], good.as_bytes()].concat()).is_empty(),
        "version 2"
    );
    assert!(with_docs(b"\x01{not json").is_empty());
    assert!(with_docs(b"").is_empty());
    // A docs entry for a function the component does not export is not reported.
    let other = json!({"worlds": {"w": {"func_exports": {"other": {"docs": "No."}}}}}).to_string();
    assert!(with_docs(&[&[1u8][..], other.as_bytes()].concat()).is_empty());
    // Past 1 MiB the section is not parsed at all.
    let padded = json!({
        "worlds": {"w": {"func_exports": {"fetch": {"docs": "Fetch."}}}},
        "docs": "p".repeat(MAX_DOCS_SECTION_BYTES),
    })
    .to_string();
    assert!(with_docs(&[&[1u8][..], padded.as_bytes()].concat()).is_empty());
}

#[test]
fn a_long_description_is_cut() {
    let long = "d".repeat(3 * MAX_DOC_BYTES);
    let section = json!({"worlds": {"w": {"func_exports": {"fetch": {"docs": long}}}}}).to_string();
    let docs = with_docs(&[&[1u8][..], section.as_bytes()].concat());
    let doc = docs.get("fetch").expect("documented");
    assert!(
        doc.len() <= MAX_DOC_BYTES && doc.ends_with('…'),
        "{}",
        doc.len()
    );
}

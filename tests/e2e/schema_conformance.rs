//! The schema stage against the official JSON-Schema-Test-Suite (draft 2020-12): every case of
//! every group whose schema uses only the keywords the stage enforces must agree, the groups
//! selected by the keywords they use, never by name (the rule of
//! `shared/conformance/README.md`, with the keywords the stage enforces now). The data is read
//! from `../shared` at test time (or `$VAK_CONFORMANCE_DIR`).
//!
//! The suite files there cover the first subset only; for the newer keywords (bounds, lengths,
//! counts, tuples, `uniqueItems`, the applicators), the stage is also compared with the
//! reference reading in `vak_tests::jsonschema` on instances generated from WIT-shaped schemas,
//! and changed near their bounds.

use serde_json::{Value, json};
use std::path::PathBuf;
use vak_host::schema::{CompiledSchema, ENFORCED, SchemaError};
use vak_tests::jsonschema::{OneOf, Rng, generate, mutate, nudge, valid};

fn suite_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("VAK_CONFORMANCE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../shared/conformance/json-schema-test-suite/draft2020-12")
        });
    dir.is_dir().then_some(dir)
}

/// Keywords whose value is a schema, a map of schemas, or a list of schemas.
const ONE_SCHEMA: [&str; 3] = ["additionalProperties", "items", "not"];
const MAP_OF_SCHEMAS: [&str; 3] = ["properties", "$defs", "definitions"];
const LIST_OF_SCHEMAS: [&str; 4] = ["prefixItems", "allOf", "anyOf", "oneOf"];
/// The annotations the README's rule allows.
const ANNOTATIONS: [&str; 4] = ["$schema", "$comment", "title", "description"];
/// The first subset (the README's rule as written), to show the newer keywords were reached.
const FIRST_SUBSET: [&str; 10] = [
    "type",
    "properties",
    "required",
    "additionalProperties",
    "enum",
    "const",
    "items",
    "$ref",
    "$defs",
    "definitions",
];

/// Whether `schema` uses only `keywords` (and annotations), in every subschema; `$ref` only to
/// a local pointer, `items` only as a schema (its draft-07 array form is not 2020-12's).
fn uses_only(schema: &Value, keywords: &[&str]) -> bool {
    let Some(obj) = schema.as_object() else {
        return schema.is_boolean();
    };
    obj.iter().all(|(k, v)| {
        let k = k.as_str();
        if ANNOTATIONS.contains(&k) {
            return true;
        }
        if !keywords.contains(&k) {
            return false;
        }
        if ONE_SCHEMA.contains(&k) {
            !v.is_array() && uses_only(v, keywords)
        } else if MAP_OF_SCHEMAS.contains(&k) {
            v.as_object()
                .is_some_and(|m| m.values().all(|s| uses_only(s, keywords)))
        } else if LIST_OF_SCHEMAS.contains(&k) {
            v.as_array()
                .is_some_and(|l| l.iter().all(|s| uses_only(s, keywords)))
        } else if k == "$ref" {
            v.as_str().is_some_and(|r| r.starts_with('#'))
        } else {
            true
        }
    })
}

/// The stage's verdict on `data`, checked against itself: the fast pass and the pass that names
/// violations agree, and each violation's pointers point into the data and the schema.
fn verdict(label: &str, schema: &Value, compiled: &CompiledSchema, data: &Value) -> bool {
    let fast = compiled.is_valid(data);
    match compiled.validate_value(data) {
        Ok(()) => assert!(fast, "{label}: the passes disagree on {data}"),
        Err(SchemaError::Violations { violations, .. }) => {
            assert!(!fast, "{label}: the passes disagree on {data}");
            assert!(!violations.is_empty(), "{label}: refused, nothing named");
            for v in &violations {
                assert!(
                    data.pointer(&v.instance).is_some() && schema.pointer(&v.keyword).is_some(),
                    "{label}: {data}: {v:?} does not point into the data and the schema"
                );
            }
        }
    }
    fast
}

#[test]
fn the_suite_cases_within_the_enforced_keywords_all_agree() {
    let Some(dir) = suite_dir() else {
        vak_tests::skipped(
            "the JSON-Schema-Test-Suite data is not at ../shared/conformance (set VAK_CONFORMANCE_DIR)",
        );
        return;
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("the suite folder reads")
        .map(|e| e.expect("a folder entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let (mut run, mut newer, mut outside) = (0usize, 0usize, 0usize);
    let mut failures = Vec::new();
    for file in &files {
        let groups: Vec<Value> =
            serde_json::from_slice(&std::fs::read(file).expect("a suite file reads"))
                .expect("a suite file is JSON");
        let name = file.file_name().unwrap_or_default().to_string_lossy();
        for group in groups {
            let schema = &group["schema"];
            if !uses_only(schema, &ENFORCED) {
                outside += 1;
                continue;
            }
            let compiled = match CompiledSchema::compile(schema) {
                Ok(c) => c,
                Err(e) => {
                    failures.push(format!(
                        "{name}: {}: does not compile: {e}",
                        group["description"]
                    ));
                    continue;
                }
            };
            assert!(
                compiled.not_enforced.is_empty(),
                "{name}: {}: {:?}",
                group["description"],
                compiled.not_enforced
            );
            let cases = group["tests"].as_array().expect("a group lists its tests");
            if !uses_only(schema, &FIRST_SUBSET) {
                newer += cases.len();
            }
            for case in cases {
                run += 1;
                let label = format!("{name}: {} / {}", group["description"], case["description"]);
                let expected = case["valid"].as_bool().expect("a case says valid or not");
                let got = verdict(&label, schema, &compiled, &case["data"]);
                if got != expected {
                    failures.push(format!("{label}: expected valid={expected}, got {got}"));
                }
            }
        }
    }
    println!(
        "schema conformance: {run} cases run ({newer} of them with the newer keywords) from {} files; {outside} groups outside the enforced keywords",
        files.len()
    );
    assert!(
        failures.is_empty(),
        "{} disagreements:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(
        run >= 267,
        "the rule selects at least the 267 cases of the first subset; ran {run}"
    );
    assert!(newer > 0, "no case used the newer keywords");
}

/// Schemas as WIT types are written for hosts that take JSON: integers with their ranges, `char`,
/// tuples, `option` (`anyOf` with null), `result` and `variant` (`oneOf` of tagged objects),
/// `flags`, `list`, and the applicators and counts beside them.
fn wit_shaped() -> Vec<(&'static str, Value)> {
    let int = |lo: Value, hi: Value| json!({"type": "integer", "minimum": lo, "maximum": hi});
    vec![
        (
            "record of scalars",
            json!({"type": "object", "additionalProperties": false,
                "required": ["a", "b", "c", "d", "e", "f", "g", "h", "ch", "x"],
                "properties": {
                    "a": int(json!(0), json!(255)), "b": int(json!(-128), json!(127)),
                    "c": int(json!(0), json!(65535)), "d": int(json!(-32768), json!(32767)),
                    "e": int(json!(0), json!(u32::MAX)), "f": int(json!(i32::MIN), json!(i32::MAX)),
                    "g": int(json!(0), json!(u64::MAX)), "h": int(json!(i64::MIN), json!(i64::MAX)),
                    "ch": {"type": "string", "minLength": 1, "maxLength": 1},
                    "x": {"type": "number"}}}),
        ),
        (
            "tuples",
            json!({"type": "object", "properties": {
                "pair": {"type": "array", "prefixItems": [int(json!(0), json!(255)), {"type": "string"}],
                    "items": false, "minItems": 2, "maxItems": 2},
                "unit": {"type": "array", "prefixItems": [], "items": false, "maxItems": 0},
                "open": {"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "integer"}}}}),
        ),
        (
            "option and result",
            json!({"type": "object", "required": ["o", "r"], "properties": {
                "o": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/point"}]},
                "r": {"oneOf": [
                    {"type": "object", "properties": {"ok": int(json!(0), json!(u32::MAX))},
                        "required": ["ok"], "additionalProperties": false},
                    {"type": "object", "properties": {"err": {"type": "string", "maxLength": 8}},
                        "required": ["err"], "additionalProperties": false}]}},
                "$defs": {"point": {"type": "object", "required": ["x", "y"], "additionalProperties": false,
                    "properties": {"x": int(json!(i32::MIN), json!(i32::MAX)), "y": int(json!(i32::MIN), json!(i32::MAX))}}}}),
        ),
        (
            "variant",
            json!({"oneOf": [
                {"type": "object", "required": ["tag"], "additionalProperties": false,
                    "properties": {"tag": {"const": "none"}}},
                {"type": "object", "required": ["tag", "val"], "additionalProperties": false,
                    "properties": {"tag": {"const": "circle"}, "val": {"type": "number", "exclusiveMinimum": 0}}},
                {"type": "object", "required": ["tag", "val"], "additionalProperties": false,
                    "properties": {"tag": {"const": "label"}, "val": {"type": "string", "minLength": 1}}}]}),
        ),
        (
            "flags and lists",
            json!({"type": "object", "properties": {
                "flags": {"type": "array", "uniqueItems": true,
                    "items": {"type": "string", "enum": ["read", "write", "exec"]}},
                "bytes": {"type": "array", "items": int(json!(0), json!(255)), "maxItems": 4},
                "names": {"type": "array", "uniqueItems": true, "items": {"type": "string"}}}}),
        ),
        (
            "nested options in a list",
            json!({"type": "array", "items": {"anyOf": [{"type": "null"},
                {"type": "array", "items": {"anyOf": [{"type": "null"}, int(json!(0), json!(9))]}}]}}),
        ),
        (
            "applicators and counts",
            json!({"type": "object", "minProperties": 1, "maxProperties": 3,
                "additionalProperties": {"allOf": [{"type": "integer"}, {"not": {"const": 13}}],
                    "multipleOf": 3, "exclusiveMaximum": 1000}}),
        ),
    ]
}

#[test]
fn the_newer_keywords_agree_with_the_reference_on_generated_instances() {
    let (mut total_valid, mut total_invalid) = (0usize, 0usize);
    for (label, schema) in wit_shaped() {
        let compiled = CompiledSchema::compile(&schema).expect("compiles");
        assert!(
            compiled.not_enforced.is_empty(),
            "{label}: {:?}",
            compiled.not_enforced
        );
        let (mut accepted, mut refused) = (0usize, 0usize);
        for seed in 0..400u64 {
            let mut rng = Rng::new(seed);
            let Some(base) = generate(&schema, &schema, &mut rng) else {
                continue;
            };
            let tried = [
                base.clone(),
                nudge(&base, &mut rng),
                nudge(&nudge(&base, &mut rng), &mut rng),
                mutate(&base, &mut rng),
            ];
            for v in tried {
                let expected = valid(&schema, &schema, &v, OneOf::Exactly);
                let got = verdict(label, &schema, &compiled, &v);
                assert_eq!(
                    got, expected,
                    "{label}: the stage says valid={got}, the reference valid={expected}\n  instance: {v}\n  schema: {schema}"
                );
                if got {
                    accepted += 1;
                } else {
                    refused += 1;
                }
            }
        }
        println!("{label}: {accepted} accepted, {refused} refused, both as the reference");
        assert!(
            accepted >= 50 && refused >= 50,
            "{label}: {accepted} accepted, {refused} refused"
        );
        total_valid += accepted;
        total_invalid += refused;
    }
    println!("generated: {total_valid} accepted, {total_invalid} refused");
}

//! Whether a `oneOf`'s alternatives exclude each other: then no value matches two, and
//! `anyOf` (all OpenAI's strict mode has, and how Gemini reads `oneOf`) says the same thing.
//!
//! Read conservatively, from evidence a schema gives that no value passes two alternatives:
//! types that do not meet (`integer` is within `number`), value sets (`enum`, `const`) that
//! share no member, or, for objects, a name one alternative requires that the other refuses
//! (not declared where `additionalProperties` is `false`, or declared with a subschema that
//! excludes the first's: a tag's `const`). A keyword it does not read only makes an alternative
//! stricter, so the evidence still holds; where there is none, the alternatives may overlap.

use crate::schema::json_equal;
use serde_json::{Map, Value};

/// The kinds of JSON value, which (unlike `type`'s names, where `number` includes `integer`) no
/// value is two of: a number is an integer or has a fractional part. A set of kinds is a `u8`,
/// bit `i` standing for `KINDS[i]`.
const KINDS: [&str; 7] = [
    "null", "boolean", "integer", "fraction", "string", "array", "object",
];
const ANY: u8 = (1 << KINDS.len()) - 1;

/// The bit of the kind named `name` (any kind for a name that is none).
fn kind(name: &str) -> u8 {
    KINDS
        .iter()
        .position(|k| *k == name)
        .map_or(ANY, |i| 1 << i)
}

/// Deepest nesting read (a `$ref` chain, a tag's subschema).
const MAX_DEPTH: usize = 32;

/// The kinds a `type` name allows; an unknown name (which the schema stage refuses) reads as
/// any kind here.
fn type_bits(name: &str) -> u8 {
    match name {
        "number" => kind("integer") | kind("fraction"),
        "fraction" => ANY,
        _ => kind(name),
    }
}

fn value_bits(v: &Value) -> u8 {
    match v {
        Value::Null => kind("null"),
        Value::Bool(_) => kind("boolean"),
        Value::Number(n) if n.is_i64() || n.is_u64() => kind("integer"),
        Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0) => kind("integer"),
        Value::Number(_) => kind("fraction"),
        Value::String(_) => kind("string"),
        Value::Array(_) => kind("array"),
        Value::Object(_) => kind("object"),
    }
}

/// The members of `enum`, or `const` as one.
fn values(o: &Map<String, Value>) -> Option<&[Value]> {
    o.get("const")
        .map(std::slice::from_ref)
        .or_else(|| o.get("enum").and_then(Value::as_array).map(Vec::as_slice))
}

/// The types a schema object allows, by `type` and by its value set.
fn types(o: &Map<String, Value>) -> u8 {
    let declared = match o.get("type") {
        Some(Value::String(t)) => type_bits(t),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .fold(0, |b, t| b | type_bits(t)),
        _ => ANY,
    };
    let listed = values(o).map_or(ANY, |vs| vs.iter().fold(0, |b, v| b | value_bits(v)));
    declared & listed
}

fn target<'a>(o: &Map<String, Value>, root: &'a Value) -> Option<&'a Value> {
    o.get("$ref")?
        .as_str()?
        .strip_prefix('#')
        .and_then(|p| root.pointer(p))
}

/// Whether every pair of `branches` excludes each other. `budget`: subschema pairs left to
/// compare (shared with the caller's walk); none left, the answer is no.
pub(super) fn exclusive(branches: &[Value], root: &Value, budget: &mut usize) -> bool {
    branches.iter().enumerate().all(|(i, a)| {
        branches[i + 1..]
            .iter()
            .all(|b| disjoint(a, b, root, 0, budget))
    })
}

/// Whether no value passes both `a` and `b`, by the evidence the module names.
fn disjoint(a: &Value, b: &Value, root: &Value, depth: usize, budget: &mut usize) -> bool {
    if depth > MAX_DEPTH || *budget == 0 {
        return false;
    }
    *budget -= 1;
    let (ao, bo) = match (a, b) {
        (Value::Bool(false), _) | (_, Value::Bool(false)) => return true,
        (Value::Object(ao), Value::Object(bo)) => (ao, bo),
        _ => return false,
    };
    // A `$ref` and its siblings both apply: evidence from either side of it holds.
    if let Some(t) = target(ao, root)
        && disjoint(t, b, root, depth + 1, budget)
    {
        return true;
    }
    if let Some(t) = target(bo, root)
        && disjoint(a, t, root, depth + 1, budget)
    {
        return true;
    }
    let shared = types(ao) & types(bo);
    if shared == 0 {
        return true;
    }
    if let (Some(va), Some(vb)) = (values(ao), values(bo))
        && !va.iter().any(|x| vb.iter().any(|y| json_equal(x, y)))
    {
        return true;
    }
    shared == kind("object")
        && (refuses_a_required_name(ao, bo, root, depth, budget)
            || refuses_a_required_name(bo, ao, root, depth, budget))
}

/// Whether `b` refuses a name `a` requires (so no object passes both).
fn refuses_a_required_name(
    a: &Map<String, Value>,
    b: &Map<String, Value>,
    root: &Value,
    depth: usize,
    budget: &mut usize,
) -> bool {
    let required = a.get("required").and_then(Value::as_array);
    let a_props = a.get("properties").and_then(Value::as_object);
    let b_props = b.get("properties").and_then(Value::as_object);
    required
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .any(|name| {
            let theirs = b_props
                .and_then(|p| p.get(name))
                .or_else(|| b.get("additionalProperties"));
            match (a_props.and_then(|p| p.get(name)), theirs) {
                (_, Some(Value::Bool(false))) => true,
                (Some(ours), Some(theirs)) => disjoint(ours, theirs, root, depth + 1, budget),
                _ => false,
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(branches: Value) -> bool {
        let list = branches.as_array().cloned().unwrap_or_default();
        exclusive(&list, &branches, &mut 10_000)
    }

    #[test]
    fn alternatives_exclude_each_other_only_on_evidence() {
        // Types, value sets, a closed object's names, a tag's const.
        assert!(check(
            json!([{"type": "string"}, {"type": "integer"}, {"type": "null"}])
        ));
        assert!(!check(json!([{"type": "integer"}, {"type": "number"}])));
        // A keyword it does not read (`not`) is no evidence.
        assert!(!check(
            json!([{"type": "integer"}, {"type": "number", "not": {"type": "integer"}}])
        ));
        assert!(check(
            json!([{"const": "a"}, {"enum": ["b", "c"]}, {"type": "object"}])
        ));
        assert!(!check(json!([{"enum": ["a", 1]}, {"enum": [1.0]}])));
        assert!(check(json!([
            {"type": "object", "properties": {"Circle": {}}, "required": ["Circle"], "additionalProperties": false},
            {"type": "object", "properties": {"Square": {}}, "required": ["Square"], "additionalProperties": false}
        ])));
        assert!(check(json!([
            {"type": "object", "properties": {"kind": {"type": "string", "const": "start"}}, "required": ["kind"]},
            {"type": "object", "properties": {"kind": {"type": "string", "const": "stop"}}, "required": ["kind"]}
        ])));
        // Open objects that could carry both names; the same name twice.
        assert!(!check(json!([
            {"type": "object", "required": ["a"]}, {"type": "object", "required": ["b"]}
        ])));
        assert!(!check(json!([
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": false},
            {"type": "object", "properties": {"a": {"type": "string", "const": "x"}}, "required": ["a"], "additionalProperties": false}
        ])));
        // Without `type`, a non-object passes both object alternatives.
        assert!(!check(json!([
            {"properties": {"a": {}}, "required": ["a"], "additionalProperties": false},
            {"properties": {"b": {}}, "required": ["b"], "additionalProperties": false}
        ])));
        // Through a `$ref`; and no budget, no answer.
        let root = json!({"$defs": {"S": {"type": "string"}}});
        let list = [json!({"$ref": "#/$defs/S"}), json!({"type": "boolean"})];
        assert!(exclusive(&list, &root, &mut 100));
        assert!(!exclusive(&list, &root, &mut 0));
    }
}

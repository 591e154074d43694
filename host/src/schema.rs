//! Schema contract: the arguments against the tool's admitted input schema.
//!
//! The boundary enforces a provider-neutral subset of JSON Schema (draft 2020-12 semantics):
//! `type` (one or several; `integer` is any number with no fractional part), `properties`,
//! `required`, `additionalProperties`, `enum`, `const`, `items`, boolean schemas, and `$ref` to a
//! local JSON Pointer (`#`, `#/$defs/…`, `#/definitions/…`). A schema is compiled once, at
//! admission. Keywords outside the subset are listed, with their pointers, as *not enforced*;
//! they are never silently treated as enforced. A `$ref` that is not a local pointer (a URL, a
//! file, an anchor) is refused at admission and never fetched or read.
//!
//! Validation never repairs a call: no defaults filled in, no coercion, nothing dropped. It
//! reports every violation, each with the JSON Pointer of the offending value and of the schema
//! keyword that refused it.

use crate::stage::{Stage, StageError};
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::fmt::Write as _;

/// Keywords the boundary enforces.
const ENFORCED: [&str; 10] = [
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
/// Keywords that only annotate; they assert nothing, so there is nothing to enforce.
const ANNOTATIONS: [&str; 10] = [
    "$schema",
    "$comment",
    "title",
    "description",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$id",
];

/// Most violations reported for one call (the count of the rest is still given).
pub const MAX_VIOLATIONS: usize = 64;

/// One violation: where in the arguments, and which schema keyword.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Violation {
    /// JSON Pointer of the offending value in the arguments (`""` is the whole document).
    pub instance: String,
    /// JSON Pointer of the schema keyword that refused it.
    pub keyword: String,
    pub message: String,
}

/// Why arguments did not pass the schema.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SchemaError {
    #[error("the arguments do not match the tool's schema: {}", describe(.violations, *.more))]
    Violations {
        violations: Vec<Violation>,
        /// Violations beyond [`MAX_VIOLATIONS`], not listed.
        more: usize,
    },
}

fn describe(violations: &[Violation], more: usize) -> String {
    let mut s = String::new();
    for (i, v) in violations.iter().enumerate() {
        if i > 0 {
            s.push_str("; ");
        }
        let at = if v.instance.is_empty() {
            "(root)"
        } else {
            &v.instance
        };
        let _ = write!(s, "{at}: {} [{}]", v.message, v.keyword);
    }
    if more > 0 {
        let _ = write!(s, "; and {more} more");
    }
    s
}

impl StageError for SchemaError {
    fn stage(&self) -> Stage {
        Stage::Schema
    }

    fn kind(&self) -> &'static str {
        "schema_violation"
    }

    fn details(&self) -> Value {
        match self {
            SchemaError::Violations { violations, more } => {
                json!({ "violations": violations, "unlisted": more })
            }
        }
    }
}

/// Why a schema cannot be admitted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaCompileError {
    #[error(
        "{pointer}: `$ref` {reference:?} is not a local JSON Pointer; remote and file references are never resolved"
    )]
    NonLocalRef { pointer: String, reference: String },
    #[error("{pointer}: `$ref` {reference:?} points at nothing in the schema")]
    UnresolvedRef { pointer: String, reference: String },
    #[error(
        "{pointer}: `$ref` {reference:?} loops back to itself without descending into the value"
    )]
    RefCycle { pointer: String, reference: String },
    #[error("{pointer}: {message}")]
    Malformed { pointer: String, message: String },
}

/// JSON types as JSON Schema names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JsonType {
    Null,
    Boolean,
    Object,
    Array,
    Number,
    Integer,
    String,
}

impl JsonType {
    fn parse(name: &str) -> Option<JsonType> {
        Some(match name {
            "null" => JsonType::Null,
            "boolean" => JsonType::Boolean,
            "object" => JsonType::Object,
            "array" => JsonType::Array,
            "number" => JsonType::Number,
            "integer" => JsonType::Integer,
            "string" => JsonType::String,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            JsonType::Null => "null",
            JsonType::Boolean => "boolean",
            JsonType::Object => "object",
            JsonType::Array => "array",
            JsonType::Number => "number",
            JsonType::Integer => "integer",
            JsonType::String => "string",
        }
    }

    fn matches(self, v: &Value) -> bool {
        match (self, v) {
            (JsonType::Null, Value::Null)
            | (JsonType::Boolean, Value::Bool(_))
            | (JsonType::Object, Value::Object(_))
            | (JsonType::Array, Value::Array(_))
            | (JsonType::Number, Value::Number(_))
            | (JsonType::String, Value::String(_)) => true,
            (JsonType::Integer, Value::Number(n)) => {
                n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
            }
            _ => false,
        }
    }
}

type NodeId = usize;

/// One compiled subschema.
#[derive(Debug, Clone, Default)]
struct Node {
    /// Its location in the schema document (JSON Pointer).
    location: String,
    /// `false` schema: nothing is valid.
    reject_all: bool,
    types: Option<Vec<JsonType>>,
    /// Sorted by name (looked up by binary search).
    properties: Vec<(String, NodeId)>,
    required: Vec<String>,
    additional: Option<NodeId>,
    enumeration: Option<Vec<Value>>,
    constant: Option<Value>,
    items: Option<NodeId>,
    reference: Option<NodeId>,
}

impl Node {
    fn property(&self, name: &str) -> Option<NodeId> {
        self.properties
            .binary_search_by(|(p, _)| p.as_str().cmp(name))
            .ok()
            .map(|i| self.properties[i].1)
    }
}

/// A tool's input schema, compiled at admission.
#[derive(Debug, Clone)]
pub struct CompiledSchema {
    nodes: Vec<Node>,
    /// Pointers of keywords present in the schema that this boundary does not enforce.
    pub not_enforced: Vec<String>,
}

struct Compiler<'a> {
    root: &'a Value,
    nodes: Vec<Node>,
    by_location: HashMap<String, NodeId>,
    not_enforced: Vec<String>,
    /// (node, pointer of its `$ref`, the reference text) to resolve once every node exists.
    pending_refs: Vec<(NodeId, String, String)>,
}

fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

fn malformed(pointer: &str, message: impl Into<String>) -> SchemaCompileError {
    SchemaCompileError::Malformed {
        pointer: pointer.to_string(),
        message: message.into(),
    }
}

impl<'a> Compiler<'a> {
    fn compile(
        &mut self,
        schema: &'a Value,
        location: String,
    ) -> Result<NodeId, SchemaCompileError> {
        if let Some(&id) = self.by_location.get(&location) {
            return Ok(id);
        }
        let id = self.nodes.len();
        self.nodes.push(Node {
            location: location.clone(),
            ..Node::default()
        });
        self.by_location.insert(location.clone(), id);
        let obj = match schema {
            Value::Bool(true) => return Ok(id),
            Value::Bool(false) => {
                self.nodes[id].reject_all = true;
                return Ok(id);
            }
            Value::Object(obj) => obj,
            _ => {
                return Err(malformed(
                    &location,
                    "a schema must be an object or a boolean",
                ));
            }
        };
        let mut node = Node {
            location: location.clone(),
            ..Node::default()
        };
        for (key, value) in obj {
            let at = format!("{location}/{}", escape(key));
            match key.as_str() {
                "type" => node.types = Some(compile_types(value, &at)?),
                "properties" => {
                    let props = value
                        .as_object()
                        .ok_or_else(|| malformed(&at, "`properties` must be an object"))?;
                    for (name, sub) in props {
                        let child = self.compile(sub, format!("{at}/{}", escape(name)))?;
                        node.properties.push((name.clone(), child));
                    }
                }
                "required" => {
                    let list = value
                        .as_array()
                        .ok_or_else(|| malformed(&at, "`required` must be an array"))?;
                    for name in list {
                        let name = name
                            .as_str()
                            .ok_or_else(|| malformed(&at, "`required` must list strings"))?;
                        node.required.push(name.to_string());
                    }
                }
                "additionalProperties" => node.additional = Some(self.compile(value, at)?),
                "enum" => {
                    let list = value
                        .as_array()
                        .ok_or_else(|| malformed(&at, "`enum` must be an array"))?;
                    node.enumeration = Some(list.clone());
                }
                "const" => node.constant = Some(value.clone()),
                "items" => {
                    if value.is_array() {
                        // The draft-07 tuple form is `prefixItems` in 2020-12: outside the subset.
                        self.not_enforced.push(at);
                    } else {
                        node.items = Some(self.compile(value, at)?);
                    }
                }
                "$ref" => {
                    let reference = value
                        .as_str()
                        .ok_or_else(|| malformed(&at, "`$ref` must be a string"))?;
                    self.pending_refs.push((id, at, reference.to_string()));
                }
                "$defs" | "definitions" => {
                    let defs = value
                        .as_object()
                        .ok_or_else(|| malformed(&at, format!("`{key}` must be an object")))?;
                    for (name, sub) in defs {
                        self.compile(sub, format!("{at}/{}", escape(name)))?;
                    }
                }
                k if ANNOTATIONS.contains(&k) => {}
                _ => self.not_enforced.push(at),
            }
        }
        debug_assert!(ENFORCED.iter().all(|k| !ANNOTATIONS.contains(k)));
        let reference = self.nodes[id].reference;
        self.nodes[id] = Node { reference, ..node };
        Ok(id)
    }

    /// Resolve `#…` against the root document and compile the target (once per location).
    fn resolve(&mut self, pointer: &str, reference: &str) -> Result<NodeId, SchemaCompileError> {
        let fragment =
            reference
                .strip_prefix('#')
                .ok_or_else(|| SchemaCompileError::NonLocalRef {
                    pointer: pointer.to_string(),
                    reference: reference.to_string(),
                })?;
        let decoded =
            percent_decode(fragment).ok_or_else(|| SchemaCompileError::UnresolvedRef {
                pointer: pointer.to_string(),
                reference: reference.to_string(),
            })?;
        if !decoded.is_empty() && !decoded.starts_with('/') {
            // `#name` is an anchor; anchors are outside the subset.
            return Err(SchemaCompileError::NonLocalRef {
                pointer: pointer.to_string(),
                reference: reference.to_string(),
            });
        }
        let target =
            self.root
                .pointer(&decoded)
                .ok_or_else(|| SchemaCompileError::UnresolvedRef {
                    pointer: pointer.to_string(),
                    reference: reference.to_string(),
                })?;
        self.compile(target, decoded)
    }
}

fn compile_types(value: &Value, at: &str) -> Result<Vec<JsonType>, SchemaCompileError> {
    let names: Vec<&str> = match value {
        Value::String(s) => vec![s.as_str()],
        Value::Array(list) => list
            .iter()
            .map(|v| {
                v.as_str()
                    .ok_or_else(|| malformed(at, "`type` must list strings"))
            })
            .collect::<Result<_, _>>()?,
        _ => {
            return Err(malformed(
                at,
                "`type` must be a string or an array of strings",
            ));
        }
    };
    names
        .into_iter()
        .map(|n| JsonType::parse(n).ok_or_else(|| malformed(at, format!("unknown type {n:?}"))))
        .collect()
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

impl CompiledSchema {
    /// Compile the admitted schema; refuses non-local or unresolvable `$ref`s and ref cycles.
    pub fn compile(schema: &Value) -> Result<CompiledSchema, SchemaCompileError> {
        let mut c = Compiler {
            root: schema,
            nodes: Vec::new(),
            by_location: HashMap::new(),
            not_enforced: Vec::new(),
            pending_refs: Vec::new(),
        };
        c.compile(schema, String::new())?;
        while let Some((node, pointer, reference)) = c.pending_refs.pop() {
            let target = c.resolve(&pointer, &reference)?;
            c.nodes[node].reference = Some(target);
        }
        // A chain of `$ref`s that comes back to where it started never reaches a value.
        for start in 0..c.nodes.len() {
            let mut at = start;
            for _ in 0..=c.nodes.len() {
                match c.nodes[at].reference {
                    Some(next) if next == start => {
                        return Err(SchemaCompileError::RefCycle {
                            pointer: format!("{}/$ref", c.nodes[start].location),
                            reference: format!("#{}", c.nodes[next].location),
                        });
                    }
                    Some(next) => at = next,
                    None => break,
                }
            }
        }
        for node in &mut c.nodes {
            node.properties.sort_by(|a, b| a.0.cmp(&b.0));
        }
        let mut not_enforced = c.not_enforced;
        not_enforced.sort();
        not_enforced.dedup();
        Ok(CompiledSchema {
            nodes: c.nodes,
            not_enforced,
        })
    }

    /// Whether `instance` is valid: a pass that builds no pointer and allocates nothing, and
    /// stops at the first violation.
    pub fn is_valid(&self, instance: &Value) -> bool {
        self.valid(0, instance)
    }

    fn valid(&self, id: NodeId, value: &Value) -> bool {
        let node = &self.nodes[id];
        if node.reject_all {
            return false;
        }
        if let Some(target) = node.reference
            && !self.valid(target, value)
        {
            return false;
        }
        if node
            .types
            .as_ref()
            .is_some_and(|types| !types.iter().any(|t| t.matches(value)))
            || node
                .enumeration
                .as_ref()
                .is_some_and(|allowed| !allowed.iter().any(|a| json_equal(a, value)))
            || node
                .constant
                .as_ref()
                .is_some_and(|c| !json_equal(c, value))
        {
            return false;
        }
        match value {
            Value::Object(map) => {
                node.required.iter().all(|name| map.contains_key(name))
                    && map
                        .iter()
                        .all(|(name, v)| match node.property(name).or(node.additional) {
                            Some(target) => self.valid(target, v),
                            None => true,
                        })
            }
            Value::Array(list) => match node.items {
                Some(items) => list.iter().all(|item| self.valid(items, item)),
                None => true,
            },
            _ => true,
        }
    }

    /// Validate any JSON value, reporting every violation (the first [`MAX_VIOLATIONS`] listed).
    /// A valid value is decided by the fast [`CompiledSchema::is_valid`] pass; only an invalid
    /// one pays for the pass that names every violation with its pointers.
    pub fn validate_value(&self, instance: &Value) -> Result<(), SchemaError> {
        if self.is_valid(instance) {
            return Ok(());
        }
        let mut v = Validation {
            schema: self,
            violations: Vec::new(),
            more: 0,
        };
        let mut path = String::new();
        v.node(0, instance, &mut path);
        if v.violations.is_empty() {
            Ok(())
        } else {
            Err(SchemaError::Violations {
                violations: v.violations,
                more: v.more,
            })
        }
    }
}

struct Validation<'s> {
    schema: &'s CompiledSchema,
    violations: Vec<Violation>,
    more: usize,
}

impl Validation<'_> {
    fn fail(&mut self, path: &str, node: &Node, keyword: &str, message: String) {
        self.record(path, format!("{}/{keyword}", node.location), message);
    }

    fn record(&mut self, path: &str, keyword: String, message: String) {
        if self.violations.len() >= MAX_VIOLATIONS {
            self.more += 1;
            return;
        }
        self.violations.push(Violation {
            instance: path.to_string(),
            keyword,
            message,
        });
    }

    fn node(&mut self, id: NodeId, value: &Value, path: &mut String) {
        let schema = self.schema;
        let node = &schema.nodes[id];
        if node.reject_all {
            self.record(
                path,
                node.location.clone(),
                "no value is allowed here".into(),
            );
            return;
        }
        if let Some(target) = node.reference {
            self.node(target, value, path);
        }
        if let Some(types) = &node.types
            && !types.iter().any(|t| t.matches(value))
        {
            let expected: Vec<&str> = types.iter().map(|t| t.name()).collect();
            self.fail(
                path,
                node,
                "type",
                format!(
                    "expected {}, found {}",
                    expected.join(" or "),
                    crate::proposal::json_type_name(value)
                ),
            );
        }
        if let Some(allowed) = &node.enumeration
            && !allowed.iter().any(|a| json_equal(a, value))
        {
            self.fail(
                path,
                node,
                "enum",
                format!("{value} is not one of {}", Value::Array(allowed.clone())),
            );
        }
        if let Some(c) = &node.constant
            && !json_equal(c, value)
        {
            self.fail(
                path,
                node,
                "const",
                format!("{value} is not the required value {c}"),
            );
        }
        match value {
            Value::Object(map) => self.object(node, map, path),
            Value::Array(list) => {
                if let Some(items) = node.items {
                    for (i, item) in list.iter().enumerate() {
                        let len = path.len();
                        let _ = write!(path, "/{i}");
                        self.node(items, item, path);
                        path.truncate(len);
                    }
                }
            }
            _ => {}
        }
    }

    fn object(&mut self, node: &Node, map: &Map<String, Value>, path: &mut String) {
        for name in &node.required {
            if !map.contains_key(name) {
                self.fail(
                    path,
                    node,
                    "required",
                    format!("the required property {name:?} is missing"),
                );
            }
        }
        for (name, value) in map {
            let declared = node.property(name);
            let target = match declared {
                Some(id) => id,
                None => match node.additional {
                    Some(id) => id,
                    None => continue,
                },
            };
            let len = path.len();
            path.push('/');
            path.push_str(&escape(name));
            if declared.is_none() && self.schema.nodes[target].reject_all {
                // Name the keyword and the property: clearer than "no value is allowed here".
                let message = format!("the property {name:?} is not allowed");
                self.fail(path, node, "additionalProperties", message);
            } else {
                self.node(target, value, path);
            }
            path.truncate(len);
        }
    }
}

/// JSON equality as JSON Schema defines it: numbers by value (`1` equals `1.0`), objects
/// regardless of key order.
pub fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            match (x.as_i64(), y.as_i64(), x.as_u64(), y.as_u64()) {
                (Some(i), Some(j), _, _) => i == j,
                (_, _, Some(i), Some(j)) => i == j,
                _ => x.as_f64() == y.as_f64(),
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_equal(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compile(s: Value) -> CompiledSchema {
        CompiledSchema::compile(&s).expect("compiles")
    }

    #[test]
    fn every_violation_is_reported_with_both_pointers() {
        let s = compile(json!({
            "type": "object",
            "properties": {
                "zone": {"type": "string"},
                "rows": {"type": "array", "items": {"$ref": "#/$defs/row"}}
            },
            "required": ["zone", "rows"],
            "additionalProperties": false,
            "$defs": {"row": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}
        }));
        let err = s
            .validate_value(&json!({"rows": [{"n": 1}, {"n": "2"}, {}], "extra": true}))
            .unwrap_err();
        let SchemaError::Violations { violations, more } = err;
        assert_eq!(more, 0);
        let pairs: Vec<(&str, &str)> = violations
            .iter()
            .map(|v| (v.instance.as_str(), v.keyword.as_str()))
            .collect();
        assert!(pairs.contains(&("", "/required")), "{pairs:?}");
        assert!(
            pairs.contains(&("/rows/1/n", "/$defs/row/properties/n/type")),
            "{pairs:?}"
        );
        assert!(
            pairs.contains(&("/rows/2", "/$defs/row/required")),
            "{pairs:?}"
        );
        assert!(
            pairs.contains(&("/extra", "/additionalProperties")),
            "{pairs:?}"
        );
        assert_eq!(violations.len(), 4);
    }

    #[test]
    fn nothing_is_coerced() {
        let s = compile(json!({"type": "object", "properties": {"n": {"type": "integer"}}}));
        assert!(
            s.validate_value(&json!({"n": "5"})).is_err(),
            "\"5\" is not 5"
        );
        assert!(
            s.validate_value(&json!({"n": 5.0})).is_ok(),
            "5.0 is an integer"
        );
        assert!(s.validate_value(&json!({"n": 5.5})).is_err());
    }

    #[test]
    fn remote_refs_and_cycles_are_refused_at_compile_time() {
        for r in ["https://example.com/s.json", "other.json#/a", "#anchor"] {
            let err = CompiledSchema::compile(&json!({"$ref": r})).unwrap_err();
            assert!(
                matches!(err, SchemaCompileError::NonLocalRef { .. }),
                "{r}: {err}"
            );
        }
        let err = CompiledSchema::compile(&json!({"$ref": "#"})).unwrap_err();
        assert!(matches!(err, SchemaCompileError::RefCycle { .. }), "{err}");
        let err = CompiledSchema::compile(&json!({"$ref": "#/$defs/missing"})).unwrap_err();
        assert!(
            matches!(err, SchemaCompileError::UnresolvedRef { .. }),
            "{err}"
        );
        // A recursive schema that descends is fine.
        let tree = compile(
            json!({"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}}),
        );
        assert!(tree.is_valid(&json!({"kids": [{"kids": []}]})));
        assert!(!tree.is_valid(&json!({"kids": [1]})));
    }

    #[test]
    fn keywords_outside_the_subset_are_listed_not_enforced() {
        let s = compile(json!({
            "type": "object",
            "title": "t",
            "properties": {"n": {"type": "integer", "minimum": 0, "format": "uint32"}},
            "patternProperties": {"^x": {}}
        }));
        assert_eq!(
            s.not_enforced,
            [
                "/patternProperties",
                "/properties/n/format",
                "/properties/n/minimum"
            ]
        );
        assert!(
            s.is_valid(&json!({"n": -1})),
            "minimum is not enforced, and says so"
        );
    }
}

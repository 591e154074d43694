//! Schema contract: the arguments against the tool's admitted input schema.
//!
//! The boundary enforces a provider-neutral subset of JSON Schema (draft 2020-12 semantics):
//! `type` (one or several; `integer` is any number with no fractional part), `properties`,
//! `required`, `additionalProperties`, `enum`, `const`, `items`, `prefixItems` (then `items`
//! applies to the items after them), boolean schemas, and `$ref` to a local JSON Pointer (`#`,
//! `#/$defs/…`, `#/definitions/…`); the bounds `minimum`, `maximum`, `exclusiveMinimum`,
//! `exclusiveMaximum` and `multipleOf` (exact for integers, whatever their size: never compared
//! through an f64), `minLength` and `maxLength` (in Unicode code points), `minItems`,
//! `maxItems`, `uniqueItems`, `minProperties`, `maxProperties`; and the applicators `allOf`,
//! `anyOf`, `oneOf` and `not`. The list is [`ENFORCED`]. A schema is compiled once, at
//! admission. Keywords outside the subset are listed, with their pointers, as *not enforced*;
//! they are never silently treated as enforced. (Under `not`, or in a `oneOf` alternative, a
//! keyword not enforced makes the stage refuse more than the schema would: a value the schema
//! allows may be refused there. It is listed all the same.) A `$ref` that is not a local pointer
//! (a URL, a file, an anchor) is refused at admission and never fetched or read.
//!
//! Validation never repairs a call: no defaults filled in, no coercion, nothing dropped. It
//! reports every violation, each with the JSON Pointer of the offending value and of the schema
//! keyword that refused it. An `anyOf` or `oneOf` that fails is one violation, at the keyword:
//! the alternatives' own violations are not the call's (the message names the closest one's
//! first).

use crate::stage::{Stage, StageError};
use serde_json::{Map, Value, json};
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

/// Keywords the boundary enforces.
pub const ENFORCED: [&str; 27] = [
    "type",
    "properties",
    "required",
    "additionalProperties",
    "enum",
    "const",
    "items",
    "prefixItems",
    "$ref",
    "$defs",
    "definitions",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
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

mod compile;
mod errors;
mod keywords;
mod names;
mod report;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_keywords;
mod validate;
mod ways;

pub use errors::{SchemaCompileError, SchemaError, Violation};
pub use validate::json_equal;

use keywords::Checks;
use names::*;

/// A set of JSON types as JSON Schema names them, one bit each: a `type` check is one mask test.
/// The bits follow the order of `serde_json::Value`'s variants, so that a value's bit is computed
/// from its variant without a jump.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Types(u8);

impl Types {
    const NULL: u8 = 1;
    const BOOLEAN: u8 = 1 << 1;
    const NUMBER: u8 = 1 << 2;
    const STRING: u8 = 1 << 3;
    const ARRAY: u8 = 1 << 4;
    const OBJECT: u8 = 1 << 5;
    const INTEGER: u8 = 1 << 6;
    /// No `type` keyword: every value passes.
    const ANY: Types = Types(0x7f);
    /// The `false` schema (and `"type": []`): no value passes.
    const NONE: Types = Types(0);

    fn parse(name: &str) -> Option<u8> {
        Some(match name {
            "null" => Types::NULL,
            "boolean" => Types::BOOLEAN,
            "object" => Types::OBJECT,
            "array" => Types::ARRAY,
            "number" => Types::NUMBER,
            "integer" => Types::INTEGER,
            "string" => Types::STRING,
            _ => return None,
        })
    }

    #[inline(always)]
    fn matches(self, v: &Value) -> bool {
        let bit = match v {
            Value::Null => Types::NULL,
            Value::Bool(_) => Types::BOOLEAN,
            Value::Number(_) => Types::NUMBER,
            Value::String(_) => Types::STRING,
            Value::Array(_) => Types::ARRAY,
            Value::Object(_) => Types::OBJECT,
        };
        self.0 & bit != 0 || (self.0 & Types::INTEGER != 0 && is_integer(v))
    }
}

/// `integer` is any number with no fractional part (`5.0` is one).
fn is_integer(v: &Value) -> bool {
    match v {
        Value::Number(n) => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => false,
    }
}

type NodeId = usize;

/// String equality for the short strings of property names and enum members, without a call
/// to `memcmp` (which costs more than the comparison itself at these lengths): up to 16 bytes,
/// the first and last words are compared (overlapping when shorter than two words).
#[inline(always)]
fn same_str(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    a.len() == b.len() && ((a.len() > 16 && a == b) || same_short(a, b))
}

/// [`same_str`] for two byte strings of the same length, at most 16 (false for longer ones).
#[inline(always)]
fn same_short(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    match n {
        0 => true,
        1..=3 => a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1],
        4..=8 => word4(a, 0) == word4(b, 0) && word4(a, n - 4) == word4(b, n - 4),
        9..=16 => word8(a, 0) == word8(b, 0) && word8(a, n - 8) == word8(b, n - 8),
        _ => false,
    }
}

#[inline(always)]
fn word4(s: &[u8], at: usize) -> u32 {
    let mut w = [0; 4];
    w.copy_from_slice(&s[at..at + 4]);
    u32::from_le_bytes(w)
}

#[inline(always)]
fn word8(s: &[u8], at: usize) -> u64 {
    let mut w = [0; 8];
    w.copy_from_slice(&s[at..at + 8]);
    u64::from_le_bytes(w)
}

/// `enum`, its members split by type: a string is only compared with the string members, any
/// other value with the rest (by [`json_equal`]): a string never equals a non-string.
#[derive(Debug, Clone)]
struct Enumeration {
    strings: Vec<String>,
    others: Vec<Value>,
    /// The list as written, for the message (compact JSON, rendered once at compile time).
    text: String,
}

impl Enumeration {
    fn new(list: &[Value]) -> Enumeration {
        let (strings, others): (Vec<&Value>, Vec<&Value>) =
            list.iter().partition(|v| v.is_string());
        Enumeration {
            strings: strings
                .into_iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
            others: others.into_iter().cloned().collect(),
            text: Value::Array(list.to_vec()).to_string(),
        }
    }

    /// A short string (the usual enum member) is compared in a loop that calls nothing, and so
    /// needs no registers saved; anything else is looked for out of line.
    fn contains(&self, v: &Value) -> bool {
        match v {
            Value::String(s) if s.len() <= 16 => {
                let s = s.as_bytes();
                for a in &self.strings {
                    if a.len() == s.len() && same_short(a.as_bytes(), s) {
                        return true;
                    }
                }
                false
            }
            _ => self.contains_other(v),
        }
    }

    #[inline(never)]
    fn contains_other(&self, v: &Value) -> bool {
        match v {
            Value::String(s) => self.strings.iter().any(|a| a == s),
            _ => self.others.iter().any(|a| json_equal(a, v)),
        }
    }
}

/// One name an object's keywords mention: a declared property, or a required one that is not
/// declared (then `additionalProperties`, if any, applies to it).
#[derive(Debug, Clone)]
struct Entry {
    name: String,
    rule: Rule,
}

/// What a name's value is checked against.
#[derive(Debug, Clone, Copy)]
struct Rule {
    /// The subschema the value is checked against: the declared one, else `additionalProperties`.
    target: Option<NodeId>,
    /// The target's types ([`Types::ANY`] without a target), and whether they are all it
    /// checks: a leaf is decided from the rule, without reading its node.
    types: Types,
    leaf: bool,
    declared: bool,
    required: bool,
}

impl Rule {
    /// No target: every value passes.
    const NONE: Rule = Rule {
        target: None,
        types: Types::ANY,
        leaf: true,
        declared: false,
        required: false,
    };

    /// `leaves`: each node's types, and whether its shape is [`Shape::Types`].
    fn new(target: Option<NodeId>, declared: bool, leaves: &[(Types, bool)]) -> Rule {
        let (types, leaf) = target.map_or((Types::ANY, true), |t| leaves[t]);
        Rule {
            target,
            types,
            leaf,
            declared,
            required: false,
        }
    }
}

/// What a subschema checks beyond `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// Nothing: the common leaf, decided where it is reached, without a call.
    Types,
    /// `enum` and `const` only: a leaf, decided by a small function.
    Values,
    /// The object keywords only (the usual object schema).
    Object,
    /// Anything else (`$ref`, `items`, the keywords of [`Checks`], several kinds of keywords,
    /// a node whose results are remembered).
    General,
}

/// One compiled subschema.
#[derive(Debug, Clone)]
struct Node {
    /// Its position in the node table.
    id: NodeId,
    /// Its location in the schema document (JSON Pointer).
    location: String,
    /// `false` schema: nothing is valid (its `types` are [`Types::NONE`] for the fast pass).
    reject_all: bool,
    /// [`Types::ANY`] without a `type` keyword.
    types: Types,
    /// The `type` names as listed, for the message (`"string or null"`).
    types_text: String,
    /// What is checked beyond `types`, to go straight to the code that checks it.
    shape: Shape,
    /// Whether an object value has anything to check (`properties`, `required`,
    /// `additionalProperties`).
    object_rules: bool,
    /// Declared properties in the schema's order (compilation only; lookups use `entries`).
    properties: Vec<(String, NodeId)>,
    /// As listed (in order, duplicates kept), each with its message, written at compile time.
    required: Vec<(String, String)>,
    /// How many distinct names `required` lists: an object that matched this many required
    /// entries has them all.
    required_count: usize,
    entries: Entries,
    additional: Option<NodeId>,
    /// The rule for a name `entries` does not hold (`additionalProperties`, if any).
    other: Rule,
    enumeration: Option<Enumeration>,
    constant: Option<Value>,
    items: Option<NodeId>,
    /// `prefixItems`: the first items' subschemas (`items` applies to the items after them).
    prefix: Vec<NodeId>,
    reference: Option<NodeId>,
    /// The bounds, lengths, counts and applicators, if the node has any.
    checks: Option<Box<Checks>>,
    /// How many subschemas lead to this one (`$ref`s, and the keyword it is written under).
    incoming: u32,
    /// Reached at one value by two ways in (or maybe), and more than a leaf: its result for a
    /// value is remembered, so that no path through the schema checks a value against it twice.
    remember: bool,
}

impl Default for Node {
    fn default() -> Node {
        Node {
            id: 0,
            location: String::new(),
            reject_all: false,
            types: Types::ANY,
            types_text: String::new(),
            shape: Shape::General,
            object_rules: false,
            properties: Vec::new(),
            required: Vec::new(),
            required_count: 0,
            entries: Entries::default(),
            additional: None,
            other: Rule::NONE,
            enumeration: None,
            constant: None,
            items: None,
            prefix: Vec::new(),
            reference: None,
            checks: None,
            incoming: 0,
            remember: false,
        }
    }
}

impl Node {
    /// Whether every name `required` lists is a key of `map`, counted over the map's keys with
    /// the entries (a string comparison each, usually) rather than by a lookup of each name in
    /// the map (a SipHash each).
    fn has_required(&self, map: &Map<String, Value>) -> bool {
        let (mut next, mut present) = (0, 0);
        for name in map.keys() {
            if self
                .entries
                .find(name, &mut next)
                .is_some_and(|e| e.required)
            {
                present += 1;
                if present == self.required_count {
                    return true;
                }
            }
        }
        false
    }

    /// What is checked beyond `types`, once every node (and so every `$ref`) is known;
    /// `may_meet`: whether two of its ways in may reach one value ([`ways::may_meet`]).
    fn classify(&mut self, may_meet: bool) {
        self.object_rules =
            !self.properties.is_empty() || !self.required.is_empty() || self.additional.is_some();
        let values = self.enumeration.is_some() || self.constant.is_some();
        let others = self.items.is_some()
            || self.reference.is_some()
            || !self.prefix.is_empty()
            || self.checks.is_some();
        self.shape = match (values, self.object_rules, others) {
            (false, false, false) => Shape::Types,
            (true, false, false) => Shape::Values,
            (false, true, false) => Shape::Object,
            _ => Shape::General,
        };
        // A leaf costs less to check again than to look up; anything else that two ways in may
        // reach at one value is remembered, in the general path (which is where the memo is
        // read).
        self.remember = may_meet && matches!(self.shape, Shape::Object | Shape::General);
        if self.remember {
            self.shape = Shape::General;
        }
    }

    /// Build the lookup structures once every node is classified (`leaves`: as [`Rule::new`]).
    fn finish(&mut self, leaves: &[(Types, bool)]) {
        self.other = Rule::new(self.additional, false, leaves);
        let mut list: Vec<Entry> = self
            .properties
            .iter()
            .map(|(name, id)| Entry {
                name: name.clone(),
                rule: Rule::new(Some(*id), true, leaves),
            })
            .collect();
        // Each required name marks its declared entry, or adds one; counted once, however
        // often it is listed.
        let declared: HashMap<&str, usize> = self
            .properties
            .iter()
            .enumerate()
            .map(|(i, (name, _))| (name.as_str(), i))
            .collect();
        let mut distinct = HashSet::new();
        for (name, _) in &self.required {
            if !distinct.insert(name.as_str()) {
                continue;
            }
            match declared.get(name.as_str()) {
                Some(&i) => list[i].rule.required = true,
                None => list.push(Entry {
                    name: name.clone(),
                    rule: Rule {
                        required: true,
                        ..self.other
                    },
                }),
            }
        }
        self.required_count = distinct.len();
        let table = (list.len() > SCAN_MAX).then(|| Table::new(&list)).flatten();
        let index = (list.len() > SCAN_MAX && table.is_none()).then(|| Index::new(&list));
        self.entries = Entries { list, table, index };
    }
}

/// A tool's input schema, compiled at admission.
#[derive(Debug, Clone)]
pub struct CompiledSchema {
    nodes: Vec<Node>,
    /// Whether any node is remembered: the fast pass then keeps a memo.
    remembers: bool,
    /// Pointers of keywords present in the schema that this boundary does not enforce.
    pub not_enforced: Vec<String>,
}

/// The JSON type name of `v`, for messages.
pub fn json_type_name(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

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
use std::collections::{HashMap, HashSet};
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

/// A name's length with its first and last 8 bytes (or 4, or single bytes, overlapping when the
/// name is short): two names of at most 16 bytes are equal exactly when their keys are; longer
/// ones also need their bytes compared. It is what the property table and index hash and compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Key {
    len: usize,
    head: u64,
    tail: u64,
}

impl Key {
    #[inline(always)]
    fn of(name: &str) -> Key {
        let b = name.as_bytes();
        let n = b.len();
        // Most names are 8 bytes or longer: that case is tested first.
        let (head, tail) = if n >= 8 {
            (word8(b, 0), word8(b, n - 8))
        } else if n >= 4 {
            (u64::from(word4(b, 0)), u64::from(word4(b, n - 4)))
        } else if n > 0 {
            (
                u64::from(b[0]) | u64::from(b[n / 2]) << 8 | u64::from(b[n - 1]) << 16,
                0,
            )
        } else {
            (0, 0)
        };
        Key { len: n, head, tail }
    }

    /// Never the key of a name (no string is `usize::MAX` bytes long): an empty [`Table`] slot.
    const NONE: Key = Key {
        len: usize::MAX,
        head: 0,
        tail: 0,
    };

    /// The three fields in one word, for [`Table`]'s multiplicative hash. The tail is rotated
    /// so that a name whose head and tail are the same word (8 bytes long) does not cancel out.
    #[inline(always)]
    fn word(self) -> u64 {
        self.head ^ self.tail.rotate_left(32) ^ self.len as u64
    }

    /// A slot in a table of `size` (a power of two): the two words multiplied as 128 bits and
    /// folded (as wyhash mixes). Names whose head and tail are the same word (8 bytes long)
    /// still spread: an XOR of the two, as before, made `field_NN` collide in runs.
    #[inline(always)]
    fn slot(self, size: usize) -> usize {
        let product = u128::from(self.head ^ 0xa076_1d64_78bd_642f)
            * u128::from(self.tail ^ self.len as u64 ^ 0xe703_7ed1_a0b4_28db);
        let folded = (product as u64) ^ ((product >> 64) as u64);
        (folded >> 32) as usize & (size - 1)
    }
}

/// A perfect hash of an object's names: a multiplier found at compile time sends each name's
/// [`Key::word`] to a slot of its own, so a lookup is one multiply, one probe and one key
/// comparison, with no loop and no guess, in whatever order the instance lists its keys.
#[derive(Debug, Clone)]
struct Table {
    multiplier: u64,
    /// 64 − log2 of the table size: the product's top bits pick the slot.
    shift: u32,
    /// Each slot: a name's key, its position in the entry list and its rule (a lookup reads
    /// nothing else), or [`Key::NONE`].
    slots: Vec<Slot>,
}

#[derive(Debug, Clone, Copy)]
struct Slot {
    key: Key,
    /// The entry's position, for a name longer than a key.
    at: u32,
    rule: Rule,
}

impl Slot {
    const EMPTY: Slot = Slot {
        key: Key::NONE,
        at: 0,
        rule: Rule::NONE,
    };
}

impl Table {
    /// Multipliers tried for each table size before a larger one is tried.
    const TRIES: u32 = 1024;
    /// Most names an object may have for a table (then at most 1,024 slots): a larger set is
    /// seldom separated within eight slots a name anyway.
    const MAX_NAMES: usize = 128;

    /// The smallest table with at least 2 slots a name (then twice, four times as large) for
    /// which a multiplier sends every name to a slot of its own; none if no size has one (a
    /// large or unlucky set, or names longer than 16 bytes that share their key): then the
    /// entries go through an [`Index`]. Compile time only, and bounded: each try stops at the
    /// first collision.
    fn new(list: &[Entry]) -> Option<Table> {
        if list.len() > Table::MAX_NAMES {
            return None;
        }
        let keys: Vec<Key> = list.iter().map(|e| Key::of(&e.name)).collect();
        // Two names with the same word share a slot whatever the multiplier.
        let mut words: Vec<u64> = keys.iter().map(|k| k.word()).collect();
        words.sort_unstable();
        if words.windows(2).any(|w| w[0] == w[1]) {
            return None;
        }
        let min_bits = (2 * list.len()).next_power_of_two().trailing_zeros();
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        for bits in min_bits..min_bits + 3 {
            let shift = 64 - bits;
            let slot =
                |key: Key, multiplier: u64| (key.word().wrapping_mul(multiplier) >> shift) as usize;
            // The slots taken so far, one bit each: a try costs no more than its names.
            let mut taken = vec![0u64; (1usize << bits).div_ceil(64)];
            for _ in 0..Table::TRIES {
                // Odd multipliers from a fixed sequence: the same schema gets the same table.
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                let multiplier = state | 1;
                taken.fill(0);
                let separates = keys.iter().all(|&key| {
                    let at = slot(key, multiplier);
                    let (word, bit) = (&mut taken[at / 64], 1 << (at % 64));
                    let free = *word & bit == 0;
                    *word |= bit;
                    free
                });
                if separates {
                    let mut slots = vec![Slot::EMPTY; 1 << bits];
                    for (at, (&key, entry)) in keys.iter().zip(list).enumerate() {
                        slots[slot(key, multiplier)] = Slot {
                            key,
                            at: u32::try_from(at).ok()?,
                            rule: entry.rule,
                        };
                    }
                    return Some(Table {
                        multiplier,
                        shift,
                        slots,
                    });
                }
            }
        }
        None
    }

    /// The rule for `name`, if it is one of the names; `list` is the entry list, for names
    /// longer than a key.
    #[inline(always)]
    fn find(&self, list: &[Entry], name: &str) -> Option<&Rule> {
        let key = Key::of(name);
        let at = (key.word().wrapping_mul(self.multiplier) >> self.shift) as usize;
        let slot = self.slots.get(at)?;
        let same = slot.key == key
            && (key.len <= 16 || list.get(slot.at as usize).is_some_and(|e| e.name == name));
        same.then_some(&slot.rule)
    }
}

/// Name → position in an entry list, when no [`Table`] separates the names: open
/// addressing with linear probes, in a table at most a quarter full. Only the schema's own names
/// are ever inserted, at compile time: whatever keys an instance brings, a probe ends within the
/// runs those names made.
#[derive(Debug, Clone)]
struct Index {
    /// Each slot: the entry's position + 1, or 0 when empty.
    slots: Vec<usize>,
    /// The entries' keys, by position.
    keys: Vec<Key>,
}

impl Index {
    fn new(list: &[Entry]) -> Index {
        let keys: Vec<Key> = list.iter().map(|e| Key::of(&e.name)).collect();
        // At most a quarter full: a probe seldom goes past its first slot.
        let size = (4 * list.len()).next_power_of_two();
        let mut slots = vec![0; size];
        for (i, key) in keys.iter().enumerate() {
            let mut at = key.slot(size);
            while slots[at] != 0 {
                at = (at + 1) & (size - 1);
            }
            slots[at] = i + 1;
        }
        Index { slots, keys }
    }

    fn get(&self, list: &[Entry], name: &str) -> Option<usize> {
        let key = Key::of(name);
        let size = self.slots.len();
        let mut at = key.slot(size);
        loop {
            let i = self.slots[at].checked_sub(1)?;
            if self.keys[i] == key && (key.len <= 16 || list[i].name == name) {
                return Some(i);
            }
            at = (at + 1) & (size - 1);
        }
    }
}

/// Up to this many entries, a lookup that missed the guess scans them; beyond, a lookup goes
/// through a [`Table`] (or, failing one, an [`Index`]).
const SCAN_MAX: usize = 8;

/// The names an object schema mentions, for lookup by an instance's keys.
#[derive(Debug, Clone, Default)]
struct Entries {
    /// Declared properties in the schema's order, then required names not declared.
    list: Vec<Entry>,
    /// Name → rule, when the list is too long to scan: every lookup goes through it.
    table: Option<Table>,
    /// Name → position in `list`, when the list is too long to scan and no table was found.
    index: Option<Index>,
}

impl Entries {
    /// The entry for `name`, from the [`Table`] if there is one, else by [`Entries::guess`].
    #[inline(always)]
    fn find(&self, name: &str, next: &mut usize) -> Option<&Rule> {
        match &self.table {
            Some(table) => table.find(&self.list, name),
            None => self.guess(name, next).map(|e| &e.rule),
        }
    }

    /// The entry for `name`, without a [`Table`]. Arguments usually list their properties in
    /// the schema's order, so the entry after the previous match (`next`) is tried first: then
    /// an object costs one string comparison per property, whatever its size.
    #[inline(always)]
    fn guess(&self, name: &str, next: &mut usize) -> Option<&Entry> {
        if let Some(entry) = self.list.get(*next)
            && same_str(&entry.name, name)
        {
            *next += 1;
            return Some(entry);
        }
        self.search(name, next)
    }

    /// [`Entries::guess`] when the guess missed.
    #[inline(always)]
    fn search(&self, name: &str, next: &mut usize) -> Option<&Entry> {
        let at = match &self.index {
            Some(index) => index.get(&self.list, name)?,
            None => self.list.iter().position(|e| same_str(&e.name, name))?,
        };
        *next = at + 1;
        Some(&self.list[at])
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
    /// Anything else (`$ref`, `items`, several kinds of keywords).
    General,
}

/// One compiled subschema.
#[derive(Debug, Clone)]
struct Node {
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
    reference: Option<NodeId>,
}

impl Default for Node {
    fn default() -> Node {
        Node {
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
            reference: None,
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

    /// What is checked beyond `types`, once every node (and so every `$ref`) is known.
    fn classify(&mut self) {
        self.object_rules =
            !self.properties.is_empty() || !self.required.is_empty() || self.additional.is_some();
        let values = self.enumeration.is_some() || self.constant.is_some();
        let others = self.items.is_some() || self.reference.is_some();
        self.shape = match (values, self.object_rules, others) {
            (false, false, false) => Shape::Types,
            (true, false, false) => Shape::Values,
            (false, true, false) => Shape::Object,
            _ => Shape::General,
        };
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

/// Append `/token` to a JSON Pointer, escaped, without an intermediate string.
fn push_token(pointer: &mut String, token: &str) {
    pointer.push('/');
    if !token.bytes().any(|b| b == b'~' || b == b'/') {
        pointer.push_str(token);
        return;
    }
    for c in token.chars() {
        match c {
            '~' => pointer.push_str("~0"),
            '/' => pointer.push_str("~1"),
            c => pointer.push(c),
        }
    }
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
                self.nodes[id].types = Types::NONE;
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
                "type" => (node.types, node.types_text) = compile_types(value, &at)?,
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
                        let message = format!("the required property {name:?} is missing");
                        node.required.push((name.to_string(), message));
                    }
                }
                "additionalProperties" => node.additional = Some(self.compile(value, at)?),
                "enum" => {
                    let list = value
                        .as_array()
                        .ok_or_else(|| malformed(&at, "`enum` must be an array"))?;
                    node.enumeration = Some(Enumeration::new(list));
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

/// The type set, and the names as listed (joined for the message).
fn compile_types(value: &Value, at: &str) -> Result<(Types, String), SchemaCompileError> {
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
    let mut types = Types::NONE;
    for n in &names {
        types.0 |= Types::parse(n).ok_or_else(|| malformed(at, format!("unknown type {n:?}")))?;
    }
    Ok((types, names.join(" or ")))
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
            node.classify();
        }
        let leaves: Vec<(Types, bool)> = c
            .nodes
            .iter()
            .map(|n| (n.types, n.shape == Shape::Types))
            .collect();
        for node in &mut c.nodes {
            node.finish(&leaves);
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

    /// The check every subschema starts with, inlined where it is called: most leaves only
    /// check a type, and are decided here without a call.
    #[inline(always)]
    fn valid(&self, id: NodeId, value: &Value) -> bool {
        let node = &self.nodes[id];
        // The `false` schema has no types: this refuses it too.
        node.types.matches(value) && (node.shape == Shape::Types || self.valid_rest(node, value))
    }

    /// `enum` and `const`.
    #[inline(never)]
    fn valid_value(&self, node: &Node, value: &Value) -> bool {
        node.enumeration
            .as_ref()
            .is_none_or(|allowed| allowed.contains(value))
            && node.constant.as_ref().is_none_or(|c| json_equal(c, value))
    }

    /// Everything but `type`. A small function that only dispatches: each shape's code is its
    /// own function, and a leaf's call does not pay for the registers an object's loop needs.
    #[inline(never)]
    fn valid_rest(&self, node: &Node, value: &Value) -> bool {
        if node.shape == Shape::Values {
            self.valid_value(node, value)
        } else if node.shape == Shape::Object {
            match value {
                Value::Object(map) => self.valid_object(node, map),
                _ => true,
            }
        } else {
            // `General`, or `Types` (which it passes: it finds nothing else to check).
            self.valid_general(node, value)
        }
    }

    #[inline(never)]
    fn valid_general(&self, node: &Node, value: &Value) -> bool {
        if let Some(target) = node.reference
            && !self.valid(target, value)
        {
            return false;
        }
        if node
            .enumeration
            .as_ref()
            .is_some_and(|allowed| !allowed.contains(value))
            || node
                .constant
                .as_ref()
                .is_some_and(|c| !json_equal(c, value))
        {
            return false;
        }
        match value {
            Value::Object(map) => !node.object_rules || self.valid_object(node, map),
            Value::Array(list) => match node.items {
                Some(items) => list.iter().all(|item| self.valid(items, item)),
                None => true,
            },
            _ => true,
        }
    }

    /// One pass over the instance's properties (never a lookup of each schema name in the
    /// instance): every key finds its entry, and the required ones are counted as they pass.
    #[inline(never)]
    fn valid_object(&self, node: &Node, map: &Map<String, Value>) -> bool {
        if map.len() < node.required_count {
            return false;
        }
        // One loop for each way of looking up, so that neither pays for the other's state.
        let entries = &node.entries;
        match &entries.table {
            Some(table) => {
                self.valid_properties(node, map, |name, _| table.find(&entries.list, name))
            }
            None => self.valid_properties(node, map, |name, next| {
                entries.guess(name, next).map(|e| &e.rule)
            }),
        }
    }

    #[inline(always)]
    fn valid_properties<'n>(
        &self,
        node: &'n Node,
        map: &Map<String, Value>,
        find: impl Fn(&str, &mut usize) -> Option<&'n Rule>,
    ) -> bool {
        let (mut next, mut required) = (0, 0);
        for (name, value) in map {
            let rule = find(name, &mut next).unwrap_or(&node.other);
            required += usize::from(rule.required);
            // As `valid` on the target, with the target's types and shape from the rule.
            if !(rule.types.matches(value)
                && (rule.leaf
                    || rule
                        .target
                        .is_none_or(|t| self.valid_rest(&self.nodes[t], value))))
            {
                return false;
            }
        }
        required == node.required_count
    }

    /// Validate any JSON value, reporting every violation (the first [`MAX_VIOLATIONS`] listed).
    /// A valid value is decided by the fast [`CompiledSchema::is_valid`] pass; only an invalid
    /// one pays for the pass that names every violation with its pointers.
    pub fn validate_value(&self, instance: &Value) -> Result<(), SchemaError> {
        if self.is_valid(instance) {
            return Ok(());
        }
        self.violations(instance)
    }

    /// The pass that names every violation, kept out of line: the valid path never sets it up.
    #[inline(never)]
    fn violations(&self, instance: &Value) -> Result<(), SchemaError> {
        let mut v = Validation {
            schema: self,
            violations: Vec::new(),
            more: 0,
        };
        v.node(0, instance, &Path::Root);
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

/// Where a value is in the instance: a chain of steps back to the root, each on the stack of
/// the call that took it. It costs nothing to extend; it is written out as a JSON Pointer only
/// for a violation that is listed.
#[derive(Clone, Copy)]
enum Path<'a> {
    Root,
    Property(&'a Path<'a>, &'a str),
    Item(&'a Path<'a>, usize),
}

impl Path<'_> {
    fn pointer(&self) -> String {
        let mut pointer = String::with_capacity(self.estimated_len());
        self.write(&mut pointer);
        pointer
    }

    /// The pointer's length (without escapes, which are rare): one allocation, usually.
    fn estimated_len(&self) -> usize {
        match self {
            Path::Root => 0,
            Path::Property(parent, name) => parent.estimated_len() + 1 + name.len(),
            Path::Item(parent, i) => parent.estimated_len() + 1 + digits(*i),
        }
    }

    fn write(&self, pointer: &mut String) {
        match self {
            Path::Root => {}
            Path::Property(parent, name) => {
                parent.write(pointer);
                push_token(pointer, name);
            }
            Path::Item(parent, i) => {
                parent.write(pointer);
                pointer.push('/');
                // The decimal digits, last first (no formatting machinery for a number).
                let (mut digits, mut at, mut i) = ([0; 20], 20, *i);
                loop {
                    at -= 1;
                    digits[at] = b'0' + (i % 10) as u8;
                    i /= 10;
                    if i == 0 {
                        break;
                    }
                }
                pointer.extend(digits[at..].iter().map(|&d| char::from(d)));
            }
        }
    }
}

/// `value` as compact JSON (as `{value}` would write it), followed by `rest`: written by the
/// serializer into one buffer, which `format!` would grow a piece at a time.
fn value_then(value: &Value, rest: &[&str]) -> String {
    let mut message = serde_json::to_string(value).unwrap_or_default();
    message.reserve(rest.iter().map(|s| s.len()).sum());
    for s in rest {
        message.push_str(s);
    }
    message
}

fn digits(mut i: usize) -> usize {
    let mut n = 1;
    while i >= 10 {
        i /= 10;
        n += 1;
    }
    n
}

/// The pass that names violations. It descends only into subschemas the fast pass refuses: a
/// value the fast pass accepts has no violation to name.
struct Validation<'s> {
    schema: &'s CompiledSchema,
    violations: Vec<Violation>,
    more: usize,
}

impl Validation<'_> {
    /// Record a violation of `node`'s `keyword`; the message is only written if it is listed.
    fn fail(&mut self, path: &Path, node: &Node, keyword: &str, message: impl FnOnce() -> String) {
        if self.violations.len() >= MAX_VIOLATIONS {
            self.more += 1;
            return;
        }
        let mut pointer = String::with_capacity(node.location.len() + 1 + keyword.len());
        pointer.push_str(&node.location);
        pointer.push('/');
        pointer.push_str(keyword);
        self.record(path, pointer, message());
    }

    fn record(&mut self, path: &Path, keyword: String, message: String) {
        if self.violations.len() >= MAX_VIOLATIONS {
            self.more += 1;
            return;
        }
        self.violations.push(Violation {
            instance: path.pointer(),
            keyword,
            message,
        });
    }

    /// Whether the subschema surely has nothing to report on `value`, by the fast pass. An
    /// array is not checked first: descending costs no more than the check (each item is
    /// checked before it is descended into), and an invalid array is not walked twice.
    #[inline(always)]
    fn clean(&self, id: NodeId, value: &Value) -> bool {
        let node = &self.schema.nodes[id];
        node.types.matches(value)
            && (node.shape == Shape::Types
                || (!value.is_array() && self.schema.valid_rest(node, value)))
    }

    fn node(&mut self, id: NodeId, value: &Value, path: &Path) {
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
        if let Some(target) = node.reference
            && !self.clean(target, value)
        {
            self.node(target, value, path);
        }
        if !node.types.matches(value) {
            self.fail(path, node, "type", || {
                let found = crate::proposal::json_type_name(value);
                let mut message = String::with_capacity(17 + node.types_text.len() + found.len());
                message.push_str("expected ");
                message.push_str(&node.types_text);
                message.push_str(", found ");
                message.push_str(found);
                message
            });
        }
        if let Some(allowed) = &node.enumeration
            && !allowed.contains(value)
        {
            self.fail(path, node, "enum", || {
                value_then(value, &[" is not one of ", &allowed.text])
            });
        }
        if let Some(c) = &node.constant
            && !json_equal(c, value)
        {
            self.fail(path, node, "const", || {
                value_then(value, &[" is not the required value ", &c.to_string()])
            });
        }
        match value {
            Value::Object(map) => self.object(node, map, path),
            Value::Array(list) => {
                if let Some(items) = node.items {
                    for (i, item) in list.iter().enumerate() {
                        if !self.clean(items, item) {
                            self.node(items, item, &Path::Item(path, i));
                        }
                    }
                }
            }
            _ => {}
        }
    }

    fn object(&mut self, node: &Node, map: &Map<String, Value>, path: &Path) {
        // Each required name is looked up only if one is missing; whether one is, is counted as
        // in the fast pass, unless the object has many more keys than the names to look up.
        if !node.required.is_empty()
            && (map.len() > 8 * node.required.len() || !node.has_required(map))
        {
            for (name, message) in &node.required {
                if !map.contains_key(name) {
                    self.fail(path, node, "required", || message.clone());
                }
            }
        }
        let schema = self.schema;
        let mut next = 0;
        for (name, value) in map {
            let rule = node.entries.find(name, &mut next).unwrap_or(&node.other);
            let (Some(target), declared) = (rule.target, rule.declared) else {
                continue;
            };
            if self.clean(target, value) {
                continue;
            }
            let path = Path::Property(path, name);
            if !declared && schema.nodes[target].reject_all {
                // Name the keyword and the property: clearer than "no value is allowed here".
                self.fail(&path, node, "additionalProperties", || {
                    format!("the property {name:?} is not allowed")
                });
            } else {
                self.node(target, value, &path);
            }
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

    fn listed(s: &CompiledSchema, v: &Value) -> (Vec<(String, String, String)>, usize) {
        match s.validate_value(v) {
            Ok(()) => (Vec::new(), 0),
            Err(SchemaError::Violations { violations, more }) => (
                violations
                    .into_iter()
                    .map(|v| (v.instance, v.keyword, v.message))
                    .collect(),
                more,
            ),
        }
    }

    fn triple(instance: &str, keyword: &str, message: &str) -> (String, String, String) {
        (instance.into(), keyword.into(), message.into())
    }

    #[test]
    fn violations_keep_their_order_pointers_and_messages() {
        let s = compile(json!({
            "type": "object",
            "required": ["a/b", "t~x", "gone"],
            "properties": {
                "a/b": {"type": ["string", "null"]},
                "t~x": {"const": {"k": [1, 2.0]}},
                "list": {"type": "array", "items": {"enum": ["gift", "a-rather-long-member", 3]}}
            },
            "additionalProperties": false
        }));
        let list: Vec<Value> = (0..13)
            .map(|i| if i == 12 { json!("nope") } else { json!(3.0) })
            .collect();
        let (violations, more) = listed(
            &s,
            &json!({"a/b": 1, "t~x": {"k": [1, 2]}, "list": list, "x/y~z": true}),
        );
        assert_eq!(more, 0);
        assert_eq!(
            violations,
            [
                triple("", "/required", "the required property \"gone\" is missing"),
                triple(
                    "/a~1b",
                    "/properties/a~1b/type",
                    "expected string or null, found a number"
                ),
                triple(
                    "/list/12",
                    "/properties/list/items/enum",
                    "\"nope\" is not one of [\"gift\",\"a-rather-long-member\",3]"
                ),
                triple(
                    "/x~1y~0z",
                    "/additionalProperties",
                    "the property \"x/y~z\" is not allowed"
                ),
            ]
        );
        // A required name that is not declared is still refused by `additionalProperties`.
        let (violations, _) = listed(&s, &json!({"a/b": null, "t~x": {"k": [1]}, "gone": 0}));
        assert_eq!(
            violations,
            [
                triple(
                    "/t~0x",
                    "/properties/t~0x/const",
                    "{\"k\":[1]} is not the required value {\"k\":[1,2.0]}"
                ),
                triple(
                    "/gone",
                    "/additionalProperties",
                    "the property \"gone\" is not allowed"
                ),
            ]
        );
    }

    #[test]
    fn properties_are_found_in_any_order_and_through_the_index() {
        // More properties than a scan suits, a required name that is only checked by
        // `additionalProperties`, and a duplicate in `required`.
        let props: Map<String, Value> = (0..20)
            .map(|i| (format!("p{i}"), json!({"type": "integer"})))
            .collect();
        let s = compile(json!({
            "properties": props,
            "required": ["p3", "extra", "p3", "p19"],
            "additionalProperties": {"type": "string"}
        }));
        let mut all: Vec<(String, Value)> = (0..20).map(|i| (format!("p{i}"), json!(i))).collect();
        all.push(("extra".into(), json!("x")));
        // The schema's order, reversed, sorted by name (p0, p1, p10, …) and scattered (every
        // 13th of the 21, so that no key follows its predecessor in the schema): each valid,
        // and each invalid once a value is of the wrong type.
        let mut orders = vec![all.clone()];
        orders.push(all.iter().rev().cloned().collect());
        let mut sorted = all.clone();
        sorted.sort_by(|a, b| a.0.cmp(&b.0));
        orders.push(sorted);
        orders.push(
            (0..all.len())
                .map(|k| all[(k * 13) % all.len()].clone())
                .collect(),
        );
        for entries in orders {
            let object = Value::Object(entries.iter().cloned().collect());
            assert!(s.is_valid(&object), "{object}");
            for wrong in ["p0", "p10", "p19", "extra"] {
                let mut object = object.clone();
                object[wrong] = if wrong == "extra" {
                    json!(1)
                } else {
                    json!("x")
                };
                assert!(!s.is_valid(&object), "{object}");
                let (violations, _) = listed(&s, &object);
                assert_eq!(violations.len(), 1, "{object}");
                assert_eq!(violations[0].0, format!("/{wrong}"));
            }
        }
        // Out of order, with the required names missing, an undeclared key of the wrong type
        // and a declared one of the wrong type.
        let (violations, _) = listed(&s, &json!({"p7": 1, "zz": 2, "p0": "0", "extra": 5}));
        assert_eq!(
            violations,
            [
                triple("", "/required", "the required property \"p3\" is missing"),
                triple("", "/required", "the required property \"p3\" is missing"),
                triple("", "/required", "the required property \"p19\" is missing"),
                triple(
                    "/zz",
                    "/additionalProperties/type",
                    "expected string, found a number"
                ),
                triple(
                    "/p0",
                    "/properties/p0/type",
                    "expected integer, found a string"
                ),
                triple(
                    "/extra",
                    "/additionalProperties/type",
                    "expected string, found a number"
                ),
            ]
        );
    }

    #[test]
    fn many_names_go_through_a_table_or_else_an_index() {
        // Names a table separates; long names that share their first and last 8 bytes and
        // their length (so their keys), which no table separates; more names than a table
        // takes. Each object is checked in the schema's order, reversed and scattered.
        let sets: [Vec<String>; 3] = [
            (0..60).map(|i| format!("field_{i}")).collect(),
            (10..30)
                .map(|i| format!("the_argument_number_{i}_of_this_call"))
                .collect(),
            (0..=Table::MAX_NAMES).map(|i| format!("p{i}")).collect(),
        ];
        for (names, table) in sets.iter().zip([true, false, false]) {
            let props: Map<String, Value> = names
                .iter()
                .map(|n| (n.clone(), json!({"type": "integer"})))
                .collect();
            let last = &names[names.len() - 1];
            let s = compile(json!({
                "properties": props,
                "required": [&names[0], last],
                "additionalProperties": false
            }));
            let entries = &s.nodes[0].entries;
            assert_eq!(entries.table.is_some(), table, "{names:?}");
            assert_eq!(entries.index.is_some(), !table, "{names:?}");
            let n = names.len();
            let orders: [Vec<usize>; 3] = [
                (0..n).collect(),
                (0..n).rev().collect(),
                (0..n).map(|k| (k * 7) % n).collect(),
            ];
            for order in orders {
                let object: Map<String, Value> = order
                    .iter()
                    .map(|&i| (names[i].clone(), json!(i)))
                    .collect();
                assert!(s.is_valid(&Value::Object(object.clone())));
                let mut wrong = object.clone();
                wrong.insert(names[n / 2].clone(), json!("x"));
                wrong.insert(format!("{}_", &names[0]), json!(1));
                wrong.remove(last);
                let (violations, _) = listed(&s, &Value::Object(wrong));
                let pointers: Vec<&str> = violations.iter().map(|v| v.0.as_str()).collect();
                let expected_value = format!("/{}", names[n / 2]);
                let expected_extra = format!("/{}_", names[0]);
                assert_eq!(violations.len(), 3, "{violations:?}");
                assert_eq!(violations[0].1, "/required");
                assert!(pointers.contains(&expected_value.as_str()), "{pointers:?}");
                assert!(pointers.contains(&expected_extra.as_str()), "{pointers:?}");
            }
        }
    }

    #[test]
    fn enum_and_const_compare_as_json_does() {
        let s = compile(json!({"enum": [1, "gift", "a-rather-long-member", {"a": [1.0]}, null]}));
        for ok in [
            json!(1.0),
            json!(1),
            json!("gift"),
            json!("a-rather-long-member"),
            json!({"a": [1]}),
            json!(null),
        ] {
            assert!(s.is_valid(&ok), "{ok}");
        }
        for bad in [
            json!("gifu"),
            json!("a-rather-long-membes"),
            json!("1"),
            json!(true),
            json!({"a": [2]}),
            json!([1]),
        ] {
            assert!(!s.is_valid(&bad), "{bad}");
        }
        let s = compile(json!({"const": 18446744073709551615u64}));
        assert!(s.is_valid(&json!(18446744073709551615u64)));
        assert!(!s.is_valid(&json!(-1)));
    }

    #[test]
    fn the_cap_counts_what_it_does_not_list() {
        let s = compile(json!({"type": "array", "items": {"type": "integer", "enum": [1, 2]}}));
        let many = Value::Array((0..100).map(|i| json!(format!("s{i}"))).collect());
        let (violations, more) = listed(&s, &many);
        assert_eq!(violations.len(), MAX_VIOLATIONS);
        assert_eq!(more, 200 - MAX_VIOLATIONS);
        assert_eq!(
            violations[1],
            triple("/0", "/items/enum", "\"s0\" is not one of [1,2]")
        );
        assert_eq!(violations[63].0, "/31");
    }

    #[test]
    fn short_strings_compare_and_key_as_equality_does() {
        let base: String = (0..40).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
        for len in 0..=40 {
            let a = &base[..len];
            let mut variants = vec![format!("{a}x")];
            if len > 0 {
                variants.push(base[..len - 1].to_string());
            }
            for at in 0..len {
                let mut b = a.as_bytes().to_vec();
                b[at] = b'#';
                variants.push(String::from_utf8(b).unwrap());
            }
            assert!(same_str(a, a));
            for b in &variants {
                assert!(!same_str(a, b), "{a:?} {b:?}");
                if len <= 16 && b.len() <= 16 {
                    assert_ne!(Key::of(a), Key::of(b), "{a:?} {b:?}");
                }
                if len <= 16 && b.len() == len {
                    assert!(!same_short(a.as_bytes(), b.as_bytes()), "{a:?} {b:?}");
                }
            }
        }
    }
}

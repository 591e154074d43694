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

mod compile;
mod errors;
#[cfg(test)]
mod tests;
mod validate;

pub use errors::{SchemaCompileError, SchemaError, Violation};
pub use validate::json_equal;

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

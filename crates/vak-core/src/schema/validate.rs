//! Validating a value against a compiled schema: a fast yes/no walk, and on refusal a second
//! walk that lists every violation with its pointers.
//!
//! Cost: the fast pass checks each subschema at most once against each value of the arguments,
//! however `$ref`s and applicators nest, so it costs at most subschemas × values checks. A
//! subschema with a single way in is reached at most once per value, by induction (a chain of
//! subschemas applied in place that loops is refused at compile time, so every loop descends
//! into the value). One with several ways in (a `$ref` target used twice) is remembered per
//! value (a memo, [`Remembered`]), unless the compiler can tell that its ways in never meet at
//! one value (`ways.rs`: they descend by different names, say), so a schema that only reuses
//! its definitions pays nothing for the memo. An applicator checks each of its branches once
//! per value. On refusal, the pass that names violations (`report.rs`) walks down only where the
//! fast pass refuses, asking the fast pass (and its memo) about each subschema it may descend
//! into, and says what a subschema reached several ways has to say once. It looks into an
//! `anyOf`/`oneOf`'s branches only to name the closest one's first violation: a walk that stops
//! there and looks into no `anyOf`/`oneOf` branches below it, so such walks never nest.

use super::keywords::numbers_equal;
use super::report::{Path, Validation};
use super::*;
use std::hash::{BuildHasherDefault, Hasher};

/// What the fast pass remembers of subschemas reached from more than one place.
pub(super) trait Memo {
    fn recall(&mut self, node: NodeId, value: &Value) -> Option<bool>;
    fn store(&mut self, node: NodeId, value: &Value, valid: bool);
}

/// For a schema with no node to remember: nothing is kept, at no cost.
pub(super) struct NoMemo;

impl Memo for NoMemo {
    #[inline(always)]
    fn recall(&mut self, _: NodeId, _: &Value) -> Option<bool> {
        None
    }

    #[inline(always)]
    fn store(&mut self, _: NodeId, _: &Value, _: bool) {}
}

/// A value of the arguments is named by its address: the arguments are borrowed, unchanged,
/// for the whole validation, and no two of their values share one.
pub(super) fn address(value: &Value) -> usize {
    std::ptr::from_ref(value) as usize
}

/// (node, value) → valid: at most one entry for each pair the walk reaches (so it grows no
/// faster than the walk's own work), allocated only when a remembered node is reached.
#[derive(Default)]
pub(super) struct Remembered(HashMap<(NodeId, usize), bool, BuildHasherDefault<PairHasher>>);

impl Memo for Remembered {
    fn recall(&mut self, node: NodeId, value: &Value) -> Option<bool> {
        self.0.get(&(node, address(value))).copied()
    }

    fn store(&mut self, node: NodeId, value: &Value, valid: bool) {
        self.0.insert((node, address(value)), valid);
    }
}

/// A hash of a (node, address) pair: both are the host's own numbers, not the sender's, so a
/// multiply and a fold spread them well enough.
#[derive(Default)]
pub(super) struct PairHasher(u64);

impl Hasher for PairHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    fn write_u64(&mut self, n: u64) {
        let product = u128::from(self.0 ^ n) * 0x9e37_79b9_7f4a_7c15;
        self.0 = (product as u64) ^ ((product >> 64) as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

impl CompiledSchema {
    /// Whether `instance` is valid: a pass that builds no pointer and allocates nothing (but a
    /// memo, for a schema that reaches one subschema from two places), and stops at the first
    /// violation.
    pub fn is_valid(&self, instance: &Value) -> bool {
        if self.remembers {
            self.valid(0, instance, &mut Remembered::default())
        } else {
            self.valid(0, instance, &mut NoMemo)
        }
    }

    /// The check every subschema starts with, inlined where it is called: most leaves only
    /// check a type, and are decided here without a call.
    #[inline(always)]
    pub(super) fn valid<M: Memo>(&self, id: NodeId, value: &Value, memo: &mut M) -> bool {
        let node = &self.nodes[id];
        // The `false` schema has no types: this refuses it too.
        node.types.matches(value)
            && (node.shape == Shape::Types || self.valid_rest(node, value, memo))
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
    pub(super) fn valid_rest<M: Memo>(&self, node: &Node, value: &Value, memo: &mut M) -> bool {
        if node.shape == Shape::Values {
            self.valid_value(node, value)
        } else if node.shape == Shape::Object {
            match value {
                Value::Object(map) => self.valid_object(node, map, memo),
                _ => true,
            }
        } else {
            // `General`, or `Types` (which it passes: it finds nothing else to check).
            self.valid_general(node, value, memo)
        }
    }

    #[inline(never)]
    fn valid_general<M: Memo>(&self, node: &Node, value: &Value, memo: &mut M) -> bool {
        if node.remember {
            return self.valid_remembered(node, value, memo);
        }
        self.valid_keywords(node, value, memo)
    }

    #[inline(never)]
    fn valid_remembered<M: Memo>(&self, node: &Node, value: &Value, memo: &mut M) -> bool {
        if let Some(valid) = memo.recall(node.id, value) {
            return valid;
        }
        let valid = self.valid_keywords(node, value, memo);
        memo.store(node.id, value, valid);
        valid
    }

    /// Every keyword of a `General` node but `type`.
    #[inline(always)]
    fn valid_keywords<M: Memo>(&self, node: &Node, value: &Value, memo: &mut M) -> bool {
        if let Some(target) = node.reference
            && !self.valid(target, value, memo)
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
        let structure = match value {
            Value::Object(map) => !node.object_rules || self.valid_object(node, map, memo),
            Value::Array(list) if node.prefix.is_empty() => match node.items {
                Some(items) => list.iter().all(|item| self.valid(items, item, memo)),
                None => true,
            },
            Value::Array(list) => {
                let (head, rest) = list.split_at(node.prefix.len().min(list.len()));
                head.iter()
                    .zip(&node.prefix)
                    .all(|(item, &p)| self.valid(p, item, memo))
                    && node
                        .items
                        .is_none_or(|items| rest.iter().all(|item| self.valid(items, item, memo)))
            }
            _ => true,
        };
        structure
            && node
                .checks
                .as_deref()
                .is_none_or(|c| self.valid_checks(c, value, memo))
    }

    /// The assertions of [`Checks`], then each applicator's branches, each checked once.
    fn valid_checks<M: Memo>(&self, c: &Checks, value: &Value, memo: &mut M) -> bool {
        c.holds(value)
            && c.all_of.iter().all(|&b| self.valid(b, value, memo))
            && (c.any_of.is_empty() || c.any_of.iter().any(|&b| self.valid(b, value, memo)))
            && (c.one_of.is_empty() || self.matching(&c.one_of, value, memo, 2) == 1)
            && c.not.is_none_or(|b| !self.valid(b, value, memo))
    }

    /// How many of `branches` `value` matches, counting up to `enough`.
    fn matching<M: Memo>(
        &self,
        branches: &[NodeId],
        value: &Value,
        memo: &mut M,
        enough: usize,
    ) -> usize {
        let mut n = 0;
        for &b in branches {
            if self.valid(b, value, memo) {
                n += 1;
                if n == enough {
                    break;
                }
            }
        }
        n
    }

    /// One pass over the instance's properties (never a lookup of each schema name in the
    /// instance): every key finds its entry, and the required ones are counted as they pass.
    #[inline(never)]
    fn valid_object<M: Memo>(&self, node: &Node, map: &Map<String, Value>, memo: &mut M) -> bool {
        if map.len() < node.required_count {
            return false;
        }
        // One loop for each way of looking up, so that neither pays for the other's state.
        let entries = &node.entries;
        match &entries.table {
            Some(table) => {
                self.valid_properties(node, map, memo, |name, _| table.find(&entries.list, name))
            }
            None => self.valid_properties(node, map, memo, |name, next| {
                entries.guess(name, next).map(|e| &e.rule)
            }),
        }
    }

    #[inline(always)]
    fn valid_properties<'n, M: Memo>(
        &self,
        node: &'n Node,
        map: &Map<String, Value>,
        memo: &mut M,
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
                        .is_none_or(|t| self.valid_rest(&self.nodes[t], value, memo))))
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
        // The memo is made only for a schema that keeps one: even empty, it costs the valid
        // path of a small schema a few percent.
        if !self.remembers {
            if self.valid(0, instance, &mut NoMemo) {
                return Ok(());
            }
            return self.violations(instance, Remembered::default());
        }
        let mut memo = Remembered::default();
        if self.valid(0, instance, &mut memo) {
            return Ok(());
        }
        self.violations(instance, memo)
    }

    /// The pass that names every violation, kept out of line: the valid path never sets it up.
    /// It asks the fast pass's memo.
    #[inline(never)]
    fn violations(&self, instance: &Value, memo: Remembered) -> Result<(), SchemaError> {
        let mut v = Validation::new(self, memo);
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

/// JSON equality as JSON Schema defines it: numbers by value (`1` equals `1.0`), objects
/// regardless of key order.
pub fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        // Exactly: 2^53 + 1 is not the float 2^53 (an f64 comparison would say it is).
        (Value::Number(x), Value::Number(y)) => numbers_equal(x, y),
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

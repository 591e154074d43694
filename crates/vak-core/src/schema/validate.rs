//! Validating a value against a compiled schema: a fast yes/no walk, and on refusal a second
//! walk that lists every violation with its pointers.

use super::compile::push_token;
use super::*;

impl CompiledSchema {
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
                let found = json_type_name(value);
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

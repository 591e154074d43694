//! The pass that names violations, on a refused value: each with the pointer of the value and
//! of the keyword. It descends only into subschemas the fast pass refuses.

use super::compile::push_token;
use super::validate::{PairHasher, Remembered, address};
use super::*;
use std::hash::BuildHasherDefault;

/// Where a value is in the instance: a chain of steps back to the root, each on the stack of
/// the call that took it. It costs nothing to extend; it is written out as a JSON Pointer only
/// for a violation that is listed.
#[derive(Clone, Copy)]
pub(super) enum Path<'a> {
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
pub(super) struct Validation<'s> {
    schema: &'s CompiledSchema,
    pub(super) violations: Vec<Violation>,
    pub(super) more: usize,
    /// The fast pass's memo, asked again here (and filled further).
    memo: Remembered,
    /// The (node reached from more than one place, value) pairs already walked: what they have
    /// to say is said once, however many ways lead there.
    walked: HashSet<(NodeId, usize), BuildHasherDefault<PairHasher>>,
    /// Most violations listed; past it, they are counted (`more`), or, for a walk that looks
    /// for an alternative's first violation (`stop`), the walk ends.
    limit: usize,
    stop: bool,
    /// Whether a failed `anyOf`/`oneOf` names its closest alternative: not within a walk that
    /// is itself looking for one, so such walks never nest.
    explain: bool,
}

impl<'s> Validation<'s> {
    pub(super) fn new(schema: &'s CompiledSchema, memo: Remembered) -> Validation<'s> {
        Validation {
            schema,
            violations: Vec::new(),
            more: 0,
            memo,
            walked: HashSet::default(),
            limit: MAX_VIOLATIONS,
            stop: false,
            explain: true,
        }
    }

    /// A walk that has listed what it looks for.
    fn done(&self) -> bool {
        self.stop && self.violations.len() >= self.limit
    }

    /// Record a violation of `node`'s `keyword`; the message is only written if it is listed.
    fn fail(&mut self, path: &Path, node: &Node, keyword: &str, message: impl FnOnce() -> String) {
        if self.violations.len() >= self.limit {
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
        if self.violations.len() >= self.limit {
            self.more += 1;
            return;
        }
        self.violations.push(Violation {
            instance: path.pointer(),
            keyword,
            message,
        });
    }

    /// The fast pass, with this walk's memo.
    fn valid(&mut self, id: NodeId, value: &Value) -> bool {
        self.schema.valid(id, value, &mut self.memo)
    }

    /// Whether the subschema surely has nothing to report on `value`, by the fast pass. An
    /// array is not checked first: descending costs no more than the check (each item is
    /// checked before it is descended into), and an invalid array is not walked twice.
    #[inline(always)]
    fn clean(&mut self, id: NodeId, value: &Value) -> bool {
        let node = &self.schema.nodes[id];
        node.types.matches(value)
            && (node.shape == Shape::Types
                || (!value.is_array() && self.schema.valid_rest(node, value, &mut self.memo)))
    }

    pub(super) fn node(&mut self, id: NodeId, value: &Value, path: &Path) {
        let schema = self.schema;
        let node = &schema.nodes[id];
        if self.done() || (node.incoming > 1 && !self.walked.insert((id, address(value)))) {
            return;
        }
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
        if let Some(checks) = node.checks.as_deref() {
            checks.assertions(value, |keyword, message| {
                self.fail(path, node, keyword, message);
            });
            self.applicators(node, checks, value, path);
        }
        match value {
            Value::Object(map) => self.object(node, map, path),
            Value::Array(list) => self.items(node, list, path),
            _ => {}
        }
    }

    /// `allOf`'s branches speak for the call (each must hold); `anyOf`, `oneOf` and `not` are
    /// one violation each, at the keyword.
    fn applicators(&mut self, node: &Node, c: &Checks, value: &Value, path: &Path) {
        for &b in &c.all_of {
            if !self.clean(b, value) {
                self.node(b, value, path);
            }
        }
        if !c.any_of.is_empty() && !c.any_of.iter().any(|&b| self.valid(b, value)) {
            let closest = self.closest(&c.any_of, value, path);
            let n = c.any_of.len();
            self.fail(path, node, "anyOf", || {
                format!("matches none of the {n} alternatives{closest}")
            });
        }
        if !c.one_of.is_empty() {
            let matched: Vec<usize> = (0..c.one_of.len())
                .filter(|&i| self.valid(c.one_of[i], value))
                .collect();
            let n = c.one_of.len();
            match matched.len() {
                1 => {}
                0 => {
                    let closest = self.closest(&c.one_of, value, path);
                    self.fail(path, node, "oneOf", || {
                        format!("matches none of the {n} alternatives{closest}")
                    });
                }
                k => self.fail(path, node, "oneOf", || {
                    let list: Vec<String> = matched.iter().map(usize::to_string).collect();
                    format!(
                        "matches {k} of the {n} alternatives ({}); exactly one is required",
                        list.join(", ")
                    )
                }),
            }
        }
        if let Some(b) = c.not
            && self.valid(b, value)
        {
            self.fail(path, node, "not", || {
                "matches the schema under `not`, which it must not".into()
            });
        }
    }

    /// The alternative whose first violation is deepest in the value (the one that got
    /// furthest; the first of those), as the end of the message: `; closest: <where>: <what>
    /// [<keyword>]`. Each branch is walked until its first violation, by a walk that names no
    /// closest alternative of its own. Nothing when the message would not be listed.
    fn closest(&mut self, branches: &[NodeId], value: &Value, path: &Path) -> String {
        if !self.explain || self.violations.len() >= self.limit {
            return String::new();
        }
        let mut best: Option<(usize, Violation)> = None;
        for &b in branches {
            let mut walk = Validation {
                memo: std::mem::take(&mut self.memo),
                limit: 1,
                stop: true,
                explain: false,
                ..Validation::new(self.schema, Remembered::default())
            };
            walk.node(b, value, path);
            self.memo = walk.memo;
            if let Some(v) = walk.violations.pop() {
                let depth = v.instance.matches('/').count();
                if best.as_ref().is_none_or(|(d, _)| depth > *d) {
                    best = Some((depth, v));
                }
            }
        }
        best.map_or_else(String::new, |(_, v)| {
            let at = if v.instance.is_empty() {
                "(root)"
            } else {
                &v.instance
            };
            format!("; closest: {at}: {} [{}]", v.message, v.keyword)
        })
    }

    /// `prefixItems` for the first items, `items` for the rest.
    fn items(&mut self, node: &Node, list: &[Value], path: &Path) {
        if node.prefix.is_empty() && node.items.is_none() {
            return;
        }
        for (i, item) in list.iter().enumerate() {
            if self.done() {
                return;
            }
            let (target, after) = match (node.prefix.get(i), node.items) {
                (Some(&p), _) => (p, false),
                (None, Some(items)) => (items, true),
                (None, None) => return,
            };
            if self.clean(target, item) {
                continue;
            }
            let path = Path::Item(path, i);
            if after && !node.prefix.is_empty() && self.schema.nodes[target].reject_all {
                let n = node.prefix.len();
                self.fail(&path, node, "items", || {
                    format!("no item is allowed after the {n} of `prefixItems`")
                });
            } else {
                self.node(target, item, &path);
            }
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
            if self.done() {
                return;
            }
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

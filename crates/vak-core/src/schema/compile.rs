//! Compiling an admitted schema once: every subschema a node, `$ref`s resolved to nodes (local
//! pointers only), keywords outside the subset listed as not enforced, and a chain of
//! subschemas applied in place (`$ref`, `allOf`, `anyOf`, `oneOf`, `not`) that loops refused.

use super::*;

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
pub(super) fn push_token(pointer: &mut String, token: &str) {
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
    /// Compile a subschema its parent applies, counting the way in (a node with several may be
    /// remembered: `ways.rs`).
    fn child(&mut self, schema: &'a Value, location: String) -> Result<NodeId, SchemaCompileError> {
        let id = self.compile(schema, location)?;
        self.nodes[id].incoming += 1;
        Ok(id)
    }

    /// Compile each subschema of a list keyword (`prefixItems` and the applicators).
    fn children(
        &mut self,
        key: &str,
        value: &'a Value,
        at: &str,
    ) -> Result<Vec<NodeId>, SchemaCompileError> {
        let list = value
            .as_array()
            .ok_or_else(|| malformed(at, format!("`{key}` must be an array of schemas")))?;
        if list.is_empty() && key != "prefixItems" {
            return Err(malformed(
                at,
                format!("`{key}` must list at least one schema"),
            ));
        }
        list.iter()
            .enumerate()
            .map(|(i, sub)| self.child(sub, format!("{at}/{i}")))
            .collect()
    }

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
            id,
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
            id,
            location: location.clone(),
            ..Node::default()
        };
        let mut checks = Checks::default();
        let mut has_checks = false;
        for (key, value) in obj {
            let at = format!("{location}/{}", escape(key));
            match key.as_str() {
                "type" => (node.types, node.types_text) = compile_types(value, &at)?,
                "properties" => {
                    let props = value
                        .as_object()
                        .ok_or_else(|| malformed(&at, "`properties` must be an object"))?;
                    for (name, sub) in props {
                        let child = self.child(sub, format!("{at}/{}", escape(name)))?;
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
                "additionalProperties" => node.additional = Some(self.child(value, at)?),
                "enum" => {
                    let list = value
                        .as_array()
                        .ok_or_else(|| malformed(&at, "`enum` must be an array"))?;
                    node.enumeration = Some(Enumeration::new(list));
                }
                "const" => node.constant = Some(value.clone()),
                "items" => {
                    if value.is_array() {
                        // The draft-07 tuple form, which 2020-12 writes `prefixItems`: not read.
                        self.not_enforced.push(at);
                    } else {
                        node.items = Some(self.child(value, at)?);
                    }
                }
                "prefixItems" => node.prefix = self.children(key, value, &at)?,
                "allOf" | "anyOf" | "oneOf" => {
                    let branches = self.children(key, value, &at)?;
                    has_checks = true;
                    match key.as_str() {
                        "allOf" => checks.all_of = branches,
                        "anyOf" => checks.any_of = branches,
                        _ => checks.one_of = branches,
                    }
                }
                "not" => {
                    checks.not = Some(self.child(value, at)?);
                    has_checks = true;
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
                k if checks.assertion(k, value, &at)? => has_checks = true,
                _ => self.not_enforced.push(at),
            }
        }
        debug_assert!(ENFORCED.iter().all(|k| !ANNOTATIONS.contains(k)));
        node.checks = has_checks.then(|| Box::new(checks));
        let (reference, incoming) = (self.nodes[id].reference, self.nodes[id].incoming);
        self.nodes[id] = Node {
            reference,
            incoming,
            ..node
        };
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
            c.nodes[target].incoming += 1;
        }
        if let Some((from, to)) = in_place_cycle(&c.nodes) {
            return Err(SchemaCompileError::RefCycle {
                pointer: format!("{}/$ref", c.nodes[from].location),
                reference: format!("#{}", c.nodes[to].location),
            });
        }
        let may_meet = ways::may_meet(&c.nodes);
        for (node, may_meet) in c.nodes.iter_mut().zip(may_meet) {
            node.classify(may_meet);
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
            remembers: c.nodes.iter().any(|n| n.remember),
            nodes: c.nodes,
            not_enforced,
        })
    }
}

/// The subschemas `node` applies to the same value: its `$ref`, and its applicators' branches.
fn in_place(node: &Node) -> impl Iterator<Item = NodeId> + '_ {
    let checks = node.checks.as_deref();
    node.reference
        .into_iter()
        .chain(checks.into_iter().flat_map(|c| {
            let branches = c.all_of.iter().chain(&c.any_of).chain(&c.one_of);
            branches.copied().chain(c.not)
        }))
}

/// A chain of subschemas applied in place that comes back to where it started never reaches a
/// value (and a walk along it would never end): the `$ref` on such a cycle, as (its node, its
/// target). The schema document is a tree, so every cycle has one. Depth first over the
/// in-place edges, with an explicit stack: linear in the schema's size.
fn in_place_cycle(nodes: &[Node]) -> Option<(NodeId, NodeId)> {
    const NEW: u8 = 0;
    const OPEN: u8 = 1;
    const DONE: u8 = 2;
    let mut state = vec![NEW; nodes.len()];
    for start in 0..nodes.len() {
        if state[start] != NEW {
            continue;
        }
        // Each frame: a node, and its in-place successors not yet followed.
        let mut stack: Vec<(NodeId, Vec<NodeId>)> =
            vec![(start, in_place(&nodes[start]).collect())];
        state[start] = OPEN;
        while let Some((at, next)) = stack.last_mut() {
            let at = *at;
            let Some(to) = next.pop() else {
                state[at] = DONE;
                stack.pop();
                continue;
            };
            match state[to] {
                NEW => {
                    state[to] = OPEN;
                    stack.push((to, in_place(&nodes[to]).collect()));
                }
                OPEN => {
                    // The cycle: the frames from `to` up to `at`, then back to `to`.
                    let from = stack.iter().position(|(n, _)| *n == to).unwrap_or(0);
                    let path: Vec<NodeId> = stack[from..].iter().map(|(n, _)| *n).collect();
                    let edges = path.iter().zip(path.iter().skip(1).chain([&to]));
                    let reference = edges
                        .map(|(&a, &b)| (a, b))
                        .find(|&(a, b)| nodes[a].reference == Some(b));
                    return Some(reference.unwrap_or((at, to)));
                }
                _ => {}
            }
        }
    }
    None
}

//! Compiling an admitted schema once: every subschema a node, `$ref`s resolved to nodes (local
//! pointers only), keywords outside the subset listed as not enforced.

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
}

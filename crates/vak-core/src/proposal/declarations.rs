//! The tool declarations vak hands each provider, from a tool's admitted input schema.
//!
//! The rule: a call that conforms to a declaration is never refused by vak's schema stage, and a
//! declaration never allows what the schema stage refuses. A declaration therefore says exactly
//! what the admitted schema says, in the provider's dialect; it may leave out only keywords the
//! schema stage does not enforce either (`format`, `pattern`, listed by `vak inspect`), and
//! says so in a note. Where the dialect cannot say it (OpenAI's strict mode: every property
//! required, no extra properties, a subset of keywords: no `minLength`, `prefixItems`, `allOf`,
//! `not`, …; no `oneOf`, which is declared as `anyOf` only where its alternatives exclude each
//! other), the tool is declared in the provider's non-strict form, with a note saying why.
//! Gemini reads `oneOf` as `anyOf`: a `oneOf` whose alternatives may overlap gets a note. Calls
//! are never repaired to fit a declaration.
//!
//! | provider | entry of the request's `tools` list | schema |
//! |---|---|---|
//! | `openai-chat` | `{"type":"function","function":{name, description, parameters, strict}}` | strict when expressible |
//! | `openai-responses` | `{"type":"function", name, description, parameters, strict}` | strict when expressible |
//! | `anthropic` | `{name, description, input_schema}` | the admitted schema |
//! | `gemini` | `{"functionDeclarations":[{name, description, parametersJsonSchema}]}` (one entry for all tools) | the admitted schema |
//! | `mcp` | `tools/list`'s `{name, description, inputSchema, …}` | the admitted schema |

use super::overlap::exclusive;
use super::providers::Provider;
use serde_json::{Map, Value, json};

/// One tool as one provider is told about it.
#[derive(Debug, Clone, PartialEq)]
pub struct Declaration {
    /// The tool's entry in the provider's `tools` list (for Gemini, one `functionDeclarations`
    /// member).
    pub entry: Value,
    /// Whether the provider is asked to hold the model to the schema (OpenAI's `strict`).
    pub strict: bool,
    /// What the declaration leaves out or could not say, each with the schema pointer it is
    /// about (`""` is the root).
    pub notes: Vec<String>,
}

/// The declaration of the tool `name` for `provider`, from its admitted input schema.
///
/// MCP's entry carries what this function knows (name, description, `inputSchema`); `vak serve`
/// adds MCP's annotations and title (`mcp::Catalog`).
pub fn declaration(
    provider: Provider,
    name: &str,
    description: &str,
    schema: &Value,
) -> Declaration {
    let mut notes = Vec::new();
    let mut strict = false;
    let entry = match provider {
        Provider::OpenAiChat | Provider::OpenAiResponses => {
            let parameters = match openai_strict(schema) {
                Ok((s, dropped)) => {
                    strict = true;
                    notes.extend(dropped);
                    s
                }
                Err(reasons) => {
                    notes.extend(
                        reasons
                            .into_iter()
                            .map(|r| format!("declared non-strict: {r}")),
                    );
                    if !is_object_schema(schema) {
                        notes.push(
                            "(root): OpenAI expects an object schema for a function's parameters"
                                .into(),
                        );
                    }
                    without_meta_schema(schema)
                }
            };
            if provider == Provider::OpenAiChat {
                json!({ "type": "function", "function": {
                    "name": name, "description": description, "parameters": parameters, "strict": strict } })
            } else {
                json!({ "type": "function", "name": name, "description": description,
                    "parameters": parameters, "strict": strict })
            }
        }
        Provider::Anthropic => {
            if !is_object_schema(schema) {
                notes.push("(root): Anthropic expects `\"type\": \"object\"` at the root".into());
            }
            json!({ "name": name, "description": description, "input_schema": schema })
        }
        Provider::Gemini => {
            let s = gemini_schema(schema, "", &mut notes);
            json!({ "name": name, "description": description, "parametersJsonSchema": s })
        }
        Provider::Mcp => json!({ "name": name, "description": description, "inputSchema": schema }),
    };
    Declaration {
        entry,
        strict,
        notes,
    }
}

/// The `tools` member of `provider`'s request body, holding these entries: what `vak tools
/// --for` prints (`{"tools": […]}`; Gemini's declarations go in one `functionDeclarations` tool).
pub fn request_tools(provider: Provider, entries: Vec<Value>) -> Value {
    match provider {
        Provider::Gemini => json!({ "tools": [ { "functionDeclarations": entries } ] }),
        _ => json!({ "tools": entries }),
    }
}

fn is_object_schema(s: &Value) -> bool {
    s.get("type").and_then(Value::as_str) == Some("object")
}

fn without_meta_schema(s: &Value) -> Value {
    let mut s = s.clone();
    if let Value::Object(o) = &mut s {
        o.remove("$schema");
    }
    s
}

/// Keywords that only annotate; left out of a strict schema without changing what it accepts.
const ANNOTATIONS: [&str; 9] = [
    "$schema",
    "$comment",
    "$id",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "title",
];

/// Assertions vak's schema stage does not enforce and OpenAI's strict mode is not relied on to
/// take: left out of a strict declaration, with a note (the schema stage accepts what they
/// would refuse either way).
const UNENFORCED_VALUE_CHECKS: [&str; 2] = ["format", "pattern"];

/// Assertions the schema stage enforces that strict mode documents (numbers' bounds, arrays'
/// counts): kept in a strict declaration as they are. The stage's other assertions
/// (`minLength`, `uniqueItems`, …) have no strict form: the tool is then declared non-strict.
const STRICT_VALUE_CHECKS: [&str; 7] = [
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
];

/// Deepest schema nesting the adapters walk (the schema stage's own limit on arguments is 64).
const MAX_SCHEMA_DEPTH: usize = 64;
/// Most schema nodes one strict conversion visits: inlining `$ref`s (strict mode takes a `$ref`
/// with no keyword beside it) can multiply a tool's schema; past this it is declared non-strict.
const MAX_STRICT_NODES: usize = 20_000;

/// The admitted schema in OpenAI's strict dialect, with notes for what was left out; or why it
/// cannot be said there exactly.
fn openai_strict(schema: &Value) -> Result<(Value, Vec<String>), Vec<String>> {
    let mut walk = Strict {
        root: schema,
        notes: Vec::new(),
        reasons: Vec::new(),
        budget: MAX_STRICT_NODES,
    };
    if !is_object_schema(schema) {
        walk.reasons
            .push("(root): strict mode needs `\"type\": \"object\"` at the root".into());
    }
    let out = walk.node(schema, "", 0);
    if walk.budget == 0 {
        walk.reasons = vec![format!(
            "(root): more than {MAX_STRICT_NODES} schema nodes to visit once its `$ref`s are inlined"
        )];
    }
    if walk.reasons.is_empty() {
        Ok((out, walk.notes))
    } else {
        Err(walk.reasons)
    }
}

struct Strict<'a> {
    root: &'a Value,
    notes: Vec<String>,
    reasons: Vec<String>,
    /// Nodes (and null checks) left to visit before the conversion gives up.
    budget: usize,
}

fn at_or_root(at: &str) -> &str {
    if at.is_empty() { "(root)" } else { at }
}

impl Strict<'_> {
    fn node(&mut self, s: &Value, at: &str, depth: usize) -> Value {
        if self.budget == 0 {
            return s.clone();
        }
        self.budget -= 1;
        if depth > MAX_SCHEMA_DEPTH {
            self.reasons.push(format!(
                "{}: nests deeper than {MAX_SCHEMA_DEPTH} levels",
                at_or_root(at)
            ));
            return Value::Object(Map::new());
        }
        let o = match s {
            Value::Object(o) => o,
            Value::Bool(b) => {
                self.reasons.push(format!(
                    "{}: the schema `{b}` has no strict form",
                    at_or_root(at)
                ));
                return s.clone();
            }
            _ => return s.clone(),
        };
        // A `$ref` with other keywords beside it is inlined (strict mode takes a bare `$ref`
        // only), as OpenAI's SDK does; a keyword both sides assert cannot be merged.
        if let Some(r) = o.get("$ref").and_then(Value::as_str)
            && o.keys().any(|k| k != "$ref")
        {
            let target = r
                .strip_prefix('#')
                .and_then(|p| self.root.pointer(p))
                .and_then(Value::as_object);
            let Some(target) = target else {
                self.reasons.push(format!(
                    "{at}/$ref: {r:?} does not point at a schema object in this document"
                ));
                return s.clone();
            };
            let mut merged = target.clone();
            for (k, v) in o {
                if k == "$ref" {
                    continue;
                }
                if merged.contains_key(k)
                    && !ANNOTATIONS.contains(&k.as_str())
                    && k != "description"
                {
                    self.reasons.push(format!(
                        "{at}/{k}: asserted both beside `$ref` and in its target; strict mode cannot merge them"
                    ));
                }
                merged.insert(k.clone(), v.clone());
            }
            return self.node(&Value::Object(merged), at, depth + 1);
        }
        let mut out = Map::new();
        for (k, v) in o {
            let here = format!("{at}/{k}");
            match k.as_str() {
                "type" | "enum" | "const" | "description" | "$ref" | "required" => {
                    out.insert(k.clone(), v.clone());
                }
                k if STRICT_VALUE_CHECKS.contains(&k) => {
                    out.insert(k.to_string(), v.clone());
                }
                "properties" => {
                    let Some(props) = v.as_object() else {
                        self.reasons.push(format!("{here}: not an object"));
                        continue;
                    };
                    let mut converted = Map::new();
                    for (name, sub) in props {
                        let child = format!("{here}/{}", escape(name));
                        converted.insert(name.clone(), self.node(sub, &child, depth + 1));
                    }
                    out.insert(k.clone(), Value::Object(converted));
                }
                "items" if v.is_object() || v.is_boolean() => {
                    out.insert(k.clone(), self.node(v, &here, depth + 1));
                }
                "anyOf" | "oneOf" => {
                    let Some(branches) = v.as_array() else {
                        self.reasons.push(format!("{here}: not an array"));
                        continue;
                    };
                    let converted: Vec<Value> = branches
                        .iter()
                        .enumerate()
                        .map(|(i, b)| self.node(b, &format!("{here}/{i}"), depth + 1))
                        .collect();
                    if k == "oneOf" {
                        if exclusive(branches, self.root, &mut self.budget) {
                            self.notes.push(format!(
                                "{here}: declared as anyOf (strict mode has no oneOf): its alternatives exclude each other, so it says the same"
                            ));
                        } else {
                            self.reasons.push(format!(
                                "{here}: alternatives that may overlap; strict mode has only anyOf, which would allow a value that matches two (vak's schema stage refuses it)"
                            ));
                        }
                    }
                    out.insert("anyOf".into(), Value::Array(converted));
                }
                "$defs" | "definitions" => {
                    let Some(defs) = v.as_object() else {
                        self.reasons.push(format!("{here}: not an object"));
                        continue;
                    };
                    let mut converted = Map::new();
                    for (name, sub) in defs {
                        let child = format!("{here}/{}", escape(name));
                        converted.insert(name.clone(), self.node(sub, &child, depth + 1));
                    }
                    out.insert(k.clone(), Value::Object(converted));
                }
                "additionalProperties" => {
                    if v != &Value::Bool(false) {
                        self.reasons.push(format!(
                            "{here}: allows properties the schema does not list; strict mode allows none"
                        ));
                    }
                }
                k if ANNOTATIONS.contains(&k) => {}
                k if UNENFORCED_VALUE_CHECKS.contains(&k) => self.notes.push(format!(
                    "{here}: left out (strict mode is not given it; vak's schema stage does not enforce it either)"
                )),
                _ => self.reasons.push(format!(
                    "{here}: strict mode has no such keyword (the declaration would allow what the schema refuses)"
                )),
            }
        }
        let typed = ["type", "anyOf", "oneOf", "$ref", "enum", "const"]
            .iter()
            .any(|k| o.contains_key(*k));
        if !typed {
            self.reasons.push(format!(
                "{}: accepts any value; strict mode needs a type",
                at_or_root(at)
            ));
        }
        if types_of(o).is_some_and(|t| t.contains(&"object")) || o.contains_key("properties") {
            self.object(o, &mut out, at);
        }
        Value::Object(out)
    }

    /// An object node: every property required, none beside them.
    fn object(&mut self, o: &Map<String, Value>, out: &mut Map<String, Value>, at: &str) {
        if o.get("additionalProperties") != Some(&Value::Bool(false)) {
            if !o.contains_key("additionalProperties") {
                self.reasons.push(format!(
                    "{}: allows properties the schema does not list (no `additionalProperties: false`); strict mode allows none",
                    at_or_root(at)
                ));
            }
            return;
        }
        out.insert("additionalProperties".into(), Value::Bool(false));
        let props = o.get("properties").and_then(Value::as_object);
        let required: Vec<&str> = o
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut all = Vec::new();
        for (name, sub) in props.into_iter().flatten() {
            all.push(Value::String(name.clone()));
            if required.contains(&name.as_str()) {
                continue;
            }
            let here = format!("{at}/properties/{}", escape(name));
            let default_null = sub.get("default").is_none_or(Value::is_null);
            if !accepts_null(sub, self.root, 0, &mut self.budget) {
                self.reasons.push(format!(
                    "{here}: optional and not nullable (strict mode requires every property, and vak refuses a null here)"
                ));
            } else if !default_null {
                self.reasons.push(format!(
                    "{here}: optional with a default other than null (strict mode requires every property, and a null would not mean omitted)"
                ));
            } else {
                self.notes.push(format!(
                    "{here}: optional, so declared required: send null to omit it"
                ));
            }
        }
        // A required name the schema does not declare is refused by `additionalProperties:
        // false` whenever present, and required: no value passes. It stays in `required`.
        for r in &required {
            if props.is_none_or(|p| !p.contains_key(*r)) {
                all.push(Value::String((*r).to_string()));
            }
        }
        out.entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
        out.insert("required".into(), Value::Array(all));
    }
}

fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// The type names of a node's `type` keyword, if it has one.
fn types_of(o: &Map<String, Value>) -> Option<Vec<&str>> {
    match o.get("type")? {
        Value::String(t) => Some(vec![t.as_str()]),
        Value::Array(ts) => Some(ts.iter().filter_map(Value::as_str).collect()),
        _ => None,
    }
}

/// Whether `null` is valid against `s` (its `type`, `enum`, `const`, `$ref`, `anyOf`, `oneOf`,
/// `allOf`; the other assertions do not apply to null), read as JSON Schema reads it, so as the
/// schema stage and the tool's types both do.
/// Each node visited spends one of `budget`; with none left the answer is no (the caller then
/// declares the tool non-strict).
fn accepts_null(s: &Value, root: &Value, depth: usize, budget: &mut usize) -> bool {
    let o = match s {
        Value::Bool(b) => return *b,
        Value::Object(o) => o,
        _ => return false,
    };
    if depth > MAX_SCHEMA_DEPTH || *budget == 0 {
        return false;
    }
    *budget -= 1;
    if types_of(o).is_some_and(|t| !t.contains(&"null")) {
        return false;
    }
    if o.get("enum")
        .and_then(Value::as_array)
        .is_some_and(|e| !e.contains(&Value::Null))
    {
        return false;
    }
    if o.get("const").is_some_and(|c| !c.is_null()) {
        return false;
    }
    if let Some(r) = o.get("$ref").and_then(Value::as_str) {
        match r.strip_prefix('#').and_then(|p| root.pointer(p)) {
            Some(target) if !accepts_null(target, root, depth + 1, budget) => return false,
            None => return false,
            _ => {}
        }
    }
    let branches = |k: &str| o.get(k).and_then(Value::as_array);
    if let Some(b) = branches("anyOf")
        && !b.iter().any(|b| accepts_null(b, root, depth + 1, budget))
    {
        return false;
    }
    if let Some(b) = branches("oneOf")
        && b.iter()
            .filter(|b| accepts_null(b, root, depth + 1, budget))
            .count()
            != 1
    {
        return false;
    }
    if let Some(b) = branches("allOf")
        && !b.iter().all(|b| accepts_null(b, root, depth + 1, budget))
    {
        return false;
    }
    // `not` is not read: no is the answer that costs nothing but strictness (and strict mode
    // has no `not`, so the tool is declared non-strict anyway).
    !o.contains_key("not")
}

/// The admitted schema for Gemini's `parametersJsonSchema` (JSON Schema, where Gemini's older
/// `parameters` take an OpenAPI subset that cannot say `additionalProperties` or `$ref`):
/// `$schema` left out, `const` written as a one-member `enum` (Gemini documents `enum`, for
/// strings and numbers, and no `const`).
fn gemini_schema(s: &Value, at: &str, notes: &mut Vec<String>) -> Value {
    let mut walk = Gemini {
        root: s,
        notes,
        budget: MAX_STRICT_NODES,
    };
    walk.node(s, at, 0)
}

struct Gemini<'a> {
    root: &'a Value,
    notes: &'a mut Vec<String>,
    /// Subschema pairs left to compare, reading `oneOf`s' alternatives.
    budget: usize,
}

impl Gemini<'_> {
    fn node(&mut self, s: &Value, at: &str, depth: usize) -> Value {
        let Value::Object(o) = s else {
            return s.clone();
        };
        if depth > MAX_SCHEMA_DEPTH {
            self.notes.push(format!(
                "{}: nests deeper than {MAX_SCHEMA_DEPTH} levels; passed on as it is",
                at_or_root(at)
            ));
            return s.clone();
        }
        let mut out = Map::new();
        for (k, v) in o {
            let here = format!("{at}/{k}");
            match k.as_str() {
                "$schema" => {}
                "const" if v.is_string() || v.is_number() => {
                    out.insert("enum".into(), Value::Array(vec![v.clone()]));
                }
                "const" | "enum" => {
                    let members = if k == "const" {
                        std::slice::from_ref(v)
                    } else {
                        v.as_array().map(Vec::as_slice).unwrap_or_default()
                    };
                    if members.iter().any(|m| !(m.is_string() || m.is_number())) {
                        self.notes.push(format!(
                            "{here}: has members other than strings and numbers, which Gemini documents no support for"
                        ));
                    }
                    out.insert(k.clone(), v.clone());
                }
                // Keywords whose value is a schema, or a map or list of schemas.
                "items" | "additionalProperties" | "not" => {
                    out.insert(k.clone(), self.node(v, &here, depth + 1));
                }
                "properties" | "$defs" | "definitions" | "patternProperties" => {
                    let converted = v.as_object().map(|m| {
                        m.iter()
                            .map(|(n, sub)| {
                                let child = format!("{here}/{}", escape(n));
                                (n.clone(), self.node(sub, &child, depth + 1))
                            })
                            .collect::<Map<_, _>>()
                    });
                    out.insert(
                        k.clone(),
                        converted.map_or_else(|| v.clone(), Value::Object),
                    );
                }
                "anyOf" | "oneOf" | "allOf" | "prefixItems" => {
                    let converted = v.as_array().map(|bs| {
                        if k == "oneOf" && !exclusive(bs, self.root, &mut self.budget) {
                            self.notes.push(format!(
                                "{here}: alternatives that may overlap; Gemini reads oneOf as anyOf, so it may send a value that matches two, which vak's schema stage refuses"
                            ));
                        }
                        bs.iter()
                            .enumerate()
                            .map(|(i, b)| self.node(b, &format!("{here}/{i}"), depth + 1))
                            .collect::<Vec<_>>()
                    });
                    out.insert(k.clone(), converted.map_or_else(|| v.clone(), Value::Array));
                }
                _ => {
                    out.insert(k.clone(), v.clone());
                }
            }
        }
        Value::Object(out)
    }
}

#[cfg(test)]
mod tests;

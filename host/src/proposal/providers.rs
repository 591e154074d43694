//! Provider shapes of proposed tool calls, each turned into neutral [`Proposal`]s.
//!
//! Accepted documents (whole responses, one message, or just the list of calls):
//! - OpenAI Chat Completions: `choices[].message.tool_calls[]`, `function.arguments` a JSON *string*;
//! - OpenAI Responses: `output[]` items of type `function_call` (`call_id`, `name`, `arguments` string);
//! - Anthropic Messages: `content[]` blocks of type `tool_use` (`id`, `name`, `input` object);
//! - Gemini: `candidates[].content.parts[].functionCall` (`name`, `args` object, `id` optional);
//! - MCP: a `tools/call` request or its `params` (`name`, `arguments` object, optional).
//!
//! A defect of one call (no name, arguments of the wrong kind) does not sink the others: that
//! call becomes a proposal carrying its defect, refused at the proposal stage with its own record.

use super::{
    MAX_ARGUMENT_BYTES, MAX_ARGUMENT_DEPTH, Proposal, ProposalError, nesting_depth, new_call_id,
};
use serde_json::{Map, Value};

/// The provider families vak reads proposals from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    OpenAiChat,
    OpenAiResponses,
    Anthropic,
    Gemini,
    Mcp,
}

impl Provider {
    /// The name used in records and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Provider::OpenAiChat => "openai-chat",
            Provider::OpenAiResponses => "openai-responses",
            Provider::Anthropic => "anthropic",
            Provider::Gemini => "gemini",
            Provider::Mcp => "mcp",
        }
    }

    /// The provider by its name (`openai` means Chat Completions).
    pub fn from_name(name: &str) -> Option<Provider> {
        Some(match name {
            "openai" | "openai-chat" => Provider::OpenAiChat,
            "openai-responses" => Provider::OpenAiResponses,
            "anthropic" => Provider::Anthropic,
            "gemini" => Provider::Gemini,
            "mcp" => Provider::Mcp,
            _ => return None,
        })
    }
}

/// Why a proposal document as a whole could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DocumentError {
    #[error("the proposal document is {size} bytes; at most {limit} are accepted")]
    TooLarge { size: usize, limit: usize },
    #[error("the proposal document nests deeper than {limit} levels")]
    TooDeep { limit: usize },
    #[error("the proposal document is not JSON: {0}")]
    NotJson(String),
    #[error("no tool call of a known provider shape was found in the document ({0})")]
    UnknownShape(String),
}

/// Largest proposal document read, in bytes (several calls, each within their own limits).
pub const MAX_DOCUMENT_BYTES: usize = 8 * MAX_ARGUMENT_BYTES;
/// Nesting a provider's envelope adds around the arguments.
const ENVELOPE_DEPTH: usize = 8;

/// Read every proposed call in `text`. The shape is detected; `hint` forces one provider.
pub fn parse_document(text: &str, hint: Option<Provider>) -> Result<Vec<Proposal>, DocumentError> {
    if text.len() > MAX_DOCUMENT_BYTES {
        return Err(DocumentError::TooLarge {
            size: text.len(),
            limit: MAX_DOCUMENT_BYTES,
        });
    }
    if nesting_depth(text) > MAX_ARGUMENT_DEPTH + ENVELOPE_DEPTH {
        return Err(DocumentError::TooDeep {
            limit: MAX_ARGUMENT_DEPTH + ENVELOPE_DEPTH,
        });
    }
    let doc: Value =
        serde_json::from_str(text).map_err(|e| DocumentError::NotJson(e.to_string()))?;
    let providers = match hint {
        Some(p) => vec![p],
        None => vec![
            Provider::OpenAiChat,
            Provider::OpenAiResponses,
            Provider::Anthropic,
            Provider::Gemini,
            Provider::Mcp,
        ],
    };
    for provider in providers {
        let calls = find_calls(provider, &doc);
        if !calls.is_empty() {
            return Ok(calls.into_iter().map(|c| read_call(provider, c)).collect());
        }
    }
    Err(DocumentError::UnknownShape(match hint {
        Some(p) => format!("looked for {} calls", p.name()),
        None => "looked for OpenAI, Anthropic, Gemini and MCP calls".into(),
    }))
}

fn as_list(v: &Value) -> Vec<&Value> {
    match v {
        Value::Array(items) => items.iter().collect(),
        other => vec![other],
    }
}

/// The JSON objects in `doc` that are calls of `provider`.
fn find_calls(provider: Provider, doc: &Value) -> Vec<&Value> {
    match provider {
        Provider::OpenAiChat => {
            // response → choices[].message; message → tool_calls; or the tool_calls array itself
            let messages: Vec<&Value> = match doc.get("choices") {
                Some(choices) => as_list(choices)
                    .into_iter()
                    .filter_map(|c| c.get("message"))
                    .collect(),
                None => vec![doc],
            };
            let mut calls = Vec::new();
            for m in messages {
                match m.get("tool_calls") {
                    Some(tc) => calls.extend(as_list(tc)),
                    None => calls.extend(as_list(m).into_iter().filter(|c| {
                        c.get("function").is_some() && c.get("type").is_none_or(|t| t == "function")
                    })),
                }
            }
            calls
        }
        Provider::OpenAiResponses => {
            let items = doc.get("output").unwrap_or(doc);
            as_list(items)
                .into_iter()
                .filter(|i| i.get("type").and_then(Value::as_str) == Some("function_call"))
                .collect()
        }
        Provider::Anthropic => {
            let blocks = doc.get("content").unwrap_or(doc);
            as_list(blocks)
                .into_iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
                .collect()
        }
        Provider::Gemini => {
            let contents: Vec<&Value> = match doc.get("candidates") {
                Some(c) => as_list(c)
                    .into_iter()
                    .filter_map(|c| c.get("content"))
                    .collect(),
                None => vec![doc],
            };
            let mut calls = Vec::new();
            for content in contents {
                let parts = content.get("parts").unwrap_or(content);
                calls.extend(
                    as_list(parts)
                        .into_iter()
                        .filter_map(|p| p.get("functionCall")),
                );
            }
            calls
        }
        Provider::Mcp => {
            if doc.get("method").and_then(Value::as_str) == Some("tools/call") {
                doc.get("params").into_iter().collect()
            } else if doc.get("name").is_some()
                && doc.get("method").is_none()
                && doc.get("type").is_none()
            {
                vec![doc]
            } else {
                Vec::new()
            }
        }
    }
}

/// One call → one proposal (with its defect, if any).
fn read_call(provider: Provider, call: &Value) -> Proposal {
    let (id_field, name, args): (Option<&Value>, Option<&Value>, Option<&Value>) = match provider {
        Provider::OpenAiChat => {
            let f = call.get("function");
            (
                call.get("id"),
                f.and_then(|f| f.get("name")),
                f.and_then(|f| f.get("arguments")),
            )
        }
        Provider::OpenAiResponses => (
            call.get("call_id").or_else(|| call.get("id")),
            call.get("name"),
            call.get("arguments"),
        ),
        Provider::Anthropic => (call.get("id"), call.get("name"), call.get("input")),
        Provider::Gemini => (call.get("id"), call.get("name"), call.get("args")),
        Provider::Mcp => (None, call.get("name"), call.get("arguments")),
    };
    let provider_call_id = id_field
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty() && s.len() <= 256)
        .map(str::to_string);
    let tool = name.and_then(Value::as_str).unwrap_or("").to_string();
    let mut defect = None;
    if name.is_none() || tool.is_empty() {
        defect = Some(ProposalError::MissingToolName);
    }
    let arguments = match (provider, args) {
        // OpenAI sends the arguments as a JSON document inside a string.
        (Provider::OpenAiChat | Provider::OpenAiResponses, Some(Value::String(s))) => s.clone(),
        (Provider::OpenAiChat | Provider::OpenAiResponses, Some(other)) => {
            defect.get_or_insert(ProposalError::ArgumentsNotJsonText {
                found: super::json_type_name(other),
            });
            other.to_string()
        }
        // Gemini omits `args`, and MCP `arguments`, for a call without arguments.
        (Provider::Gemini | Provider::Mcp, None) => "{}".to_string(),
        (_, Some(v)) => v.to_string(),
        (_, None) => {
            defect.get_or_insert(ProposalError::MissingArguments);
            String::new()
        }
    };
    Proposal {
        call_id: new_call_id(),
        provider_call_id,
        tool,
        arguments,
        provider: provider.name().to_string(),
        defect,
        requirements: Vec::new(),
        renderer: crate::projection::RendererCaps::markdown(),
    }
}

/// Tool declarations for a provider, adapted from the admitted schema where the provider needs
/// it, with a note for everything that could not be expressed.
pub fn declaration(
    provider: Provider,
    name: &str,
    description: &str,
    schema: &Value,
) -> (Value, Vec<String>) {
    let mut notes = Vec::new();
    let decl = match provider {
        Provider::OpenAiChat => {
            let mut s = inline_refs(schema, schema, &mut notes, 0);
            strip_annotations(&mut s);
            openai_strict(&mut s, "", &mut notes);
            serde_json::json!({
                "type": "function",
                "function": { "name": name, "description": description, "parameters": s, "strict": true }
            })
        }
        Provider::OpenAiResponses => {
            let mut s = inline_refs(schema, schema, &mut notes, 0);
            strip_annotations(&mut s);
            openai_strict(&mut s, "", &mut notes);
            serde_json::json!({ "type": "function", "name": name, "description": description, "parameters": s, "strict": true })
        }
        Provider::Anthropic => {
            serde_json::json!({ "name": name, "description": description, "input_schema": schema })
        }
        Provider::Mcp => {
            serde_json::json!({ "name": name, "description": description, "inputSchema": schema })
        }
        Provider::Gemini => {
            let inlined = inline_refs(schema, schema, &mut notes, 0);
            let s = gemini_schema(&inlined, "", &mut notes);
            serde_json::json!({ "name": name, "description": description, "parameters": s })
        }
    };
    (decl, notes)
}

fn strip_annotations(s: &mut Value) {
    if let Value::Object(o) = s {
        o.remove("$schema");
        o.remove("title");
    }
}

/// `schema` with local `$ref`s replaced by their targets (recursion is cut off with a note).
fn inline_refs(node: &Value, root: &Value, notes: &mut Vec<String>, depth: usize) -> Value {
    match node {
        Value::Object(o) => {
            if let Some(r) = o.get("$ref").and_then(Value::as_str)
                && let Some(target) = r.strip_prefix('#').and_then(|p| root.pointer(p))
            {
                if depth > 16 {
                    notes.push(format!("recursive `$ref` {r} cut off after 16 levels"));
                    return Value::Object(Map::new());
                }
                let mut merged = inline_refs(target, root, notes, depth + 1);
                if let Value::Object(m) = &mut merged {
                    for (k, v) in o {
                        if k != "$ref" {
                            m.insert(k.clone(), inline_refs(v, root, notes, depth));
                        }
                    }
                }
                return merged;
            }
            Value::Object(
                o.iter()
                    .filter(|(k, _)| *k != "$defs" && *k != "definitions")
                    .map(|(k, v)| (k.clone(), inline_refs(v, root, notes, depth)))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(
            a.iter()
                .map(|v| inline_refs(v, root, notes, depth))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// OpenAI strict mode: every property required, optional ones nullable, no extra properties.
fn openai_strict(s: &mut Value, at: &str, notes: &mut Vec<String>) {
    let Value::Object(o) = s else { return };
    for unsupported in [
        "format", "minimum", "maximum", "pattern", "minItems", "maxItems", "default",
    ] {
        if o.remove(unsupported).is_some() && unsupported != "default" {
            notes.push(format!(
                "{at}/{unsupported}: dropped (not accepted in OpenAI strict mode)"
            ));
        }
    }
    if matches!(o.get("properties"), Some(Value::Object(_))) {
        let required: Vec<String> = match o.get("required") {
            Some(Value::Array(r)) => r
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
            _ => Vec::new(),
        };
        let Some(Value::Object(props)) = o.get_mut("properties") else {
            return;
        };
        let names: Vec<String> = props.keys().cloned().collect();
        for (name, sub) in props.iter_mut() {
            openai_strict(sub, &format!("{at}/properties/{name}"), notes);
            if !required.contains(name) {
                make_nullable(sub);
                notes.push(format!("{at}/properties/{name}: optional, so declared required and nullable (send null to omit)"));
            }
        }
        o.insert(
            "required".into(),
            Value::Array(names.into_iter().map(Value::String).collect()),
        );
        if o.get("additionalProperties")
            .is_some_and(|a| a != &Value::Bool(false))
        {
            notes.push(format!(
                "{at}/additionalProperties: set to false (strict mode allows no extra properties)"
            ));
        }
        o.insert("additionalProperties".into(), Value::Bool(false));
    } else if o.get("type").and_then(Value::as_str) == Some("object") {
        o.insert("properties".into(), Value::Object(Map::new()));
        o.insert("required".into(), Value::Array(Vec::new()));
        o.insert("additionalProperties".into(), Value::Bool(false));
    }
    if let Some(items) = o.get_mut("items") {
        openai_strict(items, &format!("{at}/items"), notes);
    }
}

fn make_nullable(s: &mut Value) {
    let Value::Object(o) = s else { return };
    match o.get("type").cloned() {
        Some(Value::String(t)) if t != "null" => {
            o.insert("type".into(), serde_json::json!([t, "null"]));
        }
        Some(Value::Array(mut ts)) if !ts.contains(&Value::from("null")) => {
            ts.push("null".into());
            o.insert("type".into(), Value::Array(ts));
        }
        _ => {}
    }
}

/// Gemini's OpenAPI-style schema subset: upper-case types, `nullable`, no `additionalProperties`,
/// no `const`.
fn gemini_schema(s: &Value, at: &str, notes: &mut Vec<String>) -> Value {
    let Value::Object(o) = s else {
        return Value::Object(Map::new());
    };
    let mut out = Map::new();
    for (k, v) in o {
        match k.as_str() {
            "type" => {
                let names: Vec<&str> = match v {
                    Value::String(t) => vec![t.as_str()],
                    Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
                    _ => Vec::new(),
                };
                let non_null: Vec<&str> = names.iter().copied().filter(|t| *t != "null").collect();
                if names.contains(&"null") {
                    out.insert("nullable".into(), Value::Bool(true));
                }
                match non_null.as_slice() {
                    [t] => {
                        out.insert("type".into(), Value::String(t.to_uppercase()));
                    }
                    _ => notes.push(format!("{at}/type: {v} cannot be expressed; left open")),
                }
            }
            "properties" => {
                if let Value::Object(props) = v {
                    let converted: Map<String, Value> = props
                        .iter()
                        .map(|(n, p)| {
                            (
                                n.clone(),
                                gemini_schema(p, &format!("{at}/properties/{n}"), notes),
                            )
                        })
                        .collect();
                    out.insert("properties".into(), Value::Object(converted));
                }
            }
            "items" => {
                out.insert(
                    "items".into(),
                    gemini_schema(v, &format!("{at}/items"), notes),
                );
            }
            "required" | "enum" | "description" => {
                out.insert(k.clone(), v.clone());
            }
            "const" => {
                out.insert("enum".into(), Value::Array(vec![v.clone()]));
            }
            "additionalProperties" => {
                if v == &Value::Bool(false) {
                    notes.push(format!("{at}/additionalProperties: not expressible for Gemini; still enforced by vak"));
                } else {
                    notes.push(format!(
                        "{at}/additionalProperties: not expressible for Gemini"
                    ));
                }
            }
            "$schema" | "title" | "default" | "$comment" => {}
            other => notes.push(format!("{at}/{other}: not expressible for Gemini; dropped")),
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn one(doc: Value, hint: Option<Provider>) -> Vec<Proposal> {
        parse_document(&doc.to_string(), hint).expect("parses")
    }

    #[test]
    fn each_provider_shape_becomes_neutral_proposals() {
        let chat = one(
            json!({"choices":[{"message":{"role":"assistant","tool_calls":[
            {"id":"call_a","type":"function","function":{"name":"clock","arguments":"{\"zone\":\"UTC\"}"}},
            {"id":"call_b","type":"function","function":{"name":"stats","arguments":"{\"values\":[1]}"}}]}}]}),
            None,
        );
        assert_eq!(chat.len(), 2);
        assert_eq!(
            (
                chat[0].provider_call_id.as_deref(),
                chat[0].tool.as_str(),
                chat[0].arguments.as_str()
            ),
            (Some("call_a"), "clock", r#"{"zone":"UTC"}"#)
        );
        // The record's key is vak's own, unique even where a model repeats its ids.
        assert!(chat[0].call_id.starts_with("call_") && chat[0].call_id != "call_a");
        assert_ne!(chat[0].call_id, chat[1].call_id);
        assert_eq!(chat[0].provider, "openai-chat");

        let responses = one(
            json!({"output":[{"type":"message","content":[]},
            {"type":"function_call","call_id":"fc_1","name":"clock","arguments":"{\"zone\":\"UTC\"}"}]}),
            None,
        );
        assert_eq!(
            (
                responses.len(),
                responses[0].provider_call_id.as_deref(),
                responses[0].provider.as_str()
            ),
            (1, Some("fc_1"), "openai-responses")
        );

        let anthropic = one(
            json!({"content":[{"type":"text","text":"Let me check."},
            {"type":"tool_use","id":"toolu_1","name":"clock","input":{"zone":"UTC"}}]}),
            None,
        );
        assert_eq!(
            (
                anthropic[0].provider_call_id.as_deref(),
                anthropic[0].arguments.as_str()
            ),
            (Some("toolu_1"), r#"{"zone":"UTC"}"#)
        );

        let gemini = one(
            json!({"candidates":[{"content":{"role":"model","parts":[
            {"functionCall":{"name":"clock","args":{"zone":"UTC"}}}]}}]}),
            None,
        );
        assert!(gemini[0].call_id.starts_with("call_"), "an id is minted");
        assert_eq!(gemini[0].provider_call_id, None, "Gemini sent none");
        assert_eq!(gemini[0].provider, "gemini");

        let mcp = one(
            json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"clock","arguments":{"zone":"UTC"}}}),
            None,
        );
        assert_eq!(
            (mcp[0].tool.as_str(), mcp[0].provider.as_str()),
            ("clock", "mcp")
        );
    }

    #[test]
    fn defects_stay_with_their_call() {
        let calls = one(
            json!({"tool_calls":[
            {"id":"ok","type":"function","function":{"name":"clock","arguments":"{}"}},
            {"id":"obj","type":"function","function":{"name":"clock","arguments":{"zone":"UTC"}}},
            {"id":"noname","type":"function","function":{"arguments":"{}"}}]}),
            Some(Provider::OpenAiChat),
        );
        assert_eq!(calls[0].defect, None);
        assert_eq!(
            calls[1].defect,
            Some(ProposalError::ArgumentsNotJsonText { found: "an object" })
        );
        assert_eq!(calls[2].defect, Some(ProposalError::MissingToolName));
        let anthropic = one(json!({"type":"tool_use","id":"t","name":"clock"}), None);
        assert_eq!(anthropic[0].defect, Some(ProposalError::MissingArguments));
    }

    #[test]
    fn documents_that_are_not_proposals_are_errors() {
        assert!(matches!(
            parse_document("{", None),
            Err(DocumentError::NotJson(_))
        ));
        assert!(matches!(
            parse_document(r#"{"hello":1}"#, None),
            Err(DocumentError::UnknownShape(_))
        ));
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert!(matches!(
            parse_document(&deep, None),
            Err(DocumentError::TooDeep { .. })
        ));
    }

    #[test]
    fn openai_strict_declarations_make_optional_properties_nullable() {
        let schema = json!({"$schema":"x","title":"Args","type":"object",
            "properties":{"values":{"type":"array","items":{"type":"number","format":"double"}},"unit":{"type":["string","null"]},"n":{"type":"integer"}},
            "required":["values"]});
        let (decl, notes) = declaration(Provider::OpenAiChat, "stats", "d", &schema);
        let p = &decl["function"]["parameters"];
        assert_eq!(p["required"], json!(["values", "unit", "n"]));
        assert_eq!(p["additionalProperties"], false);
        assert_eq!(p["properties"]["n"]["type"], json!(["integer", "null"]));
        assert!(p.get("$schema").is_none());
        assert!(
            notes.iter().any(|n| n.contains("/properties/n")),
            "{notes:?}"
        );
        assert!(notes.iter().any(|n| n.contains("format")), "{notes:?}");

        let (g, notes) = declaration(Provider::Gemini, "stats", "d", &schema);
        assert_eq!(g["parameters"]["type"], "OBJECT");
        assert_eq!(
            g["parameters"]["properties"]["unit"],
            json!({"nullable": true, "type": "STRING"})
        );
        assert!(notes.iter().any(|n| n.contains("format")), "{notes:?}");
    }
}

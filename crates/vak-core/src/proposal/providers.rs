//! Provider shapes of proposed tool calls, each turned into neutral [`Proposal`]s, and the tool
//! declarations handed to each provider ([`declaration`]).
//!
//! Accepted documents (whole responses, one message, or just the list of calls), as each
//! provider's API answers and as its official SDK dumps them (`model_dump_json()`,
//! `to_json_dict()`: a `null` for every unset field, snake_case names):
//! - OpenAI Chat Completions: `choices[].message.tool_calls[]`, `function.arguments` a JSON *string*
//!   (`"tool_calls": null` is an answer with no call; the legacy `message.function_call` is one call);
//! - OpenAI Responses: `output[]` items of type `function_call` (`call_id`, `name`, `arguments` string);
//! - Anthropic Messages: `content[]` blocks of type `tool_use` (`id`, `name`, `input` object);
//! - Gemini: `candidates[].content.parts[].functionCall` (`name`, `args` object, `id` optional),
//!   also spelt `function_call` (the google-genai SDK's dumps);
//! - MCP: a `tools/call` request or its `params` (`name`, `arguments` object, optional).
//!
//! A provider's answer with no call in it (text only: `tool_calls` null or absent, no
//! `function_call` item, no `tool_use` block, no `functionCall` part) is read as zero proposals,
//! not as an error. A defect of one call (no name, arguments of the wrong kind) does not sink the
//! others: that call becomes a proposal carrying its defect, refused at the proposal stage with
//! its own record.

use super::{
    MAX_ARGUMENT_BYTES, MAX_ARGUMENT_DEPTH, Proposal, ProposalError, nesting_depth, new_call_id,
};
use serde_json::Value;

pub use super::declarations::{Declaration, declaration, request_tools};

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
    /// Every provider, in the order a document's shape is looked for.
    pub const ALL: [Provider; 5] = [
        Provider::OpenAiChat,
        Provider::OpenAiResponses,
        Provider::Anthropic,
        Provider::Gemini,
        Provider::Mcp,
    ];

    /// The names `vak tools --for` and `vak call --provider` accept: each provider's own name,
    /// and `openai` for Chat Completions.
    pub const NAMES: [&'static str; 6] = [
        "openai-chat",
        "openai-responses",
        "anthropic",
        "gemini",
        "mcp",
        "openai",
    ];

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
///
/// An empty list is a provider's answer that proposes no call (a text-only answer): nothing is
/// to be run, and nothing was refused.
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
        None => Provider::ALL.to_vec(),
    };
    for &provider in &providers {
        let calls = find_calls(provider, &doc);
        if !calls.is_empty() {
            return Ok(calls.into_iter().map(|c| read_call(provider, c)).collect());
        }
    }
    if providers.iter().any(|&p| answers_without_calls(p, &doc)) {
        return Ok(Vec::new());
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

/// The field `key` of `v`, unless absent or `null` (SDK dumps write `null` for unset fields).
fn field<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.get(key).filter(|f| !f.is_null())
}

/// The JSON objects in `doc` that are calls of `provider`.
fn find_calls(provider: Provider, doc: &Value) -> Vec<&Value> {
    match provider {
        Provider::OpenAiChat => {
            // response → choices[].message; message → tool_calls; or the tool_calls array itself
            let messages: Vec<&Value> = match field(doc, "choices") {
                Some(choices) => as_list(choices)
                    .into_iter()
                    .filter_map(|c| field(c, "message"))
                    .collect(),
                None => vec![doc],
            };
            let mut calls = Vec::new();
            for m in messages {
                if let Some(tc) = field(m, "tool_calls") {
                    calls.extend(as_list(tc));
                } else if field(m, "function_call").is_some() {
                    // The legacy functions API: the message itself is the one call.
                    calls.push(m);
                } else if m.get("tool_calls").is_none() {
                    calls.extend(as_list(m).into_iter().filter(|c| {
                        field(c, "function").is_some()
                            && c.get("type").is_none_or(|t| t == "function")
                    }));
                }
            }
            calls
        }
        Provider::OpenAiResponses => {
            let items = field(doc, "output").unwrap_or(doc);
            as_list(items)
                .into_iter()
                .filter(|i| i.get("type").and_then(Value::as_str) == Some("function_call"))
                .collect()
        }
        Provider::Anthropic => {
            let blocks = field(doc, "content").unwrap_or(doc);
            as_list(blocks)
                .into_iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
                .collect()
        }
        Provider::Gemini => {
            let contents: Vec<&Value> = match field(doc, "candidates") {
                Some(c) => as_list(c)
                    .into_iter()
                    .filter_map(|c| field(c, "content"))
                    .collect(),
                None => vec![doc],
            };
            let mut calls = Vec::new();
            for content in contents {
                let parts = field(content, "parts").unwrap_or(content);
                calls.extend(as_list(parts).into_iter().filter_map(|p| {
                    // The REST API's camelCase, or the google-genai SDK's snake_case dump.
                    field(p, "functionCall").or_else(|| field(p, "function_call"))
                }));
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

/// Whether `doc` is an answer of `provider` (a whole response or one message) that proposes no
/// call: its envelope is there, with text (or nothing) where calls would be.
fn answers_without_calls(provider: Provider, doc: &Value) -> bool {
    let objects = |v: Option<&Value>| {
        v.and_then(Value::as_array)
            .is_some_and(|items| items.iter().all(Value::is_object))
    };
    let assistant = doc.get("role").and_then(Value::as_str) == Some("assistant");
    match provider {
        // A completion (`choices[].message`), or an assistant message with no `tool_calls`.
        Provider::OpenAiChat => {
            doc.get("choices")
                .and_then(Value::as_array)
                .is_some_and(|cs| {
                    cs.iter()
                        .all(|c| c.get("message").is_some_and(Value::is_object))
                })
                || (assistant
                    && doc
                        .get("content")
                        .is_none_or(|c| c.is_string() || c.is_null())
                    && doc
                        .get("tool_calls")
                        .is_none_or(|t| t.is_null() || t == &Value::Array(Vec::new())))
        }
        Provider::OpenAiResponses => {
            doc.get("object").and_then(Value::as_str) == Some("response")
                && objects(doc.get("output"))
        }
        Provider::Anthropic => {
            (doc.get("type").and_then(Value::as_str) == Some("message") || assistant)
                && objects(doc.get("content"))
        }
        // A response whose candidates have text parts only, or none (a blocked prompt).
        Provider::Gemini => objects(doc.get("candidates")),
        Provider::Mcp => false,
    }
}

/// One call → one proposal (with its defect, if any).
fn read_call(provider: Provider, call: &Value) -> Proposal {
    let (id_field, name, args): (Option<&Value>, Option<&Value>, Option<&Value>) = match provider {
        Provider::OpenAiChat => {
            let f = field(call, "function").or_else(|| field(call, "function_call"));
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
        round: None,
    }
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
}

//! Provider proposal → one neutral call. A proposal is not an execution request until every
//! later stage has passed; here it only has to be a well-formed call of a known tool.

pub mod declarations;
mod overlap;
pub mod providers;
pub mod strict;

use crate::stage::{Stage, StageError};
use serde_json::json;

/// Largest argument document accepted, in bytes.
pub const MAX_ARGUMENT_BYTES: usize = 1 << 20;
/// Deepest nesting of arrays and objects accepted in arguments.
pub const MAX_ARGUMENT_DEPTH: usize = 64;

/// One proposed call, provider-neutral.
#[derive(Debug, Clone, PartialEq)]
pub struct Proposal {
    /// vak's own id of the call: unique, whatever the provider sent.
    pub call_id: String,
    /// The provider's id of the tool call (`call_abc`, `toolu_…`), as the model sent it: kept in
    /// the record to answer the provider with, never used as a key (a model chooses it, so it
    /// can repeat or collide).
    pub provider_call_id: Option<String>,
    /// The tool the model named.
    pub tool: String,
    /// The arguments exactly as proposed (JSON text).
    pub arguments: String,
    /// Where the proposal came from (`cli`, `api`, a provider name).
    pub provider: String,
    /// What was wrong with the call as the provider sent it; such a call is refused at the
    /// proposal stage, with its own record.
    pub defect: Option<ProposalError>,
    /// What the caller requires of the result (evaluated at the outcome stage).
    pub requirements: Vec<crate::outcome::Requirement>,
    /// What the caller's renderer can show (used at the projection stage).
    pub renderer: crate::projection::RendererCaps,
    /// Which round of a call answered over several rounds this is (kept in the record).
    pub round: Option<crate::record::Round>,
}

impl Proposal {
    /// A proposal from the embedder's API, with a fresh call id.
    pub fn new(tool: impl Into<String>, arguments: impl Into<String>) -> Proposal {
        Proposal {
            call_id: new_call_id(),
            provider_call_id: None,
            tool: tool.into(),
            arguments: arguments.into(),
            provider: "api".into(),
            defect: None,
            requirements: Vec::new(),
            renderer: crate::projection::RendererCaps::markdown(),
            round: None,
        }
    }

    /// The same proposal, with a requirement on its result.
    pub fn require(mut self, requirement: crate::outcome::Requirement) -> Proposal {
        self.requirements.push(requirement);
        self
    }

    /// The same proposal, projected for `renderer`.
    pub fn render_for(mut self, renderer: crate::projection::RendererCaps) -> Proposal {
        self.renderer = renderer;
        self
    }

    /// The same proposal, marked as coming from `provider`.
    pub fn from_provider(mut self, provider: impl Into<String>) -> Proposal {
        self.provider = provider.into();
        self
    }
}

/// A fresh, time-ordered call id.
pub fn new_call_id() -> String {
    format!("call_{}", uuid::Uuid::now_v7().simple())
}

/// Why a proposal is not a well-formed call.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProposalError {
    #[error("the proposal names no tool")]
    MissingToolName,
    #[error("the call carries no arguments")]
    MissingArguments,
    #[error("the arguments must be JSON text (a string), not {found}")]
    ArgumentsNotJsonText { found: &'static str },
    #[error("no admitted tool is named `{name}`")]
    UnknownTool { name: String },
    /// A component of that name was loaded but refused at admission: its refusal, not a
    /// mystery.
    #[error("tool `{name}` was refused at admission [{admission_kind}]: {reason}")]
    NotAdmitted {
        name: String,
        admission_kind: String,
        reason: String,
    },
    #[error("the arguments are {size} bytes; at most {limit} are accepted")]
    ArgumentsTooLarge { size: usize, limit: usize },
    #[error("the arguments are not valid JSON: {reason}")]
    ArgumentsNotJson { reason: String },
    #[error("the arguments nest deeper than {limit} levels")]
    ArgumentsTooDeep { limit: usize },
    #[error("the arguments must be a JSON object, not {found}")]
    ArgumentsNotObject { found: &'static str },
    /// The state of an earlier round (MCP `requestState`) that came with the request is not one
    /// this host issued for this call: tampered with, expired, or for another tool, principal,
    /// grant or arguments.
    #[error("the request state is refused: {reason}")]
    RequestStateRefused { reason: String },
    /// The state of an earlier round came back after it had been answered once: a state is
    /// single-use, so the round it opened is not run twice.
    #[error("the request state was already used: {reason}")]
    RequestStateReplayed { reason: String },
}

impl StageError for ProposalError {
    fn stage(&self) -> Stage {
        Stage::Proposal
    }

    fn kind(&self) -> &'static str {
        match self {
            ProposalError::MissingToolName => "missing_tool_name",
            ProposalError::UnknownTool { .. } => "unknown_tool",
            ProposalError::NotAdmitted { .. } => "tool_not_admitted",
            ProposalError::MissingArguments => "missing_arguments",
            ProposalError::ArgumentsNotJsonText { .. } => "arguments_not_json_text",
            ProposalError::ArgumentsTooLarge { .. } => "arguments_too_large",
            ProposalError::ArgumentsNotJson { .. } => "arguments_not_json",
            ProposalError::ArgumentsTooDeep { .. } => "arguments_too_deep",
            ProposalError::ArgumentsNotObject { .. } => "arguments_not_object",
            ProposalError::RequestStateRefused { .. } => "request_state_refused",
            ProposalError::RequestStateReplayed { .. } => "state_replayed",
        }
    }

    fn details(&self) -> serde_json::Value {
        match self {
            ProposalError::ArgumentsTooLarge { size, limit } => {
                json!({"size": size, "limit": limit})
            }
            ProposalError::ArgumentsTooDeep { limit } => json!({"limit": limit}),
            ProposalError::NotAdmitted {
                admission_kind,
                reason,
                ..
            } => json!({"admission_kind": admission_kind, "reason": reason}),
            _ => serde_json::Value::Null,
        }
    }
}

pub use crate::schema::json_type_name;

/// Parse the argument text into a JSON object, within the size and depth bounds. The depth is
/// checked on the text before parsing, so a hostile document never reaches the parser's stack.
pub fn parse_arguments(
    text: &str,
) -> Result<serde_json::Map<String, serde_json::Value>, ProposalError> {
    if text.len() > MAX_ARGUMENT_BYTES {
        return Err(ProposalError::ArgumentsTooLarge {
            size: text.len(),
            limit: MAX_ARGUMENT_BYTES,
        });
    }
    if nesting_depth(text) > MAX_ARGUMENT_DEPTH {
        return Err(ProposalError::ArgumentsTooDeep {
            limit: MAX_ARGUMENT_DEPTH,
        });
    }
    // Duplicate keys are refused: the host must validate the very value the tool will read.
    let value = strict::parse(text).map_err(|e| ProposalError::ArgumentsNotJson {
        reason: e.to_string(),
    })?;
    match value {
        serde_json::Value::Object(map) => Ok(map),
        other => Err(ProposalError::ArgumentsNotObject {
            found: json_type_name(&other),
        }),
    }
}

/// The deepest nesting of `[` / `{` outside strings (an upper bound for malformed text).
pub fn nesting_depth(text: &str) -> usize {
    let (mut depth, mut max, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for b in text.bytes() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_must_be_a_bounded_json_object() {
        assert!(parse_arguments(r#"{"zone":"Europe/Paris"}"#).is_ok());
        assert_eq!(
            parse_arguments("[1]").unwrap_err(),
            ProposalError::ArgumentsNotObject { found: "an array" }
        );
        assert!(matches!(
            parse_arguments("{\"a\":").unwrap_err(),
            ProposalError::ArgumentsNotJson { .. }
        ));
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        assert_eq!(
            parse_arguments(&deep).unwrap_err(),
            ProposalError::ArgumentsTooDeep {
                limit: MAX_ARGUMENT_DEPTH
            }
        );
        // Brackets inside strings do not count.
        assert!(parse_arguments(&format!("{{\"s\":\"{}\"}}", "[".repeat(500))).is_ok());
    }
}

//! Typed result and evidence: the component's own return, kept as returned, measured against the
//! result-size limit, with its digest in the record. The host never rewrites it.

use crate::dispatch::bindings::vak::tool::types as wit;
use crate::record::{EvidenceRecord, ToolErrorRecord, ToolResultRecord};
use crate::stage::{Stage, StageError};
use serde_json::json;

/// Why the result stage did not accept the tool's return.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ResultError {
    #[error("the tool returned its own error `{code}`: {message}")]
    ToolError { code: String, message: String },
    #[error("the result is {actual} bytes; the call's limit is {limit}")]
    TooLarge { limit: u64, actual: u64 },
    #[error("the payload claims schema `{schema}` but is not JSON: {reason}")]
    PayloadNotJson { schema: String, reason: String },
}

impl StageError for ResultError {
    fn stage(&self) -> Stage {
        Stage::Result
    }

    fn kind(&self) -> &'static str {
        match self {
            ResultError::ToolError { .. } => "tool_error",
            ResultError::TooLarge { .. } => "result_too_large",
            ResultError::PayloadNotJson { .. } => "payload_not_json",
        }
    }

    fn details(&self) -> serde_json::Value {
        match self {
            ResultError::ToolError { code, .. } => json!({ "code": code }),
            ResultError::TooLarge { limit, actual } => json!({ "limit": limit, "actual": actual }),
            ResultError::PayloadNotJson { .. } => serde_json::Value::Null,
        }
    }
}

fn kind_name(kind: wit::EvidenceKind) -> &'static str {
    match kind {
        wit::EvidenceKind::Observed => "observed",
        wit::EvidenceKind::Cited => "cited",
        wit::EvidenceKind::Computed => "computed",
        wit::EvidenceKind::Synthesized => "synthesized",
    }
}

/// The size the result-size limit counts: every string the tool returned.
pub fn result_size(r: &wit::ToolResult) -> u64 {
    let payload = r
        .payload
        .as_ref()
        .map_or(0, |p| p.schema.len() + p.json.len());
    let evidence: usize = r
        .evidence
        .iter()
        .map(|e| {
            e.id.len()
                + e.supports.iter().map(String::len).sum::<usize>()
                + e.receipt.as_ref().map_or(0, String::len)
                + e.digest.as_ref().map_or(0, String::len)
                + e.derived_from.iter().map(String::len).sum::<usize>()
                + e.note.len()
        })
        .sum();
    (payload + r.markdown.len() + evidence) as u64
}

/// Keep the result as returned, once it is within `limit` bytes and its payload is JSON.
pub fn collect(r: wit::ToolResult, limit: u64) -> Result<ToolResultRecord, ResultError> {
    let actual = result_size(&r);
    if actual > limit {
        return Err(ResultError::TooLarge { limit, actual });
    }
    if let Some(p) = &r.payload
        && let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(&p.json)
    {
        return Err(ResultError::PayloadNotJson {
            schema: p.schema.clone(),
            reason: e.to_string(),
        });
    }
    let evidence = r
        .evidence
        .into_iter()
        .map(|e| EvidenceRecord {
            id: e.id,
            kind: kind_name(e.kind).to_string(),
            supports: e.supports,
            receipt: e.receipt,
            digest: e.digest,
            derived_from: e.derived_from,
            note: e.note,
        })
        .collect();
    let (payload_schema, payload_json) = match r.payload {
        Some(p) => (Some(p.schema), Some(p.json)),
        None => (None, None),
    };
    let mut record = ToolResultRecord {
        digest: String::new(),
        payload_schema,
        payload_json,
        markdown: r.markdown,
        evidence,
    };
    // The digest covers the record's fields in declaration order, serialized as JSON with the
    // digest field empty: anyone holding the record can recompute it.
    record.digest = crate::digest::sha256_hex(
        serde_json::to_string(&record)
            .unwrap_or_default()
            .as_bytes(),
    );
    Ok(record)
}

/// The tool's own error value, kept as returned.
pub fn tool_error(e: wit::ToolError) -> (ToolErrorRecord, ResultError) {
    (
        ToolErrorRecord {
            code: e.code.clone(),
            message: e.message.clone(),
        },
        ResultError::ToolError {
            code: e.code,
            message: e.message,
        },
    )
}

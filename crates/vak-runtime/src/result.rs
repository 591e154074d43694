//! Typed result and evidence: the component's own return, kept as returned, measured against the
//! result-size limit, with its digest in the record. The host never rewrites it.

use crate::bindings::vak::tool::types as wit;
use crate::record::{AttachmentRecord, EvidenceRecord, ToolErrorRecord, ToolResultRecord};
use crate::stage::{Stage, StageError};
use serde_json::json;

/// Why the result stage did not accept the tool's return.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ResultError {
    /// The message itself is kept once, in the record's `tool_error`.
    #[error("the tool returned its own error `{code}` (its message is in `tool_error`)")]
    ToolError { code: String },
    #[error("the result is {actual} bytes; the call's limit is {limit}")]
    TooLarge { limit: u64, actual: u64 },
    /// A foreign function's return whose JSON passes the cap: converting it stopped there.
    #[error(
        "the result's JSON passes the call's limit of {limit} bytes (converting it stopped there)"
    )]
    ValueTooLarge { limit: u64 },
    /// A foreign function's return that has no JSON form.
    #[error("the function's return has no JSON form: {reason}")]
    Unconvertible { reason: String },
    #[error("the payload claims schema `{schema}` but is not JSON: {reason}")]
    PayloadNotJson { schema: String, reason: String },
    #[error("the payload nests arrays and objects {depth} deep; at most {limit} are accepted")]
    PayloadTooDeep { limit: usize, depth: usize },
    #[error("attachment {index} is refused: {reason}")]
    BadAttachment { index: usize, reason: String },
}

/// Most attachments in one result.
pub const MAX_ATTACHMENTS: usize = 16;

/// Deepest nesting of arrays and objects in a payload: the bound the proposal stage puts on
/// arguments, so that every later stage can parse what this one passed.
pub const MAX_PAYLOAD_DEPTH: usize = crate::proposal::MAX_ARGUMENT_DEPTH;

/// Bytes of a tool error's `code` kept in the record (a code is a short name).
pub const MAX_TOOL_ERROR_CODE_BYTES: usize = 128;

/// Bytes of a tool error's `message` kept in the record; past it the message is cut, with a
/// note, and the record keeps the whole message's size and SHA-256.
pub const MAX_TOOL_ERROR_MESSAGE_BYTES: usize = 16 << 10;

impl StageError for ResultError {
    fn stage(&self) -> Stage {
        Stage::Result
    }

    fn kind(&self) -> &'static str {
        match self {
            ResultError::ToolError { .. } => "tool_error",
            ResultError::TooLarge { .. } | ResultError::ValueTooLarge { .. } => "result_too_large",
            ResultError::Unconvertible { .. } => "result_unconvertible",
            ResultError::PayloadNotJson { .. } => "payload_not_json",
            ResultError::PayloadTooDeep { .. } => "payload_too_deep",
            ResultError::BadAttachment { .. } => "bad_attachment",
        }
    }

    fn details(&self) -> serde_json::Value {
        match self {
            ResultError::ToolError { code } => json!({ "code": code }),
            ResultError::TooLarge { limit, actual } => json!({ "limit": limit, "actual": actual }),
            ResultError::ValueTooLarge { limit } => json!({ "limit": limit }),
            ResultError::PayloadNotJson { .. } | ResultError::Unconvertible { .. } => {
                serde_json::Value::Null
            }
            ResultError::PayloadTooDeep { limit, depth } => {
                json!({ "limit": limit, "depth": depth })
            }
            ResultError::BadAttachment { index, .. } => json!({ "index": index }),
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
    let attachments: usize = r
        .attachments
        .iter()
        .map(|a| {
            a.mime_type.len()
                + a.uri.as_ref().map_or(0, String::len)
                + match &a.body {
                    wit::AttachmentBody::Text(t) => t.len(),
                    wit::AttachmentBody::Bytes(b) => b.len(),
                }
        })
        .sum();
    (payload + r.markdown.len() + evidence + attachments) as u64
}

/// Whether `mime` has the shape `type/subtype` of RFC 6838 names (no parameters).
fn well_formed_mime(mime: &str) -> bool {
    let restricted = |s: &str| {
        !s.is_empty()
            && s.len() <= 127
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
    };
    mime.split_once('/')
        .is_some_and(|(t, s)| restricted(t) && restricted(s))
}

/// Check one attachment and keep it with its digest.
fn attachment(index: usize, a: wit::Attachment) -> Result<AttachmentRecord, ResultError> {
    let bad = |reason: String| ResultError::BadAttachment { index, reason };
    if !well_formed_mime(&a.mime_type) {
        return Err(bad(format!("{:?} is not a media type", a.mime_type)));
    }
    let (kind, prefix) = match a.kind {
        wit::AttachmentKind::Image => ("image", Some("image/")),
        wit::AttachmentKind::Audio => ("audio", Some("audio/")),
        wit::AttachmentKind::Resource => ("resource", None),
    };
    if let Some(prefix) = prefix {
        if !a.mime_type.to_ascii_lowercase().starts_with(prefix) {
            return Err(bad(format!(
                "an {kind} needs an `{prefix}*` media type, not {:?}",
                a.mime_type
            )));
        }
        if a.uri.is_some() {
            return Err(bad(format!(
                "an {kind} has no URI; send a resource instead"
            )));
        }
        if matches!(a.body, wit::AttachmentBody::Text(_)) {
            return Err(bad(format!("an {kind} carries bytes, not text")));
        }
    } else {
        let uri = a
            .uri
            .as_deref()
            .ok_or_else(|| bad("a resource needs a URI".into()))?;
        if url::Url::parse(uri).is_err() {
            return Err(bad(format!("{uri:?} is not an absolute URI")));
        }
    }
    let (text, base64, bytes) = match a.body {
        wit::AttachmentBody::Text(t) => {
            let n = t.len();
            let digest = crate::digest::sha256_hex(t.as_bytes());
            (Some(t), None, (n, digest))
        }
        wit::AttachmentBody::Bytes(b) => {
            use base64::Engine as _;
            let digest = crate::digest::sha256_hex(&b);
            (
                None,
                Some(base64::engine::general_purpose::STANDARD.encode(&b)),
                (b.len(), digest),
            )
        }
    };
    Ok(AttachmentRecord {
        kind: kind.to_string(),
        mime_type: a.mime_type,
        uri: a.uri,
        text,
        base64,
        size: bytes.0 as u64,
        sha256: bytes.1,
    })
}

/// A result kept as returned, and its payload parsed (for the stages after `result`).
#[derive(Debug)]
pub struct Collected {
    pub record: ToolResultRecord,
    /// The payload as JSON; none without a payload, or when it is JSON that has no
    /// `serde_json::Value` (a number past `f64`): such a payload is kept, as a document.
    pub payload: Option<serde_json::Value>,
}

/// Keep the result as returned, once it is within `limit` bytes and its payload is JSON.
pub fn collect(r: wit::ToolResult, limit: u64) -> Result<Collected, ResultError> {
    let actual = result_size(&r);
    if actual > limit {
        return Err(ResultError::TooLarge { limit, actual });
    }
    if let Some(p) = &r.payload {
        // One linear scan bounds the depth before any parser recurses into it.
        let depth = crate::proposal::nesting_depth(&p.json);
        if depth > MAX_PAYLOAD_DEPTH {
            return Err(ResultError::PayloadTooDeep {
                limit: MAX_PAYLOAD_DEPTH,
                depth,
            });
        }
    }
    let payload = match &r.payload {
        None => None,
        Some(p) => match serde_json::from_str::<serde_json::Value>(&p.json) {
            Ok(v) => Some(v),
            // Not every JSON text has a `Value` (1e400): whether it is JSON at all decides.
            Err(_) => match serde_json::from_str::<serde::de::IgnoredAny>(&p.json) {
                Ok(_) => None,
                Err(e) => {
                    return Err(ResultError::PayloadNotJson {
                        schema: p.schema.clone(),
                        reason: e.to_string(),
                    });
                }
            },
        },
    };
    if r.attachments.len() > MAX_ATTACHMENTS {
        return Err(ResultError::BadAttachment {
            index: MAX_ATTACHMENTS,
            reason: format!("a result carries at most {MAX_ATTACHMENTS} attachments"),
        });
    }
    let attachments = r
        .attachments
        .into_iter()
        .enumerate()
        .map(|(i, a)| attachment(i, a))
        .collect::<Result<Vec<_>, _>>()?;
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
        attachments,
    };
    // The digest covers the record's fields in declaration order, serialized as JSON with the
    // digest field empty: anyone holding the record can recompute it.
    record.digest = crate::digest::sha256_hex(
        serde_json::to_string(&record)
            .unwrap_or_default()
            .as_bytes(),
    );
    Ok(Collected { record, payload })
}

/// The tool's own error value, kept as returned up to its caps ([`MAX_TOOL_ERROR_CODE_BYTES`],
/// and `MAX_TOOL_ERROR_MESSAGE_BYTES` once `cut_to_cap` ran): a message
/// over its cap keeps its size and digest here.
pub fn tool_error(e: wit::ToolError) -> (ToolErrorRecord, ResultError) {
    let code = cut(&e.code, MAX_TOOL_ERROR_CODE_BYTES).0.to_string();
    let over = e.message.len() > MAX_TOOL_ERROR_MESSAGE_BYTES;
    let record = ToolErrorRecord {
        code: code.clone(),
        message_bytes: over.then_some(e.message.len() as u64),
        message_sha256: over.then(|| crate::digest::sha256_hex(e.message.as_bytes())),
        message: e.message,
    };
    (record, ResultError::ToolError { code })
}

/// `text` cut to at most `max` bytes at a character boundary, and whether it was cut.
pub(crate) fn cut(text: &str, max: usize) -> (&str, bool) {
    if text.len() <= max {
        return (text, false);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (&text[..end], true)
}

/// Cut a tool error's message to [`MAX_TOOL_ERROR_MESSAGE_BYTES`] (after the scrubber read all
/// of it, so that no secret survives as a prefix cut short), with a note saying how much was cut.
pub(crate) fn cut_to_cap(error: &mut ToolErrorRecord) {
    let note = |n: usize| format!("… [cut: {n} more bytes; see message_bytes and message_sha256]");
    // The note fits in what is left of the cap: under 96 bytes.
    let (kept, was_cut) = cut(&error.message, MAX_TOOL_ERROR_MESSAGE_BYTES - 96);
    if was_cut && error.message.len() > MAX_TOOL_ERROR_MESSAGE_BYTES {
        let rest = error.message.len() - kept.len();
        let mut message = kept.to_string();
        message.push_str(&note(rest));
        error.message = message;
    }
}

/// The most bytes JSON spends on one byte of a tool's text: a control character is written
/// `\u00XX`. (A byte of stdout that is not UTF-8 becomes U+FFFD, three bytes.)
pub const JSON_ESCAPE_FACTOR: u64 = 6;

/// Bytes of a record besides what the tool, the model and the capabilities put in it: ids,
/// digests, stage reports, limits, usage, outcome and projection structure, signature.
pub const RECORD_FRAME_BYTES: u64 = 64 << 10;

/// The largest record (serialized as JSON) of a call that ran under `limits`, without its
/// receipts, approvals and child runs: each part the tool controls has its own cap, and each
/// byte of it costs at most [`JSON_ESCAPE_FACTOR`] bytes of JSON:
///
/// - the arguments as proposed: `proposal::MAX_ARGUMENT_BYTES` (JSON already);
/// - the result, at most `limits.result_bytes`, counted four times: as returned, and the host's
///   verdicts on its evidence items, whose diagnostics and upheld pointers quote the items'
///   references, with room to spare (the items themselves and the projection's text are not
///   stored again: see `CallRecord::link`);
/// - the tool's error: `result::MAX_TOOL_ERROR_CODE_BYTES` and
///   `result::MAX_TOOL_ERROR_MESSAGE_BYTES` (a longer message is cut, its size and digest kept);
/// - log lines: `capabilities::log::MAX_LINES` of `MAX_LINE_BYTES`;
/// - stdout and stderr: `dispatch::state::MAX_CAPTURE_BYTES` each.
///
/// Receipts (at most `capabilities::MAX_RECEIPTS_PER_CALL`, each bounded by its capability's
/// own limits) and child runs (each a record within this bound) come on top.
pub fn max_record_bytes(limits: &vak_core::record::Limits) -> u64 {
    let text = |n: u64| n.saturating_mul(JSON_ESCAPE_FACTOR);
    let log_lines = crate::capabilities::log::MAX_LINES as u64;
    let line = crate::capabilities::log::MAX_LINE_BYTES as u64;
    RECORD_FRAME_BYTES
        + crate::proposal::MAX_ARGUMENT_BYTES as u64
        + text(limits.result_bytes).saturating_mul(4)
        + text((MAX_TOOL_ERROR_CODE_BYTES + MAX_TOOL_ERROR_MESSAGE_BYTES) as u64)
        + log_lines * (text(line) + 64)
        + 2 * text(crate::dispatch::state::MAX_CAPTURE_BYTES as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result_with(attachments: Vec<wit::Attachment>) -> wit::ToolResult {
        wit::ToolResult {
            payload: None,
            markdown: "doc".into(),
            evidence: Vec::new(),
            attachments,
        }
    }

    fn image(mime: &str, body: wit::AttachmentBody) -> wit::Attachment {
        wit::Attachment {
            kind: wit::AttachmentKind::Image,
            mime_type: mime.into(),
            uri: None,
            body,
        }
    }

    #[test]
    fn attachments_are_kept_with_their_digest_and_counted_in_the_limit() {
        let bytes = vec![1u8, 2, 3];
        let r = collect(
            result_with(vec![image(
                "image/png",
                wit::AttachmentBody::Bytes(bytes.clone()),
            )]),
            1 << 20,
        )
        .unwrap()
        .record;
        let a = &r.attachments[0];
        assert_eq!(a.kind, "image");
        assert_eq!(a.base64.as_deref(), Some("AQID"));
        assert_eq!(a.sha256, crate::digest::sha256_hex(&bytes));
        assert_eq!(a.size, 3);
        let big = result_with(vec![image(
            "image/png",
            wit::AttachmentBody::Bytes(vec![0; 4096]),
        )]);
        assert!(matches!(
            collect(big, 1024),
            Err(ResultError::TooLarge { .. })
        ));
    }

    #[test]
    fn an_attachment_must_say_truly_what_it_is() {
        let resource = |uri: Option<&str>| wit::Attachment {
            kind: wit::AttachmentKind::Resource,
            mime_type: "text/plain".into(),
            uri: uri.map(str::to_string),
            body: wit::AttachmentBody::Text("hi".into()),
        };
        let bad = [
            image("text/html", wit::AttachmentBody::Bytes(vec![1])),
            image("image/png", wit::AttachmentBody::Text("x".into())),
            image("image/png; charset=x", wit::AttachmentBody::Bytes(vec![1])),
            image("", wit::AttachmentBody::Bytes(vec![1])),
            resource(None),
            resource(Some("not a uri")),
        ];
        for a in bad {
            let shown = format!("{a:?}");
            let e = collect(result_with(vec![a]), 1 << 20).unwrap_err();
            assert_eq!(e.kind(), "bad_attachment", "{shown}");
        }
        assert!(collect(result_with(vec![resource(Some("test://r"))]), 1 << 20).is_ok());
        let many = (0..=MAX_ATTACHMENTS)
            .map(|_| image("image/png", wit::AttachmentBody::Bytes(vec![1])))
            .collect();
        assert!(collect(result_with(many), 1 << 20).is_err());
    }

    #[test]
    fn a_tool_error_over_its_cap_is_cut_once_with_its_size_and_digest() {
        let message = "é".repeat(MAX_TOOL_ERROR_MESSAGE_BYTES);
        let (mut kept, error) = tool_error(wit::ToolError {
            code: "c".repeat(1000),
            message: message.clone(),
        });
        cut_to_cap(&mut kept);
        assert_eq!(kept.code.len(), MAX_TOOL_ERROR_CODE_BYTES);
        assert!(
            kept.message.len() <= MAX_TOOL_ERROR_MESSAGE_BYTES,
            "{}",
            kept.message.len()
        );
        assert!(kept.message.contains("[cut: "), "a note says it was cut");
        assert_eq!(kept.message_bytes, Some(message.len() as u64));
        assert_eq!(
            kept.message_sha256.as_deref(),
            Some(crate::digest::sha256_hex(message.as_bytes()).as_str())
        );
        // The call error names the code and does not repeat the message.
        assert!(error.to_string().len() < 300, "{error}");
        // A message within the cap is kept whole, without the extra fields.
        let (mut small, _) = tool_error(wit::ToolError {
            code: "denied".into(),
            message: "no".into(),
        });
        cut_to_cap(&mut small);
        assert_eq!((small.message.as_str(), small.message_bytes), ("no", None));
        assert!(!serde_json::to_string(&small).unwrap().contains("sha256"));
    }

    #[test]
    fn a_payload_is_parsed_once_and_json_without_a_value_is_kept_as_a_document() {
        let with = |json: &str| wit::ToolResult {
            payload: Some(wit::Payload {
                schema: "x".into(),
                json: json.into(),
            }),
            markdown: String::new(),
            evidence: Vec::new(),
            attachments: Vec::new(),
        };
        let c = collect(with(r#"{"a":[1,2]}"#), 1 << 20).unwrap();
        assert_eq!(c.payload, Some(serde_json::json!({"a": [1, 2]})));
        // JSON, but past what a Value holds: kept, with no parsed payload (as before).
        let c = collect(with("[1e400]"), 1 << 20).unwrap();
        assert_eq!(c.record.payload_json.as_deref(), Some("[1e400]"));
        assert_eq!(c.payload, None);
        let e = collect(with("[1,"), 1 << 20).unwrap_err();
        assert_eq!(e.kind(), "payload_not_json");
        assert!(
            collect(result_with(Vec::new()), 1 << 20)
                .unwrap()
                .payload
                .is_none()
        );
    }

    #[test]
    fn a_payload_deeper_than_the_argument_bound_is_refused_before_parsing() {
        let deep = |n: usize| wit::ToolResult {
            payload: Some(wit::Payload {
                schema: "x".into(),
                json: format!("{}{}", "[".repeat(n), "]".repeat(n)),
            }),
            markdown: String::new(),
            evidence: Vec::new(),
            attachments: Vec::new(),
        };
        assert!(collect(deep(MAX_PAYLOAD_DEPTH), 1 << 20).is_ok());
        let e = collect(deep(100_000), 1 << 20).unwrap_err();
        assert_eq!(e.kind(), "payload_too_deep");
        assert_eq!(
            e,
            ResultError::PayloadTooDeep {
                limit: MAX_PAYLOAD_DEPTH,
                depth: 100_000
            }
        );
    }

    #[test]
    fn a_result_without_attachments_keeps_the_digest_it_always_had() {
        let r = collect(result_with(Vec::new()), 1 << 20).unwrap().record;
        let json = serde_json::to_string(&r).unwrap();
        assert!(!json.contains("attachments"), "{json}");
    }
}

//! What a tool returned, kept as returned: its result (document, payload, evidence items,
//! attachments) with the digest of its canonical encoding, or its own error value. The stages
//! after dispatch read these; the call record holds them.

use serde::{Deserialize, Serialize};

/// The tool's typed result, kept as returned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResultRecord {
    /// SHA-256 of the canonical encoding of the result as returned (see `result` module).
    pub digest: String,
    /// The payload schema id the tool named, if it returned a payload.
    pub payload_schema: Option<String>,
    /// The payload JSON text exactly as returned.
    pub payload_json: Option<String>,
    /// The Markdown document exactly as returned.
    pub markdown: String,
    /// The evidence items exactly as returned.
    pub evidence: Vec<EvidenceRecord>,
    /// Images, audio and embedded resources, as returned (absent from records without any, so
    /// their digests are what they were before attachments existed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<AttachmentRecord>,
}

/// An attachment as the tool returned it, with the digest of its content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttachmentRecord {
    /// `image`, `audio` or `resource`.
    pub kind: String,
    pub mime_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
    /// The content, when it is text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The content, when it is bytes: standard base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base64: Option<String>,
    /// Bytes of content.
    pub size: u64,
    /// SHA-256 of the content (the text's UTF-8 or the bytes), lowercase hex.
    pub sha256: String,
}

/// An evidence item as the tool returned it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EvidenceRecord {
    pub id: String,
    /// `observed`, `cited`, `computed` or `synthesized`.
    pub kind: String,
    pub supports: Vec<String>,
    pub receipt: Option<String>,
    pub digest: Option<String>,
    pub derived_from: Vec<String>,
    pub note: String,
}

/// A tool's own error value, within its caps (`result::MAX_TOOL_ERROR_CODE_BYTES` and
/// `result::MAX_TOOL_ERROR_MESSAGE_BYTES`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolErrorRecord {
    pub code: String,
    pub message: String,
    /// When the message was cut: its size as the tool returned it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_bytes: Option<u64>,
    /// When the message was cut: the SHA-256 of the whole message as the tool returned it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_sha256: Option<String>,
}

//! The result a tool returns: an optional typed payload, a Markdown document, and evidence.

use crate::bindings::vak::tool::types as wit;
use serde::Serialize;

/// The kind of support an evidence item claims.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvidenceKind {
    /// Witnessed by the host: needs a receipt of an effect in this call.
    Observed,
    /// Said by a fetched source: needs the receipt of that fetch.
    Cited,
    /// Derived from other evidence items, named with [`Evidence::derived_from`].
    Computed,
    /// The tool's own synthesis; claims no outside support.
    Synthesized,
}

/// One evidence item. Build it with the constructor of its kind, then add what it supports.
#[derive(Debug, Clone)]
pub struct Evidence {
    inner: wit::Evidence,
}

impl Evidence {
    fn new(id: &str, kind: wit::EvidenceKind, receipt: Option<&str>) -> Self {
        Self {
            inner: wit::Evidence {
                id: id.to_string(),
                kind,
                supports: Vec::new(),
                receipt: receipt.map(str::to_string),
                digest: None,
                derived_from: Vec::new(),
                note: String::new(),
            },
        }
    }

    /// Something the host witnessed, resting on the receipt `receipt` of this call.
    pub fn observed(id: &str, receipt: &str) -> Self {
        Self::new(id, wit::EvidenceKind::Observed, Some(receipt))
    }

    /// Something a fetched source says, resting on the receipt of that fetch.
    pub fn cited(id: &str, receipt: &str) -> Self {
        Self::new(id, wit::EvidenceKind::Cited, Some(receipt))
    }

    /// A value the tool computed from the evidence items `from`.
    pub fn computed<I, S>(id: &str, from: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut e = Self::new(id, wit::EvidenceKind::Computed, None);
        e.inner.derived_from = from.into_iter().map(Into::into).collect();
        e
    }

    /// The tool's own synthesis.
    pub fn synthesized(id: &str) -> Self {
        Self::new(id, wit::EvidenceKind::Synthesized, None)
    }

    /// The JSON Pointer (into the payload) of a value this item supports.
    pub fn supports(mut self, pointer: &str) -> Self {
        self.inner.supports.push(pointer.to_string());
        self
    }

    /// The SHA-256 (lowercase hex) of the content the receipt must match.
    pub fn digest(mut self, sha256_hex: &str) -> Self {
        self.inner.digest = Some(sha256_hex.to_string());
        self
    }

    /// A short human note.
    pub fn note(mut self, note: &str) -> Self {
        self.inner.note = note.to_string();
        self
    }

    /// The kind of this item.
    pub fn kind(&self) -> EvidenceKind {
        match self.inner.kind {
            wit::EvidenceKind::Observed => EvidenceKind::Observed,
            wit::EvidenceKind::Cited => EvidenceKind::Cited,
            wit::EvidenceKind::Computed => EvidenceKind::Computed,
            wit::EvidenceKind::Synthesized => EvidenceKind::Synthesized,
        }
    }
}

/// A completed call's result.
#[derive(Debug, Clone)]
pub struct Output {
    inner: wit::ToolResult,
}

impl Output {
    /// A result whose document is `markdown`, with no payload and no evidence yet.
    pub fn markdown(markdown: impl Into<String>) -> Self {
        Self {
            inner: wit::ToolResult {
                payload: None,
                markdown: markdown.into(),
                evidence: Vec::new(),
                attachments: Vec::new(),
            },
        }
    }

    /// Attach a typed payload that claims to follow the registered schema `schema_id`.
    pub fn with_payload<P: Serialize>(
        mut self,
        schema_id: &str,
        payload: &P,
    ) -> Result<Self, ToolError> {
        let json = serde_json::to_string(payload).map_err(|e| {
            ToolError::new(
                "payload-serialization",
                format!("the payload could not be serialized: {e}"),
            )
        })?;
        self.inner.payload = Some(wit::Payload {
            schema: schema_id.to_string(),
            json,
        });
        Ok(self)
    }

    /// Add one evidence item.
    pub fn with_evidence(mut self, evidence: Evidence) -> Self {
        self.inner.evidence.push(evidence.inner);
        self
    }

    /// Attach an image (`mime_type` is `image/…`, e.g. `image/png`), shown beside the document.
    pub fn with_image(self, mime_type: &str, bytes: Vec<u8>) -> Self {
        self.attach(
            wit::AttachmentKind::Image,
            mime_type,
            None,
            wit::AttachmentBody::Bytes(bytes),
        )
    }

    /// Attach audio (`mime_type` is `audio/…`, e.g. `audio/wav`).
    pub fn with_audio(self, mime_type: &str, bytes: Vec<u8>) -> Self {
        self.attach(
            wit::AttachmentKind::Audio,
            mime_type,
            None,
            wit::AttachmentBody::Bytes(bytes),
        )
    }

    /// Embed a text resource known by `uri` (an absolute URI, e.g. `file:///notes.txt`).
    pub fn with_text_resource(self, uri: &str, mime_type: &str, text: impl Into<String>) -> Self {
        let body = wit::AttachmentBody::Text(text.into());
        self.attach(wit::AttachmentKind::Resource, mime_type, Some(uri), body)
    }

    /// Embed a binary resource known by `uri`.
    pub fn with_blob_resource(self, uri: &str, mime_type: &str, bytes: Vec<u8>) -> Self {
        let body = wit::AttachmentBody::Bytes(bytes);
        self.attach(wit::AttachmentKind::Resource, mime_type, Some(uri), body)
    }

    fn attach(
        mut self,
        kind: wit::AttachmentKind,
        mime_type: &str,
        uri: Option<&str>,
        body: wit::AttachmentBody,
    ) -> Self {
        self.inner.attachments.push(wit::Attachment {
            kind,
            mime_type: mime_type.to_string(),
            uri: uri.map(str::to_string),
            body,
        });
        self
    }

    pub(crate) fn into_wit(self) -> wit::ToolResult {
        self.inner
    }
}

/// A tool's own refusal or failure, reported to the model as a value the model can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    /// Machine-readable code, e.g. `unknown-zone`.
    pub code: String,
    /// Text for the model and the person reading the record.
    pub message: String,
}

impl ToolError {
    /// A tool error with a code and a message.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
        }
    }

    pub(crate) fn into_wit(self) -> wit::ToolError {
        wit::ToolError {
            code: self.code,
            message: self.message,
        }
    }
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for ToolError {}

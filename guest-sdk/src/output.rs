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
    ///
    /// The item upholds a payload field only when the payload's registered schema binds that
    /// field to this kind of receipt **and** the value agrees with what the receipt recorded;
    /// otherwise the host marks it unsupported. For the built-in schemas:
    ///
    /// | payload field | receipt | value |
    /// |---|---|---|
    /// | `vak.temporal.instant/1` `/instant`, `/unix_seconds`, `/zone` | [`clock::now`](crate::clock::now) | the reading's `rfc3339`, `unix_seconds`, `zone` |
    /// | `/offset_seconds` | the same | the reading's `offset_seconds` (the zone's offset at that instant) |
    /// | `/observed_at` | the same | the reading's moment, in any offset |
    /// | `vak.coding.change/1` `/files/*/path`, `/files/*/root` | [`workspace::read`](crate::workspace::read) or [`write`](crate::workspace::write) | the path and root asked for |
    /// | `/files/*/before_sha256`, `/verification/sha256` | a read | the read's `sha256` |
    /// | `/files/*/after_sha256` | a write | the write's `sha256` |
    /// | `/verification/matches` | the read back after the write | whether its `sha256` is the write's |
    /// | `vak.data.comparison/1` `/series/*/value`, `unit`, `basis`, `period/*` | a read (or a fetch) | text that occurs in the content read |
    ///
    /// `/max_age_seconds`, names and evidence ids are the tool's own statements: no item backs
    /// them, and they do not keep a result from `verified`. Point the item at every material
    /// field; one backed field is not enough. An item with no pointer only says the effect
    /// happened. The full table: `docs/capabilities.md`, "What a receipt backs".
    pub fn observed(id: &str, receipt: &str) -> Self {
        Self::new(id, wit::EvidenceKind::Observed, Some(receipt))
    }

    /// Something a fetched source says, resting on the receipt of that fetch
    /// ([`http::fetch`](crate::http::fetch)).
    ///
    /// For `vak.research.findings/1`, the item upholds `/findings/*/claim` only when the claim's
    /// text occurs in the body the host fetched (whitespace runs count as one space),
    /// `/findings/*/sources/*/url` when it is the response's `final_url`, and
    /// `/findings/*/sources/*/sha256` when it is the response's `sha256`. A paraphrase is your
    /// synthesis: present it in the document, or as [`Evidence::synthesized`].
    pub fn cited(id: &str, receipt: &str) -> Self {
        Self::new(id, wit::EvidenceKind::Cited, Some(receipt))
    }

    /// A value the tool computed from the evidence items `from`.
    ///
    /// Where the payload's schema binds the field to a computation the host knows
    /// (`vak.data.summary/1` `/count`, `/min`, `/max`, `/mean`, `/median` of `/values`;
    /// `vak.data.comparison/1` `/delta/value`, the difference of the two series' values), the
    /// host recomputes it from the payload and the item stands only if the values agree. A
    /// computation the host does not know stands only on supported items and never makes a
    /// result verified.
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

//! The call record: one per proposal, whatever happened to it.
//!
//! A record says which stages ran, how long each took and what each decided; what the call was
//! granted and what it used; the tool's result kept byte for byte (with its digest); the receipts
//! of every brokered effect; and, on refusal or failure, the [`CallError`].

use crate::capabilities::Receipt;
use crate::stage::{CallError, Stage};
use serde::{Deserialize, Serialize};

/// The version of the record format; bumped when a field changes meaning.
pub const RECORD_VERSION: u32 = 1;

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
/// - the result, at most `limits.result_bytes`, counted four times: as returned, its evidence
///   items again with the host's verdicts and diagnostics (which quote the items' references),
///   and the projection that renders its document;
/// - the tool's error: `result::MAX_TOOL_ERROR_CODE_BYTES` and
///   `result::MAX_TOOL_ERROR_MESSAGE_BYTES` (a longer message is cut, its size and digest kept);
/// - log lines: `capabilities::log::MAX_LINES` of `MAX_LINE_BYTES`;
/// - stdout and stderr: `dispatch::state::MAX_CAPTURE_BYTES` each.
///
/// Receipts (at most `capabilities::MAX_RECEIPTS_PER_CALL`, each bounded by its capability's
/// own limits) and child runs (each a record within this bound) come on top.
pub fn max_record_bytes(limits: &Limits) -> u64 {
    let text = |n: u64| n.saturating_mul(JSON_ESCAPE_FACTOR);
    let log_lines = crate::capabilities::log::MAX_LINES as u64;
    let line = crate::capabilities::log::MAX_LINE_BYTES as u64;
    RECORD_FRAME_BYTES
        + crate::proposal::MAX_ARGUMENT_BYTES as u64
        + text(limits.result_bytes).saturating_mul(4)
        + text(
            (crate::result::MAX_TOOL_ERROR_CODE_BYTES + crate::result::MAX_TOOL_ERROR_MESSAGE_BYTES)
                as u64,
        )
        + log_lines * (text(line) + 64)
        + 2 * text(crate::dispatch::state::MAX_CAPTURE_BYTES as u64)
}

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The tool ran and returned a result.
    Completed,
    /// The tool ran and returned its own error value.
    ToolError,
    /// The host refused the call before dispatch; no instance was created.
    Refused,
    /// The call was dispatched and ended in the sandbox (a limit, a trap) or in the host.
    Failed,
}

impl Status {
    /// The status as it appears in records.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Completed => "completed",
            Status::ToolError => "tool_error",
            Status::Refused => "refused",
            Status::Failed => "failed",
        }
    }
}

/// What one stage decided, and how long it took.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageReport {
    pub stage: Stage,
    /// `passed`, `refused`, `failed` or `skipped`.
    pub decision: String,
    pub elapsed_ns: u64,
    /// A short note on what the stage decided (e.g. the admitted limits).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
}

/// What a call really used.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Fuel consumed (deterministic CPU units).
    pub fuel: u64,
    /// Wall-clock time of the dispatch stage, from instantiation to return.
    pub wall_ns: u64,
    /// Peak linear memory of the instance, in bytes.
    pub memory_bytes: u64,
    /// Size of the returned result (document, payload, evidence), in bytes.
    pub result_bytes: u64,
}

/// The limits a call ran under (the admitted budget).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    pub fuel: u64,
    pub memory_bytes: u64,
    pub wall_time_ms: u64,
    pub result_bytes: u64,
}

/// Captured output of a stream (stdout or stderr), bounded.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Captured {
    /// What was kept, lossily decoded as UTF-8.
    pub text: String,
    /// Bytes written beyond the cap and dropped.
    pub dropped_bytes: u64,
}

/// A log line written through the `log` capability.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogLine {
    pub level: String,
    pub message: String,
}

/// Bounded logs of a call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Logs {
    pub lines: Vec<LogLine>,
    /// Lines dropped because the call reached the line cap.
    pub dropped_lines: u64,
    pub stdout: Captured,
    pub stderr: Captured,
}

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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

/// The complete record of one call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRecord {
    pub record_version: u32,
    /// vak's own id of the call, unique: the key of the record, its receipts and its journal
    /// entry.
    pub call_id: String,
    /// The provider's id of the tool call as the model sent it (`call_abc`, `toolu_…`), where
    /// there was one: what to answer the provider with. A model chooses it: it may repeat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_call_id: Option<String>,
    pub tool: String,
    /// Where the proposal came from (`cli`, `api`, a provider name).
    pub provider: String,
    /// The session the call was charged to.
    pub session_id: String,
    /// For a child run: the call that started it, and how deep it is (0 for a top-level call).
    pub parent_call_id: Option<String>,
    pub depth: u32,
    /// On whose behalf the call was made, if the embedder said.
    pub principal: Option<String>,
    /// When the host received the proposal (RFC 3339, UTC).
    pub received_at: String,
    pub status: Status,
    /// The last lifecycle stage reached.
    pub stage: Stage,
    pub error: Option<CallError>,
    pub stages: Vec<StageReport>,
    /// SHA-256 of the argument text as proposed.
    pub arguments_digest: String,
    /// The arguments as proposed, when they were valid JSON.
    pub arguments: Option<serde_json::Value>,
    /// The digest of the component that ran (or would have run).
    pub component_digest: Option<String>,
    /// The admitted limits, once the budget stage passed.
    pub limits: Option<Limits>,
    /// Capabilities granted to this call (interface names), once permission passed.
    pub granted: Vec<String>,
    pub usage: Usage,
    pub result: Option<ToolResultRecord>,
    pub tool_error: Option<ToolErrorRecord>,
    pub receipts: Vec<Receipt>,
    /// Records of the child runs this call started (kept even when this call failed after them).
    pub children: Vec<CallRecord>,
    /// Evidence items with the host's verdict (filled by the result stage).
    pub evidence: Vec<crate::evidence::CheckedEvidence>,
    pub logs: Logs,
    /// Requirement outcomes (the outcome stage); null until it runs.
    pub outcome: serde_json::Value,
    /// The presentation projection; null until it runs.
    pub projection: serde_json::Value,
    /// Where the host replaced a secret's value (or an encoding of it) that the tool tried to
    /// pass out, with how many: e.g. `result.markdown: 1`. Empty (and absent) when nothing was.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redacted: Vec<String>,
    /// Every approval the call asked for: the request (bound to tool, arguments, grant and
    /// principal), who answered, when, and what. Empty (and absent) when none was needed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<crate::approval::ApprovalEntry>,
    /// The host's signature over everything above (see `signing`).
    pub signature: Option<crate::signing::RecordSignature>,
    /// Where the record went in the journal (not part of the record itself, nor of its JSON).
    #[serde(skip)]
    pub journaled: Option<Result<crate::journal::Entry, crate::journal::JournalError>>,
}

impl CallRecord {
    /// The record of a proposal just received.
    pub(crate) fn new(
        call_id: String,
        tool: String,
        provider: String,
        arguments_text: &str,
    ) -> Self {
        CallRecord {
            record_version: RECORD_VERSION,
            call_id,
            provider_call_id: None,
            tool,
            provider,
            session_id: String::new(),
            parent_call_id: None,
            depth: 0,
            principal: None,
            received_at: jiff::Timestamp::now().to_string(),
            status: Status::Refused,
            stage: Stage::Proposal,
            error: None,
            stages: Vec::new(),
            arguments_digest: crate::digest::sha256_hex(arguments_text.as_bytes()),
            arguments: None,
            component_digest: None,
            limits: None,
            granted: Vec::new(),
            usage: Usage::default(),
            result: None,
            tool_error: None,
            receipts: Vec::new(),
            children: Vec::new(),
            evidence: Vec::new(),
            logs: Logs::default(),
            outcome: serde_json::Value::Null,
            projection: serde_json::Value::Null,
            signature: None,
            redacted: Vec::new(),
            approvals: Vec::new(),
            journaled: None,
        }
    }

    /// Redact every secret value `scrubber` knows from every string of the record, whatever
    /// field holds it (keys of free-form JSON too): the arguments, approvals, error, tool error,
    /// result, evidence, receipts' requests and outcomes, logs, outcome, projection and child
    /// records, noting in [`CallRecord::redacted`] where and how many. One walk over the record
    /// as JSON, so a field added later is covered without a line here. The digests stay those of
    /// the data as it was (arguments as proposed, result as returned, bodies as sent).
    ///
    /// Idempotent: a second pass finds nothing more. Run whenever the record is about to be read
    /// by anything but the pipeline: before the outcome and projection are made from the result,
    /// and once when the call ends, before it is signed and journaled.
    pub(crate) fn redact(&mut self, scrubber: &crate::secrets::Scrubber) {
        if !scrubber.active() {
            return;
        }
        let journaled = self.journaled.take();
        let mut value = match serde_json::to_value(&*self) {
            Ok(v) => v,
            Err(e) => return self.redaction_failed(&e.to_string(), journaled),
        };
        let mut places: Vec<(String, usize)> = Vec::new();
        scrubber.redact_json_at(&mut value, &mut |path, n| {
            let place = place_of(path);
            match places.iter_mut().find(|(p, _)| *p == place) {
                Some((_, count)) => *count += n,
                None => places.push((place, n)),
            }
        });
        if places.is_empty() {
            self.journaled = journaled;
            return;
        }
        match serde_json::from_value::<CallRecord>(value) {
            Ok(mut clean) => {
                clean
                    .redacted
                    .extend(places.iter().map(|(p, n)| format!("{p}: {n}")));
                clean.journaled = journaled;
                *self = clean;
            }
            Err(e) => self.redaction_failed(&e.to_string(), journaled),
        }
    }

    /// The record could not be walked (a host fault: every field round-trips through JSON):
    /// everything a tool, a model or a server wrote is dropped rather than kept unredacted.
    fn redaction_failed(
        &mut self,
        why: &str,
        journaled: Option<Result<crate::journal::Entry, crate::journal::JournalError>>,
    ) {
        tracing::error!(call_id = %self.call_id, error = why, "the record could not be redacted; its contents are dropped");
        let mut bare = CallRecord::new(
            self.call_id.clone(),
            self.tool.clone(),
            self.provider.clone(),
            "",
        );
        bare.arguments_digest = std::mem::take(&mut self.arguments_digest);
        bare.received_at = std::mem::take(&mut self.received_at);
        bare.session_id = std::mem::take(&mut self.session_id);
        bare.parent_call_id = self.parent_call_id.take();
        bare.depth = self.depth;
        bare.status = self.status;
        bare.stage = self.stage;
        bare.usage = std::mem::take(&mut self.usage);
        bare.redacted = vec![format!("record: dropped ({why})")];
        bare.journaled = journaled;
        *self = bare;
    }

    pub(crate) fn passed(&mut self, stage: Stage, elapsed: std::time::Duration, note: String) {
        self.stage = stage;
        self.stages.push(StageReport {
            stage,
            decision: "passed".into(),
            elapsed_ns: elapsed.as_nanos() as u64,
            note,
        });
    }

    /// End the record at `stage` with `error` (refused before dispatch, failed after).
    pub(crate) fn stop(&mut self, error: CallError, elapsed: std::time::Duration) {
        let stage = error.stage;
        self.stage = stage;
        self.status = if stage < Stage::Dispatch {
            Status::Refused
        } else {
            Status::Failed
        };
        self.stages.push(StageReport {
            stage,
            decision: if self.status == Status::Refused {
                "refused".into()
            } else {
                "failed".into()
            },
            elapsed_ns: elapsed.as_nanos() as u64,
            note: String::new(),
        });
        self.error = Some(error);
    }

    /// This record's receipts and those of all its child runs, depth first.
    pub fn all_receipts(&self) -> Vec<Receipt> {
        let mut all = self.receipts.clone();
        for c in &self.children {
            all.extend(c.all_receipts());
        }
        all
    }

    /// The record as pretty JSON.
    pub fn to_json_pretty(&self) -> String {
        // A record holds only strings, numbers and JSON values: serialization cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

/// Where in a record a redaction was, for [`CallRecord::redacted`]: the field and the field
/// within it (`error.message`, `receipts.request`, `result.markdown`), never deeper into
/// free-form JSON (`arguments`, `outcome`, `projection`), whose keys a model or tool chose.
fn place_of(path: &[&str]) -> String {
    let depth = match path.first() {
        Some(&("arguments" | "outcome" | "projection")) => 1,
        _ => 2,
    };
    path.iter()
        .take(depth)
        .copied()
        .collect::<Vec<_>>()
        .join(".")
}

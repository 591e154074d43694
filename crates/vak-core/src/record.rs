//! The call record: one per proposal, whatever happened to it.
//!
//! A record says which stages ran, how long each took and what each decided; what the call was
//! granted and what it used; the tool's result kept byte for byte (with its digest); the receipts
//! of every brokered effect; and, on refusal or failure, the [`CallError`].

pub use crate::returned::{AttachmentRecord, EvidenceRecord, ToolErrorRecord, ToolResultRecord};
use crate::stage::{CallError, Stage};
use crate::types::Receipt;
use serde::{Deserialize, Serialize};

/// The version of the record format; bumped when a field changes meaning.
pub const RECORD_VERSION: u32 = 2;

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

/// The signature on a record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordSignature {
    /// `ed25519-sha256`: ed25519 over the SHA-256 of the record's JSON (with `signature` null).
    /// Records signed before the digest was introduced say `ed25519` (over the JSON itself);
    /// both verify.
    pub algorithm: String,
    /// The host's public key, lowercase hex (32 bytes).
    pub public_key: String,
    /// The signature, lowercase hex.
    pub signature: String,
    /// For `ed25519-sha256-batch`: where the record sits in the batch that was signed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<BatchProof>,
}

/// A record's place in a signed batch: its leaf's index among `size` leaves and the sibling
/// hashes from the leaf up to the root (lowercase hex), as RFC 9162 §2.1.3 defines them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchProof {
    pub index: u64,
    pub size: u64,
    pub path: Vec<String>,
}

/// One question and its answer, as kept in the record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalEntry {
    /// The request as asked (id, scope, binding, digests, expiry).
    pub request: serde_json::Value,
    /// `approved`, `denied`, `timeout`, `unavailable`, `input_required`
    /// (put to a stateless client in the next round) or `invalid`.
    pub decision: String,
    /// Who answered, when someone did.
    pub by: Option<String>,
    pub answered_at: String,
    /// Why, for anything but an approval.
    pub reason: Option<String>,
    /// How long the host waited for the answer.
    pub waited_ms: u64,
}

/// A call's place among the rounds of one logical call (MCP 2026-07-28 input-required
/// rounds): the tool runs afresh each round, answered from what the client sent before.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Round {
    /// 1 for the first request; each retry with the client's answers is one more.
    pub round: u32,
    /// The call of the round before this one (`None` in round 1).
    pub previous_call_id: Option<String>,
}

/// Where a record went in the journal: the call's answer to "is this on record?".
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JournalPlace {
    /// The global commit order of every chain, where it is known at commit (a shared store); 0
    /// for a local journal, whose entries take theirs when indexed.
    pub seq: i64,
    pub hash: String,
    /// The chain holding the entry (a process's chain in a local journal, a node's in a shared
    /// store), and the entry's place there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<(String, i64)>,
}

/// Why a record could not be journaled, as the caller needs it: a stable kind
/// (`journal_failed`, `store_unavailable`), the message, and whether the same call retried
/// could be journaled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct JournalFailure {
    pub kind: &'static str,
    pub message: String,
    pub retryable: bool,
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
    /// The outcome stage's verdict (label, payload check, requirements); null until it runs.
    pub outcome: Option<crate::outcome::Outcome>,
    /// The presentation projection; null until it runs.
    pub projection: Option<crate::projection::Projection>,
    /// Where the host replaced a secret's value (or an encoding of it) that the tool tried to
    /// pass out, with how many: e.g. `result.markdown: 1`. Empty (and absent) when nothing was.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redacted: Vec<String>,
    /// Every approval the call asked for: the request (bound to tool, arguments, grant and
    /// principal), who answered, when, and what. Empty (and absent) when none was needed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<ApprovalEntry>,
    /// For a call answered over several rounds: which round this record is, and the record of
    /// the round before. Absent for a call of one request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round: Option<Round>,
    /// The host's signature over everything above (see `signing`).
    pub signature: Option<RecordSignature>,
    /// Where the record went in the journal (not part of the record itself, nor of its JSON).
    #[serde(skip)]
    pub journaled: Option<Result<JournalPlace, JournalFailure>>,
}

impl CallRecord {
    /// The record of a proposal just received.
    pub fn new(call_id: String, tool: String, provider: String, arguments_text: &str) -> Self {
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
            outcome: None,
            projection: None,
            signature: None,
            redacted: Vec::new(),
            approvals: Vec::new(),
            round: None,
            journaled: None,
        }
    }

    pub fn passed(&mut self, stage: Stage, elapsed: std::time::Duration, note: String) {
        self.stage = stage;
        self.stages.push(StageReport {
            stage,
            decision: "passed".into(),
            elapsed_ns: elapsed.as_nanos() as u64,
            note,
        });
    }

    /// End the record at `stage` with `error` (refused before dispatch, failed after).
    pub fn stop(&mut self, error: CallError, elapsed: std::time::Duration) {
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

    /// Put back what a record read from its JSON holds only once: each evidence verdict's item
    /// (from `result.evidence`, by position) and the projection's text (made again from the
    /// result, outcome and evidence), in this record and its child runs. Whoever reads a record
    /// from JSON calls this; a record made by the host has both already.
    pub fn link(&mut self) {
        let items = self.result.as_ref().map_or(&[][..], |r| &r.evidence[..]);
        if items.len() == self.evidence.len() {
            for (checked, item) in self.evidence.iter_mut().zip(items) {
                checked.item = checked.stored_item.clone().unwrap_or_else(|| item.clone());
            }
        } else {
            for checked in &mut self.evidence {
                if let Some(item) = &checked.stored_item {
                    checked.item = item.clone();
                }
            }
        }
        if let (Some(projection), Some(result), Some(outcome)) =
            (&mut self.projection, &self.result, &self.outcome)
        {
            projection.render_again(result, outcome, &self.evidence);
        }
        for child in &mut self.children {
            child.link();
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::{CheckedEvidence, Support};
    use crate::outcome::{Label, Outcome};
    use crate::projection::{RendererCaps, project};

    fn item(id: &str, note: &str) -> EvidenceRecord {
        EvidenceRecord {
            id: id.into(),
            kind: "synthesized".into(),
            note: note.into(),
            ..EvidenceRecord::default()
        }
    }

    /// A completed record as the host makes it, projected for `caps`.
    fn record(caps: &RendererCaps) -> CallRecord {
        let mut r = CallRecord::new("call_1".into(), "t".into(), "api".into(), "{}");
        let items = vec![
            item("a", "a long note about the first item"),
            item("b", "the second"),
        ];
        let result = ToolResultRecord {
            digest: "d".repeat(64),
            payload_schema: None,
            payload_json: None,
            markdown: "# The document\n\nthe **only** copy, `kept` once".into(),
            evidence: items.clone(),
            attachments: Vec::new(),
        };
        let checked: Vec<CheckedEvidence> = items
            .into_iter()
            .map(|i| CheckedEvidence {
                item: i,
                stored_item: None,
                support: Support::Synthesized,
                diagnostics: Vec::new(),
                upholds: Vec::new(),
                recomputed: Vec::new(),
            })
            .collect();
        let outcome = Outcome {
            label: Label::Unverified,
            payload_passed: false,
            requirements: Vec::new(),
        };
        r.projection = Some(project(caps, &result, &outcome, &checked));
        r.result = Some(result);
        r.evidence = checked;
        r.outcome = Some(outcome);
        r
    }

    /// The tool's document and each evidence item are in a record's JSON once; read back and
    /// linked, the record is what the host made (the items beside their verdicts, the text
    /// the renderer was given), for every renderer.
    #[test]
    fn a_record_holds_the_document_and_each_item_once_and_reads_back_whole() {
        for caps in [
            RendererCaps::terminal(),
            RendererCaps::markdown(),
            RendererCaps::html(),
            RendererCaps::plain_text(),
        ] {
            let made = record(&caps);
            let json = serde_json::to_string(&made).unwrap();
            assert_eq!(json.matches("the **only** copy").count(), 1, "{json}");
            assert_eq!(json.matches("a long note about the first item").count(), 1);
            let mut read: CallRecord = serde_json::from_str(&json).unwrap();
            assert_ne!(
                read, made,
                "before link, what the JSON does not hold is missing"
            );
            read.link();
            assert_eq!(read, made, "{}", caps.name);
            assert_eq!(serde_json::to_string(&read).unwrap(), json);
        }
    }

    /// What a client is shown of an item: its own fields and the host's verdict, once each.
    #[test]
    fn an_item_is_shown_joined_to_its_verdict() {
        let made = record(&RendererCaps::markdown());
        let joined = made.evidence[0].joined();
        assert_eq!(joined["id"], "a");
        assert_eq!(joined["note"], "a long note about the first item");
        assert_eq!(joined["support"], "synthesized");
        assert_eq!(
            joined.as_object().unwrap().len(),
            serde_json::to_value(&made.evidence[0].item)
                .unwrap()
                .as_object()
                .unwrap()
                .len()
                + 1,
            "{joined}"
        );
    }

    /// A version-1 record (items beside their verdicts, the projection's text kept) reads back
    /// and serializes to the same bytes, so its signature still verifies.
    #[test]
    fn a_version_1_record_serializes_as_it_was_signed() {
        let made = record(&RendererCaps::terminal());
        let mut v1 = serde_json::to_value(&made).unwrap();
        v1["record_version"] = 1.into();
        let shown = made.projection.as_ref().unwrap().rendered.clone();
        let projection = v1["projection"].as_object_mut().unwrap();
        projection.remove("medium");
        projection.insert("rendered".into(), shown.clone().into());
        for (n, e) in v1["evidence"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .enumerate()
        {
            let verdict = e.as_object().unwrap().clone();
            let mut flat = serde_json::to_value(&made.evidence[n].item).unwrap();
            flat.as_object_mut().unwrap().extend(verdict);
            *e = flat;
        }
        let text = serde_json::to_string(&v1).unwrap();
        let mut read: CallRecord = serde_json::from_str(&text).unwrap();
        read.link();
        assert_eq!(serde_json::to_string(&read).unwrap(), text);
        assert_eq!(read.evidence[0].item.id, "a");
        assert_eq!(read.projection.unwrap().rendered, shown);
    }
}

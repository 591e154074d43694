//! The journal's entries: a call's write-ahead `started` entry, or its final record, and how
//! their text is read. The chain itself (hashing, links, signatures, the walk and its verdicts)
//! is `vak_core::chain`, re-exported here, which every journal (local or shared) calls.

pub use vak_core::chain::{
    Checkpoint, EntryProof, GENESIS, Inclusion, JOURNAL_UNAVAILABLE, Kind, MAX_CHECKPOINT_RUN,
    Stored, Unfinished, Unsigned, VerifyError, check_covered, entry_hash,
};

use crate::record::{CallRecord, Limits};
use crate::signing::RecordSignature;
use serde::{Deserialize, Serialize};
use vak_core::chain::ChainEntry;

/// The walk of every chain ([`vak_core::chain::ChainCheck`]), reading this journal's entries.
pub type ChainCheck = vak_core::chain::ChainCheck<Parsed>;

/// Check an entry read alone: by itself, and its links ([`vak_core::chain::check_links`]).
pub fn check_links(row: &Stored, before: Option<&str>, after: Option<&str>) -> Result<(), String> {
    vak_core::chain::check_links::<Parsed>(row, before, after)
}

/// The tag of a `started` entry: its JSON's first field, `"entry": "started"`, which no call
/// record has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StartedTag {
    Started,
}

/// A call's write-ahead entry: the call has passed every check before dispatch, and its tool is
/// about to run under these limits. Written (and, like a record, signed) before any instance of
/// the tool exists; the call's final record follows in the same chain, under the same `call_id`.
/// A `started` entry with no final record is a call that was interrupted (its process died) or
/// is running now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Started {
    pub entry: StartedTag,
    /// vak's id of the call: its final record has the same.
    pub call_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_call_id: Option<String>,
    pub tool: String,
    pub principal: Option<String>,
    pub session_id: String,
    /// When the host received the proposal (the record's `received_at`).
    pub received_at: String,
    /// When the entry was made: the call's checks were over.
    pub started_at: String,
    /// SHA-256 of the argument text as proposed (the record's `arguments_digest`).
    pub arguments_digest: String,
    /// SHA-256 of the grant the call runs under.
    pub grant_digest: String,
    pub component_digest: Option<String>,
    /// The limits the tool runs under.
    pub limits: Limits,
    /// The host's signature over everything above, as a record's.
    pub signature: Option<RecordSignature>,
}

impl Started {
    /// The `started` entry of the call `record` describes, about to run under `limits` with the
    /// grant whose digest is `grant_digest`.
    pub fn of(record: &CallRecord, grant_digest: String, limits: Limits) -> Started {
        Started {
            entry: StartedTag::Started,
            call_id: record.call_id.clone(),
            provider_call_id: record.provider_call_id.clone(),
            parent_call_id: record.parent_call_id.clone(),
            tool: record.tool.clone(),
            principal: record.principal.clone(),
            session_id: record.session_id.clone(),
            received_at: record.received_at.clone(),
            started_at: jiff::Timestamp::now().to_string(),
            arguments_digest: record.arguments_digest.clone(),
            grant_digest,
            component_digest: record.component_digest.clone(),
            limits,
            signature: None,
        }
    }

    /// The entry's JSON with `signature` null: what is signed.
    pub fn unsigned_text(&self) -> String {
        let mut unsigned = self.clone();
        unsigned.signature = None;
        // Strings, numbers and a digest: it always serializes.
        serde_json::to_string(&unsigned).unwrap_or_default()
    }
}

/// An entry's text, read: a `started` entry or a call record.
pub enum Parsed {
    Started(Box<Started>),
    Record(Box<CallRecord>),
}

/// What a `started` entry's text begins with (serde writes `entry` first).
const STARTED_PREFIX: &str = r#"{"entry":"started""#;

impl Parsed {
    /// Read an entry's text.
    pub fn parse(text: &str) -> Result<Parsed, serde_json::Error> {
        if text.starts_with(STARTED_PREFIX) {
            serde_json::from_str(text).map(|s| Parsed::Started(Box::new(s)))
        } else {
            // Not linked (`CallRecord::link`): the chain's checks and the list read only what
            // the record holds; re-rendering every projection would be work for nothing.
            serde_json::from_str(text).map(|r| Parsed::Record(Box::new(r)))
        }
    }
}

impl ChainEntry for Parsed {
    fn parse(text: &str) -> Result<Parsed, serde_json::Error> {
        Parsed::parse(text)
    }

    fn kind(&self) -> Kind {
        match self {
            Parsed::Started(_) => Kind::Started,
            Parsed::Record(_) => Kind::Record,
        }
    }

    fn call_id(&self) -> &str {
        match self {
            Parsed::Started(s) => &s.call_id,
            Parsed::Record(r) => &r.call_id,
        }
    }

    fn tool(&self) -> &str {
        match self {
            Parsed::Started(s) => &s.tool,
            Parsed::Record(r) => &r.tool,
        }
    }

    fn arguments_digest(&self) -> &str {
        match self {
            Parsed::Started(s) => &s.arguments_digest,
            Parsed::Record(r) => &r.arguments_digest,
        }
    }

    fn ran(&self) -> bool {
        match self {
            Parsed::Started(_) => false,
            Parsed::Record(r) => {
                r.limits.is_some()
                    && r.error
                        .as_ref()
                        .is_none_or(|e| e.kind != JOURNAL_UNAVAILABLE)
            }
        }
    }

    fn verify_signature(&self, trusted: &[impl AsRef<str>]) -> Result<String, VerifyError> {
        match self {
            Parsed::Record(r) => crate::signing::verify_any(r, trusted),
            Parsed::Started(s) => {
                let sig = s.signature.as_ref().ok_or(VerifyError::Unsigned)?;
                let digest = crate::signing::text_digest(&s.unsigned_text());
                crate::signing::verify_digest(sig, &digest, trusted)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A signed `started` entry parses as one, verifies, and fails once altered.
    #[test]
    fn a_started_entry_is_signed_and_checked() {
        let key = crate::signing::HostKey::from_seed_hex(&"07".repeat(32)).unwrap();
        let record = CallRecord::new("call_1".into(), "t".into(), "api".into(), "{}");
        let limits = Limits {
            fuel: 1,
            memory_bytes: 2,
            wall_time_ms: 3,
            result_bytes: 4,
        };
        let mut s = Started::of(&record, "g".into(), limits);
        let digest = crate::signing::text_digest(&s.unsigned_text());
        s.signature = key.sign_digests(&[digest]).pop();
        let text = serde_json::to_string(&s).unwrap();
        assert!(text.starts_with(STARTED_PREFIX), "{text}");
        let parsed = Parsed::parse(&text).unwrap();
        assert_eq!(parsed.kind(), Kind::Started);
        assert_eq!(
            parsed.verify_signature(&[key.public_hex()]),
            Ok(key.public_hex())
        );
        let altered = text.replace("\"tool\":\"t\"", "\"tool\":\"u\"");
        assert!(
            Parsed::parse(&altered)
                .unwrap()
                .verify_signature(&[] as &[&str])
                .is_err()
        );
    }
}

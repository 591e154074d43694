//! The chain format, shared by the local journal and the shared store: what an entry is (a call's
//! write-ahead `started` entry, or its final record), how an entry is hashed into its chain, and
//! the walk that checks a chain entry by entry.
//!
//! A chain is written by one writer at a time (a process on a local journal, a node on the shared
//! store). Each entry carries the hash of the one before it in its chain; the entries of every
//! chain are tied together by their global commit order (`seq`), and by `UNIQUE (chain,
//! chain_seq)`.

use crate::record::{CallRecord, Limits};
use crate::signing::RecordSignature;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The hash before a chain's first entry.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The `kind` of the call error of a call refused because its `started` entry could not be
/// written: such a record has limits and, rightly, no `started` entry.
pub const JOURNAL_UNAVAILABLE: &str = "journal_unavailable";

/// SHA-256 of an entry: its chain's previous hash, the chain's id, the entry's place in its chain
/// and its text, one per line, fed in parts (every call's entries go through here, and are not
/// copied to be hashed). `chain` is `None` for the one chain of a local journal written before
/// chains had ids: its hashes leave the id out, as they were made.
pub fn entry_hash(prev: &str, chain: Option<&str>, seq: i64, text: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    hash.update(prev.as_bytes());
    hash.update(b"\n");
    if let Some(chain) = chain {
        hash.update(chain.as_bytes());
        hash.update(b"\n");
    }
    hash.update(seq.to_string().as_bytes());
    hash.update(b"\n");
    hash.update(text.as_bytes());
    hex::encode(hash.finalize())
}

/// What a chain entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A call's write-ahead entry: written before its tool runs.
    Started,
    /// A call's final record.
    Record,
}

impl Kind {
    /// The kind as the journal's `kind` column holds it.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Started => "started",
            Kind::Record => "record",
        }
    }

    /// The kind named `s` (`record` for anything else: the rows written before kinds existed).
    pub fn parse(s: &str) -> Kind {
        match s {
            "started" => Kind::Started,
            _ => Kind::Record,
        }
    }
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
            serde_json::from_str(text).map(|r| Parsed::Record(Box::new(r)))
        }
    }

    pub fn kind(&self) -> Kind {
        match self {
            Parsed::Started(_) => Kind::Started,
            Parsed::Record(_) => Kind::Record,
        }
    }

    pub fn call_id(&self) -> &str {
        match self {
            Parsed::Started(s) => &s.call_id,
            Parsed::Record(r) => &r.call_id,
        }
    }

    /// Check the entry's signature (made by one of `trusted`, when any are given).
    pub fn verify_signature(
        &self,
        trusted: &[impl AsRef<str>],
    ) -> Result<String, crate::signing::VerifyError> {
        match self {
            Parsed::Record(r) => crate::signing::verify_any(r, trusted),
            Parsed::Started(s) => {
                let sig = s
                    .signature
                    .as_ref()
                    .ok_or(crate::signing::VerifyError::Unsigned)?;
                let digest = crate::signing::text_digest(&s.unsigned_text());
                crate::signing::verify_digest(sig, &digest, trusted)
            }
        }
    }
}

/// One stored entry, as a walk reads it.
pub struct Stored {
    /// Its place in the global commit order.
    pub seq: i64,
    /// The chain's id (a node's name on a shared store); `legacy`: the one chain of a local journal
    /// written before chains had ids, whose hashes leave the id out.
    pub chain: String,
    pub legacy: bool,
    pub chain_seq: i64,
    /// The `kind` column, where the store has one.
    pub kind: Option<Kind>,
    pub call_id: String,
    pub text: String,
    pub prev_hash: String,
    pub hash: String,
}

impl Stored {
    /// Where the entry is, for a message: `chain C entry N` (`entry N` in a legacy chain).
    pub fn place(&self) -> String {
        match self.legacy {
            true => format!("entry {}", self.chain_seq),
            false => format!("chain {} entry {}", self.chain, self.chain_seq),
        }
    }

    /// Check the entry by itself: its hash over its text and place, its text against its
    /// columns, and its signature. The parsed entry, or why it does not check out.
    pub fn check_alone(&self, trusted: &[impl AsRef<str>]) -> Result<Parsed, String> {
        let chain = (!self.legacy).then_some(self.chain.as_str());
        if entry_hash(&self.prev_hash, chain, self.chain_seq, &self.text) != self.hash {
            return Err("its content does not match its hash".into());
        }
        let parsed =
            Parsed::parse(&self.text).map_err(|e| format!("its entry does not parse: {e}"))?;
        if self.kind.is_some_and(|k| k != parsed.kind()) {
            return Err("its indexed kind differs from its entry".into());
        }
        if parsed.call_id() != self.call_id {
            return Err("its indexed call id differs from its entry".into());
        }
        if let Err(e) = parsed.verify_signature(trusted) {
            return Err(format!("its signature: {e}"));
        }
        Ok(parsed)
    }
}

/// Check an entry read alone (not in a walk of its chain): by itself, and its links. `before` is
/// the hash of the entry before it in its chain ([`GENESIS`] for a chain's first; `None`: that
/// entry is missing); `after`, the hash the entry after it names as its predecessor's (`None`:
/// the entry is its chain's head).
pub fn check_links(row: &Stored, before: Option<&str>, after: Option<&str>) -> Result<(), String> {
    row.check_alone(&[] as &[&str])?;
    match before {
        None => {
            return Err(format!(
                "entry {} of its chain is missing",
                row.chain_seq - 1
            ));
        }
        Some(h) if h != row.prev_hash => {
            return Err("its link to the previous entry is broken".into());
        }
        Some(_) => {}
    }
    match after {
        Some(h) if h != row.hash => Err(
            "the next entry's link to it is broken: it was changed after the next was written"
                .into(),
        ),
        _ => Ok(()),
    }
}

/// A call whose `started` entry has no final record (yet).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unfinished {
    /// The chain (`None`: a legacy chain).
    pub chain: Option<String>,
    pub chain_seq: i64,
    pub seq: i64,
    pub call_id: String,
}

/// The chain being walked.
struct Current {
    chain: String,
    legacy: bool,
    seq: i64,
    hash: String,
    gseq: i64,
    /// Calls started and not yet finished in this chain: tool, arguments digest, place.
    open: HashMap<String, (String, String, i64, i64)>,
    /// Whether the chain has had a `started` entry: from then on, every call that ran needs one.
    write_ahead: bool,
}

/// The walk of every chain, one entry at a time in (chain, chain_seq) order: each entry's place
/// (gapless from 1), its link to the one before, its commit order after it, its hash, its text,
/// its signature; and the write-ahead rule: once a chain holds `started` entries, a record of a
/// call that ran (it has limits) follows its call's `started` entry, for the same tool and
/// arguments.
#[derive(Default)]
pub struct ChainCheck {
    pub entries: u64,
    pub records: u64,
    pub started: u64,
    pub heads: Vec<super::Head>,
    pub unfinished: Vec<Unfinished>,
    current: Option<Current>,
}

impl ChainCheck {
    /// Check the next entry; why it does not check out (naming its chain and place), if it
    /// does not.
    pub fn next(&mut self, row: &Stored, trusted: &[impl AsRef<str>]) -> Option<String> {
        self.step(row, trusted)
            .err()
            .map(|why| format!("{}: {why}", row.place()))
    }

    fn step(&mut self, row: &Stored, trusted: &[impl AsRef<str>]) -> Result<(), String> {
        self.entries += 1;
        if self
            .current
            .as_ref()
            .is_none_or(|c| c.chain != row.chain || c.legacy != row.legacy)
        {
            self.close();
            self.current = Some(Current {
                chain: row.chain.clone(),
                legacy: row.legacy,
                seq: 0,
                hash: GENESIS.to_string(),
                gseq: 0,
                open: HashMap::new(),
                write_ahead: false,
            });
        }
        let Some(current) = self.current.as_mut() else {
            return Ok(());
        };
        if row.chain_seq != current.seq + 1 {
            return Err(format!("entry {} of its chain is missing", current.seq + 1));
        }
        if row.prev_hash != current.hash {
            return Err("its link to the previous entry is broken".into());
        }
        if row.seq <= current.gseq {
            return Err("committed before the entry it follows".into());
        }
        match row.check_alone(trusted)? {
            Parsed::Started(s) => {
                self.started += 1;
                current.write_ahead = true;
                let place = (
                    s.tool.clone(),
                    s.arguments_digest.clone(),
                    row.chain_seq,
                    row.seq,
                );
                if current.open.insert(s.call_id.clone(), place).is_some() {
                    return Err(format!("a second started entry of call {}", s.call_id));
                }
            }
            Parsed::Record(r) => {
                self.records += 1;
                match current.open.remove(&r.call_id) {
                    Some((tool, digest, ..)) if tool != r.tool || digest != r.arguments_digest => {
                        return Err(format!(
                            "the record of call {} is not of the call its started entry names (tool or arguments differ)",
                            r.call_id
                        ));
                    }
                    Some(_) => {}
                    None if current.write_ahead
                        && r.limits.is_some()
                        && r.error
                            .as_ref()
                            .is_none_or(|e| e.kind != JOURNAL_UNAVAILABLE) =>
                    {
                        return Err(format!(
                            "call {} ran (its record has limits) without a started entry before it",
                            r.call_id
                        ));
                    }
                    None => {}
                }
            }
        }
        current.seq = row.chain_seq;
        current.hash = row.hash.clone();
        current.gseq = row.seq;
        Ok(())
    }

    /// End the chain walked: its head, and its calls still open.
    fn close(&mut self) {
        let Some(c) = self.current.take() else {
            return;
        };
        let chain = (!c.legacy).then(|| c.chain.clone());
        if c.seq > 0 {
            self.heads.push(super::Head {
                node: chain.clone(),
                seq: c.seq,
                hash: c.hash,
            });
        }
        let mut open: Vec<Unfinished> = c
            .open
            .into_iter()
            .map(|(call_id, (_, _, chain_seq, seq))| Unfinished {
                chain: chain.clone(),
                chain_seq,
                seq,
                call_id,
            })
            .collect();
        open.sort_by_key(|u| u.chain_seq);
        self.unfinished.extend(open);
    }

    /// The walk's result, ended at `first_bad` if an entry did not check out.
    pub fn finish(mut self, first_bad: Option<(i64, String)>) -> super::Verification {
        self.close();
        super::Verification {
            entries: self.entries,
            records: self.records,
            started: self.started,
            first_bad,
            heads: self.heads,
            interrupted: self.unfinished,
            running: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hash is of the parts joined by newlines, as journals written before it was fed in
    /// parts hold it; a chain's id is a line of its own, as the shared store has always made it.
    #[test]
    fn the_hash_is_of_the_joined_parts() {
        let text = "{\"call_id\":\"c\"}";
        assert_eq!(
            entry_hash(GENESIS, None, 7, text),
            crate::digest::sha256_hex(format!("{GENESIS}\n7\n{text}").as_bytes())
        );
        assert_eq!(
            entry_hash(GENESIS, Some("node-a"), 7, text),
            crate::digest::sha256_hex(format!("{GENESIS}\nnode-a\n7\n{text}").as_bytes())
        );
    }

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

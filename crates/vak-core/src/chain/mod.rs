//! The hash chain: what an entry's hash covers, how a stored entry is checked (alone, against
//! its neighbours, and in a walk of its whole chain), and the verdicts and messages every journal
//! gives. The local journal and the shared store read their rows and hand them here; neither
//! checks anything itself, so a tampered entry reads the same wherever it is kept.
//!
//! A chain is written by one writer at a time (a process on a local journal, a node on the shared
//! store). Each entry carries the hash of the one before it in its chain; the entries of every
//! chain are tied together by their global commit order (`seq`), and by `UNIQUE (chain,
//! chain_seq)`. What an entry's text means (a call's `started` entry or its final record) the
//! chain knows only through [`ChainEntry`].

mod checkpoint;
pub mod seal;
mod walk;

pub use checkpoint::{Checkpoint, EntryProof, Inclusion, MAX_CHECKPOINT_RUN, Unsigned};
pub use seal::VerifyError;
pub use walk::ChainCheck;

use serde::Serialize;

/// The hash before a chain's first entry.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The `kind` of the call error of a call refused because its `started` entry could not be
/// written: such a record has limits and, rightly, no `started` entry.
pub const JOURNAL_UNAVAILABLE: &str = "journal_unavailable";

/// Hex digits of a chain's id.
pub const CHAIN_ID_LEN: usize = 12;

/// A new chain's id: random hex (a UUIDv7's random tail), for a journal's writer or a host's
/// chain in memory.
pub fn new_chain_id() -> String {
    let id = uuid::Uuid::now_v7().simple().to_string();
    id[id.len() - CHAIN_ID_LEN..].to_string()
}

/// SHA-256 of an entry: its chain's previous hash, the chain's id, the entry's place in its chain
/// and its text, one per line, fed in parts (every call's entries go through here, and are not
/// copied to be hashed). `chain` is `None` for the one chain of a local journal written before
/// chains had ids: its hashes leave the id out, as they were made.
pub fn entry_hash(prev: &str, chain: Option<&str>, seq: i64, text: &str) -> String {
    hex::encode(entry_digest(prev, chain, seq, text.as_bytes()))
}

/// [`entry_hash`] as bytes, of a text held as bytes (UTF-8, as a serializer wrote it).
pub fn entry_digest(prev: &str, chain: Option<&str>, seq: i64, text: &[u8]) -> [u8; 32] {
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
    hash.update(text);
    hash.finalize().into()
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

/// What the chain needs to know of an entry's text, once parsed: the journal's entry types
/// (a `started` entry, a call record) answer it.
pub trait ChainEntry: Sized {
    /// Read an entry's text.
    fn parse(text: &str) -> Result<Self, serde_json::Error>;
    fn kind(&self) -> Kind;
    fn call_id(&self) -> &str;
    fn tool(&self) -> &str;
    /// SHA-256 of the call's arguments as proposed.
    fn arguments_digest(&self) -> &str;
    /// Whether this is the final record of a call whose tool ran (it has limits), other than one
    /// refused because its `started` entry could not be written ([`JOURNAL_UNAVAILABLE`]): once
    /// a chain holds `started` entries, such a record follows its call's.
    fn ran(&self) -> bool;
    /// Check the entry's signature (made by one of `trusted`, when any are given); the key
    /// that made it.
    fn verify_signature(&self, trusted: &[impl AsRef<str>]) -> Result<String, VerifyError>;
}

/// One stored entry, as a walk reads it.
#[derive(Debug, Clone)]
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
    pub fn check_alone<E: ChainEntry>(&self, trusted: &[impl AsRef<str>]) -> Result<E, String> {
        let parsed = self.check_content::<E>()?;
        if let Err(e) = parsed.verify_signature(trusted) {
            return Err(format!("its signature: {e}"));
        }
        Ok(parsed)
    }

    /// Check the entry by itself but for its signature: its hash over its text and place, and
    /// its text against its columns. The parsed entry, or why it does not check out.
    pub fn check_content<E: ChainEntry>(&self) -> Result<E, String> {
        let chain = (!self.legacy).then_some(self.chain.as_str());
        if entry_hash(&self.prev_hash, chain, self.chain_seq, &self.text) != self.hash {
            return Err("its content does not match its hash".into());
        }
        let parsed = E::parse(&self.text).map_err(|e| format!("its entry does not parse: {e}"))?;
        if self.kind.is_some_and(|k| k != parsed.kind()) {
            return Err("its indexed kind differs from its entry".into());
        }
        if parsed.call_id() != self.call_id {
            return Err("its indexed call id differs from its entry".into());
        }
        Ok(parsed)
    }
}

/// Check an entry read alone (not in a walk of its chain): by itself, and its links. `before` is
/// the hash of the entry before it in its chain ([`GENESIS`] for a chain's first; `None`: that
/// entry is missing); `after`, the hash the entry after it names as its predecessor's (`None`:
/// the entry is its chain's head).
pub fn check_links<E: ChainEntry>(
    row: &Stored,
    before: Option<&str>,
    after: Option<&str>,
) -> Result<(), String> {
    row.check_alone::<E>(&[] as &[&str])?;
    links(row, before, after)
}

/// Check an entry written unsigned, read alone: by itself but for a signature, its links (as
/// [`check_links`] does), and the checkpoint that covers it, given `run`: the hashes of the
/// entries that checkpoint covers, in order (with any key: `vak audit verify --key` is what
/// requires the host's).
pub fn check_covered<E: ChainEntry>(
    row: &Stored,
    before: Option<&str>,
    after: Option<&str>,
    covered: Option<(&Checkpoint, &[String])>,
) -> Result<(), String> {
    row.check_content::<E>()?;
    let Some((cp, run)) = covered.filter(|(cp, _)| {
        cp.chain == row.chain && cp.from <= row.chain_seq && row.chain_seq <= cp.seq
    }) else {
        return Err("it is unsigned, and no checkpoint of its chain covers it".into());
    };
    links(row, before, after)?;
    let own = usize::try_from(row.chain_seq - cp.from)
        .ok()
        .and_then(|i| run.get(i));
    if own != Some(&row.hash) {
        return Err(cp.other_entries());
    }
    cp.check(run.iter().map(String::as_str), &[] as &[&str])
}

/// An entry's links: `before`, the hash of the entry before it ([`GENESIS`] for a chain's first;
/// `None`: that entry is missing); `after`, the hash the next entry names as its predecessor's.
fn links(row: &Stored, before: Option<&str>, after: Option<&str>) -> Result<(), String> {
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

/// The result of a check of every chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verification {
    /// Entries checked: `started` entries and records.
    pub entries: u64,
    /// Final records among them.
    pub records: u64,
    /// `started` entries among them.
    pub started: u64,
    /// The global place of the first entry that does not check out, and why (naming its chain
    /// and its place there).
    pub first_bad: Option<(i64, String)>,
    /// The last entry of each chain that checked out: an auditor who keeps these can later tell
    /// a journal cut short (the one change a chain alone cannot show).
    pub heads: Vec<Head>,
    /// Calls started without a final record whose process is gone: they were interrupted (a
    /// valid state of a chain: the process died mid-call). On a shared store, every call started
    /// without a record, running or not.
    pub interrupted: Vec<Unfinished>,
    /// Calls started without a final record whose process still holds their chain: running now.
    pub running: Vec<Unfinished>,
    /// Entries written unsigned that no checkpoint covers (a local journal with `--signing
    /// checkpoints` whose process died before signing them): linked, not verified.
    pub unsigned: Vec<Unsigned>,
}

impl Verification {
    /// How many entries [`Verification::unsigned`] names.
    pub fn unsigned_entries(&self) -> i64 {
        self.unsigned.iter().map(|u| u.to - u.from + 1).sum()
    }
}

/// The head of one chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Head {
    /// The chain (a node's name on a shared store; `None`: a local journal's legacy chain).
    pub node: Option<String>,
    /// The entry's place in its chain.
    pub seq: i64,
    pub hash: String,
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
}

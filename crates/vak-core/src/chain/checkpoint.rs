//! Checkpoints: a chain's entries signed after they are written, off the call path, as
//! transparency logs sign their tree heads. A checkpoint names a run of entries of one chain
//! (`from` to `seq`) and signs the root of a Merkle tree (RFC 9162 §2.1) whose leaves are their
//! hashes: since each entry's hash covers its text and the hash before it, one signature binds
//! every entry of the run, and one entry is shown to be in it by its leaf's inclusion path
//! alone ([`Checkpoint::proof`]), without the text of any other call. An entry written unsigned
//! checks out when a checkpoint of its chain covers it.
//!
//! The local journal's indexer signs one checkpoint over each batch it inserts, in the same
//! transaction (`--signing checkpoints`): a reader never sees an unsigned entry without its
//! checkpoint, except the entries of a process that died before its indexer took them (they are
//! reported as unsigned, not as verified).

use super::seal::{Seal, VerifyError, WHOLE_ALGORITHM, merkle, verify_whole};
use serde::{Deserialize, Serialize};

/// What a checkpoint's signature signs before its fields: a context string, so that a
/// checkpoint can never be taken for a record's digest or a batch's root.
const CONTEXT: &[u8] = b"vak.checkpoint/1\0";

/// The most entries one checkpoint may cover: what a walk keeps of a chain's recent hashes.
pub const MAX_CHECKPOINT_RUN: usize = 4096;

/// A signed checkpoint of one chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The chain's id.
    pub chain: String,
    /// The first entry it covers (its place in the chain).
    pub from: i64,
    /// The last entry it covers.
    pub seq: i64,
    /// The Merkle root over the hashes of entries `from` to `seq`, lowercase hex.
    pub root: String,
    /// When it was signed (RFC 3339, UTC).
    pub at: String,
    /// The signer's public key, lowercase hex.
    pub public_key: String,
    /// Ed25519 over [`Checkpoint::message`], lowercase hex.
    pub signature: String,
}

/// One entry's inclusion in a checkpoint: its leaf's index in the run and the sibling hashes
/// from the leaf up (lowercase hex).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inclusion {
    pub index: u64,
    pub path: Vec<String>,
}

impl Checkpoint {
    /// The bytes a checkpoint's signature signs: the context, then chain, `from`, `seq`, root
    /// and time, one per line.
    pub fn message(chain: &str, from: i64, seq: i64, root: &str, at: &str) -> Vec<u8> {
        let mut m = CONTEXT.to_vec();
        for part in [chain, &from.to_string(), &seq.to_string(), root, at] {
            m.extend_from_slice(part.as_bytes());
            m.push(b'\n');
        }
        m
    }

    /// The Merkle root over entry hashes (hex), in hex; `None` for none, or a hash that is not
    /// 32 bytes of hex.
    pub fn root_of<'a>(hashes: impl IntoIterator<Item = &'a str>) -> Option<String> {
        let leaves = leaves(hashes)?;
        merkle::root(&leaves).map(hex::encode)
    }

    /// How many entries it covers, when its run is one (`from` at least 1, at most
    /// [`MAX_CHECKPOINT_RUN`] entries).
    pub fn run(&self) -> Option<usize> {
        let n = usize::try_from(self.seq.checked_sub(self.from)?.checked_add(1)?).ok()?;
        (self.from >= 1 && (1..=MAX_CHECKPOINT_RUN).contains(&n)).then_some(n)
    }

    /// Check that `hashes`, the hashes of entries `from` to `seq` of its chain in order, are
    /// the ones it signs, and its signature (made by one of `trusted`, when any are given).
    pub fn check<'a>(
        &self,
        hashes: impl IntoIterator<Item = &'a str>,
        trusted: &[impl AsRef<str>],
    ) -> Result<(), String> {
        let Some(n) = self.run() else {
            return Err(format!(
                "its checkpoint at entry {} names no run of at most {MAX_CHECKPOINT_RUN} entries (from {})",
                self.seq, self.from
            ));
        };
        let hashes: Vec<&str> = hashes.into_iter().collect();
        if hashes.len() != n || Checkpoint::root_of(hashes).as_deref() != Some(&self.root) {
            return Err(self.other_entries());
        }
        self.verify(trusted).map(drop)
    }

    /// Why hashes given for its run are not the ones it signs.
    pub(super) fn other_entries(&self) -> String {
        format!(
            "its checkpoint at entry {} signs other entries: one from entry {} on was changed after it was signed",
            self.seq, self.from
        )
    }

    /// Check the signature alone (made by one of `trusted`, when any are given); the key.
    pub fn verify(&self, trusted: &[impl AsRef<str>]) -> Result<String, String> {
        let seal = Seal {
            algorithm: WHOLE_ALGORITHM,
            public_key: &self.public_key,
            signature: &self.signature,
            batch: None,
        };
        let message = Checkpoint::message(&self.chain, self.from, self.seq, &self.root, &self.at);
        verify_whole(&seal, &message, trusted)
            .map_err(|e: VerifyError| format!("its checkpoint's signature: {e}"))
    }

    /// The inclusion of entry `chain_seq` among `hashes` (entries `from` to `seq`).
    pub fn proof<'a>(
        &self,
        hashes: impl IntoIterator<Item = &'a str>,
        chain_seq: i64,
    ) -> Option<Inclusion> {
        let index = usize::try_from(chain_seq.checked_sub(self.from)?).ok()?;
        let (_, paths) = merkle::tree(&leaves(hashes)?)?;
        let path = paths.get(index)?.iter().map(hex::encode).collect();
        Some(Inclusion {
            index: index as u64,
            path,
        })
    }

    /// Check that the entry whose hash is `hash` is entry `from + inclusion.index` of the run
    /// this checkpoint signs, and its signature.
    pub fn check_inclusion(
        &self,
        hash: &str,
        inclusion: &Inclusion,
        trusted: &[impl AsRef<str>],
    ) -> Result<(), String> {
        let size = self.run().ok_or("the checkpoint names no run of entries")? as u64;
        let leaf = leaves([hash]).ok_or("the entry's hash is not 32 bytes of hex")?[0];
        let path = inclusion
            .path
            .iter()
            .map(|h| hex::decode(h).ok().and_then(|b| b.try_into().ok()))
            .collect::<Option<Vec<merkle::Hash>>>()
            .ok_or("the inclusion path is not hashes in hex")?;
        let root = merkle::root_from_path(inclusion.index, size, leaf, &path)
            .ok_or("the inclusion path does not fit the checkpoint's run")?;
        if hex::encode(root) != self.root {
            return Err("the entry is not among those its checkpoint signs".into());
        }
        self.verify(trusted).map(drop)
    }
}

/// The Merkle leaves of entry hashes in hex.
fn leaves<'a>(hashes: impl IntoIterator<Item = &'a str>) -> Option<Vec<merkle::Hash>> {
    hashes
        .into_iter()
        .map(|h| {
            let bytes: merkle::Hash = hex::decode(h).ok()?.try_into().ok()?;
            Some(merkle::leaf(&bytes))
        })
        .collect()
}

/// A run of a chain's entries written unsigned that no checkpoint covers: their writer ended
/// before signing them, or they were added behind its back. Not verified.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unsigned {
    /// The chain (`None`: a legacy chain).
    pub chain: Option<String>,
    /// The first and last entry of the run (places in the chain).
    pub from: i64,
    pub to: i64,
}

/// An entry with the proof that a checkpoint signs it: what `vak audit show --proof` exports
/// for a record written unsigned, and `vak verify` checks alone (no journal, no other call's
/// text: only the hashes on its path).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryProof {
    /// Always [`EntryProof::FORMAT`].
    pub format: String,
    pub chain: String,
    /// The entry's place in its chain.
    pub entry: i64,
    /// The hash of the entry before it, and its own.
    pub prev_hash: String,
    pub hash: String,
    /// The entry as the journal holds it (a record's JSON, `signature` null).
    pub text: String,
    pub checkpoint: Checkpoint,
    pub inclusion: Inclusion,
}

impl EntryProof {
    pub const FORMAT: &'static str = "vak.entry-proof/1";

    /// Check the proof: the entry's hash over its text and place, its leaf's path to the root
    /// its checkpoint signs, and that signature (by one of `trusted`, when any are given).
    pub fn check(&self, trusted: &[impl AsRef<str>]) -> Result<(), String> {
        if self.format != EntryProof::FORMAT {
            return Err(format!("not a {} proof", EntryProof::FORMAT));
        }
        if super::entry_hash(&self.prev_hash, Some(&self.chain), self.entry, &self.text)
            != self.hash
        {
            return Err("the entry does not match its hash".into());
        }
        let cp = &self.checkpoint;
        if cp.chain != self.chain
            || self.entry.checked_sub(cp.from) != i64::try_from(self.inclusion.index).ok()
        {
            return Err("the checkpoint does not cover this entry's place in its chain".into());
        }
        cp.check_inclusion(&self.hash, &self.inclusion, trusted)
    }
}

//! Checkpoints: a chain's entries signed after they are written, off the call path, as
//! transparency logs sign their tree heads. A checkpoint names a run of entries of one chain
//! (`from` to `seq`) and signs the hash of the last of them; since each entry's hash covers its
//! text and the hash before it, that one signature binds every entry of the run. An entry
//! written unsigned checks out when a checkpoint of its chain covers it.
//!
//! The local journal's indexer signs one checkpoint over each batch it inserts, in the same
//! transaction (`--signing checkpoints`): a reader never sees an unsigned entry without its
//! checkpoint, except the entries of a process that died before its indexer took them (they are
//! reported as unsigned, not as verified).

use super::seal::{Seal, VerifyError, WHOLE_ALGORITHM, verify_whole};
use serde::Serialize;

/// What a checkpoint's signature signs before its fields: a context string, so that a
/// checkpoint can never be taken for a record's digest or a batch's root.
const CONTEXT: &[u8] = b"vak.checkpoint/1\0";

/// A signed checkpoint of one chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Checkpoint {
    /// The chain's id.
    pub chain: String,
    /// The first entry it covers (its place in the chain).
    pub from: i64,
    /// The last entry it covers, whose hash it signs.
    pub seq: i64,
    /// That entry's hash.
    pub head: String,
    /// When it was signed (RFC 3339, UTC).
    pub at: String,
    /// The signer's public key, lowercase hex.
    pub public_key: String,
    /// Ed25519 over [`Checkpoint::message`], lowercase hex.
    pub signature: String,
}

impl Checkpoint {
    /// The bytes a checkpoint's signature signs: the context, then chain, `from`, `seq`, head
    /// and time, one per line.
    pub fn message(chain: &str, from: i64, seq: i64, head: &str, at: &str) -> Vec<u8> {
        let mut m = CONTEXT.to_vec();
        for part in [chain, &from.to_string(), &seq.to_string(), head, at] {
            m.extend_from_slice(part.as_bytes());
            m.push(b'\n');
        }
        m
    }

    /// Check the signature (made by one of `trusted`, when any are given) and that the run it
    /// names is one; the key that made it.
    pub fn verify(&self, trusted: &[impl AsRef<str>]) -> Result<String, String> {
        if self.from < 1 || self.from > self.seq {
            return Err(format!(
                "its checkpoint at entry {} names no run of entries (from {})",
                self.seq, self.from
            ));
        }
        let seal = Seal {
            algorithm: WHOLE_ALGORITHM,
            public_key: &self.public_key,
            signature: &self.signature,
            batch: None,
        };
        let message = Checkpoint::message(&self.chain, self.from, self.seq, &self.head, &self.at);
        verify_whole(&seal, &message, trusted)
            .map_err(|e: VerifyError| format!("its checkpoint's signature: {e}"))
    }
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

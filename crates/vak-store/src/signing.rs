//! Host signatures: every call record is signed by the host (ed25519), so that someone downstream
//! can check that a record, and the receipts inside it, came from this host unaltered. The key is
//! configurable; by default a fresh one is made per process, and its public half is in each
//! record.
//!
//! Records committed together to the local journal are signed as one batch: one ed25519
//! signature over the root of a Merkle tree of their digests (RFC 9162 §2.1), each record keeping
//! its leaf's inclusion path, so that every record still verifies on its own while a group
//! commit of n records costs one signature instead of n. A record alone in its commit (every
//! sequential call) is signed by itself, exactly as before.
//!
//! With [`Signing::Checkpoints`], entries of the local journal are written unsigned and the
//! journal's indexer signs a checkpoint over each batch it inserts (`vak_core::chain::Checkpoint`):
//! the call path pays a digest instead of a signature. Without a journal, a host hashes its
//! records into a chain in memory instead ([`MemoryChain`]) and signs a checkpoint when a proof
//! is asked for.
//!
//! Checking a signature is pure and lives with the chain (`vak_core::chain::seal`); this module
//! reads a record's signature for it. The key ([`HostKey`], in `key`) signs; reading a key file
//! (`keyfile`) is the only file access here.

mod key;
mod keyfile;
pub mod memory_chain;
mod nonces;

pub use key::HostKey;
pub use memory_chain::{MemoryChain, ProofError};
pub use vak_core::chain::seal::{ALGORITHM, BATCH_ALGORITHM, VerifyError, text_digest};

use crate::record::CallRecord;
use vak_core::chain::seal::{self, Seal, merkle};

pub use vak_core::record::{BatchProof, RecordSignature};

/// What the host signs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Signing {
    /// Every record and `started` entry, on the call path (alone, or as one of a group
    /// commit's batch): what a caller gets back is signed. For an embedder who needs a
    /// signature in hand when the call returns.
    Records,
    /// Checkpoints of the local journal's chain, off the call path (the default): a record the
    /// journal took comes back unsigned, with its place in the chain
    /// ([`CallRecord::journaled`](crate::record::CallRecord::journaled)), and is signed once
    /// indexed (within milliseconds); the journal exports it with its proof
    /// ([`crate::journal::Journal::proof`]). Without a journal, records are hashed into a chain
    /// kept in memory and come back unsigned; a checkpoint signs them when a proof is asked
    /// for ([`MemoryChain`], `Host::proof`). A shared store signs records as with `Records`.
    #[default]
    Checkpoints,
}

/// Why a key could not be made or loaded.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("the operating system gave no randomness for a signing key: {0}")]
    Random(String),
    #[error("cannot read the signing key {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the signing key {path} is readable by group or others; chmod 600 it")]
    Permissions { path: String },
    #[error("the signing key must be 64 hex characters (a 32-byte ed25519 seed)")]
    Format,
}

/// `unsigned` (a record's JSON with `signature` null, as serde writes it) with `signature` in
/// its place: the JSON of the signed record, without serializing the record again.
pub(crate) fn with_signature(unsigned: &str, signature: &RecordSignature) -> String {
    // `signature` is the record's last field (`journaled` is never serialized).
    const TAIL: &str = r#","signature":null}"#;
    let sig = serde_json::to_string(signature).unwrap_or_default();
    match unsigned.strip_suffix(TAIL) {
        Some(head) => format!(r#"{head},"signature":{sig}}}"#),
        // Not the shape serde writes: take the slow, certain way.
        None => match serde_json::from_str::<CallRecord>(unsigned) {
            Ok(mut record) => {
                record.signature = Some(signature.clone());
                serde_json::to_string(&record).unwrap_or_default()
            }
            Err(_) => unsigned.to_string(),
        },
    }
}

/// `sig` as the chain's verifier reads it.
fn seal_of(sig: &RecordSignature) -> Seal<'_> {
    Seal {
        algorithm: &sig.algorithm,
        public_key: &sig.public_key,
        signature: &sig.signature,
        batch: sig
            .batch
            .as_ref()
            .map(|b| (b.index, b.size, b.path.as_slice())),
    }
}

fn signed_bytes(record: &CallRecord) -> Vec<u8> {
    // A record holds only strings, numbers and JSON values; serialization does not fail.
    serde_json::to_vec(record).unwrap_or_default()
}

fn record_digest(record: &CallRecord) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(signed_bytes(record)).into()
}

/// Check `record`'s signature; with `trusted`, also that it was made by that public key (hex).
pub fn verify(record: &CallRecord, trusted: Option<&str>) -> Result<String, VerifyError> {
    verify_any(record, trusted.as_slice())
}

/// [`verify`], requiring (unless `trusted` is empty) that one of `trusted` signed it: the keys
/// of several nodes sharing a journal.
pub fn verify_any(record: &CallRecord, trusted: &[impl AsRef<str>]) -> Result<String, VerifyError> {
    let sig = record.signature.as_ref().ok_or(VerifyError::Unsigned)?;
    let mut unsigned = record.clone();
    unsigned.signature = None;
    unsigned.journaled = None;
    if sig.algorithm == seal::WHOLE_ALGORITHM {
        return seal::verify_whole(&seal_of(sig), &signed_bytes(&unsigned), trusted);
    }
    verify_digest(sig, &record_digest(&unsigned), trusted)
}

/// Check `sig` (`ed25519-sha256`, or `ed25519-sha256-batch` with its proof) over `digest`, the
/// SHA-256 of an entry's JSON with `signature` null; with `trusted` not empty, also that one of
/// those keys made it. Returns the signing key (hex). For entries other than call records (the
/// journal's `started` entries), signed the same way.
pub fn verify_digest(
    sig: &RecordSignature,
    digest: &[u8; 32],
    trusted: &[impl AsRef<str>],
) -> Result<String, VerifyError> {
    seal::verify_digest(&seal_of(sig), digest, trusted)
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn key() -> HostKey {
        HostKey::from_seed_hex(&"07".repeat(32)).expect("key")
    }

    pub(super) fn record(n: usize) -> CallRecord {
        CallRecord::new(format!("call_{n}"), "t".into(), "api".into(), "{}")
    }

    /// Every record of a batch of any size verifies alone; a single one is signed as before.
    #[test]
    fn every_record_of_a_batch_verifies_alone() {
        let key = key();
        for n in 1..=19 {
            let mut records: Vec<CallRecord> = (0..n).map(record).collect();
            let texts: Vec<String> = records
                .iter()
                .map(|r| serde_json::to_string(r).expect("json"))
                .collect();
            let digests: Vec<[u8; 32]> = texts.iter().map(|t| text_digest(t)).collect();
            let signatures = key.sign_digests(&digests);
            assert_eq!(signatures.len(), n);
            for ((r, sig), text) in records.iter_mut().zip(signatures).zip(&texts) {
                let expected = if n == 1 { ALGORITHM } else { BATCH_ALGORITHM };
                assert_eq!(sig.algorithm, expected);
                r.signature = Some(sig.clone());
                assert_eq!(verify(r, Some(&key.public_hex())), Ok(key.public_hex()));
                // The spliced JSON is the signed record's own JSON, and verifies once read back.
                let spliced = with_signature(text, &sig);
                assert_eq!(spliced, serde_json::to_string(r).expect("json"));
                let back: CallRecord = serde_json::from_str(&spliced).expect("read back");
                assert!(verify(&back, None).is_ok());
            }
        }
    }

    /// A batch signature covers only its record at its place: altering the record, moving it,
    /// A batch signature covers only its record at its place: altering the record, moving it,
    /// or changing the path is a mismatch.
    #[test]
    fn a_batch_signature_does_not_transfer() {
        let key = key();
        let mut records: Vec<CallRecord> = (0..5).map(record).collect();
        let digests: Vec<[u8; 32]> = records
            .iter()
            .map(|r| text_digest(&serde_json::to_string(r).expect("json")))
            .collect();
        let signatures = key.sign_digests(&digests);
        for (r, s) in records.iter_mut().zip(&signatures) {
            r.signature = Some(s.clone());
        }
        let mut altered = records[2].clone();
        altered.tool = "other".into();
        assert_eq!(verify(&altered, None), Err(VerifyError::Mismatch));
        // Record 2 with record 3's proof.
        let mut swapped = records[2].clone();
        swapped.signature = Some(signatures[3].clone());
        assert_eq!(verify(&swapped, None), Err(VerifyError::Mismatch));
        let mut moved = records[2].clone();
        if let Some(b) = moved.signature.as_mut().and_then(|s| s.batch.as_mut()) {
            b.index = 3;
        }
        assert_eq!(verify(&moved, None), Err(VerifyError::Mismatch));
        let mut cut = records[2].clone();
        if let Some(b) = cut.signature.as_mut().and_then(|s| s.batch.as_mut()) {
            b.path.pop();
        }
        assert_eq!(verify(&cut, None), Err(VerifyError::Mismatch));
        let mut unproved = records[2].clone();
        if let Some(s) = unproved.signature.as_mut() {
            s.batch = None;
        }
        assert_eq!(verify(&unproved, None), Err(VerifyError::Malformed));
    }
}

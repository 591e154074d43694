//! Host signatures: every call record is signed by the host (ed25519), so that someone downstream
//! can check that a record, and the receipts inside it, came from this host unaltered. The key is
//! configurable; by default a fresh one is made per process, and its public half is in each
//! record.

use crate::record::CallRecord;
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use serde::{Deserialize, Serialize};
use std::path::Path;

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

/// Why a record's signature does not check out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    #[error("the record is not signed")]
    Unsigned,
    #[error("the signature is not an ed25519 signature in hex")]
    Malformed,
    #[error("the record was signed by {found}, not by a trusted key ({trusted})")]
    UntrustedKey { found: String, trusted: String },
    #[error(
        "the signature does not match the record: it was altered after signing, or signed by another key"
    )]
    Mismatch,
}

/// The host's signing key.
pub struct HostKey {
    key: SigningKey,
}

impl std::fmt::Debug for HostKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HostKey({})", self.public_hex())
    }
}

impl HostKey {
    /// A fresh key from the operating system's randomness.
    pub fn generate() -> Result<HostKey, KeyError> {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).map_err(|e| KeyError::Random(e.to_string()))?;
        Ok(HostKey {
            key: SigningKey::from_bytes(&seed),
        })
    }

    /// A key from its 32-byte seed in hex.
    pub fn from_seed_hex(hex_seed: &str) -> Result<HostKey, KeyError> {
        let bytes = hex::decode(hex_seed.trim()).map_err(|_| KeyError::Format)?;
        let seed: [u8; 32] = bytes.try_into().map_err(|_| KeyError::Format)?;
        Ok(HostKey {
            key: SigningKey::from_bytes(&seed),
        })
    }

    /// A key from a file holding its seed in hex; the file must be readable by its owner only.
    pub fn load(path: &Path) -> Result<HostKey, KeyError> {
        let shown = path.display().to_string();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let meta = std::fs::metadata(path).map_err(|source| KeyError::Read {
                path: shown.clone(),
                source,
            })?;
            if meta.permissions().mode() & 0o077 != 0 {
                return Err(KeyError::Permissions { path: shown });
            }
        }
        let text = std::fs::read_to_string(path).map_err(|source| KeyError::Read {
            path: shown,
            source,
        })?;
        HostKey::from_seed_hex(&text)
    }

    /// The seed, lowercase hex: what a key file holds. Keep it secret.
    pub fn seed_hex(&self) -> String {
        hex::encode(self.key.to_bytes())
    }

    /// The public key, lowercase hex.
    pub fn public_hex(&self) -> String {
        hex::encode(self.key.verifying_key().as_bytes())
    }

    /// Sign `record` in place.
    pub fn sign(&self, record: &mut CallRecord) {
        record.signature = None;
        // ed25519 hashes its message twice: signing the 32-byte digest instead of the whole
        // record halves the signing cost of a typical record (see `vak bench`).
        let digest = record_digest(record);
        let signature = self.key.sign(&digest);
        record.signature = Some(RecordSignature {
            algorithm: ALGORITHM.into(),
            public_key: self.public_hex(),
            signature: hex::encode(signature.to_bytes()),
        });
    }
}

/// The signature algorithm of records signed now.
pub const ALGORITHM: &str = "ed25519-sha256";

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
    if !trusted.is_empty()
        && !trusted
            .iter()
            .any(|t| t.as_ref().trim().eq_ignore_ascii_case(&sig.public_key))
    {
        return Err(VerifyError::UntrustedKey {
            found: sig.public_key.clone(),
            trusted: trusted
                .iter()
                .map(|t| t.as_ref().trim())
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    let key_bytes: [u8; 32] = hex::decode(&sig.public_key)
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or(VerifyError::Malformed)?;
    let sig_bytes: [u8; 64] = hex::decode(&sig.signature)
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or(VerifyError::Malformed)?;
    let key = VerifyingKey::from_bytes(&key_bytes).map_err(|_| VerifyError::Malformed)?;
    let mut unsigned = record.clone();
    unsigned.signature = None;
    unsigned.journaled = None;
    let signature = Signature::from_bytes(&sig_bytes);
    let checked = match sig.algorithm.as_str() {
        ALGORITHM => key.verify(&record_digest(&unsigned), &signature),
        "ed25519" => key.verify(&signed_bytes(&unsigned), &signature),
        _ => return Err(VerifyError::Malformed),
    };
    checked.map_err(|_| VerifyError::Mismatch)?;
    Ok(sig.public_key.clone())
}

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
//! A key may make its Ed25519 nonces ahead of time (opt-in: [`HostKey::with_nonces_ahead`],
//! `vak --nonces-ahead`): the point multiplication `R = r·B`, most of a signature's cost, runs
//! on a thread of its own between calls, and the call path keeps only a SHA-512 and a scalar
//! multiply-add. The signatures are ordinary Ed25519 signatures; only how `r` is chosen differs
//! (see [`Nonce`]). It is not the default because nonces held in memory do not survive a
//! snapshot safely: a process (or VM) restored twice from one memory image would sign two
//! different records with one nonce in each copy, and two such signatures give the key away.
//! RFC 8032's deterministic nonce, the default, derives `r` from the message and has no such
//! hazard.

use crate::record::CallRecord;
use curve25519_dalek::{EdwardsPoint, Scalar};
use ed25519_dalek::hazmat::ExpandedSecretKey;
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use zeroize::{Zeroize, Zeroizing};

pub use vak_core::record::{BatchProof, RecordSignature};

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
    /// The secret scalar and nonce prefix of `key` (SHA-512 of its seed, RFC 8032 §5.1.5), for
    /// signing with a nonce made ahead. Zeroed when dropped.
    expanded: ExpandedSecretKey,
    /// Nonces made ahead by a thread of their own; `None`: every signature is made whole.
    nonces: Option<Arc<Nonces>>,
}

impl std::fmt::Debug for HostKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HostKey({})", self.public_hex())
    }
}

impl Drop for HostKey {
    fn drop(&mut self) {
        // The thread making nonces stops, and the nonces it made are zeroed as they drop.
        if let Some(nonces) = &self.nonces {
            nonces.close();
        }
    }
}

/// An Ed25519 nonce made ahead: the secret `r` and its point `R = r·B`, compressed.
///
/// `r` is SHA-512 of the key's nonce prefix and 64 bytes of the operating system's randomness,
/// reduced modulo the group order, where RFC 8032 hashes the prefix with the message. A verifier
/// never sees `r` (it checks `S·B = R + H(R ‖ A ‖ M)·A`), so the signatures are the same kind;
/// what matters is that `r` is secret, uniform and never used twice. It stays secret with the
/// prefix even should the randomness be guessable; each nonce is moved out of the pool once and
/// dropped (zeroed) after its one signature. Unlike RFC 8032's, two signatures of one message
/// differ.
struct Nonce {
    r: Scalar,
    big_r: [u8; 32],
}

impl Drop for Nonce {
    fn drop(&mut self) {
        self.r.zeroize();
    }
}

impl Nonce {
    /// A fresh nonce; `None` when the operating system gives no randomness.
    fn make(prefix: &[u8; 32]) -> Option<Nonce> {
        use sha2::Digest;
        let mut random = Zeroizing::new([0u8; 64]);
        getrandom::fill(random.as_mut_slice()).ok()?;
        let mut wide = Zeroizing::new([0u8; 64]);
        let mut h = sha2::Sha512::new();
        h.update(prefix);
        h.update(random.as_slice());
        wide.copy_from_slice(&h.finalize());
        let r = Scalar::from_bytes_mod_order_wide(&wide);
        let big_r = EdwardsPoint::mul_base(&r).compress().to_bytes();
        Some(Nonce { r, big_r })
    }
}

/// The nonces a key has ready, refilled by the thread of [`HostKey::with_nonces_ahead`].
struct Nonces {
    stock: Mutex<Vec<Nonce>>,
    /// Told when the stock falls to [`NONCES_LOW`].
    low: Condvar,
    closed: AtomicBool,
    /// Set by [`HostKey::set_nonces_ahead`]: signatures are made whole meanwhile.
    paused: AtomicBool,
}

/// Nonces a pool holds when full. A burst that empties it signs the rest whole.
const NONCES_FULL: usize = 64;
/// Nonces made before [`HostKey::with_nonces_ahead`] returns (about 15 µs each).
const NONCES_FIRST: usize = 4;
/// The stock at which the thread refills the pool: once per 32 signatures, not per signature
/// (every wake-up of a thread costs tens of microseconds on small VMs).
const NONCES_LOW: usize = 32;

impl Nonces {
    /// A nonce, when one is ready. The lock is held only to pop or to add made nonces, never
    /// while one is made: the call path never waits for a nonce (it signs whole instead).
    fn take(&self) -> Option<Nonce> {
        if self.paused.load(Ordering::Relaxed) {
            return None;
        }
        let mut stock = self.stock.lock().unwrap_or_else(|p| p.into_inner());
        let nonce = stock.pop()?;
        if stock.len() == NONCES_LOW {
            self.low.notify_one();
        }
        Some(nonce)
    }

    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        // Taking the lock orders the flag before the thread's next check of it.
        let _stock = self.stock.lock().unwrap_or_else(|p| p.into_inner());
        self.low.notify_one();
    }

    /// The refilling thread: tops the pool up whenever it falls to [`NONCES_LOW`].
    fn refill(&self, prefix: &[u8; 32]) {
        loop {
            let need = {
                let mut stock = self.stock.lock().unwrap_or_else(|p| p.into_inner());
                while stock.len() > NONCES_LOW && !self.closed.load(Ordering::Acquire) {
                    stock = self.low.wait(stock).unwrap_or_else(|p| p.into_inner());
                }
                if self.closed.load(Ordering::Acquire) {
                    return;
                }
                NONCES_FULL - stock.len()
            };
            // Made outside the lock, so that callers keep taking meanwhile.
            let mut fresh = Vec::with_capacity(need);
            for _ in 0..need {
                if self.closed.load(Ordering::Acquire) {
                    return;
                }
                match Nonce::make(prefix) {
                    Some(nonce) => fresh.push(nonce),
                    None => {
                        tracing::warn!("no randomness for signing nonces: signing whole from now");
                        return;
                    }
                }
            }
            // Only taken from since `need` was counted: at most full.
            self.stock
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend(fresh);
        }
    }
}

impl HostKey {
    /// A fresh key from the operating system's randomness.
    pub fn generate() -> Result<HostKey, KeyError> {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).map_err(|e| KeyError::Random(e.to_string()))?;
        Ok(HostKey::of(SigningKey::from_bytes(&seed)))
    }

    fn of(key: SigningKey) -> HostKey {
        let seed = Zeroizing::new(key.to_bytes());
        HostKey {
            expanded: ExpandedSecretKey::from(&*seed),
            key,
            nonces: None,
        }
    }

    /// This key, making its signatures' nonces ahead of time on a thread of its own (named
    /// `vak-nonces`): signing a record then costs the call path about a quarter of signing it
    /// whole (5.7 against 21.5 µs in `vak bench`, its JSON and digest included) when the pool
    /// has a nonce ready (a burst that empties it signs whole). Where the thread cannot start,
    /// the key signs whole. Not for a process that may be restored from one memory snapshot
    /// more than once (see the module's documentation).
    pub fn with_nonces_ahead(mut self) -> HostKey {
        if self.nonces.is_some() {
            return self;
        }
        // A few made here, so that the first calls find nonces whatever the thread's start.
        let mut stock = Vec::with_capacity(NONCES_FULL);
        stock.extend((0..NONCES_FIRST).map_while(|_| Nonce::make(&self.expanded.hash_prefix)));
        let pool = Arc::new(Nonces {
            stock: Mutex::new(stock),
            low: Condvar::new(),
            closed: AtomicBool::new(false),
            paused: AtomicBool::new(false),
        });
        let prefix = Zeroizing::new(self.expanded.hash_prefix);
        let filler = pool.clone();
        match std::thread::Builder::new()
            .name("vak-nonces".into())
            .spawn(move || filler.refill(&prefix))
        {
            Ok(_) => self.nonces = Some(pool),
            Err(e) => tracing::warn!(error = %e, "cannot start the nonce thread: signing whole"),
        }
        self
    }

    /// A key from its 32-byte seed in hex.
    pub fn from_seed_hex(hex_seed: &str) -> Result<HostKey, KeyError> {
        let bytes = hex::decode(hex_seed.trim()).map_err(|_| KeyError::Format)?;
        let seed: Zeroizing<[u8; 32]> =
            Zeroizing::new(bytes.try_into().map_err(|_| KeyError::Format)?);
        Ok(HostKey::of(SigningKey::from_bytes(&seed)))
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
        record.signature = self.sign_digests(&[digest]).pop();
    }

    /// Whether signatures take nonces made ahead (when the key has a pool): off, each is made
    /// whole on the signing thread. For measurements that keep one thread of work per core.
    pub(crate) fn set_nonces_ahead(&self, on: bool) {
        if let Some(pool) = &self.nonces {
            pool.paused.store(!on, Ordering::Relaxed);
        }
    }

    /// Waits (up to a second) until the pool holds `n` nonces: for benchmarks that time the
    /// call path's part of a signature. Without a pool, returns at once.
    pub(crate) fn await_nonces(&self, n: usize) {
        let Some(pool) = &self.nonces else { return };
        let until = std::time::Instant::now() + std::time::Duration::from_secs(1);
        while pool.stock.lock().map_or(0, |s| s.len()) < n.min(NONCES_FULL)
            && std::time::Instant::now() < until
        {
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    }

    /// An Ed25519 signature of `message`: with a nonce made ahead when one is ready, else whole
    /// (RFC 8032's deterministic nonce).
    fn sign_message(&self, message: &[u8]) -> Signature {
        use sha2::Digest;
        let Some(nonce) = self.nonces.as_ref().and_then(|n| n.take()) else {
            return self.key.sign(message);
        };
        // RFC 8032 §5.1.6, steps 4 to 6, with `r` and `R` from the nonce: k = H(R ‖ A ‖ M),
        // S = r + k·a mod L.
        let mut h = sha2::Sha512::new();
        h.update(nonce.big_r);
        h.update(self.key.verifying_key().as_bytes());
        h.update(message);
        let mut wide = [0u8; 64];
        wide.copy_from_slice(&h.finalize());
        let k = Scalar::from_bytes_mod_order_wide(&wide);
        let s = k * self.expanded.scalar + nonce.r;
        Signature::from_components(nonce.big_r, s.to_bytes())
    }

    /// The signatures of the records whose digests (SHA-256 of the JSON with `signature` null)
    /// are `digests`, in order: one ed25519 signature for all of them. One digest is signed by
    /// itself (`ed25519-sha256`); several, as a batch (`ed25519-sha256-batch`).
    pub fn sign_digests(&self, digests: &[[u8; 32]]) -> Vec<RecordSignature> {
        let public_key = self.public_hex();
        if let [digest] = digests {
            return vec![RecordSignature {
                algorithm: ALGORITHM.into(),
                public_key,
                signature: hex::encode(self.sign_message(digest).to_bytes()),
                batch: None,
            }];
        }
        let leaves: Vec<[u8; 32]> = digests.iter().map(merkle::leaf).collect();
        let Some((root, paths)) = merkle::tree(&leaves) else {
            return Vec::new();
        };
        let signature = hex::encode(self.sign_message(&merkle::signed_message(&root)).to_bytes());
        let size = digests.len() as u64;
        paths
            .into_iter()
            .enumerate()
            .map(|(index, path)| RecordSignature {
                algorithm: BATCH_ALGORITHM.into(),
                public_key: public_key.clone(),
                signature: signature.clone(),
                batch: Some(BatchProof {
                    index: index as u64,
                    size,
                    path: path.iter().map(hex::encode).collect(),
                }),
            })
            .collect()
    }
}

/// The signature algorithm of a record signed by itself.
pub const ALGORITHM: &str = "ed25519-sha256";
/// The signature algorithm of a record signed in a batch: ed25519 over the batch's Merkle root
/// (see [`BatchProof`]).
pub const BATCH_ALGORITHM: &str = "ed25519-sha256-batch";

/// The SHA-256 of a record's JSON as written with `signature` null: what is signed.
pub(crate) fn text_digest(text: &str) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(text.as_bytes()).into()
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

/// The Merkle tree of a batch (RFC 9162 §2.1: SHA-256, 0x00 before a leaf, 0x01 before a node).
mod merkle {
    use sha2::{Digest, Sha256};

    pub type Hash = [u8; 32];

    /// What the batch's signature signs: a context string, then the root, so that a root can
    /// never be taken for a single record's digest.
    pub fn signed_message(root: &Hash) -> Vec<u8> {
        let mut m = b"vak.record-batch/1\0".to_vec();
        m.extend_from_slice(root);
        m
    }

    pub fn leaf(digest: &Hash) -> Hash {
        Sha256::new()
            .chain_update([0u8])
            .chain_update(digest)
            .finalize()
            .into()
    }

    fn node(left: &Hash, right: &Hash) -> Hash {
        Sha256::new()
            .chain_update([1u8])
            .chain_update(left)
            .chain_update(right)
            .finalize()
            .into()
    }

    /// The root of `leaves` and every leaf's inclusion path (siblings from the leaf up).
    /// `None` for no leaves.
    pub fn tree(leaves: &[Hash]) -> Option<(Hash, Vec<Vec<Hash>>)> {
        match leaves {
            [] => None,
            [one] => Some((*one, vec![Vec::new()])),
            _ => {
                // The largest power of two below the count: the left subtree is complete.
                let k = leaves.len().next_power_of_two() / 2;
                let (left, mut left_paths) = tree(&leaves[..k])?;
                let (right, right_paths) = tree(&leaves[k..])?;
                for p in &mut left_paths {
                    p.push(right);
                }
                left_paths.extend(right_paths.into_iter().map(|mut p| {
                    p.push(left);
                    p
                }));
                Some((node(&left, &right), left_paths))
            }
        }
    }

    /// The root that `leaf` at `index` of `size` leaves and its `path` lead to (RFC 9162
    /// §2.1.3.2), or `None` when the path cannot belong to such a tree.
    pub fn root_from_path(index: u64, size: u64, leaf: Hash, path: &[Hash]) -> Option<Hash> {
        if index >= size {
            return None;
        }
        let (mut f, mut s) = (index, size - 1);
        let mut r = leaf;
        for p in path {
            if s == 0 {
                return None;
            }
            if f & 1 == 1 || f == s {
                r = node(p, &r);
                if f & 1 == 0 {
                    while f & 1 == 0 && f != 0 {
                        f >>= 1;
                        s >>= 1;
                    }
                }
            } else {
                r = node(&r, p);
            }
            f >>= 1;
            s >>= 1;
        }
        (s == 0).then_some(r)
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
    if sig.algorithm == "ed25519" {
        let (key, signature) = parts(sig, trusted)?;
        key.verify(&signed_bytes(&unsigned), &signature)
            .map_err(|_| VerifyError::Mismatch)?;
        return Ok(sig.public_key.clone());
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
    let (key, signature) = parts(sig, trusted)?;
    let checked = match sig.algorithm.as_str() {
        ALGORITHM => key.verify(digest, &signature),
        BATCH_ALGORITHM => {
            let proof = sig.batch.as_ref().ok_or(VerifyError::Malformed)?;
            let path = proof
                .path
                .iter()
                .map(|h| hex::decode(h).ok().and_then(|b| b.try_into().ok()))
                .collect::<Option<Vec<merkle::Hash>>>()
                .ok_or(VerifyError::Malformed)?;
            let leaf = merkle::leaf(digest);
            let root = merkle::root_from_path(proof.index, proof.size, leaf, &path)
                .ok_or(VerifyError::Mismatch)?;
            key.verify(&merkle::signed_message(&root), &signature)
        }
        _ => return Err(VerifyError::Malformed),
    };
    checked.map_err(|_| VerifyError::Mismatch)?;
    Ok(sig.public_key.clone())
}

/// The key and signature of `sig`, once its key is one of `trusted` (when any are given).
fn parts(
    sig: &RecordSignature,
    trusted: &[impl AsRef<str>],
) -> Result<(VerifyingKey, Signature), VerifyError> {
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
    Ok((key, Signature::from_bytes(&sig_bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> HostKey {
        HostKey::from_seed_hex(&"07".repeat(32)).expect("key")
    }

    fn record(n: usize) -> CallRecord {
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

    /// Waits until `key`'s pool holds at least `n` nonces (the thread fills it at once).
    fn stocked(key: &HostKey, n: usize) {
        let pool = key.nonces.as_ref().expect("a pool");
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while pool.stock.lock().expect("pool").len() < n {
            assert!(std::time::Instant::now() < until, "the pool was not filled");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// Signatures made with nonces made ahead are ordinary Ed25519 signatures: the strict
    /// verifier of ed25519-dalek accepts them, alone and in batches, each nonce is used once,
    /// and a key whose pool is empty signs whole (RFC 8032's deterministic signature).
    #[test]
    fn nonces_made_ahead_give_ordinary_signatures() {
        let whole = key();
        let ahead = key().with_nonces_ahead();
        let public = whole.key.verifying_key();
        let mut points = std::collections::HashSet::new();
        let mut with_nonce = 0;
        for round in 0..4u8 {
            stocked(&ahead, NONCES_LOW);
            for i in 0..40u8 {
                let digest = [round.wrapping_mul(41).wrapping_add(i); 32];
                let sig = ahead.sign_message(&digest);
                public
                    .verify_strict(&digest, &sig)
                    .expect("a valid signature");
                if sig != whole.sign_message(&digest) {
                    with_nonce += 1;
                    assert!(points.insert(sig.r_bytes().to_vec()), "a nonce used twice");
                }
            }
            let records: Vec<CallRecord> = (0..7).map(record).collect();
            let digests: Vec<[u8; 32]> = records.iter().map(record_digest).collect();
            for (mut r, sig) in records.into_iter().zip(ahead.sign_digests(&digests)) {
                r.signature = Some(sig);
                assert_eq!(
                    verify(&r, Some(&whole.public_hex())),
                    Ok(whole.public_hex())
                );
            }
        }
        // Each round starts with at least 32 nonces ready, which its first 32 signatures take.
        assert!(
            with_nonce >= 4 * 32,
            "only {with_nonce} signatures took a nonce"
        );
        // Two signatures of one message with nonces differ; both verify.
        stocked(&ahead, 2);
        let (a, b) = (ahead.sign_message(b"m"), ahead.sign_message(b"m"));
        assert_ne!(a, b);
        assert!(public.verify_strict(b"m", &a).is_ok() && public.verify_strict(b"m", &b).is_ok());
        // Without a pool the signature is RFC 8032's, the same every time.
        assert_eq!(whole.sign_message(b"m"), whole.sign_message(b"m"));
    }

    /// Dropping the key stops its nonce thread, which drops (and zeroes) the nonces it held.
    #[test]
    fn dropping_the_key_stops_its_nonce_thread() {
        let key = key().with_nonces_ahead();
        stocked(&key, 1);
        let pool = Arc::downgrade(key.nonces.as_ref().expect("a pool"));
        drop(key);
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while pool.upgrade().is_some() {
            assert!(
                std::time::Instant::now() < until,
                "the nonce thread did not stop"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

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

    /// The tree matches RFC 9162's definition on a small case worked by hand.
    #[test]
    fn merkle_root_of_three() {
        let l: Vec<merkle::Hash> = (0u8..3).map(|i| merkle::leaf(&[i; 32])).collect();
        let (root, paths) = merkle::tree(&l).expect("tree");
        use sha2::{Digest, Sha256};
        let node = |a: &[u8], b: &[u8]| -> merkle::Hash {
            Sha256::new()
                .chain_update([1u8])
                .chain_update(a)
                .chain_update(b)
                .finalize()
                .into()
        };
        assert_eq!(root, node(&node(&l[0], &l[1]), &l[2]));
        assert_eq!(paths[2], vec![node(&l[0], &l[1])]);
        assert_eq!(paths[0], vec![l[1], l[2]]);
    }
}

//! The host's signing key: signing records and entries (alone, or a batch under one Merkle
//! root). Signing is computation; the key's randomness and its nonce thread keep it in the host.
//!
//! A key may make its Ed25519 nonces ahead of time (opt-in: [`HostKey::with_nonces_ahead`],
//! `vak --nonces-ahead`): the point multiplication `R = r·B`, most of a signature's cost, runs
//! on a thread of its own between calls, and the call path keeps only a SHA-512 and a scalar
//! multiply-add. The signatures are ordinary Ed25519 signatures; only how `r` is chosen differs
//! (see `nonces::Nonce`). It is not the default because nonces held in memory do not survive a
//! snapshot safely: a process (or VM) restored twice from one memory image would sign two
//! different records with one nonce in each copy, and two such signatures give the key away.
//! RFC 8032's deterministic nonce, the default, derives `r` from the message and has no such
//! hazard.

use super::nonces::{NONCES_FIRST, NONCES_FULL, Nonce, Nonces};
use super::{ALGORITHM, BATCH_ALGORITHM, BatchProof, KeyError, RecordSignature, merkle};
use crate::record::CallRecord;
use curve25519_dalek::Scalar;
use ed25519_dalek::hazmat::ExpandedSecretKey;
use ed25519_dalek::{Signature, Signer, SigningKey};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use zeroize::Zeroizing;

/// The host's signing key.
pub struct HostKey {
    pub(super) key: SigningKey,
    /// The secret scalar and nonce prefix of `key` (SHA-512 of its seed, RFC 8032 §5.1.5), for
    /// signing with a nonce made ahead. Zeroed when dropped.
    expanded: ExpandedSecretKey,
    /// Nonces made ahead by a thread of their own; `None`: every signature is made whole.
    pub(super) nonces: Option<Arc<Nonces>>,
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

    /// The seed, lowercase hex: what a key file holds. Keep it secret.
    pub fn seed_hex(&self) -> String {
        hex::encode(self.key.to_bytes())
    }

    /// The public key, lowercase hex.
    pub fn public_hex(&self) -> String {
        hex::encode(self.key.verifying_key().as_bytes())
    }

    /// A 32-byte secret for `purpose`, derived from this key (SHA-256 of a domain label, the
    /// purpose and the seed): the same on every node given the same key file, useless for
    /// signing, and not the seed.
    pub fn derived_secret(&self, purpose: &str) -> Zeroizing<[u8; 32]> {
        use sha2::{Digest, Sha256};
        let seed = Zeroizing::new(self.key.to_bytes());
        let mut h = Sha256::new();
        h.update(b"vak/host-key/derived/v1\0");
        h.update(purpose.as_bytes());
        h.update(b"\0");
        h.update(seed.as_slice());
        Zeroizing::new(h.finalize().into())
    }

    /// Sign `record` in place.
    pub fn sign(&self, record: &mut CallRecord) {
        record.signature = None;
        // ed25519 hashes its message twice: signing the 32-byte digest instead of the whole
        // record halves the signing cost of a typical record (see `vak bench`).
        let digest = super::record_digest(record);
        record.signature = self.sign_digests(&[digest]).pop();
    }

    /// Whether signatures take nonces made ahead (when the key has a pool): off, each is made
    /// whole on the signing thread. For measurements that keep one thread of work per core
    /// (`vak bench`); not an embedder's setting.
    #[doc(hidden)]
    pub fn set_nonces_ahead(&self, on: bool) {
        if let Some(pool) = &self.nonces {
            pool.paused.store(!on, Ordering::Relaxed);
        }
    }

    /// Waits (up to a second) until the pool holds `n` nonces: for benchmarks that time the
    /// call path's part of a signature. Without a pool, returns at once.
    #[doc(hidden)]
    pub fn await_nonces(&self, n: usize) {
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
    pub(super) fn sign_message(&self, message: &[u8]) -> Signature {
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

    /// A checkpoint of `chain` over its entries `from` to `seq`, whose hashes' Merkle root is
    /// `root` ([`vak_core::chain::Checkpoint::root_of`]), signed now.
    pub fn sign_checkpoint(
        &self,
        chain: &str,
        from: i64,
        seq: i64,
        root: String,
    ) -> vak_core::chain::Checkpoint {
        let at = jiff::Timestamp::now().to_string();
        let message = vak_core::chain::Checkpoint::message(chain, from, seq, &root, &at);
        vak_core::chain::Checkpoint {
            chain: chain.to_string(),
            from,
            seq,
            root,
            at,
            public_key: self.public_hex(),
            signature: hex::encode(self.sign_message(&message).to_bytes()),
        }
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

#[cfg(test)]
mod tests {
    use super::super::nonces::NONCES_LOW;
    use super::super::tests::{key, record};
    use super::super::{record_digest, verify};
    use super::*;

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
}

//! Ed25519 nonces made ahead of time, on a thread of their own (opt-in: see
//! [`HostKey::with_nonces_ahead`](super::HostKey::with_nonces_ahead)): randomness and a
//! background thread, so they stay in the host with the key.

use curve25519_dalek::{EdwardsPoint, Scalar};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use zeroize::{Zeroize, Zeroizing};

/// An Ed25519 nonce made ahead: the secret `r` and its point `R = r·B`, compressed.
///
/// `r` is SHA-512 of the key's nonce prefix and 64 bytes of the operating system's randomness,
/// reduced modulo the group order, where RFC 8032 hashes the prefix with the message. A verifier
/// never sees `r` (it checks `S·B = R + H(R ‖ A ‖ M)·A`), so the signatures are the same kind;
/// what matters is that `r` is secret, uniform and never used twice. It stays secret with the
/// prefix even should the randomness be guessable; each nonce is moved out of the pool once and
/// dropped (zeroed) after its one signature. Unlike RFC 8032's, two signatures of one message
/// differ.
pub(super) struct Nonce {
    pub(super) r: Scalar,
    pub(super) big_r: [u8; 32],
}

impl Drop for Nonce {
    fn drop(&mut self) {
        self.r.zeroize();
    }
}

impl Nonce {
    /// A fresh nonce; `None` when the operating system gives no randomness.
    pub(super) fn make(prefix: &[u8; 32]) -> Option<Nonce> {
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
pub(super) struct Nonces {
    pub(super) stock: Mutex<Vec<Nonce>>,
    /// Told when the stock falls to [`NONCES_LOW`].
    pub(super) low: Condvar,
    pub(super) closed: AtomicBool,
    /// Set by [`HostKey::set_nonces_ahead`]: signatures are made whole meanwhile.
    pub(super) paused: AtomicBool,
}

/// Nonces a pool holds when full. A burst that empties it signs the rest whole.
pub(super) const NONCES_FULL: usize = 64;
/// Nonces made before [`HostKey::with_nonces_ahead`] returns (about 15 µs each).
pub(super) const NONCES_FIRST: usize = 4;
/// The stock at which the thread refills the pool: once per 32 signatures, not per signature
/// (every wake-up of a thread costs tens of microseconds on small VMs).
pub(super) const NONCES_LOW: usize = 32;

impl Nonces {
    /// A nonce, when one is ready. The lock is held only to pop or to add made nonces, never
    /// while one is made: the call path never waits for a nonce (it signs whole instead).
    pub(super) fn take(&self) -> Option<Nonce> {
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

    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        // Taking the lock orders the flag before the thread's next check of it.
        let _stock = self.stock.lock().unwrap_or_else(|p| p.into_inner());
        self.low.notify_one();
    }

    /// The refilling thread: tops the pool up whenever it falls to [`NONCES_LOW`].
    pub(super) fn refill(&self, prefix: &[u8; 32]) {
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

//! SHA-256 helpers: the one digest the host uses for components, arguments, results and receipts.

use sha2::{Digest, Sha256};

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// A [`std::hash::Hasher`] that feeds SHA-256, for turning wasmtime's `impl Hash` engine
/// fingerprint into a stable digest (`finish` is unused).
#[derive(Default)]
pub struct Sha256Hasher(pub Sha256);

impl std::hash::Hasher for Sha256Hasher {
    fn finish(&self) -> u64 {
        0
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

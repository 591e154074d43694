//! Entry signatures, checked: ed25519 over the SHA-256 of an entry's JSON (with `signature`
//! null), signed alone or as one of a batch (one signature over the root of a Merkle tree of the
//! batch's digests, RFC 9162 §2.1, each entry keeping its leaf's inclusion path). Pure
//! computation: making signatures needs the host's key, and stays with it.

use ed25519_dalek::{Signature, Verifier, VerifyingKey};

/// The signature algorithm of an entry signed by itself.
pub const ALGORITHM: &str = "ed25519-sha256";
/// The signature algorithm of an entry signed in a batch: ed25519 over the batch's Merkle root.
pub const BATCH_ALGORITHM: &str = "ed25519-sha256-batch";
/// The algorithm of records signed before the digest was introduced: ed25519 over the JSON.
pub const WHOLE_ALGORITHM: &str = "ed25519";

/// Why an entry's signature does not check out.
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

/// A signature as an entry carries it (its fields, borrowed).
#[derive(Debug, Clone, Copy)]
pub struct Seal<'a> {
    pub algorithm: &'a str,
    /// The signer's public key, lowercase hex (32 bytes).
    pub public_key: &'a str,
    /// The signature, lowercase hex.
    pub signature: &'a str,
    /// For a batch: the entry's leaf index among `size` leaves, and the sibling hashes from the
    /// leaf up to the root (lowercase hex).
    pub batch: Option<(u64, u64, &'a [String])>,
}

/// The SHA-256 of an entry's JSON as written with `signature` null: what is signed.
pub fn text_digest(text: &str) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(text.as_bytes()).into()
}

/// Check `seal` (`ed25519-sha256`, or `ed25519-sha256-batch` with its proof) over `digest`, the
/// SHA-256 of an entry's JSON with `signature` null; with `trusted` not empty, also that one of
/// those keys made it. Returns the signing key (hex).
pub fn verify_digest(
    seal: &Seal<'_>,
    digest: &[u8; 32],
    trusted: &[impl AsRef<str>],
) -> Result<String, VerifyError> {
    let (key, signature) = parts(seal, trusted)?;
    let checked = match seal.algorithm {
        ALGORITHM => key.verify(digest, &signature),
        BATCH_ALGORITHM => {
            let (index, size, path) = seal.batch.ok_or(VerifyError::Malformed)?;
            let path = path
                .iter()
                .map(|h| hex::decode(h).ok().and_then(|b| b.try_into().ok()))
                .collect::<Option<Vec<merkle::Hash>>>()
                .ok_or(VerifyError::Malformed)?;
            let leaf = merkle::leaf(digest);
            let root =
                merkle::root_from_path(index, size, leaf, &path).ok_or(VerifyError::Mismatch)?;
            key.verify(&merkle::signed_message(&root), &signature)
        }
        _ => return Err(VerifyError::Malformed),
    };
    checked.map_err(|_| VerifyError::Mismatch)?;
    Ok(seal.public_key.to_string())
}

/// Check a [`WHOLE_ALGORITHM`] seal: ed25519 over `message` itself.
pub fn verify_whole(
    seal: &Seal<'_>,
    message: &[u8],
    trusted: &[impl AsRef<str>],
) -> Result<String, VerifyError> {
    let (key, signature) = parts(seal, trusted)?;
    key.verify(message, &signature)
        .map_err(|_| VerifyError::Mismatch)?;
    Ok(seal.public_key.to_string())
}

/// The key and signature of `seal`, once its key is one of `trusted` (when any are given).
fn parts(
    seal: &Seal<'_>,
    trusted: &[impl AsRef<str>],
) -> Result<(VerifyingKey, Signature), VerifyError> {
    if !trusted.is_empty()
        && !trusted
            .iter()
            .any(|t| t.as_ref().trim().eq_ignore_ascii_case(seal.public_key))
    {
        return Err(VerifyError::UntrustedKey {
            found: seal.public_key.to_string(),
            trusted: trusted
                .iter()
                .map(|t| t.as_ref().trim())
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    let key_bytes: [u8; 32] = hex::decode(seal.public_key)
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or(VerifyError::Malformed)?;
    let sig_bytes: [u8; 64] = hex::decode(seal.signature)
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or(VerifyError::Malformed)?;
    let key = VerifyingKey::from_bytes(&key_bytes).map_err(|_| VerifyError::Malformed)?;
    Ok((key, Signature::from_bytes(&sig_bytes)))
}

/// The Merkle tree of a batch (RFC 9162 §2.1: SHA-256, 0x00 before a leaf, 0x01 before a node).
pub mod merkle {
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

    pub fn node(left: &Hash, right: &Hash) -> Hash {
        Sha256::new()
            .chain_update([1u8])
            .chain_update(left)
            .chain_update(right)
            .finalize()
            .into()
    }

    /// The root of `leaves` alone (`None` for no leaves).
    pub fn root(leaves: &[Hash]) -> Option<Hash> {
        match leaves {
            [] => None,
            [one] => Some(*one),
            _ => {
                let k = leaves.len().next_power_of_two() / 2;
                Some(node(&root(&leaves[..k])?, &root(&leaves[k..])?))
            }
        }
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

    #[cfg(test)]
    mod tests {
        use super::*;

        /// The tree matches RFC 9162's definition on a small case worked by hand.
        #[test]
        fn merkle_root_of_three() {
            let l: Vec<Hash> = (0u8..3).map(|i| leaf(&[i; 32])).collect();
            let (root, paths) = tree(&l).expect("tree");
            assert_eq!(root, node(&node(&l[0], &l[1]), &l[2]));
            assert_eq!(super::root(&l), Some(root));
            assert_eq!(paths[2], vec![node(&l[0], &l[1])]);
            assert_eq!(paths[0], vec![l[1], l[2]]);
            for (i, p) in paths.iter().enumerate() {
                assert_eq!(root_from_path(i as u64, 3, l[i], p), Some(root));
            }
        }
    }
}

//! A host's chain kept in memory, for a host without a journal that signs checkpoints: each
//! record is hashed into the chain on the call path (its JSON and a SHA-256, no signature), and
//! a checkpoint over the entries not yet signed is signed when a proof is asked for one of them
//! ([`MemoryChain::proof`]), or when [`MAX_CHECKPOINT_RUN`] of them wait. The proof is the one a
//! journal exports (`vak verify` checks it alone).
//!
//! Why on demand and not every few milliseconds, as the journal's indexer does: nothing here
//! outlives the process, so a checkpoint no one asks for is never read; the first proof asked
//! signs every entry made since the last checkpoint in one signature.
//!
//! Each entry's Merkle leaf is added to the tree of the run not yet signed as it comes (a node
//! hash per entry on average), so that signing a checkpoint is one signature and a proof is
//! read off the kept tree: neither hashes a run of thousands of entries again under the lock
//! every call takes. Memory is bounded: the last [`KEPT`] entries (call id and hash) and the
//! checkpoints over them, with their trees, are kept (by our estimate about 4 MiB, up to about
//! 12 MiB when a proof is asked after every call, each record then under a checkpoint of its
//! own); an older record's proof is [`ProofError::Forgotten`].

use super::HostKey;
use crate::record::CallRecord;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use vak_core::chain::seal::merkle::{self, Hash};
use vak_core::chain::{Checkpoint, EntryProof, Inclusion, MAX_CHECKPOINT_RUN, entry_digest};

thread_local! {
    /// A record's JSON, written where the last one was: most records are a few KiB, and growing
    /// a new buffer for each (copies, allocations) cost as much as writing it.
    static TEXT: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A thread's buffer is let go after a record larger than this.
const KEEP_TEXT_CAPACITY: usize = 64 * 1024;

/// How many of the latest entries a chain in memory can prove.
pub const KEPT: usize = 16_384;

/// Why a record's proof cannot be given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProofError {
    /// No record of that call id is in this chain: another host made it, or it carries its
    /// own signature.
    #[error("call {call_id} is not in this host's chain")]
    NotInChain { call_id: String },
    /// No record of that call id is among the entries whose proofs are kept (about the last
    /// [`KEPT`]): it is older, or another host made it.
    #[error("call {call_id} is not among the last {KEPT} entries this host keeps proofs for")]
    Forgotten { call_id: String },
    /// The host keeps no chain in memory: its records carry their own signatures, or its
    /// journal's checkpoints sign them (`Store::proof`).
    #[error(
        "this host keeps no chain of records in memory: its records are signed one by one, or its journal's checkpoints sign them"
    )]
    NoChainInMemory,
    /// The record is not the one hashed into the chain: it was changed since the call.
    #[error("the record of call {call_id} was changed after it was hashed into the chain")]
    Altered { call_id: String },
}

/// A chain of records in memory, with checkpoints signed by the host's key.
pub struct MemoryChain {
    chain: String,
    key: Arc<HostKey>,
    state: Mutex<State>,
}

struct State {
    /// The place the next entry takes (the first is 1).
    next: i64,
    /// The last [`KEPT`] entries, oldest first: `kept[i]` is entry `first_kept + i`.
    kept: VecDeque<Kept>,
    first_kept: i64,
    /// The hash of the entry before `kept[0]`: zeros at first, which is
    /// [`GENESIS`](vak_core::chain::GENESIS) in hex.
    before_kept: Hash,
    /// Call id to place, for the kept entries.
    places: HashMap<String, i64>,
    /// The checkpoints over kept entries, oldest first, each with its tree; they follow one
    /// another without a gap.
    signed: VecDeque<Signed>,
    /// The first entry no checkpoint covers yet, and the tree of those entries so far.
    unsigned_from: i64,
    run: Levels,
}

struct Kept {
    call_id: String,
    hash: Hash,
}

struct Signed {
    checkpoint: Checkpoint,
    tree: Levels,
}

impl MemoryChain {
    /// A new, empty chain signed by `key`, with an id of its own (random hex, as a journal
    /// chain's).
    pub fn new(key: Arc<HostKey>) -> MemoryChain {
        MemoryChain {
            chain: vak_core::chain::new_chain_id(),
            key,
            state: Mutex::new(State {
                next: 1,
                kept: VecDeque::new(),
                first_kept: 1,
                before_kept: [0; 32],
                places: HashMap::new(),
                signed: VecDeque::new(),
                unsigned_from: 1,
                run: Levels::default(),
            }),
        }
    }

    /// Hash `record` (unsigned: its `signature` is cleared) into the chain; its place.
    pub fn append(&self, record: &mut CallRecord) -> i64 {
        record.signature = None;
        TEXT.with_borrow_mut(|text| {
            text.clear();
            // A record holds only strings, numbers and JSON values; serialization does not fail.
            let _ = serde_json::to_writer(&mut *text, &*record);
            let entry = self.append_text(&record.call_id, text);
            if text.capacity() > KEEP_TEXT_CAPACITY {
                *text = Vec::new();
            }
            entry
        })
    }

    fn append_text(&self, call_id: &str, text: &[u8]) -> i64 {
        let mut state = self.lock();
        let entry = state.next;
        let prev = hex::encode(state.kept.back().map_or(&state.before_kept, |k| &k.hash));
        let hash = entry_digest(&prev, Some(&self.chain), entry, text);
        state.next += 1;
        state.places.insert(call_id.to_string(), entry);
        state.kept.push_back(Kept {
            call_id: call_id.to_string(),
            hash,
        });
        state.run.push(merkle::leaf(&hash));
        if state.kept.len() > KEPT
            && let Some(old) = state.kept.pop_front()
        {
            let gone = state.first_kept;
            state.first_kept += 1;
            // A later record of the same call id keeps its own place.
            if state.places.get(&old.call_id) == Some(&gone) {
                state.places.remove(&old.call_id);
            }
            state.before_kept = old.hash;
            let first = state.first_kept;
            while state
                .signed
                .front()
                .is_some_and(|c| c.checkpoint.seq < first)
            {
                state.signed.pop_front();
            }
        }
        // Bounded either way: a run never outgrows what one checkpoint may cover.
        if state.run.leaves() >= MAX_CHECKPOINT_RUN {
            self.sign_pending(&mut state);
        }
        entry
    }

    /// The proof that a checkpoint of this chain signs `record`, signing one now over every
    /// entry not yet signed when none covers it.
    pub fn proof(&self, record: &CallRecord) -> Result<EntryProof, ProofError> {
        let call_id = || record.call_id.clone();
        let mut unsigned = record.clone();
        unsigned.signature = None;
        let text = serde_json::to_string(&unsigned).unwrap_or_default();
        let mut state = self.lock();
        let Some(&entry) = state.places.get(&record.call_id) else {
            return Err(if state.first_kept > 1 {
                ProofError::Forgotten { call_id: call_id() }
            } else {
                ProofError::NotInChain { call_id: call_id() }
            });
        };
        let index = (entry - state.first_kept) as usize;
        let prev_hash = hex::encode(match index {
            0 => &state.before_kept,
            i => &state.kept[i - 1].hash,
        });
        let hash = state.kept[index].hash;
        if entry_digest(&prev_hash, Some(&self.chain), entry, text.as_bytes()) != hash {
            return Err(ProofError::Altered { call_id: call_id() });
        }
        if entry >= state.unsigned_from {
            self.sign_pending(&mut state);
        }
        // The checkpoints follow one another: the last that begins at or before the entry.
        let at = state
            .signed
            .partition_point(|s| s.checkpoint.from <= entry)
            .checked_sub(1);
        let signed = at
            .and_then(|at| state.signed.get(at))
            .filter(|s| entry <= s.checkpoint.seq)
            .ok_or_else(|| ProofError::Forgotten { call_id: call_id() })?;
        let leaf = (entry - signed.checkpoint.from) as usize;
        Ok(EntryProof {
            format: EntryProof::FORMAT.into(),
            chain: self.chain.clone(),
            entry,
            prev_hash,
            hash: hex::encode(hash),
            text,
            checkpoint: signed.checkpoint.clone(),
            inclusion: Inclusion {
                index: leaf as u64,
                path: signed.tree.path(leaf).iter().map(hex::encode).collect(),
            },
        })
    }

    /// Sign a checkpoint over the entries no checkpoint covers yet, if any: one signature, the
    /// tree being built as they came.
    fn sign_pending(&self, state: &mut State) {
        let Some(root) = state.run.root() else {
            return;
        };
        let (from, seq) = (state.unsigned_from, state.next - 1);
        let checkpoint = self
            .key
            .sign_checkpoint(&self.chain, from, seq, hex::encode(root));
        let tree = std::mem::take(&mut state.run);
        state.signed.push_back(Signed { checkpoint, tree });
        state.unsigned_from = seq + 1;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // The state is consistent between statements that can panic; take it back after one.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A Merkle tree (RFC 9162 §2.1) built a leaf at a time: level `l` holds the roots of the
/// complete subtrees of `2^l` leaves, left to right. Adding a leaf hashes at most one node per
/// level (one on average), so that a checkpoint's root is ready when it is signed and any
/// leaf's path is read off the levels, without hashing the run again.
#[derive(Default)]
struct Levels {
    levels: Vec<Vec<Hash>>,
}

impl Levels {
    fn leaves(&self) -> usize {
        self.levels.first().map_or(0, Vec::len)
    }

    fn push(&mut self, leaf: Hash) {
        let mut node = leaf;
        for level in 0.. {
            if self.levels.len() == level {
                self.levels.push(Vec::new());
            }
            let nodes = &mut self.levels[level];
            nodes.push(node);
            if nodes.len() % 2 == 1 {
                return;
            }
            node = merkle::node(&nodes[nodes.len() - 2], &nodes[nodes.len() - 1]);
        }
    }

    /// The root of the complete subtrees below `level` that no node of `level` covers: the
    /// leaves past the last complete subtree of `2^level` leaves, as RFC 9162 splits them.
    fn rest_below(&self, level: usize) -> Option<Hash> {
        let n = self.leaves();
        let mut rest: Option<Hash> = None;
        for (l, nodes) in self.levels.iter().enumerate().take(level) {
            if (n >> l) & 1 == 1 {
                let last = *nodes.last()?;
                rest = Some(match rest {
                    None => last,
                    Some(right) => merkle::node(&last, &right),
                });
            }
        }
        rest
    }

    /// The root over every leaf (`None`: no leaves).
    fn root(&self) -> Option<Hash> {
        self.rest_below(self.levels.len())
    }

    /// The inclusion path of leaf `index`, siblings from the leaf up (RFC 9162 §2.1.3.1).
    fn path(&self, index: usize) -> Vec<Hash> {
        let n = self.leaves();
        let mut path = Vec::new();
        for (l, nodes) in self.levels.iter().enumerate() {
            if n <= 1 << l {
                break;
            }
            let i = index >> l;
            if i % 2 == 1 {
                path.extend(nodes.get(i - 1));
            } else if let Some(right) = nodes.get(i + 1) {
                path.push(*right);
            } else if i < nodes.len() {
                // The last complete subtree of its level: its sibling is what comes after it.
                path.extend(self.rest_below(l));
            }
        }
        path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str) -> CallRecord {
        CallRecord::new(
            id.into(),
            "clock".into(),
            "test".into(),
            r#"{"zone":"UTC"}"#,
        )
    }

    #[test]
    fn every_record_of_the_chain_is_proven_by_a_checkpoint_its_key_signs() {
        let key = Arc::new(HostKey::generate().unwrap());
        let chain = MemoryChain::new(key.clone());
        let mut records: Vec<CallRecord> = (0..5).map(|i| record(&format!("c{i}"))).collect();
        for (i, r) in records.iter_mut().enumerate() {
            assert_eq!(chain.append(r), i as i64 + 1);
            assert!(r.signature.is_none());
        }
        // The first proof signs every entry made so far in one checkpoint; later ones reuse it.
        let first = chain.proof(&records[1]).unwrap();
        first.check(&[key.public_hex()]).unwrap();
        assert_eq!((first.checkpoint.from, first.checkpoint.seq), (1, 5));
        let last = chain.proof(&records[4]).unwrap();
        last.check(&[key.public_hex()]).unwrap();
        assert_eq!(last.checkpoint, first.checkpoint);
        // Entries after that checkpoint are signed by the next one.
        let mut more = record("c5");
        chain.append(&mut more);
        let next = chain.proof(&more).unwrap();
        next.check(&[key.public_hex()]).unwrap();
        assert_eq!((next.checkpoint.from, next.checkpoint.seq), (6, 6));
        assert_eq!(next.prev_hash, last.hash, "linked to the entry before it");
        // Another key's proof does not pass for this one's.
        assert!(next.check(&["11".repeat(32)]).is_err());
    }

    /// The tree built a leaf at a time has RFC 9162's root and paths: those of `merkle::tree`,
    /// and each path leads `root_from_path` to the root, at every size up to 70.
    #[test]
    fn the_tree_built_a_leaf_at_a_time_is_the_rfc_9162_tree() {
        let leaves: Vec<Hash> = (0..70u8).map(|i| merkle::leaf(&[i; 32])).collect();
        let mut levels = Levels::default();
        assert_eq!(levels.root(), None);
        for n in 1..=leaves.len() {
            levels.push(leaves[n - 1]);
            let (root, paths) = merkle::tree(&leaves[..n]).unwrap();
            assert_eq!(levels.root(), Some(root), "{n} leaves");
            for (i, path) in paths.iter().enumerate() {
                assert_eq!(&levels.path(i), path, "leaf {i} of {n}");
                assert_eq!(
                    merkle::root_from_path(i as u64, n as u64, leaves[i], path),
                    Some(root)
                );
            }
        }
    }

    #[test]
    fn a_changed_record_or_one_from_elsewhere_gets_no_proof() {
        let chain = MemoryChain::new(Arc::new(HostKey::generate().unwrap()));
        let mut r = record("c0");
        chain.append(&mut r);
        let mut changed = r.clone();
        changed.tool = "other".into();
        assert_eq!(
            chain.proof(&changed),
            Err(ProofError::Altered {
                call_id: "c0".into()
            })
        );
        assert_eq!(
            chain.proof(&record("elsewhere")),
            Err(ProofError::NotInChain {
                call_id: "elsewhere".into()
            })
        );
        // A signature the record was given afterwards is not part of what was hashed.
        let mut signed = r.clone();
        HostKey::generate().unwrap().sign(&mut signed);
        assert!(chain.proof(&signed).is_ok());
    }

    #[test]
    fn memory_stays_bounded_and_old_records_are_forgotten_not_misproven() {
        let key = Arc::new(HostKey::generate().unwrap());
        let chain = MemoryChain::new(key.clone());
        let mut first = record("first");
        chain.append(&mut first);
        let mut last = record("last");
        for i in 1..KEPT + 10 {
            let mut r = record(&format!("c{i}"));
            chain.append(&mut r);
            last = r;
        }
        {
            let state = chain.lock();
            assert_eq!(state.kept.len(), KEPT);
            assert_eq!(state.places.len(), KEPT);
            // Signed along the way, MAX_CHECKPOINT_RUN entries at a time.
            assert!(state.signed.len() >= KEPT / MAX_CHECKPOINT_RUN - 1);
            assert!(state.run.leaves() < MAX_CHECKPOINT_RUN);
        }
        assert_eq!(
            chain.proof(&first),
            Err(ProofError::Forgotten {
                call_id: "first".into()
            })
        );
        let proof = chain.proof(&last).unwrap();
        proof.check(&[key.public_hex()]).unwrap();
        assert_eq!(proof.entry, KEPT as i64 + 10);
    }
}

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
//! Memory is bounded: the last [`KEPT`] entries (call id and hash) and the checkpoints over
//! them are kept; an older record's proof is [`ProofError::Forgotten`].

use super::HostKey;
use crate::record::CallRecord;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use vak_core::chain::{
    Checkpoint, EntryProof, GENESIS, MAX_CHECKPOINT_RUN, entry_hash, entry_hash_of_bytes,
};

thread_local! {
    /// A record's JSON, written where the last one was: most records are a few KiB, and growing
    /// a new buffer for each (copies, allocations) cost as much as writing it.
    static TEXT: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A thread's buffer is let go after a record larger than this.
const KEEP_TEXT_CAPACITY: usize = 64 * 1024;

/// How many of the latest entries a chain in memory can prove (about 2 MiB of ids and hashes).
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
    /// The hash of the last entry ([`GENESIS`] before the first).
    head: String,
    /// The last [`KEPT`] entries, oldest first: `kept[i]` is entry `first_kept + i`.
    kept: VecDeque<Kept>,
    first_kept: i64,
    /// The hash of the entry before `kept[0]`.
    before_kept: String,
    /// Call id to place, for the kept entries.
    places: HashMap<String, i64>,
    /// The checkpoints over kept entries, oldest first; they follow one another without a gap.
    checkpoints: VecDeque<Checkpoint>,
    /// The first entry no checkpoint covers yet.
    unsigned_from: i64,
}

struct Kept {
    call_id: String,
    hash: String,
}

impl MemoryChain {
    /// A new, empty chain signed by `key`, with an id of its own (random hex).
    pub fn new(key: Arc<HostKey>) -> MemoryChain {
        let id = uuid::Uuid::now_v7().simple().to_string();
        MemoryChain {
            chain: format!("m{}", &id[id.len() - 15..]),
            key,
            state: Mutex::new(State {
                next: 1,
                head: GENESIS.to_string(),
                kept: VecDeque::new(),
                first_kept: 1,
                before_kept: GENESIS.to_string(),
                places: HashMap::new(),
                checkpoints: VecDeque::new(),
                unsigned_from: 1,
            }),
        }
    }

    /// The chain's id.
    pub fn id(&self) -> &str {
        &self.chain
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
        let hash = entry_hash_of_bytes(&state.head, Some(&self.chain), entry, text);
        state.next += 1;
        state.head.clone_from(&hash);
        state.places.insert(call_id.to_string(), entry);
        state.kept.push_back(Kept {
            call_id: call_id.to_string(),
            hash,
        });
        if state.kept.len() > KEPT
            && let Some(old) = state.kept.pop_front()
        {
            state.first_kept += 1;
            // A later record of the same call id keeps its own place.
            if state.places.get(&old.call_id) == Some(&(state.first_kept - 1)) {
                state.places.remove(&old.call_id);
            }
            state.before_kept = old.hash;
            let first = state.first_kept;
            while state.checkpoints.front().is_some_and(|c| c.seq < first) {
                state.checkpoints.pop_front();
            }
        }
        // Bounded either way: a run never outgrows what one checkpoint may cover.
        if state.next - state.unsigned_from >= MAX_CHECKPOINT_RUN as i64 {
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
            return Err(if state.next > 1 && state.first_kept > 1 {
                ProofError::Forgotten { call_id: call_id() }
            } else {
                ProofError::NotInChain { call_id: call_id() }
            });
        };
        let index = (entry - state.first_kept) as usize;
        let prev_hash = match index {
            0 => state.before_kept.clone(),
            i => state.kept[i - 1].hash.clone(),
        };
        let hash = state.kept[index].hash.clone();
        if entry_hash(&prev_hash, Some(&self.chain), entry, &text) != hash {
            return Err(ProofError::Altered { call_id: call_id() });
        }
        if entry >= state.unsigned_from {
            self.sign_pending(&mut state);
        }
        let checkpoint = state
            .checkpoints
            .iter()
            .find(|c| (c.from..=c.seq).contains(&entry))
            .cloned()
            .ok_or_else(|| ProofError::Forgotten { call_id: call_id() })?;
        // A checkpoint's run may begin before the kept entries only when its first entries were
        // dropped; its proof cannot be made then.
        let start = checkpoint.from - state.first_kept;
        let run = usize::try_from(start).ok().map(|start| {
            state
                .kept
                .range(start..=(checkpoint.seq - state.first_kept) as usize)
        });
        let inclusion = run
            .and_then(|run| checkpoint.proof(run.map(|k| k.hash.as_str()), entry))
            .ok_or_else(|| ProofError::Forgotten { call_id: call_id() })?;
        Ok(EntryProof {
            format: EntryProof::FORMAT.into(),
            chain: self.chain.clone(),
            entry,
            prev_hash,
            hash,
            text,
            checkpoint,
            inclusion,
        })
    }

    /// Sign a checkpoint over the entries no checkpoint covers yet, if any.
    fn sign_pending(&self, state: &mut State) {
        let (from, seq) = (state.unsigned_from, state.next - 1);
        if seq < from {
            return;
        }
        let start = (from - state.first_kept).max(0) as usize;
        let hashes = state.kept.range(start..).map(|k| k.hash.as_str());
        // Every kept hash is one `entry_hash` made: always 32 bytes of hex.
        let Some(root) = Checkpoint::root_of(hashes) else {
            return;
        };
        // Entries dropped before they were signed (more than KEPT made since the last
        // checkpoint) are never signed: the run starts at the first one kept.
        let from = from.max(state.first_kept);
        state
            .checkpoints
            .push_back(self.key.sign_checkpoint(&self.chain, from, seq, root));
        state.unsigned_from = seq + 1;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // The state is consistent between statements that can panic; take it back after one.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
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
            assert!(state.checkpoints.len() >= KEPT / MAX_CHECKPOINT_RUN - 1);
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

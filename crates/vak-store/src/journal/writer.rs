//! The writer of this process's chain: group commit of entries to the chain's log. A caller
//! that finds the writer idle writes its own entry; otherwise the writer thread takes every entry
//! waiting and writes them as one batch, signed together, then answers each caller. No caller
//! hears back before its entry is in the log.

use super::index::{Index, Indexed};
use super::log::{FRAME_HEADER, FRAME_PREFIX, Log, frame};
use super::{CommitStats, Durability, Entry, JournalError, Row};
use crate::signing::{HostKey, RecordSignature};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

/// The most entries one group commit takes.
pub const MAX_BATCH: usize = 512;

/// The log's size at which the writer waits for the indexer to catch up before it writes more:
/// bounds the log, and how far the database may be behind it.
const LOG_LIMIT_BYTES: u64 = 64 << 20;

/// An entry on its way to the writer.
pub(super) struct Pending {
    pub(super) row: Row,
    /// Set when the writer is to sign the entry, with the others of its batch.
    pub(super) sign: Option<ToSign>,
    pub(super) reply: tokio::sync::oneshot::Sender<Result<Committed, JournalError>>,
}

/// An entry the writer signs: its digest (of `row.text`, which has `signature` null) and the key.
pub(super) struct ToSign {
    pub(super) digest: [u8; 32],
    pub(super) key: Arc<HostKey>,
    /// The signature, once made.
    pub(super) signed: Option<RecordSignature>,
}

/// What the writer answers: the entry's place, and its signature when the writer signed it.
pub(super) struct Committed {
    pub(super) entry: Entry,
    pub(super) signature: Option<RecordSignature>,
}

/// The only writer of this process's chain, and the chain's head.
pub(super) struct Writer {
    pub(super) path: PathBuf,
    pub(super) durability: Durability,
    /// The chain's log: taken at the first write, held until the journal closes.
    pub(super) log: Option<Log>,
    /// The last entry's place and hash (meaningful once `log` is taken).
    pub(super) last: (i64, String),
    pub(super) stats: Arc<Mutex<CommitStats>>,
    pub(super) index: Arc<Index>,
}

impl Writer {
    /// The writer thread: write what callers hand over, as many at once as are waiting.
    pub(super) fn run(state: &Mutex<Writer>, rx: &mpsc::Receiver<Pending>, queued: &AtomicUsize) {
        while let Ok(first) = rx.recv() {
            let mut batch = vec![first];
            while batch.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(p) => batch.push(p),
                    Err(_) => break,
                }
            }
            let mut writer = state.lock().unwrap_or_else(|p| p.into_inner());
            // Taken under the lock: a caller that then sees none queued and the lock free
            // writes after this batch, so the chain keeps the order of writes.
            queued.fetch_sub(batch.len(), Ordering::AcqRel);
            writer.write(batch);
        }
    }

    /// The chain this process writes, once it has written.
    pub(super) fn chain(&self) -> Option<String> {
        self.log.as_ref().map(|l| l.chain.to_string())
    }

    /// Let go of the chain (the journal closes): where the database holds everything in its log,
    /// the log's files are marked empty first, so that the next process to take the chain reads
    /// nothing again; else that process indexes what it holds.
    pub(super) fn let_go(&mut self) {
        let Some(mut log) = self.log.take() else {
            return;
        };
        if self.index.is_caught_up()
            && let Err(e) = log.clear()
        {
            tracing::warn!(error = %e, journal = %self.path.display(), "the chain's log was not emptied (its next taker indexes it again)");
        }
        tracing::debug!(journal = %self.path.display(), chain = %log.chain, "the chain's log is let go");
    }

    /// Sign `batch`, write it to the log after the chain's head as one write, and answer each.
    pub(super) fn write(&mut self, mut batch: Vec<Pending>) {
        let Writer {
            path,
            durability,
            log,
            last,
            stats,
            index,
        } = self;
        let log = match ready(log, last, index, path, *durability) {
            Ok(log) => log,
            Err(e) => {
                tracing::error!(error = %e, entries = batch.len(), "journal: the log cannot be written");
                for p in batch {
                    let _ = p.reply.send(Err(e.clone()));
                }
                return;
            }
        };
        sign(&mut batch);
        let lap = log.lap();
        let chain = log.chain.clone();
        let (mut seq, mut prev) = last.clone();
        let mut bytes = Vec::with_capacity(
            batch
                .iter()
                .map(|p| FRAME_HEADER + FRAME_PREFIX + p.row.text.len())
                .sum(),
        );
        let mut rows = Vec::with_capacity(batch.len());
        let mut answers = Vec::with_capacity(batch.len());
        for Pending { row, sign, reply } in batch {
            seq += 1;
            let hash = super::chain::entry_hash(&prev, Some(&chain), seq, &row.text);
            frame(&mut bytes, lap, seq, &row.text);
            answers.push((
                reply,
                Committed {
                    entry: Entry {
                        seq: 0,
                        hash: hash.clone(),
                        node: Some((chain.to_string(), seq)),
                    },
                    signature: sign.and_then(|s| s.signed),
                },
            ));
            rows.push(Indexed {
                chain: chain.clone(),
                chain_seq: seq,
                row,
                prev: std::mem::replace(&mut prev, hash.clone()),
                hash,
            });
        }
        match log.append(&bytes, seq) {
            Ok(()) => {
                *last = (seq, prev);
                {
                    let mut s = stats.lock().unwrap_or_else(|p| p.into_inner());
                    s.records += rows.len() as u64;
                    s.commits += 1;
                }
                index.push(rows);
                for (reply, committed) in answers {
                    let _ = reply.send(Ok(committed));
                }
            }
            Err(e) => {
                tracing::error!(error = %e, entries = rows.len(), "journal: writing the log failed");
                for (reply, _) in answers {
                    let _ = reply.send(Err(e.clone()));
                }
            }
        }
    }
}

/// The writer's log, ready for a write: this process's chain taken at its first write (a chain
/// whose process is gone, or a new one), and kept short: what the database holds is emptied,
/// and where the indexer has fallen far behind, the writer waits for it.
fn ready<'a>(
    log: &'a mut Option<Log>,
    last: &mut (i64, String),
    index: &Index,
    path: &Path,
    durability: Durability,
) -> Result<&'a mut Log, JournalError> {
    // Taken out and put back: one arm returns the held log, the other fills the empty slot.
    let log = match log.take() {
        Some(held) => log.insert(held),
        None => {
            let (taken, head) = Log::claim(path, durability)?;
            index.start_at(head.0);
            *last = head;
            log.insert(taken)
        }
    };
    if log.len() >= LOG_LIMIT_BYTES {
        index.caught_up(path)?;
    }
    log.tidy(index.indexed());
    Ok(log)
}

/// Sign the entries of `batch` that ask for it: one signature per key for all of them (one key in
/// practice: the host's), each entry's JSON given its signature in place.
fn sign(batch: &mut [Pending]) {
    let mut left: Vec<&mut Pending> = batch.iter_mut().filter(|p| p.sign.is_some()).collect();
    while let Some(key) = left
        .first()
        .and_then(|p| p.sign.as_ref())
        .map(|s| s.key.clone())
    {
        let (same, rest): (Vec<&mut Pending>, Vec<&mut Pending>) = left
            .into_iter()
            .partition(|p| p.sign.as_ref().is_some_and(|s| Arc::ptr_eq(&s.key, &key)));
        let digests: Vec<[u8; 32]> = same
            .iter()
            .filter_map(|p| p.sign.as_ref().map(|s| s.digest))
            .collect();
        for (p, signature) in same.into_iter().zip(key.sign_digests(&digests)) {
            p.row.text = crate::signing::with_signature(&p.row.text, &signature);
            if let Some(s) = p.sign.as_mut() {
                s.signed = Some(signature);
            }
        }
        left = rest;
    }
}

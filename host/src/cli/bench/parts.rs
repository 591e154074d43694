//! What a call's record costs apart from the lifecycle, in `vak bench`: signing it (whole, with a
//! nonce made ahead, in a batch), writing it as JSON, and journaling it.

use super::{BenchError, Row, per_op, summarize};
use std::time::{Duration, Instant};
use vak_host::bench_support;
use vak_host::signing::HostKey;
use vak_host::{CallRecord, Host};

/// What the parts are measured on: the host, the benchmark call's record, and how many rounds
/// of how many operations.
pub(super) struct Parts<'a> {
    pub(super) host: &'a Host,
    pub(super) record: &'a CallRecord,
    pub(super) rounds: usize,
    pub(super) per_round: usize,
}

impl Parts<'_> {
    /// The time per operation of each round: `op` run `reps` times a round, each run
    /// `ops_per_rep` operations.
    fn timed(&self, reps: usize, ops_per_rep: usize, mut op: impl FnMut()) -> Vec<u64> {
        (0..self.rounds)
            .map(|_| {
                let t = Instant::now();
                for _ in 0..reps {
                    op();
                }
                per_op(t.elapsed(), reps * ops_per_rep)
            })
            .collect()
    }

    /// The host's key, without the host's pool of nonces if it has one.
    fn key_copy(&self) -> Result<HostKey, BenchError> {
        HostKey::from_seed_hex(&bench_support::host_key(self.host).seed_hex())
            .map_err(BenchError::KeyCopy)
    }

    /// Signing one record (canonical JSON of the record, then ed25519) whole: RFC 8032's
    /// deterministic nonce, the point multiplication included (what a call pays when its key has
    /// no nonce ready).
    pub(super) fn sign_whole(&self) -> Result<Row, BenchError> {
        let mut copy = self.record.clone();
        let whole = self.key_copy()?;
        let times = self.timed(self.per_round, 1, || {
            whole.sign(std::hint::black_box(&mut copy));
        });
        Ok(summarize(
            "vak: signing the record alone, whole",
            times,
            self.per_round,
        ))
    }

    /// Signing one record with a nonce made ahead: the part the call path pays (the nonce's point
    /// multiplication ran before, on the key's own thread). Timed in runs of 32, each started on
    /// a full pool, so that every signature of a run takes a nonce.
    pub(super) fn sign_ahead(&self) -> Result<Row, BenchError> {
        const RUN: usize = 32;
        let mut copy = self.record.clone();
        // A pool of its own: the host's key may sign whole.
        let key = self.key_copy()?.with_nonces_ahead();
        let runs = self.per_round.div_ceil(RUN);
        let times = (0..self.rounds)
            .map(|_| {
                let mut spent = Duration::ZERO;
                for _ in 0..runs {
                    bench_support::await_nonces(&key, RUN);
                    let t = Instant::now();
                    for _ in 0..RUN {
                        key.sign(std::hint::black_box(&mut copy));
                    }
                    spent += t.elapsed();
                }
                per_op(spent, runs * RUN)
            })
            .collect();
        Ok(summarize(
            "vak: signing the record alone, nonce made ahead",
            times,
            runs * RUN,
        ))
    }

    /// Signing records as the journal does when BATCH of them share a commit: one signature over
    /// their Merkle root, and each record's inclusion path. Per record.
    pub(super) fn sign_batch(&self) -> Row {
        use sha2::Digest;
        const BATCH: usize = 16;
        let text = serde_json::to_string(self.record).unwrap_or_default();
        // What the journal signs: the SHA-256 of the record's JSON.
        let digest: [u8; 32] = sha2::Sha256::digest(text.as_bytes()).into();
        let digests = vec![digest; BATCH];
        let batches = self.per_round.div_ceil(BATCH);
        let key = bench_support::host_key(self.host);
        let times = self.timed(batches, BATCH, || {
            std::hint::black_box(key.sign_digests(std::hint::black_box(&digests)));
        });
        summarize(
            &format!("vak: signing {BATCH} records as one batch, per record"),
            times,
            batches * BATCH,
        )
    }

    /// Hashing one record into a chain in memory (its JSON, a SHA-256 and its Merkle leaf under
    /// the chain's lock): what a call pays without a journal when its host signs checkpoints; then asking
    /// for its proof right after, which signs a checkpoint over that one record (the worst case:
    /// a proof asked after every call).
    pub(super) fn chain_in_memory(&self) -> Result<[Row; 2], BenchError> {
        let chain = vak_host::signing::MemoryChain::new(std::sync::Arc::new(self.key_copy()?));
        let mut copy = self.record.clone();
        let times = self.timed(self.per_round, 1, || {
            std::hint::black_box(chain.append(std::hint::black_box(&mut copy)));
        });
        let append = summarize(
            "vak: hashing the record into a chain in memory (no journal)",
            times,
            self.per_round,
        );
        let times = self.timed(self.per_round, 1, || {
            chain.append(&mut copy);
            std::hint::black_box(chain.proof(&copy).ok());
        });
        let proved = summarize(
            "vak: the same, then its proof at once (a checkpoint of one record)",
            times,
            self.per_round,
        );
        Ok([append, proved])
    }

    /// Serializing one record to JSON (what signing and the journal each do once).
    pub(super) fn serialize(&self) -> Row {
        let record = self.record;
        let times = self.timed(self.per_round, 1, || {
            std::hint::black_box(serde_json::to_vec(std::hint::black_box(record)).ok());
        });
        summarize("vak: the record as JSON alone", times, self.per_round)
    }
}

/// Appends at once in the synced rows that share a disk flush.
const CONCURRENT: usize = 32;

impl Parts<'_> {
    /// The journal's cost per record, apart from the lifecycle: one append at a time in both
    /// durability modes, and `CONCURRENT` appends at once when synced (group commit shares each
    /// disk flush among the records waiting); then the same per call with the write-ahead entry,
    /// as a call journals it: its `started` entry and its record, each signed by the writer, or
    /// both left unsigned for the indexer's checkpoint (`--signing checkpoints`; the indexed row
    /// includes the checkpoint's signature). Journals are written in a temporary folder, then
    /// removed.
    pub(super) async fn journal(&self) -> Result<Vec<Row>, BenchError> {
        use vak_host::journal::{Durability, Journal, Started};
        let (record, rounds, per_round) = (self.record, self.rounds, self.per_round);
        let dir = std::env::temp_dir().join(format!("vak-bench-journal-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let key = std::sync::Arc::new(HostKey::generate()?);
        let limits = record.limits.ok_or(BenchError::NoLimits)?;
        let started = Started::of(record, "bench".into(), limits);
        let mut rows = Vec::new();
        // The call waits for its record to be in the journal's log; the indexer inserts it into
        // SQLite after. The second row also waits for that (a read of the journal does), so the
        // two show what the call pays and what the journal costs in all.
        for (name, durability, concurrent, indexed, write_ahead, checkpoints) in [
            (
                "journal: append to the log, one at a time",
                Durability::Committed,
                1,
                false,
                false,
                false,
            ),
            (
                "journal: same, and indexed into SQLite",
                Durability::Committed,
                1,
                true,
                false,
                false,
            ),
            (
                "journal: append, synced to disk",
                Durability::Synced,
                1,
                false,
                false,
                false,
            ),
            (
                "journal: synced, 32 at once (per record)",
                Durability::Synced,
                CONCURRENT,
                false,
                false,
                false,
            ),
            (
                "journal: a call's started entry + record, one call at a time",
                Durability::Committed,
                1,
                false,
                true,
                false,
            ),
            (
                "journal: same, synced to disk",
                Durability::Synced,
                1,
                false,
                true,
                false,
            ),
            (
                "journal: synced, 32 calls at once, started + record (per call)",
                Durability::Synced,
                CONCURRENT,
                false,
                true,
                false,
            ),
            (
                "journal: a call's started entry + record, signed by checkpoints, one call at a time",
                Durability::Committed,
                1,
                false,
                true,
                true,
            ),
            (
                "journal: same, and indexed into SQLite under its checkpoint",
                Durability::Committed,
                1,
                true,
                true,
                true,
            ),
            (
                "journal: synced, 32 calls at once, started + record, signed by checkpoints (per call)",
                Durability::Synced,
                CONCURRENT,
                false,
                true,
                true,
            ),
        ] {
            let path = dir.join(format!(
                "{}-{concurrent}-{indexed}-{write_ahead}-{checkpoints}.sqlite",
                durability_name(durability)
            ));
            let journal = std::sync::Arc::new(Journal::open(&path, durability)?);
            if checkpoints {
                journal.sign_checkpoints(key.clone());
            }
            let once = || {
                let (journal, key, mut started) = (journal.clone(), key.clone(), started.clone());
                async move {
                    if !write_ahead {
                        return journal.append_async(record).await;
                    }
                    // As a call journals: both entries signed by the writer, or by checkpoints.
                    let mut record = record.clone();
                    journal.append_started(&mut started, &key).await?;
                    journal.append_signing(&mut record, &key).await
                }
            };
            let mut times = Vec::new();
            for _ in 0..rounds {
                let t = Instant::now();
                let mut left = per_round;
                while left > 0 {
                    let batch = left.min(concurrent);
                    let appends = (0..batch).map(|_| once());
                    for r in futures::future::join_all(appends).await {
                        r?;
                    }
                    left -= batch;
                }
                if indexed {
                    let last = vak_host::journal::Filter {
                        limit: Some(1),
                        ..Default::default()
                    };
                    journal.list(&last)?;
                }
                times.push(per_op(t.elapsed(), per_round));
            }
            let stats = journal.commit_stats();
            let mut row = summarize(name, times, per_round);
            if concurrent > 1 {
                row.name = format!(
                    "{} ({:.1} entries per write)",
                    row.name,
                    stats.records as f64 / stats.commits.max(1) as f64
                );
            }
            rows.push(row);
        }
        let _ = std::fs::remove_dir_all(&dir);
        Ok(rows)
    }
}

/// The durability's name, in the file name of its journal.
fn durability_name(d: vak_host::journal::Durability) -> &'static str {
    match d {
        vak_host::journal::Durability::Committed => "committed",
        vak_host::journal::Durability::Synced => "synced",
    }
}

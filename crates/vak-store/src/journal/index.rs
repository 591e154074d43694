//! The journal's SQLite database: its schema (and the migration of a journal written before
//! chains had ids), the inserts, and the indexer thread that puts what a chain's log took into
//! the database, many entries to a transaction ([`INDEX_DELAY`], [`INDEX_BATCH`]).
//!
//! Every process writing a journal inserts into the same database (WAL, a busy timeout): each
//! its own chain's entries, in their chain's order, so that the global `seq` (the rowid) is the
//! order in which entries were committed, and `UNIQUE (chain, chain_seq)` holds every chain
//! gapless and single.

use super::{Durability, JournalError, Row, sqlite};
use crate::signing::HostKey;
use rusqlite::{Connection, OptionalExtension, params};
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};
use vak_core::chain::Checkpoint;

/// The most entries the indexer inserts in one transaction.
pub const INDEX_BATCH: usize = 1024;

/// How long the indexer waits for more entries before it inserts fewer than [`INDEX_BATCH`]
/// (a read through the journal does not wait for it: it hurries the indexer).
pub const INDEX_DELAY: Duration = Duration::from_millis(10);

/// The most entries written and not yet indexed: a writer that gets this far ahead of the
/// indexer waits for it, so the queue in memory and the log on disk stay bounded however slow
/// the database is (a disk slower than the calls, another process holding its lock).
pub const MAX_BEHIND: usize = 2 * INDEX_BATCH;

/// How long a read waits for the indexer before it gives up.
const CATCH_UP_WAIT: Duration = Duration::from_secs(30);

/// How long a connection waits for another process's write to the database.
const BUSY_TIMEOUT_MS: u32 = 10_000;

/// The schema's version (`PRAGMA user_version`): 2 since chains have ids, 3 since entries have
/// their session as a column and the list's filters by tool and session are indexed, 4 since
/// chains have signed checkpoints (`checkpoints`).
const SCHEMA_VERSION: i64 = 4;

/// A connection to the journal's database at `path` (made 0600 when it is new: SQLite gives its
/// WAL and shared-memory files the database file's mode).
pub(super) fn connect(path: &Path, durability: Durability) -> Result<Connection, JournalError> {
    let err = sqlite(path);
    super::make_private_file(path).map_err(|e| JournalError::Sqlite {
        path: path.display().to_string(),
        message: format!("cannot be made: {e}"),
    })?;
    let conn = Connection::open(path).map_err(&err)?;
    let sync = match durability {
        Durability::Committed => "NORMAL",
        Durability::Synced => "FULL",
    };
    conn.execute_batch(&format!(
        "PRAGMA busy_timeout = {BUSY_TIMEOUT_MS};
         PRAGMA journal_mode = WAL;
         PRAGMA synchronous = {sync};"
    ))
    .map_err(&err)?;
    Ok(conn)
}

/// Bring the schema to [`SCHEMA_VERSION`], once, whichever process comes first.
///
/// Version 4 adds the `checkpoints` table: each a signed run of one chain's entries
/// (`vak_core::chain::Checkpoint`), keyed by the chain and its last entry.
///
/// Version 3 gives each entry its session as a column, and indexes it and the tool (with the
/// time, for the list's order). Version 2 gives each entry its chain, its place there and its
/// kind, and the provider's call id; the rows of a journal written before (one chain) become the legacy chain `''`, their
/// places their `seq`. A trigger refuses a row without a chain: a vak older than this one, still
/// running on the same state directory, cannot write a second chain with the legacy chain's
/// places.
pub(super) fn migrate(conn: &mut Connection, path: &Path) -> Result<(), JournalError> {
    let err = sqlite(path);
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(&err)?;
    if version >= SCHEMA_VERSION {
        return Ok(());
    }
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(&err)?;
    let version: i64 = tx
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(&err)?;
    if version >= SCHEMA_VERSION {
        return Ok(());
    }
    tx.execute_batch(
        "CREATE TABLE IF NOT EXISTS records (
             seq INTEGER PRIMARY KEY,
             call_id TEXT NOT NULL,
             tool TEXT NOT NULL,
             status TEXT NOT NULL,
             stage TEXT NOT NULL,
             principal TEXT,
             received_at TEXT NOT NULL,
             record TEXT NOT NULL,
             prev_hash TEXT NOT NULL,
             hash TEXT NOT NULL
         );",
    )
    .map_err(&err)?;
    let has_chain: bool = tx
        .query_row(
            "SELECT count(*) FROM pragma_table_info('records') WHERE name = 'chain'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .map_err(&err)?
        > 0;
    if !has_chain {
        tx.execute_batch(
            "ALTER TABLE records ADD COLUMN chain TEXT;
             ALTER TABLE records ADD COLUMN chain_seq INTEGER;
             ALTER TABLE records ADD COLUMN kind TEXT NOT NULL DEFAULT 'record';
             ALTER TABLE records ADD COLUMN provider_call_id TEXT;
             UPDATE records SET chain = '', chain_seq = seq WHERE chain IS NULL;
             UPDATE records SET provider_call_id = json_extract(record, '$.provider_call_id')
                 WHERE instr(record, '\"provider_call_id\"') > 0 AND json_valid(record);",
        )
        .map_err(&err)?;
    }
    let has_session: bool = tx
        .query_row(
            "SELECT count(*) FROM pragma_table_info('records') WHERE name = 'session'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .map_err(&err)?
        > 0;
    if !has_session {
        // Every entry's JSON has its `session_id` (a record's and a `started` entry's alike).
        tx.execute_batch(
            "ALTER TABLE records ADD COLUMN session TEXT;
             UPDATE records SET session = json_extract(record, '$.session_id') WHERE json_valid(record);",
        )
        .map_err(&err)?;
    }
    tx.execute_batch(
        "CREATE INDEX IF NOT EXISTS records_call ON records(call_id);
         CREATE INDEX IF NOT EXISTS records_tool ON records(tool, received_at);
         CREATE INDEX IF NOT EXISTS records_session ON records(session);
         CREATE UNIQUE INDEX IF NOT EXISTS records_chain ON records(chain, chain_seq);
         CREATE INDEX IF NOT EXISTS records_provider_call ON records(provider_call_id)
             WHERE provider_call_id IS NOT NULL;
         CREATE INDEX IF NOT EXISTS records_received ON records(received_at);
         CREATE TRIGGER IF NOT EXISTS records_need_a_chain BEFORE INSERT ON records
             WHEN NEW.chain IS NULL OR NEW.chain_seq IS NULL
             BEGIN SELECT RAISE(ABORT, 'this journal has one chain per process: it is written by a newer vak'); END;
         CREATE TABLE IF NOT EXISTS chains (
             chain TEXT PRIMARY KEY,
             since INTEGER NOT NULL,
             pid INTEGER NOT NULL,
             taken_at TEXT NOT NULL
         );
         CREATE TABLE IF NOT EXISTS checkpoints (
             chain TEXT NOT NULL,
             seq INTEGER NOT NULL,
             from_seq INTEGER NOT NULL,
             root TEXT NOT NULL,
             at TEXT NOT NULL,
             public_key TEXT NOT NULL,
             signature TEXT NOT NULL,
             PRIMARY KEY (chain, seq)
         );
         PRAGMA user_version = 4;",
    )
    .map_err(&err)?;
    tx.commit().map_err(&err)
}

/// An entry for the database: its chain, place, row and links.
pub(super) struct Indexed {
    pub(super) chain: Arc<str>,
    pub(super) chain_seq: i64,
    pub(super) row: Row,
    pub(super) prev: String,
    pub(super) hash: String,
}

/// Insert `rows` in one transaction (each gets the next global `seq`); with `key`, a checkpoint
/// it signs over each run of one chain among them too (the indexer's batch is one run of its
/// process's chain), so that no reader ever sees them without it.
pub(super) fn insert(
    conn: &mut Connection,
    path: &Path,
    rows: &[Indexed],
    key: Option<&HostKey>,
) -> Result<(), JournalError> {
    let err = sqlite(path);
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(&err)?;
    {
        let mut insert = tx
            .prepare_cached(
                "INSERT INTO records (chain, chain_seq, kind, call_id, provider_call_id, tool, status,
                                      stage, principal, received_at, record, prev_hash, hash, session)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
            )
            .map_err(&err)?;
        for Indexed {
            chain,
            chain_seq,
            row: r,
            prev,
            hash,
        } in rows
        {
            insert
                .execute(params![
                    chain.as_ref(),
                    chain_seq,
                    r.kind.as_str(),
                    r.call_id,
                    r.provider_call_id,
                    r.tool,
                    r.status,
                    r.stage,
                    r.principal,
                    r.received_at,
                    r.text,
                    prev,
                    hash,
                    r.session
                ])
                .map_err(&err)?;
        }
    }
    // One checkpoint per run of one chain (the indexer's batch is one, of at most INDEX_BATCH).
    if let Some(key) = key {
        for run in rows.chunk_by(|a, b| a.chain == b.chain) {
            sign_run(&tx, path, key, run)?;
        }
    }
    tx.commit().map_err(&err)
}

/// The `checkpoints` columns, in the order [`checkpoint`] reads them.
macro_rules! checkpoint_columns {
    () => {
        "chain, from_seq, seq, root, at, public_key, signature"
    };
}

/// Sign a checkpoint over `run` (entries of one chain, in order, at least one) and insert it.
fn sign_run(
    tx: &rusqlite::Transaction<'_>,
    path: &Path,
    key: &HostKey,
    run: &[Indexed],
) -> Result<(), JournalError> {
    let (Some(first), Some(last)) = (run.first(), run.last()) else {
        return Ok(());
    };
    let root = Checkpoint::root_of(run.iter().map(|r| r.hash.as_str())).ok_or_else(|| {
        JournalError::Sqlite {
            path: path.display().to_string(),
            message: "an entry's hash is not SHA-256 in hex".into(),
        }
    })?;
    let cp = key.sign_checkpoint(&last.chain, first.chain_seq, last.chain_seq, root);
    tx.prepare_cached(concat!(
        "INSERT INTO checkpoints (",
        checkpoint_columns!(),
        ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
    ))
    .and_then(|mut insert| {
        insert.execute(params![
            cp.chain,
            cp.from,
            cp.seq,
            cp.root,
            cp.at,
            cp.public_key,
            cp.signature
        ])
    })
    .map(drop)
    .map_err(sqlite(path))
}

/// Every chain's checkpoints, by chain and last entry, as a walk reads them beside the entries
/// ([`checkpoint`] reads a row).
pub(super) const CHECKPOINTS_IN_ORDER: &str = concat!(
    "SELECT ",
    checkpoint_columns!(),
    " FROM checkpoints ORDER BY chain, seq"
);

/// The checkpoint that covers entry `chain_seq` of `chain`, if one does.
pub(super) fn covering(
    conn: &Connection,
    path: &Path,
    chain: &str,
    chain_seq: i64,
) -> Result<Option<Checkpoint>, JournalError> {
    conn.query_row(
        concat!(
            "SELECT ",
            checkpoint_columns!(),
            " FROM checkpoints WHERE chain = ?1 AND seq >= ?2 AND from_seq <= ?2
             ORDER BY seq LIMIT 1"
        ),
        params![chain, chain_seq],
        checkpoint,
    )
    .optional()
    .map_err(sqlite(path))
}

/// A checkpoint, from a row of [`checkpoint_columns`].
pub(super) fn checkpoint(r: &rusqlite::Row<'_>) -> rusqlite::Result<Checkpoint> {
    Ok(Checkpoint {
        chain: r.get(0)?,
        from: r.get(1)?,
        seq: r.get(2)?,
        root: r.get(3)?,
        at: r.get(4)?,
        public_key: r.get(5)?,
        signature: r.get(6)?,
    })
}

/// `chain`'s head as stored: its last entry's place and hash.
pub(super) fn chain_head(
    conn: &Connection,
    path: &Path,
    chain: &str,
) -> Result<(i64, String), JournalError> {
    let found: Option<(i64, String)> = conn
        .query_row(
            "SELECT chain_seq, hash FROM records WHERE chain = ?1 ORDER BY chain_seq DESC LIMIT 1",
            [chain],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .map_err(sqlite(path))?;
    Ok(found.unwrap_or((0, super::chain::GENESIS.to_string())))
}

/// Note that `chain` is this process's from its entry `since` on: its calls started from there
/// and not finished are running while its log is locked; those before were its last writer's.
pub(super) fn took_chain(
    conn: &Connection,
    path: &Path,
    chain: &str,
    since: i64,
) -> Result<(), JournalError> {
    conn.execute(
        "INSERT INTO chains (chain, since, pid, taken_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (chain) DO UPDATE SET since = excluded.since, pid = excluded.pid,
             taken_at = excluded.taken_at",
        params![
            chain,
            since,
            std::process::id(),
            jiff::Timestamp::now().to_string()
        ],
    )
    .map(drop)
    .map_err(sqlite(path))
}

/// The entries in this process's log and not yet in the database, shared by the writer, which adds them,
/// the indexer thread, which inserts them, and readers, which wait for it.
pub(super) struct Index {
    queue: Mutex<Queue>,
    /// Wakes the indexer: records to insert, a reader waiting, or the journal closing.
    more: Condvar,
    /// Wakes those waiting for the indexer: records inserted, or an insert failed.
    progress: Condvar,
    /// The key that signs a checkpoint over each batch inserted (`--signing checkpoints`): set
    /// once, read without a lock on every call's path.
    checkpoint_key: OnceLock<Arc<HostKey>>,
}

struct Queue {
    rows: Vec<Indexed>,
    /// The last entry written to the log, and the last in the database.
    written: i64,
    indexed: i64,
    /// Someone waits for the indexer: it inserts what it has without waiting for more.
    hurry: bool,
    closing: bool,
    /// Why the last insert failed (the indexer tries again).
    failed: Option<JournalError>,
}

impl Index {
    pub(super) fn new(head: i64) -> Index {
        Index {
            queue: Mutex::new(Queue {
                rows: Vec::new(),
                written: head,
                indexed: head,
                hurry: false,
                closing: false,
                failed: None,
            }),
            more: Condvar::new(),
            progress: Condvar::new(),
            checkpoint_key: OnceLock::new(),
        }
    }

    /// Sign a checkpoint over each batch inserted from now on, with `key` (the first key given
    /// stays: a journal's checkpoints have one signer).
    pub(super) fn sign_checkpoints(&self, key: Arc<HostKey>) {
        if self.checkpoint_key.set(key).is_err() {
            tracing::debug!("the journal already signs checkpoints: its key stays");
        }
    }

    /// Whether a checkpoint is signed over each batch.
    pub(super) fn signs_checkpoints(&self) -> bool {
        self.checkpoint_key.get().is_some()
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Hand the indexer `rows`, just written to the log. When it is [`MAX_BEHIND`] entries
    /// behind, wait until it has caught up to half of that (the caller holds the log, so every
    /// writer of this chain waits). A failing database does not hold writers: the log keeps what
    /// it holds, and the indexer retries.
    pub(super) fn push(&self, rows: Vec<Indexed>) {
        let mut q = self.lock();
        let was_empty = q.rows.is_empty();
        if let Some(last) = rows.last() {
            q.written = last.chain_seq;
        }
        q.rows.extend(rows);
        // The indexer waits for the first record, or for INDEX_DELAY once it has some.
        if was_empty || q.rows.len() >= INDEX_BATCH {
            self.more.notify_one();
        }
        let behind = |q: &Queue| usize::try_from(q.written - q.indexed).unwrap_or(0);
        if behind(&q) >= MAX_BEHIND {
            q.hurry = true;
            self.more.notify_one();
            while behind(&q) > MAX_BEHIND / 2 && q.failed.is_none() && !q.closing {
                q = self
                    .progress
                    .wait_timeout(q, Duration::from_millis(100))
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
        }
    }

    /// Start over at `head`: the log was just taken, and the database holds everything to it.
    pub(super) fn start_at(&self, head: i64) {
        let mut q = self.lock();
        q.written = head;
        q.indexed = head;
    }

    /// The last entry in the database.
    pub(super) fn indexed(&self) -> i64 {
        self.lock().indexed
    }

    pub(super) fn is_caught_up(&self) -> bool {
        let q = self.lock();
        q.indexed == q.written
    }

    /// Wait until every record written so far is in the database.
    pub(super) fn caught_up(&self, path: &Path) -> Result<(), JournalError> {
        let mut q = self.lock();
        let target = q.written;
        let deadline = Instant::now() + CATCH_UP_WAIT;
        while q.indexed < target {
            if let Some(e) = &q.failed {
                return Err(e.clone());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(JournalError::Sqlite {
                    path: path.display().to_string(),
                    message: format!(
                        "the indexer has not caught up within {} s",
                        CATCH_UP_WAIT.as_secs()
                    ),
                });
            }
            q.hurry = true;
            self.more.notify_one();
            q = self
                .progress
                .wait_timeout(q, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        Ok(())
    }

    pub(super) fn close(&self) {
        self.lock().closing = true;
        self.more.notify_one();
    }

    /// The indexer thread: insert what the log took, as many at once as [`INDEX_DELAY`]
    /// gathers, until the journal closes and everything is in.
    pub(super) fn run(&self, mut conn: Connection, path: &Path) {
        let mut q = self.lock();
        loop {
            if q.rows.is_empty() {
                q.hurry = false;
                if q.closing {
                    return;
                }
                q = self.more.wait(q).unwrap_or_else(|p| p.into_inner());
                continue;
            }
            if !(q.hurry || q.closing || q.rows.len() >= INDEX_BATCH || q.failed.is_some()) {
                q = self
                    .more
                    .wait_timeout(q, INDEX_DELAY)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
            let take = q.rows.len().min(INDEX_BATCH);
            let rows: Vec<Indexed> = q.rows.drain(..take).collect();
            drop(q);
            let key = self.checkpoint_key.get().map(Arc::as_ref);
            let inserted = insert(&mut conn, path, &rows, key);
            q = self.lock();
            match inserted {
                Ok(()) => {
                    q.indexed = rows.last().map_or(q.indexed, |r| r.chain_seq);
                    q.failed = None;
                    self.progress.notify_all();
                }
                Err(e) => {
                    tracing::error!(error = %e, records = rows.len(), "journal: indexing failed; the records stay in the log, and are indexed again");
                    let later = std::mem::take(&mut q.rows);
                    q.rows = rows;
                    q.rows.extend(later);
                    q.failed = Some(e);
                    self.progress.notify_all();
                    if q.closing {
                        return; // the log keeps them for the next opening
                    }
                    q = self
                        .more
                        .wait_timeout(q, Duration::from_millis(100))
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
            }
        }
    }
}

//! The journal: every call record appended to an embedded SQLite database, in a hash chain (each
//! entry carries the hash of the previous one), committed before the call is acknowledged. WAL
//! mode; `Durability::Synced` also syncs every commit to disk. `verify` walks the chain and the
//! records' host signatures and names the first entry that does not check out.
//!
//! Appends go through one writer thread with group commit: the writer takes every record waiting
//! when it becomes free and commits them in one transaction, then answers each caller. An idle
//! journal commits one record at once; a busy one pays one commit (and, when synced, one disk
//! flush) per batch instead of per call. No caller hears back before its record is committed.

use crate::record::CallRecord;
use crate::signing::{HostKey, RecordSignature};
use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

/// How hard a commit tries to reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// WAL with `synchronous = NORMAL`: a committed record survives a process crash.
    Committed,
    /// WAL with `synchronous = FULL`: it also survives a power loss.
    Synced,
}

/// The most records one group commit takes.
pub const MAX_BATCH: usize = 512;

/// WAL frames (pages) written between two requests to the checkpointer: SQLite's own cadence.
/// Checkpointing more often costs `fsync`s for nothing; a WAL overwritten in place after a
/// checkpoint syncs faster than one that keeps growing.
const CHECKPOINT_EVERY_FRAMES: i64 = 1000;

/// WAL frames at which the writer checkpoints itself, before its next commit, so that the
/// checkpoint completes and the WAL starts over (about 16 MiB): passive checkpoints beside a
/// writer that never pauses may never catch up, and a checkpointer thread starved of CPU on a
/// busy machine may not run at all. The writer does not depend on that thread for the bound.
const CHECKPOINT_LIMIT_FRAMES: i64 = 4000;

/// Why the journal failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JournalError {
    #[error("journal {path}: {message}")]
    Sqlite { path: String, message: String },
    #[error("journal {path}: cannot create its folder: {message}")]
    Folder { path: String, message: String },
    #[error("journal {path}: the writer has stopped")]
    WriterGone { path: String },
    #[error("records are not journaled here (--no-journal)")]
    Off,
    /// The shared store (several nodes' journal) failed.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

impl JournalError {
    /// A stable snake_case name of the condition: `store_unavailable` when the shared store is
    /// out of reach, else `journal_failed`.
    pub fn kind(&self) -> &'static str {
        match self {
            JournalError::Store(e) => e.kind(),
            _ => "journal_failed",
        }
    }

    /// Whether the same call, retried, could be journaled: only when the store was out of reach.
    pub fn retryable(&self) -> bool {
        matches!(self, JournalError::Store(e) if e.retryable())
    }
}

/// One journal entry's place in the chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Entry {
    /// The position in the journal: in a shared store, the global commit order of every node.
    pub seq: i64,
    pub hash: String,
    /// In a shared store: the node whose chain holds the entry, and its place there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<(String, i64)>,
}

/// A listed entry.
#[derive(Debug, Clone, Serialize)]
pub struct Listed {
    pub seq: i64,
    /// The node that wrote it (a shared store only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    pub call_id: String,
    pub tool: String,
    pub status: String,
    pub stage: String,
    pub principal: Option<String>,
    pub received_at: String,
}

/// Filters for [`Journal::list`].
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub tool: Option<String>,
    pub status: Option<String>,
    pub stage: Option<String>,
    pub principal: Option<String>,
    /// RFC 3339; entries received at or after it.
    pub since: Option<String>,
    pub limit: Option<u32>,
}

/// The result of a chain check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verification {
    pub entries: u64,
    /// The first entry that does not check out, and why.
    pub first_bad: Option<(i64, String)>,
    /// The last entry of each chain that checked out: an auditor who keeps these can later tell
    /// a journal cut short (the one change a chain alone cannot show).
    pub heads: Vec<Head>,
}

/// The head of one chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Head {
    /// The node of the chain (`None`: the single chain of a local journal).
    pub node: Option<String>,
    /// The entry's place in its chain.
    pub seq: i64,
    pub hash: String,
}

/// Group-commit figures since the journal was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CommitStats {
    pub records: u64,
    pub commits: u64,
}

/// A record as a journal stores it: its JSON text and the columns it is listed by.
pub(crate) struct Row {
    pub(crate) text: String,
    pub(crate) call_id: String,
    pub(crate) tool: String,
    pub(crate) status: &'static str,
    pub(crate) stage: &'static str,
    pub(crate) principal: Option<String>,
    pub(crate) session: String,
    pub(crate) received_at: String,
}

impl Row {
    pub(crate) fn of(record: &CallRecord) -> Row {
        // A record holds only strings, numbers and JSON values: it always serializes.
        Row::with_text(record, serde_json::to_string(record).unwrap_or_default())
    }

    /// The row of `record`, whose JSON is `text`.
    fn with_text(record: &CallRecord, text: String) -> Row {
        Row {
            text,
            call_id: record.call_id.clone(),
            tool: record.tool.clone(),
            status: record.status.as_str(),
            stage: record.stage.as_str(),
            principal: record.principal.clone(),
            session: record.session_id.clone(),
            received_at: record.received_at.clone(),
        }
    }
}

/// A record on its way to the writer.
struct Pending {
    row: Row,
    /// Set when the writer is to sign the record, with the others of its commit.
    sign: Option<ToSign>,
    reply: tokio::sync::oneshot::Sender<Result<Committed, JournalError>>,
}

/// A record the writer signs: its digest (of `row.text`, which has `signature` null) and the key.
struct ToSign {
    digest: [u8; 32],
    key: Arc<HostKey>,
    /// The signature, once made.
    signed: Option<RecordSignature>,
}

/// What the writer answers: the record's place, and its signature when the writer signed it.
struct Committed {
    entry: Entry,
    signature: Option<RecordSignature>,
}

/// An open journal.
pub struct Journal {
    path: PathBuf,
    /// For reads (`list`, `show`, `verify`); WAL lets them run beside the writer.
    reader: Mutex<Connection>,
    writer: Mutex<Option<mpsc::Sender<Pending>>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Runs the WAL's checkpoints when callers commit inline (`None` when synced).
    checkpointer: Mutex<Option<std::thread::JoinHandle<()>>>,
    stats: Arc<Mutex<CommitStats>>,
    /// The only connection that writes, with the chain's head: the writer thread's, and the
    /// caller's who finds it idle (see [`Journal::submit`]).
    state: Arc<Mutex<Writer>>,
    /// Records handed to the writer thread that it has not yet taken.
    queued: Arc<AtomicUsize>,
    /// Whether a caller may commit its own record: not when every commit waits for `fsync`.
    inline: bool,
}

const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The head of the one chain of a local journal (none while it is empty).
fn single_head(seq: i64, hash: &str) -> Vec<Head> {
    (seq > 0)
        .then(|| Head {
            node: None,
            seq,
            hash: hash.to_string(),
        })
        .into_iter()
        .collect()
}

fn chain_hash(prev: &str, seq: i64, record: &str) -> String {
    crate::digest::sha256_hex(format!("{prev}\n{seq}\n{record}").as_bytes())
}

fn sqlite(path: &Path) -> impl Fn(rusqlite::Error) -> JournalError + '_ {
    move |e| JournalError::Sqlite {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

fn connect(path: &Path, durability: Durability) -> Result<Connection, JournalError> {
    let err = sqlite(path);
    let conn = Connection::open(path).map_err(&err)?;
    let sync = match durability {
        Durability::Committed => "NORMAL",
        Durability::Synced => "FULL",
    };
    conn.execute_batch(&format!(
        "PRAGMA journal_mode = WAL;
         PRAGMA synchronous = {sync};
         PRAGMA busy_timeout = 5000;"
    ))
    .map_err(&err)?;
    Ok(conn)
}

impl Journal {
    /// Open (or create) the journal at `path`.
    pub fn open(path: &Path, durability: Durability) -> Result<Journal, JournalError> {
        let shown = path.display().to_string();
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| JournalError::Folder {
                path: shown.clone(),
                message: e.to_string(),
            })?;
        }
        let mut writer_conn = connect(path, durability)?;
        writer_conn
            .execute_batch(
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
                 );
                 CREATE INDEX IF NOT EXISTS records_call ON records(call_id);",
            )
            .map_err(sqlite(path))?;
        // Callers commit their own records only when a commit is a WAL append (no `fsync`);
        // their checkpoints then run on a thread of their own (below), never in a caller.
        // Synced, the writer thread commits every record and checkpoints as SQLite does.
        let inline = durability == Durability::Committed;
        let wal_frames = Arc::new(std::sync::atomic::AtomicI64::new(0));
        if inline {
            // The WAL hook replaces SQLite's automatic checkpoints; it counts the frames.
            let frames = wal_frames.clone();
            writer_conn
                .wal_hook(Some(
                    move |_: &mut rusqlite::hooks::Wal, pages: std::ffi::c_int| {
                        frames.store(i64::from(pages), Ordering::Release);
                        Ok(())
                    },
                ))
                .map_err(sqlite(path))?;
        }
        let reader = connect(path, durability)?;
        let checkpoint_conn = inline.then(|| connect(path, durability)).transpose()?;
        let (tx, rx) = mpsc::channel();
        let (wake, asked) = mpsc::sync_channel::<()>(1);
        let checkpointing = Arc::new(Mutex::new(()));
        let stats = Arc::new(Mutex::new(CommitStats::default()));
        let state = Arc::new(Mutex::new(Writer {
            path: path.to_path_buf(),
            last: head(&writer_conn, path),
            conn: writer_conn,
            stats: stats.clone(),
            wal_frames,
            frames_at_request: 0,
            frames_at_own: 0,
            checkpoint: inline.then(|| (wake, checkpointing.clone())),
        }));
        let queued = Arc::new(AtomicUsize::new(0));
        let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name.into())
                .spawn(f)
                .map_err(|e| JournalError::Sqlite {
                    path: shown.clone(),
                    message: format!("cannot start the {name} thread: {e}"),
                })
        };
        let thread = {
            let (state, queued) = (state.clone(), queued.clone());
            spawn(
                "vak-journal",
                Box::new(move || Writer::run(&state, &rx, &queued)),
            )?
        };
        let checkpointer = checkpoint_conn
            .map(|conn| {
                spawn(
                    "vak-checkpoint",
                    Box::new(move || checkpoints(conn, &checkpointing, &asked)),
                )
            })
            .transpose()?;
        Ok(Journal {
            path: path.to_path_buf(),
            reader: Mutex::new(reader),
            writer: Mutex::new(Some(tx)),
            thread: Mutex::new(Some(thread)),
            checkpointer: Mutex::new(checkpointer),
            stats,
            state,
            queued,
            inline,
        })
    }

    fn err(&self, source: rusqlite::Error) -> JournalError {
        sqlite(&self.path)(source)
    }

    fn submit(
        &self,
        row: Row,
        sign: Option<ToSign>,
    ) -> Result<tokio::sync::oneshot::Receiver<Result<Committed, JournalError>>, JournalError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let pending = Pending { row, sign, reply };
        // A caller that finds the writer idle (nothing queued for its thread, the connection
        // free) commits its record itself: one call at a time then pays no hand-off to the
        // writer thread and back, two thread wake-ups that cost tens of microseconds here. The
        // commit is a WAL append without `fsync`; checkpoints run on their own thread.
        if self.inline
            && self.queued.load(Ordering::Acquire) == 0
            && let Ok(mut writer) = self.state.try_lock()
        {
            writer.write(vec![pending]);
            return Ok(answer);
        }
        let gone = || JournalError::WriterGone {
            path: self.path.display().to_string(),
        };
        let writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let sender = writer.as_ref().ok_or_else(gone)?;
        self.queued.fetch_add(1, Ordering::AcqRel);
        if sender.send(pending).is_err() {
            self.queued.fetch_sub(1, Ordering::AcqRel);
            return Err(gone());
        }
        Ok(answer)
    }

    /// Append `record`; returns its place in the chain once it is committed.
    pub async fn append_async(&self, record: &CallRecord) -> Result<Entry, JournalError> {
        let answer = self.submit(Row::of(record), None)?;
        let committed = answer.await.unwrap_or_else(|_| Err(self.gone()))?;
        Ok(committed.entry)
    }

    /// Sign `record` with `key` and append it. The writer signs every record of one commit
    /// together (one signature for the batch, see [`crate::signing`]); a record committed alone
    /// is signed by itself. Unless the commit fails, `record` carries its signature after.
    pub async fn append_signing(
        &self,
        record: &mut CallRecord,
        key: &Arc<HostKey>,
    ) -> Result<Entry, JournalError> {
        record.signature = None;
        // One serialization: its digest is what is signed, and the writer splices the
        // signature into the same text.
        let text = serde_json::to_string(&*record).unwrap_or_default();
        let sign = ToSign {
            digest: crate::signing::text_digest(&text),
            key: key.clone(),
            signed: None,
        };
        let answer = self.submit(Row::with_text(record, text), Some(sign))?;
        let committed = answer.await.unwrap_or_else(|_| Err(self.gone()))?;
        record.signature = committed.signature;
        Ok(committed.entry)
    }

    fn gone(&self) -> JournalError {
        JournalError::WriterGone {
            path: self.path.display().to_string(),
        }
    }

    /// Append `record` and wait for its commit (blocking the thread; not for async code).
    pub fn append(&self, record: &CallRecord) -> Result<Entry, JournalError> {
        let answer = self.submit(Row::of(record), None)?;
        let committed = answer
            .blocking_recv()
            .unwrap_or_else(|_| Err(self.gone()))?;
        Ok(committed.entry)
    }

    /// Records and commits so far (records / commits is the mean batch size).
    pub fn commit_stats(&self) -> CommitStats {
        *self.stats.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Entries matching `filter`, newest first.
    pub fn list(&self, filter: &Filter) -> Result<Vec<Listed>, JournalError> {
        let conn = self.reader.lock().unwrap_or_else(|p| p.into_inner());
        let mut stmt = conn
            .prepare(
                "SELECT seq, call_id, tool, status, stage, principal, received_at FROM records
                 WHERE (?1 IS NULL OR tool = ?1) AND (?2 IS NULL OR status = ?2)
                   AND (?3 IS NULL OR stage = ?3) AND (?4 IS NULL OR principal = ?4)
                   AND (?5 IS NULL OR received_at >= ?5)
                 ORDER BY seq DESC LIMIT ?6",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(
                params![
                    filter.tool,
                    filter.status,
                    filter.stage,
                    filter.principal,
                    filter.since,
                    filter.limit.unwrap_or(100)
                ],
                |r| {
                    Ok(Listed {
                        seq: r.get(0)?,
                        node: None,
                        call_id: r.get(1)?,
                        tool: r.get(2)?,
                        status: r.get(3)?,
                        stage: r.get(4)?,
                        principal: r.get(5)?,
                        received_at: r.get(6)?,
                    })
                },
            )
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }

    /// The record of `call_id`, as stored.
    pub fn show(&self, call_id: &str) -> Result<Option<String>, JournalError> {
        let conn = self.reader.lock().unwrap_or_else(|p| p.into_inner());
        conn.query_row(
            "SELECT record FROM records WHERE call_id = ?1 ORDER BY seq DESC LIMIT 1",
            [call_id],
            |r| r.get(0),
        )
        .optional()
        .map_err(|e| self.err(e))
    }

    /// Walk the chain: each entry's link to the previous one, its hash, and its record's
    /// signature (against `trusted` when given).
    pub fn verify(&self, trusted: Option<&str>) -> Result<Verification, JournalError> {
        self.verify_any(trusted.as_slice())
    }

    /// [`Journal::verify`], requiring (unless `trusted` is empty) one of `trusted` to have
    /// signed every record.
    pub fn verify_any(&self, trusted: &[impl AsRef<str>]) -> Result<Verification, JournalError> {
        let conn = self.reader.lock().unwrap_or_else(|p| p.into_inner());
        let mut stmt = conn
            .prepare("SELECT seq, call_id, record, prev_hash, hash FROM records ORDER BY seq")
            .map_err(|e| self.err(e))?;
        let mut rows = stmt.query([]).map_err(|e| self.err(e))?;
        let (mut prev, mut expected_seq, mut entries) = (GENESIS.to_string(), 1i64, 0u64);
        while let Some(row) = rows.next().map_err(|e| self.err(e))? {
            let seq: i64 = row.get(0).map_err(|e| self.err(e))?;
            let call_id: String = row.get(1).map_err(|e| self.err(e))?;
            let text: String = row.get(2).map_err(|e| self.err(e))?;
            let prev_hash: String = row.get(3).map_err(|e| self.err(e))?;
            let hash: String = row.get(4).map_err(|e| self.err(e))?;
            entries += 1;
            let bad = |why: String| {
                Ok(Verification {
                    entries,
                    first_bad: Some((seq, why)),
                    heads: single_head(expected_seq - 1, &prev),
                })
            };
            if seq != expected_seq {
                return bad(format!("entry {expected_seq} is missing"));
            }
            if prev_hash != prev {
                return bad("its link to the previous entry is broken".into());
            }
            if chain_hash(&prev_hash, seq, &text) != hash {
                return bad("its content does not match its hash".into());
            }
            let record: CallRecord = match serde_json::from_str(&text) {
                Ok(r) => r,
                Err(e) => return bad(format!("its record does not parse: {e}")),
            };
            if record.call_id != call_id {
                return bad("its indexed call id differs from its record".into());
            }
            if let Err(e) = crate::signing::verify_any(&record, trusted) {
                return bad(format!("its record's signature: {e}"));
            }
            prev = hash;
            expected_seq += 1;
        }
        Ok(Verification {
            entries,
            first_bad: None,
            heads: single_head(expected_seq - 1, &prev),
        })
    }

    /// Where the journal is.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Journal {
    /// Close the channel and let the writer commit what it holds before the journal goes.
    fn drop(&mut self) {
        self.writer.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(t) = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = t.join();
        }
        // Then the checkpointer: its channel closes with the writer's sender.
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .checkpoint
            .take();
        if let Some(t) = self
            .checkpointer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            let _ = t.join();
        }
    }
}

/// The only connection that writes, and the chain's head.
struct Writer {
    path: PathBuf,
    conn: Connection,
    stats: Arc<Mutex<CommitStats>>,
    /// The last entry's sequence number and hash, or why they are unknown.
    last: Result<(i64, String), JournalError>,
    /// Frames in the WAL after the last commit (set by SQLite's WAL hook).
    wal_frames: Arc<std::sync::atomic::AtomicI64>,
    /// Frames in the WAL when the checkpointer was last asked.
    frames_at_request: i64,
    /// Frames in the WAL when the writer last checkpointed itself (0 once the WAL starts over):
    /// where a reader holds the WAL and the checkpoint cannot complete, the next attempt waits
    /// for another [`CHECKPOINT_EVERY_FRAMES`] rather than costing every commit.
    frames_at_own: i64,
    /// Wakes the checkpointer, and is held by it while it checkpoints (`None` where SQLite
    /// checkpoints by itself, and once the journal closes).
    checkpoint: Option<(mpsc::SyncSender<()>, Arc<Mutex<()>>)>,
}

impl Writer {
    /// The writer thread: commit what callers hand over, as many at once as are waiting.
    fn run(state: &Mutex<Writer>, rx: &mpsc::Receiver<Pending>, queued: &AtomicUsize) {
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
            // commits after this batch, so the chain keeps the order of commits.
            queued.fetch_sub(batch.len(), Ordering::AcqRel);
            writer.write(batch);
        }
    }

    /// Sign and commit `batch` as one transaction after the chain's head, and answer each.
    fn write(&mut self, mut batch: Vec<Pending>) {
        let (start_seq, start_prev) = match &self.last {
            Ok(l) => l.clone(),
            Err(e) => {
                // The chain's head is unknown: write nothing rather than fork the chain.
                for p in batch {
                    let _ = p.reply.send(Err(e.clone()));
                }
                self.last = head(&self.conn, &self.path);
                return;
            }
        };
        sign(&mut batch);
        match self.commit(&batch, start_seq, &start_prev) {
            Ok(entries) => {
                if let Some(e) = entries.last() {
                    self.last = Ok((e.seq, e.hash.clone()));
                }
                if let Ok(mut s) = self.stats.lock() {
                    s.records += batch.len() as u64;
                    s.commits += 1;
                }
                // Frames in the WAL now (SQLite's WAL hook keeps the count); fewer than at
                // the last request means the WAL started over.
                let frames = self.wal_frames.load(Ordering::Acquire);
                if frames < self.frames_at_request {
                    self.frames_at_request = 0;
                }
                if frames < self.frames_at_own {
                    self.frames_at_own = 0;
                }
                if frames - self.frames_at_request >= CHECKPOINT_EVERY_FRAMES
                    && let Some((wake, _)) = &self.checkpoint
                    // Full: a checkpoint is asked for already, and will see these too.
                    && wake.try_send(()).is_ok()
                {
                    self.frames_at_request = frames;
                }
                for (p, entry) in batch.into_iter().zip(entries) {
                    let signature = p.sign.and_then(|s| s.signed);
                    let _ = p.reply.send(Ok(Committed { entry, signature }));
                }
                // The checkpointer has fallen behind: checkpoint here, holding the writer (no
                // frame is added meanwhile) once the checkpointer's own checkpoint is over (two
                // at once, SQLite refuses one), so that this one completes.
                if frames
                    >= CHECKPOINT_LIMIT_FRAMES.max(self.frames_at_own + CHECKPOINT_EVERY_FRAMES)
                    && let Some((_, checkpointing)) = &self.checkpoint
                {
                    let _idle = checkpointing.lock().unwrap_or_else(|p| p.into_inner());
                    if let Err(e) = passive_checkpoint(&self.conn) {
                        tracing::warn!(error = %e, "journal checkpoint failed");
                    }
                    self.frames_at_own = frames;
                }
            }
            Err(e) => {
                tracing::error!(error = %e, records = batch.len(), "journal commit failed");
                for p in batch {
                    let _ = p.reply.send(Err(e.clone()));
                }
                // The transaction rolled back: read the head again.
                self.last = head(&self.conn, &self.path);
            }
        }
    }

    fn commit(
        &mut self,
        batch: &[Pending],
        mut seq: i64,
        prev: &str,
    ) -> Result<Vec<Entry>, JournalError> {
        let err = sqlite(&self.path);
        let tx = self.conn.transaction().map_err(&err)?;
        let mut prev = prev.to_string();
        let mut entries = Vec::with_capacity(batch.len());
        {
            let mut insert = tx
                .prepare_cached(
                    "INSERT INTO records (seq, call_id, tool, status, stage, principal, received_at, record, prev_hash, hash)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                )
                .map_err(&err)?;
            for Pending { row: p, .. } in batch {
                seq += 1;
                let hash = chain_hash(&prev, seq, &p.text);
                insert
                    .execute(params![
                        seq,
                        p.call_id,
                        p.tool,
                        p.status,
                        p.stage,
                        p.principal,
                        p.received_at,
                        p.text,
                        prev,
                        hash
                    ])
                    .map_err(&err)?;
                prev = hash.clone();
                entries.push(Entry {
                    seq,
                    hash,
                    node: None,
                });
            }
        }
        tx.commit().map_err(&err)?;
        Ok(entries)
    }
}

/// The chain's head as stored: the last entry's sequence number and hash.
fn head(conn: &Connection, path: &Path) -> Result<(i64, String), JournalError> {
    let found: Option<(i64, String)> = conn
        .query_row(
            "SELECT seq, hash FROM records ORDER BY seq DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .map_err(sqlite(path))?;
    Ok(found.unwrap_or((0, GENESIS.to_string())))
}

/// The checkpointer thread: SQLite's passive checkpoints (copying the WAL back into the
/// database, with its `fsync`s) when the writer asks, beside the commits rather than in them.
/// It holds `checkpointing` meanwhile, which the writer waits on at
/// [`CHECKPOINT_LIMIT_FRAMES`] (the writer takes its own lock first, this thread never does).
fn checkpoints(conn: Connection, checkpointing: &Mutex<()>, asked: &mpsc::Receiver<()>) {
    while asked.recv().is_ok() {
        let _busy = checkpointing.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(e) = passive_checkpoint(&conn) {
            tracing::warn!(error = %e, "journal checkpoint failed");
        }
    }
}

/// A passive checkpoint: copies what it can of the WAL into the database, waiting for nobody.
fn passive_checkpoint(conn: &Connection) -> rusqlite::Result<()> {
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
}

/// Sign the records of `batch` that ask for it: one signature per key for all of them (one key in
/// practice: the host's), each record's JSON given its signature in place.
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn record(n: u32) -> CallRecord {
        let mut r = CallRecord::new(format!("call_{n}"), "t".into(), "api".into(), "{}");
        crate::signing::HostKey::from_seed_hex(&"07".repeat(32))
            .unwrap()
            .sign(&mut r);
        r
    }

    #[test]
    fn concurrent_appends_keep_one_valid_chain() {
        let dir = tempfile::tempdir().unwrap();
        let j = std::sync::Arc::new(
            Journal::open(&dir.path().join("j.sqlite"), Durability::Committed).unwrap(),
        );
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let j = j.clone();
                std::thread::spawn(move || {
                    (0..25).for_each(|i| drop(j.append(&record(t * 100 + i)).unwrap()))
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        let v = j.verify(None).unwrap();
        assert_eq!((v.entries, v.first_bad), (100, None));
        assert_eq!(v.heads.len(), 1);
        assert_eq!(v.heads[0].seq, 100);
        let key = crate::signing::HostKey::from_seed_hex(&"07".repeat(32))
            .unwrap()
            .public_hex();
        assert_eq!(j.verify(Some(&key)).unwrap().first_bad, None);
        let other = "11".repeat(32);
        assert!(
            j.verify(Some(&other)).unwrap().first_bad.is_some(),
            "a foreign key is named"
        );
        // Reopened, it goes on from where it was.
        drop(j);
        let j = Journal::open(&dir.path().join("j.sqlite"), Durability::Synced).unwrap();
        assert_eq!(j.append(&record(999)).unwrap().seq, 101);
    }

    /// Records appended at once are signed per commit: at least one commit held several, each
    /// of those records carries a batch signature that verifies alone, and what the journal
    /// stored is exactly the record the caller got back.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn records_committed_together_are_signed_together() {
        // Synced, the writer thread commits every record; committed, a caller that finds the
        // writer idle commits its own, and the others queue for the thread. The test holds the
        // writer until all 64 are queued, so they share commits however the threads are
        // scheduled (left to chance, a slow machine committed all 64 one by one).
        for durability in [Durability::Synced, Durability::Committed] {
            committed_together_signed_together(durability).await;
        }
    }

    async fn committed_together_signed_together(durability: Durability) {
        let dir = tempfile::tempdir().unwrap();
        let j = Arc::new(Journal::open(&dir.path().join("j.sqlite"), durability).unwrap());
        let key = Arc::new(HostKey::from_seed_hex(&"07".repeat(32)).unwrap());
        let held = j.state.lock().unwrap();
        let appends: Vec<_> = (0..64)
            .map(|n| {
                let (j, key) = (j.clone(), key.clone());
                tokio::spawn(async move {
                    let mut r =
                        CallRecord::new(format!("call_{n}"), "t".into(), "api".into(), "{}");
                    let entry = j.append_signing(&mut r, &key).await.unwrap();
                    (r, entry)
                })
            })
            .collect();
        // The tasks run on the runtime's workers; this thread waits without awaiting.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while j.queued.load(Ordering::Acquire) < 64 {
            assert!(std::time::Instant::now() < deadline, "64 appends queued");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        drop(held);
        let mut batched = 0;
        for done in futures::future::join_all(appends).await {
            let (r, _entry) = done.unwrap();
            let sig = r.signature.as_ref().expect("signed");
            if sig.algorithm == crate::signing::BATCH_ALGORITHM {
                batched += 1;
            }
            assert_eq!(
                crate::signing::verify(&r, Some(&key.public_hex())),
                Ok(key.public_hex())
            );
            let stored = j.show(&r.call_id).unwrap().expect("stored");
            assert_eq!(stored, serde_json::to_string(&r).unwrap());
        }
        let stats = j.commit_stats();
        assert!(
            stats.commits < 64 && batched > 0,
            "64 appends at once shared commits ({stats:?}), {batched} signed in a batch"
        );
        let v = j.verify(Some(&key.public_hex())).unwrap();
        assert_eq!((v.entries, v.first_bad), (64, None));
    }

    /// Callers commit without SQLite's automatic checkpoints; the checkpointer thread keeps the
    /// WAL from growing without end, and the writer bounds it itself where that thread falls
    /// behind. With no checkpoint at all, these 6,000 records of 3 KB, one at a time, grew the
    /// WAL to 107 MB. The bound holds however the threads are scheduled (a starved checkpointer
    /// on a loaded CI machine once let it reach 30 MB against the earlier, thread-only backstop).
    #[test]
    fn the_wal_is_checkpointed_beside_the_commits() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.sqlite");
        let j = Journal::open(&path, Durability::Committed).unwrap();
        let key = HostKey::from_seed_hex(&"07".repeat(32)).unwrap();
        let mut r = record(0);
        r.arguments = Some(serde_json::json!({ "text": "x".repeat(3000) }));
        let wal = dir.path().join("j.sqlite-wal");
        let mut largest = 0;
        for n in 0..6000 {
            r.call_id = format!("call_{n}");
            key.sign(&mut r);
            j.append(&r).unwrap();
            largest = largest.max(std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0));
        }
        let frame = 4096 + 24;
        // The limit, plus the frames of the one commit that crossed it (a record's leaf, the
        // index's leaf, and the interior pages above them).
        let bound = (CHECKPOINT_LIMIT_FRAMES + 16) as u64 * frame;
        assert!(
            largest <= bound,
            "the WAL reached {largest} bytes (bound {bound})"
        );
        let v = j.verify(None).unwrap();
        assert_eq!((v.entries, v.first_bad), (6000, None));
    }
}

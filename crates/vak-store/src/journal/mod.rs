//! The journal: every call's entries in hash chains (each entry carries the hash of the one
//! before it in its chain), written to an append-only log before the caller hears back, and
//! indexed right after into an embedded SQLite database, where they are listed, shown and
//! verified.
//!
//! **Write-ahead.** A call that has passed every check before dispatch appends a `started`
//! entry ([`Started`]: call id, tool, principal, session, argument and grant digests, limits),
//! and waits for it to be in the log, before any instance of its tool exists; its final record
//! follows as an entry of its own, under the same call id. A `started` entry without a final
//! record is a call that is running now (its process holds its chain) or was interrupted (its
//! process is gone): [`Journal::list`] and [`Journal::verify`] say which.
//!
//! **One chain per process.** Each process that writes (each [`Journal`], at its first append)
//! takes a chain of its own, with its own log, in `<journal>-chains/` (`log`): the chain of a
//! process that is gone (its log's lock free), or a new one. Every process's indexer inserts its
//! own chain's entries into the one database (WAL, a busy timeout), so that the global `seq` is
//! the order in which entries were committed and `UNIQUE (chain, chain_seq)` keeps every chain
//! gapless. No process waits for another's lock to append. Whoever opens the journal indexes
//! what the logs of processes that are gone still hold. [`Journal::verify`] walks every chain
//! and names the chain and place of the first entry that does not check out; [`Journal::list`]
//! merges every chain by time. A journal written before chains had ids opens as it is: its
//! entries are the legacy chain (hashed without a chain id), which nothing appends to again.
//!
//! Why a log in front of SQLite: a SQLite commit of one record cost about 30 µs here (WAL frames
//! for the row, its index and page 1: about ten `pwrite`s and six lock calls), on every call's
//! path. An append to the log is one `write` (and, with `Durability::Synced`, one `fdatasync`).
//! The indexer thread then inserts what the log took, many entries to a transaction
//! ([`INDEX_DELAY`], [`INDEX_BATCH`]). Reads through this journal wait for the indexer to catch
//! up, so they see every entry this process acknowledged (and the other processes' entries
//! once their indexers have inserted them, within [`INDEX_DELAY`]).
//!
//! Appends go through one writer per journal with group commit (`writer`): entries appended
//! at once, `started` entries and records alike, are written (and synced, with
//! `Durability::Synced`) as one batch, signed together.
//!
//! The journal is private: its folder is made 0700 and its files 0600; an existing journal that
//! group or others can read is reported, with the `chmod` that fixes it.

pub mod chain;
mod index;
mod log;
mod private;
mod proof;
mod read;
mod spent;
mod writer;

pub use chain::{Kind, Started, Unfinished};
pub use index::{INDEX_BATCH, INDEX_DELAY};
pub use private::make_private_file;
pub use vak_core::chain::{Head, Verification};
pub use writer::MAX_BATCH;

use crate::record::CallRecord;
use crate::signing::HostKey;
use index::Index;
pub(crate) use private::private_dir;
use private::{chmod_fix, exposed};
use rusqlite::Connection;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use writer::{Committed, Pending, ToSign, Writer};

/// How hard a commit tries to reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// A plain `write` to the log (and WAL with `synchronous = NORMAL`): an entry survives a
    /// process crash.
    Committed,
    /// The log synced (`fdatasync`) before the caller hears back (and WAL with `synchronous =
    /// FULL`): it also survives a power loss.
    Synced,
}

/// Why the journal failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JournalError {
    #[error("journal {path}: {message}")]
    Sqlite { path: String, message: String },
    #[error("journal {path}: cannot create its folder: {message}")]
    Folder { path: String, message: String },
    #[error("journal {path}: the writer has stopped")]
    WriterGone { path: String },
    /// A chain's log cannot be made, read or written, or holds something other than what this
    /// journal writes.
    #[error("journal log {path}: {message}")]
    Log { path: String, message: String },
    #[error("records are not journaled here (--no-journal)")]
    Off,
    /// The shared store (several nodes' journal) failed.
    #[error(transparent)]
    Store(#[from] vak_core::ports::store::StoreError),
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

    /// Whether the same call, retried, could be journaled: when the store was out of reach.
    pub fn retryable(&self) -> bool {
        match self {
            JournalError::Store(e) => e.retryable(),
            _ => false,
        }
    }

    /// The failure as a call record keeps it.
    pub fn failure(&self) -> vak_core::record::JournalFailure {
        vak_core::record::JournalFailure {
            kind: self.kind(),
            message: self.to_string(),
            retryable: self.retryable(),
        }
    }
}

/// Why a call was refused before dispatch: its `started` entry could not be written, so its tool
/// was not run (no instance was made). Retryable: the journal may take it a moment later.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the call was not run: its started entry could not be written to the journal ({0}); nothing ran, retry later"
)]
pub struct JournalUnavailable(pub JournalError);

impl crate::stage::StageError for JournalUnavailable {
    /// The budget stage: the call's limits are fixed, and the write-ahead entry that records
    /// them is the stage's last step before dispatch.
    fn stage(&self) -> crate::stage::Stage {
        crate::stage::Stage::Budget
    }

    fn kind(&self) -> &'static str {
        chain::JOURNAL_UNAVAILABLE
    }

    fn retryable(&self) -> bool {
        true
    }

    fn details(&self) -> serde_json::Value {
        serde_json::json!({ "journal_error": self.0.kind() })
    }
}

/// One journal entry's place.
pub use vak_core::record::JournalPlace as Entry;

/// A listed call: its final record, or its `started` entry when it has none.
#[derive(Debug, Clone, Serialize)]
pub struct Listed {
    pub seq: i64,
    /// The chain that holds it (a node's, on a shared store; `None`: a local journal's legacy
    /// chain).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    pub call_id: String,
    pub tool: String,
    /// The record's status; `interrupted` or `running` for a call started without a record.
    pub status: String,
    pub stage: String,
    pub principal: Option<String>,
    pub received_at: String,
}

/// What [`Filter::status`] may be: a record's status, or `interrupted` (started, its process
/// gone without its record) and `running` (started, its process alive).
pub const STATUSES: [&str; 6] = [
    "completed",
    "tool_error",
    "refused",
    "failed",
    "interrupted",
    "running",
];

/// Filters for [`Journal::list`].
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub tool: Option<String>,
    /// A record's status, or `interrupted` / `running`.
    pub status: Option<String>,
    pub stage: Option<String>,
    pub principal: Option<String>,
    /// RFC 3339 in UTC with nine fractional digits, as [`since`] makes it; entries received at
    /// or after it.
    pub since: Option<String>,
    pub limit: Option<u32>,
}

/// Why a text is not a time a list can begin at.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SinceError {
    #[error(
        "is neither an RFC 3339 time (2026-12-06T10:00:00Z, 2026-12-06T11:00:00+01:00) nor a \
         duration (90s, 30m, 2h, 7d, 2w)"
    )]
    NotATime,
    #[error("reaches back beyond the earliest time")]
    TooFarBack,
}

/// The [`Filter::since`] of `text`: an RFC 3339 time (with any offset) or a duration back from
/// now (`90s`, `30m`, `2h`, `7d`, `2w`). Stored times are compared as text, so the instant is
/// written in UTC with all nine fractional digits: `10:00:00Z` written as is would sort after
/// `10:00:00.5Z` and leave out the calls of that second.
pub fn since(text: &str) -> Result<String, SinceError> {
    let at = match text.parse::<jiff::Timestamp>() {
        Ok(at) => at,
        Err(_) => {
            let (digits, unit) =
                text.split_at(text.len() - text.chars().last().map_or(0, char::len_utf8));
            let seconds = match unit {
                "s" => 1,
                "m" => 60,
                "h" => 3_600,
                "d" => 86_400,
                "w" => 604_800,
                _ => 0,
            };
            let back = digits
                .parse::<i64>()
                .ok()
                .filter(|n| *n >= 0 && seconds > 0)
                .and_then(|n| n.checked_mul(seconds))
                .ok_or(SinceError::NotATime)?;
            jiff::Timestamp::now()
                .checked_sub(jiff::SignedDuration::from_secs(back))
                .map_err(|_| SinceError::TooFarBack)?
        }
    };
    Ok(at.strftime("%Y-%m-%dT%H:%M:%S.%9fZ").to_string())
}

/// What [`Journal::page`] takes beside a [`Filter`]: filters the terminal list does not offer,
/// and where the page begins.
#[derive(Debug, Clone, Default)]
pub struct Page {
    /// Only calls of this session.
    pub session: Option<String>,
    /// Only calls whose id, or provider call id, contains this text.
    pub text: Option<String>,
    /// Only calls of this chain (a node's name; `""`: a local journal's legacy chain).
    pub node: Option<String>,
    /// Only calls received before this time (as [`since`] writes it): the end of a range.
    pub until: Option<String>,
    /// Only calls listed after this place (older): the `next` of the page before.
    pub before: Option<Cursor>,
}

/// What a picture of `vak audit serve` counts: at most `cap` calls, the newest that `filter`
/// and `page` select, so that a picture costs at most `cap` rows however long the journal
/// (`filter.limit` is not used).
#[derive(Debug, Clone, Copy)]
pub struct Sample<'a> {
    pub filter: &'a Filter,
    pub page: &'a Page,
    pub cap: u32,
}

/// A place in the list, newest first: a listed call's `received_at` and `seq`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    pub received_at: String,
    pub seq: i64,
}

/// One page of calls, and where the next begins when the page was full.
#[derive(Debug, Clone)]
pub struct Paged {
    pub rows: Vec<Listed>,
    pub next: Option<Cursor>,
}

/// A call's entry as [`Journal::show`] finds it, checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Shown {
    pub seq: i64,
    /// Its chain (`None`: a local journal's legacy chain), and its place there.
    pub node: Option<String>,
    pub chain_seq: i64,
    /// A final record, or a `started` entry (the call has no record).
    pub kind: Kind,
    pub call_id: String,
    pub tool: String,
    /// The record's status; `interrupted` or `running` for a `started` entry.
    pub status: String,
    pub received_at: String,
    /// The entry's JSON, as stored.
    pub text: String,
    /// Whether it checks out: its hash, its links to the entries before and after it in its
    /// chain, its signature. Why not, if not.
    pub check: Result<(), String>,
}

/// Where every chain ends now ([`Journal::tip`]): what a verification of the journal is keyed
/// by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tip {
    /// Each chain's last entry (not checked: the key, not the verdict).
    pub heads: Vec<Head>,
    /// The entries of every chain together.
    pub entries: u64,
    /// SQLite's `data_version` on the journal's reader: another value means some connection
    /// committed to the database in between.
    pub data_version: i64,
}

/// Group-commit figures since the journal was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CommitStats {
    /// Entries written.
    pub records: u64,
    pub commits: u64,
}

/// An entry as a journal stores it: its JSON text and the columns it is listed by.
pub(crate) struct Row {
    pub(crate) text: String,
    pub(crate) kind: Kind,
    pub(crate) call_id: String,
    pub(crate) provider_call_id: Option<String>,
    pub(crate) tool: String,
    pub(crate) status: &'static str,
    pub(crate) stage: &'static str,
    pub(crate) principal: Option<String>,
    pub(crate) session: String,
    pub(crate) received_at: String,
}

/// The `status` column of a `started` entry.
const STARTED_STATUS: &str = "started";

impl Row {
    pub(crate) fn of(record: &CallRecord) -> Row {
        // A record holds only strings, numbers and JSON values: it always serializes.
        Row::with_text(record, serde_json::to_string(record).unwrap_or_default())
    }

    /// The row of `record`, whose JSON is `text`.
    pub(crate) fn with_text(record: &CallRecord, text: String) -> Row {
        Row {
            text,
            kind: Kind::Record,
            call_id: record.call_id.clone(),
            provider_call_id: record.provider_call_id.clone(),
            tool: record.tool.clone(),
            status: record.status.as_str(),
            stage: record.stage.as_str(),
            principal: record.principal.clone(),
            session: record.session_id.clone(),
            received_at: record.received_at.clone(),
        }
    }

    /// The row of the `started` entry `s`, whose JSON is `text`: listed at the dispatch stage.
    pub(crate) fn started(s: &Started, text: String) -> Row {
        Row {
            text,
            kind: Kind::Started,
            call_id: s.call_id.clone(),
            provider_call_id: s.provider_call_id.clone(),
            tool: s.tool.clone(),
            status: STARTED_STATUS,
            stage: crate::stage::Stage::Dispatch.as_str(),
            principal: s.principal.clone(),
            session: s.session_id.clone(),
            received_at: s.received_at.clone(),
        }
    }

    /// The row of an entry's `text`, as a log holds it.
    pub(crate) fn parse(text: &str) -> Result<Row, serde_json::Error> {
        Ok(match chain::Parsed::parse(text)? {
            chain::Parsed::Record(r) => Row::with_text(&r, text.to_string()),
            chain::Parsed::Started(s) => Row::started(&s, text.to_string()),
        })
    }
}

fn sqlite(path: &Path) -> impl Fn(rusqlite::Error) -> JournalError + '_ {
    move |e| JournalError::Sqlite {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

pub struct Journal {
    path: PathBuf,
    durability: Durability,
    /// For reads (`list`, `show`, `verify`); WAL lets them run beside the indexers.
    reader: Mutex<Connection>,
    writer: Mutex<Option<mpsc::Sender<Pending>>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    indexer: Mutex<Option<std::thread::JoinHandle<()>>>,
    stats: Arc<Mutex<CommitStats>>,
    /// This process's chain: its log and head; the writer thread's, and the caller's who finds
    /// it idle (see [`Journal::submit`]).
    state: Arc<Mutex<Writer>>,
    /// Entries written to the log and not yet in the database.
    index: Arc<Index>,
    /// Entries handed to the writer thread that it has not yet taken.
    queued: Arc<AtomicUsize>,
    /// Whether a caller may write its own entry: not when every write waits for `fdatasync`.
    inline: bool,
    /// What group or others could read when the journal was opened.
    exposed: Vec<(PathBuf, u32)>,
}

impl Journal {
    /// Open (or create) the journal at `path`: its folder made 0700 and its files 0600 where
    /// they are new, its schema brought up to date, and what the logs of processes that are gone
    /// hold beyond the database indexed. This process takes a chain of its own at its first
    /// append.
    pub fn open(path: &Path, durability: Durability) -> Result<Journal, JournalError> {
        let shown = path.display().to_string();
        if let Some(dir) = path.parent() {
            private_dir(dir)?;
        }
        let mut index_conn = index::connect(path, durability)?;
        index::migrate(&mut index_conn, path)?;
        spent::create(&index_conn, path)?;
        let exposed = exposed(path);
        if !exposed.is_empty() {
            let modes: Vec<String> = exposed
                .iter()
                .map(|(p, m)| format!("{} {m:o}", p.display()))
                .collect();
            tracing::warn!(
                journal = %shown,
                "the journal can be read by group or others ({}): its records hold every call's arguments and results. Fix it with: {}",
                modes.join(", "),
                chmod_fix(&exposed)
            );
        }
        log::recover(path, durability)?;
        let reader = index::connect(path, durability)?;
        let index = Arc::new(Index::new(0));
        let stats = Arc::new(Mutex::new(CommitStats::default()));
        let state = Arc::new(Mutex::new(Writer {
            path: path.to_path_buf(),
            durability,
            log: None,
            last: (0, chain::GENESIS.to_string()),
            stats: stats.clone(),
            index: index.clone(),
        }));
        let (tx, rx) = mpsc::channel();
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
        let indexer = {
            let (index, path) = (index.clone(), path.to_path_buf());
            spawn("vak-index", Box::new(move || index.run(index_conn, &path)))?
        };
        let thread = {
            let (state, queued) = (state.clone(), queued.clone());
            spawn(
                "vak-journal",
                Box::new(move || Writer::run(&state, &rx, &queued)),
            )?
        };
        Ok(Journal {
            path: path.to_path_buf(),
            durability,
            reader: Mutex::new(reader),
            writer: Mutex::new(Some(tx)),
            thread: Mutex::new(Some(thread)),
            indexer: Mutex::new(Some(indexer)),
            stats,
            state,
            index,
            queued,
            // Callers write their own entries only when a write is a plain `write` (no
            // `fdatasync`); synced, the writer thread writes every batch.
            inline: durability == Durability::Committed,
            exposed,
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
        // A caller that finds the writer idle (nothing queued for its thread, its chain taken)
        // writes its entry itself: one call at a time then pays no hand-off to the writer thread
        // and back, two thread wake-ups that cost tens of microseconds here. Taking the chain
        // (the first write) reads files and the database: the writer thread does that, not an
        // async caller.
        if self.inline
            && self.queued.load(Ordering::Acquire) == 0
            && let Ok(mut writer) = self.state.try_lock()
            && writer.log.is_some()
        {
            writer.write(vec![pending]);
            return Ok(answer);
        }
        let writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let sender = writer.as_ref().ok_or_else(|| self.gone())?;
        self.queued.fetch_add(1, Ordering::AcqRel);
        if sender.send(pending).is_err() {
            self.queued.fetch_sub(1, Ordering::AcqRel);
            return Err(self.gone());
        }
        Ok(answer)
    }

    /// Append `record`; returns its place in the chain once it is in the log.
    pub async fn append_async(&self, record: &CallRecord) -> Result<Entry, JournalError> {
        let answer = self.submit(Row::of(record), None)?;
        let committed = answer.await.unwrap_or_else(|_| Err(self.gone()))?;
        Ok(committed.entry)
    }

    /// Sign checkpoints with `key` from now on, instead of entries: entries are appended
    /// unsigned ([`Journal::append_signing`] and [`Journal::append_started`] leave them so), and
    /// the indexer signs a checkpoint over each batch it inserts, in the same transaction
    /// ([`vak_core::chain::Checkpoint`]). The call path then pays a digest, not a signature; an
    /// entry's signature exists once it is indexed (within [`INDEX_DELAY`] under light load,
    /// and before any read through this journal returns).
    pub fn sign_checkpoints(&self, key: Arc<HostKey>) {
        self.index.sign_checkpoints(key);
    }

    /// Whether entries are covered by checkpoints ([`Journal::sign_checkpoints`]) rather than
    /// signed one by one.
    pub fn signs_checkpoints(&self) -> bool {
        self.index.signs_checkpoints()
    }

    /// Sign `record` with `key` and append it. The writer signs every entry of one batch
    /// together (one signature for the batch, see [`crate::signing`]); an entry written alone
    /// is signed by itself. Unless the append fails, `record` carries its signature after.
    /// Where the journal signs checkpoints, `record` is appended unsigned and stays so: a
    /// checkpoint covers it once indexed.
    pub async fn append_signing(
        &self,
        record: &mut CallRecord,
        key: &Arc<HostKey>,
    ) -> Result<Entry, JournalError> {
        record.signature = None;
        // One serialization: its digest is what is signed, and the writer splices the
        // signature into the same text.
        let text = serde_json::to_string(&*record).unwrap_or_default();
        let committed = self
            .append_signed(Row::with_text(record, text), key)
            .await?;
        record.signature = committed.signature;
        Ok(committed.entry)
    }

    /// Sign the `started` entry of a call with `key` and append it, as [`Journal::append_signing`]
    /// does a record (in the same group commits). Unless the append fails, `started` carries its
    /// signature after.
    pub async fn append_started(
        &self,
        started: &mut Started,
        key: &Arc<HostKey>,
    ) -> Result<Entry, JournalError> {
        started.signature = None;
        let text = started.unsigned_text();
        let committed = self.append_signed(Row::started(started, text), key).await?;
        started.signature = committed.signature;
        Ok(committed.entry)
    }

    /// Append `row`, whose text is unsigned, for the writer to sign with `key` (with the rest of
    /// its batch), unless the journal signs checkpoints: then it goes as it is, and the
    /// indexer's checkpoint signs it; what it committed.
    async fn append_signed(&self, row: Row, key: &Arc<HostKey>) -> Result<Committed, JournalError> {
        let sign = (!self.signs_checkpoints()).then(|| ToSign {
            digest: crate::signing::text_digest(&row.text),
            key: key.clone(),
            signed: None,
        });
        let answer = self.submit(row, sign)?;
        answer.await.unwrap_or_else(|_| Err(self.gone()))
    }

    fn gone(&self) -> JournalError {
        JournalError::WriterGone {
            path: self.path.display().to_string(),
        }
    }

    /// Append `record` and wait until it is in the log (blocking the thread; not for async code).
    pub fn append(&self, record: &CallRecord) -> Result<Entry, JournalError> {
        let answer = self.submit(Row::of(record), None)?;
        let committed = answer
            .blocking_recv()
            .unwrap_or_else(|_| Err(self.gone()))?;
        Ok(committed.entry)
    }

    /// Entries and batches written so far (entries / commits is the mean batch size).
    pub fn commit_stats(&self) -> CommitStats {
        *self.stats.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The chain this journal writes (once it has appended).
    pub fn chain(&self) -> Option<String> {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).chain()
    }

    /// The journal's folder and files that group or others could read or write when it was
    /// opened, with their modes (reported then, with the `chmod` that fixes them).
    pub fn exposed(&self) -> &[(PathBuf, u32)] {
        &self.exposed
    }

    /// Where the journal is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How hard its commits try to reach the disk.
    pub fn durability(&self) -> Durability {
        self.durability
    }
}

impl Drop for Journal {
    /// Close the channel and let the writer write what it holds, then the indexer index it;
    /// the log is emptied once everything in it is in the database, and the chain let go.
    fn drop(&mut self) {
        self.writer.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(t) = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = t.join();
        }
        self.index.close();
        if let Some(t) = self
            .indexer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            let _ = t.join();
        }
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .let_go();
    }
}

#[cfg(test)]
mod checkpoint_tests;
#[cfg(test)]
mod tests;

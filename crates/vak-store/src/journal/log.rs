//! The logs of a journal's chains: one per writing process, in `<journal>-chains/<chain>.log`
//! (and `.log2`), each locked (an advisory lock on its first file) by the process whose chain it
//! is. A process takes a chain at its first write: a chain whose process is gone (its log's lock
//! is free), after indexing what its log still holds, or a new one. A journal opened by any
//! process indexes what the logs of gone processes hold beyond the database.
//!
//! A log holds its chain's entries written and not yet known to be in the database: frames of a
//! length, a CRC-32 and a body of the file's lap, the entry's place in its chain and its JSON
//! text, in two files written in turn. The file written is set aside once it is
//! [`LOG_RESET_BYTES`] long, and written again from its start once the database holds everything
//! in it (a file cannot be cut at its start, and the indexer, always a little behind, is seldom
//! level with the writer).
//!
//! The files are made [`LOG_FILE_BYTES`] long (zeros) when a chain is made and written over in
//! place after that: an `fdatasync` of a write that grows a file also writes its new size, which
//! took 218–276 µs against 169–181 µs for a write in place, here. A file's lap, counted up each
//! time it is written from its start, tells its frames from the older ones after them.
//!
//! The one log of a journal written before chains had ids (`<journal>-log`, `-log2`) is indexed
//! (as the legacy chain) and removed by the first process that finds it unlocked; no entry is
//! written to that chain again.

use super::index::{self, Indexed};
use super::{Durability, JournalError, Row};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use vak_core::chain::{CHAIN_ID_LEN, new_chain_id};

/// The log's size beyond which it is emptied, once everything in it is indexed.
pub(super) const LOG_RESET_BYTES: u64 = 1 << 20;

/// How long each file of the log is made (written longer only by a writer far ahead of the
/// indexer).
pub(super) const LOG_FILE_BYTES: u64 = LOG_RESET_BYTES + LOG_RESET_BYTES / 4;

/// Bytes of a frame before its body: the body's length and its CRC-32, little-endian.
pub(super) const FRAME_HEADER: usize = 8;

/// Bytes of a frame's body before the entry: the file's lap and the entry's place.
pub(super) const FRAME_PREFIX: usize = 12;

/// A chain's head: its last entry's place and hash.
type ChainHead = (i64, String);

/// The id of the legacy chain in the database.
pub(super) const LEGACY: &str = "";

/// The folder of the chains' logs of the journal at `path`.
pub(super) fn chains_dir(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push("-chains");
    PathBuf::from(name)
}

/// The two files of `chain`'s log.
pub(super) fn chain_paths(path: &Path, chain: &str) -> [PathBuf; 2] {
    let dir = chains_dir(path);
    ["log", "log2"].map(|ext| dir.join(format!("{chain}.{ext}")))
}

/// The two files of the log of a journal written before chains had ids.
pub(super) fn legacy_paths(path: &Path) -> [PathBuf; 2] {
    ["-log", "-log2"].map(|suffix| {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    })
}

/// Whether `s` is a chain's id as this journal makes them (lowercase hex of a fixed length):
/// only such names in the chains' folder are taken for logs.
pub(super) fn is_chain_id(s: &str) -> bool {
    s.len() == CHAIN_ID_LEN
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The chains whose logs are in the chains' folder, in name order.
fn chains_on_disk(path: &Path) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(chains_dir(path)) else {
        return Vec::new();
    };
    let mut chains: Vec<String> = dir
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let chain = name.strip_suffix(".log")?;
            is_chain_id(chain).then(|| chain.to_string())
        })
        .collect();
    chains.sort();
    chains
}

/// Open (or make, mode 0600) a log file for reading and writing.
fn open_file(at: &Path, create_new: bool) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true).write(true).mode(0o600);
    match create_new {
        true => options.create_new(true),
        false => options.create(true).truncate(false),
    };
    options.open(at)
}

fn io_error(at: &Path, what: &str, e: std::io::Error) -> JournalError {
    JournalError::Log {
        path: at.display().to_string(),
        message: format!("{what}: {e}"),
    }
}

/// Lock `file` if no other process (or other open file of this one) holds it: `false` when one
/// does.
fn try_lock(file: &std::fs::File, at: &Path) -> Result<bool, JournalError> {
    match file.try_lock() {
        Ok(()) => Ok(true),
        Err(std::fs::TryLockError::WouldBlock) => Ok(false),
        Err(std::fs::TryLockError::Error(e)) => Err(io_error(at, "cannot be locked", e)),
    }
}

/// Whether a process holds `chain`'s log now (it is writing the chain, or may: its calls
/// started and not finished are running, not interrupted).
pub(super) fn is_live(path: &Path, chain: &str) -> bool {
    if chain == LEGACY {
        return false;
    }
    let [first, _] = chain_paths(path, chain);
    match std::fs::File::open(&first) {
        // Taken and let go at once (when the file is dropped): no process held it.
        Ok(file) => matches!(file.try_lock(), Err(std::fs::TryLockError::WouldBlock)),
        Err(_) => false,
    }
}

/// The bytes of a log file; none when its first frame's header is zeros (emptied).
fn read_file(file: &std::fs::File, at: &Path) -> Result<Vec<u8>, JournalError> {
    let read = || -> std::io::Result<Vec<u8>> {
        let mut header = [0u8; FRAME_HEADER];
        match file.read_exact_at(&mut header, 0) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(Vec::new()),
            Err(e) => return Err(e),
        }
        if header == [0u8; FRAME_HEADER] {
            return Ok(Vec::new());
        }
        let len = file.metadata()?.len();
        let mut bytes = vec![0u8; usize::try_from(len).unwrap_or(usize::MAX)];
        file.read_exact_at(&mut bytes, 0)?;
        Ok(bytes)
    };
    read().map_err(|e| io_error(at, "cannot be read", e))
}

/// The entries of a chain's two log files (`bytes`) beyond what the database holds of it, put
/// in the database; the chain's head after, and the lap of each file's frames.
fn index_held(
    conn: &mut rusqlite::Connection,
    path: &Path,
    chain: &str,
    at: &Path,
    bytes: &[Vec<u8>; 2],
) -> Result<(ChainHead, [Option<u32>; 2]), JournalError> {
    let mut held = Vec::new();
    let mut laps = [None, None];
    for (b, lap) in bytes.iter().zip(&mut laps) {
        let (found, frames) = frames(b);
        *lap = found;
        held.extend(frames);
    }
    held.sort_by_key(|(seq, _)| *seq);
    let legacy = chain == LEGACY;
    let mut last = index::chain_head(conn, path, chain)?;
    let chain_id: Arc<str> = Arc::from(chain);
    let mut rows = Vec::new();
    for (seq, text) in held {
        if seq <= last.0 {
            continue; // indexed before its file was emptied
        }
        if seq != last.0 + 1 {
            return Err(JournalError::Log {
                path: at.display().to_string(),
                message: format!(
                    "holds entry {seq} where entry {} comes next (the database has lost entries the log no longer holds, or was replaced); move the log aside to index the rest without them",
                    last.0 + 1
                ),
            });
        }
        let row = Row::parse(text).map_err(|e| JournalError::Log {
            path: at.display().to_string(),
            message: format!("entry {seq} does not parse: {e}"),
        })?;
        let hash = super::chain::entry_hash(&last.1, (!legacy).then_some(chain), seq, text);
        rows.push(Indexed {
            chain: chain_id.clone(),
            chain_seq: seq,
            row,
            prev: std::mem::replace(&mut last.1, hash.clone()),
            hash,
        });
        last.0 = seq;
    }
    if !rows.is_empty() {
        tracing::info!(log = %at.display(), entries = rows.len(), "indexing what a journal's log held beyond its database");
        index::insert(conn, path, &rows, None)?;
    }
    Ok((last, laps))
}

/// Index what the logs of gone processes hold beyond the database (each log whose lock is free),
/// and mark them empty; the legacy log is removed once indexed. A log that cannot be indexed is
/// left as it is, and named in the log.
pub(super) fn recover(path: &Path, durability: Durability) -> Result<(), JournalError> {
    let legacy = legacy_paths(path);
    let chains = chains_on_disk(path);
    if chains.is_empty() && !legacy[0].exists() {
        return Ok(());
    }
    let mut conn = index::connect(path, durability)?;
    let mut logs: Vec<(String, [PathBuf; 2])> = Vec::new();
    if legacy[0].exists() {
        logs.push((LEGACY.to_string(), legacy));
    }
    logs.extend(chains.into_iter().map(|c| {
        let paths = chain_paths(path, &c);
        (c, paths)
    }));
    for (chain, paths) in logs {
        let recovered = (|| -> Result<(), JournalError> {
            let first = match std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&paths[0])
            {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(io_error(&paths[0], "cannot be opened", e)),
            };
            if !try_lock(&first, &paths[0])? {
                return Ok(()); // its process is writing it
            }
            let second = match std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&paths[1])
            {
                Ok(f) => Some(f),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => return Err(io_error(&paths[1], "cannot be opened", e)),
            };
            let bytes = [
                read_file(&first, &paths[0])?,
                match &second {
                    Some(f) => read_file(f, &paths[1])?,
                    None => Vec::new(),
                },
            ];
            if bytes.iter().all(Vec::is_empty) && chain != LEGACY {
                return Ok(());
            }
            index_held(&mut conn, path, &chain, &paths[0], &bytes)?;
            if chain == LEGACY {
                for p in &paths {
                    let _ = std::fs::remove_file(p);
                }
                return Ok(());
            }
            for f in std::iter::once(&first).chain(second.as_ref()) {
                f.write_all_at(&[0u8; FRAME_HEADER], 0)
                    .map_err(|e| io_error(&paths[0], "cannot be emptied", e))?;
            }
            Ok(())
        })();
        if let Err(e) = recovered {
            tracing::error!(error = %e, "a journal log left by a process that is gone could not be indexed; its chain stays as the database has it");
        }
    }
    Ok(())
}

/// A chain's log, locked by this process: the only writer of its chain.
pub(super) struct Log {
    /// The chain's id.
    pub(super) chain: Arc<str>,
    /// The first file, for messages.
    path: PathBuf,
    segments: [Segment; 2],
    /// The segment written.
    active: usize,
    sync: bool,
}

/// One file of the log.
struct Segment {
    file: std::fs::File,
    /// Bytes of this lap's frames (where the next write goes).
    len: u64,
    /// The last entry it holds (while `len > 0`).
    last: i64,
    /// Counted up each time the file is written again from its start; its frames carry it.
    lap: u32,
}

impl Log {
    fn error(&self, message: impl std::fmt::Display) -> JournalError {
        JournalError::Log {
            path: self.path.display().to_string(),
            message: message.to_string(),
        }
    }

    /// Take a chain for this process: the first one whose process is gone (its log unlocked),
    /// once what its log holds is indexed, else a new one. Returns the log, locked, and the
    /// chain's head; the database notes from which entry on the chain is this process's.
    pub(super) fn claim(
        path: &Path,
        durability: Durability,
    ) -> Result<(Log, ChainHead), JournalError> {
        super::private_dir(&chains_dir(path))?;
        let mut conn = index::connect(path, durability)?;
        for chain in chains_on_disk(path) {
            let paths = chain_paths(path, &chain);
            let Ok(first) = open_file(&paths[0], false) else {
                continue;
            };
            if !try_lock(&first, &paths[0])? {
                continue;
            }
            match Log::take(&mut conn, path, durability, &chain, first, false) {
                Ok(taken) => return Ok(taken),
                Err(e) => {
                    tracing::error!(error = %e, chain = %chain, "a chain left by a process that is gone cannot be taken over; a new chain is made")
                }
            }
        }
        for _ in 0..8 {
            let chain = new_chain_id();
            let paths = chain_paths(path, &chain);
            let first = match open_file(&paths[0], true) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(io_error(&paths[0], "cannot be made", e)),
            };
            if !try_lock(&first, &paths[0])? {
                continue;
            }
            return Log::take(&mut conn, path, durability, &chain, first, true);
        }
        Err(JournalError::Log {
            path: chains_dir(path).display().to_string(),
            message: "no new chain id was free after 8 tries".into(),
        })
    }

    /// Take `chain`, whose first file is `first`, locked: index what it holds, make both files
    /// ready and note in the database that the chain is this process's from its next entry on.
    fn take(
        conn: &mut rusqlite::Connection,
        path: &Path,
        durability: Durability,
        chain: &str,
        first: std::fs::File,
        created: bool,
    ) -> Result<(Log, ChainHead), JournalError> {
        let paths = chain_paths(path, chain);
        let second =
            open_file(&paths[1], false).map_err(|e| io_error(&paths[1], "cannot be opened", e))?;
        let sync = durability == Durability::Synced;
        // Synced, a new file's name reaches the disk too, before anything is written to it.
        if created && sync {
            std::fs::File::open(chains_dir(path))
                .and_then(|d| d.sync_all())
                .map_err(|e| io_error(&paths[0], "its folder cannot be synced", e))?;
        }
        let bytes = [
            read_file(&first, &paths[0])?,
            read_file(&second, &paths[1])?,
        ];
        let (head, laps) = index_held(conn, path, chain, &paths[0], &bytes)?;
        let segment = |file, lap: Option<u32>| Segment {
            file,
            len: 0,
            last: 0,
            // Count on from the lap found, so that its frames are older ones from now on.
            lap: lap.map_or(1, |l| l.wrapping_add(1)),
        };
        let mut log = Log {
            chain: Arc::from(chain),
            path: paths[0].clone(),
            segments: [segment(first, laps[0]), segment(second, laps[1])],
            active: 0,
            sync,
        };
        for at in 0..2 {
            log.prepare(at)?;
        }
        index::took_chain(conn, path, chain, head.0 + 1)?;
        tracing::debug!(journal = %path.display(), chain, from = head.0 + 1, "this process writes its own chain of the journal");
        Ok((log, head))
    }

    /// Make file `at` [`LOG_FILE_BYTES`] long if it is shorter (zeros, synced when the log
    /// is), so that writes go over bytes already allocated; the next write goes to its start.
    fn prepare(&mut self, at: usize) -> Result<(), JournalError> {
        let s = &mut self.segments[at];
        let grown = s
            .file
            .metadata()
            .and_then(|m| match m.len() < LOG_FILE_BYTES {
                true => {
                    let zeros = vec![0u8; 1 << 16];
                    let mut offset = m.len();
                    while offset < LOG_FILE_BYTES {
                        let n = zeros.len().min((LOG_FILE_BYTES - offset) as usize);
                        s.file.write_all_at(&zeros[..n], offset)?;
                        offset += n as u64;
                    }
                    match self.sync {
                        true => s.file.sync_all(),
                        false => Ok(()),
                    }
                }
                false => Ok(()),
            });
        grown.map_err(|e| self.error(format!("cannot be made ready: {e}")))?;
        self.segments[at].len = 0;
        Ok(())
    }

    /// Bytes in both files.
    pub(super) fn len(&self) -> u64 {
        self.segments.iter().map(|s| s.len).sum()
    }

    /// The lap of the file written: the frames of the next write carry it.
    pub(super) fn lap(&self) -> u32 {
        self.segments[self.active].lap
    }

    /// Write `bytes` (whole frames of [`Log::lap`], up to entry `last`) after this lap's frames,
    /// in one write. On failure nothing counts as written: the next write goes to the same
    /// place, over what this one may have left.
    pub(super) fn append(&mut self, bytes: &[u8], last: i64) -> Result<(), JournalError> {
        let sync = self.sync;
        let s = &mut self.segments[self.active];
        let written = s.file.write_all_at(bytes, s.len).and_then(|()| match sync {
            true => s.file.sync_data(),
            false => Ok(()),
        });
        match written {
            Ok(()) => {
                s.len += bytes.len() as u64;
                s.last = last;
                Ok(())
            }
            Err(e) => Err(self.error(format!("cannot be written: {e}"))),
        }
    }

    /// Empty what the database holds (entries to `indexed`), and write the other file once
    /// this one is long.
    pub(super) fn tidy(&mut self, indexed: i64) {
        for at in 0..2 {
            let s = &self.segments[at];
            if s.len > 0 && indexed >= s.last && (at != self.active || s.len >= LOG_RESET_BYTES) {
                self.reset(at);
            }
        }
        let other = 1 - self.active;
        if self.segments[self.active].len >= LOG_RESET_BYTES && self.segments[other].len == 0 {
            self.active = other;
        }
    }

    /// Start file `at` again from its start, on a new lap (everything in it is in the
    /// database).
    fn reset(&mut self, at: usize) {
        let s = &mut self.segments[at];
        s.lap = s.lap.wrapping_add(1);
        s.len = 0;
    }

    /// Mark both files empty (everything in them is in the database): their first frames are
    /// zeroed, which ends a reading at once.
    pub(super) fn clear(&mut self) -> Result<(), JournalError> {
        for at in 0..2 {
            self.segments[at]
                .file
                .write_all_at(&[0u8; FRAME_HEADER], 0)
                .map_err(|e| self.error(format!("cannot be emptied: {e}")))?;
            self.reset(at);
        }
        Ok(())
    }
}

/// Append the frame of entry `seq` with the text `text`, on lap `lap`, to `out`.
pub(super) fn frame(out: &mut Vec<u8>, lap: u32, seq: i64, text: &str) {
    let body_len = FRAME_PREFIX + text.len();
    let mut crc = crc32fast::Hasher::new();
    crc.update(&lap.to_le_bytes());
    crc.update(&seq.to_le_bytes());
    crc.update(text.as_bytes());
    // An entry longer than 4 GiB cannot be one (arguments and results are capped far below).
    out.extend_from_slice(&u32::try_from(body_len).unwrap_or(u32::MAX).to_le_bytes());
    out.extend_from_slice(&crc.finalize().to_le_bytes());
    out.extend_from_slice(&lap.to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(text.as_bytes());
}

/// The lap of the first frame of a log file's `bytes`, and the frames (place and text) from the
/// start that are whole and of that lap. Reading ends at the first byte that does not begin
/// one: zeros, an older lap's frame, or a write cut short.
pub(super) fn frames(bytes: &[u8]) -> (Option<u32>, Vec<(i64, &str)>) {
    let (mut lap, mut out, mut rest) = (None, Vec::new(), bytes);
    while let Some(header) = rest.get(..FRAME_HEADER) {
        let word =
            |b: &[u8], at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        let (len, crc) = (word(header, 0) as usize, word(header, 4));
        let Some(body) = rest.get(FRAME_HEADER..FRAME_HEADER + len) else {
            break;
        };
        if len < FRAME_PREFIX || crc32fast::hash(body) != crc {
            break;
        }
        let this = word(body, 0);
        if lap.is_some_and(|l| l != this) {
            break;
        }
        let Ok(text) = std::str::from_utf8(&body[FRAME_PREFIX..]) else {
            break;
        };
        let mut seq = [0u8; 8];
        seq.copy_from_slice(&body[4..FRAME_PREFIX]);
        lap = Some(this);
        out.push((i64::from_le_bytes(seq), text));
        rest = &rest[FRAME_HEADER + len..];
    }
    (lap, out)
}

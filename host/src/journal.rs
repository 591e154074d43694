//! The journal: every call record appended to an embedded SQLite database, in a hash chain (each
//! entry carries the hash of the previous one), committed before the call is acknowledged. WAL
//! mode; `Durability::Synced` also syncs every commit to disk. `verify` walks the chain and the
//! records' host signatures and names the first entry that does not check out.

use crate::record::CallRecord;
use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// How hard a commit tries to reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// WAL with `synchronous = NORMAL`: a committed record survives a process crash.
    Committed,
    /// WAL with `synchronous = FULL`: it also survives a power loss.
    Synced,
}

/// Why the journal failed.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("journal {path}: {source}")]
    Sqlite {
        path: String,
        #[source]
        source: rusqlite::Error,
    },
    #[error("journal {path}: cannot create its folder: {source}")]
    Folder {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// One journal entry's place in the chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Entry {
    pub seq: i64,
    pub hash: String,
}

/// A listed entry.
#[derive(Debug, Clone, Serialize)]
pub struct Listed {
    pub seq: i64,
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
}

/// An open journal.
pub struct Journal {
    path: PathBuf,
    conn: Mutex<Connection>,
}

const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

fn chain_hash(prev: &str, seq: i64, record: &str) -> String {
    crate::digest::sha256_hex(format!("{prev}\n{seq}\n{record}").as_bytes())
}

impl Journal {
    /// Open (or create) the journal at `path`.
    pub fn open(path: &Path, durability: Durability) -> Result<Journal, JournalError> {
        let shown = path.display().to_string();
        let err = |source| JournalError::Sqlite {
            path: shown.clone(),
            source,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| JournalError::Folder {
                path: shown.clone(),
                source,
            })?;
        }
        let conn = Connection::open(path).map_err(err)?;
        let sync = match durability {
            Durability::Committed => "NORMAL",
            Durability::Synced => "FULL",
        };
        conn.execute_batch(&format!(
            "PRAGMA journal_mode = WAL;
             PRAGMA synchronous = {sync};
             PRAGMA busy_timeout = 5000;
             CREATE TABLE IF NOT EXISTS records (
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
             CREATE INDEX IF NOT EXISTS records_call ON records(call_id);"
        ))
        .map_err(err)?;
        Ok(Journal {
            path: path.to_path_buf(),
            conn: Mutex::new(conn),
        })
    }

    fn err(&self, source: rusqlite::Error) -> JournalError {
        JournalError::Sqlite {
            path: self.path.display().to_string(),
            source,
        }
    }

    /// Append `record` and commit; returns its place in the chain.
    pub fn append(&self, record: &CallRecord) -> Result<Entry, JournalError> {
        let text = serde_json::to_string(record).unwrap_or_default();
        let mut conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let tx = conn.transaction().map_err(|e| self.err(e))?;
        let last: Option<(i64, String)> = tx
            .query_row(
                "SELECT seq, hash FROM records ORDER BY seq DESC LIMIT 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        let (seq, prev) = match last {
            Some((s, h)) => (s + 1, h),
            None => (1, GENESIS.to_string()),
        };
        let hash = chain_hash(&prev, seq, &text);
        tx.execute(
            "INSERT INTO records (seq, call_id, tool, status, stage, principal, received_at, record, prev_hash, hash)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            params![
                seq,
                record.call_id,
                record.tool,
                record.status.as_str(),
                record.stage.as_str(),
                record.principal,
                record.received_at,
                text,
                prev,
                hash
            ],
        )
        .map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))?;
        Ok(Entry { seq, hash })
    }

    /// Entries matching `filter`, newest first.
    pub fn list(&self, filter: &Filter) -> Result<Vec<Listed>, JournalError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
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
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
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
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
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
            if let Err(e) = crate::signing::verify(&record, trusted) {
                return bad(format!("its record's signature: {e}"));
            }
            prev = hash;
            expected_seq += 1;
        }
        Ok(Verification {
            entries,
            first_bad: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}

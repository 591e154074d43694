//! Spent markers: the single use of what a host hands out and takes back once (an MCP
//! `requestState`). A marker is inserted in one statement that fails when it is there already,
//! so two processes on one state directory cannot both take the same one. A marker outlives
//! what it stands for (its expiry is given by the caller) and is dropped after.

use super::{Journal, JournalError, sqlite};
use rusqlite::{Connection, params};
use std::path::Path;

/// The table, made where it is missing (a journal of any schema version can have it: nothing
/// else reads it).
pub(super) fn create(conn: &Connection, path: &Path) -> Result<(), JournalError> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS spent_states (
             key TEXT PRIMARY KEY,
             expires_at INTEGER NOT NULL
         ) WITHOUT ROWID;
         CREATE INDEX IF NOT EXISTS spent_states_expiry ON spent_states(expires_at);",
    )
    .map_err(sqlite(path))
}

impl Journal {
    /// Mark `key` spent until `expires_at` (Unix seconds): `true` when this call spent it,
    /// `false` when it was spent before (by this process or another on the same journal).
    /// Markers expired by now are dropped.
    pub fn spend(&self, key: &str, expires_at: i64) -> Result<bool, JournalError> {
        let now = jiff::Timestamp::now().as_second();
        let conn = self.reader.lock().unwrap_or_else(|p| p.into_inner());
        let inserted = conn
            .execute(
                "INSERT INTO spent_states (key, expires_at) VALUES (?1, ?2)
                 ON CONFLICT (key) DO NOTHING",
                params![key, expires_at],
            )
            .map_err(|e| self.err(e))?;
        // Bounded by the index on the expiry: only markers past it are read.
        conn.execute(
            "DELETE FROM spent_states WHERE expires_at < ?1",
            params![now],
        )
        .map_err(|e| self.err(e))?;
        Ok(inserted == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Durability, Journal};

    #[test]
    fn a_key_is_spent_once_across_journals_on_one_file_and_dropped_once_expired() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.sqlite");
        let (one, two) = (
            Journal::open(&path, Durability::Committed).unwrap(),
            Journal::open(&path, Durability::Committed).unwrap(),
        );
        let later = jiff::Timestamp::now().as_second() + 60;
        assert_eq!(one.spend("k", later), Ok(true));
        assert_eq!(two.spend("k", later), Ok(false));
        assert_eq!(one.spend("k", later), Ok(false));
        // An expired marker goes at the next spend (of any key).
        let past = jiff::Timestamp::now().as_second() - 1;
        assert_eq!(one.spend("old", past), Ok(true));
        assert_eq!(two.spend("other", later), Ok(true));
        let left: i64 = one
            .reader
            .lock()
            .unwrap()
            .query_row(
                "SELECT count(*) FROM spent_states WHERE key = 'old'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(left, 0);
    }
}

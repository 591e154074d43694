//! Reading a local journal: listing calls, showing one call's entries checked, and verifying
//! every chain, with the chain's own checks (`vak_core::chain`).

use super::{
    Cursor, Filter, Head, Journal, JournalError, Kind, Listed, Page, Paged, STARTED_STATUS, Sample,
    Shown, Tip, Verification,
};
use super::{chain, log};
use rusqlite::{Connection, OptionalExtension, params};
use std::collections::HashMap;
use std::sync::MutexGuard;
use std::sync::atomic::{AtomicU64, Ordering};
use vak_core::chain::{ChainEntry, VerifyError};

impl Journal {
    /// The reader, once every entry this journal has acknowledged is in the database.
    pub(super) fn read(&self) -> Result<MutexGuard<'_, Connection>, JournalError> {
        self.index.caught_up(&self.path)?;
        Ok(self.reader.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Whether the call started at `chain_seq` of `chain`, without a record, is running now: its
    /// chain's log is held, by the process that took the chain at or before that entry.
    fn running(
        &self,
        conn: &Connection,
        cache: &mut HashMap<String, Option<i64>>,
        chain: &str,
        chain_seq: i64,
    ) -> Result<bool, JournalError> {
        let since = match cache.get(chain) {
            Some(s) => *s,
            None => {
                let since = match log::is_live(&self.path, chain) {
                    false => None,
                    true => conn
                        .query_row("SELECT since FROM chains WHERE chain = ?1", [chain], |r| {
                            r.get::<_, i64>(0)
                        })
                        .optional()
                        .map_err(|e| self.err(e))?,
                };
                cache.insert(chain.to_string(), since);
                since
            }
        };
        Ok(since.is_some_and(|s| chain_seq >= s))
    }

    /// Calls matching `filter`, newest first across every chain: each call's final record, or
    /// its `started` entry (as `interrupted` or `running`) when it has none.
    pub fn list(&self, filter: &Filter) -> Result<Vec<Listed>, JournalError> {
        Ok(self.page(filter, &Page::default())?.rows)
    }

    /// One page of [`Journal::list`]: the calls `filter` and `page` select, newest first, at
    /// most `filter.limit` (100 by default) read from the database, from `page.before` on (keyset
    /// paging on the indexed `received_at`: a page costs the same however deep it is), and where
    /// the next page begins when there may be one.
    pub fn page(&self, filter: &Filter, page: &Page) -> Result<Paged, JournalError> {
        use rusqlite::types::Value;
        let conn = self.read()?;
        let unfinished = matches!(filter.status.as_deref(), Some("interrupted" | "running"));
        let status = stored_status(filter);
        let (mut sql, mut values) = scope(
            "SELECT r.seq, r.chain, r.chain_seq, r.kind, r.call_id, r.tool, r.status, r.stage,
                    r.principal, r.received_at",
            filter,
            &status,
            page,
        );
        let limit = filter.limit.unwrap_or(100);
        values.push(Value::Integer(i64::from(limit)));
        sql.push_str(&format!(
            " ORDER BY r.received_at DESC, r.seq DESC LIMIT ?{}",
            values.len()
        ));
        let mut stmt = conn.prepare(&sql).map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(rusqlite::params_from_iter(values), |r| {
                Ok((
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                    Kind::parse(&r.get::<_, String>(3)?),
                    Listed {
                        seq: r.get(0)?,
                        node: None,
                        call_id: r.get(4)?,
                        tool: r.get(5)?,
                        status: r.get(6)?,
                        stage: r.get(7)?,
                        principal: r.get(8)?,
                        received_at: r.get(9)?,
                    },
                ))
            })
            .map_err(|e| self.err(e))?;
        let rows: Vec<_> = rows.collect::<Result<_, _>>().map_err(|e| self.err(e))?;
        // A full page may have more after it: it begins after the last row read (whether or
        // not that row is shown).
        let next = match rows.len() >= limit as usize {
            true => rows.last().map(|(.., l)| Cursor {
                received_at: l.received_at.clone(),
                seq: l.seq,
            }),
            false => None,
        };
        let mut live = HashMap::new();
        let mut out = Vec::with_capacity(rows.len());
        for (chain, chain_seq, kind, mut listed) in rows {
            if kind == Kind::Started {
                let running = self.running(&conn, &mut live, &chain, chain_seq)?;
                listed.status = if running { "running" } else { "interrupted" }.to_string();
                if unfinished && filter.status.as_deref() != Some(listed.status.as_str()) {
                    continue;
                }
            }
            listed.node = (chain != log::LEGACY).then_some(chain);
            out.push(listed);
        }
        Ok(Paged { rows: out, next })
    }

    /// The entries of the calls `id` names, as vak's call id or as the provider's (which a model
    /// chose: several calls may have it), oldest first: each call's final record, or its
    /// `started` entry when it has none; each checked (its hash, its links in its chain, its
    /// signature).
    pub fn show(&self, id: &str) -> Result<Vec<Shown>, JournalError> {
        let conn = self.read()?;
        let mut stmt = conn
            .prepare(
                "SELECT seq, chain, chain_seq, kind, call_id, record, prev_hash, hash, tool,
                        status, received_at
                 FROM records WHERE call_id = ?1 OR provider_call_id = ?1
                 ORDER BY received_at, seq LIMIT 1000",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([id], |r| {
                Ok((
                    stored(r)?,
                    r.get::<_, String>(8)?,
                    r.get::<_, String>(9)?,
                    r.get::<_, String>(10)?,
                ))
            })
            .map_err(|e| self.err(e))?;
        let rows: Vec<_> = rows.collect::<Result<_, _>>().map_err(|e| self.err(e))?;
        let mut live = HashMap::new();
        let mut shown: Vec<Shown> = Vec::new();
        // A call's record where it has one; else its `started` entry.
        let finished: std::collections::HashSet<String> = rows
            .iter()
            .filter(|(s, ..)| s.kind == Some(Kind::Record))
            .map(|(s, ..)| s.call_id.clone())
            .collect();
        for (stored, tool, mut status, received_at) in rows {
            let kind = stored.kind.unwrap_or(Kind::Record);
            if kind == Kind::Started && finished.contains(&stored.call_id) {
                continue;
            }
            if kind == Kind::Started {
                let running = self.running(&conn, &mut live, &stored.chain, stored.chain_seq)?;
                status = if running { "running" } else { "interrupted" }.to_string();
            }
            let neighbour = |seq: i64, column: &str| {
                conn.query_row(
                    &format!("SELECT {column} FROM records WHERE chain = ?1 AND chain_seq = ?2"),
                    params![stored.chain, seq],
                    |r| r.get::<_, String>(0),
                )
                .optional()
                .map_err(|e| self.err(e))
            };
            let before = match stored.chain_seq {
                1 => Some(chain::GENESIS.to_string()),
                n => neighbour(n - 1, "hash")?,
            };
            let after = neighbour(stored.chain_seq + 1, "prev_hash")?;
            let check = match stored.check_content::<chain::Parsed>() {
                // Written unsigned: checked up to the checkpoint that covers it.
                Ok(entry)
                    if entry.verify_signature(&[] as &[&str]) == Err(VerifyError::Unsigned) =>
                {
                    self.covered(&conn, &stored, before.as_deref(), after.as_deref())?
                }
                _ => chain::check_links(&stored, before.as_deref(), after.as_deref()),
            };
            shown.push(Shown {
                seq: stored.seq,
                node: (!stored.legacy).then(|| stored.chain.clone()),
                chain_seq: stored.chain_seq,
                kind,
                call_id: stored.call_id,
                tool,
                status,
                received_at,
                text: stored.text,
                check,
            });
        }
        Ok(shown)
    }

    /// The check of `stored`, written unsigned, by the checkpoint that covers it and the
    /// hashes of the entries that checkpoint covers (at most [`chain::MAX_CHECKPOINT_RUN`]).
    fn covered(
        &self,
        conn: &Connection,
        stored: &chain::Stored,
        before: Option<&str>,
        after: Option<&str>,
    ) -> Result<Result<(), String>, JournalError> {
        let cover = super::index::covering(conn, &self.path, &stored.chain, stored.chain_seq)?
            .map(|cp| self.run_hashes(conn, &cp).map(|run| (cp, run)))
            .transpose()?;
        let cover = cover.as_ref().map(|(cp, run)| (cp, &run[..]));
        Ok(chain::check_covered::<chain::Parsed>(
            stored, before, after, cover,
        ))
    }

    /// The hashes of the entries `cp` covers, in order, as the database holds them.
    pub(super) fn run_hashes(
        &self,
        conn: &Connection,
        cp: &chain::Checkpoint,
    ) -> Result<Vec<String>, JournalError> {
        let mut stmt = conn
            .prepare_cached(
                "SELECT hash FROM records WHERE chain = ?1 AND chain_seq BETWEEN ?2 AND ?3
                 ORDER BY chain_seq LIMIT ?4",
            )
            .map_err(|e| self.err(e))?;
        let limit = chain::MAX_CHECKPOINT_RUN as i64;
        stmt.query_map(params![cp.chain, cp.from, cp.seq, limit], |r| r.get(0))
            .map_err(|e| self.err(e))?
            .collect::<Result<Vec<String>, _>>()
            .map_err(|e| self.err(e))
    }

    /// Walk every chain: each entry's link to the one before, its hash, and its signature
    /// (against `trusted` when given).
    pub fn verify(&self, trusted: Option<&str>) -> Result<Verification, JournalError> {
        self.verify_any(trusted.as_slice())
    }

    /// [`Journal::verify`], requiring (unless `trusted` is empty) one of `trusted` to have
    /// signed every entry.
    pub fn verify_any(&self, trusted: &[impl AsRef<str>]) -> Result<Verification, JournalError> {
        let conn = self.read()?;
        self.verify_on(&conn, trusted, &AtomicU64::new(0))
    }

    /// [`Journal::verify_any`] on a connection of its own (pages served beside it are not held
    /// up by a long walk), counting the entries checked so far in `done` for a progress bar.
    pub fn verify_counting(
        &self,
        trusted: &[impl AsRef<str>],
        done: &AtomicU64,
    ) -> Result<Verification, JournalError> {
        drop(self.read()?);
        let conn = super::index::connect(&self.path, self.durability)?;
        self.verify_on(&conn, trusted, done)
    }

    /// Each chain's last entry, the entries in all, and the reader's `data_version` (which
    /// changes whenever another connection commits to the database: a new entry, or an entry
    /// changed behind the journal's back). Read from the `(chain, chain_seq)` index, not the
    /// entries: what a cached verification is keyed by.
    pub fn tip(&self) -> Result<Tip, JournalError> {
        let conn = self.read()?;
        let data_version: i64 = conn
            .query_row("PRAGMA data_version", [], |r| r.get(0))
            .map_err(|e| self.err(e))?;
        let mut stmt = conn
            .prepare(
                "SELECT r.chain, r.chain_seq, r.hash FROM
                   (SELECT chain, max(chain_seq) AS last FROM records GROUP BY chain) m
                 JOIN records r ON r.chain = m.chain AND r.chain_seq = m.last
                 ORDER BY r.chain",
            )
            .map_err(|e| self.err(e))?;
        let heads = stmt
            .query_map([], |r| {
                let chain: String = r.get(0)?;
                Ok(Head {
                    node: (chain != log::LEGACY).then_some(chain),
                    seq: r.get(1)?,
                    hash: r.get(2)?,
                })
            })
            .map_err(|e| self.err(e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.err(e))?;
        let entries = heads.iter().map(|h| h.seq.max(0) as u64).sum();
        Ok(Tip {
            heads,
            entries,
            data_version,
        })
    }

    fn verify_on(
        &self,
        conn: &Connection,
        trusted: &[impl AsRef<str>],
        done: &AtomicU64,
    ) -> Result<Verification, JournalError> {
        let mut entries = conn
            .prepare(
                "SELECT seq, chain, chain_seq, kind, call_id, record, prev_hash, hash
                 FROM records ORDER BY chain, chain_seq",
            )
            .map_err(|e| self.err(e))?;
        let entries = entries
            .query_map([], stored)
            .map_err(|e| self.err(e))?
            .map(|r| r.map_err(|e| self.err(e)));
        // A local journal's entries may be written unsigned, under checkpoints: read beside
        // the entries, in the same order, one at a time.
        let mut checkpoints = conn
            .prepare(super::index::CHECKPOINTS_IN_ORDER)
            .map_err(|e| self.err(e))?;
        let checkpoints = checkpoints
            .query_map([], super::index::checkpoint)
            .map_err(|e| self.err(e))?
            .map(|r| r.map_err(|e| self.err(e)));
        let mut v =
            chain::ChainCheck::checkpointed().walk(entries, checkpoints, trusted, || {
                done.fetch_add(1, Ordering::Relaxed);
            })?;
        let mut live = HashMap::new();
        let unfinished = std::mem::take(&mut v.interrupted);
        for u in unfinished {
            let chain = u.chain.as_deref().unwrap_or(log::LEGACY);
            match self.running(conn, &mut live, chain, u.chain_seq)? {
                true => v.running.push(u),
                false => v.interrupted.push(u),
            }
        }
        Ok(v)
    }
}

/// `select` over the calls `filter` (with `status` as the `status` column holds it) and `page`
/// select: each call's final record, or its `started` entry when it has none; the query's
/// values, numbered from 1. `filter.limit` is the caller's to apply.
fn scope(
    select: &str,
    filter: &Filter,
    status: &Option<String>,
    page: &Page,
) -> (String, Vec<rusqlite::types::Value>) {
    use rusqlite::types::Value;
    let mut sql = format!(
        "{select}
         FROM records r
         WHERE (r.kind = 'record' OR NOT EXISTS (
                   SELECT 1 FROM records f
                   WHERE f.call_id = r.call_id AND f.chain = r.chain AND f.kind = 'record'))"
    );
    let mut values: Vec<Value> = Vec::new();
    let mut equal = |sql: &mut String, column: &str, value: &Option<String>| {
        if let Some(v) = value {
            values.push(Value::Text(v.clone()));
            sql.push_str(&format!(" AND {column} = ?{}", values.len()));
        }
    };
    equal(&mut sql, "r.tool", &filter.tool);
    equal(&mut sql, "r.status", status);
    equal(&mut sql, "r.stage", &filter.stage);
    equal(&mut sql, "r.principal", &filter.principal);
    equal(&mut sql, "r.session", &page.session);
    equal(&mut sql, "r.chain", &page.node);
    if let Some(until) = &page.until {
        values.push(Value::Text(until.clone()));
        sql.push_str(&format!(" AND r.received_at < ?{}", values.len()));
    }
    if let Some(since) = &filter.since {
        values.push(Value::Text(since.clone()));
        sql.push_str(&format!(" AND r.received_at >= ?{}", values.len()));
    }
    if let Some(text) = &page.text {
        values.push(Value::Text(text.clone()));
        let n = values.len();
        sql.push_str(&format!(
            " AND (instr(r.call_id, ?{n}) > 0 OR instr(coalesce(r.provider_call_id, ''), ?{n}) > 0)"
        ));
    }
    if let Some(before) = &page.before {
        values.push(Value::Text(before.received_at.clone()));
        values.push(Value::Integer(before.seq));
        let n = values.len();
        // The first term bounds the index range; the second breaks ties of one instant.
        sql.push_str(&format!(
            " AND r.received_at <= ?{a} AND (r.received_at < ?{a} OR r.seq < ?{n})",
            a = n - 1
        ));
    }
    (sql, values)
}

/// The `status` column `filter.status` selects: a `started` entry's for a call `interrupted` or
/// `running` (which of the two is not in the database).
fn stored_status(filter: &Filter) -> Option<String> {
    match filter.status.as_deref() {
        Some("interrupted" | "running") => Some(STARTED_STATUS.to_string()),
        other => other.map(str::to_string),
    }
}

/// The statuses the pictures count a call under: a record's, or `unfinished` for a call
/// started without a record (interrupted or running: which, the calls list says).
const TALLIED_STATUS: &str = "CASE WHEN r.kind = 'record' THEN r.status ELSE 'unfinished' END";

/// The aggregates `vak audit serve` draws, each over a [`Sample`] (read through the
/// `received_at` index, newest first).
impl Journal {
    /// The first and last time (Unix seconds) a call selected was received, `None` when none
    /// is: two reads at the ends of the `received_at` (or `(tool, received_at)`) index, so
    /// `sample.cap` is not needed.
    pub fn span(&self, sample: &Sample) -> Result<Option<(i64, i64)>, JournalError> {
        let Sample { filter, page, .. } = *sample;
        let conn = self.read()?;
        let (inner, values) = scope("SELECT r.received_at", filter, &stored_status(filter), page);
        let end = |order: &str| {
            let sql = format!(
                "SELECT unixepoch(received_at) FROM
                   ({inner} ORDER BY r.received_at {order}, r.seq {order} LIMIT 1)"
            );
            conn.query_row(&sql, rusqlite::params_from_iter(values.iter()), |r| {
                r.get::<_, Option<i64>>(0)
            })
            .optional()
            .map(Option::flatten)
            .map_err(|e| self.err(e))
        };
        Ok(match (end("ASC")?, end("DESC")?) {
            (Some(first), Some(last)) => Some((first, last)),
            _ => None,
        })
    }

    /// Of the newest `cap` calls selected: how many of each status were received in each
    /// `width`-second bucket (bucket `b` is `[b * width, (b + 1) * width)` in Unix seconds), as
    /// `(b, status, count)`, oldest first; at most `max_groups` rows.
    pub fn tally_by_time(
        &self,
        sample: &Sample,
        width: i64,
        max_groups: u32,
    ) -> Result<Vec<(i64, String, u64)>, JournalError> {
        let Sample { filter, page, cap } = *sample;
        let conn = self.read()?;
        let select = format!("SELECT r.received_at, {TALLIED_STATUS} AS status");
        let (inner, mut values) = scope(&select, filter, &stored_status(filter), page);
        values.push(rusqlite::types::Value::Integer(i64::from(cap)));
        let limit = values.len();
        values.push(rusqlite::types::Value::Integer(width.max(1)));
        let width = values.len();
        values.push(rusqlite::types::Value::Integer(i64::from(max_groups)));
        let sql = format!(
            "SELECT unixepoch(received_at) / ?{width} AS bucket, status, count(*) FROM
               ({inner} ORDER BY r.received_at DESC, r.seq DESC LIMIT ?{limit})
             GROUP BY bucket, status ORDER BY bucket, status LIMIT ?{}",
            values.len()
        );
        self.rows(&conn, &sql, values, |r| {
            Ok((r.get(0)?, r.get(1)?, r.get::<_, i64>(2)?.max(0) as u64))
        })
    }

    /// Of the newest `cap` calls selected that ran (completed, tool error, failed): each one's
    /// tool, wall time (ns) and fuel, from its record.
    pub fn usage_sample(&self, sample: &Sample) -> Result<Vec<(String, u64, u64)>, JournalError> {
        let Sample { filter, page, cap } = *sample;
        let conn = self.read()?;
        let (mut inner, mut values) = scope(
            "SELECT r.tool, json_extract(r.record, '$.usage.wall_ns'),
                    json_extract(r.record, '$.usage.fuel')",
            filter,
            &stored_status(filter),
            page,
        );
        values.push(rusqlite::types::Value::Integer(i64::from(cap)));
        inner.push_str(&format!(
            " AND r.kind = 'record' AND r.status IN ('completed', 'tool_error', 'failed')
              AND json_valid(r.record)
             ORDER BY r.received_at DESC, r.seq DESC LIMIT ?{}",
            values.len()
        ));
        self.rows(&conn, &inner, values, |r| {
            let n = |i| {
                r.get::<_, Option<i64>>(i)
                    .map(|v| v.unwrap_or(0).max(0) as u64)
            };
            Ok((r.get(0)?, n(1)?, n(2)?))
        })
    }

    /// Of the newest `cap` refused calls selected: how many were refused at each stage with
    /// each kind of error, as `(stage, kind, count)`, most first; at most `max_groups` rows.
    pub fn refusal_tally(
        &self,
        sample: &Sample,
        max_groups: u32,
    ) -> Result<Vec<(String, String, u64)>, JournalError> {
        let Sample { filter, page, cap } = *sample;
        let conn = self.read()?;
        let (inner, mut values) = scope(
            "SELECT r.stage, r.record",
            filter,
            &Some("refused".to_string()),
            page,
        );
        values.push(rusqlite::types::Value::Integer(i64::from(cap)));
        let limit = values.len();
        values.push(rusqlite::types::Value::Integer(i64::from(max_groups)));
        let sql = format!(
            "SELECT stage, coalesce(CASE WHEN json_valid(record)
                                         THEN json_extract(record, '$.error.kind') END, '-') AS kind,
                    count(*) AS n
             FROM ({inner} ORDER BY r.received_at DESC, r.seq DESC LIMIT ?{limit})
             GROUP BY stage, kind ORDER BY n DESC, stage, kind LIMIT ?{}",
            values.len()
        );
        self.rows(&conn, &sql, values, |r| {
            Ok((r.get(0)?, r.get(1)?, r.get::<_, i64>(2)?.max(0) as u64))
        })
    }

    fn rows<T>(
        &self,
        conn: &Connection,
        sql: &str,
        values: Vec<rusqlite::types::Value>,
        read: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>, JournalError> {
        let mut stmt = conn.prepare(sql).map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(rusqlite::params_from_iter(values), read)
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }
}

/// An entry as a walk reads it, from a row whose first columns are `seq, chain, chain_seq, kind,
/// call_id, record, prev_hash, hash`.
fn stored(r: &rusqlite::Row<'_>) -> rusqlite::Result<chain::Stored> {
    let chain: String = r.get(1)?;
    Ok(chain::Stored {
        seq: r.get(0)?,
        legacy: chain == log::LEGACY,
        chain,
        chain_seq: r.get(2)?,
        kind: Some(Kind::parse(&r.get::<_, String>(3)?)),
        call_id: r.get(4)?,
        text: r.get(5)?,
        prev_hash: r.get(6)?,
        hash: r.get(7)?,
    })
}

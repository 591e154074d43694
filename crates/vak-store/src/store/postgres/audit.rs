//! What `vak audit serve` reads from the shared store: a page of calls, each chain's head, the
//! pictures' tallies and a verification that counts its progress, over every node's chain.
//!
//! Every read is bounded and goes through an index the schema has: the calls are ordered by
//! `gseq` (the primary key: the order entries were committed in across the nodes), newest first,
//! and paged on it; a picture counts at most a given number of the newest calls; the heads are
//! read one node at a time from the `(node, node_seq)` key.

use super::PgStore;
use crate::journal::{
    Cursor, Filter, Head, JournalError, Listed, Page, Paged, Sample, Tip, Verification,
};
use std::sync::atomic::AtomicU64;
use tokio_postgres::types::ToSql;

/// The most chains the heads are read of.
const MAX_CHAINS: i64 = 10_000;

/// The most bytes of one record the pictures parse when the database cannot (a record that is
/// not JSON: changed behind the store's back); a longer one is not counted.
const MAX_PARSED: i64 = 1 << 20;

/// A call's status as the pages show it: a record's, or, for a call started without a record,
/// `interrupted` when its node has started again since, else `running`.
const SHOWN_STATUS: &str = "CASE WHEN r.kind = 'record' THEN r.status
     WHEN n.started_at > r.committed_at THEN 'interrupted' ELSE 'running' END";

/// The statuses the pictures count a call under (a call without a record: `unfinished`).
const TALLIED_STATUS: &str = "CASE WHEN r.kind = 'record' THEN r.status ELSE 'unfinished' END";

type Param = Box<dyn ToSql + Sync + Send>;

/// `select` over the calls `filter` and `page` select (each call's final record, or its
/// `started` entry when it has none), with its parameters; ordering and limit are the caller's.
fn scope(select: &str, filter: &Filter, status: Option<&str>, page: &Page) -> (String, Vec<Param>) {
    let mut sql = format!(
        "{select}
         FROM vak_records r LEFT JOIN vak_nodes n ON n.node = r.node
         WHERE (r.kind = 'record' OR NOT EXISTS (
                   SELECT 1 FROM vak_records f
                   WHERE f.call_id = r.call_id AND f.node = r.node AND f.kind = 'record'))"
    );
    let mut values: Vec<Param> = Vec::new();
    let mut add = |sql: &mut String, clause: &str, value: Param| {
        values.push(value);
        sql.push_str(&clause.replace("$?", &format!("${}", values.len())));
    };
    let text = |v: &str| -> Param { Box::new(v.to_string()) };
    for (column, value) in [
        ("r.tool", &filter.tool),
        ("r.stage", &filter.stage),
        ("r.principal", &filter.principal),
        ("r.session_id", &page.session),
        ("r.node", &page.node),
    ] {
        if let Some(v) = value {
            add(&mut sql, &format!(" AND {column} = $?"), text(v));
        }
    }
    if let Some(s) = status {
        add(&mut sql, &format!(" AND ({SHOWN_STATUS}) = $?"), text(s));
    }
    if let Some(until) = &page.until {
        add(&mut sql, " AND r.received_at < $?", text(until));
    }
    if let Some(since) = &filter.since {
        add(&mut sql, " AND r.received_at >= $?", text(since));
    }
    if let Some(t) = &page.text {
        add(
            &mut sql,
            " AND (strpos(r.call_id, $?) > 0 OR strpos(coalesce(r.provider_call_id, ''), $?) > 0)",
            text(t),
        );
    }
    if let Some(before) = &page.before {
        add(&mut sql, " AND r.gseq < $?", Box::new(before.seq));
    }
    (sql, values)
}

fn refs(values: &[Param]) -> Vec<&(dyn ToSql + Sync)> {
    values
        .iter()
        .map(|v| v.as_ref() as &(dyn ToSql + Sync))
        .collect()
}

/// `sql` with `LIMIT` and its parameter appended.
fn limited(mut sql: String, values: &mut Vec<Param>, limit: u32) -> String {
    values.push(Box::new(i64::from(limit)));
    sql.push_str(&format!(" LIMIT ${}", values.len()));
    sql
}

/// A count as the pictures take it.
fn count(n: i64) -> u64 {
    n.max(0) as u64
}

impl PgStore {
    /// One page of calls, every node's, newest committed first (`gseq`), at most `filter.limit`
    /// (100 by default), from `page.before` on (its `seq` is a `gseq`), and where the next page
    /// begins when there may be one.
    pub async fn page(&self, filter: &Filter, page: &Page) -> Result<Paged, JournalError> {
        let (sql, mut values) = scope(
            &format!(
                "SELECT r.gseq, r.node, r.call_id, r.tool, {SHOWN_STATUS}, r.stage, r.principal,
                        r.received_at"
            ),
            filter,
            filter.status.as_deref(),
            page,
        );
        let limit = filter.limit.unwrap_or(100);
        let sql = limited(sql + " ORDER BY r.gseq DESC", &mut values, limit);
        let rows = self
            .db
            .with("audit calls", async move |c| {
                c.query(&sql, &refs(&values)).await
            })
            .await?;
        let rows: Vec<Listed> = rows.iter().map(super::listed).collect();
        let next = match rows.len() >= limit as usize {
            true => rows.last().map(|l| Cursor {
                received_at: l.received_at.clone(),
                seq: l.seq,
            }),
            false => None,
        };
        Ok(Paged { rows, next })
    }

    /// Each node's last entry (read from the `(node, node_seq)` key, a node at a time), the
    /// entries of every chain, and a figure that changes whenever a row of the journal is
    /// inserted, updated or deleted (PostgreSQL's statistics of the table: they reach other
    /// sessions once the writing one has flushed them, within about a second).
    pub async fn tip(&self) -> Result<Tip, JournalError> {
        let (heads, changes) = self
            .db
            .with("audit heads", async move |c| {
                let heads = c
                    .query(
                        "WITH RECURSIVE nodes(node) AS (
                             (SELECT node FROM vak_records ORDER BY node LIMIT 1)
                             UNION ALL
                             SELECT (SELECT r.node FROM vak_records r WHERE r.node > p.node
                                     ORDER BY r.node LIMIT 1)
                             FROM nodes p WHERE p.node IS NOT NULL
                         )
                         SELECT h.node, h.node_seq, h.hash FROM nodes p
                         CROSS JOIN LATERAL (
                             SELECT node, node_seq, hash FROM vak_records r WHERE r.node = p.node
                             ORDER BY node_seq DESC LIMIT 1) h
                         WHERE p.node IS NOT NULL ORDER BY h.node LIMIT $1",
                        &[&MAX_CHAINS],
                    )
                    .await?;
                let changes: i64 = c
                    .query_one(
                        "SELECT coalesce((SELECT n_tup_ins + n_tup_upd + n_tup_del
                                          FROM pg_stat_user_tables
                                          WHERE relid = 'vak_records'::regclass), 0)",
                        &[],
                    )
                    .await?
                    .get(0);
                Ok((heads, changes))
            })
            .await?;
        let heads: Vec<Head> = heads
            .iter()
            .map(|r| Head {
                node: Some(r.get(0)),
                seq: r.get(1),
                hash: r.get(2),
            })
            .collect();
        let entries = heads.iter().map(|h| h.seq.max(0) as u64).sum();
        Ok(Tip {
            heads,
            entries,
            data_version: changes,
        })
    }

    /// The first and last time (Unix seconds) one of the newest `cap` calls selected was
    /// received, `None` when none is.
    pub async fn span(&self, sample: &Sample<'_>) -> Result<Option<(i64, i64)>, JournalError> {
        let Sample { filter, page, cap } = *sample;
        let (inner, mut values) = scope("SELECT r.received_at", filter, None, page);
        let inner = limited(inner + " ORDER BY r.gseq DESC", &mut values, cap);
        let sql = format!(
            "SELECT floor(extract(epoch FROM min(received_at::timestamptz)))::bigint,
                    floor(extract(epoch FROM max(received_at::timestamptz)))::bigint
             FROM ({inner}) t"
        );
        let row = self
            .db
            .with("audit span", async move |c| {
                c.query_one(&sql, &refs(&values)).await
            })
            .await?;
        Ok(match (row.get(0), row.get(1)) {
            (Some(first), Some(last)) => Some((first, last)),
            _ => None,
        })
    }

    /// Of the newest `cap` calls selected: how many of each status were received in each
    /// `width`-second bucket, as `(bucket, status, count)`, oldest first; at most `max_groups`.
    pub async fn tally_by_time(
        &self,
        sample: &Sample<'_>,
        width: i64,
        max_groups: u32,
    ) -> Result<Vec<(i64, String, u64)>, JournalError> {
        let Sample { filter, page, cap } = *sample;
        let select = format!("SELECT r.received_at, {TALLIED_STATUS} AS status");
        let (inner, mut values) = scope(&select, filter, filter.status.as_deref(), page);
        let inner = limited(inner + " ORDER BY r.gseq DESC", &mut values, cap);
        values.push(Box::new(width.max(1)));
        let w = values.len();
        let sql = limited(
            format!(
                "SELECT floor(extract(epoch FROM received_at::timestamptz))::bigint / ${w} AS b,
                        status, count(*)
                 FROM ({inner}) t GROUP BY b, status ORDER BY b, status"
            ),
            &mut values,
            max_groups,
        );
        let rows = self
            .db
            .with("audit tally", async move |c| {
                c.query(&sql, &refs(&values)).await
            })
            .await?;
        Ok(rows
            .iter()
            .map(|r| (r.get(0), r.get(1), count(r.get(2))))
            .collect())
    }

    /// Of the newest `cap` calls selected that ran (completed, tool error, failed): each one's
    /// tool, wall time (ns) and fuel, from its record.
    pub async fn usage_sample(
        &self,
        sample: &Sample<'_>,
    ) -> Result<Vec<(String, u64, u64)>, JournalError> {
        let Sample { filter, page, cap } = *sample;
        let ran = " AND r.kind = 'record' AND r.status IN ('completed', 'tool_error', 'failed')
                   ORDER BY r.gseq DESC";
        // Each record parsed once, in the subquery.
        let (inner, mut values) = scope(
            "SELECT r.tool, r.record::jsonb AS j",
            filter,
            filter.status.as_deref(),
            page,
        );
        let inner = limited(inner + ran, &mut values, cap);
        let figure = |path: &str| {
            format!(
                "CASE WHEN jsonb_typeof(j #> '{{usage,{path}}}') = 'number'
                      THEN vak_clamp((j #>> '{{usage,{path}}}')::numeric) ELSE 0 END"
            )
        };
        let sql = format!(
            "SELECT tool, {}, {} FROM ({inner}) t",
            figure("wall_ns"),
            figure("fuel")
        );
        let (raw, mut raw_values) = scope(
            "SELECT r.tool, r.record",
            filter,
            filter.status.as_deref(),
            page,
        );
        raw_values.push(Box::new(MAX_PARSED));
        let raw = limited(
            format!("{raw} AND length(r.record) <= ${}{ran}", raw_values.len()),
            &mut raw_values,
            cap,
        );
        let parsed = self
            .db
            .with("audit usage", async move |c| {
                match c.query(&sql, &refs(&values)).await {
                    Ok(rows) => Ok(Ok(rows
                        .iter()
                        .map(|r| (r.get(0), count(r.get(1)), count(r.get(2))))
                        .collect())),
                    // A record that is not JSON: parsed here instead, each bounded.
                    Err(e) if not_json(&e) => Ok(Err(c.query(&raw, &refs(&raw_values)).await?)),
                    Err(e) => Err(e),
                }
            })
            .await?;
        Ok(match parsed {
            Ok(sample) => sample,
            Err(rows) => rows
                .iter()
                .map(|r| {
                    let v: serde_json::Value = serde_json::from_str(r.get(1)).unwrap_or_default();
                    let n = |k: &str| v["usage"][k].as_u64().unwrap_or(0);
                    (r.get(0), n("wall_ns"), n("fuel"))
                })
                .collect(),
        })
    }

    /// Of the newest `cap` refused calls selected: how many were refused at each stage with
    /// each kind of error, as `(stage, kind, count)`, most first; at most `max_groups`.
    pub async fn refusal_tally(
        &self,
        sample: &Sample<'_>,
        max_groups: u32,
    ) -> Result<Vec<(String, String, u64)>, JournalError> {
        let Sample { filter, page, cap } = *sample;
        let newest = " ORDER BY r.gseq DESC";
        let (inner, mut values) = scope("SELECT r.stage, r.record", filter, Some("refused"), page);
        let inner = limited(inner + newest, &mut values, cap);
        let sql = limited(
            format!(
                "SELECT stage, coalesce(record::jsonb #>> '{{error,kind}}', '-') AS kind,
                        count(*) AS n
                 FROM ({inner}) t GROUP BY stage, kind ORDER BY n DESC, stage, kind"
            ),
            &mut values,
            max_groups,
        );
        let (raw, mut raw_values) =
            scope("SELECT r.stage, r.record", filter, Some("refused"), page);
        raw_values.push(Box::new(MAX_PARSED));
        let raw = limited(
            format!(
                "{raw} AND length(r.record) <= ${}{newest}",
                raw_values.len()
            ),
            &mut raw_values,
            cap,
        );
        let tallied = self
            .db
            .with("audit refusals", async move |c| {
                match c.query(&sql, &refs(&values)).await {
                    Ok(rows) => Ok(Ok(rows
                        .iter()
                        .map(|r| (r.get(0), r.get(1), count(r.get(2))))
                        .collect::<Vec<_>>())),
                    Err(e) if not_json(&e) => Ok(Err(c.query(&raw, &refs(&raw_values)).await?)),
                    Err(e) => Err(e),
                }
            })
            .await?;
        let rows = match tallied {
            Ok(t) => return Ok(t),
            Err(rows) => rows,
        };
        let mut groups: std::collections::BTreeMap<(String, String), u64> = Default::default();
        for r in &rows {
            let v: serde_json::Value = serde_json::from_str(r.get(1)).unwrap_or_default();
            let kind = v["error"]["kind"].as_str().unwrap_or("-").to_string();
            *groups.entry((r.get(0), kind)).or_default() += 1;
        }
        let mut out: Vec<_> = groups.into_iter().map(|((s, k), n)| (s, k, n)).collect();
        out.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| (&a.0, &a.1).cmp(&(&b.0, &b.1))));
        out.truncate(max_groups as usize);
        Ok(out)
    }

    /// [`PgStore::verify`], counting the entries checked so far in `done` (for a progress bar).
    pub async fn verify_counting(
        &self,
        trusted: &[String],
        done: &AtomicU64,
    ) -> Result<Verification, JournalError> {
        super::journal::verify(&self.db, trusted, Some(done)).await
    }
}

/// Whether `e` is PostgreSQL refusing a text as JSON.
fn not_json(e: &tokio_postgres::Error) -> bool {
    e.code() == Some(&tokio_postgres::error::SqlState::INVALID_TEXT_REPRESENTATION)
}

//! The shared journal: one hash chain per node, one writer per node committing every record
//! waiting (with the ledger charges they carry) as one statement, and the walk that verifies every
//! chain.

use super::lease::Lease;
use super::{Db, StoreError, big, describe, next_batch};
use crate::journal::chain::{ChainCheck, GENESIS, Stored, entry_hash};
use crate::journal::{Entry, JournalError, Row, Verification};
use crate::record::CallRecord;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use vak_core::ports::ledger::Settlement;

/// The most records one group commit takes.
pub const MAX_BATCH: usize = 256;

/// The most records a writer keeps while the store is out of reach, to commit when it answers
/// (each with the charge that settles its call's reservation). Beyond, the oldest are dropped
/// (counted in the log): their reservations stay held, charged in full.
pub const MAX_KEPT: usize = 10_000;

/// How often a writer holding kept records tries the store again when nothing new comes.
const RETRY_EVERY: Duration = Duration::from_millis(500);

/// Walk every node's chain (links, hashes, gapless places, commit order) and every entry's
/// signature (by one of `trusted`, when given), with the walk the local journal's chains get
/// ([`ChainCheck`]); name the first entry that does not check out. Each entry checked is
/// counted in `done`, when given (a progress bar's).
pub(super) async fn verify(
    db: &Db,
    trusted: &[String],
    done: Option<&std::sync::atomic::AtomicU64>,
) -> Result<Verification, JournalError> {
    use futures::StreamExt as _;
    let conn = db.conn("journal verify").await?;
    let failed = |e: tokio_postgres::Error| {
        JournalError::Store(StoreError::Unavailable {
            what: "journal verify",
            message: describe(&e),
        })
    };
    // Streamed: a long journal is never held in memory at once.
    let rows = conn
        .client()
        .query_raw(
            "SELECT gseq, node, node_seq, call_id, record, prev_hash, hash, kind
             FROM vak_records ORDER BY node, node_seq",
            std::iter::empty::<i64>(),
        )
        .await
        .map_err(failed)?;
    let mut rows = std::pin::pin!(rows);
    let mut check = ChainCheck::default();
    while let Some(row) = rows.next().await {
        let row = row.map_err(failed)?;
        let row = Stored {
            seq: row.get(0),
            chain: row.get(1),
            legacy: false,
            chain_seq: row.get(2),
            kind: Some(crate::journal::Kind::parse(row.get(7))),
            call_id: row.get(3),
            text: row.get(4),
            prev_hash: row.get(5),
            hash: row.get(6),
        };
        if let Some(why) = check.next(&row, trusted) {
            return Ok(check.finish(Some((row.seq, why))));
        }
        if let Some(done) = done {
            done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
    Ok(check.finish(None))
}

/// A record on its way to the writer.
pub(super) struct Pending {
    row: Row,
    settlement: Option<Settlement>,
    /// The caller, until it was answered (a record kept after a failed commit has none).
    reply: Option<oneshot::Sender<Result<Entry, JournalError>>>,
}

impl Pending {
    pub(super) fn new(
        record: &CallRecord,
        settlement: Option<Settlement>,
        reply: oneshot::Sender<Result<Entry, JournalError>>,
    ) -> Pending {
        Pending {
            row: Row::of(record),
            settlement,
            reply: Some(reply),
        }
    }

    /// A call's `started` entry (signed), on its way to the node's chain.
    pub(super) fn started(
        started: &crate::journal::Started,
        reply: oneshot::Sender<Result<Entry, JournalError>>,
    ) -> Pending {
        // Strings, numbers and a signature: it always serializes.
        let text = serde_json::to_string(started).unwrap_or_default();
        Pending {
            row: Row::started(started, text),
            settlement: None,
            reply: Some(reply),
        }
    }

    fn is_started(&self) -> bool {
        self.row.kind == crate::journal::Kind::Started
    }

    /// A `started` entry whose call stopped waiting for it: the call was refused and does not
    /// run, so the entry is not written.
    fn abandoned(&self) -> bool {
        self.is_started() && self.reply.as_ref().is_none_or(|r| r.is_closed())
    }

    fn answer(&mut self, outcome: Result<Entry, JournalError>) {
        if let Some(reply) = self.reply.take() {
            let _ = reply.send(outcome);
        }
    }
}

/// The one statement of a group commit: the ledger charges of the batch (sessions in order, so
/// that two nodes' commits never wait on each other in a cycle) and its journal rows, both only
/// while this process holds the node's name (else it inserts nothing, and says so by returning
/// no row).
const APPEND: &str = "
WITH lease AS (
    SELECT 1 FROM vak_nodes WHERE node = $25 AND holder = $26
),
charged AS (
    INSERT INTO vak_ledgers AS l (session_id, principal, calls_used, calls_reserved, fuel_used,
        fuel_reserved, wall_ms_used, wall_ms_reserved, result_bytes_used, result_bytes_reserved)
    SELECT s, min(p), vak_clamp(sum(cu)), -vak_clamp(sum(ch)), vak_clamp(sum(fu)),
           -vak_clamp(sum(fh)), vak_clamp(sum(wu)), -vak_clamp(sum(wh)), vak_clamp(sum(ru)),
           -vak_clamp(sum(rh))
    FROM unnest($13::text[], $14::text[], $15::int8[], $16::int8[], $17::int8[], $18::int8[],
                $19::int8[], $20::int8[], $21::int8[], $22::int8[])
         AS u(s, p, cu, ch, fu, fh, wu, wh, ru, rh)
    WHERE EXISTS (SELECT 1 FROM lease)
    GROUP BY s ORDER BY s
    ON CONFLICT (session_id) DO UPDATE SET
        calls_used = vak_clamp(l.calls_used::numeric + EXCLUDED.calls_used),
        calls_reserved = vak_clamp(l.calls_reserved::numeric + EXCLUDED.calls_reserved),
        fuel_used = vak_clamp(l.fuel_used::numeric + EXCLUDED.fuel_used),
        fuel_reserved = vak_clamp(l.fuel_reserved::numeric + EXCLUDED.fuel_reserved),
        wall_ms_used = vak_clamp(l.wall_ms_used::numeric + EXCLUDED.wall_ms_used),
        wall_ms_reserved = vak_clamp(l.wall_ms_reserved::numeric + EXCLUDED.wall_ms_reserved),
        result_bytes_used = vak_clamp(l.result_bytes_used::numeric + EXCLUDED.result_bytes_used),
        result_bytes_reserved =
            vak_clamp(l.result_bytes_reserved::numeric + EXCLUDED.result_bytes_reserved),
        updated_at = now()
    WHERE l.principal IS NOT DISTINCT FROM EXCLUDED.principal
    RETURNING 1
)
INSERT INTO vak_records (node, node_seq, call_id, tool, status, stage, principal, session_id,
                         received_at, record, prev_hash, hash, kind, provider_call_id)
SELECT * FROM unnest($1::text[], $2::int8[], $3::text[], $4::text[], $5::text[], $6::text[],
                     $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::text[],
                     $23::text[], $24::text[])
WHERE EXISTS (SELECT 1 FROM lease)
RETURNING gseq, node_seq";

/// The journal writer of one node: the only task that appends to its chain.
pub(super) struct Writer {
    db: Db,
    node: String,
    /// The lease the commit checks (`None`: this process holds no name, and commits nothing).
    lease: Option<Arc<Lease>>,
    /// The chain's head (place, hash); `None` when it must be read again (at start, after a
    /// fault, or when another process wrote under this node's name).
    head: Option<(i64, String)>,
    /// After a commit whose outcome is unknown (no answer): the head before it. Entries after
    /// it may have landed; a kept record that did is not committed twice.
    uncertain_after: Option<i64>,
    /// Records whose commit failed while the store was out of reach, oldest first.
    kept: VecDeque<Pending>,
    /// Records dropped because too many were kept, since the last log line.
    dropped: u64,
}

impl Writer {
    pub(super) fn new(db: Db, node: String, lease: Option<Arc<Lease>>) -> Writer {
        Writer {
            db,
            node,
            lease,
            head: None,
            uncertain_after: None,
            kept: VecDeque::new(),
            dropped: 0,
        }
    }

    pub(super) async fn run(
        mut self,
        mut queue: mpsc::UnboundedReceiver<Pending>,
        stop: CancellationToken,
    ) {
        // Records already queued are still committed before the writer stops.
        loop {
            let new = if self.kept.is_empty() {
                match next_batch(&mut queue, &stop, MAX_BATCH).await {
                    Some(b) => b,
                    None => return,
                }
            } else {
                tokio::select! {
                    // `None` when stopping: one last try for what is kept.
                    b = next_batch(&mut queue, &stop, MAX_BATCH) => b.unwrap_or_default(),
                    () = tokio::time::sleep(RETRY_EVERY) => Vec::new(),
                }
            };
            let stopping = stop.is_cancelled() && queue.is_empty();
            // A call that stopped waiting for its `started` entry does not run: not written.
            let mut batch: Vec<Pending> = new.into_iter().filter(|p| !p.abandoned()).collect();
            if let Err(e) = self.forget_landed().await {
                self.failed(batch, &e);
                if stopping {
                    return;
                }
                continue;
            }
            let room = MAX_BATCH.saturating_sub(batch.len()).max(1);
            let take = self.kept.len().min(room);
            let mut kept: Vec<Pending> = self.kept.drain(..take).collect();
            kept.append(&mut batch);
            let batch = kept;
            if !batch.is_empty() {
                let outcome = self.commit(&batch).await;
                match outcome {
                    Ok(entries) => {
                        for (mut p, e) in batch.into_iter().zip(entries) {
                            p.answer(Ok(e));
                        }
                    }
                    Err(e) => self.failed(batch, &e),
                }
            }
            if stopping {
                if !self.kept.is_empty() {
                    tracing::error!(
                        records = self.kept.len(),
                        "the journal writer stopped with records the store never took"
                    );
                }
                return;
            }
        }
    }

    /// `batch` was not committed: answer its callers, and keep its records for later when the
    /// store was out of reach (a `started` entry is not kept: its call was refused).
    fn failed(&mut self, batch: Vec<Pending>, e: &StoreError) {
        // Out of reach: kept for later. A conflict: an earlier commit of this writer's, given up,
        // landed after all; the head is read again and what landed is not committed twice.
        let keep = e.retryable() || matches!(e, StoreError::Conflict { .. });
        for mut p in batch {
            p.answer(Err(JournalError::Store(e.clone())));
            if keep && !p.is_started() {
                if self.kept.len() >= MAX_KEPT {
                    // The oldest record that settles no reservation goes first.
                    let victim = self
                        .kept
                        .iter()
                        .position(|k| k.settlement.is_none())
                        .unwrap_or(0);
                    self.kept.remove(victim);
                    self.dropped += 1;
                }
                self.kept.push_back(p);
            }
        }
        if self.dropped > 0 {
            tracing::error!(
                records = self.dropped,
                kept = self.kept.len(),
                "the shared store has been out of reach too long: the oldest records kept for it \
                 were dropped (their reservations stay held, charged in full)"
            );
            self.dropped = 0;
        }
        if !keep {
            tracing::error!(error = %e, "journal commit failed");
        }
    }

    /// After a commit with no answer, read the head again and drop from the kept records those
    /// that landed after all (the chain's places make a late landing exclusive: once the head is
    /// read again, a commit still in flight from before conflicts and lands nothing).
    async fn forget_landed(&mut self) -> Result<(), StoreError> {
        let Some(after) = self.uncertain_after else {
            return Ok(());
        };
        if self.head.is_none() {
            self.head = Some(self.read_head().await?);
        }
        let node = self.node.clone();
        let landed: Vec<(String, String)> = self
            .db
            .with("journal head", async move |c| {
                let rows = c
                    .query(
                        "SELECT call_id, kind FROM vak_records WHERE node = $1 AND node_seq > $2",
                        &[&node, &after],
                    )
                    .await?;
                Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
            })
            .await?;
        if !landed.is_empty() {
            let before = self.kept.len();
            self.kept.retain(|p| {
                !landed
                    .iter()
                    .any(|(id, kind)| *id == p.row.call_id && kind == p.row.kind.as_str())
            });
            tracing::info!(
                landed = before - self.kept.len(),
                "records whose commit had no answer were committed after all"
            );
        }
        self.uncertain_after = None;
        Ok(())
    }

    /// Commit `batch` as one statement after the head; the entries, in the batch's order.
    async fn commit(&mut self, batch: &[Pending]) -> Result<Vec<Entry>, StoreError> {
        let Some(lease) = self.lease.clone() else {
            return Err(StoreError::LeaseLost(format!(
                "this process holds no node name in the store (it serves nothing): node `{}`'s \
                 chain is not its to write",
                self.node
            )));
        };
        if let Some(why) = lease.lost() {
            return Err(StoreError::LeaseLost(why));
        }
        let head = match self.head.take() {
            Some(h) => h,
            None => self.read_head().await?,
        };
        let (mut seq, mut prev) = head.clone();
        let mut cols = Columns::default();
        let mut entries = Vec::with_capacity(batch.len());
        for p in batch {
            seq += 1;
            let hash = entry_hash(&prev, Some(&self.node), seq, &p.row.text);
            cols.push(&self.node, seq, p, &prev, &hash);
            prev = hash.clone();
            entries.push(Entry {
                seq: 0,
                hash,
                node: Some((self.node.clone(), seq)),
            });
        }
        cols.lease = (lease.node.clone(), lease.holder.clone());
        let rows = self
            .db
            .with("journal commit", async move |c| {
                let stmt = c.prepare_cached(APPEND).await?;
                c.query(&stmt, &cols.params()).await
            })
            .await;
        let rows = match rows {
            Ok(rows) => rows,
            Err(e) => {
                if matches!(
                    e,
                    StoreError::Unavailable { .. } | StoreError::Conflict { .. }
                ) {
                    // It may land yet, or an earlier one did: remember where the chain stood.
                    self.uncertain_after = Some(self.uncertain_after.unwrap_or(head.0).min(head.0));
                }
                return Err(e);
            }
        };
        if rows.is_empty() {
            // The lease check refused: another process holds the name now.
            return Err(StoreError::LeaseLost(lease.lose()));
        }
        let first_seq = head.0 + 1;
        for row in rows {
            let (gseq, node_seq): (i64, i64) = (row.get(0), row.get(1));
            if let Some(e) = usize::try_from(node_seq - first_seq)
                .ok()
                .and_then(|i| entries.get_mut(i))
            {
                e.seq = gseq;
            }
        }
        self.head = Some((seq, prev));
        Ok(entries)
    }

    async fn read_head(&self) -> Result<(i64, String), StoreError> {
        let node = self.node.clone();
        self.db
            .with("journal head", async move |c| {
                let row = c
                    .query_opt(
                        "SELECT node_seq, hash FROM vak_records WHERE node = $1
                         ORDER BY node_seq DESC LIMIT 1",
                        &[&node],
                    )
                    .await?;
                Ok(row.map_or((0, GENESIS.to_string()), |r| (r.get(0), r.get(1))))
            })
            .await
    }
}

/// The batch as column arrays (one `unnest` parameter each).
#[derive(Default)]
struct Columns {
    node: Vec<String>,
    node_seq: Vec<i64>,
    call_id: Vec<String>,
    tool: Vec<String>,
    status: Vec<&'static str>,
    stage: Vec<&'static str>,
    principal: Vec<Option<String>>,
    session: Vec<String>,
    received_at: Vec<String>,
    record: Vec<String>,
    prev_hash: Vec<String>,
    hash: Vec<String>,
    kind: Vec<&'static str>,
    provider_call_id: Vec<Option<String>>,
    // Ledger charges: session, principal, then used and held of calls, fuel, wall, result.
    charge_session: Vec<String>,
    charge_principal: Vec<Option<String>>,
    charge: [Vec<i64>; 8],
    /// The node and holder the commit's lease check names.
    lease: (String, String),
}

impl Columns {
    fn push(&mut self, node: &str, seq: i64, p: &Pending, prev: &str, hash: &str) {
        self.node.push(node.to_string());
        self.node_seq.push(seq);
        let row = &p.row;
        self.call_id.push(row.call_id.clone());
        self.tool.push(row.tool.clone());
        self.status.push(row.status);
        self.stage.push(row.stage);
        self.principal.push(row.principal.clone());
        self.session.push(row.session.clone());
        self.received_at.push(row.received_at.clone());
        self.record.push(row.text.clone());
        self.prev_hash.push(prev.to_string());
        self.hash.push(hash.to_string());
        self.kind.push(row.kind.as_str());
        self.provider_call_id.push(row.provider_call_id.clone());
        if let Some(s) = &p.settlement {
            self.charge_session.push(s.ledger.clone());
            self.charge_principal.push(s.principal.clone());
            let figures = [
                s.used.calls,
                s.held.calls,
                s.used.fuel,
                s.held.fuel,
                s.used.wall_ms,
                s.held.wall_ms,
                s.used.result_bytes,
                s.held.result_bytes,
            ];
            for (column, v) in self.charge.iter_mut().zip(figures) {
                column.push(big(v));
            }
        }
    }

    fn params(&self) -> Vec<&(dyn tokio_postgres::types::ToSql + Sync)> {
        let mut p: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = vec![
            &self.node,
            &self.node_seq,
            &self.call_id,
            &self.tool,
            &self.status,
            &self.stage,
            &self.principal,
            &self.session,
            &self.received_at,
            &self.record,
            &self.prev_hash,
            &self.hash,
            &self.charge_session,
            &self.charge_principal,
        ];
        for c in &self.charge {
            p.push(c);
        }
        p.push(&self.kind);
        p.push(&self.provider_call_id);
        p.push(&self.lease.0);
        p.push(&self.lease.1);
        p
    }
}

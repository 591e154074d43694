//! The shared store on PostgreSQL: several `vak serve` nodes, one database.
//!
//! - **Ledgers.** A reservation is one call of `vak_reserve`, a function that locks the
//!   session's row and admits or refuses with the database's own figures (one round trip, atomic).
//!   A session no cap applies to reserves nothing and costs no round trip. The charge of what a
//!   call used is committed in the same statement as its journal entry.
//! - **Journal.** One hash chain per node (`node`, `node_seq`), tied by a global identity
//!   (`gseq`, the commit order across nodes). A node appends only to its own chain, so nodes never
//!   wait for each other's head; `UNIQUE (node, node_seq)` makes a fork impossible. One writer
//!   task per node commits every record waiting as one statement (group commit), and answers no
//!   call before its record is committed; records whose commit got no answer are kept and
//!   committed when the store answers again.
//! - **Leases.** A node's name is held by one live process (its row in `vak_nodes`, renewed at
//!   every revocation read); a second process with a live name is refused at start, and the
//!   journal commit checks the lease in the same statement.
//! - **Revocations.** A row each; the insert notifies every listening node (`LISTEN/NOTIFY`), and
//!   each node also polls as a safety net, applying what is new before it acknowledges it with its
//!   heartbeat. Recording one waits until every live node has acknowledged it (a barrier). A node
//!   whose view was not confirmed within its bound refuses new calls (`store_unavailable`) rather
//!   than run one that may have been revoked.
//!
//! Every wait on the store has one bound ([`PgOptions::op_timeout`]) per call. Every database
//! fault becomes a typed [`StoreError`]; a connection that failed or timed out is dropped from the
//! pool, so the node recovers by itself when the database is back; an outage is logged once when
//! it begins and once when it ends, with a count.

mod audit;
mod db;
mod health;
mod journal;
mod lease;
mod ledger;
mod migrate;
mod revocations;
mod spent;

pub use journal::MAX_BATCH;
pub use ledger::SharedLedger;
pub use migrate::{Migrated, migrate};
pub use revocations::RevocationKeeper;

use crate::journal::{Entry, Filter, JournalError, Listed, Shown, Verification};
use crate::record::CallRecord;
use crate::revocation::Revocations;
use crate::store::StoreError;
pub(crate) use db::Db;
use db::{big, describe, next_batch, parse_config, shown, small};
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use journal::{Pending, Writer};
use revocations::Listener;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::NoTls;
use tokio_util::sync::CancellationToken;
use vak_core::ports::ledger::{LedgerPort, Settlement};

/// How a node uses the shared store.
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// This node's name: its journal chain (`--node`, `VAK_NODE`).
    pub node: String,
    /// The bound on every wait on the store: how long a call waits for its reservation and
    /// `started` entry (together, from when it began waiting), or for its record, and how long a
    /// database operation may take before it counts as unavailable (`--store-timeout-ms`).
    pub op_timeout: Duration,
    /// How often revocations are polled besides `NOTIFY`.
    pub poll: Duration,
    /// How old this node's view of the revocations may grow before it refuses calls.
    pub max_staleness: Duration,
    /// How long this node's name stays held after its last heartbeat (one at every revocation
    /// read, so every `poll`): a process killed without releasing it frees the name then. At
    /// least `max_staleness`.
    pub lease: Duration,
    /// Connections kept for reservations, reads and the journal writer.
    pub pool_size: usize,
    /// SHA-256 of the policy this node serves (shown by `vak store status`: every node of one
    /// store should serve the same policy).
    pub policy_sha256: Option<String>,
    /// The public key that signs this node's records.
    pub public_key: Option<String>,
    /// Whether this process serves calls (and is listed among the store's nodes), or only
    /// reads and administers the store (`vak audit`, `vak revoke`).
    pub register: bool,
}

impl PgOptions {
    /// Defaults for node `node`: a 5 s bound on waits, a poll every 500 ms, a 2 s staleness
    /// bound, a 5 s lease.
    pub fn new(node: impl Into<String>) -> PgOptions {
        PgOptions {
            node: node.into(),
            op_timeout: Duration::from_secs(5),
            poll: Duration::from_millis(500),
            max_staleness: Duration::from_secs(2),
            lease: Duration::from_secs(5),
            pool_size: 16,
            policy_sha256: None,
            public_key: None,
            register: true,
        }
    }
}

/// What `vak store status` shows.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StoreStatus {
    pub schema_version: i32,
    /// Every node that served from the store or wrote to its journal.
    pub nodes: Vec<NodeStatus>,
    pub revocations: i64,
    pub sessions: i64,
}

/// One node of a shared store.
#[derive(Debug, Clone, serde::Serialize)]
pub struct NodeStatus {
    pub node: String,
    pub started_at: Option<String>,
    pub policy_sha256: Option<String>,
    pub public_key: Option<String>,
    pub vak_version: Option<String>,
    /// Entries in its journal chain, and when the last was committed.
    pub entries: i64,
    pub last_commit: Option<String>,
    /// The process holding the node's name (pid and host), if any.
    pub holder: Option<String>,
    /// How long ago its lease was last renewed, in ms.
    pub heartbeat_ms_ago: Option<i64>,
    /// The highest revocation id the node has applied.
    pub revocation_ack: i64,
}

/// A node's connection to the shared store.
pub struct PgStore {
    db: Db,
    config: tokio_postgres::Config,
    options: PgOptions,
    revocations: Arc<Revocations>,
    writer: mpsc::UnboundedSender<Pending>,
    reserver: mpsc::UnboundedSender<ledger::Request>,
    /// This process's hold on its node's name (`None`: it serves nothing).
    lease: Option<Arc<lease::Lease>>,
    shutdown: CancellationToken,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

impl Drop for PgStore {
    fn drop(&mut self) {
        self.shutdown.cancel();
        // Give the name back if a runtime is there to do it (`close` is the sure way).
        if let (Some(lease), Ok(rt)) = (self.lease.clone(), tokio::runtime::Handle::try_current()) {
            let db = self.db.clone();
            rt.spawn(async move { lease.release(&db).await });
        }
    }
}

impl PgStore {
    /// Connect node `options.node` to the database at `url`: migrate it when needed, take the
    /// node's name (refused while another live process holds it), read the revocations, then
    /// start the journal writer and the revocation listener. Fails when the database cannot be
    /// reached now (a node starts only when it can serve); once running, it rides out outages.
    pub async fn connect(url: &str, options: PgOptions) -> Result<Arc<PgStore>, StoreError> {
        if options.node.is_empty() || options.node.len() > 128 {
            return Err(StoreError::Config(
                "a node name is 1 to 128 characters".into(),
            ));
        }
        let config = parse_config(url)?;
        migrate(url).await?;
        let manager = Manager::from_config(
            config.clone(),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.pool_size.max(2))
            .runtime(Runtime::Tokio1)
            .create_timeout(Some(options.op_timeout))
            .wait_timeout(Some(options.op_timeout))
            .build()
            .map_err(|e| StoreError::Config(e.to_string()))?;
        let db = Db {
            pool,
            op_timeout: options.op_timeout,
            health: Arc::default(),
        };
        let revocations = Arc::new(Revocations::shared(
            Arc::new(RevocationKeeper {
                db: db.clone(),
                node: options.node.clone(),
                bound: options.op_timeout,
            }),
            options.max_staleness,
        ));
        let lease = match options.register {
            true => Some(Arc::new(lease::Lease::take(&db, &options).await?)),
            false => None,
        };
        if options.register {
            let (node, policy) = (options.node.clone(), options.policy_sha256.clone());
            let others: Vec<(String, Option<String>)> = db
                .with("node registration", async move |c| {
                    // Fences of reservation batches older than any a node still gives up.
                    c.execute(
                        "DELETE FROM vak_reserve_fence WHERE at < now() - interval '1 hour'",
                        &[],
                    )
                    .await?;
                    let rows = c
                        .query(
                            "SELECT node, policy_sha256 FROM vak_nodes
                             WHERE node <> $1 AND policy_sha256 IS DISTINCT FROM $2",
                            &[&node, &policy],
                        )
                        .await?;
                    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
                })
                .await?;
            for (other, digest) in others {
                tracing::warn!(
                    node = %other,
                    policy = digest.as_deref().unwrap_or("-"),
                    "another node of this store registered a different policy: session budgets are \
                     shared, so every node should serve the same policy"
                );
            }
        }
        let shutdown = CancellationToken::new();
        let (writer, queue) = mpsc::unbounded_channel();
        let (reserver, reservations) = mpsc::unbounded_channel();
        let store = Arc::new(PgStore {
            db: db.clone(),
            config,
            options,
            revocations,
            writer,
            reserver,
            lease: lease.clone(),
            shutdown: shutdown.clone(),
        });
        // The first read is not in the background: a node serves with a complete view.
        let mut listener = Listener::new(
            db.clone(),
            store.config.clone(),
            store.revocations.clone(),
            (store.options.op_timeout, store.options.poll),
            lease.clone(),
        );
        listener.read_with_pool(&db).await?;
        tokio::spawn(listener.run(shutdown.clone()));
        tokio::spawn(ledger::run_reserver(
            db.clone(),
            store.options.node.clone(),
            reservations,
            shutdown.clone(),
        ));
        tokio::spawn(Writer::new(db, store.options.node.clone(), lease).run(queue, shutdown));
        tracing::info!(store = %store.describe(), "connected to the shared store");
        Ok(store)
    }

    /// Stop serving from the store: give this node's name back, so that another process may
    /// take it at once (a process that ends without this frees it when its lease lapses).
    pub async fn close(&self) {
        self.shutdown.cancel();
        if let Some(lease) = &self.lease
            && let Err(e) = lease.release(&self.db).await
        {
            tracing::warn!(error = %e, "the node's name could not be given back: it is free once its lease lapses");
        }
    }

    /// The bound on each wait on the store (a call's reservation and `started` entry together,
    /// its record).
    pub fn bound(&self) -> Duration {
        self.options.op_timeout
    }

    /// Where the store is and who this node is (never the password).
    pub fn describe(&self) -> String {
        format!("{} as node {}", shown(&self.config), self.options.node)
    }

    /// This node's view of the revocations.
    pub fn revocations(&self) -> &Arc<Revocations> {
        &self.revocations
    }

    /// The schema version, the nodes and their chains, the counts of revocations and sessions.
    pub async fn status(&self) -> Result<StoreStatus, StoreError> {
        self.db
            .with("store status", async move |c| {
                let version: i32 = c
                    .query_one("SELECT coalesce(max(version), 0) FROM vak_schema", &[])
                    .await?
                    .get(0);
                let nodes = c
                    .query(
                        "SELECT node, n.started_at::text, n.policy_sha256, n.public_key,
                                n.vak_version, coalesce(r.entries, 0), r.last_commit::text,
                                CASE WHEN n.holder IS NOT NULL THEN n.holder_info END,
                                CASE WHEN n.holder IS NOT NULL THEN
                                    (extract(epoch FROM now() - n.heartbeat_at) * 1000)::bigint
                                END,
                                coalesce(n.revocation_ack, 0)
                         FROM vak_nodes n
                         FULL JOIN (SELECT node, count(*) AS entries,
                                           max(committed_at) AS last_commit
                                    FROM vak_records GROUP BY node) r USING (node)
                         ORDER BY node",
                        &[],
                    )
                    .await?
                    .iter()
                    .map(|r| NodeStatus {
                        node: r.get(0),
                        started_at: r.get(1),
                        policy_sha256: r.get(2),
                        public_key: r.get(3),
                        vak_version: r.get(4),
                        entries: r.get(5),
                        last_commit: r.get(6),
                        holder: r.get(7),
                        heartbeat_ms_ago: r.get(8),
                        revocation_ack: r.get(9),
                    })
                    .collect();
                let counts = c
                    .query_one(
                        "SELECT (SELECT count(*) FROM vak_revocations),
                                (SELECT count(*) FROM vak_ledgers)",
                        &[],
                    )
                    .await?;
                Ok(StoreStatus {
                    schema_version: version,
                    nodes,
                    revocations: counts.get(0),
                    sessions: counts.get(1),
                })
            })
            .await
    }

    /// The ledger keyed `key` (a row every node charges), for a session of `principal`.
    pub fn ledger(&self, key: &str, principal: Option<&str>) -> Arc<dyn LedgerPort> {
        Arc::new(SharedLedger {
            db: self.db.clone(),
            reserver: self.reserver.clone(),
            key: key.to_string(),
            principal: principal.map(str::to_string),
        })
    }

    /// Append `record` (with its ledger charge) to this node's chain; answered once committed,
    /// or when `wait` says to stop waiting. A record not committed by then is kept by the
    /// writer and committed (with its charge) when the store answers again: the call is not
    /// acknowledged, but its record and its reservation's settlement are not lost.
    pub async fn append(
        &self,
        record: &CallRecord,
        settlement: Option<Settlement>,
        wait: crate::store::Wait,
    ) -> Result<Entry, JournalError> {
        let (reply, answer) = oneshot::channel();
        let pending = Pending::new(record, settlement, reply);
        self.send(pending, answer, wait).await
    }

    /// Append a call's signed `started` entry to this node's chain; answered once committed, or
    /// an error at `deadline` (then the entry is not written if the writer had not taken it yet,
    /// and the call does not run either way).
    pub async fn append_started(
        &self,
        started: &crate::journal::Started,
        deadline: Instant,
    ) -> Result<Entry, JournalError> {
        let (reply, answer) = oneshot::channel();
        let pending = Pending::started(started, reply);
        self.send(pending, answer, crate::store::Wait::Until(deadline))
            .await
    }

    async fn send(
        &self,
        pending: Pending,
        answer: oneshot::Receiver<Result<Entry, JournalError>>,
        wait: crate::store::Wait,
    ) -> Result<Entry, JournalError> {
        let gone = || JournalError::WriterGone {
            path: self.describe(),
        };
        if let Some(why) = self.lease.as_ref().and_then(|l| l.lost()) {
            return Err(JournalError::Store(StoreError::LeaseLost(why)));
        }
        self.writer.send(pending).map_err(|_| gone())?;
        let deadline = match wait {
            crate::store::Wait::Until(deadline) => deadline,
            crate::store::Wait::Queued(why) => {
                return Err(JournalError::Store(StoreError::Unavailable {
                    what: "journal commit",
                    message: format!(
                        "not waited for ({why}); the record is kept and committed when the store \
                         answers"
                    ),
                }));
            }
        };
        let began = Instant::now();
        match tokio::time::timeout_at(deadline.into(), answer).await {
            Ok(answered) => answered.unwrap_or_else(|_| Err(gone())),
            Err(_) => Err(JournalError::Store(StoreError::Unavailable {
                what: "journal commit",
                message: format!(
                    "no answer within {} ms (the bound on a wait for the store)",
                    began.elapsed().as_millis()
                ),
            })),
        }
    }

    /// Calls matching `filter`, every node's, newest first: each call's final record, or its
    /// `started` entry when it has none (`interrupted` when its node has started again since,
    /// else `running`: its node may also have died and not come back).
    pub async fn list(&self, filter: &Filter) -> Result<Vec<Listed>, JournalError> {
        let f = filter.clone();
        let limit = i64::from(f.limit.unwrap_or(100));
        Ok(self
            .db
            .with("journal list", async move |c| {
                let rows = c
                    .query(
                        "SELECT r.gseq, r.node, r.call_id, r.tool,
                                CASE WHEN r.kind = 'record' THEN r.status
                                     WHEN n.started_at > r.committed_at THEN 'interrupted'
                                     ELSE 'running' END AS shown_status,
                                r.stage, r.principal, r.received_at
                         FROM vak_records r LEFT JOIN vak_nodes n ON n.node = r.node
                         WHERE (r.kind = 'record' OR NOT EXISTS (
                                   SELECT 1 FROM vak_records f WHERE f.call_id = r.call_id
                                   AND f.node = r.node AND f.kind = 'record'))
                           AND ($1::text IS NULL OR r.tool = $1)
                           AND ($2::text IS NULL OR
                                (CASE WHEN r.kind = 'record' THEN r.status
                                      WHEN n.started_at > r.committed_at THEN 'interrupted'
                                      ELSE 'running' END) = $2)
                           AND ($3::text IS NULL OR r.stage = $3) AND ($4::text IS NULL OR r.principal = $4)
                           AND ($5::text IS NULL OR r.received_at >= $5)
                         ORDER BY r.received_at DESC, r.gseq DESC LIMIT $6",
                        &[&f.tool, &f.status, &f.stage, &f.principal, &f.since, &limit],
                    )
                    .await?;
                Ok(rows.iter().map(listed).collect())
            })
            .await?)
    }

    /// The records of the calls `id` names, as vak's call id or as the provider's (several calls
    /// may have that), oldest first, each checked: its hash, its links in its node's chain, its
    /// signature.
    pub async fn show(&self, id: &str) -> Result<Vec<Shown>, JournalError> {
        let id = id.to_string();
        let rows = self
            .db
            .with("journal show", async move |c| {
                c.query(
                    "SELECT r.gseq, r.node, r.node_seq, r.call_id, r.tool, r.status, r.received_at,
                            r.record, r.prev_hash, r.hash,
                            (SELECT b.hash FROM vak_records b
                             WHERE b.node = r.node AND b.node_seq = r.node_seq - 1),
                            (SELECT a.prev_hash FROM vak_records a
                             WHERE a.node = r.node AND a.node_seq = r.node_seq + 1),
                            r.kind,
                            EXISTS (SELECT 1 FROM vak_records f WHERE f.call_id = r.call_id
                                    AND f.node = r.node AND f.kind = 'record'),
                            COALESCE((SELECT n.started_at > r.committed_at FROM vak_nodes n
                                      WHERE n.node = r.node), true)
                     FROM vak_records r
                     WHERE r.call_id = $1 OR r.provider_call_id = $1
                     ORDER BY r.received_at, r.gseq LIMIT 1000",
                    &[&id],
                )
                .await
            })
            .await?;
        let mut shown = Vec::new();
        for r in rows {
            let kind = crate::journal::Kind::parse(r.get(12));
            let (finished, restarted): (bool, bool) = (r.get(13), r.get(14));
            // A call's record where it has one; else its `started` entry.
            if kind == crate::journal::Kind::Started && finished {
                continue;
            }
            let status: String = match kind {
                crate::journal::Kind::Record => r.get(5),
                crate::journal::Kind::Started if restarted => "interrupted".into(),
                crate::journal::Kind::Started => "running".into(),
            };
            let stored = crate::journal::chain::Stored {
                seq: r.get(0),
                chain: r.get(1),
                legacy: false,
                chain_seq: r.get(2),
                kind: Some(kind),
                call_id: r.get(3),
                text: r.get(7),
                prev_hash: r.get(8),
                hash: r.get(9),
            };
            let before: Option<String> = match stored.chain_seq {
                1 => Some(crate::journal::chain::GENESIS.to_string()),
                _ => r.get(10),
            };
            let after: Option<String> = r.get(11);
            let check =
                crate::journal::chain::check_links(&stored, before.as_deref(), after.as_deref());
            shown.push(Shown {
                seq: stored.seq,
                node: Some(stored.chain.clone()),
                chain_seq: stored.chain_seq,
                kind,
                call_id: stored.call_id,
                tool: r.get(4),
                status,
                received_at: r.get(6),
                text: stored.text,
                check,
            });
        }
        Ok(shown)
    }

    /// Walk every node's chain (links, hashes, gapless places, commit order) and every record's
    /// signature (by one of `trusted`, when given); name the first entry that does not check out.
    pub async fn verify(&self, trusted: &[String]) -> Result<Verification, JournalError> {
        journal::verify(&self.db, trusted, None).await
    }
}

/// A listed call from a row of `seq, node, call_id, tool, status, stage, principal,
/// received_at`.
fn listed(r: &tokio_postgres::Row) -> Listed {
    Listed {
        seq: r.get(0),
        node: Some(r.get(1)),
        call_id: r.get(2),
        tool: r.get(3),
        status: r.get(4),
        stage: r.get(5),
        principal: r.get(6),
        received_at: r.get(7),
    }
}

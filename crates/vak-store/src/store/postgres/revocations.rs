//! Revocations in the shared store: recorded with a `NOTIFY`, applied by every node's listener
//! at each notification and at every poll.

use super::lease::Lease;
use super::{Db, describe};
use crate::revocation::{
    Confirmation, RevocationEntry, RevocationError, RevocationLog, Revocations,
};
use crate::store::StoreError;
use futures::future::BoxFuture;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_postgres::NoTls;
use tokio_util::sync::CancellationToken;

/// Records revocations in the shared store (the node's view applies them as it is told).
#[derive(Clone)]
pub struct RevocationKeeper {
    pub(super) db: Db,
    pub(super) node: String,
    /// How long a revocation waits for the live nodes to confirm it.
    pub(super) bound: Duration,
}

impl std::fmt::Debug for RevocationKeeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RevocationKeeper(node {})", self.node)
    }
}

impl RevocationKeeper {
    /// Insert `entry` and notify every listening node in the same statement; its id.
    async fn insert(&self, entry: &RevocationEntry) -> Result<i64, StoreError> {
        let text = serde_json::to_string(entry).unwrap_or_default();
        let node = self.node.clone();
        self.db
            .with("revocation", async move |c| {
                let row = c
                    .query_one(
                        "WITH r AS (INSERT INTO vak_revocations (entry, recorded_by)
                                    VALUES ($1, $2) RETURNING id)
                         SELECT id, pg_notify('vak_revocations', id::text) FROM r",
                        &[&text, &node],
                    )
                    .await?;
                Ok(row.get(0))
            })
            .await
    }
}

impl RevocationLog for RevocationKeeper {
    fn record<'a>(
        &'a self,
        entry: &'a RevocationEntry,
    ) -> BoxFuture<'a, Result<Option<i64>, RevocationError>> {
        Box::pin(async move { Ok(Some(self.insert(entry).await?)) })
    }

    fn barrier(&self, id: i64) -> BoxFuture<'_, Option<Confirmation>> {
        Box::pin(async move { Some(self.await_confirmations(id).await) })
    }
}

/// Which nodes hold their name, whether each applied revocation `$1`, and whether its view has
/// lapsed (no heartbeat within its staleness bound, 50 ms of margin added: it then refuses every
/// call on its own until it has read what is new), or it stopped.
const BARRIER: &str = "
SELECT node, revocation_ack >= $1,
       holder IS NULL OR heartbeat_at IS NULL
       OR now() - heartbeat_at > make_interval(secs => (coalesce(stale_ms, 0) + 50) / 1000.0)
FROM vak_nodes WHERE holder IS NOT NULL OR node = ANY($2)";

impl RevocationKeeper {
    /// Wait until every node live now has applied revocation `id` (from its admission path:
    /// its view holds it, then it says so), or its view lapsed (it refuses every call until it
    /// has read it), or the bound passed: which nodes did what.
    async fn await_confirmations(&self, id: i64) -> Confirmation {
        let began = Instant::now();
        let deadline = began + self.bound;
        let mut confirmation = Confirmation::default();
        let mut waiting: Option<BTreeSet<String>> = None;
        loop {
            let listed: Vec<String> = waiting.iter().flatten().cloned().collect();
            let rows = self
                .db
                .with_by("revocation barrier", deadline, async move |c| {
                    c.query(BARRIER, &[&id, &listed]).await
                })
                .await;
            let rows = match rows {
                Ok(rows) => rows,
                Err(e) => {
                    confirmation.error = Some(e.to_string());
                    confirmation.unconfirmed = waiting.into_iter().flatten().collect();
                    break;
                }
            };
            // The nodes live when the revocation was committed: those whose view is fresh.
            let live = waiting.get_or_insert_with(|| {
                rows.iter()
                    .filter(|r| !r.get::<_, bool>(2))
                    .map(|r| r.get(0))
                    .collect()
            });
            for r in &rows {
                let node: String = r.get(0);
                if !live.contains(&node) {
                    continue;
                }
                if r.get::<_, bool>(1) {
                    live.remove(&node);
                    confirmation.confirmed.push(node);
                } else if r.get::<_, bool>(2) {
                    live.remove(&node);
                    confirmation.lapsed.push(node);
                }
            }
            if live.is_empty() {
                break;
            }
            if Instant::now() >= deadline {
                confirmation.unconfirmed = live.iter().cloned().collect();
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        confirmation.waited_ms = began.elapsed().as_millis() as u64;
        confirmation.confirmed.sort();
        confirmation.lapsed.sort();
        confirmation
    }
}

/// Keeps a node's view of the revocations complete: `LISTEN` on a connection of its own, a read
/// of what is new at each notification and at every poll, and a reconnection when it breaks.
pub(super) struct Listener {
    config: tokio_postgres::Config,
    revocations: Arc<Revocations>,
    op_timeout: Duration,
    poll: Duration,
    /// The highest id applied.
    last: i64,
    /// This node's lease, renewed after each read, with the highest id applied (`None`: this
    /// process serves nothing).
    lease: Option<Arc<Lease>>,
    db: Db,
}

const NEW_REVOCATIONS: &str = "SELECT id, entry FROM vak_revocations WHERE id > $1 ORDER BY id";

impl Listener {
    pub(super) fn new(
        db: Db,
        config: tokio_postgres::Config,
        revocations: Arc<Revocations>,
        (op_timeout, poll): (Duration, Duration),
        lease: Option<Arc<Lease>>,
    ) -> Listener {
        let mut config = config;
        if let Some(l) = &lease {
            // Named, so that an operator (and a test) can tell this connection in pg_stat_activity.
            config.application_name(format!("vak revocations {}", l.node));
        }
        Listener {
            config,
            revocations,
            op_timeout,
            poll,
            last: 0,
            lease,
            db,
        }
    }

    /// Apply rows of `vak_revocations` (id, entry) in order. A row that does not parse stops the
    /// read there: the view is then not confirmed, and calls are refused once it is stale.
    fn apply(&mut self, rows: &[tokio_postgres::Row]) -> bool {
        for row in rows {
            let id: i64 = row.get(0);
            let text: String = row.get(1);
            match serde_json::from_str::<RevocationEntry>(&text) {
                Ok(entry) => {
                    self.revocations.apply(Some(id), entry);
                    self.last = id;
                }
                Err(e) => {
                    tracing::error!(id, error = %e, "a revocation in the shared store does not parse; refusing calls until it is fixed");
                    return false;
                }
            }
        }
        true
    }

    /// Read what is new on a connection of the pool (a node's first read, before it serves).
    pub(super) async fn read_with_pool(&mut self, db: &Db) -> Result<(), StoreError> {
        let conn = db.conn("revocations read").await?;
        self.read(conn.client())
            .await
            .map_err(|message| StoreError::Unavailable {
                what: "revocations read",
                message,
            })
    }

    /// Read what is new and apply it; then (a node) renew the lease, saying which revocations
    /// are in force here; then confirm the view as of when the read began. Applied before it is
    /// said, said before the view counts as fresh: a revocation a node has acknowledged refuses
    /// every call it checks afterwards, and a node whose heartbeat is old refuses on its own.
    async fn read(&mut self, client: &tokio_postgres::Client) -> Result<(), String> {
        let started = Instant::now();
        let rows = tokio::time::timeout(
            self.op_timeout,
            client.query(NEW_REVOCATIONS, &[&self.last]),
        )
        .await
        .map_err(|_| "no answer in time".to_string())?
        .map_err(|e| describe(&e))?;
        if !self.apply(&rows) {
            return Ok(());
        }
        if let Some(lease) = &self.lease {
            let renewed = tokio::time::timeout(self.op_timeout, lease.heartbeat(client, self.last))
                .await
                .map_err(|_| "no answer in time".to_string())?
                .map_err(|e| describe(&e))?;
            if !renewed {
                self.revocations.lose(lease.lose());
                return Ok(());
            }
        }
        self.db.health.answered();
        self.revocations.confirm(started);
        Ok(())
    }

    pub(super) async fn run(mut self, shutdown: CancellationToken) {
        let mut backoff = Duration::from_millis(50);
        while !shutdown.is_cancelled() {
            let began = Instant::now();
            let outcome = self.session(&shutdown).await;
            if began.elapsed() > Duration::from_secs(2) {
                backoff = Duration::from_millis(50);
            }
            match outcome {
                Ok(()) => return,
                Err(message) => self.db.health.failed(
                    "revocation listener",
                    &StoreError::Unavailable {
                        what: "revocation listener",
                        message,
                    },
                ),
            }
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(Duration::from_secs(1));
        }
    }

    /// One connection's life: listen, read, then read again at every notification and poll.
    /// `Ok` only at shutdown.
    async fn session(&mut self, shutdown: &CancellationToken) -> Result<(), String> {
        use futures::StreamExt as _;
        let connected = tokio::time::timeout(self.op_timeout, self.config.connect(NoTls))
            .await
            .map_err(|_| "connecting timed out".to_string())?;
        let (client, mut connection) = connected.map_err(|e| describe(&e))?;
        let (notified, mut notifications) = mpsc::unbounded_channel();
        // The connection's driver: forwards notifications, ends when the connection does.
        let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        let driver = tokio::spawn(async move {
            while let Some(message) = messages.next().await {
                match message {
                    Ok(tokio_postgres::AsyncMessage::Notification(_)) => {
                        let _ = notified.send(());
                    }
                    Ok(_) => {}
                    Err(e) => return describe(&e),
                }
            }
            "the connection closed".to_string()
        });
        let _stop_driver = AbortOnDrop(driver.abort_handle());
        tokio::time::timeout(
            self.op_timeout,
            client.batch_execute("LISTEN vak_revocations"),
        )
        .await
        .map_err(|_| "LISTEN timed out".to_string())?
        .map_err(|e| describe(&e))?;
        // Listening now: whatever was recorded before is read here.
        self.read(&client).await?;
        let mut poll = tokio::time::interval(self.poll);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut driver = driver;
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                ended = &mut driver => {
                    return Err(ended.unwrap_or_else(|e| e.to_string()));
                }
                Some(()) = notifications.recv() => {
                    // Several notifications at once need one read.
                    while notifications.try_recv().is_ok() {}
                    self.read(&client).await?;
                }
                _ = poll.tick() => self.read(&client).await?,
            }
        }
    }
}

/// Aborts a spawned task when dropped.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

//! One node name, one writer: a process holds its node's name by a lease, a row of `vak_nodes`
//! (`holder`, renewed by `heartbeat_at`). A second process starting with a live name is refused,
//! naming the holder; a name whose holder stopped renewing it is free `lease_ms` after the last
//! heartbeat. A process that finds its name taken stops admitting calls, and the journal's commit
//! checks the lease in the same statement, so no `started` entry (and so no tool run) is ever
//! committed by a process that does not hold the name.

use super::{Db, PgOptions, big};
use crate::store::StoreError;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// This process's token: every lease it takes is `TOKEN/n`.
fn process_token() -> &'static str {
    static TOKEN: OnceLock<String> = OnceLock::new();
    TOKEN.get_or_init(|| uuid::Uuid::new_v4().simple().to_string())
}

/// The leases held by stores of this process that are still open. A name held by a store of this
/// process that was dropped may be taken over at once (a host rebuilt on the same store).
fn open_here() -> std::sync::MutexGuard<'static, HashSet<String>> {
    static OPEN: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    OPEN.get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// Who this process is, for the messages of a process refused the name.
fn who() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "an unknown host".into());
    format!(
        "pid {} on {host} (vak {})",
        std::process::id(),
        env!("CARGO_PKG_VERSION")
    )
}

/// The lease of one store on its node's name.
#[derive(Debug)]
pub(crate) struct Lease {
    pub(crate) node: String,
    /// This store's holder id (`TOKEN/n`).
    pub(crate) holder: String,
    /// Why this store no longer holds the name, once it found it taken.
    lost: Mutex<Option<String>>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        open_here().remove(&self.holder);
    }
}

/// The holder of a name, as read when the name was refused.
struct Holder {
    info: String,
    heartbeat: Option<String>,
    age_ms: Option<i64>,
    lease_ms: Option<i64>,
}

const TAKE: &str = "
INSERT INTO vak_nodes AS n (node, started_at, policy_sha256, public_key, vak_version, holder,
                            holder_info, heartbeat_at, lease_ms, stale_ms, revocation_ack)
VALUES ($1, now(), $2, $3, $4, $5, $6, now(), $7, $8, 0)
ON CONFLICT (node) DO UPDATE SET started_at = now(), policy_sha256 = EXCLUDED.policy_sha256,
    public_key = EXCLUDED.public_key, vak_version = EXCLUDED.vak_version,
    holder = EXCLUDED.holder, holder_info = EXCLUDED.holder_info, heartbeat_at = now(),
    lease_ms = EXCLUDED.lease_ms, stale_ms = EXCLUDED.stale_ms, revocation_ack = 0
WHERE n.holder IS NULL OR n.heartbeat_at IS NULL
   OR n.heartbeat_at < now() - make_interval(secs => coalesce(n.lease_ms, 0) / 1000.0)
   OR n.holder = $9
RETURNING node";

const HOLDER: &str = "
SELECT holder, coalesce(holder_info, holder), heartbeat_at::text,
       (extract(epoch FROM now() - heartbeat_at) * 1000)::bigint, lease_ms
FROM vak_nodes WHERE node = $1";

/// The refusal of a name held by a live process.
fn held(node: &str, holder: &Holder) -> StoreError {
    StoreError::NodeHeld {
        node: node.to_string(),
        holder: format!(
            "{}, last heartbeat {} ms ago",
            holder.info,
            holder.age_ms.unwrap_or(-1)
        ),
        lease_ms: u64::try_from(holder.lease_ms.unwrap_or(0)).unwrap_or(0),
    }
}

impl Lease {
    /// Take the name `options.node` for this process, registering the node (what it serves,
    /// with which key). Refused with [`StoreError::NodeHeld`] while another live process holds
    /// it; a holder that stopped renewing it (killed) is waited for until its lease lapses.
    pub(super) async fn take(db: &Db, options: &PgOptions) -> Result<Lease, StoreError> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let holder = format!(
            "{}/{}",
            process_token(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let lease = Lease {
            node: options.node.clone(),
            holder,
            lost: Mutex::new(None),
        };
        // The holder's heartbeat when the name was first refused: a live holder renews it.
        let mut first_look: Option<Option<String>> = None;
        let mut waited_for_lapse = false;
        for _ in 0..8 {
            let current = lease.read_holder(db).await?;
            // A store of this process that was dropped: its name is ours to take over.
            let ours_dropped = current.as_ref().and_then(|(id, _)| {
                (id.starts_with(process_token()) && !open_here().contains(id)).then(|| id.clone())
            });
            if lease.try_take(db, options, ours_dropped).await? {
                open_here().insert(lease.holder.clone());
                return Ok(lease);
            }
            let Some((_, holder)) = lease.read_holder(db).await? else {
                continue; // Released meanwhile: take it.
            };
            match &first_look {
                None => {
                    // Look again after a few heartbeats.
                    first_look = Some(holder.heartbeat.clone());
                    tokio::time::sleep(options.poll * 3).await;
                    continue;
                }
                // Not renewed since: its holder is gone; its lease lapses soon.
                Some(seen) if *seen == holder.heartbeat && !waited_for_lapse => {
                    let left = holder
                        .lease_ms
                        .zip(holder.age_ms)
                        .map_or(0, |(l, a)| l.saturating_sub(a).max(0));
                    let left = Duration::from_millis(u64::try_from(left).unwrap_or(0));
                    waited_for_lapse = true;
                    tracing::info!(
                        node = %options.node,
                        holder = %holder.info,
                        "the node name is held by a process that no longer renews it: waiting {} ms for its lease to lapse",
                        left.as_millis()
                    );
                    tokio::time::sleep(left.min(options.lease) + Duration::from_millis(50)).await;
                    continue;
                }
                Some(_) => {}
            }
            return Err(held(&options.node, &holder));
        }
        let holder = lease.read_holder(db).await?;
        Err(match holder {
            Some((_, h)) => held(&options.node, &h),
            None => StoreError::Unavailable {
                what: "node lease",
                message: "the name was free but could not be taken: try again".into(),
            },
        })
    }

    async fn try_take(
        &self,
        db: &Db,
        options: &PgOptions,
        ours_dropped: Option<String>,
    ) -> Result<bool, StoreError> {
        let (node, holder, info) = (self.node.clone(), self.holder.clone(), who());
        let (policy, key) = (options.policy_sha256.clone(), options.public_key.clone());
        let lease_ms = big(options.lease.max(options.max_staleness).as_millis() as u64);
        let stale_ms = big(options.max_staleness.as_millis() as u64);
        db.with("node lease", async move |c| {
            let rows = c
                .query(
                    TAKE,
                    &[
                        &node,
                        &policy,
                        &key,
                        &env!("CARGO_PKG_VERSION"),
                        &holder,
                        &info,
                        &lease_ms,
                        &stale_ms,
                        &ours_dropped,
                    ],
                )
                .await?;
            Ok(!rows.is_empty())
        })
        .await
    }

    /// The name's holder id and what is known of it; `None` when the name is free.
    async fn read_holder(&self, db: &Db) -> Result<Option<(String, Holder)>, StoreError> {
        let node = self.node.clone();
        db.with("node lease", async move |c| {
            let row = c.query_opt(HOLDER, &[&node]).await?;
            Ok(row.and_then(|r| {
                let id: Option<String> = r.get(0);
                id.map(|id| {
                    (
                        id,
                        Holder {
                            info: r.get::<_, Option<String>>(1).unwrap_or_default(),
                            heartbeat: r.get(2),
                            age_ms: r.get(3),
                            lease_ms: r.get(4),
                        },
                    )
                })
            }))
        })
        .await
    }

    /// Renew the lease and say which revocations are in force here (the highest id applied):
    /// `false` when the name is no longer this process's.
    pub(super) async fn heartbeat(
        &self,
        client: &tokio_postgres::Client,
        applied: i64,
    ) -> Result<bool, tokio_postgres::Error> {
        let n = client
            .execute(
                "UPDATE vak_nodes SET heartbeat_at = now(),
                        revocation_ack = GREATEST(revocation_ack, $3)
                 WHERE node = $1 AND holder = $2",
                &[&self.node, &self.holder, &applied],
            )
            .await?;
        Ok(n == 1)
    }

    /// This process no longer holds the name: say so once, and remember why.
    pub(super) fn lose(&self) -> String {
        let mut lost = self.lost.lock().unwrap_or_else(|p| p.into_inner());
        let why = format!(
            "this process no longer holds node `{}`: another process took the name over after its \
             lease lapsed; nothing more is admitted here (restart it under a name of its own)",
            self.node
        );
        if lost.is_none() {
            tracing::error!(node = %self.node, "{why}");
            *lost = Some(why.clone());
        }
        why
    }

    /// Why this process no longer holds the name, if so.
    pub(crate) fn lost(&self) -> Option<String> {
        self.lost.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Give the name back (a process stopping): another may take it at once.
    pub(super) async fn release(&self, db: &Db) -> Result<(), StoreError> {
        let (node, holder) = (self.node.clone(), self.holder.clone());
        db.with("node lease", async move |c| {
            c.execute(
                "UPDATE vak_nodes SET holder = NULL, heartbeat_at = NULL
                 WHERE node = $1 AND holder = $2",
                &[&node, &holder],
            )
            .await
        })
        .await
        .map(|_| ())
    }
}

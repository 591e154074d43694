//! The store: the state that outlives a call, which on a shared store every node sees. Three
//! pieces, one seam:
//!
//! | piece | [`Store::Local`] (default, no setup) | [`Store::Postgres`] (several nodes) |
//! |---|---|---|
//! | journal | SQLite file, one hash chain per writing process, a global commit order | one table, one hash chain per node, a global commit order |
//! | revocations | a JSON-lines file (or memory) | a table; pushed by `LISTEN/NOTIFY`, polled as a safety net |
//! | named session ledgers | in this process | rows charged atomically in the database |
//!
//! Every fault of the shared store is a typed [`StoreError`]; an unreachable database is
//! `store_unavailable`, retryable (a host transport fault). See `docs/scale-out.md`.
//!
//! The store implements the lifecycle's ports (`vak_core::ports`: the journal sink, the ledger,
//! the revocation log); the journal, the budget and the revocations name those ports, never this
//! module, so dependencies run from the store to what it implements.

#[cfg(feature = "postgres")]
pub mod postgres;

use crate::journal::{Entry, Filter, Journal, JournalError, Listed, Shown, Started, Verification};
use crate::record::CallRecord;
use crate::revocation::Revocations;
use crate::signing::HostKey;
use std::sync::Arc;
use vak_core::ports::ledger::Settlement;

pub use vak_core::ports::journal::Wait;
pub use vak_core::ports::store::StoreError;

/// The default store: everything on this machine.
#[derive(Clone)]
pub struct Local {
    /// `None`: records are not journaled (`--no-journal`).
    pub journal: Option<Arc<Journal>>,
    pub revocations: Arc<Revocations>,
}

/// Where the journal, the revocations and the session ledgers are kept.
#[derive(Clone)]
pub enum Store {
    /// This process and its files: the SQLite journal, the revocations file, ledgers in memory.
    Local(Local),
    /// A PostgreSQL database shared by several nodes (cargo feature `postgres`, on by default).
    #[cfg(feature = "postgres")]
    Postgres(Arc<postgres::PgStore>),
}

impl Default for Store {
    fn default() -> Self {
        Store::Local(Local {
            journal: None,
            revocations: Arc::new(Revocations::in_memory()),
        })
    }
}

impl Store {
    /// The revocations in force (for a shared store: this node's view, kept fresh).
    pub fn revocations(&self) -> &Arc<Revocations> {
        match self {
            Store::Local(l) => &l.revocations,
            #[cfg(feature = "postgres")]
            Store::Postgres(p) => p.revocations(),
        }
    }

    /// Sign a call's `started` entry with `key` and commit it to this process's (this node's)
    /// chain, before the call's tool runs; `None` when records are not journaled. Committed as a
    /// record is (the local journal's group commits sign the entries of one commit together).
    /// On the shared store it waits until `deadline` at most.
    #[cfg_attr(not(feature = "postgres"), allow(unused_variables))]
    pub async fn start(
        &self,
        started: &mut Started,
        key: &Arc<HostKey>,
        deadline: std::time::Instant,
    ) -> Option<Result<Entry, JournalError>> {
        match self {
            Store::Local(l) => match &l.journal {
                Some(journal) => Some(journal.append_started(started, key).await),
                None => None,
            },
            #[cfg(feature = "postgres")]
            Store::Postgres(p) => {
                started.signature = None;
                let digest = crate::signing::text_digest(&started.unsigned_text());
                started.signature = key.sign_digests(&[digest]).pop();
                Some(p.append_started(started, deadline).await)
            }
        }
    }

    /// Sign `record` with `key` and commit it. The local journal signs the records of one group
    /// commit as a batch (one signature among them); the shared store, and a host without a
    /// journal, sign each record by itself. A record whose commit failed is signed by itself:
    /// what the caller gets back is signed either way, except a record the local journal took
    /// while it signs checkpoints ([`Journal::sign_checkpoints`]): it comes back unsigned, with
    /// its place in the chain, and its checkpoint signs it once indexed. The shared store waits
    /// as `wait` says (the local journal always waits).
    #[cfg_attr(not(feature = "postgres"), allow(unused_variables))]
    pub async fn sign_and_append(
        &self,
        record: &mut CallRecord,
        key: &Arc<HostKey>,
        settlement: Option<Settlement>,
        wait: Wait,
    ) -> Option<Result<Entry, JournalError>> {
        // A record the local journal took under a checkpoint is signed there, once indexed.
        let mut covered = false;
        let journaled = match self {
            Store::Local(l) => match &l.journal {
                Some(journal) => {
                    let appended = journal.append_signing(record, key).await;
                    covered = appended.is_ok() && journal.signs_checkpoints();
                    Some(appended)
                }
                None => None,
            },
            #[cfg(feature = "postgres")]
            Store::Postgres(p) => {
                key.sign(record);
                Some(p.append(record, settlement, wait).await)
            }
        };
        if record.signature.is_none() && !covered {
            key.sign(record);
        }
        journaled
    }

    /// The bound on each wait on the store, for a call (`None`: this machine's store, which
    /// has no network to wait for).
    pub fn bound(&self) -> Option<std::time::Duration> {
        match self {
            Store::Local(_) => None,
            #[cfg(feature = "postgres")]
            Store::Postgres(p) => Some(p.bound()),
        }
    }

    /// A wait on the store that begins now: until the bound (an hour for this machine's store).
    pub fn deadline(&self) -> std::time::Instant {
        std::time::Instant::now() + self.bound().unwrap_or(std::time::Duration::from_secs(3600))
    }

    /// Stop using the store: a shared store gives this node's name back at once.
    pub async fn close(&self) {
        #[cfg(feature = "postgres")]
        if let Store::Postgres(p) = self {
            p.close().await;
        }
    }

    /// This machine's journal, if the store is local and journals.
    pub fn local(&self) -> Option<&Arc<Journal>> {
        match self {
            Store::Local(l) => l.journal.as_ref(),
            #[cfg(feature = "postgres")]
            Store::Postgres(_) => None,
        }
    }

    /// The ledger of the named session `key` kept in the shared store, where every node charges
    /// it; `None` for this machine's store (its ledgers live in the process).
    #[cfg_attr(not(feature = "postgres"), allow(unused_variables))]
    pub fn shared_ledger(
        &self,
        key: &str,
        principal: Option<&str>,
    ) -> Option<Arc<dyn vak_core::ports::ledger::LedgerPort>> {
        match self {
            Store::Local(_) => None,
            #[cfg(feature = "postgres")]
            Store::Postgres(p) => Some(p.ledger(key, principal)),
        }
    }

    /// Mark `key` spent for `keep` (at least as long as what it stands for stays good): `true`
    /// when this call spent it, `false` when it was spent before, by this process or, through
    /// the journal's database or the shared store, by another process or node. `None` when
    /// nothing is kept beyond the process (`--no-journal`): the caller keeps its own markers.
    pub async fn spend(
        &self,
        key: &str,
        keep: std::time::Duration,
    ) -> Option<Result<bool, JournalError>> {
        match self {
            Store::Local(l) => {
                let until = jiff::Timestamp::now()
                    .as_second()
                    .saturating_add(i64::try_from(keep.as_secs()).unwrap_or(i64::MAX));
                let journal = l.journal.clone()?;
                let key = key.to_string();
                // A write to SQLite, which may wait for another process's lock: off the
                // runtime's threads.
                Some(
                    tokio::task::spawn_blocking(move || journal.spend(&key, until))
                        .await
                        .unwrap_or_else(|e| {
                            Err(JournalError::Sqlite {
                                path: "journal".into(),
                                message: format!("marking a state spent stopped: {e}"),
                            })
                        }),
                )
            }
            #[cfg(feature = "postgres")]
            Store::Postgres(p) => Some(p.spend(key, keep).await.map_err(JournalError::Store)),
        }
    }

    fn local_journal(&self) -> Result<&Journal, JournalError> {
        match self {
            Store::Local(l) => l.journal.as_deref().ok_or(JournalError::Off),
            #[cfg(feature = "postgres")]
            Store::Postgres(_) => Err(JournalError::Off),
        }
    }

    /// Entries matching `filter`, newest first (on a shared store: every node's).
    pub async fn list(&self, filter: &Filter) -> Result<Vec<Listed>, JournalError> {
        match self {
            #[cfg(feature = "postgres")]
            Store::Postgres(p) => p.list(filter).await,
            Store::Local(_) => self.local_journal()?.list(filter),
        }
    }

    /// The entries of the calls `id` names (vak's call id, or the provider's: several calls may
    /// have that), each checked: see [`Journal::show`].
    pub async fn show(&self, id: &str) -> Result<Vec<Shown>, JournalError> {
        match self {
            #[cfg(feature = "postgres")]
            Store::Postgres(p) => p.show(id).await,
            Store::Local(_) => self.local_journal()?.show(id),
        }
    }

    /// The proof that a checkpoint of the local journal signs call `call_id`'s record, when it
    /// was written unsigned ([`Journal::proof`]); `None` on a shared store, whose records are
    /// signed one by one.
    pub async fn proof(
        &self,
        call_id: &str,
    ) -> Result<Option<crate::journal::chain::EntryProof>, JournalError> {
        match self {
            #[cfg(feature = "postgres")]
            Store::Postgres(_) => Ok(None),
            Store::Local(_) => self.local_journal()?.proof(call_id),
        }
    }

    /// Walk every chain and every record's signature (by one of `trusted`, when given).
    pub async fn verify(&self, trusted: &[String]) -> Result<Verification, JournalError> {
        match self {
            #[cfg(feature = "postgres")]
            Store::Postgres(p) => p.verify(trusted).await,
            Store::Local(_) => self.local_journal()?.verify_any(trusted),
        }
    }

    /// Where the store is, for messages (a database address never shows its password).
    pub fn describe(&self) -> String {
        match self {
            Store::Local(Local {
                journal: Some(j), ..
            }) => {
                format!("sqlite {}", j.path().display())
            }
            Store::Local(Local { journal: None, .. }) => "local, no journal".to_string(),
            #[cfg(feature = "postgres")]
            Store::Postgres(p) => p.describe(),
        }
    }
}

//! Revocations: a tool, one capability of a tool, or a principal. Recorded durably (one JSON line
//! each, synced before `revoke` returns; or a row of the shared store, which every node applies
//! when told by `NOTIFY`, or at its next poll), applied to every new call at once (permission
//! stage, and again once the call's `started` entry is written, just before it runs) and to
//! calls already running at their next brokered capability use (the broker checks here on every
//! request). A shared view that could not be confirmed within its bound refuses calls rather
//! than miss a revocation.
//!
//! On a shared store a revocation is a barrier: [`Revocations::revoke`] returns once every live
//! node has said it applied it (each node says so from its listener, after its view holds it,
//! so every call it checks afterwards is refused), or its view lapsed (it then refuses every
//! call until it has read it), or the bound passed, naming the nodes that did not confirm. Only
//! the embedder's API and `vak revoke` write revocations: nothing a tool or a model can call
//! reaches this module.

pub use vak_core::ports::revocations::{
    Confirmation, Revocation, RevocationEntry, RevocationError, RevocationLog,
};

use futures::future::BoxFuture;
use serde::Serialize;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use vak_core::types::Capability;

/// A revocation recorded, and how far it has reached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Revoked {
    pub entry: RevocationEntry,
    /// When the revocation was durable (committed, or synced to its file), RFC 3339, UTC: taken
    /// on this machine once the commit was acknowledged.
    pub committed_at: String,
    /// On a shared store, which nodes confirmed it (`None`: one machine's store).
    pub confirmation: Option<Confirmation>,
}

impl Revoked {
    /// The nodes that neither confirmed it nor refuse on their own, with why (empty: it holds
    /// everywhere).
    pub fn not_confirmed(&self) -> Vec<String> {
        match &self.confirmation {
            None => Vec::new(),
            Some(c) => {
                let mut nodes = c.unconfirmed.clone();
                if nodes.is_empty()
                    && let Some(e) = &c.error
                {
                    nodes.push(format!("(the store stopped answering: {e})"));
                }
                nodes
            }
        }
    }
}

/// What stops a call or a capability use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Blocked {
    /// A revocation in force.
    Revoked(RevocationEntry),
    /// This node's shared view is too old to tell (why): nothing runs until it is confirmed.
    Unconfirmed(String),
}

/// The revocations file of this machine: one JSON line each, synced before `revoke` returns.
#[derive(Debug)]
struct RevocationFile(PathBuf);

impl RevocationLog for RevocationFile {
    fn record<'a>(
        &'a self,
        entry: &'a RevocationEntry,
    ) -> BoxFuture<'a, Result<Option<i64>, RevocationError>> {
        Box::pin(async move {
            // A synced write: off the async workers.
            let (file, line) = (self.0.clone(), entry.clone());
            tokio::task::spawn_blocking(move || append_line(&file, &line))
                .await
                .map_err(|e| RevocationError::Write {
                    path: self.0.display().to_string(),
                    source: std::io::Error::other(e.to_string()),
                })??;
            Ok(None)
        })
    }

    fn barrier(&self, _id: i64) -> BoxFuture<'_, Option<Confirmation>> {
        Box::pin(std::future::ready(None))
    }
}

#[derive(Debug, Default)]
struct InForce {
    entries: Vec<RevocationEntry>,
    /// The shared store's ids of the entries applied (each is applied once, however it came).
    applied: std::collections::HashSet<i64>,
    /// When this view was last confirmed complete against the shared store.
    confirmed: Option<std::time::Instant>,
    /// Why this view can never be confirmed again (this process lost its node's name).
    lost: Option<String>,
}

/// The revocations in force.
#[derive(Debug, Default)]
pub struct Revocations {
    state: RwLock<InForce>,
    /// Where revocations are recorded (`None`: nowhere, lost when the process ends).
    keeper: Option<Arc<dyn RevocationLog>>,
    /// How old a shared view may be before calls are refused rather than risk a revocation this
    /// node has not seen (`None`: a local view is always complete).
    max_staleness: Option<std::time::Duration>,
}

impl Revocations {
    /// Revocations kept in memory only (lost when the process ends).
    pub fn in_memory() -> Revocations {
        Revocations::default()
    }

    /// Revocations recorded in `path` (JSON lines); a missing file means none yet.
    pub fn open(path: &Path) -> Result<Revocations, RevocationError> {
        let shown = path.display().to_string();
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(source) => {
                return Err(RevocationError::Read {
                    path: shown,
                    source,
                });
            }
        };
        let mut entries = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let entry: RevocationEntry =
                serde_json::from_str(line).map_err(|e| RevocationError::Parse {
                    path: shown.clone(),
                    line: i + 1,
                    message: e.to_string(),
                })?;
            entries.push(entry);
        }
        Ok(Revocations {
            state: RwLock::new(InForce {
                entries,
                ..InForce::default()
            }),
            keeper: Some(Arc::new(RevocationFile(path.to_path_buf()))),
            max_staleness: None,
        })
    }

    /// An empty view of the shared store's revocations, filled and kept fresh by the store.
    pub fn shared(
        keeper: Arc<dyn RevocationLog>,
        max_staleness: std::time::Duration,
    ) -> Revocations {
        Revocations {
            state: RwLock::default(),
            keeper: Some(keeper),
            max_staleness: Some(max_staleness),
        }
    }

    /// Record `revocation`: durably first (appended and synced, or committed to the shared
    /// store), then in force here. On a shared store, returns once every live node confirmed it
    /// (see [`Revocations::revoke_reported`]); [`RevocationError::NotConfirmed`] names the nodes
    /// that did not within the bound (it is recorded all the same, and they refuse calls once
    /// their view is stale).
    pub async fn revoke(
        &self,
        revocation: Revocation,
        reason: &str,
    ) -> Result<RevocationEntry, RevocationError> {
        let revoked = self.revoke_reported(revocation, reason).await?;
        let nodes = revoked.not_confirmed();
        if nodes.is_empty() {
            return Ok(revoked.entry);
        }
        Err(RevocationError::NotConfirmed {
            what: revoked.entry.revocation.to_string(),
            committed_at: revoked.committed_at,
            waited_ms: revoked.confirmation.map_or(0, |c| c.waited_ms),
            nodes,
        })
    }

    /// Record `revocation` as [`Revocations::revoke`] does, and say how far it reached: when it
    /// was committed, and on a shared store which nodes confirmed it. Returns once every node
    /// live at the commit has applied it (every call it checks afterwards is refused), or its
    /// view lapsed (it refuses every call until it has read it), or the store's bound passed.
    pub async fn revoke_reported(
        &self,
        revocation: Revocation,
        reason: &str,
    ) -> Result<Revoked, RevocationError> {
        let entry = RevocationEntry {
            revocation,
            at: jiff::Timestamp::now().to_string(),
            reason: reason.to_string(),
        };
        let id = match &self.keeper {
            None => None,
            Some(keeper) => keeper.record(&entry).await?,
        };
        let committed_at = jiff::Timestamp::now().to_string();
        self.apply(id, entry.clone());
        tracing::warn!(revocation = %entry.revocation, reason, "revoked");
        let confirmation = match (&self.keeper, id) {
            (Some(keeper), Some(id)) => keeper.barrier(id).await,
            _ => None,
        };
        Ok(Revoked {
            entry,
            committed_at,
            confirmation,
        })
    }

    /// This process lost its node's name: the view is never confirmed again, and every call and
    /// capability use is refused, saying `why`.
    #[cfg_attr(not(feature = "postgres"), expect(dead_code))]
    pub(crate) fn lose(&self, why: String) {
        let mut st = self.write();
        st.lost = Some(why);
        st.confirmed = None;
    }

    /// Put `entry` in force (once per shared id).
    pub(crate) fn apply(&self, id: Option<i64>, entry: RevocationEntry) {
        let mut st = self.write();
        if id.is_none_or(|id| st.applied.insert(id)) {
            st.entries.push(entry);
        }
    }

    /// The view is complete as of `at` (the shared store answered a query started then).
    #[cfg_attr(not(feature = "postgres"), expect(dead_code))]
    pub(crate) fn confirm(&self, at: std::time::Instant) {
        let mut st = self.write();
        if st.lost.is_none() && st.confirmed.is_none_or(|c| c < at) {
            st.confirmed = Some(at);
        }
    }

    /// Why this view cannot be trusted to hold every revocation now, if so: a shared view not
    /// confirmed within its bound (the store is out of reach).
    fn unconfirmed(&self, st: &InForce) -> Option<String> {
        if let Some(why) = &st.lost {
            return Some(why.clone());
        }
        let bound = self.max_staleness?;
        match st.confirmed {
            Some(at) if at.elapsed() <= bound => None,
            Some(at) => Some(format!(
                "the shared revocations were last confirmed {} ms ago (the bound is {} ms)",
                at.elapsed().as_millis(),
                bound.as_millis()
            )),
            None => Some("the shared revocations have not been read yet".to_string()),
        }
    }

    /// Every revocation in force, oldest first.
    pub fn list(&self) -> Vec<RevocationEntry> {
        self.read().entries.clone()
    }

    /// What stops a new call of `tool` for `principal`, if anything: a revocation in force, or a
    /// shared view too stale to tell (then every call is refused until the store answers).
    pub fn blocking_call(&self, tool: &str, principal: Option<&str>) -> Option<Blocked> {
        self.blocking(|r| match r {
            Revocation::Tool { tool: t } => t == tool,
            Revocation::Principal { principal: p } => Some(p.as_str()) == principal,
            Revocation::Capability { .. } => false,
        })
    }

    /// What stops `tool` (for `principal`) from using `capability` now, if anything.
    pub fn blocking_use(
        &self,
        tool: &str,
        principal: Option<&str>,
        capability: Capability,
    ) -> Option<Blocked> {
        self.blocking(|r| match r {
            Revocation::Tool { tool: t } => t == tool,
            Revocation::Principal { principal: p } => Some(p.as_str()) == principal,
            Revocation::Capability {
                tool: t,
                capability: c,
            } => t == tool && *c == capability,
        })
    }

    /// One look at the view: stale, or the first revocation that `applies`.
    fn blocking(&self, applies: impl Fn(&Revocation) -> bool) -> Option<Blocked> {
        let st = self.read();
        if let Some(why) = self.unconfirmed(&st) {
            return Some(Blocked::Unconfirmed(why));
        }
        st.entries
            .iter()
            .find(|e| applies(&e.revocation))
            .cloned()
            .map(Blocked::Revoked)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, InForce> {
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, InForce> {
        self.state.write().unwrap_or_else(|p| p.into_inner())
    }
}

/// Append `entry` to the file at `path` and sync it.
fn append_line(path: &Path, entry: &RevocationEntry) -> Result<(), RevocationError> {
    let write_err = |source| RevocationError::Write {
        path: path.display().to_string(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(write_err)?;
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(write_err)?;
    let line = serde_json::to_string(entry).unwrap_or_default();
    writeln!(f, "{line}").map_err(write_err)?;
    f.sync_all().map_err(write_err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn revocations_survive_a_restart_and_match_their_scope() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("revocations.jsonl");
        let r = Revocations::open(&path).unwrap();
        r.revoke(
            Revocation::Capability {
                tool: "clock".into(),
                capability: Capability::Clock,
            },
            "test",
        )
        .await
        .unwrap();
        r.revoke(
            Revocation::Principal {
                principal: "mallory".into(),
            },
            "test",
        )
        .await
        .unwrap();
        let again = Revocations::open(&path).unwrap();
        assert_eq!(again.list().len(), 2);
        assert!(
            again.blocking_call("clock", None).is_none(),
            "a capability revocation lets calls run"
        );
        assert!(
            again
                .blocking_use("clock", None, Capability::Clock)
                .is_some()
        );
        assert!(
            again
                .blocking_use("stats", None, Capability::Clock)
                .is_none()
        );
        assert!(again.blocking_call("stats", Some("mallory")).is_some());
        assert!(again.blocking_call("stats", Some("alice")).is_none());
        std::fs::write(&path, "{\"scope\":\"tool\"}\n").unwrap();
        let err = Revocations::open(&path).unwrap_err().to_string();
        assert!(err.contains("line 1"), "{err}");
    }

    #[test]
    fn a_shared_view_too_old_to_tell_blocks_every_call_and_use() {
        let bound = std::time::Duration::from_millis(50);
        let view = Revocations {
            max_staleness: Some(bound),
            ..Revocations::default()
        };
        let unconfirmed = |b: Option<Blocked>| matches!(b, Some(Blocked::Unconfirmed(_)));
        assert!(unconfirmed(view.blocking_call("clock", None)), "never read");
        view.confirm(std::time::Instant::now());
        assert_eq!(view.blocking_call("clock", None), None);
        assert_eq!(view.blocking_use("clock", None, Capability::Clock), None);
        view.apply(
            Some(1),
            RevocationEntry {
                revocation: Revocation::Tool {
                    tool: "clock".into(),
                },
                at: "now".into(),
                reason: "test".into(),
            },
        );
        assert!(matches!(
            view.blocking_call("clock", None),
            Some(Blocked::Revoked(_))
        ));
        std::thread::sleep(bound * 2);
        assert!(unconfirmed(view.blocking_call("stats", None)), "stale");
        assert!(unconfirmed(view.blocking_use(
            "stats",
            None,
            Capability::Clock
        )));
    }
}

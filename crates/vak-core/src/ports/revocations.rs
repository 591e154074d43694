//! The revocation port: where revocations are recorded so that they outlive the process (a file
//! of this machine, or the shared store every node reads), and how a recording reports how far
//! it reached. The view that applies them to calls is the host's.

use super::store::StoreError;
use crate::types::Capability;
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

/// What is revoked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "scope", rename_all = "snake_case")]
pub enum Revocation {
    /// Every call of the tool.
    Tool { tool: String },
    /// One capability of one tool: calls still run, but the capability refuses.
    Capability {
        tool: String,
        capability: Capability,
    },
    /// Every call made on behalf of the principal.
    Principal { principal: String },
}

impl std::fmt::Display for Revocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Revocation::Tool { tool } => write!(f, "tool `{tool}`"),
            Revocation::Capability { tool, capability } => {
                write!(f, "capability `{}` of tool `{tool}`", capability.name())
            }
            Revocation::Principal { principal } => write!(f, "principal `{principal}`"),
        }
    }
}

/// A revocation with when and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RevocationEntry {
    #[serde(flatten)]
    pub revocation: Revocation,
    /// When it was recorded (RFC 3339, UTC).
    pub at: String,
    pub reason: String,
}

/// Why revocations could not be read or recorded.
#[derive(Debug, thiserror::Error)]
pub enum RevocationError {
    #[error("cannot read revocations from {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}, line {line}: not a revocation: {message}")]
    Parse {
        path: String,
        line: usize,
        message: String,
    },
    #[error("cannot record the revocation in {path}: {source}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot record the revocation: {0}")]
    Store(#[from] StoreError),
    /// Recorded and committed, but not every live node confirmed it within the bound.
    #[error(
        "{what} is revoked (committed at {committed_at}), but not confirmed by every live node \
         within {waited_ms} ms: {}", .nodes.join(", ")
    )]
    NotConfirmed {
        what: String,
        committed_at: String,
        waited_ms: u64,
        nodes: Vec<String>,
    },
}

/// Which nodes of a shared store confirmed a revocation before `Revocations::revoke` returned.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Confirmation {
    /// Nodes that applied it: every call they check from then on is refused.
    pub confirmed: Vec<String>,
    /// Nodes whose view lapsed (or that stopped) while it waited: they refuse every call until
    /// they have read it.
    pub lapsed: Vec<String>,
    /// Nodes still live that had not confirmed it when the bound passed.
    pub unconfirmed: Vec<String>,
    /// Why the wait ended early, if the store stopped answering.
    pub error: Option<String>,
    pub waited_ms: u64,
}

/// Where revocations are recorded.
pub trait RevocationLog: Send + Sync + std::fmt::Debug {
    /// Record `entry` durably (appended and synced, or committed where every node reads it);
    /// its id in a shared store, which every node applies once (`None`: recorded locally).
    fn record<'a>(
        &'a self,
        entry: &'a RevocationEntry,
    ) -> BoxFuture<'a, Result<Option<i64>, RevocationError>>;

    /// Wait until every node live now has applied the revocation recorded as `id`, or its view
    /// lapsed, or the bound passed: which nodes did what (`None`: one machine's store).
    fn barrier(&self, id: i64) -> BoxFuture<'_, Option<Confirmation>>;
}

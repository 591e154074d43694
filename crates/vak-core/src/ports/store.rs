//! How a store can fail: one error every port that reaches state outside the process (a journal,
//! a ledger, a revocation feed) answers with, so that the lifecycle can say what kind of fault it
//! was and whether a retry could help, whichever store is behind the port.

/// Why the store could not do what was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The database could not be reached, or did not answer in time. The call may succeed once
    /// it is back: a host transport fault, retryable.
    #[error("the shared store is unavailable ({what}): {message}")]
    Unavailable { what: &'static str, message: String },
    /// The database answered with an error vak did not expect (a damaged schema, a defect).
    #[error("the shared store refused {what}: {message}")]
    Database { what: &'static str, message: String },
    /// A write conflicted with one made at the same time (another process appending under
    /// this node's name); the writer reads the head again and retries.
    #[error("the shared store refused a conflicting {what}: {message}")]
    Conflict { what: &'static str, message: String },
    /// The store address cannot be used.
    #[error("the store address is not usable: {0}")]
    Config(String),
    /// Another live process holds this node's name: refused at start. Each running node needs
    /// a name of its own.
    #[error(
        "node `{node}` is held by another live process ({holder}): each running node needs its \
         own --node; the name is free once that process stops, or {lease_ms} ms after its last \
         heartbeat"
    )]
    NodeHeld {
        node: String,
        holder: String,
        lease_ms: u64,
    },
    /// This process no longer holds its node's name (another took it over after its lease
    /// lapsed): it admits nothing more, and commits nothing to the node's chain.
    #[error("{0}")]
    LeaseLost(String),
    /// The database was migrated by a newer vak.
    #[error(
        "the database's schema is at version {found}, newer than this vak knows ({known}): upgrade vak on this node"
    )]
    SchemaTooNew { found: i32, known: i32 },
}

impl StoreError {
    /// A stable snake_case name of the condition.
    pub fn kind(&self) -> &'static str {
        match self {
            StoreError::Unavailable { .. } => "store_unavailable",
            StoreError::Database { .. } => "store_failed",
            StoreError::Conflict { .. } => "store_conflict",
            StoreError::Config(_) => "store_config",
            StoreError::SchemaTooNew { .. } => "store_schema_too_new",
            StoreError::NodeHeld { .. } => "store_node_held",
            StoreError::LeaseLost(_) => "store_lease_lost",
        }
    }

    /// Whether the same call, retried unchanged, could succeed: only when the database was
    /// out of reach.
    pub fn retryable(&self) -> bool {
        matches!(self, StoreError::Unavailable { .. })
    }
}

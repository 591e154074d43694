//! The ledger port: where a session's budget totals are kept and reservations made. The budget
//! stage asks in figures ([`Ask`]); a ledger in this process and the shared store's ledgers
//! answer, each keeping the totals its own way.

use super::store::StoreError;
use crate::stage::{Stage, StageError};
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::time::{Duration, Instant};

/// What a session has used (or holds reserved).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    pub calls: u64,
    pub fuel: u64,
    pub wall_ms: u64,
    pub result_bytes: u64,
}

impl Totals {
    pub fn add(&mut self, o: &Totals) {
        self.calls += o.calls;
        self.fuel = self.fuel.saturating_add(o.fuel);
        self.wall_ms = self.wall_ms.saturating_add(o.wall_ms);
        self.result_bytes = self.result_bytes.saturating_add(o.result_bytes);
    }

    pub fn sub(&mut self, o: &Totals) {
        self.calls = self.calls.saturating_sub(o.calls);
        self.fuel = self.fuel.saturating_sub(o.fuel);
        self.wall_ms = self.wall_ms.saturating_sub(o.wall_ms);
        self.result_bytes = self.result_bytes.saturating_sub(o.result_bytes);
    }
}

/// What one call asks of its session's ledger.
#[derive(Debug, Clone)]
pub struct Ask<'a> {
    pub tool: &'a str,
    pub principal: Option<&'a str>,
    /// The caps on the session's totals (`None`: not capped).
    pub session: crate::types::SessionCaps,
    /// Calls of this tool one session may make.
    pub tool_calls: Option<u64>,
    /// What the call would be given: one call, its fuel, wall time and result bytes.
    pub wanted: Totals,
}

impl Ask<'_> {
    /// Whether any cap could refuse or lower this ask: without one, admission is certain and
    /// only the charge afterwards matters.
    pub fn capped(&self) -> bool {
        let s = &self.session;
        s.calls.is_some()
            || s.fuel.is_some()
            || s.wall_time_ms.is_some()
            || s.result_bytes.is_some()
            || self.tool_calls.is_some()
    }
}

/// A reservation made: what the call may use, and what the ledger holds for it (nothing, where
/// no cap applies and a shared ledger skips the round trip).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reserved {
    pub granted: Totals,
    pub held: Totals,
}

/// A call's charge to a shared ledger, committed in the same database statement as the call's
/// journal entry (one round trip for both): the reservation replaced by what was used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settlement {
    /// The ledger's key in the shared store (the session's principal and name).
    pub ledger: String,
    pub principal: Option<String>,
    /// What the reservation held (zero when nothing was reserved: an uncapped session).
    pub held: Totals,
    pub used: Totals,
}

/// Why the budget stage refused a call.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BudgetError {
    #[error("the session has made {used} of its {limit} calls")]
    SessionCalls { limit: u64, used: u64 },
    #[error("the session has made {used} of its {limit} calls of `{tool}`")]
    ToolCalls { tool: String, limit: u64, used: u64 },
    #[error(
        "the session's {resource} budget is spent: {used} used and {reserved} reserved of {limit}"
    )]
    SessionExhausted {
        resource: &'static str,
        limit: u64,
        used: u64,
        reserved: u64,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl StageError for BudgetError {
    fn stage(&self) -> Stage {
        Stage::Budget
    }

    fn kind(&self) -> &'static str {
        match self {
            BudgetError::SessionCalls { .. } => "session_calls_exhausted",
            BudgetError::ToolCalls { .. } => "tool_calls_exhausted",
            BudgetError::SessionExhausted { .. } => "session_budget_exhausted",
            BudgetError::Store(e) => e.kind(),
        }
    }

    fn retryable(&self) -> bool {
        matches!(self, BudgetError::Store(e) if e.retryable())
    }

    fn details(&self) -> serde_json::Value {
        match self {
            BudgetError::SessionCalls { limit, used } => json!({"limit": limit, "used": used}),
            BudgetError::ToolCalls { tool, limit, used } => {
                json!({"tool": tool, "limit": limit, "used": used})
            }
            BudgetError::SessionExhausted {
                resource,
                limit,
                used,
                reserved,
            } => json!({"resource": resource, "limit": limit, "used": used, "reserved": reserved}),
            BudgetError::Store(_) => serde_json::Value::Null,
        }
    }
}

/// One session's ledger. Admission is atomic: concurrent asks of one session (on any node of a
/// shared store) never overrun it.
pub trait LedgerPort: Send + Sync {
    /// Admit `ask` against the session's caps and reserve what it is granted (perhaps less than
    /// it wanted: what the session has left); waits until `deadline` at most.
    fn reserve<'a>(
        &'a self,
        ask: &'a Ask<'a>,
        deadline: Instant,
    ) -> BoxFuture<'a, Result<Reserved, BudgetError>>;

    /// What the session has used so far (settled calls).
    fn used(&self) -> BoxFuture<'_, Result<Totals, StoreError>>;

    /// The bound on a wait for this ledger (zero: it never waits).
    fn bound(&self) -> Duration;

    /// Replace the reservation `held` (of a call of `tool`) with what the call `used`: charged
    /// at once (`None`), or the charge to commit with the call's record.
    fn settle(&self, tool: &str, held: Totals, used: Totals) -> Option<Settlement>;

    /// Give back the reservation of a call refused once it was made (nothing ran): released at
    /// once and not counted (`None`), or a charge of nothing used, to commit with its record.
    fn unused(&self, tool: &str, held: Totals) -> Option<Settlement>;

    /// Release the reservation of a call that never ran (the call is not counted).
    fn release(&self, tool: &str, held: Totals);

    /// A reservation dropped without being settled (its call's future was dropped mid-call):
    /// charged in full.
    fn abandoned(&self, held: Totals);

    /// What the ledger is, for a `Debug` line.
    fn describe(&self) -> String;
}

//! Claims and budget: the limits a call runs under are the least of what the tool claims, what
//! the policy caps, what the engine can give, and what the session has left. Admission reserves
//! the admitted limits in the session's ledger, so concurrent calls of one session cannot overrun
//! it; after the call the reservation is replaced by what the call really used.
//!
//! The arithmetic is `arith`; the totals are kept behind the ledger port
//! (`vak_core::ports::ledger`): in this process ([`Ledger::memory`]), or in the shared store of
//! several nodes, which implements the port (the reservation is one conditional update in the
//! database, and the charge is committed with the call's journal entry).

mod arith;
mod memory;

pub use arith::{HOST_DEFAULTS, admit, engine_ceiling};
pub use vak_core::ports::ledger::{BudgetError, Settlement, Totals};

use crate::policy::SessionCaps;
use crate::record::{Limits, Usage};
use std::sync::Arc;
use vak_core::ports::ledger::{Ask, LedgerPort};
use vak_core::ports::store::StoreError;

/// What one call asks of its session's ledger.
#[derive(Debug, Clone)]
pub struct Claim<'a> {
    pub tool: &'a str,
    pub principal: Option<&'a str>,
    pub caps: &'a SessionCaps,
    pub calls_per_session: Option<u64>,
    pub limits: Limits,
}

impl Claim<'_> {
    /// The claim in the ledger port's figures.
    pub fn ask(&self) -> Ask<'_> {
        let c = self.caps;
        Ask {
            tool: self.tool,
            principal: self.principal,
            session: *c,
            tool_calls: self.calls_per_session,
            wanted: arith::held_for(&self.limits),
        }
    }

    /// Whether any cap could refuse or lower this claim: without one, admission is certain and
    /// only the charge afterwards matters.
    pub fn capped(&self) -> bool {
        self.ask().capped()
    }
}

/// One session's ledger: in this process, or in the shared store (where every node charges the
/// same row, atomically in the database).
#[derive(Clone)]
pub struct Ledger {
    port: Arc<dyn LedgerPort>,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Ledger({})", self.port.describe())
    }
}

impl Default for Ledger {
    fn default() -> Self {
        Ledger::memory()
    }
}

/// Limits reserved for one call; settled with what the call used (or, if the call is dropped
/// before it settles, charged in full).
#[derive(Debug)]
pub struct Reservation {
    ledger: Ledger,
    tool: String,
    held: Totals,
    settled: bool,
}

impl Ledger {
    /// A ledger kept in this process.
    pub fn memory() -> Ledger {
        Ledger::on(Arc::new(memory::MemoryLedger::default()))
    }

    /// A ledger kept behind `port` (the shared store's, for one).
    pub fn on(port: Arc<dyn LedgerPort>) -> Ledger {
        Ledger { port }
    }

    /// What the session has used so far (settled calls).
    pub async fn used(&self) -> Result<Totals, StoreError> {
        self.port.used().await
    }

    /// Admit `claim` against the session caps and reserve its limits; the limits may come back
    /// lower (what the session has left). Atomic: concurrent claims of one session (on any node
    /// of a shared store) never overrun it. A shared ledger waits up to the store's bound.
    pub async fn reserve(&self, claim: &Claim<'_>) -> Result<(Limits, Reservation), BudgetError> {
        let deadline = std::time::Instant::now() + self.port.bound();
        self.reserve_by(claim, deadline).await
    }

    /// [`Ledger::reserve`], waiting for a shared ledger until `deadline` at most (then a
    /// retryable `store_unavailable`).
    pub async fn reserve_by(
        &self,
        claim: &Claim<'_>,
        deadline: std::time::Instant,
    ) -> Result<(Limits, Reservation), BudgetError> {
        let ask = claim.ask();
        let reserved = self.port.reserve(&ask, deadline).await?;
        Ok((
            arith::limits_granted(&claim.limits, &reserved.granted),
            Reservation {
                ledger: self.clone(),
                tool: claim.tool.to_string(),
                held: reserved.held,
                settled: false,
            },
        ))
    }
}

impl Reservation {
    /// Replace the reservation with what the call used. A ledger in this process is charged at
    /// once; a shared one returns the charge, to be committed with the call's record.
    pub fn settle(mut self, usage: &Usage) -> Option<Settlement> {
        self.settled = true;
        self.ledger
            .port
            .settle(&self.tool, self.held, arith::charged(usage))
    }

    /// Give back the reservation of a call refused once it was made (its `started` entry could
    /// not be journaled: nothing ran). A ledger in this process is released at once and the call
    /// not counted; a shared one returns a charge of nothing used, to be committed with the
    /// call's record (which releases what the reservation holds).
    pub fn unused(mut self) -> Option<Settlement> {
        self.settled = true;
        self.ledger.port.unused(&self.tool, self.held)
    }

    /// Release the reservation of a call that never ran (its call is not counted).
    pub fn release(mut self) {
        self.settled = true;
        self.ledger.port.release(&self.tool, self.held);
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if !self.settled {
            self.ledger.port.abandoned(self.held);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stage::StageError;

    fn claim<'a>(tool: &'a str, caps: &'a SessionCaps, per_tool: Option<u64>) -> Claim<'a> {
        Claim {
            tool,
            principal: None,
            caps,
            calls_per_session: per_tool,
            limits: HOST_DEFAULTS,
        }
    }

    #[tokio::test]
    async fn a_session_admits_exactly_its_calls_and_charges_what_was_used() {
        let ledger = Ledger::default();
        let caps = SessionCaps {
            calls: Some(2),
            fuel: Some(1_000),
            ..SessionCaps::default()
        };
        let c = claim("t", &caps, None);
        let (l1, r1) = ledger.reserve(&c).await.unwrap();
        assert_eq!(l1.fuel, 1_000, "limited by what the session has left");
        // While the first holds its reservation, nothing is left for a second.
        let err = ledger.reserve(&c).await.unwrap_err();
        assert_eq!(err.kind(), "session_budget_exhausted");
        assert_eq!(
            r1.settle(&Usage {
                fuel: 300,
                ..Usage::default()
            }),
            None,
            "a ledger in memory is charged at once"
        );
        let (l2, r2) = ledger.reserve(&c).await.unwrap();
        assert_eq!(l2.fuel, 700);
        r2.settle(&Usage {
            fuel: 10,
            ..Usage::default()
        });
        let used = ledger.used().await.unwrap();
        assert_eq!((used.calls, used.fuel), (2, 310));
        assert_eq!(
            ledger.reserve(&c).await.unwrap_err(),
            BudgetError::SessionCalls { limit: 2, used: 2 }
        );
    }

    #[tokio::test]
    async fn per_tool_call_caps_and_dropped_reservations() {
        let ledger = Ledger::default();
        let caps = SessionCaps::default();
        let (_, r) = ledger.reserve(&claim("a", &caps, Some(1))).await.unwrap();
        drop(r);
        assert_eq!(
            ledger.used().await.unwrap().fuel,
            HOST_DEFAULTS.fuel,
            "a dropped call is charged in full"
        );
        assert_eq!(
            ledger
                .reserve(&claim("a", &caps, Some(1)))
                .await
                .unwrap_err()
                .kind(),
            "tool_calls_exhausted"
        );
        let (_, r) = ledger.reserve(&claim("b", &caps, Some(1))).await.unwrap();
        r.release();
        assert_eq!(ledger.used().await.unwrap().calls, 1);
    }
}

//! Claims and budget: the limits a call runs under are the least of what the tool claims, what
//! the policy caps, what the engine can give, and what the session has left. Admission reserves
//! the admitted limits in the session's ledger, so concurrent calls of one session cannot overrun
//! it; after the call the reservation is replaced by what the call really used.
//!
//! A ledger lives in this process ([`Ledger::memory`]) or in the shared store of several nodes
//! (`store::postgres`), where the reservation is one conditional update in the database and the
//! charge is committed with the call's journal entry.

use crate::admission::BudgetClaim;
use crate::policy::{Caps, SessionCaps};
use crate::record::{Limits, Usage};
use crate::stage::{Stage, StageError};
use serde::Serialize;
use serde_json::json;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// What the host grants when neither the tool nor the policy says anything.
pub const HOST_DEFAULTS: Limits = Limits {
    fuel: 500_000_000,
    memory_bytes: 64 << 20,
    wall_time_ms: 10_000,
    result_bytes: 1 << 20,
};

/// The most any call can be given, whatever a policy says.
pub fn engine_ceiling(max_memory_bytes: u64) -> Limits {
    Limits {
        fuel: u64::MAX,
        memory_bytes: max_memory_bytes,
        wall_time_ms: 15 * 60 * 1000,
        result_bytes: 64 << 20,
    }
}

/// The admitted limits of one call: min(claim, policy cap, ceiling); the cap falls back to the
/// host default where the policy sets none.
pub fn admit(claim: &BudgetClaim, caps: &Caps, ceiling: &Limits) -> Limits {
    let pick = |claimed: Option<u64>, cap: Option<u64>, default: u64, max: u64| {
        let cap = cap.unwrap_or(default).min(max);
        claimed.map_or(cap, |c| c.min(cap))
    };
    Limits {
        fuel: pick(claim.fuel, caps.fuel, HOST_DEFAULTS.fuel, ceiling.fuel),
        memory_bytes: pick(
            claim.memory_bytes,
            caps.memory_bytes,
            HOST_DEFAULTS.memory_bytes,
            ceiling.memory_bytes,
        ),
        wall_time_ms: pick(
            claim.wall_time_ms,
            caps.wall_time_ms,
            HOST_DEFAULTS.wall_time_ms,
            ceiling.wall_time_ms,
        ),
        result_bytes: pick(
            claim.result_bytes,
            caps.result_bytes,
            HOST_DEFAULTS.result_bytes,
            ceiling.result_bytes,
        ),
    }
}

/// What a session has used (or holds reserved).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Totals {
    pub calls: u64,
    pub fuel: u64,
    pub wall_ms: u64,
    pub result_bytes: u64,
}

impl Totals {
    /// What a reservation of one call with `limits` holds.
    pub(crate) fn held_for(limits: &Limits) -> Totals {
        Totals {
            calls: 1,
            fuel: limits.fuel,
            wall_ms: limits.wall_time_ms,
            result_bytes: limits.result_bytes,
        }
    }

    pub(crate) fn add(&mut self, o: &Totals) {
        self.calls += o.calls;
        self.fuel = self.fuel.saturating_add(o.fuel);
        self.wall_ms = self.wall_ms.saturating_add(o.wall_ms);
        self.result_bytes = self.result_bytes.saturating_add(o.result_bytes);
    }

    pub(crate) fn sub(&mut self, o: &Totals) {
        self.calls = self.calls.saturating_sub(o.calls);
        self.fuel = self.fuel.saturating_sub(o.fuel);
        self.wall_ms = self.wall_ms.saturating_sub(o.wall_ms);
        self.result_bytes = self.result_bytes.saturating_sub(o.result_bytes);
    }
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
    Store(#[from] crate::store::StoreError),
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

#[derive(Debug, Default)]
struct LedgerState {
    used: Totals,
    reserved: Totals,
    /// Calls per tool, reserved ones included.
    tool_calls: HashMap<String, u64>,
}

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
    /// Whether any cap could refuse or lower this claim: without one, admission is certain and
    /// only the charge afterwards matters.
    pub fn capped(&self) -> bool {
        let c = self.caps;
        c.calls.is_some()
            || c.fuel.is_some()
            || c.wall_time_ms.is_some()
            || c.result_bytes.is_some()
            || self.calls_per_session.is_some()
    }
}

/// One session's ledger: in this process, or in the shared store (where every node charges the
/// same row, atomically in the database).
#[derive(Clone)]
pub struct Ledger {
    kind: LedgerKind,
}

#[derive(Clone)]
enum LedgerKind {
    Memory(Arc<Mutex<LedgerState>>),
    Shared(crate::store::postgres::SharedLedger),
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            LedgerKind::Memory(_) => f.write_str("Ledger(memory)"),
            LedgerKind::Shared(s) => write!(f, "Ledger(shared {})", s.key),
        }
    }
}

impl Default for Ledger {
    fn default() -> Self {
        Ledger::memory()
    }
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

/// Limits reserved for one call; settled with what the call used (or, if the call is dropped
/// before it settles, charged in full).
#[derive(Debug)]
pub struct Reservation {
    ledger: Ledger,
    tool: String,
    held: Totals,
    settled: bool,
}

/// The admission arithmetic, on the figures of one ledger: the limits `claim` may have, or the
/// refusal. The shared store runs the same steps in the database (`vak_reserve`, tested by the
/// same suite).
fn admit_claim(st: &LedgerState, claim: &Claim<'_>) -> Result<(Limits, Totals), BudgetError> {
    let (caps, mut limits) = (claim.caps, claim.limits);
    let (used, reserved) = (st.used, st.reserved);
    if let Some(limit) = caps.calls
        && used.calls + reserved.calls >= limit
    {
        return Err(BudgetError::SessionCalls {
            limit,
            used: used.calls + reserved.calls,
        });
    }
    let tool_used = st.tool_calls.get(claim.tool).copied().unwrap_or(0);
    if let Some(limit) = claim.calls_per_session
        && tool_used >= limit
    {
        return Err(BudgetError::ToolCalls {
            tool: claim.tool.to_string(),
            limit,
            used: tool_used,
        });
    }
    let left = |resource: &'static str, limit: Option<u64>, used: u64, reserved: u64| match limit {
        None => Ok(u64::MAX),
        Some(limit) => match limit.checked_sub(used.saturating_add(reserved)) {
            Some(left) if left > 0 => Ok(left),
            _ => Err(BudgetError::SessionExhausted {
                resource,
                limit,
                used,
                reserved,
            }),
        },
    };
    limits.fuel = limits
        .fuel
        .min(left("fuel", caps.fuel, used.fuel, reserved.fuel)?);
    limits.wall_time_ms = limits.wall_time_ms.min(left(
        "wall_time_ms",
        caps.wall_time_ms,
        used.wall_ms,
        reserved.wall_ms,
    )?);
    limits.result_bytes = limits.result_bytes.min(left(
        "result_bytes",
        caps.result_bytes,
        used.result_bytes,
        reserved.result_bytes,
    )?);
    Ok((limits, Totals::held_for(&limits)))
}

impl Ledger {
    /// A ledger kept in this process.
    pub fn memory() -> Ledger {
        Ledger {
            kind: LedgerKind::Memory(Arc::default()),
        }
    }

    /// A ledger kept in the shared store.
    pub(crate) fn shared(ledger: crate::store::postgres::SharedLedger) -> Ledger {
        Ledger {
            kind: LedgerKind::Shared(ledger),
        }
    }

    fn lock(state: &Mutex<LedgerState>) -> std::sync::MutexGuard<'_, LedgerState> {
        state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What the session has used so far (settled calls).
    pub async fn used(&self) -> Result<Totals, crate::store::StoreError> {
        match &self.kind {
            LedgerKind::Memory(state) => Ok(Self::lock(state).used),
            LedgerKind::Shared(shared) => shared.used().await,
        }
    }

    /// Admit `claim` against the session caps and reserve its limits; the limits may come back
    /// lower (what the session has left). Atomic: concurrent claims of one session (on any node
    /// of a shared store) never overrun it. A shared ledger waits up to the store's bound.
    pub async fn reserve(&self, claim: &Claim<'_>) -> Result<(Limits, Reservation), BudgetError> {
        let bound = match &self.kind {
            LedgerKind::Memory(_) => std::time::Duration::ZERO,
            LedgerKind::Shared(shared) => shared.bound(),
        };
        self.reserve_by(claim, std::time::Instant::now() + bound)
            .await
    }

    /// [`Ledger::reserve`], waiting for a shared ledger until `deadline` at most (then a
    /// retryable `store_unavailable`).
    pub async fn reserve_by(
        &self,
        claim: &Claim<'_>,
        deadline: std::time::Instant,
    ) -> Result<(Limits, Reservation), BudgetError> {
        let (limits, held) = match &self.kind {
            LedgerKind::Memory(state) => {
                let mut st = Self::lock(state);
                let (limits, held) = admit_claim(&st, claim)?;
                st.reserved.add(&held);
                *st.tool_calls.entry(claim.tool.to_string()).or_insert(0) += 1;
                (limits, held)
            }
            // Nothing caps the call: no round trip, only the charge (with the record).
            LedgerKind::Shared(_) if !claim.capped() => (claim.limits, Totals::default()),
            LedgerKind::Shared(shared) => shared.reserve(claim, deadline).await?,
        };
        Ok((
            limits,
            Reservation {
                ledger: self.clone(),
                tool: claim.tool.to_string(),
                held,
                settled: false,
            },
        ))
    }
}

impl Reservation {
    /// Replace the reservation with what the call used. A ledger in this process is charged at
    /// once; a shared one returns the charge, to be committed with the call's record.
    pub fn settle(mut self, usage: &Usage) -> Option<Settlement> {
        let used = Totals {
            calls: 1,
            fuel: usage.fuel,
            wall_ms: usage.wall_ns.div_ceil(1_000_000),
            result_bytes: usage.result_bytes,
        };
        self.settled = true;
        match &self.ledger.kind {
            LedgerKind::Memory(state) => {
                let mut st = Ledger::lock(state);
                st.reserved.sub(&self.held);
                st.used.add(&used);
                None
            }
            LedgerKind::Shared(shared) => Some(Settlement {
                ledger: shared.key.clone(),
                principal: shared.principal.clone(),
                held: self.held,
                used,
            }),
        }
    }

    /// Give back the reservation of a call refused once it was made (its `started` entry could
    /// not be journaled: nothing ran). A ledger in this process is released at once and the call
    /// not counted; a shared one returns a charge of nothing used, to be committed with the
    /// call's record (which releases what the reservation holds).
    pub fn unused(mut self) -> Option<Settlement> {
        let shared = match &self.ledger.kind {
            LedgerKind::Memory(_) => None,
            LedgerKind::Shared(shared) => Some(Settlement {
                ledger: shared.key.clone(),
                principal: shared.principal.clone(),
                held: self.held,
                used: Totals::default(),
            }),
        };
        match shared {
            None => {
                self.release();
                None
            }
            Some(settlement) => {
                self.settled = true;
                Some(settlement)
            }
        }
    }

    /// Release the reservation of a call that never ran (its call is not counted).
    pub fn release(mut self) {
        if let LedgerKind::Memory(state) = &self.ledger.kind {
            let mut st = Ledger::lock(state);
            st.reserved.sub(&self.held);
            if let Some(n) = st.tool_calls.get_mut(&self.tool) {
                *n = n.saturating_sub(1);
            }
        }
        self.settled = true;
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        match &self.ledger.kind {
            // The call's future was dropped mid-call: charge everything it could have used.
            LedgerKind::Memory(state) => {
                let mut st = Ledger::lock(state);
                st.reserved.sub(&self.held);
                st.used.add(&self.held);
            }
            // The reservation stays held in the database: charged in full, as above.
            LedgerKind::Shared(shared) => tracing::warn!(
                session = %shared.key,
                "a call ended without settling: its reservation stays charged in full"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn the_least_of_claim_cap_and_ceiling_wins() {
        let ceiling = engine_ceiling(128 << 20);
        let claim = BudgetClaim {
            fuel: Some(1_000),
            memory_bytes: Some(1 << 30),
            wall_time_ms: None,
            result_bytes: None,
        };
        let caps = Caps {
            fuel: Some(5_000),
            memory_bytes: Some(256 << 20),
            wall_time_ms: Some(2_000),
            result_bytes: None,
            calls_per_session: None,
        };
        let l = admit(&claim, &caps, &ceiling);
        assert_eq!(l.fuel, 1_000, "claim below cap");
        assert_eq!(l.memory_bytes, 128 << 20, "ceiling below claim and cap");
        assert_eq!(l.wall_time_ms, 2_000, "no claim: the cap");
        assert_eq!(
            l.result_bytes, HOST_DEFAULTS.result_bytes,
            "neither: host default"
        );
    }
}

//! Claims and budget: the limits a call runs under are the least of what the tool claims, what
//! the policy caps, what the engine can give, and what the session has left. Admission reserves
//! the admitted limits in the session's ledger, so concurrent calls of one session cannot overrun
//! it; after the call the reservation is replaced by what the call really used.

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
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    pub calls: u64,
    pub fuel: u64,
    pub wall_ms: u64,
    pub result_bytes: u64,
}

impl Totals {
    fn add(&mut self, o: &Totals) {
        self.calls += o.calls;
        self.fuel = self.fuel.saturating_add(o.fuel);
        self.wall_ms = self.wall_ms.saturating_add(o.wall_ms);
        self.result_bytes = self.result_bytes.saturating_add(o.result_bytes);
    }

    fn sub(&mut self, o: &Totals) {
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
        }
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

/// One session's ledger.
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    state: Arc<Mutex<LedgerState>>,
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
    fn lock(&self) -> std::sync::MutexGuard<'_, LedgerState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What the session has used so far (settled calls).
    pub fn used(&self) -> Totals {
        self.lock().used
    }

    /// Admit `limits` for a call of `tool` against the session caps and reserve them; the limits
    /// may come back lower (what the session has left).
    pub fn reserve(
        &self,
        tool: &str,
        caps: &SessionCaps,
        calls_per_session: Option<u64>,
        mut limits: Limits,
    ) -> Result<(Limits, Reservation), BudgetError> {
        let mut st = self.lock();
        let (used, reserved) = (st.used, st.reserved);
        if let Some(limit) = caps.calls
            && used.calls + reserved.calls >= limit
        {
            return Err(BudgetError::SessionCalls {
                limit,
                used: used.calls + reserved.calls,
            });
        }
        let tool_used = st.tool_calls.get(tool).copied().unwrap_or(0);
        if let Some(limit) = calls_per_session
            && tool_used >= limit
        {
            return Err(BudgetError::ToolCalls {
                tool: tool.to_string(),
                limit,
                used: tool_used,
            });
        }
        let left =
            |resource: &'static str, limit: Option<u64>, used: u64, reserved: u64| match limit {
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
        let held = Totals {
            calls: 1,
            fuel: limits.fuel,
            wall_ms: limits.wall_time_ms,
            result_bytes: limits.result_bytes,
        };
        st.reserved.add(&held);
        *st.tool_calls.entry(tool.to_string()).or_insert(0) += 1;
        Ok((
            limits,
            Reservation {
                ledger: self.clone(),
                tool: tool.to_string(),
                held,
                settled: false,
            },
        ))
    }
}

impl Reservation {
    /// Replace the reservation with what the call used.
    pub fn settle(mut self, usage: &Usage) {
        let used = Totals {
            calls: 1,
            fuel: usage.fuel,
            wall_ms: usage.wall_ns.div_ceil(1_000_000),
            result_bytes: usage.result_bytes,
        };
        self.finish(used);
    }

    /// Release the reservation of a call that never ran (its call is not counted).
    pub fn release(mut self) {
        let mut st = self.ledger.lock();
        st.reserved.sub(&self.held);
        if let Some(n) = st.tool_calls.get_mut(&self.tool) {
            *n = n.saturating_sub(1);
        }
        self.settled = true;
    }

    fn finish(&mut self, used: Totals) {
        let mut st = self.ledger.lock();
        st.reserved.sub(&self.held);
        st.used.add(&used);
        self.settled = true;
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if !self.settled {
            // The call's future was dropped mid-call: charge everything it could have used.
            let held = self.held;
            self.finish(held);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_admits_exactly_its_calls_and_charges_what_was_used() {
        let ledger = Ledger::default();
        let caps = SessionCaps {
            calls: Some(2),
            fuel: Some(1_000),
            ..SessionCaps::default()
        };
        let limits = HOST_DEFAULTS;
        let (l1, r1) = ledger.reserve("t", &caps, None, limits).unwrap();
        assert_eq!(l1.fuel, 1_000, "limited by what the session has left");
        // While the first holds its reservation, nothing is left for a second.
        let err = ledger.reserve("t", &caps, None, limits).unwrap_err();
        assert_eq!(err.kind(), "session_budget_exhausted");
        r1.settle(&Usage {
            fuel: 300,
            ..Usage::default()
        });
        let (l2, r2) = ledger.reserve("t", &caps, None, limits).unwrap();
        assert_eq!(l2.fuel, 700);
        r2.settle(&Usage {
            fuel: 10,
            ..Usage::default()
        });
        assert_eq!(ledger.used().calls, 2);
        assert_eq!(ledger.used().fuel, 310);
        assert_eq!(
            ledger.reserve("t", &caps, None, limits).unwrap_err(),
            BudgetError::SessionCalls { limit: 2, used: 2 }
        );
    }

    #[test]
    fn per_tool_call_caps_and_dropped_reservations() {
        let ledger = Ledger::default();
        let caps = SessionCaps::default();
        let (_, r) = ledger.reserve("a", &caps, Some(1), HOST_DEFAULTS).unwrap();
        drop(r);
        assert_eq!(
            ledger.used().fuel,
            HOST_DEFAULTS.fuel,
            "a dropped call is charged in full"
        );
        assert_eq!(
            ledger
                .reserve("a", &caps, Some(1), HOST_DEFAULTS)
                .unwrap_err()
                .kind(),
            "tool_calls_exhausted"
        );
        let (_, r) = ledger.reserve("b", &caps, Some(1), HOST_DEFAULTS).unwrap();
        r.release();
        assert_eq!(ledger.used().calls, 1);
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

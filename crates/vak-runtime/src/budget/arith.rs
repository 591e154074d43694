//! The budget's arithmetic: the limits a call is admitted under, and what a session's ledger
//! admits on its figures. Pure; it stays here only because its inputs (the policy's caps, the
//! tool's claim, the record's limits and usage) are host types still: [`admit_ask`] already
//! speaks only the ledger port's figures and can move to vak-core as it is.

use crate::admission::BudgetClaim;
use crate::policy::Caps;
use crate::record::{Limits, Usage};
use vak_core::ports::ledger::{Ask, BudgetError, Totals};

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

/// What a reservation of one call with `limits` holds.
pub fn held_for(limits: &Limits) -> Totals {
    Totals {
        calls: 1,
        fuel: limits.fuel,
        wall_ms: limits.wall_time_ms,
        result_bytes: limits.result_bytes,
    }
}

/// `limits`, lowered to what a ledger `granted` (memory is not a session total: it stays).
pub fn limits_granted(limits: &Limits, granted: &Totals) -> Limits {
    Limits {
        fuel: granted.fuel,
        wall_time_ms: granted.wall_ms,
        result_bytes: granted.result_bytes,
        memory_bytes: limits.memory_bytes,
    }
}

/// What a call that used `usage` is charged.
pub fn charged(usage: &Usage) -> Totals {
    Totals {
        calls: 1,
        fuel: usage.fuel,
        wall_ms: usage.wall_ns.div_ceil(1_000_000),
        result_bytes: usage.result_bytes,
    }
}

/// The admission arithmetic, on the figures of one ledger (`used`, `reserved`, and the calls of
/// the ask's tool so far): what `ask` is granted, or the refusal. The shared store runs the same
/// steps in the database (`vak_reserve`, tested by the same suite).
pub fn admit_ask(
    used: Totals,
    reserved: Totals,
    tool_used: u64,
    ask: &Ask<'_>,
) -> Result<Totals, BudgetError> {
    let (caps, mut granted) = (&ask.session, ask.wanted);
    if let Some(limit) = caps.calls
        && used.calls + reserved.calls >= limit
    {
        return Err(BudgetError::SessionCalls {
            limit,
            used: used.calls + reserved.calls,
        });
    }
    if let Some(limit) = ask.tool_calls
        && tool_used >= limit
    {
        return Err(BudgetError::ToolCalls {
            tool: ask.tool.to_string(),
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
    granted.fuel = granted
        .fuel
        .min(left("fuel", caps.fuel, used.fuel, reserved.fuel)?);
    granted.wall_ms = granted.wall_ms.min(left(
        "wall_time_ms",
        caps.wall_time_ms,
        used.wall_ms,
        reserved.wall_ms,
    )?);
    granted.result_bytes = granted.result_bytes.min(left(
        "result_bytes",
        caps.result_bytes,
        used.result_bytes,
        reserved.result_bytes,
    )?);
    granted.calls = 1;
    Ok(granted)
}

#[cfg(test)]
mod tests {
    use super::*;

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

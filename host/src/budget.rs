//! Claims and budget: the limits a call runs under are the least of what the tool claims, what
//! the policy caps, and what the engine can give. (Session ledgers extend this with what the
//! session has left.)

use crate::admission::BudgetClaim;
use crate::policy::Caps;
use crate::record::Limits;

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

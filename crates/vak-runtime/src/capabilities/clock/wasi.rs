//! `wasi:clocks/wall-clock` for foreign components (built for other hosts): the real time when
//! the tool's grant includes `clock`, each reading witnessed by a receipt; without the grant the
//! frozen clock every tool has (the Unix epoch). vak's own tools read calendar time through
//! `vak:tool/clock` instead, in an explicit zone. Once `clock` is revoked the clock reads frozen
//! again, from the next reading of a call already running (the first refused readings are on
//! record).

use crate::capabilities::{Broker, Capability};
use serde_json::json;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// Readings of one call that leave a receipt each. A language runtime may read the clock many
/// times (each `Date.now()`); past this the clock still reads true but is not witnessed again,
/// so that it cannot use up the receipts the call's other effects need.
pub const RECEIPTED_READINGS: u32 = 16;

/// The real wall clock, witnessed.
pub struct WitnessedWallClock {
    /// The call's broker (shared): where receipts go, and whether `clock` still holds.
    broker: Broker,
    readings: AtomicU32,
}

impl WitnessedWallClock {
    pub(crate) fn new(broker: Broker) -> WitnessedWallClock {
        WitnessedWallClock {
            broker,
            readings: AtomicU32::new(0),
        }
    }
}

impl wasmtime_wasi::HostWallClock for WitnessedWallClock {
    fn resolution(&self) -> Duration {
        Duration::from_nanos(1)
    }

    fn now(&self) -> Duration {
        let n = self.readings.fetch_add(1, Ordering::Relaxed);
        if let Err(e) = self.broker.authorize(Capability::Clock) {
            if n < RECEIPTED_READINGS {
                self.broker.refused(
                    Capability::Clock,
                    "wasi:clocks/wall-clock.now",
                    json!({ "reading": n + 1 }),
                    e,
                );
            }
            return Duration::ZERO;
        }
        let now = jiff::Timestamp::now();
        let since_epoch = Duration::new(
            u64::try_from(now.as_second()).unwrap_or(0),
            now.subsec_nanosecond().unsigned_abs(),
        );
        if n < RECEIPTED_READINGS {
            self.broker.receipts.issue(
                Capability::Clock,
                "wasi:clocks/wall-clock.now",
                json!({ "reading": n + 1 }),
                json!({
                    "instant": now.to_string(),
                    "unix_seconds": now.as_second(),
                    "nanos": now.subsec_nanosecond(),
                }),
                true,
                None,
            );
        }
        since_epoch
    }
}

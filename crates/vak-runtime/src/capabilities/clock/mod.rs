//! `vak:tool/clock`: the current instant in an explicit IANA zone. There is no default zone.
//!
//! The zone must be one the policy grants this tool (`zones = ["*"]` grants any; see [`grant`]).
//! Every request, refused or not, leaves a receipt: a reading records the instant, the offset
//! and the zone.

pub mod grant;
pub mod wasi;

use super::{Broker, Capability, CapabilityBroker, HasBroker};
use crate::bindings::vak::tool::clock::{Host, Reading, add_to_linker};
use crate::bindings::vak::tool::types::CapabilityError;
use serde_json::json;
use wasmtime::component::{HasSelf, Linker};

/// The `clock` broker.
pub struct Clock;

impl<T: HasBroker> CapabilityBroker<T> for Clock {
    fn link(&self, linker: &mut Linker<T>) -> wasmtime::Result<()> {
        add_to_linker::<T, HasSelf<Broker>>(linker, T::broker)
    }
}

/// Longest zone name accepted (the longest IANA name is 32 bytes).
const MAX_ZONE_LEN: usize = 64;

/// Whether `zone` has the shape of an IANA name. Checked before any lookup, so a guest string
/// never reaches the time zone database as anything but a plain name.
fn well_formed(zone: &str) -> bool {
    !zone.is_empty()
        && zone.len() <= MAX_ZONE_LEN
        && !zone.starts_with('/')
        && !zone
            .split('/')
            .any(|part| part.is_empty() || part == "." || part == "..")
        && zone
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'_' | b'-' | b'+'))
}

impl Broker {
    fn clock_now(&self, zone: &str) -> Result<Reading, CapabilityError> {
        let grant = self.authorize(Capability::Clock)?;
        if !grant.clock_zone_allowed(zone) {
            return Err(CapabilityError::Denied(format!(
                "the zone {zone:?} is outside the zones granted to this tool"
            )));
        }
        if !well_formed(zone) {
            return Err(CapabilityError::Invalid(format!(
                "{zone:?} is not an IANA time zone name"
            )));
        }
        let tz = jiff::tz::TimeZone::get(zone)
            .map_err(|e| CapabilityError::Invalid(format!("unknown time zone {zone:?}: {e}")))?;
        let now = jiff::Timestamp::now();
        let zoned = now.to_zoned_datetime(tz);
        let offset = zoned.offset().seconds();
        Ok(Reading {
            rfc3339: zoned.to_string(),
            unix_seconds: now.as_second(),
            nanos: now.subsec_nanosecond().unsigned_abs(),
            offset_seconds: offset,
            zone: zone.to_string(),
            receipt: String::new(),
        })
    }
}

impl Host for Broker {
    async fn now(&mut self, zone: String) -> Result<Reading, CapabilityError> {
        if let Some(e) = self.out_of_receipts() {
            return Err(e);
        }
        let request = json!({ "zone": zone });
        match self.clock_now(&zone) {
            Ok(mut reading) => {
                let outcome = json!({
                    "instant": reading.rfc3339,
                    "unix_seconds": reading.unix_seconds,
                    "nanos": reading.nanos,
                    "offset_seconds": reading.offset_seconds,
                    "zone": reading.zone,
                });
                reading.receipt =
                    self.receipts
                        .issue(Capability::Clock, "now", request, outcome, true, None);
                Ok(reading)
            }
            Err(e) => Err(self.refused(Capability::Clock, "now", request, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::well_formed;

    #[test]
    fn zone_names_are_plain_names() {
        for ok in [
            "Europe/Paris",
            "UTC",
            "America/Argentina/Buenos_Aires",
            "Etc/GMT+5",
        ] {
            assert!(well_formed(ok), "{ok}");
        }
        for bad in [
            "",
            "/etc/passwd",
            "../../etc/passwd",
            "Europe/../UTC",
            "Europe//Paris",
            "a b",
        ] {
            assert!(!well_formed(bad), "{bad}");
        }
    }
}

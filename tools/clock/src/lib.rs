//! `clock`: the current instant in an explicit IANA time zone.
//!
//! The zone is required and never assumed: a missing zone is refused by the schema before the call
//! reaches the tool, and an unknown one comes back as the tool error `unknown-zone`. The reading is
//! the host's, so the result cites the host receipt as observed evidence.

use vak_guest::prelude::*;

/// Arguments of `clock`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// IANA time zone name, e.g. `Europe/Paris` or `America/New_York`. There is no default.
    pub zone: String,
}

/// The `vak.temporal.instant/1` payload.
#[derive(Serialize)]
pub struct Instant {
    /// RFC 3339 instant with offset and zone annotation.
    pub instant: String,
    pub unix_seconds: i64,
    pub offset_seconds: i32,
    pub zone: String,
    /// When the host observed it (the same reading: the host's clock is the source).
    pub observed_at: String,
    /// The freshness contract: how long the reading may be presented as "now".
    pub max_age_seconds: u64,
}

pub struct Clock;

impl Tool for Clock {
    type Args = Args;
    const NAME: &'static str = "clock";
    const DESCRIPTION: &'static str =
        "The current date and time in an explicit IANA time zone (no default zone is assumed).";

    fn claims() -> Claims {
        Claims::new().clock(["*"]).fuel(20_000_000)
    }

    fn payload_schemas() -> Vec<String> {
        vec!["vak.temporal.instant/1".to_string()]
    }

    fn call(args: Args) -> Result<Output, ToolError> {
        let zone = args.zone.trim();
        if zone.is_empty() {
            return Err(ToolError::new(
                "missing-zone",
                "a time zone is required, e.g. \"Europe/Paris\"; none is assumed",
            ));
        }
        let reading = clock::now(zone).map_err(|e| match e {
            CapabilityError::Invalid(_) => ToolError::new(
                "unknown-zone",
                format!(
                    "{zone:?} is not a known IANA time zone; name one such as \"Europe/Paris\""
                ),
            ),
            other => ToolError::new("clock-unavailable", other.to_string()),
        })?;
        let payload = Instant {
            instant: reading.rfc3339.clone(),
            unix_seconds: reading.unix_seconds,
            offset_seconds: reading.offset_seconds,
            zone: reading.zone.clone(),
            observed_at: reading.rfc3339.clone(),
            max_age_seconds: 60,
        };
        let hours = reading.offset_seconds / 3600;
        let minutes = (reading.offset_seconds.abs() % 3600) / 60;
        Output::markdown(format!(
            "It is **{}** in {} (UTC{:+03}:{:02}).",
            reading.rfc3339, reading.zone, hours, minutes
        ))
        .with_payload("vak.temporal.instant/1", &payload)
        .map(|o| {
            o.with_evidence(
                Evidence::observed("reading", &reading.receipt)
                    .supports("/instant")
                    .supports("/unix_seconds")
                    .supports("/offset_seconds")
                    .supports("/zone")
                    .supports("/observed_at")
                    .note("host clock reading"),
            )
        })
    }
}

vak_guest::export_tool!(Clock);

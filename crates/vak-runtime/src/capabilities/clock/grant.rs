//! The `clock` section of a tool's policy: the IANA zones it may read (`["*"]` for any).

use crate::capabilities::grant::{Effects, GrantedScope, Scope, ToolGrant, same_as};
use crate::capabilities::{Capability, SectionError};
use serde::Deserialize;

/// The policy section, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClockGrantFile {
    zones: Vec<String>,
}

/// Zones a `clock` grant covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ZoneScope {
    Any,
    Only(Vec<String>),
}

impl ZoneScope {
    /// Whether the grant covers reading the clock in `zone`.
    pub fn allows(&self, zone: &str) -> bool {
        match self {
            ZoneScope::Any => true,
            ZoneScope::Only(zones) => zones.iter().any(|z| z == zone),
        }
    }

    /// Whether the grant covers a claim of `claimed` zones; `Err` says which are outside.
    pub fn covers(&self, claimed: &[String]) -> Result<(), String> {
        let ZoneScope::Only(zones) = self else {
            return Ok(());
        };
        let outside: Vec<&str> = claimed
            .iter()
            .filter(|s| !zones.contains(s))
            .map(String::as_str)
            .collect();
        if outside.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "`clock` is claimed for {outside:?} but granted only for {zones:?}"
            ))
        }
    }
}

impl super::super::GrantSection for super::Clock {
    fn capability(&self) -> Capability {
        Capability::Clock
    }

    fn compile(&self, _tool: &str, section: toml::Value) -> Result<Scope, SectionError> {
        compile(super::super::section(section)?)
            .map(Scope::new)
            .map_err(SectionError::Scope)
    }
}

impl GrantedScope for ZoneScope {
    fn covers(&self, claimed: &[String]) -> Result<(), String> {
        ZoneScope::covers(self, claimed)
    }

    fn describe(&self) -> String {
        match self {
            ZoneScope::Any => "any IANA zone".to_string(),
            ZoneScope::Only(z) => format!("zones {}", z.join(", ")),
        }
    }

    fn effects(&self) -> Effects {
        Effects::default()
    }

    fn same(&self, other: &dyn GrantedScope) -> bool {
        same_as(self, other)
    }
}

impl ToolGrant {
    /// Whether the grant covers reading the clock in `zone`.
    pub fn clock_zone_allowed(&self, zone: &str) -> bool {
        self.scope::<ZoneScope>(Capability::Clock)
            .is_some_and(|z| z.allows(zone))
    }
}

/// The section compiled: every zone a known IANA zone, or any zone.
pub fn compile(file: ClockGrantFile) -> Result<ZoneScope, String> {
    let zones = file.zones;
    if zones.is_empty() {
        return Err("`clock.zones` is empty; list zones or use [\"*\"] for any zone".into());
    }
    if zones.iter().any(|z| z == "*") {
        return Ok(ZoneScope::Any);
    }
    for zone in &zones {
        if jiff::tz::TimeZone::get(zone).is_err() {
            return Err(format!(
                "`clock.zones` names {zone:?}, which is not a known IANA zone"
            ));
        }
    }
    Ok(ZoneScope::Only(zones))
}

#[cfg(test)]
mod tests {
    use crate::capabilities::Capability;
    use crate::policy::Policy;

    #[test]
    fn zone_scopes_are_checked() {
        let err = Policy::parse(
            "[tools.c]\ncapabilities.clock = { zones = [\"Mars/Olympus\"] }\n",
            "t",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("Mars/Olympus"), "{err}");
        let p = Policy::parse(
            "[tools.c]\ncapabilities.clock = { zones = [\"Europe/Paris\"] }\n",
            "t",
        )
        .unwrap();
        let g = p.grant("c").unwrap();
        assert!(g.clock_zone_allowed("Europe/Paris"));
        assert!(!g.clock_zone_allowed("Asia/Tokyo"));
        assert!(
            g.covers(Capability::Clock, &["Europe/Paris".into()])
                .is_ok()
        );
        assert!(g.covers(Capability::Clock, &["*".into()]).is_err());
    }
}

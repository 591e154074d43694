//! Brokered capabilities: vak's own narrow WIT interfaces, one folder each.
//!
//! A folder holds everything about its capability: the grant compiler for its policy section
//! (`grant`), how it is linked and admitted (its [`CapabilityBroker`]), its per-call state and
//! the `Host` impl that serves the guest's requests on the call's [`Broker`], and its tests.
//! A capability is linked into a tool's instance only when the policy grants it. Every effect
//! leaves a [`Receipt`] in the call's [`ReceiptSink`] (see [`receipts`]); the sink is shared with
//! the call record so that receipts survive a trap, a timeout or a tool error later in the call.

pub mod call;
mod claims;
pub mod client;
pub mod clock;
pub mod environment;
pub mod grant;
pub mod http;
pub mod invoke;
pub mod log;
pub mod receipts;
pub mod workspace;

pub use call::Broker;
pub use receipts::{MAX_RECEIPTS_PER_CALL, ReceiptSink};
pub use vak_core::types::{Capability, Receipt};

pub use grant::{Effects, GrantedScope, Scope, ToolGrant};
use wasmtime::component::Linker;

/// Store data that holds a call's [`Broker`]: what a capability's interface is linked against.
pub trait HasBroker: Send + 'static {
    fn broker(&mut self) -> &mut Broker;
}

/// A capability's section of the policy: the grant compiler its folder provides. The policy
/// hands each `capabilities.<name>` section to the compiler of that name, so the policy
/// document names no capability.
pub trait GrantSection: Sync {
    /// The capability: its WIT interface and its policy section carry its name.
    fn capability(&self) -> Capability;

    /// Compile the section as written for `tool`; `Err` says what is wrong with it.
    fn compile(&self, tool: &str, section: toml::Value) -> Result<Scope, SectionError>;
}

/// Why a policy section was not compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SectionError {
    /// Not the section's shape: an unknown field, a value of the wrong type (a mistake on the
    /// section's own line).
    Shape(String),
    /// Well formed, but not a scope the broker grants (an unknown zone, an origin that is not
    /// http, overlapping roots).
    Scope(String),
}

/// One capability broker, in the three phases of its life:
/// - link, once per engine and grant set: its WIT interface is added to the linker;
/// - admit, once per tool and grant: its policy section is compiled ([`GrantSection`]) and a
///   tool's claim of scopes is checked against the compiled scope ([`ToolGrant::covers`]);
/// - instantiate, per call: the call's [`Broker`] carries the capability's per-call state, and
///   the folder's `Host` impl on it serves the guest's requests, each with a receipt.
pub trait CapabilityBroker<T: HasBroker>: GrantSection {
    /// Add the capability's interface to `linker`.
    fn link(&self, linker: &mut Linker<T>) -> wasmtime::Result<()>;
}

/// Every capability broker. Adding a capability is its folder, its WIT file, its name in
/// [`Capability`] (the record's vocabulary) and a line here.
pub fn brokers<T: HasBroker>() -> [&'static dyn CapabilityBroker<T>; 6] {
    [
        &clock::Clock,
        &http::Http,
        &workspace::Workspace,
        &invoke::Invoke,
        &log::Log,
        &client::Client,
    ]
}

/// Every capability's grant compiler: [`brokers`], before any store type is chosen.
pub fn grant_sections() -> impl Iterator<Item = &'static dyn GrantSection> {
    /// A store type only to name the list; nothing is linked with it.
    struct Unlinked(Broker);
    impl HasBroker for Unlinked {
        fn broker(&mut self) -> &mut Broker {
            &mut self.0
        }
    }
    brokers::<Unlinked>()
        .into_iter()
        .map(|b| b as &'static dyn GrantSection)
}

/// Deserialize a policy section as its folder's file type (unknown fields are refused by the
/// type), with serde's message.
pub(crate) fn section<F: serde::de::DeserializeOwned>(
    section: toml::Value,
) -> Result<F, SectionError> {
    F::deserialize(section).map_err(|e| SectionError::Shape(e.to_string().trim_end().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Data(Broker);

    impl HasBroker for Data {
        fn broker(&mut self) -> &mut Broker {
            &mut self.0
        }
    }

    #[test]
    fn every_capability_has_one_broker() {
        let listed: Vec<Capability> = brokers::<Data>().iter().map(|b| b.capability()).collect();
        assert_eq!(listed, Capability::ALL);
        let sections: Vec<Capability> = grant_sections().map(|b| b.capability()).collect();
        assert_eq!(sections, Capability::ALL);
    }
}

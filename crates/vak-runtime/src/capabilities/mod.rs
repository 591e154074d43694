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

pub use grant::ToolGrant;
use wasmtime::component::Linker;

/// Store data that holds a call's [`Broker`]: what a capability's interface is linked against.
pub trait HasBroker: Send + 'static {
    fn broker(&mut self) -> &mut Broker;
}

/// One capability broker, in the three phases of its life:
/// - link, once per engine and grant set: its WIT interface is added to the linker;
/// - admit, once per tool and grant: a tool's claim of scopes is checked against the grant;
/// - instantiate, per call: the call's [`Broker`] carries the capability's per-call state, and
///   the folder's `Host` impl on it serves the guest's requests, each with a receipt.
pub trait CapabilityBroker<T: HasBroker>: Sync {
    /// The capability: its WIT interface and its policy section carry its name.
    fn capability(&self) -> Capability;

    /// Add the capability's interface to `linker`.
    fn link(&self, linker: &mut Linker<T>) -> wasmtime::Result<()>;

    /// Whether `grant` covers a claim of this capability with `scopes`; `Err` says what is
    /// missing.
    fn admit(&self, grant: &ToolGrant, scopes: &[String]) -> Result<(), String> {
        grant.covers(self.capability(), scopes)
    }
}

/// Every capability broker. Adding a capability is its folder, its WIT file, and a line here.
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
    }
}

//! `vak:tool/http`: fetch from the origins the policy allows, with the host as the only one who
//! resolves names and opens connections.
//!
//! Egress rules, each hop of a redirect chain checked as a new request:
//! - the URL's scheme, host, port and path prefix must match an origin of the grant;
//! - the host resolves the name itself and refuses the request if any address is internal
//!   (loopback, private, link-local, unique-local, CGNAT, unspecified, multicast, documentation,
//!   IPv4-mapped or -embedded forms of those) unless the policy names that exact address; it then
//!   connects to the address it checked, never resolving again;
//! - the guest cannot set `Host` (or other framing headers); credentials-like headers are dropped
//!   on a hop to another origin;
//! - the body and the time are capped; the call's own deadline also applies.
//!
//! Every hop leaves a receipt (refusals too); the final one's digest is the SHA-256 of the body.
//!
//! The folder, in the order a fetch goes: [`grant`] (the policy section), `request` (what is
//! checked before anything is sent), `address` (where a request may connect), `connect` (one
//! hop on the wire), `response` (no credential value back to the guest), [`coding`] (content
//! codings undone for that check), `fetch` (the redirect chain and its receipts).

mod address;
pub mod coding;
mod connect;
pub mod credentials;
mod fetch;
pub mod grant;
mod request;
mod response;
pub mod wasi;

pub use address::internal;
pub use request::{CREDENTIAL_HEADER, MAX_REDIRECTS, validate};

use super::{Broker, Capability, CapabilityBroker, HasBroker};
use crate::bindings::vak::tool::http::{CredentialInfo, Host, Request, Response, add_to_linker};
use crate::bindings::vak::tool::types::CapabilityError;
use grant::HttpScope;
use wasmtime::component::{HasSelf, Linker};

/// The `http` broker.
pub struct Http;

impl<T: HasBroker> CapabilityBroker<T> for Http {
    fn link(&self, linker: &mut Linker<T>) -> wasmtime::Result<()> {
        add_to_linker::<T, HasSelf<Broker>>(linker, T::broker)
    }
}

impl Broker {
    fn http_scope(&self) -> Result<HttpScope, CapabilityError> {
        let grant = self.authorize(Capability::Http)?;
        grant
            .http()
            .cloned()
            .ok_or_else(|| CapabilityError::Denied("no http scope is granted".into()))
    }
}

impl Host for Broker {
    /// What the grant says about `alias`: never the value. Not an effect, so no receipt; it
    /// reveals nothing the tool's own policy does not already give it.
    async fn credential(
        &mut self,
        alias: String,
    ) -> Result<Option<CredentialInfo>, CapabilityError> {
        let scope = self.http_scope()?;
        let Some(credential) = scope.credentials.get(alias.trim()) else {
            return Ok(None);
        };
        Ok(Some(CredentialInfo {
            alias: credential.alias.clone(),
            audience: credential.audience.iter().map(|o| o.text.clone()).collect(),
            held: self.secret_value(credential).is_ok(),
        }))
    }

    async fn fetch(&mut self, request: Request) -> Result<Response, CapabilityError> {
        // The one way back to the guest: whatever the broker says, a secret value the call's
        // grant binds is not in it (responses were redacted hop by hop; this covers messages).
        let fetched = self.fetch_hops(request).await;
        fetched.map_err(|e| response::scrubbed_error(&self.scrub, e))
    }
}

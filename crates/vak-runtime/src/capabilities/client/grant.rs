//! The `client` section of a tool's policy: which requests (`sampling`, `elicitation`, `roots`)
//! it may send the caller's client.

use crate::capabilities::grant::{Effects, GrantedScope, Scope, ToolGrant, same_as};
use crate::capabilities::{Capability, SectionError};
use serde::Deserialize;

/// What a `client` grant may ask of the caller's client.
pub const CLIENT_REQUESTS: [&str; 3] = ["sampling", "elicitation", "roots"];

/// The policy section, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientGrantFile {
    /// `sampling`, `elicitation`, `roots`.
    requests: Vec<String>,
}

/// The section compiled: requests of [`CLIENT_REQUESTS`].
pub fn compile(file: ClientGrantFile) -> Result<Vec<String>, String> {
    if let Some(bad) = file
        .requests
        .iter()
        .find(|r| !CLIENT_REQUESTS.contains(&r.as_str()))
    {
        return Err(format!(
            "`client.requests` names {bad:?}; the requests are {CLIENT_REQUESTS:?}"
        ));
    }
    Ok(file.requests)
}

/// A `client` grant: the requests it may send the caller's client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requests(pub Vec<String>);

impl super::super::GrantSection for super::Client {
    fn capability(&self) -> Capability {
        Capability::Client
    }

    fn compile(&self, _tool: &str, section: toml::Value) -> Result<Scope, SectionError> {
        compile(super::super::section(section)?)
            .map(|r| Scope::new(Requests(r)))
            .map_err(SectionError::Scope)
    }
}

impl GrantedScope for Requests {
    /// Whether the requests cover a claim of the requests `claimed`.
    fn covers(&self, claimed: &[String]) -> Result<(), String> {
        super::super::claims::outside(claimed, "client", "requests", |s| {
            self.0.iter().any(|r| r == s)
        })
    }

    fn describe(&self) -> String {
        format!("requests {}", self.0.join(", "))
    }

    /// A completion (`sampling`) comes from a model outside the host: an open world. Asking
    /// the person (`elicitation`) changes nothing and reaches no one else.
    fn effects(&self) -> Effects {
        Effects {
            open_world: self.0.iter().any(|r| r == "sampling"),
            ..Effects::default()
        }
    }

    fn same(&self, other: &dyn GrantedScope) -> bool {
        same_as(self, other)
    }
}

impl ToolGrant {
    /// Whether the grant lets the tool send its caller's client `request` (`sampling`,
    /// `elicitation`).
    pub fn may_ask(&self, request: &str) -> bool {
        self.scope::<Requests>(Capability::Client)
            .is_some_and(|r| r.0.iter().any(|x| x == request))
    }
}

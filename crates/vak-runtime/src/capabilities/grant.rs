//! What one tool is granted, compiled from the policy: each capability's scope (the type each
//! broker's grant compiler makes), the tool's caps, who may call it and whether a person must
//! approve. Brokers read it per call; the policy document makes it.

use super::Capability;
use super::clock::grant::ZoneScope;
use super::http::grant::HttpScope;
use super::workspace::grant::Root;
use super::{
    client::grant as client, http::grant as http, invoke::grant as invoke,
    workspace::grant as workspace,
};
use std::collections::BTreeMap;
use vak_core::types::Caps;

/// The scope of one granted capability.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// `clock`: the zones the tool may read (`AnyZone` for `"*"`).
    Zones(ZoneScope),
    /// `http`: origins, address exceptions and caps.
    Http(HttpScope),
    /// `invoke`: the tools it may call as child runs.
    Tools(Vec<String>),
    /// `workspace`: the roots the tool may use.
    Roots(Vec<Root>),
    /// `client`: the requests (`sampling`, `elicitation`) the tool may send the caller's client.
    Requests(Vec<String>),
    /// A capability without scopes (`log`).
    Unscoped,
}

/// What the policy grants one tool, compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolGrant {
    pub tool: String,
    pub capabilities: BTreeMap<Capability, Scope>,
    /// The tool's caps with the policy defaults filled in.
    pub caps: Caps,
    /// Only these principals may call the tool (`None`: any principal).
    pub principals: Option<Vec<String>>,
    /// Every call needs a person's approval before dispatch.
    pub ask: bool,
    /// How long an approval may take.
    pub approval_timeout_ms: u64,
    /// `environment`: the keys a foreign component may read (`wasi:config/store`,
    /// `wasi:cli/environment`), each bound to where its value comes from.
    pub environment: Vec<super::environment::grant::EnvKey>,
    /// The foreign function this table serves under its name (a rename), if the policy says.
    pub export: Option<String>,
}

impl ToolGrant {
    /// Whether `capability` is granted.
    pub fn grants(&self, capability: Capability) -> bool {
        self.capabilities.contains_key(&capability)
    }

    /// Whether anything of the grant waits for an approval: the tool, a root or an origin.
    pub fn asks(&self) -> bool {
        self.ask
            || self.http().is_some_and(|h| !h.ask.is_empty())
            || matches!(self.capabilities.get(&Capability::Workspace), Some(Scope::Roots(roots)) if roots.iter().any(|r| r.ask))
    }

    /// Whether `principal` may call the tool.
    pub fn allows_principal(&self, principal: Option<&str>) -> bool {
        match &self.principals {
            None => true,
            Some(list) => principal.is_some_and(|p| list.iter().any(|q| q == p)),
        }
    }

    /// The `http` scope, if granted.
    pub fn http(&self) -> Option<&HttpScope> {
        match self.capabilities.get(&Capability::Http) {
            Some(Scope::Http(h)) => Some(h),
            _ => None,
        }
    }

    /// Whether the grant lets the tool invoke `tool` as a child run.
    pub fn may_invoke(&self, tool: &str) -> bool {
        matches!(self.capabilities.get(&Capability::Invoke), Some(Scope::Tools(t)) if t.iter().any(|x| x == tool))
    }

    /// The granted workspace root named `name`.
    pub fn root(&self, name: &str) -> Option<&Root> {
        match self.capabilities.get(&Capability::Workspace) {
            Some(Scope::Roots(roots)) => roots.iter().find(|r| r.name == name),
            _ => None,
        }
    }

    /// Whether the grant lets the tool send its caller's client `request` (`sampling`, `elicitation`).
    pub fn may_ask(&self, request: &str) -> bool {
        matches!(self.capabilities.get(&Capability::Client), Some(Scope::Requests(r)) if r.iter().any(|x| x == request))
    }

    /// Whether the grant covers reading the clock in `zone`.
    pub fn clock_zone_allowed(&self, zone: &str) -> bool {
        matches!(self.capabilities.get(&Capability::Clock), Some(Scope::Zones(z)) if z.allows(zone))
    }

    /// Whether the grant covers a claim of `capability` with `scopes`; `Err` says what is missing.
    pub fn covers(&self, capability: Capability, scopes: &[String]) -> Result<(), String> {
        let Some(scope) = self.capabilities.get(&capability) else {
            return Err(format!("the policy does not grant `{}`", capability.name()));
        };
        match scope {
            Scope::Unscoped => Ok(()),
            Scope::Http(h) => http::covers(h, scopes),
            Scope::Tools(tools) => invoke::covers(tools, scopes),
            Scope::Requests(requests) => client::covers(requests, scopes),
            Scope::Roots(roots) => workspace::covers(roots, scopes),
            Scope::Zones(zones) => zones.covers(scopes),
        }
    }
}

//! What one tool is granted, compiled from the policy: each capability's scope (the type its
//! folder's grant compiler makes), the tool's caps, who may call it and whether a person must
//! approve. Brokers read it per call; the policy document makes it.
//!
//! A scope is opaque here: each capability's folder says what its scope covers, how it reads,
//! what it lets a tool do to the world ([`Effects`]) and whether it waits for a person, so
//! that nothing outside the folder matches on a capability's scope.

use super::Capability;
use std::any::Any;
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::Arc;
use vak_core::types::Caps;

/// One capability's section of the policy, compiled: its folder's type.
pub trait GrantedScope: Any + Debug + Send + Sync {
    /// Whether the scope covers a claim of `claimed` scopes; `Err` says what is outside it.
    fn covers(&self, claimed: &[String]) -> Result<(), String>;

    /// The scope in a line, for `vak policy check` and `vak inspect`.
    fn describe(&self) -> String;

    /// What the scope lets a tool do beyond computing its result.
    fn effects(&self) -> Effects;

    /// Whether some use of the scope waits for a person's approval.
    fn asks(&self) -> bool {
        false
    }

    /// Whether `other` is the same scope (`ToolGrant` compares equal by its scopes).
    fn same(&self, other: &dyn GrantedScope) -> bool;
}

/// What a granted scope lets a tool do to the world: what MCP's tool hints say, and what decides
/// whether a stateless call may be run again from the start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Effects {
    /// It may change something (a write, a request that is not a read).
    pub changes: bool,
    /// A change may destroy what was there (an overwrite, a removal).
    pub destructive: bool,
    /// It reaches beyond the host (the network, a model).
    pub open_world: bool,
    /// The tools it may run as child runs: their effects are its effects too.
    pub invokes: Vec<String>,
}

/// A granted capability's compiled scope.
#[derive(Debug, Clone)]
pub struct Scope(Arc<dyn GrantedScope>);

impl Scope {
    pub fn new(scope: impl GrantedScope) -> Scope {
        Scope(Arc::new(scope))
    }

    /// The scope as its folder's type `S`, if it is one.
    pub fn get<S: GrantedScope>(&self) -> Option<&S> {
        let any: &dyn Any = self.0.as_ref();
        any.downcast_ref()
    }
}

impl std::ops::Deref for Scope {
    type Target = dyn GrantedScope;

    fn deref(&self) -> &Self::Target {
        self.0.as_ref()
    }
}

impl PartialEq for Scope {
    fn eq(&self, other: &Scope) -> bool {
        self.0.same(other.0.as_ref())
    }
}

impl Eq for Scope {}

/// [`GrantedScope::same`] for a scope type with `PartialEq`.
pub fn same_as<S: GrantedScope + PartialEq>(scope: &S, other: &dyn GrantedScope) -> bool {
    let other: &dyn Any = other;
    other.downcast_ref::<S>() == Some(scope)
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

    /// The scope of `capability` as its folder's type, if granted.
    pub fn scope<S: GrantedScope>(&self, capability: Capability) -> Option<&S> {
        self.capabilities.get(&capability)?.get()
    }

    /// Whether anything of the grant waits for an approval: the tool, or a scope (a root, an
    /// origin).
    pub fn asks(&self) -> bool {
        self.ask || self.capabilities.values().any(|s| s.asks())
    }

    /// Whether `principal` may call the tool.
    pub fn allows_principal(&self, principal: Option<&str>) -> bool {
        match &self.principals {
            None => true,
            Some(list) => principal.is_some_and(|p| list.iter().any(|q| q == p)),
        }
    }

    /// Whether the grant covers a claim of `capability` with `scopes`; `Err` says what is missing.
    pub fn covers(&self, capability: Capability, scopes: &[String]) -> Result<(), String> {
        match self.capabilities.get(&capability) {
            Some(scope) => scope.covers(scopes),
            None => Err(format!("the policy does not grant `{}`", capability.name())),
        }
    }
}

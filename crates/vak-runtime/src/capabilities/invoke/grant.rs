//! The `invoke` section of a tool's policy: the tools it may call as child runs.

use crate::capabilities::grant::{Effects, GrantedScope, Scope, ToolGrant, same_as};
use crate::capabilities::{Capability, SectionError};
use serde::Deserialize;

/// The policy section, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InvokeGrantFile {
    tools: Vec<String>,
}

/// The section compiled for the tool `tool`: the tools it may call, never itself.
pub fn compile(tool: &str, file: InvokeGrantFile) -> Result<Vec<String>, String> {
    if file.tools.iter().any(|t| t == tool) {
        return Err("`invoke.tools` names the tool itself; a tool may not call itself".into());
    }
    Ok(file.tools)
}

/// An `invoke` grant: the tools it may call as child runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tools(pub Vec<String>);

impl super::super::GrantSection for super::Invoke {
    fn capability(&self) -> Capability {
        Capability::Invoke
    }

    fn compile(&self, tool: &str, section: toml::Value) -> Result<Scope, SectionError> {
        compile(tool, super::super::section(section)?)
            .map(|tools| Scope::new(Tools(tools)))
            .map_err(SectionError::Scope)
    }
}

impl GrantedScope for Tools {
    /// Whether the tools cover a claim of the tools `claimed`.
    fn covers(&self, claimed: &[String]) -> Result<(), String> {
        super::super::claims::outside(claimed, "invoke", "tools", |s| {
            self.0.iter().any(|t| t == s)
        })
    }

    fn describe(&self) -> String {
        format!("child runs of {}", self.0.join(", "))
    }

    /// A child run's effects are the child's, under its own grant.
    fn effects(&self) -> Effects {
        Effects {
            invokes: self.0.clone(),
            ..Effects::default()
        }
    }

    fn same(&self, other: &dyn GrantedScope) -> bool {
        same_as(self, other)
    }
}

impl ToolGrant {
    /// Whether the grant lets the tool invoke `tool` as a child run.
    pub fn may_invoke(&self, tool: &str) -> bool {
        self.scope::<Tools>(Capability::Invoke)
            .is_some_and(|t| t.0.iter().any(|x| x == tool))
    }
}

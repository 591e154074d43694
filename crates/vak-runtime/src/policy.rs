//! The policy: which tools may run, with which capabilities and scopes, under which caps.
//!
//! Deny by default: a tool the policy does not name is not admitted, a capability it does not
//! grant is not linked, a scope it does not list is refused at the broker. A policy is TOML with
//! unknown fields rejected (the error names the line), compiled once into [`Policy`]. This module
//! keeps the document (tools, caps, principals, approvals); each capability's section is handed
//! by name to that capability's grant compiler (`capabilities::<name>::grant`), whose types are
//! re-exported here.

use crate::capabilities::SectionError;
use crate::capabilities::environment::grant as environment;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

pub use crate::capabilities::client::grant::CLIENT_REQUESTS;
pub use crate::capabilities::clock::grant::ZoneScope;
pub use crate::capabilities::grant::{Effects, GrantedScope, Scope, ToolGrant};
pub use crate::capabilities::http::grant::{
    Credential, HTTP_METHODS, HTTP_READ_METHODS, HttpScope, Injection, Origin, SecretRef,
};
pub use crate::capabilities::workspace::grant::{Root, RootMode};
pub use crate::capabilities::{
    client::grant::Requests, invoke::grant::Tools, log::Unscoped, workspace::grant::Roots,
};
pub use vak_core::types::{Caps, SessionCaps};

/// The section of `capabilities` that is not a brokered capability: the keys a foreign
/// component reads through the standard interfaces.
const ENVIRONMENT: &str = "environment";

/// The policy the `vak` binary uses by default: the bundled tools get what they claim.
pub const DEFAULT_POLICY: &str = include_str!("../policy/default.toml");

/// Why a policy was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("cannot read policy file {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("policy {origin}: {message}")]
    Syntax { origin: String, message: String },
    #[error("policy {origin}, line {line}: tool `{tool}`: {message}")]
    Scope {
        origin: String,
        tool: String,
        /// The line of the tool's table (1-based).
        line: usize,
        message: String,
    },
}

impl PolicyError {
    /// The error placed at `line` (scope errors are found after parsing, by tool), unless it
    /// already has a line of its own (a section's).
    fn at_line(mut self, at: usize) -> PolicyError {
        if let PolicyError::Scope { line, .. } = &mut self
            && *line == 0
        {
            *line = at;
        }
        self
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    #[serde(default)]
    defaults: Caps,
    #[serde(default)]
    session: SessionCaps,
    #[serde(default)]
    tools: BTreeMap<String, toml::Spanned<ToolGrantFile>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolGrantFile {
    /// Each capability's section, by the capability's name; `environment` beside them.
    #[serde(default)]
    capabilities: BTreeMap<String, toml::Spanned<toml::Value>>,
    #[serde(default)]
    caps: Caps,
    /// Only these principals may call the tool (absent: any principal).
    principals: Option<Vec<String>>,
    /// Every call waits for a person's approval before dispatch.
    #[serde(default)]
    ask: bool,
    /// How long an approval may take (default 120 s).
    approval_timeout_ms: Option<u64>,
    /// For a component built for another host: the exported function this table serves under
    /// the table's name (its export as `vak inspect` lists it, or the tool name vak derives).
    export: Option<String>,
}

/// A compiled policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Where it came from (a path, or `built-in default`), for messages.
    pub origin: String,
    pub defaults: Caps,
    /// Totals per session.
    pub session: SessionCaps,
    pub tools: BTreeMap<String, Arc<ToolGrant>>,
}

impl Policy {
    /// The built-in default policy.
    pub fn default_policy() -> Policy {
        // The built-in text is tested below; failing to parse it is a build defect.
        Policy::parse(DEFAULT_POLICY, "built-in default").expect("the built-in policy parses")
    }

    /// A policy that grants nothing: every tool is refused.
    pub fn deny_all() -> Policy {
        Policy {
            origin: "deny-all".into(),
            defaults: Caps::default(),
            session: SessionCaps::default(),
            tools: BTreeMap::new(),
        }
    }

    /// Read and compile a policy file.
    pub fn load(path: &Path) -> Result<Policy, PolicyError> {
        let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Policy::parse(&text, &path.display().to_string())
    }

    /// Compile a policy from TOML text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Policy, PolicyError> {
        let file: PolicyFile = toml::from_str(text).map_err(|e| PolicyError::Syntax {
            origin: origin.to_string(),
            message: e.to_string().trim_end().to_string(),
        })?;
        let mut tools = BTreeMap::new();
        for (name, spanned) in file.tools {
            let line = 1 + text[..spanned.span().start.min(text.len())]
                .matches('\n')
                .count();
            let grant = spanned.into_inner();
            let line_of = |at: usize| 1 + text[..at.min(text.len())].matches('\n').count();
            let grant = Self::compile_grant(origin, name, grant, &file.defaults, &line_of)
                .map_err(|e| e.at_line(line))?;
            tools.insert(grant.tool.clone(), Arc::new(grant));
        }
        Ok(Policy {
            origin: origin.to_string(),
            defaults: file.defaults,
            session: file.session,
            tools,
        })
    }

    /// One tool's table, checked and compiled.
    fn compile_grant(
        origin: &str,
        name: String,
        grant: ToolGrantFile,
        defaults: &Caps,
        line_of: &dyn Fn(usize) -> usize,
    ) -> Result<ToolGrant, PolicyError> {
        // A scope the broker does not grant is placed at the tool's table (line 0: the caller
        // fills it in); a section not of its shape, or of no capability, at the section.
        let at = |line: usize, message: String| PolicyError::Scope {
            origin: origin.into(),
            tool: name.clone(),
            line,
            message,
        };
        let fail = |message: String| at(0, message);
        // Each capability's section, handed to the grant compiler of that name.
        let mut capabilities = BTreeMap::new();
        let mut environment = Vec::new();
        for (section, spanned) in grant.capabilities {
            let line = line_of(spanned.span().start);
            let placed = |e: SectionError| match e {
                SectionError::Shape(message) => at(line, message),
                SectionError::Scope(message) => fail(message),
            };
            let value = spanned.into_inner();
            if section == ENVIRONMENT {
                environment =
                    environment::compile(crate::capabilities::section(value).map_err(placed)?)
                        .map_err(fail)?;
                continue;
            }
            let Some(compiler) =
                crate::capabilities::grant_sections().find(|c| c.capability().name() == section)
            else {
                let known: Vec<&str> = crate::capabilities::grant_sections()
                    .map(|c| c.capability().name())
                    .chain([ENVIRONMENT])
                    .collect();
                return Err(at(
                    line,
                    format!(
                        "`capabilities.{section}` is not a capability; the capabilities are {}",
                        known.join(", ")
                    ),
                ));
            };
            let scope = compiler.compile(&name, value).map_err(placed)?;
            capabilities.insert(compiler.capability(), scope);
        }
        Ok(ToolGrant {
            export: grant.export,
            environment,
            tool: name,
            capabilities,
            caps: grant.caps.or(*defaults),
            principals: grant.principals,
            ask: grant.ask,
            approval_timeout_ms: grant.approval_timeout_ms.unwrap_or(120_000),
        })
    }

    /// The grant for `tool`, if the policy names it.
    pub fn grant(&self, tool: &str) -> Option<&Arc<ToolGrant>> {
        self.tools.get(tool)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::Capability;

    #[test]
    fn the_default_policy_grants_the_bundled_tools() {
        let p = Policy::default_policy();
        let clock = p.grant("clock").expect("clock is granted");
        assert!(clock.clock_zone_allowed("Europe/Paris"));
        assert!(!clock.grants(Capability::Log));
        assert_eq!(clock.caps.fuel, Some(500_000_000));
        assert!(p.grant("stats").is_some_and(|g| g.capabilities.is_empty()));
        assert!(p.grant("unknown").is_none());
    }

    #[test]
    fn unknown_fields_are_rejected_with_their_line() {
        let err = Policy::parse(
            "[tools.clock]\ncapabilities.clock = { zones = [\"*\"] }\nfuell = 3\n",
            "t",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("line 3"), "{err}");
        assert!(err.contains("fuell"), "{err}");
        let err = Policy::parse("[tools.x]\ncapabilities.sockets = {}\n", "t")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`capabilities.sockets` is not a capability"),
            "{err}"
        );
        assert!(
            err.contains("clock, http, workspace, invoke, log, client, environment"),
            "{err}"
        );
    }

    #[test]
    fn ask_marks_a_tool_a_root_or_an_origin_and_must_name_a_granted_origin() {
        let p = Policy::parse(
            "[tools.f]\nask = true\napproval_timeout_ms = 5000\n\
             capabilities.http = { origins = [\"https://a.example\", \"https://b.example/api/\"], ask = [\"https://b.example/api/\"] }\n\
             capabilities.workspace = { roots = [{ name = \"w\", path = \"/srv/w\", mode = \"read-write\", ask = true }] }\n",
            "t",
        )
        .unwrap();
        let g = p.grant("f").unwrap();
        assert!(g.ask && g.approval_timeout_ms == 5000);
        assert!(g.root("w").unwrap().ask);
        let http = g.http().unwrap();
        let url = |u: &str| url::Url::parse(u).unwrap();
        assert_eq!(
            http.asks_for(&url("https://b.example/api/x")),
            Some("https://b.example/api/")
        );
        assert_eq!(http.asks_for(&url("https://a.example/x")), None);
        let default = Policy::parse("[tools.f]\n", "t").unwrap();
        let g = default.grant("f").unwrap();
        assert!(!g.ask && g.approval_timeout_ms == 120_000);
        let err = Policy::parse(
            "[tools.f]\ncapabilities.http = { origins = [\"https://a.example\"], ask = [\"https://c.example\"] }\n",
            "t",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("`http.ask` names \"https://c.example\""),
            "{err}"
        );
        assert!(err.contains("line 1"), "{err}");
    }
}

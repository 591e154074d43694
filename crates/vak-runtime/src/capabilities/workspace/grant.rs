//! The `workspace` section of a tool's policy: named roots on the host, each read-only or
//! read-write, and whether its first use in a call waits for a person's approval.

use crate::capabilities::grant::{Effects, GrantedScope, Scope, ToolGrant, same_as};
use crate::capabilities::{Capability, SectionError};
use serde::Deserialize;

/// The policy section, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceGrantFile {
    roots: Vec<RootFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RootFile {
    name: String,
    path: std::path::PathBuf,
    #[serde(default)]
    mode: RootMode,
    /// The root's first use in a call waits for a person's approval.
    #[serde(default)]
    ask: bool,
}

/// What a tool may do in a workspace root.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RootMode {
    #[default]
    ReadOnly,
    ReadWrite,
}

/// One granted workspace root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    /// The name tools use for it.
    pub name: String,
    /// Where it is on the host (absolute, as the policy gave it).
    pub path: std::path::PathBuf,
    pub mode: RootMode,
    /// The root's first use in a call needs an approval.
    pub ask: bool,
}

/// The section compiled: named, absolute roots that do not overlap.
pub fn compile(file: WorkspaceGrantFile) -> Result<Vec<Root>, String> {
    let mut out: Vec<Root> = Vec::new();
    for r in file.roots {
        if r.name.is_empty() || out.iter().any(|o| o.name == r.name) {
            return Err(format!(
                "workspace root name {:?} is empty or used twice",
                r.name
            ));
        }
        if !r.path.is_absolute() {
            return Err(format!(
                "workspace root {:?} has a relative path {}; give an absolute one",
                r.name,
                r.path.display()
            ));
        }
        // Overlapping roots would reach the same files under two names, so a read-only root
        // inside (or around) a read-write one would not be read-only; one root per tree.
        if let Some(o) = out
            .iter()
            .find(|o| o.path.starts_with(&r.path) || r.path.starts_with(&o.path))
        {
            return Err(format!(
                "workspace roots {:?} ({}) and {:?} ({}) overlap; grant each tree once",
                o.name,
                o.path.display(),
                r.name,
                r.path.display()
            ));
        }
        out.push(Root {
            name: r.name,
            path: r.path,
            mode: r.mode,
            ask: r.ask,
        });
    }
    Ok(out)
}

/// A `workspace` grant: its roots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Roots(pub Vec<Root>);

impl super::super::GrantSection for super::Workspace {
    fn capability(&self) -> Capability {
        Capability::Workspace
    }

    fn compile(&self, _tool: &str, section: toml::Value) -> Result<Scope, SectionError> {
        compile(super::super::section(section)?)
            .map(|roots| Scope::new(Roots(roots)))
            .map_err(SectionError::Scope)
    }
}

impl GrantedScope for Roots {
    /// Whether the roots cover a claim of the roots named `claimed`.
    fn covers(&self, claimed: &[String]) -> Result<(), String> {
        super::super::claims::outside(claimed, "workspace", "roots", |s| {
            self.0.iter().any(|r| r.name == s)
        })
    }

    fn describe(&self) -> String {
        self.0
            .iter()
            .map(|r| format!("{} = {} ({:?})", r.name, r.path.display(), r.mode))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// A read-write root may be written and its files replaced or removed.
    fn effects(&self) -> Effects {
        let writes = self.0.iter().any(|r| r.mode == RootMode::ReadWrite);
        Effects {
            changes: writes,
            destructive: writes,
            ..Effects::default()
        }
    }

    fn asks(&self) -> bool {
        self.0.iter().any(|r| r.ask)
    }

    fn same(&self, other: &dyn GrantedScope) -> bool {
        same_as(self, other)
    }
}

impl ToolGrant {
    /// The granted workspace roots (none without a `workspace` grant).
    pub fn roots(&self) -> &[Root] {
        self.scope::<Roots>(Capability::Workspace)
            .map_or(&[], |r| r.0.as_slice())
    }

    /// The granted workspace root named `name`.
    pub fn root(&self, name: &str) -> Option<&Root> {
        self.roots().iter().find(|r| r.name == name)
    }
}

//! Revocations: a tool, one capability of a tool, or a principal. Recorded durably (one JSON line
//! each, synced before `revoke` returns), applied to every new call at once (permission stage) and
//! to calls already running at their next brokered capability use (the broker checks here on
//! every request). Only the embedder's API and `vak revoke` write them: nothing a tool or a model
//! can call reaches this module.

use crate::capabilities::Capability;
use serde::{Deserialize, Serialize};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::RwLock;

/// What is revoked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "scope", rename_all = "snake_case")]
pub enum Revocation {
    /// Every call of the tool.
    Tool { tool: String },
    /// One capability of one tool: calls still run, but the capability refuses.
    Capability {
        tool: String,
        capability: Capability,
    },
    /// Every call made on behalf of the principal.
    Principal { principal: String },
}

impl std::fmt::Display for Revocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Revocation::Tool { tool } => write!(f, "tool `{tool}`"),
            Revocation::Capability { tool, capability } => {
                write!(f, "capability `{}` of tool `{tool}`", capability.name())
            }
            Revocation::Principal { principal } => write!(f, "principal `{principal}`"),
        }
    }
}

/// A revocation with when and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RevocationEntry {
    #[serde(flatten)]
    pub revocation: Revocation,
    /// When it was recorded (RFC 3339, UTC).
    pub at: String,
    pub reason: String,
}

/// Why revocations could not be read or recorded.
#[derive(Debug, thiserror::Error)]
pub enum RevocationError {
    #[error("cannot read revocations from {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}, line {line}: not a revocation: {message}")]
    Parse {
        path: String,
        line: usize,
        message: String,
    },
    #[error("cannot record the revocation in {path}: {source}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// The revocations in force.
#[derive(Debug, Default)]
pub struct Revocations {
    entries: RwLock<Vec<RevocationEntry>>,
    file: Option<PathBuf>,
}

impl Revocations {
    /// Revocations kept in memory only (lost when the process ends).
    pub fn in_memory() -> Revocations {
        Revocations::default()
    }

    /// Revocations recorded in `path` (JSON lines); a missing file means none yet.
    pub fn open(path: &Path) -> Result<Revocations, RevocationError> {
        let shown = path.display().to_string();
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(source) => {
                return Err(RevocationError::Read {
                    path: shown,
                    source,
                });
            }
        };
        let mut entries = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let entry: RevocationEntry =
                serde_json::from_str(line).map_err(|e| RevocationError::Parse {
                    path: shown.clone(),
                    line: i + 1,
                    message: e.to_string(),
                })?;
            entries.push(entry);
        }
        Ok(Revocations {
            entries: RwLock::new(entries),
            file: Some(path.to_path_buf()),
        })
    }

    /// Record `revocation`: durably first (appended and synced), then in force.
    pub fn revoke(
        &self,
        revocation: Revocation,
        reason: &str,
    ) -> Result<RevocationEntry, RevocationError> {
        let entry = RevocationEntry {
            revocation,
            at: jiff::Timestamp::now().to_string(),
            reason: reason.to_string(),
        };
        if let Some(path) = &self.file {
            let write_err = |source| RevocationError::Write {
                path: path.display().to_string(),
                source,
            };
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(write_err)?;
            }
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(write_err)?;
            let line = serde_json::to_string(&entry).unwrap_or_default();
            writeln!(f, "{line}").map_err(write_err)?;
            f.sync_all().map_err(write_err)?;
        }
        self.write().push(entry.clone());
        tracing::warn!(revocation = %entry.revocation, reason, "revoked");
        Ok(entry)
    }

    /// Every revocation in force, oldest first.
    pub fn list(&self) -> Vec<RevocationEntry> {
        self.read().clone()
    }

    /// The revocation that stops a new call of `tool` for `principal`, if any.
    pub fn blocking_call(&self, tool: &str, principal: Option<&str>) -> Option<RevocationEntry> {
        self.read()
            .iter()
            .find(|e| match &e.revocation {
                Revocation::Tool { tool: t } => t == tool,
                Revocation::Principal { principal: p } => Some(p.as_str()) == principal,
                Revocation::Capability { .. } => false,
            })
            .cloned()
    }

    /// The revocation that stops `tool` (for `principal`) from using `capability`, if any.
    pub fn blocking_use(
        &self,
        tool: &str,
        principal: Option<&str>,
        capability: Capability,
    ) -> Option<RevocationEntry> {
        self.read()
            .iter()
            .find(|e| match &e.revocation {
                Revocation::Tool { tool: t } => t == tool,
                Revocation::Principal { principal: p } => Some(p.as_str()) == principal,
                Revocation::Capability {
                    tool: t,
                    capability: c,
                } => t == tool && *c == capability,
            })
            .cloned()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<RevocationEntry>> {
        self.entries.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Vec<RevocationEntry>> {
        self.entries.write().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revocations_survive_a_restart_and_match_their_scope() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("revocations.jsonl");
        let r = Revocations::open(&path).unwrap();
        r.revoke(
            Revocation::Capability {
                tool: "clock".into(),
                capability: Capability::Clock,
            },
            "test",
        )
        .unwrap();
        r.revoke(
            Revocation::Principal {
                principal: "mallory".into(),
            },
            "test",
        )
        .unwrap();
        let again = Revocations::open(&path).unwrap();
        assert_eq!(again.list().len(), 2);
        assert!(
            again.blocking_call("clock", None).is_none(),
            "a capability revocation lets calls run"
        );
        assert!(
            again
                .blocking_use("clock", None, Capability::Clock)
                .is_some()
        );
        assert!(
            again
                .blocking_use("stats", None, Capability::Clock)
                .is_none()
        );
        assert!(again.blocking_call("stats", Some("mallory")).is_some());
        assert!(again.blocking_call("stats", Some("alice")).is_none());
        std::fs::write(&path, "{\"scope\":\"tool\"}\n").unwrap();
        let err = Revocations::open(&path).unwrap_err().to_string();
        assert!(err.contains("line 1"), "{err}");
    }
}

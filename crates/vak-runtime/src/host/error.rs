//! The host's errors: why a host could not be built, why a named session cannot be opened, and
//! why the permission stage refused a call.

use crate::policy::PolicyError;
use crate::stage::Stage;

/// Why the permission stage refused a call.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PermissionError {
    #[error("{what} was revoked at {at} ({reason})")]
    Revoked {
        what: String,
        at: String,
        reason: String,
    },
    #[error("the policy does not let principal `{principal}` call `{tool}`")]
    PrincipalNotAllowed { tool: String, principal: String },
    /// This node cannot confirm that it knows every revocation (the shared store is out of
    /// reach): it refuses rather than run a call that may have been revoked.
    #[error(transparent)]
    Store(crate::store::StoreError),
}

impl crate::stage::StageError for PermissionError {
    fn stage(&self) -> Stage {
        Stage::Permission
    }

    fn kind(&self) -> &'static str {
        match self {
            PermissionError::Revoked { .. } => "revoked",
            PermissionError::PrincipalNotAllowed { .. } => "principal_not_allowed",
            PermissionError::Store(e) => e.kind(),
        }
    }

    fn retryable(&self) -> bool {
        matches!(self, PermissionError::Store(e) if e.retryable())
    }
}

/// Why a named session cannot be opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a session id: 1 to 128 characters of letters, digits and `.`, `_`, `:`, `-`")]
pub struct InvalidSessionId(pub String);

/// Why a host could not be built.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error(transparent)]
    Runtime(#[from] crate::dispatch::engine::RuntimeError),
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error(transparent)]
    Key(#[from] crate::signing::KeyError),
    #[error("cannot read tools from {path}: {source}")]
    ReadTools {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

//! Approvals: a person says yes to one exact call before it runs (a tool marked `ask = true`)
//! or before one of its capability scopes is first used (a workspace root with `ask = true`, an
//! origin listed in `http.ask`).
//!
//! Every question is an [`ApprovalRequest`] with a fresh id and a `binding`: the SHA-256 of the
//! tool, the principal, the scope, the digest of the arguments and the digest of the grant. The
//! answer must name that id and that binding, come before the request expires, and is spent by
//! the one use it was asked for: the host asks again for the next call, even with the same
//! arguments, so an approval cannot be replayed for another call or for changed arguments. A
//! denial, a timeout or an answer bound to something else refuses the call at the `permission`
//! stage, and every question and answer is kept in the record.
//!
//! Who answers is, in order: the embedder's [`Approver`] ([`crate::HostBuilder::approver`]); else
//! the call's client, asked with an MCP elicitation form; else no one, and the call is refused
//! with `approval_required`. `vak call` at a terminal uses [`TerminalApprover`]; `vak serve
//! --approvals inbox` the [`inbox::InboxApprover`], whose questions a person answers in another
//! process (`vak audit serve --approvals`) through a file in the state directory.
//!
//! The parts: the question and its prompt (`request`), one call's approvals and the host's check
//! of each answer (`call`), the client asked with an elicitation form (`elicit`), a person
//! at this process's terminal (`terminal`), and the shared inbox (`inbox`).

mod call;
mod elicit;
pub mod inbox;
mod request;
mod terminal;

pub(crate) use call::{CallApprovals, CallContext};
pub use request::{ApprovalRequest, PROMPT_ARGUMENT_BYTES};
pub use terminal::{NoTerminal, TERMINAL_ARGUMENT_BYTES, TerminalApprover};

use crate::stage::Stage;
use futures::future::BoxFuture;
use serde::Serialize;
use serde_json::json;

/// What an approval covers.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(tag = "kind", content = "name", rename_all = "snake_case")]
pub enum ApprovalScope {
    /// The whole call, before dispatch.
    Call,
    /// The first use of this workspace root in the call.
    Root(String),
    /// The first request to this origin (as the policy wrote it) in the call.
    Origin(String),
}

impl std::fmt::Display for ApprovalScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApprovalScope::Call => f.write_str("the call"),
            ApprovalScope::Root(r) => write!(f, "workspace root `{r}`"),
            ApprovalScope::Origin(o) => write!(f, "requests to {o}"),
        }
    }
}

/// A yes, bound to one request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Approval {
    /// The [`ApprovalRequest::id`] it answers.
    pub request_id: String,
    /// The [`ApprovalRequest::binding`] it was given for.
    pub binding: String,
    /// Who approved.
    pub by: String,
    pub at: String,
}

/// An answer to an [`ApprovalRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Approved(Approval),
    Denied {
        by: String,
        reason: String,
    },
    /// No one can answer (no terminal, a client without elicitation).
    Unavailable {
        reason: String,
    },
    /// The question goes to the caller's client in a round of its own (a stateless MCP
    /// client): this call ends at `permission`, and the answer comes with the next round.
    Deferred {
        reason: String,
    },
}

/// The embedder's approver: shows the request to a person and returns their answer.
/// Build answers with [`ApprovalRequest::approve`] and [`ApprovalRequest::deny`].
pub trait Approver: Send + Sync {
    fn decide(&self, request: ApprovalRequest) -> BoxFuture<'static, Answer>;

    /// The call stops waiting for `request` (no answer came in its time, or its caller
    /// cancelled it): make the question unanswerable from here on, and return an answer given
    /// before this point and before the request expired, which `decide` had not yet passed on.
    /// The call then takes it as an answer that came in time, so that what the person was told
    /// and what the call did agree.
    /// By default nothing is kept apart from `decide`'s future, and there is none.
    fn withdraw(&self, request: &ApprovalRequest) -> BoxFuture<'static, Option<Answer>> {
        let _ = request;
        Box::pin(async { None })
    }
}

/// Why the permission stage refused a call that needed an approval.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApprovalError {
    #[error("`{tool}` needs a person's approval for {scope} and no one can be asked: {reason}")]
    Required {
        tool: String,
        scope: String,
        reason: String,
        request_id: String,
        binding: String,
    },
    #[error("{by} denied {scope} of `{tool}`: {reason}")]
    Denied {
        tool: String,
        scope: String,
        by: String,
        reason: String,
    },
    #[error("no approval for {scope} of `{tool}` came within {waited_ms} ms")]
    Timeout {
        tool: String,
        scope: String,
        waited_ms: u64,
    },
    #[error(
        "the call was cancelled by its caller while it waited for approval of {scope} of `{tool}`"
    )]
    Cancelled { tool: String, scope: String },
    #[error("the approval offered for {scope} of `{tool}` does not hold: {reason}")]
    Invalid {
        tool: String,
        scope: String,
        reason: String,
    },
}

impl crate::stage::StageError for ApprovalError {
    fn stage(&self) -> Stage {
        Stage::Permission
    }

    fn kind(&self) -> &'static str {
        match self {
            ApprovalError::Required { .. } => "approval_required",
            ApprovalError::Denied { .. } => "approval_denied",
            ApprovalError::Timeout { .. } => "approval_timeout",
            ApprovalError::Cancelled { .. } => "cancelled",
            ApprovalError::Invalid { .. } => "approval_invalid",
        }
    }

    /// The same call asks again, and a person who was away may answer this time (a call its
    /// caller cancelled was stopped for no fault of its own); a denial, a call no one can
    /// approve and a bad answer stay as they are.
    fn retryable(&self) -> bool {
        matches!(
            self,
            ApprovalError::Timeout { .. } | ApprovalError::Cancelled { .. }
        )
    }

    fn details(&self) -> serde_json::Value {
        match self {
            ApprovalError::Required {
                request_id,
                binding,
                ..
            } => json!({ "approval_id": request_id, "binding": binding }),
            ApprovalError::Timeout { waited_ms, .. } => json!({ "waited_ms": waited_ms }),
            _ => serde_json::Value::Null,
        }
    }
}

pub use vak_core::record::ApprovalEntry;

/// A call's context for the tests of every part: `arguments` as proposed, by `alice`.
#[cfg(test)]
fn test_context(arguments: &str) -> CallContext {
    CallContext {
        call_id: "c1".into(),
        tool: "t".into(),
        principal: Some("alice".into()),
        arguments: arguments.into(),
        arguments_sha256: crate::digest::sha256_hex(arguments.as_bytes()),
        reach: vec!["https://api.example".into()],
        grant_sha256: "g".into(),
        timeout: std::time::Duration::from_secs(5),
    }
}

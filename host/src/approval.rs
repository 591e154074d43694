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
//! with `approval_required`.

use crate::capabilities::client::{ClientChannel, ClientError, ElicitAction, ElicitRequest};
use crate::stage::Stage;
use futures::future::BoxFuture;
use serde::Serialize;
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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

/// One question to a person: may this exact call (or scope of it) go ahead?
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApprovalRequest {
    /// Fresh for every question; an answer names it.
    pub id: String,
    pub call_id: String,
    pub tool: String,
    pub principal: Option<String>,
    pub scope: ApprovalScope,
    /// SHA-256 of the argument text as proposed.
    pub arguments_sha256: String,
    /// The arguments, for the person to read.
    pub arguments: String,
    /// SHA-256 of the tool's grant as the policy compiled it.
    pub grant_sha256: String,
    /// SHA-256 over tool, principal, scope, arguments digest and grant digest.
    pub binding: String,
    pub asked_at: String,
    pub expires_at: String,
    #[serde(skip)]
    expires: Option<Instant>,
}

impl ApprovalRequest {
    /// A question about `scope` of a call, answerable for `ttl`.
    pub(crate) fn new(call: &CallContext, scope: ApprovalScope, ttl: Duration) -> ApprovalRequest {
        let binding = crate::digest::sha256_hex(
            json!({
                "tool": call.tool,
                "principal": call.principal,
                "scope": scope,
                "arguments_sha256": call.arguments_sha256,
                "grant_sha256": call.grant_sha256,
            })
            .to_string()
            .as_bytes(),
        );
        let now = jiff::Timestamp::now();
        let expires_at = now
            .checked_add(jiff::SignedDuration::try_from(ttl).unwrap_or_default())
            .unwrap_or(now);
        ApprovalRequest {
            id: format!("approval_{}", uuid::Uuid::now_v7().simple()),
            call_id: call.call_id.clone(),
            tool: call.tool.clone(),
            principal: call.principal.clone(),
            scope,
            arguments_sha256: call.arguments_sha256.clone(),
            arguments: call.arguments.clone(),
            grant_sha256: call.grant_sha256.clone(),
            binding,
            asked_at: now.to_string(),
            expires_at: expires_at.to_string(),
            expires: Instant::now().checked_add(ttl),
        }
    }

    /// Approve this request, as `by`.
    pub fn approve(&self, by: impl Into<String>) -> Answer {
        Answer::Approved(Approval {
            request_id: self.id.clone(),
            binding: self.binding.clone(),
            by: by.into(),
            at: jiff::Timestamp::now().to_string(),
        })
    }

    /// Deny this request, as `by`, saying why.
    pub fn deny(&self, by: impl Into<String>, reason: impl Into<String>) -> Answer {
        Answer::Denied {
            by: by.into(),
            reason: reason.into(),
        }
    }

    /// The question in a few lines, for a person.
    pub fn prompt(&self) -> String {
        let mut arguments = self.arguments.clone();
        if arguments.len() > 2000 {
            let mut end = 2000;
            while !arguments.is_char_boundary(end) {
                end -= 1;
            }
            arguments.truncate(end);
            arguments.push_str(" …");
        }
        format!(
            "vak: tool `{}` asks for approval of {}\n  principal: {}\n  arguments: {}\n  call {} · approval {} · expires {}",
            self.tool,
            self.scope,
            self.principal.as_deref().unwrap_or("(none)"),
            arguments,
            self.call_id,
            self.id,
            self.expires_at
        )
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
}

/// The embedder's approver: shows the request to a person and returns their answer.
/// Build answers with [`ApprovalRequest::approve`] and [`ApprovalRequest::deny`].
pub trait Approver: Send + Sync {
    fn decide(&self, request: ApprovalRequest) -> BoxFuture<'static, Answer>;
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

/// One question and its answer, as kept in the record.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct ApprovalEntry {
    /// The request as asked (id, scope, binding, digests, expiry).
    pub request: serde_json::Value,
    /// `approved`, `denied`, `timeout`, `unavailable` or `invalid`.
    pub decision: String,
    /// Who answered, when someone did.
    pub by: Option<String>,
    pub answered_at: String,
    /// Why, for anything but an approval.
    pub reason: Option<String>,
    /// How long the host waited for the answer.
    pub waited_ms: u64,
}

/// What every question of one call is bound to.
#[derive(Debug, Clone)]
pub(crate) struct CallContext {
    pub call_id: String,
    pub tool: String,
    pub principal: Option<String>,
    pub arguments: String,
    pub arguments_sha256: String,
    pub grant_sha256: String,
    /// How long an answer may take (the grant's `approval_timeout_ms`).
    pub timeout: Duration,
}

/// The approvals of one call: who is asked, which scopes are approved so far, what was asked.
pub(crate) struct CallApprovals {
    pub context: CallContext,
    approver: Option<Arc<dyn Approver>>,
    client: Option<Arc<dyn ClientChannel>>,
    approved: Mutex<Vec<ApprovalScope>>,
    entries: Mutex<Vec<ApprovalEntry>>,
    /// The first refusal, which ends the call at `permission` whatever the guest does after.
    refusal: Mutex<Option<ApprovalError>>,
    /// Cancelled on a refusal during dispatch, to stop the guest at once.
    pub stop: tokio_util::sync::CancellationToken,
}

impl CallApprovals {
    pub(crate) fn new(
        context: CallContext,
        approver: Option<Arc<dyn Approver>>,
        client: Option<Arc<dyn ClientChannel>>,
        stop: tokio_util::sync::CancellationToken,
    ) -> CallApprovals {
        CallApprovals {
            context,
            approver,
            client,
            approved: Mutex::new(Vec::new()),
            entries: Mutex::default(),
            refusal: Mutex::default(),
            stop,
        }
    }

    /// Ask for `scope` unless it is approved already in this call; waits at most `wait`
    /// (capped by the grant's timeout). A refusal is also kept for the pipeline.
    pub(crate) async fn require(
        &self,
        scope: ApprovalScope,
        wait: Duration,
    ) -> Result<(), ApprovalError> {
        if lock(&self.approved).contains(&scope) {
            return Ok(());
        }
        if let Some(e) = lock(&self.refusal).clone() {
            return Err(e);
        }
        let wait = wait.min(self.context.timeout);
        let request = ApprovalRequest::new(&self.context, scope.clone(), self.context.timeout);
        let started = Instant::now();
        let asked = self.ask(request.clone());
        // The caller's cancellation (a child of it is `stop`) ends the wait too.
        let (answer, cancelled) = tokio::select! {
            a = tokio::time::timeout(wait, asked) => (a.ok(), false),
            () = self.stop.cancelled() => (None, true),
        };
        let waited_ms = started.elapsed().as_millis() as u64;
        let tool = self.context.tool.clone();
        let scope_text = scope.to_string();
        let (decision, by, reason, result) = match answer {
            None if cancelled => (
                "cancelled",
                None,
                Some("the caller cancelled the call".into()),
                Err(ApprovalError::Cancelled {
                    tool,
                    scope: scope_text,
                }),
            ),
            None => (
                "timeout",
                None,
                Some(format!("no answer within {waited_ms} ms")),
                Err(ApprovalError::Timeout {
                    tool,
                    scope: scope_text,
                    waited_ms,
                }),
            ),
            Some(Answer::Unavailable { reason }) => (
                "unavailable",
                None,
                Some(reason.clone()),
                Err(ApprovalError::Required {
                    tool,
                    scope: scope_text,
                    reason,
                    request_id: request.id.clone(),
                    binding: request.binding.clone(),
                }),
            ),
            Some(Answer::Denied { by, reason }) => (
                "denied",
                Some(by.clone()),
                Some(reason.clone()),
                Err(ApprovalError::Denied {
                    tool,
                    scope: scope_text,
                    by,
                    reason,
                }),
            ),
            Some(Answer::Approved(approval)) => match check(&request, &approval) {
                Ok(()) => ("approved", Some(approval.by), None, Ok(())),
                Err(reason) => (
                    "invalid",
                    Some(approval.by),
                    Some(reason.clone()),
                    Err(ApprovalError::Invalid {
                        tool,
                        scope: scope_text,
                        reason,
                    }),
                ),
            },
        };
        lock(&self.entries).push(ApprovalEntry {
            request: serde_json::to_value(&request).unwrap_or_default(),
            decision: decision.into(),
            by,
            answered_at: jiff::Timestamp::now().to_string(),
            reason,
            waited_ms,
        });
        match result {
            Ok(()) => {
                lock(&self.approved).push(scope);
                Ok(())
            }
            Err(e) => {
                lock(&self.refusal).get_or_insert_with(|| e.clone());
                self.stop.cancel();
                Err(e)
            }
        }
    }

    /// Every question asked so far and its answer, for the record.
    pub(crate) fn entries(&self) -> Vec<ApprovalEntry> {
        lock(&self.entries).clone()
    }

    /// The refusal that ends the call at `permission`, if an approval was refused.
    pub(crate) fn refusal(&self) -> Option<ApprovalError> {
        lock(&self.refusal).clone()
    }

    /// Who answered the approvals granted so far (for the stage note).
    pub(crate) fn approvers(&self) -> Vec<String> {
        lock(&self.entries)
            .iter()
            .filter(|e| e.decision == "approved")
            .filter_map(|e| e.by.clone())
            .collect()
    }

    fn ask(&self, request: ApprovalRequest) -> BoxFuture<'static, Answer> {
        if let Some(approver) = &self.approver {
            return approver.decide(request);
        }
        let Some(client) = self.client.clone() else {
            return Box::pin(async {
                Answer::Unavailable {
                    reason: "this host has no approver and the call came without a client to ask"
                        .into(),
                }
            });
        };
        elicit_approval(client, request)
    }
}

/// The host's own check of an answer: the request it names, the binding, the expiry.
fn check(request: &ApprovalRequest, approval: &Approval) -> Result<(), String> {
    if approval.binding != request.binding {
        return Err(
            "it was given for another call (a different tool, principal, scope, arguments or grant)"
                .into(),
        );
    }
    if approval.request_id != request.id {
        return Err(format!(
            "it answers approval {} and this is {}; every approval is spent by the call it was asked for",
            approval.request_id, request.id
        ));
    }
    if request.expires.is_some_and(|e| Instant::now() > e) {
        return Err(format!(
            "it came after the request expired at {}",
            request.expires_at
        ));
    }
    Ok(())
}

/// Ask the call's client with an elicitation form of one boolean.
fn elicit_approval(
    client: Arc<dyn ClientChannel>,
    request: ApprovalRequest,
) -> BoxFuture<'static, Answer> {
    let form = ElicitRequest {
        message: request.prompt(),
        schema: json!({
            "type": "object",
            "properties": {
                "approve": {
                    "type": "boolean",
                    "title": "Approve",
                    "description": "Let this exact call go ahead, once",
                    "default": false,
                }
            },
            "required": ["approve"],
        }),
    };
    let by = client.answerer();
    let asked = client.elicit(form);
    Box::pin(async move {
        match asked.await {
            Ok(reply) => match (reply.action, reply.content) {
                (ElicitAction::Accept, Some(content))
                    if content.get("approve") == Some(&serde_json::Value::Bool(true)) =>
                {
                    request.approve(by)
                }
                (ElicitAction::Accept, _) => {
                    request.deny(by, "the form was answered without approving")
                }
                (ElicitAction::Decline, _) => request.deny(by, "declined"),
                (ElicitAction::Cancel, _) => request.deny(by, "cancelled"),
            },
            Err(e @ (ClientError::Unsupported(_) | ClientError::Unavailable(_))) => {
                Answer::Unavailable {
                    reason: e.to_string(),
                }
            }
            Err(e) => request.deny(by, e.to_string()),
        }
    })
}

/// A person at this process's terminal: the request on stderr, `y` on stdin approves.
pub struct TerminalApprover;

impl Approver for TerminalApprover {
    fn decide(&self, request: ApprovalRequest) -> BoxFuture<'static, Answer> {
        Box::pin(async move {
            let shown = request.clone();
            let read = tokio::task::spawn_blocking(move || {
                use std::io::{BufRead, Write};
                let mut err = std::io::stderr().lock();
                let _ = write!(err, "{}\napprove? [y/N] ", shown.prompt());
                let _ = err.flush();
                let mut line = String::new();
                std::io::stdin().lock().read_line(&mut line).map(|_| line)
            })
            .await;
            let by = format!(
                "terminal user {}",
                std::env::var("USER").unwrap_or_else(|_| "(unknown)".into())
            );
            match read {
                Ok(Ok(line)) if matches!(line.trim(), "y" | "Y" | "yes") => request.approve(by),
                Ok(Ok(_)) => request.deny(by, "answered no at the terminal"),
                _ => Answer::Unavailable {
                    reason: "the terminal could not be read".into(),
                },
            }
        })
    }
}

/// An approver for a process whose standard input is not a terminal: no one can be asked.
pub struct NoTerminal;

impl Approver for NoTerminal {
    fn decide(&self, _request: ApprovalRequest) -> BoxFuture<'static, Answer> {
        Box::pin(async {
            Answer::Unavailable {
                reason: "standard input is not a terminal; run `vak call` at a terminal, \
                         or approve through an embedder's approver"
                    .into(),
            }
        })
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context(arguments: &str) -> CallContext {
        CallContext {
            call_id: "c1".into(),
            tool: "t".into(),
            principal: Some("alice".into()),
            arguments: arguments.into(),
            arguments_sha256: crate::digest::sha256_hex(arguments.as_bytes()),
            grant_sha256: "g".into(),
            timeout: Duration::from_secs(5),
        }
    }

    #[test]
    fn an_approval_holds_only_for_its_own_request() {
        let a = ApprovalRequest::new(
            &context("{\"x\":1}"),
            ApprovalScope::Call,
            Duration::from_secs(5),
        );
        let Answer::Approved(yes) = a.approve("bob") else {
            panic!("approve makes an approval")
        };
        assert_eq!(check(&a, &yes), Ok(()));
        // The same call asked again is a new request: the old yes is spent.
        let again = ApprovalRequest::new(
            &context("{\"x\":1}"),
            ApprovalScope::Call,
            Duration::from_secs(5),
        );
        assert_eq!(again.binding, a.binding);
        assert!(check(&again, &yes).unwrap_err().contains("spent"));
        // Other arguments: another binding.
        let other = ApprovalRequest::new(
            &context("{\"x\":2}"),
            ApprovalScope::Call,
            Duration::from_secs(5),
        );
        assert!(check(&other, &yes).unwrap_err().contains("another call"));
        // Another scope of the same call: another binding.
        let root = ApprovalRequest::new(
            &context("{\"x\":1}"),
            ApprovalScope::Root("docs".into()),
            Duration::from_secs(5),
        );
        assert_ne!(root.binding, a.binding);
        // Expired.
        let short =
            ApprovalRequest::new(&context("{\"x\":1}"), ApprovalScope::Call, Duration::ZERO);
        let Answer::Approved(late) = short.approve("bob") else {
            panic!("approve makes an approval")
        };
        std::thread::sleep(Duration::from_millis(2));
        assert!(check(&short, &late).unwrap_err().contains("expired"));
    }
}

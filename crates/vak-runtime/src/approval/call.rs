//! The approvals of one call: which scopes are approved so far, who is asked, every question
//! and answer for the record, and the host's own check of each answer.

use super::request::ApprovalRequest;
use super::{Answer, Approval, ApprovalEntry, ApprovalError, ApprovalScope, Approver};
use futures::future::BoxFuture;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use vak_core::ports::client::ClientChannel;

/// What every question of one call is bound to.
#[derive(Debug, Clone)]
pub(crate) struct CallContext {
    pub call_id: String,
    pub tool: String,
    pub principal: Option<String>,
    pub arguments: String,
    pub arguments_sha256: String,
    /// The origins the call's `http` grant allows.
    pub reach: Vec<String>,
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
        let (mut answer, cancelled) = tokio::select! {
            a = tokio::time::timeout(wait, asked) => (a.ok(), false),
            () = self.stop.cancelled() => (None, true),
        };
        // The wait is over: the question is withdrawn before the refusal is decided, so an
        // answer that won the race is taken, not shown to its giver as accepted while the call
        // was refused. A cancelled call stays cancelled.
        let mut withdrawn = false;
        if answer.is_none()
            && let Some(approver) = &self.approver
        {
            let late = approver.withdraw(&request).await;
            if !cancelled {
                withdrawn = late.is_some();
                answer = late;
            }
        }
        let waited_ms = started.elapsed().as_millis() as u64;
        let tool = self.context.tool.clone();
        let scope_text = scope.to_string();
        let deferred = matches!(answer, Some(Answer::Deferred { .. }));
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
            Some(Answer::Unavailable { reason } | Answer::Deferred { reason }) => (
                if deferred {
                    "input_required"
                } else {
                    "unavailable"
                },
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
            Some(Answer::Approved(approval)) => match check(&request, &approval, !withdrawn) {
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
        super::elicit::elicit_approval(client, request)
    }
}

/// The host's own check of an answer: the request it names, the binding, and (unless the
/// approver's `withdraw` gave it, which returns only answers given before the request expired)
/// the expiry.
fn check(request: &ApprovalRequest, approval: &Approval, expiry: bool) -> Result<(), String> {
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
    if expiry && request.expires.is_some_and(|e| Instant::now() > e) {
        return Err(format!(
            "it came after the request expired at {}",
            request.expires_at
        ));
    }
    Ok(())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approval::test_context as context;

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
        assert_eq!(check(&a, &yes, true), Ok(()));
        // The same call asked again is a new request: the old yes is spent.
        let again = ApprovalRequest::new(
            &context("{\"x\":1}"),
            ApprovalScope::Call,
            Duration::from_secs(5),
        );
        assert_eq!(again.binding, a.binding);
        assert!(check(&again, &yes, true).unwrap_err().contains("spent"));
        // Other arguments: another binding.
        let other = ApprovalRequest::new(
            &context("{\"x\":2}"),
            ApprovalScope::Call,
            Duration::from_secs(5),
        );
        assert!(
            check(&other, &yes, true)
                .unwrap_err()
                .contains("another call")
        );
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
        assert!(check(&short, &late, true).unwrap_err().contains("expired"));
    }
}

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

use crate::stage::Stage;
use futures::future::BoxFuture;
use serde::Serialize;
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use vak_core::ports::client::{ClientChannel, ClientError, ElicitAction, ElicitRequest};

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
    /// The arguments, for the person to read (any secret value a grant binds redacted).
    pub arguments: String,
    /// What the call can reach: the origins its `http` grant allows (as the policy wrote them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reach: Vec<String>,
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
            reach: call.reach.clone(),
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

    /// The question for a person, with the arguments shown whole when they are at most
    /// [`PROMPT_ARGUMENT_BYTES`] long, and otherwise summarised: their first bytes, how many
    /// are not shown, and where to read them (`see`). See [`ApprovalRequest::prompt_with`].
    pub fn prompt(&self) -> String {
        self.prompt_with(
            PROMPT_ARGUMENT_BYTES,
            "the arguments of this call as they were proposed",
        )
    }

    /// The question for a person. First what the call can reach (the origins its grant
    /// allows) and every URL in its arguments with its host; then the principal and the
    /// arguments, shown whole when they are at most `limit` bytes, else their first `limit`
    /// bytes and `N bytes not shown; see {see}`, with the SHA-256 the approval binds. Never cut
    /// silently. Every text a tool, a model or a policy wrote is neutralised
    /// ([`crate::projection::neutralise`]): no control, bidi or other format character acts on
    /// the screen, and no line of the arguments can pass for a line of the prompt (each is
    /// indented).
    pub fn prompt_with(&self, limit: usize, see: &str) -> String {
        use crate::projection::{neutralise, neutralise_line};
        use std::fmt::Write as _;
        let mut out = format!(
            "vak: tool `{}` asks for approval of {}\n",
            neutralise_line(&self.tool),
            neutralise_line(&self.scope.to_string())
        );
        if self.reach.is_empty() {
            out.push_str("  can reach: no network origin\n");
        } else {
            let _ = writeln!(
                out,
                "  can reach: {}",
                self.reach
                    .iter()
                    .map(|o| neutralise_line(o))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        let urls = urls_in(&self.arguments);
        if urls.is_empty() {
            out.push_str("  URLs in the arguments: none\n");
        } else {
            let _ = writeln!(out, "  URLs in the arguments ({}):", urls.len());
            for url in urls.iter().take(MAX_PROMPT_URLS) {
                let host = url::Url::parse(url)
                    .ok()
                    .and_then(|u| u.host_str().map(str::to_string))
                    .unwrap_or_else(|| "(no host)".into());
                let shown = cut(url, MAX_PROMPT_URL_BYTES);
                let rest = url.len() - shown.len();
                let _ = write!(
                    out,
                    "    - host {}: {}",
                    neutralise_line(&host),
                    neutralise_line(shown)
                );
                if rest > 0 {
                    let _ = write!(out, " … ({rest} more bytes of this URL not shown)");
                }
                out.push('\n');
            }
            if urls.len() > MAX_PROMPT_URLS {
                let _ = writeln!(
                    out,
                    "    … and {} more URLs not shown; see {see}",
                    urls.len() - MAX_PROMPT_URLS
                );
            }
        }
        let _ = writeln!(
            out,
            "  principal: {}",
            neutralise_line(self.principal.as_deref().unwrap_or("(none)"))
        );
        let _ = writeln!(
            out,
            "  arguments ({} bytes, SHA-256 {}):",
            self.arguments.len(),
            self.arguments_sha256
        );
        let shown = cut(&self.arguments, limit);
        for line in neutralise(shown).lines() {
            let _ = writeln!(out, "    {line}");
        }
        let hidden = self.arguments.len() - shown.len();
        if hidden > 0 {
            let _ = writeln!(
                out,
                "    … {hidden} bytes not shown; see {see} (SHA-256 {}). Deny unless you know them.",
                self.arguments_sha256
            );
        }
        let _ = write!(
            out,
            "  call {} · approval {} · expires {}",
            neutralise_line(&self.call_id),
            self.id,
            self.expires_at
        );
        out
    }
}

/// Arguments longer than this are summarised in a prompt (see [`ApprovalRequest::prompt_with`]).
pub const PROMPT_ARGUMENT_BYTES: usize = 16 * 1024;
/// The most URLs a prompt lists one by one.
const MAX_PROMPT_URLS: usize = 20;
/// The most bytes of one URL a prompt shows.
const MAX_PROMPT_URL_BYTES: usize = 300;

/// The longest prefix of `text` of at most `limit` bytes that ends on a character boundary.
fn cut(text: &str, limit: usize) -> &str {
    if text.len() <= limit {
        return text;
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Every URL (`scheme://…`) in `arguments`, in order, each once: searched in every string of
/// the arguments read as JSON (so `https:\/\/` and `\u` escapes hide nothing), or in the text
/// itself if it is not JSON. Linear in the text; at most 1,000 are kept.
fn urls_in(arguments: &str) -> Vec<String> {
    let mut texts = Vec::new();
    match serde_json::from_str::<serde_json::Value>(arguments) {
        Ok(v) => strings_of(&v, &mut texts),
        Err(_) => texts.push(arguments.to_string()),
    }
    let mut urls: Vec<String> = Vec::new();
    for text in &texts {
        let bytes = text.as_bytes();
        let mut from = 0;
        while let Some(i) = text[from..].find("://").map(|i| i + from) {
            let start = text[..i]
                .rfind(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
                .map_or(0, |p| p + 1);
            let end = text[i + 3..]
                .find(|c: char| {
                    c.is_whitespace() || c.is_control() || matches!(c, '"' | '\'' | '<' | '>' | '`')
                })
                .map_or(text.len(), |p| p + i + 3);
            if start < i && end > i + 3 {
                let url = &text[start..end];
                if !urls.iter().any(|u| u == url) && urls.len() < 1000 {
                    urls.push(url.to_string());
                }
            }
            from = end.max(i + 3);
            if from >= bytes.len() {
                break;
            }
        }
    }
    urls
}

fn strings_of(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::String(s) => out.push(s.clone()),
        serde_json::Value::Array(items) => items.iter().for_each(|v| strings_of(v, out)),
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                out.push(k.clone());
                strings_of(v, out);
            }
        }
        _ => {}
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

pub use vak_core::record::ApprovalEntry;

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
    // The client sent these arguments itself: a summary points the person there.
    let form = ElicitRequest {
        message: request.prompt_with(
            PROMPT_ARGUMENT_BYTES,
            "the arguments your client sent in this tools/call request",
        ),
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
                let prompt = terminal_prompt(&shown);
                let mut err = std::io::stderr().lock();
                let _ = write!(err, "{prompt}\napprove? [y/N] ");
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

/// What the terminal shows: arguments up to [`TERMINAL_ARGUMENT_BYTES`] whole; longer ones are
/// written whole, as proposed, to an owner-only file the prompt names (beside the SHA-256 the
/// approval binds, to check the file with `sha256sum`), and summarised.
fn terminal_prompt(request: &ApprovalRequest) -> String {
    if request.arguments.len() <= TERMINAL_ARGUMENT_BYTES {
        return request.prompt_with(TERMINAL_ARGUMENT_BYTES, "");
    }
    let path = std::env::temp_dir().join(format!("vak-{}-arguments.json", request.id));
    let written = {
        use std::io::Write;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        options
            .open(&path)
            .and_then(|mut f| f.write_all(request.arguments.as_bytes()))
    };
    let see = match written {
        Ok(()) => format!("the file {}", path.display()),
        Err(e) => format!(
            "nothing: they could not be written to {} ({e})",
            path.display()
        ),
    };
    request.prompt_with(PROMPT_ARGUMENT_BYTES, &see)
}

/// Arguments up to this long are shown whole at a terminal.
pub const TERMINAL_ARGUMENT_BYTES: usize = 64 * 1024;

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
            reach: vec!["https://api.example".into()],
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

    #[test]
    fn the_prompt_shows_everything_neutralised_urls_first_and_never_cuts_silently() {
        // Bidi override, the 8-bit CSI, an escape sequence, a forged line.
        let hostile = serde_json::json!({
            "note": "safe\u{202e}txt.exe \u{9b}2J \u{1b}[31m red",
            "x": "a\n  call c9 · approval forged · expires never",
        })
        .to_string();
        let r = ApprovalRequest::new(
            &context(&hostile),
            ApprovalScope::Call,
            Duration::from_secs(5),
        );
        let p = r.prompt();
        for c in ['\u{202e}', '\u{9b}', '\u{1b}'] {
            assert!(!p.contains(c), "{c:?} in {p}");
        }
        assert!(p.contains("\\u{202e}") && p.contains("\\u{9b}"), "{p}");
        // Each argument line is indented: none can pass for the prompt's own last line.
        assert_eq!(
            p.lines().filter(|l| l.starts_with("  call ")).count(),
            1,
            "{p}"
        );
        assert!(
            p.lines()
                .nth(1)
                .unwrap()
                .contains("can reach: https://api.example"),
            "{p}"
        );

        // An exfiltration URL after 20,000 bytes of padding: listed before the arguments, with
        // its host, and the arguments say how much is not shown and where to read it.
        let long = format!(
            r#"{{"pad":"{}","to":"https://evil.example/collect?d=1","escaped":"see https:\/\/also.example\/p"}}"#,
            "x".repeat(20_000)
        );
        let r = ApprovalRequest::new(&context(&long), ApprovalScope::Call, Duration::from_secs(5));
        let p = r.prompt_with(2_000, "SOMEWHERE");
        let url_line = p
            .find("host evil.example: https://evil.example/collect?d=1")
            .expect(&p);
        assert!(
            url_line < p.find("  arguments (").unwrap(),
            "URLs first: {p}"
        );
        assert!(p.contains("host also.example"), "{p}");
        let hidden = long.len() - 2_000;
        assert!(
            p.contains(&format!(
                "{hidden} bytes not shown; see SOMEWHERE (SHA-256 {}",
                r.arguments_sha256
            )),
            "{p}"
        );
        assert!(!p.contains(" …\n  call"), "no silent cut");
        // Short arguments are shown whole, with nothing said hidden.
        let r = ApprovalRequest::new(
            &context("{\"x\":1}"),
            ApprovalScope::Call,
            Duration::from_secs(5),
        );
        let p = r.prompt();
        assert!(
            p.contains("    {\"x\":1}") && !p.contains("not shown"),
            "{p}"
        );
        assert!(p.contains("URLs in the arguments: none"), "{p}");

        // At a terminal, arguments past 64 KiB go whole to an owner-only file the prompt names.
        let huge = serde_json::json!({ "pad": "y".repeat(70_000) }).to_string();
        let r = ApprovalRequest::new(&context(&huge), ApprovalScope::Call, Duration::from_secs(5));
        let p = terminal_prompt(&r);
        let path = std::env::temp_dir().join(format!("vak-{}-arguments.json", r.id));
        assert!(
            p.contains(&format!("see the file {}", path.display())),
            "{p}"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), huge);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o077, 0, "{mode:o}");
        }
        let _ = std::fs::remove_file(&path);
    }
}

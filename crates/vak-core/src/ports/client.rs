//! The caller's client as a call sees it: where the guest's log lines go live, and who answers
//! its sampling and elicitation requests. The `client` and `log` brokers ask it; approvals ask it
//! for a person's answer too; `vak serve` and embedders implement it.

use serde_json::Value;
use std::future::Future;
use std::pin::Pin;

/// A boxed future that may move between threads (the shape of `futures::future::BoxFuture`).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The severity of a log line, least severe first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Debug,
    Info,
    Warn,
    Error,
}

impl LogLevel {
    /// The level's name (`debug`, `info`, `warn`, `error`).
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warn => "warn",
            LogLevel::Error => "error",
        }
    }
}

/// A request for a completion, as the host checked it.
#[derive(Debug, Clone, PartialEq)]
pub struct SampleRequest {
    /// `(role, text)`; the role is `user` or `assistant`.
    pub messages: Vec<(String, String)>,
    pub system_prompt: Option<String>,
    pub max_tokens: u32,
}

/// The client's completion.
#[derive(Debug, Clone, PartialEq)]
pub struct SampleReply {
    pub text: String,
    pub model: String,
    pub stop_reason: Option<String>,
}

/// A form for the person, as the host checked it.
#[derive(Debug, Clone, PartialEq)]
pub struct ElicitRequest {
    pub message: String,
    /// A JSON Schema object of flat properties (the client broker checks its shape).
    pub schema: Value,
}

/// What the person did with the form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElicitAction {
    Accept,
    Decline,
    Cancel,
}

/// The person's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ElicitReply {
    pub action: ElicitAction,
    /// The answers when accepted.
    pub content: Option<serde_json::Map<String, Value>>,
}

/// One of the roots (directories, files) the client says the person works in (MCP `roots/list`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    /// A `file://` URI.
    pub uri: String,
    pub name: Option<String>,
}

/// One request to the client, of any kind.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientRequest {
    Sample(SampleRequest),
    Elicit(ElicitRequest),
    ListRoots,
}

impl ClientRequest {
    /// The client capability it needs: `sampling`, `elicitation`, `roots`.
    pub fn capability(&self) -> &'static str {
        match self {
            ClientRequest::Sample(_) => "sampling",
            ClientRequest::Elicit(_) => "elicitation",
            ClientRequest::ListRoots => "roots",
        }
    }
}

/// The client's answer to one [`ClientRequest`], of the same kind.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientAnswer {
    Sample(SampleReply),
    Elicit(ElicitReply),
    Roots(Vec<Root>),
}

/// Why the client did not answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ClientError {
    /// The client did not declare that it answers this kind of request.
    #[error("the client does not support {0}")]
    Unsupported(&'static str),
    /// There is no way back to the client for this call (e.g. a stateless request).
    #[error("the client cannot be asked: {0}")]
    Unavailable(String),
    /// The question is put to the client in a round of its own (an MCP 2026-07-28
    /// input-required result): this round ends here, and the answer comes with the next.
    #[error("put to the client in an input-required round: {0}")]
    Deferred(String),
    /// The client was asked and failed, or answered something unusable.
    #[error("the client's answer failed: {0}")]
    Failed(String),
}

/// The caller's client as one call sees it: where its log lines go live, and who answers its
/// sampling and elicitation requests. `vak serve` gives every MCP call one; an embedder passes its
/// own to `Session::call_with_client`. Answers are checked by the host, not trusted.
pub trait ClientChannel: Send + Sync {
    /// The least severe level the client wants forwarded live; `None` forwards nothing.
    fn log_level(&self) -> Option<LogLevel> {
        None
    }

    /// Forward one log line the guest wrote (already bounded). Must not block: queue it.
    fn log(&self, _level: LogLevel, _message: &str) {}

    /// Who answers for this client in records (an approval's `by`).
    fn answerer(&self) -> String {
        "the caller's client".into()
    }

    /// Ask the client's model for a completion.
    fn sample(
        &self,
        request: SampleRequest,
    ) -> BoxFuture<'static, Result<SampleReply, ClientError>>;

    /// Ask the person to fill in a form.
    fn elicit(
        &self,
        request: ElicitRequest,
    ) -> BoxFuture<'static, Result<ElicitReply, ClientError>>;

    /// Ask the person to approve a call with `form` (an elicitation form of one boolean);
    /// `binding` names exactly what is approved (tool, principal, scope, arguments, grant), the
    /// same on every asking of the same question. By default the form is elicited.
    fn approve(
        &self,
        _binding: &str,
        form: ElicitRequest,
    ) -> BoxFuture<'static, Result<ElicitReply, ClientError>> {
        self.elicit(form)
    }

    /// Ask the client for its roots.
    fn list_roots(&self) -> BoxFuture<'static, Result<Vec<Root>, ClientError>> {
        Box::pin(async { Err(ClientError::Unsupported("roots")) })
    }

    /// Ask several requests together, each under a key the tool chose (unique in the batch): the
    /// answers in the same order, each its own outcome. A channel that can put them to the client
    /// at once (an input-required round) does; by default they are asked one after another.
    fn ask(
        &self,
        requests: Vec<(String, ClientRequest)>,
    ) -> BoxFuture<'static, Vec<Result<ClientAnswer, ClientError>>> {
        let asked: Vec<_> = requests
            .into_iter()
            .map(
                |(_, request)| -> BoxFuture<'static, Result<ClientAnswer, ClientError>> {
                    match request {
                        ClientRequest::Sample(r) => {
                            let f = self.sample(r);
                            Box::pin(async move { f.await.map(ClientAnswer::Sample) })
                        }
                        ClientRequest::Elicit(r) => {
                            let f = self.elicit(r);
                            Box::pin(async move { f.await.map(ClientAnswer::Elicit) })
                        }
                        ClientRequest::ListRoots => {
                            let f = self.list_roots();
                            Box::pin(async move { f.await.map(ClientAnswer::Roots) })
                        }
                    }
                },
            )
            .collect();
        Box::pin(async move {
            let mut answers = Vec::with_capacity(asked.len());
            for f in asked {
                answers.push(f.await);
            }
            answers
        })
    }

    /// Whether this channel stopped the call to put a question to the client in a round of its
    /// own (MCP 2026-07-28 input-required results): what it asks, e.g. `elicitation-2`. The
    /// call then ends as `input_required`, not as cancelled.
    fn suspended(&self) -> Option<String> {
        None
    }
}

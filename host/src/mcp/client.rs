//! The MCP client of one call, as the call's [`ClientChannel`]: guest log lines go out as
//! `notifications/message` at the level the client asked for, and a tool's sampling and
//! elicitation requests become `sampling/createMessage` and `elicitation/create` requests to
//! the client, when it declared that it answers them.
//!
//! Only the handshake era has a way back to the client in the middle of a call. A 2026-07-28
//! request's sampling and elicitation go through input-required rounds instead (`super::rounds`,
//! which keeps this channel for log lines); its per-request log level
//! (`io.modelcontextprotocol/logLevel` in `_meta`) is honoured.
// Sampling and logging are deprecated by SEP-2577 for the 2026-07-28 revision, and still part of
// the 2025-11-25 one that clients speak today.
#![allow(deprecated)]

use crate::capabilities::client::{
    ClientChannel, ClientError, ElicitAction, ElicitReply, ElicitRequest, LogLevel, Root,
    SampleReply, SampleRequest,
};
use futures::future::BoxFuture;
use rmcp::model::{
    CreateMessageRequestParams, ElicitRequestParams, ElicitResult, ElicitationAction,
    ListRootsResult, LoggingLevel, LoggingMessageNotificationParam,
};
use rmcp::service::{Peer, RoleServer};
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// The least severe guest level an MCP level lets through.
pub(crate) fn min_level(level: LoggingLevel) -> LogLevel {
    match level {
        LoggingLevel::Debug => LogLevel::Debug,
        LoggingLevel::Info | LoggingLevel::Notice => LogLevel::Info,
        LoggingLevel::Warning => LogLevel::Warn,
        _ => LogLevel::Error,
    }
}

fn mcp_level(level: LogLevel) -> LoggingLevel {
    match level {
        LogLevel::Debug => LoggingLevel::Debug,
        LogLevel::Info => LoggingLevel::Info,
        LogLevel::Warn => LoggingLevel::Warning,
        LogLevel::Error => LoggingLevel::Error,
    }
}

/// The channel of one `tools/call`.
pub(crate) struct McpChannel {
    peer: Peer<RoleServer>,
    level: Option<LogLevel>,
    /// The request speaks a revision without server requests during a call (2026-07-28).
    stateless: bool,
    /// Log lines, in order, to the task that sends them (see [`McpChannel::new`]).
    logs: Option<mpsc::UnboundedSender<(LogLevel, String)>>,
}

impl McpChannel {
    /// A channel to `peer` forwarding lines of `level` and above for tool `tool`; the returned
    /// task sends them in order and ends once the channel is dropped and every line is out. A
    /// `stateless` request's channel asks the client nothing.
    pub(crate) fn new(
        peer: Peer<RoleServer>,
        level: Option<LogLevel>,
        tool: &str,
        stateless: bool,
    ) -> (McpChannel, Option<tokio::task::JoinHandle<()>>) {
        let Some(level) = level else {
            return (
                McpChannel {
                    peer,
                    level: None,
                    stateless,
                    logs: None,
                },
                None,
            );
        };
        let (tx, mut rx) = mpsc::unbounded_channel::<(LogLevel, String)>();
        let sender = peer.clone();
        let logger = tool.to_string();
        let task = tokio::spawn(async move {
            while let Some((level, line)) = rx.recv().await {
                let param: Result<LoggingMessageNotificationParam, _> =
                    serde_json::from_value(json!({
                        "level": mcp_level(level),
                        "logger": logger,
                        "data": line,
                    }));
                if let Ok(param) = param
                    && let Err(e) = sender.notify_logging_message(param).await
                {
                    tracing::debug!(error = %e, "a log notification was not sent");
                    return;
                }
            }
        });
        (
            McpChannel {
                peer,
                level: Some(level),
                stateless,
                logs: Some(tx),
            },
            Some(task),
        )
    }

    /// Whether the request speaks a revision without server requests during a call.
    pub(crate) fn stateless(&self) -> bool {
        self.stateless
    }

    /// Whether the client declared `what` (`sampling`, `elicitation`, `roots`) at its handshake.
    fn declared(&self, what: &'static str) -> Result<(), ClientError> {
        let info = self.peer.peer_info().filter(|_| !self.stateless);
        let Some(info) = info else {
            return Err(ClientError::Unavailable(
                "this request came without a handshake (MCP 2026-07-28), which allows no requests \
                 from the server during a call"
                    .into(),
            ));
        };
        let caps = &info.capabilities;
        let declared = match what {
            "sampling" => caps.sampling.is_some(),
            "roots" => caps.roots.is_some(),
            _ => caps.elicitation.is_some(),
        };
        if declared {
            Ok(())
        } else {
            Err(ClientError::Unsupported(what))
        }
    }
}

impl ClientChannel for McpChannel {
    fn answerer(&self) -> String {
        match self.peer.peer_info() {
            Some(info) => format!("the user of MCP client {:?}", info.client_info.name),
            None => "the MCP client".into(),
        }
    }

    fn log_level(&self) -> Option<LogLevel> {
        self.level
    }

    fn log(&self, level: LogLevel, message: &str) {
        if let Some(tx) = &self.logs {
            // The receiver lives as long as the call; a send fails only once the client is gone.
            let _ = tx.send((level, message.to_string()));
        }
    }

    fn sample(
        &self,
        request: SampleRequest,
    ) -> BoxFuture<'static, Result<SampleReply, ClientError>> {
        let checked = self.declared("sampling");
        let peer = self.peer.clone();
        Box::pin(async move {
            checked?;
            let params: CreateMessageRequestParams =
                serde_json::from_value(sample_params(&request))
                    .map_err(|e| ClientError::Failed(format!("cannot build the request: {e}")))?;
            let result = peer
                .create_message(params)
                .await
                .map_err(|e| ClientError::Failed(e.to_string()))?;
            let result = serde_json::to_value(&result)
                .map_err(|e| ClientError::Failed(format!("cannot read the answer: {e}")))?;
            sample_reply(&result)
        })
    }

    fn elicit(
        &self,
        request: ElicitRequest,
    ) -> BoxFuture<'static, Result<ElicitReply, ClientError>> {
        let checked = self.declared("elicitation");
        let peer = self.peer.clone();
        Box::pin(async move {
            checked?;
            let params: ElicitRequestParams = serde_json::from_value(elicit_params(&request))
                .map_err(|e| ClientError::Failed(format!("the form is not an MCP form: {e}")))?;
            let result = peer
                .create_elicitation(params)
                .await
                .map_err(|e| ClientError::Failed(e.to_string()))?;
            elicit_reply(result)
        })
    }

    fn list_roots(&self) -> BoxFuture<'static, Result<Vec<Root>, ClientError>> {
        let checked = self.declared("roots");
        let peer = self.peer.clone();
        Box::pin(async move {
            checked?;
            let result = peer
                .list_roots()
                .await
                .map_err(|e| ClientError::Failed(e.to_string()))?;
            Ok(roots_reply(result))
        })
    }
}

/// A `roots/list` result as the tool's roots.
pub(super) fn roots_reply(result: ListRootsResult) -> Vec<Root> {
    result
        .roots
        .into_iter()
        .map(|r| Root {
            uri: r.uri,
            name: r.name,
        })
        .collect()
}

/// The `sampling/createMessage` parameters of `request` (asked now, or in a round).
pub(super) fn sample_params(request: &SampleRequest) -> Value {
    let messages: Vec<Value> = request
        .messages
        .iter()
        .map(|(role, text)| json!({ "role": role, "content": { "type": "text", "text": text } }))
        .collect();
    let mut params = json!({ "messages": messages, "maxTokens": request.max_tokens });
    if let Some(system) = &request.system_prompt {
        params["systemPrompt"] = json!(system);
    }
    params
}

/// A `CreateMessageResult` (as JSON) as the tool's reply.
pub(super) fn sample_reply(result: &Value) -> Result<SampleReply, ClientError> {
    Ok(SampleReply {
        text: completion_text(&result["content"])?,
        model: result["model"].as_str().unwrap_or_default().to_string(),
        stop_reason: result["stopReason"].as_str().map(str::to_string),
    })
}

/// The `elicitation/create` parameters (a form) of `request`.
pub(super) fn elicit_params(request: &ElicitRequest) -> Value {
    json!({
        "mode": "form",
        "message": request.message,
        "requestedSchema": request.schema,
    })
}

/// An elicitation result as the tool's reply.
pub(super) fn elicit_reply(result: ElicitResult) -> Result<ElicitReply, ClientError> {
    let content = match result.content {
        None | Some(Value::Null) => None,
        Some(Value::Object(map)) => Some(map),
        Some(_) => {
            return Err(ClientError::Failed(
                "the answers are not a JSON object".into(),
            ));
        }
    };
    Ok(ElicitReply {
        action: match result.action {
            ElicitationAction::Accept => ElicitAction::Accept,
            ElicitationAction::Decline => ElicitAction::Decline,
            // `cancel`, and any action a later revision adds: nothing was agreed to.
            _ => ElicitAction::Cancel,
        },
        content,
    })
}

/// The text of a completion: one text block, or the text blocks of a list of them.
fn completion_text(content: &Value) -> Result<String, ClientError> {
    let blocks: Vec<&Value> = match content {
        Value::Array(items) => items.iter().collect(),
        other => vec![other],
    };
    let mut text = String::new();
    for block in blocks {
        match (block["type"].as_str(), block["text"].as_str()) {
            (Some("text"), Some(t)) => text.push_str(t),
            (kind, _) => {
                return Err(ClientError::Failed(format!(
                    "the completion holds {} content; a tool receives text only",
                    kind.unwrap_or("untyped")
                )));
            }
        }
    }
    Ok(text)
}

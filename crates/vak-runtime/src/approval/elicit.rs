//! The call's client as approver: asked with an MCP elicitation form of one boolean.

use super::Answer;
use super::request::{ApprovalRequest, PROMPT_ARGUMENT_BYTES};
use futures::future::BoxFuture;
use serde_json::json;
use std::sync::Arc;
use vak_core::ports::client::{ClientChannel, ClientError, ElicitAction, ElicitRequest};

/// Ask the call's client with an elicitation form of one boolean.
pub(super) fn elicit_approval(
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
    let asked = client.approve(&request.binding, form);
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
            Err(ClientError::Deferred(reason)) => Answer::Deferred { reason },
            Err(e @ (ClientError::Unsupported(_) | ClientError::Unavailable(_))) => {
                Answer::Unavailable {
                    reason: e.to_string(),
                }
            }
            Err(e) => request.deny(by, e.to_string()),
        }
    })
}

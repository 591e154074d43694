//! `vak:tool/client`: a tool asks the caller's client for a completion from its model (sampling)
//! or for a person's answer to a form (elicitation).
//!
//! The host stands between the two sides as everywhere else: the policy must grant the request
//! (`client.requests`), the request is checked before it leaves (roles, sizes, a form schema of
//! the flat shape MCP allows), the answer is checked before the guest sees it (text only, within
//! the size limit, form answers against the form's own schema), the wait ends before the call's
//! deadline, and every exchange leaves a receipt with both sides. A completion is a model's
//! output: the evidence check refuses to let it back an `observed` or `cited` item.
//!
//! Who answers is the embedder's [`ClientChannel`] (a port the approvals use too); `vak serve` gives every MCP call one bound
//! to its connection, or, for a stateless 2026-07-28 request, one that answers from the client's
//! answers of earlier rounds (`mcp::rounds`). A call without one (the CLI) gets a typed refusal.

mod forms;
pub mod grant;

use super::{Broker, Capability, CapabilityBroker, HasBroker};
use crate::bindings::vak::tool::client::{
    ElicitationAction, ElicitationReply, Host, SamplingReply, SamplingRequest, add_to_linker,
};
use crate::bindings::vak::tool::types::CapabilityError;
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use wasmtime::component::{HasSelf, Linker};

pub use forms::{check_answers, check_form};
pub use vak_core::ports::client::{
    ClientChannel, ClientError, ElicitAction, ElicitReply, ElicitRequest, LogLevel, SampleReply,
    SampleRequest,
};

/// Most messages in one sampling request.
pub const MAX_MESSAGES: usize = 64;
/// Most bytes of text in one request (all messages and the system prompt), and in one answer.
pub const MAX_TEXT_BYTES: usize = 256 * 1024;
/// Most properties in one form.
pub const MAX_FORM_FIELDS: usize = 64;
/// How long before the call's deadline the host gives up waiting, so the refusal is on record.
const DEADLINE_MARGIN: Duration = Duration::from_millis(100);

/// The `client` broker.
pub struct Client;

impl<T: HasBroker> CapabilityBroker<T> for Client {
    fn capability(&self) -> Capability {
        Capability::Client
    }

    fn link(&self, linker: &mut Linker<T>) -> wasmtime::Result<()> {
        add_to_linker::<T, HasSelf<Broker>>(linker, T::broker)
    }
}

fn from_client(e: ClientError) -> CapabilityError {
    match e {
        ClientError::Unsupported(_) | ClientError::Unavailable(_) => {
            CapabilityError::Denied(e.to_string())
        }
        ClientError::Failed(_) => CapabilityError::Failed(e.to_string()),
    }
}

impl Broker {
    /// The grant of request `what`, and the channel to ask on.
    fn client_for(
        &self,
        what: &'static str,
    ) -> Result<std::sync::Arc<dyn ClientChannel>, CapabilityError> {
        let grant = self.authorize(Capability::Client)?;
        if !grant.may_ask(what) {
            return Err(CapabilityError::Denied(format!(
                "the policy does not let this tool send the client `{what}` requests"
            )));
        }
        self.client.clone().ok_or_else(|| {
            CapabilityError::Denied(
                "this call has no client to ask (it did not come over a connection that can answer)"
                    .into(),
            )
        })
    }

    /// How long the host waits for the client: until shortly before the call's deadline.
    pub(crate) fn client_wait(&self) -> Duration {
        self.child.as_ref().map_or(Duration::from_secs(60), |l| {
            l.deadline()
                .saturating_duration_since(Instant::now())
                .saturating_sub(DEADLINE_MARGIN)
        })
    }

    fn client_receipt(
        &self,
        operation: &str,
        request: Value,
        outcome: &Result<Value, CapabilityError>,
    ) -> String {
        match outcome {
            Ok(v) => self.receipts.issue(
                Capability::Client,
                operation,
                request,
                v.clone(),
                true,
                None,
            ),
            Err(e) => {
                // How the client broker has always written its refusals: the error as debugged.
                let why = json!({ "refused": format!("{e:?}") });
                self.refused_with(Capability::Client, operation, request, why, e.clone());
                String::new()
            }
        }
    }

    async fn sample_inner(&self, request: &SampleRequest) -> Result<SampleReply, CapabilityError> {
        let channel = self.client_for("sampling")?;
        if request.messages.is_empty() || request.messages.len() > MAX_MESSAGES {
            return Err(CapabilityError::Invalid(format!(
                "a sampling request holds 1 to {MAX_MESSAGES} messages"
            )));
        }
        if let Some((role, _)) = request
            .messages
            .iter()
            .find(|(r, _)| r != "user" && r != "assistant")
        {
            return Err(CapabilityError::Invalid(format!(
                "role {role:?} is neither `user` nor `assistant`"
            )));
        }
        let size: usize = request.messages.iter().map(|(_, t)| t.len()).sum::<usize>()
            + request.system_prompt.as_ref().map_or(0, String::len);
        if size > MAX_TEXT_BYTES {
            return Err(CapabilityError::Invalid(format!(
                "the request holds {size} bytes of text; at most {MAX_TEXT_BYTES}"
            )));
        }
        if request.max_tokens == 0 {
            return Err(CapabilityError::Invalid(
                "max-tokens must be at least 1".into(),
            ));
        }
        let answer = tokio::time::timeout(self.client_wait(), channel.sample(request.clone()))
            .await
            .map_err(|_| {
                CapabilityError::Failed(
                    "the client did not answer before the call's deadline".into(),
                )
            })?
            .map_err(from_client)?;
        if answer.text.len() > MAX_TEXT_BYTES {
            return Err(CapabilityError::Failed(format!(
                "the client's completion is {} bytes; at most {MAX_TEXT_BYTES}",
                answer.text.len()
            )));
        }
        Ok(answer)
    }

    async fn elicit_inner(
        &self,
        message: &str,
        schema: &str,
    ) -> Result<ElicitReply, CapabilityError> {
        let channel = self.client_for("elicitation")?;
        if message.len() > MAX_TEXT_BYTES {
            return Err(CapabilityError::Invalid("the message is too long".into()));
        }
        let schema: Value = serde_json::from_str(schema)
            .map_err(|e| CapabilityError::Invalid(format!("the form schema is not JSON: {e}")))?;
        check_form(&schema).map_err(CapabilityError::Invalid)?;
        let request = ElicitRequest {
            message: message.to_string(),
            schema: schema.clone(),
        };
        let answer = tokio::time::timeout(self.client_wait(), channel.elicit(request))
            .await
            .map_err(|_| {
                CapabilityError::Failed(
                    "the person did not answer before the call's deadline".into(),
                )
            })?
            .map_err(from_client)?;
        match (&answer.action, &answer.content) {
            (ElicitAction::Accept, Some(content)) => {
                check_answers(&schema, content).map_err(|e| {
                    CapabilityError::Failed(format!("the client's answer is refused: {e}"))
                })?
            }
            (ElicitAction::Accept, None) => {
                // An accepted form with nothing filled in is valid only if nothing is required.
                check_answers(&schema, &serde_json::Map::new()).map_err(|e| {
                    CapabilityError::Failed(format!("the client's answer is refused: {e}"))
                })?
            }
            (_, Some(_)) => {
                return Err(CapabilityError::Failed(
                    "the client sent answers with a declined or cancelled form".into(),
                ));
            }
            (_, None) => {}
        }
        Ok(answer)
    }
}

impl Host for Broker {
    async fn sample(&mut self, request: SamplingRequest) -> Result<SamplingReply, CapabilityError> {
        if let Some(e) = self.out_of_receipts() {
            return Err(e);
        }
        // A secret the tool got hold of is not sent to the client's model.
        let mut redacted = 0;
        let mut clean = |text: String| {
            let (out, n) = self.scrub.redact(&text);
            redacted += n.replaced;
            out
        };
        let request = SampleRequest {
            messages: request
                .messages
                .into_iter()
                .map(|m| (m.role, clean(m.text)))
                .collect(),
            system_prompt: request.system_prompt.map(&mut clean),
            max_tokens: request.max_tokens,
        };
        let answer = self.sample_inner(&request).await;
        let mut recorded = json!({
            "messages": request.messages.iter().map(|(role, text)| json!({ "role": role, "text": text })).collect::<Vec<_>>(),
            "system_prompt": request.system_prompt,
            "max_tokens": request.max_tokens,
        });
        if redacted > 0 {
            recorded["redacted"] = json!(redacted);
        }
        let outcome = answer
            .as_ref()
            .map(|a| json!({ "text": a.text, "model": a.model, "stop_reason": a.stop_reason }))
            .map_err(Clone::clone);
        let receipt = self.client_receipt("sample", recorded, &outcome);
        let answer = answer?;
        // Nor handed to the guest from the model's answer (a model that was told the value).
        Ok(SamplingReply {
            text: self.scrub.redact(&answer.text).0,
            model: answer.model,
            stop_reason: answer.stop_reason,
            receipt,
        })
    }

    async fn elicit(
        &mut self,
        message: String,
        schema: String,
    ) -> Result<ElicitationReply, CapabilityError> {
        if let Some(e) = self.out_of_receipts() {
            return Err(e);
        }
        // Nor shown to the person in a form.
        let (message, in_message) = self.scrub.redact(&message);
        let (schema, in_schema) = self.scrub.redact(&schema);
        let answer = self.elicit_inner(&message, &schema).await;
        let mut recorded = json!({
            "message": message,
            "schema": serde_json::from_str::<Value>(&schema).unwrap_or(Value::String(schema.clone())),
        });
        let redacted = in_message.replaced + in_schema.replaced;
        if redacted > 0 {
            recorded["redacted"] = json!(redacted);
        }
        let action = |a: ElicitAction| match a {
            ElicitAction::Accept => "accept",
            ElicitAction::Decline => "decline",
            ElicitAction::Cancel => "cancel",
        };
        let outcome = answer
            .as_ref()
            .map(|a| json!({ "action": action(a.action), "content": a.content }))
            .map_err(Clone::clone);
        let receipt = self.client_receipt("elicit", recorded, &outcome);
        let answer = answer?;
        Ok(ElicitationReply {
            action: match answer.action {
                ElicitAction::Accept => ElicitationAction::Accept,
                ElicitAction::Decline => ElicitationAction::Decline,
                ElicitAction::Cancel => ElicitationAction::Cancel,
            },
            // Nor from the person's answers.
            content: answer.content.map(|c| {
                let mut c = Value::Object(c);
                self.scrub.redact_json(&mut c);
                c.to_string()
            }),
            receipt,
        })
    }
}

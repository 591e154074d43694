//! `vak:tool/client`: a tool asks the caller's client for a completion from its model (sampling),
//! for a person's answer to a form (elicitation), or for the roots the person works in (roots);
//! one at a time, or several together under keys of its choosing (`ask`).
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

mod exchange;
mod forms;
pub mod grant;

use super::{Broker, Capability, CapabilityBroker, HasBroker};
use crate::bindings::vak::tool::client::{
    ElicitationAction, ElicitationReply, Host, InputAnswer, InputRequest, KeyedRequest, RootsReply,
    SamplingReply, SamplingRequest, add_to_linker,
};
use crate::bindings::vak::tool::types::CapabilityError;
use exchange::{Keys, Outgoing};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use wasmtime::component::{HasSelf, Linker};

pub use forms::{check_answers, check_form};
pub use vak_core::ports::client::{
    ClientAnswer, ClientChannel, ClientError, ClientRequest, ElicitAction, ElicitReply,
    ElicitRequest, LogLevel, Root, SampleReply, SampleRequest,
};

/// Most messages in one sampling request.
pub const MAX_MESSAGES: usize = 64;
/// Most bytes of text in one request (all messages and the system prompt), and in one answer.
pub const MAX_TEXT_BYTES: usize = 256 * 1024;
/// Most properties in one form.
pub const MAX_FORM_FIELDS: usize = 64;
/// Most requests in one `ask`.
pub const MAX_BATCH: usize = 16;
/// Most roots in one answer, and bytes of one root's URI or name.
pub const MAX_ROOTS: usize = 256;
pub const MAX_ROOT_BYTES: usize = 4096;
/// How long before the call's deadline the host gives up waiting, so the refusal is on record.
const DEADLINE_MARGIN: Duration = Duration::from_millis(100);

/// The `client` broker.
pub struct Client;

impl<T: HasBroker> CapabilityBroker<T> for Client {
    fn link(&self, linker: &mut Linker<T>) -> wasmtime::Result<()> {
        add_to_linker::<T, HasSelf<Broker>>(linker, T::broker)
    }
}

fn from_client(e: ClientError) -> CapabilityError {
    match e {
        ClientError::Unsupported(_) | ClientError::Unavailable(_) | ClientError::Deferred(_) => {
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

    /// A sampling request, scrubbed and checked.
    fn outgoing_sample(&self, request: SamplingRequest) -> Outgoing {
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
        let mut recorded = json!({
            "messages": request.messages.iter().map(|(role, text)| json!({ "role": role, "text": text })).collect::<Vec<_>>(),
            "system_prompt": request.system_prompt,
            "max_tokens": request.max_tokens,
        });
        if redacted > 0 {
            recorded["redacted"] = json!(redacted);
        }
        Outgoing {
            operation: "sample",
            recorded,
            request: check_sample(&request).map(|()| ClientRequest::Sample(request)),
        }
    }

    /// A form, scrubbed and checked.
    fn outgoing_elicit(&self, message: &str, schema: &str) -> Outgoing {
        // Nor shown to the person in a form.
        let (message, in_message) = self.scrub.redact(message);
        let (schema, in_schema) = self.scrub.redact(schema);
        let mut recorded = json!({
            "message": message,
            "schema": serde_json::from_str::<Value>(&schema).unwrap_or(Value::String(schema.clone())),
        });
        let redacted = in_message.replaced + in_schema.replaced;
        if redacted > 0 {
            recorded["redacted"] = json!(redacted);
        }
        Outgoing {
            operation: "elicit",
            recorded,
            request: check_elicit(message, &schema).map(ClientRequest::Elicit),
        }
    }

    fn outgoing_roots(&self) -> Outgoing {
        Outgoing {
            operation: "roots",
            recorded: json!({}),
            request: Ok(ClientRequest::ListRoots),
        }
    }

    /// The tool's view of an answer: a secret the client's side was told is not handed on.
    fn sampling_reply(&self, answer: SampleReply, receipt: String) -> SamplingReply {
        SamplingReply {
            text: self.scrub.redact(&answer.text).0,
            model: answer.model,
            stop_reason: answer.stop_reason,
            receipt,
        }
    }

    fn elicitation_reply(&self, answer: ElicitReply, receipt: String) -> ElicitationReply {
        ElicitationReply {
            action: match answer.action {
                ElicitAction::Accept => ElicitationAction::Accept,
                ElicitAction::Decline => ElicitationAction::Decline,
                ElicitAction::Cancel => ElicitationAction::Cancel,
            },
            content: answer.content.map(|c| {
                let mut c = Value::Object(c);
                self.scrub.redact_json(&mut c);
                c.to_string()
            }),
            receipt,
        }
    }
}

/// The checks of a sampling request before it leaves.
fn check_sample(request: &SampleRequest) -> Result<(), CapabilityError> {
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
    Ok(())
}

/// The checks of a form before it leaves.
fn check_elicit(message: String, schema: &str) -> Result<ElicitRequest, CapabilityError> {
    if message.len() > MAX_TEXT_BYTES {
        return Err(CapabilityError::Invalid("the message is too long".into()));
    }
    let schema: Value = serde_json::from_str(schema)
        .map_err(|e| CapabilityError::Invalid(format!("the form schema is not JSON: {e}")))?;
    check_form(&schema).map_err(CapabilityError::Invalid)?;
    Ok(ElicitRequest { message, schema })
}

/// One outcome of a batch as the tool sees it, with its receipt.
type Delivered = (Result<ClientAnswer, CapabilityError>, String);

impl Host for Broker {
    async fn sample(&mut self, request: SamplingRequest) -> Result<SamplingReply, CapabilityError> {
        if let Some(e) = self.out_of_receipts() {
            return Err(e);
        }
        let outgoing = self.outgoing_sample(request);
        match self.exchange(Keys::Channel, vec![outgoing]).await.pop() {
            Some((Ok(ClientAnswer::Sample(a)), receipt)) => Ok(self.sampling_reply(a, receipt)),
            other => Err(exchange::unexpected(other)),
        }
    }

    async fn elicit(
        &mut self,
        message: String,
        schema: String,
    ) -> Result<ElicitationReply, CapabilityError> {
        if let Some(e) = self.out_of_receipts() {
            return Err(e);
        }
        let outgoing = self.outgoing_elicit(&message, &schema);
        match self.exchange(Keys::Channel, vec![outgoing]).await.pop() {
            Some((Ok(ClientAnswer::Elicit(a)), receipt)) => Ok(self.elicitation_reply(a, receipt)),
            other => Err(exchange::unexpected(other)),
        }
    }

    async fn list_roots(&mut self) -> Result<RootsReply, CapabilityError> {
        if let Some(e) = self.out_of_receipts() {
            return Err(e);
        }
        let outgoing = self.outgoing_roots();
        match self.exchange(Keys::Channel, vec![outgoing]).await.pop() {
            Some((Ok(ClientAnswer::Roots(roots)), receipt)) => {
                Ok(exchange::roots_reply(roots, receipt))
            }
            other => Err(exchange::unexpected(other)),
        }
    }

    async fn ask(
        &mut self,
        requests: Vec<KeyedRequest>,
    ) -> Result<Vec<Result<InputAnswer, CapabilityError>>, CapabilityError> {
        if let Some(e) = self.out_of_receipts() {
            return Err(e);
        }
        let keys = match exchange::check_keys(&requests) {
            Ok(keys) => keys,
            Err(e) => {
                let asked: Vec<&str> = requests
                    .iter()
                    .take(MAX_BATCH + 1)
                    .map(|r| r.key.as_str())
                    .collect();
                let request = json!({ "keys": asked, "count": requests.len() });
                return Err(self.refused(Capability::Client, "ask", request, e));
            }
        };
        let outgoing = requests
            .into_iter()
            .map(|r| match r.request {
                InputRequest::Sample(s) => self.outgoing_sample(s),
                InputRequest::Elicit(f) => self.outgoing_elicit(&f.message, &f.schema),
                InputRequest::Roots => self.outgoing_roots(),
            })
            .collect();
        let answers = self.exchange(Keys::Tool(keys), outgoing).await;
        Ok(answers
            .into_iter()
            .map(|(answer, receipt)| {
                answer.map(|a| match a {
                    ClientAnswer::Sample(a) => {
                        InputAnswer::Sampled(self.sampling_reply(a, receipt))
                    }
                    ClientAnswer::Elicit(a) => {
                        InputAnswer::Elicited(self.elicitation_reply(a, receipt))
                    }
                    ClientAnswer::Roots(r) => InputAnswer::Roots(exchange::roots_reply(r, receipt)),
                })
            })
            .collect())
    }
}

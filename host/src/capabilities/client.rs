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
//! Who answers is the embedder's [`ClientChannel`]; `vak serve` gives every MCP call one bound
//! to its connection. A call without one (the CLI, a stateless MCP request) gets a typed refusal.

use super::{Broker, Capability, Refusal};
use crate::dispatch::bindings::vak::tool::client::{
    ElicitationAction, ElicitationReply, Host, SamplingReply, SamplingRequest,
};
use crate::dispatch::bindings::vak::tool::types::CapabilityError;
use futures::future::BoxFuture;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// Most messages in one sampling request.
pub const MAX_MESSAGES: usize = 64;
/// Most bytes of text in one request (all messages and the system prompt), and in one answer.
pub const MAX_TEXT_BYTES: usize = 256 * 1024;
/// Most properties in one form.
pub const MAX_FORM_FIELDS: usize = 64;
/// How long before the call's deadline the host gives up waiting, so the refusal is on record.
const DEADLINE_MARGIN: Duration = Duration::from_millis(100);

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
    /// A JSON Schema object of flat properties (see [`check_form`]).
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

/// Why the client did not answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ClientError {
    /// The client did not declare that it answers this kind of request.
    #[error("the client does not support {0}")]
    Unsupported(&'static str),
    /// There is no way back to the client for this call (e.g. a stateless request).
    #[error("the client cannot be asked: {0}")]
    Unavailable(String),
    /// The client was asked and failed, or answered something unusable.
    #[error("the client's answer failed: {0}")]
    Failed(String),
}

/// The caller's client as one call sees it: where its log lines go live, and who answers its
/// sampling and elicitation requests. `vak serve` gives every MCP call one; an embedder passes its
/// own to [`crate::Session::call_with_client`]. Answers are checked by the host, not trusted.
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
}

/// Check a form schema: an object whose properties are strings, numbers, integers, booleans or
/// arrays of enumerated strings, the flat shape MCP elicitation allows (so that a client can
/// render it and the host can check the answers). `Err` says what is wrong.
pub fn check_form(schema: &Value) -> Result<(), String> {
    let obj = schema
        .as_object()
        .ok_or("the form schema is not a JSON object")?;
    if obj.get("type") != Some(&json!("object")) {
        return Err("the form schema must have `\"type\": \"object\"`".into());
    }
    let props = obj
        .get("properties")
        .and_then(Value::as_object)
        .ok_or("the form schema has no `properties` object")?;
    if props.len() > MAX_FORM_FIELDS {
        return Err(format!(
            "the form has {} fields; at most {MAX_FORM_FIELDS}",
            props.len()
        ));
    }
    for (name, def) in props {
        field_kind(def).map_err(|e| format!("field {name:?}: {e}"))?;
    }
    if let Some(required) = obj.get("required") {
        let list = required.as_array().ok_or("`required` is not an array")?;
        for r in list {
            let r = r.as_str().ok_or("`required` holds a non-string")?;
            if !props.contains_key(r) {
                return Err(format!("`required` names {r:?}, which is not a field"));
            }
        }
    }
    Ok(())
}

/// What one form field accepts.
enum FieldKind {
    String(Option<Vec<String>>),
    Number,
    Integer,
    Boolean,
    /// An array of strings from this set.
    Choices(Vec<String>),
}

/// The allowed values of an enumeration written as `enum` or as `oneOf`/`anyOf` of `const`s.
fn choices(def: &serde_json::Map<String, Value>) -> Result<Option<Vec<String>>, String> {
    let strings = |list: &Vec<Value>, f: &dyn Fn(&Value) -> Option<String>| {
        list.iter()
            .map(|v| f(v).ok_or("an enumerated value is not a string".to_string()))
            .collect::<Result<Vec<_>, _>>()
    };
    if let Some(Value::Array(list)) = def.get("enum") {
        return strings(list, &|v| v.as_str().map(str::to_string)).map(Some);
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(Value::Array(list)) = def.get(key) {
            let f = |v: &Value| v.get("const").and_then(Value::as_str).map(str::to_string);
            return strings(list, &f).map(Some);
        }
    }
    Ok(None)
}

fn field_kind(def: &Value) -> Result<FieldKind, String> {
    let def = def.as_object().ok_or("the definition is not an object")?;
    match def.get("type").and_then(Value::as_str) {
        Some("string") => Ok(FieldKind::String(choices(def)?)),
        Some("number") => Ok(FieldKind::Number),
        Some("integer") => Ok(FieldKind::Integer),
        Some("boolean") => Ok(FieldKind::Boolean),
        Some("array") => {
            let items = def
                .get("items")
                .and_then(Value::as_object)
                .ok_or("an array field needs `items`")?;
            match choices(items)? {
                Some(c) => Ok(FieldKind::Choices(c)),
                None => Err("an array field's items must enumerate their strings".into()),
            }
        }
        Some(other) => Err(format!(
            "type {other:?} is not a form type (string, number, integer, boolean, array)"
        )),
        None => Err("the definition has no `type`".into()),
    }
}

/// Check the person's answers against the form: only its fields, each of its type and within
/// its choices, every required field present. `Err` names the first problem.
pub fn check_answers(
    schema: &Value,
    answers: &serde_json::Map<String, Value>,
) -> Result<(), String> {
    let empty = serde_json::Map::new();
    let props = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    for (name, value) in answers {
        let def = props
            .get(name)
            .ok_or_else(|| format!("{name:?} is not a field of the form"))?;
        let ok = match field_kind(def)? {
            FieldKind::String(None) => value.is_string(),
            FieldKind::String(Some(c)) => value.as_str().is_some_and(|s| c.iter().any(|x| x == s)),
            FieldKind::Number => value.is_number(),
            FieldKind::Integer => value.is_i64() || value.is_u64(),
            FieldKind::Boolean => value.is_boolean(),
            FieldKind::Choices(c) => value.as_array().is_some_and(|a| {
                a.iter()
                    .all(|v| v.as_str().is_some_and(|s| c.iter().any(|x| x == s)))
            }),
        };
        if !ok {
            return Err(format!("the answer to {name:?} does not fit its field"));
        }
    }
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for r in required.iter().filter_map(Value::as_str) {
            if !answers.contains_key(r) {
                return Err(format!("the required field {r:?} is not answered"));
            }
        }
    }
    Ok(())
}

fn refusal(r: Refusal) -> CapabilityError {
    match r {
        Refusal::Denied(m) => CapabilityError::Denied(m),
        Refusal::Revoked(m) => CapabilityError::Revoked(m),
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
        let grant = self.authorize(Capability::Client).map_err(refusal)?;
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
            l.deadline
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
        let (outcome, ok) = match outcome {
            Ok(v) => (v.clone(), true),
            Err(e) => (json!({ "refused": format!("{e:?}") }), false),
        };
        self.receipts
            .issue(
                &self.call_id,
                Capability::Client,
                operation,
                request,
                outcome,
                ok,
            )
            .unwrap_or_default()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn form() -> Value {
        json!({
            "type": "object",
            "properties": {
                "name": { "type": "string", "default": "John Doe" },
                "age": { "type": "integer" },
                "score": { "type": "number" },
                "status": { "type": "string", "enum": ["active", "inactive"] },
                "titled": { "type": "string", "oneOf": [{ "const": "a", "title": "A" }] },
                "many": { "type": "array", "items": { "anyOf": [{ "const": "x" }, { "const": "y" }] } },
                "ok": { "type": "boolean" },
            },
            "required": ["name"],
        })
    }

    #[test]
    fn forms_of_the_mcp_shape_are_accepted_and_others_refused() {
        assert_eq!(check_form(&form()), Ok(()));
        for bad in [
            json!({ "type": "object" }),
            json!({ "type": "array", "properties": {} }),
            json!({ "type": "object", "properties": { "n": { "type": "object" } } }),
            json!({ "type": "object", "properties": { "n": { "type": "array", "items": { "type": "string" } } } }),
            json!({ "type": "object", "properties": {}, "required": ["ghost"] }),
        ] {
            assert!(check_form(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn answers_are_checked_against_the_form() {
        let ok = json!({ "name": "Jane", "age": 3, "status": "active", "titled": "a", "many": ["x", "y"], "ok": true });
        assert_eq!(check_answers(&form(), ok.as_object().unwrap()), Ok(()));
        for bad in [
            json!({ "age": 3 }),
            json!({ "name": 7 }),
            json!({ "name": "J", "age": 3.5 }),
            json!({ "name": "J", "status": "gone" }),
            json!({ "name": "J", "titled": "b" }),
            json!({ "name": "J", "many": ["z"] }),
            json!({ "name": "J", "extra": 1 }),
        ] {
            assert!(
                check_answers(&form(), bad.as_object().unwrap()).is_err(),
                "{bad}"
            );
        }
    }
}

//! Input-required rounds (MCP 2026-07-28, SEP-2322) for stateless `tools/call` requests.
//!
//! A stateless request has no way back to the client during the call. When its tool asks the
//! client something (a form, a completion), the host stops the tool and answers the request with
//! an input-required result naming the question and a `requestState`; the client sends the same
//! request again with its answer and that state. The tool then runs again from the start, and its
//! i-th request to the client is answered from the i-th answer given so far; a request beyond
//! them ends that round the same way. A WebAssembly call is cheap to start afresh, so no node
//! keeps anything between rounds: the state holds what the next round needs.
//!
//! The state is sealed by the host (HMAC-SHA256, rmcp's [`RequestStateCodec`], with a key
//! derived from the host's signing key): it binds the tool, the principal, the arguments' digest,
//! the grant's digest, the round, the call of that round, the budget session every round is
//! charged to, every answer so far with a digest of the question it answers, and an expiry. A
//! state that fails any of these is refused.
//!
//! Only a tool whose grant changes nothing outside the call is run again (no write root, no
//! `http` method beyond GET and HEAD, no child run of a tool that could), and none that asks for
//! approvals: re-running a write or a POST would repeat it. Such a tool's requests to a
//! stateless client are refused as before.

use super::client::{McpChannel, elicit_params, elicit_reply, sample_params, sample_reply};
use crate::capabilities::client::{
    ClientChannel, ClientError, ElicitReply, ElicitRequest, LogLevel, SampleReply, SampleRequest,
};
use futures::future::BoxFuture;
use rmcp::model::{
    ClientCapabilities, ElicitResult, InputRequest, InputRequests, InputRequiredResult,
    InputResponses, RequestStateCodec, RequestStateError, SealOptions,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Mutex;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use vak_core::record::Round;

/// How long a `requestState` stays good: time for a person to fill in a form.
pub const STATE_TTL: Duration = Duration::from_secs(30 * 60);
/// The most rounds of one logical call.
pub const MAX_ROUNDS: u32 = 16;
/// The most bytes of answers a state carries (JSON): the client sends them back every round.
pub const MAX_ANSWER_BYTES: usize = 512 * 1024;
/// What the key is derived for (see `HostKey::derived_secret`).
const KEY_PURPOSE: &str = "mcp/request-state";
/// The payload's format; a state of another format is refused.
const FORMAT: u32 = 1;

/// Why a `requestState` is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateRefused {
    /// Not a state this host sealed, or sealed and changed since (a foreign host's key, a
    /// tampered byte, a malformed value): one answer for all, as SEP-2322 asks.
    #[error("the requestState was not issued by this host, or was altered")]
    NotIssued,
    #[error("the requestState has expired (states are good for {} minutes)", STATE_TTL.as_secs() / 60)]
    Expired,
    #[error("the requestState was issued for another {what}")]
    OtherBinding { what: &'static str },
    #[error("the call has reached its limit of {MAX_ROUNDS} rounds")]
    TooManyRounds,
    #[error("the answers so far are over {MAX_ANSWER_BYTES} bytes")]
    TooLarge,
}

/// What a state is bound to: the request it may come back with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Binding {
    pub tool: String,
    pub principal: Option<String>,
    /// SHA-256 of the arguments in canonical form (object keys sorted).
    pub arguments_sha256: String,
    pub grant_sha256: String,
}

/// One answer the client gave: to which question, and what.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Answered {
    /// The input request's key (`elicitation-1`, `sampling-2`).
    key: String,
    /// SHA-256 of the question as asked: an answer is given back only to the same question.
    question: String,
    answer: Value,
}

/// The sealed payload.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Sealed {
    format: u32,
    binding: Binding,
    /// The round that issued the state.
    round: u32,
    /// That round's call (its record).
    call_id: String,
    /// The budget session every round of the call is charged to.
    session: String,
    answers: Vec<Answered>,
    /// The question the round ended on: `(key, question digest)`.
    pending: (String, String),
}

/// The host's sealing of states.
#[derive(Clone)]
pub struct Rounds {
    codec: RequestStateCodec,
}

/// Where a request stands: the round it is, and the answers it brings.
#[derive(Debug, Clone, Default)]
pub struct Resumed {
    pub round: u32,
    pub previous_call_id: Option<String>,
    /// The budget session of the call's rounds: the state's, or chosen in round 1.
    pub session: String,
    answers: Vec<Answered>,
}

impl Resumed {
    /// The first round, charged to `session`: no answers yet.
    pub fn first(session: String) -> Resumed {
        Resumed {
            round: 1,
            previous_call_id: None,
            session,
            answers: Vec::new(),
        }
    }

    /// The record's round.
    pub fn record(&self) -> Round {
        Round {
            round: self.round,
            previous_call_id: self.previous_call_id.clone(),
        }
    }
}

impl Rounds {
    /// States sealed with a key derived from `host`'s signing key: nodes given the same key file
    /// open each other's states.
    pub fn of(host: &crate::Host) -> Rounds {
        Rounds::from_secret(host.derived_secret(KEY_PURPOSE).as_slice())
    }

    /// States sealed with `secret` (32 bytes).
    fn from_secret(secret: &[u8]) -> Rounds {
        Rounds {
            codec: RequestStateCodec::new_unchecked(secret.to_vec()),
        }
    }

    /// Open `state`, which came back with a request bound to `binding` and carrying
    /// `responses`: the round this request is and every answer so far.
    pub fn open(
        &self,
        state: &str,
        binding: &Binding,
        responses: Option<&InputResponses>,
    ) -> Result<Resumed, StateRefused> {
        let sealed: Sealed = self.codec.open_json(state).map_err(|e| match e {
            RequestStateError::Expired => StateRefused::Expired,
            _ => StateRefused::NotIssued,
        })?;
        if sealed.format != FORMAT {
            return Err(StateRefused::NotIssued);
        }
        let b = &sealed.binding;
        let other = |what| Err(StateRefused::OtherBinding { what });
        if b.tool != binding.tool {
            return other("tool");
        }
        if b.principal != binding.principal {
            return other("principal");
        }
        if b.arguments_sha256 != binding.arguments_sha256 {
            return other("arguments");
        }
        if b.grant_sha256 != binding.grant_sha256 {
            return other("grant (the policy changed since)");
        }
        if sealed.round >= MAX_ROUNDS {
            return Err(StateRefused::TooManyRounds);
        }
        let mut answers = sealed.answers;
        let (key, question) = sealed.pending;
        // An answer missing is asked again: the round runs without it and ends on that question.
        if let Some(answer) = responses.and_then(|r| r.get(&key)) {
            answers.push(Answered {
                key,
                question,
                answer: answer.clone(),
            });
        }
        if serde_json::to_vec(&answers).map_or(usize::MAX, |v| v.len()) > MAX_ANSWER_BYTES {
            return Err(StateRefused::TooLarge);
        }
        Ok(Resumed {
            round: sealed.round + 1,
            previous_call_id: Some(sealed.call_id),
            session: sealed.session,
            answers,
        })
    }

    /// The input-required result of a round that ended on `replay`'s pending question, or
    /// `None` when it did not end on one.
    pub fn input_required(
        &self,
        replay: &Replay,
        binding: &Binding,
        call_id: &str,
    ) -> Option<InputRequiredResult> {
        let (key, question, request) = replay.pending.lock().ok()?.clone()?;
        let sealed = Sealed {
            format: FORMAT,
            binding: binding.clone(),
            round: replay.resumed.round,
            call_id: call_id.to_string(),
            session: replay.resumed.session.clone(),
            answers: replay.resumed.answers.clone(),
            pending: (key.clone(), question),
        };
        let state = self
            .codec
            .seal_json_with(&sealed, &SealOptions::new().ttl(STATE_TTL))
            .ok()?;
        let mut requests = InputRequests::new();
        requests.insert(key, request);
        let mut meta = rmcp::model::MetaObject::new();
        meta.0.insert("dev.vak/call_id".into(), json!(call_id));
        meta.0
            .insert("dev.vak/round".into(), json!(replay.resumed.round));
        Some(InputRequiredResult::new(Some(requests), Some(state)).with_meta(meta))
    }
}

/// SHA-256 of `value` with object keys sorted (the digest a state binds the arguments by).
pub fn canonical_sha256(value: &Value) -> String {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                let mut out = serde_json::Map::new();
                for k in keys {
                    out.insert(k.clone(), sorted(&map[k]));
                }
                Value::Object(out)
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    crate::digest::sha256_hex(sorted(value).to_string().as_bytes())
}

/// The client of one round: its tool's requests are answered from the answers given so far,
/// and a request beyond them stops the call to ask in the next round. Log lines go to the
/// request's own channel.
pub struct Replay {
    logs: McpChannel,
    resumed: Resumed,
    /// What the client declared in `_meta` (`None`: nothing).
    declared: Option<ClientCapabilities>,
    /// Why this tool is not run again, when its grant could change something.
    not_replayable: Option<String>,
    /// How many requests the tool has made this round.
    asked: Mutex<usize>,
    /// The question the round ended on: key, digest, and the request as sent.
    pending: Mutex<Option<(String, String, InputRequest)>>,
    /// Stops the call once a question is pending.
    stop: CancellationToken,
}

impl Replay {
    pub fn new(
        logs: McpChannel,
        resumed: Resumed,
        declared: Option<ClientCapabilities>,
        not_replayable: Option<String>,
        stop: CancellationToken,
    ) -> Replay {
        Replay {
            logs,
            resumed,
            declared,
            not_replayable,
            asked: Mutex::new(0),
            pending: Mutex::new(None),
            stop,
        }
    }

    /// The budget session this round is charged to.
    pub fn session(&self) -> &str {
        &self.resumed.session
    }

    /// The answer to the next request, of kind `what` with `params`, or the question put off to
    /// the next round (the call is stopped, and this never resolves).
    fn next(
        &self,
        what: &'static str,
        method: &str,
        params: Value,
    ) -> Result<Option<Value>, ClientError> {
        let declared = self.declared.as_ref().is_some_and(|c| match what {
            "sampling" => c.sampling.is_some(),
            _ => c.elicitation.is_some(),
        });
        if !declared {
            return Err(ClientError::Unsupported(what));
        }
        if let Some(why) = &self.not_replayable {
            return Err(ClientError::Unavailable(why.clone()));
        }
        let mut asked = self.asked.lock().unwrap_or_else(|p| p.into_inner());
        let i = *asked;
        *asked += 1;
        let key = format!("{what}-{}", i + 1);
        let question = crate::digest::sha256_hex(params.to_string().as_bytes());
        if let Some(given) = self.resumed.answers.get(i) {
            if given.key != key || given.question != question {
                return Err(ClientError::Failed(format!(
                    "the tool asked `{key}` differently from the round the answer was given in; \
                     start the call again without a requestState"
                )));
            }
            return Ok(Some(given.answer.clone()));
        }
        let request: InputRequest =
            serde_json::from_value(json!({ "method": method, "params": params }))
                .map_err(|e| ClientError::Failed(format!("cannot build the request: {e}")))?;
        *self.pending.lock().unwrap_or_else(|p| p.into_inner()) = Some((key, question, request));
        self.stop.cancel();
        Ok(None)
    }
}

/// The answer of the i-th request, or a future that never ends (the call is being stopped).
fn answered<T: Send + 'static>(
    next: Result<Option<Value>, ClientError>,
    read: fn(&Value) -> Result<T, ClientError>,
) -> BoxFuture<'static, Result<T, ClientError>> {
    match next {
        Err(e) => Box::pin(async move { Err(e) }),
        Ok(Some(answer)) => {
            let reply = read(&answer);
            Box::pin(async move { reply })
        }
        Ok(None) => Box::pin(futures::future::pending()),
    }
}

impl ClientChannel for Replay {
    fn answerer(&self) -> String {
        "the stateless MCP client (answers sent with the request)".into()
    }

    fn log_level(&self) -> Option<LogLevel> {
        self.logs.log_level()
    }

    fn log(&self, level: LogLevel, message: &str) {
        self.logs.log(level, message);
    }

    fn sample(
        &self,
        request: SampleRequest,
    ) -> BoxFuture<'static, Result<SampleReply, ClientError>> {
        answered(
            self.next(
                "sampling",
                "sampling/createMessage",
                sample_params(&request),
            ),
            sample_reply,
        )
    }

    fn elicit(
        &self,
        request: ElicitRequest,
    ) -> BoxFuture<'static, Result<ElicitReply, ClientError>> {
        answered(
            self.next("elicitation", "elicitation/create", elicit_params(&request)),
            read_elicitation,
        )
    }

    fn suspended(&self) -> Option<String> {
        let pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        pending.as_ref().map(|(key, _, _)| key.clone())
    }
}

/// An answer the client sent to an elicitation, read as the connection's answers are.
fn read_elicitation(answer: &Value) -> Result<ElicitReply, ClientError> {
    let result: ElicitResult = serde_json::from_value(answer.clone()).map_err(|_| {
        ClientError::Failed(
            "the answer is not an elicitation result (`action` is accept, decline or cancel)"
                .into(),
        )
    })?;
    elicit_reply(result)
}

#[cfg(test)]
mod tests;

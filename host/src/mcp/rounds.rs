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
//! state that fails any of these is refused. A state is single-use (`spent`): the round it
//! opens is marked spent in the store before it runs, and the state brought back again is refused
//! as replayed, on this node or any other sharing the store.
//!
//! Only a tool whose grant changes nothing outside the call is run again for its own requests
//! (no write root, no `http` method beyond GET and HEAD, no child run of a tool that could):
//! re-running a write or a POST would repeat it. Such a tool's requests to a stateless client
//! are refused as before. Its own approval (`ask = true`, with no scope or child run that asks
//! during the call) is put in a round all the same: it is asked before anything of the tool
//! runs, and its answered state is single-use, so the approved call runs once.

use rmcp::model::{
    InputRequests, InputRequiredResult, InputResponses, RequestStateCodec, RequestStateError,
    SealOptions,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::time::Duration;
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
const FORMAT: u32 = 2;

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
    /// The state was brought back before: its round ran then, and does not run again.
    #[error(
        "the requestState was already used (a state opens one round, once); start the call again without it"
    )]
    Replayed,
    /// Whether the state was used before cannot be told now (the store is out of reach).
    #[error("cannot tell whether the requestState was used before: {0}")]
    Unverifiable(String),
}

impl StateRefused {
    /// The condition's name, as the JSON-RPC error's `data.kind` and the record say it.
    pub fn kind(&self) -> &'static str {
        match self {
            StateRefused::Replayed => "state_replayed",
            _ => "request_state_refused",
        }
    }

    /// Whether the same request, sent again later, could be taken.
    pub fn retryable(&self) -> bool {
        matches!(self, StateRefused::Unverifiable(_))
    }
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
    /// The questions the round ended on, asked together: `(key, question digest)`.
    pending: Vec<(String, String)>,
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
        // The questions of a round are answered together: with one missing, none is taken, and
        // the round runs without them and ends on the same questions.
        let given: Option<Vec<Value>> = sealed
            .pending
            .iter()
            .map(|(key, _)| responses.and_then(|r| r.get(key)).cloned())
            .collect();
        if let Some(given) = given {
            for ((key, question), answer) in sealed.pending.into_iter().zip(given) {
                answers.push(Answered {
                    key,
                    question,
                    answer,
                });
            }
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

    /// The input-required result of a round that ended on `replay`'s pending questions, or
    /// `None` when it did not end on any.
    pub fn input_required(
        &self,
        replay: &Replay,
        binding: &Binding,
        call_id: &str,
    ) -> Option<InputRequiredResult> {
        let asked = replay.pending();
        if asked.is_empty() {
            return None;
        }
        let sealed = Sealed {
            format: FORMAT,
            binding: binding.clone(),
            round: replay.resumed.round,
            call_id: call_id.to_string(),
            session: replay.resumed.session.clone(),
            answers: replay.answers(),
            pending: asked
                .iter()
                .map(|(key, question, _)| (key.clone(), question.clone()))
                .collect(),
        };
        let state = self
            .codec
            .seal_json_with(&sealed, &SealOptions::new().ttl(STATE_TTL))
            .ok()?;
        let mut requests = InputRequests::new();
        for (key, _, request) in asked {
            requests.insert(key, request);
        }
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

mod replay;
mod spent;
pub use replay::Replay;
pub use spent::spend;

#[cfg(test)]
mod tests;

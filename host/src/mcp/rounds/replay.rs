//! The client of one round: the tool's requests are answered from the answers given so far, in
//! the order the tool asked them; requests beyond them stop the call to be asked in the next
//! round, together when the tool asked them together (`ask`). Log lines go to the request's own
//! channel.
// Roots are deprecated by SEP-2577 after 2026-07-28, whose input-required rounds still ask them.
#![allow(deprecated)]

use super::{Answered, Resumed};
use crate::capabilities::client::{
    ClientAnswer, ClientChannel, ClientError, ClientRequest, ElicitReply, ElicitRequest, LogLevel,
    Root, SampleReply, SampleRequest,
};
use crate::mcp::client::{
    McpChannel, elicit_params, elicit_reply, roots_reply, sample_params, sample_reply,
};
use futures::future::BoxFuture;
use rmcp::model::{ClientCapabilities, ElicitResult, InputRequest, ListRootsResult};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::Mutex;
use tokio_util::sync::CancellationToken;

/// A question put off to the next round: its key, the digest of the question, the request.
pub(super) type Pending = (String, String, InputRequest);

pub struct Replay {
    logs: McpChannel,
    pub(super) resumed: Resumed,
    /// What the client declared in `_meta` (`None`: nothing).
    declared: Option<ClientCapabilities>,
    /// Why this tool's own requests are not put in rounds (its grant could change something).
    not_replayable: Option<String>,
    /// Why its approvals are not put in rounds (asked mid-call, after effects a re-run repeats).
    approvals_blocked: Option<String>,
    /// How many requests the tool has made this round.
    asked: Mutex<usize>,
    /// The questions the round ended on.
    pending: Mutex<Vec<Pending>>,
    /// Answers a first request brought without a state, by key: taken for the questions of that
    /// key the tool asks this round (SEP-2322 lets a client answer before it is asked).
    unasked: rmcp::model::InputResponses,
    /// The answers of `unasked` taken this round, sealed with the round's state.
    taken: Mutex<Vec<Answered>>,
    /// The client capabilities the tool asked for and the client had not declared.
    missing: Mutex<BTreeSet<&'static str>>,
    /// Stops the call once a question is pending.
    stop: CancellationToken,
}

/// One request of the tool, as the round sees it.
struct Asked {
    /// The tool's key (`ask`), or none (the round names it `elicitation-N`).
    key: Option<String>,
    request: ClientRequest,
    /// An approval's binding: the question is the binding, the key `approval-N`.
    approval: Option<String>,
}

impl Asked {
    fn method(&self) -> &'static str {
        match self.request {
            ClientRequest::Sample(_) => "sampling/createMessage",
            ClientRequest::Elicit(_) => "elicitation/create",
            ClientRequest::ListRoots => "roots/list",
        }
    }

    fn params(&self) -> Value {
        match &self.request {
            ClientRequest::Sample(r) => sample_params(r),
            ClientRequest::Elicit(r) => elicit_params(r),
            ClientRequest::ListRoots => json!({}),
        }
    }
}

impl Replay {
    pub fn new(
        logs: McpChannel,
        resumed: Resumed,
        declared: Option<ClientCapabilities>,
        (not_replayable, approvals_blocked): (Option<String>, Option<String>),
        stop: CancellationToken,
    ) -> Replay {
        Replay {
            logs,
            resumed,
            declared,
            not_replayable,
            approvals_blocked,
            asked: Mutex::new(0),
            pending: Mutex::new(Vec::new()),
            unasked: rmcp::model::InputResponses::new(),
            taken: Mutex::new(Vec::new()),
            missing: Mutex::new(BTreeSet::new()),
            stop,
        }
    }

    /// With answers a first request (no `requestState`) brought: a question of the same key
    /// takes its answer when the answer reads as the kind asked, and is asked otherwise.
    pub fn with_unasked(mut self, answers: Option<&rmcp::model::InputResponses>) -> Replay {
        if self.resumed.answers.is_empty() {
            self.unasked = answers.cloned().unwrap_or_default();
        }
        self
    }

    /// Every answer of the call so far: those of the state, then those taken this round.
    pub(super) fn answers(&self) -> Vec<Answered> {
        let mut all = self.resumed.answers.clone();
        all.extend(
            self.taken
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .cloned(),
        );
        all
    }

    /// The call of the round whose state this request brought back (`None`: the first round).
    pub fn state_of(&self) -> Option<&str> {
        self.resumed.previous_call_id.as_deref()
    }

    /// The budget session this round is charged to.
    pub fn session(&self) -> &str {
        &self.resumed.session
    }

    /// Whether the round ended on questions for the client.
    pub fn asks(&self) -> bool {
        !self.pending().is_empty()
    }

    /// The questions the round ended on (none when it did not end on a question).
    pub(super) fn pending(&self) -> Vec<Pending> {
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The client capabilities the tool asked for that the client had not declared in `_meta`
    /// (`sampling`, `elicitation`, `roots`).
    pub fn missing(&self) -> Vec<&'static str> {
        let missing = self.missing.lock().unwrap_or_else(|p| p.into_inner());
        missing.iter().copied().collect()
    }

    fn declares(&self, what: &'static str) -> bool {
        self.declared.as_ref().is_some_and(|c| match what {
            "sampling" => c.sampling.is_some(),
            "roots" => c.roots.is_some(),
            _ => c.elicitation.is_some(),
        })
    }

    /// The answers to `asked` (each read by the kind asked), or `None` when they are put off to
    /// the next round (the call is being stopped).
    fn answer(&self, asked: Vec<Asked>) -> Option<Vec<Result<ClientAnswer, ClientError>>> {
        let approving = asked.iter().any(|a| a.approval.is_some());
        let blocked = match approving {
            true => &self.approvals_blocked,
            false => &self.not_replayable,
        };
        if let Some(why) = blocked {
            let refused = ClientError::Unavailable(why.clone());
            return Some(asked.iter().map(|_| Err(refused.clone())).collect());
        }
        let mut out: Vec<Option<Result<ClientAnswer, ClientError>>> = Vec::new();
        // The questions not answered yet, with their place in `asked`.
        let mut unanswered: Vec<(usize, Pending)> = Vec::new();
        let mut counter = self.asked.lock().unwrap_or_else(|p| p.into_inner());
        for (j, a) in asked.iter().enumerate() {
            let what = a.request.capability();
            if !self.declares(what) {
                // Not asked: MCP forbids requests the client did not declare it answers.
                self.missing
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(what);
                out.push(Some(Err(ClientError::Unsupported(what))));
                continue;
            }
            let i = *counter;
            *counter += 1;
            let kind = if a.approval.is_some() {
                "approval"
            } else {
                what
            };
            let key = a.key.clone().unwrap_or_else(|| format!("{kind}-{}", i + 1));
            let params = a.params();
            // An approval's form names the round's call and expiry: its question is the binding.
            let question = match &a.approval {
                Some(binding) => {
                    crate::digest::sha256_hex(format!("approval:{binding}").as_bytes())
                }
                None => crate::digest::sha256_hex(params.to_string().as_bytes()),
            };
            match self.resumed.answers.get(i) {
                Some(given) if given.key == key && given.question == question => {
                    out.push(Some(read(&a.request, given)));
                }
                Some(_) => out.push(Some(Err(ClientError::Failed(format!(
                    "the tool asked `{key}` differently from the round the answer was given in; \
                     start the call again without a requestState"
                ))))),
                None => {
                    let request: Result<InputRequest, _> =
                        serde_json::from_value(json!({ "method": a.method(), "params": params }));
                    match request {
                        Ok(request) => {
                            unanswered.push((j, (key, question, request)));
                            out.push(None);
                        }
                        Err(e) => out.push(Some(Err(ClientError::Failed(format!(
                            "cannot build the request: {e}"
                        ))))),
                    }
                }
            }
        }
        if !unanswered.is_empty() {
            // Answers brought unasked are taken only when they answer all the questions asked
            // together (as a state's answers are): the order of a call's answers stays the
            // order of its questions.
            let given: Option<Vec<(usize, Answered)>> = unanswered
                .iter()
                .map(|(j, (key, question, _))| {
                    let given = Answered {
                        key: key.clone(),
                        question: question.clone(),
                        answer: self.unasked.get(key)?.clone(),
                    };
                    let reads = asked
                        .get(*j)
                        .is_some_and(|a| read(&a.request, &given).is_ok());
                    reads.then_some((*j, given))
                })
                .collect();
            // An approval is given only to the question the host sealed, never ahead of it.
            if let Some(given) = given.filter(|_| !approving) {
                for (j, g) in &given {
                    if let (Some(slot), Some(a)) = (out.get_mut(*j), asked.get(*j)) {
                        *slot = Some(read(&a.request, g));
                    }
                }
                self.taken
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .extend(given.into_iter().map(|(_, g)| g));
                return Some(
                    out.into_iter()
                        .map(|o| o.unwrap_or_else(|| Err(ClientError::Failed("unanswered".into()))))
                        .collect(),
                );
            }
            self.pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend(unanswered.into_iter().map(|(_, p)| p));
            if approving {
                // An approval refused for now ends the call before anything of the tool ran (or,
                // for a scope, stops it): the record says the question went to the next round.
                let why = ClientError::Deferred(
                    "the approval is asked of the stateless client, with the call it binds".into(),
                );
                return Some(asked.iter().map(|_| Err(why.clone())).collect());
            }
            self.stop.cancel();
            return None;
        }
        Some(
            out.into_iter()
                .map(|o| o.unwrap_or_else(|| Err(ClientError::Failed("unanswered".into()))))
                .collect(),
        )
    }

    /// One request, answered or put off.
    fn one(&self, request: ClientRequest) -> BoxFuture<'static, Result<ClientAnswer, ClientError>> {
        self.asked_once(Asked {
            key: None,
            request,
            approval: None,
        })
    }

    fn asked_once(&self, asked: Asked) -> BoxFuture<'static, Result<ClientAnswer, ClientError>> {
        match self.answer(vec![asked]) {
            Some(mut answers) => {
                let answer = answers
                    .pop()
                    .unwrap_or_else(|| Err(ClientError::Failed("unanswered".into())));
                Box::pin(async move { answer })
            }
            None => Box::pin(futures::future::pending()),
        }
    }
}

/// An answer the client gave, read as the kind of request it answers.
fn read(request: &ClientRequest, given: &Answered) -> Result<ClientAnswer, ClientError> {
    match request {
        ClientRequest::Sample(_) => sample_reply(&given.answer).map(ClientAnswer::Sample),
        ClientRequest::Elicit(_) => read_elicitation(&given.answer).map(ClientAnswer::Elicit),
        ClientRequest::ListRoots => {
            let result: ListRootsResult =
                serde_json::from_value(given.answer.clone()).map_err(|_| {
                    ClientError::Failed(
                        "the answer is not a roots/list result (`roots`: a list of {uri, name})"
                            .into(),
                    )
                })?;
            Ok(ClientAnswer::Roots(roots_reply(result)))
        }
    }
}

/// An answer the client sent to an elicitation, read as the connection's answers are.
pub(super) fn read_elicitation(answer: &Value) -> Result<ElicitReply, ClientError> {
    let result: ElicitResult = serde_json::from_value(answer.clone()).map_err(|_| {
        ClientError::Failed(
            "the answer is not an elicitation result (`action` is accept, decline or cancel)"
                .into(),
        )
    })?;
    elicit_reply(result)
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
        let f = self.one(ClientRequest::Sample(request));
        Box::pin(async move {
            match f.await? {
                ClientAnswer::Sample(a) => Ok(a),
                _ => Err(ClientError::Failed("not a completion".into())),
            }
        })
    }

    fn elicit(
        &self,
        request: ElicitRequest,
    ) -> BoxFuture<'static, Result<ElicitReply, ClientError>> {
        let f = self.one(ClientRequest::Elicit(request));
        Box::pin(async move {
            match f.await? {
                ClientAnswer::Elicit(a) => Ok(a),
                _ => Err(ClientError::Failed("not a form's answer".into())),
            }
        })
    }

    fn approve(
        &self,
        binding: &str,
        form: ElicitRequest,
    ) -> BoxFuture<'static, Result<ElicitReply, ClientError>> {
        let f = self.asked_once(Asked {
            key: None,
            request: ClientRequest::Elicit(form),
            approval: Some(binding.to_string()),
        });
        Box::pin(async move {
            match f.await? {
                ClientAnswer::Elicit(a) => Ok(a),
                _ => Err(ClientError::Failed("not a form's answer".into())),
            }
        })
    }

    fn list_roots(&self) -> BoxFuture<'static, Result<Vec<Root>, ClientError>> {
        let f = self.one(ClientRequest::ListRoots);
        Box::pin(async move {
            match f.await? {
                ClientAnswer::Roots(r) => Ok(r),
                _ => Err(ClientError::Failed("not a list of roots".into())),
            }
        })
    }

    fn ask(
        &self,
        requests: Vec<(String, ClientRequest)>,
    ) -> BoxFuture<'static, Vec<Result<ClientAnswer, ClientError>>> {
        let asked = requests
            .into_iter()
            .map(|(key, request)| Asked {
                key: Some(key),
                request,
                approval: None,
            })
            .collect();
        match self.answer(asked) {
            Some(answers) => Box::pin(async move { answers }),
            None => Box::pin(futures::future::pending()),
        }
    }

    fn suspended(&self) -> Option<String> {
        let pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        let keys: Vec<&str> = pending.iter().map(|(key, _, _)| key.as_str()).collect();
        (!keys.is_empty()).then(|| keys.join(", "))
    }
}

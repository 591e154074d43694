//! One exchange with the caller's client: the requests of one host call (one, or a batch from
//! `ask`) granted, sent together, their answers checked against what was asked, and a receipt for
//! each, answered or refused.

use super::{
    Broker, CapabilityError, ClientAnswer, ClientError, ClientRequest, Delivered, ElicitAction,
    MAX_BATCH, MAX_ROOT_BYTES, MAX_ROOTS, MAX_TEXT_BYTES, Root, check_answers, from_client,
};
use crate::bindings::vak::tool::client::{self as wit, KeyedRequest, RootsReply};
use serde_json::{Value, json};

/// A request on its way out: checked and scrubbed (or why not), and how it is recorded.
pub(super) struct Outgoing {
    pub operation: &'static str,
    pub recorded: Value,
    pub request: Result<ClientRequest, CapabilityError>,
}

/// Whose keys the requests go under: the channel's own (one request of `sample`, `elicit`,
/// `list-roots`), or the tool's (`ask`).
pub(super) enum Keys {
    Channel,
    Tool(Vec<String>),
}

/// The keys of a batch, or why the batch is refused: 1 to [`MAX_BATCH`] requests, each key 1 to
/// 64 of `A-Z a-z 0-9 _ - .` (a client shows it, and it names an answer), none twice.
pub(super) fn check_keys(requests: &[KeyedRequest]) -> Result<Vec<String>, CapabilityError> {
    if requests.is_empty() || requests.len() > MAX_BATCH {
        return Err(CapabilityError::Invalid(format!(
            "an `ask` holds 1 to {MAX_BATCH} requests, not {}",
            requests.len()
        )));
    }
    let mut keys: Vec<String> = Vec::with_capacity(requests.len());
    for r in requests {
        let key = &r.key;
        let well_formed = (1..=64).contains(&key.len())
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
        if !well_formed {
            return Err(CapabilityError::Invalid(format!(
                "key {:?} is not 1 to 64 of A-Z a-z 0-9 _ - .",
                key.chars().take(80).collect::<String>()
            )));
        }
        if keys.contains(key) {
            return Err(CapabilityError::Invalid(format!(
                "key {key:?} names two requests"
            )));
        }
        keys.push(key.clone());
    }
    Ok(keys)
}

impl Broker {
    /// Ask `items` of the call's client: each granted and checked, the granted ones sent together,
    /// every answer checked against its request, and a receipt for each (in order).
    pub(super) async fn exchange(&self, keys: Keys, items: Vec<Outgoing>) -> Vec<Delivered> {
        let mut outcomes: Vec<Option<Result<ClientAnswer, CapabilityError>>> =
            Vec::with_capacity(items.len());
        let mut sent: Vec<(usize, String, ClientRequest)> = Vec::new();
        let mut channel = None;
        for (i, item) in items.iter().enumerate() {
            let granted = item
                .request
                .as_ref()
                .map_err(Clone::clone)
                .and_then(|r| self.client_for(r.capability()).map(|c| (c, r.clone())));
            match granted {
                Ok((c, request)) => {
                    let key = match &keys {
                        Keys::Tool(keys) => keys.get(i).cloned().unwrap_or_default(),
                        Keys::Channel => String::new(),
                    };
                    channel = Some(c);
                    sent.push((i, key, request));
                    outcomes.push(None);
                }
                Err(e) => outcomes.push(Some(Err(e))),
            }
        }
        if let Some(channel) = channel {
            let asked = match (&keys, sent.as_slice()) {
                (Keys::Channel, [(_, _, request)]) => one(channel.as_ref(), request.clone()),
                _ => channel.ask(
                    sent.iter()
                        .map(|(_, k, r)| (k.clone(), r.clone()))
                        .collect(),
                ),
            };
            let answers = tokio::time::timeout(self.client_wait(), asked).await;
            for (n, (i, _, request)) in sent.iter().enumerate() {
                let answer = match &answers {
                    Err(_) => Err(CapabilityError::Failed(deadline(request).into())),
                    Ok(answers) => match answers.get(n) {
                        Some(a) => checked(request, a.clone()),
                        None => Err(CapabilityError::Failed(
                            "the client left a request unanswered".into(),
                        )),
                    },
                };
                if let Some(slot) = outcomes.get_mut(*i) {
                    *slot = Some(answer);
                }
            }
        }
        items
            .into_iter()
            .zip(outcomes)
            .enumerate()
            .map(|(i, (item, outcome))| {
                let outcome = outcome.unwrap_or_else(|| {
                    Err(CapabilityError::Failed("the request was not sent".into()))
                });
                let mut recorded = item.recorded;
                if let Keys::Tool(keys) = &keys
                    && let Some(key) = keys.get(i)
                {
                    recorded["key"] = json!(key);
                }
                let as_json = outcome.as_ref().map(answer_json).map_err(Clone::clone);
                let receipt = self.client_receipt(item.operation, recorded, &as_json);
                (outcome, receipt)
            })
            .collect()
    }
}

/// One request by the channel's own method for it.
fn one(
    channel: &dyn super::ClientChannel,
    request: ClientRequest,
) -> futures::future::BoxFuture<'static, Vec<Result<ClientAnswer, ClientError>>> {
    let f: futures::future::BoxFuture<'static, Result<ClientAnswer, ClientError>> = match request {
        ClientRequest::Sample(r) => {
            let f = channel.sample(r);
            Box::pin(async move { f.await.map(ClientAnswer::Sample) })
        }
        ClientRequest::Elicit(r) => {
            let f = channel.elicit(r);
            Box::pin(async move { f.await.map(ClientAnswer::Elicit) })
        }
        ClientRequest::ListRoots => {
            let f = channel.list_roots();
            Box::pin(async move { f.await.map(ClientAnswer::Roots) })
        }
    };
    Box::pin(async move { vec![f.await] })
}

fn deadline(request: &ClientRequest) -> &'static str {
    match request {
        ClientRequest::Elicit(_) => "the person did not answer before the call's deadline",
        _ => "the client did not answer before the call's deadline",
    }
}

/// The client's answer to `request`, checked before the guest sees it.
fn checked(
    request: &ClientRequest,
    answer: Result<ClientAnswer, ClientError>,
) -> Result<ClientAnswer, CapabilityError> {
    let answer = answer.map_err(from_client)?;
    match (request, &answer) {
        (ClientRequest::Sample(_), ClientAnswer::Sample(a)) => {
            if a.text.len() > MAX_TEXT_BYTES {
                return Err(CapabilityError::Failed(format!(
                    "the client's completion is {} bytes; at most {MAX_TEXT_BYTES}",
                    a.text.len()
                )));
            }
        }
        (ClientRequest::Elicit(form), ClientAnswer::Elicit(a)) => {
            let refused =
                |e: String| CapabilityError::Failed(format!("the client's answer is refused: {e}"));
            match (&a.action, &a.content) {
                (ElicitAction::Accept, Some(content)) => {
                    check_answers(&form.schema, content).map_err(refused)?
                }
                // An accepted form with nothing filled in is valid only if nothing is required.
                (ElicitAction::Accept, None) => {
                    check_answers(&form.schema, &serde_json::Map::new()).map_err(refused)?
                }
                (_, Some(_)) => {
                    return Err(CapabilityError::Failed(
                        "the client sent answers with a declined or cancelled form".into(),
                    ));
                }
                (_, None) => {}
            }
        }
        (ClientRequest::ListRoots, ClientAnswer::Roots(roots)) => check_roots(roots)?,
        _ => {
            return Err(CapabilityError::Failed(format!(
                "the client answered a {} request with another kind of answer",
                request.capability()
            )));
        }
    }
    Ok(answer)
}

/// Roots as MCP defines them: `file://` URIs, within the host's bounds.
fn check_roots(roots: &[Root]) -> Result<(), CapabilityError> {
    if roots.len() > MAX_ROOTS {
        return Err(CapabilityError::Failed(format!(
            "the client sent {} roots; at most {MAX_ROOTS}",
            roots.len()
        )));
    }
    for root in roots {
        if !root.uri.starts_with("file://") {
            return Err(CapabilityError::Failed(format!(
                "root {:?} is not a file:// URI",
                root.uri.chars().take(200).collect::<String>()
            )));
        }
        if root.uri.len() > MAX_ROOT_BYTES
            || root.name.as_ref().is_some_and(|n| n.len() > MAX_ROOT_BYTES)
        {
            return Err(CapabilityError::Failed(format!(
                "a root's URI or name is over {MAX_ROOT_BYTES} bytes"
            )));
        }
    }
    Ok(())
}

/// An answer as its receipt records it.
fn answer_json(answer: &ClientAnswer) -> Value {
    match answer {
        ClientAnswer::Sample(a) => {
            json!({ "text": a.text, "model": a.model, "stop_reason": a.stop_reason })
        }
        ClientAnswer::Elicit(a) => {
            let action = match a.action {
                ElicitAction::Accept => "accept",
                ElicitAction::Decline => "decline",
                ElicitAction::Cancel => "cancel",
            };
            json!({ "action": action, "content": a.content })
        }
        ClientAnswer::Roots(roots) => json!({
            "roots": roots.iter().map(|r| json!({ "uri": r.uri, "name": r.name })).collect::<Vec<_>>(),
        }),
    }
}

pub(super) fn roots_reply(roots: Vec<Root>, receipt: String) -> RootsReply {
    RootsReply {
        roots: roots
            .into_iter()
            .map(|r| wit::Root {
                uri: r.uri,
                name: r.name,
            })
            .collect(),
        receipt,
    }
}

/// The error of a single request's exchange that did not bring its kind of answer.
pub(super) fn unexpected(delivered: Option<Delivered>) -> CapabilityError {
    match delivered {
        Some((Err(e), _)) => e,
        _ => CapabilityError::Failed("the client's answer is not of the kind asked".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bindings::vak::tool::client::InputRequest;

    fn keyed(keys: &[&str]) -> Vec<KeyedRequest> {
        keys.iter()
            .map(|k| KeyedRequest {
                key: k.to_string(),
                request: InputRequest::Roots,
            })
            .collect()
    }

    #[test]
    fn a_batch_names_each_request_once_with_a_plain_key() {
        assert_eq!(
            check_keys(&keyed(&["user_name", "greeting.1", "a-b"])).unwrap(),
            ["user_name", "greeting.1", "a-b"]
        );
        for bad in [
            vec![],
            vec!["same", "same"],
            vec![""],
            vec!["with space"],
            vec!["ünï"],
        ] {
            assert!(check_keys(&keyed(&bad)).is_err(), "{bad:?}");
        }
        let many: Vec<String> = (0..=MAX_BATCH).map(|i| format!("k{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert!(check_keys(&keyed(&many)).is_err());
        assert!(check_keys(&keyed(&[&"k".repeat(65)])).is_err());
    }

    #[test]
    fn roots_are_file_uris_within_bounds() {
        let root = |uri: &str| Root {
            uri: uri.into(),
            name: None,
        };
        assert!(check_roots(&[root("file:///home/a/project")]).is_ok());
        assert!(check_roots(&[root("https://example.com/")]).is_err());
        let long = format!("file:///{}", "a".repeat(MAX_ROOT_BYTES));
        assert!(check_roots(&[root(&long)]).is_err());
        let many: Vec<Root> = (0..=MAX_ROOTS).map(|_| root("file:///x")).collect();
        assert!(check_roots(&many).is_err());
    }
}

use super::replay::read_elicitation;
use super::*;
use crate::capabilities::client::ElicitAction;
use crate::mcp::client::sample_reply;

fn binding() -> Binding {
    Binding {
        tool: "test_elicitation".into(),
        principal: Some("alice".into()),
        arguments_sha256: canonical_sha256(&json!({ "message": "hi" })),
        grant_sha256: "g1".into(),
    }
}

/// A state as round `round` of call `call_id` would seal it, pending `elicitation-N`.
fn state(rounds: &Rounds, round: u32, answers: usize, ttl: Duration) -> String {
    let sealed = Sealed {
        format: FORMAT,
        binding: binding(),
        round,
        call_id: format!("call_{round}"),
        session: "rounds:call_1".into(),
        answers: (0..answers)
            .map(|i| Answered {
                key: format!("elicitation-{}", i + 1),
                question: "q".into(),
                answer: json!({ "action": "accept" }),
            })
            .collect(),
        pending: vec![(format!("elicitation-{}", answers + 1), "q".into())],
    };
    rounds
        .codec
        .seal_json_with(&sealed, &SealOptions::new().ttl(ttl))
        .expect("seals")
}

fn responses(key: &str) -> InputResponses {
    let mut r = InputResponses::new();
    r.insert(key.into(), json!({ "action": "decline" }));
    r
}

#[test]
fn a_state_opens_into_the_next_round_with_the_new_answer_appended() {
    let rounds = Rounds::from_secret(&[7; 32]);
    let s = state(&rounds, 2, 1, STATE_TTL);
    let r = rounds
        .open(&s, &binding(), Some(&responses("elicitation-2")))
        .expect("opens");
    assert_eq!(
        (r.round, r.previous_call_id.as_deref()),
        (3, Some("call_2"))
    );
    let keys: Vec<&str> = r.answers.iter().map(|a| a.key.as_str()).collect();
    assert_eq!(keys, ["elicitation-1", "elicitation-2"]);
    assert_eq!(r.answers[1].answer["action"], "decline");
    // Answers under other keys are ignored: the pending question is asked again.
    let r = rounds
        .open(&s, &binding(), Some(&responses("unknown")))
        .expect("opens");
    assert_eq!(r.answers.len(), 1);
    assert_eq!(r.record().round, 3);
}

#[test]
fn a_state_of_another_key_or_altered_is_not_issued() {
    let ours = Rounds::from_secret(&[7; 32]);
    let theirs = Rounds::from_secret(&[8; 32]);
    let s = state(&theirs, 1, 0, STATE_TTL);
    assert_eq!(
        ours.open(&s, &binding(), None).unwrap_err(),
        StateRefused::NotIssued
    );
    let s = state(&ours, 1, 0, STATE_TTL);
    let mut altered = s.clone().into_bytes();
    let at = altered.len() / 2;
    altered[at] = if altered[at] == b'A' { b'B' } else { b'A' };
    let altered = String::from_utf8(altered).unwrap();
    assert_eq!(
        ours.open(&altered, &binding(), None).unwrap_err(),
        StateRefused::NotIssued
    );
    assert_eq!(
        ours.open("not a state", &binding(), None).unwrap_err(),
        StateRefused::NotIssued
    );
}

#[test]
fn a_state_is_bound_to_tool_principal_arguments_and_grant() {
    let rounds = Rounds::from_secret(&[7; 32]);
    let s = state(&rounds, 1, 0, STATE_TTL);
    type Change = fn(&mut Binding);
    let cases: [(&str, Change); 4] = [
        ("tool", |b| b.tool = "other".into()),
        ("principal", |b| b.principal = None),
        ("arguments", |b| {
            b.arguments_sha256 = canonical_sha256(&json!({ "message": "other" }))
        }),
        ("grant (the policy changed since)", |b| {
            b.grant_sha256 = "g2".into()
        }),
    ];
    for (what, change) in cases {
        let mut b = binding();
        change(&mut b);
        assert_eq!(
            rounds.open(&s, &b, None).unwrap_err(),
            StateRefused::OtherBinding { what },
        );
    }
}

#[test]
fn a_state_expires_and_rounds_are_bounded() {
    let rounds = Rounds::from_secret(&[7; 32]);
    let s = state(&rounds, 1, 0, Duration::from_millis(1));
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(
        rounds.open(&s, &binding(), None).unwrap_err(),
        StateRefused::Expired
    );
    let s = state(&rounds, MAX_ROUNDS, 0, STATE_TTL);
    assert_eq!(
        rounds.open(&s, &binding(), None).unwrap_err(),
        StateRefused::TooManyRounds
    );
}

#[test]
fn arguments_are_digested_whatever_their_key_order() {
    let a: Value = serde_json::from_str(r#"{"b":1,"a":{"y":2,"x":[{"q":1,"p":2}]}}"#).unwrap();
    let b: Value = serde_json::from_str(r#"{"a":{"x":[{"p":2,"q":1}],"y":2},"b":1}"#).unwrap();
    assert_eq!(canonical_sha256(&a), canonical_sha256(&b));
    assert_ne!(canonical_sha256(&a), canonical_sha256(&json!({ "b": 1 })));
}

#[test]
fn answers_are_read_as_mcp_results() {
    let r =
        read_elicitation(&json!({ "action": "accept", "content": { "name": "Alice" } })).unwrap();
    assert_eq!(r.action, ElicitAction::Accept);
    assert_eq!(r.content.unwrap()["name"], "Alice");
    assert!(read_elicitation(&json!({ "action": "maybe" })).is_err());
    assert!(read_elicitation(&json!({ "action": "accept", "content": [1] })).is_err());
    let r = sample_reply(&json!({ "role": "assistant",
        "content": { "type": "text", "text": "Paris" }, "model": "m", "stopReason": "endTurn" }))
    .unwrap();
    assert_eq!(
        (r.text.as_str(), r.model.as_str(), r.stop_reason.as_deref()),
        ("Paris", "m", Some("endTurn"))
    );
    assert!(sample_reply(&json!({ "content": { "type": "image", "data": "" } })).is_err());
}

#[test]
fn questions_asked_together_are_answered_together() {
    let rounds = Rounds::from_secret(&[7; 32]);
    let sealed = Sealed {
        format: FORMAT,
        binding: binding(),
        round: 1,
        call_id: "call_1".into(),
        session: "rounds:call_1".into(),
        answers: Vec::new(),
        pending: vec![
            ("user_name".into(), "q1".into()),
            ("client_roots".into(), "q2".into()),
        ],
    };
    let s = rounds
        .codec
        .seal_json_with(&sealed, &SealOptions::new().ttl(STATE_TTL))
        .expect("seals");
    // One answer of two: neither is taken, and the round asks both again.
    let r = rounds
        .open(&s, &binding(), Some(&responses("user_name")))
        .expect("opens");
    assert!(r.answers.is_empty());
    let mut both = responses("client_roots");
    both.insert("user_name".into(), json!({ "action": "accept" }));
    let r = rounds.open(&s, &binding(), Some(&both)).expect("opens");
    let keys: Vec<(&str, &str)> = r
        .answers
        .iter()
        .map(|a| (a.key.as_str(), a.question.as_str()))
        .collect();
    assert_eq!(keys, [("user_name", "q1"), ("client_roots", "q2")]);
}

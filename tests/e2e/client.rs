//! The `client` capability and log forwarding through the library API: a tool asks the
//! embedder's [`ClientChannel`] for a completion or a form, the host checks both sides, and every
//! exchange, refused or not, is on record.

use futures::future::BoxFuture;
use serde_json::json;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;
use vak_host::capabilities::Capability;
use vak_host::capabilities::client::{
    ClientChannel, ClientError, ElicitAction, ElicitReply, ElicitRequest, LogLevel, SampleReply,
    SampleRequest,
};
use vak_host::{CallRecord, Proposal, Status};
use vak_tests::{guest, guests, host_with};

/// A client that answers from fixed replies and remembers what it was asked.
#[derive(Default)]
struct Fake {
    level: Option<LogLevel>,
    logs: Mutex<Vec<(LogLevel, String)>>,
    samples: Mutex<Vec<SampleRequest>>,
    forms: Mutex<Vec<ElicitRequest>>,
    sample_reply: Option<Result<SampleReply, ClientError>>,
    elicit_reply: Option<Result<ElicitReply, ClientError>>,
}

impl ClientChannel for Fake {
    fn log_level(&self) -> Option<LogLevel> {
        self.level
    }
    fn log(&self, level: LogLevel, message: &str) {
        self.logs.lock().unwrap().push((level, message.to_string()));
    }
    fn sample(
        &self,
        request: SampleRequest,
    ) -> BoxFuture<'static, Result<SampleReply, ClientError>> {
        self.samples.lock().unwrap().push(request);
        let reply = self.sample_reply.clone().expect("no sampling expected");
        Box::pin(async move { reply })
    }
    fn elicit(
        &self,
        request: ElicitRequest,
    ) -> BoxFuture<'static, Result<ElicitReply, ClientError>> {
        self.forms.lock().unwrap().push(request);
        let reply = self.elicit_reply.clone().expect("no elicitation expected");
        Box::pin(async move { reply })
    }
}

const POLICY: &str = r#"
[tools.test_sampling]
capabilities.client = { requests = ["sampling"] }
[tools.test_elicitation]
capabilities.client = { requests = ["elicitation"] }
[tools.test_tool_with_logging]
capabilities.log = {}
"#;

async fn host(cache: &std::path::Path) -> vak_host::Host {
    host_with(
        &[
            ("sampling", guest(guests::CONF_SAMPLING)),
            ("elicitation", guest(guests::CONF_ELICITATION)),
            ("logging", guest(guests::CONF_LOGGING)),
        ],
        POLICY,
        cache,
    )
    .await
}

async fn call(
    host: &vak_host::Host,
    tool: &str,
    args: serde_json::Value,
    client: Option<Arc<Fake>>,
) -> CallRecord {
    let session = host.session(None);
    let proposal = Proposal::new(tool, args.to_string());
    match client {
        Some(c) => {
            session
                .call_with_client(proposal, CancellationToken::new(), c)
                .await
        }
        None => session.call(proposal).await,
    }
}

fn client_receipt(record: &CallRecord) -> &vak_host::capabilities::Receipt {
    record
        .receipts
        .iter()
        .find(|r| r.capability == Capability::Client)
        .expect("a client receipt")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_completion_reaches_the_tool_with_both_sides_on_record() {
    let cache = tempfile::tempdir().unwrap();
    let host = host(cache.path()).await;
    let fake = Arc::new(Fake {
        sample_reply: Some(Ok(SampleReply {
            text: "forty-two".into(),
            model: "m-1".into(),
            stop_reason: Some("endTurn".into()),
        })),
        ..Fake::default()
    });
    let record = call(
        &host,
        "test_sampling",
        json!({ "prompt": "the answer?" }),
        Some(fake.clone()),
    )
    .await;
    assert_eq!(
        record.status,
        Status::Completed,
        "{}",
        record.to_json_pretty()
    );
    assert_eq!(
        record.result.as_ref().unwrap().markdown,
        "LLM response: forty-two"
    );
    let asked = fake.samples.lock().unwrap().clone();
    assert_eq!(
        asked[0].messages,
        vec![("user".to_string(), "the answer?".to_string())]
    );
    assert_eq!(asked[0].max_tokens, 100);
    let r = client_receipt(&record);
    assert!(r.ok);
    assert_eq!(r.operation, "sample");
    assert_eq!(r.request["messages"][0]["text"], "the answer?");
    assert_eq!(r.outcome["text"], "forty-two");
    assert_eq!(r.outcome["model"], "m-1");
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_client_or_with_one_that_cannot_answer_the_tool_is_denied() {
    let cache = tempfile::tempdir().unwrap();
    let host = host(cache.path()).await;
    let record = call(&host, "test_sampling", json!({ "prompt": "p" }), None).await;
    assert_eq!(record.status, Status::ToolError);
    let message = &record.tool_error.as_ref().unwrap().message;
    assert!(
        message.contains("denied") && message.contains("no client"),
        "{message}"
    );
    assert!(!client_receipt(&record).ok);

    let fake = Arc::new(Fake {
        sample_reply: Some(Err(ClientError::Unsupported("sampling"))),
        ..Fake::default()
    });
    let record = call(&host, "test_sampling", json!({ "prompt": "p" }), Some(fake)).await;
    let message = &record.tool_error.as_ref().unwrap().message;
    assert!(message.contains("does not support sampling"), "{message}");
    assert!(!client_receipt(&record).ok);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_granted_only_elicitation_cannot_sample() {
    let cache = tempfile::tempdir().unwrap();
    let narrow = "[tools.test_sampling]\ncapabilities.client = { requests = [\"elicitation\"] }\n";
    let host = host_with(
        &[("sampling", guest(guests::CONF_SAMPLING))],
        narrow,
        cache.path(),
    )
    .await;
    // Its claim of `sampling` is not granted: it is not even admitted.
    assert!(host.tool("test_sampling").is_none());
    let exam = &host.examinations()[0];
    assert!(
        matches!(&exam.verdict, vak_host::Verdict::Refused { kind, .. } if kind == "not_granted"),
        "{:?}",
        exam.verdict
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn form_answers_are_checked_against_the_form_before_the_tool_sees_them() {
    let cache = tempfile::tempdir().unwrap();
    let host = host(cache.path()).await;
    let answer = |content: serde_json::Value| {
        Arc::new(Fake {
            elicit_reply: Some(Ok(ElicitReply {
                action: ElicitAction::Accept,
                content: content.as_object().cloned(),
            })),
            ..Fake::default()
        })
    };
    let good = answer(json!({ "username": "ada", "email": "ada@example.org" }));
    let record = call(
        &host,
        "test_elicitation",
        json!({ "message": "who?" }),
        Some(good.clone()),
    )
    .await;
    assert_eq!(
        record.status,
        Status::Completed,
        "{}",
        record.to_json_pretty()
    );
    assert!(
        record
            .result
            .as_ref()
            .unwrap()
            .markdown
            .contains("ada@example.org")
    );
    assert_eq!(good.forms.lock().unwrap()[0].message, "who?");
    // Cited as observed: the host witnessed the person's answer.
    assert_eq!(client_receipt(&record).outcome["action"], "accept");

    for bad in [
        json!({ "username": 7, "email": "e" }),
        json!({ "username": "ada" }),
        json!({ "username": "ada", "email": "e", "password": "x" }),
    ] {
        let record = call(
            &host,
            "test_elicitation",
            json!({ "message": "who?" }),
            Some(answer(bad.clone())),
        )
        .await;
        assert_eq!(record.status, Status::ToolError, "{bad}");
        let message = &record.tool_error.as_ref().unwrap().message;
        assert!(message.contains("refused"), "{bad}: {message}");
        // Nothing the client sent reached the tool's document.
        assert!(record.result.is_none());
        assert!(!client_receipt(&record).ok);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn log_lines_reach_the_client_at_its_level_and_always_the_record() {
    let cache = tempfile::tempdir().unwrap();
    let host = host(cache.path()).await;
    let info = Arc::new(Fake {
        level: Some(LogLevel::Info),
        ..Fake::default()
    });
    let record = call(
        &host,
        "test_tool_with_logging",
        json!({}),
        Some(info.clone()),
    )
    .await;
    assert_eq!(record.status, Status::Completed);
    let sent: Vec<String> = info
        .logs
        .lock()
        .unwrap()
        .iter()
        .map(|(_, m)| m.clone())
        .collect();
    assert_eq!(
        sent,
        [
            "Tool execution started",
            "Tool processing data",
            "Tool execution completed"
        ]
    );
    let quiet = Arc::new(Fake {
        level: Some(LogLevel::Error),
        ..Fake::default()
    });
    let record = call(
        &host,
        "test_tool_with_logging",
        json!({}),
        Some(quiet.clone()),
    )
    .await;
    assert!(quiet.logs.lock().unwrap().is_empty());
    assert_eq!(record.logs.lines.len(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_secret_the_tool_holds_reaches_the_client_redacted_in_logs_prompts_and_forms() {
    // Each tool's grant binds `api_key`; the model pasted its value into the arguments (the
    // way a tool can hold a value the host never gave it).
    let credential =
        r#"credentials.k = { secret = "api_key", audience = ["https://api.example"] }"#;
    let policy = format!(
        r#"
[tools.hostile.capabilities]
clock = {{ zones = ["UTC"] }}
log = {{}}
http = {{ origins = ["https://api.example"], {credential} }}
[tools.test_sampling.capabilities]
client = {{ requests = ["sampling"] }}
http = {{ origins = ["https://api.example"], {credential} }}
[tools.test_elicitation.capabilities]
client = {{ requests = ["elicitation"] }}
http = {{ origins = ["https://api.example"], {credential} }}
"#
    );
    let cache = tempfile::tempdir().unwrap();
    let host = vak_host::HostBuilder::new()
        .policy(vak_host::Policy::parse(&policy, "test").unwrap())
        .cache_dir(Some(cache.path().to_path_buf()))
        .secrets(Arc::new(vak_tests::OneSecret {
            name: "api_key",
            value: "k3y 0f/th3 h0st????",
        }))
        .component("hostile", guest(guests::HOSTILE))
        .component("sampling", guest(guests::CONF_SAMPLING))
        .component("elicitation", guest(guests::CONF_ELICITATION))
        .build()
        .await
        .unwrap();
    for name in ["hostile", "test_sampling", "test_elicitation"] {
        assert!(host.tool(name).is_some(), "{:#?}", host.examinations());
    }
    // A value whose 11 encodings are all different: spaces, `/` and `?` to escape, base64
    // with padding and with `+` and `/`.
    let forms = vak_host::secrets::encodings("k3y 0f/th3 h0st????");
    assert_eq!(forms.len(), 11, "{forms:?}");
    let fake = Arc::new(Fake {
        level: Some(LogLevel::Debug),
        sample_reply: Some(Ok(SampleReply {
            text: "ok".into(),
            model: "m-1".into(),
            stop_reason: None,
        })),
        elicit_reply: Some(Ok(ElicitReply {
            action: ElicitAction::Decline,
            content: None,
        })),
        ..Fake::default()
    });
    for (i, form) in forms.iter().enumerate() {
        let said = format!("the key is {form}!");
        let calls = [
            ("hostile", json!({ "mode": "log-text", "text": said })),
            ("test_sampling", json!({ "prompt": said })),
            ("test_elicitation", json!({ "message": said })),
        ];
        for (tool, args) in calls {
            let record = call(&host, tool, args, Some(fake.clone())).await;
            assert_eq!(
                record.status,
                Status::Completed,
                "{}",
                record.to_json_pretty()
            );
            let json = record.to_json_pretty();
            assert!(!json.contains(form.as_str()), "{form} in {json}");
        }
        // Refused at the schema stage, before any tool ran: the record still keeps no value.
        let record = call(
            &host,
            "hostile",
            json!({ "mode": "log-text", "text": said, "n": "not a number" }),
            None,
        )
        .await;
        assert_eq!(record.status, Status::Refused);
        let json = record.to_json_pretty();
        assert!(!json.contains(form.as_str()), "{form} in {json}");
        assert!(
            record.redacted.iter().any(|r| r == "arguments: 1"),
            "{:?}",
            record.redacted
        );
        let logs = fake.logs.lock().unwrap();
        assert_eq!(logs[i].1, "the key is [redacted]!", "{form}");
        let samples = fake.samples.lock().unwrap();
        assert_eq!(samples[i].messages[0].1, "the key is [redacted]!", "{form}");
        let asked = fake.forms.lock().unwrap();
        assert_eq!(asked[i].message, "the key is [redacted]!", "{form}");
    }
}

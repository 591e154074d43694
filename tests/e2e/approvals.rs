//! Approvals: a tool or a scope marked `ask` runs only after a person's yes, bound to the exact
//! call (tool, arguments, grant, principal), spent by that call; a denial, a timeout, a replayed
//! or foreign answer refuses the call at `permission`, and the record keeps every question.

use futures::future::BoxFuture;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use vak_host::approval::{Answer, ApprovalRequest, Approver};
use vak_host::{HostBuilder, Policy, Proposal, Stage, Status};
use vak_tests::bundled;

/// What the scripted person does with each request.
#[derive(Clone, Copy)]
enum Act {
    Approve,
    Deny,
    /// Answer with the first approval this approver ever gave (a replay).
    Replay,
    /// Never answer.
    Silent,
}

struct Scripted {
    act: Mutex<Act>,
    asked: AtomicUsize,
    first: Mutex<Option<Answer>>,
    seen: Mutex<Vec<ApprovalRequest>>,
}

impl Scripted {
    fn new() -> Arc<Scripted> {
        Arc::new(Scripted {
            act: Mutex::new(Act::Approve),
            asked: AtomicUsize::new(0),
            first: Mutex::new(None),
            seen: Mutex::new(Vec::new()),
        })
    }

    fn then(&self, act: Act) {
        *self.act.lock().unwrap() = act;
    }
}

impl Approver for Scripted {
    fn decide(&self, request: ApprovalRequest) -> BoxFuture<'static, Answer> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        self.seen.lock().unwrap().push(request.clone());
        let act = *self.act.lock().unwrap();
        let answer = match act {
            Act::Approve => {
                let yes = request.approve("carol");
                self.first.lock().unwrap().get_or_insert(yes.clone());
                Some(yes)
            }
            Act::Deny => Some(request.deny("carol", "not today")),
            Act::Replay => self.first.lock().unwrap().clone(),
            Act::Silent => None,
        };
        Box::pin(async move {
            match answer {
                Some(a) => a,
                None => std::future::pending().await,
            }
        })
    }
}

async fn host(
    policy: &str,
    approver: Option<Arc<Scripted>>,
) -> (vak_host::Host, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let policy = Policy::parse(policy, "test policy").expect("test policy parses");
    let mut builder = HostBuilder::new()
        .policy(policy)
        .cache_dir(Some(
            std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("approvals-cache"),
        ))
        .component("clock", bundled("clock"))
        .component("replace", bundled("replace"));
    if let Some(a) = approver {
        builder = builder.approver(a);
    }
    (builder.build().await.expect("host builds"), dir)
}

const CLOCK_ASKS: &str = r#"
[tools.clock]
ask = true
approval_timeout_ms = 300
capabilities.clock = { zones = ["*"] }
"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_marked_ask_runs_once_per_yes_and_is_refused_at_permission_otherwise() {
    let person = Scripted::new();
    let (host, _dir) = host(CLOCK_ASKS, Some(person.clone())).await;
    let session = host.session(Some("alice"));
    let paris = || Proposal::new("clock", r#"{"zone":"Europe/Paris"}"#);

    // Approved: the call runs, and the record says who said yes to what.
    let r = session.call(paris()).await;
    assert_eq!(r.status, Status::Completed, "{}", r.to_json_pretty());
    assert_eq!(r.approvals.len(), 1);
    let entry = &r.approvals[0];
    assert_eq!(entry.decision, "approved");
    assert_eq!(entry.by.as_deref(), Some("carol"));
    assert_eq!(entry.request["scope"]["kind"], "call");
    assert_eq!(entry.request["principal"], "alice");
    assert_eq!(
        entry.request["arguments_sha256"],
        r.arguments_digest.as_str()
    );
    let permission = r
        .stages
        .iter()
        .find(|s| s.stage == Stage::Permission)
        .unwrap();
    assert!(
        permission.note.contains("approved by carol"),
        "{}",
        permission.note
    );

    // The same call again is asked again: a yes is spent by its call.
    let again = session.call(paris()).await;
    assert_eq!(again.status, Status::Completed);
    assert_eq!(person.asked.load(Ordering::SeqCst), 2);
    let seen = person.seen.lock().unwrap().clone();
    assert_ne!(seen[0].id, seen[1].id);
    assert_eq!(
        seen[0].binding, seen[1].binding,
        "same tool, arguments, grant and principal"
    );

    // Denied: refused at permission, nothing dispatched.
    person.then(Act::Deny);
    let r = session.call(paris()).await;
    assert_eq!(r.status, Status::Refused);
    let e = r.error.as_ref().unwrap();
    assert_eq!(
        (e.stage, e.kind.as_str(), e.retryable),
        (Stage::Permission, "approval_denied", false)
    );
    assert!(e.message.contains("not today"), "{}", e.message);
    assert!(r.receipts.is_empty() && r.usage.fuel == 0);
    assert_eq!(r.approvals[0].decision, "denied");

    // The first yes replayed for changed arguments, and for the same arguments: both refused.
    person.then(Act::Replay);
    let tokyo = session
        .call(Proposal::new("clock", r#"{"zone":"Asia/Tokyo"}"#))
        .await;
    let e = tokyo.error.as_ref().unwrap();
    assert_eq!(
        (e.stage, e.kind.as_str()),
        (Stage::Permission, "approval_invalid")
    );
    assert!(e.message.contains("another call"), "{}", e.message);
    let same = session.call(paris()).await;
    let e = same.error.as_ref().unwrap();
    assert_eq!(e.kind, "approval_invalid");
    assert!(e.message.contains("spent"), "{}", e.message);
    assert!(tokyo.receipts.is_empty() && same.receipts.is_empty());

    // No answer within the grant's timeout: refused, and a retry may find someone.
    person.then(Act::Silent);
    let r = session.call(paris()).await;
    let e = r.error.as_ref().unwrap();
    assert_eq!(
        (e.stage, e.kind.as_str(), e.retryable),
        (Stage::Permission, "approval_timeout", true)
    );
    assert_eq!(r.approvals[0].decision, "timeout");
    assert!(r.approvals[0].waited_ms >= 300);
}

#[tokio::test(flavor = "multi_thread")]
async fn with_no_one_to_ask_a_call_is_refused_as_approval_required() {
    let (host, _dir) = host(CLOCK_ASKS, None).await;
    let r = host.call(Proposal::new("clock", r#"{"zone":"UTC"}"#)).await;
    let e = r.error.as_ref().unwrap();
    assert_eq!(
        (e.stage, e.kind.as_str(), e.retryable),
        (Stage::Permission, "approval_required", false)
    );
    assert_eq!(e.details["binding"], r.approvals[0].request["binding"]);
    assert_eq!(r.approvals[0].decision, "unavailable");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_root_marked_ask_waits_at_its_first_use_and_a_denial_ends_the_call_at_permission() {
    let person = Scripted::new();
    let files = tempfile::tempdir().unwrap();
    std::fs::write(files.path().join("a.txt"), "hello hello\n").unwrap();
    let policy = format!(
        "[tools.replace]\ncapabilities.workspace = {{ roots = [{{ name = \"project\", path = \"{}\", mode = \"read-write\", ask = true }}] }}\n",
        files.path().display()
    );
    let (host, _dir) = host(&policy, Some(person.clone())).await;
    let edit = || {
        Proposal::new(
            "replace",
            r#"{"root":"project","path":"a.txt","find":"hello","replace":"bye"}"#,
        )
    };

    // One question for the root, however many reads and writes follow.
    let r = host.call(edit()).await;
    assert_eq!(r.status, Status::Completed, "{}", r.to_json_pretty());
    assert_eq!(person.asked.load(Ordering::SeqCst), 1);
    assert_eq!(r.approvals.len(), 1);
    assert_eq!(
        r.approvals[0].request["scope"],
        serde_json::json!({"kind": "root", "name": "project"})
    );
    assert!(r.receipts.len() >= 2);
    assert_eq!(
        std::fs::read_to_string(files.path().join("a.txt")).unwrap(),
        "bye bye\n"
    );

    // Denied at the first read: nothing written, a receipt of the refusal, refused at permission.
    std::fs::write(files.path().join("a.txt"), "hello hello\n").unwrap();
    person.then(Act::Deny);
    let r = host.call(edit()).await;
    assert_eq!(r.status, Status::Refused, "{}", r.to_json_pretty());
    let e = r.error.as_ref().unwrap();
    assert_eq!(
        (e.stage, e.kind.as_str()),
        (Stage::Permission, "approval_denied")
    );
    assert_eq!(r.receipts.len(), 1);
    assert!(!r.receipts[0].ok);
    assert_eq!(
        std::fs::read_to_string(files.path().join("a.txt")).unwrap(),
        "hello hello\n"
    );
    assert!(r.usage.fuel > 0, "the guest ran up to the refused use");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_cancelled_while_it_waits_for_approval_ends_at_permission_as_cancelled() {
    let person = Scripted::new();
    person.then(Act::Silent);
    let (host, _dir) = host(CLOCK_ASKS, Some(person.clone())).await;
    let cancel = tokio_util::sync::CancellationToken::new();
    let stopper = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        stopper.cancel();
    });
    let r = host
        .session(None)
        .call_cancellable(Proposal::new("clock", r#"{"zone":"UTC"}"#), cancel)
        .await;
    let e = r.error.as_ref().unwrap();
    assert_eq!(
        (e.stage, e.kind.as_str(), e.retryable),
        (Stage::Permission, "cancelled", true)
    );
    assert_eq!(r.approvals[0].decision, "cancelled");
    assert!(
        r.approvals[0].waited_ms < 300,
        "the wait ended with the call, not at the timeout"
    );
}

/// Over MCP, vak asks with an elicitation form of one boolean and builds the approval itself,
/// bound to the question the answer is the JSON-RPC response to. A client cannot approve
/// another call: not by answering one question while naming another's approval id and binding
/// in its answer, not by answering the same question twice. The question the person reads is
/// neutralised (a bidi override in the arguments is shown as an escape).
#[tokio::test(flavor = "multi_thread")]
async fn over_mcp_an_answer_approves_only_the_call_whose_question_it_answers() {
    use serde_json::{Value, json};
    use vak_host::mcp::{Catalog, VakMcp};
    const POLICY: &str = r#"
[tools.clock]
ask = true
approval_timeout_ms = 20000
capabilities.clock = { zones = ["*"] }
"#;
    let (host, _dir) = host(POLICY, None).await;
    let mut client = {
        use rmcp::ServiceExt;
        let (client_end, server_end) = tokio::io::duplex(1 << 20);
        let handler = VakMcp::new(&host, Catalog::of(&host).expect("catalog"), None);
        tokio::spawn(async move {
            let (r, w) = tokio::io::split(server_end);
            if let Ok(running) = handler.serve((r, w)).await {
                let _ = running.waiting().await;
            }
        });
        let (r, w) = tokio::io::split(client_end);
        vak_tests::mcp::Client::new(r, w)
    };
    let init = client
        .request(
            "initialize",
            json!({
                "protocolVersion": "2025-11-25",
                "capabilities": { "elicitation": {} },
                "clientInfo": { "name": "vak-tests", "version": "0" },
            }),
        )
        .await;
    assert!(init["result"].is_object(), "{init}");
    client
        .send(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }))
        .await;
    let call = |zone: &str| json!({ "name": "clock", "arguments": { "zone": zone } });
    let paris = client
        .start("tools/call", call("Europe/Paris\u{202e}x"))
        .await;
    let tokyo = client.start("tools/call", call("Asia/Tokyo")).await;

    // Both questions arrive, each an elicitation request of its own.
    let mut questions: Vec<(Value, String)> = Vec::new();
    while questions.len() < 2 {
        let m = client
            .next(std::time::Duration::from_secs(60))
            .await
            .expect("an elicitation request");
        if m["method"] == "elicitation/create" {
            let message = m["params"]["message"].as_str().unwrap().to_string();
            questions.push((m["id"].clone(), message));
        } else {
            client.other.push(m);
        }
    }
    let (p_id, p_msg) = questions
        .iter()
        .find(|(_, m)| m.contains("Europe/Paris"))
        .cloned()
        .expect("the question for Paris");
    let (t_id, t_msg) = questions
        .iter()
        .find(|(_, m)| m.contains("Asia/Tokyo"))
        .cloned()
        .expect("the question for Tokyo");
    assert!(!p_msg.contains('\u{202e}'), "{p_msg}");
    assert!(p_msg.contains("\\u{202e}"), "{p_msg}");
    assert!(p_msg.contains("can reach: no network origin"), "{p_msg}");
    let approval_of = |m: &str| {
        let at = m.find("approval approval_").expect("the approval id") + "approval ".len();
        m[at..].split_whitespace().next().unwrap().to_string()
    };

    // Tokyo's question answered yes, the answer naming Paris's approval: it approves Tokyo.
    let answer =
        |id: &Value, content: Value| json!({ "jsonrpc": "2.0", "id": id, "result": content });
    client
        .send(&answer(
            &t_id,
            json!({ "action": "accept", "content": {
                "approve": true,
                "approval_id": approval_of(&p_msg),
                "call": "Europe/Paris",
            } }),
        ))
        .await;
    // The same yes again, to the same question: nothing more is approved by it.
    client
        .send(&answer(
            &t_id,
            json!({ "action": "accept", "content": { "approve": true } }),
        ))
        .await;
    let t = client.response(tokyo).await;
    assert_eq!(t["result"]["isError"], false, "{t}");
    assert_eq!(t["result"]["_meta"]["dev.vak/status"], "completed", "{t}");
    // Paris is still waiting for its own answer; it declines.
    client
        .send(&answer(&p_id, json!({ "action": "decline" })))
        .await;
    let p = client.response(paris).await;
    assert_eq!(p["result"]["isError"], true, "{p}");
    assert_eq!(
        p["result"]["_meta"]["dev.vak/error"]["kind"], "approval_denied",
        "{p}"
    );
    assert_ne!(approval_of(&p_msg), approval_of(&t_msg));
}

//! The approvals inbox end to end: a `vak serve --approvals inbox` call of a tool marked `ask`
//! waits; `vak audit serve --approvals` (another process on the same state directory) lists it
//! with its binding; a person's session (the printed token exchanged for an `HttpOnly;
//! SameSite=Strict` cookie) answers with the form's CSRF token, and the call runs; its record
//! says the inbox answered. A forged POST (no CSRF token, no session, a wrong Host, a wrong
//! Origin, another site) and a replayed answer are refused.

#[path = "audit/cdp.rs"]
mod cdp;
#[path = "audit/support.rs"]
mod support;

use serde_json::json;
use std::time::Duration;
use support::{Answer, request, request_with, serve_saying};
use vak_tests::{bundled, mcp, serve_command};

const POLICY: &str = "[tools.stats]\nask = true\napproval_timeout_ms = 60000\n";

/// The value of the hidden field `name` in the first form of `body`.
fn field(body: &str, name: &str) -> String {
    let at = body
        .find(&format!("name=\"{name}\" value=\""))
        .unwrap_or_else(|| panic!("no field {name}: {body}"));
    let rest = &body[at + name.len() + 15..];
    rest[..rest.find('"').unwrap()].to_string()
}

/// `vak serve --approvals inbox` on stdio, initialised, and the audit server with its inbox.
async fn servers(
    dir: &std::path::Path,
) -> (
    tokio::process::Child,
    mcp::Client,
    tokio::process::Child,
    String,
    String,
) {
    let mut server = serve_command(
        dir,
        &[("stats", bundled("stats"))],
        POLICY,
        &["--approvals", "inbox"],
        std::process::Stdio::null(),
    )
    .spawn()
    .expect("spawn vak serve");
    let mut client = mcp::Client::new(server.stdout.take().unwrap(), server.stdin.take().unwrap());
    client.initialize("2025-06-18").await;
    let (audit, addr, said) = serve_saying(dir, &["--approvals"]).await;
    let link = said
        .iter()
        .find_map(|l| {
            l.split_once(&format!("http://{addr}"))
                .map(|(_, p)| p.to_string())
        })
        .unwrap_or_else(|| panic!("the inbox's link is printed: {said:?}"));
    assert!(link.starts_with("/approvals?token="), "{link}");
    (server, client, audit, addr, link)
}

/// The session cookie the token link sets.
async fn session(addr: &str, link: &str) -> String {
    let a = request(addr, "GET", link.to_string(), "127.0.0.1").await;
    assert_eq!(a.status, 303, "{}", a.body);
    let cookie = a
        .header("set-cookie")
        .expect("a session cookie")
        .to_string();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    cookie.split(';').next().unwrap().to_string()
}

/// The inbox page once a question waits there.
async fn waiting(addr: &str, cookie: &str) -> Answer {
    for _ in 0..600 {
        let page = request_with(
            addr,
            "GET",
            "/approvals",
            &[("Host", "127.0.0.1"), ("Cookie", cookie)],
            "",
        )
        .await;
        assert_eq!(page.status, 200, "{}", page.body);
        if page.body.contains("class=\"question\"") {
            return page;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no question reached the inbox");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_person_answers_a_waiting_call_in_the_inbox_and_forgeries_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, mut client, _audit, addr, link) = servers(dir.path()).await;
    let origin = format!("http://{addr}");
    let call = client
        .start(
            "tools/call",
            json!({ "name": "stats", "arguments": { "values": [1, 2, 3] } }),
        )
        .await;

    // No way in without the token's session.
    let bare = request(&addr, "GET", "/approvals".into(), "127.0.0.1").await;
    assert_eq!(bare.status, 403, "{}", bare.body);
    let wrong = request(&addr, "GET", "/approvals?token=00".into(), "127.0.0.1").await;
    assert_eq!(wrong.status, 403, "{}", wrong.body);
    let cookie = session(&addr, &link).await;
    let page = waiting(&addr, &cookie).await;
    // The binding shown: tool, arguments digest, grant digest, principal, the binding itself.
    for shown in [
        "stats",
        "arguments SHA-256",
        "grant SHA-256",
        "principal",
        "binding",
    ] {
        assert!(page.body.contains(shown), "{shown}: {}", page.body);
    }
    assert!(
        page.body.contains("{&quot;values&quot;:[1,2,3]}"),
        "the arguments: {}",
        page.body
    );
    let (csrf, id, binding) = (
        field(&page.body, "csrf"),
        field(&page.body, "id"),
        field(&page.body, "binding"),
    );
    assert_eq!(csrf.len(), 64);
    let yes = format!("csrf={csrf}&id={id}&binding={binding}&decision=yes");
    let post = |host: &str, origin: Option<&str>, cookie: Option<&str>, body: String| {
        let (addr, host, origin, cookie) = (
            addr.clone(),
            host.to_string(),
            origin.map(str::to_string),
            cookie.map(str::to_string),
        );
        async move {
            let mut headers = vec![
                ("Host", host.as_str()),
                ("Content-Type", "application/x-www-form-urlencoded"),
            ];
            if let Some(o) = &origin {
                headers.push(("Origin", o.as_str()));
            }
            if let Some(c) = &cookie {
                headers.push(("Cookie", c.as_str()));
            }
            request_with(&addr, "POST", "/approvals/answer", &headers, &body).await
        }
    };
    // Forgeries: each refused, and the question still waits.
    let no_csrf = format!("id={id}&binding={binding}&decision=yes");
    let wrong_csrf = yes.replace(&csrf, &"0".repeat(64));
    for (what, answer) in [
        (
            "no CSRF token",
            post("127.0.0.1", Some(&origin), Some(&cookie), no_csrf).await,
        ),
        (
            "another CSRF token",
            post("127.0.0.1", Some(&origin), Some(&cookie), wrong_csrf).await,
        ),
        (
            "no session",
            post("127.0.0.1", Some(&origin), None, yes.clone()).await,
        ),
        (
            "a wrong Host",
            post("evil.example", Some(&origin), Some(&cookie), yes.clone()).await,
        ),
        (
            "a wrong Origin",
            post(
                "127.0.0.1",
                Some("http://evil.example"),
                Some(&cookie),
                yes.clone(),
            )
            .await,
        ),
    ] {
        assert_eq!(answer.status, 403, "{what}: {}", answer.body);
    }
    let cross = request_with(
        &addr,
        "POST",
        "/approvals/answer",
        &[
            ("Host", "127.0.0.1"),
            ("Content-Type", "application/x-www-form-urlencoded"),
            ("Cookie", &cookie),
            ("Sec-Fetch-Site", "cross-site"),
        ],
        &yes,
    )
    .await;
    assert_eq!(cross.status, 403, "another site: {}", cross.body);
    let get_answer = request(&addr, "GET", "/approvals/answer".into(), "127.0.0.1").await;
    assert_eq!(get_answer.status, 405, "answers are POSTed only");
    assert!(
        waiting(&addr, &cookie).await.body.contains(&binding),
        "still waiting after the forgeries"
    );

    // In a real browser, where one is installed: the link's token gives it a session, and the
    // inbox shows the question with its two buttons (a screenshot for docs/audit.md).
    match support::chromium() {
        None => vak_tests::skipped("Chromium is not installed (Debian package chromium)"),
        Some(browser) => {
            let profile = dir.path().join("chromium-profile");
            let dom = support::dump_dom(&browser, &format!("http://{addr}{link}"), &profile);
            assert!(
                dom.contains("Yes: let this call run") && dom.contains(&binding),
                "the browser's session sees the question: {dom}"
            );
            support::screenshot(
                &browser,
                &format!("http://{addr}{link}"),
                &profile,
                "approvals",
            );
        }
    }

    // The answer: taken once; the call runs.
    let taken = post("127.0.0.1", Some(&origin), Some(&cookie), yes.clone()).await;
    assert_eq!(taken.status, 303, "{}", taken.body);
    let replay = post("127.0.0.1", Some(&origin), Some(&cookie), yes.clone()).await;
    assert_eq!(replay.status, 409, "a replayed answer: {}", replay.body);
    assert!(replay.body.contains("answered already"), "{}", replay.body);
    let done = client.response(call).await;
    assert_eq!(done["result"]["isError"], false, "{done}");
    let call_id = done["result"]["_meta"]["dev.vak/call_id"]
        .as_str()
        .expect("a call id")
        .to_string();

    // The call's record, on the audit pages: who answered, through the inbox.
    let mut record = None;
    for _ in 0..200 {
        let page = request(&addr, "GET", format!("/call?id={call_id}"), "localhost").await;
        if page.status == 200 {
            record = Some(page);
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let record = record.expect("the call's record reaches the journal");
    assert!(
        record
            .body
            .contains("approvals inbox: vak audit serve (pid"),
        "{}",
        record.body
    );
    assert!(record.body.contains("approved"), "{}", record.body);

    // A no refuses the next call at the permission stage.
    let second = client
        .start(
            "tools/call",
            json!({ "name": "stats", "arguments": { "values": [4] } }),
        )
        .await;
    let page = waiting(&addr, &cookie).await;
    let no = format!(
        "csrf={}&id={}&binding={}&decision=no",
        field(&page.body, "csrf"),
        field(&page.body, "id"),
        field(&page.body, "binding")
    );
    assert_eq!(post("localhost", None, Some(&cookie), no).await.status, 303);
    let refused = client.response(second).await;
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    assert_eq!(
        refused["result"]["_meta"]["dev.vak/error"]["kind"], "approval_denied",
        "{refused}"
    );
}

/// In a real browser: the printed link gives headless Chromium its session, the question shows
/// in the inbox, a click on its yes submits the page's form (the session cookie, which no script
/// can read, and the form's CSRF token), and the waiting call runs with the inbox's answer in
/// its record.
#[tokio::test(flavor = "multi_thread")]
async fn a_person_clicks_yes_in_a_real_browser_and_the_call_runs() {
    let Some(browser) = support::chromium() else {
        vak_tests::skipped("Chromium is not installed (Debian package chromium)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (_server, mut client, _audit, addr, link) = servers(dir.path()).await;
    let call = client
        .start(
            "tools/call",
            json!({ "name": "stats", "arguments": { "values": [7, 8] } }),
        )
        .await;
    let profile = dir.path().join("cdp-profile");
    let url = format!("http://{addr}{link}");
    let (question, cookie_seen, notice) = tokio::task::spawn_blocking(move || {
        let mut b = cdp::Browser::launch(&browser, &profile);
        let tab = b.tab();
        b.navigate(&tab, &url);
        // The question reaches the inbox when `vak serve` asks it: the page is reloaded until
        // it shows (as a person would).
        let yes = "document.querySelector('section.question button.yes')";
        let mut shown = false;
        for _ in 0..60 {
            let inbox = format!("location.pathname === '/approvals' && {yes}");
            if b.wait(&tab, &inbox, Duration::from_millis(500)) {
                shown = true;
                break;
            }
            b.evaluate(
                &tab,
                "location.pathname === '/approvals' && (location.reload(), true)",
            );
        }
        assert!(
            shown,
            "the inbox shows the question: {}",
            b.evaluate(&tab, "document.documentElement.outerHTML")
        );
        let question = b.evaluate(
            &tab,
            "document.querySelector('section.question input[name=id]').value",
        );
        let csrf = b.evaluate(
            &tab,
            "document.querySelector('section.question input[name=csrf]').value",
        );
        assert_eq!(csrf.as_str().map(str::len), Some(64), "{csrf}");
        let cookie_seen = b.evaluate(&tab, "document.cookie");
        assert_eq!(
            b.evaluate(&tab, &format!("{yes}.click(), true")),
            json!(true)
        );
        assert!(
            b.wait(
                &tab,
                "document.getElementById('notice')",
                Duration::from_secs(30)
            ),
            "the answer was taken: {}",
            b.evaluate(&tab, "document.documentElement.outerHTML")
        );
        let notice = b.evaluate(&tab, "document.getElementById('notice').textContent");
        (question, cookie_seen, notice)
    })
    .await
    .unwrap();
    assert_eq!(cookie_seen, json!(""), "the session cookie is HttpOnly");
    let question = question.as_str().expect("the question's id").to_string();
    assert!(
        notice.as_str().is_some_and(|n| n.contains(&question)),
        "{notice} names {question}"
    );
    let done = client.response(call).await;
    assert_eq!(done["result"]["isError"], false, "{done}");
    let call_id = done["result"]["_meta"]["dev.vak/call_id"]
        .as_str()
        .expect("a call id")
        .to_string();
    let mut record = None;
    for _ in 0..200 {
        let page = request(&addr, "GET", format!("/call?id={call_id}"), "localhost").await;
        if page.status == 200 {
            record = Some(page);
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let record = record.expect("the call's record reaches the journal");
    assert!(
        record
            .body
            .contains("approvals inbox: vak audit serve (pid")
            && record.body.contains("approved"),
        "{}",
        record.body
    );
}

/// Without --approvals the pages only read: no inbox, no answer taken.
#[tokio::test(flavor = "multi_thread")]
async fn without_approvals_there_is_no_inbox() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("state")).unwrap();
    let (_audit, addr, said) = serve_saying(dir.path(), &[]).await;
    assert!(!said.iter().any(|l| l.contains("token=")), "{said:?}");
    let page = request(&addr, "GET", "/approvals?token=x".into(), "localhost").await;
    assert_eq!(page.status, 404, "{}", page.body);
    let post = request_with(
        &addr,
        "POST",
        "/approvals/answer",
        &[("Host", "localhost")],
        "",
    )
    .await;
    assert_eq!(post.status, 404, "{}", post.body);
}

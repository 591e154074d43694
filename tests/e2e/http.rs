//! The http capability against a server on 127.0.0.1: citations backed by fetch receipts, and
//! every SSRF route refused (with a receipt) before a byte leaves for an internal address.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use vak_host::capabilities::Capability;
use vak_host::evidence::Support;
use vak_host::{Host, HostBuilder, Policy, Proposal, Revocation, Status};
use vak_tests::{bundled, guest, guests, host_with};

/// A minimal HTTP/1.1 server: one thread, canned answers by path, a count of requests.
struct Server {
    port: u16,
    requests: Arc<AtomicUsize>,
}

fn serve() -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let requests = Arc::new(AtomicUsize::new(0));
    let count = requests.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            count.fetch_add(1, Ordering::SeqCst);
            let mut buf = Vec::new();
            let mut chunk = [0u8; 1024];
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            let head = String::from_utf8_lossy(&buf).to_string();
            let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
            let auth = head
                .lines()
                .find(|l| l.to_ascii_lowercase().starts_with("authorization:"))
                .map(|l| l[14..].trim().to_string())
                .unwrap_or_else(|| "none".into());
            let (status, extra, body) = match path.as_str() {
                "/page" => (
                    "200 OK",
                    String::new(),
                    "<html><head><title>Test page</title></head><body>hi</body></html>".to_string(),
                ),
                "/echo-auth" => ("200 OK", String::new(), auth),
                "/redirect-internal" => (
                    "302 Found",
                    "Location: http://169.254.169.254/latest/meta-data/\r\n".into(),
                    String::new(),
                ),
                "/redirect-cross" => (
                    "302 Found",
                    format!("Location: http://localhost:{port}/echo-auth\r\n"),
                    String::new(),
                ),
                "/redirect-same" => (
                    "302 Found",
                    "Location: /echo-auth\r\n".into(),
                    String::new(),
                ),
                "/big" => ("200 OK", String::new(), "x".repeat(3 << 20)),
                _ => ("404 Not Found", String::new(), "no".into()),
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n{extra}\r\n{body}",
                body.len()
            );
        }
    });
    Server { port, requests }
}

async fn host(policy: &str, cache: &tempfile::TempDir) -> Host {
    let host = host_with(
        &[
            ("research", bundled("research")),
            ("fetcher", guest(guests::FETCHER)),
        ],
        policy,
        cache.path(),
    )
    .await;
    assert!(host.tool("fetcher").is_some(), "{:#?}", host.examinations());
    host
}

/// 127.0.0.1 (and ::1, for localhost) named by the policy: the test server is reachable.
fn local_policy(port: u16) -> String {
    format!(
        r#"
[tools.research]
capabilities.http = {{ origins = ["http://127.0.0.1:{port}"], allow_addresses = ["127.0.0.1"] }}

[tools.fetcher]
capabilities.http = {{ origins = ["http://127.0.0.1:{port}", "http://localhost:{port}", "http://169.254.169.254"], allow_addresses = ["127.0.0.1", "::1"], max_body_bytes = 1048576 }}
"#
    )
}

async fn fetch(host: &Host, args: &str) -> vak_host::CallRecord {
    host.call(Proposal::new("fetcher", args)).await
}

#[tokio::test(flavor = "multi_thread")]
async fn research_findings_are_cited_to_fetch_receipts() {
    let server = serve();
    let cache = tempfile::tempdir().unwrap();
    let host = host(&local_policy(server.port), &cache).await;
    let url = format!("http://127.0.0.1:{}/page", server.port);
    let r = host
        .call(Proposal::new(
            "research",
            format!(r#"{{"urls":["{url}"]}}"#),
        ))
        .await;
    assert_eq!(r.status, Status::Completed, "{}", r.to_json_pretty());
    assert!(r.result.as_ref().unwrap().markdown.contains("Test page"));
    assert_eq!(r.receipts.len(), 1);
    let receipt = &r.receipts[0];
    assert_eq!(
        (receipt.capability, receipt.outcome["status"].as_u64()),
        (Capability::Http, Some(200))
    );
    let body = "<html><head><title>Test page</title></head><body>hi</body></html>";
    assert_eq!(
        receipt.digest,
        vak_host::digest::sha256_hex(body.as_bytes())
    );
    assert_eq!(r.evidence[0].item.kind, "cited");
    assert_eq!(
        r.evidence[0].support,
        Support::Supported,
        "{}",
        r.to_json_pretty()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn internal_addresses_are_refused_in_every_spelling() {
    let server = serve();
    let cache = tempfile::tempdir().unwrap();
    let p = server.port;
    // The origins are allowed, but no internal address is named: every one must be refused.
    // (`0x7f.1` needs no origin of its own: URL parsing makes it 127.0.0.1, and the policy
    // refuses an origin listed twice.)
    let policy = format!(
        r#"
[tools.fetcher]
capabilities.http = {{ origins = ["http://127.0.0.1:{p}", "http://localhost:{p}", "http://169.254.169.254", "http://[::ffff:127.0.0.1]:{p}", "http://[::1]:{p}"] }}
"#
    );
    let host = host(&policy, &cache).await;
    for url in [
        format!("http://127.0.0.1:{p}/page"),
        format!("http://localhost:{p}/page"),
        "http://169.254.169.254/latest/meta-data/".to_string(),
        format!("http://0x7f.1:{p}/page"),
        format!("http://[::ffff:127.0.0.1]:{p}/page"),
        format!("http://[::1]:{p}/page"),
    ] {
        let r = fetch(&host, &format!(r#"{{"url":"{url}"}}"#)).await;
        assert_eq!(r.status, Status::ToolError, "{url}: {}", r.to_json_pretty());
        assert_eq!(r.tool_error.as_ref().unwrap().code, "denied", "{url}");
        assert_eq!(r.receipts.len(), 1, "{url}");
        assert!(
            !r.receipts[0].ok && r.receipts[0].outcome["refused"].is_string(),
            "{url}"
        );
    }
    // An origin the policy does not list at all.
    let r = fetch(&host, r#"{"url":"http://example.com/"}"#).await;
    assert!(
        r.tool_error
            .unwrap()
            .message
            .contains("outside the origins")
    );
    assert_eq!(
        server.requests.load(Ordering::SeqCst),
        0,
        "not one request reached the server"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn redirects_are_checked_hop_by_hop_and_bodies_are_capped() {
    let server = serve();
    let cache = tempfile::tempdir().unwrap();
    let p = server.port;
    let host = host(&local_policy(p), &cache).await;

    let r = fetch(
        &host,
        &format!(r#"{{"url":"http://127.0.0.1:{p}/redirect-internal"}}"#),
    )
    .await;
    assert_eq!(
        r.tool_error.as_ref().map(|e| e.code.as_str()),
        Some("denied"),
        "{}",
        r.to_json_pretty()
    );
    assert_eq!(r.receipts.len(), 2);
    assert!(r.receipts[0].ok && r.receipts[0].outcome["redirect_to"].is_string());
    assert!(!r.receipts[1].ok, "the hop to 169.254.169.254 is refused");

    let r = fetch(&host, &format!(r#"{{"url":"http://127.0.0.1:{p}/big"}}"#)).await;
    assert_eq!(
        r.tool_error.as_ref().map(|e| e.code.as_str()),
        Some("denied"),
        "{}",
        r.to_json_pretty()
    );
    assert!(r.tool_error.unwrap().message.contains("larger than"));

    // Credentials go along within an origin and are dropped on a hop to another origin.
    let same = fetch(
        &host,
        &format!(
            r#"{{"url":"http://127.0.0.1:{p}/redirect-same","authorization":"Bearer s3cret"}}"#
        ),
    )
    .await;
    assert_eq!(same.result.unwrap().markdown, "Bearer s3cret");
    let cross = fetch(
        &host,
        &format!(
            r#"{{"url":"http://127.0.0.1:{p}/redirect-cross","authorization":"Bearer s3cret"}}"#
        ),
    )
    .await;
    assert_eq!(
        cross.status,
        Status::Completed,
        "{}",
        cross.to_json_pretty()
    );
    assert_eq!(cross.result.unwrap().markdown, "none");

    // A guest-set Host header is refused before anything is sent.
    let before = server.requests.load(Ordering::SeqCst);
    let r = fetch(
        &host,
        &format!(r#"{{"url":"http://127.0.0.1:{p}/page","host_header":"internal.example"}}"#),
    )
    .await;
    assert_eq!(r.tool_error.unwrap().code, "invalid");
    assert_eq!(server.requests.load(Ordering::SeqCst), before);
}

#[tokio::test(flavor = "multi_thread")]
async fn no_request_leaves_after_a_revocation() {
    let server = serve();
    let cache = tempfile::tempdir().unwrap();
    let p = server.port;
    let host = host(&local_policy(p), &cache).await;
    let running = {
        let host = host.clone();
        tokio::spawn(async move {
            fetch(
                &host,
                &format!(r#"{{"url":"http://127.0.0.1:{p}/page","repeat":true}}"#),
            )
            .await
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    host.revocations()
        .revoke(
            Revocation::Capability {
                tool: "fetcher".into(),
                capability: Capability::Http,
            },
            "test",
        )
        .await
        .unwrap();
    let r = running.await.unwrap();
    assert_eq!(
        r.tool_error.as_ref().map(|e| e.code.as_str()),
        Some("revoked"),
        "{}",
        r.to_json_pretty()
    );
    let sent = r.receipts.iter().filter(|x| x.ok).count();
    assert!(sent > 0);
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert_eq!(
        server.requests.load(Ordering::SeqCst),
        sent,
        "every request that reached the server has its receipt, none came after"
    );
    assert!(r.receipts.last().unwrap().outcome["revoked"].is_string());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_credential_reaches_its_audience_and_no_other_origin() {
    let server = serve();
    let cache = tempfile::tempdir().unwrap();
    let p = server.port;
    let policy = format!(
        r#"
[tools.fetcher.capabilities.http]
origins = ["http://127.0.0.1:{p}", "http://localhost:{p}"]
allow_addresses = ["127.0.0.1", "::1"]
[tools.fetcher.capabilities.http.credentials.weather]
secret = "weather_key"
audience = ["http://127.0.0.1:{p}"]
[tools.fetcher.capabilities.http.credentials.unheld]
secret = "not_stored"
audience = ["http://127.0.0.1:{p}"]
"#
    );
    let host = HostBuilder::new()
        .policy(Policy::parse(&policy, "test").unwrap())
        .cache_dir(Some(cache.path().to_path_buf()))
        .secrets(Arc::new(vak_tests::OneSecret {
            name: "weather_key",
            value: "s3cr3t-v4lue",
        }))
        .component("fetcher", guest(guests::FETCHER))
        .build()
        .await
        .unwrap();
    assert!(host.tool("fetcher").is_some(), "{:#?}", host.examinations());
    let call = |args: String| {
        let host = host.clone();
        async move { host.call(Proposal::new("fetcher", args)).await }
    };

    // The tool may ask which aliases it has, their audience and whether the host holds a
    // value: never the value.
    let r = call(r#"{"url":"","ask_credentials":["weather","unheld","other"]}"#.to_string()).await;
    assert_eq!(r.status, Status::Completed, "{}", r.to_json_pretty());
    assert_eq!(
        r.result.as_ref().unwrap().markdown,
        format!(
            "weather: audience http://127.0.0.1:{p} held true\n\
             unheld: audience http://127.0.0.1:{p} held false\n\
             other: none"
        )
    );
    assert!(r.receipts.is_empty(), "a query is not an effect");

    // To the audience: injected as `Authorization: Bearer …` (the server echoes what it got).
    let r = call(format!(
        r#"{{"url":"http://127.0.0.1:{p}/echo-auth","credential":"weather"}}"#
    ))
    .await;
    assert_eq!(r.status, Status::Completed, "{}", r.to_json_pretty());
    // The server got the value; the guest sees its echo redacted, so nothing the tool passes
    // on (result, Markdown, logs, record) holds it in any encoding.
    assert_eq!(r.result.as_ref().unwrap().markdown, "Bearer [redacted]");
    let record = r.to_json_pretty();
    for form in vak_host::secrets::encodings("s3cr3t-v4lue") {
        assert!(!record.contains(&form), "{form} in {record}");
    }
    let receipt = &r.receipts[0];
    assert_eq!(receipt.request["credential"]["alias"], "weather");
    assert_eq!(receipt.request["credential"]["injected"], true);
    let receipts = serde_json::to_string(&r.receipts).unwrap();
    assert!(!receipts.contains("s3cr3t-v4lue"), "{receipts}");

    // A redirect to another origin: followed, without the credential.
    let r = call(format!(
        r#"{{"url":"http://127.0.0.1:{p}/redirect-cross","credential":"weather"}}"#
    ))
    .await;
    assert_eq!(r.status, Status::Completed, "{}", r.to_json_pretty());
    assert_eq!(r.result.as_ref().unwrap().markdown, "none");
    assert_eq!(r.receipts[0].request["credential"]["injected"], true);
    assert_eq!(r.receipts[1].request["credential"]["injected"], false);

    // Named for a request outside its audience: refused before anything is sent, with a receipt.
    let before = server.requests.load(Ordering::SeqCst);
    let r = call(format!(
        r#"{{"url":"http://localhost:{p}/echo-auth","credential":"weather"}}"#
    ))
    .await;
    assert_eq!(
        r.tool_error.as_ref().unwrap().code,
        "denied",
        "{}",
        r.to_json_pretty()
    );
    assert!(!r.receipts[0].ok);
    assert_eq!(server.requests.load(Ordering::SeqCst), before);

    // The tool cannot set the header the host injects, name an alias it was not granted, or
    // use a credential whose secret this host does not hold.
    for (args, code) in [
        (
            format!(
                r#"{{"url":"http://127.0.0.1:{p}/echo-auth","credential":"weather","authorization":"Bearer mine"}}"#
            ),
            "invalid",
        ),
        (
            format!(r#"{{"url":"http://127.0.0.1:{p}/echo-auth","credential":"other"}}"#),
            "denied",
        ),
        (
            format!(r#"{{"url":"http://127.0.0.1:{p}/echo-auth","credential":"unheld"}}"#),
            "failed",
        ),
        // A value the tool learnt some other way (the model put it in the arguments) does not
        // leave for an origin outside the audience: not as a header, not base64 in the URL.
        (
            format!(
                r#"{{"url":"http://localhost:{p}/echo-auth","authorization":"Bearer s3cr3t-v4lue"}}"#
            ),
            "denied",
        ),
        (
            format!(r#"{{"url":"http://localhost:{p}/page?k=czNjcjN0LXY0bHVl"}}"#),
            "denied",
        ),
    ] {
        let r = call(args).await;
        assert_eq!(
            r.tool_error.as_ref().unwrap().code,
            code,
            "{}",
            r.to_json_pretty()
        );
    }
    assert_eq!(server.requests.load(Ordering::SeqCst), before);
}

/// A grant that names its methods: a method outside them is refused (with a receipt) before a
/// byte leaves, and a grant of reads only makes the tool read-only to MCP clients.
#[tokio::test(flavor = "multi_thread")]
async fn a_grant_of_reads_only_refuses_other_methods_and_is_advertised_read_only() {
    let server = serve();
    let cache = tempfile::tempdir().unwrap();
    let port = server.port;
    let policy = format!(
        r#"
[tools.research]
capabilities.http = {{ origins = ["http://127.0.0.1:{port}"], allow_addresses = ["127.0.0.1"], methods = ["get", "HEAD"] }}

[tools.fetcher]
capabilities.http = {{ origins = ["http://127.0.0.1:{port}"], allow_addresses = ["127.0.0.1"], methods = ["GET"] }}
"#
    );
    let host = host(&policy, &cache).await;
    let url = format!("http://127.0.0.1:{port}/page");
    let r = fetch(&host, &format!(r#"{{"url":"{url}"}}"#)).await;
    assert_eq!(r.status, Status::Completed, "{}", r.to_json_pretty());
    let before = server.requests.load(Ordering::SeqCst);
    let r = fetch(
        &host,
        &format!(r#"{{"url":"{url}","method":"POST","body":"x"}}"#),
    )
    .await;
    assert_eq!(
        server.requests.load(Ordering::SeqCst),
        before,
        "nothing left for a method not granted"
    );
    let refusal = r
        .receipts
        .iter()
        .find(|x| !x.ok)
        .unwrap_or_else(|| panic!("a receipt of the refusal: {}", r.to_json_pretty()));
    assert!(
        refusal
            .outcome
            .to_string()
            .contains("method POST is not granted"),
        "{}",
        refusal.outcome
    );

    // To MCP: `research` (GET, HEAD) is read-only; a grant of every method would not be.
    let lookup = |name: &str| host.tool(name);
    let research = host.tool("research").unwrap();
    let decl = vak_host::mcp::declaration(research, &lookup, host.registry());
    assert_eq!(decl["annotations"]["readOnlyHint"], true, "{decl}");
    assert_eq!(decl["annotations"]["openWorldHint"], true, "{decl}");
    assert_eq!(decl["annotations"]["destructiveHint"], false, "{decl}");
    let host_all = host_with(
        &[("research", bundled("research"))],
        &format!(
            "[tools.research]\ncapabilities.http = {{ origins = [\"http://127.0.0.1:{port}\"], allow_addresses = [\"127.0.0.1\"] }}\n"
        ),
        cache.path(),
    )
    .await;
    let lookup = |name: &str| host_all.tool(name);
    let decl = vak_host::mcp::declaration(
        host_all.tool("research").unwrap(),
        &lookup,
        host_all.registry(),
    );
    assert_eq!(decl["annotations"]["readOnlyHint"], false, "{decl}");
    // PUT and DELETE may replace or remove what is at the origin.
    assert_eq!(decl["annotations"]["destructiveHint"], true, "{decl}");

    // A method the broker does not know is a policy error with its line.
    let bad = policy.replace(r#"methods = ["GET"]"#, r#"methods = ["BREW"]"#);
    let e = Policy::parse(&bad, "p").unwrap_err();
    assert!(e.to_string().contains("BREW"), "{e}");
}

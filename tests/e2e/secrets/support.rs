//! The credential test's servers, the value's encoded forms, the checks that look for them,
//! and the host it runs under.

use super::*;

/// The credential's value. Letters, digits and `-` only, so it can also be a header name.
pub(crate) const VALUE: &str = "sk-live-4f9a2c7e1b3d5a6f8e0c";

/// One request as a server got it: the head and the body.
#[derive(Clone, Debug)]
pub(crate) struct Got {
    pub(crate) head: String,
    pub(crate) body: Vec<u8>,
}

/// What a route answers: status line, headers, body.
pub(crate) type Reply = (&'static str, Vec<(String, Vec<u8>)>, Vec<u8>);

pub(crate) struct Server {
    pub(crate) port: u16,
    pub(crate) got: Arc<Mutex<Vec<Got>>>,
}

impl Server {
    pub(crate) fn requests(&self) -> Vec<Got> {
        self.got.lock().unwrap().clone()
    }
}

/// A small HTTP/1.1 server on 127.0.0.1: one connection at a time, every request kept.
pub(crate) fn serve(route: impl Fn(&str, &Got) -> Reply + Send + 'static) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let got = Arc::new(Mutex::new(Vec::new()));
    let log = got.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            let head_end = loop {
                if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    break Some(i + 4);
                }
                match stream.read(&mut chunk) {
                    Ok(0) | Err(_) => break None,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            };
            let Some(head_end) = head_end else { continue };
            let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
            let length = head
                .lines()
                .find_map(|l| {
                    let (n, v) = l.split_once(':')?;
                    n.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse::<usize>().ok())
                        .flatten()
                })
                .unwrap_or(0);
            while buf.len() < head_end + length {
                match stream.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            let request = Got {
                head: head.clone(),
                body: buf[head_end..].to_vec(),
            };
            log.lock().unwrap().push(request.clone());
            let target = head.split_whitespace().nth(1).unwrap_or("/").to_string();
            let (status, headers, body) = route(&target, &request);
            let mut out = format!("HTTP/1.1 {status}\r\n").into_bytes();
            for (name, value) in headers {
                out.extend_from_slice(name.as_bytes());
                out.extend_from_slice(b": ");
                out.extend_from_slice(&value);
                out.extend_from_slice(b"\r\n");
            }
            out.extend_from_slice(
                format!(
                    "Content-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                )
                .as_bytes(),
            );
            out.extend_from_slice(&body);
            let _ = stream.write_all(&out);
        }
    });
    Server { port, got }
}

pub(crate) fn b64(engine: &base64::engine::GeneralPurpose, data: &[u8]) -> String {
    use base64::Engine as _;
    engine.encode(data)
}

pub(crate) fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

pub(crate) fn zlib(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

pub(crate) fn brotli(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut w = brotli::CompressorWriter::new(&mut out, 4096, 5, 22);
        w.write_all(data).unwrap();
    }
    out
}

/// The value written every way the scrubber must recognise, each as a text a server or a tool
/// could carry: base64 (both alphabets, padded or not) at each alignment, hex in mixed case,
/// percent-encoding of every byte and of some, quoted-printable (with a soft break), JSON
/// `\u` escapes, base64 wrapped over lines.
pub(crate) fn encoded_forms() -> Vec<(String, String)> {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    let v = VALUE.as_bytes();
    let mut forms = vec![("raw".to_string(), VALUE.to_string())];
    for (prefix, name) in [("", "0"), ("x", "1"), ("xy", "2"), ("Bearer ", "bearer")] {
        let plain = format!("{prefix}{VALUE}");
        for (engine, e) in [
            (&STANDARD, "std"),
            (&STANDARD_NO_PAD, "std-nopad"),
            (&URL_SAFE, "url"),
            (&URL_SAFE_NO_PAD, "url-nopad"),
        ] {
            forms.push((format!("b64-{e}-{name}"), b64(engine, plain.as_bytes())));
        }
    }
    forms.push((
        "basic".into(),
        b64(&STANDARD, format!("user:{VALUE}").as_bytes()),
    ));
    let hex_mixed: String = hex_upper(v)
        .chars()
        .enumerate()
        .map(|(i, c)| {
            if i % 2 == 0 {
                c.to_ascii_lowercase()
            } else {
                c
            }
        })
        .collect();
    forms.push(("hex-mixed".into(), hex_mixed));
    forms.push((
        "pct-all".into(),
        v.iter().map(|b| format!("%{b:02x}")).collect(),
    ));
    forms.push((
        "pct-some".into(),
        v.iter()
            .enumerate()
            .map(|(i, b)| {
                if i % 3 == 0 {
                    format!("%{b:02X}")
                } else {
                    (*b as char).to_string()
                }
            })
            .collect(),
    ));
    let qp: String = v.iter().map(|b| format!("={b:02X}")).collect();
    forms.push(("qp-soft".into(), format!("{}=\r\n{}", &qp[..30], &qp[30..])));
    forms.push((
        "json-u".into(),
        v.iter().map(|b| format!("\\u{:04x}", b)).collect(),
    ));
    let wrapped = b64(&STANDARD, format!("xy{VALUE}{VALUE}").as_bytes())
        .as_bytes()
        .chunks(16)
        .map(|c| String::from_utf8(c.to_vec()).unwrap())
        .collect::<Vec<_>>()
        .join("\r\n");
    forms.push(("b64-wrapped".into(), wrapped));
    forms
}

pub(crate) fn hex_upper(v: &[u8]) -> String {
    v.iter().map(|b| format!("{b:02X}")).collect()
}

/// Whether `text` holds the value in any form: as it is, in any form the scrubber recognises,
/// or as any piece of 12 bytes of it.
pub(crate) fn holds(text: &str) -> bool {
    let scrubber = Scrubber::new([&SecretValue::new(VALUE)]);
    scrubber.finds(text.as_bytes())
        || (0..=VALUE.len() - 12).any(|i| text.contains(&VALUE[i..i + 12]))
        || vak_host::secrets::encodings(VALUE)
            .iter()
            .any(|f| text.contains(f.as_str()))
}

/// Every string of `value` (keys too), with its path.
pub(crate) fn strings(value: &Value, path: &str, out: &mut Vec<(String, String)>) {
    match value {
        Value::String(s) => out.push((path.to_string(), s.clone())),
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                strings(v, &format!("{path}[{i}]"), out);
            }
        }
        Value::Object(map) => {
            for (k, v) in map {
                out.push((format!("{path}.{k} (key)"), k.clone()));
                strings(v, &format!("{path}.{k}"), out);
            }
        }
        _ => {}
    }
}

/// The value is in no string of the record, nor of the MCP result made from it (`_meta` too).
pub(crate) fn assert_clean(case: &str, record: &CallRecord) {
    let record_json = serde_json::to_value(record).unwrap();
    let mcp = vak_host::mcp::call_result(record, false);
    for (what, doc) in [("record", &record_json), ("MCP result", &mcp)] {
        let mut all = Vec::new();
        strings(doc, what, &mut all);
        assert!(
            all.len() > 10,
            "{case}: the walk found the strings of {what}"
        );
        for (path, s) in all {
            assert!(!holds(&s), "{case}: the value is in {path}: {s}");
        }
    }
}

pub(crate) struct Setup {
    pub(crate) host: Host,
    pub(crate) audience: Server,
    pub(crate) other: Server,
    pub(crate) journal: tempfile::TempDir,
    pub(crate) _cache: tempfile::TempDir,
    pub(crate) policy: String,
}

pub(crate) async fn setup() -> Setup {
    // The other origin: it records what it gets (the tool's reports among it) and says ok.
    let other = serve(|_, _| ("200 OK", vec![], b"ok".to_vec()));
    let o = other.port;
    let audience = serve(move |target, got| audience_route(target, got, o));
    let a = audience.port;
    let policy = format!(
        r#"
[tools.fetcher.capabilities.http]
origins = ["http://127.0.0.1:{a}", "http://localhost:{o}"]
allow_addresses = ["127.0.0.1", "::1"]
max_body_bytes = 1048576
[tools.fetcher.capabilities.http.credentials.api]
secret = "api_key"
audience = ["http://127.0.0.1:{a}"]
query = "api_key"
[tools.fetcher.capabilities.http.credentials.bearer]
secret = "api_key"
audience = ["http://127.0.0.1:{a}"]
"#
    );
    let cache = tempfile::tempdir().unwrap();
    let journal = tempfile::tempdir().unwrap();
    let j = vak_host::journal::Journal::open(
        &journal.path().join("journal.sqlite"),
        vak_host::journal::Durability::Committed,
    )
    .unwrap();
    let host = HostBuilder::new()
        .policy(Policy::parse(&policy, "test").unwrap())
        .cache_dir(Some(cache.path().to_path_buf()))
        .journal(Arc::new(j))
        .secrets(Arc::new(vak_tests::OneSecret {
            name: "api_key",
            value: VALUE,
        }))
        .component("fetcher", guest(guests::FETCHER))
        .build()
        .await
        .unwrap();
    assert!(host.tool("fetcher").is_some(), "{:#?}", host.examinations());
    Setup {
        host,
        audience,
        other,
        journal,
        _cache: cache,
        policy,
    }
}

/// The audience: echoes, redirects as common servers do, and answers with the value in every
/// form (`/form/NAME`), compressed (`/coded/NAME`), in headers.
pub(crate) fn audience_route(target: &str, got: &Got, other: u16) -> Reply {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let text = |s: &str| s.as_bytes().to_vec();
    let header = |n: &str, v: &str| (n.to_string(), v.as_bytes().to_vec());
    match path {
        "/echo" => ("200 OK", vec![], got.head.clone().into_bytes()),
        // A directory without its slash: redirected with the query as it came (nginx, Apache).
        "/v1/dir" => (
            "301 Moved Permanently",
            vec![header("Location", &format!("/v1/dir/?{query}"))],
            vec![],
        ),
        "/v1/dir/" => ("200 OK", vec![], text("listing")),
        "/to-other" => (
            "302 Found",
            vec![header(
                "Location",
                &format!("http://localhost:{other}/collect?{query}&x=1"),
            )],
            vec![],
        ),
        "/to-other-path" => (
            "302 Found",
            vec![header(
                "Location",
                &format!("http://localhost:{other}/c/{VALUE}"),
            )],
            vec![],
        ),
        // Out of the granted origins, echoing the query.
        "/to-outside" => (
            "302 Found",
            vec![header("Location", &format!("http://127.0.0.2:1/x?{query}"))],
            vec![],
        ),
        "/to-outside-path" => (
            "302 Found",
            vec![header("Location", &format!("http://127.0.0.2:1/x/{VALUE}"))],
            vec![],
        ),
        "/headers" => (
            "200 OK",
            vec![
                header("X-Key", VALUE),
                header(&format!("x-{VALUE}"), "1"),
                header("X-Basic", &forms_by_name("basic")),
            ],
            text("see the headers"),
        ),
        "/coded/gzip" => (
            "200 OK",
            vec![header("Content-Encoding", "gzip")],
            gzip(format!("key={VALUE}").as_bytes()),
        ),
        "/coded/deflate" => (
            "200 OK",
            vec![header("Content-Encoding", "deflate")],
            zlib(format!("key={VALUE}").as_bytes()),
        ),
        "/coded/br" => (
            "200 OK",
            vec![header("Content-Encoding", "br")],
            brotli(format!("key={VALUE}").as_bytes()),
        ),
        "/coded/gzip-br" => (
            "200 OK",
            vec![header("Content-Encoding", "gzip, br")],
            brotli(&gzip(format!("key={VALUE}").as_bytes())),
        ),
        "/coded/zstd" => (
            "200 OK",
            vec![header("Content-Encoding", "zstd")],
            text("(not really zstd)"),
        ),
        "/coded/file" => (
            "200 OK",
            vec![header("Content-Type", "application/gzip")],
            gzip(format!("key={VALUE}").as_bytes()),
        ),
        p if p.starts_with("/form/") => (
            "200 OK",
            vec![header("Content-Type", "text/plain")],
            format!("the key: {} (end)", forms_by_name(&p[6..])).into_bytes(),
        ),
        _ => ("404 Not Found", vec![], text("no")),
    }
}

pub(crate) fn forms_by_name(name: &str) -> String {
    encoded_forms()
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, f)| f)
        .unwrap_or_else(|| panic!("no form {name}"))
}

/// What the tool reported to the other origin, un-reversed: everything it was handed.
pub(crate) fn reports(other: &Server) -> Vec<String> {
    other
        .requests()
        .iter()
        .filter(|g| g.head.starts_with("POST /report"))
        .map(|g| String::from_utf8_lossy(&g.body).chars().rev().collect())
        .collect()
}

pub(crate) async fn run(s: &Setup, args: Value) -> CallRecord {
    s.host
        .call(Proposal::new("fetcher", args.to_string()))
        .await
}

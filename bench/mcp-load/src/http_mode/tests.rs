use super::*;
use clap::Parser;

fn response(status: u16, content_type: &str, body: &str) -> Result<http::Response, String> {
    Ok(http::Response {
        status,
        content_type: content_type.into(),
        body: body.as_bytes().to_vec(),
        close: false,
    })
}

fn json_response(body: Value) -> Result<http::Response, String> {
    response(200, "application/json", &body.to_string())
}

#[test]
fn outcomes() {
    let ok = json!({"jsonrpc":"2.0","id":7,"result":{"content":[],"isError":false}});
    assert_eq!(outcome(json_response(ok), 7), Outcome::Ok);
    let refused = json!({"jsonrpc":"2.0","id":7,"result":{"isError":true,
        "content":[{"type":"text","text":"vak refused the call at the budget stage"}],
        "_meta":{"dev.vak/stage":"budget","dev.vak/error":{"kind":"calls_exhausted"}}}});
    assert_eq!(
        outcome(json_response(refused), 7),
        Outcome::Tool {
            kind: "budget/calls_exhausted".into(),
            text: "vak refused the call at the budget stage".into()
        }
    );
    let bare = json!({"jsonrpc":"2.0","id":7,"result":{"isError":true,"content":[]}});
    assert!(
        matches!(outcome(json_response(bare), 7), Outcome::Tool { kind, .. } if kind == "unknown")
    );
    let rpc = json!({"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"no such tool"}});
    assert_eq!(
        outcome(json_response(rpc), 7),
        Outcome::Rpc("-32602: no such tool".into())
    );
    let other = json!({"jsonrpc":"2.0","id":8,"result":{"isError":false}});
    assert_eq!(
        outcome(json_response(other), 7),
        Outcome::Rpc("an answer to id 8, not 7".into())
    );
    assert!(matches!(
        outcome(response(200, "application/json", "<html>"), 7),
        Outcome::Rpc(_)
    ));
    assert_eq!(
        outcome(response(503, "text/plain", " busy\n  now\n"), 7),
        Outcome::Http(503, "busy now".into())
    );
    assert_eq!(
        outcome(Err("read: reset".into()), 7),
        Outcome::Transport("read: reset".into())
    );
}

#[test]
fn an_event_stream_answer_is_the_event_with_the_response() {
    let body = "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n\
                data: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"isError\":false}}\n\n";
    assert_eq!(
        outcome(response(200, "text/event-stream", body), 3),
        Outcome::Ok
    );
    assert_eq!(
        outcome(response(200, "text/event-stream", body), 4),
        Outcome::Rpc("no event answers request 4".into())
    );
}

#[test]
fn the_request_body() {
    let cli = crate::Cli::parse_from([
        "vak-mcp-load",
        "http",
        "--url",
        "http://127.0.0.1:1/mcp",
        "--tool",
        "t",
        "--args",
        r#"{"a":1}"#,
        "--session",
        "s1",
    ]);
    let crate::Mode::Http(load) = cli.mode else {
        panic!("not http")
    };
    let v: Value =
        serde_json::from_str(&format!("{BODY_HEAD}42{}", load.load().body_tail())).unwrap();
    assert_eq!(v["id"], 42);
    assert_eq!(v["method"], "tools/call");
    assert_eq!(v["params"]["name"], "t");
    assert_eq!(v["params"]["arguments"], json!({"a":1}));
    let meta = &v["params"]["_meta"];
    assert_eq!(meta["io.modelcontextprotocol/protocolVersion"], PROTOCOL);
    assert_eq!(meta["dev.vak/session"], "s1");
    assert_eq!(load.calls, 20000);
}

#[test]
fn usage() {
    let parse = |args: &[&str]| {
        crate::Cli::try_parse_from(["vak-mcp-load", "http"].iter().chain(args)).map(|c| c.mode)
    };
    assert!(parse(&[]).is_err(), "a URL is required");
    assert!(parse(&["--url", "https://x/mcp"]).is_err());
    assert!(parse(&["--url", "http://x/mcp", "--args", "[1]"]).is_err());
    assert!(parse(&["--url", "http://x/mcp", "--duration", "0"]).is_err());
    assert!(parse(&["--url", "http://x/mcp", "--calls", "5", "--duration", "3"]).is_err());
    let Ok(crate::Mode::Http(load)) = parse(&["--url", "http://x/mcp", "--duration", "1.5"]) else {
        panic!("--duration alone is fine");
    };
    assert_eq!(load.duration, Some(Duration::from_millis(1500)));
    let Ok(crate::Mode::Http(load)) = parse(&[
        "--url",
        "http://x/a",
        "--url",
        "http://y/b",
        "--inflight",
        "1",
    ]) else {
        panic!("parses");
    };
    assert!(load.load().check().is_err(), "a URL without a thread");
    let Ok(crate::Mode::Http(load)) = parse(&["--url", "http://x/a", "--tool", "a\r\nX: y"]) else {
        panic!("parses");
    };
    assert!(load.load().check().is_err(), "no header injection");
}

#[test]
fn percentiles() {
    let us = |v: &[u64]| {
        v.iter()
            .map(|&u| Duration::from_micros(u))
            .collect::<Vec<_>>()
    };
    assert_eq!(percentile(&[], 0.5), 0.0);
    let times = us(&(1..=100).collect::<Vec<_>>());
    assert_eq!(
        percentile(&times, 0.5),
        51.0,
        "the nearest rank of 99 × 0.5"
    );
    assert_eq!(percentile(&times, 0.9), 90.0);
    assert_eq!(percentile(&times, 0.99), 99.0);
    let t = Tally {
        times,
        ..Tally::default()
    };
    assert_eq!(t.latency(), [51.0, 90.0, 99.0, 100.0]);
}

#[test]
fn tallies_merge_and_report() {
    let mut a = Tally::default();
    let ms = Duration::from_millis;
    a.record(Outcome::Ok, ms(2));
    a.record(
        Outcome::Tool {
            kind: "budget/x".into(),
            text: "over".into(),
        },
        ms(1),
    );
    for i in 0..5 {
        a.record(Outcome::Rpc(format!("e{}", i % 4)), ms(3));
    }
    let mut b = Tally::default();
    b.record(
        Outcome::Tool {
            kind: "budget/x".into(),
            text: "over".into(),
        },
        ms(4),
    );
    b.record(Outcome::Http(503, "busy".into()), ms(5));
    b.record(Outcome::Transport("read: reset".into()), ms(99));
    let mut all = a.clone();
    all.merge(b.clone());
    all.times.sort();
    assert_eq!(all.calls(), 10);
    assert_eq!(all.times.len(), 9, "a transport error has no round trip");
    assert_eq!(all.tool_error_kinds["budget/x"], 2);
    assert_eq!(all.tool_error_texts.0, vec!["over"], "distinct texts only");
    assert_eq!(all.rpc_errors, 5);
    assert_eq!(
        all.rpc_error_texts.0,
        vec!["e0", "e1", "e2"],
        "the first three"
    );
    let report = Report {
        nodes: [("http://a/mcp", a), ("http://b/mcp", b)]
            .map(|(url, tally)| Node {
                url: url.into(),
                threads: 1,
                tally,
            })
            .into(),
        all,
        elapsed: Duration::from_secs(2),
        inflight: 2,
        warmup: 0,
        duration: None,
    };
    let v = report.to_json();
    assert_eq!(v["calls"], 10);
    assert_eq!(v["calls_per_second"], 5.0);
    assert_eq!(v["max_us"], 5000.0);
    assert_eq!(
        (v["ok"].clone(), v["tool_errors"].clone()),
        (json!(1), json!(2))
    );
    assert_eq!(v["tool_errors_by_kind"], json!({"budget/x": 2}));
    assert_eq!(
        v["http_error_samples"],
        json!([{"status": 503, "body": "busy"}])
    );
    assert_eq!(v["transport_errors"], 1);
    assert_eq!(v["per_url"][0]["calls"], 7);
    assert_eq!(v["per_url"][1]["url"], "http://b/mcp");
    assert_eq!(v["per_url"][1]["transport_errors"], 1);
    let table = report.table();
    assert!(
        table.starts_with("10 calls in 2.00 s: 5 calls/s"),
        "{table}"
    );
    assert!(
        table.contains("1 ok, 2 tool errors, 5 JSON-RPC errors, 1 HTTP errors, 1 transport errors"),
        "{table}"
    );
    assert!(
        table.contains("http://b/mcp (1 threads): 3 calls, 0 ok, 3 failed"),
        "{table}"
    );
}

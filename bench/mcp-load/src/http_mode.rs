//! The `http` mode: stateless MCP `tools/call` POSTs from many threads to several nodes, and the
//! report of what came back. [`run`] and [`run_phased`] drive one [`Load`]; the `http` command
//! builds it from its options, the `scale` mode from each configuration's nodes.

use crate::http::{self, Endpoint};
use crate::percentile;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Barrier, mpsc};
use std::time::{Duration, Instant};

/// The MCP revision whose requests carry their own `_meta` in place of a handshake.
const PROTOCOL: &str = "2026-07-28";

/// How many distinct error texts a report keeps of each kind.
const SAMPLES: usize = 3;

/// The request body before its id.
const BODY_HEAD: &str = r#"{"jsonrpc":"2.0","id":"#;

const SECOND: Duration = Duration::from_secs(1);

/// How often a thread waiting to reconnect looks whether the run is over.
const SLICE: Duration = Duration::from_millis(10);

#[derive(clap::Args, Debug, Clone)]
pub struct HttpLoad {
    /// An MCP endpoint (http://host:port/mcp); repeat it for several nodes.
    #[arg(long = "url", value_name = "URL", required = true, value_parser = Endpoint::parse)]
    urls: Vec<Endpoint>,
    /// Connections, one thread each; thread i posts to URL i mod (number of URLs).
    #[arg(long, default_value_t = 32)]
    inflight: usize,
    /// Calls to measure.
    #[arg(long, default_value_t = 20000, conflicts_with = "duration")]
    calls: usize,
    /// Measure for this long instead of a number of calls (e.g. while a node is killed).
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    duration: Option<Duration>,
    /// Calls before measuring (not counted).
    #[arg(long, default_value_t = 200)]
    warmup: usize,
    /// The tool to call.
    #[arg(long, default_value = "stats")]
    tool: String,
    /// Its arguments (a JSON object).
    #[arg(long, default_value = r#"{"values":[3,1,2]}"#, value_parser = parse_object)]
    args: Value,
    /// Charge every call to this vak budget session (`_meta."dev.vak/session"`), shared by the nodes.
    #[arg(long, value_name = "ID")]
    session: Option<String>,
    /// How long to wait for a connection, a write or a response before counting a transport error.
    #[arg(long, value_name = "SECS", default_value = "30", value_parser = parse_secs)]
    timeout: Duration,
    /// Print the calls done so far to stderr every second.
    #[arg(long)]
    progress: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

fn parse_secs(s: &str) -> Result<Duration, String> {
    let secs: f64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds"))?;
    Duration::try_from_secs_f64(secs)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| format!("`{s}`: expected a positive number of seconds"))
}

pub(crate) fn parse_object(s: &str) -> Result<Value, String> {
    let v: Value = serde_json::from_str(s).map_err(|e| e.to_string())?;
    if v.is_object() {
        Ok(v)
    } else {
        Err("tool arguments are a JSON object".into())
    }
}

impl HttpLoad {
    /// The load these options describe.
    pub fn load(&self) -> Load {
        Load {
            urls: self.urls.clone(),
            inflight: self.inflight,
            calls: self.calls,
            duration: self.duration,
            warmup: self.warmup,
            tool: self.tool.clone(),
            args: self.args.clone(),
            session: self.session.clone(),
            timeout: self.timeout,
            progress: self.progress,
        }
    }
}

/// One run of stateless `tools/call`s: `inflight` threads, thread i posting to `urls[i % n]`,
/// first `warmup` calls in all, then `calls` measured calls (or calls for `duration`).
#[derive(Debug, Clone)]
pub struct Load {
    pub urls: Vec<Endpoint>,
    pub inflight: usize,
    pub calls: usize,
    /// Measure for this long instead of `calls` calls.
    pub duration: Option<Duration>,
    pub warmup: usize,
    pub tool: String,
    /// The tool's arguments (a JSON object).
    pub args: Value,
    /// The vak budget session every call is charged to (`_meta."dev.vak/session"`).
    pub session: Option<String>,
    /// How long a connect, a write or a response may take before the call is a transport error.
    pub timeout: Duration,
    /// Print the calls done so far to stderr every second.
    pub progress: bool,
}

impl Load {
    /// What clap cannot check on its own.
    pub fn check(&self) -> Result<(), String> {
        if self.inflight == 0 {
            return Err("--inflight is at least 1".into());
        }
        if self.inflight < self.urls.len() {
            return Err(format!(
                "--inflight {} leaves some of the {} URLs without a connection",
                self.inflight,
                self.urls.len()
            ));
        }
        if self.tool.chars().any(char::is_control) {
            return Err(
                "--tool: a tool name is one line (it is sent as the Mcp-Name header)".into(),
            );
        }
        Ok(())
    }

    /// The request body after its id (`BODY_HEAD`, the id, this): rendered once.
    fn body_tail(&self) -> String {
        let mut meta = json!({
            "io.modelcontextprotocol/protocolVersion": PROTOCOL,
            "io.modelcontextprotocol/clientInfo": {"name": "vak-mcp-load", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": {},
        });
        if let Some(session) = &self.session {
            meta["dev.vak/session"] = json!(session);
        }
        let params = json!({"name": self.tool, "arguments": self.args, "_meta": meta});
        format!(r#","method":"tools/call","params":{params}}}"#)
    }
}

/// What one call came back as.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    Ok,
    /// `result.isError`: the stage (and kind) that ended the call, and its text.
    Tool {
        kind: String,
        text: String,
    },
    /// A JSON-RPC `error` member, or a body that is no answer to the request.
    Rpc(String),
    /// A status other than 200, and the body.
    Http(u16, String),
    /// Connect, write or read failed: the call may or may not have run.
    Transport(String),
}

/// Classify the answer to request `id`.
fn outcome(response: Result<http::Response, String>, id: u64) -> Outcome {
    let r = match response {
        Ok(r) => r,
        Err(e) => return Outcome::Transport(e),
    };
    if r.status != 200 {
        return Outcome::Http(r.status, clip(String::from_utf8_lossy(&r.body).trim()));
    }
    let message = match message(&r, id) {
        Ok(m) => m,
        Err(e) => return Outcome::Rpc(e),
    };
    if let Some(e) = message.get("error") {
        let text = e["message"]
            .as_str()
            .map_or_else(|| e.to_string(), str::to_string);
        return Outcome::Rpc(clip(&format!("{}: {text}", e["code"])));
    }
    if message["id"] != json!(id) {
        return Outcome::Rpc(format!("an answer to id {}, not {id}", message["id"]));
    }
    let Some(result) = message.get("result") else {
        return Outcome::Rpc("a response with neither result nor error".into());
    };
    if result["isError"] != json!(true) {
        return Outcome::Ok;
    }
    let meta = &result["_meta"];
    let stage = meta["dev.vak/stage"].as_str().unwrap_or("unknown");
    let kind = [
        &meta["dev.vak/error"]["kind"],
        &meta["dev.vak/kind"],
        &result["structuredContent"]["kind"],
        &result["structuredContent"]["error"]["kind"],
    ]
    .into_iter()
    .find_map(Value::as_str);
    let text = result["content"]
        .as_array()
        .and_then(|c| c.iter().find_map(|item| item["text"].as_str()))
        .map_or_else(|| result.to_string(), str::to_string);
    Outcome::Tool {
        kind: kind.map_or_else(|| stage.to_string(), |k| format!("{stage}/{k}")),
        text: clip(&text),
    }
}

/// The JSON-RPC response to `id`: the body, or the event of an event stream that carries it.
fn message(r: &http::Response, id: u64) -> Result<Value, String> {
    if !r.is_event_stream() {
        return serde_json::from_slice(&r.body).map_err(|e| {
            clip(&format!(
                "not JSON ({e}): {}",
                String::from_utf8_lossy(&r.body)
            ))
        });
    }
    http::sse_data(&r.body)
        .iter()
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .find(|m| m["id"] == json!(id) && (m.get("result").is_some() || m.get("error").is_some()))
        .ok_or_else(|| format!("no event answers request {id}"))
}

/// An error text on one line and at most 300 characters.
fn clip(text: &str) -> String {
    const MAX: usize = 300;
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match text.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text,
    }
}

/// The first few distinct values seen.
#[derive(Debug, Clone, PartialEq)]
struct Samples<T>(Vec<T>);

impl<T> Default for Samples<T> {
    fn default() -> Self {
        Samples(Vec::new())
    }
}

impl<T: PartialEq> Samples<T> {
    fn add(&mut self, v: T) {
        if self.0.len() < SAMPLES && !self.0.contains(&v) {
            self.0.push(v);
        }
    }
}

/// The counts of one thread, one URL, or the whole run.
#[derive(Debug, Default, Clone)]
struct Tally {
    /// Round trips of the calls that got an HTTP response.
    times: Vec<Duration>,
    ok: usize,
    tool_errors: usize,
    tool_error_kinds: BTreeMap<String, usize>,
    tool_error_texts: Samples<String>,
    rpc_errors: usize,
    rpc_error_texts: Samples<String>,
    http_errors: usize,
    http_error_texts: Samples<(u16, String)>,
    transport_errors: usize,
    transport_error_texts: Samples<String>,
}

impl Tally {
    fn calls(&self) -> usize {
        self.ok + self.tool_errors + self.rpc_errors + self.http_errors + self.transport_errors
    }

    fn record(&mut self, outcome: Outcome, took: Duration) {
        if !matches!(outcome, Outcome::Transport(_)) {
            self.times.push(took);
        }
        match outcome {
            Outcome::Ok => self.ok += 1,
            Outcome::Tool { kind, text } => {
                self.tool_errors += 1;
                *self.tool_error_kinds.entry(kind).or_default() += 1;
                self.tool_error_texts.add(text);
            }
            Outcome::Rpc(text) => {
                self.rpc_errors += 1;
                self.rpc_error_texts.add(text);
            }
            Outcome::Http(status, text) => {
                self.http_errors += 1;
                self.http_error_texts.add((status, text));
            }
            Outcome::Transport(text) => {
                self.transport_errors += 1;
                self.transport_error_texts.add(text);
            }
        }
    }

    fn merge(&mut self, other: Tally) {
        self.times.extend(other.times);
        self.ok += other.ok;
        self.tool_errors += other.tool_errors;
        for (kind, n) in other.tool_error_kinds {
            *self.tool_error_kinds.entry(kind).or_default() += n;
        }
        other
            .tool_error_texts
            .0
            .into_iter()
            .for_each(|t| self.tool_error_texts.add(t));
        self.rpc_errors += other.rpc_errors;
        other
            .rpc_error_texts
            .0
            .into_iter()
            .for_each(|t| self.rpc_error_texts.add(t));
        self.http_errors += other.http_errors;
        other
            .http_error_texts
            .0
            .into_iter()
            .for_each(|t| self.http_error_texts.add(t));
        self.transport_errors += other.transport_errors;
        (other.transport_error_texts.0.into_iter()).for_each(|t| self.transport_error_texts.add(t));
    }

    /// Percentiles in µs: p50, p90, p99, max (`times` sorted).
    fn latency(&self) -> [f64; 4] {
        let max = self.times.last().map_or(0.0, |d| d.as_secs_f64() * 1e6);
        [
            percentile(&self.times, 0.5),
            percentile(&self.times, 0.9),
            percentile(&self.times, 0.99),
            max,
        ]
    }

    fn to_json(&self) -> Value {
        let [p50, p90, p99, max] = self.latency();
        json!({
            "calls": self.calls(),
            "p50_us": p50, "p90_us": p90, "p99_us": p99, "max_us": max,
            "ok": self.ok,
            "tool_errors": self.tool_errors,
            "tool_errors_by_kind": self.tool_error_kinds,
            "tool_error_samples": self.tool_error_texts.0,
            "rpc_errors": self.rpc_errors,
            "rpc_error_samples": self.rpc_error_texts.0,
            "http_errors": self.http_errors,
            "http_error_samples": self.http_error_texts.0.iter()
                .map(|(status, body)| json!({"status": status, "body": body}))
                .collect::<Vec<_>>(),
            "transport_errors": self.transport_errors,
            "transport_error_samples": self.transport_error_texts.0,
        })
    }
}

/// What the threads share.
struct Shared {
    warmup_next: AtomicUsize,
    next: AtomicUsize,
    /// Measured calls done, and how many of them were not ok (for --progress).
    done: AtomicUsize,
    failed: AtomicUsize,
    /// Every thread and the clock: all are warm (the warmup calls are answered) …
    warm: Barrier,
    /// … and the measured phase starts (after `run_phased`'s `between`).
    go: Barrier,
}

/// The next call number below `limit`.
fn take(counter: &AtomicUsize, limit: usize) -> Option<usize> {
    let n = counter.fetch_add(1, Relaxed);
    (n < limit).then_some(n)
}

fn worker(load: &Load, endpoint: &Endpoint, shared: &Shared) -> Tally {
    let headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", PROTOCOL),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", load.tool.as_str()),
    ];
    let mut client = http::Client::new(endpoint, &headers, load.timeout);
    let tail = load.body_tail();
    let mut body = Vec::with_capacity(BODY_HEAD.len() + tail.len() + 20);
    // A (re)connect is not part of a call's round trip.
    let mut call = |client: &mut http::Client, id: u64| -> (Outcome, Duration) {
        if let Err(e) = client.connect() {
            return (Outcome::Transport(e), Duration::ZERO);
        }
        body.clear();
        body.extend_from_slice(BODY_HEAD.as_bytes());
        body.extend_from_slice(id.to_string().as_bytes());
        body.extend_from_slice(tail.as_bytes());
        let started = Instant::now();
        let response = client.post(&body);
        let took = started.elapsed();
        (outcome(response, id), took)
    };
    while let Some(n) = take(&shared.warmup_next, load.warmup) {
        call(&mut client, n as u64 + 1);
    }
    let _ = client.connect();
    shared.warm.wait();
    shared.go.wait();
    let deadline = load.duration.map(|d| Instant::now() + d);
    let limit = if deadline.is_some() {
        usize::MAX
    } else {
        load.calls
    };
    let over =
        || deadline.is_some_and(|d| Instant::now() >= d) || shared.next.load(Relaxed) >= limit;
    let mut tally = Tally::default();
    loop {
        // A thread whose node is down waits out its backoff, but not past the end of the run.
        while let Some(at) = client.retry_at() {
            if over() {
                break;
            }
            std::thread::sleep(at.saturating_duration_since(Instant::now()).min(SLICE));
        }
        if over() {
            break;
        }
        let Some(n) = take(&shared.next, limit) else {
            break;
        };
        let (outcome, took) = call(&mut client, (load.warmup + n) as u64 + 1);
        shared.done.fetch_add(1, Relaxed);
        if outcome != Outcome::Ok {
            shared.failed.fetch_add(1, Relaxed);
        }
        tally.record(outcome, took);
    }
    tally
}

/// One URL's share of the run.
struct Node {
    url: String,
    threads: usize,
    tally: Tally,
}

/// The measured phase: per URL and in all.
pub struct Report {
    nodes: Vec<Node>,
    all: Tally,
    elapsed: Duration,
    inflight: usize,
    warmup: usize,
    duration: Option<Duration>,
}

/// Runs `load`: the warmup calls, then the measured ones.
pub fn run(load: &Load) -> Report {
    run_phased(load, || ())
}

/// Runs `load`, calling `between` once every thread is warm and before the measured phase (and
/// its clock) starts: e.g. to reset a database's statement statistics.
pub fn run_phased(load: &Load, between: impl FnOnce()) -> Report {
    let n = load.urls.len();
    let shared = Shared {
        warmup_next: AtomicUsize::new(0),
        next: AtomicUsize::new(0),
        done: AtomicUsize::new(0),
        failed: AtomicUsize::new(0),
        warm: Barrier::new(load.inflight + 1),
        go: Barrier::new(load.inflight + 1),
    };
    let mut nodes: Vec<Node> = (0..n)
        .map(|i| Node {
            url: load.urls[i].url.clone(),
            threads: (i..load.inflight).step_by(n).count(),
            tally: Tally::default(),
        })
        .collect();
    let (tx, rx) = mpsc::channel::<(usize, Tally)>();
    let elapsed = std::thread::scope(|s| {
        for i in 0..load.inflight {
            let (tx, shared) = (tx.clone(), &shared);
            s.spawn(move || {
                let _ = tx.send((i % n, worker(load, &load.urls[i % n], shared)));
            });
        }
        drop(tx);
        shared.warm.wait();
        between();
        shared.go.wait();
        let started = Instant::now();
        let (mut tick, mut last_done, mut finished) = (started, 0, 0);
        while finished < load.inflight {
            let next = if load.progress {
                rx.recv_timeout((tick + SECOND).saturating_duration_since(Instant::now()))
            } else {
                rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected)
            };
            match next {
                Ok((url, tally)) => {
                    nodes[url].tally.merge(tally);
                    finished += 1;
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    tick += SECOND;
                    let done = shared.done.load(Relaxed);
                    let failed = shared.failed.load(Relaxed);
                    eprintln!(
                        "vak-mcp-load: {:>4}s  {done} calls ({}/s)  {} ok  {failed} failed",
                        (tick - started).as_secs(),
                        done - last_done,
                        done - failed,
                    );
                    last_done = done;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        started.elapsed()
    });
    let mut all = Tally::default();
    for node in &mut nodes {
        node.tally.times.sort();
        all.merge(node.tally.clone());
    }
    all.times.sort();
    Report {
        nodes,
        all,
        elapsed,
        inflight: load.inflight,
        warmup: load.warmup,
        duration: load.duration,
    }
}

impl Report {
    /// Measured calls.
    pub fn calls(&self) -> usize {
        self.all.calls()
    }

    /// Measured calls that came back ok.
    pub fn ok(&self) -> usize {
        self.all.ok
    }

    /// Round-trip percentiles of the measured calls in µs: p50, p90, p99, max.
    pub fn latency(&self) -> [f64; 4] {
        self.all.latency()
    }

    /// The measured phase's length.
    pub fn elapsed(&self) -> Duration {
        self.elapsed
    }

    /// What the calls that failed came back as: one line each for the counts by kind and the
    /// sample texts (none when every call was ok).
    pub fn error_lines(&self) -> Vec<String> {
        let a = &self.all;
        let mut out = Vec::new();
        for (kind, n) in &a.tool_error_kinds {
            out.push(format!("tool errors at {kind}: {n}"));
        }
        for t in &a.tool_error_texts.0 {
            out.push(format!("tool error: {t}"));
        }
        for t in &a.rpc_error_texts.0 {
            out.push(format!("JSON-RPC error: {t}"));
        }
        for (status, body) in &a.http_error_texts.0 {
            out.push(format!("HTTP {status}: {body}"));
        }
        for t in &a.transport_error_texts.0 {
            out.push(format!("transport error: {t}"));
        }
        out
    }

    /// Measured calls per second.
    pub fn rate(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 {
            self.all.calls() as f64 / secs
        } else {
            0.0
        }
    }

    pub fn to_json(&self) -> Value {
        let mut out = json!({
            "mode": "http",
            "urls": self.nodes.iter().map(|n| &n.url).collect::<Vec<_>>(),
            "inflight": self.inflight,
            "warmup": self.warmup,
            "duration_s": self.duration.map(|d| d.as_secs_f64()),
            "elapsed_s": self.elapsed.as_secs_f64(),
            "calls_per_second": self.rate(),
        });
        let per_url: Vec<Value> = self
            .nodes
            .iter()
            .map(|n| {
                let mut v = json!({"url": n.url, "threads": n.threads});
                extend(&mut v, n.tally.to_json());
                v
            })
            .collect();
        extend(&mut out, self.all.to_json());
        out["per_url"] = json!(per_url);
        out
    }

    pub fn table(&self) -> String {
        let a = &self.all;
        let [p50, p90, p99, max] = a.latency();
        let mut out = format!(
            "{} calls in {:.2} s: {:.0} calls/s ({} in flight over {} URLs)\n\
             round trip: p50 {p50:.1} µs  p90 {p90:.1} µs  p99 {p99:.1} µs  max {max:.1} µs\n\
             {} ok, {} tool errors, {} JSON-RPC errors, {} HTTP errors, {} transport errors\n",
            a.calls(),
            self.elapsed.as_secs_f64(),
            self.rate(),
            self.inflight,
            self.nodes.len(),
            a.ok,
            a.tool_errors,
            a.rpc_errors,
            a.http_errors,
            a.transport_errors,
        );
        for line in self.error_lines() {
            out.push_str(&format!("  {line}\n"));
        }
        for node in &self.nodes {
            let t = &node.tally;
            out.push_str(&format!(
                "{} ({} threads): {} calls, {} ok, {} failed, p50 {:.1} µs\n",
                node.url,
                node.threads,
                t.calls(),
                t.ok,
                t.calls() - t.ok,
                t.latency()[0],
            ));
        }
        out
    }
}

/// Add the members of object `more` to object `v`.
fn extend(v: &mut Value, more: Value) {
    if let (Some(v), Value::Object(more)) = (v.as_object_mut(), more) {
        v.extend(more);
    }
}

#[cfg(test)]
mod tests;

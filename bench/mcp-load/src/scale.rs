//! The `scale` mode: how far vak scales out. One invocation runs several configurations one
//! after another, each with fresh `vak serve --http` nodes, drives each with the `http` mode's load
//! and prints one table:
//!
//! 1. `1 node, SQLite`: the baseline, the local store (a SQLite journal in a temporary state dir);
//! 2. `1 node, PostgreSQL`: the shared store;
//! 3. `2 nodes, PostgreSQL`: nodes `a` and `b` on one database, the connections split over both;
//! 4. `1 node, PostgreSQL, capped session`: a policy with a `[session]` cap and every call charged
//!    to one session, so that every call reserves in the database (`vak_reserve`);
//! 5. `2 nodes, PostgreSQL, capped session`: the same on both nodes, one session shared.
//!
//! The PostgreSQL configurations share one throwaway cluster (`vak-pg-cluster`, started with
//! `pg_stat_statements`), each with a database of its own. Their statement statistics are reset
//! after the warmup, and read after the measured phase, so the table shows what the store costs
//! per call: reservations, journal commits (group commit: records per commit), revocation polls
//! and anything else. Without PostgreSQL only the baseline runs, and the output says why.

use crate::http::Endpoint;
use crate::http_mode::{self, Load, Report};
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use vak_pg_cluster::Cluster;

/// How long a node may take to print its `serving MCP at` line (a debug build compiling the
/// bundled tools into an empty AOT cache takes a while).
const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a call may take before it counts as a transport error.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// How many of its last stderr lines a node keeps for error messages.
const STDERR_LINES: usize = 20;
/// The line a node prints once it accepts connections, before its URL.
const READY_LINE: &str = "serving MCP at ";
/// The session every call of a capped configuration is charged to, and its cap.
const SESSION: &str = "bench-1";
const SESSION_CALLS: u64 = 1_000_000_000;
/// Environment variables that would point a node elsewhere than its flags say.
const NODE_ENV: [&str; 4] = ["VAK_STORE", "VAK_NODE", "VAK_STATE_DIR", "VAK_CACHE_DIR"];

#[derive(clap::Args, Debug, Clone)]
pub struct Scale {
    /// The vak binary the nodes run (`vak serve --http`).
    #[arg(long, value_name = "PATH")]
    vak: PathBuf,
    /// Calls to measure in each configuration.
    #[arg(long, default_value_t = 6000)]
    calls: usize,
    /// Connections, one thread each, spread round-robin over a configuration's nodes.
    #[arg(long, default_value_t = 32)]
    inflight: usize,
    /// Calls before measuring, in each configuration (not counted).
    #[arg(long, default_value_t = 300)]
    warmup: usize,
    /// The tool to call (the capped configurations' policy grants it).
    #[arg(long, default_value = "stats")]
    tool: String,
    /// Its arguments (a JSON object).
    #[arg(long, default_value = r#"{"values":[3,1,2]}"#, value_parser = http_mode::parse_object)]
    args: Value,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

impl Scale {
    /// What clap cannot check on its own.
    pub fn check(&self) -> Result<(), String> {
        if self.calls == 0 {
            return Err("--calls is at least 1".into());
        }
        if self.inflight < 2 {
            return Err("--inflight is at least 2 (a connection for each of two nodes)".into());
        }
        if self.tool.chars().any(char::is_control) {
            return Err(
                "--tool: a tool name is one line (it is sent as the Mcp-Name header)".into(),
            );
        }
        Ok(())
    }

    fn load(&self, urls: Vec<Endpoint>, session: Option<&str>) -> Load {
        Load {
            urls,
            inflight: self.inflight,
            calls: self.calls,
            duration: None,
            warmup: self.warmup,
            tool: self.tool.clone(),
            args: self.args.clone(),
            session: session.map(str::to_owned),
            timeout: CALL_TIMEOUT,
            progress: false,
        }
    }
}

/// One configuration: its nodes, its store, and whether its calls reserve.
#[derive(Debug, Clone, Copy)]
struct Config {
    name: &'static str,
    nodes: &'static [&'static str],
    postgres: bool,
    /// A policy with a `[session]` cap, and every call charged to [`SESSION`].
    capped: bool,
}

const CONFIGS: [Config; 5] = [
    Config {
        name: "1 node, SQLite",
        nodes: &["a"],
        postgres: false,
        capped: false,
    },
    Config {
        name: "1 node, PostgreSQL",
        nodes: &["a"],
        postgres: true,
        capped: false,
    },
    Config {
        name: "2 nodes, PostgreSQL",
        nodes: &["a", "b"],
        postgres: true,
        capped: false,
    },
    Config {
        name: "1 node, PostgreSQL, capped session",
        nodes: &["a"],
        postgres: true,
        capped: true,
    },
    Config {
        name: "2 nodes, PostgreSQL, capped session",
        nodes: &["a", "b"],
        postgres: true,
        capped: true,
    },
];

/// The policy of the capped configurations: a session cap no run reaches, and `tool` granted.
fn capped_policy(tool: &str) -> String {
    let bare = !tool.is_empty()
        && tool
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    let key = if bare {
        tool.to_owned()
    } else {
        // A TOML basic string (the name has no control characters: `Scale::check`).
        format!("\"{}\"", tool.replace('\\', "\\\\").replace('"', "\\\""))
    };
    format!("[session]\ncalls = {SESSION_CALLS}\n\n[tools.{key}]\n")
}

/// What the PostgreSQL statements of a measured phase were, by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// `vak_reserve`: a budget reservation.
    Reservation,
    /// `INSERT INTO vak_records`: a journal group commit.
    JournalCommit,
    /// Anything else naming `vak_revocations`: a revocation poll.
    RevocationRead,
    Other,
}

const CLASSES: [Class; 4] = [
    Class::Reservation,
    Class::JournalCommit,
    Class::RevocationRead,
    Class::Other,
];

fn classify(query: &str) -> Class {
    let query = query
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_ascii_lowercase();
    if query.contains("vak_reserve") {
        Class::Reservation
    } else if query.contains("insert into vak_records") {
        Class::JournalCommit
    } else if query.contains("vak_revocations") {
        Class::RevocationRead
    } else {
        Class::Other
    }
}

/// The statements of one database in a measured phase (`pg_stat_statements`).
#[derive(Debug, Clone, Default, PartialEq)]
struct DbStats {
    /// Executions by [`CLASSES`].
    calls: [u64; 4],
    /// Execution time in ms by [`CLASSES`].
    exec_ms: [f64; 4],
    /// The statements of class Other: text (clipped) and executions, most executed first.
    other: Vec<(String, u64)>,
}

impl DbStats {
    /// From the rows `{query, calls, total_exec_time}` of `pg_stat_statements`.
    fn from_rows(rows: &[Value]) -> Result<DbStats, String> {
        let mut stats = DbStats::default();
        for row in rows {
            let (Some(query), Some(calls)) = (row["query"].as_str(), row["calls"].as_u64()) else {
                return Err(format!("an unexpected pg_stat_statements row: {row}"));
            };
            let class = classify(query);
            let i = CLASSES.iter().position(|&c| c == class).unwrap_or(3);
            stats.calls[i] += calls;
            stats.exec_ms[i] += row["total_exec_time"].as_f64().unwrap_or(0.0);
            if class == Class::Other && calls > 0 {
                stats.other.push((clip(query, 120), calls));
            }
        }
        stats
            .other
            .sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        Ok(stats)
    }

    fn of(&self, class: Class) -> u64 {
        self.calls[CLASSES.iter().position(|&c| c == class).unwrap_or(3)]
    }

    /// The figures of the table for `calls` measured calls: reservations per call, journal
    /// commits per call, revocation reads in all, other statements per call, records per commit.
    fn per_call(&self, calls: usize) -> PerCall {
        let calls = calls as f64;
        let per = |n: u64| if calls > 0.0 { n as f64 / calls } else { 0.0 };
        let commits = self.of(Class::JournalCommit);
        PerCall {
            reservations: per(self.of(Class::Reservation)),
            commits: per(commits),
            revocation_reads: self.of(Class::RevocationRead),
            other: per(self.of(Class::Other)),
            records_per_commit: (commits > 0).then(|| calls / commits as f64),
        }
    }

    fn to_json(&self, calls: usize) -> Value {
        let p = self.per_call(calls);
        let total_ms: f64 = self.exec_ms.iter().sum();
        json!({
            "reservations": self.of(Class::Reservation),
            "journal_commits": self.of(Class::JournalCommit),
            "revocation_reads": self.of(Class::RevocationRead),
            "other": self.of(Class::Other),
            "reservations_per_call": p.reservations,
            "journal_commits_per_call": p.commits,
            "other_per_call": p.other,
            "records_per_journal_commit": p.records_per_commit,
            "exec_ms": {
                "reservations": self.exec_ms[0],
                "journal_commits": self.exec_ms[1],
                "revocation_reads": self.exec_ms[2],
                "other": self.exec_ms[3],
            },
            "exec_ms_per_call": if calls > 0 { total_ms / calls as f64 } else { 0.0 },
            "other_statements": self.other.iter()
                .map(|(query, calls)| json!({"query": query, "calls": calls}))
                .collect::<Vec<_>>(),
        })
    }
}

struct PerCall {
    reservations: f64,
    commits: f64,
    revocation_reads: u64,
    other: f64,
    records_per_commit: Option<f64>,
}

/// `text` on one line, at most `max` characters.
fn clip(text: &str, max: usize) -> String {
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text,
    }
}

/// A folder removed (with everything in it) when dropped.
struct TempDir(PathBuf);

impl TempDir {
    /// A new folder under the system temp folder.
    fn new(label: &str) -> Result<TempDir, String> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        TempDir::create(std::env::temp_dir().join(format!(
            "vak-mcp-load-{label}-{}-{}-{nanos}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        )))
    }

    /// The new folder `path` (its parent exists).
    fn create(path: PathBuf) -> Result<TempDir, String> {
        fs::create_dir(&path).map_err(|e| format!("creating {}: {e}", path.display()))?;
        Ok(TempDir(path))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// The last lines a node wrote to stderr.
#[derive(Default)]
struct StderrTail {
    /// (written after the ready line, the line)
    lines: VecDeque<(bool, String)>,
    /// Lines written after the ready line, in all.
    after_ready: usize,
}

/// A running `vak serve --http` node; dropping it kills it and removes its state dir.
struct Node {
    name: String,
    child: Child,
    /// The URL from its ready line, once it came.
    ready: mpsc::Receiver<String>,
    stderr: Arc<Mutex<StderrTail>>,
    /// Dropped after the node is killed (fields drop after `Drop::drop`).
    _state: TempDir,
}

/// How a node is started.
struct NodeSpec<'a> {
    vak: &'a Path,
    cache: &'a Path,
    /// The capped policy file, when the configuration is capped.
    policy: Option<&'a Path>,
    /// The shared store's URL, for a PostgreSQL configuration.
    store: Option<&'a str>,
}

impl Node {
    /// Starts `vak … serve --http 127.0.0.1:0` with its own state dir `state`, and a thread that
    /// drains its stderr (a full pipe would block it), watching for the ready line.
    fn spawn(name: &str, spec: &NodeSpec, state: TempDir) -> Result<Node, String> {
        let mut command = Command::new(spec.vak);
        command
            .arg("--state-dir")
            .arg(state.path())
            .arg("--cache-dir")
            .arg(spec.cache);
        if let Some(policy) = spec.policy {
            command.arg("--policy").arg(policy);
        }
        if let Some(url) = spec.store {
            command.args(["--store", url, "--node", name]);
        }
        command.args(["serve", "--http", "127.0.0.1:0"]);
        for var in NODE_ENV {
            command.env_remove(var);
        }
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("node {name}: could not run {}: {e}", spec.vak.display()))?;
        let stderr = Arc::new(Mutex::new(StderrTail::default()));
        let (tx, ready) = mpsc::channel();
        if let Some(pipe) = child.stderr.take() {
            let tail = Arc::clone(&stderr);
            std::thread::spawn(move || drain(pipe, &tail, tx));
        }
        Ok(Node {
            name: name.to_owned(),
            child,
            ready,
            stderr,
            _state: state,
        })
    }

    /// Waits for the ready line: the node's endpoint.
    fn wait_ready(&mut self) -> Result<Endpoint, String> {
        match self.ready.recv_timeout(READY_TIMEOUT) {
            Ok(url) => Endpoint::parse(&url).map_err(|e| format!("node {}: {e}", self.name)),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = wait_briefly(&mut self.child)
                    .map_or_else(|| "its stderr closed".to_owned(), |s| s.to_string());
                Err(format!(
                    "node {} ended before it was ready ({status}){}",
                    self.name,
                    self.stderr_tail()
                ))
            }
            Err(mpsc::RecvTimeoutError::Timeout) => Err(format!(
                "node {} printed no `{READY_LINE}` line within {} s{}",
                self.name,
                READY_TIMEOUT.as_secs(),
                self.stderr_tail()
            )),
        }
    }

    /// Err when the node has exited.
    fn check_alive(&mut self) -> Result<(), String> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(format!(
                "node {} exited during the run ({status}){}",
                self.name,
                self.stderr_tail()
            )),
            Err(e) => Err(format!("node {}: {e}", self.name)),
        }
    }

    /// `; its stderr ended with:` and the last lines, or nothing when it wrote none.
    fn stderr_tail(&self) -> String {
        let tail = self.stderr.lock().unwrap_or_else(|e| e.into_inner());
        if tail.lines.is_empty() {
            return "; it wrote nothing to stderr".into();
        }
        let lines: Vec<&str> = tail.lines.iter().map(|(_, l)| l.as_str()).collect();
        format!("; its stderr ended with:\n    {}", lines.join("\n    "))
    }

    /// What the node wrote to stderr after it was ready, if anything: a count and the last lines.
    fn notes(&self) -> Option<String> {
        let tail = self.stderr.lock().unwrap_or_else(|e| e.into_inner());
        if tail.after_ready == 0 {
            return None;
        }
        let lines: Vec<&str> = (tail.lines.iter())
            .filter(|(after, _)| *after)
            .map(|(_, l)| l.as_str())
            .collect();
        let shown = lines.len().min(3);
        Some(format!(
            "node {} wrote {} line(s) to stderr while serving; the last:\n    {}",
            self.name,
            tail.after_ready,
            lines[lines.len() - shown..].join("\n    ")
        ))
    }
}

impl Drop for Node {
    /// Kills the node and reaps it; its state dir goes after.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads a node's stderr to its end: sends the URL of the ready line on `ready`, keeps the other
/// lines' tail.
fn drain(pipe: ChildStderr, tail: &Mutex<StderrTail>, ready: mpsc::Sender<String>) {
    let mut reader = BufReader::new(pipe);
    let mut ready = Some(ready);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let line = clip(&strip_ansi(&String::from_utf8_lossy(&buf)), 300);
        if ready.is_some()
            && let Some(at) = line.find(READY_LINE)
        {
            let url = line[at + READY_LINE.len()..].trim().to_owned();
            if let Some(tx) = ready.take() {
                let _ = tx.send(url);
            }
            continue;
        }
        let mut tail = tail.lock().unwrap_or_else(|e| e.into_inner());
        let after_ready = ready.is_none();
        tail.after_ready += usize::from(after_ready);
        if tail.lines.len() == STDERR_LINES {
            tail.lines.pop_front();
        }
        tail.lines.push_back((after_ready, line));
    }
}

/// `text` without ANSI escape sequences (vak's log lines are coloured).
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        // CSI: `ESC [`, parameters, then a final byte in @..~; any other escape: one character.
        if chars.next_if_eq(&'[').is_some() {
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
        } else {
            chars.next();
        }
    }
    out
}

/// The exit status of `child` if it ends within a second.
fn wait_briefly(child: &mut Child) -> Option<std::process::ExitStatus> {
    let until = Instant::now() + Duration::from_secs(1);
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if Instant::now() >= until {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The throwaway cluster of the PostgreSQL configurations.
struct Postgres {
    cluster: Cluster,
    version: String,
}

impl Postgres {
    fn start() -> Result<Postgres, String> {
        let cluster = Cluster::start_with(&[("shared_preload_libraries", "pg_stat_statements")])?;
        cluster.psql("CREATE EXTENSION pg_stat_statements")?;
        let version = cluster.psql("SHOW server_version")?;
        Ok(Postgres { cluster, version })
    }

    /// A fresh database `db` and its URL (the cluster's, with `db` for its final `/vak`).
    fn create_database(&self, db: &str) -> Result<String, String> {
        self.cluster.psql(&format!("CREATE DATABASE {db}"))?;
        database_url(&self.cluster.url(), db)
    }

    fn reset_stats(&self) -> Result<(), String> {
        self.cluster
            .psql("SELECT pg_stat_statements_reset()")
            .map(|_| ())
    }

    /// The statements run in database `db` since the last reset.
    fn stats(&self, db: &str) -> Result<DbStats, String> {
        let out = self.cluster.psql(&format!(
            "SELECT coalesce(json_agg(json_build_object('query', query, 'calls', calls, \
             'total_exec_time', total_exec_time)), '[]') FROM pg_stat_statements \
             WHERE dbid = (SELECT oid FROM pg_database WHERE datname = '{db}')"
        ))?;
        let rows: Vec<Value> = serde_json::from_str(&out)
            .map_err(|e| format!("reading pg_stat_statements: {e}: {}", clip(&out, 200)))?;
        DbStats::from_rows(&rows)
    }
}

/// `url` (`…/vak`) with the database `db` in place of `vak`.
fn database_url(url: &str, db: &str) -> Result<String, String> {
    url.strip_suffix("/vak")
        .map(|base| format!("{base}/{db}"))
        .ok_or_else(|| format!("the cluster's URL {url} does not end in /vak"))
}

/// What became of one configuration.
struct Row {
    config: Config,
    /// The load's report, when the nodes came up.
    report: Option<Report>,
    /// The measured phase's statements (PostgreSQL configurations).
    db: Option<DbStats>,
    /// What went wrong besides failed calls: a node that did not start or died, SQL that failed.
    problems: Vec<String>,
    /// What the nodes wrote to stderr while serving.
    notes: Vec<String>,
    /// Until every node was ready.
    start: Option<Duration>,
    /// The whole configuration: start, warmup, measured phase, statistics, stop.
    wall: Duration,
}

impl Row {
    fn failed(&self) -> bool {
        !self.problems.is_empty() || self.report.as_ref().is_none_or(|r| r.ok() != r.calls())
    }
}

/// What happened to the PostgreSQL configurations.
enum PgState {
    /// They ran on this server version.
    Ran(String),
    /// They were skipped: PostgreSQL is not installed here (why).
    Unavailable(String),
    /// The cluster did not start (the error).
    Failed(String),
}

/// Everything `scale` measured.
pub struct Summary {
    vak: PathBuf,
    calls: usize,
    inflight: usize,
    warmup: usize,
    tool: String,
    rows: Vec<Row>,
    postgres: PgState,
}

/// Runs the configurations one after another. Errs only when not even the baseline could be
/// set up (no temporary folder); a configuration's failure is in its row.
pub fn run(scale: &Scale) -> Result<Summary, String> {
    let run_dir = TempDir::new("scale")?;
    // One AOT cache for every node of the run: the first node compiles the tools, the others
    // load them.
    let cache = run_dir.path().join("cache");
    fs::create_dir(&cache).map_err(|e| format!("creating {}: {e}", cache.display()))?;
    let policy = run_dir.path().join("capped-policy.toml");
    fs::write(&policy, capped_policy(&scale.tool))
        .map_err(|e| format!("writing {}: {e}", policy.display()))?;
    let total = CONFIGS.len();
    let mut rows = vec![run_config(scale, 1, total, &run_dir, &cache, &policy, None)];
    let postgres = match vak_pg_cluster::available() {
        Err(why) => {
            eprintln!("vak-mcp-load: skipping the PostgreSQL configurations: {why}");
            PgState::Unavailable(why)
        }
        Ok(()) => {
            eprintln!("vak-mcp-load: starting a throwaway PostgreSQL cluster");
            match Postgres::start() {
                Err(e) => PgState::Failed(e),
                Ok(pg) => {
                    for (i, _) in CONFIGS.iter().enumerate().skip(1) {
                        let row =
                            run_config(scale, i + 1, total, &run_dir, &cache, &policy, Some(&pg));
                        rows.push(row);
                    }
                    PgState::Ran(pg.version.clone())
                }
            }
        }
    };
    Ok(Summary {
        vak: scale.vak.clone(),
        calls: scale.calls,
        inflight: scale.inflight,
        warmup: scale.warmup,
        tool: scale.tool.clone(),
        rows,
        postgres,
    })
}

/// Runs configuration number `n` (1-based): its nodes are gone when this returns.
fn run_config(
    scale: &Scale,
    n: usize,
    total: usize,
    run_dir: &TempDir,
    cache: &Path,
    policy: &Path,
    pg: Option<&Postgres>,
) -> Row {
    let config = CONFIGS[n - 1];
    eprintln!("vak-mcp-load: [{n}/{total}] {}", config.name);
    let started = Instant::now();
    let mut row = Row {
        config,
        report: None,
        db: None,
        problems: Vec::new(),
        notes: Vec::new(),
        start: None,
        wall: Duration::ZERO,
    };
    if let Err(e) = drive(scale, n, run_dir, cache, policy, pg, &mut row, started) {
        row.problems.push(e);
    }
    row.wall = started.elapsed();
    match &row.report {
        Some(r) => eprintln!(
            "vak-mcp-load: [{n}/{total}] {:.0} calls/s, {} ok, {} failed, {:.1} s",
            r.rate(),
            r.ok(),
            r.calls() - r.ok(),
            row.wall.as_secs_f64()
        ),
        None => eprintln!("vak-mcp-load: [{n}/{total}] did not run"),
    }
    row
}

/// Starts the nodes of `row.config`, runs the load and reads the statistics into `row`. The
/// nodes (and their state dirs) go when it returns, on an error too.
#[allow(clippy::too_many_arguments)]
fn drive(
    scale: &Scale,
    n: usize,
    run_dir: &TempDir,
    cache: &Path,
    policy: &Path,
    pg: Option<&Postgres>,
    row: &mut Row,
    started: Instant,
) -> Result<(), String> {
    let config = row.config;
    let db = format!("cfg{n}");
    let store = match (config.postgres, pg) {
        (true, Some(pg)) => Some(pg.create_database(&db)?),
        (true, None) => return Err("no PostgreSQL cluster".into()),
        (false, _) => None,
    };
    let spec = NodeSpec {
        vak: &scale.vak,
        cache,
        policy: config.capped.then_some(policy),
        store: store.as_deref(),
    };
    let mut nodes = Vec::new();
    for name in config.nodes {
        let state = TempDir::create(run_dir.path().join(format!("{db}-{name}")))?;
        nodes.push(Node::spawn(name, &spec, state)?);
    }
    let urls = nodes
        .iter_mut()
        .map(Node::wait_ready)
        .collect::<Result<Vec<_>, _>>()?;
    row.start = Some(started.elapsed());
    let load = scale.load(urls, config.capped.then_some(SESSION));
    let mut reset = Ok(());
    let pg = pg.filter(|_| config.postgres);
    let report = http_mode::run_phased(&load, || {
        if let Some(pg) = pg {
            reset = pg.reset_stats();
        }
    });
    row.report = Some(report);
    reset.map_err(|e| format!("resetting pg_stat_statements: {e}"))?;
    if let Some(pg) = pg {
        match pg.stats(&db) {
            Ok(stats) => row.db = Some(stats),
            Err(e) => row
                .problems
                .push(format!("reading pg_stat_statements: {e}")),
        }
    }
    for node in &mut nodes {
        if let Err(e) = node.check_alive() {
            row.problems.push(e);
        }
        row.notes.extend(node.notes());
    }
    Ok(())
}

impl Summary {
    /// Whether a configuration failed: a call that was not ok, a node or SQL problem, or a
    /// PostgreSQL cluster that did not start.
    pub fn failed(&self) -> bool {
        matches!(self.postgres, PgState::Failed(_)) || self.rows.iter().any(Row::failed)
    }

    /// The baseline's calls per second (configuration 1), when it ran.
    fn baseline(&self) -> Option<f64> {
        self.rows
            .first()
            .and_then(|r| r.report.as_ref())
            .map(Report::rate)
            .filter(|&rate| rate > 0.0)
    }

    pub fn to_json(&self) -> Value {
        let baseline = self.baseline();
        let configurations: Vec<Value> = self
            .rows
            .iter()
            .map(|row| {
                let mut v = json!({
                    "name": row.config.name,
                    "nodes": row.config.nodes,
                    "store": if row.config.postgres { "postgres" } else { "sqlite" },
                    "session": row.config.capped.then_some(SESSION),
                    "start_s": row.start.map(|d| d.as_secs_f64()),
                    "wall_s": row.wall.as_secs_f64(),
                    "failed": row.failed(),
                    "problems": row.problems,
                    "notes": row.notes,
                });
                if let Some(r) = &row.report {
                    let [p50, p90, p99, max] = r.latency();
                    v["calls_per_second"] = json!(r.rate());
                    v["vs_baseline"] = json!(baseline.map(|b| r.rate() / b));
                    v["calls"] = json!(r.calls());
                    v["ok"] = json!(r.ok());
                    v["errors"] = json!(r.calls() - r.ok());
                    v["p50_us"] = json!(p50);
                    v["p90_us"] = json!(p90);
                    v["p99_us"] = json!(p99);
                    v["max_us"] = json!(max);
                    v["elapsed_s"] = json!(r.elapsed().as_secs_f64());
                    let mut load = r.to_json();
                    if let Some(load) = load.as_object_mut() {
                        load.remove("mode");
                    }
                    v["load"] = load;
                    if let Some(db) = &row.db {
                        v["database"] = db.to_json(r.calls());
                    }
                }
                v
            })
            .collect();
        let (postgres, skipped) = match &self.postgres {
            PgState::Ran(version) => (json!({"version": version}), Value::Null),
            PgState::Unavailable(why) => (Value::Null, json!(why)),
            PgState::Failed(e) => (json!({"error": e}), json!(e)),
        };
        json!({
            "mode": "scale",
            "vak": self.vak.display().to_string(),
            "tool": self.tool,
            "calls": self.calls,
            "warmup": self.warmup,
            "inflight": self.inflight,
            "postgres": postgres,
            "postgres_skipped": skipped,
            "failed": self.failed(),
            "configurations": configurations,
        })
    }

    pub fn table(&self) -> String {
        let mut out = format!(
            "vak-mcp-load scale: {}, tool {}, {} calls per configuration after {} warmup, {} \
             connections\n",
            self.vak.display(),
            self.tool,
            self.calls,
            self.warmup,
            self.inflight
        );
        match &self.postgres {
            PgState::Ran(version) => out.push_str(&format!(
                "PostgreSQL {version}: a throwaway cluster with pg_stat_statements, a fresh \
                 database per configuration\n"
            )),
            PgState::Unavailable(why) => out.push_str(&format!(
                "PostgreSQL configurations SKIPPED: PostgreSQL is not available here: {why}\n"
            )),
            PgState::Failed(e) => out.push_str(&format!(
                "PostgreSQL configurations NOT RUN: the cluster did not start: {e}\n"
            )),
        }
        out.push('\n');
        let baseline = self.baseline();
        let header = [
            "configuration",
            "nodes",
            "calls/s",
            "× base",
            "p50 µs",
            "p99 µs",
            "ok",
            "errors",
            "start s",
            "wall s",
            "reserve/call",
            "commits/call",
            "records/commit",
            "revoc. reads",
            "other/call",
        ];
        let mut cells: Vec<Vec<String>> = vec![header.iter().map(|h| h.to_string()).collect()];
        for row in &self.rows {
            let mut line = vec![
                row.config.name.to_owned(),
                row.config.nodes.len().to_string(),
            ];
            let dash = || "-".to_owned();
            match &row.report {
                Some(r) => {
                    let [p50, _, p99, _] = r.latency();
                    line.push(format!("{:.0}", r.rate()));
                    line.push(baseline.map_or_else(dash, |b| format!("{:.2}", r.rate() / b)));
                    line.push(format!("{p50:.0}"));
                    line.push(format!("{p99:.0}"));
                    line.push(r.ok().to_string());
                    line.push((r.calls() - r.ok()).to_string());
                }
                None => line.extend(std::iter::repeat_with(dash).take(6)),
            }
            line.push(
                row.start
                    .map_or_else(dash, |d| format!("{:.1}", d.as_secs_f64())),
            );
            line.push(format!("{:.1}", row.wall.as_secs_f64()));
            match (&row.db, &row.report) {
                (Some(db), Some(r)) => {
                    let p = db.per_call(r.calls());
                    line.push(format!("{:.3}", p.reservations));
                    line.push(format!("{:.3}", p.commits));
                    line.push(
                        p.records_per_commit
                            .map_or_else(dash, |x| format!("{x:.1}")),
                    );
                    line.push(p.revocation_reads.to_string());
                    line.push(format!("{:.3}", p.other));
                }
                _ => line.extend(std::iter::repeat_with(dash).take(5)),
            }
            cells.push(line);
        }
        out.push_str(&render(&cells));
        out.push_str(
            "\nDatabase statements are those of the measured phase (pg_stat_statements): \
             reserve = vak_reserve, commits = journal group commits (INSERT INTO vak_records), \
             records/commit = calls ÷ commits, revoc. reads = polls of vak_revocations in all, \
             other = any other statement. start s = until every node was ready; wall s = the \
             whole configuration.\n",
        );
        for row in &self.rows {
            let mut lines = Vec::new();
            if let Some(r) = &row.report
                && r.ok() != r.calls()
            {
                lines.push(format!(
                    "{} of {} calls failed:",
                    r.calls() - r.ok(),
                    r.calls()
                ));
                lines.extend(r.error_lines().into_iter().map(|l| format!("  {l}")));
            }
            lines.extend(row.problems.iter().map(|p| format!("error: {p}")));
            lines.extend(row.notes.iter().map(|n| format!("note: {n}")));
            if let Some(db) = &row.db {
                for (query, calls) in db.other.iter().take(3) {
                    lines.push(format!("other statement, {calls}×: {query}"));
                }
            }
            if !lines.is_empty() {
                out.push_str(&format!("\n{}:\n", row.config.name));
                for line in lines {
                    out.push_str(&format!("  {line}\n"));
                }
            }
        }
        out
    }
}

/// Columns padded to their widest cell: the first left-aligned, the others right-aligned.
fn render(cells: &[Vec<String>]) -> String {
    let columns = cells.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            (cells.iter())
                .filter_map(|row| row.get(c))
                .map(|cell| cell.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in cells {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            let pad = " ".repeat(widths[c] - cell.chars().count());
            if c == 0 {
                line.push_str(cell);
                line.push_str(&pad);
            } else {
                line.push_str("  ");
                line.push_str(&pad);
                line.push_str(cell);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn parse(args: &[&str]) -> Result<Scale, clap::Error> {
        crate::Cli::try_parse_from(["vak-mcp-load", "scale"].iter().chain(args)).map(|c| {
            match c.mode {
                crate::Mode::Scale(s) => s,
                _ => panic!("not scale"),
            }
        })
    }

    #[test]
    fn usage() {
        assert!(parse(&[]).is_err(), "--vak is required");
        let s = parse(&["--vak", "/bin/vak"]).unwrap();
        assert_eq!((s.calls, s.inflight, s.warmup), (6000, 32, 300));
        assert_eq!(s.tool, "stats");
        assert_eq!(s.args, json!({"values": [3, 1, 2]}));
        assert!(s.check().is_ok());
        assert!(parse(&["--vak", "v", "--args", "[1]"]).is_err());
        let s = parse(&["--vak", "v", "--inflight", "1"]).unwrap();
        assert!(s.check().is_err(), "two nodes need two connections");
        let s = parse(&["--vak", "v", "--calls", "0"]).unwrap();
        assert!(s.check().is_err());
        let load = parse(&["--vak", "v"]).unwrap().load(
            vec![Endpoint::parse("http://127.0.0.1:1/mcp").unwrap()],
            Some(SESSION),
        );
        assert_eq!(load.session.as_deref(), Some("bench-1"));
        assert_eq!((load.calls, load.warmup, load.duration), (6000, 300, None));
    }

    #[test]
    fn the_capped_policy() {
        assert_eq!(
            capped_policy("stats"),
            "[session]\ncalls = 1000000000\n\n[tools.stats]\n"
        );
        assert_eq!(
            capped_policy("a.b \"c\""),
            "[session]\ncalls = 1000000000\n\n[tools.\"a.b \\\"c\\\"\"]\n"
        );
    }

    #[test]
    fn statements_are_classified() {
        let reserve = "SELECT refusal, resource, lim, used, reserved, fuel, wall, result_bytes\n    \
                       FROM vak_reserve($1, $2, $3)";
        assert_eq!(classify(reserve), Class::Reservation);
        let commit = "WITH charged AS (INSERT INTO vak_ledgers (session_id) SELECT s FROM unnest($1)) \
                      INSERT INTO vak_records (node, node_seq)\nSELECT * FROM unnest($2::text[])";
        assert_eq!(classify(commit), Class::JournalCommit);
        assert_eq!(
            classify("insert  into\n vak_records values ($1)"),
            Class::JournalCommit
        );
        assert_eq!(
            classify("SELECT id, entry FROM vak_revocations WHERE id > $1 ORDER BY id"),
            Class::RevocationRead
        );
        assert_eq!(classify("BEGIN"), Class::Other);
        assert_eq!(
            classify("SELECT * FROM vak_ledgers WHERE session_id = $1"),
            Class::Other
        );
    }

    #[test]
    fn statistics_per_call() {
        let rows = json!([
            {"query": "SELECT … FROM vak_reserve($1)", "calls": 1000, "total_exec_time": 50.0},
            {"query": "WITH charged AS (…) INSERT INTO vak_records …", "calls": 80, "total_exec_time": 40.0},
            {"query": "WITH charged AS (…) INSERT INTO vak_records … RETURNING 1", "calls": 20, "total_exec_time": 10.0},
            {"query": "SELECT id, entry FROM vak_revocations WHERE id > $1", "calls": 6, "total_exec_time": 1.0},
            {"query": "BEGIN", "calls": 3, "total_exec_time": 0.5},
            {"query": "COMMIT", "calls": 7, "total_exec_time": 0.5},
        ]);
        let stats = DbStats::from_rows(rows.as_array().unwrap()).unwrap();
        assert_eq!(stats.calls, [1000, 100, 6, 10]);
        assert_eq!(
            stats.other,
            vec![("COMMIT".to_owned(), 7), ("BEGIN".to_owned(), 3)]
        );
        let p = stats.per_call(1000);
        assert_eq!(p.reservations, 1.0);
        assert_eq!(p.commits, 0.1);
        assert_eq!(p.revocation_reads, 6);
        assert_eq!(p.other, 0.01);
        assert_eq!(p.records_per_commit, Some(10.0));
        let v = stats.to_json(1000);
        assert_eq!(v["journal_commits"], 100);
        assert_eq!(v["exec_ms_per_call"], 0.102);
        assert_eq!(DbStats::default().per_call(10).records_per_commit, None);
        assert!(DbStats::from_rows(&[json!({"calls": 1})]).is_err());
    }

    #[test]
    fn database_urls() {
        assert_eq!(
            database_url("postgres://vak@127.0.0.1:5432/vak", "cfg2").unwrap(),
            "postgres://vak@127.0.0.1:5432/cfg2"
        );
        assert!(database_url("postgres://vak@127.0.0.1:5432/other", "cfg2").is_err());
    }

    #[test]
    fn log_lines_lose_their_colours() {
        let line = "\u{1b}[2m2026-12-04T00:42:16Z\u{1b}[0m \u{1b}[33m WARN\u{1b}[0m rmcp: error";
        assert_eq!(strip_ansi(line), "2026-12-04T00:42:16Z  WARN rmcp: error");
        assert_eq!(strip_ansi("plain ä"), "plain ä");
        assert_eq!(strip_ansi("cut \u{1b}["), "cut ");
    }

    #[test]
    fn tables_align() {
        let cells = vec![
            vec!["name".to_owned(), "n".to_owned()],
            vec!["a".to_owned(), "100".to_owned()],
        ];
        assert_eq!(render(&cells), "name    n\na     100\n");
    }

    #[test]
    fn temp_dirs_and_a_node_that_does_not_start() {
        let run = TempDir::new("test").unwrap();
        let path = run.path().to_owned();
        let state = TempDir::create(path.join("n")).unwrap();
        let spec = NodeSpec {
            vak: Path::new("/nonexistent/vak"),
            cache: &path,
            policy: None,
            store: None,
        };
        let err = Node::spawn("a", &spec, state).err().unwrap();
        assert!(err.contains("could not run /nonexistent/vak"), "{err}");
        assert!(!path.join("n").exists(), "the state dir goes with the node");
        // A program that exits at once without the ready line.
        let state = TempDir::create(path.join("m")).unwrap();
        let spec = NodeSpec {
            vak: Path::new("/bin/false"),
            ..spec
        };
        let mut node = Node::spawn("b", &spec, state).unwrap();
        let err = node.wait_ready().unwrap_err();
        assert!(err.contains("node b ended before it was ready"), "{err}");
        drop(node);
        assert!(!path.join("m").exists());
        drop(run);
        assert!(!path.exists());
    }
}

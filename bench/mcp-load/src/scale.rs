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

mod node;
mod report;
use node::*;
#[cfg(test)]
use report::render;

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

#[cfg(test)]
mod tests;

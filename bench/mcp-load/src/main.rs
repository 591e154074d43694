//! `vak-mcp-load`: drive any MCP server with `tools/call` and report what the server adds per
//! call, or how many calls a set of servers answers.
//!
//! - `sequential`: one call at a time over stdio; latency percentiles. With `--floor` the same
//!   client first measures a canned responder (this binary's `respond` mode, which answers each
//!   request line with a fixed result), so the server's own time is the difference of the two
//!   medians.
//! - `pipelined`: `--inflight` calls outstanding at once over stdio; calls per second.
//! - `inflight`: memory per call in flight over stdio: the server's RSS idle, with `--calls` K
//!   calls sent at once and still running, and after they ended; `(in flight − idle) / K` is the
//!   tool's touched memory plus the host's overhead per call (store, instance, fiber stack,
//!   buffers). Linux only (RSS from `/proc`). See `inflight.rs`.
//! - `http`: stateless MCP (revision 2026-07-28, no handshake) over HTTP/1.1 to one or more
//!   `vak serve --http` nodes: `--inflight` threads, each with one keep-alive connection, spread
//!   over the `--url`s round-robin; calls per second, round-trip percentiles and what each call
//!   came back as (ok, tool error by stage and kind, JSON-RPC error, HTTP status, transport
//!   failure), in all and per node. A dropped connection is opened again, and the call it carried
//!   counted as a transport error, never sent twice, so a node killed mid-run shows in the counts.
//! - `scale`: how far vak scales out, in one table. Runs, one after another and each with fresh
//!   `vak serve --http` nodes of the given `--vak` binary, `1 node, SQLite` (the baseline), then on
//!   a throwaway PostgreSQL cluster (a fresh database each) `1 node`, `2 nodes`, and both again
//!   with a capped session that every call is charged to (so every call reserves in the
//!   database); drives each with the `http` mode's load and reports calls per second, the ratio
//!   to the baseline, latency, errors, wall time, and the database statements per call of the
//!   measured phase (from `pg_stat_statements`: reservations, journal group commits and records
//!   per commit, revocation polls, other). Without PostgreSQL only the baseline runs. Exit status
//!   1 when any configuration had an error.
//!
//! On a 2-core VM a ping-pong between processes on different CPUs costs tens of microseconds of
//! wake-ups; pin both to one CPU for latency (`taskset -c 0 vak-mcp-load …`: the server inherits
//! the affinity) and leave them unpinned for throughput.
//!
//! ```text
//! vak-mcp-load --floor sequential --calls 2000 -- vak --no-journal serve
//! vak-mcp-load pipelined --calls 20000 --inflight 32 -- vak serve
//! vak-mcp-load inflight --tool hostile --args '{"mode":"hold","n":8388608}' \
//!     --warmup-args '{"mode":"ok"}' -- vak --no-journal --tools DIR --policy FILE serve
//! vak-mcp-load http --url http://127.0.0.1:8080/mcp --url http://127.0.0.1:8081/mcp \
//!     --inflight 32 --duration 60 --session load --progress --json
//! cargo build --release -p vak-host -p vak-mcp-load && target/release/vak-mcp-load scale --vak target/release/vak
//! ```

mod http;
mod http_mode;
mod scale;

use clap::{CommandFactory, Parser, Subcommand};
use serde_json::{Value, json};
use std::io::{BufRead, BufWriter, Write};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use vak_mcp_load::inflight;
use vak_mcp_load::stdio::{Server, read_responses, reap, request, succeeded, write_line};

#[derive(Parser, Debug)]
#[command(
    name = "vak-mcp-load",
    version,
    about = "MCP load generator: stdio latency over a floor and throughput, HTTP across nodes, \
             scale-out of vak nodes"
)]
struct Cli {
    #[command(subcommand)]
    mode: Mode,
}

#[derive(clap::Args, Debug, Clone)]
struct Target {
    /// The tool to call.
    #[arg(long, default_value = "stats")]
    tool: String,
    /// Its arguments (a JSON object).
    #[arg(long, default_value = r#"{"values":[3,1,2]}"#)]
    args: String,
    /// Calls to measure.
    #[arg(long, default_value_t = 2000)]
    calls: usize,
    /// Calls before measuring (not counted).
    #[arg(long, default_value_t = 200)]
    warmup: usize,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// The server command and its arguments (after `--`).
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

#[derive(Subcommand, Debug)]
enum Mode {
    /// One call at a time: latency percentiles (and the floor, with --floor).
    Sequential {
        #[command(flatten)]
        target: Target,
        /// Measure a canned responder first, and report the server's time over it.
        #[arg(long)]
        floor: bool,
    },
    /// Many calls in flight: throughput.
    Pipelined {
        #[command(flatten)]
        target: Target,
        /// Calls outstanding at once.
        #[arg(long, default_value_t = 32)]
        inflight: usize,
    },
    /// Start-up: from launching the server to its answer to initialize and to the first
    /// tools/list, over several launches (medians).
    Start {
        /// Launches to measure.
        #[arg(long, default_value_t = 9)]
        runs: usize,
        /// Also time until a tools/list includes this tool (asking again every millisecond):
        /// a server that loads its tools in the background answers the first list without them.
        #[arg(long)]
        tool: Option<String>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// The server command and its arguments (after `--`).
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Memory per call in flight: RSS idle, with K calls running at once, and after (Linux).
    Inflight(InflightArgs),
    /// Answer every request line on stdin with a canned result (the floor's server).
    Respond,
    /// Stateless MCP (2026-07-28) over HTTP to one or more nodes: throughput, latency, outcomes.
    Http(http_mode::HttpLoad),
    /// Scale-out of vak: 1 node on SQLite, then 1 and 2 nodes on a throwaway PostgreSQL, without
    /// and with a capped session; one table of throughput, latency and database statements.
    Scale(scale::Scale),
}

/// What the `inflight` mode calls: meant for calls that hold memory until the server's wall-time
/// limit ends them (their error answers are counted, not failures).
#[derive(clap::Args, Debug)]
struct InflightArgs {
    /// The tool to call.
    #[arg(long, default_value = "stats")]
    tool: String,
    /// Its arguments (a JSON object).
    #[arg(long, default_value = r#"{"values":[3,1,2]}"#)]
    args: String,
    /// Arguments of the one warm-up call before the idle reading (default: --args). Use a quick
    /// call when --args holds memory: its pool slot would keep that memory resident.
    #[arg(long)]
    warmup_args: Option<String>,
    /// Calls sent at once (K).
    #[arg(long, default_value_t = 32)]
    calls: usize,
    /// Milliseconds between sending them and reading RSS: every call must be running by then,
    /// and none ended (keep it below the tool's wall-time limit).
    #[arg(long, default_value_t = 1000)]
    settle_ms: u64,
    /// Seconds to wait for all answers after the in-flight reading.
    #[arg(long, default_value_t = 120)]
    answer_timeout_s: u64,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// The server command and its arguments (after `--`).
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

impl InflightArgs {
    fn plan(&self) -> Result<inflight::Plan, String> {
        let args: Value = serde_json::from_str(&self.args).map_err(|e| format!("--args: {e}"))?;
        let warmup_args = match &self.warmup_args {
            Some(w) => serde_json::from_str(w).map_err(|e| format!("--warmup-args: {e}"))?,
            None => args.clone(),
        };
        if self.calls == 0 {
            return Err("--calls must be at least 1".into());
        }
        Ok(inflight::Plan {
            tool: self.tool.clone(),
            args,
            warmup_args,
            calls: self.calls,
            settle: Duration::from_millis(self.settle_ms),
            answer_timeout: Duration::from_secs(self.answer_timeout_s),
        })
    }
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i].as_secs_f64() * 1e6
}

struct Latency {
    /// The mean: work moved off the request's path (to a thread that runs between requests)
    /// lowers the median, but on one CPU it is still paid, which the mean shows.
    mean_us: f64,
    p50_us: f64,
    p90_us: f64,
    p99_us: f64,
    errors: usize,
}

/// How long `sequential` and `pipelined` wait for the server to list the tool before calling it.
const LISTED_WITHIN: Duration = Duration::from_secs(120);

/// When a server is ready for the calls measured.
enum Ready {
    /// Once initialized (the floor's canned responder, which lists nothing).
    AtOnce,
    /// Once its `tools/list` includes the tool.
    WhenListed,
}

fn sequential(command: &[String], t: &Target, ready: Ready) -> Result<Latency, String> {
    let args: Value = serde_json::from_str(&t.args).map_err(|e| format!("--args: {e}"))?;
    let mut s = Server::start(command)?;
    if let Ready::WhenListed = ready {
        s.await_listed(&t.tool, LISTED_WITHIN)?;
    }
    let mut errors = 0;
    let mut times = Vec::with_capacity(t.calls);
    for i in 0..(t.warmup + t.calls) {
        let id = i as u64 + 1;
        let started = Instant::now();
        s.send(&request(id, &t.tool, &args))?;
        let ok = s.response(id)?;
        if i >= t.warmup {
            times.push(started.elapsed());
            errors += usize::from(!ok);
        }
    }
    s.stop();
    times.sort();
    let mean_us = if times.is_empty() {
        0.0
    } else {
        times.iter().sum::<Duration>().as_secs_f64() * 1e6 / times.len() as f64
    };
    Ok(Latency {
        mean_us,
        p50_us: percentile(&times, 0.5),
        p90_us: percentile(&times, 0.9),
        p99_us: percentile(&times, 0.99),
        errors,
    })
}

/// What [`start`] measured, each list sorted (shortest first).
struct Started {
    initialized: Vec<Duration>,
    listed: Vec<Duration>,
    /// Tools in the first tools/list answer, per launch (sorted).
    first_count: Vec<usize>,
    /// Until a tools/list included the tool asked for, per launch (sorted).
    tool_listed: Vec<Duration>,
}

/// Launch `command` `runs` times; each time, how long until it answered initialize, until it
/// answered the first tools/list, and (with `tool`) until a tools/list included `tool`.
fn start(command: &[String], runs: usize, tool: Option<&str>) -> Result<Started, String> {
    let mut out = Started {
        initialized: Vec::new(),
        listed: Vec::new(),
        first_count: Vec::new(),
        tool_listed: Vec::new(),
    };
    for _ in 0..runs {
        let launched = Instant::now();
        let mut s = Server::start(command)?;
        out.initialized.push(launched.elapsed());
        let first = s.list()?;
        out.listed.push(launched.elapsed());
        out.first_count.push(first.len());
        if let Some(tool) = tool {
            let left = Duration::from_secs(60).saturating_sub(launched.elapsed());
            let waited = match first.iter().any(|n| n == tool) {
                true => Ok(()),
                false => s.await_listed(tool, left),
            };
            if let Err(e) = waited {
                s.stop();
                return Err(e);
            }
            out.tool_listed.push(launched.elapsed());
        }
        s.stop();
    }
    out.initialized.sort();
    out.listed.sort();
    out.first_count.sort();
    out.tool_listed.sort();
    Ok(out)
}

fn pipelined(command: &[String], t: &Target, inflight: usize) -> Result<(f64, usize), String> {
    let args: Value = serde_json::from_str(&t.args).map_err(|e| format!("--args: {e}"))?;
    let mut s = Server::start(command)?;
    s.await_listed(&t.tool, LISTED_WITHIN)?;
    let Server { child, tx, rx, .. } = s;
    let mut tx = tx;
    let total = t.warmup + t.calls;
    // The reader counts answers and hands a permit back for each.
    let (permit_tx, permit_rx) = mpsc::channel::<Result<bool, String>>();
    let reader = std::thread::spawn(move || {
        let mut rx = rx;
        let read = read_responses(&mut rx, total, |v| {
            permit_tx.send(Ok(succeeded(&v))).is_ok()
        });
        if let Err(e) = read {
            let _ = permit_tx.send(Err(e));
        }
    });
    let mut sent = 0usize;
    let mut done = 0usize;
    let mut errors = 0usize;
    let mut started = Instant::now();
    let send = |tx: &mut BufWriter<_>, id: usize| -> Result<(), String> {
        write_line(tx, &request(id as u64 + 1, &t.tool, &args))?;
        tx.flush().map_err(|e| e.to_string())
    };
    while sent < inflight.min(total) {
        send(&mut tx, sent)?;
        sent += 1;
    }
    while done < total {
        let ok = permit_rx
            .recv()
            .map_err(|_| "the reader stopped".to_string())??;
        done += 1;
        if done == t.warmup {
            started = Instant::now();
        }
        if done > t.warmup {
            errors += usize::from(!ok);
        }
        if sent < total {
            send(&mut tx, sent)?;
            sent += 1;
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    let _ = reader.join();
    drop(tx);
    reap(child);
    Ok((t.calls as f64 / elapsed, errors))
}

fn respond() -> Result<(), String> {
    let stdin = std::io::stdin().lock();
    let mut out = BufWriter::new(std::io::stdout().lock());
    for line in stdin.lines() {
        let line = line.map_err(|e| e.to_string())?;
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let Some(id) = v.get("id") else { continue };
        let reply = if v["method"] == "initialize" {
            json!({"jsonrpc":"2.0","id":id,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"floor","version":"0"}}})
        } else {
            json!({"jsonrpc":"2.0","id":id,"result":{"content":[{"type":"text","text":"canned"}],"isError":false}})
        };
        serde_json::to_writer(&mut out, &reply).map_err(|e| e.to_string())?;
        out.write_all(b"\n").map_err(|e| e.to_string())?;
        out.flush().map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn run(cli: Cli) -> Result<(), String> {
    match cli.mode {
        Mode::Respond => respond(),
        Mode::Inflight(options) => {
            let plan = options.plan()?;
            let mut server = Server::start(&options.command)?;
            let report = inflight::measure(&mut server, &plan);
            server.stop();
            let report = report?;
            if options.json {
                println!("{}", report.to_json());
            } else {
                print!("{}", report.table());
            }
            Ok(())
        }
        Mode::Http(options) => {
            let load = options.load();
            if let Err(e) = load.check() {
                Cli::command()
                    .error(clap::error::ErrorKind::ValueValidation, e)
                    .exit();
            }
            let report = http_mode::run(&load);
            if options.json {
                println!("{}", report.to_json());
            } else {
                print!("{}", report.table());
            }
            Ok(())
        }
        Mode::Start {
            runs,
            tool,
            json,
            command,
        } => {
            let started = start(&command, runs.max(1), tool.as_deref())?;
            // Median, shortest and longest, in ms (`percentile` gives µs).
            let spread = |v: &[Duration]| [0.5, 0.0, 1.0].map(|p| percentile(v, p) / 1e3);
            let stats = |v: &[Duration]| {
                let [median, min, max] = spread(v);
                json!({"median": median, "min": min, "max": max})
            };
            let counts = &started.first_count;
            if json {
                println!(
                    "{}",
                    json!({
                        "mode": "start",
                        "runs": runs.max(1),
                        "initialize_ms": stats(&started.initialized),
                        "first_tools_list_ms": stats(&started.listed),
                        "first_tools_list_count": {"min": counts[0], "max": counts[counts.len() - 1]},
                        "tool": tool,
                        "tool_listed_ms": (!started.tool_listed.is_empty()).then(|| stats(&started.tool_listed)),
                    })
                );
            } else {
                println!(
                    "{:<36} {:>9} {:>9} {:>9}",
                    "from launch to", "median ms", "min ms", "max ms"
                );
                let until_tool = tool
                    .as_ref()
                    .map(|t| format!("a tools/list with `{t}`"))
                    .unwrap_or_default();
                for (name, v) in [
                    ("the answer to initialize", &started.initialized),
                    ("the first tools/list answered", &started.listed),
                    (until_tool.as_str(), &started.tool_listed),
                ] {
                    if v.is_empty() {
                        continue;
                    }
                    let [median, min, max] = spread(v);
                    println!("{name:<36} {median:>9.1} {min:>9.1} {max:>9.1}");
                }
                println!(
                    "tools in the first tools/list: {}",
                    if counts[0] == counts[counts.len() - 1] {
                        counts[0].to_string()
                    } else {
                        format!("{}-{}", counts[0], counts[counts.len() - 1])
                    }
                );
            }
            Ok(())
        }
        Mode::Scale(options) => {
            if let Err(e) = options.check() {
                Cli::command()
                    .error(clap::error::ErrorKind::ValueValidation, e)
                    .exit();
            }
            let summary = scale::run(&options)?;
            if options.json {
                println!("{}", summary.to_json());
            } else {
                print!("{}", summary.table());
            }
            if summary.failed() {
                return Err("a configuration had errors (see above)".into());
            }
            Ok(())
        }
        Mode::Sequential { target, floor } => {
            let floor_figures = if floor {
                let me = std::env::current_exe().map_err(|e| e.to_string())?;
                let cmd = vec![me.display().to_string(), "respond".to_string()];
                Some(sequential(&cmd, &target, Ready::AtOnce)?)
            } else {
                None
            };
            let server = sequential(&target.command, &target, Ready::WhenListed)?;
            let added = floor_figures.as_ref().map(|f| server.p50_us - f.p50_us);
            let added_mean = floor_figures.as_ref().map(|f| server.mean_us - f.mean_us);
            if target.json {
                println!(
                    "{}",
                    json!({
                        "mode": "sequential", "calls": target.calls,
                        "server": {"mean_us": server.mean_us, "p50_us": server.p50_us, "p90_us": server.p90_us, "p99_us": server.p99_us, "errors": server.errors},
                        "floor": floor_figures.as_ref().map(|f| json!({"mean_us": f.mean_us, "p50_us": f.p50_us, "p90_us": f.p90_us, "p99_us": f.p99_us})),
                        "server_added_p50_us": added,
                        "server_added_mean_us": added_mean,
                    })
                );
            } else {
                if let Some(f) = &floor_figures {
                    println!(
                        "floor (canned responder): p50 {:.1} µs  p90 {:.1} µs  p99 {:.1} µs  mean {:.1} µs",
                        f.p50_us, f.p90_us, f.p99_us, f.mean_us
                    );
                }
                println!(
                    "server:                   p50 {:.1} µs  p90 {:.1} µs  p99 {:.1} µs  mean {:.1} µs  ({} calls, {} errors)",
                    server.p50_us,
                    server.p90_us,
                    server.p99_us,
                    server.mean_us,
                    target.calls,
                    server.errors
                );
                if let Some(a) = added {
                    println!("server's added time per call (p50 − floor p50): {a:.1} µs");
                }
                if let Some(a) = added_mean {
                    println!("server's added time per call (mean − floor mean): {a:.1} µs");
                }
            }
            Ok(())
        }
        Mode::Pipelined { target, inflight } => {
            let (rate, errors) = pipelined(&target.command, &target, inflight)?;
            if target.json {
                println!(
                    "{}",
                    json!({"mode": "pipelined", "calls": target.calls, "inflight": inflight, "calls_per_second": rate, "errors": errors})
                );
            } else {
                println!(
                    "{rate:.0} calls/s with {inflight} in flight ({} calls, {errors} errors)",
                    target.calls
                );
            }
            Ok(())
        }
    }
}

fn main() -> std::process::ExitCode {
    match run(Cli::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("vak-mcp-load: {e}");
            std::process::ExitCode::from(1)
        }
    }
}

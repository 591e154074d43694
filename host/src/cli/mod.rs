//! The `vak` command line. Exit status: 0 completed, 1 tool error or failure in the sandbox,
//! 2 refused before dispatch, 3 bad usage of the command itself.

/// `println!` for a person: the line goes out neutralised ([`render::say`]), whatever data it
/// holds. Every line vak prints for a person is written with these (JSON with [`render::json`]).
macro_rules! say {
    () => { $crate::cli::render::say("\n") };
    ($($arg:tt)*) => { $crate::cli::render::say(&format!("{}\n", format_args!($($arg)*))) };
}

/// `print!` for a person, neutralised.
macro_rules! say_raw {
    ($($arg:tt)*) => { $crate::cli::render::say(&format!($($arg)*)) };
}

/// `eprintln!` for a person, neutralised.
macro_rules! say_err {
    ($($arg:tt)*) => { $crate::cli::render::say_err(&format!("{}\n", format_args!($($arg)*))) };
}

mod authoring;
mod demo;
mod render;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use vak_host::proposal::providers::{Provider, declaration, parse_document, request_tools};
use vak_host::{CallRecord, Host, HostBuilder, Policy, Proposal, Revocation, Revocations, Status};

/// Exit status for bad usage of the CLI itself.
const EXIT_USAGE: u8 = 3;

#[derive(Parser, Debug)]
#[command(
    name = "vak",
    version,
    about = "A WebAssembly-sandboxed tool host: validate, authorize, meter and record every tool call",
    long_about = "A WebAssembly-sandboxed tool host. Tools are WebAssembly components; every call is \
validated, authorized under a policy, run in a fresh sandboxed instance with only the capabilities \
it was granted, metered (fuel, memory, wall time) and recorded with host receipts.\n\n\
Exit status: 0 completed, 1 tool error or failure in the sandbox, 2 refused before dispatch, \
3 bad usage."
)]
struct Cli {
    /// Load tools from `*.wasm` in this folder instead of the bundled tools.
    #[arg(long, global = true, value_name = "DIR")]
    tools: Option<PathBuf>,
    /// Policy file (TOML). Default: the built-in policy that grants the bundled tools.
    #[arg(long, global = true, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// AOT cache folder [default: $VAK_CACHE_DIR, else ~/.cache/vak/aot].
    #[arg(long, global = true, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// Compile every component at start; read and write no cache.
    #[arg(long, global = true)]
    no_cache: bool,
    /// How long one component's compile may take, in seconds, from its start (a compile waiting
    /// for its place is not timed); past it the component is refused [default: 120].
    #[arg(long, global = true, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..=3600))]
    compile_timeout: Option<u64>,
    /// Memory one compile (a worker process) may hold, in MiB; past it the component is
    /// refused [default: 2048].
    #[arg(long, global = true, value_name = "MIB", value_parser = clap::value_parser!(u64).range(64..=1_048_576))]
    compile_memory: Option<u64>,
    /// Where vak keeps its state (revocations) [default: $VAK_STATE_DIR, else ~/.local/state/vak].
    #[arg(long, global = true, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// Sign records with the ed25519 key in FILE (64 hex characters, mode 0600)
    /// [default: $VAK_SIGNING_KEY_FILE, else a fresh key per run].
    #[arg(long, global = true, value_name = "FILE")]
    signing_key: Option<PathBuf>,
    /// Make the signing key's Ed25519 nonces ahead, on a thread of their own between calls: a
    /// record's signature then costs a call about 6 µs instead of 22. Not where the process may
    /// be restored from a memory snapshot more than once (VM or process snapshots, clones): each
    /// copy would sign different records with the same nonces, which gives the key away.
    #[arg(long, global = true)]
    nonces_ahead: bool,
    /// Do not append records to the journal ($VAK_STATE_DIR/journal.sqlite by default).
    #[arg(long, global = true, conflicts_with = "store")]
    no_journal: bool,
    /// Keep the journal, revocations and session ledgers in a PostgreSQL database shared by
    /// several nodes (postgres://USER@HOST:PORT/DB) instead of $VAK_STATE_DIR
    /// [default: $VAK_STORE]. See docs/scale-out.md.
    #[arg(long, global = true, value_name = "URL")]
    store: Option<String>,
    /// This node's name in a shared store: its journal chain [default: $VAK_NODE, else the
    /// host name]. Every running node needs its own: a second process starting with a name
    /// that a live one holds is refused.
    #[arg(long, global = true, value_name = "NAME")]
    node: Option<String>,
    /// The bound on every wait on a shared store: a call's reservation and `started` entry
    /// (together), its record, `vak revoke`'s wait for the nodes to confirm.
    #[arg(long, global = true, value_name = "MS", default_value_t = 5000,
          value_parser = clap::value_parser!(u64).range(100..=600_000))]
    store_timeout_ms: u64,
    /// Also sync every journal write to disk, so that a record survives a power loss, not only a
    /// crash of vak (concurrent calls share one flush: group commit).
    #[arg(long, global = true, conflicts_with = "no_journal")]
    journal_sync: bool,
    /// The principal on whose behalf calls are made (checked against the policy and revocations).
    #[arg(long, global = true, value_name = "NAME")]
    principal: Option<String>,
    /// Log more to stderr (-v info, -vv debug). `RUST_LOG` also works.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run one call (or every call of a provider's proposal) through the whole lifecycle and
    /// print the result.
    Call {
        /// The tool's name.
        #[arg(required_unless_present = "proposal")]
        tool: Option<String>,
        /// The arguments, a JSON object, e.g. '{"zone":"Europe/Paris"}'.
        #[arg(required_unless_present = "proposal")]
        arguments: Option<String>,
        /// A provider's proposal document (OpenAI, Anthropic, Gemini or MCP shape, as the API
        /// sends it or its SDK dumps it), or `-` for stdin: every call in it is run, one record
        /// each, in one session; an answer with no call runs nothing (exit 0).
        #[arg(long, value_name = "FILE", conflicts_with_all = ["tool", "arguments"])]
        proposal: Option<String>,
        /// Read the proposal as this provider's shape instead of detecting it (`openai` is
        /// `openai-chat`).
        #[arg(long, value_name = "PROVIDER", requires = "proposal", value_parser = clap::builder::PossibleValuesParser::new(Provider::NAMES))]
        provider: Option<String>,
        /// Print the complete call record as JSON instead (an array with --proposal).
        #[arg(long)]
        json: bool,
        /// A requirement on the result: `freshness=60` (seconds), `cited`, `verified-change`,
        /// `aligned`. Repeatable.
        #[arg(long = "require", value_name = "REQ")]
        requirements: Vec<String>,
        /// How to show the result: `terminal` (a card where one is earned, then the document as
        /// text), `markdown`, `text`, or `html` (a standalone page on stdout).
        #[arg(long, default_value = "terminal", value_parser = ["terminal", "markdown", "text", "html"])]
        render: String,
    },
    /// Show what a component imports, exports and claims, and the admission verdict, without
    /// running its `call`. Exit status 0 admitted, 2 refused.
    Inspect {
        /// A tool name (among the loaded tools) or a path to a `.wasm` component.
        target: String,
        /// Print JSON instead.
        #[arg(long)]
        json: bool,
    },
    /// List the admitted tools with their input schemas (and the refused ones, with reasons).
    Tools {
        /// Print JSON instead (with --for: `{"provider", "tools", "notes"}`).
        #[arg(long)]
        json: bool,
        /// Print the tools as the `tools` member of this provider's request body
        /// (`{"tools": [...]}`; `openai` is `openai-chat`). Notes on what a declaration leaves out,
        /// or why it is not strict, go to stderr (with --json, into the output's `notes`).
        #[arg(long = "for", value_name = "PROVIDER", value_parser = clap::builder::PossibleValuesParser::new(Provider::NAMES))]
        for_provider: Option<String>,
    },
    /// Check a policy file and explain what it grants.
    Policy {
        #[command(subcommand)]
        command: PolicyCommand,
    },
    /// Revoke a tool, one capability of a tool, or a principal: recorded durably, applied to new
    /// calls at once and to running calls at their next capability use. On a shared store it
    /// returns once every live node has applied it (exit 3, naming them, if some did not within
    /// --store-timeout-ms).
    Revoke {
        #[command(subcommand)]
        what: RevokeWhat,
        /// Why (kept with the revocation).
        #[arg(long, global = true, default_value = "revoked with vak revoke")]
        reason: String,
    },
    /// Host-held secrets a tool's http requests may have injected at the broker; the tool never
    /// reads them. Kept in $VAK_SECRETS_FILE, else ~/.config/vak/secrets.json (mode 0600;
    /// refused when others can read it, or write to its folder).
    Secret {
        #[command(subcommand)]
        command: SecretCommand,
    },
    /// List the revocations in force.
    Revocations {
        /// Print JSON instead.
        #[arg(long)]
        json: bool,
    },
    /// Check the host signature of saved call records (`vak call … --json` output).
    Verify {
        /// A file with one record or an array of records, or `-` for stdin.
        file: String,
        /// Also require that this public key (hex) signed them.
        #[arg(long, value_name = "HEX")]
        key: Option<String>,
    },
    /// The shared store (--store): bring its schema up to date, or show its nodes and chains.
    Store {
        #[command(subcommand)]
        command: StoreCommand,
    },
    /// Read the journal: list calls (every chain merged, newest first; a call started without
    /// its record is `interrupted`, or `running`), show one, or verify every chain (each writing
    /// process's, or each node's on a shared store).
    Audit {
        #[command(subcommand)]
        command: Option<AuditCommand>,
        /// Only this tool.
        #[arg(long)]
        tool: Option<String>,
        /// Only this status (`interrupted`: calls started whose process is gone without their
        /// record; `running`: calls started that are running now).
        #[arg(long, value_parser = ["completed", "tool_error", "refused", "failed", "interrupted", "running"])]
        status: Option<String>,
        /// Only calls that ended at this stage.
        #[arg(long, value_parser = ["proposal", "schema", "permission", "budget", "dispatch", "result", "outcome", "projection"])]
        stage: Option<String>,
        /// Only calls made on behalf of this principal.
        #[arg(long = "for-principal")]
        for_principal: Option<String>,
        /// Only calls received at or after this time: RFC 3339 (2026-12-06T10:00:00Z, or with
        /// an offset) or a duration back from now (90s, 30m, 2h, 7d, 2w).
        #[arg(long, value_parser = parse_since, value_name = "TIME|DURATION")]
        since: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
    /// Serve the admitted tools over MCP: stdio by default (one connection, one session), or
    /// streamable HTTP at http://ADDR/mcp with --http (loopback unless --allow-host is given).
    Serve {
        /// Serve streamable HTTP on this address (127.0.0.1:8080, localhost:8080, [::1]:8080;
        /// port 0 picks one and prints it on stderr) instead of stdio.
        #[arg(long, value_name = "ADDR", value_parser = parse_listen_addr)]
        http: Option<std::net::SocketAddr>,
        /// A Host name clients may use besides localhost/127.0.0.1/::1 (repeatable; required
        /// to listen on a non-loopback address).
        #[arg(long = "allow-host", value_name = "HOST", requires = "http")]
        allow_hosts: Vec<String>,
        /// A browser origin (scheme://host:port) allowed besides this server's loopback
        /// origins (repeatable). Requests with any other Origin get 403.
        #[arg(long = "allow-origin", value_name = "ORIGIN", requires = "http")]
        allow_origins: Vec<String>,
    },
    /// Make a new tool project NAME (a folder of that name): it builds with `vak build` and
    /// answers `vak call` as it is, with a README, a policy and one test.
    New {
        /// The tool's name (a-z, 0-9, '-', '_'; starting with a letter).
        name: String,
        /// The language of the project.
        #[arg(long, value_enum, default_value = "rust")]
        lang: authoring::Lang,
        /// Make the project inside this folder instead of the current one.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// The vak-guest SDK to depend on [default: $VAK_GUEST_SDK, else the one this vak was
        /// built from].
        #[arg(long, value_name = "PATH")]
        sdk: Option<PathBuf>,
    },
    /// Build a tool project to a component and run admission on it: what it imports, what it
    /// claims, and whether the policy (--policy, else the project's policy.toml) admits it.
    /// Exit status 0 admitted, 2 refused.
    Build {
        /// The project folder.
        #[arg(default_value = ".")]
        dir: PathBuf,
        /// Print the examination as JSON instead.
        #[arg(long)]
        json: bool,
    },
    /// Make a new signing key: write its seed to FILE (mode 0600) and print its public key.
    Keygen { file: PathBuf },
    /// Show the host at work on the bundled tools: a completed call, a tool error, a limit hit.
    Demo,
    /// Measure the whole lifecycle against a raw wasmtime fresh-instance call of the same
    /// component, side by side in this process, and print the ratio.
    Bench {
        /// The tool to call.
        #[arg(default_value = "stats")]
        tool: String,
        /// Its arguments.
        #[arg(default_value = r#"{"values":[3,1,2]}"#)]
        arguments: String,
        /// Rounds (the median round is reported).
        #[arg(long, default_value_t = 15)]
        rounds: usize,
        /// Calls per round.
        #[arg(long, default_value_t = 200)]
        calls: usize,
        /// Print JSON instead.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
enum AuditCommand {
    /// The complete record of one call, by vak's call id or the provider's (every call that has
    /// it, when several do), checked: its hash, its links in its chain, its signature. Exit
    /// status 1, with a warning, when it does not check out.
    Show { call_id: String },
    /// Check every hash chain and every entry's signature; name the chain and place of the
    /// first bad entry, count the calls interrupted (started, their process gone without their
    /// record) and running, and print each chain's head (keep them: a journal cut short shows
    /// against them).
    Verify {
        /// Also require that this public key (hex) signed every record; repeat it for the keys
        /// of several nodes.
        #[arg(long, value_name = "HEX")]
        key: Vec<String>,
    },
}

#[derive(Subcommand, Debug)]
enum StoreCommand {
    /// Apply the schema migrations this vak knows to the database (nodes also do it at start).
    Migrate,
    /// The schema version, the nodes that served from the store, each journal chain's length,
    /// the revocations and sessions.
    Status {
        /// Print JSON instead.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
enum PolicyCommand {
    /// Validate FILE and explain it; exit 3 with the line of the first error.
    Check { file: PathBuf },
}

/// `vak secret …`.
#[derive(Debug, Subcommand)]
enum SecretCommand {
    /// Store NAME's value, read from standard input (never from the command line, where other
    /// users and the shell history would see it). One trailing newline is dropped.
    Set { name: String },
    /// The names stored (never the values).
    List {
        /// Print JSON instead.
        #[arg(long)]
        json: bool,
    },
    /// Remove NAME.
    Rm { name: String },
}

#[derive(Subcommand, Debug)]
enum RevokeWhat {
    /// Every call of the tool.
    Tool { tool: String },
    /// One capability of a tool (its calls run, the capability refuses).
    Capability { tool: String, capability: String },
    /// Every call on behalf of the principal.
    Principal { principal: String },
}

pub fn main() -> ExitCode {
    // A compile worker this binary started for itself: no CLI, no runtime, no logging.
    let mut args = std::env::args();
    if args.nth(1).as_deref() == Some(vak_host::dispatch::compile::WORKER_ARG) {
        return vak_host::dispatch::compile::worker_main(args);
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_USAGE } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    init_tracing(cli.verbose);
    if !matches!(cli.command, Command::Serve { .. }) {
        die_quietly_on_closed_pipe();
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            say_err!(
                "vak: cannot start the async runtime: {}",
                render::neutralise_line(&e.to_string())
            );
            return ExitCode::from(1);
        }
    };
    runtime.block_on(run(cli))
}

fn init_tracing(verbose: u8) {
    use std::io::IsTerminal;
    use tracing_subscriber::field::MakeExt;
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // Colour only for a person at a terminal who did not ask for none (https://no-color.org).
    let colour = std::io::stderr().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    // A field's value may hold what a guest, a model or a client wrote (a tool name, an error
    // message): neutralised like every other line for a person.
    let fields = tracing_subscriber::fmt::format::debug_fn(|w, field, value| {
        let text = render::neutralise_line(&format!("{value:?}"));
        if field.name() == "message" {
            write!(w, "{text}")
        } else {
            write!(w, "{field}={text}")
        }
    })
    .delimited(" ");
    // Logs go to stderr: stdout carries only results and records. A log line that cannot be
    // written (stderr closed) is dropped: the fallback `eprintln!` would panic the task that
    // logged (a `vak serve` connection, say).
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colour)
        .fmt_fields(fields)
        .log_internal_errors(false)
        .try_init();
}

/// A command whose reader went away (`vak audit show ID | head`) ends as other Unix tools do,
/// killed by `SIGPIPE`, instead of panicking in `println!` on `EPIPE` (Rust ignores the signal
/// by default). Not for `vak serve`, whose stdio peer closing is an ordinary end of a session
/// that it handles itself.
fn die_quietly_on_closed_pipe() {
    // SAFETY: `signal` only sets this process's disposition of SIGPIPE to the default, which
    // needs no handler code to be sound. It runs before the tokio runtime or any other thread
    // is started (`main` calls it right after parsing the command line), so no other thread
    // reads or changes signal dispositions at the same time.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// `--http ADDR`: an IP address and port, or a host name and port as people type it
/// (`localhost:8080` is the IPv4 loopback; another name is resolved, and `vak serve` then asks
/// for `--allow-host` unless it is a loopback address).
fn parse_listen_addr(text: &str) -> Result<std::net::SocketAddr, String> {
    if let Ok(addr) = text.parse::<std::net::SocketAddr>() {
        return Ok(addr);
    }
    let bad = || {
        format!(
            "`{}` is not HOST:PORT (127.0.0.1:8080, localhost:8080, [::1]:8080)",
            render::neutralise_line(text)
        )
    };
    let (name, port) = text.rsplit_once(':').ok_or_else(bad)?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    if name.eq_ignore_ascii_case("localhost") {
        return Ok(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    }
    std::net::ToSocketAddrs::to_socket_addrs(&(name, port))
        .map_err(|e| format!("{}: {e}", bad()))?
        .next()
        .ok_or_else(bad)
}

/// `--since`: an RFC 3339 time or a duration back from now, as the journal compares it: UTC with
/// nine digits of fraction, so that the text order of the journal's `received_at` (jiff's UTC
/// form, with as many digits as it needs) is the order of time at the same second too.
fn parse_since(text: &str) -> Result<String, String> {
    let at = match text.parse::<jiff::Timestamp>() {
        Ok(at) => at,
        Err(_) => {
            let (digits, unit) =
                text.split_at(text.len() - text.chars().last().map_or(0, char::len_utf8));
            let seconds = match unit {
                "s" => 1,
                "m" => 60,
                "h" => 3_600,
                "d" => 86_400,
                "w" => 604_800,
                _ => 0,
            };
            let n = digits
                .parse::<i64>()
                .ok()
                .filter(|n| *n >= 0 && seconds > 0);
            let Some(back) = n.and_then(|n| n.checked_mul(seconds)) else {
                return Err(format!(
                    "`{}` is neither an RFC 3339 time (2026-12-06T10:00:00Z, 2026-12-06T11:00:00+01:00) nor a duration (90s, 30m, 2h, 7d, 2w)",
                    render::neutralise(text)
                ));
            };
            jiff::Timestamp::now()
                .checked_sub(jiff::SignedDuration::from_secs(back))
                .map_err(|_| format!("`{text}` reaches back beyond the earliest time"))?
        }
    };
    Ok(at.strftime("%Y-%m-%dT%H:%M:%S.%9fZ").to_string())
}

/// Print `message` as one line (whatever it quotes) and exit as bad usage.
fn usage_error(message: impl std::fmt::Display) -> ExitCode {
    say_err!("vak: {}", render::neutralise_line(&message.to_string()));
    ExitCode::from(EXIT_USAGE)
}

/// `vak secret set|list|rm`.
fn secret(command: &SecretCommand, policy: &Policy) -> ExitCode {
    use std::io::IsTerminal;
    use vak_host::secrets::{FileSecrets, read_value};
    let store = match FileSecrets::default_path() {
        Ok(path) => FileSecrets::new(path),
        Err(e) => return usage_error(e),
    };
    let done = match command {
        SecretCommand::Set { name } if !vak_host::secrets::valid_name(name) => {
            Err(vak_host::secrets::SecretError::BadName(name.clone()))
        }
        SecretCommand::Set { name } => {
            if std::io::stdin().is_terminal() {
                say_err!("value of {name} (then Enter and Ctrl-D; it is shown as you type):");
            }
            read_value(std::io::stdin().lock())
                .and_then(|value| store.set(name, &value))
                .map(|()| say_err!("stored {name} in {}", store.path().display()))
        }
        SecretCommand::Rm { name } => store
            .remove(name)
            .map(|()| say_err!("removed {name} from {}", store.path().display())),
        SecretCommand::List { json } => store.names().map(|names| {
            // Which tool may use each secret, under which alias, sent only to which origins.
            let bindings = |name: &str| -> Vec<serde_json::Value> {
                let wanted = vak_host::policy::SecretRef::Stored(name.to_string());
                let mut out = Vec::new();
                for grant in policy.tools.values() {
                    let Some(http) = grant.http() else { continue };
                    for c in http.credentials.values().filter(|c| c.secret == wanted) {
                        out.push(serde_json::json!({
                            "tool": grant.tool,
                            "alias": c.alias,
                            "audience": c.audience.iter().map(|o| o.text.clone()).collect::<Vec<_>>(),
                        }));
                    }
                }
                out
            };
            if *json {
                let list: Vec<_> = names
                    .iter()
                    .map(|n| serde_json::json!({ "name": n, "bindings": bindings(n) }))
                    .collect();
                say!(
                    "{}",
                    serde_json::json!({ "file": store.path(), "policy": policy.origin, "secrets": list })
                );
            } else {
                say!("secrets in {} (values are never shown):", store.path().display());
                for name in &names {
                    let found = bindings(name);
                    if found.is_empty() {
                        say!("  {name}  (bound to no tool by policy {})", policy.origin);
                    }
                    for b in found {
                        say!(
                            "  {name}  -> tool {} as {}, sent only to {}",
                            b["tool"].as_str().unwrap_or(""),
                            b["alias"].as_str().unwrap_or(""),
                            b["audience"]
                        );
                    }
                }
            }
        }),
    };
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => usage_error(e),
    }
}

/// `--state-dir`, else `$VAK_STATE_DIR`, else `$XDG_STATE_HOME/vak`, else `~/.local/state/vak`.
fn state_dir(flag: Option<&PathBuf>) -> Option<PathBuf> {
    if let Some(dir) = flag {
        return Some(dir.clone());
    }
    if let Some(dir) = std::env::var_os("VAK_STATE_DIR") {
        return Some(PathBuf::from(dir));
    }
    let base = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))?;
    Some(base.join("vak"))
}

fn open_revocations(state: Option<&PathBuf>) -> Result<Revocations, String> {
    match state_dir(state) {
        Some(dir) => Revocations::open(&dir.join("revocations.jsonl")).map_err(|e| e.to_string()),
        None => Ok(Revocations::in_memory()),
    }
}

/// The host the global options describe.
/// The engine settings of the `vak` command: the defaults, with every compile in a worker
/// process of this same binary (memory capped, killed at its timeout).
fn engine_settings() -> vak_host::EngineSettings {
    let worker = std::env::current_exe()
        .inspect_err(
            |e| tracing::warn!(error = %e, "cannot find this program; compiling in this process"),
        )
        .ok();
    let defaults = vak_host::EngineSettings::default();
    let (timeout, memory) = COMPILE_BOUNDS.get().copied().unwrap_or_default();
    vak_host::EngineSettings {
        compile_worker: worker,
        compile_timeout: timeout
            .map(std::time::Duration::from_secs)
            .unwrap_or(defaults.compile_timeout),
        compile_memory_bytes: memory.map_or(defaults.compile_memory_bytes, |mib| mib << 20),
        ..defaults
    }
}

/// `--compile-timeout` and `--compile-memory`, set once from the command line.
static COMPILE_BOUNDS: std::sync::OnceLock<(Option<u64>, Option<u64>)> = std::sync::OnceLock::new();

// One argument per global option the commands share; a struct would only rename them.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn build_host(
    tools: Option<&PathBuf>,
    policy: Option<Policy>,
    cache_dir: Option<PathBuf>,
    no_cache: bool,
    store: vak_host::Store,
    key: Option<vak_host::signing::HostKey>,
    approver: Option<std::sync::Arc<dyn vak_host::approval::Approver>>,
) -> Result<Host, String> {
    let mut builder = HostBuilder::new()
        .engine_settings(engine_settings())
        .policy(policy.unwrap_or_else(Policy::default_policy))
        .store(store);
    if let Some(key) = key {
        builder = builder.signing_key(key);
    }
    if let Some(approver) = approver {
        builder = builder.approver(approver);
    }
    if no_cache {
        builder = builder.cache_dir(None);
    } else if let Some(dir) = cache_dir {
        builder = builder.cache_dir(Some(dir));
    }
    builder = match tools {
        Some(dir) => builder.tools_dir(dir).map_err(|e| e.to_string())?,
        None => builder.bundled_tools(),
    };
    builder.build().await.map_err(|e| e.to_string())
}

/// What `vak inspect` and `vak build` print about a component.
fn print_examination(exam: &vak_host::Examination, policy: &Policy, json: bool) {
    if json {
        say!("{}", render::json(exam));
    } else {
        say_raw!("{}", render::examination(exam, policy));
    }
}

/// `vak build`: build, then examine the component under the policy as `vak inspect` does.
async fn build(
    dir: &std::path::Path,
    json: bool,
    policy: Option<Policy>,
    cache_dir: Option<PathBuf>,
    no_cache: bool,
) -> ExitCode {
    let wasm = match authoring::build_project(dir) {
        Ok(w) => w,
        Err(e) => return usage_error(e),
    };
    let own_policy = dir.join("policy.toml");
    let policy = match policy {
        Some(p) => p,
        None if own_policy.is_file() => match Policy::load(&own_policy) {
            Ok(p) => p,
            Err(e) => return usage_error(e),
        },
        None => Policy::deny_all(),
    };
    let mut builder = HostBuilder::new()
        .engine_settings(engine_settings())
        .policy(policy);
    if no_cache {
        builder = builder.cache_dir(None);
    } else if let Some(dir) = cache_dir {
        builder = builder.cache_dir(Some(dir));
    }
    let host = match builder.build().await {
        Ok(h) => h,
        Err(e) => return usage_error(e),
    };
    let bytes = match std::fs::read(&wasm) {
        Ok(b) => b,
        Err(e) => return usage_error(format!("cannot read {}: {e}", wasm.display())),
    };
    let exam = host.examine(&wasm.display().to_string(), &bytes).await;
    print_examination(&exam, host.policy(), json);
    match (&exam.verdict, &exam.descriptor) {
        (vak_host::Verdict::Admitted { .. }, Some(d)) => {
            if !json {
                let folder = wasm.parent().unwrap_or(std::path::Path::new("."));
                say_err!(
                    "\ncall it:  vak --tools {} --policy {} call {} '{{...}}'",
                    folder.display(),
                    own_policy.display(),
                    d.name
                );
            }
            ExitCode::SUCCESS
        }
        _ => ExitCode::from(2),
    }
}

async fn run(cli: Cli) -> ExitCode {
    let _ = COMPILE_BOUNDS.set((cli.compile_timeout, cli.compile_memory));
    let policy = match &cli.policy {
        Some(path) => match Policy::load(path) {
            Ok(p) => Some(p),
            Err(e) => return usage_error(e),
        },
        None => None,
    };
    match &cli.command {
        Command::Demo => return demo::run(cli.cache_dir, cli.no_cache).await,
        Command::New {
            name,
            lang,
            dir,
            sdk,
        } => {
            return match authoring::new_project(name, *lang, dir.as_deref(), sdk.as_deref()) {
                Ok(made) => {
                    say!("made {}: a {} tool project", made.display(), lang.title());
                    say!("next:  cd {} && vak build", made.display());
                    ExitCode::SUCCESS
                }
                Err(e) => usage_error(e),
            };
        }
        Command::Build { dir, json } => {
            return build(dir, *json, policy, cli.cache_dir.clone(), cli.no_cache).await;
        }
        Command::Verify { file, key } => return verify(file, key.as_deref()),
        Command::Keygen { file } => return keygen(file),
        Command::Policy {
            command: PolicyCommand::Check { file },
        } => {
            return match Policy::load(file) {
                Ok(p) => {
                    say_raw!("{}", render::policy(&p));
                    ExitCode::SUCCESS
                }
                Err(e) => usage_error(e),
            };
        }
        Command::Secret { command } => {
            let fallback = Policy::default_policy();
            return secret(command, policy.as_ref().unwrap_or(&fallback));
        }
        Command::Store {
            command: StoreCommand::Migrate,
        } => return store_migrate(&cli).await,
        Command::Audit { .. }
            if shared_store_url(&cli).is_none() && state_dir(cli.state_dir.as_ref()).is_none() =>
        {
            return usage_error("no state directory: set --state-dir or VAK_STATE_DIR");
        }
        _ => {}
    }
    let key_file = cli
        .signing_key
        .clone()
        .or_else(|| std::env::var_os("VAK_SIGNING_KEY_FILE").map(PathBuf::from));
    let key = match key_file
        .map(|f| vak_host::signing::HostKey::load(&f))
        .transpose()
    {
        Ok(Some(k)) => k,
        Ok(None) => match vak_host::signing::HostKey::generate() {
            Ok(k) => k,
            Err(e) => return usage_error(e),
        },
        Err(e) => return usage_error(e),
    };
    let key = if cli.nonces_ahead {
        key.with_nonces_ahead()
    } else {
        key
    };
    // Commands that only read or write the store do not serve: they register no node.
    let serving = !matches!(
        cli.command,
        Command::Audit { .. }
            | Command::Revoke { .. }
            | Command::Revocations { .. }
            | Command::Store { .. }
    );
    let store = match open_store(&cli, serving, &key.public_hex()).await {
        Ok(s) => s,
        Err(e) => return usage_error(e),
    };
    match &cli.command {
        Command::Store {
            command: StoreCommand::Status { json },
        } => return store_status(&store, *json).await,
        Command::Audit {
            command,
            tool,
            status,
            stage,
            for_principal,
            since,
            limit,
        } => {
            let filter = vak_host::journal::Filter {
                tool: tool.clone(),
                status: status.clone(),
                stage: stage.clone(),
                principal: for_principal.clone(),
                since: since.clone(),
                limit: Some(*limit),
            };
            return audit(&store, command.as_ref(), &filter).await;
        }
        Command::Revoke { what, reason } => {
            let revocation = match what {
                RevokeWhat::Tool { tool } => Revocation::Tool { tool: tool.clone() },
                RevokeWhat::Principal { principal } => Revocation::Principal {
                    principal: principal.clone(),
                },
                RevokeWhat::Capability { tool, capability } => {
                    match vak_host::capabilities::Capability::from_name(capability) {
                        Some(capability) => Revocation::Capability {
                            tool: tool.clone(),
                            capability,
                        },
                        None => {
                            return usage_error(format!("no capability is named `{capability}`"));
                        }
                    }
                }
            };
            return match store
                .revocations()
                .revoke_reported(revocation, reason)
                .await
            {
                Ok(revoked) => {
                    say!(
                        "revoked {} at {} (committed)",
                        revoked.entry.revocation,
                        revoked.committed_at
                    );
                    let Some(c) = &revoked.confirmation else {
                        return ExitCode::SUCCESS;
                    };
                    let names = |n: &[String]| render::neutralise_line(&n.join(", "));
                    if !c.confirmed.is_empty() {
                        say!(
                            "applied by every live node ({}) in {} ms: none admits a call of it now",
                            names(&c.confirmed),
                            c.waited_ms
                        );
                    } else if c.lapsed.is_empty() && c.unconfirmed.is_empty() {
                        say!("no node is live on this store now: each reads it before serving");
                    }
                    if !c.lapsed.is_empty() {
                        say!(
                            "not confirmed by {} (no heartbeat within its bound, or stopped): \
                             it refuses every call until it has read this revocation",
                            names(&c.lapsed)
                        );
                    }
                    let missing = revoked.not_confirmed();
                    if missing.is_empty() {
                        return ExitCode::SUCCESS;
                    }
                    say_err!(
                        "vak revoke: the revocation is recorded, but not confirmed within {} ms by: \
                         {} (they refuse calls on their own once their view is older than its \
                         bound)",
                        c.waited_ms,
                        names(&missing)
                    );
                    ExitCode::from(3)
                }
                Err(e) => {
                    say_err!("vak: {}", render::neutralise_line(&e.to_string()));
                    ExitCode::from(1)
                }
            };
        }
        Command::Revocations { json } => {
            let list = store.revocations().list();
            if *json {
                say!("{}", render::json(&list));
            } else if list.is_empty() {
                say!("no revocations in force");
            } else {
                for e in list {
                    say!(
                        "{}  {}  ({})",
                        e.at,
                        e.revocation,
                        render::neutralise(&e.reason)
                    );
                }
            }
            return ExitCode::SUCCESS;
        }
        _ => {}
    }
    // `vak call` asks the person at the terminal for approvals (a call whose proposal comes on
    // stdin cannot); `vak serve` asks the MCP client instead.
    let approver: Option<std::sync::Arc<dyn vak_host::approval::Approver>> = match &cli.command {
        Command::Call { proposal, .. } => {
            if std::io::IsTerminal::is_terminal(&std::io::stdin())
                && proposal.as_deref() != Some("-")
            {
                Some(std::sync::Arc::new(vak_host::approval::TerminalApprover))
            } else {
                Some(std::sync::Arc::new(vak_host::approval::NoTerminal))
            }
        }
        _ => None,
    };
    let host = match build_host(
        cli.tools.as_ref(),
        policy,
        cli.cache_dir,
        cli.no_cache,
        store,
        Some(key),
        approver,
    )
    .await
    {
        Ok(h) => h,
        Err(e) => return usage_error(e),
    };
    // One invocation is one session.
    let session = host.session(cli.principal.as_deref());
    match cli.command {
        Command::Call {
            tool,
            arguments,
            proposal,
            provider,
            json,
            requirements,
            render,
        } => {
            let mut required = Vec::new();
            for r in &requirements {
                match vak_host::outcome::Requirement::parse(r) {
                    Some(r) => required.push(r),
                    None => {
                        return usage_error(format!(
                            "unknown requirement `{r}` (freshness=SECONDS, cited, verified-change, aligned)"
                        ));
                    }
                }
            }
            let renderer = match render.as_str() {
                "markdown" => vak_host::projection::RendererCaps::markdown(),
                "text" => vak_host::projection::RendererCaps::plain_text(),
                "html" => vak_host::projection::RendererCaps::html(),
                _ => vak_host::projection::RendererCaps::terminal(),
            };
            let from_document = proposal.is_some();
            let proposals = match proposal {
                Some(source) => match read_proposals(&source, provider.as_deref()) {
                    Ok(p) => p,
                    Err(e) => return usage_error(e),
                },
                None => vec![
                    Proposal::new(tool.unwrap_or_default(), arguments.unwrap_or_default())
                        .from_provider("cli"),
                ],
            };
            if from_document && proposals.is_empty() {
                // A provider's answer with text only: nothing to run, nothing refused.
                if json {
                    say!("[]");
                } else {
                    say!("no tool calls in the proposal document");
                }
                return ExitCode::SUCCESS;
            }
            let mut records = Vec::new();
            for mut p in proposals {
                p.requirements.extend(required.iter().cloned());
                p.renderer = renderer.clone();
                records.push(session.call(p).await);
            }
            if json && from_document {
                say!("{}", render::json(&records));
            } else if json {
                for r in &records {
                    say!("{}", render::json(r));
                }
            } else if render == "html" {
                for r in &records {
                    match &r.projection {
                        Some(projection) => say_raw!("{}", projection.rendered),
                        None => say_raw!("{}", render::record_for_terminal(r)),
                    }
                }
            } else {
                for r in &records {
                    say_raw!("{}", render::record_for_terminal(r));
                }
            }
            exit_for_all(&records)
        }
        Command::Inspect { target, json } => {
            let exam = if target.ends_with(".wasm") || std::path::Path::new(&target).is_file() {
                match std::fs::read(&target) {
                    Ok(bytes) => host.examine(&target, &bytes).await,
                    Err(e) => return usage_error(format!("cannot read {target}: {e}")),
                }
            } else {
                let found = host.examinations().iter().find(|e| {
                    e.descriptor.as_ref().is_some_and(|d| d.name == target)
                        || e.source == format!("bundled:{target}")
                });
                match found {
                    Some(e) => e.clone(),
                    None => {
                        return usage_error(format!(
                            "no tool named `{target}` is loaded and no file has that path"
                        ));
                    }
                }
            };
            print_examination(&exam, host.policy(), json);
            // As `vak build`: a script can tell an admitted component from a refused one.
            match exam.verdict {
                vak_host::Verdict::Admitted { .. } => ExitCode::SUCCESS,
                vak_host::Verdict::Refused { .. } => ExitCode::from(2),
            }
        }
        Command::Tools { json, for_provider } => {
            if let Some(name) = for_provider {
                return print_declarations(&host, &name, json);
            }
            if json {
                let tools: Vec<_> = host
                    .tools()
                    .map(|t| {
                        serde_json::json!({
                            "name": t.descriptor.name,
                            "description": t.descriptor.description,
                            "input_schema": t.descriptor.input_schema,
                            "payload_schemas": t.descriptor.payload_schemas,
                            "claims": t.descriptor.claims,
                            "not_enforced": t.schema.not_enforced,
                            "digest": t.examination.digest,
                        })
                    })
                    .collect();
                let refused: Vec<_> = host
                    .examinations()
                    .iter()
                    .filter(|e| matches!(e.verdict, vak_host::Verdict::Refused { .. }))
                    .map(|e| serde_json::json!({ "source": e.source, "verdict": e.verdict }))
                    .collect();
                let doc = serde_json::json!({ "tools": tools, "refused": refused });
                say!("{}", render::json(&doc));
            } else {
                say_raw!("{}", render::tools(&host));
            }
            ExitCode::SUCCESS
        }
        Command::Bench {
            tool,
            arguments,
            rounds,
            calls,
            json,
        } => match vak_host::bench::lifecycle_vs_raw(&host, &tool, &arguments, rounds, calls).await
        {
            Ok(report) => {
                if json {
                    say!("{}", render::json(&report));
                } else {
                    say_raw!("{}", render::bench(&report));
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                say_err!("vak bench: {}", render::neutralise_line(&e.to_string()));
                ExitCode::from(1)
            }
        },
        Command::Serve {
            http,
            allow_hosts,
            allow_origins,
        } => {
            let code = serve(
                &host,
                cli.principal.as_deref(),
                http,
                allow_hosts,
                allow_origins,
            )
            .await;
            // A node that stops gives its name back: a process may take it at once.
            host.store().close().await;
            code
        }
        Command::Demo
        | Command::New { .. }
        | Command::Build { .. }
        | Command::Audit { .. }
        | Command::Verify { .. }
        | Command::Keygen { .. }
        | Command::Policy { .. }
        | Command::Revoke { .. }
        | Command::Secret { .. }
        | Command::Store { .. }
        | Command::Revocations { .. } => ExitCode::SUCCESS,
    }
}

async fn serve(
    host: &Host,
    principal: Option<&str>,
    http: Option<std::net::SocketAddr>,
    allow_hosts: Vec<String>,
    allow_origins: Vec<String>,
) -> ExitCode {
    use vak_host::mcp;
    // A client sees only the tools served: the refused ones, and why, are said here.
    for e in host.examinations() {
        if let vak_host::Verdict::Refused { kind, reason, .. } = &e.verdict {
            say_err!(
                "vak serve: not serving {} [{kind}]: {}",
                render::neutralise_line(&e.source),
                render::neutralise_line(reason)
            );
        }
    }
    let served = match http {
        None => mcp::serve_stdio(host, principal).await,
        Some(addr) => {
            let options = mcp::http::HttpOptions {
                allow_hosts,
                allow_origins,
                principal: principal.map(str::to_string),
            };
            match mcp::http::Bound::bind(addr, &options).await {
                Err(e) => Err(e),
                Ok(bound) => {
                    // On stderr: stdout is not ours to write while serving.
                    say_err!(
                        "vak: serving MCP at http://{}{}",
                        bound.local_addr(),
                        mcp::http::ENDPOINT
                    );
                    let shutdown = tokio_util::sync::CancellationToken::new();
                    let on_signal = shutdown.clone();
                    tokio::spawn(async move {
                        shutdown_signal().await;
                        on_signal.cancel();
                    });
                    bound.serve(host, &options, shutdown).await
                }
            }
        }
    };
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            say_err!("vak serve: {}", render::neutralise_line(&e.to_string()));
            ExitCode::from(1)
        }
    }
}

/// Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(t) => t,
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                    return;
                }
            };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}

fn open_journal(
    state: Option<&PathBuf>,
    durability: vak_host::journal::Durability,
) -> Option<Result<vak_host::journal::Journal, String>> {
    let dir = state_dir(state)?;
    Some(
        vak_host::journal::Journal::open(&dir.join("journal.sqlite"), durability)
            .map_err(|e| e.to_string()),
    )
}

/// `--store`, else `$VAK_STORE`: the shared store's address, if one is named.
fn shared_store_url(cli: &Cli) -> Option<String> {
    cli.store
        .clone()
        .or_else(|| std::env::var("VAK_STORE").ok())
        .filter(|u| !u.trim().is_empty())
}

/// `--node`, else `$VAK_NODE`, else the host name.
fn node_name(cli: &Cli) -> String {
    cli.node
        .clone()
        .or_else(|| std::env::var("VAK_NODE").ok())
        .filter(|n| !n.trim().is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_string())
                .filter(|h| !h.is_empty())
        })
        .unwrap_or_else(|| "vak".to_string())
}

/// The store the global options name: a shared PostgreSQL store, or this machine's state
/// folder (the journal unless --no-journal, the revocations file).
async fn open_store(cli: &Cli, serving: bool, public_key: &str) -> Result<vak_host::Store, String> {
    use vak_host::store::postgres::{PgOptions, PgStore};
    if let Some(url) = shared_store_url(cli) {
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(format!(
                "--store takes a postgres:// address, not `{}` (the local store needs no flag)",
                render::neutralise(&url)
            ));
        }
        if cli.no_journal {
            return Err("--no-journal: a shared store always keeps the journal".into());
        }
        let mut options = PgOptions::new(node_name(cli));
        options.register = serving;
        options.op_timeout = std::time::Duration::from_millis(cli.store_timeout_ms);
        options.public_key = Some(public_key.to_string());
        options.policy_sha256 = Some(match &cli.policy {
            Some(path) => std::fs::read(path)
                .map(|b| vak_host::digest::sha256_hex(&b))
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?,
            None => "built-in".to_string(),
        });
        return PgStore::connect(&url, options)
            .await
            .map(vak_host::Store::Postgres)
            .map_err(|e| e.to_string());
    }
    let revocations = open_revocations(cli.state_dir.as_ref())?;
    let journal = if cli.no_journal {
        None
    } else {
        let durability = if cli.journal_sync {
            vak_host::journal::Durability::Synced
        } else {
            vak_host::journal::Durability::Committed
        };
        open_journal(cli.state_dir.as_ref(), durability).transpose()?
    };
    Ok(vak_host::Store::Local(vak_host::store::Local {
        journal: journal.map(std::sync::Arc::new),
        revocations: std::sync::Arc::new(revocations),
    }))
}

/// `vak store migrate`.
async fn store_migrate(cli: &Cli) -> ExitCode {
    let Some(url) = shared_store_url(cli) else {
        return usage_error("vak store migrate needs --store postgres://… (or VAK_STORE)");
    };
    match vak_host::store::postgres::migrate(&url).await {
        Ok(m) if m.applied.is_empty() => {
            say!("the store is up to date (schema version {})", m.from);
            ExitCode::SUCCESS
        }
        Ok(m) => {
            let last = m.applied.last().copied().unwrap_or(m.from);
            say!(
                "migrated the store from schema version {} to {last} (applied {:?})",
                m.from,
                m.applied
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            say_err!(
                "vak store migrate: {}",
                render::neutralise_line(&e.to_string())
            );
            ExitCode::from(1)
        }
    }
}

/// `vak store status`.
async fn store_status(store: &vak_host::Store, json: bool) -> ExitCode {
    let vak_host::Store::Postgres(pg) = store else {
        return usage_error(
            "vak store status reads a shared store: pass --store postgres://… (or VAK_STORE)",
        );
    };
    match pg.status().await {
        Ok(status) if json => {
            say!("{}", render::json(&status));
            ExitCode::SUCCESS
        }
        Ok(status) => {
            say_raw!("{}", render::store_status(&pg.describe(), &status));
            ExitCode::SUCCESS
        }
        Err(e) => {
            say_err!(
                "vak store status: {}",
                render::neutralise_line(&e.to_string())
            );
            ExitCode::from(1)
        }
    }
}

async fn audit(
    store: &vak_host::Store,
    command: Option<&AuditCommand>,
    filter: &vak_host::journal::Filter,
) -> ExitCode {
    match command {
        None => match store.list(filter).await {
            Ok(rows) => {
                // Every field may hold what a model or a guest wrote, or what a journal row was
                // made to say: none can end its line or act on the terminal.
                use render::neutralise_line as field;
                for r in rows {
                    let node = r
                        .node
                        .as_deref()
                        .map(|n| format!("{}  ", field(n)))
                        .unwrap_or_default();
                    say!(
                        "#{:<6} {node}{}  {:<10} {:<10} {:<10} {}  {}",
                        r.seq,
                        field(&r.received_at),
                        field(&r.tool),
                        field(&r.status),
                        field(&r.stage),
                        field(&r.call_id),
                        field(r.principal.as_deref().unwrap_or("-"))
                    );
                }
                ExitCode::SUCCESS
            }
            Err(e) => usage_error(e),
        },
        Some(AuditCommand::Show { call_id }) => match store.show(call_id).await {
            Ok(found) if found.is_empty() => {
                usage_error(format!("no record of call `{call_id}` in the journal"))
            }
            Ok(found) if found.len() == 1 => {
                let shown = &found[0];
                let pretty = serde_json::from_str::<serde_json::Value>(&shown.text)
                    .map(|v| render::json(&v))
                    .unwrap_or_else(|_| shown.text.clone());
                say!("{pretty}");
                shown_verdict(shown)
            }
            Ok(found) => {
                // A provider's call id (a model's choice) named several calls: every one of
                // them, never one picked for the reader.
                use render::neutralise_line as field;
                let mut code = ExitCode::SUCCESS;
                for shown in &found {
                    say!(
                        "#{:<6} {}  {}  {:<10} {:<11} {}  {}",
                        shown.seq,
                        entry_place(shown),
                        field(&shown.received_at),
                        field(&shown.tool),
                        field(&shown.status),
                        field(&shown.call_id),
                        match &shown.check {
                            Ok(()) => "checks out".to_string(),
                            Err(why) => format!("DOES NOT CHECK OUT: {}", field(why)),
                        }
                    );
                    if shown.check.is_err() {
                        code = ExitCode::from(1);
                    }
                }
                say_err!(
                    "vak: {} calls have the provider call id `{}`: show one with `vak audit show CALL_ID`",
                    found.len(),
                    render::neutralise_line(call_id)
                );
                code
            }
            Err(e) => usage_error(e),
        },
        Some(AuditCommand::Verify { key }) => match store.verify(key).await {
            Ok(v) => {
                let chains = v.heads.len();
                let verdict = match &v.first_bad {
                    None => {
                        say!(
                            "journal ok: {} entries in {chains} chain{}, chains and signatures verified ({} records, {} started entries; {} calls interrupted, {} running)",
                            v.entries,
                            if chains == 1 { "" } else { "s" },
                            v.records,
                            v.started,
                            v.interrupted.len(),
                            v.running.len()
                        );
                        for u in &v.interrupted {
                            say!(
                                "  interrupted: {} (started at {}#{}, no final record)",
                                render::neutralise_line(&u.call_id),
                                u.chain
                                    .as_deref()
                                    .map(|c| format!("chain {} ", render::neutralise_line(c)))
                                    .unwrap_or_default(),
                                u.chain_seq
                            );
                        }
                        ExitCode::SUCCESS
                    }
                    Some((seq, why)) => {
                        say!(
                            "journal BAD at entry #{seq}: {}",
                            render::neutralise_line(why)
                        );
                        ExitCode::from(1)
                    }
                };
                // A shared store's chains are its nodes'; a local journal's, its processes'.
                let label = match store {
                    vak_host::Store::Postgres(_) => "node",
                    vak_host::Store::Local(_) => "chain",
                };
                for h in &v.heads {
                    let node = h
                        .node
                        .as_deref()
                        .map(|n| format!("{label} {} ", render::neutralise_line(n)))
                        .unwrap_or_default();
                    say!("  head: {node}#{} {}", h.seq, h.hash);
                }
                verdict
            }
            Err(e) => usage_error(e),
        },
    }
}

/// Where a shown entry is: `chain C #n` (a node's name on a shared store), or `#n`.
fn entry_place(shown: &vak_host::journal::Shown) -> String {
    match &shown.node {
        Some(chain) => format!(
            "chain {} #{}",
            render::neutralise_line(chain),
            shown.chain_seq
        ),
        None => format!("#{}", shown.chain_seq),
    }
}

/// What `vak audit show` says of the one entry it printed: that it checks out (its hash, its
/// links in its chain, its signature), or a warning and exit status 1.
fn shown_verdict(shown: &vak_host::journal::Shown) -> ExitCode {
    let place = entry_place(shown);
    match &shown.check {
        Ok(()) => {
            if shown.kind == vak_host::journal::Kind::Started {
                say_err!(
                    "vak: call {} is {}: its started entry (journal #{}, {place}) has no final record",
                    render::neutralise_line(&shown.call_id),
                    render::neutralise_line(&shown.status),
                    shown.seq
                );
            }
            say_err!(
                "vak: journal #{} ({place}) checks out: its hash, its links in its chain and its signature",
                shown.seq
            );
            ExitCode::SUCCESS
        }
        Err(why) => {
            say_err!(
                "vak: WARNING: journal #{} ({place}) does not check out: {}. What is printed above is not what the host wrote; run `vak audit verify`.",
                shown.seq,
                render::neutralise_line(why)
            );
            ExitCode::from(1)
        }
    }
}

fn verify(file: &str, trusted: Option<&str>) -> ExitCode {
    let text = if file == "-" {
        let mut s = String::new();
        if let Err(e) = std::io::Read::read_to_string(&mut std::io::stdin(), &mut s) {
            return usage_error(format!("cannot read stdin: {e}"));
        }
        s
    } else {
        match std::fs::read_to_string(file) {
            Ok(t) => t,
            Err(e) => return usage_error(format!("cannot read {file}: {e}")),
        }
    };
    let records: Vec<CallRecord> = match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(serde_json::Value::Array(items)) => {
            match items.into_iter().map(serde_json::from_value).collect() {
                Ok(r) => r,
                Err(e) => return usage_error(format!("not a list of call records: {e}")),
            }
        }
        Ok(one) => match serde_json::from_value(one) {
            Ok(r) => vec![r],
            Err(e) => return usage_error(format!("not a call record: {e}")),
        },
        Err(e) => return usage_error(format!("not JSON: {e}")),
    };
    let mut bad = 0;
    for r in &records {
        match vak_host::signing::verify(r, trusted) {
            Ok(key) => say!(
                "ok   {} signed by {}",
                render::neutralise_line(&r.call_id),
                render::neutralise_line(&key)
            ),
            Err(e) => {
                bad += 1;
                say!(
                    "BAD  {}: {}",
                    render::neutralise_line(&r.call_id),
                    render::neutralise_line(&e.to_string())
                );
            }
        }
    }
    if trusted.is_none() && bad == 0 {
        say!("(the signatures match their embedded keys; pass --key to require this host's key)");
    }
    if bad == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn keygen(file: &std::path::Path) -> ExitCode {
    let key = match vak_host::signing::HostKey::generate() {
        Ok(k) => k,
        Err(e) => {
            say_err!("vak: {}", render::neutralise_line(&e.to_string()));
            return ExitCode::from(1);
        }
    };
    let written = {
        use std::io::Write as _;
        #[cfg(unix)]
        use std::os::unix::fs::OpenOptionsExt;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        options.mode(0o600);
        options
            .open(file)
            .and_then(|mut f| writeln!(f, "{}", key.seed_hex()))
    };
    match written {
        Ok(()) => {
            say!("{}", key.public_hex());
            ExitCode::SUCCESS
        }
        Err(e) => usage_error(format!("cannot create {}: {e}", file.display())),
    }
}

fn read_proposals(source: &str, provider: Option<&str>) -> Result<Vec<Proposal>, String> {
    let text = if source == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)
            .map_err(|e| format!("cannot read the proposal from stdin: {e}"))?;
        s
    } else {
        std::fs::read_to_string(source).map_err(|e| format!("cannot read {source}: {e}"))?
    };
    let hint = provider.and_then(Provider::from_name);
    parse_document(&text, hint).map_err(|e| e.to_string())
}

fn print_declarations(host: &Host, name: &str, json: bool) -> ExitCode {
    let Some(provider) = Provider::from_name(name) else {
        return usage_error(format!("unknown provider `{name}`"));
    };
    let (tools, notes) = if provider == Provider::Mcp {
        // Exactly what `vak serve` answers to tools/list: the admitted schemas, unchanged.
        match vak_host::mcp::Catalog::of(host) {
            Ok(c) => (c.to_json(), Vec::new()),
            Err(e) => {
                say_err!("vak: {}", render::neutralise_line(&e.to_string()));
                return ExitCode::from(1);
            }
        }
    } else {
        let mut entries = Vec::new();
        let mut notes = Vec::new();
        for tool in host.tools() {
            let d = &tool.descriptor;
            let decl = declaration(provider, &d.name, &d.description, &d.input_schema);
            for n in decl.notes {
                notes.push(serde_json::json!({ "tool": d.name, "note": n }));
            }
            entries.push(decl.entry);
        }
        (request_tools(provider, entries), notes)
    };
    if json {
        let doc = serde_json::json!({ "provider": provider.name(), "tools": tools["tools"], "notes": notes });
        say!("{}", render::json(&doc));
    } else {
        for n in &notes {
            say_err!(
                "vak: {}: {}",
                render::neutralise_line(n["tool"].as_str().unwrap_or_default()),
                render::neutralise_line(n["note"].as_str().unwrap_or_default())
            );
        }
        say!("{}", render::json(&tools));
    }
    ExitCode::SUCCESS
}

/// The exit status for several records: refused beats failed beats completed.
fn exit_for_all(records: &[CallRecord]) -> ExitCode {
    if records.iter().any(|r| matches!(r.journaled, Some(Err(_)))) {
        say_err!("vak: a record could not be written to the journal (see the log above)");
        return ExitCode::from(1);
    }
    if records.iter().any(|r| r.status == Status::Refused) {
        ExitCode::from(2)
    } else if records.iter().any(|r| r.status != Status::Completed) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

//! The `vak` command line. Exit status: 0 completed, 1 tool error or failure in the sandbox,
//! 2 refused before dispatch, 3 bad usage of the command itself.
//!
//! Here: the options and commands, `main`, and the dispatch. Each command family has a module of
//! its own (`call`, `tools`, `serve`, `audit`, `store`, `policy` with `policy_import`, `revoke`,
//! `signing`, `bench`, `authoring`, `demo`); `args` and `setup` turn the global options into a
//! store, a key and a host; `render` is the one place records are rendered, and `say!` the one
//! way to print.

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

mod args;
mod audit;
mod authoring;
mod bench;
mod call;
mod demo;
mod logging;
mod policy;
mod policy_import;
mod render;
mod revoke;
mod serve;
mod setup;
mod signing;
mod store;
mod tools;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use vak_host::Policy;
use vak_host::proposal::providers::Provider;

/// Exit status for bad usage of the CLI itself.
const EXIT_USAGE: u8 = 3;

/// `--memory-reset`: [`vak_host::MemoryReset`] as the command line spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum MemoryResetArg {
    DirtyPages,
    Zero,
}

impl From<MemoryResetArg> for vak_host::MemoryReset {
    fn from(arg: MemoryResetArg) -> Self {
        match arg {
            MemoryResetArg::Zero => vak_host::MemoryReset::Zero,
            MemoryResetArg::DirtyPages => vak_host::MemoryReset::DirtyPages,
        }
    }
}

/// `--signing`: [`vak_host::signing::Signing`] as the command line spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum SigningArg {
    Records,
    Checkpoints,
}

impl From<SigningArg> for vak_host::signing::Signing {
    fn from(arg: SigningArg) -> Self {
        match arg {
            SigningArg::Records => vak_host::signing::Signing::Records,
            SigningArg::Checkpoints => vak_host::signing::Signing::Checkpoints,
        }
    }
}

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
    /// Memory one compile (a worker process) may commit, in MiB, counted as its data segment
    /// (the allocator keeps 2-3x what is resident; a 300 KB tool needs ~110); past it the
    /// component is refused [default: 2048].
    #[arg(long, global = true, value_name = "MIB", value_parser = clap::value_parser!(u64).range(64..=1_048_576))]
    compile_memory: Option<u64>,
    /// How a pool slot's memory is made fresh after a call: `dirty-pages` restores only the
    /// pages the call wrote (the kernel finds them; the cheapest call), `zero` zeroes the
    /// memory the slot keeps in place (each call 0.1-0.7 ms slower, but a tool whose call
    /// writes megabytes, such as a Python one, then serves 1.7-1.8x the calls on two cores
    /// instead of no more). Either way no call sees anything of an earlier one.
    #[arg(long, global = true, value_name = "HOW", default_value = "dirty-pages")]
    memory_reset: MemoryResetArg,
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
    /// What the signing key signs: `checkpoints`, a checkpoint over each batch of the journal's
    /// entries, off the call path (a call waits for no signature; its record is signed in the
    /// journal within milliseconds: `vak audit show ID --proof` exports it with its proof), or
    /// `records`, each record and `started` entry on the call path (what a caller gets back is
    /// signed). On a shared store (--store), records are signed either way; with --no-journal,
    /// `call` signs each record it prints, and `serve` and `bench` hash records into a chain in
    /// memory, signed by checkpoint only when a proof is asked for (nothing asks over MCP).
    #[arg(
        long,
        global = true,
        value_name = "WHAT",
        default_value = "checkpoints"
    )]
    signing: SigningArg,
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
    Call(call::CallArgs),
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
    /// Check a policy file and explain what it grants, or translate a Wassette policy.yaml.
    Policy {
        #[command(subcommand)]
        command: policy::PolicyCommand,
    },
    /// Revoke a tool, one capability of a tool, or a principal: recorded durably, applied to new
    /// calls at once and to running calls at their next capability use. On a shared store it
    /// returns once every live node has applied it (exit 3, naming them, if some did not within
    /// --store-timeout-ms).
    Revoke {
        #[command(subcommand)]
        what: revoke::RevokeWhat,
        /// Why (kept with the revocation).
        #[arg(long, global = true, default_value = "revoked with vak revoke")]
        reason: String,
    },
    /// Host-held secrets a tool's http requests may have injected at the broker; the tool never
    /// reads them. Kept in $VAK_SECRETS_FILE, else ~/.config/vak/secrets.json (mode 0600;
    /// refused when others can read it, or write to its folder).
    Secret {
        #[command(subcommand)]
        command: policy::SecretCommand,
    },
    /// List the revocations in force.
    Revocations {
        /// Print JSON instead.
        #[arg(long)]
        json: bool,
    },
    /// Check the host signature of saved call records (`vak call … --json` output), or of
    /// records exported with the proof that a journal checkpoint signs them (`vak audit show
    /// CALL_ID --proof`, for records written unsigned with `--signing checkpoints`).
    Verify {
        /// A file with one record or proof, or an array of them, or `-` for stdin.
        file: String,
        /// Also require that this public key (hex) signed them.
        #[arg(long, value_name = "HEX")]
        key: Option<String>,
    },
    /// The shared store (--store): bring its schema up to date, or show its nodes and chains.
    Store {
        #[command(subcommand)]
        command: store::StoreCommand,
    },
    /// Read the journal: list calls (every chain merged, newest first; a call started without
    /// its record is `interrupted`, or `running`), show one, or verify every chain (each writing
    /// process's, or each node's on a shared store).
    Audit(audit::AuditArgs),
    /// Serve the admitted tools over MCP: stdio by default (one connection, one session), or
    /// streamable HTTP at http://ADDR/mcp with --http (loopback unless --allow-host is given).
    Serve {
        /// Serve streamable HTTP on this address (127.0.0.1:8080, localhost:8080, [::1]:8080;
        /// port 0 picks one and prints it on stderr) instead of stdio.
        #[arg(long, value_name = "ADDR", value_parser = args::parse_listen_addr)]
        http: Option<std::net::SocketAddr>,
        /// A Host name clients may use besides localhost/127.0.0.1/::1 (repeatable; required
        /// to listen on a non-loopback address).
        #[arg(long = "allow-host", value_name = "HOST", requires = "http")]
        allow_hosts: Vec<String>,
        /// A browser origin (scheme://host:port) allowed besides this server's loopback
        /// origins (repeatable). Requests with any other Origin get 403.
        #[arg(long = "allow-origin", value_name = "ORIGIN", requires = "http")]
        allow_origins: Vec<String>,
        /// Who answers the calls of tools marked `ask`: `client` asks the MCP client with an
        /// elicitation form; `inbox` writes each question to the state directory's
        /// approvals.sqlite, for a person to answer in `vak audit serve --approvals` (another
        /// process, on the same state directory), and waits up to the grant's approval timeout.
        #[arg(long, value_enum, default_value = "client")]
        approvals: serve::Approvals,
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
    /// component, side by side in this process, and print the ratio; also the memory of as
    /// many calls of the tool at once as the host takes.
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

/// Parse the command line, set up logging and the runtime, and run the command.
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
    logging::init_tracing(cli.verbose);
    let serves = match &cli.command {
        Command::Serve { .. } => true,
        Command::Audit(a) => a.serves(),
        _ => false,
    };
    if !serves {
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
    let code = runtime.block_on(run(cli));
    // Tasks still held (a session's, ended by a signal) are dropped here, closing the journal
    // they hold; a read of stdin blocked on a thread of its own is not waited for.
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    code
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

/// Print `message` as one line (whatever it quotes) and exit as bad usage.
fn usage_error(message: impl std::fmt::Display) -> ExitCode {
    say_err!("vak: {}", render::neutralise_line(&message.to_string()));
    ExitCode::from(EXIT_USAGE)
}

/// Run the command: those that need neither a key nor a store first, then those that need only
/// the store, then those that need a host (one invocation, one session).
async fn run(cli: Cli) -> ExitCode {
    setup::set_engine_options(&cli);
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
        } => return authoring::commands::new(name, *lang, dir.as_deref(), sdk.as_deref()),
        Command::Build { dir, json } => {
            return authoring::commands::build(
                dir,
                *json,
                policy,
                cli.cache_dir.clone(),
                cli.no_cache,
            )
            .await;
        }
        Command::Verify { file, key } => return signing::verify(file, key.as_deref()),
        Command::Keygen { file } => return signing::keygen(file),
        Command::Policy { command } => return policy::run(command),
        Command::Secret { command } => {
            let fallback = Policy::default_policy();
            return policy::secret(command, policy.as_ref().unwrap_or(&fallback));
        }
        Command::Store {
            command: store::StoreCommand::Migrate,
        } => return store::migrate(&cli).await,
        Command::Audit { .. }
            if args::shared_store_url(&cli).is_none()
                && args::state_dir(cli.state_dir.as_ref()).is_none() =>
        {
            return usage_error("no state directory: set --state-dir or VAK_STATE_DIR");
        }
        _ => {}
    }
    let key = match setup::signing_key(&cli) {
        Ok(k) => k,
        Err(e) => return usage_error(e),
    };
    // Commands that only read or write the store do not serve: they register no node.
    let serving = !matches!(
        cli.command,
        Command::Audit { .. }
            | Command::Revoke { .. }
            | Command::Revocations { .. }
            | Command::Store { .. }
    );
    let store = match setup::open_store(&cli, serving, &key.public_hex()).await {
        Ok(s) => s,
        Err(e) => return usage_error(e),
    };
    match &cli.command {
        Command::Store {
            command: store::StoreCommand::Status { json },
        } => return store::status(&store, *json).await,
        Command::Audit(a) => {
            return audit::run(&store, a, args::state_dir(cli.state_dir.as_ref())).await;
        }
        Command::Revoke { what, reason } => return revoke::revoke(&store, what, reason).await,
        Command::Revocations { json } => return revoke::list(&store, *json),
        _ => {}
    }
    let approver = match &cli.command {
        Command::Call(args) => Some(call::approver(args)),
        Command::Serve {
            approvals: serve::Approvals::Inbox,
            ..
        } => match serve::inbox_approver(args::state_dir(cli.state_dir.as_ref())) {
            Ok(a) => Some(a),
            Err(e) => return usage_error(e),
        },
        _ => None,
    };
    let host = match setup::build_host(&cli, policy, store, key, approver).await {
        Ok(h) => h,
        Err(e) => return usage_error(e),
    };
    // One invocation is one session.
    let session = host.session(cli.principal.as_deref());
    match cli.command {
        Command::Call(args) => call::run(&session, args).await,
        Command::Inspect { target, json } => tools::inspect(&host, &target, json).await,
        Command::Tools { json, for_provider } => tools::list(&host, json, for_provider.as_deref()),
        Command::Bench {
            tool,
            arguments,
            rounds,
            calls,
            json,
        } => bench::run(&host, &tool, &arguments, rounds, calls, json).await,
        Command::Serve {
            http,
            allow_hosts,
            allow_origins,
            ..
        } => {
            serve::run(
                &host,
                cli.principal.as_deref(),
                http,
                allow_hosts,
                allow_origins,
            )
            .await
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

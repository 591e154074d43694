//! The `vak` command line. Exit status: 0 completed, 1 tool error or failure in the sandbox,
//! 2 refused before dispatch, 3 bad usage of the command itself.

mod demo;
mod render;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use vak_host::{CallRecord, Host, HostBuilder, Policy, Proposal, Status};

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
    /// Log more to stderr (-v info, -vv debug). `RUST_LOG` also works.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run one call through the whole lifecycle and print the result.
    Call {
        /// The tool's name.
        tool: String,
        /// The arguments, a JSON object, e.g. '{"zone":"Europe/Paris"}'.
        arguments: String,
        /// Print the complete call record as JSON instead.
        #[arg(long)]
        json: bool,
    },
    /// Show what a component imports, exports and claims, and the admission verdict, without
    /// running its `call`.
    Inspect {
        /// A tool name (among the loaded tools) or a path to a `.wasm` component.
        target: String,
        /// Print JSON instead.
        #[arg(long)]
        json: bool,
    },
    /// List the admitted tools with their input schemas (and the refused ones, with reasons).
    Tools {
        /// Print JSON instead.
        #[arg(long)]
        json: bool,
    },
    /// Show the host at work on the bundled tools: a completed call, a tool error, a limit hit.
    Demo,
}

pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_USAGE } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    init_tracing(cli.verbose);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("vak: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    runtime.block_on(run(cli))
}

fn init_tracing(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // Logs go to stderr: stdout carries only results and records.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

fn usage_error(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("vak: {message}");
    ExitCode::from(EXIT_USAGE)
}

/// The host the global options describe.
pub(crate) async fn build_host(
    tools: Option<&PathBuf>,
    policy: Option<Policy>,
    cache_dir: Option<PathBuf>,
    no_cache: bool,
) -> Result<Host, String> {
    let mut builder = HostBuilder::new().policy(policy.unwrap_or_else(Policy::default_policy));
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

async fn run(cli: Cli) -> ExitCode {
    let policy = match &cli.policy {
        Some(path) => match Policy::load(path) {
            Ok(p) => Some(p),
            Err(e) => return usage_error(e),
        },
        None => None,
    };
    if let Command::Demo = cli.command {
        return demo::run(cli.cache_dir, cli.no_cache).await;
    }
    let host = match build_host(cli.tools.as_ref(), policy, cli.cache_dir, cli.no_cache).await {
        Ok(h) => h,
        Err(e) => return usage_error(e),
    };
    match cli.command {
        Command::Call {
            tool,
            arguments,
            json,
        } => {
            let record = host
                .call(Proposal::new(tool, arguments).from_provider("cli"))
                .await;
            if json {
                println!("{}", record.to_json_pretty());
            } else {
                print!("{}", render::record_for_terminal(&record));
            }
            exit_for(&record)
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
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&exam).unwrap_or_else(|e| e.to_string())
                );
            } else {
                print!("{}", render::examination(&exam, host.policy()));
            }
            ExitCode::SUCCESS
        }
        Command::Tools { json } => {
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
                println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
            } else {
                print!("{}", render::tools(&host));
            }
            ExitCode::SUCCESS
        }
        Command::Demo => ExitCode::SUCCESS,
    }
}

/// The exit status for a call record.
pub(crate) fn exit_for(record: &CallRecord) -> ExitCode {
    match record.status {
        Status::Completed => ExitCode::SUCCESS,
        Status::ToolError | Status::Failed => ExitCode::from(1),
        Status::Refused => ExitCode::from(2),
    }
}

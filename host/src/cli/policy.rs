//! `vak policy check`, `vak policy import` and `vak secret`: a policy file validated and
//! explained, a Wassette policy translated, and the host-held secrets its http grants may bind
//! (their names and bindings shown, never their values).

use super::{policy_import, render, usage_error};
use clap::Subcommand;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use vak_host::Policy;

#[derive(Subcommand, Debug)]
pub(super) enum PolicyCommand {
    /// Validate FILE and explain it; exit 3 with the line of the first error.
    Check { file: PathBuf },
    /// Translate a Wassette policy.yaml into vak policy TOML on stdout, a [tools.NAME] table
    /// per --tool.
    ///
    /// Wassette grants a component; vak grants each tool, and each function a component exports
    /// is a tool, so name them all: each table holds the component's grants. Network hosts
    /// become http origins (a bare host as https), fs:// storage roots become workspace roots,
    /// environment keys become `environment` keys read from the host variable of the same name,
    /// and resources.limits.memory becomes caps.memory_bytes. What has no vak equivalent (wildcard hosts, CIDRs, deny lists, cpu
    /// limits, other kinds) is listed on stderr and as `# not translated:` comments at the top;
    /// the exit status is still 0. Read the result before you use it: `vak policy check` it.
    /// Exit 3 if FILE cannot be read, is not YAML or not a Wassette policy, or a --tool is not
    /// a tool name.
    Import {
        /// The Wassette policy (YAML, the format of microsoft/policy-mcp).
        file: PathBuf,
        /// A tool of the component (a-z, 0-9, '-', '_'; up to 64): repeat for each.
        // Not `tools`: that is the id of the global --tools DIR.
        #[arg(long = "tool", value_name = "NAME", required = true)]
        tool_names: Vec<String>,
    },
}

/// `vak policy check|import`.
pub(super) fn run(command: &PolicyCommand) -> ExitCode {
    match command {
        PolicyCommand::Check { file } => check(file),
        PolicyCommand::Import { file, tool_names } => import(file, tool_names),
    }
}

/// `vak policy check`.
fn check(file: &Path) -> ExitCode {
    match Policy::load(file) {
        Ok(p) => {
            say_raw!("{}", render::policy(&p));
            ExitCode::SUCCESS
        }
        Err(e) => usage_error(e),
    }
}

/// `vak policy import`: the TOML on stdout, what it does not carry on stderr.
fn import(file: &Path, tools: &[String]) -> ExitCode {
    let translated = policy_import::read_policy_file(file)
        .and_then(|yaml| policy_import::translate(&yaml, tools));
    match translated {
        Ok(t) => {
            say_raw!("{}", t.toml);
            for what in &t.untranslated {
                say_err!("vak: not translated: {}", render::neutralise_line(what));
            }
            ExitCode::SUCCESS
        }
        Err(e) => usage_error(format!("{}: {e}", file.display())),
    }
}

/// `vak secret …`.
#[derive(Debug, Subcommand)]
pub(super) enum SecretCommand {
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

/// `vak secret set|list|rm`.
pub(super) fn secret(command: &SecretCommand, policy: &Policy) -> ExitCode {
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

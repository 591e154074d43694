//! `vak serve`: the admitted tools over MCP, on stdio (one connection, one session) or on
//! streamable HTTP until Ctrl-C or SIGTERM; the refused components are named on stderr.

use super::render;
use std::process::ExitCode;
use std::sync::Arc;
use vak_host::Host;
use vak_host::approval::Approver;
use vak_host::approval::inbox::{INBOX_FILE, Inbox, InboxApprover};

/// Who answers the calls of tools marked `ask` under `vak serve`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum Approvals {
    /// The MCP client, with an elicitation form (a client without elicitation: refused).
    Client,
    /// A person at `vak audit serve --approvals`, through the state directory's inbox.
    Inbox,
}

/// The inbox approver, on `state_dir`'s inbox file.
pub(super) fn inbox_approver(
    state_dir: Option<std::path::PathBuf>,
) -> Result<Arc<dyn Approver>, String> {
    let dir = state_dir
        .ok_or("--approvals inbox needs a state directory: set --state-dir or VAK_STATE_DIR")?;
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let inbox = Inbox::open(&dir.join(INBOX_FILE)).map_err(|e| e.to_string())?;
    say_err!(
        "vak serve: calls that need approval wait in {} for an answer from `vak audit serve --approvals`",
        dir.join(INBOX_FILE).display()
    );
    Ok(Arc::new(InboxApprover::new(Arc::new(inbox))))
}

/// Serve until the client goes or a signal comes; then give the node's name back to the store,
/// so that another process may take it at once.
pub(super) async fn run(
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
        // A signal ends the session as the client's going would: the journal is closed (its
        // last entries indexed and, with `--signing checkpoints`, signed) before the exit.
        None => tokio::select! {
            served = mcp::serve_stdio(host, principal) => served,
            () = shutdown_signal() => Ok(()),
        },
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
    let code = match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            say_err!("vak serve: {}", render::neutralise_line(&e.to_string()));
            ExitCode::from(1)
        }
    };
    host.store().close().await;
    code
}

/// Ctrl-C or SIGTERM.
pub(super) async fn shutdown_signal() {
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

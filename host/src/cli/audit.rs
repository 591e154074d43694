//! `vak audit`: the journal read back. Calls listed (every chain merged, newest first), one
//! call's record shown and checked, or every chain and signature verified.

use super::{render, usage_error};
use clap::{Args, Subcommand};
use std::process::ExitCode;

/// What `vak audit` takes: a subcommand, or the filters of the list.
#[derive(Args, Debug)]
pub(super) struct AuditArgs {
    #[command(subcommand)]
    command: Option<AuditCommand>,
    /// Only this tool.
    #[arg(long)]
    tool: Option<String>,
    /// Only this status (`interrupted`: calls started whose process is gone without their
    /// record; `running`: calls started that are running now).
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(vak_host::journal::STATUSES))]
    status: Option<String>,
    /// Only calls that ended at this stage.
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(vak_host::Stage::ALL.map(vak_host::Stage::as_str)))]
    stage: Option<String>,
    /// Only calls made on behalf of this principal.
    #[arg(long = "for-principal")]
    for_principal: Option<String>,
    /// Only calls received at or after this time: RFC 3339 (2026-12-06T10:00:00Z, or with
    /// an offset) or a duration back from now (90s, 30m, 2h, 7d, 2w).
    #[arg(long, value_parser = super::args::parse_since, value_name = "TIME|DURATION")]
    since: Option<String>,
    /// At most this many.
    #[arg(long, default_value_t = 50)]
    limit: u32,
}

#[derive(Subcommand, Debug)]
enum AuditCommand {
    /// The complete record of one call, by vak's call id or the provider's (every call that has
    /// it, when several do), checked: its hash, its links in its chain, its signature. Exit
    /// status 1, with a warning, when it does not check out. For a round of a call answered over
    /// MCP input-required rounds, the rounds up to it follow on stderr.
    Show {
        call_id: String,
        /// Print, instead of the record, the record with the proof that a checkpoint of the
        /// journal signs it (`--signing checkpoints`): its entry, the checkpoint and its leaf's
        /// inclusion path, which `vak verify FILE` checks without the journal or any other
        /// call's record. A record signed by itself is printed as it is.
        #[arg(long)]
        proof: bool,
    },
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
    /// Serve the journal as read-only web pages for a reviewer: the calls (paged, filtered), one
    /// call stage by stage with its record checked, and every chain verified (with --store,
    /// every node's chain of the shared store). Loopback only unless --allow-host is given;
    /// prints the URL on stderr; runs until Ctrl-C. See docs/audit.md.
    Serve {
        /// The address to listen on (port 0 picks one; the URL is printed).
        #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0", value_parser = super::args::parse_listen_addr)]
        http: std::net::SocketAddr,
        /// A Host name the pages may be reached by besides localhost/127.0.0.1/::1 (repeatable;
        /// required to listen on a non-loopback address).
        #[arg(long = "allow-host", value_name = "HOST")]
        allow_hosts: Vec<String>,
        /// Require that this public key (hex) signed every entry, on the integrity page
        /// (repeatable).
        #[arg(long, value_name = "HEX")]
        key: Vec<String>,
        /// Also serve the approvals inbox: the calls of `vak serve --approvals inbox` that wait
        /// for a person, answered yes or no here. Prints a URL with a one-time access token
        /// (exchanged for a session cookie); answers are POSTed with a CSRF token. Local state
        /// only: refused with --store.
        #[arg(long)]
        approvals: bool,
    },
}

impl AuditArgs {
    /// Whether this is `vak audit serve` (a server: a reader going away is no reason to die).
    pub(super) fn serves(&self) -> bool {
        matches!(self.command, Some(AuditCommand::Serve { .. }))
    }
}

/// `vak audit [list filters] | show ID | verify | serve`.
pub(super) async fn run(
    store: &vak_host::Store,
    args: &AuditArgs,
    state_dir: Option<std::path::PathBuf>,
) -> ExitCode {
    match &args.command {
        None => {
            let filter = vak_host::journal::Filter {
                tool: args.tool.clone(),
                status: args.status.clone(),
                stage: args.stage.clone(),
                principal: args.for_principal.clone(),
                since: args.since.clone(),
                limit: Some(args.limit),
            };
            list(store, &filter).await
        }
        Some(AuditCommand::Show { call_id, proof }) if *proof => show_proof(store, call_id).await,
        Some(AuditCommand::Show { call_id, .. }) => show(store, call_id).await,
        Some(AuditCommand::Verify { key }) => verify(store, key).await,
        Some(AuditCommand::Serve {
            http,
            allow_hosts,
            key,
            approvals,
        }) => {
            use vak_host::approval::inbox::{INBOX_FILE, Inbox};
            let inbox = match (approvals, state_dir) {
                (false, _) => None,
                // The inbox is one machine's: its `vak serve --approvals inbox` writes it in its
                // state directory, not in the shared store.
                #[cfg(feature = "postgres")]
                (true, _) if matches!(store, vak_host::Store::Postgres(_)) => {
                    return usage_error(
                        "--approvals serves the inbox of this machine's state directory, not a shared \
                         store's: run `vak audit serve --approvals` without --store on the machine \
                         whose `vak serve --approvals inbox` waits, and the shared pages apart",
                    );
                }
                (true, None) => {
                    return usage_error("--approvals needs a state directory: set --state-dir");
                }
                (true, Some(dir)) => match Inbox::open(&dir.join(INBOX_FILE)) {
                    Ok(i) => Some(std::sync::Arc::new(i)),
                    Err(e) => return usage_error(e),
                },
            };
            let options = vak_host::audit_web::Options {
                allow_hosts: allow_hosts.clone(),
                keys: key.clone(),
                inbox,
            };
            serve(store, *http, &options).await
        }
    }
}

/// `vak audit serve`: the journal's pages (the local one's, or every node's chain of a shared
/// store) until Ctrl-C or SIGTERM.
async fn serve(
    store: &vak_host::Store,
    addr: std::net::SocketAddr,
    options: &vak_host::audit_web::Options,
) -> ExitCode {
    use vak_host::audit_web::{Bound, Source};
    let journal: std::sync::Arc<dyn Source> = match store {
        vak_host::Store::Local(vak_host::store::Local {
            journal: Some(j), ..
        }) => j.clone(),
        vak_host::Store::Local(_) => return usage_error("there is no journal to serve"),
        #[cfg(feature = "postgres")]
        vak_host::Store::Postgres(pg) => {
            std::sync::Arc::new(vak_host::audit_web::Shared::new(pg.clone()))
        }
    };
    let bound = match Bound::bind(addr, options).await {
        Ok(b) => b,
        Err(e) => return usage_error(e),
    };
    if let Some(token) = bound.access_token() {
        // Printed once, here: whoever holds it may answer approvals.
        say_err!(
            "vak: approvals inbox (open this link; it gives your browser a session): http://{}/approvals?token={token}",
            bound.local_addr()
        );
    }
    say_err!(
        "vak: serving the audit pages at http://{}/",
        bound.local_addr()
    );
    let shutdown = tokio_util::sync::CancellationToken::new();
    let on_signal = shutdown.clone();
    tokio::spawn(async move {
        super::serve::shutdown_signal().await;
        on_signal.cancel();
    });
    bound.serve(journal, options, shutdown).await;
    ExitCode::SUCCESS
}

/// The calls the filter selects, one line each.
async fn list(store: &vak_host::Store, filter: &vak_host::journal::Filter) -> ExitCode {
    match store.list(filter).await {
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
    }
}

/// One call's record with the proof that a checkpoint signs it, checked before it is printed;
/// a record signed by itself, as it is.
async fn show_proof(store: &vak_host::Store, call_id: &str) -> ExitCode {
    match store.proof(call_id).await {
        Ok(Some(proof)) => {
            if let Err(why) = proof.check(&[] as &[&str]) {
                say_err!(
                    "vak: the proof of call `{}` does not check out: {}",
                    render::neutralise_line(call_id),
                    render::neutralise_line(&why)
                );
                return ExitCode::from(1);
            }
            match serde_json::to_value(&proof) {
                Ok(v) => say!("{}", render::json(&v)),
                Err(e) => return usage_error(e),
            }
            ExitCode::SUCCESS
        }
        Ok(None) => show(store, call_id).await,
        Err(e) => usage_error(e),
    }
}

/// One call's record (or every call with that provider call id), checked.
async fn show(store: &vak_host::Store, call_id: &str) -> ExitCode {
    match store.show(call_id).await {
        Ok(found) if found.is_empty() => {
            usage_error(format!("no record of call `{call_id}` in the journal"))
        }
        Ok(found) if found.len() == 1 => {
            let shown = &found[0];
            let pretty = serde_json::from_str::<serde_json::Value>(&shown.text)
                .map(|v| render::json(&v))
                .unwrap_or_else(|_| shown.text.clone());
            say!("{pretty}");
            let verdict = shown_verdict(shown);
            rounds(store, &shown.text).await;
            verdict
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
    }
}

/// For a round of a call answered over MCP input-required rounds: the rounds up to it, each
/// from its own entry (checked), linked by their previous call, with what each asked, the
/// questions answered in it and their answers (as the receipts hold them: redacted as every
/// record is), and its approvals; on stderr, after the record.
async fn rounds(store: &vak_host::Store, text: &str) {
    use render::neutralise_line as field;
    let Ok(record) = serde_json::from_str::<serde_json::Value>(text) else {
        return;
    };
    if record["round"].is_null() {
        return;
    }
    let mut chain = vec![record];
    // Each round names the one before; a call has at most a few dozen.
    while chain.len() < 64 {
        let Some(previous) = chain[chain.len() - 1]["round"]["previous_call_id"].as_str() else {
            break;
        };
        let earlier = match store.show(previous).await {
            Ok(found) if found.len() == 1 && found[0].check.is_ok() => {
                serde_json::from_str::<serde_json::Value>(&found[0].text).ok()
            }
            _ => None,
        };
        let Some(earlier) = earlier else {
            say_err!(
                "vak: the round before, call {}, is not in the journal (or does not check out)",
                field(previous)
            );
            break;
        };
        chain.push(earlier);
    }
    chain.reverse();
    say_err!("vak: a call answered over input-required rounds; its rounds so far:");
    for line in render::round_chain(&chain) {
        say_err!("{line}");
    }
}

/// Every chain and signature checked, and each chain's head.
async fn verify(store: &vak_host::Store, key: &[String]) -> ExitCode {
    match store.verify(key).await {
        Ok(v) => {
            let chains = v.heads.len();
            let verdict = match &v.first_bad {
                None if !v.unsigned.is_empty() => {
                    let entries = v.unsigned_entries();
                    say!(
                        "journal UNSIGNED: {} entries in {chains} chain{} check out, but {entries} of them were written unsigned and no checkpoint signs them (their process ended before its indexer signed them, or they were added behind its back): linked, not verified",
                        v.entries,
                        if chains == 1 { "" } else { "s" },
                    );
                    for u in &v.unsigned {
                        say!(
                            "  unsigned: {}entries {} to {}",
                            u.chain
                                .as_deref()
                                .map(|c| format!("chain {} ", render::neutralise_line(c)))
                                .unwrap_or_default(),
                            u.from,
                            u.to
                        );
                    }
                    ExitCode::from(1)
                }
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
                #[cfg(feature = "postgres")]
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

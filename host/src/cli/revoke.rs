//! `vak revoke` and `vak revocations`: a tool, one capability of a tool, or a principal
//! revoked in the store (and, on a shared store, the wait for every live node to apply it), and
//! the revocations in force.

use super::{render, usage_error};
use clap::Subcommand;
use std::process::ExitCode;
use vak_host::Revocation;

#[derive(Subcommand, Debug)]
pub(super) enum RevokeWhat {
    /// Every call of the tool.
    Tool { tool: String },
    /// One capability of a tool (its calls run, the capability refuses).
    Capability { tool: String, capability: String },
    /// Every call on behalf of the principal.
    Principal { principal: String },
}

/// `vak revoke WHAT --reason WHY`: exit 3 when a live node of a shared store did not confirm it
/// in time.
pub(super) async fn revoke(store: &vak_host::Store, what: &RevokeWhat, reason: &str) -> ExitCode {
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
    match store
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
    }
}

/// `vak revocations`.
pub(super) fn list(store: &vak_host::Store, json: bool) -> ExitCode {
    let list = store.revocations().list();
    if json {
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
    ExitCode::SUCCESS
}

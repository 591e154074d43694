//! `vak store migrate` and `vak store status`: the shared PostgreSQL store's schema brought up to
//! date, and its nodes, chains, revocations and sessions shown.

#[cfg(feature = "postgres")]
use super::render;
use super::{Cli, args, usage_error};
use clap::Subcommand;
use std::process::ExitCode;

#[derive(Subcommand, Debug)]
pub(super) enum StoreCommand {
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

/// `vak store migrate` and `vak store status` in a vak built without PostgreSQL.
#[cfg(not(feature = "postgres"))]
mod without {
    use super::*;

    pub(in super::super) async fn migrate(cli: &Cli) -> ExitCode {
        let url = args::shared_store_url(cli).unwrap_or_default();
        usage_error(super::super::setup::SetupError::NoPostgres(url))
    }

    pub(in super::super) async fn status(store: &vak_host::Store, _json: bool) -> ExitCode {
        usage_error(format!(
            "vak store status reads a shared store; this vak was built without PostgreSQL \
             (cargo feature `postgres`) and serves from {}",
            store.describe()
        ))
    }
}
#[cfg(not(feature = "postgres"))]
pub(super) use without::{migrate, status};

/// `vak store migrate`.
#[cfg(feature = "postgres")]
pub(super) async fn migrate(cli: &Cli) -> ExitCode {
    let Some(url) = args::shared_store_url(cli) else {
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
#[cfg(feature = "postgres")]
pub(super) async fn status(store: &vak_host::Store, json: bool) -> ExitCode {
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

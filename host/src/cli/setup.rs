//! From the global options to what every command runs on: the engine settings (compiles in a
//! worker process of this binary), the host, the store (a shared PostgreSQL store or this
//! machine's state folder) and the signing key.

use super::{Cli, args, render};
use std::path::PathBuf;
use vak_host::journal::{Journal, JournalError};
use vak_host::revocation::RevocationError;
use vak_host::signing::{HostKey, KeyError};
use vak_host::{Host, HostBuilder, HostError, Policy, Revocations, StoreError};

/// Why the host or the store the options name could not be opened.
#[derive(Debug, thiserror::Error)]
pub(super) enum SetupError {
    #[error(
        "--store takes a postgres:// address, not `{}` (the local store needs no flag)",
        render::neutralise(.0)
    )]
    NotPostgres(String),
    #[error(
        "this vak was built without PostgreSQL (cargo feature `postgres`), so it cannot open `{}`",
        render::neutralise(.0)
    )]
    #[cfg_attr(feature = "postgres", expect(dead_code))]
    NoPostgres(String),
    #[error("--no-journal: a shared store always keeps the journal")]
    #[cfg_attr(not(feature = "postgres"), expect(dead_code))]
    NoJournalOnSharedStore,
    /// The policy file, read for its digest (a shared store records each node's).
    #[error("cannot read {}: {source}", .path.display())]
    #[cfg_attr(not(feature = "postgres"), expect(dead_code))]
    ReadPolicy {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error(transparent)]
    Revocations(#[from] RevocationError),
    #[error(transparent)]
    Host(#[from] HostError),
}

/// `--compile-timeout`, `--compile-memory` and `--memory-reset`, set once from the command line.
static ENGINE_OPTIONS: std::sync::OnceLock<(Option<u64>, Option<u64>, vak_host::MemoryReset)> =
    std::sync::OnceLock::new();

/// Keep `--compile-timeout`, `--compile-memory` and `--memory-reset` for every host this
/// process builds.
pub(super) fn set_engine_options(cli: &Cli) {
    let _ = ENGINE_OPTIONS.set((
        cli.compile_timeout,
        cli.compile_memory,
        cli.memory_reset.into(),
    ));
}

/// The engine settings of the `vak` command: the defaults, with every compile in a worker
/// process of this same binary (memory capped, killed at its timeout).
fn engine_settings() -> vak_host::EngineSettings {
    let worker = std::env::current_exe()
        .inspect_err(
            |e| tracing::warn!(error = %e, "cannot find this program; compiling in this process"),
        )
        .ok();
    let defaults = vak_host::EngineSettings::default();
    let (timeout, memory, memory_reset) =
        ENGINE_OPTIONS
            .get()
            .copied()
            .unwrap_or((None, None, defaults.memory_reset));
    vak_host::EngineSettings {
        compile_worker: worker,
        compile_timeout: timeout
            .map(std::time::Duration::from_secs)
            .unwrap_or(defaults.compile_timeout),
        compile_memory_bytes: memory.map_or(defaults.compile_memory_bytes, |mib| mib << 20),
        memory_reset,
        ..defaults
    }
}

/// A builder with the command's engine settings, `policy`, and the AOT cache the options name
/// (`--no-cache`: none; `--cache-dir`: that folder; else the default).
pub(super) fn builder(policy: Policy, cache_dir: Option<PathBuf>, no_cache: bool) -> HostBuilder {
    // The cache folder is one of the engine settings: set after them, or they would replace it.
    let builder = HostBuilder::new()
        .engine_settings(engine_settings())
        .policy(policy);
    if no_cache {
        builder.cache_dir(None)
    } else if let Some(dir) = cache_dir {
        builder.cache_dir(Some(dir))
    } else {
        builder
    }
}

/// The host the global options describe: their tools (else the bundled ones), `policy` (else the
/// built-in one), their cache, `store`, `key`, and `approver` for the tools marked `ask`.
pub(super) async fn build_host(
    cli: &Cli,
    policy: Option<Policy>,
    store: vak_host::Store,
    key: HostKey,
    approver: Option<std::sync::Arc<dyn vak_host::approval::Approver>>,
) -> Result<Host, SetupError> {
    let mut builder = builder(
        policy.unwrap_or_else(Policy::default_policy),
        cli.cache_dir.clone(),
        cli.no_cache,
    )
    .store(store)
    .signing_key(key)
    .signing(signing(cli));
    if let Some(approver) = approver {
        builder = builder.approver(approver);
    }
    builder = match &cli.tools {
        Some(dir) => builder.tools_dir(dir)?,
        None => builder.bundled_tools(),
    };
    Ok(builder.build().await?)
}

/// What the key signs: as `--signing` says, except that `vak call` without a journal signs each
/// record, since it prints them and nothing could prove them later (a host without a journal
/// keeps its chain in memory, for its own run only).
fn signing(cli: &Cli) -> vak_host::signing::Signing {
    match &cli.command {
        super::Command::Call(_) if cli.no_journal => vak_host::signing::Signing::Records,
        _ => cli.signing.into(),
    }
}

/// The key that signs records: `--signing-key`, else `$VAK_SIGNING_KEY_FILE`, else a fresh one;
/// its nonces made ahead with `--nonces-ahead`.
pub(super) fn signing_key(cli: &Cli) -> Result<HostKey, KeyError> {
    let key_file = cli
        .signing_key
        .clone()
        .or_else(|| std::env::var_os("VAK_SIGNING_KEY_FILE").map(PathBuf::from));
    let key = match key_file {
        Some(file) => HostKey::load(&file)?,
        None => HostKey::generate()?,
    };
    Ok(if cli.nonces_ahead {
        key.with_nonces_ahead()
    } else {
        key
    })
}

/// The journal in the state folder, if there is a state folder.
fn open_journal(
    state: Option<&PathBuf>,
    durability: vak_host::journal::Durability,
) -> Option<Result<Journal, JournalError>> {
    let dir = args::state_dir(state)?;
    Some(Journal::open(&dir.join("journal.sqlite"), durability))
}

/// The store the global options name: a shared PostgreSQL store, or this machine's state
/// folder (the journal unless --no-journal, the revocations file).
#[cfg_attr(not(feature = "postgres"), allow(unused_variables))]
pub(super) async fn open_store(
    cli: &Cli,
    serving: bool,
    public_key: &str,
) -> Result<vak_host::Store, SetupError> {
    if let Some(url) = args::shared_store_url(cli) {
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(SetupError::NotPostgres(url));
        }
        #[cfg(not(feature = "postgres"))]
        return Err(SetupError::NoPostgres(url));
        #[cfg(feature = "postgres")]
        return open_shared(cli, url, serving, public_key).await;
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

/// The shared PostgreSQL store at `url`, this process a node of it.
#[cfg(feature = "postgres")]
async fn open_shared(
    cli: &Cli,
    url: String,
    serving: bool,
    public_key: &str,
) -> Result<vak_host::Store, SetupError> {
    use vak_host::store::postgres::{PgOptions, PgStore};
    if cli.no_journal {
        return Err(SetupError::NoJournalOnSharedStore);
    }
    let mut options = PgOptions::new(args::node_name(cli));
    options.register = serving;
    options.op_timeout = std::time::Duration::from_millis(cli.store_timeout_ms);
    options.public_key = Some(public_key.to_string());
    options.policy_sha256 = Some(match &cli.policy {
        Some(path) => std::fs::read(path)
            .map(|b| vak_host::digest::sha256_hex(&b))
            .map_err(|source| SetupError::ReadPolicy {
                path: path.clone(),
                source,
            })?,
        None => "built-in".to_string(),
    });
    PgStore::connect(&url, options)
        .await
        .map(vak_host::Store::Postgres)
        .map_err(SetupError::from)
}

/// The revocations file in the state folder, else revocations kept in memory only.
fn open_revocations(state: Option<&PathBuf>) -> Result<Revocations, RevocationError> {
    match args::state_dir(state) {
        Some(dir) => Revocations::open(&dir.join("revocations.jsonl")),
        None => Ok(Revocations::in_memory()),
    }
}

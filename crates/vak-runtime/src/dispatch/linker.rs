//! Linkers per grant set: a tool's instance is linked with the locked-down WASI subset and the
//! capability interfaces its grant names, nothing else. Built once per distinct grant set and
//! shared by every tool with that set; each capability links itself (its broker's `link`).

use super::state::CallState;
use crate::bindings::vak::tool as vak;
use crate::capabilities::{Broker, Capability, HasBroker};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use wasmtime::Engine;
use wasmtime::component::{HasSelf, Linker};

/// The set of capabilities linked into an instance.
pub type GrantSet = BTreeSet<Capability>;

/// WASI interfaces a tool may import: what Rust's and other languages' standard libraries need,
/// each in a locked-down form (no preopens, no environment, no arguments, empty stdin, captured
/// stdout/stderr, a frozen wall clock). Sockets, HTTP and anything else are not linked at all.
pub const ALLOWED_WASI: [(&str, &str); 19] = [
    (
        "wasi:cli/environment",
        "sees an empty environment and no arguments",
    ),
    (
        "wasi:cli/exit",
        "may exit early; the call ends with `guest_exited`",
    ),
    ("wasi:cli/stdin", "reads an empty stdin"),
    (
        "wasi:cli/stdout",
        "writes to a bounded capture kept in the call record",
    ),
    (
        "wasi:cli/stderr",
        "writes to a bounded capture kept in the call record",
    ),
    (
        "wasi:cli/terminal-input",
        "learns that stdin is not a terminal",
    ),
    (
        "wasi:cli/terminal-output",
        "learns that stdout is not a terminal",
    ),
    (
        "wasi:cli/terminal-stdin",
        "learns that stdin is not a terminal",
    ),
    (
        "wasi:cli/terminal-stdout",
        "learns that stdout is not a terminal",
    ),
    (
        "wasi:cli/terminal-stderr",
        "learns that stderr is not a terminal",
    ),
    ("wasi:io/error", "reads error details of its own streams"),
    (
        "wasi:io/poll",
        "waits on its own streams and timers (within the call's deadline)",
    ),
    ("wasi:io/streams", "uses the streams above"),
    (
        "wasi:clocks/monotonic-clock",
        "measures elapsed time (no calendar time)",
    ),
    (
        "wasi:clocks/wall-clock",
        "reads a frozen wall clock (1970-01-01); real time needs `clock`",
    ),
    (
        "wasi:filesystem/types",
        "has no files: nothing is preopened",
    ),
    ("wasi:filesystem/preopens", "finds no preopened directories"),
    ("wasi:random/random", "draws random bytes"),
    ("wasi:random/insecure", "draws insecure random numbers"),
];

/// Also allowed: the seed of the standard library's hash maps.
pub const ALLOWED_WASI_SEED: (&str, &str) = (
    "wasi:random/insecure-seed",
    "draws the seed of its hash maps",
);

/// Linkers already built, by grant set.
#[derive(Default)]
pub struct Linkers {
    built: Mutex<BTreeMap<Vec<Capability>, Arc<Linker<CallState>>>>,
    /// For foreign components: without and with `wasi:http`.
    foreign: Mutex<[Option<Arc<Linker<CallState>>>; 2]>,
}

impl Linkers {
    /// The linker for `grants` (built on first use).
    pub fn for_grants(
        &self,
        engine: &Engine,
        grants: &GrantSet,
    ) -> wasmtime::Result<Arc<Linker<CallState>>> {
        let key: Vec<Capability> = grants.iter().copied().collect();
        let mut built = self.built.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(l) = built.get(&key) {
            return Ok(l.clone());
        }
        let linker = Arc::new(build(engine, grants)?);
        built.insert(key, linker.clone());
        Ok(linker)
    }
}

impl Linkers {
    /// The linker for a foreign component (one built for another host): the same WASI
    /// interfaces as every tool's (what they see is the call's state: see
    /// `CallState::foreign`), `wasi:config/store`, and `wasi:http` when `http` is granted.
    /// None of vak's own interfaces: a foreign component does not import them.
    pub fn for_foreign(
        &self,
        engine: &Engine,
        http: bool,
    ) -> wasmtime::Result<Arc<Linker<CallState>>> {
        let mut built = self.foreign.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(l) = &built[usize::from(http)] {
            return Ok(l.clone());
        }
        let mut linker = Linker::new(engine);
        add_locked_down_wasi(&mut linker)?;
        crate::capabilities::workspace::wasi::link(&mut linker, CallState::witnessed_fs)?;
        crate::capabilities::environment::link_config(&mut linker, CallState::config)?;
        if http {
            wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
        }
        let linker = Arc::new(linker);
        built[usize::from(http)] = Some(linker.clone());
        Ok(linker)
    }
}

/// What the WASI interfaces give a foreign component where it differs from a vak tool's
/// locked-down form (see `CallState::foreign`).
pub const FOREIGN_WASI: [(&str, &str); 4] = [
    (
        "wasi:clocks/wall-clock",
        "reads the real time, each reading witnessed, when its grant includes `clock`; else a frozen clock (1970-01-01)",
    ),
    (
        "wasi:filesystem/types",
        "uses the workspace roots its grant names (read-only or read-write), nothing else",
    ),
    (
        "wasi:filesystem/preopens",
        "finds its grant's workspace roots preopened at their host paths",
    ),
    (
        "wasi:cli/environment",
        "sees only the keys its grant's `environment` names, and no arguments",
    ),
];

/// `wasi:config/store`, as foreign components import it; only the keys a grant names exist.
pub const FOREIGN_CONFIG: (&str, &str) = (
    "wasi:config/store",
    "reads the configuration keys its grant's `environment` names (none without one)",
);

/// The `wasi:http` interfaces a foreign component may import when its grant includes `http`.
pub const FOREIGN_HTTP: [(&str, &str); 2] = [
    (
        "wasi:http/outgoing-handler",
        "sends HTTP requests through vak's http broker (the grant's origins, a receipt each)",
    ),
    (
        "wasi:http/types",
        "builds the requests and reads the responses",
    ),
];

fn build(engine: &Engine, grants: &GrantSet) -> wasmtime::Result<Linker<CallState>> {
    let mut linker = Linker::new(engine);
    add_locked_down_wasi(&mut linker)?;
    // `types` holds only types; every tool imports it through its export's signature.
    vak::types::add_to_linker::<CallState, HasSelf<Broker>>(&mut linker, CallState::broker)?;
    for broker in crate::capabilities::brokers::<CallState>() {
        if grants.contains(&broker.capability()) {
            broker.link(&mut linker)?;
        }
    }
    Ok(linker)
}

/// The allowed WASI interfaces, and only those (no sockets, no `wasi:filesystem` preopens).
fn add_locked_down_wasi(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    use wasmtime_wasi::p2::bindings::{cli, clocks, filesystem, random};
    use wasmtime_wasi::{
        WasiView as _,
        cli::{WasiCli, WasiCliView as _},
        clocks::{WasiClocks, WasiClocksView as _},
        filesystem::{WasiFilesystem, WasiFilesystemView as _},
        random::WasiRandom,
    };
    let l = linker;
    wasmtime_wasi_io::add_to_linker_async(l)?;
    clocks::wall_clock::add_to_linker::<CallState, WasiClocks>(l, CallState::clocks)?;
    clocks::monotonic_clock::add_to_linker::<CallState, WasiClocks>(l, CallState::clocks)?;
    filesystem::types::add_to_linker::<CallState, WasiFilesystem>(l, CallState::filesystem)?;
    filesystem::preopens::add_to_linker::<CallState, WasiFilesystem>(l, CallState::filesystem)?;
    random::random::add_to_linker::<CallState, WasiRandom>(l, |t| t.ctx().ctx.random())?;
    random::insecure::add_to_linker::<CallState, WasiRandom>(l, |t| t.ctx().ctx.random())?;
    random::insecure_seed::add_to_linker::<CallState, WasiRandom>(l, |t| t.ctx().ctx.random())?;
    cli::exit::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::environment::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::stdin::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::stdout::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::stderr::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::terminal_input::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::terminal_output::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::terminal_stdin::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::terminal_stdout::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::terminal_stderr::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    Ok(())
}

//! The wasmtime engine vak runs every tool on, and the epoch ticker behind wall-clock deadlines.

use super::cache::AotCache;
use super::linker::Linkers;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// How often the engine's epoch advances while a call runs; the granularity of deadlines.
pub const EPOCH_TICK: Duration = Duration::from_millis(1);

/// Linear memory a pool slot keeps resident after a call (reset in place, not unmapped): the
/// default of [`EngineSettings::keep_resident_bytes`].
pub const KEEP_RESIDENT: usize = 16 << 20;

/// How a pool slot's kept-resident memory is made fresh for the next call. Either way the next
/// call starts from the component's initial memory: no state passes from one call to another.
/// What differs is what it costs and how it scales (docs/PERFORMANCE.md, "Python and
/// JavaScript tools: the memory reset", measured side by side).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MemoryReset {
    /// Ask the kernel which pages the call wrote (`PAGEMAP_SCAN`, Linux 6.7+) and restore only
    /// those. The cheapest call for every tool measured (a Rust one: ~26 against ~45 µs raw;
    /// Wassette's `time-server-js` over MCP: ~0.4 against ~0.6 ms), but the scan write-protects
    /// the pages again, so the next call faults on each first write, and where a call writes
    /// many pages those faults keep a second core from helping (a Python tool: 0.89-0.94x).
    #[default]
    DirtyPages,
    /// Zero (or copy the initial image over) the kept-resident memory in place, without asking
    /// the kernel: time in proportion to the memory the slot keeps, no faults. For a tool whose
    /// call writes megabytes, calls/s on two cores grow 1.7-1.8x instead of not at all, while
    /// each call takes 0.1-0.7 ms longer; a small tool only pays.
    Zero,
}

/// Limits of the engine itself: every per-call limit is at most these.
#[derive(Debug, Clone)]
pub struct EngineSettings {
    /// Calls that may run at once (pool slots); one more is refused as `busy`.
    pub max_concurrent_calls: u32,
    /// The largest linear memory any call may be granted, in bytes.
    pub max_memory_bytes: u64,
    /// Native stack for wasm frames; deeper recursion traps with `stack_overflow`.
    pub max_wasm_stack: usize,
    /// Where compiled components are cached (`None`: no on-disk cache).
    pub cache_dir: Option<std::path::PathBuf>,
    /// The largest component admission will compile, in bytes; a larger one is refused as
    /// `too_large` before any parsing.
    pub max_component_bytes: usize,
    /// How long one component's compile may take, from the moment it starts (a compile waiting
    /// for its place is not timed), before admission refuses it as `compile_timeout`.
    pub compile_timeout: std::time::Duration,
    /// What a component's code may ask of the compiler; past it the component is refused before
    /// it compiles (`code_over_bound`).
    pub code_limits: super::code::CodeLimits,
    /// The program that compiles components in a process of its own (run as
    /// `PROGRAM __vak-compile-worker …`, see [`super::compile::worker_main`]): its memory is
    /// capped at `compile_memory_bytes` and it is killed at `compile_timeout`. `None` compiles
    /// in this process, on threads of the compile's own, where the timeout stops the wait but
    /// not the compile. The `vak` binary names itself.
    pub compile_worker: Option<std::path::PathBuf>,
    /// The data segment a compile worker may hold (writable memory it committed, which the
    /// allocator keeps at two to three times what is resident); past it the component is
    /// refused as `compile_memory_exceeded`.
    pub compile_memory_bytes: u64,
    /// Compiles that may run at once; one more waits for a place (untimed).
    pub max_concurrent_compiles: usize,
    /// Linear memory (and 1/16 of it in tables, at most 1 MiB) a pool slot keeps resident after
    /// a call, reset in place: the next call in the slot runs on those pages without faulting
    /// them in (`vak bench`: see docs/PERFORMANCE.md for what it buys). The price: after a
    /// burst of calls, up to this much per slot that was used stays resident. 0 returns every
    /// page to the kernel after each call.
    pub keep_resident_bytes: usize,
    /// How that kept-resident memory is reset after a call.
    pub memory_reset: MemoryReset,
}

impl Default for EngineSettings {
    fn default() -> Self {
        EngineSettings {
            max_concurrent_calls: 64,
            max_memory_bytes: 512 << 20,
            max_wasm_stack: 512 << 10,
            cache_dir: AotCache::default_dir(),
            // Python components (componentize-py) are 35-45 MB; a tool ten times that is not.
            max_component_bytes: 256 << 20,
            // A 12 MB JavaScript (StarlingMonkey) component took 36 s to compile on a loaded
            // 2-core machine here: two minutes bounds a hostile compile and admits honest ones.
            compile_timeout: std::time::Duration::from_secs(120),
            code_limits: super::code::CodeLimits::default(),
            compile_worker: None,
            // The largest honest compile measured here peaked at 0.56 GB resident (a 12 MB
            // JavaScript component; SECURITY.md, "Compile bounds").
            compile_memory_bytes: 2 << 30,
            max_concurrent_compiles: 2,
            keep_resident_bytes: KEEP_RESIDENT,
            memory_reset: MemoryReset::default(),
        }
    }
}

/// Why the runtime could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("the wasmtime engine could not be configured: {0}")]
    Engine(String),
    #[error("the AOT cache directory {path} is unusable: {reason}")]
    Cache { path: String, reason: String },
}

/// How instances get their memories, tables and stacks. vak runs [`Allocation::TunedPooling`];
/// the others exist so that `cargo bench` can show what the tuning buys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allocation {
    /// wasmtime's default: every instance maps its memory and its fiber stack afresh.
    OnDemand,
    /// Pool slots with wasmtime's default reset: nothing kept resident, no `PAGEMAP_SCAN`.
    Pooling,
    /// Pool slots that keep `keep_resident_bytes` resident and reset only dirtied pages.
    TunedPooling,
}

/// Which meters the compiled code carries. vak always needs both: fuel is the metered CPU
/// budget, epochs the wall-time deadline. The others exist for `cargo bench`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metering {
    pub fuel: bool,
    pub epoch: bool,
}

impl Metering {
    pub const BOTH: Metering = Metering {
        fuel: true,
        epoch: true,
    };
}

/// The engine configuration for `settings`: what [`Runtime::new`] runs on.
pub fn engine_config(
    settings: &EngineSettings,
    allocation: Allocation,
    metering: Metering,
) -> Config {
    let mut config = Config::new();
    config.wasm_component_model(true);
    // Deterministic CPU budget, reported per call.
    config.consume_fuel(metering.fuel);
    // Wall-clock deadlines: the ticker advances the epoch, the store traps past its deadline.
    config.epoch_interruption(metering.epoch);
    // Guests run on fibers with a stack well above the wasm limit, so deep recursion ends in
    // a clean `stack_overflow` trap and never reaches the host's guard page.
    config.max_wasm_stack(settings.max_wasm_stack);
    config.async_stack_size(settings.max_wasm_stack * 4);
    // vak's WIT is synchronous; the component-model-async machinery only costs per store.
    config.concurrency_support(false);

    let n = settings.max_concurrent_calls;
    let mut pool = PoolingAllocationConfig::new();
    // Core instances per component: a Rust tool has a handful, a Python tool built by
    // componentize-py with `--stub-wasi` has 38 (CPython, libc and one per stubbed WASI
    // interface), so 64 per component. Every total is a per-component maximum times `n`, so
    // that `n` calls of any admitted tool fit at once: a Python tool is not `busy` before a
    // Rust one. In wasmtime 48 the core-instance total is only a count (no slot is reserved
    // for it); memories, tables and stacks are the pool's slots.
    pool.total_component_instances(n)
        .total_stacks(n)
        .total_core_instances(n * 64)
        .total_memories(n * 4)
        .total_tables(n * 16)
        .max_core_instances_per_component(64)
        .max_memories_per_component(4)
        .max_tables_per_component(16)
        .max_memory_size(settings.max_memory_bytes as usize);
    match allocation {
        Allocation::OnDemand => return config,
        // wasmtime's own reset: nothing kept resident, every page zeroed or unmapped.
        Allocation::Pooling => pool.pagemap_scan(wasmtime::Enabled::No),
        // Keep what a call touched resident: the next call in the slot reuses those pages
        // without faults. With PAGEMAP_SCAN (Linux 6.7+) only the dirtied pages are reset,
        // so a large threshold costs no memset of untouched memory; without it the kept
        // memory is zeroed in place (`MemoryReset`).
        Allocation::TunedPooling => pool
            .linear_memory_keep_resident(settings.keep_resident_bytes)
            .table_keep_resident((settings.keep_resident_bytes / 16).min(1 << 20))
            .pagemap_scan(match settings.memory_reset {
                MemoryReset::Zero => wasmtime::Enabled::No,
                MemoryReset::DirtyPages => wasmtime::Enabled::Auto,
            }),
    };
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    config
}

/// The engine, the AOT cache, the linkers per grant set and the epoch ticker.
pub struct Runtime {
    pub(crate) engine: Engine,
    pub(crate) cache: Arc<AotCache>,
    pub(crate) linkers: Linkers,
    pub(crate) ticker: EpochTicker,
    pub(crate) settings: EngineSettings,
    pub(crate) instances: std::sync::atomic::AtomicU64,
    /// Places for compiles that run at once (`max_concurrent_compiles`).
    pub(crate) compiles: Arc<tokio::sync::Semaphore>,
}

impl Runtime {
    /// Configure the engine and open the cache.
    pub fn new(settings: EngineSettings) -> Result<Runtime, RuntimeError> {
        let config = engine_config(&settings, Allocation::TunedPooling, Metering::BOTH);
        let engine = Engine::new(&config).map_err(|e| RuntimeError::Engine(format!("{e:#}")))?;
        let cache = Arc::new(AotCache::open(&engine, settings.cache_dir.clone())?);
        let ticker = EpochTicker::start(engine.clone());
        let linkers = Linkers::default();
        let compiles = Arc::new(tokio::sync::Semaphore::new(
            settings.max_concurrent_compiles.max(1),
        ));
        Ok(Runtime {
            compiles,
            engine,
            cache,
            linkers,
            ticker,
            settings,
            instances: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// The wasmtime engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Stores (and so instances) created by this runtime, `describe` at admission included.
    pub fn instances_created(&self) -> u64 {
        self.instances.load(Ordering::Relaxed)
    }

    /// The AOT cache and its counters.
    pub fn cache(&self) -> &AotCache {
        &self.cache
    }
}

struct TickerShared {
    active: AtomicUsize,
    stop: AtomicBool,
}

/// Ticks the ticker goes on for after the last call ends before it parks: back-to-back calls
/// then find it running and pay no thread wake-up each.
const LINGER_TICKS: u32 = 100;

/// Advances the engine epoch every [`EPOCH_TICK`] while at least one call runs (and for
/// [`LINGER_TICKS`] after), and sleeps (parked, no wake-ups) while the host is idle.
pub(crate) struct EpochTicker {
    shared: Arc<TickerShared>,
    thread: Option<JoinHandle<()>>,
}

impl EpochTicker {
    fn start(engine: Engine) -> EpochTicker {
        let shared = Arc::new(TickerShared {
            active: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("vak-epoch".into())
            .spawn(move || {
                let mut idle = 0u32;
                while !s.stop.load(Ordering::Acquire) {
                    if s.active.load(Ordering::Acquire) == 0 {
                        idle += 1;
                        if idle > LINGER_TICKS {
                            std::thread::park();
                            idle = 0;
                            continue;
                        }
                    } else {
                        idle = 0;
                    }
                    std::thread::sleep(EPOCH_TICK);
                    engine.increment_epoch();
                }
            })
            .ok();
        EpochTicker { shared, thread }
    }

    /// Keep the epoch advancing until the guard is dropped.
    pub(crate) fn activate(&self) -> TickerGuard<'_> {
        if self.shared.active.fetch_add(1, Ordering::AcqRel) == 0
            && let Some(t) = &self.thread
        {
            t.thread().unpark();
        }
        TickerGuard { ticker: self }
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

pub(crate) struct TickerGuard<'a> {
    ticker: &'a EpochTicker,
}

impl Drop for TickerGuard<'_> {
    fn drop(&mut self) {
        self.ticker.shared.active.fetch_sub(1, Ordering::AcqRel);
    }
}

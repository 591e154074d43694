//! The state of one call's store: locked-down WASI, the resource limiter, captured stdio and the
//! capability broker. Everything here is built fresh for each call and dropped with it.

use crate::capabilities::Broker;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

/// Bytes of stdout and of stderr kept per call; the rest is counted and dropped.
pub const MAX_CAPTURE_BYTES: usize = 64 << 10;
/// Table elements any one table may grow to.
pub const MAX_TABLE_ELEMENTS: usize = 100_000;
/// Host resource handles (WASI streams, pollables, …) one call may hold at once. They live in
/// host memory, outside the guest's memory cap, so they are capped here (wasmtime's default is
/// a million). Component-model handles are capped store-wide by wasmtime itself (100,000).
pub const MAX_HOST_HANDLES: usize = 4096;

pub use crate::capabilities::invoke::FuelShare;

/// The store data of one call.
pub struct CallState {
    pub(crate) wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) limiter: CallLimiter,
    pub(crate) broker: Broker,
    pub(crate) stdout: Capture,
    pub(crate) stderr: Capture,
    /// A foreign component's granted configuration keys and values (`wasi:config/store`).
    pub(crate) config: Vec<(String, String)>,
    /// A foreign component's `wasi:http`: requests go to the call's broker.
    pub(crate) http: Option<ForeignHttp>,
    /// A foreign component's open descriptors, by handle: the paths its receipts name.
    pub(crate) paths: std::collections::HashMap<u32, String>,
}

/// A call's table of host resource handles, capped at [`MAX_HOST_HANDLES`].
fn handle_table() -> ResourceTable {
    let mut table = ResourceTable::new();
    table.set_max_capacity(MAX_HOST_HANDLES);
    table
}

/// `wasi:http` state of a foreign component's call.
pub(crate) struct ForeignHttp {
    ctx: wasmtime_wasi_http::WasiHttpCtx,
    hooks: crate::capabilities::http::wasi::BrokeredHttp,
}

impl CallState {
    /// Fresh state: no preopens, no environment, no arguments, empty stdin, captured stdout and
    /// stderr, a wall clock frozen at the Unix epoch (real time comes from the `clock` capability,
    /// with a receipt), and linear memory capped at `memory_bytes`.
    pub(crate) fn new(broker: Broker, memory_bytes: u64) -> CallState {
        let stdout = Capture::new(MAX_CAPTURE_BYTES);
        let stderr = Capture::new(MAX_CAPTURE_BYTES);
        let wasi = WasiCtx::builder()
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .wall_clock(FrozenWallClock)
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .build();
        CallState {
            wasi,
            table: handle_table(),
            limiter: CallLimiter::new(memory_bytes),
            broker,
            stdout,
            stderr,
            config: Vec::new(),
            http: None,
            paths: Default::default(),
        }
    }

    /// Fresh state for a foreign component's call (one built for another host): as [`new`], and
    /// through the standard interfaces exactly what `grant` names: its workspace roots
    /// preopened, the real wall clock (witnessed) with `clock`, its environment keys in
    /// `wasi:config/store` and `wasi:cli/environment`, and `wasi:http` through the broker with
    /// `http`. A root that cannot be opened fails the call before the guest runs.
    ///
    /// [`new`]: CallState::new
    pub(crate) fn foreign(
        broker: Broker,
        memory_bytes: u64,
        grant: &crate::capabilities::ToolGrant,
    ) -> Result<CallState, String> {
        use crate::capabilities::Capability;
        let stdout = Capture::new(MAX_CAPTURE_BYTES);
        let stderr = Capture::new(MAX_CAPTURE_BYTES);
        let mut builder = WasiCtx::builder();
        builder
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false);
        if grant.grants(Capability::Clock) {
            builder.wall_clock(crate::capabilities::clock::wasi::WitnessedWallClock::new(
                broker.share(),
            ));
        } else {
            builder.wall_clock(FrozenWallClock);
        }
        let roots = grant.roots();
        if !roots.is_empty() {
            crate::capabilities::workspace::wasi::preopen(&mut builder, roots, &broker.receipts)?;
        }
        let config =
            crate::capabilities::environment::values(&grant.environment, broker.secrets.as_deref());
        for (key, value) in &config {
            builder.env(key, value);
        }
        let http = grant.http().map(|_| ForeignHttp {
            ctx: wasmtime_wasi_http::WasiHttpCtx::new(),
            hooks: crate::capabilities::http::wasi::BrokeredHttp {
                broker: broker.share(),
            },
        });
        Ok(CallState {
            wasi: builder.build(),
            table: handle_table(),
            limiter: CallLimiter::new(memory_bytes),
            broker,
            stdout,
            stderr,
            config,
            http,
            paths: Default::default(),
        })
    }

    /// The call's `wasi:filesystem`, witnessed (a foreign component's).
    pub(crate) fn witnessed_fs(&mut self) -> crate::capabilities::workspace::wasi::WitnessedFs<'_> {
        crate::capabilities::workspace::wasi::WitnessedFs {
            fs: wasmtime_wasi::filesystem::WasiFilesystemCtxView {
                ctx: self.wasi.filesystem(),
                table: &mut self.table,
            },
            paths: &mut self.paths,
            broker: &self.broker,
        }
    }

    /// The call's `wasi:config/store`.
    pub(crate) fn config(&mut self) -> crate::capabilities::environment::ConfigStore<'_> {
        crate::capabilities::environment::ConfigStore {
            values: &self.config,
        }
    }
}

impl wasmtime_wasi_http::WasiHttpView for CallState {
    fn http(&mut self) -> wasmtime_wasi_http::WasiHttpCtxView<'_> {
        // Linked only for a foreign component granted `http`, whose state always has it; a
        // state without it (a defect) gets a context whose hooks refuse every request.
        let http = self.http.get_or_insert_with(|| ForeignHttp {
            ctx: wasmtime_wasi_http::WasiHttpCtx::new(),
            hooks: crate::capabilities::http::wasi::BrokeredHttp {
                broker: Broker::new(String::new(), None),
            },
        });
        wasmtime_wasi_http::WasiHttpCtxView {
            ctx: &mut http.ctx,
            table: &mut self.table,
            hooks: &mut http.hooks,
        }
    }
}

impl crate::capabilities::HasBroker for CallState {
    fn broker(&mut self) -> &mut Broker {
        &mut self.broker
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl wasmtime_wasi_io::IoView for CallState {
    fn table(&mut self) -> &mut ResourceTable {
        &mut self.table
    }
}

/// A wall clock that always reads the Unix epoch: calendar time is a fact the host witnesses
/// through the `clock` capability, not something a tool reads unrecorded.
struct FrozenWallClock;

impl wasmtime_wasi::HostWallClock for FrozenWallClock {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }

    fn now(&self) -> Duration {
        Duration::ZERO
    }
}

/// Caps linear memory and table growth, and remembers the peak and the first refusal.
pub struct CallLimiter {
    memory_cap: usize,
    memory_total: usize,
    pub(crate) memory_peak: usize,
    /// The total the instance asked for when growth was refused.
    pub(crate) memory_refused: Option<usize>,
    /// The element count a table asked for when growth was refused.
    pub(crate) table_refused: Option<usize>,
}

impl CallLimiter {
    fn new(memory_bytes: u64) -> CallLimiter {
        CallLimiter {
            memory_cap: usize::try_from(memory_bytes).unwrap_or(usize::MAX),
            memory_total: 0,
            memory_peak: 0,
            memory_refused: None,
            table_refused: None,
        }
    }
}

/// The trap raised when a limit refuses growth; the pipeline reads the figures from the limiter.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct LimitTrap(&'static str);

impl wasmtime::ResourceLimiter for CallLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let total = self
            .memory_total
            .saturating_sub(current)
            .saturating_add(desired);
        if total > self.memory_cap {
            self.memory_refused = Some(total);
            // Trap rather than fail the grow: the call ends at once with a typed error instead of
            // leaving the guest to abort on a failed allocation somewhere else.
            return Err(wasmtime::Error::new(LimitTrap("memory limit exceeded")));
        }
        self.memory_total = total;
        self.memory_peak = self.memory_peak.max(total);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > MAX_TABLE_ELEMENTS {
            self.table_refused = Some(desired);
            return Err(wasmtime::Error::new(LimitTrap("table limit exceeded")));
        }
        Ok(true)
    }

    // Matches the pool's core instances per component (a stubbed Python tool has 38).
    fn instances(&self) -> usize {
        64
    }

    fn tables(&self) -> usize {
        64
    }

    fn memories(&self) -> usize {
        8
    }
}

#[derive(Debug, Default)]
struct CaptureBuf {
    kept: Vec<u8>,
    dropped: u64,
}

/// A bounded stdout/stderr capture: keeps the first bytes, counts the rest. Writes never fail,
/// so a guest that floods its output is not turned into a guest that panics on a failed print.
#[derive(Debug, Clone)]
pub struct Capture {
    cap: usize,
    buf: Arc<Mutex<CaptureBuf>>,
}

impl Capture {
    fn new(cap: usize) -> Capture {
        Capture {
            cap,
            buf: Arc::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CaptureBuf> {
        self.buf.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn append(&self, bytes: &[u8]) {
        let mut b = self.lock();
        let room = self.cap.saturating_sub(b.kept.len());
        let take = room.min(bytes.len());
        b.kept.extend_from_slice(&bytes[..take]);
        b.dropped += (bytes.len() - take) as u64;
    }

    /// What was kept (lossily decoded) and how many bytes were dropped.
    pub fn take(&self) -> crate::record::Captured {
        let b = self.lock();
        crate::record::Captured {
            text: String::from_utf8_lossy(&b.kept).into_owned(),
            dropped_bytes: b.dropped,
        }
    }
}

impl IsTerminal for Capture {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for Capture {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl OutputStream for Capture {
    fn write(&mut self, bytes: bytes::Bytes) -> Result<(), StreamError> {
        self.append(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(64 << 10)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for Capture {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for Capture {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.append(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

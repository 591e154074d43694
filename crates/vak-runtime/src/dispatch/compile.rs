//! Compiling a component within bounds of its own.
//!
//! A compile is a guest's chance to make the host spend outside every per-call limit, and
//! Cranelift cannot be interrupted. So each compile that admission starts:
//!
//! 1. is measured first ([`super::code`]): a component whose functions are larger, deeper or
//!    more numerous than the host admits is refused before any code is generated;
//! 2. waits for one of [`EngineSettings::max_concurrent_compiles`] places (the wait is not
//!    counted against its time);
//! 3. runs on threads of its own, never on a pool another compile uses: in a **worker process**
//!    ([`EngineSettings::compile_worker`], the `vak` binary runs itself) whose data segment the
//!    kernel caps at [`EngineSettings::compile_memory_bytes`] and which is killed when its
//!    [`EngineSettings::compile_timeout`] ends; or, for an embedder that names no worker, on a
//!    thread and a Cranelift thread pool made for it in this process, where the timeout stops
//!    the wait but not the compile, and memory is bounded by the measurement alone.
//!
//! The time bound runs from the moment the compile starts (after its wait), so one component's
//! compile is never counted against another's.

use super::code::CodeFigures;
use super::engine::{Allocation, EngineSettings, Metering, Runtime, engine_config};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;
use wasmtime::Engine;
use wasmtime::component::Component;

/// Why a component was not compiled (the admission stage reports it as its refusal).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    #[error("not a WebAssembly component this engine can compile: {0}")]
    Compile(String),
    #[error("the component is {size} bytes; this host compiles components of at most {limit}")]
    TooLarge { size: usize, limit: usize },
    #[error("the component did not compile within {limit_ms} ms; refused")]
    CompileTimeout { limit_ms: u64 },
    #[error("the component's code is past this host's compile bounds: {0}")]
    CodeOverBound(super::code::CodeRefusal),
    #[error("compiling the component needed more than {limit_bytes} bytes of memory; refused")]
    CompileMemory { limit_bytes: u64 },
    /// The host could not run the compile (no thread, no worker process): not the component's
    /// fault, so a retry may succeed.
    #[error("the host could not compile the component: {0}")]
    CompileHost(String),
}

impl CompileError {
    /// A stable snake_case name of the condition.
    pub fn kind(&self) -> &'static str {
        match self {
            CompileError::Compile(_) => "compile_failed",
            CompileError::TooLarge { .. } => "too_large",
            CompileError::CompileTimeout { .. } => "compile_timeout",
            CompileError::CodeOverBound(_) => "code_over_bound",
            CompileError::CompileMemory { .. } => "compile_memory_exceeded",
            CompileError::CompileHost(_) => "compile_unavailable",
        }
    }

    /// Whether compiling the same bytes again could succeed: only when the host failed.
    pub fn retryable(&self) -> bool {
        matches!(self, CompileError::CompileHost(_))
    }
}

/// The first argument that makes the `vak` binary a compile worker (see [`worker_main`]).
pub const WORKER_ARG: &str = "__vak-compile-worker";

/// Stack of every thread that runs Cranelift: it recurses on deeply nested code.
const COMPILER_STACK: usize = 8 << 20;

/// Most bytes of the worker's error text kept in a refusal.
const MAX_WORKER_MESSAGE: usize = 1024;

/// What a compile ended with, before admission turns it into a verdict.
#[derive(Debug)]
pub(crate) struct Compiled {
    pub(crate) component: Component,
    /// The code's figures, when it was measured (not for a component loaded from the cache,
    /// which was measured when it was compiled).
    pub(crate) figures: Option<CodeFigures>,
}

impl Runtime {
    /// Compile `bytes` (whose SHA-256 is `digest`), or load it from the AOT cache, within the
    /// engine's size, code, memory and time bounds.
    pub(crate) async fn compile_bounded(
        &self,
        bytes: &[u8],
        digest: &str,
    ) -> Result<Compiled, CompileError> {
        let settings = &self.settings;
        if bytes.len() > settings.max_component_bytes {
            return Err(CompileError::TooLarge {
                size: bytes.len(),
                limit: settings.max_component_bytes,
            });
        }
        let bytes: Arc<[u8]> = Arc::from(bytes);
        let (engine, cache, key) = (self.engine.clone(), self.cache.clone(), digest.to_string());
        if let Some(component) = blocking(move || cache.load(&engine, &key)).await? {
            return Ok(Compiled {
                component,
                figures: None,
            });
        }
        let limits = settings.code_limits;
        let measured = bytes.clone();
        let figures = blocking(move || super::code::measure(&measured, &limits))
            .await?
            .map_err(|e| match e {
                super::code::CodeError::Malformed(m) => CompileError::Compile(m),
                super::code::CodeError::Refused(r) => CompileError::CodeOverBound(r),
            })?;

        // A place among the compiles that may run at once; waiting for it is not compiling.
        let permit = self
            .compiles
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| CompileError::CompileHost("the compile queue was closed".into()))?;
        let started = Instant::now();
        let artifact = match &settings.compile_worker {
            Some(program) => {
                let artifact = compile_in_worker(program, settings, &bytes).await;
                drop(permit);
                let artifact = artifact?;
                self.cache.count_compile();
                artifact
            }
            None => {
                let (engine, cache) = (self.engine.clone(), self.cache.clone());
                compile_on_own_threads(engine, cache, bytes, permit, settings).await?
            }
        };
        tracing::info!(
            digest,
            elapsed_ms = started.elapsed().as_millis() as u64,
            functions = figures.functions,
            max_body_bytes = figures.max_body_bytes,
            worker = settings.compile_worker.is_some(),
            "component compiled"
        );
        let component = self.cache.keep(&self.engine, digest, &artifact)?;
        Ok(Compiled {
            component,
            figures: Some(figures),
        })
    }
}

/// Run `f` on a blocking thread.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, CompileError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| CompileError::CompileHost(format!("the admission task failed: {e}")))
}

/// Compile on a thread of this process with a Cranelift pool of its own. When the timeout ends
/// first, the compile goes on (it cannot be interrupted) and keeps its place until it ends; its
/// artifact is dropped.
async fn compile_on_own_threads(
    engine: Engine,
    cache: Arc<super::cache::AotCache>,
    bytes: Arc<[u8]>,
    permit: tokio::sync::OwnedSemaphorePermit,
    settings: &EngineSettings,
) -> Result<Vec<u8>, CompileError> {
    let timeout = settings.compile_timeout;
    let abandoned = Arc::new(AtomicBool::new(false));
    let gave_up = abandoned.clone();
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("vak-compile".into())
        .stack_size(COMPILER_STACK)
        .spawn(move || {
            let artifact = precompile_isolated(&engine, &bytes);
            drop(permit);
            cache.count_compile();
            if gave_up.load(Ordering::Acquire) {
                tracing::info!("an abandoned compile ended; its artifact is dropped");
            }
            let _ = tx.send(artifact);
        })
        .map_err(|e| CompileError::CompileHost(format!("no thread to compile on: {e}")))?;
    match tokio::time::timeout(timeout, rx).await {
        Ok(Ok(Ok(artifact))) => Ok(artifact),
        Ok(Ok(Err(message))) => Err(CompileError::Compile(message)),
        Ok(Err(_)) => Err(CompileError::Compile(
            "the compiler stopped without an answer (it panicked)".into(),
        )),
        Err(_) => {
            abandoned.store(true, Ordering::Release);
            Err(CompileError::CompileTimeout {
                limit_ms: timeout.as_millis() as u64,
            })
        }
    }
}

/// `precompile_component` on a Cranelift thread pool made for this compile alone, so that it
/// never waits behind another compile's functions in a shared pool.
fn precompile_isolated(engine: &Engine, bytes: &[u8]) -> Result<Vec<u8>, String> {
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .stack_size(COMPILER_STACK)
        .thread_name(|i| format!("vak-cranelift-{i}"))
        .build()
        .map_err(|e| format!("no threads to compile on: {e}"))?;
    pool.install(|| engine.precompile_component(bytes))
        .map_err(|e| cut(&format!("{e:#}"), MAX_WORKER_MESSAGE))
}

/// `text`, cut to at most `max` bytes at a character boundary, with a mark where it was cut.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes cut)", &text[..end], text.len() - end)
}

/// The arguments that give a worker the engine configuration of `settings`.
fn worker_args(settings: &EngineSettings) -> Vec<String> {
    vec![
        WORKER_ARG.to_string(),
        format!("max-concurrent-calls={}", settings.max_concurrent_calls),
        format!("max-memory-bytes={}", settings.max_memory_bytes),
        format!("max-wasm-stack={}", settings.max_wasm_stack),
        format!("keep-resident-bytes={}", settings.keep_resident_bytes),
        format!("max-component-bytes={}", settings.max_component_bytes),
        format!("memory-limit={}", settings.compile_memory_bytes),
    ]
}

/// Compile in a worker process: the component on its stdin, the artifact on its stdout, killed
/// when the timeout ends.
async fn compile_in_worker(
    program: &Path,
    settings: &EngineSettings,
    bytes: &[u8],
) -> Result<Vec<u8>, CompileError> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut child = tokio::process::Command::new(program)
        .args(worker_args(settings))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| {
            CompileError::CompileHost(format!(
                "cannot start the compile worker {}: {e}",
                program.display()
            ))
        })?;
    let (Some(mut stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(CompileError::CompileHost(
            "the compile worker has no pipes".into(),
        ));
    };
    // The artifact cannot be larger than the memory the worker may hold.
    let most = settings.compile_memory_bytes;
    let work = async {
        let feed = async {
            // A worker that stops reading (it failed) closes the pipe: its status says why.
            let _ = stdin.write_all(bytes).await;
            drop(stdin);
        };
        let read = async {
            let mut artifact = Vec::new();
            let mut stdout = stdout.take(most.saturating_add(1));
            stdout.read_to_end(&mut artifact).await.map(|_| artifact)
        };
        // All of stderr is read (a worker never blocks on it), the first few KiB kept.
        let read_err = async {
            let (mut kept, mut chunk, mut stderr) = (Vec::new(), [0u8; 4096], stderr);
            while let Ok(n @ 1..) = stderr.read(&mut chunk).await {
                let room = (MAX_WORKER_MESSAGE * 4).saturating_sub(kept.len());
                kept.extend_from_slice(&chunk[..n.min(room)]);
            }
            kept
        };
        let ((), artifact, message) = tokio::join!(feed, read, read_err);
        let status = child.wait().await;
        (artifact, message, status)
    };
    let Ok((artifact, message, status)) =
        tokio::time::timeout(settings.compile_timeout, work).await
    else {
        // Dropping `work` dropped the child: `kill_on_drop` ends it, and tokio reaps it.
        return Err(CompileError::CompileTimeout {
            limit_ms: settings.compile_timeout.as_millis() as u64,
        });
    };
    let message = String::from_utf8_lossy(&message);
    let status =
        status.map_err(|e| CompileError::CompileHost(format!("lost the compile worker: {e}")))?;
    if message.contains("memory allocation of") || status.code() == Some(WORKER_OUT_OF_MEMORY) {
        return Err(CompileError::CompileMemory {
            limit_bytes: settings.compile_memory_bytes,
        });
    }
    if status.code() == Some(WORKER_REFUSED) {
        return Err(CompileError::Compile(cut(
            message.trim(),
            MAX_WORKER_MESSAGE,
        )));
    }
    if !status.success() {
        return Err(CompileError::CompileHost(format!(
            "the compile worker ended with {status}: {}",
            cut(message.trim(), MAX_WORKER_MESSAGE)
        )));
    }
    let artifact = artifact
        .map_err(|e| CompileError::CompileHost(format!("reading the compile worker: {e}")))?;
    if artifact.len() as u64 > most {
        return Err(CompileError::CompileMemory {
            limit_bytes: settings.compile_memory_bytes,
        });
    }
    Ok(artifact)
}

/// The worker's exit status when the component does not compile (the reason on stderr).
const WORKER_REFUSED: i32 = 2;
/// The worker's exit status when its memory limit refused an allocation it could see.
const WORKER_OUT_OF_MEMORY: i32 = 3;
/// The worker's exit status for bad arguments or input.
const WORKER_USAGE: i32 = 4;

/// The compile worker: `PROGRAM __vak-compile-worker key=value…`, the component on stdin, the
/// artifact on stdout. It caps its own data segment first (`memory-limit`), builds the engine
/// configuration of the host that started it, and compiles on a pool of its own.
///
/// A binary that embeds vak-host and sets [`EngineSettings::compile_worker`] to itself calls
/// this when its first argument is [`WORKER_ARG`], before anything else.
pub fn worker_main(args: impl Iterator<Item = String>) -> ExitCode {
    let fail = |code: i32, message: String| {
        eprintln!("{message}");
        ExitCode::from(code as u8)
    };
    let mut settings = EngineSettings {
        cache_dir: None,
        compile_worker: None,
        ..EngineSettings::default()
    };
    for arg in args {
        let Some((key, value)) = arg.split_once('=') else {
            return fail(WORKER_USAGE, format!("not key=value: {arg:?}"));
        };
        let Ok(n) = value.parse::<u64>() else {
            return fail(WORKER_USAGE, format!("{key}: not a number: {value:?}"));
        };
        let size = usize::try_from(n).unwrap_or(usize::MAX);
        match key {
            "max-concurrent-calls" => {
                settings.max_concurrent_calls = u32::try_from(n).unwrap_or(u32::MAX)
            }
            "max-memory-bytes" => settings.max_memory_bytes = n,
            "max-wasm-stack" => settings.max_wasm_stack = size,
            "keep-resident-bytes" => settings.keep_resident_bytes = size,
            "max-component-bytes" => settings.max_component_bytes = size,
            "memory-limit" => settings.compile_memory_bytes = n,
            _ => return fail(WORKER_USAGE, format!("unknown setting {key:?}")),
        }
    }
    if let Err(e) = limit_own_memory(settings.compile_memory_bytes) {
        return fail(WORKER_USAGE, format!("cannot cap the worker's memory: {e}"));
    }
    let config = engine_config(&settings, Allocation::OnDemand, Metering::BOTH);
    let engine = match Engine::new(&config) {
        Ok(e) => e,
        Err(e) => return fail(WORKER_USAGE, format!("engine: {e:#}")),
    };
    let mut bytes = Vec::new();
    let limit = settings.max_component_bytes as u64;
    use std::io::{Read, Write};
    if let Err(e) = std::io::stdin().take(limit + 1).read_to_end(&mut bytes) {
        return fail(WORKER_USAGE, format!("reading the component: {e}"));
    }
    if bytes.len() as u64 > limit {
        return fail(WORKER_USAGE, format!("the component is over {limit} bytes"));
    }
    let artifact = match precompile_isolated(&engine, &bytes) {
        Ok(a) => a,
        Err(message) if message.contains("out of memory") => {
            return fail(WORKER_OUT_OF_MEMORY, message);
        }
        Err(message) => return fail(WORKER_REFUSED, message),
    };
    drop(bytes);
    let mut out = std::io::stdout().lock();
    match out.write_all(&artifact).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(WORKER_USAGE, format!("writing the artifact: {e}")),
    }
}

/// Cap this process's data segment (heap and every private writable mapping) at `bytes`: past
/// it an allocation fails and the process aborts, which its parent reads as out of memory.
#[cfg(target_os = "linux")]
fn limit_own_memory(bytes: u64) -> std::io::Result<()> {
    use rustix::process::{Resource, Rlimit, setrlimit};
    setrlimit(
        Resource::Data,
        Rlimit {
            current: Some(bytes),
            maximum: Some(bytes),
        },
    )
    .map_err(std::io::Error::from)
}

#[cfg(not(target_os = "linux"))]
fn limit_own_memory(_bytes: u64) -> std::io::Result<()> {
    Err(std::io::Error::other(
        "the compile worker caps its memory on Linux only",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_message_is_cut_at_a_character_boundary() {
        let long = "é".repeat(1000);
        let short = cut(&long, 101);
        assert!(short.starts_with(&"é".repeat(50)));
        assert!(short.ends_with("(1900 bytes cut)"), "{short}");
        assert_eq!(cut("short", 10), "short");
    }

    #[test]
    fn worker_arguments_round_trip_the_settings_that_shape_the_engine() {
        let settings = EngineSettings {
            max_concurrent_calls: 7,
            compile_memory_bytes: 123 << 20,
            ..EngineSettings::default()
        };
        let args = worker_args(&settings);
        assert_eq!(args[0], WORKER_ARG);
        assert!(args.contains(&"max-concurrent-calls=7".to_string()));
        assert!(args.contains(&format!("memory-limit={}", 123u64 << 20)));
    }
}

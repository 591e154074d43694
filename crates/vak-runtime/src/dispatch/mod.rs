//! Brokered dispatch: a fresh sandboxed instance per call, under hard limits.
//!
//! What is built once lives here too, so that the per-call path only creates a `Store` and
//! instantiates from a pre-linked `InstancePre`:
//! - [`engine`]: the wasmtime engine (pooling allocator, fuel, epoch interruption) and its ticker;
//! - [`cache`]: the on-disk AOT cache keyed by component digest and engine fingerprint;
//! - [`code`]: what a component asks of the compiler, measured and bounded before it compiles;
//! - [`compile`]: each compile with its own threads (or process), memory and time bounds;
//! - [`linker`]: one linker per grant set (only granted capabilities are linked);
//! - [`state`]: the per-call store state: locked-down WASI, limiter, captured stdio, broker;
//! - [`run`]: one call, and the typed error for every way it can end in the sandbox.

pub mod cache;
pub mod code;
pub mod compile;
pub mod engine;
pub mod foreign;
pub mod linker;
pub mod run;
pub mod state;

pub use compile::CompileError;
pub use engine::{EngineSettings, MemoryReset, Runtime};
pub use run::{DispatchError, DispatchReport, GuestReturn};

/// What one call instantiates and runs.
pub enum Prepared {
    /// A vak tool: its world, linked for its grant; the call runs its `call` export.
    Tool(crate::bindings::SandboxedToolPre<state::CallState>),
    /// One exported function of a foreign component (built for another host).
    Foreign(foreign::ForeignFunction),
}

/// The WIT bindings, at the path the dispatcher's callers have used.
pub use crate::bindings;

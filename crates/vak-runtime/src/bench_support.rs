//! Hooks for measuring vak against raw wasmtime, for `vak bench` and the benchmarks in
//! bench/vak-bench: the raw fresh-instance call of an admitted tool (on the host's engine, or on
//! an engine of its own that differs in one setting), and the host's signing key with its pool
//! of nonces. Not an API: hidden from the docs. What is measured, and the report, live with the
//! binary and the benchmarks.

use crate::Host;
use crate::capabilities::Broker;
use crate::dispatch::state::CallState;
use crate::signing::HostKey;
use wasmtime::Store;

/// Why a raw call could not be set up or made.
#[derive(Debug, thiserror::Error)]
pub enum RawCallError {
    #[error("no tool `{0}`")]
    NoTool(String),
    /// The variant engine, or the component compiled and linked for it (with its causes).
    #[error("{0:#}")]
    Setup(wasmtime::Error),
    /// The store, the instance or the call, as wasmtime reports it.
    #[error("{0}")]
    Call(wasmtime::Error),
    /// The tool's own error message.
    #[error("{0}")]
    Tool(String),
}

/// The baseline: a fresh store and instance of the tool's pre-linked component, and a call, on
/// the same engine and with the same limits as the lifecycle, and nothing else (no proposal,
/// schema, permission, budget, evidence, outcome, projection, record, signature or journal).
pub struct RawCall<'a> {
    tool: &'a crate::AdmittedTool,
    runtime: &'a crate::dispatch::Runtime,
    limits: crate::record::Limits,
    arguments: &'a str,
}

impl<'a> RawCall<'a> {
    /// The raw call of `tool` on `host` with `arguments`, under `limits`.
    pub fn new(
        host: &'a Host,
        tool: &str,
        arguments: &'a str,
        limits: crate::record::Limits,
    ) -> Option<RawCall<'a>> {
        Some(RawCall {
            tool: host.tool(tool)?,
            runtime: host.runtime(),
            limits,
            arguments,
        })
    }

    /// One fresh instance and call.
    pub async fn once(&self) -> Result<(), RawCallError> {
        fresh_call(
            &self.runtime.engine,
            &self.tool.pre,
            &self.tool.grant,
            crate::dispatch::engine::Metering::BOTH,
            &self.limits,
            self.arguments,
        )
        .await
    }

    /// How many calls the host runs at once (`max_concurrent_calls`).
    pub fn max_concurrent_calls(&self) -> usize {
        self.runtime.settings.max_concurrent_calls as usize
    }

    /// `n` fresh instances of the tool, each made and called once, one after another, and held
    /// together (each in a store of its own under the call's limits), as `n` calls about to
    /// return hold them; `during` runs while all are held, then they are dropped. Whether the
    /// engine's pool takes `n` calls of this tool at once, and what memory they hold at the
    /// most. `Err` is wasmtime's word on what ran out first, or the tool's error.
    pub async fn hold<R>(&self, n: usize, during: impl FnOnce() -> R) -> Result<R, RawCallError> {
        let crate::dispatch::Prepared::Tool(pre) = &self.tool.pre else {
            return Err(RawCallError::Tool(
                "a foreign component's instance is made per function call".into(),
            ));
        };
        let mut held = Vec::with_capacity(n);
        for _ in 0..n {
            let mut store = call_store(
                &self.runtime.engine,
                &self.tool.pre,
                &self.tool.grant,
                crate::dispatch::engine::Metering::BOTH,
                &self.limits,
            )?;
            instantiate_and_call(pre, &mut store, self.arguments).await?;
            // The store keeps the instance and everything it made alive.
            held.push(store);
        }
        Ok(during())
    }
}

/// The raw call of a tool on an engine of its own, configured with `allocation` and `metering`
/// (otherwise as vak's, from the same [`EngineSettings`](crate::EngineSettings)): what each
/// engine setting buys, measured by `cargo bench -p vak-bench --bench lifecycle`. The component
/// is compiled again for that engine; nothing ticks its epoch, so the deadline check is paid and
/// never fires.
pub struct EngineVariantCall {
    engine: wasmtime::Engine,
    pre: crate::dispatch::Prepared,
    grant: std::sync::Arc<crate::policy::ToolGrant>,
    metering: crate::dispatch::engine::Metering,
    limits: crate::record::Limits,
    arguments: String,
}

impl EngineVariantCall {
    /// Compile `component` (the bytes of `host`'s tool `tool`) for the variant engine.
    pub fn new(
        host: &Host,
        tool: &str,
        component: &[u8],
        arguments: &str,
        limits: crate::record::Limits,
        allocation: crate::dispatch::engine::Allocation,
        metering: crate::dispatch::engine::Metering,
    ) -> Result<EngineVariantCall, RawCallError> {
        let admitted = host
            .tool(tool)
            .ok_or_else(|| RawCallError::NoTool(tool.to_string()))?;
        let config =
            crate::dispatch::engine::engine_config(&host.runtime().settings, allocation, metering);
        let engine = wasmtime::Engine::new(&config).map_err(RawCallError::Setup)?;
        let component =
            wasmtime::component::Component::new(&engine, component).map_err(RawCallError::Setup)?;
        // The capabilities admission linked, as its verdict recorded them.
        let grants: crate::dispatch::linker::GrantSet = match &admitted.examination.verdict {
            crate::admission::Verdict::Admitted { granted } => granted.iter().copied().collect(),
            crate::admission::Verdict::Refused { .. } => Default::default(),
        };
        let linker = crate::dispatch::linker::Linkers::default()
            .for_grants(&engine, &grants)
            .map_err(RawCallError::Setup)?;
        let pre = linker
            .instantiate_pre(&component)
            .map_err(RawCallError::Setup)?;
        let pre = crate::dispatch::Prepared::Tool(
            crate::dispatch::bindings::SandboxedToolPre::new(pre).map_err(RawCallError::Setup)?,
        );
        Ok(EngineVariantCall {
            engine,
            pre,
            grant: admitted.grant.clone(),
            metering,
            limits,
            arguments: arguments.to_string(),
        })
    }

    /// One fresh instance and call, as [`RawCall::once`].
    pub async fn once(&self) -> Result<(), RawCallError> {
        fresh_call(
            &self.engine,
            &self.pre,
            &self.grant,
            self.metering,
            &self.limits,
            &self.arguments,
        )
        .await
    }
}

/// A fresh store and instance of `pre` and one call: the baseline, with the meters `metering`
/// names armed as the lifecycle arms them.
/// A call's store as the lifecycle makes it: its state, memory limiter, fuel and deadline.
fn call_store(
    engine: &wasmtime::Engine,
    prepared: &crate::dispatch::Prepared,
    grant: &std::sync::Arc<crate::policy::ToolGrant>,
    metering: crate::dispatch::engine::Metering,
    limits: &crate::record::Limits,
) -> Result<Store<CallState>, RawCallError> {
    let broker = Broker::new("bench".into(), Some(grant.clone()));
    let state = match prepared {
        crate::dispatch::Prepared::Tool(_) => CallState::new(broker, limits.memory_bytes),
        crate::dispatch::Prepared::Foreign(_) => {
            CallState::foreign(broker, limits.memory_bytes, grant).map_err(RawCallError::Tool)?
        }
    };
    let mut store = Store::new(engine, state);
    store.limiter(|s| &mut s.limiter);
    if metering.fuel {
        store.set_fuel(limits.fuel).map_err(RawCallError::Call)?;
    }
    if metering.epoch {
        store.set_epoch_deadline(limits.wall_time_ms + 1);
        store.epoch_deadline_trap();
    }
    Ok(store)
}

/// A fresh instance of a vak tool in `store`, and one call of it with `arguments`.
async fn instantiate_and_call(
    pre: &crate::bindings::SandboxedToolPre<CallState>,
    store: &mut Store<CallState>,
    arguments: &str,
) -> Result<(), RawCallError> {
    let instance = pre
        .instantiate_async(&mut *store)
        .await
        .map_err(RawCallError::Call)?;
    instance
        .vak_tool_tool()
        .call_call(&mut *store, arguments)
        .await
        .map_err(RawCallError::Call)?
        .map_err(|e| RawCallError::Tool(e.message))?;
    Ok(())
}

async fn fresh_call(
    engine: &wasmtime::Engine,
    prepared: &crate::dispatch::Prepared,
    grant: &std::sync::Arc<crate::policy::ToolGrant>,
    metering: crate::dispatch::engine::Metering,
    limits: &crate::record::Limits,
    arguments: &str,
) -> Result<(), RawCallError> {
    let mut store = call_store(engine, prepared, grant, metering, limits)?;
    let pre = match prepared {
        crate::dispatch::Prepared::Tool(pre) => pre,
        crate::dispatch::Prepared::Foreign(function) => {
            let called = crate::dispatch::foreign::call(
                function,
                &mut store,
                arguments,
                limits.result_bytes,
            );
            return match called.await {
                Ok(crate::dispatch::GuestReturn::ToolError(e)) => {
                    Err(RawCallError::Tool(e.message))
                }
                Ok(_) => Ok(()),
                Err(e) => Err(RawCallError::Tool(format!("{e:?}"))),
            };
        }
    };
    instantiate_and_call(pre, &mut store, arguments).await?;
    Ok(())
}

/// The key that signs `host`'s records (with its pool of nonces, when it makes them ahead).
pub fn host_key(host: &Host) -> &HostKey {
    host.inner_key()
}

/// Whether `key`'s signatures take nonces made ahead (when it has a pool): off, each is made
/// whole on the signing thread, so that a measurement keeps one thread of work per core.
pub fn set_nonces_ahead(key: &HostKey, on: bool) {
    key.set_nonces_ahead(on);
}

/// Wait (up to a second) until `key`'s pool holds `n` nonces; without a pool, return at once.
pub fn await_nonces(key: &HostKey, n: usize) {
    key.await_nonces(n);
}

//! One call in the sandbox: fresh store, fresh instance, the admitted limits, a typed ending.

use super::bindings::vak::tool::types as wit;
use super::engine::Runtime;
use super::state::{CallState, LimitTrap};
use crate::capabilities::{Broker, Receipt};
use crate::record::{Limits, Logs, Usage};
use crate::stage::{Stage, StageError};
use serde_json::json;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use wasmtime::{Store, Trap, UpdateDeadline};

/// What the guest's `call` returned.
#[derive(Debug)]
pub enum GuestReturn {
    Described(wit::Descriptor),
    Completed(wit::ToolResult),
    ToolError(wit::ToolError),
    /// A foreign function's return whose JSON passes the result cap (converting stopped there).
    Oversized {
        limit: u64,
    },
    /// A foreign function's return that has no JSON form (admission checks the types, so this
    /// is a defect of the host).
    Unconvertible(String),
}

/// How a dispatched call can end without a return value. Each carries its figures.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DispatchError {
    #[error("the call used all of its fuel ({limit} units) and was stopped")]
    FuelExhausted { limit: u64 },
    #[error("the call passed its wall-clock deadline of {limit_ms} ms and was stopped")]
    DeadlineExceeded { limit_ms: u64 },
    #[error("the call asked for {requested} bytes of linear memory; its limit is {limit}")]
    MemoryLimitExceeded { limit: u64, requested: u64 },
    #[error("a table of the call asked for {requested} elements; the limit is {limit}")]
    TableLimitExceeded { limit: u64, requested: u64 },
    #[error("the call holds more than {limit} host resource handles (streams, pollables) at once")]
    TooManyHandles { limit: u64 },
    #[error("the call overflowed its wasm stack ({limit} bytes)")]
    StackOverflow { limit: u64 },
    #[error("the tool panicked: {message}")]
    GuestPanicked { message: String },
    #[error("the tool exited early with status {code}")]
    GuestExited { code: i32 },
    #[error("the tool trapped: {trap}")]
    GuestTrapped { trap: String },
    #[error("the tool could not be instantiated: {message}")]
    InstantiationFailed { message: String },
    #[error("the call was cancelled by its caller and stopped")]
    Cancelled,
    /// The tool asked the client something that comes back only in the next request (MCP
    /// 2026-07-28 input-required rounds): stopped, to run again from the start with the answer.
    #[error(
        "the tool asked the client for `{asked}`, answered in the next round; stopped until then"
    )]
    InputRequired { asked: String },
    #[error("the host is at its limit of {limit} concurrent calls; retry shortly")]
    Busy { limit: u32 },
    #[error("host fault during dispatch: {message}")]
    HostFault { message: String },
}

impl StageError for DispatchError {
    fn stage(&self) -> Stage {
        Stage::Dispatch
    }

    fn kind(&self) -> &'static str {
        match self {
            DispatchError::FuelExhausted { .. } => "fuel_exhausted",
            DispatchError::DeadlineExceeded { .. } => "deadline_exceeded",
            DispatchError::MemoryLimitExceeded { .. } => "memory_limit_exceeded",
            DispatchError::TableLimitExceeded { .. } => "table_limit_exceeded",
            DispatchError::TooManyHandles { .. } => "too_many_handles",
            DispatchError::StackOverflow { .. } => "stack_overflow",
            DispatchError::GuestPanicked { .. } => "guest_panicked",
            DispatchError::GuestExited { .. } => "guest_exited",
            DispatchError::GuestTrapped { .. } => "guest_trapped",
            DispatchError::InstantiationFailed { .. } => "instantiation_failed",
            DispatchError::Cancelled => "cancelled",
            DispatchError::InputRequired { .. } => "input_required",
            DispatchError::Busy { .. } => "busy",
            DispatchError::HostFault { .. } => "host_fault",
        }
    }

    /// Only the host's own condition (a full pool) can clear by itself, and a call its caller
    /// cancelled was stopped for no fault of its own; a guest that ran out of a limit or trapped
    /// does the same again.
    fn retryable(&self) -> bool {
        matches!(
            self,
            DispatchError::Busy { .. }
                | DispatchError::Cancelled
                | DispatchError::InputRequired { .. }
        )
    }

    fn details(&self) -> serde_json::Value {
        match self {
            DispatchError::FuelExhausted { limit } => json!({ "limit": limit }),
            DispatchError::DeadlineExceeded { limit_ms } => json!({ "limit_ms": limit_ms }),
            DispatchError::MemoryLimitExceeded { limit, requested }
            | DispatchError::TableLimitExceeded { limit, requested } => {
                json!({ "limit": limit, "requested": requested })
            }
            DispatchError::StackOverflow { limit } | DispatchError::TooManyHandles { limit } => {
                json!({ "limit": limit })
            }
            DispatchError::GuestExited { code } => json!({ "code": code }),
            DispatchError::Busy { limit } => json!({ "limit": limit }),
            DispatchError::InputRequired { asked } => json!({ "asked": asked }),
            _ => serde_json::Value::Null,
        }
    }
}

/// Fuel handed to running code at a time. Compiled code counts fuel in a register and writes it
/// back to the store only at calls, returns and when its slice runs out, not at an epoch check:
/// a guest stopped at its deadline in a loop without calls would otherwise leave the store's
/// figure where it was when the loop began (a spin of 300 ms read as 2,494 units, against about
/// 10^9 burnt). With slices, what a stopped call reports is short of what it burnt by less than
/// one slice: 10^6 units, a fraction of a millisecond of guest work, under 1 % of any call
/// stopped at a deadline of 100 ms or more. Each slice's end is a call into the host and a yield
/// to the executor; a trivial call never reaches one.
pub const FUEL_SLICE: u64 = 1_000_000;

/// Which export to run.
#[derive(Debug, Clone, Copy)]
pub enum Entry<'a> {
    /// `describe`, at admission.
    Describe,
    /// `call` with these arguments.
    Call(&'a str),
}

/// Everything the dispatch stage hands to the rest of the pipeline.
pub struct DispatchReport {
    pub outcome: Result<GuestReturn, DispatchError>,
    pub usage: Usage,
    pub receipts: Vec<Receipt>,
    pub logs: Logs,
}

impl Runtime {
    /// Run `entry` on a fresh instance of `pre` under `limits`, with `broker` as its capabilities.
    pub(crate) async fn dispatch(
        &self,
        pre: &super::Prepared,
        broker: Broker,
        entry: Entry<'_>,
        limits: &Limits,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> DispatchReport {
        let receipts = broker.receipts.clone();
        let fuel = broker.fuel.clone();
        self.instances
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // A foreign component sees, through the standard interfaces, what its grant names.
        let (state, unprepared) = match pre {
            super::Prepared::Foreign(_) => match broker.grant.clone() {
                Some(grant) => match CallState::foreign(broker, limits.memory_bytes, &grant) {
                    Ok(state) => (state, None),
                    Err(message) => (
                        CallState::new(Broker::new(String::new(), None), limits.memory_bytes),
                        Some(message),
                    ),
                },
                None => (CallState::new(broker, limits.memory_bytes), None),
            },
            super::Prepared::Tool(_) => (CallState::new(broker, limits.memory_bytes), None),
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limiter);
        let started = Instant::now();
        // Fuel and the epoch deadline are set before instantiation: start-up code is metered too.
        let setup = store
            .set_fuel(limits.fuel)
            .and_then(|()| store.fuel_async_yield_interval(Some(FUEL_SLICE)));
        let wall = Duration::from_millis(limits.wall_time_ms);
        // Every tick: apply fuel debits from child runs, publish what is left, stop at the deadline.
        fuel.remaining.store(limits.fuel, Ordering::SeqCst);
        let share = fuel.clone();
        let deadline = started + wall;
        let cancelled = cancel.clone();
        store.epoch_deadline_callback(move |mut ctx| {
            let mut left = ctx.get_fuel()?;
            let debit = share.debit.swap(0, Ordering::SeqCst);
            if debit > 0 {
                let taken = debit.min(left);
                left -= taken;
                ctx.set_fuel(left)?;
                share.debited.fetch_add(taken, Ordering::SeqCst);
            }
            share.remaining.store(left, Ordering::SeqCst);
            Ok(if Instant::now() >= deadline || cancelled.is_cancelled() {
                UpdateDeadline::Interrupt
            } else {
                // Yield to the executor once per tick: a guest that computes for seconds must
                // not hold a runtime worker, or the timers and cancellations of every other task
                // on it (other calls, the MCP transport) wait until its deadline. tokio's
                // `yield_now` lets the driver run first; a trivial call never reaches a tick.
                UpdateDeadline::YieldCustom(1, Box::pin(tokio::task::yield_now()))
            })
        });
        store.set_epoch_deadline(1);

        let _ticking = self.ticker.activate();
        let result = match (setup, unprepared) {
            (Err(e), _) => Err(Ending::Host(format!("{e:#}"))),
            (Ok(()), Some(message)) => Err(Ending::Host(message)),
            (Ok(()), None) => {
                // The epoch stops wasm code; the timeout also covers time spent awaiting inside a
                // host call (a guest blocked in `poll` on a timer). The future borrows the store,
                // so the store and its figures survive the timeout.
                let call = async {
                    let pre = match pre {
                        super::Prepared::Tool(pre) => pre,
                        super::Prepared::Foreign(function) => {
                            let Entry::Call(arguments) = entry else {
                                return Err(Ending::Host(
                                    "a foreign component has no `describe`".into(),
                                ));
                            };
                            return super::foreign::call(
                                function,
                                &mut store,
                                arguments,
                                limits.result_bytes,
                            )
                            .await
                            .map_err(Ending::from);
                        }
                    };
                    let instance = pre
                        .instantiate_async(&mut store)
                        .await
                        .map_err(Ending::Instantiate)?;
                    let tool = instance.vak_tool_tool();
                    match entry {
                        Entry::Describe => tool
                            .call_describe(&mut store)
                            .await
                            .map(GuestReturn::Described),
                        Entry::Call(arguments) => {
                            tool.call_call(&mut store, arguments)
                                .await
                                .map(|r| match r {
                                    Ok(result) => GuestReturn::Completed(result),
                                    Err(error) => GuestReturn::ToolError(error),
                                })
                        }
                    }
                    .map_err(Ending::Call)
                };
                // Cancellation: the epoch callback stops running wasm code; this stops a guest
                // waiting inside a host call.
                tokio::select! {
                    ended = tokio::time::timeout(wall, call) => match ended {
                        Ok(r) => r,
                        Err(_) => Err(Ending::Timeout),
                    },
                    () = cancel.cancelled() => Err(Ending::Cancelled),
                }
            }
        };
        let wall_ns = started.elapsed().as_nanos() as u64;
        let fuel_left = store.get_fuel().unwrap_or(0);
        let state = store.data();
        // The call's own consumption: what child runs used is in their own records.
        let usage = Usage {
            fuel: limits
                .fuel
                .saturating_sub(fuel_left)
                .saturating_sub(fuel.debited.load(Ordering::SeqCst)),
            wall_ns,
            memory_bytes: state.limiter.memory_peak as u64,
            result_bytes: 0,
        };
        let logs = Logs {
            lines: state.broker.log.lines.clone(),
            dropped_lines: state.broker.log.dropped,
            stdout: state.stdout.take(),
            stderr: state.stderr.take(),
        };
        let outcome = result.map_err(|ending| {
            if cancel.is_cancelled() {
                // A round ended to ask the client is not a caller's cancellation.
                if let Some(asked) = state.broker.client.as_ref().and_then(|c| c.suspended()) {
                    return DispatchError::InputRequired { asked };
                }
                // Whatever the guest was doing when it was stopped, the caller stopped it.
                return DispatchError::Cancelled;
            }
            self.classify(ending, state, limits, &logs)
        });
        drop(store);
        DispatchReport {
            outcome,
            usage,
            receipts: receipts.snapshot(),
            logs,
        }
    }

    fn classify(
        &self,
        ending: Ending,
        state: &CallState,
        limits: &Limits,
        logs: &Logs,
    ) -> DispatchError {
        // The limiter's own record is the most precise: it saw the figures.
        if let Some(requested) = state.limiter.memory_refused {
            return DispatchError::MemoryLimitExceeded {
                limit: limits.memory_bytes,
                requested: requested as u64,
            };
        }
        if let Some(requested) = state.limiter.table_refused {
            return DispatchError::TableLimitExceeded {
                limit: super::state::MAX_TABLE_ELEMENTS as u64,
                requested: requested as u64,
            };
        }
        let (error, instantiating) = match ending {
            Ending::Cancelled => return DispatchError::Cancelled,
            Ending::Timeout => {
                return DispatchError::DeadlineExceeded {
                    limit_ms: limits.wall_time_ms,
                };
            }
            Ending::Host(message) => return DispatchError::HostFault { message },
            Ending::Instantiate(e) => (e, true),
            Ending::Call(e) => (e, false),
        };
        if error
            .downcast_ref::<wasmtime::PoolConcurrencyLimitError>()
            .is_some()
        {
            return DispatchError::Busy {
                limit: self.settings.max_concurrent_calls,
            };
        }
        if error.chain().any(|e| {
            matches!(
                e.downcast_ref::<wasmtime::component::ResourceTableError>(),
                Some(wasmtime::component::ResourceTableError::Full)
            )
        }) {
            return DispatchError::TooManyHandles {
                limit: super::state::MAX_HOST_HANDLES as u64,
            };
        }
        if let Some(exit) = error.downcast_ref::<wasmtime_wasi::I32Exit>() {
            return DispatchError::GuestExited { code: exit.0 };
        }
        if error.downcast_ref::<LimitTrap>().is_some() {
            return DispatchError::HostFault {
                message: format!("{error:#}"),
            };
        }
        match error.downcast_ref::<Trap>() {
            Some(Trap::OutOfFuel) => DispatchError::FuelExhausted { limit: limits.fuel },
            Some(Trap::Interrupt) => DispatchError::DeadlineExceeded {
                limit_ms: limits.wall_time_ms,
            },
            Some(Trap::StackOverflow) => DispatchError::StackOverflow {
                limit: self.settings.max_wasm_stack as u64,
            },
            Some(trap) => match panic_message(&logs.stderr.text) {
                Some(message) if *trap == Trap::UnreachableCodeReached => {
                    DispatchError::GuestPanicked { message }
                }
                _ => DispatchError::GuestTrapped {
                    trap: trap.to_string(),
                },
            },
            None if instantiating => DispatchError::InstantiationFailed {
                message: format!("{error:#}"),
            },
            // Errors raised while lifting the guest's return (invalid UTF-8, out-of-bounds
            // pointers) are the guest's fault, not the host's.
            None => DispatchError::GuestTrapped {
                trap: format!("{error:#}"),
            },
        }
    }
}

enum Ending {
    Timeout,
    Cancelled,
    Host(String),
    Instantiate(wasmtime::Error),
    Call(wasmtime::Error),
}

impl From<super::foreign::Failed> for Ending {
    fn from(failed: super::foreign::Failed) -> Ending {
        use super::foreign::Failed;
        match failed {
            Failed::Arguments(e) => Ending::Host(format!(
                "the arguments passed the schema but did not convert to the function's types: {e}"
            )),
            Failed::Instantiate(e) => Ending::Instantiate(e),
            Failed::Call(e) => Ending::Call(e),
            Failed::Missing => Ending::Host("the exported function is not in the instance".into()),
        }
    }
}

/// The message of a Rust panic, as the guest's standard library printed it to stderr.
fn panic_message(stderr: &str) -> Option<String> {
    let at = stderr.find("panicked at ")?;
    let rest = &stderr[at..];
    // "panicked at src/lib.rs:10:5:\n<message>\n"
    let mut lines = rest.lines();
    let location = lines.next()?.trim_end_matches(':').to_string();
    let message = lines.next().unwrap_or("").trim();
    Some(if message.is_empty() {
        location
    } else {
        format!("{message} ({location})")
    })
}

#[cfg(test)]
mod tests {
    use super::panic_message;

    #[test]
    fn panic_messages_are_read_from_stderr() {
        let stderr =
            "\nthread '<unnamed>' panicked at src/lib.rs:12:9:\nboom\nnote: run with ...\n";
        assert_eq!(
            panic_message(stderr).as_deref(),
            Some("boom (panicked at src/lib.rs:12:9)")
        );
        assert_eq!(panic_message("nothing"), None);
    }
}

//! `vak:tool/invoke`: a tool calls another admitted tool as a child run, through the whole
//! lifecycle, on the same session (so the session's ledger is charged), within what is left of the
//! parent's time and fuel; the fuel the child used is then taken from the parent. The child's
//! record goes into a sink shared with the parent's record, so it survives the parent trapping.
//!
//! The broker reaches the host through the call's [`ChildRunner`]; the tools it may call are the
//! policy's (see [`grant`]).

pub mod grant;

use super::{Broker, Capability, CapabilityBroker, HasBroker};
use crate::bindings::vak::tool::invoke::{ChildRun, Host, add_to_linker};
use crate::bindings::vak::tool::types::{CapabilityError, Payload};
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;
use vak_core::ports::child::{ChildReport, ChildRequest};
use wasmtime::component::{HasSelf, Linker};

pub use vak_core::ports::child::ChildRunner;

/// Deepest nesting of child runs (a child of a child of …).
pub const MAX_DEPTH: u32 = 4;

/// The `invoke` broker.
pub struct Invoke;

impl<T: HasBroker> CapabilityBroker<T> for Invoke {
    fn link(&self, linker: &mut Linker<T>) -> wasmtime::Result<()> {
        add_to_linker::<T, HasSelf<Broker>>(linker, T::broker)
    }
}

/// The fuel of a running call, shared with its broker: the epoch callback publishes what is left
/// and applies debits (the fuel its child runs used), so a child's budget is carved out of what
/// the parent has left and charged back to it.
#[derive(Debug, Default)]
pub struct FuelShare {
    /// Fuel left at the last epoch tick.
    pub remaining: AtomicU64,
    /// Fuel to take from the call at the next tick.
    pub debit: AtomicU64,
    /// Fuel already taken that way (not the call's own consumption).
    pub debited: AtomicU64,
}

impl Broker {
    /// The child run `tool` may be, after the grant, nesting and time checks.
    fn child_request(
        &self,
        tool: String,
        arguments: String,
    ) -> Result<(&dyn ChildRunner, ChildRequest), CapabilityError> {
        let grant = self.authorize(Capability::Invoke)?;
        if !grant.may_invoke(&tool) {
            return Err(CapabilityError::Denied(format!(
                "the policy does not let this tool invoke `{tool}`"
            )));
        }
        let Some(runner) = self.child.as_deref() else {
            return Err(CapabilityError::Denied(
                "child runs are not available here".into(),
            ));
        };
        if runner.depth() >= MAX_DEPTH {
            return Err(CapabilityError::Denied(format!(
                "child runs nest at most {MAX_DEPTH} deep"
            )));
        }
        let left = runner
            .deadline()
            .saturating_duration_since(Instant::now())
            .as_millis() as u64;
        if left == 0 {
            return Err(CapabilityError::Failed(
                "no time is left for a child run".into(),
            ));
        }
        // Carved out of what the parent has left (as of its last epoch tick).
        let fuel_left = self.fuel.remaining.load(Ordering::SeqCst);
        let request = ChildRequest {
            call_id: format!("{}.child{}", self.call_id, runner.started() + 1),
            parent_call_id: self.call_id.clone(),
            tool,
            arguments,
            fuel: runner.fuel_cap().min(fuel_left),
            wall_time_ms: left,
        };
        Ok((runner, request))
    }

    /// The guest's view of `child`, with this call's receipt of it.
    fn child_run(&self, request: serde_json::Value, child: ChildReport) -> ChildRun {
        // Charged back: the parent loses what the child used, at its next epoch tick.
        self.fuel.debit.fetch_add(child.fuel_used, Ordering::SeqCst);
        let result_digest = child.result.as_ref().map(|r| r.digest.clone());
        let outcome = json!({
            "child_call_id": child.call_id,
            "status": child.status,
            "stage": child.stage.as_str(),
            "result_sha256": result_digest,
        });
        let digest = result_digest
            .unwrap_or_else(|| crate::digest::sha256_hex(outcome.to_string().as_bytes()));
        let ok = child.completed;
        let receipt = self.receipts.issue(
            Capability::Invoke,
            "call",
            request,
            outcome,
            ok,
            Some(digest),
        );
        ChildRun {
            call_id: child.call_id,
            status: child.status,
            markdown: child
                .result
                .as_ref()
                .map(|r| r.markdown.clone())
                .unwrap_or_default(),
            payload: child
                .result
                .and_then(|r| r.payload.map(|(schema, json)| Payload { schema, json })),
            error: child.error,
            receipt,
        }
    }
}

impl Host for Broker {
    async fn call(&mut self, tool: String, arguments: String) -> Result<ChildRun, CapabilityError> {
        let request = json!({ "tool": tool, "arguments_sha256": crate::digest::sha256_hex(arguments.as_bytes()) });
        if let Some(e) = self.out_of_receipts() {
            return Err(e);
        }
        let (runner, child) = match self.child_request(tool, arguments) {
            Ok(c) => c,
            Err(e) => {
                // How invoke has always written its refusals: the error as debugged.
                let outcome = json!({ e.kind(): format!("{e:?}") });
                return Err(self.refused_with(Capability::Invoke, "call", request, outcome, e));
            }
        };
        let child = runner.run(child).await;
        Ok(self.child_run(request, child))
    }
}

//! `vak:tool/invoke`: a tool calls another admitted tool as a child run, through the whole
//! lifecycle, on the same session (so the session's ledger is charged), within what is left of the
//! parent's time and fuel; the fuel the child used is then taken from the parent. The child's
//! record goes into a sink shared with the parent's record, so it survives the parent trapping.

use super::{Broker, Capability, Refusal};
use crate::dispatch::bindings::vak::tool::invoke::{ChildRun, Host};
use crate::dispatch::bindings::vak::tool::types::{CapabilityError, Payload};
use crate::record::{CallRecord, Status};
use crate::{Proposal, Session};
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Deepest nesting of child runs (a child of a child of …).
pub const MAX_DEPTH: u32 = 4;

/// What a call needs to start child runs.
#[derive(Clone)]
pub(crate) struct ChildLink {
    pub host: crate::Host,
    pub session: Session,
    pub depth: u32,
    pub deadline: Instant,
    pub fuel_cap: u64,
    pub records: Arc<Mutex<Vec<CallRecord>>>,
    /// The parent's cancellation: a child run ends with its parent.
    pub cancel: tokio_util::sync::CancellationToken,
    /// The parent's client: a child granted `client` asks the same one.
    pub client: Option<Arc<dyn super::client::ClientChannel>>,
}

/// The most a child run may have: what is left of the parent's time, the parent's fuel limit.
#[derive(Clone)]
pub(crate) struct ChildCap {
    pub parent_depth: u32,
    pub fuel: u64,
    pub wall_time_ms: u64,
    pub cancel: tokio_util::sync::CancellationToken,
    pub client: Option<Arc<dyn super::client::ClientChannel>>,
}

impl Host for Broker {
    async fn call(&mut self, tool: String, arguments: String) -> Result<ChildRun, CapabilityError> {
        let request = json!({ "tool": tool, "arguments_sha256": crate::digest::sha256_hex(arguments.as_bytes()) });
        let refuse = |this: &Broker, e: CapabilityError, why: &str| {
            this.receipts.issue(
                &this.call_id,
                Capability::Invoke,
                "call",
                request.clone(),
                json!({ why: format!("{e:?}") }),
                false,
            );
            e
        };
        if let Some(e) = self.out_of_receipts() {
            return Err(e);
        }
        let grant = match self.authorize(Capability::Invoke) {
            Ok(g) => g,
            Err(Refusal::Denied(m)) => {
                return Err(refuse(self, CapabilityError::Denied(m), "refused"));
            }
            Err(Refusal::Revoked(m)) => {
                return Err(refuse(self, CapabilityError::Revoked(m), "revoked"));
            }
        };
        if !grant.may_invoke(&tool) {
            let e = CapabilityError::Denied(format!(
                "the policy does not let this tool invoke `{tool}`"
            ));
            return Err(refuse(self, e, "refused"));
        }
        let Some(link) = self.child.clone() else {
            let e = CapabilityError::Denied("child runs are not available here".into());
            return Err(refuse(self, e, "refused"));
        };
        if link.depth >= MAX_DEPTH {
            let e = CapabilityError::Denied(format!("child runs nest at most {MAX_DEPTH} deep"));
            return Err(refuse(self, e, "refused"));
        }
        let left = link
            .deadline
            .saturating_duration_since(Instant::now())
            .as_millis() as u64;
        if left == 0 {
            let e = CapabilityError::Failed("no time is left for a child run".into());
            return Err(refuse(self, e, "failed"));
        }
        let n = link.records.lock().map(|r| r.len()).unwrap_or(0) + 1;
        let proposal = Proposal {
            call_id: format!("{}.child{n}", self.call_id),
            provider_call_id: None,
            tool,
            arguments,
            provider: "invoke".into(),
            defect: None,
            requirements: Vec::new(),
            renderer: crate::projection::RendererCaps::markdown(),
        };
        // Carved out of what the parent has left (as of its last epoch tick).
        let fuel_left = self
            .fuel
            .remaining
            .load(std::sync::atomic::Ordering::SeqCst);
        let cap = ChildCap {
            parent_depth: link.depth,
            fuel: link.fuel_cap.min(fuel_left),
            wall_time_ms: left,
            cancel: link.cancel.clone(),
            client: link.client.clone(),
        };
        let child = link
            .host
            .call_child(&link.session, proposal, self.call_id.clone(), cap)
            .await;
        // Charged back: the parent loses what the child used, at its next epoch tick.
        self.fuel
            .debit
            .fetch_add(child.usage.fuel, std::sync::atomic::Ordering::SeqCst);
        let result_digest = child.result.as_ref().map(|r| r.digest.clone());
        let outcome = json!({
            "child_call_id": child.call_id,
            "status": child.status.as_str(),
            "stage": child.stage.as_str(),
            "result_sha256": result_digest,
        });
        let ok = child.status == Status::Completed;
        let digest = result_digest
            .unwrap_or_else(|| crate::digest::sha256_hex(outcome.to_string().as_bytes()));
        let receipt = self
            .receipts
            .issue_with_digest(
                &self.call_id,
                Capability::Invoke,
                "call",
                request,
                outcome,
                ok,
                digest,
            )
            .unwrap_or_default();
        let run = ChildRun {
            call_id: child.call_id.clone(),
            status: child.status.as_str().to_string(),
            markdown: child
                .result
                .as_ref()
                .map(|r| r.markdown.clone())
                .unwrap_or_default(),
            payload: child.result.as_ref().and_then(|r| {
                Some(Payload {
                    schema: r.payload_schema.clone()?,
                    json: r.payload_json.clone()?,
                })
            }),
            error: child.error.as_ref().map(|e| e.message.clone()),
            receipt,
        };
        if let Ok(mut records) = link.records.lock() {
            records.push(child);
        }
        Ok(run)
    }
}

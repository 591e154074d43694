//! The host's side of child runs: how a call's `invoke` broker reaches the lifecycle again
//! (through the port `vak_core::ports::child::ChildRunner`), so the brokers never name the host.

use crate::capabilities::client::ClientChannel;
use crate::record::{CallRecord, Status};
use crate::{Host, Proposal, Session};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use vak_core::ports::child::{ChildReport, ChildRequest, ChildResult, ChildRunner};

/// What a call needs to start child runs.
#[derive(Clone)]
pub(crate) struct ChildLink {
    pub host: Host,
    pub session: Session,
    pub depth: u32,
    pub deadline: Instant,
    pub fuel_cap: u64,
    pub records: Arc<Mutex<Vec<CallRecord>>>,
    /// The parent's cancellation: a child run ends with its parent.
    pub cancel: tokio_util::sync::CancellationToken,
    /// The parent's client: a child granted `client` asks the same one.
    pub client: Option<Arc<dyn ClientChannel>>,
}

/// The most a child run may have: what is left of the parent's time, the parent's fuel limit.
#[derive(Clone)]
pub(crate) struct ChildCap {
    pub parent_depth: u32,
    pub fuel: u64,
    pub wall_time_ms: u64,
    pub cancel: tokio_util::sync::CancellationToken,
    pub client: Option<Arc<dyn ClientChannel>>,
}

impl ChildRunner for ChildLink {
    fn depth(&self) -> u32 {
        self.depth
    }

    fn deadline(&self) -> Instant {
        self.deadline
    }

    fn fuel_cap(&self) -> u64 {
        self.fuel_cap
    }

    fn started(&self) -> usize {
        self.records.lock().map(|r| r.len()).unwrap_or(0)
    }

    fn run(
        &self,
        request: ChildRequest,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ChildReport> + Send + '_>> {
        Box::pin(async move {
            let proposal = Proposal {
                call_id: request.call_id,
                provider_call_id: None,
                tool: request.tool,
                arguments: request.arguments,
                provider: "invoke".into(),
                defect: None,
                requirements: Vec::new(),
                renderer: crate::projection::RendererCaps::markdown(),
                round: None,
            };
            let cap = ChildCap {
                parent_depth: self.depth,
                fuel: request.fuel,
                wall_time_ms: request.wall_time_ms,
                cancel: self.cancel.clone(),
                client: self.client.clone(),
            };
            let child = self
                .host
                .call_child(&self.session, proposal, request.parent_call_id, cap)
                .await;
            let report = ChildReport {
                call_id: child.call_id.clone(),
                status: child.status.as_str().to_string(),
                completed: child.status == Status::Completed,
                stage: child.stage,
                fuel_used: child.usage.fuel,
                result: child.result.as_ref().map(|r| ChildResult {
                    digest: r.digest.clone(),
                    markdown: r.markdown.clone(),
                    payload: r.payload_schema.clone().zip(r.payload_json.clone()),
                }),
                error: child.error.as_ref().map(|e| e.message.clone()),
            };
            if let Ok(mut records) = self.records.lock() {
                records.push(child);
            }
            report
        })
    }
}

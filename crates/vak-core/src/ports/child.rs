//! Child runs, as the `invoke` broker asks the host for them: the broker checks the grant, the
//! nesting and what is left of the caller's time and fuel; the host runs the child through the
//! whole lifecycle on the caller's session and keeps the child's record with the caller's.

use crate::stage::Stage;
use std::future::Future;
use std::pin::Pin;
use std::time::Instant;

/// One child run to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildRequest {
    /// The child's call id (`<parent>.child<n>`).
    pub call_id: String,
    pub parent_call_id: String,
    pub tool: String,
    /// The arguments, a JSON object as text.
    pub arguments: String,
    /// The most fuel the child may use.
    pub fuel: u64,
    /// The most time the child may take.
    pub wall_time_ms: u64,
}

/// What the caller learns of a child run; the full record stays with the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildReport {
    pub call_id: String,
    /// The record's status (`completed`, `tool_error`, `refused`, `failed`).
    pub status: String,
    /// Whether the child completed.
    pub completed: bool,
    /// The stage the child ended at.
    pub stage: Stage,
    /// Fuel the child used, charged back to the caller.
    pub fuel_used: u64,
    /// The child's result, when it has one.
    pub result: Option<ChildResult>,
    /// The child's error message, when it did not complete.
    pub error: Option<String>,
}

/// A child's result as handed back to its caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildResult {
    /// The SHA-256 of the result, the digest of the caller's receipt.
    pub digest: String,
    pub markdown: String,
    /// `(schema, json)` of the payload, when there is one.
    pub payload: Option<(String, String)>,
}

/// How a running call starts child runs. Given to the call's brokers by the host.
pub trait ChildRunner: Send + Sync {
    /// How deep the calling run is nested (0 for a call a provider proposed).
    fn depth(&self) -> u32;
    /// When the calling run must have ended.
    fn deadline(&self) -> Instant;
    /// The calling run's fuel limit: no child gets more.
    fn fuel_cap(&self) -> u64;
    /// Child runs this call has started so far.
    fn started(&self) -> usize;
    /// Run a child through the whole lifecycle; its record is kept with the caller's.
    fn run(&self, request: ChildRequest) -> Pin<Box<dyn Future<Output = ChildReport> + Send + '_>>;
}

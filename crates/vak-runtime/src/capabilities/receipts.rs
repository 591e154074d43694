//! Receipts: where one call's receipts go, and the one way a broker issues them, so that a
//! refusal, a revocation, an invalid request and a failure read the same in every capability.

use super::{Broker, Capability, Receipt};
use crate::bindings::vak::tool::types::CapabilityError;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

/// Receipts one call may collect; past this, brokered requests are refused (and still counted),
/// so a guest looping over a capability cannot grow the host's memory without bound.
pub const MAX_RECEIPTS_PER_CALL: usize = 4096;

/// Where one call's receipts go. Cloned into the store; read by the pipeline after the call,
/// whatever happened to the instance.
#[derive(Debug, Clone, Default)]
pub struct ReceiptSink {
    call_id: Arc<str>,
    inner: Arc<Mutex<Vec<Receipt>>>,
}

impl ReceiptSink {
    /// The sink of call `call_id`'s receipts.
    pub fn new(call_id: &str) -> ReceiptSink {
        ReceiptSink {
            call_id: call_id.into(),
            inner: Arc::default(),
        }
    }

    /// Record an effect carried out (`ok`) or not, and return its receipt id. Its digest is
    /// that of the observed content when given (a file's or a body's SHA-256), else that of
    /// `outcome`. The id is empty once the call holds [`MAX_RECEIPTS_PER_CALL`] receipts, which
    /// every request checks (with `Broker::out_of_receipts`) before acting.
    pub fn issue(
        &self,
        capability: Capability,
        operation: &str,
        request: Value,
        outcome: Value,
        ok: bool,
        digest: Option<String>,
    ) -> String {
        let digest =
            digest.unwrap_or_else(|| crate::digest::sha256_hex(outcome.to_string().as_bytes()));
        let mut receipts = self.lock();
        if receipts.len() >= MAX_RECEIPTS_PER_CALL {
            return String::new();
        }
        let id = format!("{}/{}", self.call_id, receipts.len() + 1);
        receipts.push(Receipt {
            id: id.clone(),
            call_id: self.call_id.to_string(),
            capability,
            operation: operation.to_string(),
            request,
            outcome,
            ok,
            digest,
            at: jiff::Timestamp::now().to_string(),
        });
        id
    }

    /// Whether the call has used up its receipts: a capability must refuse before acting.
    pub fn full(&self) -> bool {
        self.lock().len() >= MAX_RECEIPTS_PER_CALL
    }

    /// All receipts issued so far.
    pub fn snapshot(&self) -> Vec<Receipt> {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Receipt>> {
        // A panic while holding this lock cannot leave the Vec half-written; keep serving.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl CapabilityError {
    /// How the request ended, as a refused receipt's outcome names it.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            CapabilityError::Denied(_) => "refused",
            CapabilityError::Revoked(_) => "revoked",
            CapabilityError::Invalid(_) => "invalid",
            CapabilityError::Failed(_) => "failed",
        }
    }

    /// The message the guest is given.
    pub(crate) fn message(&self) -> &str {
        match self {
            CapabilityError::Denied(m)
            | CapabilityError::Revoked(m)
            | CapabilityError::Invalid(m)
            | CapabilityError::Failed(m) => m,
        }
    }

    /// The same error with its message passed through `f`.
    pub(crate) fn map_message(self, f: impl FnOnce(String) -> String) -> CapabilityError {
        match self {
            CapabilityError::Denied(m) => CapabilityError::Denied(f(m)),
            CapabilityError::Revoked(m) => CapabilityError::Revoked(f(m)),
            CapabilityError::Invalid(m) => CapabilityError::Invalid(f(m)),
            CapabilityError::Failed(m) => CapabilityError::Failed(f(m)),
        }
    }

    /// A refused receipt's outcome: `{ "<kind>": "<message>" }`.
    pub(crate) fn outcome(&self) -> Value {
        json!({ self.kind(): self.message() })
    }
}

impl Broker {
    /// Record a request that was not carried out, with `outcome` saying why, and return `error`.
    pub(crate) fn refused_with(
        &self,
        capability: Capability,
        operation: &str,
        request: Value,
        outcome: Value,
        error: CapabilityError,
    ) -> CapabilityError {
        self.receipts
            .issue(capability, operation, request, outcome, false, None);
        error
    }

    /// Record a request that was not carried out (see [`CapabilityError::outcome`]).
    pub(crate) fn refused(
        &self,
        capability: Capability,
        operation: &str,
        request: Value,
        error: CapabilityError,
    ) -> CapabilityError {
        let outcome = error.outcome();
        self.refused_with(capability, operation, request, outcome, error)
    }

    /// The refusal every capability gives once the call holds [`MAX_RECEIPTS_PER_CALL`] receipts:
    /// an effect that could not be recorded is not carried out.
    pub(crate) fn out_of_receipts(&self) -> Option<CapabilityError> {
        self.receipts.full().then(|| {
            CapabilityError::Failed(format!(
                "this call reached its limit of {MAX_RECEIPTS_PER_CALL} brokered effects"
            ))
        })
    }
}

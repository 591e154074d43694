//! Brokered capabilities: vak's own narrow WIT interfaces, one file each.
//!
//! A capability is linked into a tool's instance only when the policy grants it (see
//! [`crate::dispatch::linker`]). Every effect a capability carries out leaves a [`Receipt`] in the
//! call's [`ReceiptSink`]; the sink is shared with the call record so that receipts survive a
//! trap, a timeout or a tool error later in the same call.

pub mod client;
pub mod clock;
pub mod coding;
pub mod http;
pub mod invoke;
pub mod log;
pub mod workspace;

pub use vak_core::types::{Capability, Receipt};

use crate::policy::ToolGrant;
use crate::revocation::Revocations;
use std::sync::{Arc, Mutex};

/// Receipts one call may collect; past this, brokered requests are refused (and still counted),
/// so a guest looping over a capability cannot grow the host's memory without bound.
pub const MAX_RECEIPTS_PER_CALL: usize = 4096;

/// Where one call's receipts go. Cloned into the store; read by the pipeline after the call,
/// whatever happened to the instance.
#[derive(Debug, Clone, Default)]
pub struct ReceiptSink {
    inner: Arc<Mutex<Vec<Receipt>>>,
}

impl ReceiptSink {
    /// Record an effect and return its receipt id; `None` once the call holds
    /// [`MAX_RECEIPTS_PER_CALL`] receipts (the effect must then not be carried out).
    pub fn issue(
        &self,
        call_id: &str,
        capability: Capability,
        operation: &str,
        request: serde_json::Value,
        outcome: serde_json::Value,
        ok: bool,
    ) -> Option<String> {
        let digest = crate::digest::sha256_hex(outcome.to_string().as_bytes());
        self.issue_with_digest(call_id, capability, operation, request, outcome, ok, digest)
    }

    /// Like [`ReceiptSink::issue`], with the digest of the observed content given (a file's or a
    /// body's SHA-256) instead of the digest of `outcome`.
    #[allow(clippy::too_many_arguments)]
    pub fn issue_with_digest(
        &self,
        call_id: &str,
        capability: Capability,
        operation: &str,
        request: serde_json::Value,
        outcome: serde_json::Value,
        ok: bool,
        digest: String,
    ) -> Option<String> {
        let mut receipts = self.lock();
        if receipts.len() >= MAX_RECEIPTS_PER_CALL {
            return None;
        }
        let id = format!("{call_id}/{}", receipts.len() + 1);
        receipts.push(Receipt {
            id: id.clone(),
            call_id: call_id.to_string(),
            capability,
            operation: operation.to_string(),
            request,
            outcome,
            ok,
            digest,
            at: jiff::Timestamp::now().to_string(),
        });
        Some(id)
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

/// The per-call state every capability reads: who is calling, what was granted, where receipts go.
///
/// Built fresh for every call (the `prepare` phase); the grant itself was compiled at admission.
pub struct Broker {
    pub(crate) call_id: String,
    /// `None` while the host reads a tool's descriptor at admission: every request is denied.
    pub(crate) grant: Option<Arc<ToolGrant>>,
    /// On whose behalf the call runs.
    pub(crate) principal: Option<String>,
    /// Checked on every request, so a revocation reaches calls already running.
    pub(crate) revocations: Option<Arc<Revocations>>,
    pub(crate) receipts: ReceiptSink,
    /// The bodies fetched and read, kept for the evidence check.
    pub(crate) bodies: crate::evidence::bodies::BodyStore,
    pub(crate) log: log::LogBuffer,
    /// Set for calls (not for `describe`): how a child run reaches the host.
    pub(crate) child: Option<invoke::ChildLink>,
    /// The call's fuel as the epoch callback sees it.
    pub(crate) fuel: Arc<crate::dispatch::state::FuelShare>,
    /// The caller's client, when the call came over a connection that can answer.
    pub(crate) client: Option<Arc<dyn client::ClientChannel>>,
    /// Where credential values come from (`None`: no secret is available to this call).
    pub(crate) secrets: Option<Arc<dyn crate::secrets::SecretSource>>,
    /// The call's approvals, for scopes the policy marks `ask` (`None` at admission).
    pub(crate) approvals: Option<Arc<crate::approval::CallApprovals>>,
    /// Every secret value this call could use, in its common encodings: what the guest sends
    /// out through the host to its client (log lines, sampling, forms) and what it is given
    /// back from a fetch is redacted with it.
    pub(crate) scrub: Arc<crate::secrets::Scrubber>,
}

/// Why the broker refused a request before carrying it out.
pub(crate) enum Refusal {
    Denied(String),
    Revoked(String),
}

impl Broker {
    /// A broker for one call under `grant`.
    pub(crate) fn new(call_id: String, grant: Option<Arc<ToolGrant>>) -> Self {
        Broker {
            call_id,
            grant,
            principal: None,
            revocations: None,
            receipts: ReceiptSink::default(),
            bodies: Default::default(),
            log: log::LogBuffer::default(),
            child: None,
            fuel: Arc::default(),
            client: None,
            secrets: None,
            approvals: None,
            scrub: Arc::new(crate::secrets::Scrubber::none()),
        }
    }

    /// The same broker, keeping the bodies it fetches and reads in `bodies` (for the evidence
    /// check after the call).
    pub(crate) fn retaining(mut self, bodies: crate::evidence::bodies::BodyStore) -> Self {
        self.bodies = bodies;
        self
    }

    /// The same broker, asking `approvals` before the first use of a scope marked `ask`.
    pub(crate) fn approving(mut self, approvals: Arc<crate::approval::CallApprovals>) -> Self {
        self.approvals = Some(approvals);
        self
    }

    /// Wait for a person's approval of `scope` (once per call). A refusal also ends the call
    /// at `permission`; the guest gets `denied` and is stopped.
    pub(crate) async fn approved(
        &self,
        scope: crate::approval::ApprovalScope,
    ) -> Result<(), crate::dispatch::bindings::vak::tool::types::CapabilityError> {
        use crate::dispatch::bindings::vak::tool::types::CapabilityError;
        let Some(approvals) = &self.approvals else {
            return Err(CapabilityError::Denied(format!(
                "{scope} needs a person's approval, which cannot be asked here"
            )));
        };
        approvals
            .require(scope, self.client_wait())
            .await
            .map_err(|e| CapabilityError::Denied(e.to_string()))
    }

    /// The same broker, resolving credentials from `secrets` and redacting with `scrub`.
    pub(crate) fn keyed(
        mut self,
        secrets: Option<Arc<dyn crate::secrets::SecretSource>>,
        scrub: Arc<crate::secrets::Scrubber>,
    ) -> Self {
        self.secrets = secrets;
        self.scrub = scrub;
        self
    }

    /// The value of `credential`'s secret, or why there is none (a host fault: the policy
    /// binds a secret this host does not hold).
    pub(crate) fn secret_value(
        &self,
        credential: &crate::policy::Credential,
    ) -> Result<
        crate::secrets::SecretValue,
        crate::dispatch::bindings::vak::tool::types::CapabilityError,
    > {
        crate::secrets::resolve(self.secrets.as_deref(), credential)
            .map_err(crate::dispatch::bindings::vak::tool::types::CapabilityError::Failed)
    }

    /// The same broker, forwarding logs to and asking `client` (when there is one).
    pub(crate) fn attended(mut self, client: Option<Arc<dyn client::ClientChannel>>) -> Self {
        self.client = client;
        self
    }

    /// The same broker, able to start child runs through `link`.
    pub(crate) fn linked(mut self, link: invoke::ChildLink) -> Self {
        self.child = Some(link);
        self
    }

    /// The same broker, checking `revocations` for `principal` on every request.
    pub(crate) fn watching(
        mut self,
        revocations: Arc<Revocations>,
        principal: Option<String>,
    ) -> Self {
        self.revocations = Some(revocations);
        self.principal = principal;
        self
    }

    /// The refusal every capability gives once the call holds [`MAX_RECEIPTS_PER_CALL`] receipts:
    /// an effect that could not be recorded is not carried out.
    pub(crate) fn out_of_receipts(
        &self,
    ) -> Option<crate::dispatch::bindings::vak::tool::types::CapabilityError> {
        self.receipts.full().then(|| {
            crate::dispatch::bindings::vak::tool::types::CapabilityError::Failed(format!(
                "this call reached its limit of {MAX_RECEIPTS_PER_CALL} brokered effects"
            ))
        })
    }

    /// The grant of `capability` for this call, or why it is not available now.
    fn authorize(&self, capability: Capability) -> Result<&ToolGrant, Refusal> {
        let grant = self.grant.as_deref().ok_or_else(|| {
            Refusal::Denied(format!(
                "`{}` is not available while the host reads the tool's descriptor",
                capability.name()
            ))
        })?;
        if !grant.grants(capability) {
            return Err(Refusal::Denied(format!(
                "the policy does not grant `{}` to this tool",
                capability.name()
            )));
        }
        match self
            .revocations
            .as_ref()
            .and_then(|r| r.blocking_use(&grant.tool, self.principal.as_deref(), capability))
        {
            None => Ok(grant),
            Some(crate::revocation::Blocked::Revoked(entry)) => Err(Refusal::Revoked(format!(
                "{} was revoked at {} ({})",
                entry.revocation, entry.at, entry.reason
            ))),
            Some(crate::revocation::Blocked::Unconfirmed(why)) => Err(Refusal::Revoked(format!(
                "this host cannot confirm that `{}` is not revoked now: {why}",
                capability.name()
            ))),
        }
    }
}

/// `vak:tool/types` holds only types; its host side has nothing to implement.
impl crate::dispatch::bindings::vak::tool::types::Host for Broker {}

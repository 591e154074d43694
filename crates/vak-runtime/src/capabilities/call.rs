//! The per-call side of the brokers: one [`Broker`] per call holds who is calling, what was
//! granted, where receipts go, and each capability's per-call state; every capability's `Host`
//! impl runs on it. Built fresh for every call; the grant itself was compiled at admission.

use super::Capability;
use super::ToolGrant;
use super::client::ClientChannel;
use super::invoke::FuelShare;
use super::receipts::ReceiptSink;
use crate::bindings::vak::tool::types::CapabilityError;
use crate::revocation::Revocations;
use std::sync::Arc;
use vak_core::ports::child::ChildRunner;

/// The state of one call every capability reads.
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
    /// `log`: the call's bounded log.
    pub(crate) log: super::log::LogBuffer,
    /// `invoke`: set for calls (not for `describe`): how a child run reaches the host.
    pub(crate) child: Option<Arc<dyn ChildRunner>>,
    /// `invoke`: the call's fuel as the epoch callback sees it.
    pub(crate) fuel: Arc<FuelShare>,
    /// `client` and `log`: the caller's client, when the call came over a connection that can
    /// answer.
    pub(crate) client: Option<Arc<dyn ClientChannel>>,
    /// `http`: where credential values come from (`None`: no secret is available to this call).
    pub(crate) secrets: Option<Arc<dyn crate::secrets::SecretSource>>,
    /// The call's approvals, for scopes the policy marks `ask` (`None` at admission).
    pub(crate) approvals: Option<Arc<crate::approval::CallApprovals>>,
    /// Every secret value this call could use, in its common encodings: what the guest sends
    /// out through the host to its client (log lines, sampling, forms) and what it is given
    /// back from a fetch is redacted with it.
    pub(crate) scrub: Arc<crate::secrets::Scrubber>,
}

impl Broker {
    /// A broker for one call under `grant`.
    pub(crate) fn new(call_id: String, grant: Option<Arc<ToolGrant>>) -> Self {
        Broker {
            receipts: ReceiptSink::new(&call_id),
            call_id,
            grant,
            principal: None,
            revocations: None,
            bodies: Default::default(),
            log: Default::default(),
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
    ) -> Result<(), CapabilityError> {
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
        credential: &super::http::grant::Credential,
    ) -> Result<crate::secrets::SecretValue, CapabilityError> {
        super::http::credentials::resolve(self.secrets.as_deref(), credential)
            .map_err(CapabilityError::Failed)
    }

    /// The same broker, forwarding logs to and asking `client` (when there is one).
    pub(crate) fn attended(mut self, client: Option<Arc<dyn ClientChannel>>) -> Self {
        self.client = client;
        self
    }

    /// The same broker, able to start child runs through `runner`.
    pub(crate) fn linked(mut self, runner: impl ChildRunner + 'static) -> Self {
        self.child = Some(Arc::new(runner));
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

    /// A broker for the same call, sharing its grant, receipts, retained bodies, revocations,
    /// approvals, secrets and scrubber: for a request served off the guest's store (a foreign
    /// component's `wasi:http` request runs on a task of its own). It has a log of its own.
    pub(crate) fn share(&self) -> Broker {
        Broker {
            call_id: self.call_id.clone(),
            grant: self.grant.clone(),
            principal: self.principal.clone(),
            revocations: self.revocations.clone(),
            receipts: self.receipts.clone(),
            bodies: self.bodies.clone(),
            log: Default::default(),
            child: self.child.clone(),
            fuel: self.fuel.clone(),
            client: self.client.clone(),
            secrets: self.secrets.clone(),
            approvals: self.approvals.clone(),
            scrub: self.scrub.clone(),
        }
    }

    /// The grant of `capability` for this call, or why it is not available now (`Denied` or
    /// `Revoked`).
    pub(crate) fn authorize(&self, capability: Capability) -> Result<&ToolGrant, CapabilityError> {
        let grant = self.grant.as_deref().ok_or_else(|| {
            CapabilityError::Denied(format!(
                "`{}` is not available while the host reads the tool's descriptor",
                capability.name()
            ))
        })?;
        if !grant.grants(capability) {
            return Err(CapabilityError::Denied(format!(
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
            Some(crate::revocation::Blocked::Revoked(entry)) => {
                Err(CapabilityError::Revoked(format!(
                    "{} was revoked at {} ({})",
                    entry.revocation, entry.at, entry.reason
                )))
            }
            Some(crate::revocation::Blocked::Unconfirmed(why)) => {
                Err(CapabilityError::Revoked(format!(
                    "this host cannot confirm that `{}` is not revoked now: {why}",
                    capability.name()
                )))
            }
        }
    }
}

/// `vak:tool/types` holds only types; its host side has nothing to implement.
impl crate::bindings::vak::tool::types::Host for Broker {}

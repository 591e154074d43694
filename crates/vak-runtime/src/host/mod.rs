//! The embedder's API: build a [`Host`] from tools and a policy ([`HostBuilder`]), open
//! [`Session`]s, and submit proposals; each gets one complete [`CallRecord`], whatever happens
//! to the call. The lifecycle itself is `pipeline`, one function per stage.

mod builder;
mod error;
mod finish;
mod pipeline;
mod session;

pub use builder::HostBuilder;
pub use error::{HostError, InvalidSessionId, PermissionError};
pub use finish::FinishOnDrop;
pub use session::Session;

use crate::admission::{AdmittedTool, Examination, Verdict};
use crate::child_runner::ChildCap;
use crate::dispatch::Runtime;
use crate::policy::Policy;
use crate::proposal::{Proposal, ProposalError};
use crate::record::CallRecord;
use crate::revocation::Revocations;
use crate::signing::HostKey;
use crate::store::Store;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// What a host holds, shared by its clones and its calls.
struct Inner {
    /// SHA-256 of each admitted tool's grant, by name.
    grant_digests: BTreeMap<String, String>,
    runtime: Runtime,
    policy: Policy,
    tools: BTreeMap<String, Arc<AdmittedTool>>,
    examinations: Vec<Examination>,
    store: Store,
    named: std::sync::Mutex<session::NamedSessions>,
    key: Arc<HostKey>,
    /// The chain records are hashed into where there is no journal to take them and the key
    /// signs checkpoints (`None`: each record is signed, or the journal takes it).
    chain: Option<Arc<crate::signing::MemoryChain>>,
    registry: crate::registry::Registry,
    secrets: Option<Arc<dyn crate::secrets::SecretSource>>,
    approver: Option<Arc<dyn crate::approval::Approver>>,
}

/// A running vak host. Cheap to clone; calls may run concurrently.
///
/// ```no_run
/// # async fn demo() -> Result<(), vak_runtime::HostError> {
/// use vak_runtime::{HostBuilder, Policy, Proposal};
///
/// let host = HostBuilder::new()
///     .bundled_tools()
///     .policy(Policy::default_policy())
///     .build()
///     .await?;
/// let record = host.call(Proposal::new("clock", r#"{"zone":"Europe/Paris"}"#)).await;
/// println!("{}", record.to_json_pretty());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Host {
    inner: Arc<Inner>,
}

impl Host {
    /// The admitted tools, by name.
    pub fn tools(&self) -> impl Iterator<Item = &AdmittedTool> {
        self.inner.tools.values().map(|a| a.as_ref())
    }

    /// One admitted tool.
    pub fn tool(&self, name: &str) -> Option<&AdmittedTool> {
        self.inner.tools.get(name).map(|a| a.as_ref())
    }

    /// What admission found for every component offered, admitted or refused.
    pub fn examinations(&self) -> &[Examination] {
        &self.inner.examinations
    }

    /// The active policy.
    pub fn policy(&self) -> &Policy {
        &self.inner.policy
    }

    /// The payload schemas this host checks payloads against.
    pub fn registry(&self) -> &crate::registry::Registry {
        &self.inner.registry
    }

    /// The engine, AOT cache and linkers.
    pub fn runtime(&self) -> &Runtime {
        &self.inner.runtime
    }

    /// Examine a component that is not loaded, under the active policy (nothing is admitted).
    pub async fn examine(&self, source: &str, bytes: &[u8]) -> Examination {
        self.inner
            .runtime
            .admit(source, bytes, &self.inner.policy)
            .await
            .0
    }

    /// The key that signs this host's records (for `bench`).
    pub(crate) fn inner_key(&self) -> &HostKey {
        &self.inner.key
    }

    /// A 32-byte secret for `purpose`, derived from the key that signs this host's records (see
    /// `HostKey::derived_secret`): the same on every node given the same key file; neither the
    /// key nor usable for signing. The MCP server seals its `requestState`s with one.
    pub fn derived_secret(&self, purpose: &str) -> impl std::ops::Deref<Target = [u8; 32]> {
        self.inner_key().derived_secret(purpose)
    }

    /// The public half of the key that signs this host's records (hex).
    pub fn public_key(&self) -> String {
        self.inner.key.public_hex()
    }

    /// The proof that a checkpoint signed by this host's key signs `record`, one of the records
    /// it returned unsigned: those of a host without a journal that signs checkpoints (the
    /// default), hashed into a chain in memory as each call ends. The checkpoint is signed now
    /// if none covers the record yet, over every record since the last one; `vak verify` checks
    /// the proof alone. Proofs are kept for about the last
    /// [`KEPT`](crate::signing::memory_chain::KEPT) records. A journal's records have theirs
    /// from [`Store::proof`].
    pub fn proof(
        &self,
        record: &CallRecord,
    ) -> Result<crate::journal::chain::EntryProof, crate::signing::ProofError> {
        match &self.inner.chain {
            Some(chain) => chain.proof(record),
            None => Err(crate::signing::ProofError::NoChainInMemory),
        }
    }

    /// The revocations in force; [`Revocations::revoke`] applies to new and running calls.
    pub fn revocations(&self) -> &Arc<Revocations> {
        self.inner.store.revocations()
    }

    /// Where the journal, the revocations and the ledgers are kept.
    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// Run one proposal through the whole lifecycle in a session of its own. Never fails: every
    /// ending is in the record.
    pub async fn call(&self, proposal: Proposal) -> CallRecord {
        self.session(None).call(proposal).await
    }

    /// A child run started by call `parent` through `invoke`. Boxed: the lifecycle runs inside
    /// the lifecycle of the parent.
    pub(crate) fn call_child<'a>(
        &'a self,
        session: &'a Session,
        proposal: Proposal,
        parent: String,
        cap: ChildCap,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = CallRecord> + Send + 'a>> {
        let cancel = cap.cancel.child_token();
        let client = cap.client.clone();
        Box::pin(self.call_with(session, proposal, Some((parent, cap)), cancel, client))
    }

    /// Why no admitted tool answers to `name`: a component of that name refused at admission
    /// (by its descriptor's name, or its file's), else none at all.
    fn not_served(&self, name: &str) -> ProposalError {
        let named = |e: &&crate::Examination| {
            e.descriptor.as_ref().is_some_and(|d| d.name == name)
                || e.functions.iter().any(|f| f.tool == name)
                || Path::new(&e.source).file_stem().is_some_and(|s| s == name)
        };
        match self
            .inner
            .examinations
            .iter()
            .find(named)
            .map(|e| &e.verdict)
        {
            Some(Verdict::Refused { kind, reason, .. }) => ProposalError::NotAdmitted {
                name: name.to_string(),
                admission_kind: kind.clone(),
                reason: reason.clone(),
            },
            _ => ProposalError::UnknownTool {
                name: name.to_string(),
            },
        }
    }
}

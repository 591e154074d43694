//! The embedder's API: build a [`Host`] from tools and a policy, then submit proposals and get
//! one complete [`CallRecord`] for each, whatever happens to the call.

use crate::admission::{AdmittedTool, Examination, Verdict};
use crate::budget::{self, Ledger};
use crate::capabilities::Broker;
use crate::child_runner::{ChildCap, ChildLink};
use crate::dispatch::run::Entry;
use crate::dispatch::{EngineSettings, GuestReturn, Runtime};
use crate::policy::{Policy, PolicyError};
use crate::proposal::{self, Proposal, ProposalError};
use crate::record::{CallRecord, Status};
use crate::result;
use crate::revocation::{Blocked, Revocations};
use crate::signing::HostKey;
use crate::stage::{CallError, Stage};
use crate::store::Store;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// Why the permission stage refused a call.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PermissionError {
    #[error("{what} was revoked at {at} ({reason})")]
    Revoked {
        what: String,
        at: String,
        reason: String,
    },
    #[error("the policy does not let principal `{principal}` call `{tool}`")]
    PrincipalNotAllowed { tool: String, principal: String },
    /// This node cannot confirm that it knows every revocation (the shared store is out of
    /// reach): it refuses rather than run a call that may have been revoked.
    #[error(transparent)]
    Store(crate::store::StoreError),
}

impl crate::stage::StageError for PermissionError {
    fn stage(&self) -> Stage {
        Stage::Permission
    }

    fn kind(&self) -> &'static str {
        match self {
            PermissionError::Revoked { .. } => "revoked",
            PermissionError::PrincipalNotAllowed { .. } => "principal_not_allowed",
            PermissionError::Store(e) => e.kind(),
        }
    }

    fn retryable(&self) -> bool {
        matches!(self, PermissionError::Store(e) if e.retryable())
    }
}

/// Why a named session cannot be opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a session id: 1 to 128 characters of letters, digits and `.`, `_`, `:`, `-`")]
pub struct InvalidSessionId(pub String);

/// The named sessions of a local store (a shared store keeps them in the database): the most
/// this process remembers, the oldest forgotten first.
const MAX_NAMED_SESSIONS: usize = 10_000;

#[derive(Default)]
struct NamedSessions {
    ledgers: std::collections::HashMap<String, crate::budget::Ledger>,
    order: std::collections::VecDeque<String>,
}

/// Why a host could not be built.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error(transparent)]
    Runtime(#[from] crate::dispatch::engine::RuntimeError),
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error(transparent)]
    Key(#[from] crate::signing::KeyError),
    #[error("cannot read tools from {path}: {source}")]
    ReadTools {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// Builds a [`Host`]. Deny by default: with no policy set, every tool is refused.
pub struct HostBuilder {
    settings: EngineSettings,
    policy: Policy,
    sources: Vec<(String, Vec<u8>)>,
    store: Store,
    key: Option<HostKey>,
    registry: crate::registry::Registry,
    secrets: Option<Arc<dyn crate::secrets::SecretSource>>,
    approver: Option<Arc<dyn crate::approval::Approver>>,
}

impl Default for HostBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl HostBuilder {
    /// No tools, a policy that grants nothing, default engine settings (AOT cache in the user's
    /// cache directory).
    pub fn new() -> Self {
        HostBuilder {
            settings: EngineSettings::default(),
            policy: Policy::deny_all(),
            sources: Vec::new(),
            store: Store::default(),
            key: None,
            registry: crate::registry::Registry::builtin(),
            secrets: crate::secrets::FileSecrets::default_path()
                .ok()
                .map(|p| Arc::new(crate::secrets::FileSecrets::new(p)) as _),
            approver: None,
        }
    }

    /// Who answers approvals for tools and scopes the policy marks `ask` (default: the call's
    /// client, asked with an elicitation form, where it can answer; else the call is refused
    /// with `approval_required`).
    pub fn approver(mut self, approver: Arc<dyn crate::approval::Approver>) -> Self {
        self.approver = Some(approver);
        self
    }

    /// Where the values of the policy's credential aliases come from (default: the secrets file
    /// `vak secret` manages; credentials bound to `env` read the host's environment instead).
    pub fn secrets(mut self, secrets: Arc<dyn crate::secrets::SecretSource>) -> Self {
        self.secrets = Some(secrets);
        self
    }

    /// Register a payload schema (beside the built-in ones) with its material fields but no
    /// bindings: no receipt can back its fields, so its results are never `verified`. See
    /// [`HostBuilder::payload_schema_bound`].
    pub fn payload_schema(
        mut self,
        id: &str,
        document: serde_json::Value,
        material: Vec<String>,
    ) -> Result<Self, crate::schema::SchemaCompileError> {
        self.registry.register(id, document, material)?;
        Ok(self)
    }

    /// Register a payload schema with its material fields and what backs each field (which
    /// receipts, how the value relates, or which computation the host redoes): see
    /// [`crate::registry`].
    pub fn payload_schema_bound(
        mut self,
        id: &str,
        document: serde_json::Value,
        material: Vec<String>,
        bindings: Vec<crate::registry::FieldBinding>,
    ) -> Result<Self, crate::registry::RegistryError> {
        self.registry
            .register_bound(id, document, material, bindings)?;
        Ok(self)
    }

    /// Append every record to `journal`, written before the call returns (a local store;
    /// replaces a shared one).
    pub fn journal(mut self, journal: Arc<crate::journal::Journal>) -> Self {
        let revocations = self.store.revocations().clone();
        self.store = Store::Local(crate::store::Local {
            journal: Some(journal),
            revocations,
        });
        self
    }

    /// Keep the journal, the revocations and the session ledgers in `store` (for a shared
    /// store: with every other node of it).
    pub fn store(mut self, store: Store) -> Self {
        self.store = store;
        self
    }

    /// The key that signs every record (default: a fresh key for this host, signing whole).
    /// A key [`HostKey::with_nonces_ahead`] makes its nonces between calls (see
    /// [`crate::signing`], and when not to).
    pub fn signing_key(mut self, key: HostKey) -> Self {
        self.key = Some(key);
        self
    }

    /// Where revocations are kept (default: in memory only; a local store, replacing a
    /// shared one).
    pub fn revocations(mut self, revocations: Arc<Revocations>) -> Self {
        let journal = match &self.store {
            Store::Local(l) => l.journal.clone(),
            Store::Postgres(_) => None,
        };
        self.store = Store::Local(crate::store::Local {
            journal,
            revocations,
        });
        self
    }

    /// The policy every admission and call is checked against.
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    /// Engine limits and the cache directory.
    pub fn engine_settings(mut self, settings: EngineSettings) -> Self {
        self.settings = settings;
        self
    }

    /// Where compiled components are cached (`None`: compile at every start).
    pub fn cache_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.settings.cache_dir = dir;
        self
    }

    /// Add the tools bundled with vak (`clock`, `stats`, `compare`, `replace`, `research`).
    pub fn bundled_tools(mut self) -> Self {
        for (name, bytes) in crate::bundled::TOOLS {
            self.sources
                .push((format!("bundled:{name}"), bytes.to_vec()));
        }
        self
    }

    /// Add one component; `source` names it in messages.
    pub fn component(mut self, source: impl Into<String>, bytes: Vec<u8>) -> Self {
        self.sources.push((source.into(), bytes));
        self
    }

    /// Add every `*.wasm` file of `dir` (in name order).
    pub fn tools_dir(mut self, dir: &Path) -> Result<Self, HostError> {
        let read_err = |source| HostError::ReadTools {
            path: dir.display().to_string(),
            source,
        };
        let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(read_err)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "wasm") && p.is_file())
            .collect();
        paths.sort();
        for path in paths {
            let bytes = std::fs::read(&path).map_err(|source| HostError::ReadTools {
                path: path.display().to_string(),
                source,
            })?;
            self.sources.push((path.display().to_string(), bytes));
        }
        Ok(self)
    }

    /// Start the engine and admit every component. Refused components are kept as
    /// [`Examination`]s with their reasons; the host serves the admitted ones.
    pub async fn build(self) -> Result<Host, HostError> {
        let key = match self.key {
            Some(k) => k,
            None => HostKey::generate()?,
        };
        let runtime = Runtime::new(self.settings)?;
        let mut tools = BTreeMap::new();
        let mut examinations = Vec::new();
        // Components are admitted a few at a time (one per core, at least two): their compiles
        // (each on a thread of its own, and parallel inside Cranelift) overlap with each other's
        // serial parts, and a host with many tools does not start a compile thread for each at
        // once. Verdicts come in the order the components were given, so a duplicate name is
        // refused for the later one.
        let at_once = std::thread::available_parallelism().map_or(2, |n| n.get().max(2));
        let admitted_all: Vec<_> = {
            use futures::StreamExt as _;
            futures::stream::iter(&self.sources)
                .map(|(source, bytes)| runtime.admit(source, bytes, &self.policy))
                .buffered(at_once)
                .collect()
                .await
        };
        for (mut exam, admitted) in admitted_all {
            if let Some(tool) = admitted {
                let name = tool.name().to_string();
                match tools.entry(name) {
                    std::collections::btree_map::Entry::Occupied(taken) => {
                        exam.verdict = crate::admission::AdmissionError::DuplicateName {
                            tool: taken.key().clone(),
                        }
                        .verdict();
                    }
                    std::collections::btree_map::Entry::Vacant(slot) => {
                        slot.insert(Arc::new(tool));
                    }
                }
            }
            examinations.push(exam);
        }
        let grant_digests = tools
            .iter()
            .map(|(name, tool)| {
                let digest = crate::digest::sha256_hex(format!("{:?}", tool.grant).as_bytes());
                (name.clone(), digest)
            })
            .collect();
        Ok(Host {
            inner: Arc::new(Inner {
                grant_digests,
                runtime,
                policy: self.policy,
                tools,
                examinations,
                store: self.store,
                named: std::sync::Mutex::default(),
                key: Arc::new(key),
                registry: self.registry,
                secrets: self.secrets,
                approver: self.approver,
            }),
        })
    }
}

struct Inner {
    /// SHA-256 of each admitted tool's grant, by name.
    grant_digests: BTreeMap<String, String>,
    runtime: Runtime,
    policy: Policy,
    tools: BTreeMap<String, Arc<AdmittedTool>>,
    examinations: Vec<Examination>,
    store: Store,
    named: std::sync::Mutex<NamedSessions>,
    key: Arc<HostKey>,
    registry: crate::registry::Registry,
    secrets: Option<Arc<dyn crate::secrets::SecretSource>>,
    approver: Option<Arc<dyn crate::approval::Approver>>,
}

/// A session: the embedder's unit of budget (a conversation, a turn), on behalf of one principal.
/// Its ledger is charged with what each call really used; its calls may run concurrently.
///
/// ```no_run
/// # async fn demo(host: vak_host::Host) {
/// use vak_host::Proposal;
/// use vak_host::proposal::providers::parse_document;
///
/// let session = host.session(Some("alice"));
/// // An Anthropic response with two tool_use blocks: one record per call.
/// let doc = r#"{"content":[
///     {"type":"tool_use","id":"toolu_1","name":"clock","input":{"zone":"Asia/Tokyo"}},
///     {"type":"tool_use","id":"toolu_2","name":"stats","input":{"values":[1,2,3]}}]}"#;
/// for proposal in parse_document(doc, None).expect("a proposal document") {
///     let record = session.call(proposal).await;
///     println!("{} {}", record.call_id, record.status.as_str());
/// }
/// println!("used so far: {:?}", session.used().await);
/// # }
/// ```
#[derive(Clone)]
pub struct Session {
    host: Host,
    id: String,
    principal: Option<String>,
    ledger: Ledger,
}

impl Session {
    /// The session's id (in every record it charges).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The host the session belongs to.
    pub fn host(&self) -> &Host {
        &self.host
    }

    /// On whose behalf the session's calls are made.
    pub fn principal(&self) -> Option<&str> {
        self.principal.as_deref()
    }

    /// What the session has used so far (on a shared store: on every node).
    pub async fn used(&self) -> Result<crate::budget::Totals, crate::store::StoreError> {
        self.ledger.used().await
    }

    /// Run one proposal through the whole lifecycle, charged to this session.
    ///
    /// A call, once started, always reaches its end and leaves its record (and journal entry):
    /// it runs on a task of its own, and dropping this future cancels it (the guest is stopped
    /// at once and the record says `cancelled`) instead of abandoning it half-way.
    pub async fn call(&self, proposal: Proposal) -> CallRecord {
        self.detached(proposal, CancellationToken::new(), None)
            .await
    }

    /// [`Session::call`], ended early when `cancel` fires: a running guest is stopped at once (at
    /// its next epoch tick, or while it waits in a host call), its child runs with it, and the
    /// record says `cancelled` at the stage where the call was.
    pub async fn call_cancellable(
        &self,
        proposal: Proposal,
        cancel: CancellationToken,
    ) -> CallRecord {
        self.detached(proposal, cancel, None).await
    }

    /// The lifecycle on the caller's task, for a caller that has spawned one for the call
    /// already (the MCP server) and cancels it with `cancel`.
    pub(crate) async fn call_on_this_task(
        &self,
        proposal: Proposal,
        cancel: CancellationToken,
        client: Arc<dyn crate::capabilities::client::ClientChannel>,
    ) -> CallRecord {
        self.host
            .call_with(self, proposal, None, cancel, Some(client))
            .await
    }

    /// Run the lifecycle on the caller's task; should the caller drop the future before it
    /// ends, the call is cancelled and its remainder runs on a task of its own, so that it still
    /// ends and leaves its record. (Spawning every call instead costs two thread hand-offs, tens
    /// of microseconds on a small VM, for the rare dropped call.)
    async fn detached(
        &self,
        proposal: Proposal,
        cancel: CancellationToken,
        client: Option<Arc<dyn crate::capabilities::client::ClientChannel>>,
    ) -> CallRecord {
        let session = self.clone();
        let on_drop = cancel.clone();
        FinishOnDrop::new(
            Box::pin(async move {
                session
                    .host
                    .call_with(&session, proposal, None, cancel, client)
                    .await
            }),
            Some(on_drop),
        )
        .await
    }

    /// [`Session::call_cancellable`], for a caller with a client: the guest's log lines of the
    /// client's level go to `client` as they are written, and a tool granted `client` requests
    /// asks it for completions and form answers (checked by the host, each with a receipt).
    pub async fn call_with_client(
        &self,
        proposal: Proposal,
        cancel: CancellationToken,
        client: Arc<dyn crate::capabilities::client::ClientChannel>,
    ) -> CallRecord {
        self.detached(proposal, cancel, Some(client)).await
    }
}

/// A running vak host. Cheap to clone; calls may run concurrently.
///
/// ```no_run
/// # async fn demo() -> Result<(), vak_host::HostError> {
/// use vak_host::{HostBuilder, Policy, Proposal};
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

    /// The public half of the key that signs this host's records (hex).
    pub fn public_key(&self) -> String {
        self.inner.key.public_hex()
    }

    /// The revocations in force; [`Revocations::revoke`] applies to new and running calls.
    pub fn revocations(&self) -> &Arc<Revocations> {
        self.inner.store.revocations()
    }

    /// Where the journal, the revocations and the ledgers are kept.
    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// Open a new session on behalf of `principal`, with the policy's session caps. Its ledger
    /// lives in this process (nothing else can name it); a budget shared by several requests or
    /// nodes is a named session ([`Host::session_named`]).
    pub fn session(&self, principal: Option<&str>) -> Session {
        Session {
            ledger: Ledger::memory(),
            host: self.clone(),
            id: format!("session_{}", uuid::Uuid::now_v7().simple()),
            principal: principal.map(str::to_string),
        }
    }

    /// The session named `id` of `principal` (opened on first use): calls that name it share one
    /// budget, on every node of a shared store. Names are the principal's own: the same name on
    /// behalf of another principal is another session. A local store remembers the last 10,000
    /// named sessions.
    pub fn session_named(
        &self,
        id: &str,
        principal: Option<&str>,
    ) -> Result<Session, InvalidSessionId> {
        let valid = (1..=128).contains(&id.len())
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._:-".contains(&b));
        if !valid {
            return Err(InvalidSessionId(id.chars().take(160).collect()));
        }
        // One ledger per principal and name, whatever either holds.
        let key = serde_json::json!([principal, id]).to_string();
        let ledger = match &self.inner.store {
            Store::Postgres(p) => p.ledger(&key, principal),
            Store::Local(_) => {
                let mut named = self.inner.named.lock().unwrap_or_else(|p| p.into_inner());
                match named.ledgers.get(&key) {
                    Some(l) => l.clone(),
                    None => {
                        if named.order.len() >= MAX_NAMED_SESSIONS
                            && let Some(oldest) = named.order.pop_front()
                        {
                            named.ledgers.remove(&oldest);
                        }
                        let l = Ledger::memory();
                        named.ledgers.insert(key.clone(), l.clone());
                        named.order.push_back(key);
                        l
                    }
                }
            }
        };
        Ok(Session {
            host: self.clone(),
            id: id.to_string(),
            principal: principal.map(str::to_string),
            ledger,
        })
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

    async fn call_with(
        &self,
        session: &Session,
        proposal: Proposal,
        child: Option<(String, ChildCap)>,
        cancel: CancellationToken,
        client: Option<Arc<dyn crate::capabilities::client::ClientChannel>>,
    ) -> CallRecord {
        let mut record = CallRecord::new(
            proposal.call_id.clone(),
            proposal.tool.clone(),
            proposal.provider.clone(),
            &proposal.arguments,
        );
        record.provider_call_id = proposal.provider_call_id.clone();
        record.session_id = session.id.clone();
        record.principal = session.principal.clone();
        let cap = child.map(|(parent, cap)| {
            record.parent_call_id = Some(parent);
            record.depth = cap.parent_depth + 1;
            cap
        });
        // Filled by `run` once the tool is known: every secret value its grant could use.
        let mut scrub = Arc::new(crate::secrets::Scrubber::none());
        // Filled by `run` when a shared ledger is to be charged with the record's commit.
        let mut settlement = None;
        self.run(
            session,
            &proposal,
            &mut record,
            cap,
            Caller {
                cancel: &cancel,
                client,
                scrub: &mut scrub,
                settlement: &mut settlement,
            },
        )
        .await;
        // Whatever stage the call ended at, the record keeps no secret value in any field: not
        // in the arguments a model pasted it into, an approval's question, the error, the
        // receipts (the digests stay those of the data as it was). The record is what the
        // journal, `vak call`, `vak audit` and MCP results and `_meta` are made from.
        crate::redaction::redact(&mut record, &scrub);
        if matches!(record.status, Status::ToolError | Status::Failed) {
            record.outcome = Some(crate::outcome::Outcome {
                label: crate::outcome::Label::Failed,
                payload_passed: false,
                requirements: Vec::new(),
            });
        }
        // Signed and written to the journal before the call returns: an acknowledged call
        // always has its record.
        // A call refused because the store is out of reach does not wait for it again: its
        // record is queued, committed when the store answers, and the call answered now.
        let wait = match record.error.as_ref().map(|e| e.kind.as_str()) {
            Some("store_unavailable") => {
                crate::store::Wait::Queued("the store was out of reach for this call")
            }
            Some(crate::journal::chain::JOURNAL_UNAVAILABLE) => {
                crate::store::Wait::Queued("the call's started entry could not be written")
            }
            _ => crate::store::Wait::Until(self.inner.store.deadline()),
        };
        record.journaled = self
            .inner
            .store
            .sign_and_append(&mut record, &self.inner.key, settlement, wait)
            .await
            .map(|written| written.map_err(|e| e.failure()));
        if let Some(Err(e)) = &record.journaled {
            // An outage is logged once by the store, with a count; not here for every call.
            if e.retryable() {
                tracing::debug!(call_id = %record.call_id, error = %e, "the record could not be journaled");
            } else {
                tracing::error!(call_id = %record.call_id, error = %e, "the record could not be journaled");
            }
        }
        tracing::info!(
            call_id = %record.call_id,
            tool = %record.tool,
            status = record.status.as_str(),
            stage = record.stage.as_str(),
            fuel = record.usage.fuel,
            wall_ns = record.usage.wall_ns,
            "call finished"
        );
        record
    }

    async fn run(
        &self,
        session: &Session,
        proposal: &Proposal,
        record: &mut CallRecord,
        cap: Option<ChildCap>,
        caller: Caller<'_>,
    ) {
        let Caller {
            cancel,
            client,
            scrub,
            settlement,
        } = caller;
        // proposal → one neutral call of a known tool
        let t = Instant::now();
        let admitted = match self.proposal_stage(proposal) {
            Ok((admitted, arguments)) => {
                record.component_digest = Some(admitted.examination.digest.clone());
                record.passed(Stage::Proposal, t.elapsed(), String::new());
                (admitted, arguments)
            }
            Err(e) => return record.stop(CallError::from(&e), t.elapsed()),
        };
        let (admitted, arguments) = admitted;
        let arguments = serde_json::Value::Object(arguments);
        *scrub = Arc::new(crate::secrets::scrubber_for(
            self.inner.secrets.as_deref(),
            &admitted.grant,
        ));

        // schema contract
        let t = Instant::now();
        let checked = admitted.schema.validate_value(&arguments);
        record.arguments = Some(arguments);
        if let Err(e) = checked {
            return record.stop(CallError::from(&e), t.elapsed());
        }
        record.passed(Stage::Schema, t.elapsed(), String::new());

        // permission: the policy's grant (admission linked only what it grants), the principal,
        // and the revocations in force now
        let t = Instant::now();
        let tool = &admitted;
        let principal = session.principal.as_deref();
        if let Err(e) = self.permission_stage(tool, principal) {
            return record.stop(CallError::from(&e), t.elapsed());
        }
        let granted: Vec<String> = match &tool.examination.verdict {
            Verdict::Admitted { granted } => granted.iter().map(|c| c.name().to_string()).collect(),
            Verdict::Refused { .. } => Vec::new(),
        };
        record.granted = granted.clone();
        // Approvals: the whole call now when the tool is `ask`; scopes at their first use. Only
        // a grant that asks anything pays for this. Cancelling `stop` (a refused approval during
        // dispatch) stops the guest at once.
        let asks = tool.grant.asks();
        let stop = if asks {
            cancel.child_token()
        } else {
            cancel.clone()
        };
        let approvals = asks.then(|| {
            Arc::new(crate::approval::CallApprovals::new(
                crate::approval::CallContext {
                    call_id: record.call_id.clone(),
                    tool: tool.name().to_string(),
                    principal: session.principal.clone(),
                    // The person reads the arguments with any secret value redacted.
                    arguments: scrub.redact(&proposal.arguments).0,
                    arguments_sha256: record.arguments_digest.clone(),
                    // What the person reads first: where the call can send requests.
                    reach: tool
                        .grant
                        .http()
                        .map(|h| h.origins.iter().map(|o| o.text.clone()).collect())
                        .unwrap_or_default(),
                    grant_sha256: self.grant_digest(tool),
                    timeout: std::time::Duration::from_millis(tool.grant.approval_timeout_ms),
                },
                self.inner.approver.clone(),
                client.clone(),
                stop.clone(),
            ))
        });
        if let Some(approvals) = approvals.as_ref().filter(|_| tool.grant.ask) {
            let asked = approvals
                .require(
                    crate::approval::ApprovalScope::Call,
                    std::time::Duration::from_millis(tool.grant.approval_timeout_ms),
                )
                .await;
            record.approvals = approvals.entries();
            if let Err(e) = asked {
                return record.stop(CallError::from(&e), t.elapsed());
            }
        }
        let approved_by = approvals
            .as_ref()
            .map(|a| a.approvers())
            .unwrap_or_default();
        record.passed(
            Stage::Permission,
            t.elapsed(),
            if approved_by.is_empty() {
                format!("granted: [{}]", granted.join(", "))
            } else {
                format!(
                    "granted: [{}]; approved by {}",
                    granted.join(", "),
                    approved_by.join(", ")
                )
            },
        );

        // claims and budget: min(claim, policy cap, engine ceiling, what the session has left)
        let t = Instant::now();
        let ceiling = budget::engine_ceiling(self.inner.runtime.settings.max_memory_bytes);
        let mut wanted = budget::admit(&tool.descriptor.claims.budget, &tool.grant.caps, &ceiling);
        if let Some(cap) = &cap {
            // A child run lives within its parent: the parent's fuel, what is left of its time.
            wanted.fuel = wanted.fuel.min(cap.fuel);
            wanted.wall_time_ms = wanted.wall_time_ms.min(cap.wall_time_ms);
        }
        let claim = budget::Claim {
            tool: tool.name(),
            principal: session.principal.as_deref(),
            caps: &self.inner.policy.session,
            calls_per_session: tool.grant.caps.calls_per_session,
            limits: wanted,
        };
        // One bound for the call's waits on the store before it runs (its reservation and its
        // `started` entry), from now, whatever else the store is doing.
        let deadline = self.inner.store.deadline();
        let (limits, reservation) = match session.ledger.reserve_by(&claim, deadline).await {
            Ok(admitted) => admitted,
            Err(e) => return record.stop(CallError::from(&e), t.elapsed()),
        };
        record.limits = Some(limits);
        // Write-ahead, the stage's last step: the call takes its place in the journal (a
        // `started` entry in this process's chain, durable as records are) before any instance
        // of its tool exists. An effect can then never happen without its record's place, and a
        // process that dies mid-call leaves an interrupted call, not a silent one. A call whose
        // place cannot be written is not run.
        let grant_digest = self.grant_digest(tool);
        let mut started = crate::journal::Started::of(record, grant_digest, limits);
        if let Some(Err(e)) = self
            .inner
            .store
            .start(&mut started, &self.inner.key, deadline)
            .await
        {
            if e.retryable() {
                tracing::debug!(call_id = %record.call_id, error = %e, "the call's started entry could not be journaled: refused before dispatch");
            } else {
                tracing::error!(call_id = %record.call_id, error = %e, "the call's started entry could not be journaled: refused before dispatch");
            }
            *settlement = reservation.unused();
            let refusal = crate::journal::JournalUnavailable(e);
            return record.stop(CallError::from(&refusal), t.elapsed());
        }
        // The revocations again, now that the call has its place: one revoked while it waited
        // for its reservation or its entry does not run. (On a shared store a node confirms a
        // revocation once its view holds it, so a call checked after that is refused.)
        if let Err(e) = self.revocation_stage(tool, principal) {
            *settlement = reservation.unused();
            return record.stop(CallError::from(&e), t.elapsed());
        }
        record.passed(
            Stage::Budget,
            t.elapsed(),
            format!(
                "fuel {}, memory {} B, wall {} ms, result {} B",
                limits.fuel, limits.memory_bytes, limits.wall_time_ms, limits.result_bytes
            ),
        );

        // brokered dispatch
        let t = Instant::now();
        let children = Arc::new(std::sync::Mutex::new(Vec::new()));
        let bodies = crate::evidence::bodies::BodyStore::default();
        let broker = Broker::new(record.call_id.clone(), Some(tool.grant.clone()))
            .retaining(bodies.clone())
            .watching(self.revocations().clone(), session.principal.clone())
            .keyed(self.inner.secrets.clone(), scrub.clone())
            .linked(ChildLink {
                host: self.clone(),
                session: session.clone(),
                depth: record.depth,
                deadline: Instant::now() + std::time::Duration::from_millis(limits.wall_time_ms),
                fuel_cap: limits.fuel,
                records: children.clone(),
                cancel: stop.clone(),
                client: client.clone(),
            })
            .attended(client);
        let broker = match &approvals {
            Some(a) => broker.approving(a.clone()),
            None => broker,
        };
        let mut report = self
            .inner
            .runtime
            .dispatch(
                &tool.pre,
                broker,
                Entry::Call(&proposal.arguments),
                &limits,
                &stop,
            )
            .await;
        if let Ok(GuestReturn::Completed(r)) = &report.outcome {
            report.usage.result_bytes = result::result_size(r);
        }
        *settlement = reservation.settle(&report.usage);
        record.usage = report.usage;
        record.receipts = report.receipts;
        // Child runs stay on record whatever happened to this call afterwards.
        record.children = std::mem::take(&mut *children.lock().unwrap_or_else(|p| p.into_inner()));
        record.logs = report.logs;
        if let Some(approvals) = &approvals {
            record.approvals = approvals.entries();
        }
        // A scope's approval refused during dispatch ends the call at `permission`, whatever
        // the guest did after it was told.
        if let Some(e) = approvals.as_ref().and_then(|a| a.refusal()) {
            return record.stop(CallError::from(&e), t.elapsed());
        }
        let returned = match report.outcome {
            Ok(r) => r,
            Err(e) => return record.stop(CallError::from(&e), t.elapsed()),
        };
        record.passed(Stage::Dispatch, t.elapsed(), String::new());

        // typed result and evidence
        let t = Instant::now();
        let collected = match returned {
            GuestReturn::Completed(r) => result::collect(r, limits.result_bytes),
            GuestReturn::ToolError(e) => {
                let (kept, error) = result::tool_error(e);
                record.tool_error = Some(kept);
                // Redacted before it is cut to its cap: a value cut in two would not be found.
                crate::redaction::redact(record, scrub);
                if let Some(kept) = &mut record.tool_error {
                    crate::result::cut_to_cap(kept);
                }
                record.stop(CallError::from(&error), t.elapsed());
                record.status = Status::ToolError;
                return;
            }
            // `dispatch` answers `Entry::Call` with a call's return only; anything else is ours.
            GuestReturn::Described(_) => {
                let fault = crate::DispatchError::HostFault {
                    message: "the dispatch stage returned a descriptor for a call".into(),
                };
                return record.stop(CallError::from(&fault), t.elapsed());
            }
        };
        match collected {
            Ok(r) => {
                let payload = r
                    .payload_json
                    .as_deref()
                    .and_then(|p| serde_json::from_str::<serde_json::Value>(p).ok());
                let bodies = bodies.snapshot();
                let subject = crate::evidence::Subject {
                    schema_id: r.payload_schema.as_deref(),
                    payload: payload.as_ref(),
                    registry: &self.inner.registry,
                    bodies: &bodies,
                };
                match crate::evidence::check(&r.evidence, &record.all_receipts(), &subject) {
                    Ok(checked) => record.evidence = checked,
                    Err(e) => return record.stop(CallError::from(&e), t.elapsed()),
                }
                record.result = Some(r);
                // The outcome and the projection are made from the redacted result.
                crate::redaction::redact(record, scrub);
                record.passed(Stage::Result, t.elapsed(), String::new());
            }
            Err(e) => return record.stop(CallError::from(&e), t.elapsed()),
        }

        // semantic outcome: the result contract and the caller's requirements, one by one
        let t = Instant::now();
        let Some(result) = record.result.as_ref() else {
            return;
        };
        let payload = result
            .payload_json
            .as_deref()
            .and_then(|p| serde_json::from_str::<serde_json::Value>(p).ok());
        let outcome = crate::outcome::evaluate(
            &self.inner.registry,
            result.payload_schema.as_deref(),
            payload.as_ref(),
            &record.evidence,
            &record.all_receipts(),
            &proposal.requirements,
            jiff::Timestamp::now().as_second(),
        );
        let outcome_elapsed = t.elapsed();

        // presentation projection: a card only where it is earned; the document always kept
        let t = Instant::now();
        let projection =
            crate::projection::project(&proposal.renderer, result, &outcome, &record.evidence);
        record.passed(
            Stage::Outcome,
            outcome_elapsed,
            format!("label: {}", outcome.label.as_str()),
        );
        record.outcome = Some(outcome);
        record.projection = Some(projection);
        record.passed(Stage::Projection, t.elapsed(), String::new());
        record.status = Status::Completed;
    }

    /// SHA-256 of `tool`'s grant (as its approvals and its calls' `started` entries name it),
    /// made once at build.
    fn grant_digest(&self, tool: &AdmittedTool) -> String {
        match self.inner.grant_digests.get(tool.name()) {
            Some(d) => d.clone(),
            None => crate::digest::sha256_hex(format!("{:?}", tool.grant).as_bytes()),
        }
    }

    fn permission_stage(
        &self,
        tool: &AdmittedTool,
        principal: Option<&str>,
    ) -> Result<(), PermissionError> {
        self.revocation_stage(tool, principal)?;
        if !tool.grant.allows_principal(principal) {
            return Err(PermissionError::PrincipalNotAllowed {
                tool: tool.name().to_string(),
                principal: principal.unwrap_or("(none)").to_string(),
            });
        }
        Ok(())
    }

    /// The permission stage's look at the revocations in force (and whether this node's view of
    /// them can be trusted now).
    fn revocation_stage(
        &self,
        tool: &AdmittedTool,
        principal: Option<&str>,
    ) -> Result<(), PermissionError> {
        match self.revocations().blocking_call(tool.name(), principal) {
            None => {}
            Some(Blocked::Revoked(entry)) => {
                return Err(PermissionError::Revoked {
                    what: entry.revocation.to_string(),
                    at: entry.at,
                    reason: entry.reason,
                });
            }
            Some(Blocked::Unconfirmed(why)) => {
                return Err(PermissionError::Store(
                    crate::store::StoreError::Unavailable {
                        what: "revocations",
                        message: why,
                    },
                ));
            }
        }
        Ok(())
    }

    /// Why no admitted tool answers to `name`: a component of that name refused at admission
    /// (by its descriptor's name, or its file's), else none at all.
    fn not_served(&self, name: &str) -> ProposalError {
        let named = |e: &&crate::Examination| {
            e.descriptor.as_ref().is_some_and(|d| d.name == name)
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

    fn proposal_stage(
        &self,
        proposal: &Proposal,
    ) -> Result<
        (
            Arc<AdmittedTool>,
            serde_json::Map<String, serde_json::Value>,
        ),
        ProposalError,
    > {
        if let Some(defect) = &proposal.defect {
            return Err(defect.clone());
        }
        if proposal.tool.is_empty() {
            return Err(ProposalError::MissingToolName);
        }
        let admitted = self
            .inner
            .tools
            .get(&proposal.tool)
            .cloned()
            .ok_or_else(|| self.not_served(&proposal.tool))?;
        let arguments = proposal::parse_arguments(&proposal.arguments)?;
        Ok((admitted, arguments))
    }
}

/// Who a call runs for, as `run` needs it: the caller's cancellation, the client that can
/// answer, and where `run` leaves the call's scrubber once the tool is known and the charge of a
/// shared ledger to commit with the record.
struct Caller<'a> {
    cancel: &'a CancellationToken,
    client: Option<Arc<dyn crate::capabilities::client::ClientChannel>>,
    scrub: &'a mut Arc<crate::secrets::Scrubber>,
    settlement: &'a mut Option<crate::budget::Settlement>,
}

/// A call's lifecycle, polled where its caller polls it; dropped unfinished, it is finished on a
/// task of its own (cancelled first, when it was given a token to cancel), so that a call, once
/// started, always reaches its end and its record.
pub(crate) struct FinishOnDrop {
    lifecycle: Option<std::pin::Pin<Box<dyn std::future::Future<Output = CallRecord> + Send>>>,
    cancel: Option<CancellationToken>,
}

impl FinishOnDrop {
    pub(crate) fn new(
        lifecycle: std::pin::Pin<Box<dyn std::future::Future<Output = CallRecord> + Send>>,
        cancel: Option<CancellationToken>,
    ) -> FinishOnDrop {
        FinishOnDrop {
            lifecycle: Some(lifecycle),
            cancel,
        }
    }
}

impl std::future::Future for FinishOnDrop {
    type Output = CallRecord;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<CallRecord> {
        let Some(lifecycle) = self.lifecycle.as_mut() else {
            panic!("a call's future was polled again after it returned its record");
        };
        let ended = lifecycle.as_mut().poll(cx);
        if ended.is_ready() {
            self.lifecycle = None;
        }
        ended
    }
}

impl Drop for FinishOnDrop {
    fn drop(&mut self) {
        let Some(lifecycle) = self.lifecycle.take() else {
            return;
        };
        if let Some(cancel) = &self.cancel {
            cancel.cancel();
        }
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn(lifecycle)),
            // No runtime to finish on (it is shutting down): nothing can run the call further.
            Err(_) => tracing::warn!("a call was dropped while its runtime shut down"),
        }
    }
}

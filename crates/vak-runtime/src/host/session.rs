//! Sessions: the embedder's unit of budget, on behalf of one principal, and the named sessions
//! several requests (or nodes of a shared store) share.

use super::Host;
use super::error::InvalidSessionId;
use super::finish::FinishOnDrop;
use crate::budget::Ledger;
use crate::proposal::Proposal;
use crate::record::CallRecord;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The named sessions of a local store (a shared store keeps them in the database): the most
/// this process remembers, the oldest forgotten first.
const MAX_NAMED_SESSIONS: usize = 10_000;

#[derive(Default)]
pub(super) struct NamedSessions {
    ledgers: std::collections::HashMap<String, crate::budget::Ledger>,
    order: std::collections::VecDeque<String>,
}

/// A session: the embedder's unit of budget (a conversation, a turn), on behalf of one principal.
/// Its ledger is charged with what each call really used; its calls may run concurrently.
///
/// ```no_run
/// # async fn demo(host: vak_runtime::Host) {
/// use vak_runtime::Proposal;
/// use vak_runtime::proposal::providers::parse_document;
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
    pub(super) host: Host,
    pub(super) id: String,
    pub(super) principal: Option<String>,
    pub(super) ledger: Ledger,
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
    pub async fn call_on_this_task(
        &self,
        proposal: Proposal,
        cancel: CancellationToken,
        client: Arc<dyn vak_core::ports::client::ClientChannel>,
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
        client: Option<Arc<dyn vak_core::ports::client::ClientChannel>>,
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
        client: Arc<dyn vak_core::ports::client::ClientChannel>,
    ) -> CallRecord {
        self.detached(proposal, cancel, Some(client)).await
    }
}

impl Host {
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
        let ledger = match self.inner.store.shared_ledger(&key, principal) {
            Some(shared) => crate::budget::Ledger::on(shared),
            None => {
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
}

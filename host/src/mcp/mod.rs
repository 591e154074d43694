//! `vak serve`: the host as an MCP server (the official `rmcp` SDK, both protocol eras: the
//! `initialize` handshake of 2025-11-25 and before, and the stateless 2026-07-28 revision).
//!
//! The server adds no second contract: `tools/call` hands the raw `arguments` to the same
//! lifecycle as every other caller ([`crate::Session::call_cancellable`]), so a schema violation
//! is a tool execution error the model can read and correct (`isError: true`, with pointers),
//! while an unknown tool is a JSON-RPC error, as the specification asks. Every call, refused or
//! not, leaves its record (and its journal entry) before the response is sent.
//!
//! - One MCP connection (a stdio process, an HTTP session of the handshake era) is one
//!   [`crate::Session`]: one budget ledger. A stateless 2026-07-28 request has no connection; it
//!   runs in a session of its own.
//! - Guest output never reaches the protocol stream: a guest's stdout and stderr are captured
//!   into its record, and the server's own logs go to stderr.
//! - A call with a progress token gets `notifications/progress` while it runs; a cancelled
//!   request stops its guest at once, and the record says `cancelled`.

mod client;
mod headers;
pub mod http;
mod result;
mod rounds;
pub mod stdio;
mod tools;

pub use result::{META_PREFIX, call_result};
pub use tools::declaration;

use crate::{Host, Proposal, Session};
#[allow(deprecated)] // logging/setLevel: deprecated by SEP-2577, spoken by 2025-11-25 clients
use rmcp::model::SetLevelRequestParams;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler, ServiceExt};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The `_meta` key of a request that names its budget session (see [`crate::Host::session_named`]).
pub const SESSION_META: &str = "dev.vak/session";

/// How often a running call with a progress token reports progress.
pub const PROGRESS_INTERVAL: Duration = Duration::from_millis(500);

/// Why `vak serve` could not serve.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("a tool declaration is not a valid MCP tool: {0}")]
    Declaration(String),
    #[error("the MCP session ended with an error: {0}")]
    Session(String),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "refusing to listen on {addr}: it is not a loopback address; pass --allow-host NAME for each host name clients will use"
    )]
    NotLoopback { addr: String },
}

/// The `tools/list` of a host, built once: declarations do not change while the host serves.
#[derive(Clone)]
pub struct Catalog {
    tools: Arc<Vec<Tool>>,
    /// Tool names whose declaration carries an `outputSchema`.
    with_output: Arc<std::collections::BTreeSet<String>>,
}

impl Catalog {
    /// The declarations of every admitted tool of `host`.
    pub fn of(host: &Host) -> Result<Catalog, ServeError> {
        let lookup = |name: &str| host.tool(name);
        let mut tools = Vec::new();
        let mut with_output = std::collections::BTreeSet::new();
        // By name, on every call and every node: clients' prompt caches key on the list.
        let mut admitted: Vec<_> = host.tools().collect();
        admitted.sort_by(|a, b| a.name().cmp(b.name()));
        for tool in admitted {
            let decl = declaration(tool, &lookup, host.registry());
            headers::check_annotations(&decl["inputSchema"])
                .map_err(|e| ServeError::Declaration(format!("{}: {e}", tool.name())))?;
            if decl.get("outputSchema").is_some() {
                with_output.insert(tool.name().to_string());
            }
            tools.push(
                serde_json::from_value::<Tool>(decl)
                    .map_err(|e| ServeError::Declaration(format!("{}: {e}", tool.name())))?,
            );
        }
        Ok(Catalog {
            tools: Arc::new(tools),
            with_output: Arc::new(with_output),
        })
    }

    /// The declarations as JSON (what `tools/list` sends).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({ "tools": *self.tools })
    }
}

/// The MCP handler of one connection: one session of the host.
#[derive(Clone)]
pub struct VakMcp {
    session: Session,
    catalog: Catalog,
    /// The level `logging/setLevel` asked for on this connection (`None`: no log notifications).
    log_level: Arc<std::sync::Mutex<Option<crate::capabilities::client::LogLevel>>>,
    /// The sealing of input-required rounds' states.
    rounds: rounds::Rounds,
}

/// How a `tools/call` meets the client: over its connection, in a round, or not at all (a
/// `requestState` refused).
enum Prepared {
    Plain(client::McpChannel),
    /// A round, and its place among the call's rounds (none for a tool that is not run again).
    Round(RoundOf, Option<vak_core::record::Round>),
    Refused(rounds::StateRefused, client::McpChannel),
}

/// A stateless request's round: what its state is bound to, and its client.
struct RoundOf {
    binding: rounds::Binding,
    replay: Arc<rounds::Replay>,
}

impl VakMcp {
    /// A handler whose calls are charged to a new session on behalf of `principal`.
    pub fn new(host: &Host, catalog: Catalog, principal: Option<&str>) -> VakMcp {
        VakMcp {
            session: host.session(principal),
            catalog,
            log_level: Arc::default(),
            rounds: rounds::Rounds::of(host),
        }
    }

    /// The session this connection's calls are charged to.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The round of a stateless (2026-07-28) request of a tool granted `client` requests; a
    /// request of another era, or of another tool, meets the client as before.
    fn round_of(
        &self,
        request: &CallToolRequestParams,
        arguments: &serde_json::Value,
        context: &RequestContext<RoleServer>,
        logs: client::McpChannel,
        cancel: &tokio_util::sync::CancellationToken,
        (session, call_id): (&Session, &str),
    ) -> Prepared {
        let stateless = logs.stateless();
        let host = self.session.host();
        let Some(tool) = host.tool(&request.name).filter(|_| stateless) else {
            return Prepared::Plain(logs);
        };
        let asks_client = tool
            .grant
            .capabilities
            .contains_key(&crate::capabilities::Capability::Client);
        if !asks_client && !tool.grant.asks() && request.request_state.is_none() {
            return Prepared::Plain(logs);
        }
        let binding = rounds::Binding {
            tool: tool.name().to_string(),
            principal: self.session.principal().map(str::to_string),
            arguments_sha256: rounds::canonical_sha256(arguments),
            grant_sha256: host.grant_digest(tool),
        };
        let lookup = |name: &str| host.tool(name);
        let effects = (!tools::Hints::of(tool, &lookup).read_only).then(|| {
            format!(
                "tool `{}` may change things outside the call (a write root, an http method \
                 beyond GET, or a child run of such a tool), which running it again for each \
                 input-required round would repeat; vak asks the client in rounds only for \
                 tools without such effects: call it in a session (the 2025-11-25 handshake), \
                 where the client is asked during the call",
                tool.name()
            )
        });
        // The tool's own `ask` is answered at permission, before anything of it runs: its round
        // repeats nothing, and the answered state is single-use, so the approved call runs once,
        // whatever its effects. An approval asked during the call (a scope's: a root, an origin;
        // a child run's) comes after what the tool did before it, which a new round would repeat:
        // those go in rounds only for tools without effects.
        let asked_first = tool.grant.ask
            && !tool.grant.capabilities.values().any(|s| s.asks())
            && !tool.grant.grants(crate::capabilities::Capability::Invoke);
        let approvals_blocked = (tool.grant.asks() && !asked_first)
            .then(|| effects.clone())
            .flatten()
            .map(|_| {
                format!(
                    "tool `{}` asks for approval during the call (for a root, an origin or a \
                     child run) and may change things outside the call, which running it again \
                     for the approval's round would repeat; vak asks it only in a session (the \
                     2025-11-25 handshake)",
                    tool.name()
                )
            });
        let not_replayable = effects;
        // Rounds run for a tool without effects (its own requests and its approvals), and for
        // the approval asked before a tool with effects runs.
        let rounds_run =
            not_replayable.is_none() || (tool.grant.asks() && approvals_blocked.is_none());
        // Every round of one call is charged to one session: the one a request names, else one
        // named after the first round's call, sealed in the state so that a retry cannot start
        // afresh with a budget of its own. A tool that is not run again has no rounds.
        let named = context.meta.get(SESSION_META).is_some();
        let resumed = match &request.request_state {
            None if named || !rounds_run => rounds::Resumed::first(session.id().to_string()),
            None => rounds::Resumed::first(format!("rounds:{call_id}")),
            Some(state) => {
                match self
                    .rounds
                    .open(state, &binding, request.input_responses.as_ref())
                {
                    Ok(resumed) if named && resumed.session != session.id() => {
                        let refused = rounds::StateRefused::OtherBinding { what: "session" };
                        return Prepared::Refused(refused, logs);
                    }
                    Ok(resumed) => resumed,
                    Err(refused) => return Prepared::Refused(refused, logs),
                }
            }
        };
        let at = rounds_run.then(|| resumed.record());
        let replay = rounds::Replay::new(
            logs,
            resumed,
            context.meta.client_capabilities(),
            (not_replayable, approvals_blocked),
            cancel.clone(),
        );
        // A first request may bring answers before it is asked (SEP-2322); later rounds' answers
        // come only through their state.
        let replay = match &request.request_state {
            None => replay.with_unasked(request.input_responses.as_ref()),
            Some(_) => replay,
        };
        Prepared::Round(
            RoundOf {
                binding,
                replay: Arc::new(replay),
            },
            at,
        )
    }

    /// A request whose `requestState` is refused: its record (refused at the proposal stage, the
    /// tool never runs), and the JSON-RPC error `-32602` naming it (`data.kind`:
    /// `request_state_refused`, or `state_replayed` for a state used before).
    async fn refuse_state(
        &self,
        session: &Session,
        mut proposal: Proposal,
        refused: rounds::StateRefused,
        channel: Arc<dyn crate::capabilities::client::ClientChannel>,
    ) -> McpError {
        tracing::warn!(tool = %proposal.tool, reason = %refused, "a requestState was refused");
        let reason = refused.to_string();
        proposal.defect = Some(match refused {
            rounds::StateRefused::Replayed => {
                vak_core::proposal::ProposalError::RequestStateReplayed { reason }
            }
            _ => vak_core::proposal::ProposalError::RequestStateRefused { reason },
        });
        let cancel = tokio_util::sync::CancellationToken::new();
        let record = session.call_on_this_task(proposal, cancel, channel).await;
        McpError::invalid_params(
            format!("requestState refused: {refused}"),
            Some(serde_json::json!({
                "call_id": record.call_id,
                "kind": refused.kind(),
                "retryable": refused.retryable(),
                "journaled": matches!(record.journaled, Some(Ok(_))),
            })),
        )
    }

    async fn run_call(
        &self,
        mut request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let name = request.name.to_string();
        // MCP lets a call without arguments omit them: that is the empty object, not a repair.
        let arguments = serde_json::Value::Object(request.arguments.take().unwrap_or_default());
        let mut proposal = Proposal::new(name.clone(), arguments.to_string()).from_provider("mcp");
        proposal.renderer = crate::projection::RendererCaps::markdown();
        // A request may name the budget session it belongs to (what an earlier result's `_meta`
        // said): the way a stateless client keeps one budget across requests and nodes.
        let mut session = match context.meta.get(SESSION_META) {
            None => self.session.clone(),
            Some(serde_json::Value::String(id)) => self
                .session
                .host()
                .session_named(id, self.session.principal())
                .map_err(|e| McpError::invalid_params(e.to_string(), None))?,
            Some(_) => {
                return Err(McpError::invalid_params(
                    format!("`_meta.{SESSION_META}` is a string: a session id"),
                    None,
                ));
            }
        };
        // A cancellation from the client stops the guest at once; the record says `cancelled`.
        // So does a question put off to the next round (the record says `input_required`).
        let cancel = context.ct.child_token();
        // The request's own level (2026-07-28 `_meta`) wins over the connection's setLevel.
        let level = context
            .meta
            .log_level()
            .map(client::min_level)
            .or(*self.log_level.lock().unwrap_or_else(|p| p.into_inner()));
        // 2026-07-28 and later have no handshake and no requests from the server during a call.
        let stateless = context
            .protocol_version()
            .is_some_and(|v| v.as_str() >= rmcp::model::ProtocolVersion::V_2026_07_28.as_str());
        let (channel, log_task) =
            client::McpChannel::new(context.peer.clone(), level, &name, stateless);
        let (round, channel): (
            Option<RoundOf>,
            Arc<dyn crate::capabilities::client::ClientChannel>,
        ) = match self.round_of(
            &request,
            &arguments,
            &context,
            channel,
            &cancel,
            (&session, &proposal.call_id),
        ) {
            Prepared::Plain(channel) => (None, Arc::new(channel)),
            Prepared::Round(round, at) => {
                proposal.round = at;
                // The state is spent before its round runs: brought back again (here or on
                // another node), it is refused, and the round does not run twice.
                if let Some(issued) = round.replay.state_of()
                    && let Err(refused) = rounds::spend(session.host().store(), issued).await
                {
                    let channel = round.replay.clone();
                    return Err(self
                        .refuse_state(&session, proposal, refused, channel)
                        .await);
                }
                if round.replay.session() != session.id() {
                    session = session
                        .host()
                        .session_named(round.replay.session(), session.principal())
                        .map_err(|e| McpError::internal_error(e.to_string(), None))?;
                }
                let channel = round.replay.clone();
                (Some(round), channel)
            }
            Prepared::Refused(refused, channel) => {
                let channel = Arc::new(channel);
                return Err(self
                    .refuse_state(&session, proposal, refused, channel)
                    .await);
            }
        };
        // Run here; should this request be dropped (a client gone), the call is finished on a
        // task of its own, and still journals its record.
        let call = crate::FinishOnDrop::new(
            Box::pin(async move { session.call_on_this_task(proposal, cancel, channel).await }),
            None,
        );
        let record = match context.meta.get_progress_token() {
            None => call.await,
            Some(token) => report_progress(call, &context, token).await,
        };
        if let Some(task) = log_task {
            // The call is over and its channel dropped: the log lines go out before the result.
            let _ = tokio::time::timeout(Duration::from_secs(2), task).await;
        }
        if let Some(Err(e)) = &record.journaled {
            // An acknowledged call always has its record: without one, the call is not answered
            // as if it had gone well. A store out of reach is worth a retry; so is a call refused
            // because its `started` entry could not be written (its tool never ran).
            let not_run = record
                .error
                .as_ref()
                .is_some_and(|e| e.kind == crate::journal::chain::JOURNAL_UNAVAILABLE);
            let message = match not_run {
                true => format!("the call was not run and its record could not be journaled: {e}"),
                false => format!("the call's record could not be journaled: {e}"),
            };
            return Err(McpError::internal_error(
                message,
                Some(serde_json::json!({
                    "call_id": record.call_id,
                    "kind": e.kind,
                    "retryable": e.retryable || not_run,
                })),
            ));
        }
        if let Some(e) = record
            .error
            .as_ref()
            .filter(|e| e.kind == "unknown_tool" || e.kind == "tool_not_admitted")
        {
            // Not in `tools/list`: a protocol error, as for any name not listed; the message
            // says why when the component was loaded and refused.
            let message = if e.kind == "tool_not_admitted" {
                format!("no tool named `{name}` is served here: {}", e.message)
            } else {
                format!("no tool named `{name}` is served here")
            };
            return Err(McpError::invalid_params(
                message,
                Some(serde_json::json!({
                    "call_id": record.call_id,
                    "tools": self.catalog.tools.iter().map(|t| t.name.to_string()).collect::<Vec<_>>(),
                })),
            ));
        }
        // A round that ended on questions (the tool's, stopping it, or an approval's, before it
        // ran) is answered with them.
        if let Some(round) = &round
            && record.error.is_some()
            && round.replay.asks()
            && let Some(asked) =
                self.rounds
                    .input_required(&round.replay, &round.binding, &record.call_id)
        {
            return Ok(CallToolResponse::InputRequired(asked));
        }
        if let Some(round) = &round
            && record.error.is_some()
            && let Some(e) = missing_capability(&round.replay.missing(), &record.call_id)
        {
            // The tool asked for what the client did not declare and could not do without it.
            return Err(e);
        }
        let declared_output = self.catalog.with_output.contains(&name);
        let value = call_result(&record, declared_output);
        let result = result::typed(value).map_err(|e| {
            McpError::internal_error(format!("cannot encode the result: {e}"), None)
        })?;
        Ok(result.into())
    }
}

/// `-32021` (MCP 2026-07-28): the call needed client capabilities `missing`, which the request
/// did not declare in `_meta`; `None` when nothing was missing.
fn missing_capability(missing: &[&str], call_id: &str) -> Option<McpError> {
    if missing.is_empty() {
        return None;
    }
    let required: serde_json::Map<String, serde_json::Value> = missing
        .iter()
        .map(|m| (m.to_string(), serde_json::json!({})))
        .collect();
    Some(McpError::new(
        rmcp::model::ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
        format!(
            "the tool needs the client capabilities {} (declare them in `_meta` under \
             io.modelcontextprotocol/clientCapabilities)",
            missing.join(", ")
        ),
        Some(serde_json::json!({ "requiredCapabilities": required, "call_id": call_id })),
    ))
}

/// Await `call`, sending `notifications/progress` every [`PROGRESS_INTERVAL`]: the progress is
/// the seconds elapsed (there is no honest total to report before the tool says so).
async fn report_progress(
    mut call: crate::FinishOnDrop,
    context: &RequestContext<RoleServer>,
    token: rmcp::model::ProgressToken,
) -> crate::CallRecord {
    let started = Instant::now();
    let mut tick = tokio::time::interval_at(
        tokio::time::Instant::now() + PROGRESS_INTERVAL,
        PROGRESS_INTERVAL,
    );
    loop {
        tokio::select! {
            done = &mut call => return done,
            _ = tick.tick() => {
                let elapsed = started.elapsed().as_secs_f64();
                let param: Result<ProgressNotificationParam, _> = serde_json::from_value(serde_json::json!({
                    "progressToken": token,
                    "progress": elapsed,
                    "message": format!("running for {elapsed:.1} s"),
                }));
                if let Ok(param) = param
                    && let Err(e) = context.peer.notify_progress(param).await
                {
                    tracing::debug!(error = %e, "a progress notification was not sent");
                }
            }
        }
    }
}

impl ServerHandler for VakMcp {
    fn get_info(&self) -> ServerConfig {
        let mut implementation = Implementation::new("vak", env!("CARGO_PKG_VERSION"));
        implementation.title = Some("vak: a WebAssembly-sandboxed tool host".into());
        #[allow(deprecated)] // logging: deprecated by SEP-2577, spoken by 2025-11-25 clients
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_logging()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(implementation)
            .with_instructions(
                "Every tool runs in a fresh WebAssembly sandbox with only the capabilities its \
                 policy grants. A result with isError explains which lifecycle stage refused the \
                 call and whether a retry can help; fix the arguments when it lists schema \
                 violations. `_meta` carries the call id, the verification label and the host's \
                 receipts.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let mut list = self.catalog.to_json();
        // rmcp fills the cache hints for 2026-07-28 peers and strips this for older ones.
        list["resultType"] = serde_json::json!("complete");
        serde_json::from_value(list)
            .map_err(|e| McpError::internal_error(format!("cannot list the tools: {e}"), None))
    }

    // The transport checks a 2026-07-28 call's `Mcp-Param-*` headers against the tool's
    // `x-mcp-header` annotations (SEP-2243).
    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.catalog.tools.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.run_call(request, context).await
    }

    // What vak does not serve is a `-32601` that says so, and what is served instead.
    async fn on_custom_request(
        &self,
        request: rmcp::model::CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CustomResult, McpError> {
        Err(not_served(&request.method))
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListPromptsResult, McpError> {
        Err(not_served("prompts/list"))
    }

    async fn get_prompt(
        &self,
        _request: rmcp::model::GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetPromptResponse, McpError> {
        Err(not_served("prompts/get"))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourcesResult, McpError> {
        Err(not_served("resources/list"))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourceTemplatesResult, McpError> {
        Err(not_served("resources/templates/list"))
    }

    async fn read_resource(
        &self,
        _request: rmcp::model::ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceResponse, McpError> {
        Err(not_served("resources/read"))
    }

    async fn complete(
        &self,
        _request: rmcp::model::CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CompleteResult, McpError> {
        Err(not_served("completion/complete"))
    }

    #[allow(deprecated)] // logging/setLevel: deprecated by SEP-2577, spoken by 2025-11-25 clients
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        // Guest log lines of this level and above reach the client while its calls run.
        *self.log_level.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(client::min_level(request.level));
        Ok(())
    }
}

/// The methods `vak serve` answers.
pub const SERVED_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "logging/setLevel",
];

/// `-32601` for `method`, naming what is served instead.
fn not_served(method: &str) -> McpError {
    McpError::new(
        rmcp::model::ErrorCode::METHOD_NOT_FOUND,
        format!(
            "method `{}` is not served by vak; it serves {} (tools only: no prompts, resources or completions)",
            crate::projection::neutralise_line(&method.chars().take(128).collect::<String>()),
            SERVED_METHODS.join(", ")
        ),
        Some(
            serde_json::json!({ "method": method.chars().take(128).collect::<String>(), "served": SERVED_METHODS }),
        ),
    )
}

/// Serve one MCP connection over this process's stdin and stdout until the client closes it.
pub async fn serve_stdio(host: &Host, principal: Option<&str>) -> Result<(), ServeError> {
    let handler = VakMcp::new(host, Catalog::of(host)?, principal);
    // The reactor-driven pipes when stdin/stdout are FIFOs (as MCP clients launch servers): no
    // thread hand-off per message. Other streams fall back to the blocking handles.
    let (stdin, stdout) = rmcp::transport::stdio_pipes();
    let transport = stdio::LineTransport::new(tokio::io::BufReader::new(stdin), stdout);
    let running = handler
        .serve(transport)
        .await
        .map_err(|e| ServeError::Session(e.to_string()))?;
    running
        .waiting()
        .await
        .map_err(|e| ServeError::Session(e.to_string()))?;
    Ok(())
}

//! The policy: which tools may run, with which capabilities and scopes, under which caps.
//!
//! Deny by default: a tool the policy does not name is not admitted, a capability it does not
//! grant is not linked, a scope it does not list is refused at the broker. A policy is TOML with
//! unknown fields rejected (the error names the line), compiled once into [`Policy`].

use crate::capabilities::Capability;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// The policy the `vak` binary uses by default: the bundled tools get what they claim.
pub const DEFAULT_POLICY: &str = include_str!("../policy/default.toml");

/// Why a policy was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("cannot read policy file {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("policy {origin}: {message}")]
    Syntax { origin: String, message: String },
    #[error("policy {origin}, line {line}: tool `{tool}`: {message}")]
    Scope {
        origin: String,
        tool: String,
        /// The line of the tool's table (1-based).
        line: usize,
        message: String,
    },
}

impl PolicyError {
    /// The error placed at `line` (scope errors are found after parsing, by tool).
    fn at_line(mut self, at: usize) -> PolicyError {
        if let PolicyError::Scope { line, .. } = &mut self {
            *line = at;
        }
        self
    }
}

/// Caps on one call's resources; `None` falls back to the policy's defaults, then the host's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Caps {
    pub fuel: Option<u64>,
    pub memory_bytes: Option<u64>,
    pub wall_time_ms: Option<u64>,
    pub result_bytes: Option<u64>,
    /// Calls of this tool one session may make.
    pub calls_per_session: Option<u64>,
}

impl Caps {
    /// `self`, with fields it leaves unset taken from `fallback`.
    pub fn or(self, fallback: Caps) -> Caps {
        Caps {
            fuel: self.fuel.or(fallback.fuel),
            memory_bytes: self.memory_bytes.or(fallback.memory_bytes),
            wall_time_ms: self.wall_time_ms.or(fallback.wall_time_ms),
            result_bytes: self.result_bytes.or(fallback.result_bytes),
            calls_per_session: self.calls_per_session.or(fallback.calls_per_session),
        }
    }
}

/// Totals one session (a conversation, a turn: the embedder's unit) may use across its calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct SessionCaps {
    pub calls: Option<u64>,
    pub fuel: Option<u64>,
    pub wall_time_ms: Option<u64>,
    pub result_bytes: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    #[serde(default)]
    defaults: Caps,
    #[serde(default)]
    session: SessionCaps,
    #[serde(default)]
    tools: BTreeMap<String, toml::Spanned<ToolGrantFile>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolGrantFile {
    #[serde(default)]
    capabilities: CapabilitiesFile,
    #[serde(default)]
    caps: Caps,
    /// Only these principals may call the tool (absent: any principal).
    principals: Option<Vec<String>>,
    /// Every call waits for a person's approval before dispatch.
    #[serde(default)]
    ask: bool,
    /// How long an approval may take (default 120 s).
    approval_timeout_ms: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct CapabilitiesFile {
    clock: Option<ClockGrantFile>,
    http: Option<HttpGrantFile>,
    workspace: Option<WorkspaceGrantFile>,
    invoke: Option<InvokeGrantFile>,
    log: Option<LogGrantFile>,
    client: Option<ClientGrantFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClientGrantFile {
    /// `sampling`, `elicitation`.
    requests: Vec<String>,
}

/// What a `client` grant may ask of the caller's client.
pub const CLIENT_REQUESTS: [&str; 2] = ["sampling", "elicitation"];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct InvokeGrantFile {
    tools: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HttpGrantFile {
    origins: Vec<String>,
    #[serde(default)]
    allow_addresses: Vec<std::net::IpAddr>,
    max_body_bytes: Option<u64>,
    timeout_ms: Option<u64>,
    /// Credential aliases the tool may name, each bound to a host-held secret and an audience.
    #[serde(default)]
    credentials: BTreeMap<String, CredentialFile>,
    /// Origins (of `origins`) whose first request in a call waits for a person's approval.
    #[serde(default)]
    ask: Vec<String>,
    /// The methods the tool may use (default: all six the broker knows). A grant of reads only
    /// (`GET`, `HEAD`) makes the tool read-only as far as `http` goes.
    methods: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CredentialFile {
    /// The name in the secrets file (`vak secret set NAME`).
    secret: Option<String>,
    /// Or the environment variable holding the value.
    env: Option<String>,
    /// The exact origins the value may be sent to.
    audience: Vec<String>,
    /// Inject as this header (default `Authorization`) ...
    header: Option<String>,
    /// ... with this value, `{secret}` standing for the secret (default `Bearer {secret}` for
    /// `Authorization`, else `{secret}`);
    format: Option<String>,
    /// ... or as this query parameter instead.
    query: Option<String>,
}

/// One allowed origin (and optional path prefix) for `http`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// As the policy wrote it (what claims name).
    pub text: String,
    pub scheme: String,
    pub host: String,
    pub port: u16,
    /// Requests must have a path starting with this (`/` for any).
    pub path_prefix: String,
}

impl Origin {
    /// Whether `other` names the same origin and path prefix.
    fn same_place(&self, other: &Origin) -> bool {
        self.scheme == other.scheme
            && self.host == other.host
            && self.port == other.port
            && self.path_prefix == other.path_prefix
    }

    /// Whether `url` is inside this origin (and path prefix).
    pub fn allows(&self, url: &url::Url) -> bool {
        url.scheme() == self.scheme
            && url.host_str() == Some(self.host.as_str())
            && url.port_or_known_default() == Some(self.port)
            && url.path().starts_with(&self.path_prefix)
    }
}

/// Where a credential's value comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretRef {
    /// A name in the secrets file.
    Stored(String),
    /// An environment variable of the host process.
    Env(String),
}

/// How a credential's value is put into a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Injection {
    /// A header `name: prefix + value + suffix`.
    Header {
        name: String,
        prefix: String,
        suffix: String,
    },
    /// A query parameter `name=value`.
    Query { name: String },
}

/// A credential alias of an `http` grant: the secret it stands for, the origins it may be sent
/// to, and how it is injected. The guest only ever names the alias.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    pub alias: String,
    pub secret: SecretRef,
    pub audience: Vec<Origin>,
    pub injection: Injection,
}

impl Credential {
    /// Whether the value may be sent to `url`.
    pub fn audience_allows(&self, url: &url::Url) -> bool {
        self.audience.iter().any(|o| o.allows(url))
    }
}

impl HttpScope {
    /// The origin (as the policy wrote it) a request to `url` needs an approval for, if any.
    pub fn asks_for(&self, url: &url::Url) -> Option<&str> {
        self.origins
            .iter()
            .filter(|o| o.allows(url))
            .find(|o| self.ask.contains(&o.text))
            .map(|o| o.text.as_str())
    }
}

/// What an `http` grant allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpScope {
    pub origins: Vec<Origin>,
    /// Credential aliases, by alias.
    pub credentials: BTreeMap<String, Credential>,
    /// Origins (as written in `origins`) whose first request in a call needs an approval.
    pub ask: Vec<String>,
    /// Internal addresses the policy names explicitly (e.g. a test server on 127.0.0.1).
    pub allow_addresses: Vec<std::net::IpAddr>,
    pub max_body_bytes: u64,
    pub timeout_ms: u64,
    /// The methods granted (upper case, of [`HTTP_METHODS`]).
    pub methods: Vec<String>,
}

/// Every method the `http` broker knows.
pub const HTTP_METHODS: [&str; 6] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"];

/// The methods that only read.
pub const HTTP_READ_METHODS: [&str; 2] = ["GET", "HEAD"];

impl HttpScope {
    /// Whether the grant allows only requests that read (`GET`, `HEAD`).
    pub fn reads_only(&self) -> bool {
        self.methods
            .iter()
            .all(|m| HTTP_READ_METHODS.contains(&m.as_str()))
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkspaceGrantFile {
    roots: Vec<RootFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RootFile {
    name: String,
    path: std::path::PathBuf,
    #[serde(default)]
    mode: RootMode,
    /// The root's first use in a call waits for a person's approval.
    #[serde(default)]
    ask: bool,
}

/// What a tool may do in a workspace root.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RootMode {
    #[default]
    ReadOnly,
    ReadWrite,
}

/// One granted workspace root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    /// The name tools use for it.
    pub name: String,
    /// Where it is on the host (absolute, as the policy gave it).
    pub path: std::path::PathBuf,
    pub mode: RootMode,
    /// The root's first use in a call needs an approval.
    pub ask: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClockGrantFile {
    zones: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LogGrantFile {}

/// The scope of one granted capability.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// `clock`: the zones the tool may read (`AnyZone` for `"*"`).
    Zones(ZoneScope),
    /// `http`: origins, address exceptions and caps.
    Http(HttpScope),
    /// `invoke`: the tools it may call as child runs.
    Tools(Vec<String>),
    /// `workspace`: the roots the tool may use.
    Roots(Vec<Root>),
    /// `client`: the requests (`sampling`, `elicitation`) the tool may send the caller's client.
    Requests(Vec<String>),
    /// A capability without scopes (`log`).
    Unscoped,
}

/// Zones a `clock` grant covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ZoneScope {
    Any,
    Only(Vec<String>),
}

/// What the policy grants one tool, compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolGrant {
    pub tool: String,
    pub capabilities: BTreeMap<Capability, Scope>,
    /// The tool's caps with the policy defaults filled in.
    pub caps: Caps,
    /// Only these principals may call the tool (`None`: any principal).
    pub principals: Option<Vec<String>>,
    /// Every call needs a person's approval before dispatch.
    pub ask: bool,
    /// How long an approval may take.
    pub approval_timeout_ms: u64,
}

impl ToolGrant {
    /// Whether `capability` is granted.
    pub fn grants(&self, capability: Capability) -> bool {
        self.capabilities.contains_key(&capability)
    }

    /// Whether anything of the grant waits for an approval: the tool, a root or an origin.
    pub fn asks(&self) -> bool {
        self.ask
            || self.http().is_some_and(|h| !h.ask.is_empty())
            || matches!(self.capabilities.get(&Capability::Workspace), Some(Scope::Roots(roots)) if roots.iter().any(|r| r.ask))
    }

    /// Whether `principal` may call the tool.
    pub fn allows_principal(&self, principal: Option<&str>) -> bool {
        match &self.principals {
            None => true,
            Some(list) => principal.is_some_and(|p| list.iter().any(|q| q == p)),
        }
    }

    /// The `http` scope, if granted.
    pub fn http(&self) -> Option<&HttpScope> {
        match self.capabilities.get(&Capability::Http) {
            Some(Scope::Http(h)) => Some(h),
            _ => None,
        }
    }

    /// Whether the grant lets the tool invoke `tool` as a child run.
    pub fn may_invoke(&self, tool: &str) -> bool {
        matches!(self.capabilities.get(&Capability::Invoke), Some(Scope::Tools(t)) if t.iter().any(|x| x == tool))
    }

    /// The granted workspace root named `name`.
    pub fn root(&self, name: &str) -> Option<&Root> {
        match self.capabilities.get(&Capability::Workspace) {
            Some(Scope::Roots(roots)) => roots.iter().find(|r| r.name == name),
            _ => None,
        }
    }

    /// Whether the grant lets the tool send its caller's client `request` (`sampling`, `elicitation`).
    pub fn may_ask(&self, request: &str) -> bool {
        matches!(self.capabilities.get(&Capability::Client), Some(Scope::Requests(r)) if r.iter().any(|x| x == request))
    }

    /// Whether the grant covers reading the clock in `zone`.
    pub fn clock_zone_allowed(&self, zone: &str) -> bool {
        match self.capabilities.get(&Capability::Clock) {
            Some(Scope::Zones(ZoneScope::Any)) => true,
            Some(Scope::Zones(ZoneScope::Only(zones))) => zones.iter().any(|z| z == zone),
            _ => false,
        }
    }

    /// Whether the grant covers a claim of `capability` with `scopes`; `Err` says what is missing.
    pub fn covers(&self, capability: Capability, scopes: &[String]) -> Result<(), String> {
        let Some(scope) = self.capabilities.get(&capability) else {
            return Err(format!("the policy does not grant `{}`", capability.name()));
        };
        match scope {
            Scope::Unscoped => Ok(()),
            Scope::Http(h) => outside(scopes, "http", "origins", |s| {
                h.origins.iter().any(|o| o.text == s)
            }),
            Scope::Tools(tools) => {
                outside(scopes, "invoke", "tools", |s| tools.iter().any(|t| t == s))
            }
            Scope::Requests(requests) => outside(scopes, "client", "requests", |s| {
                requests.iter().any(|r| r == s)
            }),
            Scope::Roots(roots) => outside(scopes, "workspace", "roots", |s| {
                roots.iter().any(|r| r.name == s)
            }),
            Scope::Zones(ZoneScope::Any) => Ok(()),
            Scope::Zones(ZoneScope::Only(zones)) => {
                let outside: Vec<&str> = scopes
                    .iter()
                    .filter(|s| !zones.contains(s))
                    .map(String::as_str)
                    .collect();
                if outside.is_empty() {
                    Ok(())
                } else {
                    Err(format!(
                        "`{}` is claimed for {:?} but granted only for {:?}",
                        capability.name(),
                        outside,
                        zones
                    ))
                }
            }
        }
    }
}

/// A compiled policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Where it came from (a path, or `built-in default`), for messages.
    pub origin: String,
    pub defaults: Caps,
    /// Totals per session.
    pub session: SessionCaps,
    pub tools: BTreeMap<String, Arc<ToolGrant>>,
}

impl Policy {
    /// The built-in default policy.
    pub fn default_policy() -> Policy {
        // The built-in text is tested below; failing to parse it is a build defect.
        Policy::parse(DEFAULT_POLICY, "built-in default").expect("the built-in policy parses")
    }

    /// A policy that grants nothing: every tool is refused.
    pub fn deny_all() -> Policy {
        Policy {
            origin: "deny-all".into(),
            defaults: Caps::default(),
            session: SessionCaps::default(),
            tools: BTreeMap::new(),
        }
    }

    /// Read and compile a policy file.
    pub fn load(path: &Path) -> Result<Policy, PolicyError> {
        let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Policy::parse(&text, &path.display().to_string())
    }

    /// Compile a policy from TOML text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Policy, PolicyError> {
        let file: PolicyFile = toml::from_str(text).map_err(|e| PolicyError::Syntax {
            origin: origin.to_string(),
            message: e.to_string().trim_end().to_string(),
        })?;
        let mut tools = BTreeMap::new();
        for (name, spanned) in file.tools {
            let line = 1 + text[..spanned.span().start.min(text.len())]
                .matches('\n')
                .count();
            let grant = spanned.into_inner();
            let grant = Self::compile_grant(origin, name, grant, &file.defaults)
                .map_err(|e| e.at_line(line))?;
            tools.insert(grant.tool.clone(), Arc::new(grant));
        }
        Ok(Policy {
            origin: origin.to_string(),
            defaults: file.defaults,
            session: file.session,
            tools,
        })
    }

    /// One tool's table, checked and compiled.
    fn compile_grant(
        origin: &str,
        name: String,
        grant: ToolGrantFile,
        defaults: &Caps,
    ) -> Result<ToolGrant, PolicyError> {
        {
            let mut capabilities = BTreeMap::new();
            if let Some(clock) = grant.capabilities.clock {
                capabilities.insert(
                    Capability::Clock,
                    Scope::Zones(compile_zones(origin, &name, clock.zones)?),
                );
            }
            if let Some(h) = grant.capabilities.http {
                capabilities.insert(
                    Capability::Http,
                    Scope::Http(compile_http(origin, &name, h)?),
                );
            }
            if let Some(ws) = grant.capabilities.workspace {
                capabilities.insert(
                    Capability::Workspace,
                    Scope::Roots(compile_roots(origin, &name, ws.roots)?),
                );
            }
            if let Some(inv) = grant.capabilities.invoke {
                if inv.tools.iter().any(|t| t == &name) {
                    return Err(PolicyError::Scope {
                        origin: origin.into(),
                        tool: name.clone(),
                        line: 0,
                        message: "`invoke.tools` names the tool itself; a tool may not call itself"
                            .into(),
                    });
                }
                capabilities.insert(Capability::Invoke, Scope::Tools(inv.tools));
            }
            if grant.capabilities.log.is_some() {
                capabilities.insert(Capability::Log, Scope::Unscoped);
            }
            if let Some(client) = grant.capabilities.client {
                if let Some(bad) = client
                    .requests
                    .iter()
                    .find(|r| !CLIENT_REQUESTS.contains(&r.as_str()))
                {
                    return Err(PolicyError::Scope {
                        origin: origin.into(),
                        tool: name.clone(),
                        line: 0,
                        message: format!(
                            "`client.requests` names {bad:?}; the requests are {CLIENT_REQUESTS:?}"
                        ),
                    });
                }
                capabilities.insert(Capability::Client, Scope::Requests(client.requests));
            }
            Ok(ToolGrant {
                tool: name,
                capabilities,
                caps: grant.caps.or(*defaults),
                principals: grant.principals,
                ask: grant.ask,
                approval_timeout_ms: grant.approval_timeout_ms.unwrap_or(120_000),
            })
        }
    }

    /// The grant for `tool`, if the policy names it.
    pub fn grant(&self, tool: &str) -> Option<&Arc<ToolGrant>> {
        self.tools.get(tool)
    }
}

/// `Err` naming the claimed scopes that `granted` does not cover.
fn outside(
    claimed: &[String],
    capability: &str,
    what: &str,
    granted: impl Fn(&str) -> bool,
) -> Result<(), String> {
    let missing: Vec<&str> = claimed
        .iter()
        .map(String::as_str)
        .filter(|s| !granted(s))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "`{capability}` is claimed for {what} {missing:?}, which the policy does not grant"
        ))
    }
}

fn compile_http(origin: &str, tool: &str, h: HttpGrantFile) -> Result<HttpScope, PolicyError> {
    let fail = |message: String| PolicyError::Scope {
        origin: origin.into(),
        tool: tool.into(),
        line: 0,
        message,
    };
    if h.origins.is_empty() {
        return Err(fail(
            "`http.origins` is empty; list the origins the tool may fetch from".into(),
        ));
    }
    let mut origins: Vec<Origin> = Vec::new();
    for text in h.origins {
        let parsed = parse_origin(&text, "http.origins").map_err(fail)?;
        if let Some(o) = origins.iter().find(|o| o.same_place(&parsed)) {
            return Err(fail(format!(
                "`http.origins` lists {text:?} and {:?}, the same origin twice",
                o.text
            )));
        }
        origins.push(parsed);
    }
    let mut credentials = BTreeMap::new();
    for (alias, c) in h.credentials {
        let credential = compile_credential(&alias, c, &origins).map_err(fail)?;
        credentials.insert(alias, credential);
    }
    for text in &h.ask {
        if !origins.iter().any(|o| &o.text == text) {
            return Err(fail(format!(
                "`http.ask` names {text:?}, which is not one of `http.origins`"
            )));
        }
    }
    let methods = match h.methods {
        None => HTTP_METHODS.iter().map(|m| m.to_string()).collect(),
        Some(list) => {
            let mut methods = Vec::new();
            for m in list {
                let upper = m.to_ascii_uppercase();
                if !HTTP_METHODS.contains(&upper.as_str()) {
                    return Err(fail(format!(
                        "`http.methods` names {m:?}, which is not one of {HTTP_METHODS:?}"
                    )));
                }
                if !methods.contains(&upper) {
                    methods.push(upper);
                }
            }
            if methods.is_empty() {
                return Err(fail(
                    "`http.methods` is empty: grant no `http` instead".to_string(),
                ));
            }
            methods
        }
    };
    Ok(HttpScope {
        methods,
        ask: h.ask,
        origins,
        credentials,
        allow_addresses: h.allow_addresses,
        max_body_bytes: h.max_body_bytes.unwrap_or(1 << 20),
        timeout_ms: h.timeout_ms.unwrap_or(10_000),
    })
}

/// One origin entry (`field` names where it was written, for the message).
fn parse_origin(text: &str, field: &str) -> Result<Origin, String> {
    let url = url::Url::parse(text).map_err(|e| format!("`{field}` entry {text:?}: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("`{field}` entry {text:?} is not http or https"));
    }
    let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
        return Err(format!("`{field}` entry {text:?} has no host"));
    };
    if url.query().is_some() || url.fragment().is_some() || !url.username().is_empty() {
        return Err(format!(
            "`{field}` entry {text:?} may not carry a query, fragment or user"
        ));
    }
    Ok(Origin {
        scheme: url.scheme().to_string(),
        host: host.to_string(),
        port,
        path_prefix: url.path().to_string(),
        text: text.to_string(),
    })
}

/// One credential alias, checked: a valid alias and secret name, exactly one source, an
/// audience inside the grant's origins (a value is never bound to where the tool cannot go),
/// and one way to inject it.
fn compile_credential(
    alias: &str,
    c: CredentialFile,
    origins: &[Origin],
) -> Result<Credential, String> {
    let field = format!("http.credentials.{alias}");
    if !crate::secrets::valid_name(alias) {
        return Err(format!(
            "`{field}`: an alias is 1-64 characters of A-Z, a-z, 0-9, '-' and '_', starting with a letter"
        ));
    }
    let secret = match (c.secret, c.env) {
        (Some(name), None) if crate::secrets::valid_name(&name) => SecretRef::Stored(name),
        (Some(name), None) => {
            return Err(format!("`{field}.secret` {name:?} is not a secret name"));
        }
        (None, Some(var)) if !var.is_empty() && !var.contains('=') => SecretRef::Env(var),
        (None, Some(var)) => return Err(format!("`{field}.env` {var:?} is not a variable name")),
        _ => return Err(format!("`{field}` needs exactly one of `secret` and `env`")),
    };
    if c.audience.is_empty() {
        return Err(format!(
            "`{field}.audience` is empty; list the origins the value may go to"
        ));
    }
    let mut audience = Vec::new();
    for text in &c.audience {
        let o = parse_origin(text, &format!("{field}.audience"))?;
        if !origins.iter().any(|g| {
            g.scheme == o.scheme
                && g.host == o.host
                && g.port == o.port
                && o.path_prefix.starts_with(&g.path_prefix)
        }) {
            return Err(format!(
                "`{field}.audience` entry {text:?} is outside the grant's `http.origins`"
            ));
        }
        audience.push(o);
    }
    let injection = match (c.header, c.query) {
        (Some(_), Some(_)) => {
            return Err(format!(
                "`{field}` sets both `header` and `query`; choose one"
            ));
        }
        (None, Some(_)) if c.format.is_some() => {
            return Err(format!(
                "`{field}.format` applies to a header, not to `query`"
            ));
        }
        (None, Some(name)) if !name.is_empty() => Injection::Query { name },
        (None, Some(_)) => return Err(format!("`{field}.query` is empty")),
        (header, None) => {
            let name = header.unwrap_or_else(|| "Authorization".into());
            if hyper::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
                return Err(format!("`{field}.header` {name:?} is not a header name"));
            }
            let default = if name.eq_ignore_ascii_case("authorization") {
                "Bearer {secret}"
            } else {
                "{secret}"
            };
            let format = c.format.unwrap_or_else(|| default.into());
            let Some((prefix, suffix)) = format.split_once("{secret}") else {
                return Err(format!("`{field}.format` {format:?} has no `{{secret}}`"));
            };
            if suffix.contains("{secret}") {
                return Err(format!("`{field}.format` names `{{secret}}` twice"));
            }
            Injection::Header {
                name,
                prefix: prefix.into(),
                suffix: suffix.into(),
            }
        }
    };
    Ok(Credential {
        alias: alias.to_string(),
        secret,
        audience,
        injection,
    })
}

fn compile_roots(origin: &str, tool: &str, roots: Vec<RootFile>) -> Result<Vec<Root>, PolicyError> {
    let fail = |message: String| PolicyError::Scope {
        origin: origin.into(),
        tool: tool.into(),
        line: 0,
        message,
    };
    let mut out: Vec<Root> = Vec::new();
    for r in roots {
        if r.name.is_empty() || out.iter().any(|o| o.name == r.name) {
            return Err(fail(format!(
                "workspace root name {:?} is empty or used twice",
                r.name
            )));
        }
        if !r.path.is_absolute() {
            return Err(fail(format!(
                "workspace root {:?} has a relative path {}; give an absolute one",
                r.name,
                r.path.display()
            )));
        }
        // Overlapping roots would reach the same files under two names, so a read-only root
        // inside (or around) a read-write one would not be read-only; one root per tree.
        if let Some(o) = out
            .iter()
            .find(|o| o.path.starts_with(&r.path) || r.path.starts_with(&o.path))
        {
            return Err(fail(format!(
                "workspace roots {:?} ({}) and {:?} ({}) overlap; grant each tree once",
                o.name,
                o.path.display(),
                r.name,
                r.path.display()
            )));
        }
        out.push(Root {
            name: r.name,
            path: r.path,
            mode: r.mode,
            ask: r.ask,
        });
    }
    Ok(out)
}

fn compile_zones(origin: &str, tool: &str, zones: Vec<String>) -> Result<ZoneScope, PolicyError> {
    if zones.is_empty() {
        return Err(PolicyError::Scope {
            origin: origin.into(),
            tool: tool.into(),
            line: 0,
            message: "`clock.zones` is empty; list zones or use [\"*\"] for any zone".into(),
        });
    }
    if zones.iter().any(|z| z == "*") {
        return Ok(ZoneScope::Any);
    }
    for zone in &zones {
        if jiff::tz::TimeZone::get(zone).is_err() {
            return Err(PolicyError::Scope {
                origin: origin.into(),
                tool: tool.into(),
                line: 0,
                message: format!("`clock.zones` names {zone:?}, which is not a known IANA zone"),
            });
        }
    }
    Ok(ZoneScope::Only(zones))
}

#[cfg(test)]
mod tests {

    #[test]
    fn credentials_are_bound_to_a_secret_an_audience_and_an_injection() {
        let text = r#"
[tools.weather.capabilities.http]
origins = ["https://api.example.com", "https://cdn.example.com"]
[tools.weather.capabilities.http.credentials.api]
secret = "weather_key"
audience = ["https://api.example.com/v1/"]
[tools.weather.capabilities.http.credentials.legacy]
env = "LEGACY_KEY"
audience = ["https://api.example.com"]
query = "key"
"#;
        let p = Policy::parse(text, "t").unwrap();
        let http = p.grant("weather").unwrap().http().unwrap();
        let api = &http.credentials["api"];
        assert_eq!(api.secret, SecretRef::Stored("weather_key".into()));
        assert_eq!(
            api.injection,
            Injection::Header {
                name: "Authorization".into(),
                prefix: "Bearer ".into(),
                suffix: String::new()
            }
        );
        let url = |u: &str| url::Url::parse(u).unwrap();
        assert!(api.audience_allows(&url("https://api.example.com/v1/forecast")));
        assert!(!api.audience_allows(&url("https://api.example.com/v2/")));
        assert!(!api.audience_allows(&url("https://cdn.example.com/v1/")));
        assert!(!api.audience_allows(&url("http://api.example.com/v1/")));
        assert_eq!(
            http.credentials["legacy"].injection,
            Injection::Query { name: "key".into() }
        );

        let bad = |table: &str, needle: &str| {
            let text = format!(
                "[tools.w.capabilities.http]\norigins = [\"https://api.example.com\"]\n[tools.w.capabilities.http.credentials.a]\n{table}\n"
            );
            let err = Policy::parse(&text, "t").unwrap_err().to_string();
            assert!(err.contains(needle), "{table}: {err}");
        };
        bad(
            r#"audience = ["https://api.example.com"]"#,
            "exactly one of `secret` and `env`",
        );
        bad(
            "secret = \"k\"\nenv = \"K\"\naudience = [\"https://api.example.com\"]",
            "exactly one of",
        );
        bad("secret = \"k\"\naudience = []", "audience` is empty");
        bad(
            "secret = \"k\"\naudience = [\"https://evil.example\"]",
            "outside the grant's `http.origins`",
        );
        bad(
            "secret = \"k\"\naudience = [\"https://api.example.com\"]\nformat = \"Token\"",
            "has no `{secret}`",
        );
        bad(
            "secret = \"k\"\naudience = [\"https://api.example.com\"]\nheader = \"X\"\nquery = \"q\"",
            "both `header` and `query`",
        );
        bad(
            "secret = \"../k\"\naudience = [\"https://api.example.com\"]",
            "is not a secret name",
        );
        bad(
            "secret = \"k\"\naudience = [\"https://api.example.com\"]\nvalue = \"x\"",
            "unknown field `value`",
        );
    }

    use super::*;

    #[test]
    fn the_default_policy_grants_the_bundled_tools() {
        let p = Policy::default_policy();
        let clock = p.grant("clock").expect("clock is granted");
        assert!(clock.clock_zone_allowed("Europe/Paris"));
        assert!(!clock.grants(Capability::Log));
        assert_eq!(clock.caps.fuel, Some(500_000_000));
        assert!(p.grant("stats").is_some_and(|g| g.capabilities.is_empty()));
        assert!(p.grant("unknown").is_none());
    }

    #[test]
    fn unknown_fields_are_rejected_with_their_line() {
        let err = Policy::parse(
            "[tools.clock]\ncapabilities.clock = { zones = [\"*\"] }\nfuell = 3\n",
            "t",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("line 3"), "{err}");
        assert!(err.contains("fuell"), "{err}");
        let err = Policy::parse("[tools.x]\ncapabilities.sockets = {}\n", "t")
            .unwrap_err()
            .to_string();
        assert!(err.contains("sockets"), "{err}");
    }

    #[test]
    fn zone_scopes_are_checked() {
        let err = Policy::parse(
            "[tools.c]\ncapabilities.clock = { zones = [\"Mars/Olympus\"] }\n",
            "t",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("Mars/Olympus"), "{err}");
        let p = Policy::parse(
            "[tools.c]\ncapabilities.clock = { zones = [\"Europe/Paris\"] }\n",
            "t",
        )
        .unwrap();
        let g = p.grant("c").unwrap();
        assert!(g.clock_zone_allowed("Europe/Paris"));
        assert!(!g.clock_zone_allowed("Asia/Tokyo"));
        assert!(
            g.covers(Capability::Clock, &["Europe/Paris".into()])
                .is_ok()
        );
        assert!(g.covers(Capability::Clock, &["*".into()]).is_err());
    }

    #[test]
    fn ask_marks_a_tool_a_root_or_an_origin_and_must_name_a_granted_origin() {
        let p = Policy::parse(
            "[tools.f]\nask = true\napproval_timeout_ms = 5000\n\
             capabilities.http = { origins = [\"https://a.example\", \"https://b.example/api/\"], ask = [\"https://b.example/api/\"] }\n\
             capabilities.workspace = { roots = [{ name = \"w\", path = \"/srv/w\", mode = \"read-write\", ask = true }] }\n",
            "t",
        )
        .unwrap();
        let g = p.grant("f").unwrap();
        assert!(g.ask && g.approval_timeout_ms == 5000);
        assert!(g.root("w").unwrap().ask);
        let http = g.http().unwrap();
        let url = |u: &str| url::Url::parse(u).unwrap();
        assert_eq!(
            http.asks_for(&url("https://b.example/api/x")),
            Some("https://b.example/api/")
        );
        assert_eq!(http.asks_for(&url("https://a.example/x")), None);
        let default = Policy::parse("[tools.f]\n", "t").unwrap();
        let g = default.grant("f").unwrap();
        assert!(!g.ask && g.approval_timeout_ms == 120_000);
        let err = Policy::parse(
            "[tools.f]\ncapabilities.http = { origins = [\"https://a.example\"], ask = [\"https://c.example\"] }\n",
            "t",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("`http.ask` names \"https://c.example\""),
            "{err}"
        );
        assert!(err.contains("line 1"), "{err}");
    }
}

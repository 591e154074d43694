//! The `http` section of a tool's policy: the origins it may fetch from (with path prefixes),
//! the methods, the internal addresses named as exceptions, the body and time caps, the origins
//! that wait for a person's approval, and the credential aliases bound to host-held secrets.

use crate::capabilities::grant::{Effects, GrantedScope, Scope, ToolGrant, same_as};
use crate::capabilities::{Capability, SectionError};
use serde::Deserialize;
use std::collections::BTreeMap;

/// The policy section, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpGrantFile {
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

/// The section compiled: origins, credentials, methods and caps, each checked.
pub fn compile(h: HttpGrantFile) -> Result<HttpScope, String> {
    if h.origins.is_empty() {
        return Err("`http.origins` is empty; list the origins the tool may fetch from".into());
    }
    let mut origins: Vec<Origin> = Vec::new();
    for text in h.origins {
        let parsed = parse_origin(&text, "http.origins")?;
        if let Some(o) = origins.iter().find(|o| o.same_place(&parsed)) {
            return Err(format!(
                "`http.origins` lists {text:?} and {:?}, the same origin twice",
                o.text
            ));
        }
        origins.push(parsed);
    }
    let mut credentials = BTreeMap::new();
    for (alias, c) in h.credentials {
        let credential = compile_credential(&alias, c, &origins)?;
        credentials.insert(alias, credential);
    }
    for text in &h.ask {
        if !origins.iter().any(|o| &o.text == text) {
            return Err(format!(
                "`http.ask` names {text:?}, which is not one of `http.origins`"
            ));
        }
    }
    let methods = match h.methods {
        None => HTTP_METHODS.iter().map(|m| m.to_string()).collect(),
        Some(list) => {
            let mut methods = Vec::new();
            for m in list {
                let upper = m.to_ascii_uppercase();
                if !HTTP_METHODS.contains(&upper.as_str()) {
                    return Err(format!(
                        "`http.methods` names {m:?}, which is not one of {HTTP_METHODS:?}"
                    ));
                }
                if !methods.contains(&upper) {
                    methods.push(upper);
                }
            }
            if methods.is_empty() {
                return Err("`http.methods` is empty: grant no `http` instead".to_string());
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
pub(crate) fn parse_origin(text: &str, field: &str) -> Result<Origin, String> {
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

impl super::super::GrantSection for super::Http {
    fn capability(&self) -> Capability {
        Capability::Http
    }

    fn compile(&self, _tool: &str, section: toml::Value) -> Result<Scope, SectionError> {
        compile(super::super::section(section)?)
            .map(Scope::new)
            .map_err(SectionError::Scope)
    }
}

impl GrantedScope for HttpScope {
    /// Whether the scope covers a claim of the origins `claimed` (as the policy writes them).
    fn covers(&self, claimed: &[String]) -> Result<(), String> {
        super::super::claims::outside(claimed, "http", "origins", |s| {
            self.origins.iter().any(|o| o.text == s)
        })
    }

    fn describe(&self) -> String {
        let addresses: Vec<String> = self.allow_addresses.iter().map(|a| a.to_string()).collect();
        format!(
            "origins {}; methods {}; internal addresses allowed: {}; body ≤ {} B, {} ms",
            self.origins
                .iter()
                .map(|o| o.text.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            self.methods.join(", "),
            if addresses.is_empty() {
                "none".to_string()
            } else {
                addresses.join(", ")
            },
            self.max_body_bytes,
            self.timeout_ms
        )
    }

    /// Requests reach the network; a method other than `GET`/`HEAD` may change what is there,
    /// and `PUT`/`DELETE` may destroy it.
    fn effects(&self) -> Effects {
        Effects {
            changes: !self.reads_only(),
            destructive: self.methods.iter().any(|m| m == "PUT" || m == "DELETE"),
            open_world: true,
            invokes: Vec::new(),
        }
    }

    fn asks(&self) -> bool {
        !self.ask.is_empty()
    }

    fn same(&self, other: &dyn GrantedScope) -> bool {
        same_as(self, other)
    }
}

impl ToolGrant {
    /// The `http` scope, if granted.
    pub fn http(&self) -> Option<&HttpScope> {
        self.scope(Capability::Http)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;

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
}

//! `vak:tool/http`: fetch from the origins the policy allows, with the host as the only one who
//! resolves names and opens connections.
//!
//! Egress rules, each hop of a redirect chain checked as a new request:
//! - the URL's scheme, host, port and path prefix must match an origin of the grant;
//! - the host resolves the name itself and refuses the request if any address is internal
//!   (loopback, private, link-local, unique-local, CGNAT, unspecified, multicast, documentation,
//!   IPv4-mapped or -embedded forms of those) unless the policy names that exact address; it then
//!   connects to the address it checked, never resolving again;
//! - the guest cannot set `Host` (or other framing headers); credentials-like headers are dropped
//!   on a hop to another origin;
//! - the body and the time are capped; the call's own deadline also applies.
//!
//! Every hop leaves a receipt (refusals too); the final one's digest is the SHA-256 of the body.

use super::{Broker, Capability, Refusal};
use crate::dispatch::bindings::vak::tool::http::{CredentialInfo, Header, Host, Request, Response};
use crate::dispatch::bindings::vak::tool::types::CapabilityError;
use crate::policy::{Credential, HttpScope, Injection};
use crate::secrets::SecretValue;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use serde_json::json;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// Redirect hops followed (each checked as a new request).
pub const MAX_REDIRECTS: usize = 5;
const METHODS: [&str; 6] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"];
/// Headers the host owns; a guest setting one is refused.
const HOST_HEADERS: [&str; 6] = [
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "upgrade",
    "te",
];
/// The header a guest names a credential alias with; the host removes it and injects the
/// credential's value where the policy says, only for an origin of its audience.
pub const CREDENTIAL_HEADER: &str = "vak-credential";
/// Headers dropped on a redirect to another origin.
const CREDENTIAL_HEADERS: [&str; 4] = [
    "authorization",
    "cookie",
    "proxy-authorization",
    "x-api-key",
];

/// Why `ip` is internal, if it is.
pub fn internal(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => internal_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return internal_v4(v4).map(|_| "an IPv4-mapped internal address");
            }
            let s = v6.segments();
            if v6.is_loopback() {
                Some("loopback")
            } else if v6.is_unspecified() {
                Some("unspecified")
            } else if s[0] & 0xfe00 == 0xfc00 {
                Some("unique-local")
            } else if s[0] & 0xffc0 == 0xfe80 {
                Some("link-local")
            } else if s[0] & 0xff00 == 0xff00 {
                Some("multicast")
            } else if s[0] == 0x2001 && s[1] == 0x0db8 {
                Some("documentation")
            } else if s[..6] == [0, 0, 0, 0, 0, 0] || (s[0] == 0x64 && s[1] == 0xff9b) {
                // IPv4-compatible (deprecated) and NAT64 forms carry an IPv4 address inside.
                let v4 =
                    Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
                internal_v4(v4).map(|_| "an IPv4-embedding internal address")
            } else {
                None
            }
        }
    }
}

fn internal_v4(v4: Ipv4Addr) -> Option<&'static str> {
    let o = v4.octets();
    if v4.is_loopback() {
        Some("loopback")
    } else if v4.is_private() {
        Some("private")
    } else if v4.is_link_local() {
        Some("link-local")
    } else if v4.is_unspecified() || o[0] == 0 {
        Some("this-network")
    } else if v4.is_broadcast() || v4.is_multicast() || o[0] >= 240 {
        Some("broadcast, multicast or reserved")
    } else if o[0] == 100 && (o[1] & 0xc0) == 64 {
        Some("shared (CGNAT)")
    } else if o[0] == 198 && (o[1] & 0xfe) == 18 {
        Some("benchmarking")
    } else if v4.is_documentation() || (o[0] == 192 && o[1] == 0 && o[2] == 0) {
        Some("documentation or protocol-assignment")
    } else {
        None
    }
}

fn tls() -> tokio_rustls::TlsConnector {
    static CONFIG: OnceLock<Arc<tokio_rustls::rustls::ClientConfig>> = OnceLock::new();
    let config = CONFIG.get_or_init(|| {
        let mut roots = tokio_rustls::rustls::RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
        let config = tokio_rustls::rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map(|b| b.with_root_certificates(roots).with_no_client_auth());
        Arc::new(config.unwrap_or_else(|_| {
            // The ring provider supports the default protocol versions; this branch is unreachable
            // in practice, and an empty config would only make every TLS handshake fail.
            tokio_rustls::rustls::ClientConfig::builder()
                .with_root_certificates(tokio_rustls::rustls::RootCertStore::empty())
                .with_no_client_auth()
        }))
    });
    tokio_rustls::TlsConnector::from(config.clone())
}

/// What one hop produced.
enum Hop {
    Redirect { status: u16, location: url::Url },
    Done(Response),
}

struct Refused {
    error: CapabilityError,
    outcome: serde_json::Value,
}

fn refused(error: CapabilityError) -> Refused {
    let (key, m) = match &error {
        CapabilityError::Denied(m) => ("refused", m),
        CapabilityError::Revoked(m) => ("revoked", m),
        CapabilityError::Invalid(m) => ("invalid", m),
        CapabilityError::Failed(m) => ("failed", m),
    };
    Refused {
        outcome: json!({ key: m }),
        error,
    }
}

impl Broker {
    fn http_scope(&self) -> Result<HttpScope, CapabilityError> {
        let grant = self.authorize(Capability::Http).map_err(|r| match r {
            Refusal::Denied(m) => CapabilityError::Denied(m),
            Refusal::Revoked(m) => CapabilityError::Revoked(m),
        })?;
        grant
            .http()
            .cloned()
            .ok_or_else(|| CapabilityError::Denied("no http scope is granted".into()))
    }

    /// Resolve `url`'s host and return one address to connect to, all addresses checked.
    async fn checked_address(
        scope: &HttpScope,
        url: &url::Url,
    ) -> Result<SocketAddr, CapabilityError> {
        let port = url.port_or_known_default().unwrap_or(80);
        let addresses: Vec<SocketAddr> = match url.host() {
            Some(url::Host::Ipv4(ip)) => vec![SocketAddr::new(IpAddr::V4(ip), port)],
            Some(url::Host::Ipv6(ip)) => vec![SocketAddr::new(IpAddr::V6(ip), port)],
            Some(url::Host::Domain(name)) => tokio::net::lookup_host((name, port))
                .await
                .map_err(|e| CapabilityError::Failed(format!("cannot resolve {name:?}: {e}")))?
                .collect(),
            None => return Err(CapabilityError::Invalid("the URL has no host".into())),
        };
        if addresses.is_empty() {
            return Err(CapabilityError::Failed(
                "the name resolved to no address".into(),
            ));
        }
        for a in &addresses {
            if let Some(why) = internal(a.ip())
                && !scope.allow_addresses.contains(&a.ip())
            {
                return Err(CapabilityError::Denied(format!(
                    "{} resolves to {}, a {why} address the policy does not name",
                    url.host_str().unwrap_or(""),
                    a.ip()
                )));
            }
        }
        Ok(addresses[0])
    }

    async fn hop(
        scope: &HttpScope,
        method: &str,
        url: &url::Url,
        headers: &[Header],
        body: Option<&[u8]>,
        inject: Option<(&Injection, &SecretValue)>,
    ) -> Result<Hop, CapabilityError> {
        let address = Self::checked_address(scope, url).await?;
        let origin = origin_of(url);
        let failed = |e: &dyn std::fmt::Display| CapabilityError::Failed(format!("{origin}: {e}"));
        let stream = tokio::net::TcpStream::connect(address)
            .await
            .map_err(|e| failed(&e))?;
        // The injected value goes into the request only: never into `url`, which messages,
        // receipts and the response's final URL are made from.
        let mut target = url.clone();
        if let Some((Injection::Query { name }, value)) = inject {
            target.query_pairs_mut().append_pair(name, value.expose());
        }
        let mut builder = hyper::Request::builder()
            .method(method)
            .uri(&target[url::Position::BeforePath..url::Position::AfterQuery]);
        let host_header = match url.port() {
            Some(p) => format!("{}:{p}", url.host_str().unwrap_or("")),
            None => url.host_str().unwrap_or("").to_string(),
        };
        builder = builder.header(hyper::header::HOST, host_header);
        for h in headers {
            if !h.name.eq_ignore_ascii_case(CREDENTIAL_HEADER) {
                builder = builder.header(h.name.as_str(), h.value.as_str());
            }
        }
        if let Some((
            Injection::Header {
                name,
                prefix,
                suffix,
            },
            value,
        )) = inject
        {
            let mut header = hyper::header::HeaderValue::from_str(&format!(
                "{prefix}{}{suffix}",
                value.expose()
            ))
            .map_err(|_| {
                CapabilityError::Failed("the credential's value cannot be sent in a header".into())
            })?;
            header.set_sensitive(true);
            builder = builder.header(name.as_str(), header);
        }
        let request = builder
            .body(Full::new(Bytes::copy_from_slice(body.unwrap_or(&[]))))
            .map_err(|e| CapabilityError::Invalid(format!("the request is malformed: {e}")))?;
        let response = if url.scheme() == "https" {
            let name = tokio_rustls::rustls::pki_types::ServerName::try_from(
                url.host_str().unwrap_or("").to_string(),
            )
            .map_err(|e| failed(&e))?;
            let tls = tls().connect(name, stream).await.map_err(|e| failed(&e))?;
            send(hyper_util::rt::TokioIo::new(tls), request).await
        } else {
            send(hyper_util::rt::TokioIo::new(stream), request).await
        }
        .map_err(|e| failed(&e))?;

        let status = response.status().as_u16();
        if (300..400).contains(&status)
            && let Some(location) = response.headers().get(hyper::header::LOCATION)
        {
            let location = location
                .to_str()
                .ok()
                .and_then(|l| url.join(l).ok())
                .ok_or_else(|| {
                    CapabilityError::Failed(format!("{origin}: redirect to an unreadable location"))
                })?;
            return Ok(Hop::Redirect { status, location });
        }
        let response_headers: Vec<Header> = response
            .headers()
            .iter()
            .map(|(n, v)| Header {
                name: n.as_str().to_string(),
                value: String::from_utf8_lossy(v.as_bytes()).into_owned(),
            })
            .collect();
        let limit = usize::try_from(scope.max_body_bytes).unwrap_or(usize::MAX);
        let body = Limited::new(response.into_body(), limit)
            .collect()
            .await
            .map_err(|e| {
                if e.downcast_ref::<http_body_util::LengthLimitError>()
                    .is_some()
                {
                    CapabilityError::Denied(format!(
                        "{origin}: the body is larger than {limit} bytes"
                    ))
                } else {
                    failed(&e)
                }
            })?
            .to_bytes();
        let sha256 = crate::digest::sha256_hex(&body);
        Ok(Hop::Done(Response {
            status,
            headers: response_headers,
            body: body.to_vec(),
            sha256,
            final_url: url.to_string(),
            receipt: String::new(),
        }))
    }
}

async fn send<T>(
    io: T,
    request: hyper::Request<Full<Bytes>>,
) -> Result<hyper::Response<hyper::body::Incoming>, hyper::Error>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    sender.send_request(request).await
}

pub(crate) fn validate(request: &Request) -> Result<url::Url, CapabilityError> {
    if !METHODS.contains(&request.method.as_str()) {
        return Err(CapabilityError::Invalid(format!(
            "method {:?} is not one of {METHODS:?}",
            request.method
        )));
    }
    for h in &request.headers {
        let name = h.name.to_ascii_lowercase();
        if HOST_HEADERS.contains(&name.as_str()) {
            return Err(CapabilityError::Invalid(format!(
                "the `{}` header is set by the host, not the tool",
                h.name
            )));
        }
        if hyper::header::HeaderName::from_bytes(h.name.as_bytes()).is_err()
            || hyper::header::HeaderValue::from_str(&h.value).is_err()
        {
            return Err(CapabilityError::Invalid(format!(
                "the header {:?} is malformed",
                h.name
            )));
        }
    }
    // Not quoted back: a URL may come from a redirect, and hold what the guest must not read.
    let url = url::Url::parse(&request.url)
        .map_err(|e| CapabilityError::Invalid(format!("the URL is not valid: {e}")))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(CapabilityError::Invalid(
            "credentials in the URL are not accepted".into(),
        ));
    }
    Ok(url)
}

/// The credential a request names (`vak-credential: ALIAS`), checked against the grant: one at
/// most, granted to this tool, and no guest header where the host injects it.
fn named_credential<'a>(
    scope: &'a HttpScope,
    headers: &[Header],
) -> Result<Option<&'a Credential>, CapabilityError> {
    let mut named = headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case(CREDENTIAL_HEADER));
    let Some(first) = named.next() else {
        return Ok(None);
    };
    if named.next().is_some() {
        return Err(CapabilityError::Invalid(format!(
            "a request names one credential at most (`{CREDENTIAL_HEADER}` is repeated)"
        )));
    }
    let alias = first.value.trim();
    let credential = scope.credentials.get(alias).ok_or_else(|| {
        CapabilityError::Denied(format!(
            "the credential {alias:?} is not granted to this tool"
        ))
    })?;
    if let Injection::Header { name, .. } = &credential.injection
        && headers.iter().any(|h| h.name.eq_ignore_ascii_case(name))
    {
        return Err(CapabilityError::Invalid(format!(
            "the `{name}` header is injected by the host for the credential {alias:?}; the tool may not set it"
        )));
    }
    Ok(Some(credential))
}

impl Host for Broker {
    /// What the grant says about `alias`: never the value. Not an effect, so no receipt; it
    /// reveals nothing the tool's own policy does not already give it.
    async fn credential(
        &mut self,
        alias: String,
    ) -> Result<Option<CredentialInfo>, CapabilityError> {
        let scope = self.http_scope()?;
        let Some(credential) = scope.credentials.get(alias.trim()) else {
            return Ok(None);
        };
        Ok(Some(CredentialInfo {
            alias: credential.alias.clone(),
            audience: credential.audience.iter().map(|o| o.text.clone()).collect(),
            held: self.secret_value(credential).is_ok(),
        }))
    }

    async fn fetch(&mut self, request: Request) -> Result<Response, CapabilityError> {
        // The one way back to the guest: whatever the broker says, a secret value the call's
        // grant binds is not in it (responses were redacted hop by hop; this covers messages).
        let fetched = self.fetch_hops(request).await;
        fetched.map_err(|e| scrubbed_error(&self.scrub, e))
    }
}

/// The origin of `url` (`scheme://host:port`): what a message about a request names, never the
/// path or query, which may hold what the guest must not read.
fn origin_of(url: &url::Url) -> String {
    url.origin().ascii_serialization()
}

/// `error` with any secret value in its message redacted.
fn scrubbed_error(scrub: &crate::secrets::Scrubber, error: CapabilityError) -> CapabilityError {
    if !scrub.active() {
        return error;
    }
    let clean = |m: String| scrub.redact(&m).0;
    match error {
        CapabilityError::Denied(m) => CapabilityError::Denied(clean(m)),
        CapabilityError::Revoked(m) => CapabilityError::Revoked(clean(m)),
        CapabilityError::Invalid(m) => CapabilityError::Invalid(clean(m)),
        CapabilityError::Failed(m) => CapabilityError::Failed(clean(m)),
    }
}

/// `url` without the query parameter `name` (the one the host injects a credential as): what
/// a server echoed of it in a redirect is neither reported nor followed; the host injects it
/// again on a hop to the credential's audience.
fn without_param(url: &url::Url, name: &str) -> url::Url {
    if !url.query_pairs().any(|(k, _)| k == name) {
        return url.clone();
    }
    let kept: Vec<(String, String)> = url
        .query_pairs()
        .filter(|(k, _)| k != name)
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    let mut out = url.clone();
    if kept.is_empty() {
        out.set_query(None);
    } else {
        out.query_pairs_mut().clear().extend_pairs(kept);
    }
    out
}

/// Refuse a request that carries the value of a credential to an origin outside that
/// credential's audience, in any form the scrubber knows, in its URL, header names and values,
/// or body (decoded first when it names a content coding). Runs before any message quoting the
/// request is built, and before anything is sent.
fn leak_check(
    scope: &HttpScope,
    scrub: &crate::secrets::Scrubber,
    url: &url::Url,
    url_text: &str,
    headers: &[Header],
    body: Option<&[u8]>,
) -> Result<(), CapabilityError> {
    if !scrub.active() {
        return Ok(());
    }
    let origin = origin_of(url);
    let mut found: Vec<&str> = scrub.labels_in(url_text.as_bytes());
    for h in headers {
        found.extend(scrub.labels_in(h.name.as_bytes()));
        found.extend(scrub.labels_in(h.value.as_bytes()));
    }
    if let Some(body) = body.filter(|b| !b.is_empty()) {
        found.extend(scrub.labels_in(body));
        let coded = headers
            .iter()
            .filter(|h| h.name.eq_ignore_ascii_case("content-encoding"))
            .map(|h| h.value.as_str());
        let limit = usize::try_from(scope.max_body_bytes).unwrap_or(usize::MAX);
        let decoded = super::coding::codings(coded)
            .and_then(|c| match c.is_empty() {
                true => Ok(None),
                false => super::coding::decode(body, &c, limit).map(Some),
            })
            .map_err(|e| {
                CapabilityError::Denied(format!(
                    "the request body to {origin} {e}; this tool's grant binds credentials, and \
                     a body the host cannot check does not leave"
                ))
            })?;
        if let Some(decoded) = decoded {
            found.extend(scrub.labels_in(&decoded));
        }
    }
    found.sort_unstable();
    found.dedup();
    for alias in found {
        let allowed = scope
            .credentials
            .get(alias)
            .is_some_and(|c| c.audience_allows(url));
        if !allowed {
            return Err(CapabilityError::Denied(format!(
                "the request to {origin} carries the value of the credential {alias:?}, whose \
                 audience does not include it; nothing was sent"
            )));
        }
    }
    Ok(())
}

/// A response as the guest may be handed it, when the call's grant binds credentials: a body
/// in a content coding is decoded to be checked (handed over decoded and redacted if it held a
/// value, as it came otherwise); a coding the host cannot decode is refused; gzip data served
/// without a coding is refused if what decodes of it holds a value; then the body, header names
/// and values, and the final URL are redacted.
fn guard_response(
    scrub: &crate::secrets::Scrubber,
    response: &mut Response,
    origin: &str,
    limit: usize,
) -> Result<(), CapabilityError> {
    use super::coding;
    if !scrub.active() {
        return Ok(());
    }
    let refused = |e: coding::CodingError| {
        CapabilityError::Denied(format!(
            "the response from {origin} {e}; this tool's grant binds credentials, and a body the \
             host cannot check for their values is not handed over"
        ))
    };
    let codings = coding::codings(
        response
            .headers
            .iter()
            .filter(|h| h.name.eq_ignore_ascii_case("content-encoding"))
            .map(|h| h.value.as_str()),
    )
    .map_err(refused)?;
    if !codings.is_empty() && !response.body.is_empty() {
        let decoded = coding::decode(&response.body, &codings, limit).map_err(refused)?;
        let (clean, n) = scrub.redact_bytes(&decoded);
        if n.replaced > 0 {
            response.body = clean;
            response.headers.retain(|h| {
                !h.name.eq_ignore_ascii_case("content-encoding")
                    && !h.name.eq_ignore_ascii_case("content-length")
            });
        }
    } else if coding::looks_gzip(&response.body)
        && scrub.finds(&coding::gunzip_what_decodes(&response.body, limit))
    {
        return Err(CapabilityError::Denied(format!(
            "the response from {origin} is gzip data that holds the value of a credential; it is \
             not handed over"
        )));
    } else {
        let (clean, n) = scrub.redact_bytes(&response.body);
        if n.replaced > 0 {
            response.body = clean;
        }
    }
    for h in &mut response.headers {
        h.name = scrub.redact(&h.name).0;
        h.value = scrub.redact(&h.value).0;
    }
    response.final_url = scrub.redact(&response.final_url).0;
    Ok(())
}

impl Broker {
    async fn fetch_hops(&mut self, request: Request) -> Result<Response, CapabilityError> {
        let mut url_text = request.url.clone();
        let mut method = request.method.clone();
        let mut headers = request.headers.clone();
        let mut body = request.body.clone();
        let mut origin_of_first: Option<url::Origin> = None;
        for hop in 0..=MAX_REDIRECTS {
            let mut receipt_request = json!({ "method": method, "url": url_text, "hop": hop });
            // What the hop did with a named credential (alias and audience, never the value).
            let mut credential_note = None;
            // The query parameter the named credential is injected as, if it is.
            let mut injected_param: Option<String> = None;
            if let Some(e) = self.out_of_receipts() {
                return Err(e);
            }
            // Authorization and revocation are checked again at every hop.
            let attempt = async {
                let scope = self.http_scope().map_err(refused)?;
                let url = validate(&Request {
                    method: method.clone(),
                    url: url_text.clone(),
                    headers: headers.clone(),
                    body: None,
                })
                .map_err(refused)?;
                // First of all: a value going where its audience does not include. No message
                // quoting the request is built before this.
                leak_check(&scope, &self.scrub, &url, &url_text, &headers, body.as_deref())
                    .map_err(refused)?;
                let origin = origin_of(&url);
                if !matches!(url.scheme(), "http" | "https") {
                    return Err(refused(CapabilityError::Denied(format!(
                        "scheme {:?} is not fetched",
                        url.scheme()
                    ))));
                }
                if !scope.methods.iter().any(|m| m.eq_ignore_ascii_case(&method)) {
                    return Err(refused(CapabilityError::Denied(format!(
                        "method {method} is not granted to this tool (its grant allows {})",
                        scope.methods.join(", ")
                    ))));
                }
                if !scope.origins.iter().any(|o| o.allows(&url)) {
                    return Err(refused(CapabilityError::Denied(format!(
                        "{origin} (or this path of it) is outside the origins granted to this tool"
                    ))));
                }
                if let Some(origin) = scope.asks_for(&url) {
                    let asked = crate::approval::ApprovalScope::Origin(origin.to_string());
                    self.approved(asked).await.map_err(refused)?;
                }
                let credential = named_credential(&scope, &headers).map_err(refused)?;
                if let Some(Credential { injection: Injection::Query { name }, alias, .. }) = credential {
                    if hop == 0 && url.query_pairs().any(|(k, _)| k == name.as_str()) {
                        return Err(refused(CapabilityError::Invalid(format!(
                            "the query parameter `{name}` is injected by the host for the credential {alias:?}; the tool may not set it"
                        ))));
                    }
                    injected_param = Some(name.clone());
                }
                let value = match credential {
                    Some(c) if c.audience_allows(&url) => {
                        let value = self.secret_value(c).map_err(refused)?;
                        // Only a value the call's scrubber knows is sent: one changed since
                        // the call began would come back unredacted.
                        if !self.scrub.covers(&value) {
                            return Err(refused(CapabilityError::Failed(format!(
                                "the value of the credential {:?} changed during the call; a new call uses the new value",
                                c.alias
                            ))));
                        }
                        Some(value)
                    }
                    Some(c) if hop == 0 => {
                        return Err(refused(CapabilityError::Denied(format!(
                            "the credential {:?} may be sent only to {:?}; {origin} is not one of them",
                            c.alias,
                            c.audience.iter().map(|o| o.text.as_str()).collect::<Vec<_>>()
                        ))));
                    }
                    // A redirect out of the audience: followed, without the credential.
                    _ => None,
                };
                credential_note = credential.map(|c| {
                    json!({
                        "alias": c.alias,
                        "audience": c.audience.iter().map(|o| o.text.as_str()).collect::<Vec<_>>(),
                        "injected": value.is_some(),
                    })
                });
                let inject = credential.zip(value.as_ref()).map(|(c, v)| (&c.injection, v));
                let timeout = Duration::from_millis(scope.timeout_ms);
                let limit = usize::try_from(scope.max_body_bytes).unwrap_or(usize::MAX);
                match tokio::time::timeout(
                    timeout,
                    Self::hop(&scope, &method, &url, &headers, body.as_deref(), inject),
                )
                .await
                {
                    Ok(Ok(Hop::Done(mut response))) => {
                        // The guest never sees a secret in what came back (a server echoing
                        // its key). The receipt's digest stays the SHA-256 of the body as the
                        // server sent it.
                        guard_response(&self.scrub, &mut response, &origin, limit)
                            .map_err(refused)?;
                        Ok((url, Hop::Done(response)))
                    }
                    Ok(r) => r.map(|h| (url, h)).map_err(refused),
                    Err(_) => Err(refused(CapabilityError::Failed(format!(
                        "{origin}: no answer within {} ms",
                        scope.timeout_ms
                    )))),
                }
            }
            .await;
            if let Some(note) = credential_note {
                receipt_request["credential"] = note;
            }
            match attempt {
                Err(r) => {
                    self.receipts.issue(
                        &self.call_id,
                        Capability::Http,
                        "fetch",
                        receipt_request,
                        r.outcome,
                        false,
                    );
                    return Err(r.error);
                }
                Ok((url, Hop::Redirect { status, location })) => {
                    // What the server echoed of an injected parameter goes no further.
                    let location = match &injected_param {
                        Some(name) => without_param(&location, name),
                        None => location,
                    };
                    self.receipts.issue(
                        &self.call_id,
                        Capability::Http,
                        "fetch",
                        receipt_request,
                        json!({ "status": status, "redirect_to": location.as_str() }),
                        true,
                    );
                    let first = origin_of_first.get_or_insert_with(|| url.origin());
                    if location.origin() != *first {
                        headers.retain(|h| {
                            !CREDENTIAL_HEADERS.contains(&h.name.to_ascii_lowercase().as_str())
                        });
                    }
                    if status == 303 || ((status == 301 || status == 302) && method == "POST") {
                        method = "GET".into();
                        body = None;
                    }
                    url_text = location.to_string();
                }
                Ok((_, Hop::Done(mut response))) => {
                    let content_type = response
                        .headers
                        .iter()
                        .find(|h| h.name.eq_ignore_ascii_case("content-type"))
                        .map(|h| h.value.clone());
                    let outcome = json!({
                        "status": response.status,
                        "final_url": response.final_url,
                        "content_type": content_type,
                        "bytes": response.body.len(),
                        "sha256": response.sha256,
                    });
                    response.receipt = self
                        .receipts
                        .issue_with_digest(
                            &self.call_id,
                            Capability::Http,
                            "fetch",
                            receipt_request,
                            outcome,
                            true,
                            response.sha256.clone(),
                        )
                        .unwrap_or_default();
                    self.bodies.retain(&response.receipt, &response.body);
                    return Ok(response);
                }
            }
        }
        let error = CapabilityError::Denied(format!("more than {MAX_REDIRECTS} redirects"));
        self.receipts.issue(
            &self.call_id,
            Capability::Http,
            "fetch",
            json!({ "method": method, "url": url_text }),
            json!({ "refused": "too many redirects" }),
            false,
        );
        Err(error)
    }
}

#[cfg(test)]
mod tests {
    use super::{Header, Response, guard_response, internal, without_param};
    use crate::secrets::{Scrubber, SecretValue};

    fn response(headers: &[(&str, &str)], body: &[u8]) -> Response {
        Response {
            status: 200,
            headers: headers
                .iter()
                .map(|(n, v)| Header {
                    name: n.to_string(),
                    value: v.to_string(),
                })
                .collect(),
            body: body.to_vec(),
            sha256: String::new(),
            final_url: "http://a.example/p?k=sk-123456789".into(),
            receipt: String::new(),
        }
    }

    #[test]
    fn a_response_is_handed_over_redacted_or_refused_when_it_cannot_be_checked() {
        let scrub = Scrubber::new([&SecretValue::new("sk-123456789")]);
        let mut r = response(&[("x-sk-123456789", "v sk-123456789")], b"a sk-123456789 b");
        guard_response(&scrub, &mut r, "http://a.example", 1000).unwrap();
        assert_eq!(r.headers[0].name, "x-[redacted]");
        assert_eq!(r.headers[0].value, "v [redacted]");
        assert_eq!(r.body, b"a [redacted] b");
        assert_eq!(r.final_url, "http://a.example/p?k=[redacted]");
        // A coded empty body (HEAD, 204) has nothing to decode.
        let mut r = response(&[("Content-Encoding", "gzip")], b"");
        guard_response(&scrub, &mut r, "http://a.example", 1000).unwrap();
        // A coding the host cannot decode is refused, naming the origin only.
        let mut r = response(&[("Content-Encoding", "zstd")], b"...");
        let e = guard_response(&scrub, &mut r, "http://a.example", 1000).unwrap_err();
        assert!(format!("{e:?}").contains("http://a.example"), "{e:?}");
        // Without a credential in the grant, nothing is touched.
        let mut r = response(&[("Content-Encoding", "zstd")], b"sk-123456789");
        guard_response(&Scrubber::none(), &mut r, "http://a.example", 1000).unwrap();
        assert_eq!(r.body, b"sk-123456789");
    }

    #[test]
    fn the_injected_parameter_is_removed_from_a_redirect_and_nothing_else() {
        let u = url::Url::parse("http://a.example/d/?api_key=V&x=1&api_key=W").unwrap();
        assert_eq!(
            without_param(&u, "api_key").as_str(),
            "http://a.example/d/?x=1"
        );
        let u = url::Url::parse("http://a.example/d/?api_key=V").unwrap();
        assert_eq!(without_param(&u, "api_key").as_str(), "http://a.example/d/");
        let u = url::Url::parse("http://a.example/d/?key=%20V").unwrap();
        assert_eq!(
            without_param(&u, "api_key"),
            u,
            "untouched without the parameter"
        );
    }

    #[test]
    fn internal_addresses_in_all_their_spellings() {
        for bad in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "::",
            "fc00::1",
            "fd12::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "ff02::1",
        ] {
            assert!(internal(bad.parse().unwrap()).is_some(), "{bad}");
        }
        for good in [
            "93.184.216.34",
            "1.1.1.1",
            "2606:4700::1111",
            "::ffff:1.1.1.1",
        ] {
            assert!(internal(good.parse().unwrap()).is_none(), "{good}");
        }
        // `0x7f.1` is how a URL may spell 127.0.0.1; the URL parser normalises it first.
        let url = url::Url::parse("http://0x7f.1/").unwrap();
        assert_eq!(url.host_str(), Some("127.0.0.1"));
    }
}

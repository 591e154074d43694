//! One hop of a fetch: connect to the checked address (TLS for `https`), send the request with
//! the host's framing headers and any injected credential, and read a bounded body.

use super::address::checked_address;
use super::grant::{HttpScope, Injection};
use super::request::{CREDENTIAL_HEADER, origin_of};
use crate::bindings::vak::tool::http::{Header, Response};
use crate::bindings::vak::tool::types::CapabilityError;
use crate::secrets::SecretValue;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use std::sync::{Arc, OnceLock};

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
pub(super) enum Hop {
    Redirect { status: u16, location: url::Url },
    Done(Response),
}

pub(super) async fn hop(
    scope: &HttpScope,
    method: &str,
    url: &url::Url,
    headers: &[Header],
    body: Option<&[u8]>,
    inject: Option<(&Injection, &SecretValue)>,
) -> Result<Hop, CapabilityError> {
    let address = checked_address(scope, url).await?;
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
        let mut header =
            hyper::header::HeaderValue::from_str(&format!("{prefix}{}{suffix}", value.expose()))
                .map_err(|_| {
                    CapabilityError::Failed(
                        "the credential's value cannot be sent in a header".into(),
                    )
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
                CapabilityError::Denied(format!("{origin}: the body is larger than {limit} bytes"))
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

//! `vak serve --http ADDR`: MCP over streamable HTTP at `/mcp`.
//!
//! Bound to loopback unless told otherwise. `Host` is checked against the loopback names (and the
//! names given with `--allow-host`), and a request carrying an `Origin` is served only when that
//! origin is this server's own loopback origin or one given with `--allow-origin`; anything else
//! gets 403 (a web page must not reach a local tool host by DNS rebinding). Sessions of the
//! handshake era (`Mcp-Session-Id`) are one vak session each; 2026-07-28 requests are stateless.

use super::{Catalog, ServeError, VakMcp};
use crate::Host;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The path the MCP endpoint is served at.
pub const ENDPOINT: &str = "/mcp";

/// What `vak serve --http` is told.
#[derive(Debug, Clone, Default)]
pub struct HttpOptions {
    /// Host names (or `host:port`) clients may use beside the loopback ones.
    pub allow_hosts: Vec<String>,
    /// Browser origins (`scheme://host:port`) allowed beside this server's loopback origins.
    pub allow_origins: Vec<String>,
    /// The principal every call is made on behalf of.
    pub principal: Option<String>,
}

/// The names a request's `Host` may carry: the loopback names and `extra` (`--allow-host`), each
/// a host (any port) or `host:port`. `vak audit serve` checks against the same list.
pub fn allowed_hosts(extra: &[String]) -> Vec<String> {
    let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
    hosts.extend(extra.iter().cloned());
    hosts
}

/// A bound, not yet serving, endpoint (so a caller can learn the port before serving).
pub struct Bound {
    listener: tokio::net::TcpListener,
    addr: SocketAddr,
    config: StreamableHttpServerConfig,
}

impl Bound {
    /// Bind `addr`. A non-loopback address needs at least one `--allow-host` name.
    pub async fn bind(addr: SocketAddr, options: &HttpOptions) -> Result<Bound, ServeError> {
        if !addr.ip().is_loopback() && options.allow_hosts.is_empty() {
            return Err(ServeError::NotLoopback {
                addr: addr.to_string(),
            });
        }
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| ServeError::Listen {
                addr: addr.to_string(),
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| ServeError::Listen {
            addr: addr.to_string(),
            source,
        })?;
        let port = addr.port();
        let hosts = allowed_hosts(&options.allow_hosts);
        let mut origins: Vec<String> = ["localhost", "127.0.0.1", "[::1]"]
            .iter()
            .map(|h| format!("http://{h}:{port}"))
            .collect();
        origins.extend(options.allow_origins.iter().cloned());
        let config = StreamableHttpServerConfig::default()
            .with_allowed_hosts(hosts)
            .with_allowed_origins(origins)
            .enforce_origin_validation()
            .with_json_response(true)
            .with_sse_keep_alive(None)
            .with_max_request_body_bytes(crate::proposal::MAX_ARGUMENT_BYTES + 64 * 1024);
        Ok(Bound {
            listener,
            addr,
            config,
        })
    }

    /// The address actually bound (the port, when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serve until `shutdown` fires.
    pub async fn serve(
        self,
        host: &Host,
        options: &HttpOptions,
        shutdown: CancellationToken,
    ) -> Result<(), ServeError> {
        let catalog = Catalog::of(host)?;
        let (factory_host, principal) = (host.clone(), options.principal.clone());
        // Called once per handshake-era session, and once per stateless request.
        let service = StreamableHttpService::new(
            move || {
                Ok(VakMcp::new(
                    &factory_host,
                    catalog.clone(),
                    principal.as_deref(),
                ))
            },
            Arc::new(LocalSessionManager::default()),
            self.config.with_cancellation_token(shutdown.child_token()),
        );
        tracing::info!(addr = %self.addr, "serving MCP over streamable HTTP at {ENDPOINT}");
        loop {
            let (stream, peer) = tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                accepted = self.listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // A full file table or an aborted handshake: keep serving the others.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                        continue;
                    }
                },
            };
            let _ = stream.set_nodelay(true);
            let service = service.clone();
            let conn_shutdown = shutdown.clone();
            tokio::spawn(async move {
                let routed = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let mut service = service.clone();
                    async move {
                        if req.uri().path() != ENDPOINT {
                            return Ok::<_, Infallible>(not_found());
                        }
                        Ok(json_rpc_faithful(&mut service, req).await)
                    }
                });
                let conn = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), routed);
                tokio::pin!(conn);
                tokio::select! {
                    done = conn.as_mut() => if let Err(e) = done {
                        tracing::debug!(%peer, error = %e, "connection ended with an error");
                    },
                    () = conn_shutdown.cancelled() => conn.as_mut().graceful_shutdown(),
                }
            });
        }
    }
}

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// What a POST body is, as JSON-RPC sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Posted {
    /// Not JSON at all.
    NotJson,
    /// A JSON array: a batch, which MCP removed in 2025-06-18.
    Batch,
    /// Anything else: rmcp's to judge.
    Other,
}

fn posted(body: &[u8]) -> Posted {
    match serde_json::from_slice::<serde_json::Value>(body) {
        Err(_) => Posted::NotJson,
        Ok(serde_json::Value::Array(_)) => Posted::Batch,
        Ok(_) => Posted::Other,
    }
}

/// Hand `req` to rmcp's service, answering as JSON-RPC and the MCP specification say where rmcp
/// answers otherwise: a POST body that is not JSON gets 400 with `-32700` and `"id": null`
/// (rmcp: 415 "fail to deserialize request body"), a batch gets 400 with `-32600` and `"id":
/// null`, and a session's DELETE gets 204 (rmcp: 202, which the Python SDK reports as a failed
/// termination). rmcp's own checks (Host, Origin, content type, session) run first and keep
/// their answers: only a body rmcp could not read is answered here.
async fn json_rpc_faithful(
    service: &mut StreamableHttpService<VakMcp, LocalSessionManager>,
    req: Request<Incoming>,
) -> Response<Body> {
    let method = req.method().clone();
    let (parts, body) = req.into_parts();
    let limit = crate::proposal::MAX_ARGUMENT_BYTES + 64 * 1024;
    let bytes = match http_body_util::Limited::new(body, limit).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => {
            let too_large = e
                .downcast_ref::<http_body_util::LengthLimitError>()
                .is_some();
            return plain(
                if too_large {
                    StatusCode::PAYLOAD_TOO_LARGE
                } else {
                    StatusCode::BAD_REQUEST
                },
                if too_large {
                    format!("the request body is over {limit} bytes\n")
                } else {
                    "the request body could not be read\n".to_string()
                },
            );
        }
    };
    let kind = if method == hyper::Method::POST {
        posted(&bytes)
    } else {
        Posted::Other
    };
    let req = Request::from_parts(parts, Full::new(bytes));
    let response = match tower_service::Service::call(service, req).await {
        Ok(r) => r.map(|b| b.boxed()),
        Err(never) => match never {},
    };
    let status = response.status();
    let unreadable = matches!(
        status,
        StatusCode::BAD_REQUEST
            | StatusCode::UNSUPPORTED_MEDIA_TYPE
            | StatusCode::UNPROCESSABLE_ENTITY
    );
    match kind {
        Posted::NotJson if unreadable => {
            json_rpc_error(-32700, "Parse error: the body is not JSON")
        }
        Posted::Batch if unreadable => json_rpc_error(
            -32600,
            "Invalid Request: a JSON-RPC batch; MCP (2025-06-18 and later) takes one message per request",
        ),
        _ if method == hyper::Method::DELETE && status == StatusCode::ACCEPTED => {
            let mut r = Response::new(Full::new(Bytes::new()).boxed());
            *r.status_mut() = StatusCode::NO_CONTENT;
            r
        }
        _ => response,
    }
}

/// A JSON-RPC error whose request id could not be read: 400, `"id": null`.
fn json_rpc_error(code: i64, message: &str) -> Response<Body> {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": { "code": code, "message": message },
    });
    let mut r = Response::new(Full::new(Bytes::from(body.to_string())).boxed());
    *r.status_mut() = StatusCode::BAD_REQUEST;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}

fn plain(status: StatusCode, text: String) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(text)).boxed());
    *r.status_mut() = status;
    r
}

fn not_found() -> Response<http_body_util::combinators::BoxBody<Bytes, Infallible>> {
    let mut r = Response::new(
        Full::new(Bytes::from_static(b"not found: the MCP endpoint is /mcp\n")).boxed(),
    );
    *r.status_mut() = StatusCode::NOT_FOUND;
    r
}

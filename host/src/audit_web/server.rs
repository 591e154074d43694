//! The HTTP side of `vak audit serve`: the accept loop (hyper, HTTP/1.1), the `Host` check, the
//! routes and the headers every answer carries.

use super::pages;
use crate::journal::Journal;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The Content-Security-Policy of every answer: nothing loads but this server's stylesheet; no
/// script, no frame, no form that posts elsewhere.
pub const CSP: &str = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// What every request handler reads.
pub(super) struct State {
    pub(super) journal: Arc<Journal>,
    /// The names `Host` may carry.
    pub(super) hosts: Vec<String>,
    /// Keys every entry must be signed by (none: any valid signature).
    pub(super) keys: Vec<String>,
}

/// Accept connections until `shutdown`, each served on a task of its own.
pub(super) async fn run(
    listener: tokio::net::TcpListener,
    state: Arc<State>,
    shutdown: CancellationToken,
) {
    loop {
        let (stream, peer) = tokio::select! {
            () = shutdown.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        let state = state.clone();
        let conn_shutdown = shutdown.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let state = state.clone();
                async move { Ok::<_, Infallible>(answer(&state, &req).await) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
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

/// Whether `host` (a request's `Host` header) names one of `allowed` (each a host, any port, or
/// `host:port`), compared as `vak serve --http` compares them: case-insensitively, IPv6 brackets
/// aside. A missing or malformed `Host` is not allowed.
pub fn host_allowed(host: Option<&str>, allowed: &[String]) -> bool {
    let parse = |s: &str| -> Option<(String, Option<u16>)> {
        let a = hyper::http::uri::Authority::try_from(s.trim()).ok()?;
        let name = a.host().trim_matches(['[', ']']).to_ascii_lowercase();
        Some((name, a.port_u16()))
    };
    let Some((name, port)) = host.and_then(parse) else {
        return false;
    };
    // An allowed name that is no authority (`::1`) is a host name alone, as rmcp reads it.
    let mut allowed = allowed.iter().filter_map(|a| {
        parse(a).or_else(|| {
            let a = a.trim();
            (!a.is_empty()).then(|| (a.trim_matches(['[', ']']).to_ascii_lowercase(), None))
        })
    });
    allowed.any(|(n, p)| {
        n == name
            && match p {
                Some(p) => port == Some(p),
                None => true,
            }
    })
}

/// The answer to `req`: a page, the stylesheet, or why not.
async fn answer(state: &Arc<State>, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok());
    if !host_allowed(host, &state.hosts) {
        return plain(
            StatusCode::FORBIDDEN,
            "forbidden: this Host is not one this server answers to (see --allow-host)\n",
        );
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = plain(
            StatusCode::METHOD_NOT_ALLOWED,
            "method not allowed: these pages are read-only\n",
        );
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    let query: Vec<(String, String)> = req
        .uri()
        .query()
        .map(|q| {
            url::form_urlencoded::parse(q.as_bytes())
                .into_owned()
                .collect()
        })
        .unwrap_or_default();
    let page = match req.uri().path() {
        "/style.css" => {
            let mut r = finish(StatusCode::OK, pages::STYLE.as_bytes().to_vec());
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/css; charset=utf-8"),
            );
            return r;
        }
        "/" | "/calls" => blocking(state, move |s| pages::calls::page(&s.journal, &query)).await,
        "/call" => blocking(state, move |s| pages::call::page(&s.journal, &query)).await,
        "/integrity" => blocking(state, move |s| pages::integrity::page(&s.journal, &s.keys)).await,
        _ => pages::Page::not_found("No such page."),
    };
    let mut r = finish(page.status, page.body.into_string().into_bytes());
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    r
}

/// Run `make` (it reads the journal: SQLite, blocking) off the async threads.
async fn blocking(
    state: &Arc<State>,
    make: impl FnOnce(&State) -> pages::Page + Send + 'static,
) -> pages::Page {
    let state = state.clone();
    match tokio::task::spawn_blocking(move || make(&state)).await {
        Ok(page) => page,
        Err(e) => {
            tracing::error!(error = %e, "a page could not be made");
            pages::Page::error("This page could not be made: see the server's log.")
        }
    }
}

/// `body` with the headers every answer carries.
fn finish(status: StatusCode, body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

fn plain(status: StatusCode, text: &'static str) -> Response<Full<Bytes>> {
    let mut r = finish(status, text.as_bytes().to_vec());
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::host_allowed;

    #[test]
    fn host_is_checked_as_the_mcp_server_checks_it() {
        let allowed = crate::mcp::http::allowed_hosts(&["review.example:8443".to_string()]);
        for ok in [
            "127.0.0.1:8080",
            "localhost",
            "LOCALHOST:1",
            "[::1]:9",
            "review.example:8443",
        ] {
            assert!(host_allowed(Some(ok), &allowed), "{ok}");
        }
        for bad in [
            "evil.example",
            "review.example:80",
            "127.0.0.1.evil:80",
            "",
            "a b",
        ] {
            assert!(!host_allowed(Some(bad), &allowed), "{bad}");
        }
        assert!(!host_allowed(None, &allowed));
    }
}

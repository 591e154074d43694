//! The HTTP side of `vak audit serve`: the accept loop (hyper, HTTP/1.1), the `Host` check, the
//! routes and the headers every answer carries.

use super::Source;
use super::pages;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The Content-Security-Policy of every answer: nothing loads but this server's stylesheet and
/// its one script file (no inline script, no `eval`), which may ask this server alone; no frame,
/// no form that posts elsewhere.
pub const CSP: &str = "default-src 'none'; style-src 'self'; img-src 'self'; script-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// What every request handler reads.
pub(super) struct State {
    pub(super) journal: Arc<dyn Source>,
    /// The names `Host` may carry.
    pub(super) hosts: Vec<String>,
    /// Keys every entry must be signed by (none: any valid signature).
    pub(super) keys: Vec<String>,
    /// Verification on demand, its progress and its last result.
    pub(super) verifier: Arc<super::verify::Verifier>,
    /// The approvals inbox, when served (`--approvals`).
    pub(super) approvals: Option<super::approvals::Approvals>,
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
                async move { Ok::<_, Infallible>(answer(&state, req).await) }
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
async fn answer(state: &Arc<State>, req: Request<Incoming>) -> Response<Full<Bytes>> {
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
    // The one route that changes state: the inbox's answers (it checks its own method).
    if req.uri().path() == "/approvals/answer" {
        return super::approvals::answer(state, req).await;
    }
    let req = &req;
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
        "/style.css" => return asset("text/css; charset=utf-8", pages::STYLE),
        "/integrity.js" => {
            return asset("text/javascript; charset=utf-8", pages::integrity::SCRIPT);
        }
        "/" | "/calls" => blocking(state, move |s| pages::calls::page(&*s.journal, &query)).await,
        "/call" => blocking(state, move |s| pages::call::page(&*s.journal, &query)).await,
        "/pictures" => blocking(state, move |s| pages::pictures::page(&*s.journal, &query)).await,
        "/integrity" => {
            let verify = pages::param(&query, "verify").is_some();
            // Starting a walk costs this machine seconds: not at another site's bidding.
            if verify && fetch_site(req) == Some("cross-site") {
                return plain(StatusCode::FORBIDDEN, "forbidden: a cross-site request\n");
            }
            let tip = match blocking_value(state, |s| s.journal.tip()).await {
                Some(Ok(tip)) => tip,
                Some(Err(e)) => return html(pages::Page::error(&e.to_string())),
                None => return html(pages::Page::error("The journal could not be read.")),
            };
            if verify {
                state
                    .verifier
                    .start(state.journal.clone(), state.keys.clone(), tip);
                return redirect("/integrity");
            }
            pages::integrity::page(
                &tip,
                &state.verifier.status(),
                &state.keys,
                state.journal.shared(),
            )
        }
        "/integrity/progress" => return progress(state),
        "/approvals" => return super::approvals::page(state, req, &query).await,
        _ => pages::Page::not_found("No such page."),
    };
    html(page)
}

/// A request's `Sec-Fetch-Site` (what a browser says of where the request comes from).
fn fetch_site(req: &Request<Incoming>) -> Option<&str> {
    req.headers()
        .get("sec-fetch-site")
        .and_then(|h| h.to_str().ok())
}

/// The verification's progress as JSON, for `/integrity.js`.
fn progress(state: &State) -> Response<Full<Bytes>> {
    let status = state.verifier.status();
    let value = match &status.running {
        Some(r) => serde_json::json!({ "state": "running", "done": r.checked(), "total": r.total }),
        None => serde_json::json!({
            "state": if status.last.is_some() { "done" } else { "idle" },
        }),
    };
    let mut r = finish(StatusCode::OK, value.to_string().into_bytes());
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// A page as an answer.
pub(super) fn html(page: pages::Page) -> Response<Full<Bytes>> {
    let mut r = finish(page.status, page.body.into_string().into_bytes());
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    r
}

/// One of the constant files.
fn asset(content_type: &'static str, body: &'static str) -> Response<Full<Bytes>> {
    let mut r = finish(StatusCode::OK, body.as_bytes().to_vec());
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

/// See `location` (a path of this server), after a request that started something.
pub(super) fn redirect(location: &str) -> Response<Full<Bytes>> {
    let mut r = finish(StatusCode::SEE_OTHER, Vec::new());
    if let Ok(v) = HeaderValue::from_str(location) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    r
}

/// Run `read` (SQLite, blocking) off the async threads; `None` if it could not run.
async fn blocking_value<T: Send + 'static>(
    state: &Arc<State>,
    read: impl FnOnce(&State) -> T + Send + 'static,
) -> Option<T> {
    let state = state.clone();
    tokio::task::spawn_blocking(move || read(&state)).await.ok()
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
    // No address of these pages leaves this origin. Not `no-referrer`: under it a browser
    // sends `Origin: null` with a form's POST, which the inbox must refuse (a sandboxed frame
    // of any site sends the same).
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

pub(super) fn plain(status: StatusCode, text: &'static str) -> Response<Full<Bytes>> {
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

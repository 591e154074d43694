//! The approvals inbox of `vak audit serve --approvals`: the one part of these pages that changes
//! state, so the one behind an access check.
//!
//! - A random access token (256 bits), printed once at start as a link (`/approvals?token=…`),
//!   is exchanged for a session: a random id in a cookie `HttpOnly; SameSite=Strict; Path=/`
//!   and, kept with it on the server, a random CSRF token every form carries.
//! - An answer is a `POST /approvals/answer` (form-encoded, at most 16 KiB) from a session, with
//!   its CSRF token, whose `Origin` (when sent) is this server's own (its loopback origins and the
//!   `--allow-host` names, as `vak serve --http` allows them), and whose `Sec-Fetch-Site` (when
//!   sent) is not another site's; the `Host` check of every request ran before.
//! - It names the question's id and binding: the inbox takes it only for that exact row, while
//!   it waits, once ([`Inbox::answer`]); a replayed or second answer is refused (409).
//! - Who answered, in the record of the call: `approvals inbox: vak audit serve (pid P), browser
//!   session S` (the first characters of the session's digest, never the cookie).

use super::pages;
use super::server::{State, html, plain, redirect};
use crate::approval::inbox::{Inbox, Refused};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use std::sync::{Arc, Mutex};

/// The session cookie's name.
pub const COOKIE: &str = "vak_audit_session";
/// The most sessions kept at once (the oldest goes first).
const MAX_SESSIONS: usize = 32;
/// The largest answer body read.
const MAX_BODY: usize = 16 * 1024;

/// One browser's session.
struct Session {
    id: String,
    csrf: String,
}

/// The inbox, its access token, its sessions and the origins a form may come from.
pub(super) struct Approvals {
    pub inbox: Arc<Inbox>,
    token: String,
    sessions: Mutex<Vec<Session>>,
    origins: Vec<String>,
}

impl Approvals {
    /// A fresh access token for `inbox`, served at `port` (and at `allow_hosts`).
    pub fn new(inbox: Arc<Inbox>, port: u16, allow_hosts: &[String]) -> Option<Approvals> {
        let mut origins: Vec<String> = ["localhost", "127.0.0.1", "[::1]"]
            .iter()
            .map(|h| format!("http://{h}:{port}"))
            .collect();
        for h in allow_hosts {
            let h = h.trim().to_ascii_lowercase();
            match hyper::http::uri::Authority::try_from(h.as_str()) {
                Ok(a) if a.port_u16().is_some() => origins.push(format!("http://{h}")),
                _ => origins.push(format!("http://{h}:{port}")),
            }
        }
        Some(Approvals {
            inbox,
            token: random_hex()?,
            sessions: Mutex::new(Vec::new()),
            origins,
        })
    }

    pub fn token(&self) -> &str {
        &self.token
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, Vec<Session>> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The CSRF token and the answerer's name of the session `req`'s cookie names, if any.
    fn session_of(&self, req: &Request<Incoming>) -> Option<(String, String)> {
        let id = cookie(req)?;
        let sessions = self.sessions();
        let s = sessions.iter().find(|s| same(&s.id, &id))?;
        Some((s.csrf.clone(), answerer(&s.id)))
    }
}

/// `GET /approvals`: with `?token=`, a new session (then back here without it); with a session,
/// the questions waiting and those settled; else how to get in.
pub(super) async fn page(
    state: &Arc<State>,
    req: &Request<Incoming>,
    query: &[(String, String)],
) -> Response<Full<Bytes>> {
    let Some(a) = &state.approvals else {
        return html(pages::Page::not_found(
            "The approvals inbox is off: start vak audit serve with --approvals.",
        ));
    };
    if let Some(token) = pages::param(query, "token") {
        if !same(token, &a.token) {
            return plain(
                StatusCode::FORBIDDEN,
                "forbidden: this is not the access token vak audit serve printed\n",
            );
        }
        let (Some(id), Some(csrf)) = (random_hex(), random_hex()) else {
            return plain(StatusCode::INTERNAL_SERVER_ERROR, "no randomness\n");
        };
        {
            let mut sessions = a.sessions();
            if sessions.len() >= MAX_SESSIONS {
                sessions.remove(0);
            }
            sessions.push(Session {
                id: id.clone(),
                csrf,
            });
        }
        let mut r = redirect("/approvals");
        if let Ok(v) =
            HeaderValue::from_str(&format!("{COOKIE}={id}; HttpOnly; SameSite=Strict; Path=/"))
        {
            r.headers_mut().insert(header::SET_COOKIE, v);
        }
        return r;
    }
    let Some((csrf, _)) = a.session_of(req) else {
        return no_session();
    };
    let notice = pages::param(query, "answered").map(str::to_string);
    let inbox = a.inbox.clone();
    let listed = tokio::task::spawn_blocking(move || {
        Ok::<_, crate::approval::inbox::InboxError>((inbox.waiting(100)?, inbox.settled(50)?))
    })
    .await;
    match listed {
        Ok(Ok((waiting, settled))) => html(pages::approvals::page(
            &waiting,
            &settled,
            &csrf,
            notice.as_deref(),
        )),
        Ok(Err(e)) => html(pages::Page::error(&e.to_string())),
        Err(_) => html(pages::Page::error("The inbox could not be read.")),
    }
}

/// `POST /approvals/answer`: one answer, checked as the module says.
pub(super) async fn answer(state: &Arc<State>, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let Some(a) = &state.approvals else {
        return plain(StatusCode::NOT_FOUND, "the approvals inbox is off\n");
    };
    if req.method() != Method::POST {
        let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, "answers are POSTed\n");
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("POST"));
        return r;
    }
    let origin = req
        .headers()
        .get(header::ORIGIN)
        .map(|o| o.to_str().unwrap_or("(not text)").to_ascii_lowercase());
    if let Some(o) = &origin
        && !a.origins.iter().any(|allowed| allowed == o)
    {
        return plain(
            StatusCode::FORBIDDEN,
            "forbidden: an answer from another origin\n",
        );
    }
    if req
        .headers()
        .get("sec-fetch-site")
        .and_then(|h| h.to_str().ok())
        .is_some_and(|s| s != "same-origin" && s != "none")
    {
        return plain(
            StatusCode::FORBIDDEN,
            "forbidden: an answer from another site\n",
        );
    }
    let Some((csrf, by)) = a.session_of(&req) else {
        return no_session();
    };
    let form = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|c| c.to_str().ok())
        .is_some_and(|c| c.starts_with("application/x-www-form-urlencoded"));
    if !form {
        return plain(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "an answer is a form (application/x-www-form-urlencoded)\n",
        );
    }
    let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return plain(StatusCode::PAYLOAD_TOO_LARGE, "the answer is too large\n"),
    };
    let fields: Vec<(String, String)> = url::form_urlencoded::parse(&body).into_owned().collect();
    let field = |name: &str| pages::param(&fields, name).map(str::to_string);
    if !field("csrf").is_some_and(|t| same(&t, &csrf)) {
        return plain(
            StatusCode::FORBIDDEN,
            "forbidden: the form's CSRF token is missing or not this session's\n",
        );
    }
    let (Some(id), Some(binding), Some(decision)) =
        (field("id"), field("binding"), field("decision"))
    else {
        return html(pages::Page::bad_request(
            "An answer names the question (id, binding) and a decision.",
        ));
    };
    let approve = match decision.as_str() {
        "yes" => true,
        "no" => false,
        _ => return html(pages::Page::bad_request("The decision is yes or no.")),
    };
    let inbox = a.inbox.clone();
    let (answered_id, who) = (id.clone(), by.clone());
    let taken =
        tokio::task::spawn_blocking(move || inbox.answer(&answered_id, &binding, approve, &who))
            .await;
    match taken {
        Ok(Ok(Ok(()))) => {
            tracing::info!(approval = %id, approve, by = %by, "answered in the approvals inbox");
            redirect(&format!(
                "/approvals?answered={}",
                url::form_urlencoded::byte_serialize(id.as_bytes()).collect::<String>()
            ))
        }
        Ok(Ok(Err(refused))) => refused_page(&refused),
        Ok(Err(e)) => html(pages::Page::error(&e.to_string())),
        Err(_) => html(pages::Page::error("The inbox could not be written.")),
    }
}

fn refused_page(refused: &Refused) -> Response<Full<Bytes>> {
    let mut page = pages::Page::bad_request(&format!("Not taken: {refused}."));
    page.status = match refused {
        Refused::Unknown => StatusCode::NOT_FOUND,
        _ => StatusCode::CONFLICT,
    };
    html(page)
}

fn no_session() -> Response<Full<Bytes>> {
    let mut page = pages::Page::bad_request(
        "The approvals inbox needs the link vak audit serve printed at start (/approvals?token=…): \
         open it in this browser.",
    );
    page.status = StatusCode::FORBIDDEN;
    html(page)
}

/// The session id in `req`'s cookie.
fn cookie(req: &Request<Incoming>) -> Option<String> {
    req.headers()
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(n, _)| *n == COOKIE)
        .map(|(_, v)| v.to_string())
}

/// Who answered, as the call's record will say: this process and the session (by a digest of
/// its id: the record must not hold the cookie).
fn answerer(session: &str) -> String {
    use sha2::Digest;
    let digest = hex_of(&sha2::Sha256::digest(session.as_bytes())[..6]);
    format!(
        "vak audit serve (pid {}), browser session {digest}",
        std::process::id()
    )
}

/// Equal, compared in time that depends on the lengths alone.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// 256 random bits as hex.
fn random_hex() -> Option<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).ok()?;
    Some(hex_of(&bytes))
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

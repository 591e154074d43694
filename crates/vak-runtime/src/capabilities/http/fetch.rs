//! A fetch, hop by hop: each hop of a redirect chain is authorized, checked and approved as a new
//! request, and leaves a receipt (refusals too); the final one's digest is the SHA-256 of the body.

use super::connect::{self, Hop};
use super::grant::{Credential, Injection};
use super::request::{
    CREDENTIAL_HEADERS, MAX_REDIRECTS, leak_check, named_credential, origin_of, validate,
    without_param,
};
use super::response::guard_response;
use crate::bindings::vak::tool::http::{Request, Response};
use crate::bindings::vak::tool::types::CapabilityError;
use crate::capabilities::{Broker, Capability};
use serde_json::json;
use std::time::Duration;

impl Broker {
    pub(super) async fn fetch_hops(
        &mut self,
        request: Request,
    ) -> Result<Response, CapabilityError> {
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
                let scope = self.http_scope()?;
                let url = validate(&Request {
                    method: method.clone(),
                    url: url_text.clone(),
                    headers: headers.clone(),
                    body: None,
                })
                ?;
                // First of all: a value going where its audience does not include. No message
                // quoting the request is built before this.
                let environment = self.grant.as_ref().map_or(&[][..], |g| &g.environment[..]);
                leak_check(&scope, &self.scrub, environment, &url, &url_text, &headers, body.as_deref())
                    ?;
                let origin = origin_of(&url);
                if !matches!(url.scheme(), "http" | "https") {
                    return Err(CapabilityError::Denied(format!(
                        "scheme {:?} is not fetched",
                        url.scheme()
                    )));
                }
                if !scope.methods.iter().any(|m| m.eq_ignore_ascii_case(&method)) {
                    return Err(CapabilityError::Denied(format!(
                        "method {method} is not granted to this tool (its grant allows {})",
                        scope.methods.join(", ")
                    )));
                }
                if !scope.origins.iter().any(|o| o.allows(&url)) {
                    return Err(CapabilityError::Denied(format!(
                        "{origin} (or this path of it) is outside the origins granted to this tool"
                    )));
                }
                if let Some(origin) = scope.asks_for(&url) {
                    let asked = crate::approval::ApprovalScope::Origin(origin.to_string());
                    self.approved(asked).await?;
                }
                let credential = named_credential(&scope, &headers)?;
                if let Some(Credential { injection: Injection::Query { name }, alias, .. }) = credential {
                    if hop == 0 && url.query_pairs().any(|(k, _)| k == name.as_str()) {
                        return Err(CapabilityError::Invalid(format!(
                            "the query parameter `{name}` is injected by the host for the credential {alias:?}; the tool may not set it"
                        )));
                    }
                    injected_param = Some(name.clone());
                }
                let value = match credential {
                    Some(c) if c.audience_allows(&url) => {
                        let value = self.secret_value(c)?;
                        // Only a value the call's scrubber knows is sent: one changed since
                        // the call began would come back unredacted.
                        if !self.scrub.covers(&value) {
                            return Err(CapabilityError::Failed(format!(
                                "the value of the credential {:?} changed during the call; a new call uses the new value",
                                c.alias
                            )));
                        }
                        Some(value)
                    }
                    Some(c) if hop == 0 => {
                        return Err(CapabilityError::Denied(format!(
                            "the credential {:?} may be sent only to {:?}; {origin} is not one of them",
                            c.alias,
                            c.audience.iter().map(|o| o.text.as_str()).collect::<Vec<_>>()
                        )));
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
                    connect::hop(&scope, &method, &url, &headers, body.as_deref(), inject),
                )
                .await
                {
                    Ok(Ok(Hop::Done(mut response))) => {
                        // The guest never sees a secret in what came back (a server echoing
                        // its key). The receipt's digest stays the SHA-256 of the body as the
                        // server sent it.
                        guard_response(&self.scrub, &mut response, &origin, limit)
                            ?;
                        Ok((url, Hop::Done(response)))
                    }
                    Ok(r) => r.map(|h| (url, h)),
                    Err(_) => Err(CapabilityError::Failed(format!(
                        "{origin}: no answer within {} ms",
                        scope.timeout_ms
                    ))),
                }
            }
            .await;
            if let Some(note) = credential_note {
                receipt_request["credential"] = note;
            }
            match attempt {
                Err(e) => {
                    return Err(self.refused(Capability::Http, "fetch", receipt_request, e));
                }
                Ok((url, Hop::Redirect { status, location })) => {
                    // What the server echoed of an injected parameter goes no further.
                    let location = match &injected_param {
                        Some(name) => without_param(&location, name),
                        None => location,
                    };
                    let outcome = json!({ "status": status, "redirect_to": location.as_str() });
                    self.receipts.issue(
                        Capability::Http,
                        "fetch",
                        receipt_request,
                        outcome,
                        true,
                        None,
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
                    let digest = response.sha256.clone();
                    response.receipt = self.receipts.issue(
                        Capability::Http,
                        "fetch",
                        receipt_request,
                        outcome,
                        true,
                        Some(digest),
                    );
                    self.bodies.retain(&response.receipt, &response.body);
                    return Ok(response);
                }
            }
        }
        let error = CapabilityError::Denied(format!("more than {MAX_REDIRECTS} redirects"));
        let request = json!({ "method": method, "url": url_text });
        let outcome = json!({ "refused": "too many redirects" });
        Err(self.refused_with(Capability::Http, "fetch", request, outcome, error))
    }
}

//! A guest's request as the host checks it before anything is sent: method, framing headers,
//! URL, the credential it names, and no credential value going outside its audience.

use super::grant::{Credential, HTTP_METHODS, HttpScope, Injection};
use crate::bindings::vak::tool::http::{Header, Request};
use crate::bindings::vak::tool::types::CapabilityError;

/// Redirect hops followed (each checked as a new request).
pub const MAX_REDIRECTS: usize = 5;
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
pub(super) const CREDENTIAL_HEADERS: [&str; 4] = [
    "authorization",
    "cookie",
    "proxy-authorization",
    "x-api-key",
];

pub fn validate(request: &Request) -> Result<url::Url, CapabilityError> {
    if !HTTP_METHODS.contains(&request.method.as_str()) {
        return Err(CapabilityError::Invalid(format!(
            "method {:?} is not one of {HTTP_METHODS:?}",
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
pub(super) fn named_credential<'a>(
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

/// The origin of `url` (`scheme://host:port`): what a message about a request names, never the
/// path or query, which may hold what the guest must not read.
pub(super) fn origin_of(url: &url::Url) -> String {
    url.origin().ascii_serialization()
}

/// `url` without the query parameter `name` (the one the host injects a credential as): what
/// a server echoed of it in a redirect is neither reported nor followed; the host injects it
/// again on a hop to the credential's audience.
pub(super) fn without_param(url: &url::Url, name: &str) -> url::Url {
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
pub(super) fn leak_check(
    scope: &HttpScope,
    scrub: &crate::secrets::Scrubber,
    environment: &[crate::capabilities::environment::grant::EnvKey],
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
        // A foreign component's environment value goes where its audience allows, or, with
        // none given, wherever the grant's origins do (checked next, as for any request).
        let key = environment
            .iter()
            .find(|k| super::credentials::environment_label(&k.key) == alias);
        let allowed = match key {
            Some(k) => k
                .audience
                .as_ref()
                .is_none_or(|origins| origins.iter().any(|o| o.allows(url))),
            None => scope
                .credentials
                .get(alias)
                .is_some_and(|c| c.audience_allows(url)),
        };
        if !allowed {
            return Err(CapabilityError::Denied(format!(
                "the request to {origin} carries the value of the credential {alias:?}, whose \
                 audience does not include it; nothing was sent"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::without_param;

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
}

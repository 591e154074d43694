//! What comes back to the guest, when the call's grant binds credentials: no credential value
//! in a response or in an error message.

use crate::bindings::vak::tool::http::Response;
use crate::bindings::vak::tool::types::CapabilityError;

/// `error` with any secret value in its message redacted.
pub(super) fn scrubbed_error(
    scrub: &crate::secrets::Scrubber,
    error: CapabilityError,
) -> CapabilityError {
    if !scrub.active() {
        return error;
    }
    error.map_message(|m| scrub.redact(&m).0)
}

/// A response as the guest may be handed it, when the call's grant binds credentials: a body
/// in a content coding is decoded to be checked (handed over decoded and redacted if it held a
/// value, as it came otherwise); a coding the host cannot decode is refused; gzip data served
/// without a coding is refused if what decodes of it holds a value; then the body, header names
/// and values, and the final URL are redacted.
pub(super) fn guard_response(
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

#[cfg(test)]
mod tests {
    use super::guard_response;
    use crate::bindings::vak::tool::http::{Header, Response};
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
}

//! `wasi:http/outgoing-handler` for foreign components (built for other hosts): every request
//! the guest makes through the standard interface is handed to this folder's broker, whole, as
//! if the guest had called `vak:tool/http.fetch`. The same egress rules, approvals, credential
//! checks, caps and receipts apply; wasmtime-wasi-http only carries the request and the
//! response between the guest and the broker, and never opens a connection itself.

use crate::bindings::vak::tool::http::{Header, Host as _, Request};
use crate::bindings::vak::tool::types::CapabilityError;
use crate::capabilities::Broker;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use std::future::Future;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

/// The hooks of one call: each request goes to a broker that shares the call's grant,
/// receipts, revocations, approvals and secrets.
pub struct BrokeredHttp {
    pub(crate) broker: Broker,
}

type Sent = Result<(
    http::Response<WasiBody>,
    Box<dyn Future<Output = Result<(), Error>> + Send>,
)>;

/// `wasmtime_wasi_http`'s result type.
type Result<T, E = Error> = std::result::Result<T, E>;

impl WasiHttpHooks for BrokeredHttp {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        _options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> Box<dyn Future<Output = Sent> + Send> {
        let mut broker = self.broker.share();
        Box::new(async move {
            let request = into_vak(&broker, request).await?;
            let response = broker.fetch(request).await.map_err(into_error)?;
            let mut builder = http::Response::builder().status(response.status);
            for h in &response.headers {
                builder = builder.header(h.name.as_str(), h.value.as_str());
            }
            let body = Full::new(Bytes::from(response.body))
                .map_err(|never| match never {})
                .boxed_unsync();
            let response = builder
                .body(body)
                .map_err(|e| Error::InternalError(Some(format!("response: {e}"))))?;
            let done: Box<dyn Future<Output = Result<(), Error>> + Send> =
                Box::new(async { Ok(()) });
            Ok((response, done))
        })
    }
}

/// The guest's request as the broker takes it: the body read whole, up to the grant's body cap
/// (past it the request is refused before anything is sent).
async fn into_vak(broker: &Broker, request: http::Request<WasiBody>) -> Result<Request> {
    let limit = broker
        .grant
        .as_ref()
        .and_then(|g| g.http())
        .map_or(0, |h| h.max_body_bytes);
    let (parts, body) = request.into_parts();
    let body = Limited::new(body, usize::try_from(limit).unwrap_or(usize::MAX))
        .collect()
        .await
        .map_err(|_| Error::HttpRequestBodySize(Some(limit)))?
        .to_bytes();
    let headers = parts
        .headers
        .iter()
        // `Host` is the broker's to set, from the URL it checked.
        .filter(|(name, _)| *name != http::header::HOST)
        .map(|(name, value)| {
            Ok(Header {
                name: name.as_str().to_string(),
                value: value
                    .to_str()
                    .map_err(|_| Error::HttpRequestHeaderSize {
                        field_name: Some(name.as_str().to_string()),
                        field_size: None,
                    })?
                    .to_string(),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Request {
        method: parts.method.as_str().to_string(),
        url: parts.uri.to_string(),
        headers,
        body: (!body.is_empty()).then(|| body.to_vec()),
    })
}

/// The broker's refusal as the guest's `wasi:http` error code. The reason is in the receipt;
/// the standard interface has no field for it beyond an internal error's text.
fn into_error(e: CapabilityError) -> Error {
    match e {
        CapabilityError::Denied(_) | CapabilityError::Revoked(_) => Error::HttpRequestDenied,
        CapabilityError::Invalid(_) => Error::HttpRequestUriInvalid,
        CapabilityError::Failed(message) => Error::InternalError(Some(message)),
    }
}

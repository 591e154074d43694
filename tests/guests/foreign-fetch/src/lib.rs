//! A foreign component: `fetch(url)` over wasi:http with `wstd`, exported at the top level of
//! its own world (`wit/world.wit`), as components written for other hosts are.

use wstd::http::{Body, Client, Request};

wit_bindgen::generate!({
    world: "foreign-fetch",
    path: "wit",
});

struct ForeignFetch;

impl Guest for ForeignFetch {
    fn fetch(url: String) -> Result<String, String> {
        wstd::runtime::block_on(get(url))
    }
}

async fn get(url: String) -> Result<String, String> {
    let request = Request::get(url)
        .body(Body::empty())
        .map_err(|e| format!("bad request: {e}"))?;
    let mut response = Client::new()
        .send(request)
        .await
        .map_err(|e| format!("request failed: {e}"))?;
    let status = response.status().as_u16();
    if status != 200 {
        return Err(format!("status {status}"));
    }
    let body = response
        .body_mut()
        .contents()
        .await
        .map_err(|e| format!("reading the body failed: {e}"))?;
    Ok(String::from_utf8_lossy(body).into_owned())
}

export!(ForeignFetch);

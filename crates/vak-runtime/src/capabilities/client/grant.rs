//! The `client` section of a tool's policy: which requests (`sampling`, `elicitation`) it may
//! send the caller's client.

use serde::Deserialize;

/// What a `client` grant may ask of the caller's client.
pub const CLIENT_REQUESTS: [&str; 2] = ["sampling", "elicitation"];

/// The policy section, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientGrantFile {
    /// `sampling`, `elicitation`.
    requests: Vec<String>,
}

/// The section compiled: requests of [`CLIENT_REQUESTS`].
pub fn compile(file: ClientGrantFile) -> Result<Vec<String>, String> {
    if let Some(bad) = file
        .requests
        .iter()
        .find(|r| !CLIENT_REQUESTS.contains(&r.as_str()))
    {
        return Err(format!(
            "`client.requests` names {bad:?}; the requests are {CLIENT_REQUESTS:?}"
        ));
    }
    Ok(file.requests)
}

/// Whether `requests` cover a claim of the requests `claimed`.
pub fn covers(requests: &[String], claimed: &[String]) -> Result<(), String> {
    super::super::claims::outside(claimed, "client", "requests", |s| {
        requests.iter().any(|r| r == s)
    })
}

//! Fetches what its arguments say: the tests aim it at internal addresses and redirects.

use vak_guest::prelude::*;

#[derive(Deserialize, JsonSchema)]
pub struct Args {
    pub url: String,
    /// Send this as an `Authorization` header.
    #[serde(default)]
    pub authorization: Option<String>,
    /// Name this credential alias (`vak-credential`), for the host to inject.
    #[serde(default)]
    pub credential: Option<String>,
    /// Set the `Host` header (which the host must refuse).
    #[serde(default)]
    pub host_header: Option<String>,
    /// Fetch again and again until refused.
    #[serde(default)]
    pub repeat: bool,
    /// Fetch nothing: ask the host about these credential aliases and report what it said.
    #[serde(default)]
    pub ask_credentials: Vec<String>,
}

pub struct Fetcher;

impl Tool for Fetcher {
    type Args = Args;
    const NAME: &'static str = "fetcher";
    const DESCRIPTION: &'static str = "Fetches one URL, as asked.";

    fn claims() -> Claims {
        Claims::new().http(Vec::<String>::new())
    }

    fn call(args: Args) -> Result<Output, ToolError> {
        if !args.ask_credentials.is_empty() {
            let mut lines = Vec::new();
            for alias in &args.ask_credentials {
                lines.push(match http::credential(alias) {
                    Ok(Some(info)) => format!(
                        "{}: audience {} held {}",
                        info.alias,
                        info.audience.join(","),
                        info.held
                    ),
                    Ok(None) => format!("{alias}: none"),
                    Err(e) => format!("{alias}: error {e}"),
                });
            }
            return Ok(Output::markdown(lines.join("\n")));
        }
        let mut headers = Vec::new();
        if let Some(a) = &args.authorization {
            headers.push(http::Header {
                name: "Authorization".into(),
                value: a.clone(),
            });
        }
        if let Some(c) = &args.credential {
            headers.push(http::Header {
                name: http::CREDENTIAL_HEADER.into(),
                value: c.clone(),
            });
        }
        if let Some(h) = &args.host_header {
            headers.push(http::Header {
                name: "Host".into(),
                value: h.clone(),
            });
        }
        let request = http::Request {
            method: "GET".into(),
            url: args.url.clone(),
            headers,
            body: None,
        };
        let code = |e: &CapabilityError| match e {
            CapabilityError::Denied(_) => "denied",
            CapabilityError::Revoked(_) => "revoked",
            CapabilityError::Invalid(_) => "invalid",
            CapabilityError::Failed(_) => "failed",
        };
        let mut fetched = 0u32;
        loop {
            match http::fetch(&request) {
                Ok(r) if !args.repeat => {
                    return Ok(Output::markdown(
                        String::from_utf8_lossy(&r.body).into_owned(),
                    ));
                }
                Ok(_) => fetched += 1,
                Err(e) => {
                    return Err(ToolError::new(
                        code(&e),
                        format!("after {fetched} fetches: {e}"),
                    ));
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}

vak_guest::export_tool!(Fetcher);

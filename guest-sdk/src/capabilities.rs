//! Typed wrappers over the capability imports. A tool binary imports a capability interface only
//! when it calls one of these functions, so `vak inspect` shows exactly what the code uses.

use crate::bindings::vak::tool::types::CapabilityError as WitCapabilityError;
use std::fmt;

/// Why the host did not carry out a capability request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CapabilityError {
    /// The request is outside what this call was granted.
    Denied(String),
    /// The grant was revoked while the call was running.
    Revoked(String),
    /// The request itself is invalid (an unknown zone, a malformed argument).
    Invalid(String),
    /// The host could not complete the effect.
    Failed(String),
}

impl From<WitCapabilityError> for CapabilityError {
    fn from(e: WitCapabilityError) -> Self {
        match e {
            WitCapabilityError::Denied(m) => Self::Denied(m),
            WitCapabilityError::Revoked(m) => Self::Revoked(m),
            WitCapabilityError::Invalid(m) => Self::Invalid(m),
            WitCapabilityError::Failed(m) => Self::Failed(m),
        }
    }
}

impl fmt::Display for CapabilityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Denied(m) => write!(f, "denied: {m}"),
            Self::Revoked(m) => write!(f, "revoked: {m}"),
            Self::Invalid(m) => write!(f, "invalid request: {m}"),
            Self::Failed(m) => write!(f, "failed: {m}"),
        }
    }
}

impl std::error::Error for CapabilityError {}

/// The host clock, always read in an explicit IANA zone (there is no default zone).
pub mod clock {
    use super::CapabilityError;
    use crate::bindings::vak::tool::clock as wit;

    pub use wit::Reading;

    /// The current instant in `zone` (e.g. `Europe/Paris`). The reading carries the id of the
    /// host receipt that records it; cite it as `observed` evidence.
    pub fn now(zone: &str) -> Result<Reading, CapabilityError> {
        wit::now(zone).map_err(CapabilityError::from)
    }
}

/// Fetches from the origins the policy grants the tool; the host checks every address and hop.
pub mod http {
    use super::CapabilityError;
    use crate::bindings::vak::tool::http as wit;

    pub use wit::{CredentialInfo, Header, Request, Response};

    /// The header that names a credential alias in a request. The host removes it and injects
    /// the value (never visible to the tool) only for an origin of the alias's audience.
    pub const CREDENTIAL_HEADER: &str = "vak-credential";

    /// GET `url`. The response carries the body's SHA-256 and the receipt id; cite it as `cited`
    /// evidence with that digest.
    pub fn get(url: &str) -> Result<Response, CapabilityError> {
        fetch(&Request {
            method: "GET".into(),
            url: url.into(),
            headers: Vec::new(),
            body: None,
        })
    }

    /// Any request (GET, HEAD, POST, PUT, PATCH, DELETE).
    pub fn fetch(request: &Request) -> Result<Response, CapabilityError> {
        wit::fetch(request).map_err(CapabilityError::from)
    }

    /// The credential `alias`, if the policy grants it to this tool: its audience and whether
    /// the host holds a value for it. Never the value itself.
    pub fn credential(alias: &str) -> Result<Option<CredentialInfo>, CapabilityError> {
        wit::credential(alias).map_err(CapabilityError::from)
    }
}

/// Child runs: call another admitted tool through the host's whole lifecycle.
pub mod invoke {
    use super::CapabilityError;
    use crate::bindings::vak::tool::invoke as wit;

    pub use wit::ChildRun;

    /// Run `tool` with `arguments` (JSON text). A child that fails is still `Ok`, with its status;
    /// `Err` means the host did not start it.
    pub fn call(tool: &str, arguments: &str) -> Result<ChildRun, CapabilityError> {
        wit::call(tool, arguments).map_err(CapabilityError::from)
    }
}

/// Files inside the workspace roots the policy grants the tool (named roots, relative paths).
pub mod workspace {
    use super::CapabilityError;
    use crate::bindings::vak::tool::workspace as wit;

    pub use wit::{Entry, FileRead, FileWritten, Listing};

    /// Read `path` under the root named `root`. The result carries the content's SHA-256 and the
    /// receipt id; cite it as `observed` evidence with that digest.
    pub fn read(root: &str, path: &str) -> Result<FileRead, CapabilityError> {
        wit::read(root, path).map_err(CapabilityError::from)
    }

    /// Replace or create `path` under `root` (the root must be granted read-write).
    pub fn write(root: &str, path: &str, content: &[u8]) -> Result<FileWritten, CapabilityError> {
        wit::write(root, path, content).map_err(CapabilityError::from)
    }

    /// List the directory `path` under `root` (`""` for the root).
    pub fn list(root: &str, path: &str) -> Result<Listing, CapabilityError> {
        wit::list(root, path).map_err(CapabilityError::from)
    }
}

/// Bounded log lines kept in the call record (not on any protocol stream).
pub mod log {
    use crate::bindings::vak::tool::log as wit;

    /// A debug line.
    pub fn debug(message: &str) {
        wit::write(wit::Level::Debug, message);
    }

    /// An informational line.
    pub fn info(message: &str) {
        wit::write(wit::Level::Info, message);
    }

    /// A warning.
    pub fn warn(message: &str) {
        wit::write(wit::Level::Warn, message);
    }

    /// An error line (the call may still complete).
    pub fn error(message: &str) {
        wit::write(wit::Level::Error, message);
    }
}

/// Ask the caller's client: a completion from its model, a person's answer to a form, or its
/// roots; one at a time or several together ([`client::Ask`]). The
/// policy must grant the request (`client.requests`), and the call must come from a client that
/// can answer (an MCP client that declared the capability); otherwise the request is denied.
pub mod client {
    use super::CapabilityError;
    use crate::bindings::vak::tool::client as wit;

    pub use wit::{
        ElicitationAction, ElicitationReply, Form, InputAnswer, InputRequest, KeyedRequest,
        Message, Root, RootsReply, SamplingReply, SamplingRequest,
    };

    /// Ask the client's model to answer `prompt` (one user message) in at most `max_tokens`
    /// tokens. The reply is a model's output: cite its receipt only as `synthesized`.
    pub fn sample(prompt: &str, max_tokens: u32) -> Result<SamplingReply, CapabilityError> {
        sample_messages(&SamplingRequest {
            messages: vec![Message {
                role: "user".into(),
                text: prompt.into(),
            }],
            system_prompt: None,
            max_tokens,
        })
    }

    /// Ask for a completion of a whole conversation.
    pub fn sample_messages(request: &SamplingRequest) -> Result<SamplingReply, CapabilityError> {
        wit::sample(request).map_err(CapabilityError::from)
    }

    /// Ask the person `message` with a form: `schema` is a JSON Schema object of flat properties
    /// (string, number, integer, boolean, arrays of enumerated strings). The host checks the
    /// answers against it before they reach the tool.
    pub fn elicit(
        message: &str,
        schema: &serde_json::Value,
    ) -> Result<ElicitationReply, CapabilityError> {
        wit::elicit(message, &schema.to_string()).map_err(CapabilityError::from)
    }

    /// Ask the client for its roots: the `file://` URIs of the directories the person works in
    /// (the policy grants `roots`).
    pub fn list_roots() -> Result<RootsReply, CapabilityError> {
        wit::list_roots().map_err(CapabilityError::from)
    }

    /// Several requests asked together, each under a key of the tool's choosing: a stateless
    /// MCP client answers them in one input-required round. Build with [`Ask::new`], send with
    /// [`Ask::send`].
    #[derive(Default)]
    pub struct Ask {
        requests: Vec<KeyedRequest>,
    }

    impl Ask {
        pub fn new() -> Ask {
            Ask::default()
        }

        /// A form under `key` (see [`elicit`]).
        pub fn elicit(mut self, key: &str, message: &str, schema: &serde_json::Value) -> Ask {
            self.requests.push(KeyedRequest {
                key: key.into(),
                request: InputRequest::Elicit(Form {
                    message: message.into(),
                    schema: schema.to_string(),
                }),
            });
            self
        }

        /// A completion of `prompt` under `key` (see [`sample`]).
        pub fn sample(mut self, key: &str, prompt: &str, max_tokens: u32) -> Ask {
            self.requests.push(KeyedRequest {
                key: key.into(),
                request: InputRequest::Sample(SamplingRequest {
                    messages: vec![Message {
                        role: "user".into(),
                        text: prompt.into(),
                    }],
                    system_prompt: None,
                    max_tokens,
                }),
            });
            self
        }

        /// The client's roots under `key` (see [`list_roots`]).
        pub fn roots(mut self, key: &str) -> Ask {
            self.requests.push(KeyedRequest {
                key: key.into(),
                request: InputRequest::Roots,
            });
            self
        }

        /// Ask: the answers in the order asked, each its own outcome.
        pub fn send(self) -> Result<Vec<Result<InputAnswer, CapabilityError>>, CapabilityError> {
            let answers = wit::ask(&self.requests).map_err(CapabilityError::from)?;
            Ok(answers
                .into_iter()
                .map(|a| a.map_err(CapabilityError::from))
                .collect())
        }
    }
}

//! The vocabulary every stage shares: the capabilities a tool can be granted, and the host's
//! receipts of the effects they carried out.

use serde::{Deserialize, Serialize};

/// The capability interfaces vak brokers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Capability {
    Clock,
    Http,
    Workspace,
    Invoke,
    Log,
    Client,
}

impl Capability {
    /// Every capability, in a stable order.
    pub const ALL: [Capability; 6] = [
        Capability::Clock,
        Capability::Http,
        Capability::Workspace,
        Capability::Invoke,
        Capability::Log,
        Capability::Client,
    ];

    /// The capability's name in claims and policies.
    pub fn name(self) -> &'static str {
        match self {
            Capability::Clock => "clock",
            Capability::Http => "http",
            Capability::Workspace => "workspace",
            Capability::Invoke => "invoke",
            Capability::Log => "log",
            Capability::Client => "client",
        }
    }

    /// The capability by its name in claims and policies.
    pub fn from_name(name: &str) -> Option<Capability> {
        Capability::ALL.into_iter().find(|c| c.name() == name)
    }

    /// One line for a security reviewer: what importing this interface lets a tool do.
    pub fn summary(self) -> &'static str {
        match self {
            Capability::Clock => {
                "read the host's current time in an explicit IANA zone (each reading leaves a receipt)"
            }
            Capability::Http => {
                "fetch from the origins the policy allows; the host resolves, checks every address and redirect, caps body and time (each fetch leaves a receipt with the body digest)"
            }
            Capability::Workspace => {
                "read, list and (where granted read-write) write files inside the granted roots (each read and write leaves a receipt with the content digest)"
            }
            Capability::Invoke => {
                "call the admitted tools the policy lists, as child runs through the whole lifecycle, within this call's budget"
            }
            Capability::Log => {
                "write bounded log lines into the call record (forwarded to an MCP client that asked for logs)"
            }
            Capability::Client => {
                "ask the caller's client for a model completion (sampling) or a person's answer to a form (elicitation), as the policy grants (each exchange leaves a receipt)"
            }
        }
    }
}

/// A host receipt: the host's own record of one brokered effect.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Receipt {
    /// Unique id, `<call id>/<n>`; tools cite it in evidence.
    pub id: String,
    /// The call whose instance asked for the effect.
    pub call_id: String,
    /// The capability that carried it out.
    pub capability: Capability,
    /// The operation within the capability (e.g. `now`).
    pub operation: String,
    /// What the tool asked for.
    pub request: serde_json::Value,
    /// What happened: the observation, or the refusal.
    pub outcome: serde_json::Value,
    /// Whether the effect was carried out (`false`: refused or failed, with the reason in `outcome`).
    pub ok: bool,
    /// SHA-256 of the observed content: a file's or a body's bytes, else the JSON of `outcome`.
    pub digest: String,
    /// When the host carried it out (RFC 3339, UTC).
    pub at: String,
}

/// Caps on one call's resources; `None` falls back to the policy's defaults, then the host's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Caps {
    pub fuel: Option<u64>,
    pub memory_bytes: Option<u64>,
    pub wall_time_ms: Option<u64>,
    pub result_bytes: Option<u64>,
    /// Calls of this tool one session may make.
    pub calls_per_session: Option<u64>,
}

impl Caps {
    /// `self`, with fields it leaves unset taken from `fallback`.
    pub fn or(self, fallback: Caps) -> Caps {
        Caps {
            fuel: self.fuel.or(fallback.fuel),
            memory_bytes: self.memory_bytes.or(fallback.memory_bytes),
            wall_time_ms: self.wall_time_ms.or(fallback.wall_time_ms),
            result_bytes: self.result_bytes.or(fallback.result_bytes),
            calls_per_session: self.calls_per_session.or(fallback.calls_per_session),
        }
    }
}

/// Totals one session (a conversation, a turn: the embedder's unit) may use across its calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionCaps {
    pub calls: Option<u64>,
    pub fuel: Option<u64>,
    pub wall_time_ms: Option<u64>,
    pub result_bytes: Option<u64>,
}

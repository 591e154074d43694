//! # vak-host: a WebAssembly-sandboxed tool host
//!
//! A language model proposes tool calls; vak decides whether a proposal becomes an execution,
//! runs it in a fresh WebAssembly component instance with only the capabilities the policy
//! grants, and reports what really happened in one [`CallRecord`] per call.
//!
//! The modules follow the call lifecycle:
//! [`proposal`] → [`schema`] → [`policy`] (permission) → [`budget`] → [`dispatch`] (with the
//! [`capabilities`] it brokers) → [`result`] → outcome → projection, all recorded in [`record`].
//! Tools are admitted once ([`admission`]): compiled (with an AOT cache), their imports checked
//! against their claims and the policy, and pre-linked for their grant.
//!
//! Start with [`HostBuilder`].

pub mod admission;
pub mod approval;
#[doc(hidden)]
pub mod bench_support;
pub mod budget;
pub mod bundled;
pub mod capabilities;
pub use vak_core::digest;
pub mod dispatch;
pub mod evidence;
#[doc(hidden)]
pub mod fuzzing;
mod host;
pub mod journal;
pub mod mcp;
pub mod outcome;
pub mod policy;
pub mod projection;
pub mod proposal;
pub mod record;
pub mod registry;
pub mod result;
pub mod revocation;
pub mod schema;
pub mod secrets;
pub mod signing;
pub use vak_core::stage;
pub mod store;

pub use admission::{AdmissionError, AdmittedTool, Descriptor, Examination, Verdict};
pub use dispatch::{DispatchError, EngineSettings};
pub use host::{Host, HostBuilder, HostError, InvalidSessionId, PermissionError, Session};
pub use policy::Policy;
pub use proposal::Proposal;
pub use record::{CallRecord, Status};
pub use revocation::{Blocked, Revocation, Revocations};
pub use stage::{CallError, Stage};
pub use store::{Store, StoreError};

//! # vak-runtime: the call pipeline and the sandbox
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
//! The pure stages (proposal, schema, registry, evidence, outcome, projection, the record, the
//! journal's chain checks) live in the `vak-core` crate, the journal, signing key, revocations
//! and stores in `vak-store`; both are re-exported here at the paths they always had. This
//! crate runs components and brokers their effects (one folder per capability); `vak-host`
//! adds the servers (MCP, the audit pages) and the `vak` binary, and re-exports all of this.
//! `docs/architecture.md` draws the layout.
//!
//! Start with [`HostBuilder`].

pub mod admission;
pub mod approval;
#[doc(hidden)]
pub mod bench_support;
pub mod bindings;
pub mod budget;
pub mod bundled;
pub mod capabilities;
mod child_runner;
pub use vak_core::digest;
pub mod dispatch;
pub use vak_core::evidence;
pub mod foreign;
#[doc(hidden)]
pub mod fuzzing;
mod host;
pub use vak_core::outcome;
pub use vak_store::journal;
pub mod policy;
pub use vak_core::projection;
pub use vak_core::proposal;
/// The call record (data, in `vak_core::record`) and the bound on its size under the host's
/// caps.
pub mod record {
    pub use crate::result::{JSON_ESCAPE_FACTOR, RECORD_FRAME_BYTES, max_record_bytes};
    pub use vak_core::record::*;
}
mod redaction;
pub use vak_core::registry;
pub mod result;
pub use vak_core::schema;
pub use vak_store::revocation;
pub mod secrets;
pub use vak_core::stage;
pub use vak_store::signing;
pub use vak_store::store;

pub use admission::{AdmissionError, AdmittedTool, Descriptor, Examination, Verdict};
pub use dispatch::{DispatchError, EngineSettings, MemoryReset};
pub use host::{
    FinishOnDrop, Host, HostBuilder, HostError, InvalidSessionId, PermissionError, Session,
};
pub use policy::Policy;
pub use proposal::Proposal;
pub use record::{CallRecord, Status};
pub use revocation::{Blocked, Revocation, Revocations};
pub use stage::{CallError, Stage};
pub use store::{Store, StoreError};

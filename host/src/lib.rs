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
//! The crates: `vak-core` holds the pure stages (proposal, schema, registry, evidence,
//! outcome, projection, the record, the journal's chain checks); `vak-store` the journal,
//! signing key, revocations and stores; `vak-runtime` the pipeline, the sandbox and the
//! capability brokers. This crate adds the servers ([`mcp`], [`audit_web`]) and the `vak`
//! binary, and re-exports the others at the paths they always had. `docs/architecture.md`
//! draws the layout.
//!
//! Start with [`HostBuilder`].

pub mod audit_web;
pub mod mcp;

pub use vak_runtime::*;

//! The lifecycle stages and the refusal value every stage produces.
//!
//! Each stage has its own error enum (in its own module); all of them convert into one
//! [`CallError`] for the call record: which stage, what kind, the message, and whether a retry of
//! the same call could help. Only host-side transport faults are retryable: a malformed call, a
//! denial or an exhausted budget gives the same answer every time.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The lifecycle stages, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// A provider's proposal becomes one neutral call (tool name, arguments).
    Proposal,
    /// The arguments are checked against the tool's admitted schema.
    Schema,
    /// The policy grants the call and nothing revoked it.
    Permission,
    /// The tool's claims are admitted against policy caps and the session budget.
    Budget,
    /// A fresh sandboxed instance runs the call under the admitted limits.
    Dispatch,
    /// The typed result and its evidence are collected and checked.
    Result,
    /// Requirements are evaluated against the evidence.
    Outcome,
    /// The result is projected for a renderer.
    Projection,
}

impl Stage {
    /// Every stage, in lifecycle order.
    pub const ALL: [Stage; 8] = [
        Stage::Proposal,
        Stage::Schema,
        Stage::Permission,
        Stage::Budget,
        Stage::Dispatch,
        Stage::Result,
        Stage::Outcome,
        Stage::Projection,
    ];

    /// The stage's name as it appears in records.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Proposal => "proposal",
            Stage::Schema => "schema",
            Stage::Permission => "permission",
            Stage::Budget => "budget",
            Stage::Dispatch => "dispatch",
            Stage::Result => "result",
            Stage::Outcome => "outcome",
            Stage::Projection => "projection",
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A stage's typed error, seen uniformly by the pipeline.
pub trait StageError: std::error::Error {
    /// The stage that produced the error.
    fn stage(&self) -> Stage;
    /// A stable snake_case name of the condition (for programs and models).
    fn kind(&self) -> &'static str;
    /// Whether the same call, retried unchanged, could succeed.
    fn retryable(&self) -> bool {
        false
    }
    /// Extra figures (limits, sizes, pointers) that explain the error, if any.
    fn details(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
}

/// The error of a call, as kept in its record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallError {
    /// Stable snake_case name of the condition, e.g. `fuel_exhausted`.
    pub kind: String,
    /// Text for the model and for the person reading the record.
    pub message: String,
    /// The stage that stopped the call.
    pub stage: Stage,
    /// Whether the same call, retried unchanged, could succeed.
    pub retryable: bool,
    /// Figures that explain the error (limits, sizes, pointers), or null.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub details: serde_json::Value,
}

impl<E: StageError> From<&E> for CallError {
    fn from(e: &E) -> Self {
        CallError {
            kind: e.kind().to_string(),
            message: e.to_string(),
            stage: e.stage(),
            retryable: e.retryable(),
            details: e.details(),
        }
    }
}

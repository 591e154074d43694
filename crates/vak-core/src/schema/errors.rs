//! What the schema stage says when it refuses: each violation with its pointers, and why a
//! schema could not be compiled at admission.

use super::*;

/// One violation: where in the arguments, and which schema keyword.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Violation {
    /// JSON Pointer of the offending value in the arguments (`""` is the whole document).
    pub instance: String,
    /// JSON Pointer of the schema keyword that refused it.
    pub keyword: String,
    pub message: String,
}

/// Why arguments did not pass the schema.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SchemaError {
    #[error("the arguments do not match the tool's schema: {}", describe(.violations, *.more))]
    Violations {
        violations: Vec<Violation>,
        /// Violations beyond [`MAX_VIOLATIONS`], not listed.
        more: usize,
    },
}

fn describe(violations: &[Violation], more: usize) -> String {
    let mut s = String::new();
    for (i, v) in violations.iter().enumerate() {
        if i > 0 {
            s.push_str("; ");
        }
        let at = if v.instance.is_empty() {
            "(root)"
        } else {
            &v.instance
        };
        let _ = write!(s, "{at}: {} [{}]", v.message, v.keyword);
    }
    if more > 0 {
        let _ = write!(s, "; and {more} more");
    }
    s
}

impl StageError for SchemaError {
    fn stage(&self) -> Stage {
        Stage::Schema
    }

    fn kind(&self) -> &'static str {
        "schema_violation"
    }

    fn details(&self) -> Value {
        match self {
            SchemaError::Violations { violations, more } => {
                json!({ "violations": violations, "unlisted": more })
            }
        }
    }
}

/// Why a schema cannot be admitted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaCompileError {
    #[error(
        "{pointer}: `$ref` {reference:?} is not a local JSON Pointer; remote and file references are never resolved"
    )]
    NonLocalRef { pointer: String, reference: String },
    #[error("{pointer}: `$ref` {reference:?} points at nothing in the schema")]
    UnresolvedRef { pointer: String, reference: String },
    #[error(
        "{pointer}: `$ref` {reference:?} loops back to itself without descending into the value"
    )]
    RefCycle { pointer: String, reference: String },
    #[error("{pointer}: {message}")]
    Malformed { pointer: String, message: String },
}

//! Schema contract: the arguments against the tool's admitted input schema.
//!
//! This stage's seam: a schema is compiled once at admission into a [`CompiledSchema`]; a call's
//! arguments are validated against it without repair. The provider-neutral subset validator
//! (types, properties, required, additionalProperties, enum, const, items, local `$ref`) lands
//! with the call-contract work; until then the boundary enforces only that the arguments are an
//! object and that the root `required` properties are present, and says so at admission.

use crate::stage::{Stage, StageError};
use serde_json::{Map, Value, json};

/// One violation: where in the arguments, and which schema keyword.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Violation {
    /// JSON Pointer of the offending value in the arguments.
    pub instance: String,
    /// JSON Pointer of the schema keyword that refused it.
    pub keyword: String,
    pub message: String,
}

/// Why arguments did not pass the schema.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SchemaError {
    #[error("the arguments do not match the tool's schema: {}", .violations.iter().map(|v| format!("{} ({}): {}", if v.instance.is_empty() { "/" } else { &v.instance }, v.keyword, v.message)).collect::<Vec<_>>().join("; "))]
    Violations { violations: Vec<Violation> },
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
            SchemaError::Violations { violations } => json!({ "violations": violations }),
        }
    }
}

/// A tool's input schema, compiled at admission.
#[derive(Debug, Clone)]
pub struct CompiledSchema {
    required: Vec<String>,
    /// Keywords present in the schema that this boundary does not enforce.
    pub not_enforced: Vec<String>,
}

impl CompiledSchema {
    /// Compile the admitted schema.
    pub fn compile(schema: &Value) -> CompiledSchema {
        let required = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| {
                r.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        let mut not_enforced: Vec<String> = schema
            .as_object()
            .map(|o| {
                o.keys()
                    .filter(|k| {
                        !matches!(
                            k.as_str(),
                            "required" | "$schema" | "title" | "description" | "$comment"
                        )
                    })
                    .map(|k| format!("/{k}"))
                    .collect()
            })
            .unwrap_or_default();
        not_enforced.sort();
        CompiledSchema {
            required,
            not_enforced,
        }
    }

    /// Validate `arguments`, reporting every violation.
    pub fn validate(&self, arguments: &Map<String, Value>) -> Result<(), SchemaError> {
        let violations: Vec<Violation> = self
            .required
            .iter()
            .filter(|name| !arguments.contains_key(name.as_str()))
            .map(|name| Violation {
                instance: String::new(),
                keyword: "/required".into(),
                message: format!("the required property {name:?} is missing"),
            })
            .collect();
        if violations.is_empty() {
            Ok(())
        } else {
            Err(SchemaError::Violations { violations })
        }
    }
}

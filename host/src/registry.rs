//! The payload schema registry: versioned schemas a typed payload can claim, each naming its
//! material fields (JSON Pointers without which a claim is not meaningful). A payload is checked
//! against the schema its id names, never matched by the look of its fields: a payload whose id is
//! not registered is an ordinary document, whatever its fields are called.

use crate::schema::{CompiledSchema, SchemaCompileError};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The domain a registered schema belongs to; it decides which requirements apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Domain {
    Temporal,
    Research,
    Coding,
    DataComparison,
    /// Registered by an embedder; only the generic requirements apply.
    Other,
}

/// One registered payload schema.
#[derive(Debug, Clone)]
pub struct PayloadSchema {
    pub id: String,
    pub domain: Domain,
    pub schema: CompiledSchema,
    /// The schema document, as registered.
    pub document: Value,
    /// Pointers that must be present for a claim to mean anything.
    pub material: Vec<String>,
}

/// The payload schemas the host knows.
#[derive(Debug, Clone)]
pub struct Registry {
    schemas: BTreeMap<String, PayloadSchema>,
}

impl Default for Registry {
    fn default() -> Self {
        Self::builtin()
    }
}

impl Registry {
    /// The four built-in domains.
    pub fn builtin() -> Registry {
        let mut r = Registry {
            schemas: BTreeMap::new(),
        };
        let builtin = [
            (
                "vak.temporal.instant/1",
                Domain::Temporal,
                json!({
                    "type": "object",
                    "required": ["instant", "unix_seconds", "offset_seconds", "zone", "observed_at", "max_age_seconds"],
                    "properties": {
                        "instant": {"type": "string"},
                        "unix_seconds": {"type": "integer"},
                        "offset_seconds": {"type": "integer"},
                        "zone": {"type": "string"},
                        "observed_at": {"type": "string"},
                        "max_age_seconds": {"type": "integer"}
                    }
                }),
                vec![
                    "/zone",
                    "/instant",
                    "/offset_seconds",
                    "/observed_at",
                    "/max_age_seconds",
                ],
            ),
            (
                "vak.research.findings/1",
                Domain::Research,
                json!({
                    "type": "object",
                    "required": ["findings"],
                    "properties": {"findings": {"type": "array", "items": {
                        "type": "object",
                        "required": ["claim", "sources", "evidence"],
                        "properties": {
                            "claim": {"type": "string"},
                            "sources": {"type": "array", "items": {"type": "object", "required": ["url"],
                                "properties": {"url": {"type": "string"}, "sha256": {"type": "string"}}}},
                            "evidence": {"type": "array", "items": {"type": "string"}}
                        }
                    }}}
                }),
                vec!["/findings"],
            ),
            (
                "vak.coding.change/1",
                Domain::Coding,
                json!({
                    "type": "object",
                    "required": ["files", "verification"],
                    "properties": {
                        "files": {"type": "array", "items": {"type": "object",
                            "required": ["path", "before_sha256", "after_sha256"],
                            "properties": {"path": {"type": "string"}, "before_sha256": {"type": "string"}, "after_sha256": {"type": "string"}}}},
                        "verification": {"type": "object", "required": ["method", "matches"],
                            "properties": {"method": {"type": "string"}, "matches": {"type": "boolean"}}}
                    }
                }),
                vec!["/files", "/verification"],
            ),
            (
                "vak.data.comparison/1",
                Domain::DataComparison,
                json!({
                    "type": "object",
                    "required": ["series"],
                    "properties": {
                        "series": {"type": "array", "items": {"type": "object",
                            "required": ["name", "period", "unit", "basis", "value"],
                            "properties": {
                                "name": {"type": "string"},
                                "period": {"type": "object", "required": ["start", "end"],
                                    "properties": {"start": {"type": "string"}, "end": {"type": "string"}}},
                                "unit": {"type": "string"},
                                "basis": {"type": "string"},
                                "value": {"type": "number"},
                                "evidence": {"type": "string"}
                            }}},
                        "delta": {"type": "object", "required": ["value", "evidence"],
                            "properties": {"value": {"type": "number"}, "evidence": {"type": "string"}}}
                    }
                }),
                vec!["/series"],
            ),
        ];
        for (id, domain, doc, material) in builtin {
            // The built-in schemas are tested below; they compile.
            let schema = CompiledSchema::compile(&doc).expect("built-in payload schema compiles");
            r.schemas.insert(
                id.to_string(),
                PayloadSchema {
                    id: id.to_string(),
                    domain,
                    schema,
                    document: doc,
                    material: material.into_iter().map(str::to_string).collect(),
                },
            );
        }
        r
    }

    /// Register an embedder's schema (replacing one with the same id).
    pub fn register(
        &mut self,
        id: &str,
        document: Value,
        material: Vec<String>,
    ) -> Result<(), SchemaCompileError> {
        let schema = CompiledSchema::compile(&document)?;
        self.schemas.insert(
            id.to_string(),
            PayloadSchema {
                id: id.to_string(),
                domain: Domain::Other,
                schema,
                document,
                material,
            },
        );
        Ok(())
    }

    /// The schema registered under `id`.
    pub fn get(&self, id: &str) -> Option<&PayloadSchema> {
        self.schemas.get(id)
    }

    /// Every registered schema.
    pub fn all(&self) -> impl Iterator<Item = &PayloadSchema> {
        self.schemas.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_compile_and_enforce_everything_they_say() {
        let r = Registry::builtin();
        assert_eq!(r.all().count(), 4);
        assert!(
            r.all().all(|s| s.schema.not_enforced.is_empty()),
            "the registry uses only the enforced subset"
        );
    }
}

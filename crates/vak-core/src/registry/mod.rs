//! The payload schema registry: versioned schemas a typed payload can claim, each naming its
//! material fields (JSON Pointers without which a claim is not meaningful) and its **bindings**:
//! for each field a person reads, what can back its value. A payload is checked against the
//! schema its id names, never matched by the look of its fields: a payload whose id is not
//! registered is an ordinary document, whatever its fields are called.
//!
//! A binding says one of three things about a field:
//! - [`Backing::Receipt`]: which kinds of evidence item (`observed`, `cited`) resting on which
//!   receipts (capability and operation) can back it, and how its value must relate to what the
//!   receipt recorded ([`Relation`]): equal to a receipt field, derived from the receipt by a
//!   named host function, or text that occurs in the body the host fetched or read.
//! - [`Backing::Computed`]: the host recomputes the value from other fields of the payload with a
//!   named [`Computation`]; only a `computed` item can back it, and only when the values agree.
//! - [`Backing::Declared`]: the tool's own statement (a freshness contract, a series' name, the
//!   ids of evidence items). It must be present where it is material, no receipt can observe it,
//!   and it does not block `verified`.
//!
//! A field without a binding is something the host cannot check: no item backs it, and it is
//! shown as not backed. `verified` needs every binding marked `material` whose field is present
//! backed (see [`crate::outcome`]).

use crate::schema::{CompiledSchema, SchemaCompileError};
use crate::types::Capability;
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
    /// Registered by an embedder, or a built-in schema of no requirement's domain (the
    /// `stats` summary); only the generic requirements apply.
    Other,
}

/// The kinds of evidence item that can rest on a receipt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemKind {
    /// Witnessed by the host.
    Observed,
    /// Said by a source the host fetched or read.
    Cited,
}

impl ItemKind {
    /// The kind's name in evidence items.
    pub fn name(self) -> &'static str {
        match self {
            ItemKind::Observed => "observed",
            ItemKind::Cited => "cited",
        }
    }
}

/// A receipt that can back a field: its capability and operation (`clock` `now`, `http`
/// `fetch`, `workspace` `read`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Source {
    pub capability: Capability,
    pub operation: String,
}

impl Source {
    /// A receipt of `capability`'s `operation`.
    pub fn new(capability: Capability, operation: &str) -> Source {
        Source {
            capability,
            operation: operation.to_string(),
        }
    }
}

/// A host-side function that derives a field's value from a receipt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Derivation {
    /// A clock reading: the UTC offset, in seconds, of the reading's zone at the reading's
    /// instant, as the host's time zone database gives it.
    OffsetInZone,
    /// A workspace read: whether the file read back holds what the call last wrote to it (a
    /// write receipt of this call for the same root and path, issued before the read, with the
    /// same digest).
    ReadBackMatches,
}

impl Derivation {
    /// The function's name in diagnostics and documentation.
    pub fn name(self) -> &'static str {
        match self {
            Derivation::OffsetInZone => "offset_in_zone",
            Derivation::ReadBackMatches => "read_back_matches",
        }
    }
}

/// How a field's value must relate to the receipt an item rests on.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "relation", content = "field", rename_all = "snake_case")]
pub enum Relation {
    /// Equal (as JSON) to the value at this pointer in the receipt's `outcome`.
    Outcome(String),
    /// Equal (as JSON) to the value at this pointer in the receipt's `request` (what the host
    /// carried out: a path written, a zone read).
    Request(String),
    /// Equal to the receipt's digest (SHA-256 of the body or file, lowercase hex).
    Digest,
    /// An RFC 3339 instant naming the clock reading's very moment, in any offset.
    SameMoment,
    /// Equal to what the named host function derives from the receipt.
    Derived(Derivation),
    /// Text (a string, or a number in one of its decimal spellings) that occurs in the body the
    /// host fetched or the file it read for that receipt, whitespace runs counted as one space.
    InBody,
}

/// A computation the host knows and recomputes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Computation {
    /// How many numbers the input array holds.
    Count,
    Min,
    Max,
    /// The arithmetic mean.
    Mean,
    /// The middle value of the sorted numbers (the mean of the two middle ones for an even count).
    Median,
    /// The second input minus the first.
    Difference,
}

impl Computation {
    /// The computation's name in diagnostics and documentation.
    pub fn name(self) -> &'static str {
        match self {
            Computation::Count => "count",
            Computation::Min => "min",
            Computation::Max => "max",
            Computation::Mean => "mean",
            Computation::Median => "median",
            Computation::Difference => "difference",
        }
    }
}

/// What can back one field.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "backing", rename_all = "snake_case")]
pub enum Backing {
    /// An `observed` or `cited` item (as `items` lists) resting on a receipt of one of
    /// `sources`, whose value relates to the receipt as `relation` says.
    Receipt {
        items: Vec<ItemKind>,
        sources: Vec<Source>,
        relation: Relation,
    },
    /// A `computed` item, upheld only when the host's own computation over `inputs` (pointers
    /// into the payload: one array of numbers, or one number each) gives the same value.
    Computed {
        computation: Computation,
        inputs: Vec<String>,
    },
    /// The tool's own statement: never observed, never blocks `verified`.
    Declared,
}

/// The binding of the fields a pointer pattern names. A pattern is a JSON Pointer in which a
/// segment `*` stands for every index of an array (`/findings/*/claim`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FieldBinding {
    pub pattern: String,
    pub backing: Backing,
    /// Whether `verified` needs this field backed wherever it is present.
    pub material: bool,
}

impl FieldBinding {
    /// A material field backed by a receipt.
    pub fn receipt(
        pattern: &str,
        items: &[ItemKind],
        sources: &[Source],
        relation: Relation,
    ) -> Self {
        FieldBinding {
            pattern: pattern.to_string(),
            backing: Backing::Receipt {
                items: items.to_vec(),
                sources: sources.to_vec(),
                relation,
            },
            material: true,
        }
    }

    /// A material field the host recomputes.
    pub fn computed(pattern: &str, computation: Computation, inputs: &[&str]) -> Self {
        FieldBinding {
            pattern: pattern.to_string(),
            backing: Backing::Computed {
                computation,
                inputs: inputs.iter().map(|s| s.to_string()).collect(),
            },
            material: true,
        }
    }

    /// A field that is the tool's own statement.
    pub fn declared(pattern: &str) -> Self {
        FieldBinding {
            pattern: pattern.to_string(),
            backing: Backing::Declared,
            material: false,
        }
    }

    /// The same binding, shown as backed or not but never blocking `verified`.
    pub fn informative(mut self) -> Self {
        self.material = false;
        self
    }

    /// Whether the concrete pointer `pointer` is one this pattern names.
    pub fn names(&self, pointer: &str) -> bool {
        pattern_matches(&self.pattern, pointer)
    }
}

/// Whether `pointer` (concrete) matches `pattern` (with `*` segments for array indices).
pub fn pattern_matches(pattern: &str, pointer: &str) -> bool {
    let mut p = pattern.split('/');
    let mut q = pointer.split('/');
    loop {
        match (p.next(), q.next()) {
            (None, None) => return true,
            (Some("*"), Some(s)) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => {}
            (Some(a), Some(b)) if a == b => {}
            _ => return false,
        }
    }
}

/// Why an embedder's bindings are refused.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error(transparent)]
    Schema(#[from] SchemaCompileError),
    #[error("binding {pattern:?}: {reason}")]
    Binding { pattern: String, reason: String },
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
    /// What can back each field (see the module's documentation).
    pub bindings: Vec<FieldBinding>,
}

impl PayloadSchema {
    /// The binding of the concrete pointer `pointer`, if the schema declares one.
    pub fn binding(&self, pointer: &str) -> Option<&FieldBinding> {
        self.bindings.iter().find(|b| b.names(pointer))
    }
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

fn clock() -> Vec<Source> {
    vec![Source::new(Capability::Clock, "now")]
}

fn fetch() -> Vec<Source> {
    vec![Source::new(Capability::Http, "fetch")]
}

/// A fetched page or a file read: where quoted text and figures can come from.
fn fetched_or_read() -> Vec<Source> {
    vec![
        Source::new(Capability::Http, "fetch"),
        Source::new(Capability::Workspace, "read"),
    ]
}

const OBSERVED: &[ItemKind] = &[ItemKind::Observed];
const CITED: &[ItemKind] = &[ItemKind::Cited];
const EITHER: &[ItemKind] = &[ItemKind::Observed, ItemKind::Cited];

/// The built-in schemas: their documents, material fields and bindings.
/// One built-in schema: id, domain, document, material pointers, bindings.
type Builtin = (
    &'static str,
    Domain,
    Value,
    Vec<&'static str>,
    Vec<FieldBinding>,
);

fn builtin_schemas() -> Vec<Builtin> {
    use FieldBinding as F;
    vec![
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
                "/unix_seconds",
                "/offset_seconds",
                "/observed_at",
                "/max_age_seconds",
            ],
            vec![
                // The reading as the host wrote it: the same moment in another offset or zone
                // is not what the host observed.
                F::receipt(
                    "/instant",
                    OBSERVED,
                    &clock(),
                    Relation::Outcome("/instant".into()),
                ),
                F::receipt(
                    "/zone",
                    OBSERVED,
                    &clock(),
                    Relation::Outcome("/zone".into()),
                ),
                F::receipt(
                    "/offset_seconds",
                    OBSERVED,
                    &clock(),
                    Relation::Derived(Derivation::OffsetInZone),
                ),
                F::receipt("/observed_at", OBSERVED, &clock(), Relation::SameMoment),
                // The same reading as `/instant`, in another form a program reads.
                F::receipt(
                    "/unix_seconds",
                    OBSERVED,
                    &clock(),
                    Relation::Outcome("/unix_seconds".into()),
                ),
                // The tool's freshness contract: how long the reading may be shown as "now".
                F::declared("/max_age_seconds"),
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
            vec![
                // A claim is backed only as text the host fetched: a paraphrase or a
                // conclusion is the tool's synthesis.
                F::receipt("/findings/*/claim", CITED, &fetch(), Relation::InBody),
                F::receipt(
                    "/findings/*/sources/*/url",
                    CITED,
                    &fetch(),
                    Relation::Outcome("/final_url".into()),
                ),
                F::receipt(
                    "/findings/*/sources/*/sha256",
                    CITED,
                    &fetch(),
                    Relation::Digest,
                ),
                F::declared("/findings/*/evidence"),
            ],
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
            vec![
                F::receipt(
                    "/files/*/path",
                    OBSERVED,
                    &[
                        Source::new(Capability::Workspace, "read"),
                        Source::new(Capability::Workspace, "write"),
                    ],
                    Relation::Request("/path".into()),
                ),
                F::receipt(
                    "/files/*/root",
                    OBSERVED,
                    &[
                        Source::new(Capability::Workspace, "read"),
                        Source::new(Capability::Workspace, "write"),
                    ],
                    Relation::Request("/root".into()),
                ),
                F::receipt(
                    "/files/*/before_sha256",
                    OBSERVED,
                    &[Source::new(Capability::Workspace, "read")],
                    Relation::Digest,
                ),
                F::receipt(
                    "/files/*/after_sha256",
                    OBSERVED,
                    &[Source::new(Capability::Workspace, "write")],
                    Relation::Digest,
                ),
                F::receipt(
                    "/verification/sha256",
                    OBSERVED,
                    &[Source::new(Capability::Workspace, "read")],
                    Relation::Digest,
                ),
                F::receipt(
                    "/verification/matches",
                    OBSERVED,
                    &[Source::new(Capability::Workspace, "read")],
                    Relation::Derived(Derivation::ReadBackMatches),
                ),
                F::declared("/verification/method"),
            ],
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
            vec![
                F::receipt(
                    "/series/*/value",
                    EITHER,
                    &fetched_or_read(),
                    Relation::InBody,
                ),
                F::receipt(
                    "/series/*/unit",
                    EITHER,
                    &fetched_or_read(),
                    Relation::InBody,
                ),
                F::receipt(
                    "/series/*/basis",
                    EITHER,
                    &fetched_or_read(),
                    Relation::InBody,
                ),
                F::receipt(
                    "/series/*/period/start",
                    EITHER,
                    &fetched_or_read(),
                    Relation::InBody,
                ),
                F::receipt(
                    "/series/*/period/end",
                    EITHER,
                    &fetched_or_read(),
                    Relation::InBody,
                ),
                F::declared("/series/*/name"),
                F::declared("/series/*/evidence"),
                F::computed(
                    "/delta/value",
                    Computation::Difference,
                    &["/series/0/value", "/series/1/value"],
                ),
                F::declared("/delta/evidence"),
            ],
        ),
        (
            "vak.data.summary/1",
            Domain::Other,
            json!({
                "type": "object",
                "required": ["values", "count", "min", "max", "mean", "median"],
                "properties": {
                    "values": {"type": "array", "items": {"type": "number"}},
                    "count": {"type": "integer"},
                    "min": {"type": "number"},
                    "max": {"type": "number"},
                    "mean": {"type": "number"},
                    "median": {"type": "number"},
                    "unit": {"type": "string"}
                }
            }),
            vec!["/values", "/count", "/min", "/max", "/mean", "/median"],
            vec![
                // The figures summarised: backed only where they were fetched or read.
                F::receipt("/values/*", EITHER, &fetched_or_read(), Relation::InBody),
                F::computed("/count", Computation::Count, &["/values"]),
                F::computed("/min", Computation::Min, &["/values"]),
                F::computed("/max", Computation::Max, &["/values"]),
                F::computed("/mean", Computation::Mean, &["/values"]),
                F::computed("/median", Computation::Median, &["/values"]),
                F::declared("/unit"),
            ],
        ),
    ]
}

impl Registry {
    /// The built-in schemas: the four domains and the `stats` summary.
    pub fn builtin() -> Registry {
        let mut r = Registry {
            schemas: BTreeMap::new(),
        };
        for (id, domain, doc, material, bindings) in builtin_schemas() {
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
                    bindings,
                },
            );
        }
        r
    }

    /// Register an embedder's schema (replacing one with the same id) without bindings: no
    /// receipt can back any of its fields, so its results are never `verified`. Use
    /// [`Registry::register_bound`] to say what backs each field.
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
                bindings: Vec::new(),
            },
        );
        Ok(())
    }

    /// Register an embedder's schema with the bindings of its fields. A pattern must be a JSON
    /// Pointer (empty, or starting with `/`); a computed binding needs inputs.
    pub fn register_bound(
        &mut self,
        id: &str,
        document: Value,
        material: Vec<String>,
        bindings: Vec<FieldBinding>,
    ) -> Result<(), RegistryError> {
        for b in &bindings {
            let refuse = |reason: &str| RegistryError::Binding {
                pattern: b.pattern.clone(),
                reason: reason.to_string(),
            };
            if !b.pattern.is_empty() && !b.pattern.starts_with('/') {
                return Err(refuse(
                    "a pattern is a JSON Pointer: empty or starting with `/`",
                ));
            }
            match &b.backing {
                Backing::Receipt { items, sources, .. }
                    if items.is_empty() || sources.is_empty() =>
                {
                    return Err(refuse(
                        "a receipt binding names item kinds and receipt sources",
                    ));
                }
                Backing::Computed { inputs, .. } if inputs.is_empty() => {
                    return Err(refuse("a computed binding names its inputs"));
                }
                _ => {}
            }
        }
        self.register(id, document, material)?;
        if let Some(s) = self.schemas.get_mut(id) {
            s.bindings = bindings;
        }
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
mod tests;

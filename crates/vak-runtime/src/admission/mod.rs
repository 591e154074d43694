//! Admission of a component: before any call, the host reads what the binary really imports and
//! exports, asks it to describe itself in a sandbox where nothing is granted, and cross-checks
//! three sets: the interfaces imported ⊆ the capabilities claimed ⊆ what the policy grants.
//! Everything built here (compiled component, linker, `InstancePre`, grant) is reused by every call.

mod descriptor;
mod foreign;
use descriptor::descriptor_from_wit;
pub use foreign::{ExportedFunction, FunctionVerdict, MAX_FUNCTIONS};

use crate::bindings::SandboxedToolPre;
use crate::capabilities::{Broker, Capability};
use crate::dispatch::linker::{ALLOWED_WASI, ALLOWED_WASI_SEED, GrantSet};
use crate::dispatch::run::Entry;
use crate::dispatch::{CompileError, GuestReturn, Runtime};
use crate::policy::{Policy, ToolGrant};
use crate::record::Limits;
use crate::schema::CompiledSchema;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use wasmtime::component::types::ComponentItem;

/// The WIT package version this host implements, and the versions of it that it accepts.
pub const WIT_PACKAGE: &str = "vak:tool";
pub const WIT_VERSION: &str = "0.2.1";
/// Accepted: 0.2.0 up to this host's own patch. The component model links a 0.2.0 import to the
/// host's 0.2.1 definition (an addition is compatible); a newer patch may import what this host
/// lacks, so it is refused here with a clear reason rather than at link time. 0.1.x is refused:
/// 0.2.0 added attachments to `tool-result`, so a 0.1 binary returns a different type.
pub const WIT_ACCEPTS: &str = "0.2.0 to 0.2.1";
/// The highest `0.2.z` patch accepted (this host's own).
const WIT_MAX_PATCH: u32 = 1;

/// Bounds on what a tool says about itself. Past one, the component is refused
/// (`bad_descriptor`) with a reason that names the bound and the figure, never the text.
pub mod descriptor_bounds {
    /// Bytes of a tool's name (a-z, 0-9, `-`, `_`).
    pub const MAX_NAME_BYTES: usize = 64;
    /// Bytes of a tool's description (what a model reads to choose it).
    pub const MAX_DESCRIPTION_BYTES: usize = 8 << 10;
    /// Bytes of the input schema's JSON text.
    pub const MAX_SCHEMA_BYTES: usize = 64 << 10;
    /// Deepest nesting of arrays and objects in the input schema (that of arguments).
    pub const MAX_SCHEMA_DEPTH: usize = crate::proposal::MAX_ARGUMENT_DEPTH;
    /// Capability claims one tool may make (vak has six capabilities).
    pub const MAX_CLAIMS: usize = 16;
    /// Scopes over all of a tool's claims.
    pub const MAX_SCOPES: usize = 256;
    /// Bytes of one scope (an origin, a root, a zone, a tool name).
    pub const MAX_SCOPE_BYTES: usize = 1024;
    /// Payload schema ids one tool may name.
    pub const MAX_PAYLOAD_SCHEMAS: usize = 16;
    /// Bytes of one payload schema id (`vak.temporal.instant/1`).
    pub const MAX_PAYLOAD_SCHEMA_ID_BYTES: usize = 128;
    /// Imports, and exports, a component may have (vak links about twenty interfaces).
    pub const MAX_IMPORTS: usize = 256;
    /// Bytes of a refusal's reason: whatever the input, the reason stays this short.
    pub const MAX_REASON_BYTES: usize = 1024;
    /// Names a refusal lists (unclaimed imports, missing grants…); the rest are counted.
    pub const MAX_LISTED: usize = 8;
    /// Bytes of one listed name.
    pub const MAX_LISTED_BYTES: usize = 160;
}

use descriptor_bounds as bounds;

/// At most [`bounds::MAX_LISTED`] of `items`, each cut to [`bounds::MAX_LISTED_BYTES`], and a
/// last entry counting the rest: a refusal's list never grows with the input.
fn listed(items: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut more = 0usize;
    for item in items {
        if out.len() < bounds::MAX_LISTED {
            out.push(shown(&item, bounds::MAX_LISTED_BYTES));
        } else {
            more += 1;
        }
    }
    if more > 0 {
        out.push(format!("… and {more} more"));
    }
    out
}

/// `text` cut to `max` bytes at a character boundary, saying how much was cut.
fn shown(text: &str, max: usize) -> String {
    match crate::result::cut(text, max) {
        (kept, false) => kept.to_string(),
        (kept, true) => format!("{kept}… ({} bytes in all)", text.len()),
    }
}

/// The limits the host gives a tool's `describe` at admission.
const DESCRIBE_LIMITS: Limits = Limits {
    fuel: 200_000_000,
    memory_bytes: 64 << 20,
    wall_time_ms: 5_000,
    result_bytes: 1 << 20,
};

/// What a tool asks of the budget, per call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetClaim {
    pub fuel: Option<u64>,
    pub memory_bytes: Option<u64>,
    pub wall_time_ms: Option<u64>,
    pub result_bytes: Option<u64>,
}

/// One claimed capability with its scopes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapabilityClaim {
    pub name: String,
    pub scopes: Vec<String>,
}

/// The tool's resource claims.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    pub capabilities: Vec<CapabilityClaim>,
    pub budget: BudgetClaim,
}

/// What the tool said about itself at admission.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Descriptor {
    pub name: String,
    pub description: String,
    pub input_schema: serde_json::Value,
    pub payload_schemas: Vec<String>,
    pub claims: Claims,
}

/// What an import is, for a security reviewer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "class", rename_all = "snake_case")]
pub enum ImportClass {
    /// A vak capability interface.
    Capability { capability: Capability },
    /// vak's shared types (no functions).
    Types,
    /// A WASI interface linked in its locked-down form.
    Wasi,
    /// Not something this host provides: admission refuses the component.
    Refused,
}

/// One import of a component.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Import {
    /// The full interface name, e.g. `vak:tool/clock@0.2.0`.
    pub name: String,
    #[serde(flatten)]
    pub class: ImportClass,
    /// One line: what importing it lets the tool do.
    pub summary: String,
}

/// Why a component was not admitted.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AdmissionError {
    /// The component was not compiled: malformed, too large, past the code bounds, out of its
    /// compile's time or memory, or the host could not run the compile.
    #[error(transparent)]
    Compile(#[from] CompileError),
    #[error(
        "the component exports neither `{WIT_PACKAGE}/tool@{WIT_ACCEPTS}` nor a function (it exports: {exports:?})"
    )]
    NotATool { exports: Vec<String> },
    #[error(
        "the component is built against `{found}`; this host implements `{WIT_PACKAGE}@{WIT_VERSION}` and accepts {WIT_ACCEPTS}"
    )]
    UnsupportedVersion { found: String },
    #[error("the component imports interfaces this host does not provide: {imports:?}")]
    ForbiddenImports { imports: Vec<String> },
    #[error(
        "the component has {imports} imports and {exports} exports; this host admits at most {limit} of each"
    )]
    TooManyImports {
        imports: usize,
        exports: usize,
        limit: usize,
    },
    #[error("`describe` failed: {0}")]
    Describe(String),
    #[error("the descriptor is invalid: {0}")]
    BadDescriptor(String),
    #[error("the input schema cannot be admitted: {0}")]
    Schema(#[from] crate::schema::SchemaCompileError),
    #[error("tool `{tool}` imports capabilities it does not claim: {imports:?}")]
    UnclaimedImports { tool: String, imports: Vec<String> },
    #[error("tool `{tool}` is not named in the policy ({policy}); deny by default")]
    NotInPolicy { tool: String, policy: String },
    #[error("tool `{tool}` claims what the policy ({policy}) does not grant: {}", missing.join("; "))]
    NotGranted {
        tool: String,
        policy: String,
        missing: Vec<String>,
    },
    #[error("another component already provides a tool named `{tool}`")]
    DuplicateName { tool: String },
    /// A foreign component none of whose functions is served.
    #[error("no exported function is served: {}", reasons.join("; "))]
    NoFunctionServed { reasons: Vec<String> },
}

impl AdmissionError {
    /// A stable snake_case name of the condition.
    pub fn kind(&self) -> &'static str {
        match self {
            AdmissionError::Compile(e) => e.kind(),
            AdmissionError::NotATool { .. } => "not_a_tool",
            AdmissionError::UnsupportedVersion { .. } => "unsupported_version",
            AdmissionError::ForbiddenImports { .. } => "forbidden_imports",
            AdmissionError::TooManyImports { .. } => "too_many_imports",
            AdmissionError::Describe(_) => "describe_failed",
            AdmissionError::BadDescriptor(_) => "bad_descriptor",
            AdmissionError::Schema(_) => "schema_refused",
            AdmissionError::UnclaimedImports { .. } => "unclaimed_imports",
            AdmissionError::NotInPolicy { .. } => "not_in_policy",
            AdmissionError::NotGranted { .. } => "not_granted",
            AdmissionError::DuplicateName { .. } => "duplicate_name",
            AdmissionError::NoFunctionServed { .. } => "no_function_served",
        }
    }

    /// Whether admitting the same bytes again could succeed: only when the host, not the
    /// component, failed (as for a call, a refusal of what the component is never is).
    pub fn retryable(&self) -> bool {
        matches!(self, AdmissionError::Compile(e) if e.retryable())
    }

    /// The verdict that refuses a component for this error.
    pub fn verdict(&self) -> Verdict {
        Verdict::Refused {
            stage: ADMISSION_STAGE.to_string(),
            kind: self.kind().to_string(),
            reason: shown(&self.to_string(), bounds::MAX_REASON_BYTES),
            retryable: self.retryable(),
        }
    }
}

/// The stage a refused component's verdict names, beside the call stages of a record.
pub const ADMISSION_STAGE: &str = "admission";

/// What admission learned about a component, admitted or not; `vak inspect` prints it.
#[derive(Debug, Clone, Serialize)]
pub struct Examination {
    /// Where the component came from (a path, or `bundled:NAME`).
    pub source: String,
    /// SHA-256 of the component bytes.
    pub digest: String,
    pub size_bytes: usize,
    pub imports: Vec<Import>,
    pub exports: Vec<String>,
    pub descriptor: Option<Descriptor>,
    /// A foreign component's exported functions (one built for another host), each with the
    /// tool it is served as or why not; empty for a vak tool.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub functions: Vec<ExportedFunction>,
    /// Pointers of input-schema keywords the boundary does not enforce.
    pub not_enforced: Vec<String>,
    /// `admitted`, or `refused` with the error.
    pub verdict: Verdict,
    /// What its code asks of the compiler (the largest function, the most locals, …), measured
    /// before it compiled; absent when it was loaded from the AOT cache or not reached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<crate::dispatch::code::CodeFigures>,
}

/// The admission verdict under the active policy.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    Admitted {
        /// The capabilities linked into every instance.
        granted: Vec<Capability>,
    },
    Refused {
        /// Always `admission`: the stage that refused, as a call refusal names its stage.
        stage: String,
        kind: String,
        reason: String,
        /// Whether admitting the same component again could succeed (a host fault only).
        retryable: bool,
    },
}

/// A tool ready to be called: compiled, linked for its grant, described and checked.
pub struct AdmittedTool {
    pub examination: Examination,
    pub descriptor: Descriptor,
    pub grant: Arc<ToolGrant>,
    /// The input schema, compiled once.
    pub schema: CompiledSchema,
    pub(crate) pre: crate::dispatch::Prepared,
}

impl AdmittedTool {
    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.descriptor.name
    }
}

/// What import `name` is, for a vak tool or (`foreign`) a component built for another host.
fn classify(name: &str, foreign: bool) -> ImportClass {
    let (path, _version) = name.split_once('@').unwrap_or((name, ""));
    if foreign {
        let standard = crate::dispatch::linker::FOREIGN_HTTP
            .iter()
            .chain([&crate::dispatch::linker::FOREIGN_CONFIG])
            .any(|(p, _)| *p == path);
        if standard {
            return ImportClass::Wasi;
        }
        if path.starts_with("vak:tool/") {
            return ImportClass::Refused;
        }
    }
    if let Some(iface) = path.strip_prefix("vak:tool/") {
        if iface == "types" {
            return ImportClass::Types;
        }
        return Capability::from_name(iface)
            .map(|capability| ImportClass::Capability { capability })
            .unwrap_or(ImportClass::Refused);
    }
    if ALLOWED_WASI.iter().any(|(p, _)| *p == path) || ALLOWED_WASI_SEED.0 == path {
        ImportClass::Wasi
    } else {
        ImportClass::Refused
    }
}

fn summary(name: &str, class: &ImportClass, foreign: bool) -> String {
    let path = name.split_once('@').map_or(name, |(p, _)| p);
    let differs = crate::dispatch::linker::FOREIGN_WASI
        .iter()
        .find(|(p, _)| *p == path);
    if let (true, ImportClass::Wasi, Some((_, said))) = (foreign, class, differs) {
        return said.to_string();
    }
    match class {
        ImportClass::Capability { capability } => capability.summary().to_string(),
        ImportClass::Types => "shared types only; no functions".to_string(),
        ImportClass::Wasi => ALLOWED_WASI
            .iter()
            .chain(std::iter::once(&ALLOWED_WASI_SEED))
            .chain(&crate::dispatch::linker::FOREIGN_HTTP)
            .chain([&crate::dispatch::linker::FOREIGN_CONFIG])
            .find(|(p, _)| *p == path)
            .map(|(_, s)| s.to_string())
            .unwrap_or_default(),
        ImportClass::Refused => "not provided by this host: the component is refused".to_string(),
    }
}

/// Refuse a component that imports what this host does not provide, naming the imports.
fn refuse_forbidden(exam: &Examination) -> Result<(), AdmissionError> {
    let forbidden: Vec<String> = listed(
        exam.imports
            .iter()
            .filter(|i| i.class == ImportClass::Refused)
            .map(|i| i.name.clone()),
    );
    match forbidden.is_empty() {
        true => Ok(()),
        false => Err(AdmissionError::ForbiddenImports { imports: forbidden }),
    }
}

/// Whether `version` (of `vak:tool`) is one this host accepts.
fn version_accepted(version: &str) -> bool {
    version
        .strip_prefix("0.2.")
        .and_then(|patch| patch.parse::<u32>().ok())
        .is_some_and(|patch| patch <= WIT_MAX_PATCH)
}

impl Runtime {
    /// Examine and, if everything checks out, admit the component `bytes` under `policy`: a
    /// vak tool is one tool; a foreign component (built for another host) is a tool per
    /// exported function the policy names.
    pub(crate) async fn admit(
        &self,
        source: &str,
        bytes: &[u8],
        policy: &Policy,
    ) -> (Examination, Vec<AdmittedTool>) {
        let digest = crate::digest::sha256_hex(bytes);
        let mut exam = Examination {
            source: source.to_string(),
            digest: digest.clone(),
            size_bytes: bytes.len(),
            imports: Vec::new(),
            exports: Vec::new(),
            descriptor: None,
            functions: Vec::new(),
            not_enforced: Vec::new(),
            verdict: Verdict::Refused {
                stage: ADMISSION_STAGE.to_string(),
                kind: String::new(),
                reason: String::new(),
                retryable: false,
            },
            code: None,
        };
        let admitted = match self.examine_component(&mut exam, bytes).await {
            Ok((component, None)) => self.admit_foreign(&mut exam, &component, bytes, policy),
            Ok((component, Some(tool_export))) => self
                .admit_tool(&mut exam, &component, &tool_export, policy)
                .await
                .map(|(descriptor, schema, grant, pre, granted)| {
                    exam.verdict = Verdict::Admitted {
                        granted: granted.into_iter().collect(),
                    };
                    vec![AdmittedTool {
                        examination: exam.clone(),
                        descriptor,
                        schema,
                        grant,
                        pre: crate::dispatch::Prepared::Tool(pre),
                    }]
                }),
            Err(e) => Err(e),
        };
        match admitted {
            Ok(tools) => (exam, tools),
            Err(e) => {
                exam.verdict = e.verdict();
                if let Verdict::Refused { kind, reason, .. } = &exam.verdict {
                    tracing::info!(source, kind, reason, "component refused at admission");
                }
                (exam, Vec::new())
            }
        }
    }

    /// Compile the component and read its imports and exports into `exam`; with the name of
    /// its `vak:tool/tool` export, or `None` for a foreign component.
    async fn examine_component(
        &self,
        exam: &mut Examination,
        bytes: &[u8],
    ) -> Result<(wasmtime::component::Component, Option<String>), AdmissionError> {
        let compiled = self.compile_bounded(bytes, &exam.digest).await?;
        exam.code = compiled.figures;
        let component = compiled.component;

        let ty = component.component_type();
        let (imports, exports) = (
            ty.imports(&self.engine).len(),
            ty.exports(&self.engine).len(),
        );
        if imports > bounds::MAX_IMPORTS || exports > bounds::MAX_IMPORTS {
            return Err(AdmissionError::TooManyImports {
                imports,
                exports,
                limit: bounds::MAX_IMPORTS,
            });
        }
        exam.exports = ty
            .exports(&self.engine)
            .map(|(n, _)| shown(n, bounds::MAX_LISTED_BYTES))
            .collect();
        let tool_export = ty
            .exports(&self.engine)
            .map(|(n, _)| n)
            .find(|e| e.starts_with("vak:tool/tool@") || *e == "vak:tool/tool")
            .map(str::to_string);
        for (name, item) in ty.imports(&self.engine) {
            let class = match item.ty {
                ComponentItem::ComponentInstance(_) => classify(name, tool_export.is_none()),
                // Bare function or resource imports are not part of any interface we provide.
                _ => ImportClass::Refused,
            };
            exam.imports.push(Import {
                // What a reviewer reads is bounded; the class was decided on the whole name.
                name: shown(name, bounds::MAX_LISTED_BYTES),
                summary: summary(name, &class, tool_export.is_none()),
                class,
            });
        }
        Ok((component, tool_export))
    }

    /// The rest of a vak tool's admission: its version, `describe`, and its claims checked
    /// against its imports and the policy.
    #[allow(clippy::type_complexity)]
    async fn admit_tool(
        &self,
        exam: &mut Examination,
        component: &wasmtime::component::Component,
        tool_export: &str,
        policy: &Policy,
    ) -> Result<
        (
            Descriptor,
            CompiledSchema,
            Arc<ToolGrant>,
            SandboxedToolPre<crate::dispatch::state::CallState>,
            GrantSet,
        ),
        AdmissionError,
    > {
        let version = tool_export.split_once('@').map_or("", |(_, v)| v);
        if !version_accepted(version) {
            return Err(AdmissionError::UnsupportedVersion {
                found: shown(tool_export, bounds::MAX_LISTED_BYTES),
            });
        }
        for import in &exam.imports {
            if let Some((_, v)) = import.name.split_once('@')
                && import.name.starts_with("vak:tool/")
                && !version_accepted(v)
            {
                return Err(AdmissionError::UnsupportedVersion {
                    found: import.name.clone(),
                });
            }
        }
        // Nothing of the component runs, not even `describe`.
        refuse_forbidden(exam)?;

        // `describe` runs with every capability linked but none granted: a request is refused.
        let all: GrantSet = Capability::ALL.into_iter().collect();
        let describe_pre = crate::dispatch::Prepared::Tool(self.pre_for(component, &all)?);
        let report = self
            .dispatch(
                &describe_pre,
                Broker::new(format!("admission:{}", &exam.digest[..12]), None),
                Entry::Describe,
                &DESCRIBE_LIMITS,
                &tokio_util::sync::CancellationToken::new(),
            )
            .await;
        let raw = match report.outcome {
            Ok(GuestReturn::Described(d)) => d,
            Ok(_) => return Err(AdmissionError::Describe("unexpected return".into())),
            Err(e) => {
                let message = shown(&e.to_string(), bounds::MAX_REASON_BYTES / 2);
                return Err(AdmissionError::Describe(message));
            }
        };
        let descriptor = descriptor_from_wit(raw)?;
        exam.descriptor = Some(descriptor.clone());
        let schema = CompiledSchema::compile(&descriptor.input_schema)?;
        exam.not_enforced = schema.not_enforced.clone();

        // imports ⊆ claims
        let mut claimed = GrantSet::new();
        for c in &descriptor.claims.capabilities {
            let cap = Capability::from_name(&c.name).ok_or_else(|| {
                AdmissionError::BadDescriptor(format!(
                    "claims an unknown capability `{}`",
                    shown(&c.name, bounds::MAX_LISTED_BYTES)
                ))
            })?;
            claimed.insert(cap);
        }
        let unclaimed: Vec<String> = listed(
            exam.imports
                .iter()
                .filter(|i| matches!(i.class, ImportClass::Capability { capability } if !claimed.contains(&capability)))
                .map(|i| i.name.clone()),
        );
        if !unclaimed.is_empty() {
            return Err(AdmissionError::UnclaimedImports {
                tool: descriptor.name.clone(),
                imports: unclaimed,
            });
        }

        // claims ⊆ policy
        let grant =
            policy
                .grant(&descriptor.name)
                .cloned()
                .ok_or_else(|| AdmissionError::NotInPolicy {
                    tool: descriptor.name.clone(),
                    policy: policy.origin.clone(),
                })?;
        // Each claim is admitted by its capability's granted scope (`GrantedScope::covers`).
        let missing: Vec<String> = listed(descriptor.claims.capabilities.iter().filter_map(|c| {
            let cap = Capability::from_name(&c.name)?;
            grant.covers(cap, &c.scopes).err()
        }));
        if !missing.is_empty() {
            return Err(AdmissionError::NotGranted {
                tool: descriptor.name.clone(),
                policy: policy.origin.clone(),
                missing,
            });
        }

        // Link exactly the claimed (and granted) capabilities.
        let pre = self.pre_for(component, &claimed)?;
        Ok((descriptor, schema, grant, pre, claimed))
    }

    fn pre_for(
        &self,
        component: &wasmtime::component::Component,
        grants: &GrantSet,
    ) -> Result<SandboxedToolPre<crate::dispatch::state::CallState>, AdmissionError> {
        let linker = self
            .linkers
            .for_grants(&self.engine, grants)
            .map_err(|e| CompileError::Compile(format!("linking: {e:#}")))?;
        let pre = linker
            .instantiate_pre(component)
            .map_err(|e| CompileError::Compile(format!("linking: {e:#}")))?;
        SandboxedToolPre::new(pre).map_err(|e| AdmissionError::NotATool {
            exports: vec![format!("{e:#}")],
        })
    }
}

#[cfg(test)]
mod tests;

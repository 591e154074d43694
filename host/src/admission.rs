//! Admission of a component: before any call, the host reads what the binary really imports and
//! exports, asks it to describe itself in a sandbox where nothing is granted, and cross-checks
//! three sets: the interfaces imported ⊆ the capabilities claimed ⊆ what the policy grants.
//! Everything built here (compiled component, linker, `InstancePre`, grant) is reused by every call.

use crate::capabilities::{Broker, Capability};
use crate::dispatch::bindings::SandboxedToolPre;
use crate::dispatch::bindings::vak::tool::types as wit;
use crate::dispatch::linker::{ALLOWED_WASI, ALLOWED_WASI_SEED, GrantSet};
use crate::dispatch::run::Entry;
use crate::dispatch::{GuestReturn, Runtime};
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
    #[error("not a WebAssembly component this engine can compile: {0}")]
    Compile(String),
    #[error("the component is {size} bytes; this host compiles components of at most {limit}")]
    TooLarge { size: usize, limit: usize },
    #[error("the component did not compile within {limit_ms} ms; refused")]
    CompileTimeout { limit_ms: u64 },
    #[error(
        "the component does not export `{WIT_PACKAGE}/tool@{WIT_ACCEPTS}` (it exports: {exports:?})"
    )]
    NotATool { exports: Vec<String> },
    #[error(
        "the component is built against `{found}`; this host implements `{WIT_PACKAGE}@{WIT_VERSION}` and accepts {WIT_ACCEPTS}"
    )]
    UnsupportedVersion { found: String },
    #[error("the component imports interfaces this host does not provide: {imports:?}")]
    ForbiddenImports { imports: Vec<String> },
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
}

impl AdmissionError {
    /// A stable snake_case name of the condition.
    pub fn kind(&self) -> &'static str {
        match self {
            AdmissionError::Compile(_) => "compile_failed",
            AdmissionError::TooLarge { .. } => "too_large",
            AdmissionError::CompileTimeout { .. } => "compile_timeout",
            AdmissionError::NotATool { .. } => "not_a_tool",
            AdmissionError::UnsupportedVersion { .. } => "unsupported_version",
            AdmissionError::ForbiddenImports { .. } => "forbidden_imports",
            AdmissionError::Describe(_) => "describe_failed",
            AdmissionError::BadDescriptor(_) => "bad_descriptor",
            AdmissionError::Schema(_) => "schema_refused",
            AdmissionError::UnclaimedImports { .. } => "unclaimed_imports",
            AdmissionError::NotInPolicy { .. } => "not_in_policy",
            AdmissionError::NotGranted { .. } => "not_granted",
            AdmissionError::DuplicateName { .. } => "duplicate_name",
        }
    }
}

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
    /// Pointers of input-schema keywords the boundary does not enforce.
    pub not_enforced: Vec<String>,
    /// `admitted`, or `refused` with the error.
    pub verdict: Verdict,
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
        kind: String,
        reason: String,
    },
}

/// A tool ready to be called: compiled, linked for its grant, described and checked.
pub struct AdmittedTool {
    pub examination: Examination,
    pub descriptor: Descriptor,
    pub grant: Arc<ToolGrant>,
    /// The input schema, compiled once.
    pub schema: CompiledSchema,
    pub(crate) pre: SandboxedToolPre<crate::dispatch::state::CallState>,
}

impl AdmittedTool {
    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.descriptor.name
    }
}

fn classify(name: &str) -> ImportClass {
    let (path, _version) = name.split_once('@').unwrap_or((name, ""));
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

fn summary(name: &str, class: &ImportClass) -> String {
    let path = name.split_once('@').map_or(name, |(p, _)| p);
    match class {
        ImportClass::Capability { capability } => capability.summary().to_string(),
        ImportClass::Types => "shared types only; no functions".to_string(),
        ImportClass::Wasi => ALLOWED_WASI
            .iter()
            .chain(std::iter::once(&ALLOWED_WASI_SEED))
            .find(|(p, _)| *p == path)
            .map(|(_, s)| s.to_string())
            .unwrap_or_default(),
        ImportClass::Refused => "not provided by this host: the component is refused".to_string(),
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
    /// Examine and, if everything checks out, admit the component `bytes` under `policy`.
    pub(crate) async fn admit(
        &self,
        source: &str,
        bytes: &[u8],
        policy: &Policy,
    ) -> (Examination, Option<AdmittedTool>) {
        let digest = crate::digest::sha256_hex(bytes);
        let mut exam = Examination {
            source: source.to_string(),
            digest: digest.clone(),
            size_bytes: bytes.len(),
            imports: Vec::new(),
            exports: Vec::new(),
            descriptor: None,
            not_enforced: Vec::new(),
            verdict: Verdict::Refused {
                kind: String::new(),
                reason: String::new(),
            },
        };
        match self.admit_inner(&mut exam, bytes, policy).await {
            Ok((descriptor, schema, grant, pre, granted)) => {
                exam.verdict = Verdict::Admitted {
                    granted: granted.into_iter().collect(),
                };
                let tool = AdmittedTool {
                    examination: exam.clone(),
                    descriptor,
                    schema,
                    grant,
                    pre,
                };
                (exam, Some(tool))
            }
            Err(e) => {
                tracing::info!(source, error = %e, "component refused at admission");
                exam.verdict = Verdict::Refused {
                    kind: e.kind().to_string(),
                    reason: e.to_string(),
                };
                (exam, None)
            }
        }
    }

    /// Compile (or load from the AOT cache) within the engine's size and time bounds.
    ///
    /// The compile runs on a thread of its own so that it neither blocks the async runtime nor
    /// holds admission past `compile_timeout`. Cranelift cannot be interrupted, so a compile
    /// that overruns finishes in the background and its artifact is dropped; what bounds its
    /// memory and CPU is the size cap here together with wasmparser's per-module limits (on
    /// function size, locals, and counts), which apply before any code is generated.
    async fn compile_bounded(
        &self,
        bytes: &[u8],
        digest: &str,
    ) -> Result<wasmtime::component::Component, AdmissionError> {
        let limit = self.settings.max_component_bytes;
        if bytes.len() > limit {
            return Err(AdmissionError::TooLarge {
                size: bytes.len(),
                limit,
            });
        }
        let timeout = self.settings.compile_timeout;
        let abandoned = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job = (
            self.engine.clone(),
            self.cache.clone(),
            bytes.to_vec(),
            digest.to_string(),
            abandoned.clone(),
        );
        std::thread::Builder::new()
            .name("vak-compile".into())
            // Cranelift recurses on deeply nested code; give it the stack a main thread has.
            .stack_size(8 << 20)
            .spawn(move || {
                let (engine, cache, bytes, digest, abandoned) = job;
                let _ = tx.send(cache.load_or_compile(&engine, &bytes, &digest, &abandoned));
            })
            .map_err(|e| AdmissionError::Compile(format!("no thread to compile on: {e}")))?;
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(Ok((component, _origin)))) => Ok(component),
            Ok(Ok(Err(e))) => Err(AdmissionError::Compile(format!("{e:#}"))),
            Ok(Err(_)) => Err(AdmissionError::Compile(
                "the compiler stopped without an answer (it panicked)".into(),
            )),
            Err(_) => {
                abandoned.store(true, std::sync::atomic::Ordering::Release);
                tracing::warn!(
                    digest,
                    timeout_ms = timeout.as_millis() as u64,
                    "compile took too long; component refused"
                );
                Err(AdmissionError::CompileTimeout {
                    limit_ms: timeout.as_millis() as u64,
                })
            }
        }
    }

    #[allow(clippy::type_complexity)]
    async fn admit_inner(
        &self,
        exam: &mut Examination,
        bytes: &[u8],
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
        let component = self.compile_bounded(bytes, &exam.digest).await?;

        let ty = component.component_type();
        for (name, item) in ty.imports(&self.engine) {
            let class = match item.ty {
                ComponentItem::ComponentInstance(_) => classify(name),
                // Bare function or resource imports are not part of any interface we provide.
                _ => ImportClass::Refused,
            };
            exam.imports.push(Import {
                name: name.to_string(),
                summary: summary(name, &class),
                class,
            });
        }
        exam.exports = ty
            .exports(&self.engine)
            .map(|(n, _)| n.to_string())
            .collect();

        let tool_export = exam
            .exports
            .iter()
            .find(|e| e.starts_with("vak:tool/tool@") || *e == "vak:tool/tool")
            .cloned()
            .ok_or_else(|| AdmissionError::NotATool {
                exports: exam.exports.clone(),
            })?;
        let version = tool_export.split_once('@').map_or("", |(_, v)| v);
        if !version_accepted(version) {
            return Err(AdmissionError::UnsupportedVersion {
                found: tool_export.clone(),
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
        let forbidden: Vec<String> = exam
            .imports
            .iter()
            .filter(|i| i.class == ImportClass::Refused)
            .map(|i| i.name.clone())
            .collect();
        if !forbidden.is_empty() {
            // Nothing of the component runs, not even `describe`.
            return Err(AdmissionError::ForbiddenImports { imports: forbidden });
        }

        // `describe` runs with every capability linked but none granted: a request is refused.
        let all: GrantSet = Capability::ALL.into_iter().collect();
        let describe_pre = self.pre_for(&component, &all)?;
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
            Err(e) => return Err(AdmissionError::Describe(e.to_string())),
        };
        let descriptor = descriptor_from_wit(raw)?;
        exam.descriptor = Some(descriptor.clone());
        let schema = CompiledSchema::compile(&descriptor.input_schema)?;
        exam.not_enforced = schema.not_enforced.clone();

        // imports ⊆ claims
        let mut claimed = GrantSet::new();
        for c in &descriptor.claims.capabilities {
            let cap = Capability::from_name(&c.name).ok_or_else(|| {
                AdmissionError::BadDescriptor(format!("claims an unknown capability `{}`", c.name))
            })?;
            claimed.insert(cap);
        }
        let unclaimed: Vec<String> = exam
            .imports
            .iter()
            .filter(|i| matches!(i.class, ImportClass::Capability { capability } if !claimed.contains(&capability)))
            .map(|i| i.name.clone())
            .collect();
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
        let missing: Vec<String> = descriptor
            .claims
            .capabilities
            .iter()
            .filter_map(|c| {
                let cap = Capability::from_name(&c.name)?;
                grant.covers(cap, &c.scopes).err()
            })
            .collect();
        if !missing.is_empty() {
            return Err(AdmissionError::NotGranted {
                tool: descriptor.name.clone(),
                policy: policy.origin.clone(),
                missing,
            });
        }

        // Link exactly the claimed (and granted) capabilities.
        let pre = self.pre_for(&component, &claimed)?;
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
            .map_err(|e| AdmissionError::Compile(format!("linking: {e:#}")))?;
        let pre = linker
            .instantiate_pre(component)
            .map_err(|e| AdmissionError::Compile(format!("linking: {e:#}")))?;
        SandboxedToolPre::new(pre).map_err(|e| AdmissionError::NotATool {
            exports: vec![format!("{e:#}")],
        })
    }
}

fn descriptor_from_wit(d: wit::Descriptor) -> Result<Descriptor, AdmissionError> {
    let name_ok = !d.name.is_empty()
        && d.name.len() <= 64
        && d.name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if !name_ok {
        return Err(AdmissionError::BadDescriptor(format!(
            "tool name {:?} must be 1-64 characters of a-z, 0-9, '-' and '_'",
            d.name
        )));
    }
    let input_schema: serde_json::Value = serde_json::from_str(&d.input_schema)
        .map_err(|e| AdmissionError::BadDescriptor(format!("input schema is not JSON: {e}")))?;
    Ok(Descriptor {
        name: d.name,
        description: d.description,
        input_schema,
        payload_schemas: d.payload_schemas,
        claims: Claims {
            capabilities: d
                .claims
                .capabilities
                .into_iter()
                .map(|c| CapabilityClaim {
                    name: c.name,
                    scopes: c.scopes,
                })
                .collect(),
            budget: BudgetClaim {
                fuel: d.claims.budget.fuel,
                memory_bytes: d.claims.budget.memory_bytes,
                wall_time_ms: d.claims.budget.wall_time_ms,
                result_bytes: d.claims.budget.result_bytes,
            },
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imports_are_classified_by_interface() {
        assert_eq!(
            classify("vak:tool/clock@0.2.0"),
            ImportClass::Capability {
                capability: Capability::Clock
            }
        );
        assert_eq!(classify("vak:tool/types@0.2.0"), ImportClass::Types);
        assert_eq!(classify("vak:tool/sockets@0.2.0"), ImportClass::Refused);
        assert_eq!(classify("wasi:cli/stdout@0.2.6"), ImportClass::Wasi);
        assert_eq!(classify("wasi:sockets/tcp@0.2.6"), ImportClass::Refused);
        assert_eq!(
            classify("wasi:http/outgoing-handler@0.2.6"),
            ImportClass::Refused
        );
    }

    #[test]
    fn only_0_2_0_to_this_hosts_patch_is_accepted() {
        assert_eq!(WIT_VERSION, format!("0.2.{WIT_MAX_PATCH}"));
        assert!(version_accepted("0.2.0"));
        assert!(version_accepted("0.2.1"));
        assert!(!version_accepted("0.2.2"));
        assert!(!version_accepted("0.2.x"));
        assert!(!version_accepted("0.1.0"));
        assert!(!version_accepted("0.3.0"));
        assert!(!version_accepted("1.0.0"));
        assert!(!version_accepted(""));
    }
}

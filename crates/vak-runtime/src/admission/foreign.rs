//! Admission of a foreign component: one built for another host (Wassette, Spin, plain WASI),
//! which does not export `vak:tool/tool`. Each exported function, top-level or inside an
//! exported interface, becomes a tool when vak can represent its types as JSON: its input
//! schema is derived from the WIT types, exactly (see `crate::foreign`). A function whose types
//! cannot be represented, or that the policy does not name, is listed with the reason and not
//! served. The component claims nothing: what it may do is what the policy grants its tools,
//! and its imports must be covered by that grant (`wasi:http` needs `http`).

use super::{
    AdmissionError, AdmittedTool, Claims, Descriptor, Examination, Verdict, bounds, listed, shown,
};
use crate::capabilities::Capability;
use crate::dispatch::Prepared;
use crate::dispatch::foreign::ForeignFunction;
use crate::dispatch::linker::GrantSet;
use crate::dispatch::{CompileError, Runtime};
use crate::policy::Policy;
use crate::schema::CompiledSchema;
use serde::Serialize;
use wasmtime::component::types::{ComponentFunc, ComponentItem};
use wasmtime::component::{Component, Type};

/// Functions one foreign component may export (over all its interfaces).
pub const MAX_FUNCTIONS: usize = 64;

/// One exported function of a foreign component, as admission found it.
#[derive(Debug, Clone, Serialize)]
pub struct ExportedFunction {
    /// Where the component exports it: `fetch`, or `local:time-server/time#get-current-time`.
    pub export: String,
    /// The tool it is served as.
    pub tool: String,
    #[serde(flatten)]
    pub verdict: FunctionVerdict,
}

/// Whether an exported function is served, and why not.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum FunctionVerdict {
    Admitted,
    /// Its types have no exact JSON form, or its name is not a tool name.
    Unavailable {
        reason: String,
    },
    /// The policy has no table for the tool (deny by default).
    NotInPolicy,
    /// The policy's table does not cover what the component needs.
    NotGranted {
        reason: String,
    },
}

/// The name a function is served as: its own for a top-level export, else the interface's
/// name and its own joined by `_` (`time_get-current-time`), lower-cased; unless a policy table
/// names the function as its `export`, which serves it under the table's name.
pub fn tool_name(interface: Option<&str>, function: &str) -> String {
    let bare = |name: &str| {
        // `ns:pkg/iface@1.0.0` → `iface`
        let path = name.split_once('@').map_or(name, |(p, _)| p);
        path.rsplit('/').next().unwrap_or(path).to_ascii_lowercase()
    };
    match interface {
        None => function.to_ascii_lowercase(),
        Some(i) => format!("{}_{}", bare(i), function.to_ascii_lowercase()),
    }
}

fn valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= bounds::MAX_NAME_BYTES
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

/// An exported function found in the component.
struct Found {
    export: String,
    interface: Option<String>,
    name: String,
    ty: ComponentFunc,
}

/// Every exported function, top-level or one level inside an exported interface.
fn functions(runtime: &Runtime, component: &Component) -> Result<Vec<Found>, AdmissionError> {
    let mut found = Vec::new();
    let mut push = |f: Found| {
        if found.len() >= MAX_FUNCTIONS {
            return Err(AdmissionError::BadDescriptor(format!(
                "the component exports more than {MAX_FUNCTIONS} functions; at most {MAX_FUNCTIONS} are admitted"
            )));
        }
        found.push(f);
        Ok(())
    };
    let engine = &runtime.engine;
    for (name, item) in component.component_type().exports(engine) {
        match item.ty {
            ComponentItem::ComponentFunc(ty) => push(Found {
                export: name.to_string(),
                interface: None,
                name: name.to_string(),
                ty,
            })?,
            ComponentItem::ComponentInstance(instance) => {
                for (fname, item) in instance.exports(engine) {
                    if let ComponentItem::ComponentFunc(ty) = item.ty {
                        push(Found {
                            export: format!("{name}#{fname}"),
                            interface: Some(name.to_string()),
                            name: fname.to_string(),
                            ty,
                        })?;
                    }
                }
            }
            _ => {}
        }
    }
    Ok(found)
}

/// What the component's imports need of a tool's grant, or why the grant does not cover it.
fn needs(exam: &Examination, grant: &crate::policy::ToolGrant) -> Result<bool, String> {
    let http = exam
        .imports
        .iter()
        .any(|i| i.name.starts_with("wasi:http/"));
    if http && grant.http().is_none() {
        return Err(
            "the component imports `wasi:http` and the policy grants this tool no `http`".into(),
        );
    }
    if let Some(root) = grant.roots().iter().find(|r| r.ask) {
        return Err(format!(
            "the workspace root {:?} waits for an approval (`ask`), which a foreign \
             component's preopened directories cannot do: drop `ask` or the root",
            root.name
        ));
    }
    Ok(http)
}

impl Runtime {
    /// Admit the functions of foreign `component` that the policy names; the examination
    /// lists every function with its verdict. Refused as a whole when none is served.
    pub(super) fn admit_foreign(
        &self,
        exam: &mut Examination,
        component: &Component,
        bytes: &[u8],
        policy: &Policy,
    ) -> Result<Vec<AdmittedTool>, AdmissionError> {
        super::refuse_forbidden(exam)?;
        let found = functions(self, component)?;
        if found.is_empty() {
            return Err(AdmissionError::NotATool {
                exports: listed(exam.exports.iter().cloned()),
            });
        }
        let docs = crate::foreign::function_docs(bytes);
        let mut tools = Vec::new();
        let mut granted = GrantSet::new();
        for f in found {
            let derived = tool_name(f.interface.as_deref(), &f.name);
            // A table that names this function as its `export` serves it under the table's name.
            let renamed = policy.tools.values().find(|g| {
                g.export
                    .as_deref()
                    .is_some_and(|e| e == f.export || e == derived)
            });
            let tool = renamed.map_or(derived, |g| g.tool.clone());
            let verdict = match self.admit_function(exam, component, &f, &tool, &docs, policy) {
                Ok((admitted, caps)) => {
                    granted.extend(caps);
                    tools.push(admitted);
                    FunctionVerdict::Admitted
                }
                Err(verdict) => verdict,
            };
            exam.functions.push(ExportedFunction {
                export: shown(&f.export, bounds::MAX_LISTED_BYTES),
                tool: shown(&tool, bounds::MAX_LISTED_BYTES),
                verdict,
            });
        }
        if tools.is_empty() {
            return Err(AdmissionError::NoFunctionServed {
                reasons: listed(exam.functions.iter().map(|f| {
                    let why = match &f.verdict {
                        FunctionVerdict::Admitted => "admitted".to_string(),
                        FunctionVerdict::NotInPolicy => {
                            format!("not in the policy ({}); deny by default", policy.origin)
                        }
                        FunctionVerdict::Unavailable { reason }
                        | FunctionVerdict::NotGranted { reason } => reason.clone(),
                    };
                    format!("`{}`: {why}", f.tool)
                })),
            });
        }
        exam.verdict = Verdict::Admitted {
            granted: granted.into_iter().collect(),
        };
        for tool in &mut tools {
            tool.examination = exam.clone();
        }
        Ok(tools)
    }

    /// One function: its schema, its grant, its linked component.
    fn admit_function(
        &self,
        exam: &Examination,
        component: &Component,
        f: &Found,
        tool: &str,
        docs: &std::collections::BTreeMap<String, String>,
        policy: &Policy,
    ) -> Result<(AdmittedTool, GrantSet), FunctionVerdict> {
        let unavailable = |reason: String| FunctionVerdict::Unavailable {
            reason: shown(&reason, bounds::MAX_REASON_BYTES / 4),
        };
        if !valid_tool_name(tool) {
            return Err(unavailable(format!(
                "its tool name {tool:?} is not 1-{} characters of a-z, 0-9, '-' and '_'",
                bounds::MAX_NAME_BYTES
            )));
        }
        let params: Vec<(String, Type)> = f.ty.params().map(|(n, t)| (n.to_string(), t)).collect();
        let results: Vec<Type> = f.ty.results().collect();
        let input_schema =
            crate::foreign::input_schema(&params).map_err(|e| unavailable(e.to_string()))?;
        for r in &results {
            crate::foreign::result_representable(r).map_err(|e| unavailable(e.to_string()))?;
        }
        let schema = CompiledSchema::compile(&input_schema)
            .map_err(|e| unavailable(format!("its derived schema is refused: {e}")))?;
        let grant = policy
            .grant(tool)
            .cloned()
            .ok_or(FunctionVerdict::NotInPolicy)?;
        let http = needs(exam, &grant).map_err(|reason| FunctionVerdict::NotGranted { reason })?;
        let export = match &f.interface {
            None => component.get_export_index(None, &f.name),
            Some(i) => component
                .get_export_index(None, i)
                .and_then(|i| component.get_export_index(Some(&i), &f.name)),
        }
        .ok_or_else(|| unavailable("the export cannot be found by name".into()))?;
        let pre = self
            .linkers
            .for_foreign(&self.engine, http)
            .and_then(|linker| linker.instantiate_pre(component))
            .map_err(|e| FunctionVerdict::NotGranted {
                reason: shown(
                    &CompileError::Compile(format!("linking: {e:#}")).to_string(),
                    bounds::MAX_REASON_BYTES / 2,
                ),
            })?;
        let description = docs.get(&f.export).cloned().unwrap_or_else(|| {
            format!(
                "`{}` of a component built for another host (no description in the component)",
                f.export
            )
        });
        let mut caps = GrantSet::new();
        if http {
            caps.insert(Capability::Http);
        }
        for cap in [Capability::Workspace, Capability::Clock] {
            if grant.grants(cap) {
                caps.insert(cap);
            }
        }
        let descriptor = Descriptor {
            name: tool.to_string(),
            description: shown(&description, bounds::MAX_DESCRIPTION_BYTES),
            input_schema,
            payload_schemas: Vec::new(),
            claims: Claims::default(),
        };
        Ok((
            AdmittedTool {
                examination: exam.clone(),
                descriptor,
                grant,
                schema,
                pre: Prepared::Foreign(ForeignFunction {
                    pre,
                    export,
                    params,
                    results,
                }),
            },
            caps,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::tool_name;

    #[test]
    fn tools_are_named_by_function_and_interface() {
        assert_eq!(tool_name(None, "fetch"), "fetch");
        assert_eq!(
            tool_name(Some("local:time-server/time"), "get-current-time"),
            "time_get-current-time"
        );
        assert_eq!(tool_name(Some("wasi:cli/run@0.2.0"), "run"), "run_run");
        assert_eq!(tool_name(None, "GET-URL"), "get-url");
    }
}

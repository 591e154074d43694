//! `vak inspect` and `vak tools`: what a component imports, exports and claims with its admission
//! verdict, the tools admitted (and refused, with reasons), and the tools declared as a
//! provider's request wants them.

use super::{render, usage_error};
use std::process::ExitCode;
use vak_host::proposal::providers::{Provider, declaration, request_tools};
use vak_host::{Host, Policy};

/// `vak inspect TARGET`: a loaded tool by name, or any component by path, examined without
/// calling it. Exit status 0 admitted, 2 refused.
pub(super) async fn inspect(host: &Host, target: &str, json: bool) -> ExitCode {
    let exam = if target.ends_with(".wasm") || std::path::Path::new(target).is_file() {
        match std::fs::read(target) {
            Ok(bytes) => host.examine(target, &bytes).await,
            Err(e) => return usage_error(format!("cannot read {target}: {e}")),
        }
    } else {
        let found = host.examinations().iter().find(|e| {
            e.descriptor.as_ref().is_some_and(|d| d.name == target)
                || e.functions.iter().any(|f| f.tool == target)
                || e.source == format!("bundled:{target}")
        });
        match found {
            Some(e) => e.clone(),
            None => {
                return usage_error(format!(
                    "no tool named `{target}` is loaded and no file has that path"
                ));
            }
        }
    };
    print_examination(&exam, host.policy(), json);
    // As `vak build`: a script can tell an admitted component from a refused one.
    match exam.verdict {
        vak_host::Verdict::Admitted { .. } => ExitCode::SUCCESS,
        vak_host::Verdict::Refused { .. } => ExitCode::from(2),
    }
}

/// `vak tools`: the admitted tools and the refused components, or with `--for` the tools as
/// that provider's request declares them.
pub(super) fn list(host: &Host, json: bool, for_provider: Option<&str>) -> ExitCode {
    if let Some(name) = for_provider {
        return print_declarations(host, name, json);
    }
    if json {
        let tools: Vec<_> = host
            .tools()
            .map(|t| {
                serde_json::json!({
                    "name": t.descriptor.name,
                    "description": t.descriptor.description,
                    "input_schema": t.descriptor.input_schema,
                    "payload_schemas": t.descriptor.payload_schemas,
                    "claims": t.descriptor.claims,
                    "not_enforced": t.schema.not_enforced,
                    "digest": t.examination.digest,
                })
            })
            .collect();
        let refused: Vec<_> = host
            .examinations()
            .iter()
            .filter(|e| matches!(e.verdict, vak_host::Verdict::Refused { .. }))
            .map(|e| serde_json::json!({ "source": e.source, "verdict": e.verdict }))
            .collect();
        let doc = serde_json::json!({ "tools": tools, "refused": refused });
        say!("{}", render::json(&doc));
    } else {
        say_raw!("{}", render::tools(host));
    }
    ExitCode::SUCCESS
}

/// What `vak inspect` and `vak build` print about a component.
pub(super) fn print_examination(exam: &vak_host::Examination, policy: &Policy, json: bool) {
    if json {
        say!("{}", render::json(exam));
    } else {
        say_raw!("{}", render::examination(exam, policy));
    }
}

fn print_declarations(host: &Host, name: &str, json: bool) -> ExitCode {
    let Some(provider) = Provider::from_name(name) else {
        return usage_error(format!("unknown provider `{name}`"));
    };
    let (tools, notes) = if provider == Provider::Mcp {
        // Exactly what `vak serve` answers to tools/list: the admitted schemas, unchanged.
        match vak_host::mcp::Catalog::of(host) {
            Ok(c) => (c.to_json(), Vec::new()),
            Err(e) => {
                say_err!("vak: {}", render::neutralise_line(&e.to_string()));
                return ExitCode::from(1);
            }
        }
    } else {
        let mut entries = Vec::new();
        let mut notes = Vec::new();
        for tool in host.tools() {
            let d = &tool.descriptor;
            let decl = declaration(provider, &d.name, &d.description, &d.input_schema);
            for n in decl.notes {
                notes.push(serde_json::json!({ "tool": d.name, "note": n }));
            }
            entries.push(decl.entry);
        }
        (request_tools(provider, entries), notes)
    };
    if json {
        let doc = serde_json::json!({ "provider": provider.name(), "tools": tools["tools"], "notes": notes });
        say!("{}", render::json(&doc));
    } else {
        for n in &notes {
            say_err!(
                "vak: {}: {}",
                render::neutralise_line(n["tool"].as_str().unwrap_or_default()),
                render::neutralise_line(n["note"].as_str().unwrap_or_default())
            );
        }
        say!("{}", render::json(&tools));
    }
    ExitCode::SUCCESS
}

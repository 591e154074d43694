//! The `invoke` section of a tool's policy: the tools it may call as child runs.

use serde::Deserialize;

/// The policy section, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InvokeGrantFile {
    tools: Vec<String>,
}

/// The section compiled for the tool `tool`: the tools it may call, never itself.
pub fn compile(tool: &str, file: InvokeGrantFile) -> Result<Vec<String>, String> {
    if file.tools.iter().any(|t| t == tool) {
        return Err("`invoke.tools` names the tool itself; a tool may not call itself".into());
    }
    Ok(file.tools)
}

/// Whether `tools` cover a claim of the tools `claimed`.
pub fn covers(tools: &[String], claimed: &[String]) -> Result<(), String> {
    super::super::claims::outside(claimed, "invoke", "tools", |s| tools.iter().any(|t| t == s))
}

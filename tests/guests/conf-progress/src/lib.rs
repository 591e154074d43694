//! `test_tool_with_progress`, for the MCP conformance suite's `tools-call-with-progress`
//! scenario: it works for a while, so the host reports progress while it runs.

use vak_guest::prelude::*;

#[derive(Deserialize, JsonSchema)]
pub struct Args {}

pub struct Progress;

impl Tool for Progress {
    type Args = Args;
    const NAME: &'static str = "test_tool_with_progress";
    const DESCRIPTION: &'static str = "Takes about two seconds (MCP conformance).";

    fn call(_: Args) -> Result<Output, ToolError> {
        std::thread::sleep(std::time::Duration::from_millis(2_200));
        Ok(Output::markdown("done after about two seconds"))
    }
}

vak_guest::export_tool!(Progress);

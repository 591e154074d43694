//! `test_logging_tool`, the diagnostic tool of the MCP conformance suite's `server-stateless`
//! scenario: it logs, and a stateless request that named no log level gets none of its lines.

use vak_guest::prelude::*;

#[derive(Deserialize, JsonSchema)]
pub struct Args {}

pub struct Tool1;

impl Tool for Tool1 {
    type Args = Args;
    const NAME: &'static str = "test_logging_tool";
    const DESCRIPTION: &'static str = "Logs two lines (MCP conformance, SEP-2575).";

    fn claims() -> Claims {
        Claims::new().log()
    }

    fn call(_: Args) -> Result<Output, ToolError> {
        log::info("logging tool started");
        log::warn("logging tool finished");
        Ok(Output::markdown("logged two lines"))
    }
}

vak_guest::export_tool!(Tool1);

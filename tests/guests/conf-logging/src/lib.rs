//! `test_tool_with_logging`, for the MCP conformance suite's `tools-call-with-logging` scenario:
//! three log lines about 50 ms apart, which the host forwards to a client that asked for logs.

use vak_guest::prelude::*;

#[derive(Deserialize, JsonSchema)]
pub struct Args {}

pub struct Logging;

impl Tool for Logging {
    type Args = Args;
    const NAME: &'static str = "test_tool_with_logging";
    const DESCRIPTION: &'static str = "Logs three lines while it runs (MCP conformance).";

    fn claims() -> Claims {
        Claims::new().log()
    }

    fn call(_: Args) -> Result<Output, ToolError> {
        let pause = std::time::Duration::from_millis(50);
        log::info("Tool execution started");
        std::thread::sleep(pause);
        log::info("Tool processing data");
        std::thread::sleep(pause);
        log::info("Tool execution completed");
        Ok(Output::markdown("Tool with logging executed successfully"))
    }
}

vak_guest::export_tool!(Logging);

//! `test_error_handling`, for the MCP conformance suite's `tools-call-error` scenario: the tool
//! returns its own error value, which vak reports as `isError: true`.

use vak_guest::prelude::*;

#[derive(Deserialize, JsonSchema)]
pub struct Args {}

pub struct ErrorHandling;

impl Tool for ErrorHandling {
    type Args = Args;
    const NAME: &'static str = "test_error_handling";
    const DESCRIPTION: &'static str = "Always returns a tool error (MCP conformance).";

    fn call(_: Args) -> Result<Output, ToolError> {
        Err(ToolError::new(
            "test-error",
            "This tool intentionally returns an error for testing",
        ))
    }
}

vak_guest::export_tool!(ErrorHandling);

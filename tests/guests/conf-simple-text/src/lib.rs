//! `test_simple_text`, the tool the MCP conformance suite's `tools-call-simple-text` scenario
//! calls: no arguments, one text result.

use vak_guest::prelude::*;

#[derive(Deserialize, JsonSchema)]
pub struct Args {}

pub struct SimpleText;

impl Tool for SimpleText {
    type Args = Args;
    const NAME: &'static str = "test_simple_text";
    const DESCRIPTION: &'static str = "Returns a simple text (MCP conformance).";

    fn call(_: Args) -> Result<Output, ToolError> {
        Ok(Output::markdown(
            "This is a simple text response for testing.",
        ))
    }
}

vak_guest::export_tool!(SimpleText);

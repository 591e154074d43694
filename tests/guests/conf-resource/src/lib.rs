//! `test_embedded_resource`, for the MCP conformance suite's `tools-call-embedded-resource`
//! scenario: a result with an embedded text resource.

use vak_guest::prelude::*;

#[derive(Deserialize, JsonSchema)]
pub struct Args {}

pub struct Resource;

impl Tool for Resource {
    type Args = Args;
    const NAME: &'static str = "test_embedded_resource";
    const DESCRIPTION: &'static str = "Returns an embedded text resource (MCP conformance).";

    fn call(_: Args) -> Result<Output, ToolError> {
        Ok(
            Output::markdown("An embedded resource.").with_text_resource(
                "test://embedded-resource",
                "text/plain",
                "This is an embedded resource content.",
            ),
        )
    }
}

vak_guest::export_tool!(Resource);

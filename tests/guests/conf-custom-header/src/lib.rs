//! `test_custom_header`, for the MCP conformance suite's `http-custom-header-server-validation`
//! scenario: its `region` argument is marked `x-mcp-header: Region` (SEP-2243), so a
//! 2026-07-28 client mirrors it in an `Mcp-Param-Region` header, which the server checks.

use vak_guest::prelude::*;

#[derive(Deserialize, JsonSchema)]
pub struct Args {
    /// Where to route the call.
    #[schemars(extend("x-mcp-header" = "Region"))]
    region: String,
}

pub struct Tool1;

impl Tool for Tool1 {
    type Args = Args;
    const NAME: &'static str = "test_custom_header";
    const DESCRIPTION: &'static str =
        "Echoes a region its client also sends as a header (MCP conformance, SEP-2243).";

    fn call(args: Args) -> Result<Output, ToolError> {
        Ok(Output::markdown(format!("region: {}", args.region)))
    }
}

vak_guest::export_tool!(Tool1);

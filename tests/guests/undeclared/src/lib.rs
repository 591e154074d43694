//! A tool that imports `clock` but claims no capability: admission must refuse it.

use vak_guest::prelude::*;

#[derive(Deserialize, JsonSchema)]
pub struct Args {}

pub struct Undeclared;

impl Tool for Undeclared {
    type Args = Args;
    const NAME: &'static str = "undeclared";
    const DESCRIPTION: &'static str = "Reads the clock without claiming it.";

    fn call(_: Args) -> Result<Output, ToolError> {
        let r = clock::now("UTC").map_err(|e| ToolError::new("clock", e.to_string()))?;
        Ok(Output::markdown(r.rfc3339))
    }
}

vak_guest::export_tool!(Undeclared);

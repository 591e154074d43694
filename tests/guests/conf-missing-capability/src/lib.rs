//! `test_missing_capability`, the diagnostic tool of the MCP conformance suite's
//! `server-stateless` scenario: it cannot do without the client's model, so a stateless request
//! that does not declare `sampling` is answered with `-32021` naming it.

use vak_guest::prelude::*;

#[derive(Deserialize, JsonSchema)]
pub struct Args {}

pub struct Tool1;

impl Tool for Tool1 {
    type Args = Args;
    const NAME: &'static str = "test_missing_capability";
    const DESCRIPTION: &'static str =
        "Needs a completion from the client's model (MCP conformance, SEP-2575).";

    fn claims() -> Claims {
        Claims::new().client(["sampling"])
    }

    fn call(_args: Args) -> Result<Output, ToolError> {
        let reply = client::sample("Say hello.", 20)
            .map_err(|e| ToolError::new("sampling-failed", e.to_string()))?;
        Ok(Output::markdown(format!("model: {}", reply.text)))
    }
}

vak_guest::export_tool!(Tool1);

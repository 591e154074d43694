//! `test_input_required_result_list_roots`, for the MCP conformance suite's
//! `input-required-result-basic-list-roots` scenario: the tool asks the client for its roots
//! (`client_roots`), which a stateless client answers in an input-required round.

use vak_guest::prelude::*;

#[derive(Deserialize, JsonSchema)]
pub struct Args {}

pub struct Tool1;

impl Tool for Tool1 {
    type Args = Args;
    const NAME: &'static str = "test_input_required_result_list_roots";
    const DESCRIPTION: &'static str = "Lists the client's roots (MCP conformance, SEP-2322).";

    fn claims() -> Claims {
        Claims::new().client(["roots"])
    }

    fn call(_args: Args) -> Result<Output, ToolError> {
        let answers = client::Ask::new()
            .roots("client_roots")
            .send()
            .map_err(|e| ToolError::new("roots-failed", e.to_string()))?;
        match answers.into_iter().next() {
            Some(Ok(client::InputAnswer::Roots(reply))) => {
                let uris: Vec<String> = reply.roots.into_iter().map(|r| r.uri).collect();
                Ok(Output::markdown(format!("Roots: {}", uris.join(", "))))
            }
            Some(Err(e)) => Err(ToolError::new("roots-failed", e.to_string())),
            _ => Err(ToolError::new("roots-failed", "no roots")),
        }
    }
}

vak_guest::export_tool!(Tool1);

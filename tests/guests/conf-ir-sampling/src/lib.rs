//! `test_input_required_result_sampling`, for the MCP conformance suite's
//! `input-required-result-basic-sampling` scenario: the tool asks the client's model a question,
//! which a stateless client answers in an input-required round.

use vak_guest::prelude::*;

#[derive(Deserialize, JsonSchema)]
pub struct Args {}

pub struct Tool1;

impl Tool for Tool1 {
    type Args = Args;
    const NAME: &'static str = "test_input_required_result_sampling";
    const DESCRIPTION: &'static str =
        "Asks the client's model for the capital of France (MCP conformance, SEP-2322).";

    fn claims() -> Claims {
        Claims::new().client(["sampling"])
    }

    fn call(_args: Args) -> Result<Output, ToolError> {
        let reply = client::sample("What is the capital of France?", 100)
            .map_err(|e| ToolError::new("sampling-failed", e.to_string()))?;
        Ok(Output::markdown(format!("LLM response: {}", reply.text)))
    }
}

vak_guest::export_tool!(Tool1);

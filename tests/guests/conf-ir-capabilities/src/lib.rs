//! `test_input_required_result_capabilities`, for the MCP conformance suite's
//! `input-required-result-capability-check` scenario: the tool asks for a form and, when the
//! client cannot answer forms (it did not declare elicitation), asks its model instead; the host
//! puts in a round only what the client declared.

use vak_guest::prelude::*;

#[derive(Deserialize, JsonSchema)]
pub struct Args {}

pub struct Tool1;

impl Tool for Tool1 {
    type Args = Args;
    const NAME: &'static str = "test_input_required_result_capabilities";
    const DESCRIPTION: &'static str =
        "Asks for a form, else a completion (MCP conformance, SEP-2322).";

    fn claims() -> Claims {
        Claims::new().client(["elicitation", "sampling"])
    }

    fn call(_args: Args) -> Result<Output, ToolError> {
        let schema = json!({
            "type": "object",
            "properties": { "name": { "type": "string" } },
            "required": ["name"],
        });
        if let Ok(reply) = client::elicit("What is your name?", &schema) {
            let content = reply.content.unwrap_or_else(|| "{}".into());
            return Ok(Output::markdown(format!("form: {content}")));
        }
        let reply = client::sample("What is your name?", 50)
            .map_err(|e| ToolError::new("sampling-failed", e.to_string()))?;
        Ok(Output::markdown(format!("model: {}", reply.text)))
    }
}

vak_guest::export_tool!(Tool1);

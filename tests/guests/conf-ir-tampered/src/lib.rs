//! `test_input_required_result_tampered_state`, for the MCP conformance suite's
//! `input-required-result-tampered-state` scenario: a question across a round, whose
//! `requestState` the suite alters (the host refuses it).

use vak_guest::prelude::*;

#[derive(Deserialize, JsonSchema)]
pub struct Args {}

pub struct Tool1;

impl Tool for Tool1 {
    type Args = Args;
    const NAME: &'static str = "test_input_required_result_tampered_state";
    const DESCRIPTION: &'static str =
        "Asks for a confirmation across a round (MCP conformance, SEP-2322).";

    fn claims() -> Claims {
        Claims::new().client(["elicitation"])
    }

    fn call(_args: Args) -> Result<Output, ToolError> {
        let schema = json!({
            "type": "object",
            "properties": { "ok": { "type": "boolean", "description": "Confirm" } },
        });
        let reply = client::elicit("Confirm?", &schema)
            .map_err(|e| ToolError::new("elicitation-failed", e.to_string()))?;
        let content = reply.content.unwrap_or_else(|| "{}".into());
        Ok(Output::markdown(format!("confirmed: {content}")))
    }
}

vak_guest::export_tool!(Tool1);

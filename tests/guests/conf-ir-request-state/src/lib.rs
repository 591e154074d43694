//! `test_input_required_result_request_state`, for the MCP conformance suite's
//! `input-required-result-request-state` scenario: the answer reaches the tool only through a
//! `requestState` the host sealed and checked, so a complete result says `state-ok`.

use vak_guest::prelude::*;

#[derive(Deserialize, JsonSchema)]
pub struct Args {}

pub struct Tool1;

impl Tool for Tool1 {
    type Args = Args;
    const NAME: &'static str = "test_input_required_result_request_state";
    const DESCRIPTION: &'static str =
        "Asks for a confirmation across a sealed requestState (MCP conformance, SEP-2322).";

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
        Ok(Output::markdown(format!("state-ok: {content}")))
    }
}

vak_guest::export_tool!(Tool1);

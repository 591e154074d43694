//! `test_input_required_result_multi_round`, for the MCP conformance suite's
//! `input-required-result-multi-round` scenario: two questions, one after the other, so a
//! stateless client answers them in two rounds (the tool runs three times).

use vak_guest::prelude::*;

#[derive(Deserialize, JsonSchema)]
pub struct Args {}

pub struct Tool1;

fn ask(message: &str, field: &str) -> Result<String, ToolError> {
    let schema = json!({
        "type": "object",
        "properties": { field: { "type": "string" } },
        "required": [field],
    });
    let reply = client::elicit(message, &schema)
        .map_err(|e| ToolError::new("elicitation-failed", e.to_string()))?;
    Ok(reply.content.unwrap_or_else(|| "{}".into()))
}

impl Tool for Tool1 {
    type Args = Args;
    const NAME: &'static str = "test_input_required_result_multi_round";
    const DESCRIPTION: &'static str = "Asks two questions in turn (MCP conformance, SEP-2322).";

    fn claims() -> Claims {
        Claims::new().client(["elicitation"])
    }

    fn call(_args: Args) -> Result<Output, ToolError> {
        let name = ask("Step 1: What is your name?", "name")?;
        let color = ask("Step 2: What is your favorite color?", "color")?;
        Ok(Output::markdown(format!("name: {name}, color: {color}")))
    }
}

vak_guest::export_tool!(Tool1);

//! `test_input_required_result_elicitation`, for the MCP conformance suite's
//! `input-required-result-*` scenarios: the tool asks the person for a name under a key of its
//! own (`user_name`), which a stateless client answers in an input-required round.

use vak_guest::prelude::*;

#[derive(Deserialize, JsonSchema)]
pub struct Args {}

pub struct Tool1;

impl Tool for Tool1 {
    type Args = Args;
    const NAME: &'static str = "test_input_required_result_elicitation";
    const DESCRIPTION: &'static str = "Asks the person for a name (MCP conformance, SEP-2322).";

    fn claims() -> Claims {
        Claims::new().client(["elicitation"])
    }

    fn call(_args: Args) -> Result<Output, ToolError> {
        let schema = json!({
            "type": "object",
            "properties": { "name": { "type": "string", "description": "Your name" } },
            "required": ["name"],
        });
        let answers = client::Ask::new()
            .elicit("user_name", "What is your name?", &schema)
            .send()
            .map_err(|e| ToolError::new("elicitation-failed", e.to_string()))?;
        match answers.into_iter().next() {
            Some(Ok(client::InputAnswer::Elicited(reply))) => {
                let content = reply.content.unwrap_or_else(|| "{}".into());
                Ok(Output::markdown(format!("Hello: {content}")))
            }
            Some(Err(e)) => Err(ToolError::new("elicitation-failed", e.to_string())),
            _ => Err(ToolError::new(
                "elicitation-failed",
                "no answer to the form",
            )),
        }
    }
}

vak_guest::export_tool!(Tool1);

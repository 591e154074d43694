//! `test_input_required_result_multiple_inputs`, for the MCP conformance suite's
//! `input-required-result-multiple-input-requests` scenario: a form, a completion and the
//! client's roots asked together, so that a stateless client gets them in one round.

use vak_guest::prelude::*;

#[derive(Deserialize, JsonSchema)]
pub struct Args {}

pub struct Tool1;

impl Tool for Tool1 {
    type Args = Args;
    const NAME: &'static str = "test_input_required_result_multiple_inputs";
    const DESCRIPTION: &'static str =
        "Asks for a name, a greeting and the roots at once (MCP conformance, SEP-2322).";

    fn claims() -> Claims {
        Claims::new().client(["elicitation", "sampling", "roots"])
    }

    fn call(_args: Args) -> Result<Output, ToolError> {
        let schema = json!({
            "type": "object",
            "properties": { "name": { "type": "string" } },
            "required": ["name"],
        });
        let answers = client::Ask::new()
            .elicit("user_name", "What is your name?", &schema)
            .sample("greeting", "Generate a greeting", 50)
            .roots("client_roots")
            .send()
            .map_err(|e| ToolError::new("ask-failed", e.to_string()))?;
        let mut lines = Vec::new();
        for answer in answers {
            let line = match answer.map_err(|e| ToolError::new("ask-failed", e.to_string()))? {
                client::InputAnswer::Elicited(r) => {
                    format!("name: {}", r.content.unwrap_or_default())
                }
                client::InputAnswer::Sampled(r) => format!("greeting: {}", r.text),
                client::InputAnswer::Roots(r) => format!("roots: {}", r.roots.len()),
            };
            lines.push(line);
        }
        Ok(Output::markdown(lines.join("\n")))
    }
}

vak_guest::export_tool!(Tool1);

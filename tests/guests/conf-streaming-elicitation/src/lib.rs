//! `test_streaming_elicitation`, the diagnostic tool of the MCP conformance suite's
//! `server-stateless` scenario: it asks the person a question, which a stateless request gets as
//! an input-required result on its own response, never as a request of the server's.

use vak_guest::prelude::*;

#[derive(Deserialize, JsonSchema)]
pub struct Args {}

pub struct Tool1;

impl Tool for Tool1 {
    type Args = Args;
    const NAME: &'static str = "test_streaming_elicitation";
    const DESCRIPTION: &'static str = "Asks the person to confirm (MCP conformance, SEP-2575).";

    fn claims() -> Claims {
        Claims::new().client(["elicitation"])
    }

    fn call(_args: Args) -> Result<Output, ToolError> {
        let schema = json!({
            "type": "object",
            "properties": { "ok": { "type": "boolean" } },
        });
        let reply = client::elicit("Continue?", &schema)
            .map_err(|e| ToolError::new("elicitation-failed", e.to_string()))?;
        Ok(Output::markdown(format!(
            "answer: {}",
            reply.content.unwrap_or_else(|| "{}".into())
        )))
    }
}

vak_guest::export_tool!(Tool1);

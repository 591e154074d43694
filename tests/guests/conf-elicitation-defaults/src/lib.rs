//! `test_elicitation_sep1034_defaults`, for the MCP conformance suite's `elicitation-sep1034-defaults` scenario: the tool asks the
//! person a question with a form, through the host, which checks the answers against the form.

use vak_guest::prelude::*;

#[derive(Deserialize, JsonSchema)]
pub struct Args {}

pub struct Elicit;

impl Tool for Elicit {
    type Args = Args;
    const NAME: &'static str = "test_elicitation_sep1034_defaults";
    const DESCRIPTION: &'static str =
        "Asks with a form whose fields have defaults (MCP conformance, SEP-1034).";

    fn claims() -> Claims {
        Claims::new().client(["elicitation"])
    }

    fn call(args: Args) -> Result<Output, ToolError> {
        let _ = &args;
        let schema = json!({
            "type": "object",
            "properties": {
                "name": { "type": "string", "default": "John Doe" },
                "age": { "type": "integer", "default": 30 },
                "score": { "type": "number", "default": 95.5 },
                "status": { "type": "string", "enum": ["active", "inactive", "pending"], "default": "active" },
                "verified": { "type": "boolean", "default": true },
            },
        });
        let reply = client::elicit("Please review the defaults", &schema)
            .map_err(|e| ToolError::new("elicitation-failed", e.to_string()))?;
        let action = match reply.action {
            client::ElicitationAction::Accept => "accept",
            client::ElicitationAction::Decline => "decline",
            client::ElicitationAction::Cancel => "cancel",
        };
        let content = reply.content.unwrap_or_else(|| "{}".into());
        Ok(Output::markdown(format!(
            "Elicitation completed: action={action}, content={content}"
        ))
        .with_evidence(
            Evidence::observed("answer", &reply.receipt)
                .note("the person's answer, as the host received it"),
        ))
    }
}

vak_guest::export_tool!(Elicit);

//! `test_elicitation`, for the MCP conformance suite's `tools-call-elicitation` scenario: the tool asks the
//! person a question with a form, through the host, which checks the answers against the form.

use vak_guest::prelude::*;

#[derive(Deserialize, JsonSchema)]
pub struct Args {
    /// The message to show the person.
    pub message: String,
}

pub struct Elicit;

impl Tool for Elicit {
    type Args = Args;
    const NAME: &'static str = "test_elicitation";
    const DESCRIPTION: &'static str =
        "Asks the person for a username and an email (MCP conformance).";

    fn claims() -> Claims {
        Claims::new().client(["elicitation"])
    }

    fn call(args: Args) -> Result<Output, ToolError> {
        let _ = &args;
        let schema = json!({
            "type": "object",
            "properties": {
                "username": { "type": "string", "description": "User's response" },
                "email": { "type": "string", "description": "User's email address" },
            },
            "required": ["username", "email"],
        });
        let reply = client::elicit(&args.message, &schema)
            .map_err(|e| ToolError::new("elicitation-failed", e.to_string()))?;
        let action = match reply.action {
            client::ElicitationAction::Accept => "accept",
            client::ElicitationAction::Decline => "decline",
            client::ElicitationAction::Cancel => "cancel",
        };
        let content = reply.content.unwrap_or_else(|| "{}".into());
        Ok(Output::markdown(format!(
            "User response: <action: {action}, content: {content}>"
        ))
        .with_evidence(
            Evidence::observed("answer", &reply.receipt)
                .note("the person's answer, as the host received it"),
        ))
    }
}

vak_guest::export_tool!(Elicit);

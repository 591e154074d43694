//! `test_elicitation_sep1330_enums`, for the MCP conformance suite's `elicitation-sep1330-enums` scenario: the tool asks the
//! person a question with a form, through the host, which checks the answers against the form.

use vak_guest::prelude::*;

#[derive(Deserialize, JsonSchema)]
pub struct Args {}

pub struct Elicit;

impl Tool for Elicit {
    type Args = Args;
    const NAME: &'static str = "test_elicitation_sep1330_enums";
    const DESCRIPTION: &'static str =
        "Asks with a form of every enum shape (MCP conformance, SEP-1330).";

    fn claims() -> Claims {
        Claims::new().client(["elicitation"])
    }

    fn call(args: Args) -> Result<Output, ToolError> {
        let _ = &args;
        let schema = json!({
            "type": "object",
            "properties": {
                "untitledSingle": { "type": "string", "enum": ["option1", "option2", "option3"] },
                "titledSingle": { "type": "string", "oneOf": [
                    { "const": "value1", "title": "First Option" },
                    { "const": "value2", "title": "Second Option" },
                    { "const": "value3", "title": "Third Option" },
                ] },
                "legacyEnum": { "type": "string", "enum": ["opt1", "opt2", "opt3"],
                    "enumNames": ["Option One", "Option Two", "Option Three"] },
                "untitledMulti": { "type": "array", "items": { "type": "string", "enum": ["option1", "option2", "option3"] } },
                "titledMulti": { "type": "array", "items": { "anyOf": [
                    { "const": "value1", "title": "First Choice" },
                    { "const": "value2", "title": "Second Choice" },
                    { "const": "value3", "title": "Third Choice" },
                ] } },
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

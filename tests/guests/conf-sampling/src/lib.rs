//! `test_sampling`, for the MCP conformance suite's `tools-call-sampling` scenario: the tool asks
//! the client's model to answer the prompt, through the host.

use vak_guest::prelude::*;

#[derive(Deserialize, JsonSchema)]
pub struct Args {
    /// The prompt to send to the client's model.
    pub prompt: String,
}

pub struct Sampling;

impl Tool for Sampling {
    type Args = Args;
    const NAME: &'static str = "test_sampling";
    const DESCRIPTION: &'static str =
        "Asks the client's model to answer a prompt (MCP conformance).";

    fn claims() -> Claims {
        Claims::new().client(["sampling"])
    }

    fn call(args: Args) -> Result<Output, ToolError> {
        let reply = client::sample(&args.prompt, 100)
            .map_err(|e| ToolError::new("sampling-failed", e.to_string()))?;
        Ok(
            Output::markdown(format!("LLM response: {}", reply.text)).with_evidence(
                Evidence::synthesized("completion").note(&format!(
                    "completion by {} (receipt {})",
                    reply.model, reply.receipt
                )),
            ),
        )
    }
}

vak_guest::export_tool!(Sampling);

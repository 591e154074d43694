//! Starts child runs: the tests check that the child's record survives what the parent does next.

use vak_guest::prelude::*;

#[derive(Deserialize, JsonSchema)]
pub struct Args {
    /// invoke | invoke-then-panic | invoke-other
    pub mode: String,
}

pub struct Parent;

impl Tool for Parent {
    type Args = Args;
    const NAME: &'static str = "parent";
    const DESCRIPTION: &'static str = "Calls the clock as a child run.";

    fn claims() -> Claims {
        Claims::new().invoke(Vec::<String>::new())
    }

    fn call(args: Args) -> Result<Output, ToolError> {
        let tool = if args.mode == "invoke-other" {
            "stats"
        } else {
            "clock"
        };
        let child = invoke::call(tool, r#"{"zone":"Asia/Tokyo"}"#)
            .map_err(|e| ToolError::new("invoke", e.to_string()))?;
        if args.mode == "invoke-then-panic" {
            panic!("after the child run {}", child.call_id);
        }
        Ok(Output::markdown(format!("child said: {}", child.markdown))
            .with_payload("vak.test/1", &json!({ "child": child.call_id }))?
            // The run itself is what the host witnessed (`vak.test/1` binds no field to an
            // `invoke` receipt, so the item points at none).
            .with_evidence(Evidence::observed("child", &child.receipt).note("the child run")))
    }
}

vak_guest::export_tool!(Parent);

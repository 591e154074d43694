//! A tool that describes itself without end: 50,000 claimed zones (1 MB) and 50,000 payload
//! schema ids. Admission must refuse it with a reason that stays short.

use vak_guest::prelude::*;

#[derive(Deserialize, JsonSchema)]
pub struct Args {}

pub struct DescriptorBomb;

impl Tool for DescriptorBomb {
    type Args = Args;
    const NAME: &'static str = "descriptor_bomb";
    const DESCRIPTION: &'static str = "Describes itself without end.";

    fn claims() -> Claims {
        Claims::new().clock((0..50_000).map(|i| format!("Zone/{i:0>15}")))
    }

    fn payload_schemas() -> Vec<String> {
        (0..50_000).map(|i| format!("b/{i}")).collect()
    }

    fn call(_: Args) -> Result<Output, ToolError> {
        Ok(Output::markdown("never called"))
    }
}

vak_guest::export_tool!(DescriptorBomb);

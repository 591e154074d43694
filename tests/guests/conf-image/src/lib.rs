//! `test_image_content`, for the MCP conformance suite's `tools-call-image` scenario: a result
//! with an image attachment (a 1×1 red PNG).

use vak_guest::prelude::*;

/// A 1×1 red pixel, PNG.
const RED_PIXEL_PNG: &[u8] = &[
    137, 80, 78, 71, 13, 10, 26, 10, 0, 0, 0, 13, 73, 72, 68, 82, 0, 0, 0, 1, 0, 0, 0, 1, 8, 2, 0,
    0, 0, 144, 119, 83, 222, 0, 0, 0, 12, 73, 68, 65, 84, 8, 215, 99, 248, 207, 192, 0, 0, 3, 1, 1,
    0, 201, 254, 146, 239, 0, 0, 0, 0, 73, 69, 78, 68, 174, 66, 96, 130,
];

#[derive(Deserialize, JsonSchema)]
pub struct Args {}

pub struct Image;

impl Tool for Image {
    type Args = Args;
    const NAME: &'static str = "test_image_content";
    const DESCRIPTION: &'static str = "Returns a 1x1 red PNG image (MCP conformance).";

    fn call(_: Args) -> Result<Output, ToolError> {
        Ok(Output::markdown("A 1×1 red pixel.").with_image("image/png", RED_PIXEL_PNG.to_vec()))
    }
}

vak_guest::export_tool!(Image);

//! `test_audio_content`, for the MCP conformance suite's `tools-call-audio` scenario: a result
//! with an audio attachment (8 silent samples, WAV).

use vak_guest::prelude::*;

/// 8 silent 16-bit samples at 8 kHz, WAV.
const SILENCE_WAV: &[u8] = &[
    82, 73, 70, 70, 52, 0, 0, 0, 87, 65, 86, 69, 102, 109, 116, 32, 16, 0, 0, 0, 1, 0, 1, 0, 64,
    31, 0, 0, 128, 62, 0, 0, 2, 0, 16, 0, 100, 97, 116, 97, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0,
];

#[derive(Deserialize, JsonSchema)]
pub struct Args {}

pub struct Audio;

impl Tool for Audio {
    type Args = Args;
    const NAME: &'static str = "test_audio_content";
    const DESCRIPTION: &'static str = "Returns a tiny silent WAV (MCP conformance).";

    fn call(_: Args) -> Result<Output, ToolError> {
        Ok(Output::markdown("One millisecond of silence.")
            .with_audio("audio/wav", SILENCE_WAV.to_vec()))
    }
}

vak_guest::export_tool!(Audio);

//! A bulky tool: each `mode` returns as much as one part of a call record may hold, written in
//! the form that costs the record most (control characters, which JSON escapes as six bytes).

use vak_guest::prelude::*;

#[derive(Deserialize, JsonSchema)]
pub struct Args {
    /// tool-error | result | deep-payload | everything
    pub mode: String,
    /// A size (bytes, items or depth) for the mode.
    #[serde(default)]
    pub n: u64,
}

pub struct Bulky;

/// `n` bytes of U+0001, which a JSON string spells `\u0001`.
fn costly(n: u64) -> String {
    "\u{1}".repeat(n as usize)
}

/// Log `MAX_LINES + 1` lines of control characters and flood stdout and stderr with them and
/// with bytes that are not UTF-8.
fn fill_logs() {
    use std::io::Write;
    for _ in 0..300 {
        log::info(&costly(4096));
    }
    let mut junk = vec![1u8; 64 << 10];
    junk.extend(std::iter::repeat_n(0xff, 64 << 10));
    let _ = std::io::stdout().write_all(&junk);
    let _ = std::io::stderr().write_all(&junk);
}

impl Tool for Bulky {
    type Args = Args;
    const NAME: &'static str = "bulky";
    const DESCRIPTION: &'static str = "Returns as much as the host lets it, in the costliest form.";

    fn claims() -> Claims {
        Claims::new().log().memory_bytes(256 << 20)
    }

    fn call(args: Args) -> Result<Output, ToolError> {
        match args.mode.as_str() {
            "tool-error" => Err(ToolError::new(costly(1000), costly(args.n))),
            "result" => {
                // Evidence items that cite receipts which do not exist: each comes back with
                // the host's diagnostics beside it.
                let mut out = Output::markdown(costly(args.n / 2));
                for i in 0..(args.n / 2 / 300) {
                    let receipt = format!("nope/{i}{}", costly(200));
                    out = out.with_evidence(
                        Evidence::observed(&format!("e{i}"), &receipt).supports("/x"),
                    );
                }
                Ok(out)
            }
            "deep-payload" => {
                let n = args.n as usize;
                let text = format!("{}{}", "[".repeat(n), "]".repeat(n));
                let raw = serde_json::value::RawValue::from_string(text)
                    .map_err(|e| ToolError::new("raw", e.to_string()))?;
                Output::markdown("deep").with_payload("vak.test/1", &raw)
            }
            "everything" => {
                fill_logs();
                Err(ToolError::new(costly(1000), costly(args.n)))
            }
            "everything-result" => {
                fill_logs();
                Ok(Output::markdown(costly(args.n)))
            }
            other => Err(ToolError::new("unknown-mode", other.to_string())),
        }
    }
}

vak_guest::export_tool!(Bulky);

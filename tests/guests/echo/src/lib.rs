//! Returns the payload and document its arguments give, optionally backed by a clock reading:
//! the tests use it to present every kind of payload to the outcome and projection stages.

use vak_guest::prelude::*;

#[derive(Deserialize, JsonSchema)]
pub struct Args {
    /// The payload schema id to claim (none: no payload).
    #[serde(default)]
    pub schema: Option<String>,
    /// The payload, as JSON text.
    #[serde(default)]
    pub payload: Option<String>,
    pub markdown: String,
    /// Pointers an observed clock reading is cited for.
    #[serde(default)]
    pub observed: Vec<String>,
}

pub struct Echo;

impl Tool for Echo {
    type Args = Args;
    const NAME: &'static str = "echo";
    const DESCRIPTION: &'static str = "Returns what it is given.";

    fn claims() -> Claims {
        Claims::new().clock(["UTC"])
    }

    fn call(args: Args) -> Result<Output, ToolError> {
        let mut out = Output::markdown(args.markdown);
        if let (Some(schema), Some(payload)) = (&args.schema, &args.payload) {
            let value: vak_guest::serde_json::Value = vak_guest::serde_json::from_str(payload)
                .map_err(|e| ToolError::new("payload", e.to_string()))?;
            out = out.with_payload(schema, &value)?;
        }
        if !args.observed.is_empty() {
            let reading = clock::now("UTC").map_err(|e| ToolError::new("clock", e.to_string()))?;
            let mut e = Evidence::observed("reading", &reading.receipt);
            for p in &args.observed {
                e = e.supports(p);
            }
            out = out.with_evidence(e);
        }
        Ok(out)
    }
}

vak_guest::export_tool!(Echo);

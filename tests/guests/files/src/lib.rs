//! Tries one workspace operation given in its arguments: the tests aim it at escapes.

use vak_guest::prelude::*;

#[derive(Deserialize, JsonSchema)]
pub struct Args {
    /// read | write | list
    pub op: String,
    pub root: String,
    pub path: String,
    #[serde(default)]
    pub content: Option<String>,
}

pub struct Files;

impl Tool for Files {
    type Args = Args;
    const NAME: &'static str = "files";
    const DESCRIPTION: &'static str = "One workspace operation, as asked.";

    fn claims() -> Claims {
        Claims::new().workspace(["project", "docs"])
    }

    fn call(args: Args) -> Result<Output, ToolError> {
        let refused = |e: CapabilityError| {
            let code = match &e {
                CapabilityError::Denied(_) => "denied",
                CapabilityError::Revoked(_) => "revoked",
                CapabilityError::Invalid(_) => "invalid",
                CapabilityError::Failed(_) => "failed",
            };
            ToolError::new(code, e.to_string())
        };
        let text = match args.op.as_str() {
            "read" => {
                let r = workspace::read(&args.root, &args.path).map_err(refused)?;
                String::from_utf8_lossy(&r.content).into_owned()
            }
            "write" => {
                let content = args.content.unwrap_or_default();
                let w = workspace::write(&args.root, &args.path, content.as_bytes())
                    .map_err(refused)?;
                w.sha256
            }
            "list" => {
                let l = workspace::list(&args.root, &args.path).map_err(refused)?;
                l.entries
                    .iter()
                    .map(|e| e.name.clone())
                    .collect::<Vec<_>>()
                    .join(",")
            }
            other => return Err(ToolError::new("bad-op", other.to_string())),
        };
        Ok(Output::markdown(text))
    }
}

vak_guest::export_tool!(Files);

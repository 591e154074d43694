//! `replace`: search and replace in one file of a workspace root, with evidence of what changed.
//!
//! The result cites three host receipts: the read before the change, the write (which also backs
//! the root and path shown), and a read back after it (the verification that the file now holds
//! what was written; the host derives `matches` from the write and read-back receipts itself).

use vak_guest::prelude::*;

/// Arguments of `replace`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The workspace root, by the name the policy gives it (e.g. "project").
    pub root: String,
    /// The file, relative to the root.
    pub path: String,
    /// The exact text to find.
    pub find: String,
    /// What to put in its place.
    pub replace: String,
}

/// One file touched, in the `vak.coding.change/1` payload.
#[derive(Serialize)]
pub struct FileChange {
    pub root: String,
    pub path: String,
    pub before_sha256: String,
    pub after_sha256: String,
    pub replacements: usize,
}

/// The `vak.coding.change/1` payload.
#[derive(Serialize)]
pub struct Change {
    pub files: Vec<FileChange>,
    /// The file read back after the write.
    pub verification: Verification,
}

#[derive(Serialize)]
pub struct Verification {
    pub method: &'static str,
    pub sha256: String,
    pub matches: bool,
}

pub struct Replace;

fn refused(e: CapabilityError) -> ToolError {
    ToolError::new("workspace", e.to_string())
}

impl Tool for Replace {
    type Args = Args;
    const NAME: &'static str = "replace";
    const DESCRIPTION: &'static str = "Replace every occurrence of a text in one file of a workspace root, and verify the result.";

    fn claims() -> Claims {
        Claims::new().workspace(["project"])
    }

    fn payload_schemas() -> Vec<String> {
        vec!["vak.coding.change/1".to_string()]
    }

    fn call(args: Args) -> Result<Output, ToolError> {
        if args.find.is_empty() {
            return Err(ToolError::new("empty-find", "`find` must not be empty"));
        }
        let before = workspace::read(&args.root, &args.path).map_err(refused)?;
        let text = String::from_utf8(before.content).map_err(|_| {
            ToolError::new("not-text", format!("{:?} is not UTF-8 text", args.path))
        })?;
        let replacements = text.matches(&args.find).count();
        if replacements == 0 {
            return Err(ToolError::new(
                "not-found",
                format!(
                    "{:?} does not occur in {:?}; nothing was changed",
                    args.find, args.path
                ),
            ));
        }
        let changed = text.replace(&args.find, &args.replace);
        let written =
            workspace::write(&args.root, &args.path, changed.as_bytes()).map_err(refused)?;
        let check = workspace::read(&args.root, &args.path).map_err(refused)?;
        let payload = Change {
            files: vec![FileChange {
                root: args.root.clone(),
                path: args.path.clone(),
                before_sha256: before.sha256.clone(),
                after_sha256: written.sha256.clone(),
                replacements,
            }],
            verification: Verification {
                method: "read-back",
                sha256: check.sha256.clone(),
                matches: check.sha256 == written.sha256,
            },
        };
        Output::markdown(format!(
            "Replaced {replacements} occurrence(s) of `{}` in `{}` (root `{}`); the file was read back and {}.",
            args.find,
            args.path,
            args.root,
            if payload.verification.matches { "matches what was written" } else { "DOES NOT match what was written" }
        ))
        .with_payload("vak.coding.change/1", &payload)
        .map(|o| {
            o.with_evidence(
                Evidence::observed("before", &before.receipt)
                    .digest(&before.sha256)
                    .supports("/files/0/before_sha256"),
            )
            .with_evidence(
                Evidence::observed("write", &written.receipt)
                    .digest(&written.sha256)
                    .supports("/files/0/root")
                    .supports("/files/0/path")
                    .supports("/files/0/after_sha256"),
            )
            .with_evidence(
                Evidence::observed("read-back", &check.receipt)
                    .digest(&check.sha256)
                    .supports("/verification"),
            )
        })
    }
}

vak_guest::export_tool!(Replace);

//! `wasi:filesystem` for foreign components (built for other hosts): each workspace root of the
//! tool's grant is preopened at its host path (as Wassette does, so paths a model read in one
//! tool's output work in the next), read-only or read-write as granted. wasmtime-wasi resolves
//! every path inside its preopened directory (no `..` or symlink out of it). Nothing else of
//! the host's filesystem exists for the guest. vak's own tools use `vak:tool/workspace`
//! instead, which leaves a receipt per file read or written.

use super::grant::{Root, RootMode};
use crate::capabilities::{Capability, ReceiptSink};
use serde_json::json;
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

/// Preopen `roots` into `builder`, with one receipt per root saying what the call could reach.
/// A root that cannot be opened fails the call before the guest runs.
pub(crate) fn preopen(
    builder: &mut WasiCtxBuilder,
    roots: &[Root],
    receipts: &ReceiptSink,
) -> Result<(), String> {
    for root in roots {
        let perms = match root.mode {
            RootMode::ReadOnly => FsPerms::ReadOnly,
            RootMode::ReadWrite => FsPerms::ReadWrite,
        };
        let guest = root.path.display().to_string();
        let opened = builder.preopened_dir(&root.path, &guest, perms);
        receipts.issue(
            Capability::Workspace,
            "wasi:filesystem/preopens",
            json!({ "root": root.name, "path": guest, "mode": root.mode }),
            json!({ "preopened": opened.is_ok() }),
            opened.is_ok(),
            None,
        );
        opened
            .map_err(|e| format!("the workspace root {:?} cannot be opened: {e:#}", root.name))?;
    }
    Ok(())
}

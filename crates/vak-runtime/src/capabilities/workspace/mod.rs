//! `vak:tool/workspace`: files inside the roots the policy grants a tool, read-only or read-write.
//!
//! Every path is resolved by `cap-std` relative to an opened root directory, so `..`, absolute
//! paths and symlinks cannot lead outside it (and a sibling such as `/data-evil` of `/data` is
//! never even named). Paths are also checked up front, so a refusal says plainly why. Each read,
//! write and listing leaves a receipt; a read or write receipt's digest is the SHA-256 of the
//! content, so a tool can cite it. The roots are the policy's (see [`grant`]).

pub mod grant;
pub mod wasi;

use super::{Broker, Capability, CapabilityBroker, HasBroker};
use crate::bindings::vak::tool::types::CapabilityError;
use crate::bindings::vak::tool::workspace::{
    Entry, FileRead, FileWritten, Host, Listing, add_to_linker,
};
use cap_std::fs::Dir;
use grant::{Root, RootMode};
use serde_json::json;
use wasmtime::component::{HasSelf, Linker};

/// The `workspace` broker.
pub struct Workspace;

impl<T: HasBroker> CapabilityBroker<T> for Workspace {
    fn link(&self, linker: &mut Linker<T>) -> wasmtime::Result<()> {
        add_to_linker::<T, HasSelf<Broker>>(linker, T::broker)
    }
}

/// Largest file read or written through the capability.
pub const MAX_FILE_BYTES: u64 = 16 << 20;
/// Most entries a listing returns.
pub const MAX_ENTRIES: usize = 10_000;
const MAX_PATH_BYTES: usize = 4096;

/// Why a path is not acceptable, before any file system access.
pub(crate) fn check_path(path: &str, allow_empty: bool) -> Result<(), String> {
    if path.is_empty() && !allow_empty {
        return Err("the path is empty".into());
    }
    if path.len() > MAX_PATH_BYTES || path.contains('\0') {
        return Err("the path is too long or contains NUL".into());
    }
    if path.starts_with('/') {
        return Err(format!(
            "{path:?} is absolute; paths are relative to the root"
        ));
    }
    if path.split('/').any(|c| c == "..") {
        return Err(format!(
            "{path:?} steps out with `..`; paths stay inside the root"
        ));
    }
    Ok(())
}

fn io_error(path: &str, e: &std::io::Error) -> CapabilityError {
    match e.kind() {
        std::io::ErrorKind::NotFound => CapabilityError::Failed(format!("{path:?} does not exist")),
        std::io::ErrorKind::PermissionDenied => CapabilityError::Denied(format!(
            "{path:?} leads outside the root or is not accessible"
        )),
        _ => CapabilityError::Failed(format!("{path:?}: {e}")),
    }
}

impl Broker {
    /// The granted root named `root`, opened, after the checks every operation shares.
    fn open_root(
        &self,
        root: &str,
        path: &str,
        allow_empty: bool,
        write: bool,
    ) -> Result<(Root, Dir), CapabilityError> {
        let grant = self.authorize(Capability::Workspace)?;
        let granted = grant
            .root(root)
            .ok_or_else(|| {
                CapabilityError::Denied(format!(
                    "no workspace root {root:?} is granted to this tool"
                ))
            })?
            .clone();
        if write && granted.mode != RootMode::ReadWrite {
            return Err(CapabilityError::Denied(format!(
                "the root {root:?} is granted read-only"
            )));
        }
        check_path(path, allow_empty).map_err(CapabilityError::Invalid)?;
        let dir =
            Dir::open_ambient_dir(&granted.path, cap_std::ambient_authority()).map_err(|e| {
                CapabilityError::Failed(format!("the root {root:?} cannot be opened: {e}"))
            })?;
        Ok((granted, dir))
    }

    /// What every operation checks first: a receipt is left for it, and the root's approval
    /// when the policy marks it `ask` (a refusal is on record).
    async fn ready(
        &self,
        operation: &str,
        root: &str,
        request: &serde_json::Value,
    ) -> Result<(), CapabilityError> {
        if let Some(e) = self.out_of_receipts() {
            return Err(e);
        }
        let approved = self.root_approved(root).await;
        approved.map_err(|e| self.refuse(operation, request.clone(), e))
    }

    /// Wait for the approval of `root` when the policy marks it `ask` (once per call).
    async fn root_approved(&self, root: &str) -> Result<(), CapabilityError> {
        let asks = self
            .grant
            .as_deref()
            .and_then(|g| g.root(root))
            .is_some_and(|r| r.ask);
        if asks {
            self.approved(crate::approval::ApprovalScope::Root(root.to_string()))
                .await?;
        }
        Ok(())
    }

    fn refuse(
        &self,
        operation: &str,
        request: serde_json::Value,
        e: CapabilityError,
    ) -> CapabilityError {
        self.refused(Capability::Workspace, operation, request, e)
    }
}

impl Host for Broker {
    async fn read(&mut self, root: String, path: String) -> Result<FileRead, CapabilityError> {
        let request = json!({ "root": root, "path": path });
        self.ready("read", &root, &request).await?;
        let read = (|| {
            let (_, dir) = self.open_root(&root, &path, false, false)?;
            let meta = dir.metadata(&path).map_err(|e| io_error(&path, &e))?;
            if !meta.is_file() {
                return Err(CapabilityError::Invalid(format!("{path:?} is not a file")));
            }
            if meta.len() > MAX_FILE_BYTES {
                return Err(CapabilityError::Denied(format!(
                    "{path:?} is {} bytes; at most {MAX_FILE_BYTES} are read",
                    meta.len()
                )));
            }
            dir.read(&path).map_err(|e| io_error(&path, &e))
        })();
        match read {
            Ok(content) => {
                let sha256 = crate::digest::sha256_hex(&content);
                let outcome = json!({ "size": content.len(), "sha256": sha256 });
                let receipt = self.receipts.issue(
                    Capability::Workspace,
                    "read",
                    request,
                    outcome,
                    true,
                    Some(sha256.clone()),
                );
                self.bodies.retain(&receipt, &content);
                Ok(FileRead {
                    content,
                    sha256,
                    receipt,
                })
            }
            Err(e) => Err(self.refuse("read", request, e)),
        }
    }

    async fn write(
        &mut self,
        root: String,
        path: String,
        content: Vec<u8>,
    ) -> Result<FileWritten, CapabilityError> {
        let sha256 = crate::digest::sha256_hex(&content);
        let request =
            json!({ "root": root, "path": path, "size": content.len(), "sha256": sha256 });
        self.ready("write", &root, &request).await?;
        let written = (|| {
            let (_, dir) = self.open_root(&root, &path, false, true)?;
            if content.len() as u64 > MAX_FILE_BYTES {
                return Err(CapabilityError::Denied(format!(
                    "at most {MAX_FILE_BYTES} bytes are written"
                )));
            }
            let previous = match dir.read(&path) {
                Ok(bytes) => Some(crate::digest::sha256_hex(&bytes)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => return Err(io_error(&path, &e)),
            };
            dir.write(&path, &content)
                .map_err(|e| io_error(&path, &e))?;
            Ok(previous)
        })();
        match written {
            Ok(previous_sha256) => {
                let outcome = json!({ "size": content.len(), "sha256": sha256, "previous_sha256": previous_sha256 });
                let receipt = self.receipts.issue(
                    Capability::Workspace,
                    "write",
                    request,
                    outcome,
                    true,
                    Some(sha256.clone()),
                );
                Ok(FileWritten {
                    size: content.len() as u64,
                    sha256,
                    previous_sha256,
                    receipt,
                })
            }
            Err(e) => Err(self.refuse("write", request, e)),
        }
    }

    async fn list(&mut self, root: String, path: String) -> Result<Listing, CapabilityError> {
        let request = json!({ "root": root, "path": path });
        self.ready("list", &root, &request).await?;
        let listed = (|| {
            let (_, dir) = self.open_root(&root, &path, true, false)?;
            let target = if path.is_empty() { "." } else { path.as_str() };
            let mut entries = Vec::new();
            for entry in dir.read_dir(target).map_err(|e| io_error(&path, &e))? {
                if entries.len() >= MAX_ENTRIES {
                    break;
                }
                let entry = entry.map_err(|e| io_error(&path, &e))?;
                let meta = entry.metadata().map_err(|e| io_error(&path, &e))?;
                entries.push(Entry {
                    name: entry.file_name().to_string_lossy().into_owned(),
                    is_dir: meta.is_dir(),
                    size: meta.len(),
                });
            }
            entries.sort_by(|a, b| a.name.cmp(&b.name));
            Ok(entries)
        })();
        match listed {
            Ok(entries) => {
                let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
                let outcome = json!({ "entries": names.len(), "names": names });
                let receipt = self.receipts.issue(
                    Capability::Workspace,
                    "list",
                    request,
                    outcome,
                    true,
                    None,
                );
                Ok(Listing { entries, receipt })
            }
            Err(e) => Err(self.refuse("list", request, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::check_path;

    #[test]
    fn paths_stay_relative_and_inside() {
        assert!(check_path("src/lib.rs", false).is_ok());
        assert!(check_path("", true).is_ok());
        for bad in ["", "/etc/passwd", "../x", "a/../../x", "a/..", "a\0b"] {
            assert!(check_path(bad, false).is_err(), "{bad:?}");
        }
    }
}

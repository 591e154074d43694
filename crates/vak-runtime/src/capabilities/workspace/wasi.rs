//! `wasi:filesystem` for foreign components (built for other hosts): each workspace root of the
//! tool's grant is preopened at its host path (as Wassette does, so paths a model read in one
//! tool's output work in the next), read-only or read-write as granted. wasmtime-wasi resolves
//! every path inside its preopened directory (no `..` or symlink out of it). Nothing else of
//! the host's filesystem exists for the guest. Every open, listing and change leaves a receipt
//! ([`WitnessedFs`]). vak's own tools use `vak:tool/workspace` instead.

use super::grant::{Root, RootMode};
use crate::capabilities::{Broker, Capability, ReceiptSink};
use serde_json::json;
use std::collections::HashMap;
use wasmtime::component::Resource;
use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemCtxView};
use wasmtime_wasi::p2::bindings::filesystem::preopens;
use wasmtime_wasi::p2::bindings::filesystem::types::{
    self, ErrorCode, HostDescriptor, HostDirectoryEntryStream,
};
use wasmtime_wasi::p2::{DynInputStream, DynOutputStream, FsError, FsResult};
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

/// Bytes of a path kept in a receipt (and in the call's map of open descriptors).
const MAX_PATH_BYTES: usize = 1024;

/// `wasi:filesystem` for a foreign component, witnessed: every file or directory opened, every
/// listing and every change leaves a receipt with the path as the guest reached it (from its
/// preopened root). Everything else is wasmtime-wasi's, which resolves each path inside its
/// preopen; reads and metadata are covered by the receipt of the open.
pub struct WitnessedFs<'a> {
    pub(crate) fs: WasiFilesystemCtxView<'a>,
    /// Where each open descriptor is, by its handle.
    pub(crate) paths: &'a mut HashMap<u32, String>,
    /// The call's broker: where receipts go, and what says whether `workspace` still holds.
    pub(crate) broker: &'a Broker,
}

/// [`WitnessedFs`] as the linker's data.
pub struct Witnessed;

impl wasmtime::component::HasData for Witnessed {
    type Data<'a> = WitnessedFs<'a>;
}

/// Link the witnessed `wasi:filesystem` into `linker`, over what is already there.
pub fn link<T: Send + 'static>(
    linker: &mut wasmtime::component::Linker<T>,
    view: fn(&mut T) -> WitnessedFs<'_>,
) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    types::add_to_linker::<T, Witnessed>(linker, view)?;
    preopens::add_to_linker::<T, Witnessed>(linker, view)?;
    linker.allow_shadowing(false);
    Ok(())
}

impl WitnessedFs<'_> {
    fn path_of(&self, fd: &Resource<Descriptor>, rest: Option<&str>) -> String {
        let base = self
            .paths
            .get(&fd.rep())
            .map_or("(a descriptor)", String::as_str);
        let joined = match rest {
            Some(rest) => format!("{}/{rest}", base.trim_end_matches('/')),
            None => base.to_string(),
        };
        joined[..joined.floor_char_boundary(MAX_PATH_BYTES)].to_string()
    }

    /// Refuse an effect the call has no receipt left for, or that `workspace` no longer
    /// covers: a revocation reaches a call already running at its next operation, as for vak's
    /// own tools (the refusal is on record).
    fn room(&self, operation: &str) -> FsResult<()> {
        if self.broker.receipts.full() {
            return Err(ErrorCode::NotPermitted.into());
        }
        self.gate(operation)
    }

    /// Refuse a read once `workspace` is revoked (reads leave no receipt of their own: the open
    /// they come through has one; a refused read has one).
    fn gate(&self, operation: &str) -> FsResult<()> {
        match self.broker.authorize(Capability::Workspace) {
            Ok(_) => Ok(()),
            Err(e) => {
                self.broker
                    .refused(Capability::Workspace, operation, json!({}), e);
                Err(ErrorCode::NotPermitted.into())
            }
        }
    }

    fn witness<R>(&self, operation: &str, request: serde_json::Value, done: &FsResult<R>) {
        let outcome = match done {
            Ok(_) => json!({ "done": true }),
            Err(e) => json!({ "error": format!("{e:?}") }),
        };
        self.broker.receipts.issue(
            Capability::Workspace,
            operation,
            request,
            outcome,
            done.is_ok(),
            None,
        );
    }
}

impl preopens::Host for WitnessedFs<'_> {
    fn get_directories(&mut self) -> wasmtime::Result<Vec<(Resource<Descriptor>, String)>> {
        let dirs = preopens::Host::get_directories(&mut self.fs)?;
        for (fd, path) in &dirs {
            self.paths.insert(fd.rep(), path.clone());
        }
        Ok(dirs)
    }
}

impl types::Host for WitnessedFs<'_> {
    fn convert_error_code(&mut self, err: FsError) -> wasmtime::Result<ErrorCode> {
        types::Host::convert_error_code(&mut self.fs, err)
    }

    fn filesystem_error_code(
        &mut self,
        err: Resource<wasmtime::Error>,
    ) -> wasmtime::Result<Option<ErrorCode>> {
        types::Host::filesystem_error_code(&mut self.fs, err)
    }
}

impl HostDirectoryEntryStream for WitnessedFs<'_> {
    async fn read_directory_entry(
        &mut self,
        stream: Resource<types::DirectoryEntryStream>,
    ) -> FsResult<Option<types::DirectoryEntry>> {
        self.gate("wasi:filesystem read-directory-entry")?;
        HostDirectoryEntryStream::read_directory_entry(&mut self.fs, stream).await
    }

    fn drop(&mut self, stream: Resource<types::DirectoryEntryStream>) -> wasmtime::Result<()> {
        HostDirectoryEntryStream::drop(&mut self.fs, stream)
    }
}

impl HostDescriptor for WitnessedFs<'_> {
    async fn advise(
        &mut self,
        fd: Resource<Descriptor>,
        offset: types::Filesize,
        len: types::Filesize,
        advice: types::Advice,
    ) -> FsResult<()> {
        self.fs.advise(fd, offset, len, advice).await
    }

    async fn sync_data(&mut self, fd: Resource<Descriptor>) -> FsResult<()> {
        self.fs.sync_data(fd).await
    }

    async fn get_flags(&mut self, fd: Resource<Descriptor>) -> FsResult<types::DescriptorFlags> {
        self.fs.get_flags(fd).await
    }

    async fn get_type(&mut self, fd: Resource<Descriptor>) -> FsResult<types::DescriptorType> {
        self.fs.get_type(fd).await
    }

    async fn set_size(&mut self, fd: Resource<Descriptor>, size: types::Filesize) -> FsResult<()> {
        self.room("wasi:filesystem set-size")?;
        let request = json!({ "path": self.path_of(&fd, None), "size": size });
        let done = self.fs.set_size(fd, size).await;
        self.witness("wasi:filesystem set-size", request, &done);
        done
    }

    async fn set_times(
        &mut self,
        fd: Resource<Descriptor>,
        atim: types::NewTimestamp,
        mtim: types::NewTimestamp,
    ) -> FsResult<()> {
        self.room("wasi:filesystem set-times")?;
        let request = json!({ "path": self.path_of(&fd, None) });
        let done = self.fs.set_times(fd, atim, mtim).await;
        self.witness("wasi:filesystem set-times", request, &done);
        done
    }

    async fn read(
        &mut self,
        fd: Resource<Descriptor>,
        len: types::Filesize,
        offset: types::Filesize,
    ) -> FsResult<(Vec<u8>, bool)> {
        self.gate("wasi:filesystem read")?;
        self.fs.read(fd, len, offset).await
    }

    async fn write(
        &mut self,
        fd: Resource<Descriptor>,
        buf: Vec<u8>,
        offset: types::Filesize,
    ) -> FsResult<types::Filesize> {
        self.room("wasi:filesystem write")?;
        let request = json!({
            "path": self.path_of(&fd, None),
            "offset": offset,
            "bytes": buf.len(),
            "sha256": crate::digest::sha256_hex(&buf),
        });
        let done = self.fs.write(fd, buf, offset).await;
        self.witness("wasi:filesystem write", request, &done);
        done
    }

    async fn read_directory(
        &mut self,
        fd: Resource<Descriptor>,
    ) -> FsResult<Resource<types::DirectoryEntryStream>> {
        self.room("wasi:filesystem read-directory")?;
        let request = json!({ "path": self.path_of(&fd, None) });
        let done = self.fs.read_directory(fd).await;
        self.witness("wasi:filesystem read-directory", request, &done);
        done
    }

    async fn sync(&mut self, fd: Resource<Descriptor>) -> FsResult<()> {
        self.fs.sync(fd).await
    }

    async fn create_directory_at(
        &mut self,
        fd: Resource<Descriptor>,
        path: String,
    ) -> FsResult<()> {
        self.room("wasi:filesystem create-directory")?;
        let request = json!({ "path": self.path_of(&fd, Some(&path)) });
        let done = self.fs.create_directory_at(fd, path).await;
        self.witness("wasi:filesystem create-directory", request, &done);
        done
    }

    async fn stat(&mut self, fd: Resource<Descriptor>) -> FsResult<types::DescriptorStat> {
        self.fs.stat(fd).await
    }

    async fn stat_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: types::PathFlags,
        path: String,
    ) -> FsResult<types::DescriptorStat> {
        self.gate("wasi:filesystem stat")?;
        self.fs.stat_at(fd, path_flags, path).await
    }

    async fn set_times_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: types::PathFlags,
        path: String,
        atim: types::NewTimestamp,
        mtim: types::NewTimestamp,
    ) -> FsResult<()> {
        self.room("wasi:filesystem set-times")?;
        let request = json!({ "path": self.path_of(&fd, Some(&path)) });
        let done = self.fs.set_times_at(fd, path_flags, path, atim, mtim).await;
        self.witness("wasi:filesystem set-times", request, &done);
        done
    }

    async fn link_at(
        &mut self,
        fd: Resource<Descriptor>,
        old_path_flags: types::PathFlags,
        old_path: String,
        new_descriptor: Resource<Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        self.room("wasi:filesystem link")?;
        let request = json!({
            "from": self.path_of(&fd, Some(&old_path)),
            "to": self.path_of(&new_descriptor, Some(&new_path)),
        });
        let done = self
            .fs
            .link_at(fd, old_path_flags, old_path, new_descriptor, new_path)
            .await;
        self.witness("wasi:filesystem link", request, &done);
        done
    }

    async fn open_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: types::PathFlags,
        path: String,
        oflags: types::OpenFlags,
        flags: types::DescriptorFlags,
    ) -> FsResult<Resource<Descriptor>> {
        self.room("wasi:filesystem open")?;
        let full = self.path_of(&fd, Some(&path));
        let request = json!({
            "path": full,
            "create": oflags.contains(types::OpenFlags::CREATE),
            "truncate": oflags.contains(types::OpenFlags::TRUNCATE),
            "write": flags.contains(types::DescriptorFlags::WRITE),
        });
        let done = self.fs.open_at(fd, path_flags, path, oflags, flags).await;
        self.witness("wasi:filesystem open", request, &done);
        if let Ok(opened) = &done {
            self.paths.insert(opened.rep(), full);
        }
        done
    }

    fn drop(&mut self, fd: Resource<Descriptor>) -> wasmtime::Result<()> {
        self.paths.remove(&fd.rep());
        HostDescriptor::drop(&mut self.fs, fd)
    }

    async fn readlink_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<String> {
        self.gate("wasi:filesystem readlink")?;
        self.fs.readlink_at(fd, path).await
    }

    async fn remove_directory_at(
        &mut self,
        fd: Resource<Descriptor>,
        path: String,
    ) -> FsResult<()> {
        self.room("wasi:filesystem remove-directory")?;
        let request = json!({ "path": self.path_of(&fd, Some(&path)) });
        let done = self.fs.remove_directory_at(fd, path).await;
        self.witness("wasi:filesystem remove-directory", request, &done);
        done
    }

    async fn rename_at(
        &mut self,
        fd: Resource<Descriptor>,
        old_path: String,
        new_fd: Resource<Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        self.room("wasi:filesystem rename")?;
        let request = json!({
            "from": self.path_of(&fd, Some(&old_path)),
            "to": self.path_of(&new_fd, Some(&new_path)),
        });
        let done = self.fs.rename_at(fd, old_path, new_fd, new_path).await;
        self.witness("wasi:filesystem rename", request, &done);
        done
    }

    async fn symlink_at(
        &mut self,
        fd: Resource<Descriptor>,
        src_path: String,
        dest_path: String,
    ) -> FsResult<()> {
        self.room("wasi:filesystem symlink")?;
        let request = json!({
            "target": &src_path[..src_path.floor_char_boundary(MAX_PATH_BYTES)],
            "path": self.path_of(&fd, Some(&dest_path)),
        });
        let done = self.fs.symlink_at(fd, src_path, dest_path).await;
        self.witness("wasi:filesystem symlink", request, &done);
        done
    }

    async fn unlink_file_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<()> {
        self.room("wasi:filesystem unlink")?;
        let request = json!({ "path": self.path_of(&fd, Some(&path)) });
        let done = self.fs.unlink_file_at(fd, path).await;
        self.witness("wasi:filesystem unlink", request, &done);
        done
    }

    fn read_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
        offset: types::Filesize,
    ) -> FsResult<Resource<DynInputStream>> {
        self.gate("wasi:filesystem read-stream")?;
        self.fs.read_via_stream(fd, offset)
    }

    fn write_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
        offset: types::Filesize,
    ) -> FsResult<Resource<DynOutputStream>> {
        self.room("wasi:filesystem write-stream")?;
        let request = json!({ "path": self.path_of(&fd, None), "offset": offset });
        let done = self.fs.write_via_stream(fd, offset);
        self.witness("wasi:filesystem write-stream", request, &done);
        done
    }

    fn append_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
    ) -> FsResult<Resource<DynOutputStream>> {
        self.room("wasi:filesystem write-stream")?;
        let request = json!({ "path": self.path_of(&fd, None), "append": true });
        let done = self.fs.append_via_stream(fd);
        self.witness("wasi:filesystem write-stream", request, &done);
        done
    }

    async fn is_same_object(
        &mut self,
        a: Resource<Descriptor>,
        b: Resource<Descriptor>,
    ) -> wasmtime::Result<bool> {
        self.fs.is_same_object(a, b).await
    }

    async fn metadata_hash(
        &mut self,
        fd: Resource<Descriptor>,
    ) -> FsResult<types::MetadataHashValue> {
        self.fs.metadata_hash(fd).await
    }

    async fn metadata_hash_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: types::PathFlags,
        path: String,
    ) -> FsResult<types::MetadataHashValue> {
        self.fs.metadata_hash_at(fd, path_flags, path).await
    }
}

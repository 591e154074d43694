//! The on-disk AOT cache: a component is compiled once per (component digest, engine
//! configuration); later starts deserialize the artifact instead of compiling.

use super::compile::CompileError;
use super::engine::RuntimeError;
use crate::digest::{Sha256Hasher, sha256_hex};
use sha2::Digest;
use std::hash::Hash;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use wasmtime::Engine;
use wasmtime::component::Component;

/// The cache directory and its counters.
pub struct AotCache {
    dir: Option<PathBuf>,
    /// Digest of the engine's compilation settings and wasmtime version.
    engine_key: String,
    compiles: AtomicU64,
    hits: AtomicU64,
}

impl AotCache {
    /// `$VAK_CACHE_DIR`, else `$XDG_CACHE_HOME/vak/aot`, else `$HOME/.cache/vak/aot`.
    pub fn default_dir() -> Option<PathBuf> {
        if let Some(dir) = std::env::var_os("VAK_CACHE_DIR") {
            return Some(PathBuf::from(dir));
        }
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
        Some(base.join("vak").join("aot"))
    }

    pub(crate) fn open(engine: &Engine, dir: Option<PathBuf>) -> Result<AotCache, RuntimeError> {
        let mut hasher = Sha256Hasher::default();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let engine_key = hex::encode(hasher.0.finalize());
        if let Some(dir) = &dir {
            prepare_dir(dir)?;
        }
        Ok(AotCache {
            dir,
            engine_key,
            compiles: AtomicU64::new(0),
            hits: AtomicU64::new(0),
        })
    }

    /// Compiles this host ran to their end (in this process or in its compile worker), kept or
    /// not: an abandoned in-process compile counts once it ends.
    pub fn compiles(&self) -> u64 {
        self.compiles.load(Ordering::Relaxed)
    }

    /// Count one compile that ended (kept or abandoned).
    pub(crate) fn count_compile(&self) {
        self.compiles.fetch_add(1, Ordering::Relaxed);
    }

    /// Components loaded from the cache by this process.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// The cache directory, if caching is on.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    fn path_for(&self, component_digest: &str) -> Option<PathBuf> {
        let key = sha256_hex(format!("{component_digest}:{}", self.engine_key).as_bytes());
        self.dir.as_ref().map(|d| d.join(format!("{key}.cwasm")))
    }

    /// The component compiled earlier for `digest`, if the cache holds a usable artifact.
    pub(crate) fn load(&self, engine: &Engine, component_digest: &str) -> Option<Component> {
        let path = self.path_for(component_digest)?;
        // Read the artifact into memory rather than mapping the file: a file truncated or
        // rewritten in place by someone else then cannot fault pages under a running instance.
        let artifact = std::fs::read(&path).ok()?;
        // SAFETY: `deserialize` trusts the artifact to be the output of
        // `Engine::precompile_component` for a compatible engine, since it becomes native
        // code. The file lives in the host's own cache directory, which `prepare_dir` created
        // with mode 0700 and checked to be owned by this user and writable by no one else; its
        // name binds the component digest and the engine fingerprint; and wasmtime checks the
        // artifact's header against this engine before using it.
        match unsafe { Component::deserialize(engine, &artifact) } {
            Ok(component) => {
                self.hits.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(digest = component_digest, path = %path.display(), "component loaded from the AOT cache");
                Some(component)
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "unusable AOT artifact; recompiling");
                None
            }
        }
    }

    /// The component of `artifact`, just compiled for `digest` by this host (in this process
    /// or in its compile worker), written to the cache when there is one.
    pub(crate) fn keep(
        &self,
        engine: &Engine,
        component_digest: &str,
        artifact: &[u8],
    ) -> Result<Component, CompileError> {
        // SAFETY: `artifact` is the output of `precompile_component` for this engine's
        // configuration, made just now by this process or by the compile worker this host
        // started (the program the operator named, given this engine's settings); wasmtime
        // checks its header against this engine before using it.
        // Refused here: what this engine's pools cannot hold (a table of 50 million elements).
        let component = unsafe { Component::deserialize(engine, artifact) }
            .map_err(|e| CompileError::Compile(format!("{e:#}")))?;
        if let Some(path) = self.path_for(component_digest) {
            write_atomically(&path, artifact);
        }
        Ok(component)
    }
}

/// Write the artifact next to its final name and rename it into place, so a reader never sees a
/// half-written file. A failure only costs a recompile next time.
fn write_atomically(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let result = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        tracing::warn!(path = %path.display(), error = %e, "could not write the AOT artifact");
    }
}

#[cfg(unix)]
fn prepare_dir(dir: &Path) -> Result<(), RuntimeError> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    let fail = |reason: String| RuntimeError::Cache {
        path: dir.display().to_string(),
        reason,
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| fail(e.to_string()))?;
    let meta = std::fs::metadata(dir).map_err(|e| fail(e.to_string()))?;
    // SAFETY-relevant: artifacts from this directory are mapped as native code.
    if meta.permissions().mode() & 0o022 != 0 {
        return Err(fail(
            "it is writable by group or others; native code is loaded from it (chmod 700 it)"
                .into(),
        ));
    }
    // SAFETY: `geteuid` has no preconditions, touches no memory and cannot fail.
    let uid = unsafe { libc::geteuid() };
    if meta.uid() != uid {
        return Err(fail(format!(
            "it is owned by uid {}, not by this user (uid {uid})",
            meta.uid()
        )));
    }
    Ok(())
}

#[cfg(not(unix))]
fn prepare_dir(dir: &Path) -> Result<(), RuntimeError> {
    std::fs::create_dir_all(dir).map_err(|e| RuntimeError::Cache {
        path: dir.display().to_string(),
        reason: e.to_string(),
    })
}

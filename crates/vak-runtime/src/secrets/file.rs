//! The secrets file `vak secret` manages, and the checks that make vak refuse it.
//!
//! The file is refused unless only its owner (this user) can read it: a secret readable by
//! others is already leaked, and vak will not pretend otherwise. Its folder is refused when
//! others can write to it or another user (not root) owns it: whoever can replace the file can
//! hand vak values of their choosing, or read what `vak secret set` writes next.

use super::{SecretError, SecretSource, SecretValue, valid_name};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The effective user id of this process.
#[cfg(unix)]
fn this_user() -> u32 {
    // SAFETY: `geteuid` has no preconditions, touches no memory and cannot fail.
    unsafe { libc::geteuid() }
}

/// The owner-only file `vak secret` manages: a JSON object of name → value.
#[derive(Debug, Clone)]
pub struct FileSecrets {
    path: PathBuf,
}

impl FileSecrets {
    /// `$VAK_SECRETS_FILE`, else `$XDG_CONFIG_HOME/vak/secrets.json`, else
    /// `~/.config/vak/secrets.json`: outside any project, so it is never committed with one.
    pub fn default_path() -> Result<PathBuf, SecretError> {
        if let Some(file) = std::env::var_os("VAK_SECRETS_FILE") {
            return Ok(PathBuf::from(file));
        }
        let base = std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
            .ok_or(SecretError::NoHome)?;
        Ok(base.join("vak").join("secrets.json"))
    }

    pub fn new(path: impl Into<PathBuf>) -> FileSecrets {
        FileSecrets { path: path.into() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn io(&self, source: std::io::Error) -> SecretError {
        SecretError::Io {
            path: self.path.clone(),
            source,
        }
    }

    /// Every stored secret; an absent file is an empty store. The mode and owner are checked
    /// on the open handle, so the file judged is the file read.
    fn read_all(&self) -> Result<BTreeMap<String, String>, SecretError> {
        use std::io::Read;
        self.check_folder()?;
        let mut file = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
            Err(e) => return Err(self.io(e)),
        };
        self.check_private(&file.metadata().map_err(|e| self.io(e))?)?;
        let mut text = String::new();
        file.read_to_string(&mut text).map_err(|e| self.io(e))?;
        serde_json::from_str(&text).map_err(|e| SecretError::Corrupt {
            path: self.path.clone(),
            reason: e.to_string(),
        })
    }

    #[cfg(unix)]
    fn check_private(&self, meta: &std::fs::Metadata) -> Result<(), SecretError> {
        use std::os::unix::fs::MetadataExt;
        let mode = meta.mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(SecretError::Exposed {
                path: self.path.clone(),
                mode,
            });
        }
        let uid = this_user();
        if meta.uid() != uid {
            return Err(SecretError::NotOwner {
                path: self.path.clone(),
                owner: meta.uid(),
                uid,
            });
        }
        Ok(())
    }

    /// The folder the file is in: not writable by group or others, owned by this user or root.
    /// An absent folder passes (`write_all` creates it owner-only).
    #[cfg(unix)]
    fn check_folder(&self) -> Result<(), SecretError> {
        use std::os::unix::fs::MetadataExt;
        let folder = match self.path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let meta = match std::fs::metadata(&folder) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(self.io(e)),
        };
        let mode = meta.mode() & 0o7777;
        if mode & 0o022 != 0 {
            return Err(SecretError::FolderExposed { folder, mode });
        }
        let uid = this_user();
        if meta.uid() != uid && meta.uid() != 0 {
            return Err(SecretError::FolderNotOwner {
                folder,
                owner: meta.uid(),
                uid,
            });
        }
        Ok(())
    }

    #[cfg(not(unix))]
    fn check_folder(&self) -> Result<(), SecretError> {
        Ok(())
    }

    #[cfg(not(unix))]
    fn check_private(&self, _meta: &std::fs::Metadata) -> Result<(), SecretError> {
        Ok(())
    }

    /// Write the whole store: a new owner-only file renamed over the old one, so a reader
    /// sees the old store or the new one, never half of either.
    fn write_all(&self, all: &BTreeMap<String, String>) -> Result<(), SecretError> {
        use std::io::Write;
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(dir).map_err(|e| self.io(e))?;
        let tmp = self
            .path
            .with_extension(format!("tmp.{}", std::process::id()));
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(&tmp).map_err(|e| self.io(e))?;
        let text = serde_json::to_string_pretty(all).map_err(|e| self.io(e.into()))?;
        let written = file
            .write_all(text.as_bytes())
            .and_then(|()| file.sync_all())
            .and_then(|()| std::fs::rename(&tmp, &self.path));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(self.io(e));
        }
        Ok(())
    }

    /// Store `value` under `name` (replacing any earlier value).
    pub fn set(&self, name: &str, value: &SecretValue) -> Result<(), SecretError> {
        if !valid_name(name) {
            return Err(SecretError::BadName(name.to_string()));
        }
        if value.expose().is_empty() {
            return Err(SecretError::Empty);
        }
        let mut all = self.read_all()?;
        all.insert(name.to_string(), value.expose().to_string());
        self.write_all(&all)
    }

    /// Remove `name`; an unknown name is an error, so a typo does not pass for a removal.
    pub fn remove(&self, name: &str) -> Result<(), SecretError> {
        let mut all = self.read_all()?;
        if all.remove(name).is_none() {
            return Err(SecretError::NotFound(name.to_string()));
        }
        self.write_all(&all)
    }

    /// The names stored, sorted; never the values.
    pub fn names(&self) -> Result<Vec<String>, SecretError> {
        Ok(self.read_all()?.into_keys().collect())
    }
}

impl SecretSource for FileSecrets {
    fn get(&self, name: &str) -> Result<Option<SecretValue>, SecretError> {
        Ok(self.read_all()?.remove(name).map(SecretValue))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, FileSecrets) {
        let dir = tempfile::tempdir().unwrap();
        let store = FileSecrets::new(dir.path().join("vak/secrets.json"));
        (dir, store)
    }

    #[test]
    fn set_list_get_and_remove() {
        let (_dir, store) = store();
        assert_eq!(store.names().unwrap(), Vec::<String>::new());
        store
            .set("weather_key", &SecretValue::new("s3cr3t"))
            .unwrap();
        store.set("OTHER", &SecretValue::new("x")).unwrap();
        assert_eq!(store.names().unwrap(), ["OTHER", "weather_key"]);
        assert_eq!(
            store.get("weather_key").unwrap().unwrap().expose(),
            "s3cr3t"
        );
        store.remove("OTHER").unwrap();
        assert!(store.get("OTHER").unwrap().is_none());
        assert!(matches!(
            store.remove("OTHER"),
            Err(SecretError::NotFound(_))
        ));
        for bad in ["", "../x", "a b", "1abc", "a/b"] {
            assert!(matches!(
                store.set(bad, &SecretValue::new("v")),
                Err(SecretError::BadName(_))
            ));
        }
        assert!(matches!(
            store.set("empty", &SecretValue::new("")),
            Err(SecretError::Empty)
        ));
    }

    #[cfg(unix)]
    #[test]
    fn the_file_is_owner_only_and_refused_when_it_is_not() {
        use std::os::unix::fs::PermissionsExt;
        let (_dir, store) = store();
        store.set("k", &SecretValue::new("v")).unwrap();
        let mode = std::fs::metadata(store.path())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let dir_mode = std::fs::metadata(store.path().parent().unwrap())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(dir_mode & 0o077, 0);
        std::fs::set_permissions(store.path(), std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = store.get("k").unwrap_err();
        assert!(
            matches!(err, SecretError::Exposed { mode: 0o644, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("chmod 600"), "{err}");
        // Writing is refused too: the old file is never read into a new one.
        assert!(store.set("k2", &SecretValue::new("v")).is_err());

        // A folder others can write to: refused, though the file itself is owner-only.
        std::fs::set_permissions(store.path(), std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(store.get("k").unwrap().unwrap().expose(), "v");
        let folder = store.path().parent().unwrap();
        for mode in [0o770, 0o707, 0o1777] {
            std::fs::set_permissions(folder, std::fs::Permissions::from_mode(mode)).unwrap();
            let err = store.get("k").unwrap_err();
            assert!(
                matches!(err, SecretError::FolderExposed { .. }),
                "{mode:o}: {err}"
            );
            assert!(err.to_string().contains("chmod go-w"), "{err}");
            assert!(store.set("k2", &SecretValue::new("v")).is_err(), "{mode:o}");
        }
        std::fs::set_permissions(folder, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(
            store.get("k").unwrap().unwrap().expose(),
            "v",
            "readable by others is fine"
        );
    }
}

//! Reading a key file: the one place signing touches the file system.

use super::{HostKey, KeyError};
use std::path::Path;

impl HostKey {
    /// A key from a file holding its seed in hex; the file must be readable by its owner only.
    pub fn load(path: &Path) -> Result<HostKey, KeyError> {
        let shown = path.display().to_string();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let meta = std::fs::metadata(path).map_err(|source| KeyError::Read {
                path: shown.clone(),
                source,
            })?;
            if meta.permissions().mode() & 0o077 != 0 {
                return Err(KeyError::Permissions { path: shown });
            }
        }
        let text = std::fs::read_to_string(path).map_err(|source| KeyError::Read {
            path: shown,
            source,
        })?;
        HostKey::from_seed_hex(&text)
    }
}

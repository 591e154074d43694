//! The journal is private: its folder 0700, its files 0600. What makes a folder so, and what
//! finds (and says how to fix) a journal that group or others can read.

use super::{JournalError, log};
use std::path::{Path, PathBuf};

/// Make the file `path` empty and mode 0600 where it does not exist (SQLite then gives its WAL
/// and shared-memory files the same mode); an existing file is left as it is.
pub fn make_private_file(path: &Path) -> std::io::Result<()> {
    if path.exists() {
        return Ok(());
    }
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map(drop)
}

/// Make `dir` (and any folder above it that is missing) mode 0700, where it does not exist.
pub(crate) fn private_dir(dir: &Path) -> Result<(), JournalError> {
    if dir.as_os_str().is_empty() || dir.is_dir() {
        return Ok(());
    }
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir).map_err(|e| JournalError::Folder {
        path: dir.display().to_string(),
        message: e.to_string(),
    })
}

/// The journal's folder and files that group or others may read or write, with their modes.
pub(super) fn exposed(path: &Path) -> Vec<(PathBuf, u32)> {
    use std::os::unix::fs::PermissionsExt;
    let mut places: Vec<PathBuf> = path.parent().map(Path::to_path_buf).into_iter().collect();
    places.push(path.to_path_buf());
    for suffix in ["-wal", "-shm"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        places.push(PathBuf::from(name));
    }
    places.extend(log::legacy_paths(path));
    let chains = log::chains_dir(path);
    if let Ok(dir) = std::fs::read_dir(&chains) {
        places.extend(dir.filter_map(|e| e.ok().map(|e| e.path())));
    }
    places.push(chains);
    places
        .into_iter()
        .filter(|p| !p.as_os_str().is_empty())
        .filter_map(|p| {
            let mode = std::fs::metadata(&p).ok()?.permissions().mode() & 0o777;
            (mode & 0o077 != 0).then_some((p, mode))
        })
        .collect()
}

/// `p` as a shell word.
fn shell_word(p: &Path) -> String {
    let s = p.display().to_string();
    if s.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"/._-+,:@".contains(&b))
    {
        s
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The `chmod` commands that make `exposed` private again.
pub(super) fn chmod_fix(exposed: &[(PathBuf, u32)]) -> String {
    let (dirs, files): (Vec<&PathBuf>, Vec<&PathBuf>) =
        exposed.iter().map(|(p, _)| p).partition(|p| p.is_dir());
    let mut fix = Vec::new();
    for (mode, list) in [("700", dirs), ("600", files)] {
        if !list.is_empty() {
            let words: Vec<String> = list.iter().map(|p| shell_word(p)).collect();
            fix.push(format!("chmod {mode} {}", words.join(" ")));
        }
    }
    fix.join(" && ")
}

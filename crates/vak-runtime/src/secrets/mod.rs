//! Host-held secrets: values a tool may have injected into its `http` requests at the broker,
//! and never reads.
//!
//! The guest only ever names an alias; the value stays in the host. Where the value comes from
//! is a [`SecretSource`]: the owner-only secrets file `vak secret set` writes ([`FileSecrets`],
//! in `file`), environment variables named in the policy ([`EnvSecrets`]), or the embedder's
//! own. Every value a call could use is looked for, in the forms a text carries it, by its
//! [`Scrubber`] (in `scrubber`, with the encoded forms in `forms` and the decoded views of a
//! text in `views`), and redacted wherever it would cross the sandbox's boundary.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

mod file;
mod forms;
mod scrubber;
mod views;

pub use file::FileSecrets;
pub use forms::encodings;
pub use scrubber::{REDACTED, Scrubbed, Scrubber};

/// A secret's value. Its `Debug` and `Display` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretValue(String);

impl SecretValue {
    pub fn new(value: impl Into<String>) -> SecretValue {
        SecretValue(value.into())
    }

    /// The value, for the broker that injects it and the scrubber that looks for it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SecretValue(<{} bytes, redacted>)", self.0.len())
    }
}

/// Where secret values come from.
pub trait SecretSource: Send + Sync {
    /// The value stored under `name`, if any.
    fn get(&self, name: &str) -> Result<Option<SecretValue>, SecretError>;
}

/// Why a secret could not be stored or read.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error(
        "secret name {0:?} must be 1-64 characters of A-Z, a-z, 0-9, '-' and '_', starting with a letter"
    )]
    BadName(String),
    #[error("the secret value is empty; nothing was stored")]
    Empty,
    #[error("no secret is named {0:?}")]
    NotFound(String),
    #[error(
        "the secrets file {path} can be read or written by others (mode {mode:o}); refused. Fix it with: chmod 600 {path}"
    )]
    Exposed { path: PathBuf, mode: u32 },
    #[error(
        "the secrets file {path} is owned by uid {owner}, not by this user (uid {uid}); refused"
    )]
    NotOwner { path: PathBuf, owner: u32, uid: u32 },
    #[error(
        "the folder {folder} of the secrets file can be written by others (mode {mode:o}): they could put a file of their own in its place; refused. Fix it with: chmod go-w {folder}"
    )]
    FolderExposed { folder: PathBuf, mode: u32 },
    #[error(
        "the folder {folder} of the secrets file is owned by uid {owner}, neither this user (uid {uid}) nor root: its owner could put a file of their own in its place; refused"
    )]
    FolderNotOwner {
        folder: PathBuf,
        owner: u32,
        uid: u32,
    },
    #[error("the secrets file {path} is not valid: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    #[error("cannot use the secrets file {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("no place for the secrets file: set VAK_SECRETS_FILE, XDG_CONFIG_HOME or HOME")]
    NoHome,
}

/// Secret names are identifiers: what a policy and a guest write, never a path.
pub fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.as_bytes()[0].is_ascii_alphabetic()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Secrets read from environment variables: `name` → the variable the policy names for it.
#[derive(Debug, Clone, Default)]
pub struct EnvSecrets {
    variables: BTreeMap<String, String>,
}

impl EnvSecrets {
    pub fn new(variables: BTreeMap<String, String>) -> EnvSecrets {
        EnvSecrets { variables }
    }
}

impl SecretSource for EnvSecrets {
    fn get(&self, name: &str) -> Result<Option<SecretValue>, SecretError> {
        Ok(self
            .variables
            .get(name)
            .and_then(std::env::var_os)
            .and_then(|v| v.into_string().ok())
            .filter(|v| !v.is_empty())
            .map(SecretValue))
    }
}

/// Read a secret value from `input` (standard input for `vak secret set`): all of it, less one
/// trailing newline (what `echo` and a terminal add), so a value is exactly what was typed.
pub fn read_value(mut input: impl std::io::Read) -> Result<SecretValue, SecretError> {
    let mut text = String::new();
    input
        .read_to_string(&mut text)
        .map_err(|source| SecretError::Io {
            path: PathBuf::from("<stdin>"),
            source,
        })?;
    if text.ends_with('\n') {
        text.pop();
        if text.ends_with('\r') {
            text.pop();
        }
    }
    if text.is_empty() {
        return Err(SecretError::Empty);
    }
    Ok(SecretValue(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_never_show_in_debug() {
        let v = SecretValue::new("hunter2");
        assert!(!format!("{v:?}").contains("hunter2"));
    }

    #[test]
    fn a_value_from_stdin_loses_one_trailing_newline_only() {
        assert_eq!(read_value(&b"abc\n"[..]).unwrap().expose(), "abc");
        assert_eq!(read_value(&b"abc\r\n"[..]).unwrap().expose(), "abc");
        assert_eq!(read_value(&b"a b\n\n"[..]).unwrap().expose(), "a b\n");
        assert!(matches!(read_value(&b"\n"[..]), Err(SecretError::Empty)));
    }

    #[test]
    fn env_secrets_read_only_the_variables_the_policy_names() {
        // HOME is set wherever these tests run; no variable is set here (set_var is unsafe
        // while other test threads may read the environment).
        let home = std::env::var("HOME").expect("HOME");
        let env = EnvSecrets::new(BTreeMap::from([("api".to_string(), "HOME".to_string())]));
        assert_eq!(env.get("api").unwrap().unwrap().expose(), home);
        assert!(
            env.get("HOME").unwrap().is_none(),
            "not by the variable's own name"
        );
    }
}

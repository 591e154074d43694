//! Host-held secrets: values a tool may have injected into its `http` requests at the broker,
//! and never reads.
//!
//! The guest only ever names an alias; the value stays in the host. Where the value comes from
//! is a [`SecretSource`]: the owner-only secrets file `vak secret set` writes ([`FileSecrets`]),
//! environment variables named in the policy ([`EnvSecrets`]), or the embedder's own.
//!
//! The file is refused unless only its owner (this user) can read it: a secret readable by
//! others is already leaked, and vak will not pretend otherwise.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

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
        // SAFETY: `geteuid` has no preconditions, touches no memory and cannot fail.
        let uid = unsafe { libc::geteuid() };
        if meta.uid() != uid {
            return Err(SecretError::NotOwner {
                path: self.path.clone(),
                owner: meta.uid(),
                uid,
            });
        }
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

/// The value of `credential`'s secret from `source` (or the environment), or why there is
/// none.
pub fn resolve(
    source: Option<&dyn SecretSource>,
    credential: &crate::policy::Credential,
) -> Result<SecretValue, String> {
    let missing = |what: String| {
        format!(
            "the credential {:?} is bound to {what}, which this host does not hold",
            credential.alias
        )
    };
    match &credential.secret {
        crate::policy::SecretRef::Env(var) => std::env::var(var)
            .ok()
            .filter(|v| !v.is_empty())
            .map(SecretValue)
            .ok_or_else(|| missing(format!("the environment variable {var}"))),
        crate::policy::SecretRef::Stored(name) => match source.map(|s| s.get(name)) {
            Some(Ok(Some(v))) => Ok(v),
            Some(Err(e)) => Err(format!("the credential {:?}: {e}", credential.alias)),
            _ => Err(missing(format!("the secret {name:?}"))),
        },
    }
}

/// The scrubber for a call under `grant`: every credential value it could use.
pub fn scrubber_for(
    source: Option<&dyn SecretSource>,
    grant: &crate::policy::ToolGrant,
) -> Scrubber {
    let Some(http) = grant.http() else {
        return Scrubber::none();
    };
    if http.credentials.is_empty() {
        return Scrubber::none();
    }
    let values: Vec<SecretValue> = http
        .credentials
        .values()
        .filter_map(|c| resolve(source, c).ok())
        .collect();
    Scrubber::new(&values)
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

/// What a scrubbed text had in it: how many secret occurrences were replaced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Scrubbed {
    pub replaced: usize,
}

/// Finds the secret values a call could use, and their common encodings, in text that leaves
/// the sandbox, with one multi-pattern automaton (aho-corasick, leftmost-longest), so the cost
/// is one pass over the text whatever the number of secrets.
#[derive(Debug, Clone)]
pub struct Scrubber {
    matcher: Option<aho_corasick::AhoCorasick>,
}

/// What a secret is replaced with.
pub const REDACTED: &str = "[redacted]";

/// Secrets shorter than this are not scrubbed: a 1-3 byte "secret" would redact ordinary text
/// everywhere and protects nothing.
const MIN_SCRUB_LEN: usize = 4;

fn percent_encode(value: &str, space_plus: bool) -> String {
    let mut out = String::with_capacity(value.len() * 3);
    for b in value.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(b as char)
            }
            b' ' if space_plus => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// A value and the forms it commonly takes on the wire: base64 (standard and URL-safe, padded
/// or not), percent- and form-encoding (upper- and lowercase hex digits), hex (both cases).
pub fn encodings(value: &str) -> Vec<String> {
    use base64::Engine as _;
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    let bytes = value.as_bytes();
    let percent = percent_encode(value, false);
    let form = percent_encode(value, true);
    let mut all = vec![
        value.to_string(),
        STANDARD.encode(bytes),
        STANDARD_NO_PAD.encode(bytes),
        URL_SAFE.encode(bytes),
        URL_SAFE_NO_PAD.encode(bytes),
        percent.to_ascii_lowercase_hex(),
        form.to_ascii_lowercase_hex(),
        percent,
        form,
        hex::encode(bytes),
        hex::encode_upper(bytes),
    ];
    all.sort();
    all.dedup();
    all
}

/// Lowercase the hex digits of `%XX` escapes only.
trait LowerHex {
    fn to_ascii_lowercase_hex(&self) -> String;
}

impl LowerHex for String {
    fn to_ascii_lowercase_hex(&self) -> String {
        let mut out = String::with_capacity(self.len());
        let mut rest = self.as_str();
        while let Some(i) = rest.find('%') {
            out.push_str(&rest[..i]);
            let esc = rest.get(i..i + 3).unwrap_or(&rest[i..]);
            out.push_str(&esc.to_ascii_lowercase());
            rest = &rest[i + esc.len()..];
        }
        out.push_str(rest);
        out
    }
}

impl Scrubber {
    /// A scrubber for these values (and their encodings).
    pub fn new<'a>(values: impl IntoIterator<Item = &'a SecretValue>) -> Scrubber {
        let patterns: Vec<String> = values
            .into_iter()
            .filter(|v| v.expose().len() >= MIN_SCRUB_LEN)
            .flat_map(|v| encodings(v.expose()))
            .collect();
        if patterns.is_empty() {
            return Scrubber { matcher: None };
        }
        let matcher = aho_corasick::AhoCorasick::builder()
            .match_kind(aho_corasick::MatchKind::LeftmostLongest)
            .build(&patterns)
            .ok();
        Scrubber { matcher }
    }

    /// A scrubber that finds nothing (a call that can use no secret).
    pub fn none() -> Scrubber {
        Scrubber { matcher: None }
    }

    /// Whether there is anything to look for.
    pub fn active(&self) -> bool {
        self.matcher.is_some()
    }

    /// Whether `haystack` holds a secret in any of its forms.
    pub fn finds(&self, haystack: &[u8]) -> bool {
        self.matcher.as_ref().is_some_and(|m| m.is_match(haystack))
    }

    /// `text` with every secret occurrence replaced by [`REDACTED`].
    pub fn redact(&self, text: &str) -> (String, Scrubbed) {
        let Some(m) = &self.matcher else {
            return (text.to_string(), Scrubbed::default());
        };
        let mut replaced = 0;
        let mut out = String::with_capacity(text.len());
        m.replace_all_with(text, &mut out, |_, _, dst| {
            replaced += 1;
            dst.push_str(REDACTED);
            true
        });
        (out, Scrubbed { replaced })
    }

    /// `bytes` with every secret occurrence replaced by [`REDACTED`] (for bodies that need not
    /// be text).
    pub fn redact_bytes(&self, bytes: &[u8]) -> (Vec<u8>, Scrubbed) {
        let Some(m) = &self.matcher else {
            return (bytes.to_vec(), Scrubbed::default());
        };
        let mut replaced = 0;
        let mut out = Vec::with_capacity(bytes.len());
        m.replace_all_with_bytes(bytes, &mut out, |_, _, dst| {
            replaced += 1;
            dst.extend_from_slice(REDACTED.as_bytes());
            true
        });
        (out, Scrubbed { replaced })
    }

    /// Every string inside `value` redacted in place (keys too).
    pub fn redact_json(&self, value: &mut serde_json::Value) -> Scrubbed {
        use serde_json::Value;
        if self.matcher.is_none() {
            return Scrubbed::default();
        }
        let mut total = 0;
        match value {
            Value::String(s) => {
                let (clean, n) = self.redact(s);
                if n.replaced > 0 {
                    *s = clean;
                    total += n.replaced;
                }
            }
            Value::Array(items) => {
                for item in items {
                    total += self.redact_json(item).replaced;
                }
            }
            Value::Object(map) => {
                let entries: Vec<(String, Value)> = std::mem::take(map).into_iter().collect();
                for (k, mut v) in entries {
                    let (k, n) = self.redact(&k);
                    total += n.replaced + self.redact_json(&mut v).replaced;
                    map.insert(k, v);
                }
            }
            _ => {}
        }
        Scrubbed { replaced: total }
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
    }

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

    #[test]
    fn every_encoding_of_a_secret_is_found_and_redacted() {
        let secret = SecretValue::new("s3cr3t key/+");
        let scrubber = Scrubber::new([&secret]);
        let forms = encodings(secret.expose());
        for form in [
            "s3cr3t key/+",
            "czNjcjN0IGtleS8r",
            "czNjcjN0IGtleS8r",
            "s3cr3t%20key%2F%2B",
            "s3cr3t%20key%2f%2b",
            "s3cr3t+key%2F%2B",
            "733363723374206b65792f2b",
        ] {
            assert!(
                forms
                    .iter()
                    .any(|f| f.contains(form) || form.contains(f.as_str())),
                "{form} not among {forms:?}"
            );
            let text = format!("before {form} after");
            assert!(scrubber.finds(text.as_bytes()), "{form}");
            let (clean, n) = scrubber.redact(&text);
            assert!(n.replaced >= 1, "{form}");
            assert!(clean.contains(REDACTED) && !clean.contains(form), "{clean}");
        }
        let hex_upper = hex::encode_upper(secret.expose());
        assert!(scrubber.finds(hex_upper.as_bytes()));
        assert!(!scrubber.finds(b"nothing to see"));
        let mut doc = serde_json::json!({"a": ["x s3cr3t key/+ y", 1], "s3cr3t key/+": true});
        let n = scrubber.redact_json(&mut doc);
        assert_eq!(n.replaced, 2);
        assert!(!doc.to_string().contains("s3cr3t"), "{doc}");
    }

    #[test]
    fn short_values_are_not_patterns() {
        let scrubber = Scrubber::new([&SecretValue::new("abc")]);
        assert!(!scrubber.finds(b"abc"));
        assert!(!Scrubber::none().finds(b"anything"));
    }
}

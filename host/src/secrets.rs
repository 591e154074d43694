//! Host-held secrets: values a tool may have injected into its `http` requests at the broker,
//! and never reads.
//!
//! The guest only ever names an alias; the value stays in the host. Where the value comes from
//! is a [`SecretSource`]: the owner-only secrets file `vak secret set` writes ([`FileSecrets`]),
//! environment variables named in the policy ([`EnvSecrets`]), or the embedder's own.
//!
//! The file is refused unless only its owner (this user) can read it: a secret readable by
//! others is already leaked, and vak will not pretend otherwise. Its folder is refused when
//! others can write to it or another user (not root) owns it: whoever can replace the file can
//! hand vak values of their choosing, or read what `vak secret set` writes next.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

mod views;

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

/// The effective user id of this process.
#[cfg(unix)]
fn this_user() -> u32 {
    // SAFETY: `geteuid` has no preconditions, touches no memory and cannot fail.
    unsafe { libc::geteuid() }
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

/// The scrubber for a call under `grant`: every credential value it could use, labelled with
/// the aliases that bind it. Built once per call (the values are read then: a value changed
/// during the call is not injected, see `capabilities::http`).
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
    Scrubber::labelled(
        http.credentials
            .values()
            .filter_map(|c| resolve(source, c).ok().map(|v| (v, c.alias.clone()))),
    )
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

/// What is replaced with.
pub const REDACTED: &str = "[redacted]";

/// Secrets shorter than this are not scrubbed: a 1-3 byte "secret" would redact ordinary text
/// everywhere and protects nothing.
const MIN_SCRUB_LEN: usize = 4;

/// An encoded form (base64, hex) shorter than this is not looked for: a few base64 letters
/// occur in ordinary text and images by chance. The value itself still is, from
/// [`MIN_SCRUB_LEN`] bytes.
const MIN_FORM_LEN: usize = 8;

/// How many layers of escaping are undone, one kind over another (a quoted-printable form
/// percent-encoded into a URL is two).
const MAX_LAYERS: usize = 2;

/// How many leading bytes of a form the automaton holds. A match of them is followed through
/// the rest of the form byte by byte, so the automaton's size does not grow with a value's
/// length (a 2.6 MB key costs no more to build than a 64-byte one), and a text holding only
/// the first 64 bytes of a long value's form is caught too.
const FRAGMENT: usize = 64;

/// The ways a value's bytes are written that the scrubber looks for, whatever surrounds them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FormKind {
    /// The value as it is.
    Raw,
    /// Base64 (standard or URL-safe alphabet) of the value preceded by `align` (0, 1 or 2) other
    /// bytes, less the characters that depend on those bytes or on what follows: the part of
    /// the encoding any text holding the value at that offset of a 3-byte group has in common,
    /// padded or not.
    Base64 { url: bool, align: u8 },
    /// Hexadecimal digits, matched in either case (mixed too).
    Hex,
}

impl FormKind {
    const ALL: [FormKind; 8] = [
        FormKind::Raw,
        FormKind::Base64 {
            url: false,
            align: 0,
        },
        FormKind::Base64 {
            url: false,
            align: 1,
        },
        FormKind::Base64 {
            url: false,
            align: 2,
        },
        FormKind::Base64 {
            url: true,
            align: 0,
        },
        FormKind::Base64 {
            url: true,
            align: 1,
        },
        FormKind::Base64 {
            url: true,
            align: 2,
        },
        FormKind::Hex,
    ];

    /// Whether letters match in either case.
    fn folded(self) -> bool {
        self == FormKind::Hex
    }

    /// The length of the form of an `n`-byte value.
    fn len(self, n: usize) -> usize {
        match self {
            FormKind::Raw => n,
            FormKind::Hex => 2 * n,
            FormKind::Base64 { align, .. } => {
                let k = usize::from(align);
                (8 * (k + n) / 6).saturating_sub((8 * k).div_ceil(6))
            }
        }
    }

    /// The form of `value`.
    fn render(self, value: &[u8]) -> Vec<u8> {
        use base64::Engine as _;
        use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
        match self {
            FormKind::Raw => value.to_vec(),
            FormKind::Hex => hex::encode(value).into_bytes(),
            FormKind::Base64 { url, align } => {
                let k = usize::from(align);
                let mut shifted = vec![0u8; k];
                shifted.extend_from_slice(value);
                let encoded = if url {
                    URL_SAFE_NO_PAD.encode(&shifted)
                } else {
                    STANDARD_NO_PAD.encode(&shifted)
                };
                let lead = (8 * k).div_ceil(6);
                let end = (8 * (k + value.len()) / 6).max(lead);
                encoded.as_bytes()[lead..end].to_vec()
            }
        }
    }
}

/// One form of one value, rendered whole only when a text holds its first bytes.
#[derive(Clone)]
struct Form {
    value: usize,
    kind: FormKind,
    whole: std::sync::OnceLock<Vec<u8>>,
}

/// A value the scrubber knows, and what binds it (the credential aliases of a grant).
#[derive(Clone)]
struct Known {
    value: SecretValue,
    labels: Vec<String>,
}

/// One automaton over the leading bytes of some forms, and which form each pattern is.
#[derive(Clone)]
struct Automaton {
    matcher: aho_corasick::AhoCorasick,
    forms: Vec<usize>,
}

/// Where a value was found in a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Hit {
    start: usize,
    end: usize,
    value: usize,
}

/// Finds the secret values a call could use in text and bytes that cross the sandbox's
/// boundary, in the forms a text commonly carries them.
///
/// Recognised, at any offset and surrounded by anything:
/// - the value itself;
/// - its base64, standard and URL-safe alphabets, at each of the three alignments a value can
///   have inside a longer encoded text (`base64("Bearer " + V)`, `base64("user:" + V)`), padded
///   or not;
/// - its hexadecimal digits in any case (mixed too);
/// - each of those after one layer of percent encoding (either case of hex digit, any subset of
///   bytes escaped), form encoding (`+` for space), JSON string escapes (`\u0073`, `\/`,
///   surrogate pairs), quoted-printable (`=73`, soft line breaks), or line breaks inserted
///   (base64 wrapped at 64 or 76 columns).
///
/// A match is redacted whole, as far as the text goes on agreeing with the form, with the
/// escapes it was decoded from. The cost is linear in the text: two automata (one exact, one
/// case-insensitive for hex) over the first [`FRAGMENT`] bytes of each form, run over the text
/// and over each view of it that the text's characters call for; the automata are built once
/// per call, and their size does not depend on a value's length.
///
/// Not recognised: a transform the guest computes itself (reversed, XORed, encrypted,
/// compressed by the guest, split across requests, encoded twice), and a part of a value that
/// does not begin where the value begins (its last half alone).
#[derive(Clone)]
pub struct Scrubber {
    known: Vec<Known>,
    forms: Vec<Form>,
    exact: Option<Automaton>,
    folded: Option<Automaton>,
    /// Some value holds a space: the form-encoding view is worth building.
    space: bool,
}

impl std::fmt::Debug for Scrubber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Scrubber({} values, {} forms, redacted)",
            self.known.len(),
            self.forms.len()
        )
    }
}

/// A value and the forms it commonly takes on the wire, whole: base64 (standard and URL-safe,
/// padded or not), percent- and form-encoding (upper- and lowercase hex digits), hex (both
/// cases). For tests and docs; the scrubber recognises more (see [`Scrubber`]).
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
        lower_hex_escapes(&percent),
        lower_hex_escapes(&form),
        percent,
        form,
        hex::encode(bytes),
        hex::encode_upper(bytes),
    ];
    all.sort();
    all.dedup();
    all
}

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

/// Lowercase the hex digits of `%XX` escapes only.
fn lower_hex_escapes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('%') {
        out.push_str(&rest[..i]);
        let esc = rest.get(i..i + 3).unwrap_or(&rest[i..]);
        out.push_str(&esc.to_ascii_lowercase());
        rest = &rest[i + esc.len()..];
    }
    out.push_str(rest);
    out
}

fn is_base64_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'-' | b'_')
}

impl Scrubber {
    /// A scrubber for these values.
    pub fn new<'a>(values: impl IntoIterator<Item = &'a SecretValue>) -> Scrubber {
        Scrubber::labelled(values.into_iter().map(|v| (v.clone(), String::new())))
    }

    /// A scrubber for these values, each with a label (a credential's alias) that
    /// [`Scrubber::labels_in`] answers with; a value given twice keeps both labels.
    pub fn labelled(values: impl IntoIterator<Item = (SecretValue, String)>) -> Scrubber {
        let mut known: Vec<Known> = Vec::new();
        for (value, label) in values {
            if value.expose().len() < MIN_SCRUB_LEN {
                continue;
            }
            match known.iter_mut().find(|k| k.value == value) {
                Some(k) => {
                    if !label.is_empty() && !k.labels.contains(&label) {
                        k.labels.push(label);
                    }
                }
                None => known.push(Known {
                    value,
                    labels: if label.is_empty() {
                        vec![]
                    } else {
                        vec![label]
                    },
                }),
            }
        }
        let mut forms = Vec::new();
        let mut exact: Vec<Vec<u8>> = Vec::new();
        let mut exact_forms = Vec::new();
        let mut folded: Vec<Vec<u8>> = Vec::new();
        let mut folded_forms = Vec::new();
        for (i, k) in known.iter().enumerate() {
            let bytes = k.value.expose().as_bytes();
            // The leading bytes of a form are the form of the value's leading bytes (a few more
            // than FRAGMENT: base64 takes 4 characters for 3 bytes, hex 2 for 1).
            let head = &bytes[..bytes.len().min(FRAGMENT)];
            for kind in FormKind::ALL {
                if kind != FormKind::Raw && kind.len(bytes.len()) < MIN_FORM_LEN {
                    continue;
                }
                let mut fragment = kind.render(head);
                fragment.truncate(FRAGMENT);
                let (patterns, ids) = if kind.folded() {
                    (&mut folded, &mut folded_forms)
                } else {
                    (&mut exact, &mut exact_forms)
                };
                // Two forms with the same leading bytes (a URL-safe encoding without `+` or
                // `/` is the standard one) are one pattern.
                if patterns.contains(&fragment) {
                    continue;
                }
                patterns.push(fragment);
                ids.push(forms.len());
                forms.push(Form {
                    value: i,
                    kind,
                    whole: std::sync::OnceLock::new(),
                });
            }
        }
        let build = |patterns: Vec<Vec<u8>>, ids: Vec<usize>, fold: bool| {
            if patterns.is_empty() {
                return None;
            }
            aho_corasick::AhoCorasick::builder()
                .match_kind(aho_corasick::MatchKind::LeftmostLongest)
                .ascii_case_insensitive(fold)
                .build(&patterns)
                .ok()
                .map(|matcher| Automaton {
                    matcher,
                    forms: ids,
                })
        };
        let space = known.iter().any(|k| k.value.expose().contains(' '));
        Scrubber {
            exact: build(exact, exact_forms, false),
            folded: build(folded, folded_forms, true),
            known,
            forms,
            space,
        }
    }

    /// A scrubber that finds nothing (a call that can use no secret).
    pub fn none() -> Scrubber {
        Scrubber {
            known: Vec::new(),
            forms: Vec::new(),
            exact: None,
            folded: None,
            space: false,
        }
    }

    /// Whether there is anything to look for.
    pub fn active(&self) -> bool {
        !self.known.is_empty()
    }

    /// Whether `value` is one of the values this scrubber looks for.
    pub fn knows(&self, value: &SecretValue) -> bool {
        self.known.iter().any(|k| k.value == *value)
    }

    /// Whether a text holding `value` would be redacted by this scrubber: it knows the value, or
    /// the value is too short to be looked for at all.
    pub fn covers(&self, value: &SecretValue) -> bool {
        value.expose().len() < MIN_SCRUB_LEN || self.knows(value)
    }

    /// Every place a value is found in `text`: in the text itself and in each decoded view of
    /// it, mapped back to the text.
    fn hits(&self, text: &[u8]) -> Vec<Hit> {
        let mut hits = Vec::new();
        if !self.active() {
            return hits;
        }
        self.scan_layers(text, MAX_LAYERS, None, &mut |start, end, value| {
            hits.push(Hit { start, end, value })
        });
        hits
    }

    /// Scan `bytes`, then each view of it that decodes something, down to `layers` layers of
    /// escaping (a form percent-encoded into a URL is two), each kind once on a path; `found`
    /// gets spans of `bytes`.
    fn scan_layers(
        &self,
        bytes: &[u8],
        layers: usize,
        above: Option<views::Kind>,
        found: &mut dyn FnMut(usize, usize, usize),
    ) {
        self.scan(bytes, found);
        if layers == 0 {
            return;
        }
        for kind in views::KINDS {
            if Some(kind) == above || (kind == views::Kind::Form && !self.space) {
                continue;
            }
            if let Some(view) = views::view(kind, bytes) {
                self.scan_layers(&view.bytes, layers - 1, Some(kind), &mut |s, e, value| {
                    let (start, end) = view.source(s, e);
                    found(start, end, value);
                });
            }
        }
    }

    /// Run both automata over `bytes`, following each match through its whole form.
    fn scan(&self, bytes: &[u8], found: &mut dyn FnMut(usize, usize, usize)) {
        for automaton in [&self.exact, &self.folded].into_iter().flatten() {
            let mut at = 0;
            while at < bytes.len() {
                let input = aho_corasick::Input::new(bytes).span(at..bytes.len());
                let Some(m) = automaton.matcher.find(input) else {
                    break;
                };
                let Some(form) = automaton
                    .forms
                    .get(m.pattern().as_usize())
                    .and_then(|&f| self.forms.get(f))
                else {
                    break;
                };
                let whole = form.whole.get_or_init(|| {
                    form.kind
                        .render(self.known[form.value].value.expose().as_bytes())
                });
                let rest = &bytes[m.start()..];
                let agree = rest
                    .iter()
                    .zip(whole)
                    .take_while(|(a, b)| {
                        if form.kind.folded() {
                            a.eq_ignore_ascii_case(b)
                        } else {
                            a == b
                        }
                    })
                    .count()
                    .max(m.len());
                let (mut start, mut end) = (m.start(), m.start() + agree);
                if let FormKind::Base64 { align, .. } = form.kind {
                    // The characters beside the core carry a few bits of the value too: the
                    // one before it (at an offset) and the one after it, with any padding.
                    if align > 0 && start > 0 && is_base64_char(bytes[start - 1]) {
                        start -= 1;
                    }
                    if end < bytes.len() && is_base64_char(bytes[end]) {
                        end += 1;
                    }
                    while end < bytes.len() && bytes[end] == b'=' && end - m.start() < agree + 3 {
                        end += 1;
                    }
                }
                found(start, end, form.value);
                at = end.max(m.start() + 1);
            }
        }
    }

    /// Whether `haystack` holds a secret in any of its forms.
    pub fn finds(&self, haystack: &[u8]) -> bool {
        !self.hits(haystack).is_empty()
    }

    /// The labels of every value found in `haystack` (a value given without a label is
    /// reported as the empty label), each once.
    pub fn labels_in(&self, haystack: &[u8]) -> Vec<&str> {
        let mut found: Vec<usize> = self.hits(haystack).iter().map(|h| h.value).collect();
        found.sort_unstable();
        found.dedup();
        let mut labels: Vec<&str> = Vec::new();
        for i in found {
            let k = &self.known[i];
            if k.labels.is_empty() {
                labels.push("");
            }
            labels.extend(k.labels.iter().map(String::as_str));
        }
        labels.sort_unstable();
        labels.dedup();
        labels
    }

    /// `bytes` with every secret occurrence replaced by [`REDACTED`] (for bodies that need not
    /// be text). Overlapping and touching occurrences are one replacement.
    pub fn redact_bytes(&self, bytes: &[u8]) -> (Vec<u8>, Scrubbed) {
        let mut hits = self.hits(bytes);
        if hits.is_empty() {
            return (bytes.to_vec(), Scrubbed::default());
        }
        hits.sort_unstable_by_key(|h| (h.start, h.end));
        let mut out = Vec::with_capacity(bytes.len());
        let mut at = 0;
        let mut replaced = 0;
        let mut i = 0;
        while i < hits.len() {
            let start = hits[i].start.max(at);
            let mut end = hits[i].end;
            i += 1;
            while i < hits.len() && hits[i].start <= end {
                end = end.max(hits[i].end);
                i += 1;
            }
            if end <= start {
                continue;
            }
            out.extend_from_slice(&bytes[at..start]);
            out.extend_from_slice(REDACTED.as_bytes());
            replaced += 1;
            at = end.min(bytes.len());
        }
        out.extend_from_slice(&bytes[at..]);
        (out, Scrubbed { replaced })
    }

    /// `text` with every secret occurrence replaced by [`REDACTED`].
    pub fn redact(&self, text: &str) -> (String, Scrubbed) {
        if !self.active() {
            return (text.to_string(), Scrubbed::default());
        }
        let (bytes, n) = self.redact_bytes(text.as_bytes());
        if n.replaced == 0 {
            return (text.to_string(), n);
        }
        // Replacements cover whole characters (a value is whole UTF-8, escapes are ASCII);
        // should one not, the text stays text.
        let text = String::from_utf8(bytes)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
        (text, n)
    }

    /// Every string inside `value` redacted in place (keys too).
    pub fn redact_json(&self, value: &mut serde_json::Value) -> Scrubbed {
        let mut total = 0;
        self.redact_json_at(value, &mut |_, n| total += n);
        Scrubbed { replaced: total }
    }

    /// [`Scrubber::redact_json`], telling `noted` where (the object keys from the root, array
    /// indices left out) and how many.
    pub fn redact_json_at(
        &self,
        value: &mut serde_json::Value,
        noted: &mut dyn FnMut(&[&str], usize),
    ) {
        if !self.active() {
            return;
        }
        let mut path = Vec::new();
        self.walk(value, &mut path, noted);
    }

    fn walk(
        &self,
        value: &mut serde_json::Value,
        path: &mut Vec<String>,
        noted: &mut dyn FnMut(&[&str], usize),
    ) {
        use serde_json::Value;
        let note = |path: &[String], n: usize, noted: &mut dyn FnMut(&[&str], usize)| {
            if n > 0 {
                let p: Vec<&str> = path.iter().map(String::as_str).collect();
                noted(&p, n);
            }
        };
        match value {
            Value::String(s) => {
                let (clean, n) = self.redact(s);
                if n.replaced > 0 {
                    *s = clean;
                    note(path, n.replaced, noted);
                }
            }
            Value::Array(items) => {
                for item in items {
                    self.walk(item, path, noted);
                }
            }
            Value::Object(map) => {
                let entries: Vec<(String, Value)> = std::mem::take(map).into_iter().collect();
                for (k, mut v) in entries {
                    let (k, n) = self.redact(&k);
                    path.push(k);
                    note(path, n.replaced, noted);
                    self.walk(&mut v, path, noted);
                    let k = path.pop().unwrap_or_default();
                    map.insert(k, v);
                }
            }
            _ => {}
        }
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
            "s3cr3t%20key%2F%2B",
            "s3cr3t%20key%2f%2b",
            "s3cr3t+key%2F%2B",
            "733363723374206b65792f2b",
        ] {
            assert!(
                forms.iter().any(|f| f == form),
                "{form} not among {forms:?}"
            );
        }
        for form in &forms {
            let text = format!("before {form} after");
            assert!(scrubber.finds(text.as_bytes()), "{form}");
            let (clean, n) = scrubber.redact(&text);
            assert_eq!(n.replaced, 1, "{form}");
            assert_eq!(clean, "before [redacted] after", "{form}");
        }
        assert!(!scrubber.finds(b"nothing to see"));
        let mut doc = serde_json::json!({"a": ["x s3cr3t key/+ y", 1], "s3cr3t key/+": true});
        let n = scrubber.redact_json(&mut doc);
        assert_eq!(n.replaced, 2);
        assert!(!doc.to_string().contains("s3cr3t"), "{doc}");
    }

    /// A value that needs every escape: a space, `/`, `?`, `"`, a non-ASCII letter; its base64
    /// holds `+` and `/`.
    const HARD: &str = "k3y 0f/th3 h0st??\"é~";

    /// Whether `text` still holds the value in any form the scrubber knows, or any piece of the
    /// value's plain text longer than 4 bytes.
    fn clean_of(scrubber: &Scrubber, value: &str, text: &str) -> bool {
        !scrubber.finds(text.as_bytes())
            && !(0..value.len().saturating_sub(5))
                .filter_map(|i| value.get(i..i + 6))
                .any(|piece| text.contains(piece))
    }

    #[test]
    fn base64_is_found_at_every_alignment_in_both_alphabets_padded_or_not() {
        use base64::Engine as _;
        use base64::engine::general_purpose::{
            STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD,
        };
        let v = SecretValue::new(HARD);
        let scrubber = Scrubber::new([&v]);
        for prefix in ["", "x", "xy", "Bearer ", "user:", "\u{1}\u{2}\u{3}"] {
            for suffix in ["", "z", "zz", "\n"] {
                let plain = format!("{prefix}{HARD}{suffix}");
                for engine in [&STANDARD, &STANDARD_NO_PAD, &URL_SAFE, &URL_SAFE_NO_PAD] {
                    let encoded = engine.encode(plain.as_bytes());
                    let text = format!("Authorization: Basic {encoded}; done");
                    assert!(
                        scrubber.finds(text.as_bytes()),
                        "{prefix:?}+V+{suffix:?}: {text}"
                    );
                    let (clean, n) = scrubber.redact(&text);
                    assert_eq!(n.replaced, 1, "{text} -> {clean}");
                    assert!(clean.starts_with("Authorization: Basic "), "{clean}");
                    assert!(clean.ends_with("; done"), "{clean}");
                    assert!(clean_of(&scrubber, HARD, &clean), "{clean}");
                    // What is left beside the redaction is the encoding of the prefix and
                    // suffix only: at most one group of 4 characters each side, and padding.
                    let left = clean.len() - "Authorization: Basic [redacted]; done".len();
                    assert!(left <= 4 + 4 + 2 + prefix.len() * 2, "{clean}");
                }
            }
        }
    }

    #[test]
    fn hex_percent_qp_and_json_forms_are_found_in_any_case() {
        let v = SecretValue::new(HARD);
        let scrubber = Scrubber::new([&v]);
        let bytes = HARD.as_bytes();
        let hex_lower = hex::encode(bytes);
        let hex_mixed: String = hex::encode_upper(bytes)
            .chars()
            .enumerate()
            .map(|(i, c)| {
                if i % 3 == 0 {
                    c.to_ascii_lowercase()
                } else {
                    c
                }
            })
            .collect();
        let every_byte_escaped: String = bytes.iter().map(|b| format!("%{b:02x}")).collect();
        let mixed_percent: String = bytes
            .iter()
            .enumerate()
            .map(|(i, b)| match i % 3 {
                0 => format!("%{b:02X}"),
                1 => format!("%{b:02x}"),
                _ if b.is_ascii_alphanumeric() => (*b as char).to_string(),
                _ => format!("%{b:02X}"),
            })
            .collect();
        let form = super::percent_encode(HARD, true);
        let qp: String = bytes.iter().map(|b| format!("={b:02X}")).collect();
        let qp_soft = format!("{}=\r\n{}", &qp[..21], &qp[21..]);
        let json_u: String = HARD.encode_utf16().map(|u| format!("\\u{u:04x}")).collect();
        let json_plain = serde_json::to_string(HARD).unwrap();
        let b64_wrapped = {
            use base64::Engine as _;
            let e = base64::engine::general_purpose::STANDARD.encode(format!("xy{HARD}{HARD}"));
            e.as_bytes()
                .chunks(8)
                .map(|c| std::str::from_utf8(c).unwrap())
                .collect::<Vec<_>>()
                .join("\r\n")
        };
        // Two layers: quoted-printable carried percent-encoded in a URL.
        let qp_in_url: String = qp_soft
            .bytes()
            .map(|b| match b {
                b'=' | b'\r' | b'\n' => format!("%{b:02X}"),
                _ => (b as char).to_string(),
            })
            .collect();
        for form in [
            qp_in_url,
            hex_lower,
            hex_mixed,
            every_byte_escaped,
            mixed_percent,
            form,
            qp,
            qp_soft,
            json_u,
            json_plain,
            b64_wrapped,
        ] {
            let text = format!("<< {form} >>");
            assert!(scrubber.finds(text.as_bytes()), "{form}");
            let (clean, n) = scrubber.redact(&text);
            assert!(n.replaced >= 1, "{form}");
            assert!(
                clean.starts_with("<< ") && clean.ends_with(" >>"),
                "{clean}"
            );
            assert!(clean_of(&scrubber, HARD, &clean), "{form} -> {clean}");
        }
    }

    #[test]
    fn a_long_value_is_found_whole_and_by_its_first_bytes_and_labels_name_it() {
        let long: String = (0..5000)
            .map(|i| char::from(b'a' + (i * 7 % 26) as u8))
            .collect();
        let v = SecretValue::new(long.clone());
        let other = SecretValue::new("another-key-value");
        let scrubber = Scrubber::labelled([
            (v.clone(), "big".to_string()),
            (other.clone(), "small".to_string()),
            (other.clone(), "alias".to_string()),
        ]);
        let text = format!("[{long}]");
        let (clean, n) = scrubber.redact(&text);
        assert_eq!((clean.as_str(), n.replaced), ("[[redacted]]", 1));
        // Its first 64 bytes alone are a leak too, and redacted as far as they agree.
        let head = format!("({}!)", &long[..100]);
        assert_eq!(scrubber.redact(&head).0, "([redacted]!)");
        assert_eq!(scrubber.labels_in(head.as_bytes()), ["big"]);
        assert_eq!(
            scrubber.labels_in(b"x another-key-value y"),
            ["alias", "small"]
        );
        assert!(scrubber.labels_in(b"nothing").is_empty());
        assert!(scrubber.knows(&other) && !scrubber.knows(&SecretValue::new("nope")));
    }

    #[test]
    fn short_values_are_not_patterns() {
        let scrubber = Scrubber::new([&SecretValue::new("abc")]);
        assert!(!scrubber.finds(b"abc"));
        assert!(!Scrubber::none().finds(b"anything"));
    }
}

#[cfg(test)]
mod cost {
    /// The figures the docs quote: building the scrubber for a 2.6 MB value and scanning 1 MiB.
    /// `CARGO_PROFILE_TEST_OPT_LEVEL=3 cargo test -p vak-host --lib secrets::cost -- --ignored --nocapture`
    /// (the host crate optimised as in a release; its dependencies are optimised in every profile)
    #[test]
    #[ignore = "a measurement, not a check"]
    fn scrubber_cost() {
        use super::*;
        let mut x: u64 = 0x9e3779b97f4a7c15;
        let value: String = (0..2_600_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                char::from(b'!' + (x % 94) as u8)
            })
            .collect();
        let secret = SecretValue::new(value);
        let t = std::time::Instant::now();
        let s = Scrubber::new([&secret]);
        let built = t.elapsed();
        let hay = "lorem ipsum dolor ".repeat(1 << 16);
        let t = std::time::Instant::now();
        let found = s.finds(hay.as_bytes());
        let scanned = t.elapsed();
        // The value inside a text: followed through its 2.6 MB, and the text's many `%`, `+`,
        // `\`, `=` make the scrubber build and scan every view of it (the worst case).
        let mut holding = String::from("x");
        holding.push_str(secret.expose());
        let t = std::time::Instant::now();
        let (_, n) = s.redact(&holding);
        let whole = t.elapsed();
        eprintln!(
            "build {built:?}; scan of {} bytes {scanned:?} (found {found}); a text holding the value redacted in {whole:?} ({} replaced)",
            hay.len(),
            n.replaced
        );
    }
}

//! `vak policy import`: a Wassette `policy.yaml` (the format of microsoft/policy-mcp) turned into
//! vak policy TOML. A Wassette policy grants one component; in vak each exported function is a
//! tool with a table of its own, so the component's grants are repeated under every tool named.
//! Nothing is dropped in silence: what has no vak equivalent is returned in
//! [`Translation::untranslated`] and written as `# not translated:` comments at the top.
//!
//! | Wassette                                   | vak                                                |
//! |--------------------------------------------|----------------------------------------------------|
//! | `network.allow[].host` URL or bare host    | `capabilities.http.origins` (a bare host as https) |
//! | `storage.allow[]` `fs:///abs` + `access`   | `capabilities.workspace.roots` (read-only/-write)  |
//! | `environment.allow[].key`                  | `capabilities.environment.keys.K = { env = "K" }`  |
//! | `resources.limits.memory` (`512Mi`, `1G`)  | `caps.memory_bytes`                                |
//! | wildcards, CIDRs, deny lists, cpu, others  | not translated, each listed                        |

mod values;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use std::fmt::Write as _;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use values::{
    comment, memory_bytes, origin_of, root_name, root_path, toml_key, toml_string, unique,
};
use yaml_serde::Value;

/// The largest policy file read: a Wassette policy is a few hundred bytes; this bounds the parse.
pub(crate) const MAX_YAML_BYTES: usize = 256 << 10;
/// Characters of the file's text quoted in a message or a comment.
const QUOTE_CHARS: usize = 120;
/// vak's tool-name rule (admission's): 1-64 characters of a-z, 0-9, '-' and '_'.
const MAX_TOOL_NAME: usize = 64;

/// Why a policy file was not translated.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ImportError {
    #[error("cannot read the file: {0}")]
    Read(#[source] std::io::Error),
    #[error("the file is more than {limit} bytes; a Wassette policy is a few hundred")]
    TooLarge { limit: usize },
    #[error("the file is not UTF-8 text")]
    NotUtf8,
    #[error("not YAML: {0}")]
    Yaml(String),
    #[error("not a Wassette policy: {0}")]
    Shape(String),
    #[error("tool name {0:?} must be 1-64 characters of a-z, 0-9, '-' and '_'")]
    BadToolName(String),
    #[error("--tool {0} is given twice")]
    DuplicateTool(String),
    #[error("name the component's tools with --tool NAME (one per exported function)")]
    NoTools,
}

/// The vak policy text and what of the Wassette policy it does not carry.
#[derive(Debug)]
pub(crate) struct Translation {
    pub(crate) toml: String,
    pub(crate) untranslated: Vec<String>,
}

/// Read a policy file, at most [`MAX_YAML_BYTES`] of it.
pub(crate) fn read_policy_file(path: &Path) -> Result<String, ImportError> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .map_err(ImportError::Read)?
        .take(MAX_YAML_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(ImportError::Read)?;
    if bytes.len() > MAX_YAML_BYTES {
        return Err(ImportError::TooLarge {
            limit: MAX_YAML_BYTES,
        });
    }
    String::from_utf8(bytes).map_err(|_| ImportError::NotUtf8)
}

/// Translate the Wassette policy `yaml` into vak policy TOML with a `[tools.NAME]` table, holding
/// the same grants, for each of `tools`.
pub(crate) fn translate(yaml: &str, tools: &[String]) -> Result<Translation, ImportError> {
    check_tools(tools)?;
    if yaml.len() > MAX_YAML_BYTES {
        return Err(ImportError::TooLarge {
            limit: MAX_YAML_BYTES,
        });
    }
    let doc: Value = yaml_serde::from_str(yaml).map_err(|e| ImportError::Yaml(e.to_string()))?;
    let top = match doc {
        Value::Mapping(m) => m,
        Value::Null => return Err(shape("the file is empty")),
        other => {
            return Err(shape(format!(
                "the document is {}, not a mapping with `version` and `permissions`",
                kind(&other)
            )));
        }
    };
    let mut grants = Grants::default();
    let (mut description, mut version, mut permissions) = (None, false, false);
    for (key, value) in top {
        let key = key_text(&key, "the top level")?;
        match key.as_str() {
            "version" => {
                check_version(&value)?;
                version = true;
            }
            "description" => description = Some(section::<String>(value, "description")?),
            "permissions" => {
                grants.permissions(value)?;
                permissions = true;
            }
            _ => grants.lost(format!(
                "`{}`: not part of the policy format (1.x) vak knows",
                shown(&key)
            )),
        }
    }
    if !version || !permissions {
        return Err(shape(
            "no `version` or no `permissions`: a Wassette policy.yaml has both (version: \"1.0\")",
        ));
    }
    grants.resolve_roots();
    Ok(Translation {
        toml: grants.render(description.as_deref(), tools),
        untranslated: grants.untranslated,
    })
}

fn shape(message: impl Into<String>) -> ImportError {
    ImportError::Shape(message.into())
}

fn check_tools(tools: &[String]) -> Result<(), ImportError> {
    if tools.is_empty() {
        return Err(ImportError::NoTools);
    }
    for (i, tool) in tools.iter().enumerate() {
        let valid = (1..=MAX_TOOL_NAME).contains(&tool.len())
            && tool
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
        if !valid {
            return Err(ImportError::BadToolName(shown(tool)));
        }
        if tools[..i].contains(tool) {
            return Err(ImportError::DuplicateTool(tool.clone()));
        }
    }
    Ok(())
}

/// `version` is the policy format's: only 1.x is known.
fn check_version(value: &Value) -> Result<(), ImportError> {
    let text = match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        other => return Err(shape(format!("`version` is {}, not text", kind(other)))),
    };
    if text == "1" || text.starts_with("1.") {
        Ok(())
    } else {
        Err(shape(format!(
            "version {:?}: vak knows the policy format 1.x",
            shown(&text)
        )))
    }
}

/// One part of the document as `T`; a mismatch (a typo in a field name included) is an error
/// that names where it is.
fn section<T: DeserializeOwned>(value: Value, path: &str) -> Result<T, ImportError> {
    yaml_serde::from_value(value).map_err(|e| shape(format!("{path}: {e}")))
}

fn key_text(key: &Value, place: &str) -> Result<String, ImportError> {
    match key {
        Value::String(s) => Ok(s.clone()),
        other => Err(shape(format!(
            "a key at {place} is {}, not text",
            kind(other)
        ))),
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "text",
        Value::Sequence(_) => "a list",
        Value::Mapping(_) => "a mapping",
        Value::Tagged(_) => "a tagged value",
    }
}

/// `text` cut to [`QUOTE_CHARS`] for a message.
fn shown(text: &str) -> String {
    match text.char_indices().nth(QUOTE_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// A scalar as the file wrote it, for a message.
fn shown_value(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{:?}", shown(s)),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        other => kind(other).to_string(),
    }
}

/// An `allow`/`deny` list of one kind of permission.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListSection<T> {
    allow: Option<Vec<T>>,
    deny: Option<Vec<Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NetworkEntry {
    host: Option<String>,
    cidr: Option<String>,
    defaults: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StorageEntry {
    uri: String,
    access: Vec<Access>,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Access {
    Read,
    Write,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EnvEntry {
    key: String,
}

/// `resources`: Wassette's `limits` (Kubernetes-style figures) and policy-mcp's older figures.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Resources {
    limits: Option<Limits>,
    cpu: Option<Value>,
    memory: Option<Value>,
    io: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Limits {
    cpu: Option<Value>,
    memory: Option<Value>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    ReadOnly,
    ReadWrite,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::ReadOnly => "read-only",
            Mode::ReadWrite => "read-write",
        }
    }
}

/// A storage grant on its way to a workspace root.
struct Root {
    uri: String,
    path: PathBuf,
    mode: Mode,
}

/// What the policy grants, in vak's terms, and what it could not carry.
#[derive(Default)]
struct Grants {
    origins: Vec<String>,
    /// Some origin came from a bare host, taken as https.
    bare_hosts: bool,
    roots: Vec<Root>,
    env_keys: Vec<String>,
    memory_bytes: Option<u64>,
    untranslated: Vec<String>,
    /// Explanations for the TOML's comments (nothing lost).
    notes: Vec<String>,
}

impl Grants {
    fn lost(&mut self, what: String) {
        self.untranslated.push(what);
    }

    fn permissions(&mut self, value: Value) -> Result<(), ImportError> {
        let map = match value {
            Value::Mapping(m) => m,
            Value::Null => return Ok(()),
            other => {
                return Err(shape(format!(
                    "`permissions` is {}, not a mapping",
                    kind(&other)
                )));
            }
        };
        for (key, value) in map {
            let name = key_text(&key, "`permissions`")?;
            let path = format!("permissions.{}", shown(&name));
            match name.as_str() {
                "network" => {
                    if let Some(s) = section::<Option<ListSection<NetworkEntry>>>(value, &path)? {
                        self.network(s)?;
                    }
                }
                "storage" => {
                    if let Some(s) = section::<Option<ListSection<StorageEntry>>>(value, &path)? {
                        self.storage(s);
                    }
                }
                "environment" => {
                    if let Some(s) = section::<Option<ListSection<EnvEntry>>>(value, &path)? {
                        self.environment(s);
                    }
                }
                "resources" => {
                    if let Some(r) = section::<Option<Resources>>(value, &path)? {
                        self.resources(r);
                    }
                }
                "runtime" => self.lost(format!(
                    "{path}: container and engine settings, not a grant; vak runs each tool in a wasmtime sandbox of its own"
                )),
                _ => self.lost(format!(
                    "{path}: a kind of permission vak has no equivalent for"
                )),
            }
        }
        Ok(())
    }

    /// A non-empty deny list: vak grants only what it lists, so there is nothing to subtract from.
    fn deny(&mut self, kind: &str, deny: Option<&[Value]>) {
        if let Some(list) = deny.filter(|l| !l.is_empty()) {
            let entries = match list.len() {
                1 => "1 entry".to_string(),
                n => format!("{n} entries"),
            };
            self.lost(format!(
                "permissions.{kind}.deny ({entries}): vak is deny by default; a deny inside an allow is not expressible"
            ));
        }
    }

    fn network(&mut self, s: ListSection<NetworkEntry>) -> Result<(), ImportError> {
        self.deny("network", s.deny.as_deref());
        for (i, entry) in s.allow.unwrap_or_default().into_iter().enumerate() {
            match (entry.host, entry.cidr, entry.defaults) {
                (Some(host), None, None) => match origin_of(&host) {
                    Ok((origin, bare)) => {
                        self.bare_hosts |= bare;
                        if !self.origins.contains(&origin) {
                            self.origins.push(origin);
                        }
                    }
                    Err(why) => self.lost(format!(
                        "permissions.network host {:?}: {why}",
                        shown(&host)
                    )),
                },
                (None, Some(cidr), None) => self.lost(format!(
                    "permissions.network cidr {:?}: vak allow-lists exact origins, not address ranges",
                    shown(&cidr)
                )),
                (None, None, Some(true)) => self.lost(
                    "permissions.network defaults: Wassette's list of common domains; vak allow-lists exact origins: list those the component needs".into(),
                ),
                (None, None, Some(false)) => {}
                _ => {
                    return Err(shape(format!(
                        "permissions.network.allow[{i}]: give one of `host`, `cidr` and `defaults`"
                    )));
                }
            }
        }
        Ok(())
    }

    fn storage(&mut self, s: ListSection<StorageEntry>) {
        self.deny("storage", s.deny.as_deref());
        for entry in s.allow.unwrap_or_default() {
            let uri = shown(&entry.uri);
            let path = match root_path(&entry.uri) {
                Ok(p) => p,
                Err(why) => {
                    self.lost(format!("permissions.storage uri {uri:?}: {why}"));
                    continue;
                }
            };
            let read = entry.access.contains(&Access::Read);
            let mode = match (read, entry.access.contains(&Access::Write)) {
                (_, true) => Mode::ReadWrite,
                (true, false) => Mode::ReadOnly,
                (false, false) => {
                    self.lost(format!(
                        "permissions.storage uri {uri:?}: `access` is empty, which grants nothing"
                    ));
                    continue;
                }
            };
            if !read {
                self.lost(format!(
                    "permissions.storage uri {uri:?}: write-only access; vak has no write-only root, so it is translated read-write (the tool may also read it)"
                ));
            }
            self.roots.push(Root { uri, path, mode });
        }
    }

    fn environment(&mut self, s: ListSection<EnvEntry>) {
        self.deny("environment", s.deny.as_deref());
        for entry in s.allow.unwrap_or_default() {
            if entry.key.is_empty() || entry.key.contains(['=', '\0', '*']) {
                self.lost(format!(
                    "permissions.environment key {:?}: not a variable name",
                    shown(&entry.key)
                ));
            } else if !self.env_keys.contains(&entry.key) {
                self.env_keys.push(entry.key);
            }
        }
    }

    fn resources(&mut self, r: Resources) {
        if let Some(limits) = r.limits {
            if let Some(memory) = limits.memory {
                match memory_bytes(&memory) {
                    Ok(n) => self.memory_bytes = Some(n),
                    Err(why) => self.lost(format!(
                        "permissions.resources.limits.memory {}: {why}",
                        shown_value(&memory)
                    )),
                }
            }
            if let Some(cpu) = limits.cpu {
                self.lost(format!(
                    "permissions.resources.limits.cpu {}: vak meters fuel and wall time; set caps.fuel / caps.wall_time_ms",
                    shown_value(&cpu)
                ));
            }
        }
        let older = [
            (
                "cpu",
                r.cpu,
                "a CPU percentage; vak meters fuel and wall time: set caps.fuel / caps.wall_time_ms",
            ),
            (
                "memory",
                r.memory,
                "policy-mcp's figure in MB, of unclear unit; set caps.memory_bytes by hand",
            ),
            ("io", r.io, "an IO operations limit; vak has none"),
        ];
        for (name, value, why) in older {
            if let Some(v) = value {
                self.lost(format!(
                    "permissions.resources.{name} {}: {why}",
                    shown_value(&v)
                ));
            }
        }
    }

    /// vak refuses overlapping roots (one tree, one grant): a root inside another is covered by
    /// it, and the same path twice is one root with the wider mode. Write access inside a
    /// read-only root cannot be kept.
    fn resolve_roots(&mut self) {
        let mut roots = std::mem::take(&mut self.roots);
        // Outer roots first (a stable sort keeps the file's order otherwise).
        roots.sort_by_key(|r| r.path.components().count());
        let mut kept: Vec<Root> = Vec::new();
        for root in roots {
            let Some(outer) = kept.iter_mut().find(|k| root.path.starts_with(&k.path)) else {
                kept.push(root);
                continue;
            };
            if outer.path == root.path {
                if root.mode == Mode::ReadWrite {
                    outer.mode = Mode::ReadWrite;
                }
            } else if root.mode == Mode::ReadWrite && outer.mode == Mode::ReadOnly {
                self.untranslated.push(format!(
                    "permissions.storage uri {:?}: read-write inside {:?}, which is read-only; vak roots may not overlap, so it stays read-only",
                    root.uri, outer.uri
                ));
            } else {
                self.notes.push(format!(
                    "{} is inside {}, granted once as its root",
                    root.uri, outer.uri
                ));
            }
        }
        self.roots = kept;
    }

    fn render(&self, description: Option<&str>, tools: &[String]) -> String {
        let mut out =
            String::from("# Translated by `vak policy import` from a Wassette policy.yaml.\n");
        if let Some(d) = description {
            let _ = writeln!(out, "# Its description: {}", comment(d));
        }
        for what in &self.untranslated {
            let _ = writeln!(out, "# not translated: {}", comment(what));
        }
        let mut body = String::new();
        if !self.origins.is_empty() {
            let origins: Vec<String> = self.origins.iter().map(|o| toml_string(o)).collect();
            let _ = writeln!(
                body,
                "capabilities.http = {{ origins = [{}] }}",
                origins.join(", ")
            );
            if self.bare_hosts {
                out.push_str("# http: a bare host is translated as https://HOST; add \"http://HOST\" to `origins` by hand if the component uses plain http.\n");
            }
        }
        if !self.roots.is_empty() {
            let mut roots = Vec::new();
            let mut names: Vec<String> = Vec::new();
            for root in &self.roots {
                let name = unique(root_name(&root.path), &names);
                roots.push(format!(
                    "{{ name = {}, path = {}, mode = {} }}",
                    toml_string(&name),
                    toml_string(&root.path.to_string_lossy()),
                    toml_string(root.mode.name())
                ));
                names.push(name);
            }
            let _ = writeln!(
                body,
                "capabilities.workspace = {{ roots = [{}] }}",
                roots.join(", ")
            );
            out.push_str("# workspace: vak preopens each root for a foreign component at its host path, as Wassette does.\n");
            for note in &self.notes {
                let _ = writeln!(out, "# workspace: {}", comment(note));
            }
        }
        if !self.env_keys.is_empty() {
            let keys: Vec<String> = self
                .env_keys
                .iter()
                .map(|k| format!("{} = {{ env = {} }}", toml_key(k), toml_string(k)))
                .collect();
            let _ = writeln!(
                body,
                "capabilities.environment = {{ keys = {{ {} }} }}",
                keys.join(", ")
            );
            out.push_str("# environment: each key's value is read from the host environment variable of the same name at call time, as Wassette does; bind a key to a vak secret instead with KEY = { secret = \"name\" } (vak secret set name).\n");
        }
        if let Some(bytes) = self.memory_bytes {
            let _ = writeln!(body, "caps.memory_bytes = {bytes}");
        }
        if body.is_empty() {
            out.push_str("# Nothing is granted: each tool runs with no capability.\n");
        }
        for tool in tools {
            let _ = write!(out, "\n[tools.{tool}]\n{body}");
        }
        out
    }
}

#[cfg(test)]
mod tests;

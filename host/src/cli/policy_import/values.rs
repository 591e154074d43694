//! The scalar parts of a translation: an origin from a Wassette host, a root path from an `fs://`
//! URI, a root's name, a memory figure, and TOML and comment text.

use super::super::render::{hidden_or_acting, neutralise_line};
use std::fmt::Write as _;
use std::path::{Component, Path, PathBuf};
use yaml_serde::Value;

/// The http origin (with its path prefix) a Wassette `host` names, and whether it was a bare
/// host (taken as https).
pub(super) fn origin_of(host: &str) -> Result<(String, bool), String> {
    if host.contains('*') {
        return Err(
            "a wildcard; vak allow-lists exact origins: list each host the component needs".into(),
        );
    }
    let bare = !host.contains("://");
    let text = if bare {
        format!("https://{host}")
    } else {
        host.to_string()
    };
    let url = url::Url::parse(&text).map_err(|e| format!("not a host or URL ({e})"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("scheme {:?} is not http or https", url.scheme()));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("names no host".into());
    }
    if url.query().is_some()
        || url.fragment().is_some()
        || !url.username().is_empty()
        || url.password().is_some()
    {
        return Err("carries a query, fragment or user".into());
    }
    let mut origin = url.origin().ascii_serialization();
    if url.path() != "/" {
        origin.push_str(url.path());
    }
    Ok((origin, bare))
}

/// The absolute host path of an `fs://` URI; `/**` (everything beneath) is what a root grants.
pub(super) fn root_path(uri: &str) -> Result<PathBuf, &'static str> {
    let Some(rest) = uri.strip_prefix("fs://") else {
        return Err("not an fs:// URI; vak workspace roots are host folders");
    };
    let rest = match rest.strip_suffix("/**") {
        Some("") => "/",
        Some(r) => r,
        None => rest,
    };
    if rest.contains('*') {
        return Err("a pattern; a vak root is one folder and everything beneath it");
    }
    let path = Path::new(rest);
    if !path.is_absolute() {
        return Err("not an absolute path (fs:///abs/path); vak roots are absolute host paths");
    }
    if path.components().any(|c| c == Component::ParentDir) {
        return Err("has a `..` component");
    }
    // Components drop repeated and trailing slashes.
    Ok(path.components().collect())
}

/// A root's name: its last path segment as a-z, 0-9, '-' and '_'; `root` for `/`.
pub(super) fn root_name(path: &Path) -> String {
    let Some(last) = path.file_name() else {
        return "root".into();
    };
    let mut name = String::new();
    for c in last.to_string_lossy().chars().flat_map(char::to_lowercase) {
        if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-' {
            name.push(c);
        } else if !name.ends_with('-') {
            name.push('-');
        }
        if name.len() >= 48 {
            break;
        }
    }
    let name = name.trim_matches('-');
    if name.is_empty() {
        "dir".into()
    } else {
        name.into()
    }
}

pub(super) fn unique(base: String, taken: &[String]) -> String {
    if !taken.contains(&base) {
        return base;
    }
    (2..)
        .map(|n| format!("{base}-{n}"))
        .find(|n| !taken.contains(n))
        .unwrap_or(base)
}

/// A Kubernetes-style memory figure in bytes: `512Mi`, `1Gi`, `100M`, `1.5Gi`. A figure without
/// a unit is refused: Wassette writes units, and 512 bytes would leave no room to run.
pub(super) fn memory_bytes(value: &Value) -> Result<u64, String> {
    let Value::String(text) = value else {
        return Err("has no unit; write it as 512Mi or 512M".into());
    };
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (figure, unit) = text.split_at(split);
    let multiplier: u128 = match unit {
        "" => return Err("has no unit; write it as 512Mi or 512M".into()),
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "k" | "K" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        _ => return Err("unit is not one of Ki, Mi, Gi, Ti, k, M, G, T".into()),
    };
    let (whole, fraction) = figure.split_once('.').unwrap_or((figure, ""));
    let bad = || "is not a memory figure".to_string();
    if whole.is_empty() || whole.len() > 20 || fraction.len() > 9 || fraction.contains('.') {
        return Err(bad());
    }
    let digits: u128 = format!("{whole}{fraction}").parse().map_err(|_| bad())?;
    let scale = 10u128.pow(fraction.len() as u32);
    let scaled = digits.checked_mul(multiplier).ok_or_else(bad)?;
    if scaled % scale != 0 {
        return Err("is not a whole number of bytes".into());
    }
    match u64::try_from(scaled / scale) {
        Ok(0) => Err("is zero, which leaves no room to run".into()),
        Ok(n) => Ok(n),
        Err(_) => Err("is too large".into()),
    }
}

/// One comment line: control characters and newlines shown as escapes.
pub(super) fn comment(text: &str) -> String {
    let mut line = neutralise_line(text);
    if let Some((at, _)) = line.char_indices().nth(400) {
        line.truncate(at);
        line.push('…');
    }
    line
}

/// A TOML basic string; every character that could act on a terminal is escaped, so the text
/// parses back exactly and prints as it is.
pub(super) fn toml_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if hidden_or_acting(c) || c.is_control() => {
                if (c as u32) <= 0xffff {
                    let _ = write!(out, "\\u{:04X}", c as u32);
                } else {
                    let _ = write!(out, "\\U{:08X}", c as u32);
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A TOML key: bare where TOML allows it, else quoted.
pub(super) fn toml_key(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        s.to_string()
    } else {
        toml_string(s)
    }
}

//! `vak new` and `vak build`: a tool project from nothing, and a project built to a component
//! that admission has looked at, so an author sees at once what the binary imports.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The languages `vak new` scaffolds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    Rust,
}

/// Why a project could not be made or built.
#[derive(Debug, thiserror::Error)]
pub enum AuthoringError {
    #[error(
        "tool name {0:?} must be 1-64 characters of a-z, 0-9, '-' and '_', starting with a letter"
    )]
    BadName(String),
    #[error("{0} already exists; choose another name or --dir")]
    Exists(PathBuf),
    #[error(
        "the vak-guest SDK was not found at {0}; pass --sdk PATH (the guest-sdk folder of a vak checkout) or set VAK_GUEST_SDK"
    )]
    NoSdk(PathBuf),
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0} is not a tool project: it has no Cargo.toml")]
    NotAProject(PathBuf),
    #[error(
        "the wasm32-wasip2 target is not installed for this toolchain; install it with:\n\n    rustup target add wasm32-wasip2\n"
    )]
    NoTarget,
    #[error("cannot run cargo: {0}")]
    Cargo(std::io::Error),
    #[error("the build failed (cargo's messages are above)")]
    BuildFailed,
    #[error("the build produced no .wasm component (is the crate type `cdylib`?)")]
    NoArtifact,
}

fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.as_bytes()[0].is_ascii_lowercase()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

/// The SDK this `vak` was built with, unless the caller names another.
fn sdk_path(given: Option<&Path>) -> Result<PathBuf, AuthoringError> {
    let path = given
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os("VAK_GUEST_SDK").map(PathBuf::from))
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest-sdk"));
    let path = path.canonicalize().unwrap_or(path);
    if path.join("Cargo.toml").is_file() {
        Ok(path)
    } else {
        Err(AuthoringError::NoSdk(path))
    }
}

fn write(path: &Path, text: &str) -> Result<(), AuthoringError> {
    let fail = |source| AuthoringError::Write {
        path: path.to_path_buf(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(fail)?;
    }
    std::fs::write(path, text).map_err(fail)
}

/// The files of a new Rust tool project named `name`.
fn rust_files(name: &str, sdk: &Path) -> Vec<(&'static str, String)> {
    let crate_name = name.replace('_', "-");
    let sdk = sdk
        .display()
        .to_string()
        .replace('\\', "\\\\")
        .replace('"', "\\\"");
    let cargo = format!(
        r#"[package]
name = "{crate_name}"
version = "0.1.0"
edition = "2024"
publish = false

[lib]
# cdylib: the component; rlib: lets `cargo test` run the tool's logic natively.
crate-type = ["cdylib", "rlib"]

[dependencies]
vak-guest = {{ path = "{sdk}" }}
serde = {{ version = "1", features = ["derive"] }}
schemars = "1.2"

# Small components compile quickly in the host.
[profile.release]
opt-level = "s"
lto = true
codegen-units = 1
strip = true

# A tool is a project of its own, wherever it lives.
[workspace]
"#
    );
    let lib = format!(
        r#"//! `{name}`: a vak tool. It greets someone by name; replace the logic with your own.

use vak_guest::prelude::*;

/// The arguments of `{name}`. The input schema the host enforces is derived from this type.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {{
    /// Who to greet.
    pub name: String,
}}

pub struct Greeter;

impl Tool for Greeter {{
    type Args = Args;
    const NAME: &'static str = "{name}";
    const DESCRIPTION: &'static str = "Greets someone by name.";

    // No capability is claimed, so the binary imports none: the host links nothing but the
    // locked-down WASI set. Claim one (e.g. `Claims::new().clock(["UTC"])`) when you use it.
    fn claims() -> Claims {{
        Claims::new()
    }}

    fn call(args: Args) -> Result<Output, ToolError> {{
        let text = greeting(&args.name)?;
        Ok(Output::markdown(text))
    }}
}}

/// The tool's logic, kept apart from the WIT glue so that `cargo test` can run it natively.
pub fn greeting(name: &str) -> Result<String, ToolError> {{
    let name = name.trim();
    if name.is_empty() {{
        return Err(ToolError::new("empty-name", "`name` must not be blank"));
    }}
    Ok(format!("Hello, {{name}}!"))
}}

vak_guest::export_tool!(Greeter);

#[cfg(test)]
mod tests {{
    use super::*;

    #[test]
    fn greets_by_name_and_refuses_a_blank_one() {{
        assert_eq!(greeting(" Ada ").ok().as_deref(), Some("Hello, Ada!"));
        assert!(greeting("  ").is_err());
    }}
}}
"#
    );
    let policy = format!(
        r#"# The policy `vak build` and `vak call` use for this project (deny by default: the tool
# must be named). Add the capabilities the tool claims, e.g.
#   capabilities.clock = {{ zones = ["UTC"] }}
[tools.{name}]
caps = {{ wall_time_ms = 2_000 }}
"#
    );
    let readme = format!(
        r#"# {name}

A [vak](https://example.invalid/vak) tool: a WebAssembly component behind the `vak:tool` WIT
world, run by the vak host in a sandbox with only the capabilities its policy grants.

```sh
vak build                                   # build the component and show what admission says
vak --tools target/wasm32-wasip2/release --policy policy.toml call {name} '{{"name":"Ada"}}'
cargo test                                  # the tool's logic, natively
```

- `src/lib.rs`: the arguments (their JSON Schema is derived from the type), the claims, the call.
- `policy.toml`: what the host grants the tool; a claim the policy does not grant is refused at
  admission.
"#
    );
    vec![
        ("Cargo.toml", cargo),
        ("src/lib.rs", lib),
        ("policy.toml", policy),
        ("README.md", readme),
        (".gitignore", "/target\n".to_string()),
    ]
}

/// Scaffold a tool project `name` in `parent` (the current folder by default).
pub fn new_project(
    name: &str,
    lang: Lang,
    parent: Option<&Path>,
    sdk: Option<&Path>,
) -> Result<PathBuf, AuthoringError> {
    if !valid_name(name) {
        return Err(AuthoringError::BadName(name.to_string()));
    }
    let dir = parent.unwrap_or(Path::new(".")).join(name);
    if dir.exists() {
        return Err(AuthoringError::Exists(dir));
    }
    let files = match lang {
        Lang::Rust => rust_files(name, &sdk_path(sdk)?),
    };
    for (file, text) in files {
        write(&dir.join(file), &text)?;
    }
    Ok(dir)
}

fn wasm_target_installed() -> bool {
    Command::new("rustc")
        .args(["--print", "sysroot"])
        .current_dir(".")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        .is_some_and(|s| s.join("lib/rustlib/wasm32-wasip2").is_dir())
}

/// Build the project in `dir` to a component; returns the `.wasm` path. Cargo's own output goes
/// to stderr as it runs.
pub fn build_project(dir: &Path) -> Result<PathBuf, AuthoringError> {
    let manifest = dir.join("Cargo.toml");
    if !manifest.is_file() {
        return Err(AuthoringError::NotAProject(dir.to_path_buf()));
    }
    if !wasm_target_installed() {
        return Err(AuthoringError::NoTarget);
    }
    let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .arg("build")
        .arg("--manifest-path")
        .arg(&manifest)
        .args([
            "--release",
            "--target",
            "wasm32-wasip2",
            "--message-format",
            "json-render-diagnostics",
        ])
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(AuthoringError::Cargo)?;
    if !output.status.success() {
        return Err(AuthoringError::BuildFailed);
    }
    // The artifact's path, from cargo's own messages (wherever its target folder is).
    let stdout = String::from_utf8_lossy(&output.stdout);
    let package = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact")
        .filter(|m| {
            m["manifest_path"]
                .as_str()
                .is_some_and(|p| Path::new(p).parent() == Some(package.as_path()))
        })
        .flat_map(|m| {
            m["filenames"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter_map(|f| f.as_str().map(PathBuf::from))
        })
        .find(|f| f.extension().is_some_and(|e| e == "wasm"))
        .ok_or(AuthoringError::NoArtifact)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_follow_the_admission_rule() {
        assert!(valid_name("greet") && valid_name("my-tool_2"));
        for bad in ["", "Greet", "2fast", "a b", "é", &"x".repeat(65)] {
            assert!(!valid_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn a_new_project_refuses_to_overwrite() {
        let dir = tempfile_dir();
        let made = new_project("greet", Lang::Rust, Some(&dir), None).unwrap();
        assert!(made.join("src/lib.rs").is_file() && made.join("policy.toml").is_file());
        let policy = std::fs::read_to_string(made.join("policy.toml")).unwrap();
        assert!(
            vak_host::Policy::parse(&policy, "scaffold").is_ok(),
            "{policy}"
        );
        assert!(matches!(
            new_project("greet", Lang::Rust, Some(&dir), None),
            Err(AuthoringError::Exists(_))
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn tempfile_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("vak-new-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}

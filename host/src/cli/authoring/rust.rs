//! A Rust tool project: a crate on the `vak-guest` SDK, built by cargo for `wasm32-wasip2`.

use super::AuthoringError;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The SDK this `vak` was built with, unless the caller names another.
pub(super) fn sdk_path(given: Option<&Path>) -> Result<PathBuf, AuthoringError> {
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

/// The files of a new Rust tool project named `name`.
pub(super) fn files(name: &str, sdk: &Path) -> Vec<(&'static str, String)> {
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
    let readme = format!(
        r#"# {name}

A vak tool: a WebAssembly component behind the `vak:tool` WIT
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
        ("policy.toml", super::policy(name)),
        ("README.md", readme),
        (".gitignore", "/target\n".to_string()),
    ]
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
pub(super) fn build(dir: &Path) -> Result<PathBuf, AuthoringError> {
    let manifest = dir.join("Cargo.toml");
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
        .map_err(|source| AuthoringError::Spawn {
            program: "cargo".into(),
            source,
        })?;
    if !output.status.success() {
        return Err(AuthoringError::BuildFailed("cargo"));
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

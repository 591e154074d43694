//! `vak new` and `vak build`: a tool project from nothing, and a project built to a component
//! that admission has looked at, so an author sees at once what the binary imports.
//!
//! One module per language. Every project has the same shape: the tool's code with its logic
//! apart from the WIT glue (so the language's own test runner tests it natively), a
//! `policy.toml`, a README and one test. Python and JavaScript projects carry their WIT world in
//! `wit/` with this host's `vak:tool` package as its dependency, so what they build against is
//! exactly the version this `vak` accepts.

pub mod commands;
mod js;
mod python;
mod rust;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The `vak:tool` package this host implements, written into Python and JavaScript projects.
const VAK_WIT: &str = vak_host::bindings::WIT_PACKAGE;

/// The languages `vak new` scaffolds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    Rust,
    Python,
    Js,
}

impl Lang {
    /// The language's name in prose.
    pub fn title(self) -> &'static str {
        match self {
            Lang::Rust => "Rust",
            Lang::Python => "Python",
            Lang::Js => "JavaScript",
        }
    }
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
    #[error(
        "{0} is not a tool project: it has no Cargo.toml (Rust), app.py (Python) or package.json (JavaScript)"
    )]
    NotAProject(PathBuf),
    #[error(
        "the wasm32-wasip2 target is not installed for this toolchain; install it with:\n\n    rustup target add wasm32-wasip2\n"
    )]
    NoTarget,
    #[error("{program} is needed to build this project and could not be run: {source}\n{hint}")]
    NoToolchain {
        program: String,
        hint: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot run {program}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "package.json's vak.engine is {0}; it is \"quickjs\" (the default) or \"starlingmonkey\""
    )]
    UnknownEngine(String),
    #[error("the build failed ({0}'s messages are above)")]
    BuildFailed(&'static str),
    #[error("{0} declares no `world NAME {{ ... }}`; a tool's world exports vak:tool/tool@0.2.1")]
    NoWorld(PathBuf),
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

/// A WIT identifier for the tool's world and package: kebab-case words that each start with a
/// letter. Tool names allow `_` and digits after a dash, WIT does not.
fn world_name(tool: &str) -> String {
    let kebab = tool.replace('_', "-");
    let ok = kebab
        .split('-')
        .all(|w| w.as_bytes().first().is_some_and(u8::is_ascii_lowercase));
    if ok { kebab } else { "tool".into() }
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

/// The policy `vak build` and `vak call` use for a new project.
fn policy(name: &str) -> String {
    format!(
        r#"# The policy `vak build` and `vak call` use for this project (deny by default: the tool
# must be named). Add the capabilities the tool claims, e.g.
#   capabilities.clock = {{ zones = ["UTC"] }}
[tools.{name}]
caps = {{ wall_time_ms = 2_000 }}
"#
    )
}

/// The end of a Python or JavaScript project's README.
const README_TAIL: &str = r#"- `wit/world.wit`: what the component imports and exports; `wit/deps/vak-tool/` is the
  `vak:tool` package of the vak that made this project.
- `policy.toml`: what the host grants the tool; a claim the policy does not grant is refused at
  admission.
"#;

/// Where a Python or JavaScript build writes its component, relative to the project:
/// `build/WORLD.wasm` (the folder is made).
fn output(dir: &Path, world: &str) -> Result<String, AuthoringError> {
    std::fs::create_dir_all(dir.join("build")).map_err(|source| AuthoringError::Write {
        path: dir.join("build"),
        source,
    })?;
    Ok(format!("build/{world}.wasm"))
}

/// The files a Python or JavaScript project has besides its code: the policy, the README
/// (`readme` and the tail every project shares), the .gitignore and its WIT.
fn wit_project_files(
    name: &str,
    world: &str,
    readme: String,
    gitignore: &str,
) -> Vec<(&'static str, String)> {
    let mut files = vec![
        ("policy.toml", policy(name)),
        ("README.md", readme + README_TAIL),
        (".gitignore", gitignore.to_string()),
    ];
    files.extend(wit_files(world));
    files
}

/// The WIT files of a Python or JavaScript project: its world, and vak's package beside it.
fn wit_files(world: &str) -> Vec<(&'static str, String)> {
    let own = format!(
        r#"// The world this tool is built against. It names only what the tool uses: the toolchain
// imports every interface of the world, so a capability listed here and not claimed would
// be refused at admission. To read the clock, add `import vak:tool/clock@0.2.1;`.
package local:{world};

world {world} {{
    export vak:tool/tool@0.2.1;
}}
"#
    );
    vec![
        ("wit/world.wit", own),
        ("wit/deps/vak-tool/vak-tool.wit", VAK_WIT.to_string()),
    ]
}

/// The world a project's `wit/world.wit` declares.
fn declared_world(dir: &Path) -> Result<String, AuthoringError> {
    let file = dir.join("wit/world.wit");
    let text = std::fs::read_to_string(&file).map_err(|_| AuthoringError::NoWorld(file.clone()))?;
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("world "))
        .filter_map(|rest| rest.split(|c: char| c.is_whitespace() || c == '{').next())
        .find(|w| !w.is_empty())
        .map(str::to_string)
        .ok_or(AuthoringError::NoWorld(file))
}

/// Run one build step in `dir` (`what` names it in an error); the tool's own output goes to
/// stderr, so stdout stays free for `vak build --json`.
fn step(
    dir: &Path,
    program: &Path,
    args: &[&str],
    what: &'static str,
) -> Result<(), AuthoringError> {
    let status = Command::new(program)
        .current_dir(dir)
        .args(args)
        .stdout(Stdio::from(std::io::stderr()))
        .status()
        .map_err(|source| AuthoringError::Spawn {
            program: program.display().to_string(),
            source,
        })?;
    if status.success() {
        Ok(())
    } else {
        Err(AuthoringError::BuildFailed(what))
    }
}

/// `program` (found on PATH), once its `--version` runs; else what to install, as `hint` says.
fn needed(program: &str, hint: &'static str) -> Result<PathBuf, AuthoringError> {
    let path = PathBuf::from(program);
    runs(&path).map_err(|source| AuthoringError::NoToolchain {
        program: program.into(),
        hint,
        source,
    })?;
    Ok(path)
}

/// Whether `program --version` runs: the toolchain is there.
fn runs(program: &Path) -> Result<(), std::io::Error> {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .and_then(|s| {
            if s.success() {
                Ok(())
            } else {
                Err(std::io::Error::other(format!(
                    "`--version` exited with {s}"
                )))
            }
        })
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
        Lang::Rust => rust::files(name, &rust::sdk_path(sdk)?),
        Lang::Python => python::files(name),
        Lang::Js => js::files(name),
    };
    for (file, text) in files {
        write(&dir.join(file), &text)?;
    }
    Ok(dir)
}

/// The language of the project in `dir`, from the file that makes it one.
pub fn project_lang(dir: &Path) -> Option<Lang> {
    if dir.join("Cargo.toml").is_file() {
        Some(Lang::Rust)
    } else if dir.join("package.json").is_file() {
        Some(Lang::Js)
    } else if dir.join("app.py").is_file() {
        Some(Lang::Python)
    } else {
        None
    }
}

/// Build the project in `dir` to a component; returns the `.wasm` path. The toolchain's own
/// output goes to stderr as it runs.
pub fn build_project(dir: &Path) -> Result<PathBuf, AuthoringError> {
    // Absolute, so that a program path inside the project means the same in the child.
    let dir = &dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    match project_lang(dir) {
        Some(Lang::Rust) => rust::build(dir),
        Some(Lang::Python) => python::build(dir),
        Some(Lang::Js) => js::build(dir),
        None => Err(AuthoringError::NotAProject(dir.to_path_buf())),
    }
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
    fn world_names_are_wit_identifiers() {
        assert_eq!(world_name("greet"), "greet");
        assert_eq!(world_name("my_tool"), "my-tool");
        for odd in ["a--b", "a-2", "a_", "a_2b"] {
            assert_eq!(world_name(odd), "tool", "{odd}");
        }
    }

    #[test]
    fn a_new_project_refuses_to_overwrite() {
        let dir = tempfile_dir("overwrite");
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

    #[test]
    fn every_language_scaffolds_a_project_it_then_recognises() {
        let dir = tempfile_dir("langs");
        for (lang, name) in [
            (Lang::Rust, "r_tool"),
            (Lang::Python, "py_tool"),
            (Lang::Js, "js_tool"),
        ] {
            let made = new_project(name, lang, Some(&dir), None).unwrap();
            assert_eq!(project_lang(&made), Some(lang), "{name}");
            if lang != Lang::Rust {
                assert_eq!(declared_world(&made).unwrap(), world_name(name));
                let wit = std::fs::read_to_string(made.join("wit/deps/vak-tool/vak-tool.wit"));
                assert!(wit.unwrap().contains("package vak:tool@0.2.1;"));
            }
        }
        assert!(matches!(
            build_project(&dir),
            Err(AuthoringError::NotAProject(_))
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn tempfile_dir(what: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("vak-new-test-{what}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}

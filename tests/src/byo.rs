//! Components written for other hosts ("foreign" components: no `vak:tool/tool` export, each
//! exported function a tool), for the tests that run them in vak:
//! - [`component`] builds one of Wassette's example tools from its sources in
//!   `../shared/byo/wassette-8940e27` (test data, read in place) with that language's own
//!   toolchain, into a cache under `target/byo`;
//! - [`hostile`] makes small foreign components from WAT text that a host must refuse or stop.

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// The Rust target the Rust examples are built for; it makes a component from the cdylib (with
/// wasm-component-ld), so no adapter step is needed.
const RUST_TARGET: &str = "wasm32-wasip2";

/// The componentize-py that eval-py's `uv.lock` pins. Its `main.py` imports `wit_world.types`,
/// which later releases (0.25.1, tools/py-clock's) no longer generate, so it is built with this
/// one, in a venv of its own.
const EVAL_PY_COMPONENTIZE: &str = "componentize-py==0.17.1";

/// The oldest Node.js these jco builds were checked with; an older one on PATH gives way to the
/// Node that `tests/clients/install.sh` installs, when it is there.
const MIN_NODE_MAJOR: u32 = 20;

/// Bumped when a recipe below changes in a way the sources' digest cannot see, so every cached
/// build is made again.
const RECIPE_VERSION: &str = "1";

/// How one example is built.
#[derive(Debug)]
enum Recipe {
    /// `cargo build --release --target wasm32-wasip2 --locked`; `artifact` is the cdylib's
    /// file stem.
    Rust { artifact: &'static str },
    /// `npm install`, then the package.json script `script`, which writes `output`.
    Js {
        script: &'static str,
        output: &'static str,
    },
    /// componentize-py on the world `sandbox` of `wit/`, the app module `main`.
    Python,
}

/// The five examples the tests know, by folder name.
const EXAMPLES: &[(&str, Recipe)] = &[
    (
        "fetch-rs",
        Recipe::Rust {
            artifact: "fetch_rs",
        },
    ),
    (
        "filesystem-rs",
        Recipe::Rust {
            artifact: "filesystem",
        },
    ),
    (
        "time-server-js",
        Recipe::Js {
            script: "build",
            output: "time.wasm",
        },
    ),
    (
        "get-weather-js",
        Recipe::Js {
            script: "build:component",
            output: "weather.wasm",
        },
    ),
    ("eval-py", Recipe::Python),
];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Wassette's example tools (test data beside the repository; never written to).
pub fn examples_dir() -> PathBuf {
    repo().join("../shared/byo/wassette-8940e27")
}

/// Build Wassette's example `name` (fetch-rs, filesystem-rs, time-server-js, get-weather-js or
/// eval-py) and return the path of its component, `target/byo/<name>/<name>.wasm`. A build whose sources have not changed since the
/// last one is reused. `Err(why)` when the test data, a toolchain or a registry is missing (the
/// caller skips, saying why); a build that fails with all of them there panics, since that is a
/// broken example or recipe, not a missing tool.
///
/// Concurrent callers (test threads and processes) wait for each other on a file lock per
/// example, and a build is renamed into place whole, so none reads a half-written component.
pub fn component(name: &str) -> Result<PathBuf, String> {
    let recipe = EXAMPLES
        .iter()
        .find_map(|(n, r)| (*n == name).then_some(r))
        .unwrap_or_else(|| {
            let names: Vec<&str> = EXAMPLES.iter().map(|(n, _)| *n).collect();
            panic!("no Wassette example named `{name}`: one of {names:?}")
        });
    let source = examples_dir().join(name);
    if !source.is_dir() {
        return Err(format!(
            "the test data {} is missing (shared/byo beside the repository)",
            source.display()
        ));
    }
    let target = repo().join("target");
    let cache = target.join("byo");
    let out = cache.join(name);
    let wasm = out.join(format!("{name}.wasm"));
    std::fs::create_dir_all(&cache).map_err(|e| format!("create {}: {e}", cache.display()))?;

    let lock_path = cache.join(format!("{name}.lock"));
    let lock = std::fs::File::create(&lock_path)
        .map_err(|e| format!("create {}: {e}", lock_path.display()))?;
    lock.lock()
        .map_err(|e| format!("lock {}: {e}", lock_path.display()))?;

    let files = source_files(&source)?;
    let digest = digest(recipe, &files);
    let stamp = out.join("stamp");
    if wasm.is_file() && std::fs::read_to_string(&stamp).is_ok_and(|s| s == digest) {
        return Ok(wasm);
    }

    let started = Instant::now();
    let copy = target.join("byo-src").join(name);
    write_copy(&copy, &files)?;
    // Holding the lock, any staging folder of this example is a killed build's leftover.
    remove_leftovers(&cache, &format!("{name}.tmp"))?;
    let staging = cache.join(format!("{name}.tmp{}", std::process::id()));
    std::fs::create_dir_all(&staging).map_err(|e| format!("create {}: {e}", staging.display()))?;
    let staged = staging.join(format!("{name}.wasm"));
    match recipe {
        Recipe::Rust { artifact } => build_rust(&copy, &target, artifact, &staged)?,
        Recipe::Js { script, output } => build_js(&copy, script, &copy.join(output), &staged)?,
        Recipe::Python => build_python(&copy, &cache, &staged)?,
    }
    let bytes = std::fs::read(&staged).unwrap_or_else(|e| {
        panic!(
            "{name}: the build succeeded but left no {}: {e}",
            staged.display()
        )
    });
    assert!(
        is_component(&bytes),
        "{name}: the build wrote {}, which is not a component (a core module?)",
        staged.display()
    );
    std::fs::write(staging.join("stamp"), &digest)
        .map_err(|e| format!("write the stamp in {}: {e}", staging.display()))?;
    remove_dir(&out)?;
    std::fs::rename(&staging, &out)
        .map_err(|e| format!("rename {} to {}: {e}", staging.display(), out.display()))?;
    eprintln!(
        "byo: built {name} in {:.1} s ({} bytes)",
        started.elapsed().as_secs_f64(),
        bytes.len()
    );
    drop(lock);
    Ok(wasm)
}

/// Whether `bytes` is a component (the component layer's header), not a core module.
pub fn is_component(bytes: &[u8]) -> bool {
    wasmparser::Parser::is_component(bytes)
}

/// One file of an example: its path inside the folder and its bytes.
struct SourceFile {
    relative: PathBuf,
    bytes: Vec<u8>,
}

/// Folders a copy leaves out: build output and installed packages, never sources.
const SKIPPED_DIRS: [&str; 2] = ["target", "node_modules"];

/// Every file under `root` (sorted by path, so the digest does not depend on the order a
/// directory lists in), leaving out [`SKIPPED_DIRS`].
fn source_files(root: &Path) -> Result<Vec<SourceFile>, String> {
    let mut files = Vec::new();
    let mut pending = vec![PathBuf::new()];
    while let Some(dir) = pending.pop() {
        let full = root.join(&dir);
        let entries =
            std::fs::read_dir(&full).map_err(|e| format!("read {}: {e}", full.display()))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("read {}: {e}", full.display()))?;
            let relative = dir.join(entry.file_name());
            let kind = entry
                .file_type()
                .map_err(|e| format!("stat {}: {e}", entry.path().display()))?;
            if kind.is_dir() {
                if !SKIPPED_DIRS.iter().any(|s| entry.file_name() == *s) {
                    pending.push(relative);
                }
            } else {
                let bytes = std::fs::read(entry.path())
                    .map_err(|e| format!("read {}: {e}", entry.path().display()))?;
                files.push(SourceFile { relative, bytes });
            }
        }
    }
    files.sort_by(|a, b| a.relative.cmp(&b.relative));
    Ok(files)
}

/// What a build depends on: the recipe and every file, with its path.
fn digest(recipe: &Recipe, files: &[SourceFile]) -> String {
    let mut hash = Sha256::new();
    hash.update(format!("{RECIPE_VERSION} {recipe:?} {EVAL_PY_COMPONENTIZE}\n").as_bytes());
    for file in files {
        let path = file.relative.to_string_lossy();
        hash.update((path.len() as u64).to_le_bytes());
        hash.update(path.as_bytes());
        hash.update((file.bytes.len() as u64).to_le_bytes());
        hash.update(&file.bytes);
    }
    format!("{:x}", hash.finalize())
}

/// Lay the example's files anew in `copy` (its earlier copy, with whatever a build left in it,
/// removed first). Each file is written, not copied, so it is writable as the shared data is
/// not: npm rewrites package-lock.json, componentize-py writes `__pycache__`.
fn write_copy(copy: &Path, files: &[SourceFile]) -> Result<(), String> {
    remove_dir(copy)?;
    for file in files {
        let path = copy.join(&file.relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("create {}: {e}", parent.display()))?;
        }
        std::fs::write(&path, &file.bytes).map_err(|e| format!("write {}: {e}", path.display()))?;
    }
    Ok(())
}

/// Remove the folders in `dir` whose names start with `prefix`.
fn remove_leftovers(dir: &Path, prefix: &str) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("read {}: {e}", dir.display()))?;
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with(prefix) {
            remove_dir(&entry.path())?;
        }
    }
    Ok(())
}

fn remove_dir(dir: &Path) -> Result<(), String> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(format!("remove {}: {e}", dir.display()))
        }
        _ => Ok(()),
    }
}

/// Run a step that needs a tool or a registry: its failure is `Err` (the test skips).
fn fetch_step(what: &str, cmd: &mut Command) -> Result<(), String> {
    crate::run_command(cmd).map_err(|e| format!("{what}: {e}"))
}

/// Run a build step whose tools and packages are all there: its failure is the test's.
fn build_step(what: &str, cmd: &mut Command) {
    if let Err(e) = crate::run_command(cmd) {
        panic!("{what} failed with its toolchain and packages in place: {e}");
    }
}

/// Take the component a build step wrote: its absence after the step succeeded is a broken
/// recipe, as the step's failure is.
fn copy_out(built: &Path, staged: &Path) {
    if let Err(e) = std::fs::copy(built, staged) {
        panic!(
            "the build succeeded, but copying {} to {} failed: {e}",
            built.display(),
            staged.display()
        );
    }
}

/// cargo for a crate of its own, with none of the settings of the `cargo test` that runs us.
fn cargo(dir: &Path) -> Command {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(dir);
    crate::cargo_env::clear_inherited(&mut cmd);
    cmd
}

/// The Rust examples share one target folder, `target/byo-target` (cargo locks it), and build
/// with their own Cargo.lock: its crates are fetched first (a registry step), then built offline.
/// The fetch is for every platform: `--target` would leave out what the build scripts and
/// proc macros need on the host.
fn build_rust(copy: &Path, target: &Path, artifact: &str, staged: &Path) -> Result<(), String> {
    fetch_step(
        "fetching the example's locked crates",
        cargo(copy).args(["fetch", "--locked"]),
    )?;
    let target_dir = target.join("byo-target");
    build_step(
        "cargo build of the example",
        cargo(copy)
            .args([
                "build",
                "--release",
                "--offline",
                "--locked",
                "--target",
                RUST_TARGET,
            ])
            .env("CARGO_TARGET_DIR", &target_dir),
    );
    copy_out(
        &target_dir
            .join(RUST_TARGET)
            .join("release")
            .join(format!("{artifact}.wasm")),
        staged,
    );
    Ok(())
}

/// The major version of the `node` in `dir` (PATH's when `None`), if it runs.
fn node_major(dir: Option<&Path>) -> Option<u32> {
    let node = dir.map_or_else(|| PathBuf::from("node"), |d| d.join("node"));
    let out = Command::new(node).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim()
        .strip_prefix('v')?
        .split('.')
        .next()?
        .parse()
        .ok()
}

/// PATH for npm: as it is when its `node` is new enough, else with the Node that
/// `tests/clients/install.sh` installs (npm `node@26`) first.
fn node_path() -> Result<std::ffi::OsString, String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    if node_major(None).is_some_and(|m| m >= MIN_NODE_MAJOR) {
        return Ok(path);
    }
    // Where install.sh looks for it (npm links the package's binary there).
    let installed = repo().join("target/mcp-clients/node_modules/.bin");
    if node_major(Some(&installed)).is_some_and(|m| m >= MIN_NODE_MAJOR) {
        let mut dirs = vec![installed];
        dirs.extend(std::env::split_paths(&path));
        return std::env::join_paths(dirs).map_err(|e| format!("PATH with {e}"));
    }
    Err(format!(
        "no Node.js {MIN_NODE_MAJOR} or newer on PATH nor from tests/clients/install.sh \
         (run `bash tests/clients/install.sh`)"
    ))
}

/// `npm install` in the copy (a registry step), then its package.json's build script, which
/// runs jco componentize.
fn build_js(copy: &Path, script: &str, built: &Path, staged: &Path) -> Result<(), String> {
    let path = node_path()?;
    fetch_step(
        "npm install",
        Command::new("npm")
            .current_dir(copy)
            .env("PATH", &path)
            .args(["install", "--no-audit", "--no-fund", "--loglevel=error"]),
    )?;
    build_step(
        &format!("npm run {script}"),
        Command::new("npm")
            .current_dir(copy)
            .env("PATH", &path)
            .args(["run", "--silent", script]),
    );
    copy_out(built, staged);
    Ok(())
}

/// componentize-py at eval-py's pinned version, in `target/byo/py-venv` (made once; callers
/// hold eval-py's lock, the venv's only user), then the example's own build command.
fn build_python(copy: &Path, cache: &Path, staged: &Path) -> Result<(), String> {
    let venv = cache.join("py-venv");
    let bin = venv.join("bin");
    let pinned = venv.join("pinned");
    if std::fs::read_to_string(&pinned).ok().as_deref() != Some(EVAL_PY_COMPONENTIZE) {
        remove_dir(&venv)?;
        fetch_step(
            "creating a Python venv",
            Command::new("python3").args(["-m", "venv"]).arg(&venv),
        )?;
        fetch_step(
            &format!("installing {EVAL_PY_COMPONENTIZE} from PyPI"),
            Command::new(bin.join("pip"))
                .args(["install", "--disable-pip-version-check", "--quiet"])
                .arg(EVAL_PY_COMPONENTIZE),
        )?;
        std::fs::write(&pinned, EVAL_PY_COMPONENTIZE)
            .map_err(|e| format!("write {}: {e}", pinned.display()))?;
    }
    build_step(
        "componentize-py",
        Command::new(bin.join("componentize-py"))
            .current_dir(copy)
            .args([
                "-d",
                "wit",
                "-w",
                "sandbox",
                "componentize",
                "-s",
                "main",
                "-o",
            ])
            .arg(staged),
    );
    Ok(())
}

/// Foreign components a host must refuse or stop, from WAT text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hostile {
    /// Imports `wasi:sockets/tcp@0.2.0` (a `connect` function, lowered and used by its core
    /// module) and exports `ok: func() -> string`.
    UngrantedImport,
    /// The same, importing the made-up `evil:net/raw` that no host provides.
    UnknownImport,
    /// Exports `fine: func(a: u8) -> u8` and `takes-resource: func(r: own<res>)`, with `res`
    /// a resource type the component defines and exports: no JSON value stands for a handle.
    Unrepresentable,
    /// A core module whose `(start)` function loops forever, lifted as a component exporting
    /// `f: func() -> u32`: instantiating it never ends unless fuel or a deadline stops it.
    SpinningStart,
}

impl Hostile {
    pub const ALL: [Hostile; 4] = [
        Hostile::UngrantedImport,
        Hostile::UnknownImport,
        Hostile::Unrepresentable,
        Hostile::SpinningStart,
    ];
}

/// A component that imports the instance `interface` with one function, calls it from the
/// core module, and exports `ok: func() -> string` (returning "ok" without calling it).
fn importing(interface: &str) -> String {
    format!(
        r#"(component
  (import "{interface}" (instance $net
    (export "connect" (func (param "port" u16) (result u32)))))
  (core func $connect (canon lower (func $net "connect")))
  (core module $m
    (import "net" "connect" (func $connect (param i32) (result i32)))
    (memory (export "memory") 1)
    (data (i32.const 16) "ok")
    (func (export "ok") (result i32)
      (i32.store (i32.const 0) (i32.const 16))
      (i32.store (i32.const 4) (i32.const 2))
      (i32.const 0))
    (func (export "dial") (result i32)
      (call $connect (i32.const 22))))
  (core instance $net_core (export "connect" (func $connect)))
  (core instance $i (instantiate $m (with "net" (instance $net_core))))
  (func (export "ok") (result string)
    (canon lift (core func $i "ok") (memory (core memory $i "memory")))))"#
    )
}

const UNREPRESENTABLE: &str = r#"(component
  (core module $m
    (func (export "fine") (param i32) (result i32) (local.get 0))
    (func (export "takes-resource") (param i32)))
  (core instance $i (instantiate $m))
  (type $res (resource (rep i32)))
  (export $res_export "res" (type $res))
  (func (export "fine") (param "a" u8) (result u8)
    (canon lift (core func $i "fine")))
  (func (export "takes-resource") (param "r" (own $res_export))
    (canon lift (core func $i "takes-resource"))))"#;

const SPINNING_START: &str = r#"(component
  (core module $m
    (func $spin (loop $forever (br $forever)))
    (start $spin)
    (func (export "f") (result i32) (i32.const 7)))
  (core instance $i (instantiate $m))
  (func (export "f") (result u32)
    (canon lift (core func $i "f"))))"#;

/// The binary of the hostile component `kind`.
pub fn hostile(kind: Hostile) -> Vec<u8> {
    let text = match kind {
        Hostile::UngrantedImport => importing("wasi:sockets/tcp@0.2.0"),
        Hostile::UnknownImport => importing("evil:net/raw"),
        Hostile::Unrepresentable => UNREPRESENTABLE.to_string(),
        Hostile::SpinningStart => SPINNING_START.to_string(),
    };
    // The text is this file's own: a parse error is a bug here, not a test outcome.
    wat::parse_str(&text).unwrap_or_else(|e| panic!("the {kind:?} WAT: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_hostile_component_validates_and_compiles() {
        let mut config = wasmtime::Config::new();
        config.wasm_component_model(true);
        let engine = wasmtime::Engine::new(&config).expect("an engine");
        for kind in Hostile::ALL {
            let bytes = hostile(kind);
            assert!(is_component(&bytes), "{kind:?} is not a component");
            wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all())
                .validate_all(&bytes)
                .unwrap_or_else(|e| panic!("{kind:?} does not validate: {e}"));
            let component = wasmtime::component::Component::new(&engine, &bytes)
                .unwrap_or_else(|e| panic!("wasmtime does not compile {kind:?}: {e}"));
            let ty = component.component_type();
            let exports: Vec<&str> = ty.exports(&engine).map(|(name, _)| name).collect();
            let imports: Vec<&str> = ty.imports(&engine).map(|(name, _)| name).collect();
            let (want_exports, want_imports): (&[&str], &[&str]) = match kind {
                Hostile::UngrantedImport => (&["ok"], &["wasi:sockets/tcp@0.2.0"]),
                Hostile::UnknownImport => (&["ok"], &["evil:net/raw"]),
                Hostile::Unrepresentable => (&["res", "fine", "takes-resource"], &[]),
                Hostile::SpinningStart => (&["f"], &[]),
            };
            assert_eq!(exports, want_exports, "{kind:?}'s exports");
            assert_eq!(imports, want_imports, "{kind:?}'s imports");
        }
    }

    #[test]
    fn a_node_in_a_folder_is_read_by_its_major_version() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("a temporary folder");
        let node = dir.path().join("node");
        std::fs::write(&node, "#!/bin/sh\necho v26.3.1\n").expect("write");
        std::fs::set_permissions(&node, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        assert_eq!(node_major(Some(dir.path())), Some(26));
        assert_eq!(node_major(Some(&dir.path().join("none"))), None);
    }

    #[test]
    fn a_copy_leaves_out_build_output_and_the_digest_follows_every_file() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let root = dir.path();
        std::fs::create_dir_all(root.join("src")).expect("mkdir");
        std::fs::create_dir_all(root.join("node_modules/x")).expect("mkdir");
        std::fs::create_dir_all(root.join("sub/target")).expect("mkdir");
        std::fs::write(root.join("src/lib.rs"), "fn a() {}").expect("write");
        std::fs::write(root.join("node_modules/x/i.js"), "x").expect("write");
        std::fs::write(root.join("sub/target/out.wasm"), "x").expect("write");
        std::fs::write(root.join("Cargo.toml"), "[package]").expect("write");
        let files = source_files(root).expect("listed");
        let names: Vec<_> = files.iter().map(|f| f.relative.clone()).collect();
        assert_eq!(
            names,
            [PathBuf::from("Cargo.toml"), PathBuf::from("src/lib.rs")]
        );
        let recipe = &Recipe::Python;
        let before = digest(recipe, &files);
        std::fs::write(root.join("node_modules/x/i.js"), "changed").expect("write");
        assert_eq!(digest(recipe, &source_files(root).expect("listed")), before);
        std::fs::write(root.join("src/lib.rs"), "fn b() {}").expect("write");
        assert_ne!(digest(recipe, &source_files(root).expect("listed")), before);
        std::fs::rename(root.join("src/lib.rs"), root.join("src/main.rs")).expect("rename");
        std::fs::write(root.join("src/main.rs"), "fn a() {}").expect("write");
        assert_ne!(
            digest(recipe, &source_files(root).expect("listed")),
            before,
            "a renamed file changes the digest"
        );

        let copy = root.join("copy");
        write_copy(&copy, &files).expect("copied");
        assert!(copy.join("src/lib.rs").is_file());
        assert!(!copy.join("node_modules").exists());
        let mode = std::fs::metadata(copy.join("Cargo.toml")).expect("stat");
        assert!(!mode.permissions().readonly(), "the copy is writable");
    }
}

//! Shared by the build scripts that compile guest components (`crates/vak-runtime/build.rs`, `tests/build.rs`).

use std::path::{Path, PathBuf};
use std::process::Command;

const TARGET: &str = "wasm32-wasip2";

/// The workspace root: the nearest folder above the crate being built whose Cargo.toml is the
/// workspace's.
fn workspace() -> PathBuf {
    let manifest = PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    );
    manifest
        .ancestors()
        .skip(1)
        .find(|d| {
            std::fs::read_to_string(d.join("Cargo.toml")).is_ok_and(|t| t.contains("[workspace]"))
        })
        .expect("the crate lives inside the workspace")
        .to_path_buf()
}

fn target_installed() -> bool {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        .is_some_and(|s| s.join("lib/rustlib").join(TARGET).is_dir())
}

/// Make sure the wasm target is installed: install it with rustup (for the toolchain this build
/// runs on, as `rust-toolchain.toml` asks), or fail with a message that says what to run.
fn require_target() {
    if target_installed() {
        return;
    }
    println!("cargo:warning=installing the {TARGET} target with `rustup target add {TARGET}`");
    let added = Command::new("rustup")
        .args(["target", "add", TARGET])
        .status()
        .is_ok_and(|s| s.success());
    if !added || !target_installed() {
        panic!(
            "\n\nvak builds its tools as WebAssembly components for the `{TARGET}` target, which is not installed\n\
             and could not be installed automatically. Install it with:\n\n    rustup target add {TARGET}\n\n\
             then run the same cargo command again.\n"
        );
    }
}

/// Build the guest packages `packages` (`(file name, package name)`) in release-like `guest`
/// profile and copy each component to `out/<file name>.wasm`.
pub fn build(packages: &[(&str, &str)], out: &Path) {
    let root = workspace();
    for dir in ["guest-sdk", "wit", "tools", "tests/guests", "build-support"] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
    println!("cargo:rerun-if-env-changed=VAK_GUEST_TARGET_DIR");
    println!("cargo:rerun-if-env-changed=VAK_BUILD_GUESTS");
    // The fuzz targets build vak-host on nightly and need none of its components: with
    // VAK_BUILD_GUESTS=0 each is an empty file, which admission refuses as not a component.
    if std::env::var_os("VAK_BUILD_GUESTS").is_some_and(|v| v == "0") {
        println!("cargo:warning=VAK_BUILD_GUESTS=0: the guest components are empty placeholders");
        std::fs::create_dir_all(out).expect("OUT_DIR is writable");
        for (name, _) in packages {
            std::fs::write(out.join(format!("{name}.wasm")), b"").expect("OUT_DIR is writable");
        }
        return;
    }
    require_target();
    let target_dir = std::env::var_os("VAK_GUEST_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target").join("guests"));

    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&root)
        .args([
            "build",
            "--profile",
            "guest",
            "--target",
            TARGET,
            "--target-dir",
        ])
        .arg(&target_dir);
    for (_, package) in packages {
        cmd.args(["-p", package]);
    }
    // What this build script inherited is for the host build, not for the guests.
    super::cargo_env::clear_inherited(&mut cmd);
    let status = cmd
        .status()
        .expect("could not run cargo to build the guest components");
    assert!(
        status.success(),
        "building the guest components for {TARGET} failed (see above)"
    );

    std::fs::create_dir_all(out).expect("create the output directory for components");
    for (file, package) in packages {
        let built = target_dir
            .join(TARGET)
            .join("guest")
            .join(format!("{}.wasm", package.replace('-', "_")));
        let dest = out.join(format!("{file}.wasm"));
        std::fs::copy(&built, &dest)
            .unwrap_or_else(|e| panic!("copy {} to {}: {e}", built.display(), dest.display()));
    }
}

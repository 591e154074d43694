//! A cargo started from a build or a test is a build of its own: what the outer cargo set for
//! itself (flags, target directory, jobserver) must not reach it.

use std::process::Command;

/// Remove from `cmd` the settings a nested cargo would otherwise inherit from the build or
/// test run that starts it.
pub fn clear_inherited(cmd: &mut Command) {
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_MAKEFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_PRIMARY_PACKAGE",
    ] {
        cmd.env_remove(var);
    }
}

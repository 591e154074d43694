//! Builds the bundled tools (`tools/*`) for `wasm32-wasip2` and puts the components in OUT_DIR,
//! where `src/bundled.rs` includes them. As wasmtime's `crates/test-programs` does, the guests are
//! built by a nested cargo in a separate target directory, so it never waits on this build's lock.

#[path = "../../build-support/cargo_env.rs"]
mod cargo_env;
#[path = "../../build-support/guests.rs"]
mod guests;

fn main() {
    let tools = [
        ("clock", "vak-tool-clock"),
        ("stats", "vak-tool-stats"),
        ("replace", "vak-tool-replace"),
        ("research", "vak-tool-research"),
        ("compare", "vak-tool-compare"),
    ];
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join("tools");
    guests::build(&tools, &out);
}

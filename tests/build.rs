//! Builds the guest components under `tests/guests/` and generates one constant per guest with
//! the path of its `.wasm`, so a test names the guest it runs (as wasmtime's test-programs do).
//! The guests are the workspace members under `tests/guests/` (the workspace's glob), found
//! from their manifests: a new guest is a folder, not a line here.

#[path = "../build-support/cargo_env.rs"]
mod cargo_env;
#[path = "../build-support/guests.rs"]
mod guests;

fn main() {
    let found = guest_packages();
    let packages: Vec<(&str, &str)> = found
        .iter()
        .map(|(file, package)| (file.as_str(), package.as_str()))
        .collect();
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let dir = out.join("guests");
    guests::build(&packages, &dir);
    let mut consts = String::new();
    for (file, _) in &packages {
        consts.push_str(&format!(
            "/// Path of the `{file}` guest component.\npub const {}: &str = {:?};\n",
            file.to_uppercase(),
            dir.join(format!("{file}.wasm")).display().to_string()
        ));
    }
    std::fs::write(out.join("guests.rs"), consts).expect("write guests.rs");
}

/// `(file, package)` of every package under `tests/guests/`: package `vak-guest-NAME` is the
/// file `NAME` (dashes as underscores), its constant `guests::NAME` in capitals.
fn guest_packages() -> Vec<(String, String)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("guests");
    println!("cargo:rerun-if-changed={}", root.display());
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&root).expect("tests/guests is readable") {
        let manifest = entry.expect("a folder entry").path().join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&manifest) else {
            continue;
        };
        let name = text
            .lines()
            .skip_while(|l| l.trim() != "[package]")
            .find_map(|l| {
                let (key, value) = l.split_once('=')?;
                (key.trim() == "name").then(|| value.trim().trim_matches('"').to_string())
            })
            .unwrap_or_else(|| panic!("{}: no package name", manifest.display()));
        let file = name
            .strip_prefix("vak-guest-")
            .unwrap_or_else(|| {
                panic!(
                    "{}: a test guest's package is named vak-guest-NAME",
                    manifest.display()
                )
            })
            .replace('-', "_");
        found.push((file, name));
    }
    found.sort();
    assert!(!found.is_empty(), "no guests under {}", root.display());
    found
}

//! The architecture's rules, checked from the code itself (docs/architecture.md draws them):
//!
//! - `vak-core`, the lifecycle's pure part, depends on no WebAssembly engine, async runtime,
//!   database driver, HTTP stack or capability-based file system, `vak-store` on no engine,
//!   HTTP stack or capability file system, and `vak-runtime` on no server or command-line
//!   crate (read from `cargo tree`);
//! - within each library crate, the top-level modules import one way: no circle of `crate::`
//!   imports between two or more of them (a module's own submodules may import each other);
//! - no source file of the libraries or the binary is over the size a reader can hold
//!   (`MAX_FILE_LINES`; tests and benchmark drivers aside).
//!
//! Run alone with `cargo test -p vak-tests --test architecture`; a failure names the
//! dependency path, the circle (with one import of each step), or the file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the workspace")
        .to_path_buf()
}

/// Crates `vak-core` must never depend on, directly or through another crate.
const NOT_IN_CORE: [&str; 8] = [
    "wasmtime",
    "wasmtime-wasi",
    "tokio",
    "rusqlite",
    "tokio-postgres",
    "hyper",
    "cap-std",
    "deadpool-postgres",
];

/// Crates `vak-store` must never depend on: the store keeps records, it runs no guest.
const NOT_IN_STORE: [&str; 4] = ["wasmtime", "wasmtime-wasi", "hyper", "cap-std"];

/// Crates `vak-runtime` must never depend on: it runs calls; serving them (MCP, web pages) and
/// the command line are the host's.
const NOT_IN_RUNTIME: [&str; 4] = ["rmcp", "clap", "maud", "tracing-subscriber"];

#[test]
fn the_core_depends_on_no_engine_runtime_or_store() {
    let reached = dependencies_without("vak-core", &NOT_IN_CORE);
    assert!(
        reached.contains("vak-core") && reached.contains("serde_json"),
        "cargo tree read: {reached:?}"
    );
}

#[test]
fn the_store_depends_on_no_engine_or_capability() {
    let reached = dependencies_without("vak-store", &NOT_IN_STORE);
    assert!(
        reached.contains("vak-core") && reached.contains("rusqlite"),
        "cargo tree read: {reached:?}"
    );
}

/// A host built without the `postgres` feature carries no PostgreSQL client at all.
#[test]
fn postgres_is_behind_a_feature() {
    let reached =
        dependencies_without_features("vak-host", &["tokio-postgres", "deadpool-postgres"]);
    assert!(
        reached.contains("vak-store") && reached.contains("rusqlite"),
        "cargo tree read: {reached:?}"
    );
    let with = dependencies_without("vak-host", &[]);
    assert!(with.contains("tokio-postgres"), "cargo tree read: {with:?}");
}

#[test]
fn the_runtime_depends_on_no_server_or_command_line() {
    let reached = dependencies_without("vak-runtime", &NOT_IN_RUNTIME);
    assert!(
        reached.contains("vak-store") && reached.contains("wasmtime"),
        "cargo tree read: {reached:?}"
    );
}

/// The crates `package` depends on (normal edges), asserting none is in `banned`; a failure
/// names the path to it.
fn dependencies_without(package: &str, banned: &[&str]) -> BTreeSet<String> {
    tree_without(package, banned, &[])
}

/// As [`dependencies_without`], for `package` built without its default features.
fn dependencies_without_features(package: &str, banned: &[&str]) -> BTreeSet<String> {
    tree_without(package, banned, &["--no-default-features"])
}

fn tree_without(package: &str, banned: &[&str], extra: &[&str]) -> BTreeSet<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    // `cargo tree` reads the lock file and the crates already fetched for this platform.
    let out = std::process::Command::new(cargo)
        .args([
            "tree",
            "-p",
            package,
            "-e",
            "normal",
            "--prefix",
            "depth",
            "--manifest-path",
        ])
        .arg(workspace().join("Cargo.toml"))
        .args(extra)
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Lines `<depth><name> v<version> …`; the path to each crate is the last name seen at
    // each smaller depth.
    let mut path: Vec<String> = Vec::new();
    let mut reached = BTreeSet::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let digits = line.chars().take_while(char::is_ascii_digit).count();
        let Ok(depth) = line[..digits].parse::<usize>() else {
            continue;
        };
        let name = line[digits..]
            .split(' ')
            .next()
            .unwrap_or_default()
            .to_string();
        path.truncate(depth);
        path.push(name.clone());
        assert!(
            !banned.contains(&name.as_str()),
            "{package} depends on {name}: {}",
            path.join(" → ")
        );
        reached.insert(name);
    }
    // The caller checks that the tree was read (a misread tree would pass vacuously).
    reached
}

/// The top-level modules of the crate rooted at `src`, each with the `crate::` modules it
/// imports and one line that shows each import.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut graph: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut files = Vec::new();
    collect_rs(src, &mut files);
    let modules: BTreeSet<String> = files.iter().filter_map(|f| top_module(src, f)).collect();
    for file in &files {
        let Some(module) = top_module(src, file) else {
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        let edges = graph.entry(module.clone()).or_default();
        // Tests may reach anywhere; what the module is made of is what precedes them.
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        if file.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        for line in code.lines() {
            let line = line.trim_start();
            if line.starts_with("//") {
                continue;
            }
            for target in crate_paths(line) {
                if target != module && modules.contains(&target) {
                    edges.entry(target).or_insert_with(|| {
                        format!(
                            "{}: {line}",
                            file.strip_prefix(workspace()).unwrap_or(file).display()
                        )
                    });
                }
            }
        }
    }
    graph
}

fn collect_rs(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect_rs(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `host/src/journal/log.rs` → `journal`; the crate roots belong to no module.
fn top_module(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(name, "lib" | "main")).then(|| name.to_string())
}

/// The modules a line names after `crate::`, including each in a `crate::{a, b::c}` group.
fn crate_paths(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (at, _) in line.match_indices("crate::") {
        if line[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
            continue; // `vak_crate::`, not this crate
        }
        let rest = &line[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0;
            let mut name = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.push(first_segment(name.trim()));
                        name.clear();
                    }
                    _ => name.push(c),
                }
            }
            if !name.trim().is_empty() {
                out.push(first_segment(name.trim()));
            }
        } else {
            out.push(first_segment(rest));
        }
    }
    out
}

fn first_segment(path: &str) -> String {
    path.chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// The circles of `graph` (strongly connected sets of two or more modules), each as a list of
/// the imports that tie it.
fn circles(graph: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<Vec<String>> {
    let names: Vec<&String> = graph.keys().collect();
    let reach = |from: &String| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(m) = stack.pop() {
            for next in graph.get(&m).into_iter().flat_map(|e| e.keys()) {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&String, BTreeSet<String>> =
        names.iter().map(|n| (*n, reach(n))).collect();
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for n in &names {
        if done.contains(*n) || !reached[n].contains(*n) {
            continue;
        }
        let members: BTreeSet<&String> = names
            .iter()
            .copied()
            .filter(|m| reached[n].contains(*m) && reached[m].contains(*n))
            .collect();
        let mut ties = Vec::new();
        for m in &members {
            for (to, line) in &graph[*m] {
                if members.contains(to) {
                    ties.push(format!("{m} → {to}   ({line})"));
                }
            }
        }
        done.extend(members.iter().map(|m| (*m).clone()));
        out.push(ties);
    }
    out
}

fn assert_acyclic(src: &str) {
    let graph = module_graph(&workspace().join(src));
    assert!(graph.len() > 2, "{src}: modules found: {:?}", graph.keys());
    let found = circles(&graph);
    assert!(
        found.is_empty(),
        "{src}: modules import each other in a circle:\n{}",
        found
            .iter()
            .map(|c| c.join("\n"))
            .collect::<Vec<_>>()
            .join("\n\n")
    );
}

#[test]
fn the_core_modules_import_one_way() {
    assert_acyclic("crates/vak-core/src");
}

#[test]
fn the_checker_finds_a_circle_and_reads_grouped_imports() {
    let edge = |to: &str| (to.to_string(), String::from("a line"));
    let graph = BTreeMap::from([
        ("a".to_string(), BTreeMap::from([edge("b")])),
        ("b".to_string(), BTreeMap::from([edge("a"), edge("c")])),
        ("c".to_string(), BTreeMap::new()),
    ]);
    assert_eq!(circles(&graph).len(), 1);
    assert_eq!(circles(&graph)[0].len(), 2);
    assert_eq!(
        crate_paths("use crate::{record::{A, B}, stage::Stage, digest};"),
        ["record", "stage", "digest"]
    );
    assert_eq!(crate_paths("let x = vak_crate::y + crate::z::w();"), ["z"]);
}

#[test]
fn the_store_modules_import_one_way() {
    assert_acyclic("crates/vak-store/src");
}

#[test]
fn the_runtime_modules_import_one_way() {
    assert_acyclic("crates/vak-runtime/src");
}

#[test]
fn the_host_modules_import_one_way() {
    assert_acyclic("host/src");
}

/// The most lines a source file may hold: what a reader takes in at one sitting ("about 700").
/// The libraries, the binary, the guest SDK, the tests and the benchmark drivers alike.
const MAX_FILE_LINES: usize = 720;

#[test]
fn no_source_file_is_too_long_to_read() {
    let mut files = Vec::new();
    for dir in [
        "crates",
        "host/src",
        "guest-sdk/src",
        "tests",
        "bench",
        "build-support",
    ] {
        collect_rs(&workspace().join(dir), &mut files);
    }
    assert!(files.len() > 150, "source files found: {}", files.len());
    let long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let lines = std::fs::read_to_string(f).unwrap().lines().count();
            (lines > MAX_FILE_LINES).then(|| format!("{}: {lines} lines", f.display()))
        })
        .collect();
    assert!(long.is_empty(), "over {MAX_FILE_LINES} lines: {long:#?}");
}

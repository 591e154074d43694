//! Tool authoring: `vak new` makes a project that builds, tests and answers `vak call` as it is;
//! `vak build` shows at once what the binary imports and whether the policy admits it.

use std::path::Path;
use std::process::{Command, Output};
use vak_tests::vak_binary;

/// Each test's project builds in a target folder of its own inside this workspace's, so that a
/// second run (and the native `cargo test`) is incremental and two tests never share artifacts.
fn target_dir(test: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/authoring")
        .join(test)
}

fn vak(test: &str, dir: &Path, args: &[&str]) -> Output {
    Command::new(vak_binary())
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target_dir(test))
        .env("VAK_CACHE_DIR", target_dir(test).join("aot"))
        .args(args)
        .output()
        .expect("vak runs")
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn a_new_rust_tool_builds_passes_its_test_and_answers_vak_call() {
    let base = tempfile::tempdir().unwrap();
    let made = vak("scaffold", base.path(), &["new", "greet"]);
    assert!(made.status.success(), "{}", text(&made));
    let project = base.path().join("greet");
    for file in ["Cargo.toml", "src/lib.rs", "policy.toml", "README.md"] {
        assert!(project.join(file).is_file(), "{file} missing");
    }
    // The same name again is refused, and nothing is overwritten.
    let again = vak("scaffold", base.path(), &["new", "greet"]);
    assert_eq!(again.status.code(), Some(3), "{}", text(&again));
    assert!(String::from_utf8_lossy(&again.stderr).contains("already exists"));

    // `vak build`: the component, and admission's verdict under the project's policy.
    let built = vak("scaffold", &project, &["build", "--json"]);
    assert!(built.status.success(), "{}", text(&built));
    let exam: serde_json::Value = serde_json::from_slice(&built.stdout).expect("JSON");
    assert_eq!(exam["verdict"]["verdict"], "admitted", "{exam:#}");
    assert_eq!(exam["descriptor"]["name"], "greet");
    let imports: Vec<&str> = exam["imports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["class"].as_str().unwrap())
        .collect();
    assert!(
        !imports.contains(&"capability"),
        "a tool that claims nothing imports no capability: {imports:?}"
    );

    // `vak call` on what was built, through the whole lifecycle.
    let wasm = std::path::PathBuf::from(exam["source"].as_str().unwrap());
    let folder = wasm.parent().unwrap().to_str().unwrap().to_string();
    let policy = project.join("policy.toml");
    let policy = policy.to_str().unwrap();
    let call = vak(
        "scaffold",
        &project,
        &[
            "--no-journal",
            "--tools",
            &folder,
            "--policy",
            policy,
            "call",
            "greet",
            r#"{"name":"Ada"}"#,
            "--json",
        ],
    );
    assert!(call.status.success(), "{}", text(&call));
    let record: serde_json::Value = serde_json::from_slice(&call.stdout).unwrap();
    assert_eq!(record["status"], "completed");
    assert_eq!(record["result"]["markdown"], "Hello, Ada!");
    let refused = vak(
        "scaffold",
        &project,
        &[
            "--no-journal",
            "--tools",
            &folder,
            "--policy",
            policy,
            "call",
            "greet",
            r#"{"nom":"Ada"}"#,
        ],
    );
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    assert!(
        String::from_utf8_lossy(&refused.stdout).contains("refused at schema"),
        "{}",
        text(&refused)
    );

    // The project's own test runs natively.
    let tested = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(&project)
        .env("CARGO_TARGET_DIR", target_dir("scaffold"))
        .args(["test", "--quiet"])
        .output()
        .unwrap();
    assert!(tested.status.success(), "{}", text(&tested));

    // A claim the policy does not grant: `vak build` says so at once, naming it.
    let lib = project.join("src/lib.rs");
    let source = std::fs::read_to_string(&lib).unwrap();
    std::fs::write(
        &lib,
        source.replace(
            "        Claims::new()\n",
            "        Claims::new().clock([\"UTC\"])\n",
        ),
    )
    .unwrap();
    let built = vak("scaffold", &project, &["build"]);
    assert_eq!(built.status.code(), Some(2), "{}", text(&built));
    let out = String::from_utf8_lossy(&built.stdout);
    assert!(
        out.contains("REFUSED [not_granted]") && out.contains("does not grant `clock`"),
        "{}",
        text(&built)
    );
}

/// The fenced blocks of `lang` in docs/authoring.md, in order.
fn doc_blocks(lang: &str) -> Vec<String> {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/authoring.md"))
            .expect("docs/authoring.md");
    let fence = format!("```{lang}\n");
    let mut blocks = Vec::new();
    let mut rest = doc.as_str();
    while let Some(start) = rest.find(&fence) {
        let body = &rest[start + fence.len()..];
        let end = body.find("```").expect("closed fence");
        blocks.push(body[..end].to_string());
        rest = &body[end..][3..];
    }
    blocks
}

#[test]
fn the_authoring_guide_runs_as_written() {
    let base = tempfile::tempdir().unwrap();
    let bin_dir = vak_binary().parent().unwrap().to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // The guide's commands, verbatim; the project's `target` is linked to a shared folder so the
    // build is incremental from one run to the next.
    let sh = &doc_blocks("sh")[0];
    let mut lines: Vec<String> = sh.lines().map(str::to_string).collect();
    assert!(lines[0].starts_with("vak new greet"), "{sh}");
    std::fs::create_dir_all(target_dir("guide")).unwrap();
    lines.insert(
        1,
        format!("ln -s {} greet/target", target_dir("guide").display()),
    );
    let script = format!("set -e\n{}\n", lines.join("\n"));
    let run = Command::new("bash")
        .current_dir(base.path())
        .env("PATH", &path)
        .env("VAK_CACHE_DIR", target_dir("guide").join("aot"))
        .env("VAK_STATE_DIR", base.path().join("state"))
        .env_remove("CARGO_TARGET_DIR")
        .args(["-c", &script])
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", text(&run));
    assert!(
        String::from_utf8_lossy(&run.stdout).contains("Hello, Ada!"),
        "{}",
        text(&run)
    );

    // The capability example with its policy: admitted, and its evidence upheld by a receipt.
    let project = base.path().join("greet");
    std::fs::write(project.join("src/lib.rs"), &doc_blocks("rust")[0]).unwrap();
    std::fs::write(project.join("policy.toml"), &doc_blocks("toml")[0]).unwrap();
    let built = vak("guide", &project, &["build", "--json"]);
    assert!(built.status.success(), "{}", text(&built));
    let exam: serde_json::Value = serde_json::from_slice(&built.stdout).unwrap();
    assert_eq!(
        exam["verdict"]["granted"],
        serde_json::json!(["clock"]),
        "{exam:#}"
    );
    let call = vak(
        "guide",
        &project,
        &[
            "--no-journal",
            "--tools",
            "target/wasm32-wasip2/release",
            "--policy",
            "policy.toml",
            "call",
            "greet",
            r#"{"name":"Ada"}"#,
            "--json",
        ],
    );
    assert!(call.status.success(), "{}", text(&call));
    let record: serde_json::Value = serde_json::from_slice(&call.stdout).unwrap();
    assert_eq!(record["status"], "completed", "{record:#}");
    assert_eq!(record["receipts"].as_array().unwrap().len(), 1);
    assert_eq!(record["evidence"][0]["support"], "supported", "{record:#}");
}

/// Run one of the guide's `sh` blocks verbatim in a fresh folder, with this `vak` (and `extra`)
/// first on PATH. Returns the folder and the output.
fn run_guide_block(index: usize, test: &str, extra: Option<&Path>) -> (tempfile::TempDir, Output) {
    let base = tempfile::tempdir().unwrap();
    let mut path = vak_binary().parent().unwrap().display().to_string();
    if let Some(extra) = extra {
        path = format!("{}:{path}", extra.display());
    }
    let path = format!("{path}:{}", std::env::var("PATH").unwrap_or_default());
    let sh = &doc_blocks("sh")[index];
    let run = Command::new("bash")
        .current_dir(base.path())
        .env("PATH", &path)
        .env("VAK_CACHE_DIR", target_dir(test).join("aot"))
        .env("VAK_STATE_DIR", base.path().join("state"))
        .args(["-c", &format!("set -e\n{sh}")])
        .output()
        .unwrap();
    (base, run)
}

/// After the guide's commands: the project's policy admits it, bad arguments are refused at
/// `schema`, a blank name is the tool's own error.
fn check_built_project(test: &str, project: &Path, name: &str) {
    let call = |args: &str| {
        vak(
            test,
            project,
            &[
                "--no-journal",
                "--tools",
                "build",
                "--policy",
                "policy.toml",
                "call",
                name,
                args,
                "--json",
            ],
        )
    };
    let refused = call(r#"{"nom":"Ada"}"#);
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    let record: serde_json::Value = serde_json::from_slice(&refused.stdout).unwrap();
    assert_eq!(record["stage"], "schema", "{record:#}");
    let blank = call(r#"{"name":"  "}"#);
    let record: serde_json::Value = serde_json::from_slice(&blank.stdout).unwrap();
    assert_eq!(record["status"], "tool_error", "{record:#}");
    assert_eq!(record["tool_error"]["code"], "empty-name", "{record:#}");
    // Imports: vak's interfaces only, no capability (none is claimed).
    let built = vak(test, project, &["build", "--json"]);
    assert!(built.status.success(), "{}", text(&built));
    let exam: serde_json::Value = serde_json::from_slice(&built.stdout).unwrap();
    for import in exam["imports"].as_array().unwrap() {
        assert_ne!(import["class"], "capability", "{exam:#}");
    }
}

#[test]
fn a_new_python_tool_runs_as_the_guide_says() {
    // The shared venv proves PyPI is reachable; the guide's `vak build` then makes the
    // project's own .venv (from pip's cache).
    if let Err(e) = vak_tests::python_toolchain() {
        vak_tests::skipped(format!(
            "componentize-py could not be installed from PyPI: {e}"
        ));
        return;
    }
    let (base, run) = run_guide_block(1, "python", None);
    assert!(run.status.success(), "{}", text(&run));
    let out = String::from_utf8_lossy(&run.stdout);
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(out.contains("Hello, Ada!"), "{}", text(&run));
    assert!(err.contains("installing componentize-py"), "{}", text(&run));
    assert!(
        err.contains("OK"),
        "the project's unittest ran: {}",
        text(&run)
    );
    let project = base.path().join("greet");
    assert!(project.join(".venv/bin/componentize-py").is_file());
    check_built_project("python", &project, "greet");
}

#[test]
fn a_new_javascript_tool_runs_as_the_guide_says() {
    let reachable = Command::new("npm")
        .args(["view", "@bytecodealliance/jco@1.35.0", "version"])
        .output();
    if !reachable.as_ref().is_ok_and(|o| o.status.success()) {
        vak_tests::skipped(format!(
            "npm or its registry is not reachable: {reachable:?}"
        ));
        return;
    }
    let (base, run) = run_guide_block(2, "js", None);
    assert!(run.status.success(), "{}", text(&run));
    let out = String::from_utf8_lossy(&run.stdout);
    assert!(out.contains("Hello, Ada!"), "{}", text(&run));
    assert!(
        out.contains("# pass 1"),
        "the project's node test ran: {}",
        text(&run)
    );
    check_built_project("js", &base.path().join("greet"), "greet");
}

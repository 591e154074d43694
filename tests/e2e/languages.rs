//! Tools in other languages on the same WIT: the JavaScript `tools/js-clock` (jco componentize)
//! built from source, admitted and called through the whole lifecycle. The toolchain is
//! installed by the test itself (npm, into target/lang); where the registry cannot be reached
//! the test says so and skips.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use vak_host::{EngineSettings, HostBuilder, Policy, Proposal, Status, Verdict};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cmd:?} failed ({:?}):\n{}\n{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// The world folder jco reads: the tool's own world, and vak's package as its dependency.
fn wit_dir(tool: &Path, work: &Path) -> PathBuf {
    let wit = work.join("wit");
    std::fs::create_dir_all(wit.join("deps/vak-tool")).unwrap();
    std::fs::copy(tool.join("world.wit"), wit.join("world.wit")).unwrap();
    std::fs::copy(
        repo().join("wit/vak-tool.wit"),
        wit.join("deps/vak-tool/vak-tool.wit"),
    )
    .unwrap();
    wit
}

#[tokio::test(flavor = "multi_thread")]
async fn a_javascript_tool_runs_through_the_whole_lifecycle() {
    let tool = repo().join("tools/js-clock");
    let work = repo().join("target/lang/js-clock");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::copy(tool.join("package.json"), work.join("package.json")).unwrap();
    if let Err(e) = run(Command::new("npm").current_dir(&work).args([
        "install",
        "--no-audit",
        "--no-fund",
        "--loglevel=error",
    ])) {
        eprintln!("SKIPPED: the JavaScript toolchain (jco from npm) could not be installed: {e}");
        return;
    }
    // The guide's excerpt of the tool is the tool's own code, so what it shows is what is built.
    let guide = std::fs::read_to_string(repo().join("docs/authoring.md")).unwrap();
    let source = std::fs::read_to_string(tool.join("tool.js")).unwrap();
    let excerpt = guide
        .split("```js\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("a js block");
    assert!(
        source.contains(excerpt),
        "docs/authoring.md's JavaScript differs from tools/js-clock/tool.js"
    );
    let wit = wit_dir(&tool, &work);
    let wasm = work.join("js-clock.wasm");
    run(Command::new("npx")
        .current_dir(&work)
        .arg("jco")
        .arg("componentize")
        .arg(tool.join("tool.js"))
        .arg("--wit")
        .arg(&wit)
        .args([
            "--world-name",
            "js-clock",
            "-d",
            "http",
            "-d",
            "fetch-event",
            "-o",
        ])
        .arg(&wasm))
    .expect("jco componentize builds the tool");

    let policy = "[tools.js_clock]\ncapabilities.clock = { zones = [\"UTC\"] }\n";
    let settings = EngineSettings {
        // A 12 MB StarlingMonkey component compiles in tens of seconds on a loaded 2-core
        // machine; this test is about the language, not the compile bound.
        compile_timeout: Duration::from_secs(600),
        cache_dir: Some(work.join("aot")),
        ..EngineSettings::default()
    };
    let host = HostBuilder::new()
        .policy(Policy::parse(policy, "test").unwrap())
        .cache_dir(settings.cache_dir.clone())
        .engine_settings(settings)
        .component("js-clock", std::fs::read(&wasm).unwrap())
        .build()
        .await
        .unwrap();
    let exam = &host.examinations()[0];
    assert!(
        matches!(&exam.verdict, Verdict::Admitted { granted } if granted.len() == 1),
        "{exam:#?}"
    );
    // Its imports: the one capability, and only WASI of the locked-down set.
    assert!(
        exam.imports
            .iter()
            .any(|i| i.name == "vak:tool/clock@0.2.0")
    );

    let r = host
        .call(Proposal::new("js_clock", r#"{"zone":"UTC"}"#))
        .await;
    assert_eq!(r.status, Status::Completed, "{}", r.to_json_pretty());
    assert_eq!(r.receipts.len(), 1);
    assert_eq!(
        r.evidence[0].support,
        vak_host::evidence::Support::Supported
    );
    assert_eq!(r.outcome["label"], "verified", "{}", r.to_json_pretty());

    // Wrong arguments never reach it; a zone outside the grant is its own tool error.
    let r = host.call(Proposal::new("js_clock", r#"{"zone":42}"#)).await;
    assert_eq!(r.status, Status::Refused);
    assert_eq!(r.stage, vak_host::Stage::Schema);
    let r = host
        .call(Proposal::new("js_clock", r#"{"zone":"Europe/Paris"}"#))
        .await;
    assert_eq!(r.status, Status::ToolError, "{}", r.to_json_pretty());
    assert_eq!(r.tool_error.as_ref().unwrap().code, "clock-unavailable");
}

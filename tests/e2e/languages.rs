//! Tools in other languages on the same WIT: the JavaScript `tools/js-clock` (jco componentize)
//! and the Python `tools/py-clock` (componentize-py), built from source, admitted and called
//! through the whole lifecycle. The toolchains are installed by the tests themselves (npm and
//! pip, into target/lang); where a registry cannot be reached the test says so and skips.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use vak_host::bench_support::RawCall;
use vak_host::{EngineSettings, HostBuilder, Policy, Proposal, Status, Verdict};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

use vak_tests::run_command as run;

/// The world folder jco reads: the tool's own world, and vak's package as its dependency.
fn wit_dir(tool: &Path, work: &Path) -> PathBuf {
    let wit = work.join("wit");
    std::fs::create_dir_all(wit.join("deps/vak-tool")).unwrap();
    std::fs::copy(tool.join("world.wit"), wit.join("world.wit")).unwrap();
    std::fs::write(
        wit.join("deps/vak-tool/vak-tool.wit"),
        vak_host::bindings::WIT_PACKAGE,
    )
    .unwrap();
    wit
}

/// The guide's first `lang` block is an excerpt of the tool's own source, so what it shows is
/// what is built.
fn assert_guide_shows(source: &Path, lang: &str) {
    let guide = std::fs::read_to_string(repo().join("docs/authoring.md")).unwrap();
    let code = std::fs::read_to_string(source).unwrap();
    let excerpt = guide
        .split(&format!("```{lang}\n"))
        .nth(1)
        .and_then(|b| b.split("```").next())
        .unwrap_or_else(|| panic!("docs/authoring.md has no {lang} block"));
    assert!(
        code.contains(excerpt),
        "docs/authoring.md's {lang} block differs from {}",
        source.display()
    );
}

/// The calls every clock tool answers alike: verified with its receipt upheld; a second call
/// in a fresh instance with a new receipt; wrong arguments refused at `schema` before the tool
/// runs; a zone outside the grant the tool's own error, with the refused reading's receipt.
async fn assert_clock_calls(host: &vak_host::Host, tool: &str) {
    let utc = || Proposal::new(tool, r#"{"zone":"UTC"}"#);
    let r = host.call(utc()).await;
    assert_eq!(r.status, Status::Completed, "{}", r.to_json_pretty());
    assert_eq!(r.receipts.len(), 1);
    assert_eq!(
        r.evidence[0].support,
        vak_host::evidence::Support::Supported
    );
    assert_eq!(
        r.outcome.as_ref().map(|o| o.label.as_str()),
        Some("verified"),
        "{}",
        r.to_json_pretty()
    );
    let again = host.call(utc()).await;
    assert_eq!(again.status, Status::Completed);
    assert_ne!(again.receipts[0].id, r.receipts[0].id);

    let r = host.call(Proposal::new(tool, r#"{"zone":42}"#)).await;
    assert_eq!(r.status, Status::Refused);
    assert_eq!(r.stage, vak_host::Stage::Schema);
    let r = host
        .call(Proposal::new(tool, r#"{"zone":"Europe/Paris"}"#))
        .await;
    assert_eq!(r.status, Status::ToolError, "{}", r.to_json_pretty());
    assert_eq!(r.tool_error.as_ref().unwrap().code, "clock-unavailable");
    assert_eq!(
        r.receipts.len(),
        1,
        "the refused reading leaves its receipt"
    );
}

/// A host whose policy grants `tool` the clock in UTC, with the component at `wasm` loaded;
/// asserts it was admitted with that one grant.
/// The default configuration takes as many calls of `tool` at once as it takes calls at all
/// (`max_concurrent_calls`): its instances, held together as calls in flight hold them, fit in
/// the engine's pool (a Python tool has 38 core instances, a JavaScript one ~10), so no call
/// of a Python or JavaScript tool is `busy` before a Rust tool's would be.
async fn assert_calls_at_once(host: &vak_host::Host, tool: &str) {
    let at_once = EngineSettings::default().max_concurrent_calls as usize;
    assert!(at_once >= 64, "{at_once}");
    let args = r#"{"zone":"UTC"}"#;
    let first = host.call(Proposal::new(tool, args)).await;
    let limits = first.limits.expect("a completed call has limits");
    let raw = RawCall::new(host, tool, args, limits).expect("the tool is admitted");
    if let Err(e) = raw.hold(at_once, || ()).await {
        panic!("{at_once} calls of {tool} at once: {e}");
    }
}

async fn admit_clock_tool(tool: &str, wasm: &Path, work: &Path) -> vak_host::Host {
    let policy = format!("[tools.{tool}]\ncapabilities.clock = {{ zones = [\"UTC\"] }}\n");
    let settings = EngineSettings {
        // A 12-18 MB JavaScript or Python component compiles in tens of seconds on a loaded
        // 2-core machine; these tests are about the language, not the compile bound.
        compile_timeout: Duration::from_secs(600),
        cache_dir: Some(work.join("aot")),
        ..EngineSettings::default()
    };
    let host = HostBuilder::new()
        .policy(Policy::parse(&policy, "test").unwrap())
        .cache_dir(settings.cache_dir.clone())
        .engine_settings(settings)
        .component(tool, std::fs::read(wasm).unwrap())
        .build()
        .await
        .unwrap();
    let exam = &host.examinations()[0];
    assert!(
        matches!(&exam.verdict, Verdict::Admitted { granted } if granted.len() == 1),
        "{exam:#?}"
    );
    host
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
        vak_tests::skipped(format!(
            "the JavaScript toolchain (jco from npm) could not be installed: {e}"
        ));
        return;
    }
    assert_guide_shows(&tool.join("tool.js"), "js");
    let wit = wit_dir(&tool, &work);
    // QuickJS (vak build's default), then StarlingMonkey: the same source, either engine.
    let engines: [(&str, &[&str]); 2] = [
        (
            "quickjs",
            &["--backend", "quickjs", "--backend-qjs-disable-async"],
        ),
        ("starlingmonkey", &["-d", "http", "-d", "fetch-event"]),
    ];
    for (engine, flags) in engines {
        let built = work.join(engine);
        std::fs::create_dir_all(&built).unwrap();
        let wasm = built.join("js-clock.wasm");
        run(Command::new("npx")
            .current_dir(&work)
            .arg("jco")
            .arg("componentize")
            .arg(tool.join("tool.js"))
            .arg("--wit")
            .arg(&wit)
            .args(["--world-name", "js-clock"])
            .args(flags)
            .arg("-o")
            .arg(&wasm))
        .unwrap_or_else(|e| panic!("jco componentize builds the tool with {engine}: {e}"));

        let host = admit_clock_tool("js_clock", &wasm, &built).await;
        let exam = &host.examinations()[0];
        // Its imports: the one capability, and only WASI of the locked-down set.
        assert!(
            exam.imports
                .iter()
                .any(|i| i.name == "vak:tool/clock@0.2.1"),
            "{engine}"
        );
        assert_clock_calls(&host, "js_clock").await;
        assert_calls_at_once(&host, "js_clock").await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_python_tool_runs_through_the_whole_lifecycle() {
    let tool = repo().join("tools/py-clock");
    let work = repo().join("target/lang/py-clock");
    std::fs::create_dir_all(&work).unwrap();
    let bin = match vak_tests::python_toolchain() {
        Ok(bin) => bin,
        Err(e) => {
            vak_tests::skipped(format!(
                "the Python toolchain (componentize-py from PyPI) could not be installed: {e}"
            ));
            return;
        }
    };
    assert_guide_shows(&tool.join("app.py"), "python");
    let wit = wit_dir(&tool, &work);
    let wasm = work.join("py-clock.wasm");
    // componentize-py imports the app, and its Python writes `__pycache__` beside the source
    // (PYTHONDONTWRITEBYTECODE is not honoured): it builds from a copy, so that the tree under
    // `tools/` (which vak-host's build script watches) is left as it was.
    let source = work.join("app");
    std::fs::create_dir_all(&source).unwrap();
    std::fs::copy(tool.join("app.py"), source.join("app.py")).unwrap();
    run(Command::new(bin.join("componentize-py"))
        .current_dir(&work)
        .arg("-d")
        .arg(&wit)
        .args(["-w", "py-clock", "componentize", "app", "-p"])
        .arg(&source)
        .arg("-o")
        .arg(&wasm)
        .arg("--stub-wasi"))
    .expect("componentize-py builds the tool");

    let host = admit_clock_tool("py_clock", &wasm, &work).await;
    let exam = &host.examinations()[0];
    // Stubbed WASI: the binary imports vak's interfaces and nothing else.
    let names: Vec<&str> = exam.imports.iter().map(|i| i.name.as_str()).collect();
    assert!(
        names.iter().all(|n| n.starts_with("vak:tool/")),
        "{names:?}"
    );
    assert!(names.contains(&"vak:tool/clock@0.2.1"), "{names:?}");

    assert_clock_calls(&host, "py_clock").await;
    assert_calls_at_once(&host, "py_clock").await;
}

//! `vak serve` under the official MCP clients: the Python SDK over stdio (both protocol eras) and
//! the conformance suite over streamable HTTP. `tests/clients/install.sh` (run by `.ci/run`)
//! installs them into `target/mcp-clients`; without them these tests say so and pass nothing.

use std::path::{Path, PathBuf};
use std::process::Command;
use vak_tests::{bundled, guest, guests};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

fn clients() -> PathBuf {
    std::env::var_os("VAK_MCP_CLIENTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target/mcp-clients"))
}

/// The `vak` binary built beside this test (cargo builds it for the host's own tests).
fn vak_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("test path");
    let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
    let bin = dir.join(format!("vak{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.is_file(),
        "{} is missing: run `cargo test` for the whole workspace",
        bin.display()
    );
    bin
}

fn skip(what: &str) {
    eprintln!(
        "SKIPPED: {what} is not installed; run tests/clients/install.sh (as .ci/run does) to test with it"
    );
}

#[test]
fn python_sdk_lists_and_calls_every_bundled_tool_in_both_eras() {
    let python = clients().join("venv/bin/python");
    if !python.is_file() {
        return skip("the Python MCP SDK");
    }
    let cache = tempfile::tempdir().unwrap();
    let out = Command::new(python)
        .arg(workspace().join("tests/clients/python_client.py"))
        .arg(vak_binary())
        .env("VAK_CACHE_DIR", cache.path().join("aot"))
        .output()
        .expect("run the Python client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "the Python MCP client failed:\n{stdout}"
    );
    assert!(stdout.contains(" passed, 0 failed"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread")]
async fn official_conformance_suite_passes_every_tool_scenario() {
    let node = clients().join("node_modules/.bin/node");
    let suite = clients().join("node_modules/@modelcontextprotocol/conformance/dist/index.js");
    if !node.is_file() || !suite.is_file() {
        return skip("the MCP conformance suite (with Node 26)");
    }
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("tools");
    std::fs::create_dir_all(&tools).unwrap();
    for (name, bytes) in [
        ("test_simple_text", guest(guests::CONF_SIMPLE_TEXT)),
        ("test_error_handling", guest(guests::CONF_ERROR_HANDLING)),
        ("test_tool_with_progress", guest(guests::CONF_PROGRESS)),
        ("clock", bundled("clock")),
    ] {
        std::fs::write(tools.join(format!("{name}.wasm")), bytes).unwrap();
    }
    std::fs::write(
        dir.path().join("policy.toml"),
        "[tools.test_simple_text]\n[tools.test_error_handling]\n[tools.test_tool_with_progress]\n\
         [tools.clock]\ncapabilities.clock = { zones = [\"*\"] }\n",
    )
    .unwrap();
    let mut server = tokio::process::Command::new(vak_binary())
        .arg("--tools")
        .arg(&tools)
        .arg("--policy")
        .arg(dir.path().join("policy.toml"))
        .arg("--cache-dir")
        .arg(dir.path().join("cache"))
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .args(["serve", "--http", "127.0.0.1:0"])
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn vak serve --http");
    let addr = {
        use tokio::io::AsyncBufReadExt;
        let mut lines = tokio::io::BufReader::new(server.stderr.take().unwrap()).lines();
        let addr = loop {
            let line = lines
                .next_line()
                .await
                .unwrap()
                .expect("vak serve prints its address");
            if let Some(a) = line.strip_prefix("vak: serving MCP at ") {
                break a.to_string();
            }
        };
        // Keep reading its log: a closed stderr would fail the server's next log line.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        addr
    };
    let results = dir.path().join("results");
    let out = tokio::process::Command::new(&node)
        .arg(&suite)
        .args(["server", "--url", &addr])
        .arg("--expected-failures")
        .arg(workspace().join("tests/clients/conformance-expected-failures.yml"))
        .arg("-o")
        .arg(&results)
        .output()
        .await
        .expect("run the conformance suite");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    server.kill().await.ok();
    assert!(
        out.status.success(),
        "the conformance suite found failures beyond tests/clients/conformance-expected-failures.yml"
    );
    // Every tool scenario vak can serve, by its checks.
    for scenario in [
        "server-initialize",
        "tools-list",
        "tools-call-simple-text",
        "tools-call-error",
        "tools-call-with-progress",
        "dns-rebinding-protection",
    ] {
        let checks = scenario_checks(&results, scenario);
        assert!(!checks.is_empty(), "scenario {scenario} ran no check");
        let failed: Vec<_> = checks.iter().filter(|c| c["status"] == "FAILURE").collect();
        assert!(failed.is_empty(), "{scenario} failed: {failed:?}");
    }
}

/// The checks the suite wrote for `scenario` (in `DIR/server-<scenario>-<time>/checks.json`).
fn scenario_checks(results: &Path, scenario: &str) -> Vec<serde_json::Value> {
    let prefix = format!("server-{scenario}-");
    std::fs::read_dir(results)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .filter_map(|e| std::fs::read_to_string(e.path().join("checks.json")).ok())
        .filter_map(|t| serde_json::from_str::<Vec<serde_json::Value>>(&t).ok())
        .flatten()
        .collect()
}

//! `vak serve` under the official MCP clients: the Python SDK over stdio (both protocol eras) and
//! the conformance suite over streamable HTTP. `tests/clients/install.sh` (run by `.ci/run`)
//! installs them into `target/mcp-clients`; without them these tests say so and pass nothing.

use std::path::{Path, PathBuf};
use std::process::Command;
use vak_tests::{bundled, guest, guests, serve_command, spawn_http, vak_binary};

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

fn skip(what: &str) {
    vak_tests::skipped(format!(
        "{what} is not installed; run tests/clients/install.sh (as .ci/run does) to test with it"
    ));
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

/// The conformance tools' policy (each gets what it claims, and nothing else), kept as a file
/// beside the expected failures so that anyone can serve exactly what the suite tests.
const CONFORMANCE_POLICY: &str = include_str!("../clients/conformance-policy.toml");

#[tokio::test(flavor = "multi_thread")]
async fn official_conformance_suite_passes_every_tool_scenario() {
    let node = clients().join("node_modules/.bin/node");
    let suite = clients().join("node_modules/@modelcontextprotocol/conformance/dist/index.js");
    if !node.is_file() || !suite.is_file() {
        return skip("the MCP conformance suite (with Node 26)");
    }
    let dir = tempfile::tempdir().unwrap();
    let cmd = serve_command(
        dir.path(),
        &[
            ("test_simple_text", guest(guests::CONF_SIMPLE_TEXT)),
            ("test_error_handling", guest(guests::CONF_ERROR_HANDLING)),
            ("test_tool_with_progress", guest(guests::CONF_PROGRESS)),
            ("test_image_content", guest(guests::CONF_IMAGE)),
            ("test_audio_content", guest(guests::CONF_AUDIO)),
            ("test_embedded_resource", guest(guests::CONF_RESOURCE)),
            ("test_multiple_content_types", guest(guests::CONF_MIXED)),
            ("test_tool_with_logging", guest(guests::CONF_LOGGING)),
            ("test_sampling", guest(guests::CONF_SAMPLING)),
            ("test_elicitation", guest(guests::CONF_ELICITATION)),
            (
                "test_elicitation_sep1034_defaults",
                guest(guests::CONF_ELICITATION_DEFAULTS),
            ),
            (
                "test_elicitation_sep1330_enums",
                guest(guests::CONF_ELICITATION_ENUMS),
            ),
            ("clock", bundled("clock")),
        ],
        CONFORMANCE_POLICY,
        &[],
        std::process::Stdio::null(),
    );
    let (mut server, addr) = spawn_http(cmd).await;
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
        "tools-call-image",
        "tools-call-audio",
        "tools-call-embedded-resource",
        "tools-call-mixed-content",
        "tools-call-with-logging",
        "logging-set-level",
        "tools-call-sampling",
        "tools-call-elicitation",
        "elicitation-sep1034-defaults",
        "elicitation-sep1330-enums",
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

/// The 2026-07-28 `input-required-result-*` scenarios of the suite's prerelease
/// (`conformance-next`, 0.2.0-alpha.12), one by one against `vak serve --http`: every scenario
/// passes but those that ask for what vak does not do, each failing by exactly the check named.
#[tokio::test(flavor = "multi_thread")]
async fn conformance_next_input_required_scenarios_pass() {
    let node = clients().join("node_modules/.bin/node");
    let suite = clients().join("node_modules/conformance-next/dist/index.js");
    if !node.is_file() || !suite.is_file() {
        return skip("the MCP conformance suite's prerelease (conformance-next, with Node 26)");
    }
    let dir = tempfile::tempdir().unwrap();
    let cmd = serve_command(
        dir.path(),
        &[
            ("ir_elicitation", guest(guests::CONF_IR_ELICITATION)),
            ("ir_sampling", guest(guests::CONF_IR_SAMPLING)),
            ("ir_request_state", guest(guests::CONF_IR_REQUEST_STATE)),
            ("ir_multi_round", guest(guests::CONF_IR_MULTI_ROUND)),
            ("ir_tampered", guest(guests::CONF_IR_TAMPERED)),
            ("ir_capabilities", guest(guests::CONF_IR_CAPABILITIES)),
        ],
        CONFORMANCE_POLICY,
        &[],
        std::process::Stdio::null(),
    );
    let (mut server, url) = spawn_http(cmd).await;
    // What vak does not do, and the one check each such scenario fails by.
    let not_done = [
        // The key of an input request is vak's (`elicitation-1`): a tool cannot name it
        // (`user_name`).
        ("basic-elicitation", "sep-2322-elicitation-incomplete"),
        // No `roots/list` requests.
        ("basic-list-roots", "sep-2322-list-roots-incomplete"),
        // One question per round (a tool asks one at a time), and no roots.
        (
            "multiple-input-requests",
            "sep-2322-multiple-inputs-incomplete",
        ),
        // No prompts.
        ("non-tool-request", "sep-2322-non-tool-incomplete"),
    ];
    let passing = [
        "basic-sampling",
        "request-state",
        "multi-round",
        "missing-input-response",
        "result-type",
        "unsupported-methods",
        "tampered-state",
        "capability-check",
        "ignore-extra-params",
        "validate-input",
    ];
    let results = dir.path().join("results");
    let (mut passed, mut total) = (0, 0);
    for scenario in passing
        .iter()
        .copied()
        .chain(not_done.iter().map(|(s, _)| *s))
    {
        let scenario = format!("input-required-result-{scenario}");
        let out = tokio::process::Command::new(&node)
            .arg(&suite)
            .args(["server", "--url", &url, "--scenario", &scenario])
            .args(["--spec-version", "2026-07-28", "-o"])
            .arg(&results)
            .output()
            .await
            .expect("run the conformance suite");
        println!("{}", String::from_utf8_lossy(&out.stdout));
        let checks = scenario_checks(&results, &scenario);
        assert!(!checks.is_empty(), "scenario {scenario} ran no check");
        let failed: Vec<&str> = checks
            .iter()
            .filter(|c| c["status"] == "FAILURE")
            .filter_map(|c| c["id"].as_str())
            .collect();
        let expected: Vec<&str> = not_done
            .iter()
            .filter(|(s, _)| scenario.ends_with(s))
            .map(|(_, check)| *check)
            .collect();
        assert_eq!(failed, expected, "{scenario}: {checks:?}");
        total += checks.len();
        passed += checks.iter().filter(|c| c["status"] != "FAILURE").count();
    }
    println!("input-required-result-* scenarios: {passed} of {total} checks pass");
    server.kill().await.ok();
}

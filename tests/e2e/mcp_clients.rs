//! `vak serve` under the official MCP clients: the Python SDK over stdio (both protocol eras), the
//! Python SDK driving 2026-07-28 input-required rounds (over stdio, and over HTTP across two nodes
//! of one PostgreSQL store), and the conformance suite over streamable HTTP. `tests/clients/install.sh` (run by `.ci/run`)
//! installs them into `target/mcp-clients`; without them these tests say so and pass nothing.

use std::path::{Path, PathBuf};
use std::process::Command;
use vak_tests::{bundled, guest, guests, serve_command, spawn_http, vak_binary, vak_in};

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

/// Every conformance tool (`tests/guests/conf-*`) under the name the policy gives it, and the
/// bundled `clock`.
fn conformance_tools() -> Vec<(&'static str, Vec<u8>)> {
    vec![
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
        ("ir_elicitation", guest(guests::CONF_IR_ELICITATION)),
        ("ir_sampling", guest(guests::CONF_IR_SAMPLING)),
        ("ir_list_roots", guest(guests::CONF_IR_LIST_ROOTS)),
        ("ir_multiple_inputs", guest(guests::CONF_IR_MULTIPLE_INPUTS)),
        ("ir_request_state", guest(guests::CONF_IR_REQUEST_STATE)),
        ("ir_multi_round", guest(guests::CONF_IR_MULTI_ROUND)),
        ("ir_tampered", guest(guests::CONF_IR_TAMPERED)),
        ("ir_capabilities", guest(guests::CONF_IR_CAPABILITIES)),
        ("missing_capability", guest(guests::CONF_MISSING_CAPABILITY)),
        (
            "streaming_elicitation",
            guest(guests::CONF_STREAMING_ELICITATION),
        ),
        ("logging_tool", guest(guests::CONF_LOGGING_TOOL)),
        ("json_schema", guest(guests::CONF_JSON_SCHEMA)),
        ("custom_header", guest(guests::CONF_CUSTOM_HEADER)),
        ("clock", bundled("clock")),
    ]
}

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
        &conformance_tools(),
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

/// The scenarios a revision requires (`conformance server --requirements REV`, the suite's
/// prerelease `conformance-next`, 0.2.0-alpha.12) against `vak serve --http` with every
/// conformance tool: every scenario passes but those listed, with the reason, in
/// `tests/clients/conformance-expected-failures-REV.yml`, and each listed one does fail. Returns
/// the suite's count of checks passed, and of checks in all.
async fn requirement_set(revision: &str) -> Option<(usize, usize)> {
    let node = clients().join("node_modules/.bin/node");
    let suite = clients().join("node_modules/conformance-next/dist/index.js");
    if !node.is_file() || !suite.is_file() {
        skip("the MCP conformance suite's prerelease (conformance-next, with Node 26)");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let cmd = serve_command(
        dir.path(),
        &conformance_tools(),
        CONFORMANCE_POLICY,
        &[],
        std::process::Stdio::null(),
    );
    let (mut server, url) = spawn_http(cmd).await;
    let expected = workspace().join(format!(
        "tests/clients/conformance-expected-failures-{revision}.yml"
    ));
    let results = dir.path().join("results");
    let out = tokio::process::Command::new(&node)
        .arg(&suite)
        .args(["server", "--url", &url, "--requirements", revision])
        .arg("--expected-failures")
        .arg(&expected)
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
        "--requirements {revision}: failures beyond {}",
        expected.display()
    );
    // A listed scenario that passes is a list out of date.
    let listed = std::fs::read_to_string(&expected).expect("the expected failures");
    for scenario in listed.lines().filter_map(|l| l.trim().strip_prefix("- ")) {
        let checks = scenario_checks(&results, scenario);
        assert!(
            checks
                .iter()
                .any(|c| c["status"] == "FAILURE" || c["status"] == "WARNING"),
            "{scenario} is listed as failing in {} but passes: {checks:?}",
            expected.display()
        );
    }
    // The suite's own count of the set: `Total: P passed, F failed`.
    let total = stdout
        .lines()
        .find_map(|l| l.strip_prefix("Total: "))
        .expect("the suite prints its total");
    let count = |word: &str| -> usize {
        total
            .split(", ")
            .find_map(|part| part.strip_suffix(word)?.trim().parse().ok())
            .unwrap_or(0)
    };
    let (passed, failed) = (count(" passed"), count(" failed"));
    println!(
        "--requirements {revision}: {passed} of {} checks pass",
        passed + failed
    );
    Some((passed, passed + failed))
}

/// The 2026-07-28 set: stateless requests, input-required rounds (forms, completions, roots,
/// several in one round, many rounds, tampered states), the `server-stateless` diagnostics, JSON
/// Schema 2020-12 and the HTTP header checks, `x-mcp-header` ones (SEP-2243) among them.
#[tokio::test(flavor = "multi_thread")]
async fn conformance_requirements_2026_07_28_pass() {
    if let Some((passed, total)) = requirement_set("2026-07-28").await {
        // What fails is listed: prompts, resources, completions and the unscored extensions.
        assert!(passed >= 141, "{passed} of {total}");
    }
}

/// The 2025-11-25 set: the handshake era, with server requests during a call.
#[tokio::test(flavor = "multi_thread")]
async fn conformance_requirements_2025_11_25_pass() {
    if let Some((passed, total)) = requirement_set("2025-11-25").await {
        assert!(passed >= 71, "{passed} of {total}");
    }
}

/// The elicitation and sampling tools of the input-required rounds, with their grants.
const ROUNDS_POLICY: &str = r#"
[tools.test_sampling]
capabilities.client = { requests = ["sampling"] }
[tools.test_elicitation]
capabilities.client = { requests = ["elicitation"] }
"#;

fn rounds_tools() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("test_elicitation", guest(guests::CONF_ELICITATION)),
        ("test_sampling", guest(guests::CONF_SAMPLING)),
    ]
}

/// `tests/clients/python_rounds.py ARGS`: what it printed, once it passed every check.
async fn python_rounds(python: &Path, args: &[&std::ffi::OsStr]) -> String {
    let out = tokio::process::Command::new(python)
        .arg(workspace().join("tests/clients/python_rounds.py"))
        .args(args)
        .output()
        .await
        .expect("run the Python rounds client");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    println!("{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the Python rounds client failed");
    assert!(stdout.contains(" passed, 0 failed"), "{stdout}");
    stdout
}

/// The rounds the script sent, per tool in order: `(node, call id)` of each.
fn rounds_sent(stdout: &str) -> Vec<(String, Vec<(String, String)>)> {
    let mut tools: Vec<(String, Vec<(String, String)>)> = Vec::new();
    for line in stdout.lines().filter_map(|l| l.strip_prefix("round ")) {
        let [tool, n, node, call_id] = line.split(' ').collect::<Vec<_>>()[..] else {
            panic!("a round line names tool, round, node and call: {line}");
        };
        if tools.last().is_none_or(|(t, _)| t != tool) {
            tools.push((tool.to_string(), Vec::new()));
        }
        let rounds = &mut tools.last_mut().expect("pushed above").1;
        assert_eq!(n, (rounds.len() + 1).to_string(), "{stdout}");
        rounds.push((node.to_string(), call_id.to_string()));
    }
    tools
}

/// The record of `call_id` as `vak audit show` prints it from `vak`'s store, with where it
/// says the entry is (its stderr); waited for while the server indexes it.
fn shown(mut vak: impl FnMut() -> Command, call_id: &str) -> (serde_json::Value, String) {
    for _ in 0..50 {
        let out = vak()
            .args(["audit", "show", call_id])
            .output()
            .expect("vak audit show");
        let record: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        if out.status.success() && record["status"] != "started" {
            return (record, String::from_utf8_lossy(&out.stderr).to_string());
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    panic!("no record of {call_id}");
}

/// Each tool took two rounds, each on record, the second linked to the first; returns the
/// stderr of `vak audit show` for every round, in order.
fn check_round_records(
    stdout: &str,
    mut vak: impl FnMut() -> Command,
    nodes: [&str; 2],
) -> Vec<String> {
    let sent = rounds_sent(stdout);
    let tools: Vec<_> = sent.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(tools, ["test_elicitation", "test_sampling"], "{stdout}");
    let mut places = Vec::new();
    for (tool, rounds) in &sent {
        let sent_to: Vec<_> = rounds.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(sent_to, nodes, "{tool}: {stdout}");
        let (first, second) = (&rounds[0].1, &rounds[1].1);
        let (r1, place1) = shown(&mut vak, first);
        assert_eq!(r1["tool"], tool.as_str(), "{r1}");
        assert_eq!(r1["error"]["kind"], "input_required", "{r1}");
        assert_eq!(
            r1["round"],
            serde_json::json!({ "round": 1, "previous_call_id": null })
        );
        let (r2, place2) = shown(&mut vak, second);
        assert_eq!(r2["status"], "completed", "{r2}");
        assert_eq!(
            r2["round"],
            serde_json::json!({ "round": 2, "previous_call_id": first })
        );
        // The client's answer, as the SDK's callback gave it, in the round's receipt.
        let (operation, field, value) = match tool.as_str() {
            "test_elicitation" => ("elicit", "/outcome/content/email", "ada@example.org"),
            _ => ("sample", "/outcome/text", "Paris"),
        };
        assert!(
            r2["receipts"].as_array().is_some_and(|all| all
                .iter()
                .any(|r| r["operation"] == operation && r.pointer(field) == Some(&value.into()))),
            "the answer has a receipt: {r2}"
        );
        assert!(
            place2.contains("input-required rounds") && place2.contains(first.as_str()),
            "vak audit show gives the round chain: {place2}"
        );
        places.extend([place1, place2]);
    }
    places
}

/// A signing key made by `vak keygen` in `dir`: nodes given it open each other's states.
fn keygen(dir: &Path) -> PathBuf {
    let key = dir.join("host.key");
    let made = Command::new(vak_binary())
        .arg("keygen")
        .arg(&key)
        .output()
        .expect("vak keygen");
    assert!(made.status.success(), "{made:?}");
    key
}

/// The Python SDK, stateless, answers an elicitation tool's form and a sampling tool's
/// completion over input-required rounds sent alternately to two `vak serve --http` nodes of one
/// PostgreSQL store: round 1 to node a, round 2 to node b; each round is a record in its node's
/// chain, the second linked to the first.
#[tokio::test(flavor = "multi_thread")]
async fn python_sdk_drives_input_required_rounds_across_two_nodes_of_one_postgres_store() {
    let python = clients().join("venv/bin/python");
    if !python.is_file() {
        return skip("the Python MCP SDK");
    }
    let Some(cluster) = vak_tests::pg_cluster() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let key = keygen(dir.path());
    let store = cluster.url();
    let mut nodes = Vec::new();
    for name in ["a", "b"] {
        let mut cmd = serve_command(
            &dir.path().join(name),
            &rounds_tools(),
            ROUNDS_POLICY,
            &["--store", &store, "--node", name],
            std::process::Stdio::null(),
        );
        cmd.env("VAK_SIGNING_KEY_FILE", &key);
        nodes.push(spawn_http(cmd).await);
    }
    let stdout = python_rounds(
        &python,
        &["http".as_ref(), nodes[0].1.as_ref(), nodes[1].1.as_ref()],
    )
    .await;
    let vak = || {
        let mut cmd = Command::new(vak_binary());
        cmd.args(["--store", &store]);
        cmd
    };
    let places = check_round_records(&stdout, vak, ["a", "b"]);
    // Round 1 in node a's chain, round 2 in node b's.
    for (i, place) in places.iter().enumerate() {
        let chain = if i % 2 == 0 { "chain a #" } else { "chain b #" };
        assert!(place.contains(chain), "round {}: {place}", i % 2 + 1);
    }
    for (mut child, _) in nodes {
        child.kill().await.ok();
    }
}

/// The same over stdio: one `vak serve` takes the client's headerless 2026-07-28 requests.
#[tokio::test(flavor = "multi_thread")]
async fn python_sdk_drives_input_required_rounds_over_stdio() {
    let python = clients().join("venv/bin/python");
    if !python.is_file() {
        return skip("the Python MCP SDK");
    }
    let dir = tempfile::tempdir().unwrap();
    // Writes the tools and the policy; the script starts `vak … serve` itself.
    drop(serve_command(
        dir.path(),
        &rounds_tools(),
        ROUNDS_POLICY,
        &[],
        std::process::Stdio::null(),
    ));
    let vak = vak_in(dir.path());
    let mut args: Vec<&std::ffi::OsStr> = vec!["stdio".as_ref(), vak.get_program()];
    args.extend(vak.get_args());
    let stdout = python_rounds(&python, &args).await;
    check_round_records(&stdout, || vak_in(dir.path()), ["stdio", "stdio"]);
}

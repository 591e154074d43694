//! `vak policy import` as a person runs it (issue 35): Wassette's fetch-rs policy.yaml becomes
//! TOML on stdout that vak's policy parser and `vak policy check` accept, granting each named
//! tool the origin the policy names; a file that is not YAML exits 3 and says so.

use std::path::{Path, PathBuf};
use std::process::Command;
use vak_tests::{skipped, vak_binary};

/// Wassette's example policy for `name`, in the shared test data beside the worktree.
fn example(name: &str) -> Option<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/byo/wassette-8940e27")
        .join(name)
        .join("policy.yaml");
    if path.is_file() {
        Some(path)
    } else {
        skipped(format!("{} is missing", path.display()));
        None
    }
}

#[test]
fn fetch_rs_policy_becomes_a_vak_policy_granting_its_origin() {
    let Some(file) = example("fetch-rs") else {
        return;
    };
    let out = Command::new(vak_binary())
        .args(["policy", "import"])
        .arg(&file)
        .args(["--tool", "fetch", "--tool", "fetch-json"])
        .output()
        .expect("run vak policy import");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    assert!(!stderr.contains("not translated"), "{stderr}");
    let toml = String::from_utf8(out.stdout).expect("UTF-8 TOML");
    let policy =
        vak_host::Policy::parse(&toml, "imported").unwrap_or_else(|e| panic!("{e}\n{toml}"));
    for tool in ["fetch", "fetch-json"] {
        let http = policy
            .grant(tool)
            .and_then(|g| g.http())
            .unwrap_or_else(|| panic!("{tool} is granted http:\n{toml}"));
        let origins: Vec<_> = http
            .origins
            .iter()
            .map(|o| (o.text.as_str(), o.host.as_str(), o.path_prefix.as_str()))
            .collect();
        assert_eq!(
            origins,
            [("https://rss.nytimes.com", "rss.nytimes.com", "/")]
        );
    }

    // What it printed is a policy file `vak policy check` accepts.
    let dir = tempfile::tempdir().expect("temp dir");
    let saved = dir.path().join("policy.toml");
    std::fs::write(&saved, &toml).expect("write the policy");
    let check = Command::new(vak_binary())
        .args(["policy", "check"])
        .arg(&saved)
        .output()
        .expect("run vak policy check");
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    assert!(String::from_utf8_lossy(&check.stdout).contains("rss.nytimes.com"));
}

#[test]
fn a_file_that_is_not_yaml_exits_3_and_says_so() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("policy.yaml");
    std::fs::write(&file, "version: \"1.0\"\npermissions: [\n").expect("write");
    let out = Command::new(vak_binary())
        .args(["policy", "import"])
        .arg(&file)
        .args(["--tool", "fetch"])
        .output()
        .expect("run vak policy import");
    assert_eq!(out.status.code(), Some(3));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not YAML"), "{stderr}");
}

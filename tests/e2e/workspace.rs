//! The workspace capability: edits inside granted roots with receipts and verification; every
//! way out of a root refused, with a receipt of the refusal.

use vak_host::evidence::Support;
use vak_host::{Host, Proposal, Status};
use vak_tests::{bundled, guest, guests, host_with};

struct Fixture {
    _dir: tempfile::TempDir,
    project: std::path::PathBuf,
    host: Host,
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path();
    let project = base.join("project");
    let docs = base.join("docs");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::create_dir_all(base.join("project-evil")).unwrap();
    std::fs::write(project.join("main.txt"), "hello world, hello vak\n").unwrap();
    std::fs::write(docs.join("guide.txt"), "read me\n").unwrap();
    std::fs::write(base.join("secret.txt"), "top secret\n").unwrap();
    std::fs::write(base.join("project-evil/x.txt"), "sibling\n").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(base.join("secret.txt"), project.join("out")).unwrap();
    let policy = format!(
        r#"
[tools.replace]
capabilities.workspace = {{ roots = [{{ name = "project", path = "{p}", mode = "read-write" }}] }}

[tools.files]
capabilities.workspace = {{ roots = [
  {{ name = "project", path = "{p}", mode = "read-write" }},
  {{ name = "docs", path = "{d}" }},
] }}
"#,
        p = project.display(),
        d = docs.display()
    );
    let cache = base.join("cache");
    let host = host_with(
        &[
            ("replace", bundled("replace")),
            ("files", guest(guests::FILES)),
        ],
        &policy,
        &cache,
    )
    .await;
    assert!(
        host.tool("replace").is_some() && host.tool("files").is_some(),
        "{:#?}",
        host.examinations()
    );
    Fixture {
        _dir: dir,
        project,
        host,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_edit_carries_read_write_and_read_back_receipts() {
    let f = fixture().await;
    let before = vak_host::digest::sha256_hex(&std::fs::read(f.project.join("main.txt")).unwrap());
    let r = f
        .host
        .call(Proposal::new(
            "replace",
            r#"{"root":"project","path":"main.txt","find":"hello","replace":"bye"}"#,
        ))
        .await;
    assert_eq!(r.status, Status::Completed, "{}", r.to_json_pretty());
    let now = std::fs::read_to_string(f.project.join("main.txt")).unwrap();
    assert_eq!(now, "bye world, bye vak\n");
    let after = vak_host::digest::sha256_hex(now.as_bytes());
    let ops: Vec<&str> = r.receipts.iter().map(|x| x.operation.as_str()).collect();
    assert_eq!(ops, ["read", "write", "read"]);
    assert_eq!(r.receipts[0].digest, before);
    assert_eq!(r.receipts[1].digest, after);
    assert_eq!(r.receipts[1].outcome["previous_sha256"], before.as_str());
    assert!(
        r.evidence.iter().all(|e| e.support == Support::Supported),
        "{}",
        r.to_json_pretty()
    );
    let payload: serde_json::Value =
        serde_json::from_str(r.result.as_ref().unwrap().payload_json.as_deref().unwrap()).unwrap();
    assert_eq!(payload["files"][0]["before_sha256"], before.as_str());
    assert_eq!(payload["verification"]["matches"], true);
}

#[tokio::test(flavor = "multi_thread")]
async fn every_way_out_of_a_root_is_refused_with_a_receipt() {
    let f = fixture().await;
    let cases = [
        (
            r#"{"op":"read","root":"project","path":"../secret.txt"}"#,
            "invalid",
        ),
        (
            r#"{"op":"read","root":"project","path":"/etc/passwd"}"#,
            "invalid",
        ),
        (
            r#"{"op":"read","root":"project","path":"../project-evil/x.txt"}"#,
            "invalid",
        ),
        (r#"{"op":"read","root":"project","path":"out"}"#, "denied"),
        (
            r#"{"op":"write","root":"project","path":"out","content":"pwned"}"#,
            "denied",
        ),
        (
            r#"{"op":"write","root":"docs","path":"guide.txt","content":"pwned"}"#,
            "denied",
        ),
        (r#"{"op":"read","root":"home","path":"x"}"#, "denied"),
        (r#"{"op":"list","root":"project","path":".."}"#, "invalid"),
    ];
    for (args, code) in cases {
        let r = f.host.call(Proposal::new("files", args)).await;
        assert_eq!(
            r.status,
            Status::ToolError,
            "{args}: {}",
            r.to_json_pretty()
        );
        assert_eq!(
            r.tool_error.as_ref().unwrap().code,
            code,
            "{args}: {}",
            r.to_json_pretty()
        );
        assert_eq!(r.receipts.len(), 1, "{args}");
        assert!(!r.receipts[0].ok, "{args}");
    }
    let secret = std::fs::read_to_string(f._dir.path().join("secret.txt")).unwrap();
    assert_eq!(secret, "top secret\n", "nothing outside a root was touched");
    let guide = std::fs::read_to_string(f._dir.path().join("docs/guide.txt")).unwrap();
    assert_eq!(guide, "read me\n");

    // What is allowed still works.
    let r = f
        .host
        .call(Proposal::new(
            "files",
            r#"{"op":"read","root":"docs","path":"guide.txt"}"#,
        ))
        .await;
    assert_eq!(r.status, Status::Completed, "{}", r.to_json_pretty());
    let r = f
        .host
        .call(Proposal::new(
            "files",
            r#"{"op":"list","root":"project","path":""}"#,
        ))
        .await;
    assert_eq!(r.result.unwrap().markdown, "main.txt,out");
}

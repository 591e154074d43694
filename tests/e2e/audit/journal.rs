//! The journal the `vak audit serve` tests read: real calls through a host that journals them
//! (completed with receipts, a tool error, refusals at the proposal and schema stages, arguments
//! carrying markup and a terminal escape).
#![allow(dead_code)]

use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use vak_host::journal::{Durability, Journal};
use vak_host::{CallRecord, HostBuilder, Policy, Proposal, Status};
use vak_tests::bundled;
/// The calls of a journal a test makes: which id is which.
pub struct Calls {
    pub completed: CallRecord,
    pub edit: CallRecord,
    pub tool_error: CallRecord,
    pub unknown_tool: CallRecord,
    pub hostile: CallRecord,
}

/// What a model put in a call's arguments: markup that, were it ever parsed as HTML, would run
/// (and set a flag a browser test looks for), and a terminal escape.
pub const INJECTED: &str = "<script>alert(1)</script><script>document.documentElement.setAttribute('data-pwned','1')</script><img src=x onerror=\"document.documentElement.setAttribute('data-pwned','1')\">\u{1b}[31m";

/// Real calls into the journal at `state/journal.sqlite`, through a host that journals them.
pub async fn make_journal(dir: &Path) -> Calls {
    let project = dir.join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("a.txt"), "hello\n").unwrap();
    let journal =
        Arc::new(Journal::open(&dir.join("state/journal.sqlite"), Durability::Committed).unwrap());
    let policy = format!(
        "[tools.stats]\n\n[tools.replace]\ncapabilities.workspace = {{ roots = [{{ name = \"project\", path = \"{}\", mode = \"read-write\" }}] }}\n",
        project.display()
    );
    let host = HostBuilder::new()
        .policy(Policy::parse(&policy, "test policy").unwrap())
        .cache_dir(Some(dir.join("cache")))
        .journal(journal.clone())
        .component("stats", bundled("stats"))
        .component("replace", bundled("replace"))
        .build()
        .await
        .unwrap();
    let call = |tool: &str, args: serde_json::Value| Proposal::new(tool, args.to_string());
    let completed = host
        .session(Some("alice"))
        .call(call("stats", json!({ "values": [1, 2, 3] })))
        .await;
    assert_eq!(completed.status, Status::Completed, "{completed:?}");
    let edit = host
        .call(call(
            "replace",
            json!({ "root": "project", "path": "a.txt", "find": "hello", "replace": "bye" }),
        ))
        .await;
    assert_eq!(edit.status, Status::Completed, "{edit:?}");
    assert!(!edit.receipts.is_empty(), "an edit has receipts");
    let tool_error = host.call(call("stats", json!({ "values": [] }))).await;
    assert_eq!(tool_error.status, Status::ToolError, "{tool_error:?}");
    let unknown_tool = host.call(call("no_such_tool", json!({}))).await;
    assert_eq!(unknown_tool.status, Status::Refused, "{unknown_tool:?}");
    let hostile = host
        .call(call("stats", json!({ "values": INJECTED })))
        .await;
    assert_eq!(hostile.status, Status::Refused, "{hostile:?}");
    assert!(
        hostile
            .arguments
            .as_ref()
            .is_some_and(|a| a.to_string().contains("<script>")),
        "the refused call's arguments are recorded as proposed: {hostile:?}"
    );
    drop(host);
    drop(journal);
    Calls {
        completed,
        edit,
        tool_error,
        unknown_tool,
        hostile,
    }
}

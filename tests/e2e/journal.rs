//! The journal's promise, no effect without its record, held by real processes: several `vak
//! serve` and `vak call` processes on one state directory, all journaling at once in chains of
//! their own; a `kill -9` mid-call that leaves an interrupted call, not a silent one; and a call
//! whose write-ahead entry cannot be written, refused before its tool runs.

use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use vak_host::journal::{Durability, Filter, Journal, Kind};
use vak_host::{HostBuilder, Policy, Proposal, Status};
use vak_tests::mcp::Client;
use vak_tests::{bundled, guest, guests, serve_command, vak_in};

#[path = "journal/without_journal.rs"]
mod without_journal;

/// `replace` may edit the files of `project`; `hostile` may sleep up to a minute.
fn policy(project: &Path) -> String {
    format!(
        r#"
[tools.replace]
capabilities.workspace = {{ roots = [{{ name = "project", path = "{}", mode = "read-write" }}] }}

[tools.stats]

[tools.hostile]
capabilities.clock = {{ zones = ["UTC"] }}
capabilities.log = {{}}
caps = {{ wall_time_ms = 60_000 }}
"#,
        project.display()
    )
}

fn tools() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("replace", bundled("replace")),
        ("stats", bundled("stats")),
        ("hostile", guest(guests::HOSTILE)),
    ]
}

fn edit(file: &str) -> Value {
    json!({ "root": "project", "path": file, "find": "hello", "replace": "bye" })
}

fn tool_call(name: &str, arguments: Value) -> Value {
    json!({ "name": name, "arguments": arguments })
}

/// The files each caller edits: `<caller>_<n>.txt`, each holding `hello` until edited.
fn make_files(project: &Path, caller: &str, n: usize) {
    for i in 0..n {
        std::fs::write(project.join(format!("{caller}_{i}.txt")), "hello\n").unwrap();
    }
}

/// Edits through one `vak serve`, one at a time, until `until`: the files edited and the call
/// ids the server acknowledged for them.
async fn serve_loop(
    mut client: Client,
    caller: String,
    until: Instant,
) -> (Client, Vec<(String, String)>) {
    let mut acknowledged = Vec::new();
    let mut i = 0;
    while Instant::now() < until {
        let file = format!("{caller}_{i}.txt");
        let r = client
            .request("tools/call", tool_call("replace", edit(&file)))
            .await;
        assert_eq!(r["result"]["isError"], false, "{caller}: {r}");
        let id = r["result"]["_meta"]["dev.vak/call_id"]
            .as_str()
            .unwrap_or_else(|| panic!("{caller}: no call id in {r}"))
            .to_string();
        acknowledged.push((id, file));
        i += 1;
    }
    (client, acknowledged)
}

/// Edits through `vak call` processes, one after another, until `until`.
fn call_loop(dir: PathBuf, caller: String, until: Instant) -> Vec<(String, String)> {
    let mut acknowledged = Vec::new();
    let mut i = 0;
    while Instant::now() < until {
        let file = format!("{caller}_{i}.txt");
        let out = vak_in(&dir)
            .args(["call", "replace", &edit(&file).to_string(), "--json"])
            .output()
            .expect("run vak call");
        let printed = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{caller}: {printed}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_str(&printed).expect("vak call --json prints JSON");
        let record = if v.is_array() { v[0].clone() } else { v };
        assert_eq!(record["status"], "completed", "{record}");
        let id = record["call_id"].as_str().expect("a call id").to_string();
        acknowledged.push((id, file));
        i += 1;
    }
    acknowledged
}

/// A temporary folder with `tools()` and their policy written where `vak_in` reads them (as a
/// server started there would), and the project folder `replace` may edit.
fn prepared() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    drop(serve_command(
        dir.path(),
        &tools(),
        &policy(&project),
        &[],
        std::process::Stdio::null(),
    ));
    (dir, project)
}

fn client_of(child: &mut tokio::process::Child) -> Client {
    let stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");
    Client::new(stdout, stdin)
}

/// Three `vak serve` and two `vak call` loops on one state directory, editing distinct files
/// at once; one server killed with `kill -9` in the middle of a call. Then every acknowledged
/// call has its record, every changed file a record with the receipt of its write, the call
/// the killed server was running shows as `interrupted`, and `vak audit verify` passes over
/// every chain.
#[tokio::test(flavor = "multi_thread")]
async fn several_processes_journal_at_once_and_a_kill_leaves_an_interrupted_call() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    let policy = policy(&project);
    let callers_of_serve = ["s0", "s1"];
    let callers_of_call = ["c0", "c1"];
    for c in callers_of_serve {
        make_files(&project, c, 2000);
    }
    for c in callers_of_call {
        make_files(&project, c, 200);
    }
    // The tools and policy the processes share, written; the compile cache warmed by one
    // `vak call` first.
    drop(serve_command(
        dir.path(),
        &tools(),
        &policy,
        &[],
        std::process::Stdio::null(),
    ));
    let spawn = || {
        serve_command(
            dir.path(),
            &tools(),
            &policy,
            &[],
            std::process::Stdio::null(),
        )
        .spawn()
        .expect("spawn vak serve")
    };
    let warm = vak_in(dir.path())
        .args(["call", "stats", r#"{"values":[1]}"#])
        .output()
        .unwrap();
    assert!(warm.status.success(), "{warm:?}");

    let mut serves: Vec<_> = (0..3).map(|_| spawn()).collect();
    let mut clients: Vec<Client> = serves.iter_mut().map(client_of).collect();
    for c in &mut clients {
        c.initialize("2025-11-25").await;
    }
    let mut killed_client = clients.pop().expect("a third client");
    let journal_path = dir.path().join("state/journal.sqlite");
    let reader = Journal::open(&journal_path, Durability::Committed).unwrap();

    let started = Instant::now();
    let until = started + Duration::from_secs(2);
    let serve_tasks: Vec<_> = clients
        .into_iter()
        .zip(callers_of_serve)
        .map(|(c, caller)| tokio::spawn(serve_loop(c, caller.to_string(), until)))
        .collect();
    let call_tasks: Vec<_> = callers_of_call
        .iter()
        .map(|caller| {
            let (dir, caller) = (dir.path().to_path_buf(), caller.to_string());
            tokio::task::spawn_blocking(move || call_loop(dir, caller, until))
        })
        .collect();

    // The third server runs a call that sleeps; once it is running, the server is killed.
    killed_client
        .start(
            "tools/call",
            tool_call("hostile", json!({ "mode": "sleep" })),
        )
        .await;
    let running = Filter {
        tool: Some("hostile".into()),
        status: Some("running".into()),
        ..Filter::default()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while reader.list(&running).unwrap().is_empty() {
        assert!(Instant::now() < deadline, "the sleeping call never ran");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut victim = serves.pop().expect("the third server");
    victim.start_kill().expect("kill -9");
    victim.wait().await.ok();
    eprintln!("killed a server mid-call after {:?}", started.elapsed());

    let mut acknowledged: Vec<(String, String)> = Vec::new();
    for t in serve_tasks {
        let (client, done) = t.await.unwrap();
        drop(client);
        acknowledged.extend(done);
    }
    for t in call_tasks {
        acknowledged.extend(t.await.unwrap());
    }
    for mut s in serves {
        // Its client is gone: the server ends; a `kill -9` if it lingers.
        if tokio::time::timeout(Duration::from_secs(10), s.wait())
            .await
            .is_err()
        {
            s.start_kill().ok();
            s.wait().await.ok();
        }
    }
    eprintln!(
        "{} calls acknowledged by 5 processes in {:?}",
        acknowledged.len(),
        started.elapsed()
    );
    let by_caller = |prefix: &str| {
        acknowledged
            .iter()
            .filter(|(_, f)| f.starts_with(prefix))
            .count()
    };
    for caller in callers_of_serve.iter().chain(&callers_of_call) {
        assert!(by_caller(caller) > 0, "{caller} made no call");
    }

    let journal = Journal::open(&journal_path, Durability::Committed).unwrap();
    // Every acknowledged call has its record.
    let mut written: HashMap<String, String> = HashMap::new(); // file -> call id
    for (id, _) in &acknowledged {
        let shown = journal.show(id).unwrap();
        assert!(
            shown.len() == 1 && shown[0].kind == Kind::Record && shown[0].check.is_ok(),
            "acknowledged call {id} has no record that checks out: {shown:?}"
        );
        assert_eq!(shown[0].status, "completed");
        let record: Value = serde_json::from_str(&shown[0].text).unwrap();
        for r in record["receipts"].as_array().into_iter().flatten() {
            if r["operation"] == "write"
                && r["ok"] == true
                && let Some(path) = r["request"]["path"].as_str()
            {
                written.insert(path.to_string(), id.clone());
            }
        }
    }
    // Every changed file has a record with the receipt of its write.
    let mut changed = 0;
    for entry in std::fs::read_dir(&project).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        if std::fs::read_to_string(entry.path()).unwrap() != "hello\n" {
            changed += 1;
            assert!(
                written.contains_key(&name),
                "{name} changed without a record of its write"
            );
        }
    }
    assert_eq!(changed, acknowledged.len(), "one file changed per call");
    let ids: HashSet<&String> = acknowledged.iter().map(|(id, _)| id).collect();
    assert_eq!(ids.len(), acknowledged.len(), "call ids are unique");

    // The killed server's call shows as interrupted, in `vak audit` and its verify.
    let interrupted = journal
        .list(&Filter {
            status: Some("interrupted".into()),
            ..Filter::default()
        })
        .unwrap();
    assert_eq!(interrupted.len(), 1, "{interrupted:?}");
    assert_eq!(interrupted[0].tool, "hostile");
    let v = journal.verify(None).unwrap();
    assert_eq!(v.first_bad, None);
    assert_eq!(v.interrupted.len(), 1, "{v:?}");
    assert!(v.running.is_empty(), "{v:?}");
    assert!(
        v.heads.len() >= 3,
        "a chain per writing process at once: {v:?}"
    );
    let out = vak_in(dir.path())
        .args(["audit", "verify"])
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{printed}");
    assert!(printed.contains("1 calls interrupted"), "{printed}");
    let out = vak_in(dir.path())
        .args(["audit", "--status", "interrupted"])
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{printed}");
    assert!(
        printed.contains("hostile") && printed.contains("interrupted"),
        "{printed}"
    );
    eprintln!(
        "{} entries in {} chains; the whole test took {:?}",
        v.entries,
        v.heads.len(),
        started.elapsed()
    );
}

/// A call whose `started` entry cannot be written is refused before its tool runs: here the
/// journal's chains folder cannot be made (a file holds its name). The `replace` call is
/// refused with `journal_unavailable` at the budget stage, retryable, and the file it would
/// have edited is unchanged.
#[tokio::test(flavor = "multi_thread")]
async fn a_call_whose_started_entry_cannot_be_written_does_not_run() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("a.txt"), "hello\n").unwrap();
    let path = dir.path().join("journal.sqlite");
    let journal = std::sync::Arc::new(Journal::open(&path, Durability::Committed).unwrap());
    std::fs::write(dir.path().join("journal.sqlite-chains"), "in the way").unwrap();
    let mut builder = HostBuilder::new()
        .policy(Policy::parse(&policy(&project), "test policy").unwrap())
        .cache_dir(Some(dir.path().join("cache")))
        .journal(journal.clone());
    for (name, bytes) in tools() {
        builder = builder.component(name, bytes);
    }
    let host = builder.build().await.unwrap();
    let r = host
        .call(Proposal::new("replace", edit("a.txt").to_string()))
        .await;
    let error = r.error.as_ref().expect("refused");
    assert_eq!(
        (
            r.status,
            error.kind.as_str(),
            error.stage.as_str(),
            error.retryable
        ),
        (Status::Refused, "journal_unavailable", "budget", true),
        "{}",
        r.to_json_pretty()
    );
    assert!(r.receipts.is_empty() && r.usage.fuel == 0, "nothing ran");
    assert_eq!(
        std::fs::read_to_string(project.join("a.txt")).unwrap(),
        "hello\n",
        "the file is unchanged"
    );

    // Once the journal can be written again, the same call runs: its `started` entry first,
    // then its record, in one chain.
    std::fs::remove_file(dir.path().join("journal.sqlite-chains")).unwrap();
    let r = host
        .call(Proposal::new("replace", edit("a.txt").to_string()))
        .await;
    assert_eq!(r.status, Status::Completed, "{}", r.to_json_pretty());
    let entry = r.journaled.clone().expect("journaled").expect("written");
    let (chain, at) = entry.node.expect("a chain");
    let v = journal.verify(Some(&host.public_key())).unwrap();
    assert_eq!((v.started, v.first_bad.clone()), (1, None), "{v:?}");
    assert!(v.interrupted.is_empty() && v.running.is_empty());
    let conn = rusqlite::Connection::open(&path).unwrap();
    let kinds: Vec<(String, i64)> = conn
        .prepare("SELECT kind, chain_seq FROM records WHERE call_id = ?1 ORDER BY chain_seq")
        .unwrap()
        .query_map([&r.call_id], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        kinds,
        [("started".to_string(), at - 1), ("record".to_string(), at)],
        "chain {chain}"
    );
}

/// `vak audit show` checks the entry it prints, finds a call by the provider's id as well as
/// vak's, and lists every call a provider's id names; an entry changed in the database is
/// printed with a warning and exit status 1.
#[test]
fn audit_show_checks_what_it_prints_and_takes_either_id() {
    let (dir, _project) = prepared();
    // A model that gave two tool calls one id.
    let document = json!({ "content": [
        { "type": "tool_use", "id": "toolu_same", "name": "stats", "input": { "values": [1, 2] } },
        { "type": "tool_use", "id": "toolu_same", "name": "stats", "input": { "values": [3] } },
    ]});
    let file = dir.path().join("proposal.json");
    std::fs::write(&file, document.to_string()).unwrap();
    let out = vak_in(dir.path())
        .args(["call", "--proposal"])
        .arg(&file)
        .arg("--json")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let records: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ids: Vec<String> = records
        .as_array()
        .expect("two records")
        .iter()
        .map(|r| r["call_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 2);
    let vak = |args: &[&str]| {
        let o = vak_in(dir.path()).args(args).output().unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).to_string(),
            String::from_utf8_lossy(&o.stderr).to_string(),
        )
    };

    let (code, out, err) = vak(&["audit", "show", &ids[0]]);
    assert_eq!(code, Some(0), "{out}{err}");
    let shown: Value = serde_json::from_str(&out).expect("the record, as JSON");
    assert_eq!(shown["provider_call_id"], "toolu_same");
    assert!(err.contains("checks out"), "{err}");

    let (code, out, err) = vak(&["audit", "show", "toolu_same"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        ids.iter().all(|id| out.contains(id.as_str())),
        "every call with the provider's id: {out}"
    );
    assert!(err.contains("2 calls have the provider call id"), "{err}");

    // An entry changed in the database: shown with a warning, exit status 1.
    let conn = rusqlite::Connection::open(dir.path().join("state/journal.sqlite")).unwrap();
    let changed = conn
        .execute(
            "UPDATE records SET record = replace(record, '\"status\":\"completed\"', '\"status\":\"refused\"')
             WHERE call_id = ?1 AND kind = 'record'",
            [&ids[1]],
        )
        .unwrap();
    assert_eq!(changed, 1);
    let (code, out, err) = vak(&["audit", "show", &ids[1]]);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(
        err.contains("WARNING") && err.contains("does not check out"),
        "{err}"
    );
    let (code, out, _) = vak(&["audit", "show", "toolu_same"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("DOES NOT CHECK OUT"), "{out}");
    let (code, out, _) = vak(&["audit", "verify"]);
    assert_eq!(code, Some(1), "{out}");
}

/// `--signing checkpoints`: `vak call` processes, one after another on one state directory
/// (each taking the chain the one before let go), print their records unsigned; the journal
/// signs them in checkpoints, so `vak audit show` and `vak audit verify` check every one, beside
/// a record signed on its own by a process with `--signing records`. An unsigned record changed
/// in the database, its chain hashed again so that the chain alone still links, fails both.
#[test]
fn records_written_unsigned_are_verified_through_their_checkpoints() {
    let (dir, _project) = prepared();
    let call = |signing: &str, n: u32| -> Value {
        let out = vak_in(dir.path())
            .args(["--signing", signing, "call", "stats"])
            .arg(json!({ "values": [n] }).to_string())
            .arg("--json")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let unsigned: Vec<Value> = (1..=3).map(|n| call("checkpoints", n)).collect();
    assert!(
        unsigned.iter().all(|r| r["signature"].is_null()),
        "{unsigned:?}"
    );
    let signed = call("records", 4);
    assert!(signed["signature"].is_object(), "{signed}");
    let vak = |args: &[&str]| {
        let o = vak_in(dir.path()).args(args).output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        (o.status.code(), text)
    };
    for r in &unsigned {
        let (code, out) = vak(&["audit", "show", r["call_id"].as_str().unwrap()]);
        assert_eq!(code, Some(0), "{out}");
        assert!(out.contains("checks out"), "{out}");
    }
    let (code, out) = vak(&["audit", "verify"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("journal ok: 8 entries"), "{out}");

    // Exported with its proof, a record checks out alone; altered, it does not. A record signed
    // by itself is exported as it is.
    let exported = |id: &str| {
        let o = vak_in(dir.path())
            .args(["audit", "show", id, "--proof"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
        serde_json::from_slice::<Value>(&o.stdout).unwrap()
    };
    let proof = exported(unsigned[0]["call_id"].as_str().unwrap());
    assert_eq!(proof["format"], "vak.entry-proof/1", "{proof}");
    let as_is = exported(signed["call_id"].as_str().unwrap());
    assert_eq!(as_is["call_id"], signed["call_id"]);
    let key = proof["checkpoint"]["public_key"]
        .as_str()
        .unwrap()
        .to_string();
    let file = dir.path().join("exported.json");
    std::fs::write(&file, json!([proof, as_is]).to_string()).unwrap();
    let file = file.to_str().unwrap();
    let (code, out) = vak(&["verify", file]);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(out.matches("ok   call_").count(), 2, "{out}");
    let (code, out) = vak(&["verify", file, "--key", &key]);
    assert_eq!(
        code,
        Some(1),
        "the record signed by another process's key: {out}"
    );
    assert_eq!(
        out.matches("ok   call_").count(),
        1,
        "the proof, by this key: {out}"
    );
    let mut altered = proof.clone();
    altered["text"] = json!(proof["text"].as_str().unwrap().replacen(
        "\"status\":\"completed\"",
        "\"status\":\"refused\"",
        1
    ));
    let mut rehashed = altered.clone();
    let text = rehashed["text"].as_str().unwrap().to_string();
    rehashed["hash"] = json!(vak_host::journal::chain::entry_hash(
        proof["prev_hash"].as_str().unwrap(),
        Some(proof["chain"].as_str().unwrap()),
        proof["entry"].as_i64().unwrap(),
        &text
    ));
    for (bad, why) in [
        (altered, "does not match its hash"),
        (rehashed, "not among those its checkpoint signs"),
    ] {
        std::fs::write(file, bad.to_string()).unwrap();
        let (code, out) = vak(&["verify", file]);
        assert_eq!(code, Some(1), "{out}");
        assert!(out.contains(why), "{out}");
    }

    // The second call's record made to say it was refused, and its chain hashed again.
    let path = dir.path().join("state/journal.sqlite");
    let conn = rusqlite::Connection::open(&path).unwrap();
    let rows: Vec<(i64, String, i64, String, String)> = conn
        .prepare(
            "SELECT seq, chain, chain_seq, call_id, record FROM records ORDER BY chain, chain_seq",
        )
        .unwrap()
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let target = unsigned[1]["call_id"].as_str().unwrap();
    let mut prev = String::new();
    let mut changed = false;
    for (seq, chain, chain_seq, call_id, text) in rows {
        if chain_seq == 1 {
            prev = vak_host::journal::chain::GENESIS.to_string();
        }
        let text = if call_id == target && text.contains("\"status\":\"completed\"") {
            changed = true;
            text.replacen("\"status\":\"completed\"", "\"status\":\"refused\"", 1)
        } else {
            text
        };
        let hash = vak_host::journal::chain::entry_hash(&prev, Some(&chain), chain_seq, &text);
        conn.execute(
            "UPDATE records SET record = ?1, prev_hash = ?2, hash = ?3 WHERE seq = ?4",
            rusqlite::params![text, prev, hash, seq],
        )
        .unwrap();
        prev = hash;
    }
    assert!(changed, "the record says completed");
    let (code, out) = vak(&["audit", "show", target]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("signs other entries"), "{out}");
    let (code, out) = vak(&["audit", "verify"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("signs other entries"), "{out}");
}

/// Over MCP, a result's `_meta["dev.vak/journal"]` gives the record's place in its chain and
/// says what signs it: the record itself by default, a checkpoint with `--signing
/// checkpoints`; the entry it names is the call's, and checks out once the server is gone,
/// whether its client left or a SIGTERM ended it.
#[tokio::test(flavor = "multi_thread")]
async fn an_mcp_result_names_its_journal_entry_and_what_signs_it() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    for (signing, signed_by) in [("records", "record"), ("checkpoints", "checkpoint")] {
        let mut server = serve_command(
            dir.path(),
            &tools(),
            &policy(&project),
            &["--signing", signing],
            std::process::Stdio::null(),
        )
        .spawn()
        .expect("spawn vak serve");
        let mut client = client_of(&mut server);
        client.initialize("2025-11-25").await;
        let r = client
            .request(
                "tools/call",
                tool_call("stats", json!({ "values": [1, 2] })),
            )
            .await;
        let meta = &r["result"]["_meta"];
        let place = &meta["dev.vak/journal"];
        assert_eq!(place["signed_by"], signed_by, "{r}");
        let hash = place["hash"].as_str().expect("the entry's hash");
        // A SIGTERM, the client still there, ends the server as its client's going does: its
        // last entries are signed before it exits.
        let client = if signing == "checkpoints" {
            let pid = server.id().expect("a pid").to_string();
            let killed = std::process::Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .unwrap();
            assert!(killed.success());
            Some(client)
        } else {
            drop(client);
            None
        };
        let status = tokio::time::timeout(Duration::from_secs(20), server.wait())
            .await
            .expect("the server ends with its client, or on SIGTERM")
            .unwrap();
        assert!(status.success(), "{status:?}");
        drop(client);
        let conn = rusqlite::Connection::open(dir.path().join("state/journal.sqlite")).unwrap();
        let (call_id, chain, entry): (String, String, i64) = conn
            .query_row(
                "SELECT call_id, chain, chain_seq FROM records WHERE hash = ?1",
                [hash],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
            )
            .expect("the entry _meta names");
        assert_eq!(call_id, meta["dev.vak/call_id"].as_str().unwrap());
        assert_eq!(
            (place["chain"].as_str(), place["entry"].as_i64()),
            (Some(chain.as_str()), Some(entry))
        );
        let out = vak_in(dir.path())
            .args(["audit", "show", &call_id])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    let out = vak_in(dir.path())
        .args(["audit", "verify"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

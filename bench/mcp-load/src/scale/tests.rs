use super::*;
use clap::Parser;

fn parse(args: &[&str]) -> Result<Scale, clap::Error> {
    crate::Cli::try_parse_from(["vak-mcp-load", "scale"].iter().chain(args)).map(|c| match c.mode {
        crate::Mode::Scale(s) => s,
        _ => panic!("not scale"),
    })
}

#[test]
fn usage() {
    assert!(parse(&[]).is_err(), "--vak is required");
    let s = parse(&["--vak", "/bin/vak"]).unwrap();
    assert_eq!((s.calls, s.inflight, s.warmup), (6000, 32, 300));
    assert_eq!(s.tool, "stats");
    assert_eq!(s.args, json!({"values": [3, 1, 2]}));
    assert!(s.check().is_ok());
    assert!(parse(&["--vak", "v", "--args", "[1]"]).is_err());
    let s = parse(&["--vak", "v", "--inflight", "1"]).unwrap();
    assert!(s.check().is_err(), "two nodes need two connections");
    let s = parse(&["--vak", "v", "--calls", "0"]).unwrap();
    assert!(s.check().is_err());
    let load = parse(&["--vak", "v"]).unwrap().load(
        vec![Endpoint::parse("http://127.0.0.1:1/mcp").unwrap()],
        Some(SESSION),
    );
    assert_eq!(load.session.as_deref(), Some("bench-1"));
    assert_eq!((load.calls, load.warmup, load.duration), (6000, 300, None));
}

#[test]
fn the_capped_policy() {
    assert_eq!(
        capped_policy("stats"),
        "[session]\ncalls = 1000000000\n\n[tools.stats]\n"
    );
    assert_eq!(
        capped_policy("a.b \"c\""),
        "[session]\ncalls = 1000000000\n\n[tools.\"a.b \\\"c\\\"\"]\n"
    );
}

#[test]
fn statements_are_classified() {
    let reserve = "SELECT refusal, resource, lim, used, reserved, fuel, wall, result_bytes\n    \
                   FROM vak_reserve($1, $2, $3)";
    assert_eq!(classify(reserve), Class::Reservation);
    let commit = "WITH charged AS (INSERT INTO vak_ledgers (session_id) SELECT s FROM unnest($1)) \
                  INSERT INTO vak_records (node, node_seq)\nSELECT * FROM unnest($2::text[])";
    assert_eq!(classify(commit), Class::JournalCommit);
    assert_eq!(
        classify("insert  into\n vak_records values ($1)"),
        Class::JournalCommit
    );
    assert_eq!(
        classify("SELECT id, entry FROM vak_revocations WHERE id > $1 ORDER BY id"),
        Class::RevocationRead
    );
    assert_eq!(classify("BEGIN"), Class::Other);
    assert_eq!(
        classify("SELECT * FROM vak_ledgers WHERE session_id = $1"),
        Class::Other
    );
}

#[test]
fn statistics_per_call() {
    let rows = json!([
        {"query": "SELECT … FROM vak_reserve($1)", "calls": 1000, "total_exec_time": 50.0},
        {"query": "WITH charged AS (…) INSERT INTO vak_records …", "calls": 80, "total_exec_time": 40.0},
        {"query": "WITH charged AS (…) INSERT INTO vak_records … RETURNING 1", "calls": 20, "total_exec_time": 10.0},
        {"query": "SELECT id, entry FROM vak_revocations WHERE id > $1", "calls": 6, "total_exec_time": 1.0},
        {"query": "BEGIN", "calls": 3, "total_exec_time": 0.5},
        {"query": "COMMIT", "calls": 7, "total_exec_time": 0.5},
    ]);
    let stats = DbStats::from_rows(rows.as_array().unwrap()).unwrap();
    assert_eq!(stats.calls, [1000, 100, 6, 10]);
    assert_eq!(
        stats.other,
        vec![("COMMIT".to_owned(), 7), ("BEGIN".to_owned(), 3)]
    );
    let p = stats.per_call(1000);
    assert_eq!(p.reservations, 1.0);
    assert_eq!(p.commits, 0.1);
    assert_eq!(p.revocation_reads, 6);
    assert_eq!(p.other, 0.01);
    assert_eq!(p.records_per_commit, Some(10.0));
    let v = stats.to_json(1000);
    assert_eq!(v["journal_commits"], 100);
    assert_eq!(v["exec_ms_per_call"], 0.102);
    assert_eq!(DbStats::default().per_call(10).records_per_commit, None);
    assert!(DbStats::from_rows(&[json!({"calls": 1})]).is_err());
}

#[test]
fn database_urls() {
    assert_eq!(
        database_url("postgres://vak@127.0.0.1:5432/vak", "cfg2").unwrap(),
        "postgres://vak@127.0.0.1:5432/cfg2"
    );
    assert!(database_url("postgres://vak@127.0.0.1:5432/other", "cfg2").is_err());
}

#[test]
fn log_lines_lose_their_colours() {
    let line = "\u{1b}[2m2026-12-04T00:42:16Z\u{1b}[0m \u{1b}[33m WARN\u{1b}[0m rmcp: error";
    assert_eq!(strip_ansi(line), "2026-12-04T00:42:16Z  WARN rmcp: error");
    assert_eq!(strip_ansi("plain ä"), "plain ä");
    assert_eq!(strip_ansi("cut \u{1b}["), "cut ");
}

#[test]
fn tables_align() {
    let cells = vec![
        vec!["name".to_owned(), "n".to_owned()],
        vec!["a".to_owned(), "100".to_owned()],
    ];
    assert_eq!(render(&cells), "name    n\na     100\n");
}

#[test]
fn temp_dirs_and_a_node_that_does_not_start() {
    let run = TempDir::new("test").unwrap();
    let path = run.path().to_owned();
    let state = TempDir::create(path.join("n")).unwrap();
    let spec = NodeSpec {
        vak: Path::new("/nonexistent/vak"),
        cache: &path,
        policy: None,
        store: None,
    };
    let err = Node::spawn("a", &spec, state).err().unwrap();
    assert!(err.contains("could not run /nonexistent/vak"), "{err}");
    assert!(!path.join("n").exists(), "the state dir goes with the node");
    // A program that exits at once without the ready line.
    let state = TempDir::create(path.join("m")).unwrap();
    let spec = NodeSpec {
        vak: Path::new("/bin/false"),
        ..spec
    };
    let mut node = Node::spawn("b", &spec, state).unwrap();
    let err = node.wait_ready().unwrap_err();
    assert!(err.contains("node b ended before it was ready"), "{err}");
    drop(node);
    assert!(!path.join("m").exists());
    drop(run);
    assert!(!path.exists());
}

//! Nothing a model, a provider document, a guest or a journal row wrote reaches a terminal raw:
//! every control and format character that could act on the terminal or hide, reorder or forge
//! what a person reads comes out of every human-facing command as a visible escape, and `--json`
//! stays exact JSON (the same values, with those characters as JSON escapes).

use serde_json::{Value, json};
use std::process::Output;
use vak_tests::{bundled, guest, guests, vak_in};

/// Every character the terminal must never receive raw: C0 (ESC, BEL, CR), DEL, C1 (NEL and the
/// 8-bit CSI), the line and paragraph separators, the Arabic letter mark, and every bidi control.
const HOSTILE: &[char] = &[
    '\u{1b}',
    '\u{7}',
    '\r',
    '\u{7f}',
    '\u{85}',
    '\u{9b}',
    '\u{2028}',
    '\u{2029}',
    '\u{61c}',
    '\u{200e}',
    '\u{200f}',
    '\u{202a}',
    '\u{202b}',
    '\u{202c}',
    '\u{202d}',
    '\u{202e}',
    '\u{2066}',
    '\u{2067}',
    '\u{2068}',
    '\u{2069}',
    '\u{feff}',
    '\u{e0041}',
];

/// A string carrying every hostile character, a screen clear and a forged line.
fn hostile() -> String {
    let mut s = String::from("\u{1b}[2J\u{1b}]0;title\u{7}");
    s.extend(HOSTILE);
    s.push_str("\nforged line");
    s
}

fn raw_in(text: &str) -> Vec<char> {
    HOSTILE
        .iter()
        .copied()
        .filter(|c| text.contains(*c))
        .collect()
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Neither stream of `o` holds a hostile character raw, nor a line that starts as forged.
fn assert_neutral(what: &str, o: &Output) {
    assert_raw_free(what, o);
    let (out, err) = text(o);
    for (name, stream) in [("stdout", &out), ("stderr", &err)] {
        assert!(
            !stream.lines().any(|l| l.starts_with("forged line")),
            "{what}: {name} holds a forged line:\n{stream}"
        );
    }
}

/// Neither stream of `o` holds a hostile character raw (a tool's document may have lines of its
/// own: its newlines are its text).
fn assert_raw_free(what: &str, o: &Output) {
    let (out, err) = text(o);
    for (name, stream) in [("stdout", &out), ("stderr", &err)] {
        assert!(
            raw_in(stream).is_empty(),
            "{what}: {name} holds {:?} raw:\n{stream}",
            raw_in(stream)
        );
    }
}

struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let tools = dir.path().join("tools");
        std::fs::create_dir_all(&tools).unwrap();
        std::fs::write(tools.join("echo.wasm"), guest(guests::ECHO)).unwrap();
        std::fs::write(tools.join("clock.wasm"), bundled("clock")).unwrap();
        std::fs::write(
            dir.path().join("policy.toml"),
            "[tools.echo]\ncapabilities.clock = { zones = [\"UTC\"] }\n[tools.clock]\ncapabilities.clock = { zones = [\"*\"] }\n",
        )
        .unwrap();
        Setup { dir }
    }

    fn vak(&self, args: &[&str]) -> Output {
        vak_in(self.dir.path())
            .args(args)
            .env_remove("RUST_LOG")
            .output()
            .expect("run vak")
    }
}

#[test]
fn nothing_a_model_guest_or_journal_wrote_reaches_the_terminal_raw() {
    let s = Setup::new();
    let h = hostile();

    // A tool's document (the guest's text), through `vak call`, and the same as exact JSON.
    let args = json!({ "markdown": format!("result {h}") }).to_string();
    let o = s.vak(&["call", "echo", &args]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert_raw_free("vak call", &o);
    let o = s.vak(&["call", "echo", &args, "--json"]);
    assert_neutral("vak call --json", &o);
    let record: Value = serde_json::from_slice(&o.stdout).expect("--json is JSON");
    assert_eq!(
        record["result"]["markdown"],
        format!("result {h}"),
        "the JSON holds the exact text"
    );
    let o = s.vak(&["call", "echo", &args, "--render", "html"]);
    assert_raw_free("vak call --render html", &o);

    // A provider document: a tool name and a provider call id that clear the screen and forge
    // lines, refused at the proposal stage, then listed and shown from the journal.
    let doc = json!({"choices":[{"message":{"role":"assistant","tool_calls":[
        {"id": h, "type":"function","function":{"name": format!("clock{h}"), "arguments":"{}"}}]}}]});
    let file = s.dir.path().join("proposal.json");
    std::fs::write(&file, doc.to_string()).unwrap();
    let file = file.to_str().unwrap();
    let o = s.vak(&["-v", "call", "--proposal", file]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert_neutral("vak call --proposal (and its log on stderr)", &o);
    let o = s.vak(&["call", "--proposal", file, "--json"]);
    assert_neutral("vak call --proposal --json", &o);
    let records: Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let first = &records.as_array().expect("a list of records")[0];
    assert_eq!(
        first["provider_call_id"], h,
        "the provider's id is kept exactly"
    );
    assert_ne!(first["call_id"], h, "the record's id is vak's own");
    let call_id = first["call_id"].as_str().unwrap().to_string();

    let o = s.vak(&["audit"]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert_neutral("vak audit", &o);
    let o = s.vak(&["audit", "show", &call_id]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert_neutral("vak audit show", &o);
    let shown: Value = serde_json::from_slice(&o.stdout).expect("audit show prints JSON");
    assert_eq!(shown["tool"], format!("clock{h}"), "the same values");

    // What a person types is neutralised too when it is echoed back in an error.
    let o = s.vak(&["inspect", &h]);
    assert_ne!(o.status.code(), Some(0));
    assert_neutral("vak inspect (unknown name)", &o);
    let o = s.vak(&["audit", "show", &h]);
    assert_neutral("vak audit show (unknown id)", &o);
}

#[test]
fn audit_filters_are_validated_and_a_closed_pipe_is_not_a_panic() {
    let s = Setup::new();
    let o = s.vak(&["call", "clock", r#"{"zone":"UTC"}"#]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");

    for bad in [
        ["--status", "done"],
        ["--stage", "dispatching"],
        ["--since", "yesterday"],
        ["--since", "5x"],
    ] {
        let o = s.vak(&["audit", bad[0], bad[1]]);
        assert_eq!(o.status.code(), Some(3), "{bad:?} is bad usage: {o:?}");
        let (_, err) = text(&o);
        assert!(
            err.contains(bad[1]),
            "the error names the value and the accepted forms: {err}"
        );
    }
    let listed = |args: &[&str]| {
        let o = s.vak(&[&["audit"], args].concat());
        assert_eq!(o.status.code(), Some(0), "{args:?}: {o:?}");
        text(&o).0.lines().count()
    };
    assert_eq!(listed(&["--since", "2h"]), 1);
    assert_eq!(listed(&["--since", "1d", "--status", "completed"]), 1);
    assert_eq!(listed(&["--status", "refused"]), 0);
    assert_eq!(listed(&["--since", "2999-01-01T00:00:00Z"]), 0);
    // An RFC 3339 time with an offset, a minute ago: the call is in.
    let a_minute_ago = jiff::Timestamp::now()
        .checked_sub(jiff::SignedDuration::from_secs(60))
        .unwrap()
        .display_with_offset(jiff::tz::offset(2))
        .to_string();
    assert!(a_minute_ago.ends_with("+02:00"), "{a_minute_ago}");
    assert_eq!(listed(&["--since", &a_minute_ago]), 1);

    // `vak audit show ID | head -c 1`: the reader goes away; vak ends without a panic.
    let listed = s.vak(&["audit"]);
    let id = text(&listed)
        .0
        .split_whitespace()
        .find(|w| w.starts_with("call_"))
        .expect("a call id")
        .to_string();
    let mut child = vak_in(s.dir.path())
        .args(["audit", "show", &id])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Close the pipe before vak writes to it.
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    let (_, err) = text(&o);
    assert!(!err.contains("panicked"), "{err}");
}

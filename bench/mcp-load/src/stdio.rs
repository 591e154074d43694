//! A minimal MCP client over stdio (newline-delimited JSON-RPC to a child process), shared by the
//! `sequential`, `pipelined` and `inflight` modes and by vak's end-to-end tests.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// A server process after the `initialize` handshake.
pub struct Server {
    pub child: Child,
    pub tx: BufWriter<ChildStdin>,
    pub rx: BufReader<ChildStdout>,
    line: String,
    next_id: u64,
}

impl Server {
    /// Start `command` (program and arguments), its stderr inherited, and initialize it.
    pub fn start(command: &[String]) -> Result<Server, String> {
        let (program, args) = command.split_first().ok_or("no server command given")?;
        let mut cmd = Command::new(program);
        cmd.args(args).stderr(Stdio::inherit());
        Server::spawn(cmd)
    }

    /// Start `cmd` (its stdin and stdout are piped here; stderr as the caller set it) and
    /// initialize it.
    pub fn spawn(mut cmd: Command) -> Result<Server, String> {
        let program = cmd.get_program().to_string_lossy().into_owned();
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {program}: {e}"))?;
        let tx = BufWriter::new(child.stdin.take().ok_or("no stdin")?);
        let rx = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        let mut s = Server {
            child,
            tx,
            rx,
            line: String::new(),
            next_id: 1,
        };
        s.send(
            &json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
            "protocolVersion":"2025-11-25","capabilities":{},
            "clientInfo":{"name":"vak-mcp-load","version":env!("CARGO_PKG_VERSION")}}}),
        )?;
        s.read()?;
        s.send(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}))?;
        Ok(s)
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `n` ids that no request of [`Server::call`] or an earlier [`Server::fresh_ids`] used.
    pub fn fresh_ids(&mut self, n: usize) -> std::ops::Range<u64> {
        let first = self.next_id;
        self.next_id += n as u64;
        first..self.next_id
    }

    pub fn send(&mut self, v: &Value) -> Result<(), String> {
        write_line(&mut self.tx, v)?;
        self.flush()
    }

    /// Flush what [`write_line`] wrote to `tx`.
    pub fn flush(&mut self) -> Result<(), String> {
        self.tx
            .flush()
            .map_err(|e| format!("the server closed its input: {e}"))
    }

    /// The next message line (notifications included).
    fn read(&mut self) -> Result<&str, String> {
        self.line.clear();
        let n = self
            .rx
            .read_line(&mut self.line)
            .map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("the server closed its output".into());
        }
        Ok(&self.line)
    }

    /// Read until the response to `id` (skipping notifications) and return it.
    pub fn answer(&mut self, id: u64) -> Result<Value, String> {
        loop {
            let line = self.read()?;
            let v: Value =
                serde_json::from_str(line).map_err(|e| format!("not JSON from the server: {e}"))?;
            if v["id"] == json!(id) && v.get("method").is_none() {
                return Ok(v);
            }
        }
    }

    /// Read until the response to `id`; whether it was a success.
    pub fn response(&mut self, id: u64) -> Result<bool, String> {
        self.answer(id).map(|v| succeeded(&v))
    }

    /// One `tools/call`, waited for: the whole response.
    pub fn call(&mut self, tool: &str, args: &Value) -> Result<Value, String> {
        let id = self.fresh_ids(1).start;
        self.send(&request(id, tool, args))?;
        self.answer(id)
    }

    /// The tool names of one `tools/list` answer.
    pub fn list(&mut self) -> Result<Vec<String>, String> {
        let id = self.fresh_ids(1).start;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"}))?;
        let answer = self.answer(id)?;
        let tools = answer["result"]["tools"]
            .as_array()
            .ok_or_else(|| format!("tools/list was not answered with a list: {answer}"))?;
        Ok(tools
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_string))
            .collect())
    }

    /// Ask `tools/list` again (every millisecond) until it includes `tool`, for at most
    /// `within`: a server may load its tools after it answers `initialize` (Wassette does), and
    /// a call before then is refused, not measured.
    pub fn await_listed(&mut self, tool: &str, within: Duration) -> Result<(), String> {
        let since = Instant::now();
        while !self.list()?.iter().any(|n| n == tool) {
            if since.elapsed() > within {
                return Err(format!("`{tool}` was not listed within {within:?}"));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(())
    }

    /// Close the server's input (an MCP server exits at EOF) and reap it.
    pub fn stop(self) {
        let Server { child, tx, .. } = self;
        drop(tx);
        reap(child);
    }
}

/// Wait up to two seconds for `child` to exit, then kill it.
pub fn reap(mut child: Child) {
    if child.wait_timeout_ms(2000).is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
}

pub trait WaitTimeout {
    fn wait_timeout_ms(&mut self, ms: u64) -> Option<std::process::ExitStatus>;
}

impl WaitTimeout for Child {
    fn wait_timeout_ms(&mut self, ms: u64) -> Option<std::process::ExitStatus> {
        let until = Instant::now() + Duration::from_millis(ms);
        while Instant::now() < until {
            if let Ok(Some(status)) = self.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }
}

/// A `tools/call` request.
pub fn request(id: u64, tool: &str, args: &Value) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":args}})
}

/// Whether a response is a result that is not `isError`.
pub fn succeeded(response: &Value) -> bool {
    response
        .get("result")
        .is_some_and(|r| r["isError"] != json!(true))
}

/// Write one message line to `tx` (unflushed).
pub fn write_line(tx: &mut impl Write, v: &Value) -> Result<(), String> {
    serde_json::to_writer(&mut *tx, v).map_err(|e| e.to_string())?;
    tx.write_all(b"\n")
        .map_err(|e| format!("the server closed its input: {e}"))
}

/// Read responses (messages with an id and no method; notifications are skipped) from `rx`
/// until `total` came, handing each to `each`, which returns false to stop early. An error when
/// the server closed its output first or wrote a line that is not JSON.
pub fn read_responses(
    rx: &mut impl BufRead,
    total: usize,
    mut each: impl FnMut(Value) -> bool,
) -> Result<(), String> {
    let mut line = String::new();
    let mut answered = 0;
    while answered < total {
        line.clear();
        match rx.read_line(&mut line) {
            Ok(0) | Err(_) => return Err("the server closed its output".into()),
            Ok(_) => {}
        }
        let v: Value =
            serde_json::from_str(&line).map_err(|_| format!("not JSON from the server: {line}"))?;
        if v.get("id").is_some() && v.get("method").is_none() {
            answered += 1;
            if !each(v) {
                return Ok(());
            }
        }
    }
    Ok(())
}

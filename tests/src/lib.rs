//! Helpers for vak's end-to-end tests: the guest components built for them, and hosts set up
//! with a private AOT cache.

pub mod bombs;
pub mod byo;
#[path = "../../build-support/cargo_env.rs"]
mod cargo_env;
pub mod http_mcp;
pub mod jsonschema;

/// Paths of the test guest components (built by `build.rs`).
pub mod guests {
    include!(concat!(env!("OUT_DIR"), "/guests.rs"));
}

use vak_host::{Host, HostBuilder, Policy};

/// The bytes of a guest component.
/// An embedder's own secret source holding one secret: `name` with `value`.
pub struct OneSecret {
    pub name: &'static str,
    pub value: &'static str,
}

impl vak_host::secrets::SecretSource for OneSecret {
    fn get(
        &self,
        name: &str,
    ) -> Result<Option<vak_host::secrets::SecretValue>, vak_host::secrets::SecretError> {
        Ok((name == self.name).then(|| vak_host::secrets::SecretValue::new(self.value)))
    }
}

pub fn guest(path: &str) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("read guest {path}: {e}"))
}

/// The bytes of a tool bundled with vak.
pub fn bundled(name: &str) -> Vec<u8> {
    vak_host::bundled::TOOLS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, b)| b.to_vec())
        .unwrap_or_else(|| panic!("no bundled tool `{name}`"))
}

/// A host with the given components under `policy` (TOML), caching in `cache`.
pub async fn host_with(
    components: &[(&str, Vec<u8>)],
    policy: &str,
    cache: &std::path::Path,
) -> Host {
    let policy = Policy::parse(policy, "test policy").expect("test policy parses");
    let mut builder = HostBuilder::new()
        .policy(policy)
        .cache_dir(Some(cache.to_path_buf()));
    for (name, bytes) in components {
        builder = builder.component(*name, bytes.clone());
    }
    builder.build().await.expect("host builds")
}

/// A JSON-RPC client over newline-delimited JSON (MCP's stdio framing), for driving `vak serve`
/// as a real client would: in process over a pipe, or a child process's stdin and stdout.
pub mod mcp {
    use serde_json::{Value, json};
    use std::time::Duration;
    use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

    /// The `_meta` a 2026-07-28 request carries in place of a handshake.
    pub fn stateless_meta() -> Value {
        json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": { "name": "vak-tests", "version": "0" },
            "io.modelcontextprotocol/clientCapabilities": {},
        })
    }

    /// One client connection.
    pub struct Client {
        writer: Box<dyn AsyncWrite + Unpin + Send>,
        messages: tokio::sync::mpsc::UnboundedReceiver<Value>,
        next_id: u64,
        /// Messages that arrived while waiting for a response (notifications, other responses).
        pub other: Vec<Value>,
    }

    impl Client {
        /// A client writing to `writer` and reading lines from `reader`. A line that is not JSON
        /// arrives as `{"not_json": line}`, so a test can see what polluted the stream.
        pub fn new(
            reader: impl AsyncRead + Unpin + Send + 'static,
            writer: impl AsyncWrite + Unpin + Send + 'static,
        ) -> Client {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            tokio::spawn(async move {
                let mut lines = BufReader::new(reader).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    if line.trim().is_empty() {
                        continue;
                    }
                    let v = serde_json::from_str(&line).unwrap_or(json!({ "not_json": line }));
                    if tx.send(v).is_err() {
                        break;
                    }
                }
            });
            Client {
                writer: Box::new(writer),
                messages: rx,
                next_id: 1,
                other: Vec::new(),
            }
        }

        /// Send one message.
        pub async fn send(&mut self, message: &Value) {
            let mut line = message.to_string();
            line.push('\n');
            self.writer
                .write_all(line.as_bytes())
                .await
                .expect("write to the server");
            self.writer.flush().await.expect("flush to the server");
        }

        /// Send a request without waiting; returns its id.
        pub async fn start(&mut self, method: &str, params: Value) -> u64 {
            let id = self.next_id;
            self.next_id += 1;
            self.send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }))
                .await;
            id
        }

        /// The next message, or `None` after `wait`.
        pub async fn next(&mut self, wait: Duration) -> Option<Value> {
            tokio::time::timeout(wait, self.messages.recv())
                .await
                .ok()
                .flatten()
        }

        /// Wait for the response to request `id` (keeping everything else in `other`).
        pub async fn response(&mut self, id: u64) -> Value {
            if let Some(at) = self.other.iter().position(|m| m["id"] == json!(id)) {
                return self.other.remove(at);
            }
            loop {
                let m = self.next(Duration::from_secs(60)).await.unwrap_or_else(|| {
                    panic!("no response to request {id}; other: {:?}", self.other)
                });
                if m["id"] == json!(id) && m.get("method").is_none() {
                    return m;
                }
                self.other.push(m);
            }
        }

        /// Send a request and wait for its response.
        pub async fn request(&mut self, method: &str, params: Value) -> Value {
            let id = self.start(method, params).await;
            self.response(id).await
        }

        /// The `initialize` handshake (and `notifications/initialized`) at `version`.
        pub async fn initialize(&mut self, version: &str) -> Value {
            let r = self
                .request(
                    "initialize",
                    json!({
                        "protocolVersion": version,
                        "capabilities": {},
                        "clientInfo": { "name": "vak-tests", "version": "0" },
                    }),
                )
                .await;
            self.send(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }))
                .await;
            r
        }
    }
}

/// The `vak` binary built beside the running test (`cargo test` builds it for the host's tests).
pub fn vak_binary() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("test path");
    let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
    let bin = dir.join(format!("vak{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.is_file(),
        "{} is missing: run the whole workspace's tests (`cargo test`), which builds it",
        bin.display()
    );
    bin
}

/// `vak` over the tools, policy, cache and state a [`serve_command`] in `dir` wrote and uses:
/// another process on the same files as that server.
pub fn vak_in(dir: &std::path::Path) -> std::process::Command {
    let mut cmd = std::process::Command::new(vak_binary());
    cmd.arg("--tools")
        .arg(dir.join("tools"))
        .arg("--policy")
        .arg(dir.join("policy.toml"))
        .arg("--cache-dir")
        .arg(dir.join("cache"))
        .arg("--state-dir")
        .arg(dir.join("state"));
    cmd
}

/// `vak serve ARGS` over `tools` (file name → component) under `policy`, with its cache and
/// state in `dir`; stdin and stdout piped, stderr as `stderr`.
pub fn serve_command(
    dir: &std::path::Path,
    tools: &[(&str, Vec<u8>)],
    policy: &str,
    args: &[&str],
    stderr: std::process::Stdio,
) -> tokio::process::Command {
    let folder = dir.join("tools");
    std::fs::create_dir_all(&folder).expect("tools folder");
    for (name, bytes) in tools {
        write_whole(&folder.join(format!("{name}.wasm")), bytes);
    }
    write_whole(&dir.join("policy.toml"), policy.as_bytes());
    let mut cmd = tokio::process::Command::from(vak_in(dir));
    cmd.arg("serve")
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(stderr)
        .kill_on_drop(true);
    cmd
}

/// Write `bytes` to `path` by a rename, so that a server started earlier on the same folder
/// never reads a file half rewritten (tests start several servers on one state directory).
fn write_whole(path: &std::path::Path, bytes: &[u8]) {
    if std::fs::read(path).is_ok_and(|held| held == bytes) {
        return;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes).expect("write a test file");
    std::fs::rename(&tmp, path).expect("rename a test file into place");
}

/// Start `vak serve --http 127.0.0.1:0` from `cmd` (see [`serve_command`]) and return it with
/// the endpoint URL it printed. Its stderr is drained in the background from then on (a closed
/// stderr would fail the server's next log line).
pub async fn spawn_http(mut cmd: tokio::process::Command) -> (tokio::process::Child, String) {
    use tokio::io::AsyncBufReadExt;
    cmd.args(["--http", "127.0.0.1:0"])
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("spawn vak serve --http");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    let url = loop {
        let line = tokio::time::timeout(std::time::Duration::from_secs(120), lines.next_line())
            .await
            .expect("vak serve prints its address")
            .expect("read stderr")
            .expect("vak serve ended before printing its address");
        if let Some(url) = line.strip_prefix("vak: serving MCP at ") {
            break url.to_string();
        }
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, url)
}

/// Run `cmd` to completion: Ok, or what it printed when it failed.
pub fn run_command(cmd: &mut std::process::Command) -> Result<(), String> {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cmd:?} failed ({:?}):\n{}\n{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// componentize-py, installed once (from PyPI, at the version tools/py-clock pins) into a venv
/// under target/lang shared by every test that builds a Python tool. Returns the venv's `bin`
/// folder, or why the toolchain could not be had (the caller skips and says so).
pub fn python_toolchain() -> Result<std::path::PathBuf, String> {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let venv = repo.join("target/lang/py-venv");
    let bin = venv.join("bin");
    if bin.join("componentize-py").is_file() {
        return Ok(bin);
    }
    run_command(
        std::process::Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv),
    )?;
    run_command(
        std::process::Command::new(bin.join("pip"))
            .args(["install", "--disable-pip-version-check", "--quiet", "-r"])
            .arg(repo.join("tools/py-clock/requirements.txt")),
    )?;
    Ok(bin)
}

/// A test that cannot run here says why and returns, unless `VAK_REQUIRE_ALL` is set (as
/// `.ci/run` sets it): then it fails, so that a green CI run means every test ran.
pub fn skipped(why: impl std::fmt::Display) {
    if std::env::var_os("VAK_REQUIRE_ALL").is_some_and(|v| !v.is_empty()) {
        panic!("VAK_REQUIRE_ALL is set and this test could not run: {why}");
    }
    eprintln!("SKIPPED: {why}");
}

/// A throwaway PostgreSQL cluster for a test, or `None` (with the reason on stderr) where
/// PostgreSQL is not installed. With `VAK_REQUIRE_PG` set (as CI sets it), a cluster that cannot
/// start fails the test instead of skipping it.
pub fn pg_cluster() -> Option<vak_pg_cluster::Cluster> {
    match vak_pg_cluster::available().and_then(|()| vak_pg_cluster::Cluster::start()) {
        Ok(cluster) => Some(cluster),
        Err(why) if std::env::var_os("VAK_REQUIRE_PG").is_some() => {
            panic!("VAK_REQUIRE_PG is set and no PostgreSQL cluster could be started: {why}")
        }
        Err(why) => {
            skipped(format!("the PostgreSQL part of this test: {why}"));
            None
        }
    }
}

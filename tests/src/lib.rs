//! Helpers for vak's end-to-end tests: the guest components built for them, and hosts set up
//! with a private AOT cache.

/// Paths of the test guest components (built by `build.rs`).
pub mod guests {
    include!(concat!(env!("OUT_DIR"), "/guests.rs"));
}

use vak_host::{Host, HostBuilder, Policy};

/// The bytes of a guest component.
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

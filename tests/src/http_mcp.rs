//! A small keep-alive HTTP/1.1 client for `vak serve --http`: stateless (MCP 2026-07-28) requests
//! to /mcp.
//!
//! One [`HttpMcp`] holds at most one connection and sends one request at a time on it. It speaks
//! just enough HTTP/1.1 for the tests: a POST with a `Content-Length` body, and responses framed by
//! `Content-Length`, `chunked` transfer coding, or the end of the connection.

use serde_json::{Value, json};
use std::io;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long one request (connecting, sending, reading the whole response) may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
/// The largest status line plus headers accepted.
const MAX_HEAD: usize = 64 * 1024;
/// The protocol revision of stateless requests.
const PROTOCOL: &str = "2026-07-28";

/// A keep-alive HTTP/1.1 client of one MCP endpoint.
pub struct HttpMcp {
    /// `host:port` to connect to, also the `Host` header.
    authority: String,
    /// The request target, e.g. `/mcp`.
    path: String,
    /// The kept connection, if any.
    conn: Option<TcpStream>,
    /// Bytes read from `conn` and not consumed yet.
    buf: Vec<u8>,
}

/// A response's framing, from its head.
struct Head {
    status: u16,
    /// `Some(n)`: a `Content-Length` body; None with `chunked` false: up to the end of the
    /// connection.
    content_length: Option<usize>,
    chunked: bool,
    /// The server keeps the connection open for the next request.
    keep_alive: bool,
}

impl HttpMcp {
    /// A client of `url`, like `"http://127.0.0.1:PORT/mcp"` (plain `http` only; the port defaults
    /// to 80 and the path to `/`). It connects on the first request.
    ///
    /// # Panics
    ///
    /// When `url` does not start with `http://`: a mistake in the test itself.
    pub fn new(url: &str) -> HttpMcp {
        let rest = url
            .strip_prefix("http://")
            .unwrap_or_else(|| panic!("HttpMcp::new: `{url}` is not an http:// URL"));
        let (authority, path) = match rest.find('/') {
            Some(at) => (&rest[..at], &rest[at..]),
            None => (rest, "/"),
        };
        assert!(!authority.is_empty(), "HttpMcp::new: `{url}` has no host");
        // A port-less authority (a bracketed IPv6 address ends with `]`) gets port 80.
        let has_port = authority
            .rsplit_once(':')
            .is_some_and(|(_, port)| !port.contains(']'));
        let authority = if has_port {
            authority.to_owned()
        } else {
            format!("{authority}:80")
        };
        HttpMcp {
            authority,
            path: path.to_owned(),
            conn: None,
            buf: Vec::new(),
        }
    }

    /// POSTs `body` (JSON) to the endpoint with the extra `headers`, and returns the HTTP status
    /// and the response body parsed as JSON (`Value::String` of the raw text when it is not JSON,
    /// e.g. an SSE stream or an empty body).
    ///
    /// Sends `Host`, `Content-Type: application/json`, `Accept: application/json,
    /// text/event-stream` and `Content-Length`; a `Host`, `Content-Type` or `Accept` in `headers`
    /// replaces the default one. The connection is kept for the next request unless the server
    /// closes it. A kept connection the server has already closed is replaced before sending; but
    /// when sending or reading fails (the server closed it meanwhile, or it broke), the error is
    /// returned and the connection dropped: the request is not sent again, since a `tools/call`
    /// is not idempotent. The next request connects anew. A request that takes more than 120 s
    /// fails with [`io::ErrorKind::TimedOut`].
    pub async fn post(
        &mut self,
        body: &Value,
        headers: &[(&str, &str)],
    ) -> io::Result<(u16, Value)> {
        let outcome = tokio::time::timeout(REQUEST_TIMEOUT, self.exchange(body, headers)).await;
        let outcome = outcome.unwrap_or_else(|_| {
            Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "no complete response from http://{}{} within {} s",
                    self.authority,
                    self.path,
                    REQUEST_TIMEOUT.as_secs()
                ),
            ))
        });
        if outcome.is_err() {
            self.conn = None;
            self.buf.clear();
        }
        outcome
    }

    /// A stateless (MCP 2026-07-28) `tools/call` of `tool` with `arguments`, JSON-RPC id `id`,
    /// charged to the vak budget session `session` (`_meta."dev.vak/session"`) when given.
    /// Returns the HTTP status and the body, as [`HttpMcp::post`].
    pub async fn call(
        &mut self,
        id: u64,
        tool: &str,
        arguments: Value,
        session: Option<&str>,
    ) -> io::Result<(u16, Value)> {
        let mut meta = json!({
            "io.modelcontextprotocol/protocolVersion": PROTOCOL,
            "io.modelcontextprotocol/clientInfo": { "name": "vak-tests", "version": "0" },
            "io.modelcontextprotocol/clientCapabilities": {},
        });
        if let Some(session) = session {
            meta["dev.vak/session"] = json!(session);
        }
        let body = json!({
            "jsonrpc": "2.0",
            "id": id,
            "method": "tools/call",
            "params": { "name": tool, "arguments": arguments, "_meta": meta },
        });
        self.post(
            &body,
            &[
                ("MCP-Protocol-Version", PROTOCOL),
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", tool),
            ],
        )
        .await
    }

    /// One request and its response, without the timeout. Any error leaves the connection for
    /// [`HttpMcp::post`] to drop.
    async fn exchange(
        &mut self,
        body: &Value,
        headers: &[(&str, &str)],
    ) -> io::Result<(u16, Value)> {
        let request = self.request(body, headers);
        self.drop_if_closed();
        if self.conn.is_none() {
            let stream = TcpStream::connect(&self.authority).await?;
            stream.set_nodelay(true)?;
            self.conn = Some(stream);
            self.buf.clear();
        }
        let Some(stream) = self.conn.as_mut() else {
            return Err(io::Error::new(io::ErrorKind::NotConnected, "no connection"));
        };
        if let Err(write_error) = stream.write_all(&request).await {
            // The server may have answered (e.g. 403) and closed before reading the body: use
            // its answer when a whole one arrived, else report the failed write.
            return match self.read_response().await {
                Ok(response) => {
                    self.conn = None;
                    Ok(response)
                }
                Err(_) => Err(write_error),
            };
        }
        self.read_response().await
    }

    /// The request bytes: head and body.
    fn request(&self, body: &Value, headers: &[(&str, &str)]) -> Vec<u8> {
        let body = body.to_string();
        let given = |name: &str| headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name));
        let mut head = format!("POST {} HTTP/1.1\r\n", self.path);
        if !given("host") {
            head.push_str(&format!("Host: {}\r\n", self.authority));
        }
        if !given("content-type") {
            head.push_str("Content-Type: application/json\r\n");
        }
        if !given("accept") {
            head.push_str("Accept: application/json, text/event-stream\r\n");
        }
        for (name, value) in headers {
            if !name.eq_ignore_ascii_case("content-length") {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
        }
        head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
        let mut request = head.into_bytes();
        request.extend_from_slice(body.as_bytes());
        request
    }

    /// Drops the kept connection when the server has closed it (or sent something unasked) since
    /// the last response: nothing was sent on it yet, so connecting anew is safe.
    fn drop_if_closed(&mut self) {
        let Some(stream) = &self.conn else { return };
        let mut probe = [0u8; 1];
        match stream.try_read(&mut probe) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && self.buf.is_empty() => {}
            _ => {
                self.conn = None;
                self.buf.clear();
            }
        }
    }

    /// Reads one response (skipping interim 1xx ones) and parses its body.
    async fn read_response(&mut self) -> io::Result<(u16, Value)> {
        let head = loop {
            let head = self.read_head().await?;
            if !(100..200).contains(&head.status) {
                break head;
            }
        };
        let body = if head.status == 204 || head.status == 304 {
            Vec::new()
        } else if head.chunked {
            self.read_chunked().await?
        } else if let Some(length) = head.content_length {
            self.take_exact(length).await?
        } else {
            // Delimited by the end of the connection.
            while self.fill().await? > 0 {}
            self.conn = None;
            std::mem::take(&mut self.buf)
        };
        if !head.keep_alive {
            self.conn = None;
            self.buf.clear();
        }
        let value = serde_json::from_slice(&body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
        Ok((head.status, value))
    }

    /// Reads and parses a status line and headers.
    async fn read_head(&mut self) -> io::Result<Head> {
        let end = loop {
            if let Some(at) = find(&self.buf, b"\r\n\r\n") {
                break at;
            }
            if self.buf.len() > MAX_HEAD {
                return Err(invalid("response head larger than 64 KiB"));
            }
            if self.fill().await? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    if self.buf.is_empty() {
                        "the server closed the connection without a response"
                    } else {
                        "the server closed the connection in the middle of a response head"
                    },
                ));
            }
        };
        let raw: Vec<u8> = self.buf.drain(..end + 4).collect();
        let text =
            std::str::from_utf8(&raw[..end]).map_err(|_| invalid("response head is not UTF-8"))?;
        let mut lines = text.split("\r\n");
        let status_line = lines.next().unwrap_or_default();
        let mut parts = status_line.splitn(3, ' ');
        let version = parts.next().unwrap_or_default();
        if !version.starts_with("HTTP/1.") {
            return Err(invalid(&format!(
                "not an HTTP/1 status line: {status_line:?}"
            )));
        }
        let status: u16 = parts
            .next()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| invalid(&format!("bad status line: {status_line:?}")))?;
        let mut head = Head {
            status,
            content_length: None,
            chunked: false,
            keep_alive: version == "HTTP/1.1",
        };
        for line in lines {
            let Some((name, value)) = line.split_once(':') else {
                return Err(invalid(&format!("bad header line: {line:?}")));
            };
            let (name, value) = (name.trim(), value.trim());
            if name.eq_ignore_ascii_case("content-length") {
                head.content_length = Some(
                    value
                        .parse()
                        .map_err(|_| invalid(&format!("bad Content-Length: {value:?}")))?,
                );
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                head.chunked = value
                    .rsplit(',')
                    .next()
                    .is_some_and(|last| last.trim().eq_ignore_ascii_case("chunked"));
            } else if name.eq_ignore_ascii_case("connection") {
                for token in value.split(',').map(str::trim) {
                    if token.eq_ignore_ascii_case("close") {
                        head.keep_alive = false;
                    } else if token.eq_ignore_ascii_case("keep-alive") {
                        head.keep_alive = true;
                    }
                }
            }
        }
        if !head.chunked && head.content_length.is_none() && !(100..200).contains(&status) {
            // Delimited by the end of the connection: it cannot be kept.
            head.keep_alive = false;
        }
        Ok(head)
    }

    /// Reads a `chunked` body up to and including its trailers.
    async fn read_chunked(&mut self) -> io::Result<Vec<u8>> {
        let mut body = Vec::new();
        loop {
            let line = self.take_line().await?;
            let size = line.split(';').next().unwrap_or_default().trim();
            let size = usize::from_str_radix(size, 16)
                .map_err(|_| invalid(&format!("bad chunk size line: {line:?}")))?;
            if size == 0 {
                // Trailers, up to an empty line.
                while !self.take_line().await?.is_empty() {}
                return Ok(body);
            }
            body.extend(self.take_exact(size).await?);
            if !self.take_line().await?.is_empty() {
                return Err(invalid("chunk not followed by CRLF"));
            }
        }
    }

    /// The next CRLF-terminated line, without the CRLF.
    async fn take_line(&mut self) -> io::Result<String> {
        loop {
            if let Some(at) = find(&self.buf, b"\r\n") {
                let line: Vec<u8> = self.buf.drain(..at + 2).collect();
                return String::from_utf8(line[..at].to_vec())
                    .map_err(|_| invalid("chunk line is not UTF-8"));
            }
            if self.buf.len() > MAX_HEAD {
                return Err(invalid("chunk line longer than 64 KiB"));
            }
            self.fill_or_eof().await?;
        }
    }

    /// The next `n` bytes.
    async fn take_exact(&mut self, n: usize) -> io::Result<Vec<u8>> {
        while self.buf.len() < n {
            self.fill_or_eof().await?;
        }
        Ok(self.buf.drain(..n).collect())
    }

    /// Reads more bytes into the buffer; 0 at the end of the connection.
    async fn fill(&mut self) -> io::Result<usize> {
        let Some(stream) = self.conn.as_mut() else {
            return Ok(0);
        };
        let mut chunk = [0u8; 16 * 1024];
        let n = stream.read(&mut chunk).await?;
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(n)
    }

    /// As [`HttpMcp::fill`], but the end of the connection (in the middle of a body) is an error.
    async fn fill_or_eof(&mut self) -> io::Result<()> {
        if self.fill().await? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the server closed the connection in the middle of a response body",
            ));
        }
        Ok(())
    }
}

/// Where `needle` first occurs in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_owned())
}

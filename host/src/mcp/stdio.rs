//! The stdio transport of `vak serve`: newline-delimited JSON-RPC on stdin and stdout, answering
//! what JSON-RPC 2.0 says must be answered.
//!
//! rmcp's own line transport drops a line that is not JSON without a word (other SDKs do too, for
//! fear of error storms with a peer that echoes garbage) and answers other invalid messages
//! without an `id`. JSON-RPC 2.0 asks for a response in both cases, with `"id": null` when the id
//! cannot be read: a client that sent a broken line then learns why it gets no answer. So here:
//!
//! | line | answer |
//! |---|---|
//! | not JSON | `-32700` Parse error, `"id": null` |
//! | a JSON array (a batch: removed from MCP in 2025-06-18) | `-32600` Invalid Request, `"id": null` |
//! | an object that is no MCP message, with a readable `id` | `-32600`, that `id` |
//! | the same without an `id` (a notification) | nothing: notifications are never answered |
//! | longer than [`MAX_LINE`] | `-32600`, `"id": null`; the rest of the line is skipped |
//!
//! Against a storm, after [`MAX_ERRORS_IN_A_ROW`] answers to broken lines with no valid message
//! between them, broken lines are dropped (logged once) until a valid message arrives.
//!
//! Reading is bounded and cancellation-safe as rmcp's is (`fill_buf`/`consume` into a buffer the
//! transport keeps): `receive` is polled inside a `select!` and may be dropped mid-line.

use rmcp::RoleServer;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use std::sync::Arc;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};

/// The longest line read: an argument document at its cap, with room for the envelope.
pub const MAX_LINE: usize = crate::proposal::MAX_ARGUMENT_BYTES + 64 * 1024;

/// Answers to broken lines in a row after which they are dropped unanswered.
pub const MAX_ERRORS_IN_A_ROW: u32 = 64;

/// A JSON-RPC transport over a buffered reader and a writer (stdin and stdout in `vak serve`).
pub struct LineTransport<R, W> {
    read: R,
    write: Arc<tokio::sync::Mutex<W>>,
    line: Vec<u8>,
    /// Skipping the rest of a line that was too long.
    discarding: bool,
    errors_in_a_row: u32,
}

impl<R, W> LineTransport<R, W>
where
    R: AsyncBufRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    pub fn new(read: R, write: W) -> Self {
        LineTransport {
            read,
            write: Arc::new(tokio::sync::Mutex::new(write)),
            line: Vec::new(),
            discarding: false,
            errors_in_a_row: 0,
        }
    }

    /// One line into `self.line` (without its newline), never past [`MAX_LINE`].
    async fn read_line(&mut self) -> std::io::Result<Line> {
        loop {
            let (consumed, step) = {
                let available = self.read.fill_buf().await?;
                if available.is_empty() {
                    return Ok(Line::Eof);
                }
                let newline = available.iter().position(|b| *b == b'\n');
                let take = newline.map_or(available.len(), |i| i + 1);
                if self.discarding {
                    if newline.is_some() {
                        self.discarding = false;
                    }
                    (take, None)
                } else if self.line.len().saturating_add(take) > MAX_LINE + 1 {
                    self.line.clear();
                    self.discarding = newline.is_none();
                    (take, Some(Line::TooLong))
                } else {
                    self.line.extend_from_slice(&available[..take]);
                    (take, newline.map(|_| Line::Full))
                }
            };
            self.read.consume(consumed);
            if let Some(step) = step {
                return Ok(step);
            }
        }
    }

    /// Write one message and a newline, whole, then flush.
    fn write_line(
        &self,
        bytes: Vec<u8>,
    ) -> impl Future<Output = std::io::Result<()>> + Send + 'static {
        let write = self.write.clone();
        async move {
            let mut w = write.lock().await;
            w.write_all(&bytes).await?;
            w.flush().await
        }
    }

    /// Answer a broken line (unless a storm is under way).
    async fn answer(&mut self, code: i64, message: String, id: Value) -> std::io::Result<()> {
        self.errors_in_a_row += 1;
        if self.errors_in_a_row > MAX_ERRORS_IN_A_ROW {
            if self.errors_in_a_row == MAX_ERRORS_IN_A_ROW + 1 {
                tracing::warn!(
                    "{MAX_ERRORS_IN_A_ROW} broken messages in a row on stdin: no more answers to broken lines until a valid message arrives"
                );
            }
            return Ok(());
        }
        let mut bytes = serde_json::to_vec(&json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": { "code": code, "message": message },
        }))
        .unwrap_or_default();
        bytes.push(b'\n');
        self.write_line(bytes).await
    }
}

enum Line {
    Full,
    TooLong,
    Eof,
}

/// Why a line is not a message, and what to answer (`None`: nothing, it was a notification).
fn diagnose(line: &[u8], typed: &serde_json::Error) -> Option<(i64, String, Value)> {
    let value: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => return Some((-32700, format!("Parse error: {e}"), Value::Null)),
    };
    match value {
        Value::Array(_) => Some((
            -32600,
            "Invalid Request: a JSON-RPC batch; MCP (2025-06-18 and later) takes one message per line"
                .into(),
            Value::Null,
        )),
        Value::Object(map) => {
            let id = match map.get("id") {
                None => return None,
                Some(id @ (Value::String(_) | Value::Number(_))) => id.clone(),
                Some(_) => Value::Null,
            };
            Some((-32600, format!("Invalid Request: {typed}"), id))
        }
        _ => Some((
            -32600,
            "Invalid Request: a message is a JSON object".into(),
            Value::Null,
        )),
    }
}

impl<R, W> Transport<RoleServer> for LineTransport<R, W>
where
    R: AsyncBufRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let bytes = serde_json::to_vec(&item).map(|mut b| {
            b.push(b'\n');
            b
        });
        let write = bytes.map(|b| self.write_line(b));
        async move {
            match write {
                Ok(w) => w.await,
                Err(e) => Err(std::io::Error::other(e)),
            }
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let read = match self.read_line().await {
                Ok(r) => r,
                Err(e) => {
                    tracing::error!(error = %e, "cannot read stdin");
                    return None;
                }
            };
            let answered = match read {
                Line::Eof => return None,
                Line::TooLong => {
                    self.answer(
                        -32600,
                        format!("Invalid Request: a message is at most {MAX_LINE} bytes"),
                        Value::Null,
                    )
                    .await
                }
                Line::Full => {
                    let mut line: &[u8] = &self.line;
                    line = line.strip_suffix(b"\n").unwrap_or(line);
                    line = line.strip_suffix(b"\r").unwrap_or(line);
                    line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
                    if line.iter().all(u8::is_ascii_whitespace) {
                        self.line.clear();
                        continue;
                    }
                    match serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(line) {
                        Ok(message) => {
                            self.line.clear();
                            self.errors_in_a_row = 0;
                            return Some(message);
                        }
                        Err(e) => {
                            let diagnosis = diagnose(line, &e);
                            self.line.clear();
                            match diagnosis {
                                Some((code, message, id)) => self.answer(code, message, id).await,
                                None => {
                                    tracing::debug!(error = %e, "a notification vak does not know was ignored");
                                    Ok(())
                                }
                            }
                        }
                    }
                }
            };
            if let Err(e) = answered {
                tracing::error!(error = %e, "cannot write stdout");
                return None;
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.write.lock().await.shutdown().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    /// What the transport answers to `input`, and the messages it lets through.
    async fn run(input: &[u8]) -> (Vec<Value>, usize) {
        let (mut client, server) = tokio::io::duplex(1 << 20);
        let (out_read, out_write) = tokio::io::duplex(1 << 20);
        let mut t = LineTransport::new(tokio::io::BufReader::new(server), out_write);
        let input = input.to_vec();
        tokio::spawn(async move {
            client.write_all(&input).await.unwrap();
        });
        let mut passed = 0;
        while t.receive().await.is_some() {
            passed += 1;
        }
        drop(t);
        let mut text = String::new();
        let mut out_read = out_read;
        out_read.read_to_string(&mut text).await.unwrap();
        let answers = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        (answers, passed)
    }

    #[tokio::test]
    async fn broken_lines_are_answered_as_json_rpc_says() {
        let ping = br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#;
        let mut input = Vec::new();
        input.extend_from_slice(b"this is not json\n");
        input.extend_from_slice(b"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]\n");
        input.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"nothing\":1}\n");
        input.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/lsp-thing\"}\n");
        input.extend_from_slice(b"42\n\n");
        input.extend_from_slice(ping);
        input.push(b'\n');
        let (answers, passed) = run(&input).await;
        // The ping, and the notification vak does not know (rmcp reads it as a custom one,
        // which the server ignores): never answered either way.
        assert_eq!(passed, 2, "the ping and the notification go through");
        let codes: Vec<(i64, Value)> = answers
            .iter()
            .map(|a| (a["error"]["code"].as_i64().unwrap(), a["id"].clone()))
            .collect();
        assert_eq!(
            codes,
            [
                (-32700, Value::Null),
                (-32600, Value::Null),
                (-32600, json!("x")),
                (-32600, Value::Null),
            ]
        );
        assert!(
            answers
                .iter()
                .all(|a| a.as_object().unwrap().contains_key("id"))
        );
    }

    #[tokio::test]
    async fn a_line_too_long_is_answered_and_skipped() {
        let mut input = vec![b'x'; MAX_LINE + 10];
        input.push(b'\n');
        input.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n");
        let (answers, passed) = run(&input).await;
        assert_eq!(passed, 1);
        assert_eq!(answers.len(), 1);
        assert_eq!(answers[0]["error"]["code"], -32600);
    }

    #[tokio::test]
    async fn a_storm_of_broken_lines_is_answered_only_so_far() {
        let input = b"garbage\n".repeat(MAX_ERRORS_IN_A_ROW as usize * 3);
        let (answers, _) = run(&input).await;
        assert_eq!(answers.len(), MAX_ERRORS_IN_A_ROW as usize);
    }
}

//! A small HTTP/1.1 client for the `http` mode: POSTs on one keep-alive `TcpStream`, responses
//! framed by `Content-Length`, chunked transfer coding or the end of the connection, and the
//! `data:` payloads of a `text/event-stream` body.
//!
//! std only, and one blocking connection per thread, so the figures are the server's and a
//! client stack's scheduling is not part of them.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Where to POST: an `http://host[:port]/path` URL.
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoint {
    /// The URL as given (for reports).
    pub url: String,
    /// The `Host` header: the URL's authority.
    authority: String,
    /// What to connect to (`host:port`).
    addr: String,
    /// The request target (path and query).
    path: String,
}

impl Endpoint {
    /// Parse a URL; only `http://` (a load generator for loopback and a private network).
    pub fn parse(url: &str) -> Result<Endpoint, String> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| format!("`{url}`: only http:// URLs are supported"))?;
        let rest = rest.split('#').next().unwrap_or_default();
        let (authority, path) = match rest.find(['/', '?']) {
            Some(i) if rest[i..].starts_with('?') => (&rest[..i], format!("/{}", &rest[i..])),
            Some(i) => (&rest[..i], rest[i..].to_string()),
            None => (rest, "/".to_string()),
        };
        if authority.is_empty() || authority.contains('@') {
            return Err(format!("`{url}`: expected http://host[:port]/path"));
        }
        // A port is what follows the last `:`, unless that `:` is inside an IPv6 literal.
        let port = match authority.rfind(':') {
            Some(i) if !authority[i..].contains(']') => Some(&authority[i + 1..]),
            _ => None,
        };
        let addr = match port {
            Some(p) => {
                p.parse::<u16>()
                    .map_err(|_| format!("`{url}`: bad port `{p}`"))?;
                authority.to_string()
            }
            None => format!("{authority}:80"),
        };
        Ok(Endpoint {
            url: url.to_string(),
            authority: authority.to_string(),
            addr,
            path,
        })
    }
}

/// One HTTP response, body read in full.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    pub status: u16,
    /// `Content-Type`, lower-cased (empty when absent).
    pub content_type: String,
    pub body: Vec<u8>,
    /// The server ends the connection after this response.
    pub close: bool,
}

impl Response {
    pub fn is_event_stream(&self) -> bool {
        self.content_type.starts_with("text/event-stream")
    }
}

/// A keep-alive connection to one endpoint, opened again when the server closed it.
pub struct Client {
    endpoint: Endpoint,
    /// The request line and the fixed headers, rendered once.
    head: Vec<u8>,
    timeout: Duration,
    conn: Option<BufReader<TcpStream>>,
    out: Vec<u8>,
    /// After a failed connect, not before this (a dead node must not spin its threads).
    retry_at: Option<Instant>,
    backoff: Duration,
}

const FIRST_BACKOFF: Duration = Duration::from_millis(10);
const MAX_BACKOFF: Duration = Duration::from_millis(200);

impl Client {
    /// A client that sends `headers` (beside `Host` and `Content-Length`) with every POST.
    pub fn new(endpoint: &Endpoint, headers: &[(&str, &str)], timeout: Duration) -> Client {
        let mut head = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\n",
            endpoint.path, endpoint.authority
        );
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        Client {
            endpoint: endpoint.clone(),
            head: head.into_bytes(),
            timeout,
            conn: None,
            out: Vec::with_capacity(4096),
            retry_at: None,
            backoff: FIRST_BACKOFF,
        }
    }

    /// When a connect may be tried again, while a failed one's backoff lasts.
    pub fn retry_at(&self) -> Option<Instant> {
        self.retry_at.filter(|&at| at > Instant::now())
    }

    /// Open the connection unless it is open (after the backoff of a failed connect).
    pub fn connect(&mut self) -> Result<(), String> {
        if self.conn.is_some() {
            return Ok(());
        }
        if let Some(at) = self.retry_at {
            std::thread::sleep(at.saturating_duration_since(Instant::now()));
        }
        match self.open() {
            Ok(stream) => {
                self.conn = Some(BufReader::with_capacity(64 * 1024, stream));
                self.retry_at = None;
                self.backoff = FIRST_BACKOFF;
                Ok(())
            }
            Err(e) => {
                self.retry_at = Some(Instant::now() + self.backoff);
                self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
                Err(format!("connect {}: {e}", self.endpoint.addr))
            }
        }
    }

    fn open(&self) -> io::Result<TcpStream> {
        let mut last = io::Error::new(io::ErrorKind::NotFound, "the name resolves to nothing");
        for addr in self.endpoint.addr.to_socket_addrs()? {
            match TcpStream::connect_timeout(&addr, self.timeout) {
                Ok(s) => {
                    s.set_nodelay(true)?;
                    s.set_read_timeout(Some(self.timeout))?;
                    s.set_write_timeout(Some(self.timeout))?;
                    return Ok(s);
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// POST `body` and read the response. An error is a transport failure: the connection is
    /// dropped (the next POST opens another), and the request is not sent again.
    pub fn post(&mut self, body: &[u8]) -> Result<Response, String> {
        self.connect()?;
        let Some(conn) = self.conn.as_mut() else {
            return Err("not connected".into());
        };
        self.out.clear();
        self.out.extend_from_slice(&self.head);
        self.out
            .extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
        self.out.extend_from_slice(body);
        let mut stream: &TcpStream = conn.get_ref();
        if let Err(e) = stream.write_all(&self.out) {
            self.conn = None;
            return Err(format!("write: {e}"));
        }
        match read_response(conn) {
            Ok(r) => {
                if r.close {
                    self.conn = None;
                }
                Ok(r)
            }
            Err(e) => {
                self.conn = None;
                Err(format!("read: {e}"))
            }
        }
    }
}

/// Read one response (after any `1xx`), its body framed as the headers say.
pub fn read_response<R: BufRead>(r: &mut R) -> io::Result<Response> {
    let mut line = Vec::with_capacity(128);
    loop {
        if !read_line(r, &mut line)? {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the server closed the connection",
            ));
        }
        let text = String::from_utf8_lossy(&line);
        let mut parts = text.splitn(3, ' ');
        let version = parts.next().unwrap_or_default().to_string();
        let status: u16 = parts
            .next()
            .and_then(|s| s.parse().ok())
            .filter(|_| version.starts_with("HTTP/1."))
            .ok_or_else(|| invalid(format!("not an HTTP/1.x status line: {text:?}")))?;
        let mut content_length = None;
        let mut chunked = false;
        let mut other_coding = false;
        let mut close = version == "HTTP/1.0";
        let mut content_type = String::new();
        loop {
            if !read_line(r, &mut line)? {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the connection ended in the headers",
                ));
            }
            if line.is_empty() {
                break;
            }
            let text = String::from_utf8_lossy(&line);
            let Some((name, value)) = text.split_once(':') else {
                return Err(invalid(format!("not a header: {text:?}")));
            };
            let value = value.trim().to_ascii_lowercase();
            match name.trim().to_ascii_lowercase().as_str() {
                "content-length" => {
                    let n = value
                        .parse::<u64>()
                        .map_err(|_| invalid(format!("bad Content-Length {value:?}")))?;
                    content_length = Some(n);
                }
                "transfer-encoding" => {
                    // Chunked is the last coding when present; any other framing lasts to the end.
                    chunked = value.rsplit(',').next().map(str::trim) == Some("chunked");
                    other_coding = !chunked;
                }
                "connection" => {
                    for token in value.split(',').map(str::trim) {
                        match token {
                            "close" => close = true,
                            "keep-alive" => close = false,
                            _ => {}
                        }
                    }
                }
                "content-type" => content_type = value,
                _ => {}
            }
        }
        if (100..200).contains(&status) && status != 101 {
            continue;
        }
        let mut body = Vec::new();
        let bodiless = status == 204 || status == 304;
        if bodiless {
            // Nothing follows the headers.
        } else if chunked {
            read_chunked(r, &mut body, &mut line)?;
        } else if let (Some(n), false) = (content_length, other_coding) {
            r.take(n).read_to_end(&mut body)?;
            if body.len() as u64 != n {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "the connection ended after {} of {n} body bytes",
                        body.len()
                    ),
                ));
            }
        } else {
            r.read_to_end(&mut body)?;
            close = true;
        }
        return Ok(Response {
            status,
            content_type,
            body,
            close,
        });
    }
}

fn read_chunked<R: BufRead>(r: &mut R, body: &mut Vec<u8>, line: &mut Vec<u8>) -> io::Result<()> {
    let eof = || {
        io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the connection ended in a chunk",
        )
    };
    loop {
        if !read_line(r, line)? {
            return Err(eof());
        }
        let text = String::from_utf8_lossy(line);
        let size = text.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size, 16)
            .map_err(|_| invalid(format!("bad chunk size {text:?}")))?;
        if size == 0 {
            // Trailers, up to the blank line.
            loop {
                if !read_line(r, line)? {
                    return Err(eof());
                }
                if line.is_empty() {
                    return Ok(());
                }
            }
        }
        let start = body.len();
        r.take(size as u64).read_to_end(body)?;
        if body.len() - start != size {
            return Err(eof());
        }
        if !read_line(r, line)? || !line.is_empty() {
            return Err(invalid("a chunk not followed by CRLF".into()));
        }
    }
}

/// One line without its CRLF (or LF) into `line`; false at the end of the stream.
fn read_line<R: BufRead>(r: &mut R, line: &mut Vec<u8>) -> io::Result<bool> {
    line.clear();
    if r.read_until(b'\n', line)? == 0 {
        return Ok(false);
    }
    if line.last() == Some(&b'\n') {
        line.pop();
        if line.last() == Some(&b'\r') {
            line.pop();
        }
    }
    Ok(true)
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

/// The `data` of each event of a `text/event-stream` body, in order (an event's `data:` lines
/// joined by `\n`; an event cut off by the end of the body still counts).
pub fn sse_data(body: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(body);
    let mut events = Vec::new();
    let mut data: Option<String> = None;
    for line in text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)) {
        if line.is_empty() {
            events.extend(data.take());
            continue;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        if field == "data" {
            let value = value.strip_prefix(' ').unwrap_or(value);
            match &mut data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => data = Some(value.to_string()),
            }
        }
    }
    events.extend(data);
    events
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn read(raw: &str) -> io::Result<Response> {
        read_response(&mut Cursor::new(raw.as_bytes().to_vec()))
    }

    #[test]
    fn content_length_body_and_keep_alive() {
        let raw = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"a\":true}\nHTTP/1.1 503 Busy\r\ncontent-length: 0\r\n\r\n";
        let mut c = Cursor::new(raw.as_bytes().to_vec());
        let first = read_response(&mut c).unwrap();
        assert_eq!(first.status, 200);
        assert_eq!(first.content_type, "application/json");
        assert_eq!(first.body, b"{\"a\":true}\n");
        assert!(!first.close);
        // The next response on the same connection starts right after the body.
        let second = read_response(&mut c).unwrap();
        assert_eq!(second.status, 503);
        assert!(second.body.is_empty());
    }

    #[test]
    fn chunked_body_with_extensions_and_trailers() {
        let raw = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n4;x=y\r\n{\"id\r\nB\r\n\":1,\"ok\":1}\r\n0\r\nX-Trailer: t\r\n\r\n";
        let r = read(raw).unwrap();
        assert_eq!(r.body, b"{\"id\":1,\"ok\":1}");
        assert!(r.close, "Connection: close is kept");
    }

    #[test]
    fn interim_responses_are_skipped_and_http10_closes() {
        let raw = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}";
        let r = read(raw).unwrap();
        assert_eq!(
            (r.status, r.body.as_slice(), r.close),
            (200, &b"{}"[..], true)
        );
    }

    #[test]
    fn a_body_without_length_lasts_to_the_end() {
        let r = read("HTTP/1.1 200 OK\r\n\r\nall of it").unwrap();
        assert_eq!(r.body, b"all of it");
        assert!(r.close);
    }

    #[test]
    fn truncated_responses_are_errors() {
        assert_eq!(
            read("").unwrap_err().kind(),
            io::ErrorKind::UnexpectedEof,
            "a closed idle connection"
        );
        let short = read("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}").unwrap_err();
        assert_eq!(short.kind(), io::ErrorKind::UnexpectedEof);
        let chunk =
            read("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{}").unwrap_err();
        assert_eq!(chunk.kind(), io::ErrorKind::UnexpectedEof);
        let garbage = read("SSH-2.0-OpenSSH\r\n\r\n").unwrap_err();
        assert_eq!(garbage.kind(), io::ErrorKind::InvalidData);
    }

    #[test]
    fn event_stream_data_lines() {
        let body = b"id: 7\r\nevent: message\r\ndata: {\"jsonrpc\":\"2.0\",\r\ndata:\"id\":3}\r\n\r\n: a comment\n\ndata: {\"last\":1}";
        assert_eq!(
            sse_data(body),
            vec!["{\"jsonrpc\":\"2.0\",\n\"id\":3}", "{\"last\":1}"]
        );
        let r = read("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\nContent-Length: 8\r\n\r\ndata: 1\n").unwrap();
        assert!(r.is_event_stream());
        assert_eq!(sse_data(&r.body), vec!["1"]);
    }

    #[test]
    fn endpoints() {
        let e = Endpoint::parse("http://127.0.0.1:8080/mcp").unwrap();
        assert_eq!(
            (e.authority.as_str(), e.addr.as_str(), e.path.as_str()),
            ("127.0.0.1:8080", "127.0.0.1:8080", "/mcp")
        );
        let e = Endpoint::parse("http://localhost").unwrap();
        assert_eq!((e.addr.as_str(), e.path.as_str()), ("localhost:80", "/"));
        let e = Endpoint::parse("http://[::1]/mcp?x=1#frag").unwrap();
        assert_eq!((e.addr.as_str(), e.path.as_str()), ("[::1]:80", "/mcp?x=1"));
        let e = Endpoint::parse("http://[::1]:9/mcp").unwrap();
        assert_eq!(e.addr, "[::1]:9");
        for bad in [
            "https://x/mcp",
            "http:///mcp",
            "http://h:99999/",
            "http://u@h/",
            "x",
        ] {
            assert!(Endpoint::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn posts_over_one_connection_and_reopens_a_closed_one() {
        use std::net::TcpListener;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let mut accepted = 0;
            // First connection: two requests, the second answered with Connection: close.
            // Second connection: one request.
            for answers in [2, 1] {
                let (s, _) = listener.accept().unwrap();
                accepted += 1;
                let mut r = BufReader::new(s.try_clone().unwrap());
                let mut w = s;
                for i in 0..answers {
                    let mut len = 0;
                    let mut line = Vec::new();
                    loop {
                        read_line(&mut r, &mut line).unwrap();
                        if line.is_empty() {
                            break;
                        }
                        let l = String::from_utf8_lossy(&line).to_ascii_lowercase();
                        if let Some(v) = l.strip_prefix("content-length:") {
                            len = v.trim().parse().unwrap();
                        }
                    }
                    let mut body = vec![0; len];
                    r.read_exact(&mut body).unwrap();
                    let close = if answers == 2 && i == 1 {
                        "Connection: close\r\n"
                    } else {
                        ""
                    };
                    write!(w, "HTTP/1.1 200 OK\r\n{close}Content-Length: {len}\r\n\r\n").unwrap();
                    w.write_all(&body).unwrap();
                }
            }
            accepted
        });
        let e = Endpoint::parse(&format!("http://127.0.0.1:{port}/mcp")).unwrap();
        let mut c = Client::new(
            &e,
            &[("Content-Type", "application/json")],
            Duration::from_secs(5),
        );
        for body in ["one", "two", "three"] {
            let r = c.post(body.as_bytes()).unwrap();
            assert_eq!(r.body, body.as_bytes());
        }
        assert_eq!(server.join().unwrap(), 2);
        // The listener is gone: a transport error, and the next try waits out a backoff.
        let err = c.post(b"four").unwrap_err();
        assert!(
            ["connect", "write", "read"]
                .iter()
                .any(|p| err.starts_with(p)),
            "{err}"
        );
    }
}

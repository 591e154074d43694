//! What the `vak audit serve` tests share: HTTP/1.1 requests as a browser makes them, the server
//! started as a reviewer starts it, and headless Chromium.
#![allow(dead_code)]

use std::path::Path;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

/// What a page answered: status, headers (names lowercase), body.
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One HTTP/1.1 request to `addr` with this `Host` (the server answers with a length, then
/// closes: `Connection: close`).
pub async fn request(addr: &str, method: &str, path: String, host: &str) -> Answer {
    request_with(addr, method, &path, &[("Host", host)], "").await
}

/// One HTTP/1.1 request to `addr` with these headers (`Host` among them, or not) and `body`.
pub async fn request_with(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Answer {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let mut req = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    for (n, v) in headers {
        req.push_str(&format!("{n}: {v}\r\n"));
    }
    if !body.is_empty() || method == "POST" {
        req.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.unwrap();
    let raw = String::from_utf8(raw).expect("the pages are UTF-8");
    let (head, body) = raw.split_once("\r\n\r\n").expect("a head and a body");
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(": "))
        .map(|(n, v)| (n.to_ascii_lowercase(), v.to_string()))
        .collect();
    Answer {
        status,
        headers,
        body: body.to_string(),
    }
}

/// `vak audit serve` on `dir/state`, and the address it printed.
pub async fn serve(dir: &Path, args: &[&str]) -> (tokio::process::Child, String) {
    let (child, addr, _) = serve_saying(dir, args).await;
    (child, addr)
}

/// [`serve`], and the lines it printed before its address (the inbox's link among them).
pub async fn serve_saying(
    dir: &Path,
    args: &[&str],
) -> (tokio::process::Child, String, Vec<String>) {
    let mut child = tokio::process::Command::new(vak_tests::vak_binary())
        .arg("--state-dir")
        .arg(dir.join("state"))
        .args(["audit", "serve"])
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn vak audit serve");
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let mut said = Vec::new();
    let addr = loop {
        let line = tokio::time::timeout(std::time::Duration::from_secs(60), lines.next_line())
            .await
            .expect("vak audit serve prints its address")
            .unwrap()
            .expect("vak audit serve ended before printing its address");
        if let Some(url) = line.strip_prefix("vak: serving the audit pages at http://") {
            break url.trim_end_matches('/').to_string();
        }
        said.push(line);
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, addr, said)
}

/// `s` as a query value (`+` and `:` encoded).
pub fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The call ids a calls page lists, in its order.
pub fn listed(body: &str) -> Vec<String> {
    body.split("<a href=\"/call?id=")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .map(str::to_string)
        .collect()
}

/// A Chromium found on `PATH`, for the browser test.
pub fn chromium() -> Option<String> {
    ["chromium", "chromium-browser"]
        .into_iter()
        .find_map(|name| {
            std::process::Command::new(name)
                .arg("--version")
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|_| name.to_string())
        })
}

/// The DOM of `url` after Chromium (headless) has loaded it and run whatever scripts it would.
pub fn dump_dom(browser: &str, url: &str, profile: &Path) -> String {
    let out = std::process::Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(["--virtual-time-budget=2000", "--dump-dom", url])
        .output()
        .expect("run chromium");
    assert!(out.status.success(), "chromium failed: {out:?}");
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// Ask for a verification (the integrity page's button), wait for it through the progress
/// endpoint, and return the integrity page that shows its verdict.
pub async fn verified(addr: &str) -> Answer {
    let asked = request(addr, "GET", "/integrity?verify=1".into(), "localhost").await;
    assert_eq!(asked.status, 303, "{}", asked.body);
    assert_eq!(asked.header("location"), Some("/integrity"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    loop {
        let p = request(addr, "GET", "/integrity/progress".into(), "localhost").await;
        let v: serde_json::Value = serde_json::from_str(&p.body).expect("progress is JSON");
        if v["state"] != "running" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "verification never ended"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    request(addr, "GET", "/integrity".into(), "localhost").await
}

/// Where the browser tests save their screenshots (test artifacts docs/audit.md shows).
pub fn screenshot_dir() -> std::path::PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join("audit-screenshots")
}

/// A screenshot of `url` in headless Chromium, saved as `name`.png in [`screenshot_dir`].
pub fn screenshot(browser: &str, url: &str, profile: &Path, name: &str) -> std::path::PathBuf {
    screenshot_tall(browser, url, profile, name, 1300)
}

/// [`screenshot`] of the first `height` pixels of the page.
pub fn screenshot_tall(
    browser: &str,
    url: &str,
    profile: &Path,
    name: &str,
    height: u32,
) -> std::path::PathBuf {
    let dir = screenshot_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{name}.png"));
    let out = std::process::Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--hide-scrollbars",
        ])
        .arg(format!("--window-size=1280,{height}"))
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", file.display()))
        .arg(url)
        .output()
        .expect("run chromium");
    assert!(out.status.success(), "chromium failed: {out:?}");
    let png = std::fs::read(&file).expect("the screenshot");
    assert!(png.starts_with(b"\x89PNG"), "{} is a PNG", file.display());
    eprintln!("screenshot: {}", file.display());
    file
}

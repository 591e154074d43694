//! A tiny client of the Chrome DevTools protocol over a pipe: headless Chromium started with
//! `--remote-debugging-pipe` reads commands on its fd 3 and writes answers and events on its fd
//! 4, each a JSON message ended by a NUL byte. A shell maps the two onto the child's stdin and
//! stdout (no fd juggling here). Enough to open a page, run an expression in it and wait.
#![allow(dead_code)]

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

/// How long one command's answer is waited for.
const ANSWER_WITHIN: Duration = Duration::from_secs(30);

/// A headless Chromium driven over its debugging pipe; killed when dropped.
pub struct Browser {
    child: Child,
    to: ChildStdin,
    from: Receiver<Value>,
    next_id: u64,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One page (a target) of the browser, attached in flat mode: its commands carry its session.
pub struct Tab {
    pub session: String,
}

impl Browser {
    /// Start `binary` (headless, its profile in `profile`).
    pub fn launch(binary: &str, profile: &std::path::Path) -> Browser {
        let mut child = Command::new("sh")
            .arg("-c")
            // fd 3: what we write (its stdin pipe); fd 4: what we read (its stdout pipe).
            .arg(r#"exec "$0" "$@" 3<&0 4>&1 </dev/null >/dev/null"#)
            .arg(binary)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--remote-debugging-pipe",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("about:blank")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromium");
        let to = child.stdin.take().expect("its fd 3");
        let mut reader = BufReader::new(child.stdout.take().expect("its fd 4"));
        let (tx, from) = channel();
        std::thread::spawn(move || {
            loop {
                let mut message = Vec::new();
                match reader.read_until(0, &mut message) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
                message.pop_if(|b| *b == 0);
                let Ok(v) = serde_json::from_slice::<Value>(&message) else {
                    continue;
                };
                if tx.send(v).is_err() {
                    return;
                }
            }
        });
        Browser {
            child,
            to,
            from,
            next_id: 0,
        }
    }

    /// Send `method` (to `session`'s page, or to the browser) and wait for its answer's
    /// `result`; an error answer panics with what the browser said.
    pub fn send(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        self.call(session, method, params)
            .unwrap_or_else(|e| panic!("chromium refused {method}: {e}"))
    }

    /// [`Browser::send`], the browser's error answer returned. Events are skipped.
    pub fn call(
        &mut self,
        session: Option<&str>,
        method: &str,
        params: Value,
    ) -> Result<Value, Value> {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({ "id": id, "method": method, "params": params });
        if let Some(s) = session {
            message["sessionId"] = json!(s);
        }
        let mut bytes = serde_json::to_vec(&message).unwrap();
        bytes.push(0);
        self.to.write_all(&bytes).expect("write to chromium");
        self.to.flush().expect("write to chromium");
        let deadline = Instant::now() + ANSWER_WITHIN;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let v = match self.from.recv_timeout(left) {
                Ok(v) => v,
                Err(RecvTimeoutError::Timeout) => panic!("chromium did not answer {method}"),
                Err(RecvTimeoutError::Disconnected) => panic!("chromium went away ({method})"),
            };
            if v["id"] != id {
                continue;
            }
            if !v["error"].is_null() {
                return Err(v["error"].clone());
            }
            return Ok(v["result"].clone());
        }
    }

    /// A new page, attached.
    pub fn tab(&mut self) -> Tab {
        let target = self.send(None, "Target.createTarget", json!({ "url": "about:blank" }));
        let id = target["targetId"]
            .as_str()
            .expect("a target id")
            .to_string();
        let attached = self.send(
            None,
            "Target.attachToTarget",
            json!({ "targetId": id, "flatten": true }),
        );
        Tab {
            session: attached["sessionId"]
                .as_str()
                .expect("a session id")
                .to_string(),
        }
    }

    /// Load `url` in `tab` (returns when the navigation is under way; see [`Browser::wait`]).
    pub fn navigate(&mut self, tab: &Tab, url: &str) {
        self.send(Some(&tab.session), "Page.navigate", json!({ "url": url }));
    }

    /// The value of `expression`, run in `tab`'s page (`null` when it threw, or when the page
    /// was between two documents).
    pub fn evaluate(&mut self, tab: &Tab, expression: &str) -> Value {
        let r = self.call(
            Some(&tab.session),
            "Runtime.evaluate",
            json!({ "expression": expression, "returnByValue": true }),
        );
        match r {
            Ok(r) if r["exceptionDetails"].is_null() => r["result"]["value"].clone(),
            _ => Value::Null,
        }
    }

    /// Evaluate `expression` in `tab` until it is `true` (a loaded page that shows what is
    /// waited for), up to `within`; whether it became so.
    pub fn wait(&mut self, tab: &Tab, expression: &str, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        let ready = format!("document.readyState === 'complete' && !!({expression})");
        while Instant::now() < deadline {
            if self.evaluate(tab, &ready) == Value::Bool(true) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }
}

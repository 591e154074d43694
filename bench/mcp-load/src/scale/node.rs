//! The vak nodes a configuration runs: their temporary folders, their stderr kept for a
//! failure's message, and how each is started and stopped.

use super::*;

/// A folder removed (with everything in it) when dropped.
pub(crate) struct TempDir(PathBuf);

impl TempDir {
    /// A new folder under the system temp folder.
    pub(crate) fn new(label: &str) -> Result<TempDir, String> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        TempDir::create(std::env::temp_dir().join(format!(
            "vak-mcp-load-{label}-{}-{}-{nanos}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        )))
    }

    /// The new folder `path` (its parent exists).
    pub(crate) fn create(path: PathBuf) -> Result<TempDir, String> {
        fs::create_dir(&path).map_err(|e| format!("creating {}: {e}", path.display()))?;
        Ok(TempDir(path))
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// The last lines a node wrote to stderr.
#[derive(Default)]
pub(crate) struct StderrTail {
    /// (written after the ready line, the line)
    pub(crate) lines: VecDeque<(bool, String)>,
    /// Lines written after the ready line, in all.
    pub(crate) after_ready: usize,
}

/// A running `vak serve --http` node; dropping it kills it and removes its state dir.
pub(crate) struct Node {
    pub(crate) name: String,
    pub(crate) child: Child,
    /// The URL from its ready line, once it came.
    pub(crate) ready: mpsc::Receiver<String>,
    pub(crate) stderr: Arc<Mutex<StderrTail>>,
    /// Dropped after the node is killed (fields drop after `Drop::drop`).
    pub(crate) _state: TempDir,
}

/// How a node is started.
pub(crate) struct NodeSpec<'a> {
    pub(crate) vak: &'a Path,
    pub(crate) cache: &'a Path,
    /// The capped policy file, when the configuration is capped.
    pub(crate) policy: Option<&'a Path>,
    /// The shared store's URL, for a PostgreSQL configuration.
    pub(crate) store: Option<&'a str>,
}

impl Node {
    /// Starts `vak … serve --http 127.0.0.1:0` with its own state dir `state`, and a thread that
    /// drains its stderr (a full pipe would block it), watching for the ready line.
    pub(crate) fn spawn(name: &str, spec: &NodeSpec, state: TempDir) -> Result<Node, String> {
        let mut command = Command::new(spec.vak);
        command
            .arg("--state-dir")
            .arg(state.path())
            .arg("--cache-dir")
            .arg(spec.cache);
        if let Some(policy) = spec.policy {
            command.arg("--policy").arg(policy);
        }
        if let Some(url) = spec.store {
            command.args(["--store", url, "--node", name]);
        }
        command.args(["serve", "--http", "127.0.0.1:0"]);
        for var in NODE_ENV {
            command.env_remove(var);
        }
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("node {name}: could not run {}: {e}", spec.vak.display()))?;
        let stderr = Arc::new(Mutex::new(StderrTail::default()));
        let (tx, ready) = mpsc::channel();
        if let Some(pipe) = child.stderr.take() {
            let tail = Arc::clone(&stderr);
            std::thread::spawn(move || drain(pipe, &tail, tx));
        }
        Ok(Node {
            name: name.to_owned(),
            child,
            ready,
            stderr,
            _state: state,
        })
    }

    /// Waits for the ready line: the node's endpoint.
    pub(crate) fn wait_ready(&mut self) -> Result<Endpoint, String> {
        match self.ready.recv_timeout(READY_TIMEOUT) {
            Ok(url) => Endpoint::parse(&url).map_err(|e| format!("node {}: {e}", self.name)),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = wait_briefly(&mut self.child)
                    .map_or_else(|| "its stderr closed".to_owned(), |s| s.to_string());
                Err(format!(
                    "node {} ended before it was ready ({status}){}",
                    self.name,
                    self.stderr_tail()
                ))
            }
            Err(mpsc::RecvTimeoutError::Timeout) => Err(format!(
                "node {} printed no `{READY_LINE}` line within {} s{}",
                self.name,
                READY_TIMEOUT.as_secs(),
                self.stderr_tail()
            )),
        }
    }

    /// Err when the node has exited.
    pub(crate) fn check_alive(&mut self) -> Result<(), String> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(format!(
                "node {} exited during the run ({status}){}",
                self.name,
                self.stderr_tail()
            )),
            Err(e) => Err(format!("node {}: {e}", self.name)),
        }
    }

    /// `; its stderr ended with:` and the last lines, or nothing when it wrote none.
    pub(crate) fn stderr_tail(&self) -> String {
        let tail = self.stderr.lock().unwrap_or_else(|e| e.into_inner());
        if tail.lines.is_empty() {
            return "; it wrote nothing to stderr".into();
        }
        let lines: Vec<&str> = tail.lines.iter().map(|(_, l)| l.as_str()).collect();
        format!("; its stderr ended with:\n    {}", lines.join("\n    "))
    }

    /// What the node wrote to stderr after it was ready, if anything: a count and the last lines.
    pub(crate) fn notes(&self) -> Option<String> {
        let tail = self.stderr.lock().unwrap_or_else(|e| e.into_inner());
        if tail.after_ready == 0 {
            return None;
        }
        let lines: Vec<&str> = (tail.lines.iter())
            .filter(|(after, _)| *after)
            .map(|(_, l)| l.as_str())
            .collect();
        let shown = lines.len().min(3);
        Some(format!(
            "node {} wrote {} line(s) to stderr while serving; the last:\n    {}",
            self.name,
            tail.after_ready,
            lines[lines.len() - shown..].join("\n    ")
        ))
    }
}

impl Drop for Node {
    /// Kills the node and reaps it; its state dir goes after.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads a node's stderr to its end: sends the URL of the ready line on `ready`, keeps the other
/// lines' tail.
pub(crate) fn drain(pipe: ChildStderr, tail: &Mutex<StderrTail>, ready: mpsc::Sender<String>) {
    let mut reader = BufReader::new(pipe);
    let mut ready = Some(ready);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let line = clip(&strip_ansi(&String::from_utf8_lossy(&buf)), 300);
        if ready.is_some()
            && let Some(at) = line.find(READY_LINE)
        {
            let url = line[at + READY_LINE.len()..].trim().to_owned();
            if let Some(tx) = ready.take() {
                let _ = tx.send(url);
            }
            continue;
        }
        let mut tail = tail.lock().unwrap_or_else(|e| e.into_inner());
        let after_ready = ready.is_none();
        tail.after_ready += usize::from(after_ready);
        if tail.lines.len() == STDERR_LINES {
            tail.lines.pop_front();
        }
        tail.lines.push_back((after_ready, line));
    }
}

/// `text` without ANSI escape sequences (vak's log lines are coloured).
pub(crate) fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        // CSI: `ESC [`, parameters, then a final byte in @..~; any other escape: one character.
        if chars.next_if_eq(&'[').is_some() {
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
        } else {
            chars.next();
        }
    }
    out
}

/// The exit status of `child` if it ends within a second.
pub(crate) fn wait_briefly(child: &mut Child) -> Option<std::process::ExitStatus> {
    let until = Instant::now() + Duration::from_secs(1);
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if Instant::now() >= until {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

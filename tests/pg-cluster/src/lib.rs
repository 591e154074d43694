//! A throwaway PostgreSQL cluster for vak's tests and benchmarks.
//!
//! [`Cluster::start`] runs `initdb` in a fresh temporary folder and starts `postgres` on it,
//! listening on 127.0.0.1 only (on a free port) with its unix socket in that folder, so it never
//! touches a system cluster or `/var/run/postgresql`. It creates the role `vak` (trusted, no
//! password) and the database `vak`; [`Cluster::url`] is the URL to connect to. Dropping the
//! [`Cluster`] stops the server and removes the folder. [`Cluster::start_with`] also passes server
//! settings of its own (`-c name=value`), e.g. `shared_preload_libraries=pg_stat_statements`.
//!
//! The PostgreSQL binaries are looked up in `VAK_PG_BIN` (a folder), then in the output of
//! `pg_config --bindir`, then in the highest-numbered `/usr/lib/postgresql/*/bin`. `initdb` refuses
//! to run as root, so as root every PostgreSQL command runs as the `postgres` system user (through
//! `runuser`), and the temporary folder is handed to that user.
//!
//! Tests that need a cluster call [`available`] first and skip with its message when it fails.

use std::ffi::{CString, OsStr};
use std::fs;
use std::io::{self, Write};
use std::net::{Ipv4Addr, TcpListener};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

mod freeze;
pub use freeze::Frozen;

/// The system user that runs PostgreSQL when we are root.
const OS_USER: &str = "postgres";
/// The superuser role `initdb` creates, and the database the cluster serves.
const ROLE: &str = "vak";
const DATABASE: &str = "vak";
/// The binaries a cluster needs.
const TOOLS: [&str; 6] = [
    "initdb",
    "pg_ctl",
    "postgres",
    "pg_isready",
    "psql",
    "createdb",
];
/// How long a start may take until the server accepts connections.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How many free ports a start tries when the one it picked was taken meanwhile.
const PORT_ATTEMPTS: usize = 3;
/// How many lines of the server log an error quotes.
const LOG_TAIL_LINES: usize = 30;

/// A running (or stopped) PostgreSQL cluster of its own, in a temporary folder.
///
/// The server listens on 127.0.0.1 only; the role `vak` is trusted (no password) and owns the
/// database `vak`. Dropping it stops the server at once (`pg_ctl stop -m immediate`) and removes
/// the folder with all the data.
#[derive(Debug)]
pub struct Cluster {
    /// The temporary folder: the unix socket, the server log and `data/`.
    root: PathBuf,
    /// The data folder (`root/data`).
    data: PathBuf,
    /// The server log (`root/server.log`).
    log: PathBuf,
    /// The TCP port on 127.0.0.1 (0 until a start succeeded).
    port: u16,
    /// The folder holding the PostgreSQL binaries.
    bin: PathBuf,
    /// Whom the PostgreSQL commands run as.
    run_as: RunAs,
    /// Server settings of the caller's, passed as `-c name=value` at every start.
    settings: Vec<(String, String)>,
}

/// Whom the PostgreSQL commands run as.
#[derive(Debug, Clone)]
enum RunAs {
    /// This process's own user (not root).
    Me,
    /// Root: the `postgres` system user, through `runuser`.
    User { runuser: PathBuf, name: String },
}

/// Says whether a cluster can be started here, without starting anything: the PostgreSQL
/// binaries are found and, as root, `runuser` and the `postgres` system user exist.
///
/// The error says what is missing and how to fix it; tests print it as their skip message.
pub fn available() -> Result<(), String> {
    find_bin()?;
    run_as().map(|_| ())
}

impl Cluster {
    /// Starts a fresh cluster: `initdb` (`-A trust -U vak -E UTF8 --locale=C --no-sync`) in a new
    /// temporary folder, then `postgres` listening on 127.0.0.1 only, on a free port, with its
    /// unix socket in the temporary folder. Creates the database `vak` owned by the role `vak`, and
    /// returns once the server accepts connections (up to 30 s).
    ///
    /// Errs when the binaries are missing or the start fails; a failed start quotes the tail of the
    /// server log. Nothing is left behind on an error.
    pub fn start() -> Result<Cluster, String> {
        Cluster::start_with(&[])
    }

    /// Like [`Cluster::start`], with extra server settings passed as `-c name=value` after the
    /// cluster's own (so they may override them), e.g.
    /// `("shared_preload_libraries", "pg_stat_statements")`. [`Cluster::restart`] passes them
    /// again.
    ///
    /// Errs, before anything is started, when a name is not a setting name (letters, digits, `_`
    /// and `.`); a value is passed as it is.
    pub fn start_with(settings: &[(&str, &str)]) -> Result<Cluster, String> {
        let settings = settings
            .iter()
            .map(|&(name, value)| {
                setting_name_is_valid(name)
                    .then(|| (name.to_owned(), value.to_owned()))
                    .ok_or_else(|| format!("`{name}` is not a PostgreSQL setting name"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let bin = find_bin()?;
        let run_as = run_as()?;
        let root = make_temp_folder(&run_as)?;
        // From here on, dropping `cluster` cleans up whatever a failed step left.
        let mut cluster = Cluster {
            data: root.join("data"),
            log: root.join("server.log"),
            root,
            port: 0,
            bin,
            run_as,
            settings,
        };
        cluster.initdb()?;
        let mut attempt = 1;
        loop {
            cluster.port = free_port()?;
            match cluster.start_server() {
                Ok(()) => break,
                // Another process bound the port between our probe and the server's start.
                Err(_) if attempt < PORT_ATTEMPTS && cluster.port_was_taken() => attempt += 1,
                Err(e) => return Err(e),
            }
        }
        cluster.wait_ready()?;
        cluster
            .run(
                "createdb",
                cluster.tool("createdb").args(["-h", "127.0.0.1"]).args([
                    "-p",
                    &cluster.port.to_string(),
                    "-U",
                    ROLE,
                    "-O",
                    ROLE,
                    DATABASE,
                ]),
            )
            .map_err(|e| format!("{e}\n{}", cluster.log_tail()))?;
        Ok(cluster)
    }

    /// The TCP port the server listens on, on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The URL of the database: `postgres://vak@127.0.0.1:PORT/vak`.
    pub fn url(&self) -> String {
        format!("postgres://{ROLE}@127.0.0.1:{}/{DATABASE}", self.port)
    }

    /// Stops the server (`pg_ctl stop -m fast -w`): sessions are ended, the data stays for
    /// [`Cluster::restart`].
    pub fn stop(&self) -> Result<(), String> {
        self.run(
            "stopping PostgreSQL (pg_ctl stop -m fast)",
            self.tool("pg_ctl")
                .arg("-D")
                .arg(&self.data)
                .args(["-m", "fast", "-w", "-t", "30", "stop"]),
        )
        .map(|_| ())
    }

    /// Starts the server again after [`Cluster::stop`], on the same port and data, and returns
    /// once it accepts connections. Errs (quoting the server log) when it does not come up, e.g.
    /// because another process took the port meanwhile.
    pub fn restart(&self) -> Result<(), String> {
        self.start_server()?;
        self.wait_ready()
    }

    /// Runs `sql` with `psql -X -q -A -t -v ON_ERROR_STOP=1` against the database `vak`, as the
    /// role `vak`: statements run one after the other and stop at the first error. Returns the
    /// output (rows unaligned, `|` between columns, one row a line) trimmed, or the error `psql`
    /// printed.
    pub fn psql(&self, sql: &str) -> Result<String, String> {
        let mut child = self
            .tool("psql")
            .args([
                "-X",
                "-q",
                "-A",
                "-t",
                "-v",
                "ON_ERROR_STOP=1",
                "-h",
                "127.0.0.1",
            ])
            .args([
                "-p",
                &self.port.to_string(),
                "-U",
                ROLE,
                "-d",
                DATABASE,
                "-f",
                "-",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("could not run psql ({}): {e}", self.bin.display()))?;
        // Feed the SQL from another thread: psql may fill its output pipe before it has read all
        // of its input.
        let writer = child.stdin.take().map(|mut stdin| {
            let sql = sql.to_owned();
            std::thread::spawn(move || stdin.write_all(sql.as_bytes()))
        });
        let out = child
            .wait_with_output()
            .map_err(|e| format!("waiting for psql: {e}"))?;
        let written = writer.map(|w| w.join());
        if !out.status.success() {
            return Err(format!(
                "psql failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        match written {
            Some(Ok(Err(e))) => Err(format!("writing the SQL to psql: {e}")),
            Some(Err(_)) => Err("writing the SQL to psql: the writer thread panicked".to_owned()),
            _ => Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned()),
        }
    }

    /// A command running the PostgreSQL binary `tool` as the right user, in the temporary folder
    /// (the user `postgres` may not be allowed into our working directory).
    fn tool(&self, tool: &str) -> Command {
        let program = self.bin.join(tool);
        let mut command = match &self.run_as {
            RunAs::Me => Command::new(program),
            RunAs::User { runuser, name } => {
                let mut command = Command::new(runuser);
                command.args([OsStr::new("-u"), OsStr::new(name), OsStr::new("--")]);
                command.arg(program);
                command
            }
        };
        command
            .current_dir(&self.root)
            .env("PGCONNECT_TIMEOUT", "10")
            .stdin(Stdio::null());
        command
    }

    /// Runs `command` to its end; Err (saying `what` failed, with its output) unless it succeeds.
    fn run(&self, what: &str, command: &mut Command) -> Result<Output, String> {
        let out = command.output().map_err(|e| {
            format!(
                "{what}: could not run {}: {e}",
                Path::new(command.get_program()).display()
            )
        })?;
        if out.status.success() {
            return Ok(out);
        }
        let mut text = String::from_utf8_lossy(&out.stderr).trim().to_owned();
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !stdout.trim().is_empty() {
            text = format!("{}\n{text}", stdout.trim());
        }
        Err(format!("{what} failed ({}):\n{text}", out.status))
    }

    /// `initdb` into `data/`.
    fn initdb(&self) -> Result<(), String> {
        let mut command = self.tool("initdb");
        command.arg("-D").arg(&self.data).args([
            "-A",
            "trust",
            "-U",
            ROLE,
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
            "--no-instructions",
        ]);
        self.run("initdb", &mut command).map(|_| ()).map_err(|e| {
            if matches!(self.run_as, RunAs::User { .. }) {
                format!(
                    "{e}\n(as root, PostgreSQL runs as the `{OS_USER}` user, which must be able \
                     to reach {}; set TMPDIR to a folder it can enter)",
                    self.root.display()
                )
            } else {
                e
            }
        })
    }

    /// `pg_ctl start` on `self.port` with the cluster's settings and the caller's, waiting until
    /// the server is up.
    fn start_server(&self) -> Result<(), String> {
        let port = self.port;
        // pg_ctl hands the options to a shell: every value the caller gave is single-quoted.
        let mut options = format!(
            "-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories='{}' \
             -c max_connections=200",
            self.root.display()
        );
        for (name, value) in &self.settings {
            options.push_str(&format!(" -c {name}={}", shell_quote(value)));
        }
        let mut command = self.tool("pg_ctl");
        command
            .arg("-D")
            .arg(&self.data)
            .arg("-l")
            .arg(&self.log)
            .args(["-w", "-t", "30", "-o", &options, "start"]);
        self.run("starting PostgreSQL (pg_ctl start)", &mut command)
            .map(|_| ())
            .map_err(|e| format!("{e}\n{}", self.log_tail()))
    }

    /// Whether the server log says the last start failed because the port was in use.
    fn port_was_taken(&self) -> bool {
        fs::read_to_string(&self.log)
            .map(|log| {
                let last = log
                    .rfind("starting PostgreSQL")
                    .map_or(&log[..], |at| &log[at..]);
                last.contains("Address already in use")
            })
            .unwrap_or(false)
    }

    /// Waits (up to 30 s) until `pg_isready` says the server accepts connections.
    fn wait_ready(&self) -> Result<(), String> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            let ready = self
                .tool("pg_isready")
                .args(["-q", "-h", "127.0.0.1", "-p", &self.port.to_string()])
                .args(["-U", ROLE, "-d", "postgres", "-t", "2"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .map_err(|e| format!("could not run pg_isready ({}): {e}", self.bin.display()))?;
            if ready.success() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "PostgreSQL on 127.0.0.1:{} did not accept connections within {} s\n{}",
                    self.port,
                    READY_TIMEOUT.as_secs(),
                    self.log_tail()
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The last lines of the server log, for error messages.
    fn log_tail(&self) -> String {
        match fs::read_to_string(&self.log) {
            Ok(log) => {
                let lines: Vec<&str> = log.lines().collect();
                let tail = &lines[lines.len().saturating_sub(LOG_TAIL_LINES)..];
                format!(
                    "server log ({}), last lines:\n{}",
                    self.log.display(),
                    tail.join("\n")
                )
            }
            Err(e) => format!("(no server log at {}: {e})", self.log.display()),
        }
    }
}

impl Drop for Cluster {
    /// Stops the server at once (`pg_ctl stop -m immediate`) and removes the temporary folder.
    /// Failures are ignored: a drop never panics.
    fn drop(&mut self) {
        if self.data.join("postmaster.pid").exists() {
            let _ = self
                .tool("pg_ctl")
                .arg("-D")
                .arg(&self.data)
                .args(["-m", "immediate", "-w", "-t", "30", "stop"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        let _ = fs::remove_dir_all(&self.root);
    }
}

/// The folder holding the PostgreSQL binaries: `VAK_PG_BIN`, else `pg_config --bindir` when it
/// holds `initdb`, else the highest-numbered `/usr/lib/postgresql/*/bin` holding `initdb`.
fn find_bin() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("VAK_PG_BIN").filter(|dir| !dir.is_empty()) {
        let dir = PathBuf::from(dir);
        return match missing_tools(&dir) {
            None => Ok(dir),
            Some(missing) => Err(format!(
                "VAK_PG_BIN={} does not hold the PostgreSQL binaries ({missing}): set VAK_PG_BIN \
                 to the folder holding initdb, pg_ctl, postgres, pg_isready, psql and createdb \
                 (e.g. /usr/lib/postgresql/15/bin)",
                dir.display()
            )),
        };
    }
    let dir = pg_config_bindir()
        .filter(|dir| is_executable(&dir.join("initdb")))
        .or_else(highest_packaged_bin)
        .ok_or_else(|| {
            "PostgreSQL server binaries not found (initdb): install the `postgresql` package or \
             set VAK_PG_BIN to the folder holding initdb"
                .to_owned()
        })?;
    match missing_tools(&dir) {
        None => Ok(dir),
        Some(missing) => Err(format!(
            "PostgreSQL binaries missing from {} ({missing}): install the `postgresql` and \
             `postgresql-client` packages or set VAK_PG_BIN to a folder holding initdb, pg_ctl, \
             postgres, pg_isready, psql and createdb",
            dir.display()
        )),
    }
}

/// Whether `name` may be a server setting: `[A-Za-z0-9_.]+`, so it needs no quoting.
fn setting_name_is_valid(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
}

/// `value` as one word for `sh`: in single quotes, a `'` inside written `'\''`.
fn shell_quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', r"'\''"))
}

/// The binaries of [`TOOLS`] that `dir` lacks, comma-separated; None when it has them all.
fn missing_tools(dir: &Path) -> Option<String> {
    let missing: Vec<&str> = TOOLS
        .iter()
        .copied()
        .filter(|tool| !is_executable(&dir.join(tool)))
        .collect();
    (!missing.is_empty()).then(|| missing.join(", "))
}

fn is_executable(path: &Path) -> bool {
    fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The output of `pg_config --bindir`, when `pg_config` runs.
fn pg_config_bindir() -> Option<PathBuf> {
    let out = Command::new("pg_config")
        .arg("--bindir")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let dir = String::from_utf8(out.stdout).ok()?;
    let dir = dir.trim();
    (out.status.success() && !dir.is_empty()).then(|| PathBuf::from(dir))
}

/// The highest-numbered `/usr/lib/postgresql/VERSION/bin` holding `initdb`.
fn highest_packaged_bin() -> Option<PathBuf> {
    fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let version: Vec<u32> = entry
                .file_name()
                .to_str()?
                .split('.')
                .map(str::parse)
                .collect::<Result<_, _>>()
                .ok()?;
            let bin = entry.path().join("bin");
            is_executable(&bin.join("initdb")).then_some((version, bin))
        })
        .max_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, bin)| bin)
}

/// Whom the PostgreSQL commands run as: ourselves, or as root the `postgres` user via `runuser`.
fn run_as() -> Result<RunAs, String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(RunAs::Me);
    }
    let runuser = find_runuser().ok_or_else(|| {
        format!(
            "running as root, PostgreSQL must run as the `{OS_USER}` user but `runuser` was not \
             found: install util-linux, or run the tests as a non-root user"
        )
    })?;
    user_ids(OS_USER)?;
    Ok(RunAs::User {
        runuser,
        name: OS_USER.to_owned(),
    })
}

/// `runuser` on PATH, or in /usr/sbin or /sbin (often not on a root PATH in containers).
fn find_runuser() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|dir| dir.join("runuser"))
        .find(|candidate| is_executable(candidate))
}

/// The uid and gid of the system user `name`.
fn user_ids(name: &str) -> Result<(libc::uid_t, libc::gid_t), String> {
    let not_found = || {
        format!(
            "running as root, PostgreSQL must run as the `{name}` system user, which does not \
             exist: install the `postgresql` package (it creates the user), create the user, or \
             run the tests as a non-root user"
        )
    };
    let cname = CString::new(name).map_err(|_| not_found())?;
    let mut buffer: Vec<libc::c_char> = vec![0; 4096];
    loop {
        // SAFETY: an all-zero passwd (null pointers, zero ids) is a valid value of the struct.
        let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: every pointer is valid for the call: `cname` is NUL-terminated, `buffer` is
        // writable for `buffer.len()` bytes, and `entry`'s strings point into `buffer`, which we
        // do not read through.
        let rc = unsafe {
            libc::getpwnam_r(
                cname.as_ptr(),
                &mut entry,
                buffer.as_mut_ptr(),
                buffer.len(),
                &mut result,
            )
        };
        if rc == libc::ERANGE && buffer.len() < 1 << 20 {
            buffer.resize(buffer.len() * 2, 0);
            continue;
        }
        if rc != 0 {
            return Err(format!(
                "looking up the `{name}` system user: {}",
                io::Error::from_raw_os_error(rc)
            ));
        }
        if result.is_null() {
            return Err(not_found());
        }
        return Ok((entry.pw_uid, entry.pw_gid));
    }
}

/// A new, unique folder under the system temp folder, mode 0700; as root, owned by `postgres`.
fn make_temp_folder(run_as: &RunAs) -> Result<PathBuf, String> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let name = format!(
        "vak-pg-{}-{}-{nanos}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let root = std::env::temp_dir().join(name);
    fs::DirBuilder::new()
        .mode(0o700)
        .create(&root)
        .map_err(|e| format!("creating the cluster folder {}: {e}", root.display()))?;
    if let RunAs::User { name, .. } = run_as {
        let chowned = user_ids(name).and_then(|(uid, gid)| {
            std::os::unix::fs::chown(&root, Some(uid), Some(gid))
                .map_err(|e| format!("handing {} to the `{name}` user: {e}", root.display()))
        });
        if let Err(e) = chowned {
            let _ = fs::remove_dir(&root);
            return Err(e);
        }
    }
    Ok(root)
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
fn free_port() -> Result<u16, String> {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .map_err(|e| format!("finding a free port on 127.0.0.1: {e}"))
}

#[cfg(test)]
mod tests;

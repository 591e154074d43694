//! Stopping a cluster's processes with `SIGSTOP` and resuming them: a database that hangs.

use super::*;

/// Processes of a cluster stopped with `SIGSTOP` ([`Cluster::freeze`],
/// [`Cluster::freeze_backend`]); dropping it (or [`Frozen::thaw`]) resumes them with `SIGCONT`.
#[derive(Debug)]
pub struct Frozen {
    pids: Vec<u32>,
}

impl Frozen {
    /// The processes stopped.
    pub fn pids(&self) -> &[u32] {
        &self.pids
    }

    /// Resume the processes (as dropping does).
    pub fn thaw(self) {}
}

impl Drop for Frozen {
    fn drop(&mut self) {
        // The backends first, then the postmaster (last stopped, first resumed).
        let _ = signal(&self.pids, "CONT");
    }
}

/// `kill -SIGNAL PIDS…`.
fn signal(pids: &[u32], name: &str) -> Result<(), String> {
    if pids.is_empty() {
        return Ok(());
    }
    let out = Command::new("kill")
        .arg(format!("-{name}"))
        .args(pids.iter().map(u32::to_string))
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("could not run kill: {e}"))?;
    match out.status.success() {
        true => Ok(()),
        false => Err(format!(
            "kill -{name} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}

/// The parent of process `pid`, from `/proc/PID/stat` (`None` when it is gone).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid …`: comm may hold spaces and parentheses; it ends at the last `)`.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

impl Cluster {
    /// The server's processes: the postmaster (from `postmaster.pid`), then its children (the
    /// backends, one per connection, and the background processes).
    pub fn server_pids(&self) -> Result<Vec<u32>, String> {
        let pidfile = self.data.join("postmaster.pid");
        let text = fs::read_to_string(&pidfile)
            .map_err(|e| format!("cannot read {}: {e}", pidfile.display()))?;
        let postmaster: u32 = text
            .lines()
            .next()
            .and_then(|l| l.trim().parse().ok())
            .ok_or_else(|| format!("{} names no process", pidfile.display()))?;
        let mut pids = vec![postmaster];
        let proc_dir = fs::read_dir("/proc").map_err(|e| format!("cannot list /proc: {e}"))?;
        for entry in proc_dir.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            if parent_of(pid) == Some(postmaster) {
                pids.push(pid);
            }
        }
        Ok(pids)
    }

    /// Stops every process of the server with `SIGSTOP`, the postmaster first (so that it forks
    /// no new backend): the database hangs as a frozen machine does. Connections stay open and
    /// new ones are accepted by the kernel, but nothing answers until the [`Frozen`] is dropped.
    pub fn freeze(&self) -> Result<Frozen, String> {
        let pids = self.server_pids()?;
        signal(&pids[..1], "STOP")?;
        // Children forked just before the postmaster stopped are listed by a second look.
        let pids = self.server_pids()?;
        let frozen = Frozen { pids };
        signal(&frozen.pids, "STOP")?;
        Ok(frozen)
    }

    /// Stops one backend of the server (`pid`, e.g. from `pg_stat_activity`) with `SIGSTOP`:
    /// that one connection hangs, the others are served.
    pub fn freeze_backend(&self, pid: u32) -> Result<Frozen, String> {
        if !self.server_pids()?.iter().skip(1).any(|&p| p == pid) {
            return Err(format!("process {pid} is not a backend of this cluster"));
        }
        let frozen = Frozen { pids: vec![pid] };
        signal(&frozen.pids, "STOP")?;
        Ok(frozen)
    }
}

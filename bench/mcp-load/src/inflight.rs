//! Memory per call in flight: the server's resident set (RSS) when idle, with K calls in flight
//! at once, and after they ended.
//!
//! Why: a call in flight holds the tool's linear memory as far as the tool touched it, plus what
//! the host spends on the call itself (a store and an instance, the fiber stack the guest runs
//! on, the request, result and output buffers, the call's record). `(in-flight − idle) / K` is
//! that sum per call; for a tool that touches `n` bytes and holds them, what exceeds `n` is the
//! host's overhead per call. Issue 12 asks that it be the tool's memory cap plus a small,
//! measured host overhead.
//!
//! The calls are meant to be held until the server's wall-time limit ends them (the hostile test
//! guest's `hold` mode touches its memory, then sleeps), so their answers are errors: they are
//! counted by outcome, never treated as a failure of the measurement. RSS is read from
//! `/proc/PID/status` (`VmRSS`), so this works on Linux only.

use crate::stdio::{Server, read_responses, request, write_line};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// What to call, how many at once, and how long to let them settle.
#[derive(Debug, Clone)]
pub struct Plan {
    pub tool: String,
    /// Arguments of each of the K calls.
    pub args: Value,
    /// Arguments of the one warm-up call before the idle reading (a quick call of the same tool:
    /// a call that held memory would leave it resident in its pool slot and inflate "idle").
    pub warmup_args: Value,
    /// K: calls sent at once.
    pub calls: usize,
    /// How long after sending to read RSS: long enough for every call to be running and to have
    /// touched its memory, shorter than the calls' wall-time limit.
    pub settle: Duration,
    /// How long to wait for all K answers once the in-flight reading is taken.
    pub answer_timeout: Duration,
}

/// The readings of one measurement, in bytes.
#[derive(Debug, Clone)]
pub struct Report {
    pub calls: usize,
    /// After initialize and one warm-up call.
    pub idle_rss: u64,
    /// With the K calls in flight (the largest of a few samples over about 200 ms).
    pub inflight_rss: u64,
    /// Once all K were answered.
    pub after_rss: u64,
    /// Answers that came before the in-flight reading was taken: those calls were not in flight
    /// when it was (0 when the settle time is shorter than the calls last).
    pub answered_early: usize,
    /// Every answer by outcome: `ok`, the host's error kind (`wall_time_exceeded`, …), `tool
    /// error`, or `json-rpc CODE`.
    pub outcomes: BTreeMap<String, usize>,
    /// The largest peak linear memory the server itself reported for one call
    /// (`_meta["dev.vak/usage"].memory_bytes`), when it reports it.
    pub reported_memory_bytes: Option<u64>,
}

impl Report {
    /// Answers received (every call is answered, or the measurement fails).
    pub fn answered(&self) -> usize {
        self.outcomes.values().sum()
    }

    /// `(in-flight − idle) / K`, in bytes (negative if RSS went down).
    pub fn per_call_bytes(&self) -> i64 {
        (self.inflight_rss as i64 - self.idle_rss as i64) / self.calls.max(1) as i64
    }

    pub fn to_json(&self) -> Value {
        json!({
            "mode": "inflight",
            "calls": self.calls,
            "idle_rss_bytes": self.idle_rss,
            "inflight_rss_bytes": self.inflight_rss,
            "after_rss_bytes": self.after_rss,
            "per_inflight_call_bytes": self.per_call_bytes(),
            "answered_early": self.answered_early,
            "outcomes": self.outcomes,
            "reported_memory_bytes": self.reported_memory_bytes,
        })
    }

    pub fn table(&self) -> String {
        let rows = [
            ("idle RSS".to_string(), mib(self.idle_rss as i64)),
            (
                format!("RSS with {} in flight", self.calls),
                mib(self.inflight_rss as i64),
            ),
            ("RSS after they ended".into(), mib(self.after_rss as i64)),
            (
                "per in-flight call".into(),
                format!(
                    "{}  ((in flight − idle) / {})",
                    kib(self.per_call_bytes()),
                    self.calls
                ),
            ),
        ];
        let mut t = String::new();
        for (label, value) in rows {
            t += &format!("{label:<26} {value}\n");
        }
        if let Some(m) = self.reported_memory_bytes {
            t += &format!(
                "server's peak linear memory per call (dev.vak/usage): {}\n",
                kib(m as i64)
            );
        }
        let outcomes: Vec<String> = self
            .outcomes
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect();
        t += &format!("answers: {}", outcomes.join(", "));
        if self.answered_early > 0 {
            t += &format!(
                " ({} before the in-flight reading: raise the wall-time limit or lower --settle-ms)",
                self.answered_early
            );
        }
        t.push('\n');
        t
    }
}

fn mib(bytes: i64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64)
}

fn kib(bytes: i64) -> String {
    format!("{:.0} KiB", bytes as f64 / 1024.0)
}

/// The resident set of process `pid`, in bytes (`VmRSS` of `/proc/PID/status`).
#[cfg(target_os = "linux")]
pub fn rss_bytes(pid: u32) -> Result<u64, String> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .ok_or_else(|| format!("no VmRSS line in {path}"))?;
    Ok(kb * 1024)
}

/// The resident set of a process: read from `/proc`, which only Linux has.
#[cfg(not(target_os = "linux"))]
pub fn rss_bytes(_pid: u32) -> Result<u64, String> {
    Err("reading a process's RSS needs Linux (/proc/PID/status)".into())
}

/// The largest of five RSS samples taken 50 ms apart (a reading of about 200 ms).
fn rss_max(pid: u32) -> Result<u64, String> {
    let mut max = 0;
    for i in 0..5 {
        if i > 0 {
            std::thread::sleep(Duration::from_millis(50));
        }
        max = max.max(rss_bytes(pid)?);
    }
    Ok(max)
}

/// What an answer came back as (see [`Report::outcomes`]).
fn outcome(answer: &Value) -> String {
    if let Some(code) = answer.get("error").map(|e| &e["code"]) {
        return format!("json-rpc {code}");
    }
    let result = &answer["result"];
    if result["isError"] != json!(true) {
        return "ok".into();
    }
    match result["_meta"]["dev.vak/error"]["kind"].as_str() {
        Some(kind) => kind.to_string(),
        None => "tool error".into(),
    }
}

/// Measure on `server` (initialized, nothing in flight): warm up, read idle RSS, send K calls at
/// once, read RSS with them in flight, wait for every answer, read RSS again.
pub fn measure(server: &mut Server, plan: &Plan) -> Result<Report, String> {
    let pid = server.pid();
    rss_bytes(pid)?;
    server.call(&plan.tool, &plan.warmup_args)?;
    std::thread::sleep(Duration::from_millis(200));
    let idle_rss = rss_max(pid)?;

    let ids = server.fresh_ids(plan.calls);
    for id in ids.clone() {
        write_line(&mut server.tx, &request(id, &plan.tool, &plan.args))?;
    }
    server.flush()?;

    // The answers are read on a thread of their own, stamped with when they came.
    let (answers_tx, answers) = mpsc::channel::<Result<(Instant, Value), String>>();
    let rx = &mut server.rx;
    let child = &mut server.child;
    std::thread::scope(|scope| {
        scope.spawn(move || {
            let read = read_responses(rx, plan.calls, |v| {
                answers_tx.send(Ok((Instant::now(), v))).is_ok()
            });
            if let Err(e) = read {
                let _ = answers_tx.send(Err(e));
            }
        });
        let measured = (|| {
            std::thread::sleep(plan.settle);
            let inflight_rss = rss_max(pid)?;
            let read_at = Instant::now();
            let deadline = read_at + plan.answer_timeout;
            let mut outcomes = BTreeMap::new();
            let mut answered_early = 0;
            let mut reported_memory_bytes: Option<u64> = None;
            for _ in 0..plan.calls {
                let left = deadline.saturating_duration_since(Instant::now());
                let (at, answer) = answers
                    .recv_timeout(left)
                    .map_err(|_| {
                        format!(
                            "not every call was answered within {:?} of the in-flight reading",
                            plan.answer_timeout
                        )
                    })
                    .and_then(|a| a)?;
                if !answer["id"].as_u64().is_some_and(|id| ids.contains(&id)) {
                    return Err(format!("an answer to a request not sent: {answer}"));
                }
                answered_early += usize::from(at < read_at);
                *outcomes.entry(outcome(&answer)).or_insert(0) += 1;
                if let Some(m) = answer["result"]["_meta"]["dev.vak/usage"]["memory_bytes"].as_u64()
                {
                    reported_memory_bytes = reported_memory_bytes.max(Some(m));
                }
            }
            // Let the last calls' stores go and their records be written.
            std::thread::sleep(Duration::from_millis(200));
            let after_rss = rss_max(pid)?;
            Ok(Report {
                calls: plan.calls,
                idle_rss,
                inflight_rss,
                after_rss,
                answered_early,
                outcomes,
                reported_memory_bytes,
            })
        })();
        if measured.is_err() {
            // The reader may be blocked on a server that will not answer: ending the server
            // closes its output and lets the reader (and this scope) end.
            let _ = child.kill();
        }
        measured
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_of_answers() {
        assert_eq!(outcome(&json!({"id":1,"result":{"isError":false}})), "ok");
        assert_eq!(
            outcome(&json!({"id":1,"result":{"isError":true,
                "_meta":{"dev.vak/error":{"kind":"wall_time_exceeded"}}}})),
            "wall_time_exceeded"
        );
        assert_eq!(
            outcome(&json!({"id":1,"result":{"isError":true}})),
            "tool error"
        );
        assert_eq!(
            outcome(&json!({"id":1,"error":{"code":-32602}})),
            "json-rpc -32602"
        );
    }

    #[test]
    fn per_call_is_the_growth_over_k() {
        let r = Report {
            calls: 4,
            idle_rss: 10 << 20,
            inflight_rss: 14 << 20,
            after_rss: 12 << 20,
            answered_early: 0,
            outcomes: BTreeMap::from([("ok".to_string(), 4)]),
            reported_memory_bytes: None,
        };
        assert_eq!(r.per_call_bytes(), 1 << 20);
        assert_eq!(r.answered(), 4);
        assert!(r.table().contains("1024 KiB"), "{}", r.table());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn reads_its_own_rss() {
        let rss = rss_bytes(std::process::id()).expect("VmRSS");
        assert!(rss > 0);
    }
}

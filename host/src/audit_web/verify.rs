//! Verification on demand: one walk of every chain at a time, on a blocking thread of its own,
//! counting the entries it has checked (for the progress bar); its result kept, keyed by where
//! every chain ended when it began ([`Tip`]: each chain's head and the database's
//! `data_version`), so an unchanged journal is not walked again. Any commit to the database
//! (a new entry, or an entry changed behind the journal's back) changes the key.

use super::Source;
use crate::journal::{Tip, Verification};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A verification that has finished.
pub(super) struct Done {
    /// The journal as it was when the walk began.
    pub key: Tip,
    /// The verdict, or why the journal could not be read.
    pub result: Result<Verification, String>,
    pub took: Duration,
    /// When it finished (RFC 3339).
    pub at: String,
}

/// A verification under way.
#[derive(Clone)]
pub(super) struct Running {
    pub total: u64,
    pub done: Arc<AtomicU64>,
    pub started: Instant,
}

impl Running {
    pub fn checked(&self) -> u64 {
        self.done.load(Ordering::Relaxed).min(self.total)
    }
}

/// What the integrity page shows: the walk under way, and the last one finished.
pub(super) struct Status {
    pub running: Option<Running>,
    pub last: Option<Arc<Done>>,
}

#[derive(Default)]
struct Inner {
    running: Option<Running>,
    last: Option<Arc<Done>>,
}

/// The one verifier of a server.
#[derive(Default)]
pub(super) struct Verifier {
    inner: Mutex<Inner>,
}

impl Verifier {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn status(&self) -> Status {
        let inner = self.lock();
        Status {
            running: inner.running.clone(),
            last: inner.last.clone(),
        }
    }

    /// Start a walk of `journal` as it is now (`tip`), unless one is under way or the last one
    /// finished was of this very state (then nothing is walked: its result stands).
    pub fn start(self: &Arc<Self>, journal: Arc<dyn Source>, keys: Vec<String>, tip: Tip) {
        let running = {
            let mut inner = self.lock();
            if inner.running.is_some() || inner.last.as_ref().is_some_and(|d| d.key == tip) {
                return;
            }
            let running = Running {
                total: tip.entries,
                done: Arc::new(AtomicU64::new(0)),
                started: Instant::now(),
            };
            inner.running = Some(running.clone());
            running
        };
        let me = self.clone();
        tokio::task::spawn_blocking(move || {
            let result = journal
                .verify_counting(&keys, &running.done)
                .map_err(|e| e.to_string());
            let took = running.started.elapsed();
            if let Ok(v) = &result {
                tracing::info!(
                    entries = v.entries,
                    ms = took.as_millis() as u64,
                    bad = v.first_bad.is_some(),
                    unsigned = v.unsigned.len(),
                    "journal verified"
                );
            }
            let done = Done {
                key: tip,
                result,
                took,
                at: jiff::Timestamp::now().to_string(),
            };
            let mut inner = me.lock();
            inner.running = None;
            inner.last = Some(Arc::new(done));
        });
    }
}

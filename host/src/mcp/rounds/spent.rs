//! A `requestState` is single-use: the round it opens is marked spent before it runs, in the
//! store where there is one (the journal's database, which every process on the state directory
//! shares; the shared store, which every node shares), else in this process. A state sent back
//! after is refused as replayed, so a round, and the approval it carries, runs once.

use super::{STATE_TTL, StateRefused};
use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

/// How long a marker outlives its state's TTL: for the clocks of several nodes to differ.
const CLOCK_MARGIN: Duration = Duration::from_secs(5 * 60);
/// The most markers a process without a journal keeps: past it, a state is refused (retryable)
/// rather than a marker dropped before its state expires.
pub const MAX_LOCAL_MARKERS: usize = 100_000;

/// This process's markers when nothing is kept beyond it (`--no-journal`): key, and when it
/// may be dropped.
static LOCAL: LazyLock<Mutex<HashMap<String, Instant>>> = LazyLock::new(Mutex::default);

/// Spend the state issued by the round `call_id`: `Ok` when this request is the first to bring
/// it back.
pub async fn spend(store: &crate::Store, call_id: &str) -> Result<(), StateRefused> {
    let key = format!("mcp-request-state:{call_id}");
    let keep = STATE_TTL + CLOCK_MARGIN;
    let first = match store.spend(&key, keep).await {
        Some(Ok(first)) => first,
        Some(Err(e)) => {
            tracing::warn!(error = %e, "cannot mark a requestState spent");
            return Err(StateRefused::Unverifiable(e.to_string()));
        }
        None => spend_here(&key, keep)?,
    };
    match first {
        true => Ok(()),
        false => Err(StateRefused::Replayed),
    }
}

fn spend_here(key: &str, keep: Duration) -> Result<bool, StateRefused> {
    let now = Instant::now();
    let mut spent = LOCAL.lock().unwrap_or_else(|p| p.into_inner());
    if spent.contains_key(key) {
        return Ok(false);
    }
    if spent.len() >= MAX_LOCAL_MARKERS {
        spent.retain(|_, until| *until > now);
        if spent.len() >= MAX_LOCAL_MARKERS {
            return Err(StateRefused::Unverifiable(format!(
                "{MAX_LOCAL_MARKERS} rounds are open in this process; retry later"
            )));
        }
    }
    spent.insert(key.to_string(), now + keep);
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_spent_once_in_a_process_without_a_store() {
        let key = "test:a-key-is-spent-once".to_string();
        assert_eq!(spend_here(&key, Duration::from_secs(60)), Ok(true));
        assert_eq!(spend_here(&key, Duration::from_secs(60)), Ok(false));
    }
}

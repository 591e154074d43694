//! Whether the shared store answers, logged once per change of state with a count: one line when
//! it stops answering, one when it answers again (how long it was out, how many operations
//! failed meanwhile), instead of a line for every call refused in between.

use crate::store::StoreError;
use std::sync::Mutex;
use std::time::Instant;

/// The store's state as this node's operations see it.
#[derive(Debug, Default)]
pub(crate) struct Health {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Since when operations fail because the store is out of reach (`None`: it answers).
    down_since: Option<Instant>,
    /// Operations that failed since then.
    failures: u64,
}

impl Health {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An operation (`what`) failed with `error`. A store out of reach is logged when it starts
    /// and counted while it lasts; any other failure (a defect, a damaged schema) each time.
    pub(crate) fn failed(&self, what: &'static str, error: &StoreError) {
        if !error.retryable() {
            tracing::error!(what, error = %error, "the shared store refused an operation");
            return;
        }
        let mut st = self.lock();
        st.failures += 1;
        if st.down_since.is_none() {
            st.down_since = Some(Instant::now());
            drop(st);
            tracing::warn!(
                what,
                error = %error,
                "the shared store is out of reach: calls that need it are refused \
                 store_unavailable (retryable) until it answers; logged once, counted until then"
            );
        }
    }

    /// An operation was answered: if the store was out of reach, say for how long and how many
    /// operations failed meanwhile.
    pub(crate) fn answered(&self) {
        let mut st = self.lock();
        if let Some(since) = st.down_since.take() {
            let failures = std::mem::take(&mut st.failures);
            drop(st);
            tracing::warn!(
                out_ms = since.elapsed().as_millis() as u64,
                failures,
                "the shared store answers again"
            );
        }
    }

    /// Whether the store is out of reach as far as this node knows, and the failures counted.
    #[cfg(test)]
    pub(crate) fn down(&self) -> Option<u64> {
        let st = self.lock();
        st.down_since.map(|_| st.failures)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outage_is_one_state_with_a_count() {
        let h = Health::default();
        let out = StoreError::Unavailable {
            what: "x",
            message: "down".into(),
        };
        assert_eq!(h.down(), None);
        for _ in 0..3 {
            h.failed("x", &out);
        }
        assert_eq!(h.down(), Some(3), "three failures, one outage");
        h.answered();
        assert_eq!(h.down(), None);
        // A defect is not an outage.
        h.failed(
            "x",
            &StoreError::Database {
                what: "x",
                message: "bad".into(),
            },
        );
        assert_eq!(h.down(), None);
    }
}

//! A session's ledger kept in this process: the totals behind a lock, admitted by the budget's
//! arithmetic ([`super::arith::admit_ask`]).

use super::arith::admit_ask;
use futures::future::BoxFuture;
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};
use vak_core::ports::ledger::{Ask, BudgetError, LedgerPort, Reserved, Settlement, Totals};
use vak_core::ports::store::StoreError;

#[derive(Debug, Default)]
struct LedgerState {
    used: Totals,
    reserved: Totals,
    /// Calls per tool, reserved ones included.
    tool_calls: HashMap<String, u64>,
}

/// A ledger in this process.
#[derive(Debug, Default)]
pub struct MemoryLedger {
    state: Mutex<LedgerState>,
}

impl MemoryLedger {
    fn lock(&self) -> MutexGuard<'_, LedgerState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl LedgerPort for MemoryLedger {
    fn reserve<'a>(
        &'a self,
        ask: &'a Ask<'a>,
        _deadline: Instant,
    ) -> BoxFuture<'a, Result<Reserved, BudgetError>> {
        let reserved = (|| {
            let mut st = self.lock();
            let tool_used = st.tool_calls.get(ask.tool).copied().unwrap_or(0);
            let granted = admit_ask(st.used, st.reserved, tool_used, ask)?;
            st.reserved.add(&granted);
            *st.tool_calls.entry(ask.tool.to_string()).or_insert(0) += 1;
            Ok(Reserved {
                granted,
                held: granted,
            })
        })();
        Box::pin(std::future::ready(reserved))
    }

    fn used(&self) -> BoxFuture<'_, Result<Totals, StoreError>> {
        Box::pin(std::future::ready(Ok(self.lock().used)))
    }

    fn bound(&self) -> Duration {
        Duration::ZERO
    }

    fn settle(&self, _tool: &str, held: Totals, used: Totals) -> Option<Settlement> {
        let mut st = self.lock();
        st.reserved.sub(&held);
        st.used.add(&used);
        None
    }

    fn unused(&self, tool: &str, held: Totals) -> Option<Settlement> {
        self.release(tool, held);
        None
    }

    fn release(&self, tool: &str, held: Totals) {
        let mut st = self.lock();
        st.reserved.sub(&held);
        if let Some(n) = st.tool_calls.get_mut(tool) {
            *n = n.saturating_sub(1);
        }
    }

    fn abandoned(&self, held: Totals) {
        let mut st = self.lock();
        st.reserved.sub(&held);
        st.used.add(&held);
    }

    fn describe(&self) -> String {
        "memory".to_string()
    }
}

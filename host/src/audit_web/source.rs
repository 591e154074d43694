//! What the pages read, from the local SQLite journal or from the shared PostgreSQL store
//! (every node's chain). The pages are made on blocking threads; the shared store's reads are
//! async, so its [`Source`] runs each to completion on the server's runtime from there.

use crate::journal::{Filter, Journal, JournalError, Page, Paged, Shown, Tip, Verification};
use std::sync::atomic::AtomicU64;

/// The reads the pages need, each bounded (see [`Journal::page`] and the pictures' reads).
pub trait Source: Send + Sync {
    /// Whether the chains are the nodes' of a shared store (else a local journal's processes').
    fn shared(&self) -> bool;
    /// One page of calls, newest first.
    fn page(&self, filter: &Filter, page: &Page) -> Result<Paged, JournalError>;
    /// The entries of the calls `id` names, each checked.
    fn show(&self, id: &str) -> Result<Vec<Shown>, JournalError>;
    /// Each chain's head, the entries in all, and what a cached verification is keyed by.
    fn tip(&self) -> Result<Tip, JournalError>;
    /// The first and last time a call selected was received (of the newest `cap`, where the
    /// source cannot read both ends from an index).
    fn span(
        &self,
        filter: &Filter,
        page: &Page,
        cap: u32,
    ) -> Result<Option<(i64, i64)>, JournalError>;
    /// Of the newest `cap` calls selected: `(bucket, status, count)`.
    fn tally_by_time(
        &self,
        filter: &Filter,
        page: &Page,
        cap: u32,
        width: i64,
        max_groups: u32,
    ) -> Result<Vec<(i64, String, u64)>, JournalError>;
    /// Of the newest `cap` calls selected that ran: `(tool, wall ns, fuel)`.
    fn usage_sample(
        &self,
        filter: &Filter,
        page: &Page,
        cap: u32,
    ) -> Result<Vec<(String, u64, u64)>, JournalError>;
    /// Of the newest `cap` refusals selected: `(stage, kind, count)`.
    fn refusal_tally(
        &self,
        filter: &Filter,
        page: &Page,
        cap: u32,
        max_groups: u32,
    ) -> Result<Vec<(String, String, u64)>, JournalError>;
    /// Every chain and signature walked, counting the entries checked in `done`.
    fn verify_counting(
        &self,
        keys: &[String],
        done: &AtomicU64,
    ) -> Result<Verification, JournalError>;
}

impl Source for Journal {
    fn shared(&self) -> bool {
        false
    }
    fn page(&self, filter: &Filter, page: &Page) -> Result<Paged, JournalError> {
        Journal::page(self, filter, page)
    }
    fn show(&self, id: &str) -> Result<Vec<Shown>, JournalError> {
        Journal::show(self, id)
    }
    fn tip(&self) -> Result<Tip, JournalError> {
        Journal::tip(self)
    }
    fn span(
        &self,
        filter: &Filter,
        page: &Page,
        _cap: u32,
    ) -> Result<Option<(i64, i64)>, JournalError> {
        // Both ends are read from the `received_at` index: no cap needed.
        Journal::span(self, filter, page)
    }
    fn tally_by_time(
        &self,
        filter: &Filter,
        page: &Page,
        cap: u32,
        width: i64,
        max_groups: u32,
    ) -> Result<Vec<(i64, String, u64)>, JournalError> {
        Journal::tally_by_time(self, filter, page, cap, width, max_groups)
    }
    fn usage_sample(
        &self,
        filter: &Filter,
        page: &Page,
        cap: u32,
    ) -> Result<Vec<(String, u64, u64)>, JournalError> {
        Journal::usage_sample(self, filter, page, cap)
    }
    fn refusal_tally(
        &self,
        filter: &Filter,
        page: &Page,
        cap: u32,
        max_groups: u32,
    ) -> Result<Vec<(String, String, u64)>, JournalError> {
        Journal::refusal_tally(self, filter, page, cap, max_groups)
    }
    fn verify_counting(
        &self,
        keys: &[String],
        done: &AtomicU64,
    ) -> Result<Verification, JournalError> {
        Journal::verify_counting(self, keys, done)
    }
}

/// The shared store as the pages read it: every node's chain.
#[cfg(feature = "postgres")]
pub struct Shared {
    store: std::sync::Arc<crate::store::postgres::PgStore>,
    runtime: tokio::runtime::Handle,
}

#[cfg(feature = "postgres")]
impl Shared {
    /// Read `store` on the current runtime (call it from the runtime; the reads are then made
    /// from blocking threads).
    pub fn new(store: std::sync::Arc<crate::store::postgres::PgStore>) -> Shared {
        Shared {
            store,
            runtime: tokio::runtime::Handle::current(),
        }
    }
}

#[cfg(feature = "postgres")]
impl Source for Shared {
    fn shared(&self) -> bool {
        true
    }
    fn page(&self, filter: &Filter, page: &Page) -> Result<Paged, JournalError> {
        self.runtime.block_on(self.store.page(filter, page))
    }
    fn show(&self, id: &str) -> Result<Vec<Shown>, JournalError> {
        self.runtime.block_on(self.store.show(id))
    }
    fn tip(&self) -> Result<Tip, JournalError> {
        self.runtime.block_on(self.store.tip())
    }
    fn span(
        &self,
        filter: &Filter,
        page: &Page,
        cap: u32,
    ) -> Result<Option<(i64, i64)>, JournalError> {
        self.runtime.block_on(self.store.span(filter, page, cap))
    }
    fn tally_by_time(
        &self,
        filter: &Filter,
        page: &Page,
        cap: u32,
        width: i64,
        max_groups: u32,
    ) -> Result<Vec<(i64, String, u64)>, JournalError> {
        self.runtime.block_on(
            self.store
                .tally_by_time(filter, page, cap, width, max_groups),
        )
    }
    fn usage_sample(
        &self,
        filter: &Filter,
        page: &Page,
        cap: u32,
    ) -> Result<Vec<(String, u64, u64)>, JournalError> {
        self.runtime
            .block_on(self.store.usage_sample(filter, page, cap))
    }
    fn refusal_tally(
        &self,
        filter: &Filter,
        page: &Page,
        cap: u32,
        max_groups: u32,
    ) -> Result<Vec<(String, String, u64)>, JournalError> {
        self.runtime
            .block_on(self.store.refusal_tally(filter, page, cap, max_groups))
    }
    fn verify_counting(
        &self,
        keys: &[String],
        done: &AtomicU64,
    ) -> Result<Verification, JournalError> {
        self.runtime
            .block_on(self.store.verify_counting(keys, done))
    }
}

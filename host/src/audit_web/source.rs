//! What the pages read, from the local SQLite journal or from the shared PostgreSQL store
//! (every node's chain). The pages are made on blocking threads; the shared store's reads are
//! async, so its [`Source`] runs each to completion on the server's runtime from there.

use crate::journal::{
    Filter, Journal, JournalError, Page, Paged, Sample, Shown, Tip, Verification,
};

/// Calls counted per time bucket and status: `(bucket, status, count)`.
pub type Tally = Vec<(i64, String, u64)>;
/// Refusals counted per stage and kind: `(stage, kind, count)`.
pub type Refusals = Vec<(String, String, u64)>;
/// What a read gives.
pub type Read<T> = Result<T, JournalError>;
use std::sync::atomic::AtomicU64;

/// The reads the pages need, each bounded (see [`Journal::page`] and the pictures' reads).
pub trait Source: Send + Sync {
    /// Whether the chains are the nodes' of a shared store (else a local journal's processes').
    fn shared(&self) -> bool;
    /// One page of calls, newest first.
    fn page(&self, filter: &Filter, page: &Page) -> Read<Paged>;
    /// The entries of the calls `id` names, each checked.
    fn show(&self, id: &str) -> Read<Vec<Shown>>;
    /// Each chain's head, the entries in all, and what a cached verification is keyed by.
    fn tip(&self) -> Read<Tip>;
    /// The first and last time a call of `sample` was received (the source may read both
    /// ends from an index instead of the newest `sample.cap`).
    fn span(&self, sample: &Sample) -> Read<Option<(i64, i64)>>;
    /// Of `sample`: `(bucket, status, count)`.
    fn tally_by_time(&self, sample: &Sample, width: i64, groups: u32) -> Read<Tally>;
    /// Of the calls of `sample` that ran: `(tool, wall ns, fuel)`.
    fn usage_sample(&self, sample: &Sample) -> Read<Vec<(String, u64, u64)>>;
    /// Of the refusals of `sample`: `(stage, kind, count)`.
    fn refusal_tally(&self, sample: &Sample, groups: u32) -> Read<Refusals>;
    /// Every chain and signature walked, counting the entries checked in `done`.
    fn verify_counting(&self, keys: &[String], done: &AtomicU64) -> Read<Verification>;
}

impl Source for Journal {
    fn shared(&self) -> bool {
        false
    }
    fn page(&self, filter: &Filter, page: &Page) -> Read<Paged> {
        Journal::page(self, filter, page)
    }
    fn show(&self, id: &str) -> Read<Vec<Shown>> {
        Journal::show(self, id)
    }
    fn tip(&self) -> Read<Tip> {
        Journal::tip(self)
    }
    fn span(&self, sample: &Sample) -> Read<Option<(i64, i64)>> {
        Journal::span(self, sample)
    }
    fn tally_by_time(&self, sample: &Sample, width: i64, groups: u32) -> Read<Tally> {
        Journal::tally_by_time(self, sample, width, groups)
    }
    fn usage_sample(&self, sample: &Sample) -> Read<Vec<(String, u64, u64)>> {
        Journal::usage_sample(self, sample)
    }
    fn refusal_tally(&self, sample: &Sample, groups: u32) -> Read<Refusals> {
        Journal::refusal_tally(self, sample, groups)
    }
    fn verify_counting(&self, keys: &[String], done: &AtomicU64) -> Read<Verification> {
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
    fn page(&self, filter: &Filter, page: &Page) -> Read<Paged> {
        self.runtime.block_on(self.store.page(filter, page))
    }
    fn show(&self, id: &str) -> Read<Vec<Shown>> {
        self.runtime.block_on(self.store.show(id))
    }
    fn tip(&self) -> Read<Tip> {
        self.runtime.block_on(self.store.tip())
    }
    fn span(&self, sample: &Sample) -> Read<Option<(i64, i64)>> {
        self.runtime.block_on(self.store.span(sample))
    }
    fn tally_by_time(&self, sample: &Sample, width: i64, groups: u32) -> Read<Tally> {
        let tally = self.store.tally_by_time(sample, width, groups);
        self.runtime.block_on(tally)
    }
    fn usage_sample(&self, sample: &Sample) -> Read<Vec<(String, u64, u64)>> {
        self.runtime.block_on(self.store.usage_sample(sample))
    }
    fn refusal_tally(&self, sample: &Sample, groups: u32) -> Read<Refusals> {
        self.runtime
            .block_on(self.store.refusal_tally(sample, groups))
    }
    fn verify_counting(&self, keys: &[String], done: &AtomicU64) -> Read<Verification> {
        self.runtime
            .block_on(self.store.verify_counting(keys, done))
    }
}

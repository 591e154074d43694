//! The journal sink port: what the lifecycle needs of a journal during a call. Two writes: a
//! call's signed `started` entry before its tool runs, and its signed final record (with the
//! ledger charge it settles) after. Reading and verifying a journal is not the lifecycle's; the
//! chain's checks are [`crate::chain`].
//!
//! The entry types are the journal's own for now (associated types): the record and its place
//! in a journal become core types as the record moves here.

use super::ledger::Settlement;
use futures::future::BoxFuture;
use std::time::Instant;

/// How long a call waits for the shared store to commit one of its entries.
#[derive(Debug, Clone, Copy)]
pub enum Wait {
    /// Until this instant at most (the bound, from when the call began waiting).
    Until(Instant),
    /// Not at all: the call was refused because the store is out of reach (its record is queued
    /// and committed when the store answers). Says why.
    Queued(&'static str),
}

/// Where a call's entries are committed. Each write answers `None` when records are not
/// journaled, else the entry's place or why it is not there.
pub trait JournalSink: Send + Sync {
    /// A call's write-ahead entry.
    type Started: Send;
    /// A call's final record.
    type Record: Send;
    /// What signs the entries.
    type Signer: Send + Sync;
    /// Where an entry was committed.
    type Place;
    /// Why an entry was not committed.
    type Error;

    /// Sign `started` and commit it, before the call's tool runs; waits until `deadline` at
    /// most. Unless it fails, `started` carries its signature after.
    fn start<'a>(
        &'a self,
        started: &'a mut Self::Started,
        signer: &'a Self::Signer,
        deadline: Instant,
    ) -> BoxFuture<'a, Option<Result<Self::Place, Self::Error>>>;

    /// Sign `record` and commit it with the charge that settles its reservation, waiting as
    /// `wait` says. `record` is signed after, whether the commit succeeded or not.
    fn commit<'a>(
        &'a self,
        record: &'a mut Self::Record,
        signer: &'a Self::Signer,
        settlement: Option<Settlement>,
        wait: Wait,
    ) -> BoxFuture<'a, Option<Result<Self::Place, Self::Error>>>;

    /// A wait on the sink that begins now, to its bound.
    fn deadline(&self) -> Instant;
}

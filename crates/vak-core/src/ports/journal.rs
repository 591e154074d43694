//! How long a call waits on its journal's store: the one value the pipeline hands the journal
//! besides the entries. The chain's checks are [`crate::chain`].

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

//! vak's store: where a call's record goes and what every node shares.
//!
//! - [`journal`]: the local journal: a write-ahead log of signed, hash-chained entries
//!   (a call's `started` entry before it runs, its record after), indexed into SQLite off the
//!   call's path, read and verified by `vak audit`; several processes on one state directory
//!   each keep a chain of their own.
//! - [`signing`]: the host's Ed25519 key, record signatures (alone or as a batch's Merkle leaf).
//! - [`revocation`]: revocations kept in a file of the state directory, or in the shared store.
//! - [`store`]: the local store or the shared PostgreSQL store (journal, budget ledger,
//!   revocations, approvals of every node).
//!
//! It depends on `vak-core` for the record and the chain's checks, never on the sandbox.

pub mod journal;
pub mod revocation;
pub mod signing;
pub mod store;

// The core's modules under the paths this crate's files name them by.
use vak_core::{record, stage};

//! What the lifecycle needs from outside, as traits: the store, the revocation feed, the
//! journal, the caller's client, the approver, secrets, child runs. The core names them; the
//! runtime, the store and the host implement them.

pub mod child;
pub mod client;
pub mod journal;
pub mod ledger;
pub mod revocations;
pub mod store;

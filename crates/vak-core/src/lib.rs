//! # vak-core: the call lifecycle as pure data and functions
//!
//! Everything here decides without acting: no WebAssembly engine, no async runtime, no
//! database, no files. The runtime (`vak-runtime`'s part of `vak-host`) runs components and
//! brokers their effects; the store keeps records; this crate says what a call is, what each
//! stage decides, and what a record holds. Whatever it needs from outside it names as a trait
//! in [`ports`].

pub mod chain;
pub mod digest;
pub mod evidence;
pub mod outcome;
pub mod ports;
pub mod projection;
pub mod proposal;
pub mod record;
pub mod registry;
pub mod returned;
pub mod schema;
pub mod stage;
pub mod types;

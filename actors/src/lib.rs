//! # mnemos-actors
//!
//! The runtime of mnemos, free of IO crates: the domain model ([`model`]), pure
//! policies ([`policy`]), store and model traits with in-memory implementations
//! ([`store`], [`embedding`]), the actors ([`actors`]), the root [`supervisor`] and
//! the typed in-process handle ([`runtime::Runtime`]) that the HTTP service and
//! library users talk to.
//!
//! Invariant: nothing in this crate opens a file, a socket or reads the wall clock
//! except through a trait object it was given ([`clock::Clock`], the stores). The
//! compiler holds it: the crate takes tokio without fs, net, process or signal, and
//! clippy refuses `Utc::now` / `SystemTime::now` outside tests (`actors/clippy.toml`).
//! Monotonic `Instant`s only time timeouts, backoff and latency.
#![cfg_attr(test, allow(clippy::disallowed_methods))]

pub mod actors;
pub mod arbiter;
pub mod clock;
pub mod embedding;
pub mod error;
pub mod hashing;
pub mod kv;
pub mod model;
pub mod policy;
pub mod projects;
pub mod runtime;
pub mod store;
pub mod supervisor;
pub mod testing;
pub mod text;
pub mod thought;
pub mod transfer;

pub use error::{ErrorCode, MemoryError, MemoryResult};
pub use runtime::Runtime;

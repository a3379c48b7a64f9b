//! Pure policies: no IO, no clock reads, no actors. Everything here is a function of
//! its arguments (the clock is passed in) and is unit-tested next to its code.

pub mod activation;
pub mod aliases;
pub mod clustering;
pub mod consistency;
pub mod consolidation;
pub mod context;
pub mod dedup;
pub mod entities;
pub mod extraction;
pub mod facts;
pub mod forget;
pub mod fusion;
pub mod lru;
pub mod model_entities;
pub mod profiles;
pub mod recall;
pub mod reembed;
pub mod retention;
pub mod routing;
pub mod schedule;
pub mod screening;
pub mod session;
pub mod stats;
pub mod time;

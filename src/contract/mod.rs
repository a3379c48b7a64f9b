//! The contract layer: everything REST (`crate::http`), MCP (`crate::mcp`), the memory
//! proxy (`crate::proxy`) and the CLI (`src/main.rs`) share about a request — parsing
//! and validation ([`parse`]), the wire types ([`wire`] and the area modules), the tool
//! functions (a wire request and the [`Runtime`](mnemos_actors::Runtime) in, the wire
//! answer out) and the one error table ([`errors`]).
//!
//! Nothing here knows a transport — no extractors, routes or rmcp types — except
//! [`errors::ApiError`], the error table's HTTP response, which REST and the proxy both
//! answer with. The surfaces depend on this module and never on each other.

pub mod browse;
pub mod catalog;
pub mod embedding;
pub mod entities;
pub mod erase;
pub mod errors;
pub mod health;
pub mod keys;
pub mod kv;
pub mod lifecycle;
pub mod memories;
pub mod parse;
pub mod projects;
pub mod sessions;
pub mod tools;
pub mod transfer;
pub mod wire;

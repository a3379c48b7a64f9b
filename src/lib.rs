//! # mnemos
//!
//! The service around the [`mnemos_actors`] runtime: configuration, the embedded
//! backends (SQLite, the HNSW vector index, the candle embedder), start-up, the REST
//! surface, and the benchmark and evaluation harnesses used by the CLI.

pub mod app;
pub mod bench;
pub mod config;
pub mod context;
pub mod data_dir;
pub mod embedding;
pub mod eval;
pub mod graph;
pub mod http;
pub mod llm;
pub mod mcp;
pub mod proxy;
pub mod store;
pub mod telemetry;
pub mod vectors;
pub mod working;

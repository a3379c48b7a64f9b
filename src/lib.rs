//! # mnemos
//!
//! The service around the [`mnemos_actors`] runtime: configuration, the backend
//! adapters (SQLite and PostgreSQL, the HNSW index and Qdrant, Redis, FalkorDB and
//! Neo4j, the local BERT embedder, the OpenAI-compatible inner thought), start-up, the one
//! contract layer and the surfaces over it (REST, MCP, the memory proxy; the CLI is
//! `src/main.rs`), and the benchmark and evaluation harnesses.

pub mod app;
pub mod auth;
pub mod bench;
pub mod config;
pub mod console;
pub mod context;
pub mod contract;
pub mod data_dir;
pub mod embedding;
pub mod eval;
pub mod graph;
pub mod http;
pub mod mcp;
pub mod proxy;
pub mod router;
pub mod state;
pub mod store;
pub mod telemetry;
pub mod thought;
pub mod vectors;
pub mod working;

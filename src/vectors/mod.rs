//! Vector adapters of the service: the embedded index that serves recall (`hnsw`:
//! exact scans, HNSW graphs for large partitions) and the optional Qdrant projection
//! fed from the outbox (`qdrant`, `vectors.backend = "qdrant"`).

pub mod hnsw;
pub mod qdrant;

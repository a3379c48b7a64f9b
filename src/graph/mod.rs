//! Graph projections: the shared Cypher statements and the FalkorDB adapter.

pub mod cypher;
pub mod falkordb;

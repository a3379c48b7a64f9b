//! Graph projections: the shared Cypher statements and the FalkorDB and Neo4j adapters.

pub mod cypher;
pub mod falkordb;
pub mod neo4j;

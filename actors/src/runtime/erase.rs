//! Erase: everything an agent owns, from every store. The system of record deletes in
//! one transaction (its outbox takes the deletions to the graph and vector
//! projections); then the in-process vector index, the graph store and the working
//! memory of each of its sessions are cleared. The report says what each store removed.

use serde::Serialize;

use super::Runtime;
use crate::error::MemoryResult;
use crate::model::AgentId;
use crate::store::ErasedRecords;

/// What an erasure removed, per store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EraseReport {
    /// The agent erased.
    pub agent_id: AgentId,
    /// The system of record (SQLite or PostgreSQL), by kind of record.
    pub system_of_record: ErasedRecords,
    /// Entries removed from the in-process vector index.
    pub vector_index: u64,
    /// Working-memory items cleared (in-process or Redis).
    pub working_memory: u64,
    /// Deletions queued in the outbox for the projections (Qdrant, FalkorDB, Neo4j): one
    /// per memory and per edge, applied by the projector within its interval.
    pub projection_deletes_queued: u64,
}

/// Erase `agent` (see the module doc).
pub(super) async fn erase_agent(rt: &Runtime, agent: &AgentId) -> MemoryResult<EraseReport> {
    let actors = rt.actors();
    let erased = actors.episodic.erase_agent(agent).await?;
    for id in &erased.memory_ids {
        // The SQL graph went with the transaction; a graph store of its own (the
        // in-process one) drops the edges here.
        actors.graph.remove_memory(id).await?;
    }
    actors.vectors.project(&[], &erased.memory_ids).await;
    let mut working = 0u64;
    for session in &erased.session_ids {
        working += actors.working.clear(agent, session).await? as u64;
    }
    Ok(EraseReport {
        agent_id: agent.clone(),
        vector_index: erased.memory_ids.len() as u64,
        working_memory: working,
        projection_deletes_queued: erased.memories + erased.edges,
        system_of_record: erased,
    })
}

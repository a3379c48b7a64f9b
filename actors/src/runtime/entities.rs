//! Entity reads: an agent's entities, and one entity with the memories that name it
//! and the entities named beside it. The index is a projection kept from the outbox
//! (`store::entities`), so a memory written a moment ago may not show yet.

use super::Runtime;
use crate::error::{MemoryError, MemoryResult};
use crate::model::{AgentId, Memory, MemoryStatus};
use crate::store::entities::{Entity, EntityIndex, EntityMentionRef, EntityQuery};

/// One entity with where it is named.
#[derive(Debug, Clone)]
pub struct EntityDetail {
    /// The entity.
    pub entity: Entity,
    /// The memories naming it, newest first, each with the mention.
    pub mentions: Vec<(Memory, EntityMentionRef)>,
    /// Entities named in the same memories, with how many memories they share.
    pub related: Vec<(Entity, u64)>,
}

/// The entity index, or why there is none.
fn index(rt: &Runtime) -> MemoryResult<&dyn EntityIndex> {
    rt.inner.entities.as_deref().ok_or_else(|| {
        MemoryError::unavailable(
            "this runtime keeps no entity index (the in-memory store has none; SQLite and PostgreSQL do)",
        )
    })
}

/// A page of the agent's entities in key order.
pub(super) async fn entities(rt: &Runtime, query: &EntityQuery) -> MemoryResult<Vec<Entity>> {
    index(rt)?.entities(query).await
}

/// One entity of `agent` with its newest `limit` mentions and its related entities.
pub(super) async fn entity(
    rt: &Runtime,
    agent: &AgentId,
    id: &str,
    limit: usize,
) -> MemoryResult<EntityDetail> {
    let index = index(rt)?;
    let entity = index.entity(agent, id).await?.ok_or_else(|| MemoryError {
        field: Some("id".into()),
        ..MemoryError::not_found(format!("agent {agent} has no entity {id}"))
    })?;
    let mentions = index.mentions(agent, id, limit).await?;
    let ids: Vec<_> = mentions.iter().map(|m| m.memory_id.clone()).collect();
    let memories = rt.actors().episodic.get_many(&ids).await?;
    let by_id: std::collections::HashMap<_, _> =
        memories.into_iter().map(|m| (m.id.clone(), m)).collect();
    let mentions = mentions
        .into_iter()
        .filter_map(|mention| {
            // The index may trail a forget or a delete by the projector's lag.
            let memory = by_id.get(&mention.memory_id)?;
            (memory.status == MemoryStatus::Active && memory.agent_id == *agent)
                .then(|| (memory.clone(), mention))
        })
        .collect();
    let related = index.co_mentioned(agent, id, 20).await?;
    Ok(EntityDetail {
        entity,
        mentions,
        related,
    })
}

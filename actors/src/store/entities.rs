//! The entity index's reads: who and what an agent's memories name, and where. The
//! index is a projection of the memories (kept from the outbox, rebuildable), so what
//! it answers may trail the latest write by the projector's lag.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::error::MemoryResult;
use crate::model::{AgentId, MemoryId};
use crate::policy::entities::EntityKind;

/// An entity of one agent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Entity {
    /// Stable id, derived from the agent and the key (the same after a rebuild).
    pub id: String,
    /// Whose memories name it.
    pub agent_id: AgentId,
    /// The resolution key (lower case).
    pub key: String,
    /// How the first memory naming it wrote it.
    pub name: String,
    /// What it is (the first specific kind seen).
    pub kind: EntityKind,
    /// Mentions in active memories.
    pub mentions: u64,
    /// When the earliest memory naming it happened.
    pub first_seen: DateTime<Utc>,
    /// When the latest one happened.
    pub last_seen: DateTime<Utc>,
}

/// A page of an agent's entities.
#[derive(Debug, Clone, Default)]
pub struct EntityQuery {
    /// Whose.
    pub agent_id: Option<AgentId>,
    /// Keys containing this (lower case); None: all.
    pub search: Option<String>,
    /// Only this kind.
    pub kind: Option<EntityKind>,
    /// Keys after this one (the previous page's last key).
    pub after_key: Option<String>,
    /// Page size.
    pub limit: usize,
}

/// One mention of an entity in a memory.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EntityMentionRef {
    /// The memory.
    pub memory_id: MemoryId,
    /// The words as written.
    pub surface: String,
    /// Byte span in the memory's content.
    pub start: usize,
    /// End of the span.
    pub end: usize,
    /// When the memory happened.
    pub occurred_at: DateTime<Utc>,
}

/// Reads of the entity index.
#[async_trait]
pub trait EntityIndex: Send + Sync + 'static {
    /// A page of the agent's entities in key order.
    async fn entities(&self, query: &EntityQuery) -> MemoryResult<Vec<Entity>>;
    /// One entity of the agent.
    async fn entity(&self, agent: &AgentId, id: &str) -> MemoryResult<Option<Entity>>;
    /// An entity's mentions, newest memory first, at most `limit`.
    async fn mentions(
        &self,
        agent: &AgentId,
        id: &str,
        limit: usize,
    ) -> MemoryResult<Vec<EntityMentionRef>>;
    /// Entities named in the same memories as `id`, with how many memories they share,
    /// most shared first, at most `limit`.
    async fn co_mentioned(
        &self,
        agent: &AgentId,
        id: &str,
        limit: usize,
    ) -> MemoryResult<Vec<(Entity, u64)>>;
    /// Memories of the agent naming any of the entity `keys`, with the key, newest
    /// first, at most `limit`.
    async fn memories_naming(
        &self,
        agent: &AgentId,
        keys: &[String],
        limit: usize,
    ) -> MemoryResult<Vec<(MemoryId, String)>>;
    /// The keys of the agent's entities among `candidates` (what a question names).
    async fn known_keys(&self, agent: &AgentId, candidates: &[String])
        -> MemoryResult<Vec<String>>;
}

/// The id of the entity `key` of `agent`: a hash of both, so a rebuilt index gives
/// the same ids. 24 hex digits of a 64-bit FNV-1a pair: ids are per agent and keys
/// are few, so collisions are not a concern at this length.
pub fn entity_id(agent: &AgentId, key: &str) -> String {
    fn fnv(bytes: impl Iterator<Item = u8>, seed: u64) -> u64 {
        bytes.fold(seed, |hash, b| {
            (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
    }
    let text = format!("{}\u{0}{key}", agent.as_str());
    let a = fnv(text.bytes(), 0xcbf2_9ce4_8422_2325);
    let b = fnv(text.bytes().rev(), 0x8422_2325_cbf2_9ce4);
    format!("ent_{a:016x}{:08x}", b >> 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entity_ids_are_stable_and_differ_by_agent_and_key() {
        let alice = AgentId::parse("alice").unwrap();
        let bob = AgentId::parse("bob").unwrap();
        assert_eq!(entity_id(&alice, "melanie"), entity_id(&alice, "melanie"));
        assert_ne!(entity_id(&alice, "melanie"), entity_id(&bob, "melanie"));
        assert_ne!(entity_id(&alice, "melanie"), entity_id(&alice, "mel"));
        assert_eq!(entity_id(&alice, "melanie").len(), 4 + 24);
    }
}

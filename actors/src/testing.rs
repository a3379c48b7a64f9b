//! Fixtures shared by unit tests (and by downstream crates' tests).

use chrono::{DateTime, Utc};

use crate::model::{AgentId, Memory, MemoryId, MemoryStatus, MemoryType};

/// An active episodic memory of `agent` with `content`, created and accessed at `at`.
pub fn memory_fixture(agent: &str, content: &str, at: DateTime<Utc>) -> Memory {
    Memory {
        id: MemoryId::generate(),
        agent_id: AgentId::parse(agent).expect("fixture agent id is valid"),
        memory_type: MemoryType::Episodic,
        content: content.to_string(),
        title: None,
        importance: 0.5,
        tags: Vec::new(),
        session_id: None,
        project_id: None,
        occurred_at: at,
        created_at: at,
        updated_at: at,
        last_accessed_at: at,
        access_count: 0,
        consolidation_level: 0.0,
        valence: None,
        arousal: None,
        status: MemoryStatus::Active,
        shared: false,
        metadata: serde_json::json!({}),
        source: None,
        version: 1,
    }
}

/// A [`crate::actors::projector::ProjectionSource`] read straight from stores, for
/// store-level tests of projections without an actor tree (the service reads through
/// the episodic and graph actors instead).
pub struct StoreSource<'a> {
    /// The system of record.
    pub store: &'a dyn crate::store::MemoryStore,
    /// The association graph.
    pub graph: &'a dyn crate::store::GraphStore,
}

#[async_trait::async_trait]
impl crate::actors::projector::ProjectionSource for StoreSource<'_> {
    async fn outbox_bounds(&self) -> crate::error::MemoryResult<crate::store::OutboxBounds> {
        self.store.outbox_bounds().await
    }
    async fn outbox_after(
        &self,
        after: u64,
        limit: usize,
    ) -> crate::error::MemoryResult<Vec<crate::store::OutboxEntry>> {
        self.store.outbox_after(after, limit).await
    }
    async fn outbox_committed_head(&self) -> crate::error::MemoryResult<u64> {
        self.store.outbox_committed_head().await
    }
    async fn agents(&self) -> crate::error::MemoryResult<Vec<AgentId>> {
        self.store.agents().await
    }
    async fn agent_memories(&self, agent: &AgentId) -> crate::error::MemoryResult<Vec<Memory>> {
        self.store.agent_memories(agent).await
    }
    async fn agent_edges(
        &self,
        agent: &AgentId,
    ) -> crate::error::MemoryResult<Vec<crate::model::Association>> {
        self.graph.agent_edges(agent).await
    }
    async fn embeddings_of(
        &self,
        ids: &[crate::model::MemoryId],
    ) -> crate::error::MemoryResult<Vec<(crate::model::MemoryId, Vec<f32>)>> {
        self.store.embeddings_of(ids).await
    }
    async fn memories_of(
        &self,
        ids: &[crate::model::MemoryId],
    ) -> crate::error::MemoryResult<Vec<Memory>> {
        self.store.get_many(ids).await
    }
    async fn aliases_of(
        &self,
        _agent: &AgentId,
    ) -> crate::error::MemoryResult<crate::store::entities::EntityAliases> {
        // Store-level tests keep no entity index: no merges.
        Ok(Default::default())
    }
}

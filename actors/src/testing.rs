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

//! Reflection statistics over an agent's memories (pure).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::model::{Memory, MemoryStatus, MemoryType};
use crate::policy::retention::RetentionPolicy;

/// What `reflect` reports about one agent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgentStats {
    /// Number of memories in every status.
    pub total: u64,
    /// Count per memory type.
    pub by_type: BTreeMap<String, u64>,
    /// Count per status.
    pub by_status: BTreeMap<String, u64>,
    /// Most used tags with their counts, most frequent first (at most 10).
    pub top_tags: Vec<(String, u64)>,
    /// Share of memories with consolidation_level ≥ 0.5.
    pub consolidation_ratio: f64,
    /// Mean retention of active memories at `now`.
    pub mean_retention: f64,
    /// Number of sessions seen.
    pub sessions: u64,
}

/// Compute [`AgentStats`] from an agent's memories at `now`.
pub fn agent_stats(
    memories: &[Memory],
    policy: &RetentionPolicy,
    now: DateTime<Utc>,
) -> AgentStats {
    let mut by_type: BTreeMap<String, u64> = MemoryType::ALL
        .iter()
        .map(|t| (t.as_str().to_string(), 0))
        .collect();
    let mut by_status: BTreeMap<String, u64> = MemoryStatus::ALL
        .iter()
        .map(|s| (s.as_str().to_string(), 0))
        .collect();
    let mut tags: BTreeMap<&str, u64> = BTreeMap::new();
    let mut sessions = std::collections::BTreeSet::new();
    let mut consolidated = 0u64;
    let mut retention_sum = 0.0;
    let mut active = 0u64;
    for memory in memories {
        *by_type
            .entry(memory.memory_type.as_str().to_string())
            .or_default() += 1;
        *by_status
            .entry(memory.status.as_str().to_string())
            .or_default() += 1;
        for tag in &memory.tags {
            *tags.entry(tag.as_str()).or_default() += 1;
        }
        if let Some(session) = &memory.session_id {
            sessions.insert(session.as_str());
        }
        if memory.consolidation_level >= 0.5 {
            consolidated += 1;
        }
        if memory.status == MemoryStatus::Active {
            active += 1;
            retention_sum += policy.retention(memory, now);
        }
    }
    let mut top_tags: Vec<(String, u64)> =
        tags.into_iter().map(|(t, c)| (t.to_string(), c)).collect();
    top_tags.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    top_tags.truncate(10);
    let total = memories.len() as u64;
    AgentStats {
        total,
        by_type,
        by_status,
        top_tags,
        consolidation_ratio: if total == 0 {
            0.0
        } else {
            consolidated as f64 / total as f64
        },
        mean_retention: if active == 0 {
            0.0
        } else {
            retention_sum / active as f64
        },
        sessions: sessions.len() as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::memory_fixture;

    #[test]
    fn stats_count_types_statuses_and_tags() {
        let now = Utc::now();
        let mut a = memory_fixture("alice", "one", now);
        a.tags = vec!["x".into(), "y".into()];
        let mut b = memory_fixture("alice", "two", now);
        b.tags = vec!["x".into()];
        b.status = MemoryStatus::Archived;
        b.consolidation_level = 1.0;
        let stats = agent_stats(&[a, b], &RetentionPolicy::default(), now);
        assert_eq!(stats.total, 2);
        assert_eq!(stats.by_status["active"], 1);
        assert_eq!(stats.by_status["archived"], 1);
        assert_eq!(stats.by_type["episodic"], 2);
        assert_eq!(stats.top_tags[0], ("x".to_string(), 2));
        assert!((stats.consolidation_ratio - 0.5).abs() < 1e-9);
        assert!((stats.mean_retention - 1.0).abs() < 1e-6);
    }

    #[test]
    fn empty_agent_has_zero_stats() {
        let stats = agent_stats(&[], &RetentionPolicy::default(), Utc::now());
        assert_eq!(stats.total, 0);
        assert_eq!(stats.mean_retention, 0.0);
    }
}

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

/// The most recent latencies of an operation, for percentiles in `/health`.
#[derive(Debug, Clone)]
pub struct LatencyWindow {
    /// Newest last, at most `capacity`.
    samples: std::collections::VecDeque<f64>,
    /// How many samples are kept.
    capacity: usize,
    /// Samples recorded since start.
    recorded: u64,
}

/// Percentiles of a [`LatencyWindow`], in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LatencySummary {
    /// Samples recorded since start.
    pub count: u64,
    /// Samples the percentiles are taken over (the most recent).
    pub window: usize,
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
}

impl LatencyWindow {
    /// A window of the last `capacity` samples (at least one).
    pub fn new(capacity: usize) -> Self {
        Self {
            samples: std::collections::VecDeque::with_capacity(capacity.max(1)),
            capacity: capacity.max(1),
            recorded: 0,
        }
    }

    /// Record one latency (a non-finite or negative one is ignored).
    pub fn record(&mut self, ms: f64) {
        if !ms.is_finite() || ms < 0.0 {
            return;
        }
        if self.samples.len() == self.capacity {
            self.samples.pop_front();
        }
        self.samples.push_back(ms);
        self.recorded += 1;
    }

    /// Nearest-rank percentiles of the window; None before the first sample.
    pub fn summary(&self) -> Option<LatencySummary> {
        if self.samples.is_empty() {
            return None;
        }
        let mut sorted: Vec<f64> = self.samples.iter().copied().collect();
        sorted.sort_by(f64::total_cmp);
        let rank = |q: f64| {
            let index = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
            sorted[index]
        };
        Some(LatencySummary {
            count: self.recorded,
            window: sorted.len(),
            p50: rank(0.50),
            p95: rank(0.95),
            p99: rank(0.99),
        })
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

    #[test]
    fn latency_percentiles_are_nearest_rank_over_the_recent_window() {
        let mut window = LatencyWindow::new(100);
        assert_eq!(window.summary(), None);
        for ms in 1..=200 {
            window.record(f64::from(ms));
        }
        window.record(f64::NAN);
        let summary = window.summary().unwrap();
        assert_eq!(summary.count, 200);
        assert_eq!(summary.window, 100);
        // The window holds 101..=200.
        assert_eq!(summary.p50, 150.0);
        assert_eq!(summary.p95, 195.0);
        assert_eq!(summary.p99, 199.0);
    }
}

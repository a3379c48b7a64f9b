//! The consolidation plan: which memories the sleep cycle forgets (pure).
//!
//! A memory is forgotten (archived, never deleted) only when every signal says
//! disuse: low importance, old enough, never or rarely recalled, and low retention.
//! Semantic and procedural knowledge is never forgotten by decay.

use chrono::{DateTime, Duration, Utc};

use crate::model::{Memory, MemoryId, MemoryStatus, MemoryType};
use crate::policy::retention::RetentionPolicy;

/// Thresholds of the forgetting rule.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ForgetPolicy {
    /// Retention below which a memory counts as faded.
    pub max_retention: f64,
    /// Importance below which a memory may be forgotten.
    pub max_importance: f32,
    /// Access count at or below which a memory may be forgotten.
    pub max_access_count: u32,
    /// Minimum age before a memory may be forgotten.
    pub min_age_days: i64,
}

impl Default for ForgetPolicy {
    fn default() -> Self {
        Self {
            max_retention: 0.05,
            max_importance: 0.3,
            max_access_count: 1,
            min_age_days: 7,
        }
    }
}

/// What one consolidation pass will do for one agent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConsolidationPlan {
    /// Active candidates examined (episodic and affective, not fully consolidated).
    pub candidates: usize,
    /// Memories to archive as forgotten.
    pub forget: Vec<MemoryId>,
}

/// Plan a forgetting pass over `memories` at `now`.
pub fn plan(
    memories: &[Memory],
    retention: &RetentionPolicy,
    forget: &ForgetPolicy,
    now: DateTime<Utc>,
) -> ConsolidationPlan {
    let mut result = ConsolidationPlan::default();
    for memory in memories {
        let candidate = memory.status == MemoryStatus::Active
            && matches!(
                memory.memory_type,
                MemoryType::Episodic | MemoryType::Affective
            )
            && memory.consolidation_level < 1.0;
        if !candidate {
            continue;
        }
        result.candidates += 1;
        let old_enough = now - memory.created_at >= Duration::days(forget.min_age_days);
        let faded = retention.retention(memory, now) < forget.max_retention;
        if old_enough
            && faded
            && memory.importance < forget.max_importance
            && memory.access_count <= forget.max_access_count
        {
            result.forget.push(memory.id.clone());
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::memory_fixture;

    #[test]
    fn forgets_only_when_every_signal_says_disuse() {
        let now = Utc::now();
        let old = now - Duration::days(400);
        let mut faded = memory_fixture("a", "faded", old);
        faded.importance = 0.1;
        let mut important = memory_fixture("a", "important", old);
        important.importance = 0.9;
        let mut recalled = memory_fixture("a", "recalled", old);
        recalled.importance = 0.1;
        recalled.access_count = 5;
        let mut fresh = memory_fixture("a", "fresh", now);
        fresh.importance = 0.1;
        let mut fact = memory_fixture("a", "fact", old);
        fact.importance = 0.1;
        fact.memory_type = MemoryType::Semantic;
        let memories = vec![faded.clone(), important, recalled, fresh, fact];
        let plan = plan(
            &memories,
            &RetentionPolicy::default(),
            &ForgetPolicy::default(),
            now,
        );
        assert_eq!(plan.candidates, 4);
        assert_eq!(plan.forget, vec![faded.id]);
    }

    #[test]
    fn planning_twice_after_applying_changes_nothing() {
        let now = Utc::now();
        let mut faded = memory_fixture("a", "faded", now - Duration::days(400));
        faded.importance = 0.1;
        let first = plan(
            &[faded.clone()],
            &RetentionPolicy::default(),
            &ForgetPolicy::default(),
            now,
        );
        assert_eq!(first.forget.len(), 1);
        faded.status = MemoryStatus::Archived;
        let second = plan(
            &[faded],
            &RetentionPolicy::default(),
            &ForgetPolicy::default(),
            now,
        );
        assert!(second.forget.is_empty());
    }
}

//! The consolidation plan: what the sleep cycle does with each candidate (pure).
//!
//! Candidates are active episodic and affective memories with consolidation_level < 1.
//! Each gets one [`Decision`]: members of a cluster are consolidated (abstracted into
//! knowledge); a memory outside any cluster is forgotten (archived, never deleted)
//! only when every signal says disuse (low importance, old enough, never or rarely
//! recalled, and low retention), promoted to semantic knowledge when it is both
//! important and repeatedly recalled, and kept otherwise. Semantic and procedural
//! knowledge is never forgotten by decay. An LLM never takes these decisions.

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

/// Thresholds of promotion: an experience recalled often and marked important becomes knowledge.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PromotePolicy {
    /// Importance at or above which a memory may be promoted.
    pub min_importance: f32,
    /// Access count at or above which a memory may be promoted.
    pub min_access_count: u32,
}

impl Default for PromotePolicy {
    fn default() -> Self {
        Self {
            min_importance: 0.8,
            min_access_count: 3,
        }
    }
}

/// What the sleep cycle does with one candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Decision {
    /// Archive it: it has faded by every measure.
    Forget,
    /// Abstract it with its cluster into a semantic or procedural memory.
    Consolidate,
    /// Turn it into semantic knowledge by itself.
    Promote,
    /// Leave it as it is.
    Keep,
}

impl Decision {
    /// Name used in run reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Forget => "forget",
            Decision::Consolidate => "consolidate",
            Decision::Promote => "promote",
            Decision::Keep => "keep",
        }
    }
}

/// Why [`decide`] made `decision` for `memory` at `now`, in words a person reads in the
/// run log: the measures and the thresholds they passed.
pub fn explain(
    decision: Decision,
    memory: &Memory,
    retention: &RetentionPolicy,
    forget: &ForgetPolicy,
    promote: &PromotePolicy,
    now: DateTime<Utc>,
) -> String {
    match decision {
        Decision::Consolidate => "clustered with related memories and abstracted".to_string(),
        Decision::Forget => format!(
            "faded: retention {:.3} < {:.3}, importance {:.2} < {:.2}, accessed {} ≤ {} times, {} days old ≥ {}",
            retention.retention(memory, now),
            forget.max_retention,
            memory.importance,
            forget.max_importance,
            memory.access_count,
            forget.max_access_count,
            (now - memory.created_at).num_days(),
            forget.min_age_days,
        ),
        Decision::Promote => format!(
            "important and used: importance {:.2} ≥ {:.2}, accessed {} ≥ {} times",
            memory.importance, promote.min_importance, memory.access_count, promote.min_access_count,
        ),
        Decision::Keep => "kept: neither faded enough to forget nor used enough to promote".to_string(),
    }
}

/// True when `memory` is a sleep-cycle candidate.
pub fn is_candidate(memory: &Memory) -> bool {
    memory.status == MemoryStatus::Active
        && matches!(
            memory.memory_type,
            MemoryType::Episodic | MemoryType::Affective
        )
        && memory.consolidation_level < 1.0
}

/// The decision for one candidate; `clustered` says whether it belongs to a cluster.
pub fn decide(
    memory: &Memory,
    clustered: bool,
    retention: &RetentionPolicy,
    forget: &ForgetPolicy,
    promote: &PromotePolicy,
    now: DateTime<Utc>,
) -> Decision {
    if clustered {
        return Decision::Consolidate;
    }
    let old_enough = now - memory.created_at >= Duration::days(forget.min_age_days);
    let faded = retention.retention(memory, now) < forget.max_retention;
    if old_enough
        && faded
        && memory.importance < forget.max_importance
        && memory.access_count <= forget.max_access_count
    {
        return Decision::Forget;
    }
    if memory.importance >= promote.min_importance
        && memory.access_count >= promote.min_access_count
    {
        return Decision::Promote;
    }
    Decision::Keep
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
    for memory in memories.iter().filter(|m| is_candidate(m)) {
        result.candidates += 1;
        let decision = decide(
            memory,
            false,
            retention,
            forget,
            &PromotePolicy {
                min_importance: f32::INFINITY,
                min_access_count: u32::MAX,
            },
            now,
        );
        if decision == Decision::Forget {
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
    fn clustered_memories_are_consolidated_and_important_recalled_ones_promoted() {
        let now = Utc::now();
        let old = now - Duration::days(400);
        let mut faded = memory_fixture("a", "faded", old);
        faded.importance = 0.1;
        let policy = (
            RetentionPolicy::default(),
            ForgetPolicy::default(),
            PromotePolicy::default(),
        );
        // Even a faded memory is consolidated when it belongs to a cluster: its content lives on.
        assert_eq!(
            decide(&faded, true, &policy.0, &policy.1, &policy.2, now),
            Decision::Consolidate
        );
        assert_eq!(
            decide(&faded, false, &policy.0, &policy.1, &policy.2, now),
            Decision::Forget
        );
        let mut star = memory_fixture("a", "star", old);
        star.importance = 0.9;
        star.access_count = 5;
        assert_eq!(
            decide(&star, false, &policy.0, &policy.1, &policy.2, now),
            Decision::Promote
        );
        star.access_count = 1;
        assert_eq!(
            decide(&star, false, &policy.0, &policy.1, &policy.2, now),
            Decision::Keep
        );
        star.consolidation_level = 1.0;
        assert!(!is_candidate(&star));
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

    #[test]
    fn explanations_name_the_measures_and_thresholds() {
        let now = Utc::now();
        let mut memory = crate::testing::memory_fixture("a", "x", now - Duration::days(90));
        memory.created_at = now - Duration::days(90);
        memory.last_accessed_at = now - Duration::days(90);
        memory.importance = 0.1;
        let (retention, forget, promote) = (
            RetentionPolicy::default(),
            ForgetPolicy::default(),
            PromotePolicy::default(),
        );
        let decision = decide(&memory, false, &retention, &forget, &promote, now);
        assert_eq!(decision, Decision::Forget);
        let why = explain(decision, &memory, &retention, &forget, &promote, now);
        assert!(why.starts_with("faded: retention 0.0"), "{why}");
        assert!(why.contains("importance 0.10 < "), "{why}");
        assert!(why.contains("90 days old"), "{why}");
        memory.importance = 0.9;
        memory.access_count = 5;
        let why = explain(
            Decision::Promote,
            &memory,
            &retention,
            &forget,
            &promote,
            now,
        );
        assert_eq!(
            why,
            "important and used: importance 0.90 ≥ 0.80, accessed 5 ≥ 3 times"
        );
    }
}

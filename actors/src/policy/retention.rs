//! Retention: how much of a memory is still "alive" after time without use.
//!
//! R = exp(−Δt / (S·k)), Δt in days since last access,
//! S = importance · (1 + ln(1 + access_count)) · (1 + consolidation_level),
//! k = `retention.scale_days`.

use chrono::{DateTime, Utc};

use crate::model::Memory;

/// Parameters of the retention curve.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetentionPolicy {
    /// Days a memory of strength 1 takes to fall to 1/e.
    pub scale_days: f64,
}

impl Default for RetentionPolicy {
    fn default() -> Self {
        Self { scale_days: 30.0 }
    }
}

impl RetentionPolicy {
    /// Memory strength S (≥ a small floor so zero importance still decays finitely).
    pub fn strength(&self, importance: f32, access_count: u32, consolidation_level: f32) -> f64 {
        let importance = f64::from(importance.clamp(0.0, 1.0)).max(0.01);
        importance
            * (1.0 + (1.0 + f64::from(access_count)).ln())
            * (1.0 + f64::from(consolidation_level.clamp(0.0, 1.0)))
    }

    /// Retention in 0..1 of `memory` at `now`.
    pub fn retention(&self, memory: &Memory, now: DateTime<Utc>) -> f64 {
        let elapsed_days =
            (now - memory.last_accessed_at).num_milliseconds().max(0) as f64 / 86_400_000.0;
        let strength = self.strength(
            memory.importance,
            memory.access_count,
            memory.consolidation_level,
        );
        (-elapsed_days / (strength * self.scale_days)).exp()
    }

    /// `points` samples (at least 2) of `memory`'s retention, evenly spaced from its
    /// last access to `until`, assuming no further use: the curve a browser draws.
    pub fn curve(
        &self,
        memory: &Memory,
        until: DateTime<Utc>,
        points: usize,
    ) -> Vec<(DateTime<Utc>, f64)> {
        let start = memory.last_accessed_at.min(until);
        let span = (until - start).num_milliseconds().max(0);
        let steps = points.max(2) - 1;
        (0..=steps)
            .map(|step| {
                let at = start + chrono::Duration::milliseconds(span * step as i64 / steps as i64);
                (at, self.retention(memory, at))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_curve_starts_whole_at_the_last_access_and_falls() {
        let mut memory = crate::testing::memory_fixture("a", "x", Utc::now());
        memory.importance = 0.5;
        let policy = RetentionPolicy::default();
        let until = memory.last_accessed_at + chrono::Duration::days(60);
        let curve = policy.curve(&memory, until, 7);
        assert_eq!(curve.len(), 7);
        assert_eq!(curve[0], (memory.last_accessed_at, 1.0));
        assert_eq!(curve[6].0, until);
        assert!(curve.windows(2).all(|w| w[1].1 < w[0].1), "{curve:?}");
        assert_eq!(curve[3].1, policy.retention(&memory, curve[3].0));
        // A bound before the last access gives a flat curve at that instant.
        let early = policy.curve(
            &memory,
            memory.last_accessed_at - chrono::Duration::days(1),
            1,
        );
        assert_eq!(early.len(), 2);
    }

    #[test]
    fn fresh_memory_is_fully_retained() {
        let policy = RetentionPolicy::default();
        let s = policy.strength(1.0, 0, 0.0);
        assert!((s - 1.0).abs() < 1e-9);
    }

    #[test]
    fn retention_matches_formula() {
        let policy = RetentionPolicy { scale_days: 30.0 };
        let s = policy.strength(0.5, 3, 0.5);
        let expected_s = 0.5 * (1.0 + 4f64.ln()) * 1.5;
        assert!((s - expected_s).abs() < 1e-9);
        // After 10 days: exp(-10 / (S * 30))
        let r = (-10.0 / (s * 30.0)).exp();
        assert!(r > 0.0 && r < 1.0);
    }

    #[test]
    fn use_and_importance_slow_decay() {
        let policy = RetentionPolicy::default();
        assert!(policy.strength(0.9, 0, 0.0) > policy.strength(0.1, 0, 0.0));
        assert!(policy.strength(0.5, 10, 0.0) > policy.strength(0.5, 0, 0.0));
        assert!(policy.strength(0.5, 0, 1.0) > policy.strength(0.5, 0, 0.0));
    }
}

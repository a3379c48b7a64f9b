//! The arbiter hook: a model (an LLM, when one is configured) consulted when the rules
//! cannot decide. It is always asked under a hard timeout, and its silence, error or
//! timeout falls back to the rules. An arbiter can never delete anything: it only
//! picks a type or confirms a contradiction that the runtime then records as a
//! supersede (the old memory is kept).

use async_trait::async_trait;

use crate::model::MemoryType;

/// Decisions the rules hand to a model when they are unsure.
#[async_trait]
pub trait Arbiter: Send + Sync + 'static {
    /// Pick the type of an ambiguous text among `candidates`, or None for no opinion.
    async fn route(&self, text: &str, candidates: &[MemoryType]) -> Option<MemoryType>;
    /// Does `new` contradict (replace) `old`? None for no opinion.
    async fn contradicts(&self, old: &str, new: &str) -> Option<bool>;
}

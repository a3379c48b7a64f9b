//! Reflection and the sleep cycle's run log on the runtime handle. The sleep cycle and
//! archival themselves run in the consolidator actor
//! ([`crate::actors::consolidator`]); the façade hands them over through its handle.

use super::{validate, Runtime};
use crate::error::MemoryResult;
use crate::model::{AgentId, ConsolidationRun};
use crate::policy::stats::{agent_stats, AgentStats};

/// Statistics of an agent's memories ([`agent_stats`]).
pub(super) async fn reflect(rt: &Runtime, agent: &AgentId) -> MemoryResult<AgentStats> {
    let memories = rt.actors().episodic.agent_memories(agent).await?;
    Ok(agent_stats(&memories, &rt.inner.config.retention, rt.now()))
}

/// The latest runs, of one agent or of all.
pub(super) async fn runs(
    rt: &Runtime,
    agent: Option<&AgentId>,
    limit: usize,
) -> MemoryResult<Vec<ConsolidationRun>> {
    validate::limit(&rt.inner.config.limits, limit)?;
    rt.actors().episodic.runs(agent, limit).await
}

//! The resource operations on memories and the run log (`/v1/memories…`,
//! `/v1/cognition/runs`, archival): wire query in, wire answer out, shared by the REST
//! routes and the CLI.

use mnemos_actors::error::MemoryResult;
use mnemos_actors::model::MemoryId;
use mnemos_actors::store::ListQuery;
use mnemos_actors::Runtime;

use super::parse::{agent, memory_status, memory_type, optional_agent, project, required};
use super::wire::*;

/// Browse an agent's memories, newest first, one page at a time.
pub async fn list_memories(runtime: &Runtime, params: ListParams) -> MemoryResult<ListResponse> {
    let agent = agent(&required("agent_id", params.agent_id)?)?;
    let query = ListQuery {
        agent_id: Some(agent),
        memory_type: memory_type("type", params.memory_type.as_deref())?,
        status: memory_status("status", params.status.as_deref())?,
        tag: params.tag,
        limit: params.limit.unwrap_or(50),
        cursor: params.cursor.map(MemoryId),
        occurred: None,
        project_id: project("project_id", params.project_id.as_deref())?,
    };
    let (memories, next) = runtime.list(query).await?;
    Ok(ListResponse {
        memories: memories.into_iter().map(Into::into).collect(),
        next_cursor: next.map(|id| id.0),
    })
}

/// One memory by id (the owner is checked when given).
pub async fn get_memory(
    runtime: &Runtime,
    id: String,
    owner: AgentParam,
) -> MemoryResult<MemoryView> {
    let owner = optional_agent(owner.agent_id.as_deref())?;
    Ok(runtime.get(owner.as_ref(), &MemoryId(id)).await?.into())
}

/// Change a memory; the previous state is kept in its history.
pub async fn patch_memory(
    runtime: &Runtime,
    id: String,
    owner: AgentParam,
    body: PatchBody,
) -> MemoryResult<MemoryView> {
    let owner = optional_agent(owner.agent_id.as_deref())?;
    let patch = body.into_patch()?;
    Ok(runtime
        .patch(owner.as_ref(), &MemoryId(id), patch)
        .await?
        .into())
}

/// Delete a memory everywhere, history included.
pub async fn delete_memory(
    runtime: &Runtime,
    id: String,
    owner: AgentParam,
) -> MemoryResult<DeleteResponse> {
    let owner = optional_agent(owner.agent_id.as_deref())?;
    let id = MemoryId(id);
    runtime.delete(owner.as_ref(), &id).await?;
    Ok(DeleteResponse { deleted: id.0 })
}

/// The version history of a memory by id (the resource form of `memory_history`).
pub async fn memory_history(
    runtime: &Runtime,
    id: String,
    owner: AgentParam,
) -> MemoryResult<HistoryResponse> {
    let owner = optional_agent(owner.agent_id.as_deref())?;
    super::tools::history_of(runtime, owner, id).await
}

/// The consolidation run log, newest first.
pub async fn cognition_runs(runtime: &Runtime, params: RunsParams) -> MemoryResult<RunsResponse> {
    let owner = optional_agent(params.agent_id.as_deref())?;
    let runs = runtime
        .runs(owner.as_ref(), params.limit.unwrap_or(20))
        .await?;
    Ok(RunsResponse {
        runs: runs.into_iter().map(Into::into).collect(),
    })
}

/// Archive idle sessions now (what the nightly job does); `trigger` names the surface.
pub async fn archive(runtime: &Runtime, trigger: &str) -> MemoryResult<RunView> {
    Ok(runtime.archive(trigger).await?.into())
}

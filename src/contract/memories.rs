//! The resource operations on memories and the run log (`/v1/memories…`,
//! `/v1/cognition/runs`, archival): wire query in, wire answer out, shared by the REST
//! routes and the CLI.

use mnemos_actors::error::{MemoryError, MemoryResult};
use mnemos_actors::model::MemoryId;
use mnemos_actors::store::ListQuery;
use mnemos_actors::Runtime;

use super::parse::{memory_status, memory_type, project, session};
use super::wire::*;
use crate::auth::{Caller, Scope};

/// Browse an agent's memories, newest first, one page at a time.
pub async fn list_memories(
    runtime: &Runtime,
    caller: &Caller,
    params: ListParams,
) -> MemoryResult<ListResponse> {
    caller.require(Scope::Read)?;
    let agent = caller.agent("agent_id", params.agent_id.as_deref())?;
    let query = ListQuery {
        agent_id: Some(agent),
        memory_type: memory_type("type", params.memory_type.as_deref())?,
        status: memory_status("status", params.status.as_deref())?,
        tag: params.tag,
        limit: params.limit.unwrap_or(50),
        cursor: cursor(params.cursor)?,
        occurred: None,
        project_id: project("project_id", params.project_id.as_deref())?,
        session_id: session("session_id", params.session_id.as_deref())?,
        words: super::parse::search_words("q", params.q.as_deref())?,
        within: super::parse::occurred_between(params.occurred_after, params.occurred_before)?,
    };
    let total = match params.with_total {
        Some(true) => Some(runtime.count_listed(&query).await?),
        _ => None,
    };
    let (memories, next) = runtime.list(query).await?;
    let (policy, now) = (runtime.config().retention, runtime.now());
    Ok(ListResponse {
        memories: memories
            .into_iter()
            .map(|m| MemoryView::with_retention(m, &policy, now))
            .collect(),
        next_cursor: next.map(|id| id.0),
        total,
    })
}

/// A page cursor: the `next_cursor` of a previous page, which is a memory id.
fn cursor(raw: Option<String>) -> MemoryResult<Option<MemoryId>> {
    match raw {
        None => Ok(None),
        Some(raw) if uuid::Uuid::parse_str(&raw).is_ok() => Ok(Some(MemoryId(raw))),
        Some(raw) => Err(MemoryError::invalid(
            "cursor",
            format!("cursor {raw:?} is not a next_cursor this server gave; pass the next_cursor of the previous page, or leave it out for the first"),
        )),
    }
}

/// One memory by id, of the owner the request names (or the key's agent).
pub async fn get_memory(
    runtime: &Runtime,
    caller: &Caller,
    id: String,
    owner: AgentParam,
) -> MemoryResult<MemoryView> {
    caller.require(Scope::Read)?;
    let owner = caller.owner("agent_id", owner.agent_id.as_deref())?;
    let memory = runtime.get(Some(&owner), &MemoryId(id)).await?;
    let (policy, now) = (runtime.config().retention, runtime.now());
    Ok(MemoryView::with_retention(memory, &policy, now))
}

/// Change a memory; the previous state is kept in its history.
pub async fn patch_memory(
    runtime: &Runtime,
    caller: &Caller,
    id: String,
    owner: AgentParam,
    body: PatchBody,
) -> MemoryResult<MemoryView> {
    caller.require(Scope::Write)?;
    let owner = caller.owner("agent_id", owner.agent_id.as_deref())?;
    let patch = body.into_patch()?;
    Ok(runtime
        .patch(Some(&owner), &MemoryId(id), patch)
        .await?
        .into())
}

/// Delete a memory everywhere, history included.
pub async fn delete_memory(
    runtime: &Runtime,
    caller: &Caller,
    id: String,
    owner: AgentParam,
) -> MemoryResult<DeleteResponse> {
    caller.require(Scope::Write)?;
    let owner = caller.owner("agent_id", owner.agent_id.as_deref())?;
    let id = MemoryId(id);
    runtime.delete(Some(&owner), &id).await?;
    Ok(DeleteResponse { deleted: id.0 })
}

/// The exchanges of a chat transcript: each run of user messages with the assistant
/// replies that follow it (system messages are context, not mined). A role other than
/// user, assistant or system is refused naming the message.
pub fn exchanges(messages: &[ChatMessage]) -> MemoryResult<Vec<(String, String)>> {
    if messages.is_empty() {
        return Err(MemoryError::invalid(
            "messages",
            "messages must hold at least one {\"role\", \"content\"} message",
        ));
    }
    let mut turns = Vec::new();
    let (mut user, mut assistant) = (Vec::<&str>::new(), Vec::<&str>::new());
    for (index, message) in messages.iter().enumerate() {
        match message.role.as_str() {
            "user" => {
                if !assistant.is_empty() {
                    turns.push((user.join("\n"), assistant.join("\n")));
                    user.clear();
                    assistant.clear();
                }
                user.push(&message.content);
            }
            "assistant" => assistant.push(&message.content),
            "system" => {}
            other => {
                return Err(MemoryError::invalid(
                    format!("messages[{index}].role"),
                    format!("role must be user, assistant or system (got {other:?})"),
                ))
            }
        }
    }
    if !user.is_empty() || !assistant.is_empty() {
        turns.push((user.join("\n"), assistant.join("\n")));
    }
    Ok(turns
        .into_iter()
        .filter(|(u, a)| !(u.trim().is_empty() && a.trim().is_empty()))
        .collect())
}

/// Mine a conversation for memories (`POST /v1/memories`): every exchange as
/// `extract_turn` mines one; each memory it lands on is answered once.
pub async fn add_memories(
    runtime: &Runtime,
    caller: &Caller,
    body: AddMemoriesBody,
) -> MemoryResult<ExtractTurnResponse> {
    caller.require(Scope::Write)?;
    let agent = caller.agent("agent_id", body.agent_id.as_deref())?;
    let session_id = session("session_id", body.session_id.as_deref())?;
    if body.metadata.as_ref().is_some_and(|m| !m.is_object()) {
        return Err(MemoryError::invalid(
            "metadata",
            "metadata must be a JSON object",
        ));
    }
    let turns = exchanges(&body.messages)?;
    let budget = runtime.config().extraction_max_per_turn;
    caller.spend_session_writes(
        session_id.as_ref().map_or("", |s| s.as_str()),
        budget.max(1) * turns.len().max(1),
    )?;
    let metadata = caller.with_provenance(body.metadata, session_id.as_ref().map(|s| s.as_str()));
    let mut stored: Vec<MemoryView> = Vec::new();
    for (user, assistant) in turns {
        let outcomes = runtime
            .extract_turn(
                &agent,
                &user,
                &assistant,
                session_id.clone(),
                budget,
                metadata.clone(),
            )
            .await?;
        for outcome in outcomes {
            if !stored.iter().any(|m| m.id == outcome.memory.id.0) {
                stored.push(outcome.memory.into());
            }
        }
    }
    Ok(ExtractTurnResponse { stored })
}

/// Delete every memory of one agent (history included), page by page.
pub async fn delete_all_memories(
    runtime: &Runtime,
    caller: &Caller,
    params: DeleteAllParams,
) -> MemoryResult<DeleteAllResponse> {
    caller.require(Scope::Write)?;
    let agent = caller.agent("agent_id", params.agent_id.as_deref())?;
    let mut deleted = 0u64;
    loop {
        let query = ListQuery {
            agent_id: Some(agent.clone()),
            limit: 200,
            ..ListQuery::default()
        };
        let (page, _) = runtime.list(query).await?;
        if page.is_empty() {
            break;
        }
        for memory in page {
            runtime.delete(Some(&agent), &memory.id).await?;
            deleted += 1;
        }
    }
    Ok(DeleteAllResponse { deleted })
}

/// The version history of a memory by id (the resource form of `memory_history`).
pub async fn memory_history(
    runtime: &Runtime,
    caller: &Caller,
    id: String,
    owner: AgentParam,
) -> MemoryResult<HistoryResponse> {
    caller.require(Scope::Read)?;
    let owner = caller.owner("agent_id", owner.agent_id.as_deref())?;
    super::tools::history_of(runtime, &owner, id).await
}

/// The consolidation run log, newest first: of one agent, or (admin) of every agent.
pub async fn cognition_runs(
    runtime: &Runtime,
    caller: &Caller,
    params: RunsParams,
) -> MemoryResult<RunsResponse> {
    caller.require(Scope::Read)?;
    // Every agent's runs: for the operator or an admin of the default tenant only.
    let owner = match (&params.agent_id, &caller.agent, &caller.tenant) {
        (None, None, None) => {
            caller.require(Scope::Admin)?;
            None
        }
        (named, _, _) => Some(caller.agent("agent_id", named.as_deref())?),
    };
    let runs = runtime
        .runs(owner.as_ref(), params.limit.unwrap_or(20))
        .await?;
    Ok(RunsResponse {
        runs: runs.into_iter().map(Into::into).collect(),
    })
}

/// Archive idle sessions now (what the nightly job does); `trigger` names the surface.
pub async fn archive(runtime: &Runtime, caller: &Caller, trigger: &str) -> MemoryResult<RunView> {
    caller.require(Scope::Admin)?;
    Ok(runtime.archive(trigger).await?.into())
}

//! Route handlers: parse wire types, call the runtime, convert back. No logic of their own.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use mnemos_actors::error::MemoryError;
use mnemos_actors::model::{MemoryId, MemoryStatus, MemoryType};
use mnemos_actors::runtime::{ForgetTarget, RecallInput};
use mnemos_actors::store::ListQuery;
use mnemos_actors::supervisor::{ChildKind, ChildState};
use serde::Serialize;
use utoipa::ToSchema;

use super::error::{ApiError, ErrorBody};
use super::wire::*;
use super::{ApiJson, ApiQuery, AppState};

type Shared = State<Arc<AppState>>;
type ApiResult<T> = Result<T, ApiError>;

fn optional_agent(raw: Option<&str>) -> Result<Option<mnemos_actors::model::AgentId>, MemoryError> {
    raw.map(agent).transpose()
}

/// Store one memory.
#[utoipa::path(post, path = "/tools/remember", request_body = RememberBody,
    responses((status = 201, body = RememberResponse), (status = 400, body = ErrorBody), (status = 413, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %body.agent_id))]
pub async fn remember(
    State(state): Shared,
    ApiJson(body): ApiJson<RememberBody>,
) -> ApiResult<(StatusCode, Json<RememberResponse>)> {
    let (agent_id, item) = body.into_parts();
    let agent = agent(&agent_id)?;
    let outcome = state.runtime.remember(&agent, item.into_input("")?).await?;
    Ok((StatusCode::CREATED, Json(outcome.into())))
}

/// Store several memories atomically.
#[utoipa::path(post, path = "/tools/remember_batch", request_body = RememberBatchBody,
    responses((status = 201, body = RememberBatchResponse), (status = 400, body = ErrorBody), (status = 413, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %body.agent_id))]
pub async fn remember_batch(
    State(state): Shared,
    ApiJson(body): ApiJson<RememberBatchBody>,
) -> ApiResult<(StatusCode, Json<RememberBatchResponse>)> {
    let agent = agent(&body.agent_id)?;
    let inputs = body
        .memories
        .into_iter()
        .enumerate()
        .map(|(index, item)| item.into_input(&format!("memories[{index}].")))
        .collect::<Result<Vec<_>, _>>()?;
    let outcomes = state.runtime.remember_batch(&agent, inputs).await?;
    Ok((
        StatusCode::CREATED,
        Json(RememberBatchResponse {
            results: outcomes.into_iter().map(Into::into).collect(),
        }),
    ))
}

/// Recall the memories that matter for a query.
#[utoipa::path(post, path = "/tools/recall", request_body = RecallBody,
    responses((status = 200, body = RecallResponse), (status = 400, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %body.agent_id))]
pub async fn recall(
    State(state): Shared,
    ApiJson(body): ApiJson<RecallBody>,
) -> ApiResult<Json<RecallResponse>> {
    let agent = agent(&body.agent_id)?;
    let now = body.now.unwrap_or_else(|| state.runtime.now());
    let debug = body.debug.unwrap_or(false);
    let time_range = body
        .time_query
        .as_deref()
        .map(|q| {
            mnemos_actors::policy::time::parse_time_query(q, now)
                .map_err(|message| MemoryError::invalid("time_query", message))
        })
        .transpose()?;
    let types = body
        .types
        .map(|t| t.0)
        .unwrap_or_default()
        .iter()
        .map(|t| MemoryType::parse("type", t))
        .collect::<Result<Vec<_>, _>>()?;
    let session_id = body
        .session_id
        .as_deref()
        .map(mnemos_actors::model::SessionId::parse)
        .transpose()?;
    let outcome = state
        .runtime
        .recall(RecallInput {
            agent_id: agent,
            query: body.query,
            types,
            limit: body.limit,
            session_id,
            tags: body.tags.unwrap_or_default(),
            include_shared: body.include_shared.unwrap_or(true),
            debug,
            time_range,
            now: body.now,
        })
        .await?;
    metrics::histogram!("mnemos_recall_server_seconds").record(outcome.took_ms / 1000.0);
    Ok(Json(RecallResponse::from_outcome(outcome, debug)))
}

/// Assemble a ready-to-inject context block within a token budget.
#[utoipa::path(post, path = "/tools/build_context", request_body = BuildContextBody,
    responses((status = 200, body = BuildContextResponse), (status = 400, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %body.agent_id))]
pub async fn build_context(
    State(state): Shared,
    ApiJson(body): ApiJson<BuildContextBody>,
) -> ApiResult<Json<BuildContextResponse>> {
    let agent = agent(&body.agent_id)?;
    let budget = body.context_budget.unwrap_or(2000);
    if !(1..=1_000_000).contains(&budget) {
        return Err(MemoryError::invalid(
            "context_budget",
            "context_budget must be between 1 and 1000000 tokens",
        )
        .into());
    }
    let root = body.project_root.as_deref().map(std::path::PathBuf::from);
    if let Some(root) = &root {
        crate::context::check_root(root)?;
    }
    let session_id = body
        .session_id
        .as_deref()
        .map(mnemos_actors::model::SessionId::parse)
        .transpose()?;
    let outcome = state
        .runtime
        .recall(RecallInput {
            limit: Some(state.runtime.config().limits.max_result_limit.min(50)),
            session_id,
            include_shared: body.include_shared.unwrap_or(true),
            ..RecallInput::new(agent, body.query)
        })
        .await?;
    let mut stale_files: Vec<String> = Vec::new();
    let ranked: Vec<(mnemos_actors::model::Memory, f64)> = outcome
        .hits
        .into_iter()
        .filter(|hit| match (&root, &hit.memory.source) {
            (Some(root), Some(source)) if crate::context::is_stale(root, source) => {
                if !stale_files.contains(&source.path) {
                    stale_files.push(source.path.clone());
                }
                false
            }
            _ => true,
        })
        .map(|hit| (hit.memory, hit.score))
        .collect();
    let block = mnemos_actors::policy::context::assemble(&ranked, budget);
    Ok(Json(BuildContextResponse {
        context: block.text,
        metadata: ContextMetadata {
            injected_count: block.injected,
            tokens_used: block.tokens_used,
            stale_files,
        },
    }))
}

/// Link two memories.
#[utoipa::path(post, path = "/tools/associate", request_body = AssociateBody,
    responses((status = 201, body = AssociationView), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %body.agent_id))]
pub async fn associate(
    State(state): Shared,
    ApiJson(body): ApiJson<AssociateBody>,
) -> ApiResult<(StatusCode, Json<AssociationView>)> {
    let agent = agent(&body.agent_id)?;
    let edge = state
        .runtime
        .associate(
            &agent,
            &MemoryId(body.from_id),
            &MemoryId(body.to_id),
            body.relation,
            body.weight,
        )
        .await?;
    Ok((StatusCode::CREATED, Json(edge.into())))
}

/// Spread activation from a memory through its associations.
#[utoipa::path(post, path = "/tools/spreading_activation", request_body = SpreadingActivationBody,
    responses((status = 200, body = SpreadingActivationResponse), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %body.agent_id))]
pub async fn spreading_activation(
    State(state): Shared,
    ApiJson(body): ApiJson<SpreadingActivationBody>,
) -> ApiResult<Json<SpreadingActivationResponse>> {
    let agent = agent(&body.agent_id)?;
    let activated = state
        .runtime
        .spreading_activation(
            &agent,
            &MemoryId(body.seed_id),
            body.depth.unwrap_or(2),
            body.limit.unwrap_or(10),
        )
        .await?;
    Ok(Json(SpreadingActivationResponse {
        results: activated
            .into_iter()
            .map(|a| ActivationResult {
                memory: a.memory.into(),
                activation: a.activation,
                path: a.path.into_iter().map(|id| id.0).collect(),
            })
            .collect(),
    }))
}

/// Forget (archive) a memory or the memories matching a query.
#[utoipa::path(post, path = "/tools/forget", request_body = ForgetBody,
    responses((status = 200, body = ForgetResponse), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %body.agent_id))]
pub async fn forget(
    State(state): Shared,
    ApiJson(body): ApiJson<ForgetBody>,
) -> ApiResult<Json<ForgetResponse>> {
    let agent = agent(&body.agent_id)?;
    let target = match (body.id, body.query) {
        (Some(id), None) => ForgetTarget::Id(MemoryId(id)),
        (None, Some(text)) => ForgetTarget::Query {
            text,
            limit: body.limit.unwrap_or(10),
        },
        (Some(_), Some(_)) => {
            return Err(MemoryError::invalid("id", "give either id or query, not both").into())
        }
        (None, None) => {
            return Err(MemoryError::invalid("id", "give the id of a memory, or a query").into())
        }
    };
    let dry_run = body.dry_run.unwrap_or(false);
    let forgotten = state.runtime.forget(&agent, target, dry_run).await?;
    Ok(Json(ForgetResponse {
        forgotten: forgotten.into_iter().map(|id| id.0).collect(),
        dry_run,
    }))
}

/// Run a consolidation pass for an agent now.
#[utoipa::path(post, path = "/tools/consolidate", request_body = AgentBody,
    responses((status = 200, body = RunView), (status = 400, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %body.agent_id))]
pub async fn consolidate(
    State(state): Shared,
    ApiJson(body): ApiJson<AgentBody>,
) -> ApiResult<Json<RunView>> {
    let agent = agent(&body.agent_id)?;
    Ok(Json(state.runtime.consolidate(&agent, "api").await?.into()))
}

/// Archive idle sessions now (what the 03:00 job does): each session idle for
/// `archival.idle_hours` gets a summary tagged `archive_summary` and its working memory is cleared.
#[utoipa::path(post, path = "/v1/admin/archive",
    responses((status = 200, body = RunView), (status = 503, body = ErrorBody)))]
#[tracing::instrument(skip_all)]
pub async fn archive(State(state): Shared) -> ApiResult<Json<RunView>> {
    Ok(Json(state.runtime.archive("api").await?.into()))
}

/// Statistics of an agent's memories.
#[utoipa::path(post, path = "/tools/reflect", request_body = AgentBody,
    responses((status = 200, body = ReflectResponse), (status = 400, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %body.agent_id))]
pub async fn reflect(
    State(state): Shared,
    ApiJson(body): ApiJson<AgentBody>,
) -> ApiResult<Json<ReflectResponse>> {
    let agent = agent(&body.agent_id)?;
    let stats = state.runtime.reflect(&agent).await?;
    Ok(Json(ReflectResponse::new(&agent, stats)))
}

/// Version history of a memory.
#[utoipa::path(post, path = "/tools/memory_history", request_body = HistoryBody,
    responses((status = 200, body = HistoryResponse), (status = 404, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(memory_id = %body.id))]
pub async fn memory_history(
    State(state): Shared,
    ApiJson(body): ApiJson<HistoryBody>,
) -> ApiResult<Json<HistoryResponse>> {
    let owner = optional_agent(body.agent_id.as_deref())?;
    history_of(&state, owner, body.id).await
}

async fn history_of(
    state: &AppState,
    owner: Option<mnemos_actors::model::AgentId>,
    id: String,
) -> ApiResult<Json<HistoryResponse>> {
    let id = MemoryId(id);
    let versions = state.runtime.history(owner.as_ref(), &id).await?;
    Ok(Json(HistoryResponse {
        id: id.0,
        versions: versions.into_iter().map(Into::into).collect(),
    }))
}

/// Browse an agent's memories, newest first.
#[utoipa::path(get, path = "/v1/memories", params(ListParams),
    responses((status = 200, body = ListResponse), (status = 400, body = ErrorBody)))]
pub async fn list_memories(
    State(state): Shared,
    ApiQuery(params): ApiQuery<ListParams>,
) -> ApiResult<Json<ListResponse>> {
    let agent = agent(&required("agent_id", params.agent_id)?)?;
    let query = ListQuery {
        agent_id: Some(agent),
        memory_type: params
            .memory_type
            .as_deref()
            .map(|t| MemoryType::parse("type", t))
            .transpose()?,
        status: params
            .status
            .as_deref()
            .map(|s| MemoryStatus::parse("status", s))
            .transpose()?,
        tag: params.tag,
        limit: params.limit.unwrap_or(50),
        cursor: params.cursor.map(MemoryId),
        occurred: None,
    };
    let (memories, next) = state.runtime.list(query).await?;
    Ok(Json(ListResponse {
        memories: memories.into_iter().map(Into::into).collect(),
        next_cursor: next.map(|id| id.0),
    }))
}

/// One memory.
#[utoipa::path(get, path = "/v1/memories/{id}", params(("id" = String, Path), AgentParam),
    responses((status = 200, body = MemoryView), (status = 404, body = ErrorBody)))]
pub async fn get_memory(
    State(state): Shared,
    Path(id): Path<String>,
    ApiQuery(params): ApiQuery<AgentParam>,
) -> ApiResult<Json<MemoryView>> {
    let owner = optional_agent(params.agent_id.as_deref())?;
    Ok(Json(
        state
            .runtime
            .get(owner.as_ref(), &MemoryId(id))
            .await?
            .into(),
    ))
}

/// Change a memory; the previous state is kept in its history.
#[utoipa::path(patch, path = "/v1/memories/{id}", params(("id" = String, Path), AgentParam), request_body = PatchBody,
    responses((status = 200, body = MemoryView), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn patch_memory(
    State(state): Shared,
    Path(id): Path<String>,
    ApiQuery(params): ApiQuery<AgentParam>,
    ApiJson(body): ApiJson<PatchBody>,
) -> ApiResult<Json<MemoryView>> {
    let owner = optional_agent(params.agent_id.as_deref())?;
    let patch = body.into_patch()?;
    Ok(Json(
        state
            .runtime
            .patch(owner.as_ref(), &MemoryId(id), patch)
            .await?
            .into(),
    ))
}

/// Delete a memory everywhere, history included.
#[utoipa::path(delete, path = "/v1/memories/{id}", params(("id" = String, Path), AgentParam),
    responses((status = 200, body = DeleteResponse), (status = 404, body = ErrorBody)))]
pub async fn delete_memory(
    State(state): Shared,
    Path(id): Path<String>,
    ApiQuery(params): ApiQuery<AgentParam>,
) -> ApiResult<Json<DeleteResponse>> {
    let owner = optional_agent(params.agent_id.as_deref())?;
    let id = MemoryId(id);
    state.runtime.delete(owner.as_ref(), &id).await?;
    Ok(Json(DeleteResponse { deleted: id.0 }))
}

/// Version history of a memory.
#[utoipa::path(get, path = "/v1/memories/{id}/history", params(("id" = String, Path), AgentParam),
    responses((status = 200, body = HistoryResponse), (status = 404, body = ErrorBody)))]
pub async fn memory_history_resource(
    State(state): Shared,
    Path(id): Path<String>,
    ApiQuery(params): ApiQuery<AgentParam>,
) -> ApiResult<Json<HistoryResponse>> {
    let owner = optional_agent(params.agent_id.as_deref())?;
    history_of(&state, owner, id).await
}

/// Consolidation run log.
#[utoipa::path(get, path = "/v1/cognition/runs", params(RunsParams),
    responses((status = 200, body = RunsResponse), (status = 400, body = ErrorBody)))]
pub async fn cognition_runs(
    State(state): Shared,
    ApiQuery(params): ApiQuery<RunsParams>,
) -> ApiResult<Json<RunsResponse>> {
    let owner = optional_agent(params.agent_id.as_deref())?;
    let runs = state
        .runtime
        .runs(owner.as_ref(), params.limit.unwrap_or(20))
        .await?;
    Ok(Json(RunsResponse {
        runs: runs.into_iter().map(Into::into).collect(),
    }))
}

/// Make an actor fail (only with `server.fault_injection = true`; for supervision tests).
pub async fn inject_fault(
    State(state): Shared,
    Path(child): Path<String>,
) -> ApiResult<(StatusCode, Json<serde_json::Value>)> {
    if !state.fault_injection {
        return Err(MemoryError::not_found(
            "no such route; see /openapi.json for the routes this server has",
        )
        .into());
    }
    let kind = ChildKind::parse(&child).ok_or_else(|| {
        MemoryError::invalid(
            "child",
            "unknown actor; use working, episodic, vectors, graph, consolidator or cognition",
        )
    })?;
    state.runtime.inject_fault(kind)?;
    Ok((
        StatusCode::ACCEPTED,
        Json(serde_json::json!({ "injected": child })),
    ))
}

/// Health of one supervised actor.
#[derive(Debug, Serialize, ToSchema)]
pub struct ActorHealthView {
    /// Actor name.
    pub name: String,
    /// running | restarting | failed.
    pub state: String,
    /// Restarts so far.
    pub restarts: u32,
    /// Last failure.
    pub last_error: Option<String>,
}

/// Liveness and per-backend state.
#[derive(Debug, Serialize, ToSchema)]
pub struct HealthView {
    /// ok | degraded.
    pub status: String,
    /// Server version.
    pub version: String,
    /// Seconds since start.
    pub uptime_seconds: u64,
    /// Backend name and state per store.
    #[schema(value_type = Object)]
    pub backends: serde_json::Value,
    /// Supervised actors.
    pub actors: Vec<ActorHealthView>,
}

/// Liveness, per-backend and per-actor state.
#[utoipa::path(get, path = "/health", responses((status = 200, body = HealthView)))]
pub async fn health(State(state): Shared) -> Json<HealthView> {
    let health = state.runtime.health().await;
    let degraded = health
        .children
        .iter()
        .any(|c| c.state != ChildState::Running)
        || health.index.is_none();
    let state_of = |kind: ChildKind| {
        health
            .children
            .iter()
            .find(|c| c.child == kind)
            .map(|c| match c.state {
                ChildState::Running => "up",
                ChildState::Restarting => "restarting",
                ChildState::Failed => "down",
            })
            .unwrap_or("down")
    };
    let backends = serde_json::json!({
        "store": { "backend": health.store_backend, "state": state_of(ChildKind::Episodic) },
        "vectors": {
            "backend": health.index.as_ref().map(|i| i.backend.clone()),
            "state": state_of(ChildKind::Vectors),
            "model": health.index.as_ref().map(|i| i.model.clone()),
            "dimension": health.index.as_ref().map(|i| i.dimension),
            "indexed": health.index.as_ref().map(|i| i.vectors),
        },
        "graph": { "backend": health.graph_backend, "state": state_of(ChildKind::Graph) },
        "working": { "backend": health.working_backend, "state": state_of(ChildKind::Working) },
        "inner_thought": { "provider": health.inner_thought, "state": state_of(ChildKind::Consolidator) },
    });
    Json(HealthView {
        status: if degraded { "degraded" } else { "ok" }.to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        uptime_seconds: state.started.elapsed().as_secs(),
        backends,
        actors: health
            .children
            .into_iter()
            .map(|c| ActorHealthView {
                name: c.child.as_str().to_string(),
                state: match c.state {
                    ChildState::Running => "running",
                    ChildState::Restarting => "restarting",
                    ChildState::Failed => "failed",
                }
                .to_string(),
                restarts: c.restarts,
                last_error: c.last_error,
            })
            .collect(),
    })
}

/// Prometheus metrics.
#[utoipa::path(get, path = "/metrics", responses((status = 200, body = String, content_type = "text/plain")))]
pub async fn metrics(State(state): Shared) -> impl IntoResponse {
    let health = state.runtime.health().await;
    if let Some(index) = &health.index {
        metrics::gauge!("mnemos_vector_index_size").set(index.vectors as f64);
    }
    for child in &health.children {
        metrics::gauge!("mnemos_actor_restarts", "actor" => child.child.as_str())
            .set(f64::from(child.restarts));
    }
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics.render(),
    )
}

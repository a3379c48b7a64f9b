//! Route handlers of the memory tools, the memory resources, the run log, the admin
//! routes, `/health` and `/metrics`: extract, call `crate::contract`, answer with the
//! route's status. No logic of their own.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use mnemos_actors::error::MemoryError;
use mnemos_actors::supervisor::ChildKind;

use super::identity::{Authenticated, MaybeAuthenticated};
use super::ApiPath as Path;
use super::{ApiJson, ApiQuery};
use crate::contract::errors::{ApiError, ErrorBody};
use crate::contract::health::HealthView;
use crate::contract::wire::*;
use crate::contract::{memories, tools};
use crate::state::AppState;

/// The shared state as handlers extract it.
pub(crate) type Shared = State<Arc<AppState>>;
/// What a handler answers: its success, or the contract's error body.
pub(crate) type ApiResult<T> = Result<T, ApiError>;

/// Store one memory.
#[utoipa::path(post, tag = "tools", path = "/tools/remember", request_body = RememberBody,
    responses((status = 201, body = RememberResponse), (status = 400, body = ErrorBody), (status = 413, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = ?body.agent_id))]
pub async fn remember(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<RememberBody>,
) -> ApiResult<(StatusCode, Json<RememberResponse>)> {
    let response = tools::remember(&state.runtime, &caller, body).await?;
    Ok((StatusCode::CREATED, Json(response)))
}

/// Store several memories atomically.
#[utoipa::path(post, tag = "tools", path = "/tools/remember_batch", request_body = RememberBatchBody,
    responses((status = 201, body = RememberBatchResponse), (status = 400, body = ErrorBody), (status = 413, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = ?body.agent_id))]
pub async fn remember_batch(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<RememberBatchBody>,
) -> ApiResult<(StatusCode, Json<RememberBatchResponse>)> {
    let response = tools::remember_batch(&state.runtime, &caller, body).await?;
    Ok((StatusCode::CREATED, Json(response)))
}

/// Mine one user/assistant exchange for memories worth keeping.
#[utoipa::path(post, tag = "tools", path = "/tools/extract_turn", request_body = ExtractTurnBody,
    responses((status = 200, body = ExtractTurnResponse), (status = 400, body = ErrorBody), (status = 413, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = ?body.agent_id))]
pub async fn extract_turn(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<ExtractTurnBody>,
) -> ApiResult<Json<ExtractTurnResponse>> {
    Ok(Json(
        tools::extract_turn(&state.runtime, &caller, body).await?,
    ))
}

/// Recall the memories that matter for a query.
#[utoipa::path(post, tag = "tools", path = "/tools/recall", request_body = RecallBody,
    responses((status = 200, body = RecallResponse), (status = 400, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = ?body.agent_id))]
pub async fn recall(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<RecallBody>,
) -> ApiResult<Json<RecallResponse>> {
    Ok(Json(tools::recall(&state.runtime, &caller, body).await?))
}

/// Assemble a ready-to-inject context block within a token budget.
#[utoipa::path(post, tag = "tools", path = "/tools/build_context", request_body = BuildContextBody,
    responses((status = 200, body = BuildContextResponse), (status = 400, body = ErrorBody),
        (status = 403, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = ?body.agent_id))]
pub async fn build_context(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<BuildContextBody>,
) -> ApiResult<Json<BuildContextResponse>> {
    Ok(Json(
        tools::build_context(&state.runtime, &caller, &state.project_roots, body).await?,
    ))
}

/// Link two memories.
#[utoipa::path(post, tag = "tools", path = "/tools/associate", request_body = AssociateBody,
    responses((status = 201, body = AssociationView), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = ?body.agent_id))]
pub async fn associate(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<AssociateBody>,
) -> ApiResult<(StatusCode, Json<AssociationView>)> {
    let edge = tools::associate(&state.runtime, &caller, body).await?;
    Ok((StatusCode::CREATED, Json(edge)))
}

/// Spread activation from a memory through its associations.
#[utoipa::path(post, tag = "tools", path = "/tools/spreading_activation", request_body = SpreadingActivationBody,
    responses((status = 200, body = SpreadingActivationResponse), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = ?body.agent_id))]
pub async fn spreading_activation(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<SpreadingActivationBody>,
) -> ApiResult<Json<SpreadingActivationResponse>> {
    Ok(Json(
        tools::spreading_activation(&state.runtime, &caller, body).await?,
    ))
}

/// Forget (archive) a memory or the memories matching a query.
#[utoipa::path(post, tag = "tools", path = "/tools/forget", request_body = ForgetBody,
    responses((status = 200, body = ForgetResponse), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = ?body.agent_id))]
pub async fn forget(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<ForgetBody>,
) -> ApiResult<Json<ForgetResponse>> {
    Ok(Json(tools::forget(&state.runtime, &caller, body).await?))
}

/// Run a consolidation pass for an agent now.
#[utoipa::path(post, tag = "tools", path = "/tools/consolidate", request_body = AgentBody,
    responses((status = 200, body = RunView), (status = 400, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = ?body.agent_id))]
pub async fn consolidate(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<AgentBody>,
) -> ApiResult<Json<RunView>> {
    Ok(Json(
        tools::consolidate(&state.runtime, &caller, body, "api").await?,
    ))
}

/// Archive idle sessions now (what the 03:00 job does): each session idle for
/// `archival.idle_hours` gets a summary tagged `archive_summary` and its working memory is cleared.
#[utoipa::path(post, tag = "admin", path = "/v1/admin/archive",
    responses((status = 200, body = RunView), (status = 503, body = ErrorBody)))]
#[tracing::instrument(skip_all)]
pub async fn archive(
    State(state): Shared,
    Authenticated(caller): Authenticated,
) -> ApiResult<Json<RunView>> {
    let run = memories::archive(&state.runtime, &caller, "api").await?;
    crate::contract::keys::audit(
        state.keys.as_ref(),
        &caller,
        "admin.archive",
        Some(run.id.clone()),
        serde_json::json!({ "trigger": run.trigger }),
        chrono::Utc::now(),
    )
    .await;
    Ok(Json(run))
}

/// Statistics of an agent's memories.
#[utoipa::path(post, tag = "tools", path = "/tools/reflect", request_body = AgentBody,
    responses((status = 200, body = ReflectResponse), (status = 400, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = ?body.agent_id))]
pub async fn reflect(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<AgentBody>,
) -> ApiResult<Json<ReflectResponse>> {
    Ok(Json(tools::reflect(&state.runtime, &caller, body).await?))
}

/// Version history of a memory.
#[utoipa::path(post, tag = "tools", path = "/tools/memory_history", request_body = HistoryBody,
    responses((status = 200, body = HistoryResponse), (status = 404, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(memory_id = %body.id))]
pub async fn memory_history(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<HistoryBody>,
) -> ApiResult<Json<HistoryResponse>> {
    Ok(Json(
        tools::memory_history(&state.runtime, &caller, body).await?,
    ))
}

/// Browse an agent's memories, newest first.
#[utoipa::path(get, tag = "memories", path = "/v1/memories", params(ListParams),
    responses((status = 200, body = ListResponse), (status = 400, body = ErrorBody)))]
pub async fn list_memories(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    ApiQuery(params): ApiQuery<ListParams>,
) -> ApiResult<Json<ListResponse>> {
    Ok(Json(
        memories::list_memories(&state.runtime, &caller, params).await?,
    ))
}

/// Mine a conversation (chat messages) for memories.
#[utoipa::path(post, tag = "memories", path = "/v1/memories", request_body = AddMemoriesBody,
    responses((status = 201, body = ExtractTurnResponse), (status = 400, body = ErrorBody)))]
pub async fn add_memories(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<AddMemoriesBody>,
) -> ApiResult<(StatusCode, Json<ExtractTurnResponse>)> {
    let response = memories::add_memories(&state.runtime, &caller, body).await?;
    Ok((StatusCode::CREATED, Json(response)))
}

/// Delete every memory of one agent.
#[utoipa::path(delete, tag = "memories", path = "/v1/memories", params(DeleteAllParams),
    responses((status = 200, body = DeleteAllResponse), (status = 400, body = ErrorBody)))]
pub async fn delete_all_memories(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    ApiQuery(params): ApiQuery<DeleteAllParams>,
) -> ApiResult<Json<DeleteAllResponse>> {
    Ok(Json(
        memories::delete_all_memories(&state.runtime, &caller, params).await?,
    ))
}

/// One memory.
#[utoipa::path(get, tag = "memories", path = "/v1/memories/{id}", params(("id" = String, Path), AgentParam),
    responses((status = 200, body = MemoryView), (status = 404, body = ErrorBody)))]
pub async fn get_memory(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    Path(id): Path<String>,
    ApiQuery(params): ApiQuery<AgentParam>,
) -> ApiResult<Json<MemoryView>> {
    Ok(Json(
        memories::get_memory(&state.runtime, &caller, id, params).await?,
    ))
}

/// Change a memory; the previous state is kept in its history.
#[utoipa::path(patch, tag = "memories", path = "/v1/memories/{id}", params(("id" = String, Path), AgentParam), request_body = PatchBody,
    responses((status = 200, body = MemoryView), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn patch_memory(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    Path(id): Path<String>,
    ApiQuery(params): ApiQuery<AgentParam>,
    ApiJson(body): ApiJson<PatchBody>,
) -> ApiResult<Json<MemoryView>> {
    Ok(Json(
        memories::patch_memory(&state.runtime, &caller, id, params, body).await?,
    ))
}

/// Delete a memory everywhere, history included.
#[utoipa::path(delete, tag = "memories", path = "/v1/memories/{id}", params(("id" = String, Path), AgentParam),
    responses((status = 200, body = DeleteResponse), (status = 404, body = ErrorBody)))]
pub async fn delete_memory(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    Path(id): Path<String>,
    ApiQuery(params): ApiQuery<AgentParam>,
) -> ApiResult<Json<DeleteResponse>> {
    Ok(Json(
        memories::delete_memory(&state.runtime, &caller, id, params).await?,
    ))
}

/// Version history of a memory.
#[utoipa::path(get, tag = "memories", path = "/v1/memories/{id}/history", params(("id" = String, Path), AgentParam),
    responses((status = 200, body = HistoryResponse), (status = 404, body = ErrorBody)))]
pub async fn memory_history_resource(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    Path(id): Path<String>,
    ApiQuery(params): ApiQuery<AgentParam>,
) -> ApiResult<Json<HistoryResponse>> {
    Ok(Json(
        memories::memory_history(&state.runtime, &caller, id, params).await?,
    ))
}

/// Consolidation run log.
#[utoipa::path(get, tag = "cognition", path = "/v1/cognition/runs", params(RunsParams),
    responses((status = 200, body = RunsResponse), (status = 400, body = ErrorBody)))]
pub async fn cognition_runs(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    ApiQuery(params): ApiQuery<RunsParams>,
) -> ApiResult<Json<RunsResponse>> {
    Ok(Json(
        memories::cognition_runs(&state.runtime, &caller, params).await?,
    ))
}

/// Make an actor fail (only with `server.fault_injection = true`; for supervision tests).
pub async fn inject_fault(
    State(state): Shared,
    Authenticated(caller): Authenticated,
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
            "unknown actor; use working, episodic, vectors, graph, namespaces, consolidator or cognition",
        )
    })?;
    caller.require(crate::auth::Scope::Admin)?;
    state.runtime.inject_fault(kind)?;
    crate::contract::keys::audit(
        state.keys.as_ref(),
        &caller,
        "admin.inject_fault",
        Some(child.clone()),
        serde_json::json!({}),
        chrono::Utc::now(),
    )
    .await;
    Ok((
        StatusCode::ACCEPTED,
        Json(serde_json::json!({ "injected": child })),
    ))
}

/// Liveness; per-backend and per-actor state for an admin (or with `auth.public_metrics`).
#[utoipa::path(get, tag = "service", path = "/health", responses((status = 200, body = HealthView)))]
pub async fn health(
    State(state): Shared,
    MaybeAuthenticated(caller): MaybeAuthenticated,
) -> Json<HealthView> {
    let detail = state.public_metrics
        || caller.is_some_and(|c| c.require(crate::auth::Scope::Admin).is_ok());
    Json(crate::contract::health::health(&state.runtime, state.started, detail).await)
}

/// Prometheus metrics (an admin key, unless `auth.public_metrics`).
#[utoipa::path(get, tag = "service", path = "/metrics", responses((status = 200, body = String, content_type = "text/plain"),
    (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub async fn metrics(
    State(state): Shared,
    MaybeAuthenticated(caller): MaybeAuthenticated,
) -> ApiResult<impl IntoResponse> {
    if !state.public_metrics {
        let caller = caller.ok_or_else(|| {
            crate::auth::unauthenticated(
                "/metrics needs an admin key: send Authorization: Bearer <key>",
            )
        })?;
        caller.require(crate::auth::Scope::Admin)?;
    }
    use crate::telemetry::ServerSample;
    let health = state.runtime.health().await;
    let mut samples = vec![ServerSample::gauge(
        "mnemos_mcp_sessions",
        vec![],
        state
            .mcp_sessions
            .load(std::sync::atomic::Ordering::Relaxed) as f64,
    )];
    if let Some(index) = &health.index {
        samples.push(ServerSample::gauge(
            "mnemos_vector_index_size",
            vec![],
            index.vectors as f64,
        ));
    }
    for child in &health.children {
        samples.push(ServerSample::gauge(
            "mnemos_actor_restarts",
            vec![("actor", child.child.as_str().to_string())],
            f64::from(child.restarts),
        ));
    }
    for projection in &health.projections {
        let label = || vec![("projection", projection.name.clone())];
        samples.extend([
            ServerSample::gauge(
                "mnemos_projection_lag_entries",
                label(),
                projection.lag_entries as f64,
            ),
            ServerSample::gauge(
                "mnemos_projection_lag_seconds",
                label(),
                projection.lag_seconds,
            ),
            ServerSample::gauge(
                "mnemos_projection_failures",
                label(),
                f64::from(projection.failures),
            ),
            ServerSample::gauge(
                "mnemos_projection_reads_served",
                label(),
                projection.reads_served as f64,
            ),
            ServerSample::gauge(
                "mnemos_projection_reads_fallback",
                label(),
                projection.reads_fallback as f64,
            ),
        ]);
    }
    if let Some(naming) = &state.naming {
        let progress = naming.progress();
        samples.push(ServerSample::gauge(
            "mnemos_entity_naming_queued",
            vec![],
            progress.waiting as f64,
        ));
        for (outcome, calls) in crate::store::model_entities::OUTCOMES
            .iter()
            .zip(progress.outcomes)
        {
            samples.push(ServerSample::counter(
                "mnemos_entity_naming_total",
                vec![("outcome", (*outcome).to_string())],
                calls as f64,
            ));
        }
    }
    let mut text = state.metrics.render();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&crate::telemetry::render_server_samples(&samples));
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text))
}

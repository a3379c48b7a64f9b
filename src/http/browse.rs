//! REST handlers of what a browser of the memory reads (`crate::contract::browse`):
//! `GET /v1/agents`, `POST /v1/memories/bulk`, a memory's associations, graph
//! neighbourhood and retention curve, `GET /v1/sessions` and `GET /v1/namespaces`.

use axum::extract::State;
use axum::Json;

use super::handlers::{ApiResult, Shared};
use super::identity::Authenticated;
use super::ApiPath as Path;
use super::{ApiJson, ApiQuery};
use crate::contract::browse::{
    self, AgentsResponse, AssociationsResponse, BulkBody, BulkResponse, GraphParams, GraphResponse,
    NamespacesResponse, RetentionParams, RetentionResponse, SessionsParams, SessionsResponse,
};
use crate::contract::errors::ErrorBody;
use crate::contract::wire::{AgentParam, NoQuery};

/// The agents with memories the key may see, with their counts.
#[utoipa::path(get, tag = "memories", path = "/v1/agents",
    responses((status = 200, body = AgentsResponse), (status = 401, body = ErrorBody)))]
pub async fn agents(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    ApiQuery(_no_parameters): ApiQuery<NoQuery>,
) -> ApiResult<Json<AgentsResponse>> {
    Ok(Json(browse::agents(&state.runtime, &caller).await?))
}

/// Forget or restore many memories of one agent at once.
#[utoipa::path(post, tag = "memories", path = "/v1/memories/bulk", request_body = BulkBody,
    responses((status = 200, body = BulkResponse), (status = 400, body = ErrorBody)))]
pub async fn bulk(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<BulkBody>,
) -> ApiResult<Json<BulkResponse>> {
    Ok(Json(browse::bulk(&state.runtime, &caller, body).await?))
}

/// A memory's associations, each with the memory at its other end.
#[utoipa::path(get, tag = "memories", path = "/v1/memories/{id}/associations", params(("id" = String, Path), AgentParam),
    responses((status = 200, body = AssociationsResponse), (status = 404, body = ErrorBody)))]
pub async fn associations(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    Path(id): Path<String>,
    ApiQuery(params): ApiQuery<AgentParam>,
) -> ApiResult<Json<AssociationsResponse>> {
    Ok(Json(
        browse::associations(&state.runtime, &caller, id, params).await?,
    ))
}

/// A memory's neighbourhood in the association graph.
#[utoipa::path(get, tag = "memories", path = "/v1/memories/{id}/graph", params(("id" = String, Path), GraphParams),
    responses((status = 200, body = GraphResponse), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn graph(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    Path(id): Path<String>,
    ApiQuery(params): ApiQuery<GraphParams>,
) -> ApiResult<Json<GraphResponse>> {
    Ok(Json(
        browse::graph(&state.runtime, &caller, id, params).await?,
    ))
}

/// A memory's retention curve.
#[utoipa::path(get, tag = "memories", path = "/v1/memories/{id}/retention", params(("id" = String, Path), RetentionParams),
    responses((status = 200, body = RetentionResponse), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn retention(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    Path(id): Path<String>,
    ApiQuery(params): ApiQuery<RetentionParams>,
) -> ApiResult<Json<RetentionResponse>> {
    Ok(Json(
        browse::retention(&state.runtime, &caller, id, params).await?,
    ))
}

/// An agent's sessions, the most recently spoken first.
#[utoipa::path(get, tag = "sessions", path = "/v1/sessions", params(SessionsParams),
    responses((status = 200, body = SessionsResponse), (status = 400, body = ErrorBody)))]
pub async fn sessions(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    ApiQuery(params): ApiQuery<SessionsParams>,
) -> ApiResult<Json<SessionsResponse>> {
    Ok(Json(
        browse::sessions(&state.runtime, &caller, params).await?,
    ))
}

/// The tenant's KV namespaces with their counters.
#[utoipa::path(get, tag = "namespaces", path = "/v1/namespaces",
    responses((status = 200, body = NamespacesResponse), (status = 401, body = ErrorBody)))]
pub async fn namespaces(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    ApiQuery(_no_parameters): ApiQuery<NoQuery>,
) -> ApiResult<Json<NamespacesResponse>> {
    Ok(Json(browse::namespaces(&state.runtime, &caller).await?))
}

//! REST handlers of entities (`crate::contract::entities`).

use axum::extract::State;
use axum::Json;

use super::handlers::{ApiResult, Shared};
use super::identity::Authenticated;
use super::ApiPath as Path;
use super::ApiQuery;
use crate::contract::entities::{
    self, EntitiesParams, EntitiesResponse, EntityDetailResponse, EntityParams, FactsParams,
    FactsResponse, MergeBody, MergeResponse, SplitBody,
};
use crate::contract::errors::ErrorBody;
use crate::http::ApiJson;

/// An agent's entities (who and what its memories name), searched and paged.
#[utoipa::path(get, tag = "entities", path = "/v1/entities", params(EntitiesParams),
    responses((status = 200, body = EntitiesResponse), (status = 400, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn list_entities(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    ApiQuery(params): ApiQuery<EntitiesParams>,
) -> ApiResult<Json<EntitiesResponse>> {
    Ok(Json(
        entities::entities(&state.runtime, &caller, params).await?,
    ))
}

/// One entity: the memories naming it (newest first), the entities named beside it,
/// what is said of it over time and the facts pointing at it.
#[utoipa::path(get, tag = "entities", path = "/v1/entities/{id}", params(("id" = String, Path), EntityParams),
    responses((status = 200, body = EntityDetailResponse), (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn get_entity(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    Path(id): Path<String>,
    ApiQuery(params): ApiQuery<EntityParams>,
) -> ApiResult<Json<EntityDetailResponse>> {
    Ok(Json(
        entities::entity(&state.runtime, &caller, id, params).await?,
    ))
}

/// Facts with validity windows ("Alice lives_in Lisbon from … to …"), about a subject
/// or attribute, as of a time or period.
#[utoipa::path(get, tag = "entities", path = "/v1/facts", params(FactsParams),
    responses((status = 200, body = FactsResponse), (status = 400, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn list_facts(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    ApiQuery(params): ApiQuery<FactsParams>,
) -> ApiResult<Json<FactsResponse>> {
    Ok(Json(
        entities::facts(&state.runtime, &caller, params).await?,
    ))
}

/// Merge this entity into another (`into`): its name becomes an alias of the other and
/// what named it names the other; recorded in the merge history, split to undo.
#[utoipa::path(post, tag = "entities", path = "/v1/entities/{id}/merge", params(("id" = String, Path)),
    request_body = MergeBody,
    responses((status = 200, body = MergeResponse), (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn merge_entity(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<MergeBody>,
) -> ApiResult<Json<MergeResponse>> {
    Ok(Json(
        entities::merge(&state.runtime, &caller, id, body).await?,
    ))
}

/// Split an alias off this entity (undo its merge): what names the alias names its own
/// entity again; the merge stays in the history, undone.
#[utoipa::path(post, tag = "entities", path = "/v1/entities/{id}/split", params(("id" = String, Path)),
    request_body = SplitBody,
    responses((status = 200, body = MergeResponse), (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn split_entity(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<SplitBody>,
) -> ApiResult<Json<MergeResponse>> {
    Ok(Json(
        entities::split(&state.runtime, &caller, id, body).await?,
    ))
}

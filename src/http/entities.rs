//! REST handlers of entities (`crate::contract::entities`).

use axum::extract::State;
use axum::Json;

use super::handlers::{ApiResult, Shared};
use super::identity::Authenticated;
use super::ApiPath as Path;
use super::ApiQuery;
use crate::contract::entities::{
    self, EntitiesParams, EntitiesResponse, EntityDetailResponse, EntityParams,
};
use crate::contract::errors::ErrorBody;

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

/// One entity: the memories naming it (newest first) and the entities named beside it.
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

//! REST handlers of the session routes: `POST`/`GET /v1/sessions/{id}/messages` and
//! `POST /v1/sessions/{id}/compact`, over `crate::contract::sessions`.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;

use super::handlers::{ApiResult, Shared};
use super::identity::Authenticated;
use super::ApiPath as Path;
use super::{ApiJson, ApiQuery};
use crate::contract::errors::ErrorBody;
use crate::contract::sessions::{
    self, CompactBody, CompactResponse, PostMessagesBody, PostMessagesResponse, SessionParams,
    SessionResponse,
};

/// Add messages to a session (creating it); compaction and extraction follow in the background.
#[utoipa::path(post, tag = "sessions", path = "/v1/sessions/{id}/messages", params(("id" = String, Path)), request_body = PostMessagesBody,
    responses((status = 201, body = PostMessagesResponse), (status = 400, body = ErrorBody), (status = 413, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = ?body.agent_id, session_id = %id))]
pub async fn post_messages(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<PostMessagesBody>,
) -> ApiResult<(StatusCode, Json<PostMessagesResponse>)> {
    let posted = sessions::post_messages(&state.runtime, &caller, &id, body).await?;
    Ok((StatusCode::CREATED, Json(posted)))
}

/// A session's live window: the summary of its compacted part and its newest messages.
#[utoipa::path(get, tag = "sessions", path = "/v1/sessions/{id}/messages", params(("id" = String, Path), SessionParams),
    responses((status = 200, body = SessionResponse), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn get_messages(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    Path(id): Path<String>,
    ApiQuery(params): ApiQuery<SessionParams>,
) -> ApiResult<Json<SessionResponse>> {
    Ok(Json(
        sessions::session_window(&state.runtime, &caller, &id, params).await?,
    ))
}

/// Compact a session now: a summary replaces its window and the history becomes an episodic memory.
#[utoipa::path(post, tag = "sessions", path = "/v1/sessions/{id}/compact", params(("id" = String, Path)), request_body = CompactBody,
    responses((status = 200, body = CompactResponse), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = ?body.agent_id, session_id = %id))]
pub async fn compact(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<CompactBody>,
) -> ApiResult<Json<CompactResponse>> {
    Ok(Json(
        sessions::compact(&state.runtime, &caller, &id, body).await?,
    ))
}

//! REST handlers of `/v1/projects/...`: they move path parameters into the bodies of
//! `crate::contract::projects` and answer with its result.

use axum::Json;

use super::handlers::{ApiResult, Shared};
use super::identity::Authenticated;
use super::ApiPath as Path;
use super::{ApiJson, ApiQuery};
use crate::contract::errors::ErrorBody;
use crate::contract::projects::{
    self, AttachSessionBody, ProjectListBody, ProjectOwnerParam, ProjectPutRestBody, ProjectView,
    ProjectsResponse,
};
use axum::extract::State;

/// Create a project or change its name or isolation.
#[utoipa::path(put, tag = "projects", path = "/v1/projects/{project_id}", params(("project_id" = String, Path)),
    request_body = ProjectPutRestBody,
    responses((status = 200, body = ProjectView), (status = 400, body = ErrorBody)))]
pub async fn put_project(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    Path(project_id): Path<String>,
    ApiJson(body): ApiJson<ProjectPutRestBody>,
) -> ApiResult<Json<ProjectView>> {
    let body = body.into_tool_body(project_id);
    Ok(Json(
        projects::project_put(&state.runtime, &caller, body).await?,
    ))
}

/// An agent's projects.
#[utoipa::path(get, tag = "projects", path = "/v1/projects", params(ProjectOwnerParam),
    responses((status = 200, body = ProjectsResponse), (status = 400, body = ErrorBody)))]
pub async fn list_projects(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    ApiQuery(params): ApiQuery<ProjectOwnerParam>,
) -> ApiResult<Json<ProjectsResponse>> {
    let body = ProjectListBody {
        agent_id: params.agent_id,
    };
    Ok(Json(
        projects::project_list(&state.runtime, &caller, body).await?,
    ))
}

/// One project with its sessions.
#[utoipa::path(get, tag = "projects", path = "/v1/projects/{project_id}", params(("project_id" = String, Path), ProjectOwnerParam),
    responses((status = 200, body = ProjectView), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn get_project(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    Path(project_id): Path<String>,
    ApiQuery(params): ApiQuery<ProjectOwnerParam>,
) -> ApiResult<Json<ProjectView>> {
    Ok(Json(
        projects::project_get(&state.runtime, &caller, &project_id, params).await?,
    ))
}

/// Attach a session to a project: its memories from now on belong to the project.
#[utoipa::path(put, tag = "projects", path = "/v1/projects/{project_id}/sessions/{session_id}",
    params(("project_id" = String, Path), ("session_id" = String, Path)), request_body = AttachSessionBody,
    responses((status = 200, body = ProjectView), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn attach_session(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    Path((project_id, session_id)): Path<(String, String)>,
    ApiJson(body): ApiJson<AttachSessionBody>,
) -> ApiResult<Json<ProjectView>> {
    let runtime = &state.runtime;
    Ok(Json(
        projects::project_attach_session(runtime, &caller, &project_id, &session_id, body).await?,
    ))
}

//! REST handlers of the admin resources `/v1/admin/keys` and `/v1/admin/audit`: they
//! call `crate::contract::keys` with the caller and the key store.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use chrono::Utc;

use super::handlers::{ApiResult, Shared};
use super::identity::Authenticated;
use super::ApiPath as Path;
use super::{ApiJson, ApiQuery};
use crate::contract::errors::ErrorBody;
use crate::contract::keys::{
    self, AdminListParams, AuditResponse, CreateKeyBody, CreatedKeyResponse, KeysResponse,
    RevokedKeyResponse,
};

/// Create an API key (admin); the answer holds its secret, shown this once.
#[utoipa::path(post, tag = "admin", path = "/v1/admin/keys", request_body = CreateKeyBody,
    responses((status = 201, body = CreatedKeyResponse), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub async fn create_key(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    ApiJson(body): ApiJson<CreateKeyBody>,
) -> ApiResult<(StatusCode, Json<CreatedKeyResponse>)> {
    let created = keys::create_key(state.keys.as_ref(), &caller, body, Utc::now()).await?;
    Ok((StatusCode::CREATED, Json(created)))
}

/// The API keys of the tenants the caller administers, newest first (never a secret).
#[utoipa::path(get, tag = "admin", path = "/v1/admin/keys", params(AdminListParams),
    responses((status = 200, body = KeysResponse), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub async fn list_keys(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    ApiQuery(params): ApiQuery<AdminListParams>,
) -> ApiResult<Json<KeysResponse>> {
    Ok(Json(
        keys::list_keys(state.keys.as_ref(), &caller, params, Utc::now()).await?,
    ))
}

/// Revoke an API key: it stops working at once.
#[utoipa::path(delete, tag = "admin", path = "/v1/admin/keys/{id}", params(("id" = String, Path)),
    responses((status = 200, body = RevokedKeyResponse), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn revoke_key(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    Path(id): Path<String>,
) -> ApiResult<Json<RevokedKeyResponse>> {
    let revoked = keys::revoke_key(state.keys.as_ref(), &caller, &id, Utc::now()).await?;
    if let Some(authenticator) = &state.authenticator {
        authenticator.forget(&id);
    }
    Ok(Json(revoked))
}

/// The audit log: key changes, erasures, admin actions and authorization failures.
#[utoipa::path(get, tag = "admin", path = "/v1/admin/audit", params(AdminListParams),
    responses((status = 200, body = AuditResponse), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub async fn audit_log(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    ApiQuery(params): ApiQuery<AdminListParams>,
) -> ApiResult<Json<AuditResponse>> {
    Ok(Json(
        keys::audit_log(state.keys.as_ref(), &caller, params).await?,
    ))
}

/// Erase an agent: every memory, version, edge, session, working window, project, run
/// and KV entry it owns, from every store (admin; the report says what each removed).
#[utoipa::path(delete, tag = "admin", path = "/v1/agents/{agent}", params(("agent" = String, Path)),
    responses((status = 200, body = crate::contract::erase::EraseResponse), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub async fn erase_agent(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    Path(agent): Path<String>,
) -> ApiResult<Json<crate::contract::erase::EraseResponse>> {
    Ok(Json(
        crate::contract::erase::erase_agent(&state.runtime, state.keys.as_ref(), &caller, &agent)
            .await?,
    ))
}

/// Erase a tenant: every agent of it, and revoke its keys (the server's admin only).
#[utoipa::path(delete, tag = "admin", path = "/v1/tenants/{tenant}", params(("tenant" = String, Path)),
    responses((status = 200, body = crate::contract::erase::TenantEraseResponse), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn erase_tenant(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    Path(tenant): Path<String>,
) -> ApiResult<Json<crate::contract::erase::TenantEraseResponse>> {
    let erased =
        crate::contract::erase::erase_tenant(&state.runtime, state.keys.as_ref(), &caller, &tenant)
            .await?;
    if let Some(authenticator) = &state.authenticator {
        authenticator.forget_all();
    }
    Ok(Json(erased))
}

/// Start re-embedding every memory with the configured embedding model, in the
/// background (the server's admin): the stored model serves until the switch.
#[utoipa::path(post, tag = "admin", path = "/v1/admin/reembed",
    responses((status = 202, body = crate::contract::embedding::ReembedView), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn start_reembed(
    State(state): Shared,
    Authenticated(caller): Authenticated,
) -> ApiResult<(StatusCode, Json<crate::contract::embedding::ReembedView>)> {
    let view = crate::contract::embedding::start(
        &state.runtime,
        &caller,
        state.pending_embedder.as_ref(),
        state.vector_projection,
    )
    .await?;
    Ok((StatusCode::ACCEPTED, Json(view)))
}

/// The progress of the current or last re-embedding (admins).
#[utoipa::path(get, tag = "admin", path = "/v1/admin/reembed",
    responses((status = 200, body = crate::contract::embedding::ReembedView),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub async fn reembed_status(
    State(state): Shared,
    Authenticated(caller): Authenticated,
) -> ApiResult<Json<crate::contract::embedding::ReembedView>> {
    Ok(Json(
        crate::contract::embedding::status(
            &state.runtime,
            &caller,
            state.pending_embedder.as_ref(),
        )
        .await?,
    ))
}

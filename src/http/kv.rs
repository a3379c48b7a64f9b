//! REST handlers of `/v1/namespaces/...` (KV namespaces): they move path parameters into
//! the bodies of `crate::contract::kv` and answer with its result.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;

use super::handlers::{ApiResult, Shared};
use super::identity::Authenticated;
use super::ApiPath as Path;
use super::{ApiJson, ApiQuery};
use crate::contract::errors::ErrorBody;
use crate::contract::kv::{
    self, KvDeleteResponse, KvEntryView, KvKeyBody, KvListParams, KvListResponse, KvPutResponse,
    KvPutRestBody, KvSearchResponse, KvSearchRestBody, KvStatsBody, NamespaceConfigureBody,
    NamespaceConfigureResponse, NamespaceStatsView,
};
use crate::contract::wire::NoQuery;

/// Create a KV namespace with a bound, or change its bound.
#[utoipa::path(put, tag = "namespaces", path = "/v1/namespaces/{namespace}", params(("namespace" = String, Path)),
    request_body = NamespaceConfigureBody,
    responses((status = 200, body = NamespaceConfigureResponse), (status = 400, body = ErrorBody)))]
pub async fn configure_namespace(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    Path(namespace): Path<String>,
    ApiJson(body): ApiJson<NamespaceConfigureBody>,
) -> ApiResult<Json<NamespaceConfigureResponse>> {
    Ok(Json(
        kv::kv_configure(&state.runtime, &caller, &namespace, body).await?,
    ))
}

/// Counters of a namespace.
#[utoipa::path(get, tag = "namespaces", path = "/v1/namespaces/{namespace}/stats", params(("namespace" = String, Path)),
    responses((status = 200, body = NamespaceStatsView), (status = 404, body = ErrorBody)))]
pub async fn namespace_stats(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    Path(namespace): Path<String>,
    ApiQuery(_no_parameters): ApiQuery<NoQuery>,
) -> ApiResult<Json<NamespaceStatsView>> {
    let body = KvStatsBody::of_path(namespace);
    Ok(Json(kv::kv_stats(&state.runtime, &caller, body).await?))
}

/// Write an entry (201 when the key is new, 200 when it replaced a value).
#[utoipa::path(put, tag = "namespaces", path = "/v1/namespaces/{namespace}/entries/{key}",
    params(("namespace" = String, Path), ("key" = String, Path)), request_body = KvPutRestBody,
    responses((status = 201, body = KvPutResponse), (status = 200, body = KvPutResponse), (status = 400, body = ErrorBody), (status = 413, body = ErrorBody)))]
pub async fn put_entry(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    Path((namespace, key)): Path<(String, String)>,
    ApiJson(body): ApiJson<KvPutRestBody>,
) -> ApiResult<(StatusCode, Json<KvPutResponse>)> {
    let body = body.into_tool_body(namespace, key);
    let response = kv::kv_put(&state.runtime, &caller, body).await?;
    let status = if response.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(response)))
}

/// Read an entry (it becomes the most recently used).
#[utoipa::path(get, tag = "namespaces", path = "/v1/namespaces/{namespace}/entries/{key}",
    params(("namespace" = String, Path), ("key" = String, Path)),
    responses((status = 200, body = KvEntryView), (status = 404, body = ErrorBody)))]
pub async fn get_entry(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    Path((namespace, key)): Path<(String, String)>,
    ApiQuery(_no_parameters): ApiQuery<NoQuery>,
) -> ApiResult<Json<KvEntryView>> {
    let body = KvKeyBody::of_path(namespace, key);
    Ok(Json(kv::kv_get(&state.runtime, &caller, body).await?))
}

/// Remove an entry.
#[utoipa::path(delete, tag = "namespaces", path = "/v1/namespaces/{namespace}/entries/{key}",
    params(("namespace" = String, Path), ("key" = String, Path)),
    responses((status = 200, body = KvDeleteResponse), (status = 404, body = ErrorBody)))]
pub async fn delete_entry(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    Path((namespace, key)): Path<(String, String)>,
    ApiQuery(_no_parameters): ApiQuery<NoQuery>,
) -> ApiResult<Json<KvDeleteResponse>> {
    let body = KvKeyBody::of_path(namespace, key);
    Ok(Json(kv::kv_delete(&state.runtime, &caller, body).await?))
}

/// Entries (optionally with a tag), most recently used first.
#[utoipa::path(get, tag = "namespaces", path = "/v1/namespaces/{namespace}/entries",
    params(("namespace" = String, Path), KvListParams),
    responses((status = 200, body = KvListResponse), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn list_entries(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    Path(namespace): Path<String>,
    ApiQuery(params): ApiQuery<KvListParams>,
) -> ApiResult<Json<KvListResponse>> {
    let body = params.into_tool_body(namespace);
    Ok(Json(
        kv::kv_list_by_tag(&state.runtime, &caller, body).await?,
    ))
}

/// Ranked text search over a namespace's keys, tags and values.
#[utoipa::path(post, tag = "namespaces", path = "/v1/namespaces/{namespace}/search", params(("namespace" = String, Path)),
    request_body = KvSearchRestBody,
    responses((status = 200, body = KvSearchResponse), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn search_entries(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    Path(namespace): Path<String>,
    ApiJson(body): ApiJson<KvSearchRestBody>,
) -> ApiResult<Json<KvSearchResponse>> {
    let body = body.into_tool_body(namespace);
    Ok(Json(kv::kv_search(&state.runtime, &caller, body).await?))
}

//! The REST surface (axum): the routes of the contract, the JSON and query extractors
//! that answer every malformed request with a typed error, and the OpenAPI document.
//! Handlers only move path parameters and extracted bodies into `crate::contract` calls;
//! the full router (with `/mcp`, the proxy and `/metrics`) is composed in `crate::router`.

pub mod admin;
pub mod browse;
pub mod entities;
pub mod guard;
pub mod handlers;
pub mod identity;
pub mod kv;
pub mod openapi;
pub mod projects;
pub mod sessions;
pub mod transfer;

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::routing::{get, post, put};
use axum::Router;
use mnemos_actors::error::MemoryError;
use serde::de::DeserializeOwned;

use crate::contract::errors::ApiError;
use crate::contract::parse::{from_json_slice, from_query};
use crate::state::AppState;

/// JSON body extractor that maps every failure to the contract's error body, naming the
/// field at fault. It does not look at the content type: the router's intake
/// (`guard::intake`) has already refused any body that is not JSON (415) and read it
/// whole within the size and time limits.
pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(|rejection| {
                if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    ApiError(MemoryError::too_large(
                        "body",
                        "request body is larger than server.max_body_bytes",
                    ))
                } else {
                    ApiError(MemoryError::invalid(
                        "body",
                        format!("could not read the request body: {}", rejection.body_text()),
                    ))
                }
            })?;
        if bytes.is_empty() {
            return Err(ApiError(MemoryError::invalid(
                "body",
                "the request needs a JSON object body",
            )));
        }
        from_json_slice(&bytes).map(ApiJson).map_err(ApiError)
    }
}

/// Query-string extractor with the contract's error body.
pub struct ApiQuery<T>(pub T);

impl<S, T> FromRequestParts<S> for ApiQuery<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        from_query(parts.uri.query().unwrap_or(""))
            .map(ApiQuery)
            .map_err(ApiError)
    }
}

/// Path-parameter extractor with the contract's error body: a parameter that is not
/// valid UTF-8 (`/v1/memories/%FF`) is `invalid_argument` naming it, not axum's
/// plain-text 400.
pub struct ApiPath<T>(pub T);

impl<S, T> FromRequestParts<S> for ApiPath<T>
where
    S: Send + Sync,
    T: DeserializeOwned + Send,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        use axum::extract::path::ErrorKind;
        use axum::extract::rejection::PathRejection;
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(value)) => Ok(ApiPath(value)),
            Err(PathRejection::FailedToDeserializePathParams(error)) => {
                let field = match error.kind() {
                    ErrorKind::InvalidUtf8InPathParam { key }
                    | ErrorKind::ParseErrorAtKey { key, .. }
                    | ErrorKind::DeserializeError { key, .. } => key.clone(),
                    _ => "path".to_string(),
                };
                Err(ApiError(MemoryError::invalid(
                    field,
                    format!("bad path parameter: {}", error.body_text()),
                )))
            }
            Err(other) => Err(ApiError(MemoryError::invalid(
                "path",
                format!("bad path: {}", other.body_text()),
            ))),
        }
    }
}

/// The REST routes of the contract (tools, resources, sessions, projects, KV, admin,
/// `/health`), over the shared [`AppState`].
pub fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/tools/remember", post(handlers::remember))
        .route("/tools/remember_batch", post(handlers::remember_batch))
        .route("/tools/recall", post(handlers::recall))
        .route("/tools/associate", post(handlers::associate))
        .route(
            "/tools/spreading_activation",
            post(handlers::spreading_activation),
        )
        .route("/tools/forget", post(handlers::forget))
        .route("/tools/consolidate", post(handlers::consolidate))
        .route("/tools/reflect", post(handlers::reflect))
        .route("/tools/memory_history", post(handlers::memory_history))
        .route("/tools/build_context", post(handlers::build_context))
        .route("/tools/extract_turn", post(handlers::extract_turn))
        .route(
            "/v1/memories",
            get(handlers::list_memories)
                .post(handlers::add_memories)
                .delete(handlers::delete_all_memories),
        )
        .route("/v1/agents", get(browse::agents))
        .route("/v1/memories/bulk", post(browse::bulk))
        .route("/v1/memories/{id}/associations", get(browse::associations))
        .route("/v1/memories/{id}/graph", get(browse::graph))
        .route("/v1/memories/{id}/retention", get(browse::retention))
        .route("/v1/sessions", get(browse::sessions))
        .route("/v1/namespaces", get(browse::namespaces))
        .route("/v1/entities", get(entities::list_entities))
        .route("/v1/entities/{id}", get(entities::get_entity))
        .route("/v1/entities/{id}/merge", post(entities::merge_entity))
        .route("/v1/entities/{id}/split", post(entities::split_entity))
        .route("/v1/facts", get(entities::list_facts))
        .route(
            "/v1/memories/{id}",
            get(handlers::get_memory)
                .patch(handlers::patch_memory)
                .delete(handlers::delete_memory),
        )
        .route(
            "/v1/memories/{id}/history",
            get(handlers::memory_history_resource),
        )
        .route("/v1/cognition/runs", get(handlers::cognition_runs))
        .route("/v1/projects", get(projects::list_projects))
        .route(
            "/v1/projects/{project_id}",
            get(projects::get_project).put(projects::put_project),
        )
        .route(
            "/v1/projects/{project_id}/sessions/{session_id}",
            put(projects::attach_session),
        )
        .route("/v1/namespaces/{namespace}", put(kv::configure_namespace))
        .route("/v1/namespaces/{namespace}/stats", get(kv::namespace_stats))
        .route("/v1/namespaces/{namespace}/entries", get(kv::list_entries))
        .route(
            "/v1/namespaces/{namespace}/entries/{key}",
            get(kv::get_entry)
                .put(kv::put_entry)
                .delete(kv::delete_entry),
        )
        .route(
            "/v1/namespaces/{namespace}/search",
            post(kv::search_entries),
        )
        .route(
            "/v1/sessions/{id}/messages",
            post(sessions::post_messages).get(sessions::get_messages),
        )
        .route("/v1/sessions/{id}/compact", post(sessions::compact))
        .route("/v1/export", get(transfer::export))
        .route("/v1/import", post(transfer::import))
        .route("/v1/admin/archive", post(handlers::archive))
        .route(
            "/v1/admin/keys",
            get(admin::list_keys).post(admin::create_key),
        )
        .route(
            "/v1/admin/keys/{id}",
            axum::routing::delete(admin::revoke_key),
        )
        .route("/v1/admin/audit", get(admin::audit_log))
        .route(
            "/v1/admin/reembed",
            get(admin::reembed_status).post(admin::start_reembed),
        )
        .route(
            "/v1/agents/{agent}",
            axum::routing::delete(admin::erase_agent),
        )
        .route(
            "/v1/tenants/{tenant}",
            axum::routing::delete(admin::erase_tenant),
        )
        .route(
            "/v1/admin/actors/{child}/fail",
            post(handlers::inject_fault),
        )
        .route("/health", get(handlers::health))
}

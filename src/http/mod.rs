//! The REST surface (axum): routes of the fixed contract, JSON extraction that answers
//! every malformed request with a typed error, request metrics, and `/openapi.json`.

pub mod error;
pub mod handlers;
pub mod namespaces;
pub mod sessions;
pub mod tools;
pub mod wire;

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, MatchedPath, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::Router;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use mnemos_actors::error::{ErrorCode, MemoryError};
use mnemos_actors::Runtime;
use serde::de::DeserializeOwned;
use utoipa::OpenApi;

use self::error::ApiError;

/// State shared by every handler.
#[derive(Clone)]
pub struct AppState {
    /// The runtime handle.
    pub runtime: Runtime,
    /// Whether the fault-injection route is enabled.
    pub fault_injection: bool,
    /// Prometheus renderer.
    pub metrics: PrometheusHandle,
    /// Process start, for uptime.
    pub started: Instant,
    /// `Host` names the `/mcp` endpoint accepts (`server.mcp_allowed_hosts`).
    pub mcp_allowed_hosts: Vec<String>,
    /// Cancelled at shutdown so open MCP sessions and streams end and the drain can finish.
    pub shutdown: tokio_util::sync::CancellationToken,
    /// The OpenAI-compatible memory proxy (`/v1/chat/completions`).
    pub proxy: crate::proxy::Proxy,
    /// Directories build_context's `project_root` may name (`server.project_roots`).
    pub project_roots: crate::context::ProjectRoots,
}

/// The process-wide Prometheus recorder (a recorder can be installed once per process).
pub fn metrics_handle() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets(&[
                    0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                    10.0,
                ])
                .expect("static buckets are valid")
                .build_recorder();
            let handle = recorder.handle();
            // Another recorder may already be installed (e.g. by an embedding program); then we render an empty one.
            let _ = metrics::set_global_recorder(recorder);
            handle
        })
        .clone()
}

/// JSON body extractor that accepts any content type and maps every failure to the
/// contract's error body, naming the field at fault.
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
        let deserializer = &mut serde_json::Deserializer::from_slice(&bytes);
        serde_path_to_error::deserialize(deserializer)
            .map(ApiJson)
            .map_err(|error| ApiError(json_error(error)))
    }
}

/// Parse an already-decoded JSON value (an MCP tool's arguments) into a wire request with
/// exactly the rules of [`ApiJson`]: unknown fields, missing fields and wrong types are
/// `invalid_argument` naming the field.
pub fn from_json_value<T: DeserializeOwned>(value: serde_json::Value) -> Result<T, MemoryError> {
    serde_path_to_error::deserialize(value).map_err(json_error)
}

/// The contract's error for a body that did not deserialize, naming the field at fault.
fn json_error(error: serde_path_to_error::Error<serde_json::Error>) -> MemoryError {
    let path = error.path().to_string();
    let inner = error.into_inner();
    let message = inner.to_string();
    let field = if path == "." || path == "?" || path.is_empty() {
        // serde names missing/unknown fields in the message: lift the name out.
        message.split('`').nth(1).unwrap_or("body").to_string()
    } else {
        path
    };
    let (field, message) = match inner.classify() {
        serde_json::error::Category::Syntax | serde_json::error::Category::Eof => (
            "body".to_string(),
            format!("the body is not valid JSON: {message}"),
        ),
        serde_json::error::Category::Io | serde_json::error::Category::Data => {
            (field.clone(), format!("{field}: {message}"))
        }
    };
    MemoryError::invalid(field, message)
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
        let query = parts.uri.query().unwrap_or("");
        serde_urlencoded::from_str(query)
            .map(ApiQuery)
            .map_err(|error| {
                let message = error.to_string();
                let field = message.split('`').nth(1).unwrap_or("query").to_string();
                ApiError(MemoryError::invalid(
                    field,
                    format!("bad query string: {message}"),
                ))
            })
    }
}

async fn record_metrics(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "unmatched".to_string());
    let method = request.method().to_string();
    let response = next.run(request).await;
    let status = response.status().as_u16().to_string();
    metrics::counter!("mnemos_http_requests_total", "route" => route.clone(), "method" => method.clone(), "status" => status)
        .increment(1);
    metrics::histogram!("mnemos_http_request_duration_seconds", "route" => route, "method" => method)
        .record(started.elapsed().as_secs_f64());
    response
}

async fn not_found_route() -> ApiError {
    ApiError(MemoryError::not_found(
        "no such route; see /openapi.json for the routes this server has",
    ))
}

async fn method_not_allowed() -> Response {
    let mut response = ApiError(MemoryError::invalid(
        "method",
        "this route does not accept that HTTP method",
    ))
    .into_response();
    *response.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
    response
}

fn panic_response(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    ApiError(MemoryError::new(
        ErrorCode::Internal,
        "the server hit a bug handling this request; it has been logged",
    ))
    .into_response()
}

/// The OpenAPI document, generated from the handlers and wire types.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "mnemos",
        description = "Cognitive memory runtime for AI agents"
    ),
    paths(
        handlers::remember,
        handlers::remember_batch,
        handlers::recall,
        handlers::associate,
        handlers::spreading_activation,
        handlers::forget,
        handlers::consolidate,
        handlers::archive,
        handlers::reflect,
        handlers::memory_history,
        handlers::build_context,
        handlers::extract_turn,
        handlers::list_memories,
        handlers::get_memory,
        handlers::patch_memory,
        handlers::delete_memory,
        handlers::memory_history_resource,
        handlers::cognition_runs,
        sessions::post_messages,
        sessions::get_messages,
        sessions::compact,
        handlers::health,
        handlers::metrics,
        namespaces::put_project,
        namespaces::list_projects,
        namespaces::get_project,
        namespaces::attach_session,
        namespaces::configure_namespace,
        namespaces::namespace_stats,
        namespaces::put_entry,
        namespaces::get_entry,
        namespaces::delete_entry,
        namespaces::list_entries,
        namespaces::search_entries,
    ),
    components(schemas(
        error::ErrorBody,
        error::ErrorDetail,
        namespaces::ProjectPutBody,
        namespaces::ProjectListBody,
        namespaces::KvPutBody,
        namespaces::KvKeyBody,
        namespaces::KvSearchBody,
        namespaces::KvListByTagBody,
        namespaces::KvStatsBody,
    ))
)]
pub struct ApiDoc;

/// The full router: the REST routes and the MCP endpoint `/mcp` (streamable HTTP).
pub fn router(state: AppState, max_body_bytes: usize) -> Router {
    let mcp = crate::mcp::http_service(
        state.runtime.clone(),
        state.mcp_allowed_hosts.clone(),
        state.project_roots.clone(),
        max_body_bytes,
        state.shutdown.clone(),
    );
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
        .route("/v1/memories", get(handlers::list_memories))
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
        .route("/v1/projects", get(namespaces::list_projects))
        .route(
            "/v1/projects/{project_id}",
            get(namespaces::get_project).put(namespaces::put_project),
        )
        .route(
            "/v1/projects/{project_id}/sessions/{session_id}",
            put(namespaces::attach_session),
        )
        .route(
            "/v1/namespaces/{namespace}",
            put(namespaces::configure_namespace),
        )
        .route(
            "/v1/namespaces/{namespace}/stats",
            get(namespaces::namespace_stats),
        )
        .route(
            "/v1/namespaces/{namespace}/entries",
            get(namespaces::list_entries),
        )
        .route(
            "/v1/namespaces/{namespace}/entries/{key}",
            get(namespaces::get_entry)
                .put(namespaces::put_entry)
                .delete(namespaces::delete_entry),
        )
        .route(
            "/v1/namespaces/{namespace}/search",
            post(namespaces::search_entries),
        )
        .route(
            "/v1/sessions/{id}/messages",
            post(sessions::post_messages).get(sessions::get_messages),
        )
        .route("/v1/sessions/{id}/compact", post(sessions::compact))
        .route("/v1/chat/completions", post(crate::proxy::chat_completions))
        .route("/v1/models", get(crate::proxy::models))
        .route("/v1/admin/archive", post(handlers::archive))
        .route(
            "/v1/admin/actors/{child}/fail",
            post(handlers::inject_fault),
        )
        .route("/health", get(handlers::health))
        .route("/metrics", get(handlers::metrics))
        .route(
            "/openapi.json",
            get(|| async { axum::Json(ApiDoc::openapi()) }),
        )
        .nest_service("/mcp", mcp)
        .fallback(not_found_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn(record_metrics))
        .layer(axum::extract::DefaultBodyLimit::max(max_body_bytes))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(
            panic_response,
        ))
        .layer(tower_http::trace::TraceLayer::new_for_http())
        .with_state(Arc::new(state))
}

//! The one place the HTTP router is composed: the REST routes (`crate::http`), the MCP
//! endpoint `/mcp` (`crate::mcp`), the memory proxy's routes (`crate::proxy`),
//! `/metrics` and `/openapi.json`, under the layers every route shares (request
//! metrics, body limit, panic → 500 with the contract's body, tracing) and the
//! contract's answers for an unknown route or method.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use mnemos_actors::error::{ErrorCode, MemoryError};
use tokio_util::sync::CancellationToken;
use utoipa::OpenApi;

use crate::contract::errors::{ApiError, HttpRefusal, Refused};
use crate::proxy::Proxy;
use crate::state::AppState;

/// What the router is built from besides the REST state.
pub struct RouterParts {
    /// The REST handlers' shared state (its runtime also serves MCP and the proxy).
    pub state: AppState,
    /// The memory proxy (`/v1/chat/completions`, `/v1/models`).
    pub proxy: Proxy,
    /// `Host` names `/mcp` accepts (`server.mcp_allowed_hosts`), against DNS rebinding.
    pub mcp_allowed_hosts: Vec<String>,
    /// Largest request body (`server.max_body_bytes`), for REST and `/mcp` alike.
    pub max_body_bytes: usize,
    /// Cancelled at shutdown so open MCP sessions and streams end and the drain can finish.
    pub shutdown: CancellationToken,
}

/// The full router of the service.
pub fn router(parts: RouterParts) -> Router {
    let runtime = parts.state.runtime.clone();
    let mcp = crate::mcp::http_service(
        runtime.clone(),
        parts.mcp_allowed_hosts,
        parts.state.project_roots.clone(),
        parts.max_body_bytes,
        parts.shutdown,
    );
    let rest = crate::http::routes()
        .route("/metrics", get(crate::http::handlers::metrics))
        .with_state(Arc::new(parts.state));
    Router::new()
        .merge(rest)
        .merge(crate::proxy::routes(parts.proxy, runtime))
        .route(
            "/openapi.json",
            get(|| async { axum::Json(crate::http::openapi::ApiDoc::openapi()) }),
        )
        .nest_service("/mcp", mcp)
        .fallback(not_found_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn(record_metrics))
        .layer(axum::extract::DefaultBodyLimit::max(parts.max_body_bytes))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(
            panic_response,
        ))
        .layer(tower_http::trace::TraceLayer::new_for_http())
}

/// Count and time every request per matched route (`mnemos_http_request*`).
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

/// An unknown route: 404 with the contract's body.
async fn not_found_route() -> ApiError {
    ApiError(MemoryError::not_found(
        "no such route; see /openapi.json for the routes this server has",
    ))
}

/// A known route asked with the wrong method: 405 with the contract's body.
async fn method_not_allowed() -> Refused {
    Refused::new(
        HttpRefusal::MethodNotAllowed,
        "method",
        "this route does not accept that HTTP method",
    )
}

/// A handler panicked: 500 `internal` with the contract's body (the panic is logged).
fn panic_response(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    ApiError(MemoryError::new(
        ErrorCode::Internal,
        "the server hit a bug handling this request; it has been logged",
    ))
    .into_response()
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    /// Every `.rs` file under `src/<relative>` (a file or a directory).
    fn sources(relative: &str) -> Vec<(PathBuf, String)> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("src")
            .join(relative);
        let mut files = Vec::new();
        let mut pending = vec![path];
        while let Some(path) = pending.pop() {
            if path.is_dir() {
                for entry in std::fs::read_dir(&path).expect("src is readable") {
                    pending.push(entry.expect("src is readable").path());
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("src is readable");
                files.push((path, text));
            }
        }
        files
    }

    /// Whether a source file names module `name` of this crate in code (doc lines aside).
    fn uses(text: &str, name: &str) -> bool {
        let needle = format!("crate::{name}");
        text.lines()
            .filter(|line| !line.trim_start().starts_with("//"))
            .any(|line| {
                line.match_indices(&needle).any(|(at, _)| {
                    let rest = &line[at + needle.len()..];
                    !rest.starts_with(|c: char| c.is_alphanumeric() || c == '_')
                })
            })
    }

    #[test]
    fn the_surfaces_depend_on_the_contract_and_never_on_each_other() {
        let rules: [(&str, &[&str]); 4] = [
            ("http", &["mcp", "proxy", "router", "app"]),
            ("mcp.rs", &["http", "proxy", "router", "state", "app"]),
            ("proxy.rs", &["http", "mcp", "router", "state", "app"]),
            (
                "contract",
                &["http", "mcp", "proxy", "router", "state", "app", "main"],
            ),
        ];
        for (module, forbidden) in rules {
            for (path, text) in sources(module) {
                for name in forbidden {
                    assert!(!uses(&text, name), "{} uses crate::{name}", path.display());
                }
            }
        }
    }
}

//! The one place the HTTP router is composed: the REST routes (`crate::http`), the MCP
//! endpoint `/mcp` (`crate::mcp`), the memory proxy's routes (`crate::proxy`),
//! `/metrics` and `/openapi.json`, under the layers every route shares (request
//! metrics, the Host/Origin check, CORS when configured, the JSON-only body intake with
//! its size and time limits, panic → 500 with the contract's body, tracing) and the
//! contract's answers for an unknown route or method.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use mnemos_actors::error::{ErrorCode, MemoryError};

use crate::contract::errors::{ApiError, HttpRefusal, Refused};
use crate::http::guard::{Guard, GuardSettings};
use crate::http::identity::Gate;
use crate::proxy::Proxy;
use crate::state::AppState;

/// What the router is built from besides the REST state.
pub struct RouterParts {
    /// The REST handlers' shared state (its runtime also serves MCP and the proxy).
    pub state: AppState,
    /// The memory proxy (`/v1/chat/completions`, `/v1/responses`, `/v1/embeddings`,
    /// `/v1/models`).
    pub proxy: Proxy,
    /// What every request is checked against before routing: allowed hosts and origins,
    /// the body's size and time limits (`crate::http::guard`).
    pub guard: GuardSettings,
    /// How `/mcp` is served: its session bound and idle expiry, and the shutdown token
    /// that ends open sessions and streams so the drain can finish.
    pub mcp: crate::mcp::HttpOptions,
    /// Who is asking: the identity layer's key check (`crate::http::identity`).
    pub identity: Gate,
}

/// The full router of the service. Layers, outermost first: tracing, the request id
/// (`X-Request-Id` on every answer), panic → 500, request metrics, OpenAI's error envelope on the proxy's routes, the Host/Origin check, CORS (only with `server.allowed_origins`),
/// the identity layer (API key → caller, 401 before routing), the JSON-only body intake
/// (size and time limits), the extractors' body limit.
pub fn router(parts: RouterParts) -> Router {
    let runtime = parts.state.runtime.clone();
    let cors = crate::http::guard::cors(&parts.guard.allowed_origins);
    let max_body_bytes = parts.guard.max_body_bytes;
    let guard = Guard::new(parts.guard);
    let mcp = crate::mcp::http_router(runtime.clone(), parts.mcp);
    let rest = crate::http::routes()
        .route("/metrics", get(crate::http::handlers::metrics))
        .with_state(Arc::new(parts.state));
    let router = Router::new()
        .merge(rest)
        .merge(crate::proxy::routes(parts.proxy, runtime))
        .merge(crate::console::routes())
        .route(
            "/openapi.json",
            get(|| async { axum::Json(crate::http::openapi::document()) }),
        )
        .merge(mcp)
        .fallback(not_found_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::extract::DefaultBodyLimit::max(max_body_bytes))
        .layer(axum::middleware::from_fn_with_state(
            guard.clone(),
            crate::http::guard::intake,
        ))
        .layer(axum::middleware::from_fn_with_state(
            Arc::new(parts.identity),
            crate::http::identity::identify,
        ));
    let router = match cors {
        Some(cors) => router.layer(cors),
        None => router,
    };
    router
        .layer(axum::middleware::from_fn_with_state(
            guard,
            crate::http::guard::check_host_and_origin,
        ))
        .layer(axum::middleware::from_fn(
            crate::proxy::envelope::openai_envelope,
        ))
        .layer(axum::middleware::from_fn(record_metrics))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(
            panic_response,
        ))
        .layer(axum::middleware::from_fn(
            crate::http::identity::tag_request,
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
            ("mcp", &["http", "proxy", "router", "state", "app"]),
            ("proxy", &["http", "mcp", "router", "state", "app"]),
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

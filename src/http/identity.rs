//! Who is asking, for every route: the layer that turns `Authorization: Bearer <key>`
//! into a [`Caller`] in the request's extensions before anything else reads the request
//! (REST handlers, `/mcp` and the proxy all take it from there), and the extractor
//! REST handlers use.
//!
//! With `auth.mode = "keys"` a request without a valid key is 401 before routing, so an
//! unknown route, a body or a path of another tenant tells it nothing; `/health`
//! (without detail) and `/openapi.json` answer anyone, `/metrics` too with
//! `auth.public_metrics`. Without keys every request is the local operator. Every 401
//! and 403 is written to the audit log.

use std::sync::Arc;

use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use mnemos_actors::error::ErrorCode;

use crate::auth::keys::{AuditEntry, Authenticator, KeyStore};
use crate::auth::{unauthenticated, Caller, Surface};
use crate::contract::errors::ApiError;

/// What the identity layer checks requests with.
pub struct Gate {
    /// Checks keys (None: `auth.mode = "none"`, every request is the operator).
    pub authenticator: Option<Arc<Authenticator>>,
    /// Where denials are recorded.
    pub audit: Arc<dyn KeyStore>,
    /// `/metrics` answers without a key (`auth.public_metrics`).
    pub public_metrics: bool,
}

/// The header that carries a request's id (taken from the client when it sent a sane
/// one, else made here; answered back and kept in the provenance of what it writes).
pub const REQUEST_ID: &str = "x-request-id";

/// The request's id: the client's `X-Request-Id` when it is 1–64 characters of
/// letters, digits, `-`, `_`, `.`, else a new UUIDv7.
pub fn request_id(request: &Request) -> String {
    request
        .headers()
        .get(REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| {
            (1..=64).contains(&v.len())
                && v.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        })
        .map(str::to_string)
        .unwrap_or_else(|| uuid::Uuid::now_v7().to_string())
}

/// Outermost layer: every request has an `X-Request-Id` (the client's when it is a
/// plain token of at most 64 characters, else a fresh one) before anything can refuse
/// it, and every answer carries it back, refusals included (Host guard 403, 401, 429).
pub async fn tag_request(mut request: Request, next: Next) -> Response {
    let id = request_id(&request);
    if let Ok(value) = header::HeaderValue::from_str(&id) {
        request.headers_mut().insert(REQUEST_ID, value.clone());
        let mut response = next.run(request).await;
        response.headers_mut().insert(REQUEST_ID, value);
        return response;
    }
    next.run(request).await
}

/// The surface a path belongs to.
fn surface_of(path: &str) -> Surface {
    match path {
        "/mcp" => Surface::Mcp,
        "/v1/chat/completions" | "/v1/responses" | "/v1/embeddings" | "/v1/models" => {
            Surface::Proxy
        }
        _ => Surface::Rest,
    }
}

/// Paths anyone may ask (what they answer depends on who asks).
fn public(gate: &Gate, path: &str) -> bool {
    matches!(path, "/health" | "/openapi.json")
        || (path == "/metrics" && gate.public_metrics)
        || crate::console::is_console_path(path)
}

/// The layer: authenticate, put the [`Caller`] in the request, audit 401 and 403.
pub async fn identify(State(gate): State<Arc<Gate>>, mut request: Request, next: Next) -> Response {
    let path = request.uri().path().to_string();
    let surface = surface_of(&path);
    let caller = match &gate.authenticator {
        None => Ok(Caller::operator(surface)),
        Some(authenticator) => {
            let header = request
                .headers()
                .get(header::AUTHORIZATION)
                .map(|value| value.to_str().unwrap_or(""));
            authenticator
                .authenticate(header, surface, Utc::now())
                .await
        }
    };
    let request_id = request_id(&request);
    let caller = match caller {
        Ok(caller) => Caller {
            request_id: Some(request_id.clone()),
            ..caller
        },
        Err(error) if error.code == ErrorCode::RateLimited => {
            return ApiError(error).into_response()
        }
        Err(_) if public(&gate, &path) => return next.run(request).await,
        Err(error) => {
            record_denial(&gate, None, &path, &error.message);
            return ApiError(error).into_response();
        }
    };
    request.extensions_mut().insert(caller.clone());
    let mut response = next.run(request).await;
    if let Ok(value) = header::HeaderValue::from_str(&request_id) {
        response.headers_mut().insert(REQUEST_ID, value);
    }
    if response.status() == StatusCode::FORBIDDEN && caller.key_id.is_some() {
        record_denial(&gate, Some(&caller), &path, "permission_denied");
    }
    if caller.tenant.is_some()
        && (response.status().is_client_error() || response.status().is_server_error())
    {
        return localized(&caller, response).await;
    }
    response
}

/// An error answer with the runtime's tenant-qualified ids read as the caller's own
/// (an error body is small; anything else passes as it is).
async fn localized(caller: &Caller, response: Response) -> Response {
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !is_json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 1 << 20).await else {
        return ApiError(mnemos_actors::error::MemoryError::internal(
            "an error answer could not be read back",
        ))
        .into_response();
    };
    let text = caller.localize(&String::from_utf8_lossy(&bytes));
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, axum::body::Body::from(text))
}

/// Write an `auth.denied` entry in the background (the answer does not wait for it).
fn record_denial(gate: &Gate, caller: Option<&Caller>, path: &str, reason: &str) {
    let entry = AuditEntry {
        at: Utc::now(),
        actor: caller
            .and_then(|c| c.key_id.clone())
            .unwrap_or_else(|| "anonymous".to_string()),
        tenant: caller.and_then(|c| c.tenant.as_ref().map(|t| t.to_string())),
        action: "auth.denied".to_string(),
        target: Some(path.to_string()),
        detail: serde_json::json!({ "reason": reason }),
    };
    let store = gate.audit.clone();
    tokio::spawn(async move {
        if let Err(error) = store.audit(&entry).await {
            tracing::warn!(%error, "authorization failure not recorded in the audit log");
        }
    });
}

/// The caller of a REST request, as the identity layer found it.
pub struct Authenticated(pub Caller);

impl<S: Send + Sync> FromRequestParts<S> for Authenticated {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<Caller>()
            .cloned()
            .map(Authenticated)
            .ok_or_else(|| {
                ApiError(unauthenticated(
                    "this route needs an API key: send Authorization: Bearer <key>",
                ))
            })
    }
}

/// The caller of a public route, if the request carried a valid key.
pub struct MaybeAuthenticated(pub Option<Caller>);

impl<S: Send + Sync> FromRequestParts<S> for MaybeAuthenticated {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Ok(MaybeAuthenticated(
            parts.extensions.get::<Caller>().cloned(),
        ))
    }
}

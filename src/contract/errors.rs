//! The one error table: [`ErrorCode`] → HTTP status and → MCP (JSON-RPC) error code,
//! matched exhaustively with no `_` arm so a new code forces a decision, and the
//! contract's error object as it leaves every surface (REST body, proxy body, MCP `data`).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use mnemos_actors::error::{ErrorCode, MemoryError};
use serde::Serialize;
use utoipa::ToSchema;

/// HTTP status of each code (the table of `shared/api.md`).
pub fn http_status(code: ErrorCode) -> StatusCode {
    match code {
        ErrorCode::InvalidArgument => StatusCode::BAD_REQUEST,
        ErrorCode::Unauthenticated => StatusCode::UNAUTHORIZED,
        ErrorCode::PermissionDenied => StatusCode::FORBIDDEN,
        ErrorCode::NotFound => StatusCode::NOT_FOUND,
        ErrorCode::Conflict => StatusCode::CONFLICT,
        ErrorCode::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        ErrorCode::RateLimited => StatusCode::TOO_MANY_REQUESTS,
        ErrorCode::BackendUnavailable => StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// JSON-RPC error code of each code, so MCP clients can branch on the kind of failure.
pub fn mcp_error_code(code: ErrorCode) -> i32 {
    match code {
        ErrorCode::InvalidArgument => -32602,
        ErrorCode::Unauthenticated => -32001,
        ErrorCode::PermissionDenied => -32003,
        ErrorCode::NotFound => -32004,
        ErrorCode::Conflict => -32009,
        ErrorCode::PayloadTooLarge => -32013,
        ErrorCode::RateLimited => -32029,
        ErrorCode::BackendUnavailable => -32053,
        ErrorCode::Internal => -32603,
    }
}

/// OpenAI's error `type` for each code, which the proxy's routes add to the contract's
/// body so an OpenAI SDK reads mnemos's own refusals like the upstream's.
pub fn openai_error_type(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::InvalidArgument => "invalid_request_error",
        ErrorCode::Unauthenticated => "authentication_error",
        ErrorCode::PermissionDenied => "permission_error",
        ErrorCode::NotFound => "not_found_error",
        ErrorCode::Conflict => "conflict_error",
        ErrorCode::PayloadTooLarge => "invalid_request_error",
        ErrorCode::RateLimited => "rate_limit_error",
        ErrorCode::BackendUnavailable => "api_error",
        ErrorCode::Internal => "api_error",
    }
}

/// Marks an error answer this server made itself (never an upstream's passed through),
/// with its code, so an outer layer can restate it (the proxy's OpenAI envelope).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answered(pub ErrorCode);

/// Refusals made by the HTTP layer before any contract operation runs, whose status the
/// code table above has no row for. Each still answers with the contract's body, code
/// `invalid_argument` (the request is what must change) and the field at fault; only
/// the status differs, so a client can tell them apart without parsing the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpRefusal {
    /// A known route asked with a method it does not serve (405).
    MethodNotAllowed,
    /// The body did not arrive within `server.body_timeout_ms` (408).
    RequestTimeout,
    /// A body that is not JSON (`application/json` or `application/*+json`) (415).
    UnsupportedMediaType,
}

/// HTTP status of each refusal (the rest of the table: matched exhaustively, no `_`).
pub fn refusal_status(refusal: HttpRefusal) -> StatusCode {
    match refusal {
        HttpRefusal::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
        HttpRefusal::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
        HttpRefusal::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
    }
}

/// A refusal on its way out: the contract's body with the refusal's status.
#[derive(Debug)]
pub struct Refused {
    /// Which refusal (decides the status).
    pub refusal: HttpRefusal,
    /// The field at fault (`method`, `body`, `content-type`).
    pub field: &'static str,
    /// What went wrong and what to change.
    pub message: String,
}

impl Refused {
    /// A refusal naming `field`, with a message saying what to change.
    pub fn new(refusal: HttpRefusal, field: &'static str, message: impl Into<String>) -> Self {
        Self {
            refusal,
            field,
            message: message.into(),
        }
    }
}

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: MemoryError::invalid(self.field, self.message).into(),
        };
        let mut response = (refusal_status(self.refusal), Json(body)).into_response();
        response
            .extensions_mut()
            .insert(Answered(ErrorCode::InvalidArgument));
        response
    }
}

/// The error body: `{"error": {"code", "message", "field"}}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// Inside [`ErrorBody`].
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable code (`invalid_argument`, `not_found`, ...).
    pub code: String,
    /// What went wrong and what to change.
    pub message: String,
    /// The request field at fault.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

impl From<MemoryError> for ErrorDetail {
    fn from(error: MemoryError) -> Self {
        Self {
            code: error.code.as_str().to_string(),
            message: error.message,
            field: error.field,
        }
    }
}

/// A [`MemoryError`] on its way out as an HTTP response (REST and the proxy).
#[derive(Debug)]
pub struct ApiError(pub MemoryError);

impl From<MemoryError> for ApiError {
    fn from(error: MemoryError) -> Self {
        Self(error)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = http_status(self.0.code);
        if status.is_server_error() {
            tracing::error!(code = self.0.code.as_str(), message = %self.0.message, "request failed");
        }
        let retry_after = matches!(self.0.code, ErrorCode::RateLimited)
            .then(|| crate::auth::limits::retry_after_seconds(&self.0.message).to_string());
        let code = self.0.code;
        let body = ErrorBody {
            error: self.0.into(),
        };
        let mut response = (status, Json(body)).into_response();
        response.extensions_mut().insert(Answered(code));
        if let Some(seconds) = retry_after.and_then(|s| s.parse().ok()) {
            response
                .headers_mut()
                .insert(axum::http::header::RETRY_AFTER, seconds);
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contract_statuses() {
        assert_eq!(http_status(ErrorCode::InvalidArgument), 400);
        assert_eq!(http_status(ErrorCode::NotFound), 404);
        assert_eq!(http_status(ErrorCode::PayloadTooLarge), 413);
        assert_eq!(http_status(ErrorCode::BackendUnavailable), 503);
        assert_eq!(mcp_error_code(ErrorCode::InvalidArgument), -32602);
        assert_eq!(refusal_status(HttpRefusal::MethodNotAllowed), 405);
        assert_eq!(refusal_status(HttpRefusal::RequestTimeout), 408);
        assert_eq!(refusal_status(HttpRefusal::UnsupportedMediaType), 415);
    }
}

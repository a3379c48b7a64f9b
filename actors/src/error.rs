//! The one error type of the runtime and its table of stable codes.
//!
//! Every failure a caller can see is a [`MemoryError`]. Its [`ErrorCode`] is the
//! stable, documented part (`invalid_argument`, `not_found`, ...); the message says
//! what to change. The HTTP and MCP edges map [`ErrorCode`] exhaustively (no `_` arm),
//! so a new code forces a decision at every edge.

use serde::Serialize;

/// Stable error codes of the HTTP/MCP contract (`../shared/api.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The request is malformed or a value is out of range.
    InvalidArgument,
    /// No or bad credentials.
    Unauthenticated,
    /// The caller may not touch this resource (e.g. another agent's memory).
    PermissionDenied,
    /// The resource does not exist (or is invisible to this agent).
    NotFound,
    /// The request conflicts with the current state.
    Conflict,
    /// A body, content or batch is larger than the configured limit.
    PayloadTooLarge,
    /// Too many requests.
    RateLimited,
    /// A backend (store, model, actor) is down or restarting; retrying later may work.
    BackendUnavailable,
    /// A bug: an invariant broke.
    Internal,
}

impl ErrorCode {
    /// The snake_case code sent on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidArgument => "invalid_argument",
            ErrorCode::Unauthenticated => "unauthenticated",
            ErrorCode::PermissionDenied => "permission_denied",
            ErrorCode::NotFound => "not_found",
            ErrorCode::Conflict => "conflict",
            ErrorCode::PayloadTooLarge => "payload_too_large",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::BackendUnavailable => "backend_unavailable",
            ErrorCode::Internal => "internal",
        }
    }
}

/// A typed failure with a stable code, a human message and, where it applies, the offending field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code:?}: {message}")]
pub struct MemoryError {
    /// Stable machine-readable code.
    pub code: ErrorCode,
    /// What went wrong and what to change, for a person.
    pub message: String,
    /// The request field at fault, if one is.
    pub field: Option<String>,
}

impl MemoryError {
    /// Build an error with a code and message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            field: None,
        }
    }
    /// A bad value in `field`.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code: ErrorCode::InvalidArgument,
            message: message.into(),
            field: Some(field.into()),
        }
    }
    /// A missing resource.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, message)
    }
    /// A too-large payload in `field`.
    pub fn too_large(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code: ErrorCode::PayloadTooLarge,
            message: message.into(),
            field: Some(field.into()),
        }
    }
    /// A backend that cannot answer now.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::BackendUnavailable, message)
    }
    /// A conflict with current state.
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Conflict, message)
    }
    /// A bug.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Internal, message)
    }
}

/// Shorthand used throughout the runtime.
pub type MemoryResult<T> = Result<T, MemoryError>;

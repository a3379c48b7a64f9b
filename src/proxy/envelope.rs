//! OpenAI's error envelope on the proxy's routes. OpenAI's body is
//! `{"error": {"message", "type", "param", "code"}}`, the contract's is
//! `{"error": {"code", "message", "field"}}`: the two share `code` and `message`, so an
//! error mnemos answers itself on a proxy route carries all five fields and reads right
//! to either kind of client. An upstream's own error passes through unchanged.

use axum::extract::Request;
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use serde_json::{json, Value};

use crate::contract::errors::{openai_error_type, Answered};

/// The largest error body restated (error bodies are small; a larger one passes as it is).
const MAX_ERROR_BODY: usize = 64 * 1024;

/// Middleware: on the proxy's routes ([`super::PATHS`]), add OpenAI's `type` and
/// `param` to every error mnemos answered itself (before routing too: a missing key is
/// refused by the identity layer).
pub async fn openai_envelope(request: Request, next: Next) -> Response {
    let proxied = super::PATHS.contains(&request.uri().path());
    let response = next.run(request).await;
    let Some(Answered(code)) = response.extensions().get::<Answered>().copied() else {
        return response;
    };
    if !proxied {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_ERROR_BODY).await else {
        return Response::from_parts(parts, axum::body::Body::empty());
    };
    let restated = match serde_json::from_slice::<Value>(&bytes) {
        Ok(mut body) => match body.get_mut("error").and_then(Value::as_object_mut) {
            Some(error) => {
                let param = error.get("field").cloned().unwrap_or(Value::Null);
                error.insert("type".into(), json!(openai_error_type(code)));
                error.insert("param".into(), param);
                serde_json::to_vec(&body).unwrap_or_else(|_| bytes.to_vec())
            }
            None => bytes.to_vec(),
        },
        Err(_) => bytes.to_vec(),
    };
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, axum::body::Body::from(restated))
}

/// OpenAI's envelope around an upstream failure whose body is not JSON (a gateway's
/// HTML page, a plain-text message): its status stays, its text becomes the message.
pub fn upstream_failure(status: StatusCode, body: &[u8]) -> Value {
    let text = String::from_utf8_lossy(body);
    let snippet: String = text.trim().chars().take(500).collect();
    let kind = match status.as_u16() {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        429 => "rate_limit_error",
        400..=499 => "invalid_request_error",
        _ => "api_error",
    };
    json!({"error": {
        "message": format!("the upstream model API answered {status}: {snippet}"),
        "type": kind,
        "param": null,
        "code": "upstream_error",
    }})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_upstream_page_becomes_a_readable_error() {
        let body = upstream_failure(StatusCode::BAD_GATEWAY, b"<html>bad gateway</html>");
        assert_eq!(body["error"]["type"], "api_error");
        assert_eq!(body["error"]["code"], "upstream_error");
        assert!(body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("bad gateway"));
        let body = upstream_failure(StatusCode::TOO_MANY_REQUESTS, b"slow down");
        assert_eq!(body["error"]["type"], "rate_limit_error");
    }
}

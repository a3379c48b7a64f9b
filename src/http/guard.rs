//! The checks every request passes before a handler, `/mcp` or the proxy sees it
//! (`crate::router` layers them over the whole router, unknown routes included):
//!
//! 1. [`check_host_and_origin`]: the `Host` must be in `server.allowed_hosts` (a page
//!    that rebinds its DNS name to this server cannot reach it through a browser), and
//!    an `Origin`, when a browser sends one, must be the server's own (same host and
//!    port) or listed in `server.allowed_origins` (another site's page cannot write or
//!    read). Otherwise 403 `permission_denied` naming `host` or `origin`.
//! 2. [`intake`]: a request with a body must say it is JSON (`application/json` or
//!    `application/*+json`, charset UTF-8 if given): what a cross-site form or a fetch
//!    without preflight can send (`text/plain`, form encodings) is 415 before anything
//!    reads it. The one exception is `POST /v1/import`, which takes an export file
//!    (`application/x-ndjson`) within `server.max_import_bytes` instead. Then the body
//!    is read whole, within `server.body_timeout_ms` after the
//!    headers (408 and the connection closed past it) and `server.max_body_bytes` (413;
//!    the rest of a larger body is read and thrown away within the same deadline, so
//!    the client gets the answer instead of a reset connection; a client announcing
//!    `Expect: 100-continue` is answered before it sends anything).
//!
//! What passes reaches the handlers as a complete in-memory body, so no handler, the MCP
//! service included, ever waits on a slow client. Refusals are decided here before any
//! operation runs, so a refused request has changed nothing.

use std::net::Ipv6Addr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::uri::Authority;
use axum::http::{header, HeaderMap, HeaderValue, Method, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body::Body as _;
use http_body_util::BodyExt;
use mnemos_actors::error::{ErrorCode, MemoryError};
use tokio::time::Instant;

use crate::contract::errors::{ApiError, HttpRefusal, Refused};

/// What the checks compare against, from `[server]`.
#[derive(Debug, Clone)]
pub struct GuardSettings {
    /// `server.allowed_hosts` (or its old name): `host` or `host:port`; empty accepts any.
    pub allowed_hosts: Vec<String>,
    /// `server.allowed_origins`: `scheme://host[:port]` besides the server's own.
    pub allowed_origins: Vec<String>,
    /// `server.max_body_bytes`.
    pub max_body_bytes: usize,
    /// `server.max_import_bytes`: the limit of the one JSONL body, `POST /v1/import`.
    pub max_import_bytes: usize,
    /// `server.body_timeout_ms`.
    pub body_timeout: Duration,
}

/// The parsed form of [`GuardSettings`], shared by every request.
#[derive(Debug)]
pub struct Guard {
    /// Allowed hosts, lower-case, brackets of IPv6 literals removed.
    hosts: Vec<HostPort>,
    /// Allowed origins besides the server's own.
    origins: Vec<WebOrigin>,
    /// Largest body.
    max_body_bytes: usize,
    /// Largest body of `POST /v1/import`.
    max_import_bytes: usize,
    /// Time to send the body after the headers.
    body_timeout: Duration,
}

impl Guard {
    /// Parse the settings once (entries `Settings::validate` would refuse are skipped).
    pub fn new(settings: GuardSettings) -> Arc<Self> {
        Arc::new(Self {
            hosts: settings
                .allowed_hosts
                .iter()
                .filter_map(|h| HostPort::parse(h))
                .collect(),
            origins: settings
                .allowed_origins
                .iter()
                .filter_map(|o| WebOrigin::parse(o))
                .collect(),
            max_body_bytes: settings.max_body_bytes,
            max_import_bytes: settings.max_import_bytes,
            body_timeout: settings.body_timeout,
        })
    }

    /// Whether a request's `Host` (or, without one, its URI's authority) is allowed.
    fn host_allowed(&self, host: Option<&HostPort>) -> bool {
        if self.hosts.is_empty() {
            return true;
        }
        host.is_some_and(|host| {
            self.hosts.iter().any(|allowed| {
                allowed.host == host.host && allowed.port.is_none_or(|p| host.port == Some(p))
            })
        })
    }

    /// Whether an `Origin` may call: the request's own host (and port, when the `Host`
    /// names one), or a listed origin.
    fn origin_allowed(&self, origin: &WebOrigin, host: Option<&HostPort>) -> bool {
        let same_host = host.is_some_and(|host| {
            origin.host == host.host && host.port.is_none_or(|port| origin.port == port)
        });
        same_host || self.origins.contains(origin)
    }
}

/// A host name or IP with an optional port, as `Host` headers and the allow-list hold them.
#[derive(Debug, Clone, PartialEq, Eq)]
struct HostPort {
    /// Lower-case, without the brackets of an IPv6 literal.
    host: String,
    /// The port, when named.
    port: Option<u16>,
}

impl HostPort {
    /// Parse `name`, `name:port`, `[v6]:port` or a bare IPv6 literal.
    fn parse(raw: &str) -> Option<Self> {
        let raw = raw.trim();
        if let Ok(v6) = raw.parse::<Ipv6Addr>() {
            return Some(Self {
                host: v6.to_string(),
                port: None,
            });
        }
        let authority = raw.parse::<Authority>().ok()?;
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']');
        if host.is_empty() {
            return None;
        }
        Some(Self {
            host: host
                .parse::<Ipv6Addr>()
                .map_or_else(|_| host.to_ascii_lowercase(), |v6| v6.to_string()),
            port: authority.port_u16(),
        })
    }

    /// The request's `Host` header, or the authority of its URI (HTTP/2).
    fn of_request(headers: &HeaderMap, uri: &Uri) -> Option<Self> {
        match headers.get(header::HOST) {
            Some(value) => value.to_str().ok().and_then(Self::parse),
            None => uri.authority().and_then(|a| Self::parse(a.as_str())),
        }
    }
}

/// A web origin (`scheme://host:port`) with the port made explicit.
#[derive(Debug, Clone, PartialEq, Eq)]
struct WebOrigin {
    /// `http` or `https`.
    scheme: String,
    /// Lower-case host.
    host: String,
    /// The port, the scheme's default when the origin names none.
    port: u16,
}

impl WebOrigin {
    /// Parse an `Origin` header or an `allowed_origins` entry; `null` and anything but
    /// http(s) with a host and no path is `None`.
    fn parse(raw: &str) -> Option<Self> {
        let uri = raw.trim().parse::<Uri>().ok()?;
        let scheme = uri.scheme_str()?.to_ascii_lowercase();
        let default_port = match scheme.as_str() {
            "http" => 80,
            "https" => 443,
            _ => return None,
        };
        if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
            return None;
        }
        let host = HostPort::parse(uri.authority()?.as_str())?;
        Some(Self {
            scheme,
            host: host.host,
            port: host.port.unwrap_or(default_port),
        })
    }
}

/// 403 `permission_denied` naming `field`.
fn forbidden(field: &str, message: String) -> Response {
    let mut error = MemoryError::new(ErrorCode::PermissionDenied, message);
    error.field = Some(field.to_string());
    ApiError(error).into_response()
}

/// Answer `response` to a request whose body nobody will read: the body is read and
/// dropped first (until `deadline`), so the client is not reset while still sending;
/// if it does not end in time the connection is closed after the answer.
async fn refuse(request: Request, deadline: Instant, response: Response) -> Response {
    if request.body().is_end_stream() || drain(request.into_body(), deadline).await {
        response
    } else {
        closing(response)
    }
}

/// Step 1: refuse a `Host` outside the allow-list and an `Origin` that is neither the
/// server's own nor listed.
pub async fn check_host_and_origin(
    State(guard): State<Arc<Guard>>,
    request: Request,
    next: Next,
) -> Response {
    let deadline = Instant::now() + guard.body_timeout;
    let host = HostPort::of_request(request.headers(), request.uri());
    if !guard.host_allowed(host.as_ref()) {
        let named = request
            .headers()
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("(none)")
            .to_string();
        tracing::warn!(host = %named, "refused a request for a Host outside server.allowed_hosts");
        let response = forbidden(
            "host",
            format!(
                "this server does not answer for Host {named:?}; add the name clients use to \
                 server.allowed_hosts"
            ),
        );
        return refuse(request, deadline, response).await;
    }
    if let Some(origin) = request.headers().get(header::ORIGIN) {
        let raw = origin.to_str().unwrap_or("(not text)").to_string();
        let allowed = WebOrigin::parse(&raw)
            .is_some_and(|origin| guard.origin_allowed(&origin, host.as_ref()));
        if !allowed {
            tracing::warn!(origin = %raw, "refused a browser request from a foreign Origin");
            let response = forbidden(
                "origin",
                format!(
                    "requests from pages of origin {raw:?} are not accepted; list it in \
                     server.allowed_origins to let that site call this server"
                ),
            );
            return refuse(request, deadline, response).await;
        }
    }
    next.run(request).await
}

/// Whether a `Content-Type` names JSON: `application/json` or `application/*+json`,
/// with no charset but UTF-8.
pub fn is_json_content_type(value: &str) -> bool {
    let mut parts = value.split(';');
    let essence = parts.next().unwrap_or("").trim().to_ascii_lowercase();
    let json = essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"));
    json && parts.all(|parameter| match parameter.split_once('=') {
        Some((name, value)) if name.trim().eq_ignore_ascii_case("charset") => {
            value.trim().trim_matches('"').eq_ignore_ascii_case("utf-8")
        }
        _ => true,
    })
}

/// The route that takes a JSONL body instead of JSON.
pub const IMPORT_PATH: &str = "/v1/import";

/// Whether a `Content-Type` names newline-delimited JSON (`application/x-ndjson`,
/// `application/jsonl`) or plain bytes (`application/octet-stream`, what generated
/// clients send a file as), with no charset but UTF-8.
pub fn is_ndjson_content_type(value: &str) -> bool {
    let mut parts = value.split(';');
    let essence = parts.next().unwrap_or("").trim().to_ascii_lowercase();
    matches!(
        essence.as_str(),
        "application/x-ndjson"
            | "application/ndjson"
            | "application/jsonl"
            | "application/octet-stream"
    ) && parts.all(|parameter| match parameter.split_once('=') {
        Some((name, value)) if name.trim().eq_ignore_ascii_case("charset") => {
            value.trim().trim_matches('"').eq_ignore_ascii_case("utf-8")
        }
        _ => true,
    })
}

/// Why a body was not taken.
#[derive(Debug, PartialEq, Eq)]
enum Refusal {
    /// Larger than `server.max_body_bytes`; `drained` when the whole of it was read.
    TooLarge { drained: bool },
    /// Not complete within `server.body_timeout_ms`.
    TimedOut,
    /// The connection failed or the framing was broken.
    Unreadable(String),
}

/// Read a body whole, at most `limit` bytes, by `deadline`; the rest of a larger body is
/// read and dropped (by the same deadline) so the connection can carry the answer.
async fn read_body(mut body: Body, limit: usize, deadline: Instant) -> Result<Bytes, Refusal> {
    // Reserve for the announced length, but not more than 64 KiB before the bytes are
    // in: a client announcing 8 MiB and sending nothing must not cost 8 MiB.
    let expected = body.size_hint().exact().unwrap_or(0) as usize;
    let mut collected = Vec::with_capacity(expected.min(limit).min(64 * 1024));
    loop {
        match tokio::time::timeout_at(deadline, body.frame()).await {
            Err(_) => return Err(Refusal::TimedOut),
            Ok(None) => return Ok(Bytes::from(collected)),
            Ok(Some(Err(error))) => return Err(Refusal::Unreadable(error.to_string())),
            Ok(Some(Ok(frame))) => {
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                if collected.len() + data.len() > limit {
                    let drained = drain(body, deadline).await;
                    return Err(Refusal::TooLarge { drained });
                }
                collected.extend_from_slice(&data);
            }
        }
    }
}

/// Read and drop the rest of a body until it ends or `deadline`; true when it ended.
async fn drain(mut body: Body, deadline: Instant) -> bool {
    loop {
        match tokio::time::timeout_at(deadline, body.frame()).await {
            Ok(None) => return true,
            Ok(Some(Ok(_))) => continue,
            Ok(Some(Err(_))) | Err(_) => return false,
        }
    }
}

/// Mark a response as the connection's last.
fn closing(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// Step 2: refuse a body that is not JSON, then read it whole within the time and size
/// limits and hand it on in memory.
pub async fn intake(State(guard): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    let deadline = Instant::now() + guard.body_timeout;
    let has_body = request.body().size_hint().exact() != Some(0);
    if !has_body {
        return next.run(request).await;
    }
    let content_type = request
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap_or("(not text)").to_string());
    // The one body that is not JSON: an export file, posted to the import route.
    let import = request.method() == Method::POST
        && request.uri().path() == IMPORT_PATH
        && content_type.as_deref().is_some_and(is_ndjson_content_type);
    let (limit, limit_key) = if import {
        (guard.max_import_bytes, "server.max_import_bytes")
    } else {
        (guard.max_body_bytes, "server.max_body_bytes")
    };
    if !import && !content_type.as_deref().is_some_and(is_json_content_type) {
        let named = content_type.unwrap_or_else(|| "none".to_string());
        let expected = if request.uri().path() == IMPORT_PATH {
            "application/x-ndjson (an export file)"
        } else {
            "application/json"
        };
        let response = Refused::new(
            HttpRefusal::UnsupportedMediaType,
            "content-type",
            format!(
                "request bodies are JSON only (and an export file for {IMPORT_PATH}); send Content-Type: {expected} (got {named})"
            ),
        )
        .into_response();
        return refuse(request, deadline, response).await;
    }
    let too_large = || {
        ApiError(MemoryError::too_large(
            "body",
            format!("request body is larger than {limit_key} ({limit} bytes)"),
        ))
        .into_response()
    };
    let announced = request
        .body()
        .size_hint()
        .exact()
        .map(|n| n as usize)
        .unwrap_or(0);
    let asks_first = request
        .headers()
        .get(header::EXPECT)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    if announced > limit && asks_first {
        // Not polling the body means hyper never sends `100 Continue`: the client learns
        // the answer before it sends a byte of the body.
        return closing(too_large());
    }
    let (parts, body) = request.into_parts();
    match read_body(body, limit, deadline).await {
        Ok(bytes) => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        Err(Refusal::TooLarge { drained: true }) => too_large(),
        Err(Refusal::TooLarge { drained: false }) => closing(too_large()),
        Err(Refusal::TimedOut) => closing(
            Refused::new(
                HttpRefusal::RequestTimeout,
                "body",
                format!(
                    "the request body did not arrive within server.body_timeout_ms ({} ms) \
                     after the headers; send it at once",
                    guard.body_timeout.as_millis()
                ),
            )
            .into_response(),
        ),
        Err(Refusal::Unreadable(error)) => closing(
            ApiError(MemoryError::invalid(
                "body",
                format!("could not read the request body: {error}"),
            ))
            .into_response(),
        ),
    }
}

/// The CORS layer for `server.allowed_origins`, or `None` (CORS off) when it is empty.
pub fn cors(allowed_origins: &[String]) -> Option<tower_http::cors::CorsLayer> {
    use tower_http::cors::{AllowOrigin, CorsLayer};
    let origins: Vec<HeaderValue> = allowed_origins
        .iter()
        .filter_map(|o| HeaderValue::from_str(o.trim().trim_end_matches('/')).ok())
        .collect();
    if origins.is_empty() {
        return None;
    }
    Some(
        CorsLayer::new()
            .allow_origin(AllowOrigin::list(origins))
            .allow_methods([
                Method::GET,
                Method::POST,
                Method::PUT,
                Method::PATCH,
                Method::DELETE,
            ])
            .allow_headers([
                header::CONTENT_TYPE,
                header::AUTHORIZATION,
                header::ACCEPT,
                header::HeaderName::from_static("last-event-id"),
                header::HeaderName::from_static("mcp-session-id"),
                header::HeaderName::from_static("mcp-protocol-version"),
                header::HeaderName::from_static("x-mnemos-agent-id"),
                header::HeaderName::from_static("x-mnemos-session-id"),
            ])
            .expose_headers([header::HeaderName::from_static("mcp-session-id")])
            .max_age(Duration::from_secs(600)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(hosts: &[&str], origins: &[&str]) -> Arc<Guard> {
        Guard::new(GuardSettings {
            allowed_hosts: hosts.iter().map(|h| h.to_string()).collect(),
            allowed_origins: origins.iter().map(|o| o.to_string()).collect(),
            max_body_bytes: 1024,
            max_import_bytes: 4096,
            body_timeout: Duration::from_secs(1),
        })
    }

    fn host(raw: &str) -> Option<HostPort> {
        HostPort::parse(raw)
    }

    #[test]
    fn hosts_match_by_name_and_by_port_when_the_entry_names_one() {
        let guard = guard(
            &["localhost", "127.0.0.1", "::1", "mnemos.internal:8077"],
            &[],
        );
        for allowed in [
            "localhost",
            "LOCALHOST:3000",
            "127.0.0.1:8077",
            "[::1]:8077",
            "mnemos.internal:8077",
        ] {
            assert!(guard.host_allowed(host(allowed).as_ref()), "{allowed}");
        }
        for refused in [
            "evil.example",
            "127.0.0.1.evil.example",
            "mnemos.internal",
            "mnemos.internal:80",
            "localhost.",
        ] {
            assert!(!guard.host_allowed(host(refused).as_ref()), "{refused}");
        }
        assert!(!guard.host_allowed(None));
        assert!(self::guard(&[], &[]).host_allowed(None));
    }

    #[test]
    fn origins_are_the_servers_own_or_listed() {
        let guard = guard(&[], &["https://app.example"]);
        let own = host("127.0.0.1:8077");
        let origin = |raw: &str| WebOrigin::parse(raw).expect(raw);
        assert!(guard.origin_allowed(&origin("http://127.0.0.1:8077"), own.as_ref()));
        assert!(guard.origin_allowed(&origin("https://app.example"), own.as_ref()));
        assert!(guard.origin_allowed(&origin("https://APP.example:443/"), own.as_ref()));
        assert!(!guard.origin_allowed(&origin("http://app.example"), own.as_ref()));
        assert!(!guard.origin_allowed(&origin("http://127.0.0.1:9999"), own.as_ref()));
        assert!(!guard.origin_allowed(&origin("https://evil.example"), own.as_ref()));
        // Behind a reverse proxy the Host often has no port: the name decides.
        let proxied = host("mnemos.example");
        assert!(guard.origin_allowed(&origin("https://mnemos.example"), proxied.as_ref()));
        assert!(WebOrigin::parse("null").is_none());
        assert!(WebOrigin::parse("file://x").is_none());
        assert!(WebOrigin::parse("https://a.example/path").is_none());
    }

    #[test]
    fn json_content_types() {
        for json in [
            "application/json",
            "Application/JSON",
            "application/json; charset=utf-8",
            "application/json;charset=\"UTF-8\"",
            "application/merge-patch+json",
        ] {
            assert!(is_json_content_type(json), "{json}");
        }
        for other in [
            "text/plain",
            "text/plain; charset=utf-8",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/json; charset=latin1",
            "application/jsonx",
            "text/json+plain",
            "",
        ] {
            assert!(!is_json_content_type(other), "{other}");
        }
    }

    #[tokio::test]
    async fn bodies_are_read_whole_within_the_limit_and_the_deadline() {
        let deadline = Instant::now() + Duration::from_secs(1);
        let body = read_body(Body::from("{\"a\": 1}"), 1024, deadline).await;
        assert_eq!(body, Ok(Bytes::from("{\"a\": 1}")));
        let body = read_body(Body::from(vec![b'x'; 2048]), 1024, deadline).await;
        assert_eq!(body, Err(Refusal::TooLarge { drained: true }));
        let (_sender, stalled) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(1);
        let stalled = Body::from_stream(tokio_stream_from(stalled));
        let soon = Instant::now() + Duration::from_millis(50);
        assert_eq!(read_body(stalled, 1024, soon).await, Err(Refusal::TimedOut));
    }

    /// A stream of a channel's items (a body whose sender never sends).
    fn tokio_stream_from(
        mut receiver: tokio::sync::mpsc::Receiver<Result<Bytes, std::io::Error>>,
    ) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> {
        futures_util::stream::poll_fn(move |cx| receiver.poll_recv(cx))
    }
}

//! The OpenAI-compatible memory proxy, forwarded to `proxy.upstream_url`:
//! `POST /v1/chat/completions` and `POST /v1/responses` (plain and SSE streaming) with
//! memory, `POST /v1/embeddings` and `GET /v1/models` passed through.
//!
//! Per chat or responses request: find whose memory it is (`X-Mnemos-Agent-Id`, the
//! key's agent, or the request's `user`), recall for the latest user message, inject a
//! `<memory>` block (into the system message of a chat, into the `instructions` of a
//! response) within `proxy.memory_budget_pct` of the model's context, forward, and
//! return the upstream answer unchanged (status, body, content type) with `X-Mnemos-*`
//! headers. After the answer (for a stream: after its last event) the exchange is
//! remembered in the background: posted to the session named by `X-Mnemos-Session-Id`
//! (which mines it like extract_turn and compacts the session when due), or mined with
//! extract_turn directly when no session is named.
//!
//! Errors mnemos itself answers on these routes carry OpenAI's `type` and `param` next
//! to the contract's `code`, `message` and `field` ([`envelope`]), so an OpenAI SDK reads
//! them like the upstream's own.

pub mod chat;
pub mod envelope;
pub mod responses;
pub mod stream;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use mnemos_actors::error::MemoryError;
use mnemos_actors::model::{AgentId, SessionId};
use mnemos_actors::text::estimate_tokens;
use mnemos_actors::Runtime;
use serde_json::Value;

use crate::auth::{Caller, Scope};
use crate::config::ProxySettings;
use crate::contract::errors::ApiError;
use crate::contract::sessions::{MessageBody, PostMessagesBody};
use crate::contract::wire::{BuildContextBody, ExtractTurnBody};
use crate::contract::{sessions, tools};

/// Header naming the agent whose memory the request uses (else the key's agent, else
/// the request's `user`).
pub const AGENT_HEADER: &str = "x-mnemos-agent-id";
/// Header naming the session the exchange belongs to (optional).
pub const SESSION_HEADER: &str = "x-mnemos-session-id";
/// Header overriding `proxy.context_tokens` for one request.
pub const CONTEXT_TOKENS_HEADER: &str = "x-mnemos-context-tokens";
/// Header overriding `proxy.memory_budget_pct` for one request (clamped like the setting).
pub const BUDGET_PCT_HEADER: &str = "x-mnemos-memory-budget-pct";

/// The routes this module serves; errors on them come in OpenAI's envelope too.
pub const PATHS: [&str; 4] = [
    "/v1/chat/completions",
    "/v1/responses",
    "/v1/embeddings",
    "/v1/models",
];

/// The proxy's settings and its HTTP client (one connection pool for every request).
#[derive(Clone)]
pub struct Proxy {
    /// `[proxy]`.
    settings: ProxySettings,
    /// Client for the upstream API.
    client: reqwest::Client,
}

impl Proxy {
    /// A proxy for `settings` (the client is built even when the proxy is off, so turning it on needs only a restart).
    pub fn new(settings: ProxySettings) -> Result<Self, MemoryError> {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(settings.timeout_seconds))
            .build()
            .map_err(|error| {
                MemoryError::unavailable(format!(
                    "the proxy's HTTP client could not start: {error}"
                ))
            })?;
        Ok(Self { settings, client })
    }

    /// The upstream URL of `path` (`chat/completions`, `responses`, `models`).
    fn upstream(&self, path: &str) -> Result<String, MemoryError> {
        join_url(&self.settings.upstream_url, path).ok_or_else(|| {
            MemoryError::unavailable(
                "the memory proxy is off: set proxy.upstream_url (MNEMOS__PROXY__UPSTREAM_URL) to an OpenAI-compatible API such as http://127.0.0.1:8080/v1",
            )
        })
    }

    /// The upstream URL of `embeddings`: `proxy.embeddings_url` when set (embedding
    /// models are often served apart), else `proxy.upstream_url`.
    fn embeddings_upstream(&self) -> Result<String, MemoryError> {
        match join_url(&self.settings.embeddings_url, "embeddings") {
            Some(url) => Ok(url),
            None => self.upstream("embeddings"),
        }
    }

    /// What goes upstream as `Authorization`: the client's own header when it is not a
    /// mnemos key (a mnemos key never leaves this server), else `proxy.api_key`.
    fn authorization(&self, headers: &HeaderMap) -> Option<HeaderValue> {
        let client = headers
            .get(header::AUTHORIZATION)
            .filter(|value| !is_mnemos_key(value))
            .cloned();
        client.or_else(|| {
            (!self.settings.api_key.is_empty())
                .then(|| HeaderValue::from_str(&format!("Bearer {}", self.settings.api_key)).ok())
                .flatten()
        })
    }

    /// A POST of `body` (JSON) to `url` with the upstream's authorization; `streaming`
    /// asks for an event stream.
    fn post(
        &self,
        url: &str,
        headers: &HeaderMap,
        body: Vec<u8>,
        streaming: bool,
    ) -> reqwest::RequestBuilder {
        let mut forward = self
            .client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        if let Some(auth) = self.authorization(headers) {
            forward = forward.header(reqwest::header::AUTHORIZATION, auth.as_bytes());
        }
        if streaming {
            forward = forward.header(reqwest::header::ACCEPT, "text/event-stream");
        }
        forward
    }
}

/// `base` + `/` + `path`, or None when `base` is empty.
fn join_url(base: &str, path: &str) -> Option<String> {
    (!base.trim().is_empty()).then(|| format!("{}/{path}", base.trim().trim_end_matches('/')))
}

/// What the proxy's handlers share: its client and settings, and the runtime whose
/// memory it injects and writes.
struct ProxyState {
    /// Upstream client and `[proxy]` settings.
    proxy: Proxy,
    /// The runtime the contract's tool functions run on.
    runtime: Runtime,
}

/// The proxy's routes ([`PATHS`]) over `runtime`.
pub fn routes(proxy: Proxy, runtime: Runtime) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat::chat_completions))
        .route("/v1/responses", post(responses::responses))
        .route("/v1/embeddings", post(embeddings))
        .route("/v1/models", get(models))
        .with_state(Arc::new(ProxyState { proxy, runtime }))
}

/// What the proxy put into a request, reported in `X-Mnemos-*` headers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Injection {
    /// Memories in the `<memory>` block.
    pub memories: usize,
    /// Estimated tokens of the block, tags included.
    pub tokens: usize,
    /// The block's budget in tokens.
    pub budget: usize,
    /// Milliseconds spent recalling.
    pub recall_ms: f64,
    /// Why no memory was injected although some was wanted (recall failed), if so.
    pub error: Option<String>,
}

/// The text of a message's `content`: a string, or the text parts of an array (chat
/// `text` parts and the Responses API's `input_text` / `output_text` parts alike).
pub fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The `<memory>` block around an assembled context.
pub fn memory_block(context: &str) -> String {
    format!(
        "<memory>\nWhat you remember about this user and task (most relevant first):\n{context}\n</memory>"
    )
}

fn header_value(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

fn invalid_header(name: &str, message: impl Into<String>) -> ApiError {
    ApiError(MemoryError::invalid(name, message))
}

/// Whether an `Authorization` value carries a mnemos key.
fn is_mnemos_key(value: &HeaderValue) -> bool {
    value.to_str().is_ok_and(|v| {
        let token = v
            .trim_start_matches("Bearer ")
            .trim_start_matches("bearer ")
            .trim();
        token.starts_with(crate::auth::keys::KEY_PREFIX)
            && token[crate::auth::keys::KEY_PREFIX.len()..].starts_with('_')
    })
}

/// The parsed mnemos side of a proxied request.
struct Plan {
    /// Who asks.
    caller: Caller,
    /// Whose memory (as the runtime knows it; its `local()` is what the client named).
    agent: AgentId,
    /// The session named by the caller.
    session: Option<SessionId>,
    /// The latest user message.
    user: Option<String>,
    /// Memory block budget in tokens.
    budget: usize,
}

/// Whose memory a request uses: `X-Mnemos-Agent-Id` when sent; else the key's own
/// agent; else the request body's `user` (OpenAI's end-user id), so a client that can
/// set only `base_url`, `api_key` and `user` works. A key bound to one agent ignores
/// `user` (clients set it for abuse tracking), but refuses a header naming another.
fn whose(caller: &Caller, headers: &HeaderMap, user: Option<&str>) -> Result<AgentId, ApiError> {
    let named = header_value(headers, AGENT_HEADER);
    if named.is_some() || caller.agent.is_some() {
        return caller
            .agent("X-Mnemos-Agent-Id", named.as_deref())
            .map_err(ApiError);
    }
    match user.map(str::trim).filter(|u| !u.is_empty()) {
        Some(user) => caller.agent("user", Some(user)).map_err(ApiError),
        None => Err(ApiError(MemoryError::invalid(
            "X-Mnemos-Agent-Id",
            "name whose memory this conversation uses: the X-Mnemos-Agent-Id header, the request's `user`, or a key bound to one agent",
        ))),
    }
}

/// The request's `user` field (OpenAI's end-user id), when it is a string.
fn user_field(request: &serde_json::Map<String, Value>) -> Option<&str> {
    request.get("user").and_then(Value::as_str)
}

fn plan(
    settings: &ProxySettings,
    caller: &Caller,
    headers: &HeaderMap,
    user_field: Option<&str>,
    latest_user: Option<String>,
) -> Result<Plan, ApiError> {
    let agent = whose(caller, headers, user_field)?;
    let session = header_value(headers, SESSION_HEADER)
        .map(|raw| {
            SessionId::parse(&raw).map_err(|mut e| {
                e.field = Some("X-Mnemos-Session-Id".into());
                ApiError(e)
            })
        })
        .transpose()?;
    let context_tokens = match header_value(headers, CONTEXT_TOKENS_HEADER) {
        Some(raw) => raw
            .parse::<u64>()
            .ok()
            .filter(|n| (256..=10_000_000).contains(n))
            .ok_or_else(|| {
                invalid_header(
                    "X-Mnemos-Context-Tokens",
                    format!("X-Mnemos-Context-Tokens must be a whole number of tokens from 256 to 10000000 (got {raw:?})"),
                )
            })?,
        None => settings.context_tokens,
    };
    let pct = match header_value(headers, BUDGET_PCT_HEADER) {
        Some(raw) => raw
            .parse::<f64>()
            .ok()
            .filter(|p| p.is_finite())
            .ok_or_else(|| {
                invalid_header(
                    "X-Mnemos-Memory-Budget-Pct",
                    format!(
                        "X-Mnemos-Memory-Budget-Pct must be a fraction such as 0.2 (got {raw:?})"
                    ),
                )
            })?,
        None => settings.memory_budget_pct,
    };
    let budget = (context_tokens as f64 * ProxySettings::clamp_budget(pct)).floor() as usize;
    Ok(Plan {
        caller: caller.clone(),
        agent,
        session,
        user: latest_user,
        budget,
    })
}

/// Recall for `plan` and return the `<memory>` block to inject (None: nothing to
/// inject); failures degrade to no memory and say so in the injection.
async fn recall_block(runtime: &Runtime, plan: &Plan) -> (Injection, Option<String>) {
    let mut injection = Injection {
        budget: plan.budget,
        ..Injection::default()
    };
    let Some(query) = plan.user.as_deref() else {
        return (injection, None);
    };
    let wrapper = estimate_tokens(&memory_block(""));
    if plan.budget <= wrapper + 8 {
        return (injection, None);
    }
    let started = Instant::now();
    let body = BuildContextBody {
        agent_id: Some(plan.agent.local().to_string()),
        query: truncate_query(query).to_string(),
        context_budget: Some(plan.budget - wrapper),
        project_root: None,
        session_id: plan.session.as_ref().map(|s| s.as_str().to_string()),
        include_shared: None,
        project_id: None,
    };
    // The proxy never names a project root, so no directory is ever admitted here.
    let built = tools::build_context(
        runtime,
        &plan.caller,
        &crate::context::ProjectRoots::default(),
        body,
    )
    .await;
    injection.recall_ms = started.elapsed().as_secs_f64() * 1000.0;
    match built {
        Ok(context) if context.metadata.injected_count > 0 => {
            let block = memory_block(&context.context);
            injection.tokens = estimate_tokens(&block);
            injection.memories = context.metadata.injected_count;
            metrics::histogram!("mnemos_proxy_injected_memories").record(injection.memories as f64);
            (injection, Some(block))
        }
        Ok(_) => {
            metrics::histogram!("mnemos_proxy_injected_memories").record(0.0);
            (injection, None)
        }
        Err(error) => {
            tracing::warn!(%error, agent = %plan.agent, "proxy recall failed; forwarding without memory");
            injection.error = Some(error.message);
            (injection, None)
        }
    }
}

/// Recall uses at most the last 4 KiB of a long user message (the part being asked).
fn truncate_query(query: &str) -> &str {
    const MAX: usize = 4096;
    if query.len() <= MAX {
        return query;
    }
    let mut start = query.len() - MAX;
    while !query.is_char_boundary(start) {
        start += 1;
    }
    &query[start..]
}

fn mnemos_headers(response: &mut Response, plan: &Plan, injection: &Injection) {
    let headers = response.headers_mut();
    let mut set = |name: &'static str, value: String| {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(HeaderName::from_static(name), value);
        }
    };
    set("x-mnemos-agent-id", plan.agent.local().to_string());
    set("x-mnemos-memories-injected", injection.memories.to_string());
    set("x-mnemos-memory-tokens", injection.tokens.to_string());
    set("x-mnemos-memory-budget", injection.budget.to_string());
    set("x-mnemos-recall-ms", format!("{:.1}", injection.recall_ms));
    if let Some(error) = &injection.error {
        let printable: String = error
            .chars()
            .map(|c| {
                if c.is_ascii() && !c.is_ascii_control() {
                    c
                } else {
                    '?'
                }
            })
            .take(200)
            .collect();
        set("x-mnemos-memory-error", printable);
    }
}

/// One proxied exchange, to be remembered once the assistant's answer is known.
struct Exchange {
    /// The runtime the exchange is written to.
    runtime: Runtime,
    /// Who asked (the exchange is written as them).
    caller: Caller,
    /// `proxy.extract`: mine an exchange outside a session with extract_turn.
    extract: bool,
    /// Whose memory.
    agent: AgentId,
    /// The session named by the caller, whose log takes the exchange.
    session: Option<SessionId>,
    /// The latest user message (nothing is remembered without one).
    user: Option<String>,
}

impl Exchange {
    /// The exchange of `plan` on `state`.
    fn of(state: &ProxyState, plan: &Plan) -> Self {
        Self {
            runtime: state.runtime.clone(),
            caller: plan.caller.clone(),
            extract: state.proxy.settings.extract,
            agent: plan.agent.clone(),
            session: plan.session.clone(),
            user: plan.user.clone(),
        }
    }

    /// Remember the exchange with `assistant`'s answer in the background (see the
    /// module doc).
    fn remember(self, assistant: String) {
        let Some(user) = self.user else {
            return;
        };
        let Self {
            runtime,
            caller,
            extract,
            agent,
            session,
            ..
        } = self;
        tokio::spawn(async move {
            let result = match session {
                Some(session) => {
                    let message = |role: &str, content: String| MessageBody {
                        role: role.to_string(),
                        content,
                        at: None,
                    };
                    let body = PostMessagesBody {
                        agent_id: Some(agent.local().to_string()),
                        role: None,
                        content: None,
                        at: None,
                        messages: Some(vec![
                            message("user", user),
                            message("assistant", assistant),
                        ]),
                    };
                    sessions::post_messages(&runtime, &caller, session.as_str(), body)
                        .await
                        .map(|_| ())
                }
                None if extract => {
                    let body = ExtractTurnBody {
                        agent_id: Some(agent.local().to_string()),
                        user,
                        assistant,
                        session_id: None,
                    };
                    tools::extract_turn(&runtime, &caller, body)
                        .await
                        .map(|_| ())
                }
                None => Ok(()),
            };
            match result {
                Ok(()) => {
                    metrics::counter!("mnemos_proxy_exchanges_total", "outcome" => "remembered")
                        .increment(1)
                }
                Err(error) => {
                    metrics::counter!("mnemos_proxy_exchanges_total", "outcome" => "failed")
                        .increment(1);
                    tracing::warn!(%error, agent = %agent, "the proxy could not remember an exchange");
                }
            }
        });
    }
}

fn upstream_unreachable(error: reqwest::Error) -> ApiError {
    let what = if error.is_timeout() {
        "did not answer in time (proxy.timeout_seconds)"
    } else if error.is_connect() {
        "is unreachable"
    } else {
        "failed"
    };
    ApiError(MemoryError::unavailable(format!(
        "the upstream model API {what}: {error}"
    )))
}

/// The caller the identity layer found (none: the route was reached without it).
fn authenticated(caller: Option<axum::Extension<Caller>>) -> Result<Caller, ApiError> {
    caller.map(|axum::Extension(c)| c).ok_or_else(|| {
        ApiError(crate::auth::unauthenticated(
            "the proxy needs a mnemos API key as the client's api_key",
        ))
    })
}

/// A request body that must be a JSON object (`what` names the API for the message).
fn json_object(body: &Bytes, what: &str) -> Result<serde_json::Map<String, Value>, ApiError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(object)) => Ok(object),
        Ok(_) => Err(ApiError(MemoryError::invalid(
            "body",
            format!("the body must be a JSON object: an OpenAI {what} request"),
        ))),
        Err(error) => Err(ApiError(MemoryError::invalid(
            "body",
            format!("the body must be an OpenAI {what} request in JSON: {error}"),
        ))),
    }
}

fn encode(request: &serde_json::Map<String, Value>) -> Result<Vec<u8>, ApiError> {
    serde_json::to_vec(request).map_err(|e| ApiError(MemoryError::internal(e.to_string())))
}

/// The upstream's answer as this server's response: its status, content type and
/// body. A failure body that is not JSON (a gateway's HTML page, say) is wrapped in
/// OpenAI's error envelope so clients can still read it.
fn passed_through(
    status: reqwest::StatusCode,
    content_type: Option<HeaderValue>,
    bytes: Bytes,
) -> Response {
    let status = StatusCode::from_u16(status.as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let is_json = content_type
        .as_ref()
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("json"));
    if !status.is_success() {
        metrics::counter!("mnemos_proxy_upstream_errors_total", "status" => status.as_u16().to_string())
            .increment(1);
        if !is_json || serde_json::from_slice::<Value>(&bytes).is_err() {
            return (
                status,
                axum::Json(envelope::upstream_failure(status, &bytes)),
            )
                .into_response();
        }
    }
    let mut response = Response::new(Body::from(bytes));
    *response.status_mut() = status;
    if let Some(content_type) = content_type {
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, content_type);
    }
    response
}

/// The content type of an upstream response.
fn content_type(upstream: &reqwest::Response) -> Option<HeaderValue> {
    upstream
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| HeaderValue::from_bytes(v.as_bytes()).ok())
}

/// A streamed upstream answer as this server's response (events forwarded as they
/// arrive; `exchange` remembered after the last one when `dialect` saw it complete).
fn streamed(upstream: reqwest::Response, dialect: stream::Dialect, exchange: Exchange) -> Response {
    let content_type = content_type(&upstream);
    let mut response = Response::new(stream::through(upstream, dialect, exchange));
    if let Some(content_type) = content_type {
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, content_type);
    }
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// Send a request that carries memory upstream and answer with what came back: a
/// stream forwarded event by event, or a body whose assistant text (`answer_of`) is
/// remembered with the exchange.
async fn exchange_upstream(
    state: &ProxyState,
    plan: &Plan,
    forward: reqwest::RequestBuilder,
    streaming: bool,
    dialect: stream::Dialect,
) -> Result<Response, ApiError> {
    let upstream = forward.send().await.map_err(upstream_unreachable)?;
    let exchange = Exchange::of(state, plan);
    if streaming && upstream.status().is_success() {
        return Ok(streamed(upstream, dialect, exchange));
    }
    let status = upstream.status();
    let content_type = content_type(&upstream);
    let bytes = upstream.bytes().await.map_err(upstream_unreachable)?;
    if status.is_success() {
        let answer = serde_json::from_slice::<Value>(&bytes)
            .ok()
            .as_ref()
            .and_then(|body| dialect.answer(body));
        if let Some(answer) = answer {
            exchange.remember(answer);
        }
    }
    Ok(passed_through(status, content_type, bytes))
}

/// `POST /v1/embeddings`: passed through to the embeddings upstream unchanged (no
/// memory is read or written; the key must be able to read).
async fn embeddings(
    State(state): State<Arc<ProxyState>>,
    caller: Option<axum::Extension<Caller>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    authenticated(caller)?.require(Scope::Read)?;
    let proxy = &state.proxy;
    let url = proxy.embeddings_upstream()?;
    let request = json_object(&body, "embeddings")?;
    if !request.contains_key("input") {
        return Err(ApiError(MemoryError::invalid(
            "input",
            "input is required: a string or an array of strings to embed",
        )));
    }
    let upstream = proxy
        .post(&url, &headers, body.to_vec(), false)
        .send()
        .await
        .map_err(upstream_unreachable)?;
    let status = upstream.status();
    let content_type = content_type(&upstream);
    let bytes = upstream.bytes().await.map_err(upstream_unreachable)?;
    Ok(passed_through(status, content_type, bytes))
}

/// `GET /v1/models`: the upstream's model list, unchanged.
async fn models(
    State(state): State<Arc<ProxyState>>,
    caller: Option<axum::Extension<Caller>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    authenticated(caller)?.require(Scope::Read)?;
    let proxy = &state.proxy;
    let mut forward = proxy.client.get(proxy.upstream("models")?);
    if let Some(auth) = proxy.authorization(&headers) {
        forward = forward.header(reqwest::header::AUTHORIZATION, auth.as_bytes());
    }
    let upstream = forward.send().await.map_err(upstream_unreachable)?;
    let status = upstream.status();
    let content_type = content_type(&upstream);
    let bytes = upstream.bytes().await.map_err(upstream_unreachable)?;
    Ok(passed_through(status, content_type, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> ProxySettings {
        ProxySettings {
            upstream_url: "http://x/v1".into(),
            embeddings_url: String::new(),
            api_key: String::new(),
            memory_budget_pct: 0.2,
            context_tokens: 1000,
            timeout_seconds: 10,
            extract: true,
        }
    }

    #[test]
    fn the_budget_is_clamped_and_headers_are_checked() {
        let settings = settings();
        let mut headers = HeaderMap::new();
        let operator = Caller::operator(crate::auth::Surface::Proxy);
        let plan = |settings: &ProxySettings, headers: &HeaderMap| {
            plan(settings, &operator, headers, None, None)
        };
        assert!(
            plan(&settings, &headers).is_err(),
            "the agent header is required"
        );
        headers.insert(AGENT_HEADER, HeaderValue::from_static("alice"));
        assert_eq!(plan(&settings, &headers).unwrap().budget, 200);
        headers.insert(BUDGET_PCT_HEADER, HeaderValue::from_static("0.9"));
        assert_eq!(plan(&settings, &headers).unwrap().budget, 400);
        headers.insert(BUDGET_PCT_HEADER, HeaderValue::from_static("0.01"));
        assert_eq!(plan(&settings, &headers).unwrap().budget, 50);
        headers.insert(CONTEXT_TOKENS_HEADER, HeaderValue::from_static("lots"));
        let error = plan(&settings, &headers).err().unwrap();
        assert_eq!(error.0.field.as_deref(), Some("X-Mnemos-Context-Tokens"));
        headers.insert(AGENT_HEADER, HeaderValue::from_static("bad agent"));
        assert!(plan(&settings, &headers).is_err());
    }

    #[test]
    fn the_agent_comes_from_the_header_then_the_key_then_user() {
        let operator = Caller::operator(crate::auth::Surface::Proxy);
        let mut headers = HeaderMap::new();
        let agent = |caller: &Caller, headers: &HeaderMap, user: Option<&str>| {
            whose(caller, headers, user).map(|a| a.local().to_string())
        };
        assert_eq!(agent(&operator, &headers, Some("u-7")).unwrap(), "u-7");
        let error = agent(&operator, &headers, Some("no spaces")).unwrap_err();
        assert_eq!(error.0.field.as_deref(), Some("user"));
        let error = agent(&operator, &headers, None).unwrap_err();
        assert_eq!(error.0.field.as_deref(), Some("X-Mnemos-Agent-Id"));
        headers.insert(AGENT_HEADER, HeaderValue::from_static("pia"));
        assert_eq!(agent(&operator, &headers, Some("u-7")).unwrap(), "pia");
        // A key bound to one agent ignores `user`.
        let bound = Caller {
            agent: Some(AgentId::parse("pia").unwrap()),
            ..operator.clone()
        };
        assert_eq!(
            agent(&bound, &HeaderMap::new(), Some("u-7")).unwrap(),
            "pia"
        );
    }

    #[test]
    fn urls_join_and_embeddings_fall_back_to_the_upstream() {
        let mut settings = settings();
        let proxy = Proxy::new(settings.clone()).unwrap();
        assert_eq!(
            proxy.embeddings_upstream().unwrap(),
            "http://x/v1/embeddings"
        );
        settings.embeddings_url = "http://e:9/v1/".into();
        settings.upstream_url = String::new();
        let proxy = Proxy::new(settings).unwrap();
        assert_eq!(
            proxy.embeddings_upstream().unwrap(),
            "http://e:9/v1/embeddings"
        );
        assert!(proxy.upstream("responses").is_err());
    }

    #[test]
    fn a_failure_that_is_not_json_comes_back_in_openais_envelope() {
        let response = passed_through(
            reqwest::StatusCode::BAD_GATEWAY,
            Some(HeaderValue::from_static("text/html")),
            Bytes::from_static(b"<html>bad gateway</html>"),
        );
        assert_eq!(response.status(), StatusCode::BAD_GATEWAY);
        let response = passed_through(
            reqwest::StatusCode::TOO_MANY_REQUESTS,
            Some(HeaderValue::from_static("application/json")),
            Bytes::from_static(br#"{"error":{"message":"slow down"}}"#),
        );
        assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
    }
}

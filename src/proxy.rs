//! The OpenAI-compatible memory proxy: `POST /v1/chat/completions` (plain and SSE
//! streaming) and `GET /v1/models`, forwarded to `proxy.upstream_url`.
//!
//! Per request: recall for the latest user message, inject a `<memory>` block into the
//! system message within `proxy.memory_budget_pct` of the model's context, forward, and
//! return the upstream answer unchanged (status, body, content type) with `X-Mnemos-*`
//! headers. After the answer (for a stream: after its last chunk) the exchange is
//! remembered in the background: posted to the session named by `X-Mnemos-Session-Id`
//! (which mines it with extract_turn and compacts the session when due), or mined with
//! extract_turn directly when no session is named.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use futures_util::StreamExt;
use mnemos_actors::error::MemoryError;
use mnemos_actors::model::{AgentId, SessionId};
use mnemos_actors::text::estimate_tokens;
use mnemos_actors::Runtime;
use serde_json::Value;

use crate::auth::Caller;
use crate::config::ProxySettings;
use crate::contract::errors::ApiError;
use crate::contract::sessions::{MessageBody, PostMessagesBody};
use crate::contract::wire::{BuildContextBody, ExtractTurnBody};
use crate::contract::{sessions, tools};

/// Header naming the agent whose memory the request uses (required unless the key is
/// bound to one agent).
pub const AGENT_HEADER: &str = "x-mnemos-agent-id";
/// Header naming the session the exchange belongs to (optional).
pub const SESSION_HEADER: &str = "x-mnemos-session-id";
/// Header overriding `proxy.context_tokens` for one request.
pub const CONTEXT_TOKENS_HEADER: &str = "x-mnemos-context-tokens";
/// Header overriding `proxy.memory_budget_pct` for one request (clamped like the setting).
pub const BUDGET_PCT_HEADER: &str = "x-mnemos-memory-budget-pct";

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

    fn upstream(&self, path: &str) -> Result<String, MemoryError> {
        if self.settings.upstream_url.is_empty() {
            return Err(MemoryError::unavailable(
                "the memory proxy is off: set proxy.upstream_url (MNEMOS__PROXY__UPSTREAM_URL) to an OpenAI-compatible API such as http://127.0.0.1:8080/v1",
            ));
        }
        Ok(format!(
            "{}/{path}",
            self.settings.upstream_url.trim_end_matches('/')
        ))
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
}

/// What the proxy's handlers share: its client and settings, and the runtime whose
/// memory it injects and writes.
struct ProxyState {
    /// Upstream client and `[proxy]` settings.
    proxy: Proxy,
    /// The runtime the contract's tool functions run on.
    runtime: Runtime,
}

/// The proxy's routes, `POST /v1/chat/completions` and `GET /v1/models`, over `runtime`.
pub fn routes(proxy: Proxy, runtime: Runtime) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat_completions))
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

/// The text of a chat message's `content`: a string, or the text parts of an array.
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

/// The latest user message of a chat request, if any.
pub fn latest_user_message(messages: &[Value]) -> Option<String> {
    messages
        .iter()
        .rev()
        .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .and_then(|m| m.get("content"))
        .map(content_text)
        .filter(|text| !text.trim().is_empty())
}

/// Put `block` into the request's system message: appended to the first system (or
/// developer) message when there is one, else as a new system message in front.
pub fn inject_memory(messages: &mut Vec<Value>, block: &str) {
    let system = messages.iter_mut().find(|m| {
        matches!(
            m.get("role").and_then(Value::as_str),
            Some("system" | "developer")
        )
    });
    match system.and_then(|m| m.as_object_mut()) {
        Some(message) => match message.get_mut("content") {
            Some(Value::String(text)) => {
                text.push_str("\n\n");
                text.push_str(block);
            }
            Some(Value::Array(parts)) => {
                parts.push(serde_json::json!({"type": "text", "text": block}));
            }
            _ => {
                message.insert("content".into(), Value::String(block.to_string()));
            }
        },
        None => messages.insert(0, serde_json::json!({"role": "system", "content": block})),
    }
}

/// The `<memory>` block around an assembled context.
pub fn memory_block(context: &str) -> String {
    format!(
        "<memory>\nWhat you remember about this user and task (most relevant first):\n{context}\n</memory>"
    )
}

/// The assistant's text in a (non-streamed) chat completion.
pub fn completion_text(body: &Value) -> Option<String> {
    body.pointer("/choices/0/message/content")
        .map(content_text)
        .filter(|text| !text.is_empty())
}

/// Accumulates the assistant's text from SSE chunks of a streamed completion.
#[derive(Debug, Default)]
pub struct StreamTranscript {
    /// Bytes of an unfinished line carried to the next chunk.
    pending: Vec<u8>,
    /// Text of `choices[0].delta.content` so far.
    text: String,
    /// True once `data: [DONE]` arrived.
    done: bool,
}

impl StreamTranscript {
    /// Feed one chunk of the upstream body.
    pub fn feed(&mut self, chunk: &[u8]) {
        self.pending.extend_from_slice(chunk);
        while let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            let Some(data) = line.trim().strip_prefix("data:") else {
                continue;
            };
            let data = data.trim();
            if data == "[DONE]" {
                self.done = true;
                continue;
            }
            if let Ok(event) = serde_json::from_str::<Value>(data) {
                if let Some(delta) = event
                    .pointer("/choices/0/delta/content")
                    .and_then(Value::as_str)
                {
                    self.text.push_str(delta);
                }
            }
        }
    }

    /// The text so far, and whether the stream said it was complete.
    pub fn finish(self) -> (String, bool) {
        (self.text, self.done)
    }
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

fn plan(
    settings: &ProxySettings,
    caller: &Caller,
    headers: &HeaderMap,
    messages: &[Value],
) -> Result<Plan, ApiError> {
    let named = header_value(headers, AGENT_HEADER);
    let agent = caller
        .agent("X-Mnemos-Agent-Id", named.as_deref())
        .map_err(|mut e| {
            if named.is_none() {
                e.message = "the X-Mnemos-Agent-Id header is required: it names whose memory this conversation uses".into();
            }
            ApiError(e)
        })?;
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
        Some(raw) => {
            raw.parse::<f64>()
                .ok()
                .filter(|p| p.is_finite())
                .ok_or_else(|| {
                    invalid_header(
                "X-Mnemos-Memory-Budget-Pct",
                format!("X-Mnemos-Memory-Budget-Pct must be a fraction such as 0.2 (got {raw:?})"),
            )
                })?
        }
        None => settings.memory_budget_pct,
    };
    let budget = (context_tokens as f64 * ProxySettings::clamp_budget(pct)).floor() as usize;
    Ok(Plan {
        caller: caller.clone(),
        agent,
        session,
        user: latest_user_message(messages),
        budget,
    })
}

/// Recall for `plan` and inject the block; failures degrade to no memory (and say so).
async fn inject(runtime: &Runtime, plan: &Plan, messages: &mut Vec<Value>) -> Injection {
    let mut injection = Injection {
        budget: plan.budget,
        ..Injection::default()
    };
    let Some(query) = plan.user.as_deref() else {
        return injection;
    };
    let wrapper = estimate_tokens(&memory_block(""));
    if plan.budget <= wrapper + 8 {
        return injection;
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
            inject_memory(messages, &block);
        }
        Ok(_) => {}
        Err(error) => {
            tracing::warn!(%error, agent = %plan.agent, "proxy recall failed; forwarding without memory");
            injection.error = Some(error.message);
        }
    }
    injection
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

/// Remember one exchange in the background (see the module doc).
fn remember_exchange(
    runtime: Runtime,
    caller: Caller,
    extract: bool,
    agent: AgentId,
    session: Option<SessionId>,
    user: String,
    assistant: String,
) {
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
                    messages: Some(vec![message("user", user), message("assistant", assistant)]),
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
            Ok(()) => metrics::counter!("mnemos_proxy_exchanges_total", "outcome" => "remembered")
                .increment(1),
            Err(error) => {
                metrics::counter!("mnemos_proxy_exchanges_total", "outcome" => "failed")
                    .increment(1);
                tracing::warn!(%error, agent = %agent, "the proxy could not remember an exchange");
            }
        }
    });
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

/// Copy the upstream response's status and content type.
fn upstream_head(upstream: &reqwest::Response) -> (StatusCode, Option<HeaderValue>) {
    let status =
        StatusCode::from_u16(upstream.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let content_type = upstream
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| HeaderValue::from_bytes(v.as_bytes()).ok());
    (status, content_type)
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
    /// Remember the exchange with `assistant`'s answer in the background.
    fn remember(self, assistant: String) {
        if let Some(user) = self.user {
            remember_exchange(
                self.runtime,
                self.caller,
                self.extract,
                self.agent,
                self.session,
                user,
                assistant,
            );
        }
    }
}

/// Forward a streamed answer chunk by chunk as it arrives; remember the exchange after
/// the last chunk, unless the client left or the stream did not say it was complete.
fn stream_through(upstream: reqwest::Response, exchange: Exchange) -> Body {
    let (sender, receiver) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(32);
    tokio::spawn(async move {
        let mut transcript = StreamTranscript::default();
        let mut chunks = upstream.bytes_stream();
        let mut client_gone = false;
        while let Some(chunk) = chunks.next().await {
            match chunk {
                Ok(bytes) => {
                    transcript.feed(&bytes);
                    if sender.send(Ok(bytes)).await.is_err() {
                        client_gone = true;
                        break;
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "the upstream stream broke off");
                    let _ = sender
                        .send(Err(std::io::Error::other(error.to_string())))
                        .await;
                    break;
                }
            }
        }
        drop(sender);
        let (text, complete) = transcript.finish();
        if client_gone || !complete {
            tracing::debug!(
                client_gone,
                complete,
                "incomplete stream: the exchange is not remembered"
            );
            return;
        }
        if !text.trim().is_empty() {
            exchange.remember(text);
        }
    });
    let stream = futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|item| (item, receiver))
    });
    Body::from_stream(stream)
}

/// The caller the identity layer found (none: the route was reached without it).
fn authenticated(caller: Option<axum::Extension<Caller>>) -> Result<Caller, ApiError> {
    caller.map(|axum::Extension(c)| c).ok_or_else(|| {
        ApiError(crate::auth::unauthenticated(
            "the proxy needs a mnemos API key as the client's api_key",
        ))
    })
}

/// `POST /v1/chat/completions`: the memory proxy.
async fn chat_completions(
    State(state): State<Arc<ProxyState>>,
    caller: Option<axum::Extension<Caller>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let caller = authenticated(caller)?;
    caller.require(crate::auth::Scope::Read)?;
    caller.require(crate::auth::Scope::Write)?;
    let proxy = &state.proxy;
    let url = proxy.upstream("chat/completions")?;
    let mut request: Value = serde_json::from_slice(&body).map_err(|error| {
        ApiError(MemoryError::invalid(
            "body",
            format!("the body must be an OpenAI chat completion request in JSON: {error}"),
        ))
    })?;
    let Some(object) = request.as_object_mut() else {
        return Err(ApiError(MemoryError::invalid(
            "body",
            "the body must be a JSON object with model and messages",
        )));
    };
    let streaming = object.get("stream").and_then(Value::as_bool) == Some(true);
    let Some(Value::Array(messages)) = object.get_mut("messages") else {
        return Err(ApiError(MemoryError::invalid(
            "messages",
            "messages is required: an array of {role, content}",
        )));
    };
    let plan = plan(&proxy.settings, &caller, &headers, messages)?;
    let injection = inject(&state.runtime, &plan, messages).await;
    metrics::histogram!("mnemos_proxy_injected_memories").record(injection.memories as f64);

    let mut forward = proxy
        .client
        .post(&url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(
            serde_json::to_vec(&request)
                .map_err(|e| ApiError(MemoryError::internal(e.to_string())))?,
        );
    if let Some(auth) = proxy.authorization(&headers) {
        forward = forward.header(reqwest::header::AUTHORIZATION, auth.as_bytes());
    }
    if streaming {
        forward = forward.header(reqwest::header::ACCEPT, "text/event-stream");
    }
    let upstream = forward.send().await.map_err(upstream_unreachable)?;
    let (status, content_type) = upstream_head(&upstream);
    let succeeded = status.is_success();
    let exchange = Exchange {
        runtime: state.runtime.clone(),
        caller: plan.caller.clone(),
        extract: proxy.settings.extract,
        agent: plan.agent.clone(),
        session: plan.session.clone(),
        user: plan.user.clone(),
    };
    let mut response = if streaming && succeeded {
        Response::new(stream_through(upstream, exchange))
    } else {
        let bytes = upstream.bytes().await.map_err(upstream_unreachable)?;
        if succeeded {
            let answer = serde_json::from_slice::<Value>(&bytes)
                .ok()
                .as_ref()
                .and_then(completion_text);
            if let Some(answer) = answer {
                exchange.remember(answer);
            }
        } else {
            metrics::counter!("mnemos_proxy_upstream_errors_total", "status" => status.as_u16().to_string()).increment(1);
        }
        Response::new(Body::from(bytes))
    };
    *response.status_mut() = status;
    if let Some(content_type) = content_type {
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, content_type);
    }
    if streaming && succeeded {
        response
            .headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    }
    mnemos_headers(&mut response, &plan, &injection);
    Ok(response)
}

/// `GET /v1/models`: the upstream's model list, unchanged.
async fn models(
    State(state): State<Arc<ProxyState>>,
    caller: Option<axum::Extension<Caller>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    authenticated(caller)?.require(crate::auth::Scope::Read)?;
    let proxy = &state.proxy;
    let mut forward = proxy.client.get(proxy.upstream("models")?);
    if let Some(auth) = proxy.authorization(&headers) {
        forward = forward.header(reqwest::header::AUTHORIZATION, auth.as_bytes());
    }
    let upstream = forward.send().await.map_err(upstream_unreachable)?;
    let (status, content_type) = upstream_head(&upstream);
    let bytes = upstream.bytes().await.map_err(upstream_unreachable)?;
    let mut response = Body::from(bytes).into_response();
    *response.status_mut() = status;
    if let Some(content_type) = content_type {
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, content_type);
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn memory_joins_the_first_system_message() {
        let mut messages = vec![
            json!({"role": "system", "content": "Be brief."}),
            json!({"role": "user", "content": "hi"}),
        ];
        inject_memory(&mut messages, "<memory>x</memory>");
        assert_eq!(messages.len(), 2);
        assert_eq!(messages[0]["content"], "Be brief.\n\n<memory>x</memory>");
    }

    #[test]
    fn without_a_system_message_one_is_added_in_front() {
        let mut messages = vec![json!({"role": "user", "content": "hi"})];
        inject_memory(&mut messages, "<memory>x</memory>");
        assert_eq!(
            messages[0],
            json!({"role": "system", "content": "<memory>x</memory>"})
        );
        assert_eq!(messages[1]["role"], "user");
    }

    #[test]
    fn content_parts_get_a_text_part() {
        let mut messages =
            vec![json!({"role": "developer", "content": [{"type": "text", "text": "rules"}]})];
        inject_memory(&mut messages, "<memory>x</memory>");
        assert_eq!(messages[0]["content"][1]["text"], "<memory>x</memory>");
    }

    #[test]
    fn the_latest_user_message_is_the_query() {
        let messages = vec![
            json!({"role": "user", "content": "first"}),
            json!({"role": "assistant", "content": "ok"}),
            json!({"role": "user", "content": [{"type": "text", "text": "second"}, {"type": "image_url", "image_url": {"url": "x"}}]}),
            json!({"role": "tool", "content": "result"}),
        ];
        assert_eq!(latest_user_message(&messages).as_deref(), Some("second"));
        assert_eq!(
            latest_user_message(&[json!({"role": "system", "content": "x"})]),
            None
        );
    }

    #[test]
    fn stream_transcript_joins_deltas_across_chunk_boundaries() {
        let mut transcript = StreamTranscript::default();
        let body = "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n\
                    data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n\
                    data: {\"choices\":[{\"delta\":{\"content\":\"lo\"}}]}\n\n\
                    data: [DONE]\n\n";
        for chunk in body.as_bytes().chunks(7) {
            transcript.feed(chunk);
        }
        assert_eq!(transcript.finish(), ("Hello".to_string(), true));
        let mut cut = StreamTranscript::default();
        cut.feed(b"data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n");
        assert_eq!(cut.finish(), ("Hi".to_string(), false));
    }

    #[test]
    fn completion_text_reads_the_first_choice() {
        let body = json!({"choices": [{"message": {"role": "assistant", "content": "Paris."}}]});
        assert_eq!(completion_text(&body).as_deref(), Some("Paris."));
        assert_eq!(completion_text(&json!({"choices": []})), None);
    }

    #[test]
    fn the_budget_is_clamped_and_headers_are_checked() {
        let settings = ProxySettings {
            upstream_url: "http://x/v1".into(),
            api_key: String::new(),
            memory_budget_pct: 0.2,
            context_tokens: 1000,
            timeout_seconds: 10,
            extract: true,
        };
        let mut headers = HeaderMap::new();
        let operator = Caller::operator(crate::auth::Surface::Proxy);
        let plan = |settings: &ProxySettings, headers: &HeaderMap, messages: &[Value]| {
            plan(settings, &operator, headers, messages)
        };
        assert!(
            plan(&settings, &headers, &[]).is_err(),
            "the agent header is required"
        );
        headers.insert(AGENT_HEADER, HeaderValue::from_static("alice"));
        assert_eq!(plan(&settings, &headers, &[]).unwrap().budget, 200);
        headers.insert(BUDGET_PCT_HEADER, HeaderValue::from_static("0.9"));
        assert_eq!(plan(&settings, &headers, &[]).unwrap().budget, 400);
        headers.insert(BUDGET_PCT_HEADER, HeaderValue::from_static("0.01"));
        assert_eq!(plan(&settings, &headers, &[]).unwrap().budget, 50);
        headers.insert(CONTEXT_TOKENS_HEADER, HeaderValue::from_static("lots"));
        let error = plan(&settings, &headers, &[]).err().unwrap();
        assert_eq!(error.0.field.as_deref(), Some("X-Mnemos-Context-Tokens"));
        headers.insert(AGENT_HEADER, HeaderValue::from_static("bad agent"));
        assert!(plan(&settings, &headers, &[]).is_err());
    }
}

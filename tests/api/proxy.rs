//! The OpenAI-compatible memory proxy (`/v1/chat/completions`, `/v1/models`):
//! - with the official `openai` Python SDK (`tests/proxy_client.py`) against the real
//!   llama-server `.ci/run` starts (plain, streaming, upstream errors, a missing agent);
//! - against a recording upstream in this process, to check byte for byte what was
//!   forwarded (the `<memory>` block in the system message, its budget) and what came back.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::StatusCode as AxumStatus;
use axum::response::IntoResponse;
use axum::routing::post;
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::*;

/// The client script.
const CLIENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/proxy_client.py");

/// Whether the OpenAI SDK is importable; when it is not, fail under CI or say SKIPPED.
async fn sdk_available(test: &str) -> bool {
    let probe = tokio::process::Command::new("python3")
        .args(["-c", "import openai"])
        .output()
        .await;
    if probe.is_ok_and(|output| output.status.success()) {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI must install the OpenAI Python SDK (python3 -m pip install openai)"
    );
    skipped(test, "pip install openai");
    false
}

async fn proxy_app(upstream: &str, context_tokens: u64) -> TestApp {
    let temp = tempfile::tempdir().unwrap();
    let mut settings = test_settings(temp.path());
    settings.proxy.upstream_url = upstream.to_string();
    settings.proxy.context_tokens = context_tokens;
    spawn_with(settings, Some(temp)).await
}

async fn remember_billing_facts(app: &TestApp, agent: &str) {
    for fact in [
        "The billing service stores invoices in PostgreSQL 16.",
        "The billing service listens on port 8443 behind the gateway.",
        "The billing service is owned by the payments team.",
    ] {
        app.remember(agent, fact, json!({"type": "semantic"})).await;
    }
}

#[tokio::test]
async fn the_openai_sdk_talks_to_a_real_model_through_the_proxy() {
    let test = "the_openai_sdk_talks_to_a_real_model_through_the_proxy";
    let Some(url) = llm_url(test) else {
        return;
    };
    if !sdk_available(test).await {
        return;
    }
    let embeddings = embed_url(test).unwrap_or_default();
    let temp = tempfile::tempdir().unwrap();
    let mut settings = test_settings(temp.path());
    settings.proxy.upstream_url = url.clone();
    settings.proxy.embeddings_url = embeddings.clone();
    settings.proxy.context_tokens = 2048;
    let app = spawn_with(settings, Some(temp)).await;
    remember_billing_facts(&app, "pia").await;
    let output = tokio::time::timeout(
        Duration::from_secs(300),
        tokio::process::Command::new("python3")
            .arg(CLIENT)
            .env("MNEMOS_URL", &app.address)
            .env("UPSTREAM_URL", &url)
            .env("EMBED_URL", &embeddings)
            .env("AGENT", "pia")
            .env("EMPTY_AGENT", "nobody")
            .env("SESSION", "chat-1")
            .env("RESPONSES_SESSION", "chat-2")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the client finishes within five minutes")
    .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "tests/proxy_client.py failed\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
    let summary: Value = serde_json::from_str(&stdout).expect("a JSON summary");
    assert_eq!(summary["ok"], true, "{summary}");
    // 20% of 2048 tokens.
    assert_eq!(summary["plain"]["budget"], 409);

    // Both exchanges with a session header were remembered in that session, after the answers.
    let logged = eventually(Duration::from_secs(20), || async {
        let view = app.get("/v1/sessions/chat-1/messages?agent_id=pia").await;
        view.status() == StatusCode::OK
            && view.json::<Value>().await.unwrap()["total_messages"] == 4
    })
    .await;
    assert!(
        logged,
        "the proxied exchanges did not reach the session log"
    );
    let view = app.get("/v1/sessions/chat-1/messages?agent_id=pia").await;
    let view = assert_status(view, StatusCode::OK).await;
    let roles: Vec<&str> = view["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant"]);
    assert_eq!(
        view["messages"][3]["content"], summary["stream"]["answer"],
        "the streamed answer is remembered as streamed"
    );
    // The Responses API's two exchanges (plain, streamed) went to their own session.
    let logged = eventually(Duration::from_secs(20), || async {
        let view = app.get("/v1/sessions/chat-2/messages?agent_id=pia").await;
        view.status() == StatusCode::OK
            && view.json::<Value>().await.unwrap()["total_messages"] == 4
    })
    .await;
    assert!(
        logged,
        "the Responses API exchanges did not reach the session log"
    );
    let view = app.get("/v1/sessions/chat-2/messages?agent_id=pia").await;
    let view = assert_status(view, StatusCode::OK).await;
    assert_eq!(
        view["messages"][3]["content"], summary["responses_stream"]["answer"],
        "the streamed response is remembered as streamed"
    );
    // The agent without memories got no session and no memory from the proxy.
    let nobody = app
        .get("/v1/sessions/chat-1/messages?agent_id=nobody")
        .await;
    assert_error(nobody, StatusCode::NOT_FOUND, "not_found", None).await;
}

/// What the recording upstream received.
#[derive(Default)]
struct Recorded {
    /// Bodies of chat completion requests.
    bodies: Vec<Value>,
    /// Authorization headers.
    authorization: Vec<Option<String>>,
}

/// An upstream that records each request and answers according to the request's `model`:
/// `fail` → 429 with an OpenAI error body, `stream` → three SSE chunks, else a completion.
async fn recording_upstream() -> (String, Arc<Mutex<Recorded>>) {
    let recorded = Arc::new(Mutex::new(Recorded::default()));
    let state = recorded.clone();
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        post(
            move |headers: axum::http::HeaderMap, axum::Json(body): axum::Json<Value>| {
                let state = state.clone();
                async move {
                    {
                        let mut recorded = state.lock().unwrap();
                        recorded.bodies.push(body.clone());
                        recorded.authorization.push(
                            headers
                                .get("authorization")
                                .map(|v| v.to_str().unwrap().to_string()),
                        );
                    }
                    match body["model"].as_str() {
                        Some("fail") => (
                            AxumStatus::TOO_MANY_REQUESTS,
                            [("content-type", "application/json"), ("retry-after", "7")],
                            r#"{"error":{"message":"slow down","type":"rate_limit"}}"#.to_string(),
                        )
                            .into_response(),
                        Some("stream") => (
                            AxumStatus::OK,
                            [("content-type", "text/event-stream")],
                            [
                                r#"data: {"choices":[{"index":0,"delta":{"role":"assistant"}}]}"#,
                                r#"data: {"choices":[{"index":0,"delta":{"content":"Port "}}]}"#,
                                r#"data: {"choices":[{"index":0,"delta":{"content":"8443."}}]}"#,
                                "data: [DONE]",
                            ]
                            .map(|line| format!("{line}\n\n"))
                            .concat(),
                        )
                            .into_response(),
                        _ => axum::Json(json!({
                            "id": "x", "object": "chat.completion", "model": "m",
                            "choices": [{"index": 0, "finish_reason": "stop",
                                "message": {"role": "assistant", "content": "It uses PostgreSQL 16."}}],
                        }))
                        .into_response(),
                    }
                }
            },
        ),
    );
    let responses_state = recorded.clone();
    let app = app.route(
        "/v1/responses",
        post(move |axum::Json(body): axum::Json<Value>| {
            let state = responses_state.clone();
            async move {
                state.lock().unwrap().bodies.push(body.clone());
                match body["model"].as_str() {
                    Some("stream") => (
                        AxumStatus::OK,
                        [("content-type", "text/event-stream")],
                        [
                            ("response.created", json!({"type": "response.created"})),
                            (
                                "response.output_text.delta",
                                json!({"type": "response.output_text.delta", "delta": "Port "}),
                            ),
                            (
                                "response.output_text.delta",
                                json!({"type": "response.output_text.delta", "delta": "8443."}),
                            ),
                            ("response.completed", json!({"type": "response.completed"})),
                        ]
                        .map(|(event, data)| format!("event: {event}\ndata: {data}\n\n"))
                        .concat(),
                    )
                        .into_response(),
                    Some("html") => (
                        AxumStatus::BAD_GATEWAY,
                        [("content-type", "text/html")],
                        "<html><body>502 Bad Gateway</body></html>",
                    )
                        .into_response(),
                    _ => axum::Json(json!({
                        "id": "resp_1", "object": "response", "status": "completed",
                        "output": [{"type": "message", "role": "assistant", "content": [
                            {"type": "output_text", "text": "It uses PostgreSQL 16."}]}],
                    }))
                    .into_response(),
                }
            }
        }),
    );
    let embeddings_state = recorded.clone();
    let app = app.route(
        "/v1/embeddings",
        post(move |axum::Json(body): axum::Json<Value>| {
            let state = embeddings_state.clone();
            async move {
                state.lock().unwrap().bodies.push(body.clone());
                axum::Json(json!({"object": "list", "model": body["model"],
                    "data": [{"object": "embedding", "index": 0, "embedding": [0.25, -0.5]}]}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{address}/v1"), recorded)
}

/// POST `body` to the proxy route `path` with `headers`.
async fn proxied(
    app: &TestApp,
    path: &str,
    headers: &[(&str, &str)],
    body: Value,
) -> reqwest::Response {
    let mut request = app
        .client
        .post(format!("{}{path}", app.address))
        .json(&body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.expect("request sent")
}

/// An error body in both envelopes at once: the contract's `code`/`field` and OpenAI's
/// `type`/`param`.
async fn assert_openai_error(
    response: reqwest::Response,
    status: StatusCode,
    code: &str,
    kind: &str,
    param: Option<&str>,
) -> Value {
    let body = assert_error(response, status, code, param).await;
    assert_eq!(body["error"]["type"], kind, "{body}");
    assert_eq!(body["error"]["param"], json!(param), "{body}");
    body
}

#[tokio::test]
async fn responses_carry_memory_in_their_instructions_and_are_remembered() {
    let (upstream, recorded) = recording_upstream().await;
    let app = proxy_app(&upstream, 1000).await;
    remember_billing_facts(&app, "pia").await;
    let body = json!({"model": "m", "instructions": "Be brief.",
        "input": [{"role": "user", "content": "Which database does billing use?"}]});
    let response = proxied(
        &app,
        "/v1/responses",
        &[("x-mnemos-agent-id", "pia"), ("x-mnemos-session-id", "r-1")],
        body.clone(),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_ne!(response.headers()["x-mnemos-memories-injected"], "0");
    let answer: Value = response.json().await.unwrap();
    assert_eq!(
        answer["output"][0]["content"][0]["text"],
        "It uses PostgreSQL 16."
    );
    let forwarded = recorded.lock().unwrap().bodies[0].clone();
    assert_eq!(
        forwarded["input"], body["input"],
        "the input items reach the model unchanged"
    );
    let instructions = forwarded["instructions"].as_str().unwrap();
    assert!(
        instructions.starts_with("Be brief.\n\n<memory>\n"),
        "{instructions}"
    );
    assert!(instructions.contains("PostgreSQL 16"), "{instructions}");

    // Streamed: the events come through as sent; the exchange is remembered after the
    // completing event, with the text of the deltas.
    let response = proxied(
        &app,
        "/v1/responses",
        &[("x-mnemos-agent-id", "pia"), ("x-mnemos-session-id", "r-1")],
        json!({"model": "stream", "stream": true, "input": "And its port?"}),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let events = response.text().await.unwrap();
    assert!(events.contains("response.completed"), "{events}");
    let logged = eventually(Duration::from_secs(10), || async {
        let view = app.get("/v1/sessions/r-1/messages?agent_id=pia").await;
        view.status() == StatusCode::OK
            && view.json::<Value>().await.unwrap()["total_messages"] == 4
    })
    .await;
    assert!(logged, "both exchanges reach the session log");
    let view = app.get("/v1/sessions/r-1/messages?agent_id=pia").await;
    let view = assert_status(view, StatusCode::OK).await;
    assert_eq!(view["messages"][1]["content"], "It uses PostgreSQL 16.");
    assert_eq!(view["messages"][2]["content"], "And its port?");
    assert_eq!(view["messages"][3]["content"], "Port 8443.");

    // A client that can only set `user` names the agent with it.
    let response = proxied(
        &app,
        "/v1/responses",
        &[],
        json!({"model": "m", "input": "Which database does billing use?", "user": "pia"}),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["x-mnemos-agent-id"], "pia");
    assert_ne!(response.headers()["x-mnemos-memories-injected"], "0");

    // Refusals name the field in both envelopes; none reaches the upstream.
    let before = recorded.lock().unwrap().bodies.len();
    let no_input = proxied(
        &app,
        "/v1/responses",
        &[("x-mnemos-agent-id", "pia")],
        json!({"model": "m"}),
    )
    .await;
    assert_openai_error(
        no_input,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        "invalid_request_error",
        Some("input"),
    )
    .await;
    let bad_user = proxied(
        &app,
        "/v1/responses",
        &[],
        json!({"model": "m", "input": "hi", "user": "not an id"}),
    )
    .await;
    assert_openai_error(
        bad_user,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        "invalid_request_error",
        Some("user"),
    )
    .await;
    let bad_instructions = proxied(
        &app,
        "/v1/responses",
        &[("x-mnemos-agent-id", "pia")],
        json!({"model": "m", "input": "hi", "instructions": ["x"]}),
    )
    .await;
    assert_openai_error(
        bad_instructions,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        "invalid_request_error",
        Some("instructions"),
    )
    .await;
    assert_eq!(recorded.lock().unwrap().bodies.len(), before);
}

#[tokio::test]
async fn embeddings_pass_through_and_failures_come_in_openais_envelope() {
    let (upstream, recorded) = recording_upstream().await;
    let app = proxy_app(&upstream, 1000).await;
    let response = proxied(
        &app,
        "/v1/embeddings",
        &[],
        json!({"model": "e", "input": ["hi"]}),
    )
    .await;
    let body = assert_status(response, StatusCode::OK).await;
    assert_eq!(body["data"][0]["embedding"], json!([0.25, -0.5]));
    assert_eq!(
        recorded.lock().unwrap().bodies[0],
        json!({"model": "e", "input": ["hi"]})
    );
    let no_input = proxied(&app, "/v1/embeddings", &[], json!({"model": "e"})).await;
    assert_openai_error(
        no_input,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        "invalid_request_error",
        Some("input"),
    )
    .await;

    // A chat naming no agent: both envelopes, and the message says how to name one.
    let user = json!({"role": "user", "content": "hi"});
    let body = assert_openai_error(
        chat(&app, &[], json!({"model": "m", "messages": [user]})).await,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        "invalid_request_error",
        Some("X-Mnemos-Agent-Id"),
    )
    .await;
    assert!(
        body["error"]["message"].as_str().unwrap().contains("user"),
        "{body}"
    );
    // A body that is not JSON, refused before routing, is restated too.
    let form = app
        .client
        .post(format!("{}/v1/chat/completions", app.address))
        .header("content-type", "text/plain")
        .body("hi")
        .send()
        .await
        .unwrap();
    assert_openai_error(
        form,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "invalid_argument",
        "invalid_request_error",
        Some("content-type"),
    )
    .await;
    // An upstream failure that is not JSON (a gateway's page) keeps its status and
    // becomes OpenAI's envelope; JSON failures pass through unchanged (tested above).
    let response = proxied(
        &app,
        "/v1/responses",
        &[("x-mnemos-agent-id", "pia")],
        json!({"model": "html", "input": "hi"}),
    )
    .await;
    assert_eq!(response.status(), StatusCode::BAD_GATEWAY);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "api_error", "{body}");
    assert_eq!(body["error"]["code"], "upstream_error", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("502 Bad Gateway"),
        "{body}"
    );
    // An unreachable upstream: 503 in both envelopes.
    let dead = proxy_app("http://127.0.0.1:9/v1", 1000).await;
    for path in ["/v1/responses", "/v1/embeddings"] {
        let response = proxied(
            &dead,
            path,
            &[("x-mnemos-agent-id", "pia")],
            json!({"model": "m", "input": "hi"}),
        )
        .await;
        assert_openai_error(
            response,
            StatusCode::SERVICE_UNAVAILABLE,
            "backend_unavailable",
            "api_error",
            None,
        )
        .await;
    }
    // REST keeps the contract's envelope alone.
    let rest = app.post("/tools/recall", &json!({"query": "x"})).await;
    let body = assert_error(
        rest,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("agent_id"),
    )
    .await;
    assert!(body["error"].get("type").is_none(), "{body}");
}

async fn chat(app: &TestApp, headers: &[(&str, &str)], body: Value) -> reqwest::Response {
    let mut request = app
        .client
        .post(format!("{}/v1/chat/completions", app.address))
        .json(&body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.expect("request sent")
}

#[tokio::test]
async fn the_memory_block_goes_into_the_system_message_within_budget() {
    let (upstream, recorded) = recording_upstream().await;
    let app = proxy_app(&upstream, 1000).await;
    remember_billing_facts(&app, "pia").await;

    let body = json!({
        "model": "m",
        "temperature": 0.1,
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Which database does billing use?"},
        ],
    });
    let response = chat(
        &app,
        &[("x-mnemos-agent-id", "pia"), ("authorization", "Bearer k1")],
        body.clone(),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    let injected: usize = response.headers()["x-mnemos-memories-injected"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let tokens: usize = response.headers()["x-mnemos-memory-tokens"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(response.headers()["x-mnemos-memory-budget"], "200");
    assert!(injected >= 1);
    assert!(tokens > 0 && tokens <= 200, "{tokens}");
    // The answer is the upstream's, unchanged.
    let answer: Value = response.json().await.unwrap();
    assert_eq!(
        answer["choices"][0]["message"]["content"],
        "It uses PostgreSQL 16."
    );

    let forwarded = recorded.lock().unwrap().bodies[0].clone();
    assert_eq!(
        recorded.lock().unwrap().authorization[0].as_deref(),
        Some("Bearer k1")
    );
    // Everything but the system message went through untouched.
    assert_eq!(forwarded["temperature"], 0.1);
    assert_eq!(forwarded["messages"][1], body["messages"][1]);
    assert_eq!(forwarded["messages"].as_array().unwrap().len(), 2);
    let system = forwarded["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.starts_with("You are terse.\n\n<memory>\n"),
        "{system}"
    );
    assert!(system.ends_with("</memory>"));
    assert!(system.contains("PostgreSQL 16"), "{system}");
    let block = &system["You are terse.\n\n".len()..];
    assert_eq!(mnemos_actors::text::estimate_tokens(block), tokens);

    // A tiny budget still never overflows; memories that do not fit are left out.
    let response = chat(
        &app,
        &[
            ("x-mnemos-agent-id", "pia"),
            ("x-mnemos-context-tokens", "400"),
            ("x-mnemos-memory-budget-pct", "0.05"),
        ],
        body.clone(),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["x-mnemos-memory-budget"], "20");
    let tokens: usize = response.headers()["x-mnemos-memory-tokens"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(tokens <= 20, "{tokens}");

    // An agent without memories: the request goes through unchanged.
    let response = chat(&app, &[("x-mnemos-agent-id", "nobody")], body.clone()).await;
    assert_eq!(response.headers()["x-mnemos-memories-injected"], "0");
    let forwarded = recorded.lock().unwrap().bodies.last().unwrap().clone();
    assert_eq!(forwarded["messages"], body["messages"]);

    // Without a session header the exchange is mined with extract_turn, after the answer.
    let preference = json!({"model": "m", "messages": [
        {"role": "user", "content": "I prefer tabs over spaces in every repository."},
    ]});
    let response = chat(&app, &[("x-mnemos-agent-id", "pia")], preference).await;
    assert_eq!(response.status(), StatusCode::OK);
    let mined = eventually(Duration::from_secs(10), || async {
        let list = app.get("/v1/memories?agent_id=pia").await;
        let list = assert_status(list, StatusCode::OK).await;
        list["memories"].as_array().unwrap().iter().any(|m| {
            m["content"]
                .as_str()
                .is_some_and(|c| c.contains("tabs over spaces"))
        })
    })
    .await;
    assert!(
        mined,
        "the proxied exchange was not mined for the preference"
    );
}

#[tokio::test]
async fn streams_pass_through_and_are_remembered_after_the_last_chunk() {
    let (upstream, _recorded) = recording_upstream().await;
    let app = proxy_app(&upstream, 1000).await;
    remember_billing_facts(&app, "pia").await;
    let response = chat(
        &app,
        &[("x-mnemos-agent-id", "pia"), ("x-mnemos-session-id", "s9")],
        json!({"model": "stream", "stream": true,
               "messages": [{"role": "user", "content": "Which port does billing listen on?"}]}),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    assert!(response.headers()["x-mnemos-memories-injected"] != "0");
    let text = response.text().await.unwrap();
    assert!(
        text.contains(r#"{"content":"Port "}"#) && text.ends_with("data: [DONE]\n\n"),
        "{text}"
    );
    let logged = eventually(Duration::from_secs(10), || async {
        let view = app.get("/v1/sessions/s9/messages?agent_id=pia").await;
        if view.status() != StatusCode::OK {
            return false;
        }
        let view: Value = view.json().await.unwrap();
        view["messages"][1]["content"] == "Port 8443."
    })
    .await;
    assert!(logged, "the streamed exchange was not logged");
}

#[tokio::test]
async fn upstream_errors_pass_through_and_mnemos_errors_are_typed() {
    let (upstream, recorded) = recording_upstream().await;
    let app = proxy_app(&upstream, 1000).await;
    let user = json!({"role": "user", "content": "hi"});
    let response = chat(
        &app,
        &[("x-mnemos-agent-id", "pia")],
        json!({"model": "fail", "messages": [user]}),
    )
    .await;
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(response.headers()["content-type"], "application/json");
    assert_eq!(
        response.text().await.unwrap(),
        r#"{"error":{"message":"slow down","type":"rate_limit"}}"#
    );

    let no_agent = chat(&app, &[], json!({"model": "m", "messages": [user]})).await;
    assert_error(
        no_agent,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("X-Mnemos-Agent-Id"),
    )
    .await;
    let bad_agent = chat(
        &app,
        &[("x-mnemos-agent-id", "no spaces")],
        json!({"model": "m", "messages": [user]}),
    )
    .await;
    assert_error(
        bad_agent,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("X-Mnemos-Agent-Id"),
    )
    .await;
    let no_messages = chat(&app, &[("x-mnemos-agent-id", "pia")], json!({"model": "m"})).await;
    assert_error(
        no_messages,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("messages"),
    )
    .await;
    let not_json = app
        .client
        .post(format!("{}/v1/chat/completions", app.address))
        .header("x-mnemos-agent-id", "pia")
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_error(
        not_json,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("body"),
    )
    .await;
    // A body that is not declared JSON never reaches the upstream (a cross-site form
    // cannot spend the upstream's tokens).
    let form = app
        .client
        .post(format!("{}/v1/chat/completions", app.address))
        .header("x-mnemos-agent-id", "pia")
        .header("content-type", "text/plain")
        .body(json!({"model": "m", "messages": [user]}).to_string())
        .send()
        .await
        .unwrap();
    assert_error(
        form,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "invalid_argument",
        Some("content-type"),
    )
    .await;
    let bad_pct = chat(
        &app,
        &[
            ("x-mnemos-agent-id", "pia"),
            ("x-mnemos-memory-budget-pct", "lots"),
        ],
        json!({"model": "m", "messages": [user]}),
    )
    .await;
    assert_error(
        bad_pct,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("X-Mnemos-Memory-Budget-Pct"),
    )
    .await;
    // None of the refused requests reached the upstream.
    assert_eq!(recorded.lock().unwrap().bodies.len(), 1);

    // An unreachable upstream is a 503 with the contract's body, not a hang or a 500.
    let dead = proxy_app("http://127.0.0.1:9/v1", 1000).await;
    let response = chat(
        &dead,
        &[("x-mnemos-agent-id", "pia")],
        json!({"model": "m", "messages": [user]}),
    )
    .await;
    assert_error(
        response,
        StatusCode::SERVICE_UNAVAILABLE,
        "backend_unavailable",
        None,
    )
    .await;
    // And with no upstream configured the proxy says how to turn it on.
    let off = spawn_app().await;
    let response = chat(
        &off,
        &[("x-mnemos-agent-id", "pia")],
        json!({"model": "m", "messages": [user]}),
    )
    .await;
    let body = assert_error(
        response,
        StatusCode::SERVICE_UNAVAILABLE,
        "backend_unavailable",
        None,
    )
    .await;
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("proxy.upstream_url"));
}

#[tokio::test]
async fn with_keys_the_clients_api_key_is_its_mnemos_key_and_never_goes_upstream() {
    use mnemos::auth::Scope;
    let (upstream, recorded) = recording_upstream().await;
    let (app, secrets) = spawn_with_keys_and(
        &[
            KeySpec {
                tenant: "acme",
                agent: Some("pia"),
                scopes: &[Scope::Read, Scope::Write],
                expires_at: None,
                revoked: false,
            },
            KeySpec {
                tenant: "acme",
                agent: Some("pia"),
                scopes: &[Scope::Read],
                expires_at: None,
                revoked: false,
            },
        ],
        |settings| {
            settings.proxy.upstream_url = upstream.clone();
            settings.proxy.api_key = "sk-upstream-of-the-operator".into();
        },
    )
    .await;
    remember_billing_facts(&app, "pia").await;
    let body = json!({"model": "m", "messages": [{"role": "user", "content": "Which database does billing use?"}]});
    // Only base_url and api_key: the key names the agent.
    let bearer = format!("Bearer {}", secrets[0]);
    let response = chat(&app, &[("authorization", bearer.as_str())], body.clone()).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_ne!(response.headers()["x-mnemos-memories-injected"], "0");
    {
        let recorded = recorded.lock().unwrap();
        assert_eq!(
            recorded.authorization[0].as_deref(),
            Some("Bearer sk-upstream-of-the-operator"),
            "the operator's upstream key goes upstream, never the mnemos key"
        );
        assert!(recorded.bodies[0].to_string().contains("PostgreSQL 16"));
    }
    // No key, or a read-only key (the proxy remembers the exchange), is refused before
    // anything reaches the upstream.
    let missing: Value = {
        let response = chat(&app, &[], body.clone()).await;
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        response.json().await.unwrap()
    };
    assert_eq!(missing["error"]["code"], "unauthenticated", "{missing}");
    assert_eq!(
        missing["error"]["type"], "authentication_error",
        "{missing}"
    );
    let reader = format!("Bearer {}", secrets[1]);
    assert_eq!(
        chat(&app, &[("authorization", reader.as_str())], body.clone())
            .await
            .status(),
        StatusCode::FORBIDDEN
    );
    // Naming another agent than the key's is refused too.
    assert_eq!(
        chat(
            &app,
            &[
                ("authorization", bearer.as_str()),
                ("x-mnemos-agent-id", "bob")
            ],
            body
        )
        .await
        .status(),
        StatusCode::FORBIDDEN
    );
    assert_eq!(recorded.lock().unwrap().bodies.len(), 1);
}

//! The server under hostile or careless clients: slow and silent connections (header,
//! body and idle timeouts, the connection limit), unbounded MCP sessions, browser-borne
//! writes (JSON bodies only, the Host and Origin guard), and an oversized body, which is
//! answered 413 instead of a reset connection. Every refused request has written nothing.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::helpers::*;

/// `127.0.0.1:<port>` of a test app.
fn authority(app: &TestApp) -> String {
    app.address.trim_start_matches("http://").to_string()
}

/// A raw TCP connection to the app.
async fn connect(app: &TestApp) -> TcpStream {
    TcpStream::connect(authority(app))
        .await
        .expect("the server accepts TCP connections")
}

/// Read until the server closes the connection (or resets it) or `within` passes: what
/// arrived, and whether the connection was closed.
async fn read_until_closed(stream: &mut TcpStream, within: Duration) -> (String, bool) {
    let deadline = tokio::time::Instant::now() + within;
    let mut received = Vec::new();
    let mut buffer = [0u8; 8192];
    let closed = loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buffer)).await {
            Err(_) => break false,
            Ok(Ok(0)) | Ok(Err(_)) => break true,
            Ok(Ok(n)) => received.extend_from_slice(&buffer[..n]),
        }
    };
    (String::from_utf8_lossy(&received).into_owned(), closed)
}

/// Read one HTTP/1.1 response with a `content-length` (head and body) within five seconds.
async fn read_response(stream: &mut TcpStream) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let mut received = Vec::new();
    let mut buffer = [0u8; 8192];
    loop {
        let text = String::from_utf8_lossy(&received).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|line| {
                    let (name, value) = line.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            if received.len() >= end + 4 + length {
                return text;
            }
        }
        let n = tokio::time::timeout_at(deadline, stream.read(&mut buffer))
            .await
            .expect("a whole response within five seconds")
            .expect("the connection stays readable");
        assert!(n > 0, "closed before the response was complete: {text}");
        received.extend_from_slice(&buffer[..n]);
    }
}

/// The memories an agent has (all statuses, as the list route shows them).
async fn memories_of(app: &TestApp, agent: &str) -> Vec<Value> {
    let listed = assert_status(
        app.get(&format!("/v1/memories?agent_id={agent}")).await,
        StatusCode::OK,
    )
    .await;
    listed["memories"]
        .as_array()
        .cloned()
        .or_else(|| listed["items"].as_array().cloned())
        .unwrap_or_default()
}

/// The `initialize` request of an MCP client.
fn initialize() -> Value {
    json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "probe", "version": "0"}}
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stalls_in_the_body_gets_408_and_nothing_is_written() {
    let temp = tempfile::tempdir().expect("temp dir");
    let mut settings = test_settings(temp.path());
    settings.server.body_timeout_ms = 500;
    let app = spawn_with(settings, Some(temp)).await;
    let mut stalled = connect(&app).await;
    let head = format!(
        "POST /tools/remember HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n",
        authority(&app)
    );
    stalled.write_all(head.as_bytes()).await.unwrap();
    stalled
        .write_all(br#"{"agent_id": "slow", "content": "half a bo"#)
        .await
        .unwrap();
    let started = Instant::now();
    let (answer, closed) = read_until_closed(&mut stalled, Duration::from_secs(5)).await;
    assert!(
        closed,
        "a connection stalled in its body stayed open: {answer:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer:?}");
    assert!(
        answer.contains(r#""code":"invalid_argument""#),
        "{answer:?}"
    );
    assert!(answer.contains("server.body_timeout_ms"), "{answer:?}");
    assert!(memories_of(&app, "slow").await.is_empty());
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_limit_gets_413_with_the_contract_body() {
    let app = spawn_app().await;
    // 9 MiB against the default 8 MiB, with a content-length.
    let content = "x".repeat(9 * 1024 * 1024);
    let body = json!({"agent_id": "big", "content": content}).to_string();
    assert_error(
        app.post_raw("/tools/remember", body.clone()).await,
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        Some("body"),
    )
    .await;
    // The same body chunked (no content-length).
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> = body
        .as_bytes()
        .chunks(256 * 1024)
        .map(|chunk| Ok(chunk.to_vec()))
        .collect();
    let chunked = reqwest::Body::wrap_stream(futures_util::stream::iter(chunks));
    assert_error(
        app.post_raw("/tools/remember", chunked).await,
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        Some("body"),
    )
    .await;
    // On /mcp too.
    let response = app
        .client
        .post(format!("{}/mcp", app.address))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("request sent");
    assert_error(
        response,
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        Some("body"),
    )
    .await;
    // A client that asks first (Expect: 100-continue) is told without sending the body.
    let mut stream = connect(&app).await;
    let head = format!(
        "POST /tools/remember HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nExpect: 100-continue\r\n\r\n",
        authority(&app),
        9 * 1024 * 1024
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let answer = read_response(&mut stream).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("payload_too_large"), "{answer}");
    // The connection still works after a refused body, and nothing was written.
    assert!(memories_of(&app, "big").await.is_empty());
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_must_be_json_and_refused_ones_change_nothing() {
    let app = spawn_app().await;
    let stored = app
        .remember("alice", "The deploy key rotates every Monday", json!({}))
        .await;
    let id = stored["memory"]["id"].as_str().unwrap().to_string();
    let forget = json!({"agent_id": "alice", "id": id}).to_string();
    let send = |content_type: Option<&'static str>, body: String| {
        let mut request = app
            .client
            .post(format!("{}/tools/forget", app.address))
            .body(body);
        if let Some(content_type) = content_type {
            request = request.header("content-type", content_type);
        }
        request.send()
    };
    // What a cross-site <form> or fetch without preflight can send.
    for (content_type, body) in [
        (Some("text/plain"), forget.clone()),
        (Some("text/plain;charset=UTF-8"), forget.clone()),
        (
            Some("application/x-www-form-urlencoded"),
            format!("agent_id=alice&id={id}"),
        ),
        (Some("multipart/form-data; boundary=x"), forget.clone()),
        (None, forget.clone()),
        (Some("application/json; charset=latin1"), forget.clone()),
    ] {
        let response = send(content_type, body).await.expect("request sent");
        assert_error(
            response,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "invalid_argument",
            Some("content-type"),
        )
        .await;
    }
    let memory = assert_status(
        app.get(&format!("/v1/memories/{id}?agent_id=alice")).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(memory["status"], "active", "{memory}");
    // JSON, with a charset or as a +json type, is accepted.
    let forgotten = assert_status(
        send(Some("application/json; charset=utf-8"), forget.clone())
            .await
            .expect("request sent"),
        StatusCode::OK,
    )
    .await;
    assert_eq!(forgotten["forgotten"][0], id.as_str(), "{forgotten}");
    let stored = app.remember("alice", "Lunch is at noon", json!({})).await;
    let response = app
        .client
        .post(format!("{}/tools/recall", app.address))
        .header("content-type", "application/merge-patch+json")
        .body(json!({"agent_id": "alice", "query": "lunch"}).to_string())
        .send()
        .await
        .expect("request sent");
    let recalled = assert_status(response, StatusCode::OK).await;
    assert_eq!(
        recalled["results"][0]["memory"]["id"], stored["memory"]["id"],
        "{recalled}"
    );
    // Routes without a body need no content type.
    assert_status(app.get("/v1/memories?agent_id=alice").await, StatusCode::OK).await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_host_is_refused_on_every_route() {
    let app = spawn_app().await;
    app.remember("alice", "The staging password is in the vault", json!({}))
        .await;
    let get = app
        .client
        .get(format!("{}/v1/memories?agent_id=alice", app.address))
        .header("host", "evil.example")
        .send()
        .await
        .expect("request sent");
    assert_error(
        get,
        StatusCode::FORBIDDEN,
        "permission_denied",
        Some("host"),
    )
    .await;
    let write = app
        .client
        .post(format!("{}/tools/remember", app.address))
        .header("host", "evil.example:8077")
        .json(&json!({"agent_id": "alice", "content": "planted by a rebinding page"}))
        .send()
        .await
        .expect("request sent");
    assert_error(
        write,
        StatusCode::FORBIDDEN,
        "permission_denied",
        Some("host"),
    )
    .await;
    for path in ["/health", "/metrics", "/openapi.json", "/no/such/route"] {
        let response = app
            .client
            .get(format!("{}{path}", app.address))
            .header("host", "evil.example")
            .send()
            .await
            .expect("request sent");
        assert_eq!(response.status(), StatusCode::FORBIDDEN, "{path}");
    }
    let mcp = app
        .client
        .post(format!("{}/mcp", app.address))
        .header("host", "evil.example")
        .header("accept", "application/json, text/event-stream")
        .json(&initialize())
        .send()
        .await
        .expect("request sent");
    assert_error(
        mcp,
        StatusCode::FORBIDDEN,
        "permission_denied",
        Some("host"),
    )
    .await;
    // A listed name matches on any port.
    let local = app
        .client
        .get(format!("{}/health", app.address))
        .header("host", "localhost:1234")
        .send()
        .await
        .expect("request sent");
    assert_eq!(local.status(), StatusCode::OK);
    let memories = memories_of(&app, "alice").await;
    assert_eq!(memories.len(), 1, "{memories:?}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_origin_is_refused_and_the_own_or_a_listed_one_passes() {
    let temp = tempfile::tempdir().expect("temp dir");
    let mut settings = test_settings(temp.path());
    settings.server.allowed_origins = vec!["https://app.example".into()];
    let app = spawn_with(settings, Some(temp)).await;
    let remember = |origin: &str, content: &str| {
        app.client
            .post(format!("{}/tools/remember", app.address))
            .header("origin", origin)
            .json(&json!({"agent_id": "bob", "content": content}))
            .send()
    };
    for origin in [
        "https://evil.example",
        "null",
        "http://127.0.0.1.evil.example",
        "https://app.example:8443",
    ] {
        let response = remember(origin, "written from another site")
            .await
            .expect("request sent");
        assert_error(
            response,
            StatusCode::FORBIDDEN,
            "permission_denied",
            Some("origin"),
        )
        .await;
    }
    let reads = app
        .client
        .get(format!("{}/v1/memories?agent_id=bob", app.address))
        .header("origin", "https://evil.example")
        .send()
        .await
        .expect("request sent");
    assert_eq!(reads.status(), StatusCode::FORBIDDEN);
    assert!(memories_of(&app, "bob").await.is_empty());
    // The server's own origin (a page it serves) and a listed origin may write.
    let own = format!("http://{}", authority(&app));
    assert_status(
        remember(&own, "written by the console")
            .await
            .expect("request sent"),
        StatusCode::CREATED,
    )
    .await;
    let listed = remember("https://app.example", "written by the listed app")
        .await
        .expect("request sent");
    assert_eq!(
        listed
            .headers()
            .get("access-control-allow-origin")
            .map(|v| v.to_str().unwrap().to_string()),
        Some("https://app.example".to_string())
    );
    assert_status(listed, StatusCode::CREATED).await;
    // A listed origin's preflight is answered; CORS names nobody else.
    let preflight = app
        .client
        .request(
            reqwest::Method::OPTIONS,
            format!("{}/tools/remember", app.address),
        )
        .header("origin", "https://app.example")
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "content-type")
        .send()
        .await
        .expect("request sent");
    assert!(preflight.status().is_success(), "{}", preflight.status());
    assert_eq!(
        preflight.headers()["access-control-allow-origin"],
        "https://app.example"
    );
    assert_eq!(memories_of(&app, "bob").await.len(), 2);
    // Without allowed_origins there is no CORS at all.
    let plain = spawn_app().await;
    let response = plain
        .client
        .post(format!("{}/tools/remember", plain.address))
        .header("origin", format!("http://{}", authority(&plain)))
        .json(&json!({"agent_id": "bob", "content": "same origin"}))
        .send()
        .await
        .expect("request sent");
    assert!(response
        .headers()
        .get("access-control-allow-origin")
        .is_none());
    assert_status(response, StatusCode::CREATED).await;
    plain.stop().await;
    app.stop().await;
}

/// A test app with these `[server]` timeouts in milliseconds.
async fn app_with_timeouts(header: u64, body: u64, idle: u64) -> TestApp {
    let temp = tempfile::tempdir().expect("temp dir");
    let mut settings = test_settings(temp.path());
    settings.server.header_timeout_ms = header;
    settings.server.body_timeout_ms = body;
    settings.server.idle_timeout_ms = idle;
    spawn_with(settings, Some(temp)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_and_slow_header_clients_are_disconnected_within_the_header_timeout() {
    let app = app_with_timeouts(500, 30_000, 60_000).await;
    // Partial headers, never finished.
    let started = Instant::now();
    let mut partial = connect(&app).await;
    partial
        .write_all(b"POST /tools/remember HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty")
        .await
        .unwrap();
    let (_, closed) = read_until_closed(&mut partial, Duration::from_secs(5)).await;
    let held = started.elapsed();
    assert!(closed, "a connection with partial headers stayed open");
    assert!(
        held >= Duration::from_millis(400) && held < Duration::from_secs(3),
        "closed after {held:?}, want about 500 ms"
    );
    // Nothing at all.
    let started = Instant::now();
    let mut silent = connect(&app).await;
    let (_, closed) = read_until_closed(&mut silent, Duration::from_secs(5)).await;
    assert!(closed, "a connection that sent nothing stayed open");
    assert!(started.elapsed() < Duration::from_secs(3));
    // A byte every 100 ms does not reset the timer.
    let started = Instant::now();
    let mut trickle = connect(&app).await;
    let request = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    let mut cut = false;
    for byte in request.iter().take(request.len() - 2) {
        if trickle.write_all(&[*byte]).await.is_err() {
            cut = true;
            break;
        }
        let (_, closed) = read_until_closed(&mut trickle, Duration::from_millis(100)).await;
        if closed {
            cut = true;
            break;
        }
    }
    assert!(cut, "a client trickling its headers was never cut");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "the trickling client held its connection {:?}",
        started.elapsed()
    );
    // Normal requests are served as before.
    assert_status(app.get("/health").await, StatusCode::OK).await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_kept_alive_connection_is_closed_after_the_idle_timeout() {
    // The header timeout is shorter than the idle one: a kept-alive connection waiting
    // for its next request is idle, not slow.
    let app = app_with_timeouts(300, 30_000, 1_500).await;
    let mut stream = connect(&app).await;
    let request = format!("GET /health HTTP/1.1\r\nHost: {}\r\n\r\n", authority(&app));
    stream.write_all(request.as_bytes()).await.unwrap();
    let response = read_response(&mut stream).await;
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    let answered = Instant::now();
    let (_, closed) = read_until_closed(&mut stream, Duration::from_millis(800)).await;
    assert!(!closed, "closed by the header timeout while idle");
    // It still serves a second request.
    stream.write_all(request.as_bytes()).await.unwrap();
    let response = read_response(&mut stream).await;
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    let answered_again = Instant::now();
    let (_, closed) = read_until_closed(&mut stream, Duration::from_secs(5)).await;
    assert!(closed, "an idle connection stayed open");
    let idle = answered_again.elapsed();
    assert!(
        idle >= Duration::from_millis(1_200) && idle < Duration::from_secs(4),
        "closed after {idle:?} idle, want about 1.5 s"
    );
    assert!(answered.elapsed() > idle);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_max_connections_clients_wait_until_a_connection_closes() {
    let temp = tempfile::tempdir().expect("temp dir");
    let mut settings = test_settings(temp.path());
    settings.server.max_connections = 2;
    let app = spawn_with(settings, Some(temp)).await;
    let first = connect(&app).await;
    let _second = connect(&app).await;
    let mut third = connect(&app).await;
    let request = format!(
        "GET /health HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        authority(&app)
    );
    third.write_all(request.as_bytes()).await.unwrap();
    let (answer, closed) = read_until_closed(&mut third, Duration::from_millis(500)).await;
    assert!(
        answer.is_empty() && !closed,
        "a third connection was served past max_connections = 2: {answer:?}"
    );
    drop(first);
    let (answer, _) = read_until_closed(&mut third, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
    app.stop().await;
}

/// An upstream that streams an SSE completion slowly: a chunk every 400 ms.
async fn slow_streaming_upstream() -> String {
    use axum::routing::post;
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        post(|| async {
            let chunks = [
                r#"data: {"choices":[{"index":0,"delta":{"role":"assistant"}}]}"#,
                r#"data: {"choices":[{"index":0,"delta":{"content":"slow "}}]}"#,
                r#"data: {"choices":[{"index":0,"delta":{"content":"but "}}]}"#,
                r#"data: {"choices":[{"index":0,"delta":{"content":"complete."}}]}"#,
                "data: [DONE]",
            ];
            let stream = futures_util::stream::unfold(0usize, move |at| async move {
                if at == chunks.len() {
                    return None;
                }
                tokio::time::sleep(Duration::from_millis(400)).await;
                let chunk = axum::body::Bytes::from(format!("{}\n\n", chunks[at]));
                Some((Ok::<_, std::io::Error>(chunk), at + 1))
            });
            (
                [("content-type", "text/event-stream")],
                axum::body::Body::from_stream(stream),
            )
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{address}/v1")
}

/// POST a JSON-RPC message to `/mcp`, in a session when one is given.
async fn mcp_post(app: &TestApp, session: Option<&str>, message: &Value) -> reqwest::Response {
    let mut request = app
        .client
        .post(format!("{}/mcp", app.address))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .json(message);
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    request.send().await.expect("request sent")
}

/// Open an MCP session: initialize, then the initialized notification; its id.
async fn open_mcp_session(app: &TestApp) -> String {
    let response = mcp_post(app, None, &initialize()).await;
    assert_eq!(response.status(), StatusCode::OK);
    let session = response.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    let _ = response.text().await;
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let response = mcp_post(app, Some(&session), &initialized).await;
    assert!(response.status().is_success(), "{}", response.status());
    session
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_responses_outlive_every_timeout() {
    let upstream = slow_streaming_upstream().await;
    let temp = tempfile::tempdir().expect("temp dir");
    let mut settings = test_settings(temp.path());
    settings.server.header_timeout_ms = 300;
    settings.server.body_timeout_ms = 300;
    settings.server.idle_timeout_ms = 300;
    settings.proxy.upstream_url = upstream;
    settings.proxy.extract = false;
    let app = spawn_with(settings, Some(temp)).await;
    // A proxied stream that takes 2 s, longer than every timeout, arrives whole.
    let started = Instant::now();
    let response = app
        .client
        .post(format!("{}/v1/chat/completions", app.address))
        .header("x-mnemos-agent-id", "streamer")
        .json(&json!({"model": "m", "stream": true,
                      "messages": [{"role": "user", "content": "Say something slowly."}]}))
        .send()
        .await
        .expect("request sent");
    assert_eq!(response.status(), StatusCode::OK);
    let text = response.text().await.expect("the whole stream");
    assert!(started.elapsed() >= Duration::from_millis(1_600));
    assert!(
        text.contains("complete.") && text.ends_with("data: [DONE]\n\n"),
        "{text}"
    );
    // An MCP session's standalone SSE stream (GET /mcp) stays open past them too.
    let session = open_mcp_session(&app).await;
    let mut stream = app
        .client
        .get(format!("{}/mcp", app.address))
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .await
        .expect("request sent");
    assert_eq!(stream.status(), StatusCode::OK);
    let deadline = tokio::time::Instant::now() + Duration::from_millis(1_500);
    loop {
        match tokio::time::timeout_at(deadline, stream.chunk()).await {
            Err(_) => break,
            Ok(Ok(Some(_))) => continue,
            Ok(other) => panic!("the SSE stream ended early: {other:?}"),
        }
    }
    app.stop().await;
}

/// The value of the `mnemos_mcp_sessions` gauge in the app's `/metrics`.
async fn sessions_gauge(app: &TestApp) -> Option<f64> {
    let text = app.get("/metrics").await.text().await.unwrap_or_default();
    text.lines()
        .find_map(|line| line.strip_prefix("mnemos_mcp_sessions "))
        .and_then(|value| value.trim().parse::<f64>().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_sessions_are_capped_counted_in_metrics_and_freed_when_they_expire() {
    let temp = tempfile::tempdir().expect("temp dir");
    let mut settings = test_settings(temp.path());
    settings.server.mcp_max_sessions = 3;
    settings.server.mcp_session_idle_timeout_ms = 1_000;
    let app = spawn_with(settings, Some(temp)).await;
    let mut sessions = Vec::new();
    for _ in 0..3 {
        sessions.push(open_mcp_session(&app).await);
    }
    // The fourth and fifth are refused with the contract's body, and no session is made.
    for _ in 0..2 {
        let refused = mcp_post(&app, None, &initialize()).await;
        assert!(refused.headers().get("mcp-session-id").is_none());
        let body = assert_error(refused, StatusCode::TOO_MANY_REQUESTS, "rate_limited", None).await;
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("server.mcp_max_sessions")),
            "{body}"
        );
    }
    assert!(
        eventually(Duration::from_secs(5), || async {
            sessions_gauge(&app).await == Some(3.0)
        })
        .await,
        "mnemos_mcp_sessions is not 3: {:?}",
        sessions_gauge(&app).await
    );
    // The sessions in use still work.
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let listed = mcp_post(&app, Some(&sessions[0]), &list).await;
    assert_eq!(listed.status(), StatusCode::OK);
    assert!(listed.text().await.unwrap().contains("remember"));
    // Ending one (DELETE) frees its place at once.
    let ended = app
        .client
        .delete(format!("{}/mcp", app.address))
        .header("mcp-session-id", &sessions[1])
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .await
        .expect("request sent");
    assert!(ended.status().is_success(), "{}", ended.status());
    open_mcp_session(&app).await;
    // After a second without requests every session expires and is dropped.
    assert!(
        eventually(Duration::from_secs(10), || async {
            sessions_gauge(&app).await == Some(0.0)
        })
        .await,
        "expired sessions are still counted: {:?}",
        sessions_gauge(&app).await
    );
    let expired = mcp_post(&app, Some(&sessions[0]), &list).await;
    assert_eq!(expired.status(), StatusCode::NOT_FOUND);
    for _ in 0..3 {
        open_mcp_session(&app).await;
    }
    app.stop().await;
}

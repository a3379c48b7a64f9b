//! `spawn_app()` and the `TestApp` client: a real server on a random port with a fresh
//! data directory per test.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mnemos::app::Application;
use mnemos::config::Settings;
use reqwest::{Response, StatusCode};
use serde_json::{json, Value};

/// A running server and a client for it.
pub struct TestApp {
    /// `http://127.0.0.1:<port>`.
    pub address: String,
    /// HTTP client.
    pub client: reqwest::Client,
    /// The data directory (kept while the app lives).
    pub data_dir: PathBuf,
    /// Owns the temporary directory unless a test passed its own.
    _temp: Option<tempfile::TempDir>,
    /// Fires the server's shutdown.
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    /// The server task.
    server: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
}

/// Test defaults: compiled-in settings, a random port, no cron, the fault-injection route on.
pub fn test_settings(data_dir: &Path) -> Settings {
    let mut settings = Settings::defaults();
    settings.data_dir = data_dir.to_path_buf();
    settings.server.bind = "127.0.0.1:0".into();
    settings.server.fault_injection = true;
    settings.cognition.enabled = false;
    settings.log.level = "warn".into();
    settings
}

/// Start a server on a fresh data directory.
pub async fn spawn_app() -> TestApp {
    let temp = tempfile::tempdir().expect("temp dir");
    let settings = test_settings(temp.path());
    spawn_with(settings, Some(temp)).await
}

/// Start a server with these settings.
pub async fn spawn_with(settings: Settings, temp: Option<tempfile::TempDir>) -> TestApp {
    try_spawn_with(settings, temp).await.expect("server starts")
}

/// Start a server, or return why it could not start.
pub async fn try_spawn_with(
    settings: Settings,
    temp: Option<tempfile::TempDir>,
) -> anyhow::Result<TestApp> {
    let data_dir = settings.data_dir.clone();
    let app = Application::build(settings).await?;
    let address = format!("http://{}", app.local_addr());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(app.run_until(async move {
        let _ = rx.await;
    }));
    Ok(TestApp {
        address,
        client: reqwest::Client::new(),
        data_dir,
        _temp: temp,
        shutdown: Some(tx),
        server: Some(server),
    })
}

impl TestApp {
    /// POST JSON to a path.
    pub async fn post(&self, path: &str, body: &Value) -> Response {
        self.client
            .post(format!("{}{path}", self.address))
            .json(body)
            .send()
            .await
            .expect("request sent")
    }

    /// POST raw bytes to a path.
    pub async fn post_raw(&self, path: &str, body: impl Into<reqwest::Body>) -> Response {
        self.client
            .post(format!("{}{path}", self.address))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("request sent")
    }

    /// GET a path.
    pub async fn get(&self, path: &str) -> Response {
        self.client
            .get(format!("{}{path}", self.address))
            .send()
            .await
            .expect("request sent")
    }

    /// PATCH JSON to a path.
    pub async fn patch(&self, path: &str, body: &Value) -> Response {
        self.client
            .patch(format!("{}{path}", self.address))
            .json(body)
            .send()
            .await
            .expect("request sent")
    }

    /// DELETE a path.
    pub async fn delete(&self, path: &str) -> Response {
        self.client
            .delete(format!("{}{path}", self.address))
            .send()
            .await
            .expect("request sent")
    }

    /// Remember `content` for `agent` with extra fields; returns the response body (asserting 201).
    pub async fn remember(&self, agent: &str, content: &str, extra: Value) -> Value {
        let mut body = json!({ "agent_id": agent, "content": content });
        if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
            body.extend(extra.clone());
        }
        let response = self.post("/tools/remember", &body).await;
        assert_status(response, StatusCode::CREATED).await
    }

    /// Recall for `agent`; returns the response body (asserting 200).
    pub async fn recall(&self, agent: &str, query: &str, extra: Value) -> Value {
        let mut body = json!({ "agent_id": agent, "query": query });
        if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
            body.extend(extra.clone());
        }
        assert_status(self.post("/tools/recall", &body).await, StatusCode::OK).await
    }

    /// Stop the server gracefully and wait for it (stores flushed).
    pub async fn stop(mut self) -> Option<tempfile::TempDir> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(server) = self.server.take() {
            server
                .await
                .expect("server task")
                .expect("server stopped cleanly");
        }
        self._temp.take()
    }
}

/// Assert a status and return the JSON body.
pub async fn assert_status(response: Response, expected: StatusCode) -> Value {
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    assert_eq!(status, expected, "unexpected status; body: {text}");
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

/// Assert an error response: status, code, and (when given) field.
pub async fn assert_error(
    response: Response,
    expected: StatusCode,
    code: &str,
    field: Option<&str>,
) -> Value {
    let body = assert_status(response, expected).await;
    assert_eq!(body["error"]["code"], code, "body: {body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "body: {body}"
    );
    if let Some(field) = field {
        assert_eq!(body["error"]["field"], field, "body: {body}");
    }
    body
}

/// Poll `check` until it returns true or `timeout` passes.
pub async fn eventually<F, Fut>(timeout: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if check().await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Say loudly that a test skipped itself. Written straight to the process's stderr
/// (not through `eprintln!`, which the test harness captures), so the line shows in
/// every `cargo test` run.
pub fn skipped(test: &str, why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
}

/// The llama.cpp server `.ci/run` starts, or None (with a visible SKIPPED line; under
/// `CI` a missing server fails the test).
pub fn llm_url(test: &str) -> Option<String> {
    match std::env::var("MNEMOS_TEST_LLM_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must start the LLM server and set MNEMOS_TEST_LLM_URL (bash .ci/llm.sh start)"
            );
            skipped(
                test,
                "set MNEMOS_TEST_LLM_URL to an OpenAI-compatible /v1 URL (bash .ci/llm.sh start prints it)",
            );
            None
        }
    }
}

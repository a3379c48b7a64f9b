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
    /// The API key every helper request carries (None: no `Authorization` header).
    pub key: Option<String>,
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
    if let Some(url) = postgres_test_url(data_dir) {
        // The production-like run: PostgreSQL, plus the FalkorDB graph projection when
        // `MNEMOS_TEST_FALKORDB_URL` names a server (`.ci/run` starts one), in a graph
        // of this data directory's own.
        if let Ok(falkordb) = std::env::var("MNEMOS_TEST_FALKORDB_URL") {
            settings.graph.backend = "falkordb".into();
            settings.graph.url = falkordb;
            settings.graph.name = url
                .rsplit("search_path%3D")
                .next()
                .unwrap_or("mnemos")
                .to_string();
        }
        settings.storage.backend = "postgres".into();
        settings.storage.url = url;
    }
    settings
}

/// True when the suite runs on PostgreSQL (`MNEMOS_TEST_BACKEND=postgres`).
///
/// When no PostgreSQL server answers at `MNEMOS_TEST_POSTGRES_URL`, the PostgreSQL half
/// says SKIPPED once and runs on SQLite (a machine without the optional install still
/// passes); under `CI` a missing server fails instead.
pub fn on_postgres() -> bool {
    static REACHABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if !std::env::var("MNEMOS_TEST_BACKEND").is_ok_and(|b| b == "postgres") {
        return false;
    }
    *REACHABLE.get_or_init(|| {
        let base = postgres_base_url();
        let reachable = postgres_answers(&base);
        if !reachable {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must run PostgreSQL at {base} (MNEMOS_TEST_POSTGRES_URL) for MNEMOS_TEST_BACKEND=postgres"
            );
            skipped(
                "the PostgreSQL half (MNEMOS_TEST_BACKEND=postgres)",
                &format!("no PostgreSQL server answers at {base}; these tests ran on SQLite instead"),
            );
        }
        reachable
    })
}

/// Whether something accepts connections at the host and port of a `postgres://` URL.
fn postgres_answers(url: &str) -> bool {
    use std::net::ToSocketAddrs;
    let authority = url
        .split("://")
        .nth(1)
        .unwrap_or("")
        .split(['/', '?'])
        .next()
        .unwrap_or("");
    let host_port = authority.rsplit('@').next().unwrap_or(authority);
    let host_port = if host_port.contains(':') {
        host_port.to_string()
    } else {
        format!("{host_port}:5432")
    };
    host_port.to_socket_addrs().is_ok_and(|mut addresses| {
        addresses.any(|address| {
            std::net::TcpStream::connect_timeout(&address, std::time::Duration::from_secs(2))
                .is_ok()
        })
    })
}

/// Under `MNEMOS_TEST_BACKEND=postgres`: the URL of this data directory's own schema on
/// `MNEMOS_TEST_POSTGRES_URL` (default `postgres://postgres@127.0.0.1:5432/test`). The
/// schema name is kept in `<data_dir>/pg_schema`, so a restart on the same directory
/// finds the same data and every new directory starts empty.
pub fn postgres_test_url(data_dir: &Path) -> Option<String> {
    if !on_postgres() {
        return None;
    }
    let base = postgres_base_url();
    let marker = data_dir.join("pg_schema");
    let schema = match std::fs::read_to_string(&marker) {
        Ok(schema) => schema.trim().to_string(),
        Err(_) => {
            static SWEEP: std::sync::Once = std::sync::Once::new();
            SWEEP.call_once(|| sweep_stale_schemas(&base));
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or_default();
            let schema = format!("it_{now}_{}", uuid::Uuid::new_v4().simple());
            std::fs::create_dir_all(data_dir).expect("data dir");
            std::fs::write(&marker, &schema).expect("schema marker written");
            schema
        }
    };
    let separator = if base.contains('?') { '&' } else { '?' };
    Some(format!("{base}{separator}options=-csearch_path%3D{schema}"))
}

/// The environment that points a `mnemos` child process at the same store as
/// `test_settings(data_dir)` (empty on SQLite).
pub fn backend_env(data_dir: &Path) -> Vec<(String, String)> {
    match postgres_test_url(data_dir) {
        Some(url) => vec![
            ("MNEMOS__STORAGE__BACKEND".into(), "postgres".into()),
            ("MNEMOS__STORAGE__URL".into(), url),
        ],
        None => Vec::new(),
    }
}

/// Drop these PostgreSQL schemas (best effort, from a thread and runtime of its own so
/// it never blocks on the test's runtime).
fn drop_schemas(base: &str, schemas: Vec<String>) {
    let base = base.to_string();
    let _ = std::thread::spawn(move || {
        use sqlx::Connection;
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        runtime.block_on(async move {
            let Ok(mut conn) = sqlx::PgConnection::connect(&base).await else {
                return;
            };
            let _ = sqlx::query("SET lock_timeout = '2s'")
                .execute(&mut conn)
                .await;
            let schemas = if schemas.is_empty() {
                // The sweep: schemas of earlier runs (named it_<unix seconds>_...) older than an hour.
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or_default();
                let names: Vec<(String,)> = sqlx::query_as(
                    "SELECT nspname::text FROM pg_namespace WHERE nspname LIKE 'it\\_%'",
                )
                .fetch_all(&mut conn)
                .await
                .unwrap_or_default();
                names
                    .into_iter()
                    .map(|(name,)| name)
                    .filter(|name| {
                        name.split('_')
                            .nth(1)
                            .and_then(|secs| secs.parse::<u64>().ok())
                            .is_some_and(|secs| secs + 3600 < now)
                    })
                    .collect()
            } else {
                schemas
            };
            for schema in schemas {
                let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"
                )))
                .execute(&mut conn)
                .await;
            }
        });
    })
    .join();
}

/// Drop the schemas earlier runs left behind (a test that keeps its directory past
/// `stop()` cannot drop its own).
fn sweep_stale_schemas(base: &str) {
    drop_schemas(base, Vec::new());
}

/// Drop the PostgreSQL schema of a data directory that is going away.
fn drop_postgres_schema(data_dir: &Path) {
    let Ok(schema) = std::fs::read_to_string(data_dir.join("pg_schema")) else {
        return;
    };
    drop_schema_now(schema.trim());
}

/// Drop one PostgreSQL test schema (best effort).
pub fn drop_schema_now(schema: &str) {
    drop_schemas(&postgres_base_url(), vec![schema.to_string()]);
}

/// The test server: `MNEMOS_TEST_POSTGRES_URL`, default `postgres://postgres@127.0.0.1:5432/test`.
pub fn postgres_base_url() -> String {
    std::env::var("MNEMOS_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

impl Drop for TestApp {
    fn drop(&mut self) {
        // Only when this app owns the directory: a test that keeps it (stop() returned
        // it, or passed its own) may start another server on the same data.
        if let Some(temp) = &self._temp {
            if on_postgres() {
                drop_postgres_schema(temp.path());
            }
        }
    }
}

/// A key to seed before a server starts (see [`seed_keys`]).
pub struct KeySpec {
    /// Its tenant.
    pub tenant: &'static str,
    /// The one agent it acts as (None: every agent of the tenant).
    pub agent: Option<&'static str>,
    /// What it may do.
    pub scopes: &'static [mnemos::auth::Scope],
    /// When it expires.
    pub expires_at: Option<chrono::DateTime<chrono::Utc>>,
    /// Revoked already.
    pub revoked: bool,
}

/// Store these keys in the system of record `settings` name (as `mnemos keys create`
/// would, plus expired and revoked ones it cannot make); returns each key's secret.
pub async fn seed_keys(settings: &Settings, specs: &[KeySpec]) -> Vec<String> {
    use mnemos::auth::keys::{generate, hash_secret, ApiKey};
    use mnemos_actors::model::{AgentId, TenantId};
    let record = mnemos::store::SystemOfRecord::open(settings)
        .await
        .expect("the system of record opens");
    let store = record.keys();
    let now = chrono::Utc::now();
    let mut secrets = Vec::new();
    for spec in specs {
        let (id, secret, shown) = generate();
        let key = ApiKey {
            id,
            name: format!("{}:{}", spec.tenant, spec.agent.unwrap_or("*")),
            tenant: TenantId::parse(spec.tenant).expect("tenant id"),
            agent: spec.agent.map(|a| AgentId::parse(a).expect("agent id")),
            scopes: spec.scopes.to_vec(),
            secret_hash: hash_secret(&secret),
            created_at: now - chrono::Duration::hours(1),
            last_used_at: None,
            expires_at: spec.expires_at,
            revoked_at: spec.revoked.then_some(now - chrono::Duration::minutes(1)),
        };
        store.create_key(&key).await.expect("key stored");
        secrets.push(shown);
    }
    record.close().await;
    secrets
}

/// The admin of the whole server: default tenant, every agent, every scope.
pub const SERVER_ADMIN: KeySpec = KeySpec {
    tenant: "default",
    agent: None,
    scopes: &[
        mnemos::auth::Scope::Read,
        mnemos::auth::Scope::Write,
        mnemos::auth::Scope::Admin,
    ],
    expires_at: None,
    revoked: false,
};

/// Start a server with `auth.mode = "keys"` on a fresh data directory, with the keys of
/// `specs` seeded; the app's own requests carry the first key. Returns the secrets.
pub async fn spawn_with_keys(specs: &[KeySpec]) -> (TestApp, Vec<String>) {
    spawn_with_keys_and(specs, |_| {}).await
}

/// [`spawn_with_keys`] with settings changed by `change` first.
pub async fn spawn_with_keys_and(
    specs: &[KeySpec],
    change: impl FnOnce(&mut Settings),
) -> (TestApp, Vec<String>) {
    let temp = tempfile::tempdir().expect("temp dir");
    let mut settings = test_settings(temp.path());
    settings.auth.mode = "keys".into();
    change(&mut settings);
    let secrets = seed_keys(&settings, specs).await;
    let mut app = spawn_with(settings, Some(temp)).await;
    app.key = secrets.first().cloned();
    (app, secrets)
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
        key: None,
        _temp: temp,
        shutdown: Some(tx),
        server: Some(server),
    })
}

impl TestApp {
    /// The `Authorization` header of [`Self::key`], if any.
    fn auth_header(&self) -> reqwest::header::HeaderMap {
        let mut headers = reqwest::header::HeaderMap::new();
        if let Some(key) = &self.key {
            headers.insert(
                reqwest::header::AUTHORIZATION,
                format!("Bearer {key}")
                    .parse()
                    .expect("a key is a header value"),
            );
        }
        headers
    }

    /// Send `method path` with an optional JSON body and this `Authorization` header
    /// value (None: no header), whatever [`Self::key`] is.
    pub async fn send_as(
        &self,
        authorization: Option<&str>,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Response {
        let mut request = self
            .client
            .request(method, format!("{}{path}", self.address));
        if let Some(value) = authorization {
            request = request.header(reqwest::header::AUTHORIZATION, value);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        request.send().await.expect("request sent")
    }

    /// POST JSON to a path.
    pub async fn post(&self, path: &str, body: &Value) -> Response {
        self.client
            .post(format!("{}{path}", self.address))
            .headers(self.auth_header())
            .json(body)
            .send()
            .await
            .expect("request sent")
    }

    /// POST raw bytes to a path.
    pub async fn post_raw(&self, path: &str, body: impl Into<reqwest::Body>) -> Response {
        self.client
            .post(format!("{}{path}", self.address))
            .headers(self.auth_header())
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
            .headers(self.auth_header())
            .send()
            .await
            .expect("request sent")
    }

    /// PATCH JSON to a path.
    pub async fn patch(&self, path: &str, body: &Value) -> Response {
        self.client
            .patch(format!("{}{path}", self.address))
            .headers(self.auth_header())
            .json(body)
            .send()
            .await
            .expect("request sent")
    }

    /// DELETE a path.
    pub async fn delete(&self, path: &str) -> Response {
        self.client
            .delete(format!("{}{path}", self.address))
            .headers(self.auth_header())
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

    /// `GET /v1/entities?agent_id=<agent>&<query>`, asserting 200.
    pub async fn entities(&self, agent: &str, query: &str) -> Value {
        let path = format!("/v1/entities?agent_id={agent}&{query}");
        assert_status(self.get(&path).await, StatusCode::OK).await
    }

    /// `GET /v1/entities/{id}?agent_id=<agent>`, asserting 200.
    pub async fn entity(&self, agent: &str, id: &str) -> Value {
        let path = format!("/v1/entities/{id}?agent_id={agent}");
        assert_status(self.get(&path).await, StatusCode::OK).await
    }

    /// `GET /v1/facts?agent_id=<agent>&<query>`, asserting 200.
    pub async fn facts(&self, agent: &str, query: &str) -> Value {
        let path = format!("/v1/facts?agent_id={agent}&{query}");
        assert_status(self.get(&path).await, StatusCode::OK).await
    }

    /// `GET /v1/export?<query>`; returns the JSONL text (asserting 200 and its type).
    pub async fn export(&self, query: &str) -> String {
        let response = self.get(&format!("/v1/export?{query}")).await;
        let status = response.status();
        let kind = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let text = response.text().await.expect("export body");
        assert_eq!(status, StatusCode::OK, "export failed: {text}");
        assert_eq!(kind, "application/x-ndjson");
        text
    }

    /// `POST /v1/import?<query>` with a JSONL body.
    pub async fn import(&self, body: impl Into<reqwest::Body>, query: &str) -> Response {
        self.client
            .post(format!("{}/v1/import?{query}", self.address))
            .headers(self.auth_header())
            .header("content-type", "application/x-ndjson")
            .body(body)
            .send()
            .await
            .expect("request sent")
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

/// The OpenAI-compatible embedding server's `/v1` URL (`MNEMOS_TEST_EMBED_URL`); None
/// (SKIPPED) when unset, a failure under CI.
pub fn embed_url(test: &str) -> Option<String> {
    match std::env::var("MNEMOS_TEST_EMBED_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must start the embedding server and set MNEMOS_TEST_EMBED_URL (bash .ci/llm.sh start-embed)"
            );
            skipped(
                test,
                "set MNEMOS_TEST_EMBED_URL to an OpenAI-compatible /v1 URL serving embeddings (bash .ci/llm.sh start-embed prints it)",
            );
            None
        }
    }
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

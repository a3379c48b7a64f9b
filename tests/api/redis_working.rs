//! Working memory in Redis (`working.backend = "redis"`): windows under
//! `mnemos:{<agent>}:{<session>}:window` with a TTL, used by recall; and an outage of a
//! private redis-server: writes are acknowledged throughout, `/health` flags the
//! fallback, and after Redis is back the store reconnects by itself and copies what was
//! written meanwhile into Redis.

use std::process::Stdio;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::*;

/// The shared Redis this machine runs, or None (SKIPPED; under CI a failure).
async fn shared_redis(test: &str) -> Option<String> {
    let url = std::env::var("MNEMOS_TEST_REDIS_URL")
        .unwrap_or_else(|_| "redis://127.0.0.1:6379/0".to_string());
    if redis_client(&url).await.is_some() {
        return Some(url);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI must run Redis at {url} (set MNEMOS_TEST_REDIS_URL to use another)"
    );
    skipped(
        test,
        &format!("no Redis at {url} (set MNEMOS_TEST_REDIS_URL)"),
    );
    None
}

pub(crate) async fn redis_client(url: &str) -> Option<redis::aio::MultiplexedConnection> {
    let client = redis::Client::open(url).ok()?;
    tokio::time::timeout(
        Duration::from_secs(2),
        client.get_multiplexed_async_connection(),
    )
    .await
    .ok()?
    .ok()
}

async fn llen(url: &str, key: &str) -> Option<i64> {
    let mut connection = redis_client(url).await?;
    redis::cmd("LLEN")
        .arg(key)
        .query_async(&mut connection)
        .await
        .ok()
}

fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}

async fn redis_app(url: &str) -> TestApp {
    let temp = tempfile::tempdir().unwrap();
    let mut settings = test_settings(temp.path());
    settings.working.backend = "redis".into();
    settings.working.url = url.to_string();
    settings.working.ttl_seconds = 600;
    spawn_with(settings, Some(temp)).await
}

#[tokio::test]
async fn session_windows_live_in_redis_with_a_ttl_and_feed_recall() {
    let Some(url) = shared_redis("session_windows_live_in_redis_with_a_ttl_and_feed_recall").await
    else {
        return;
    };
    let app = redis_app(&url).await;
    let agent = unique("w");
    app.remember(
        &agent,
        "current task: migrate the billing tables to Postgres",
        json!({"session_id": "focus"}),
    )
    .await;
    let key = format!("mnemos:{{{agent}}}:{{focus}}:window");
    assert_eq!(llen(&url, &key).await, Some(1));
    let mut connection = redis_client(&url).await.unwrap();
    let ttl: i64 = redis::cmd("TTL")
        .arg(&key)
        .query_async(&mut connection)
        .await
        .unwrap();
    assert!((1..=600).contains(&ttl), "ttl {ttl}");
    let health = assert_status(app.get("/health").await, StatusCode::OK).await;
    assert_eq!(health["backends"]["working"]["backend"], "redis");
    assert_eq!(health["backends"]["working"]["state"], "up", "{health}");

    let recalled = app
        .recall(
            &agent,
            "billing tables",
            json!({"session_id": "focus", "debug": true}),
        )
        .await;
    let hit = &recalled["results"][0];
    assert!(
        hit["matched_by"]
            .as_array()
            .unwrap()
            .contains(&json!("working")),
        "{recalled}"
    );
    // A batch goes to Redis in one round trip; the window stays bounded by working.window (32).
    let memories: Vec<serde_json::Value> = (0..40)
        .map(|i| json!({"content": format!("step {i} of the migration plan"), "session_id": "focus"}))
        .collect();
    let batch = app
        .post(
            "/tools/remember_batch",
            &json!({"agent_id": agent, "memories": memories}),
        )
        .await;
    assert_status(batch, StatusCode::CREATED).await;
    assert_eq!(llen(&url, &key).await, Some(32));
    let _: () = redis::cmd("DEL")
        .arg(&key)
        .query_async(&mut connection)
        .await
        .unwrap();
}

/// A private redis-server on a free port, killed and restarted by the test.
pub(crate) struct PrivateRedis {
    port: u16,
    child: Option<tokio::process::Child>,
}

impl PrivateRedis {
    pub(crate) async fn start(port: u16) -> Option<Self> {
        let child = tokio::process::Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .ok()?;
        let server = Self {
            port,
            child: Some(child),
        };
        let url = server.url();
        eventually(Duration::from_secs(10), || async {
            redis_client(&url).await.is_some()
        })
        .await
        .then_some(server)
    }

    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    pub(crate) async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill().await;
            let _ = child.wait().await;
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn working_state(app: &TestApp) -> Value {
    let health = assert_status(app.get("/health").await, StatusCode::OK).await;
    health["backends"]["working"].clone()
}

#[tokio::test]
async fn a_redis_outage_falls_back_in_process_and_recovers_by_itself() {
    let test = "a_redis_outage_falls_back_in_process_and_recovers_by_itself";
    let port = free_port();
    let Some(mut redis) = PrivateRedis::start(port).await else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have redis-server on PATH"
        );
        skipped(test, "redis-server is not on PATH");
        return;
    };
    let url = redis.url();
    let app = redis_app(&url).await;
    let key = "mnemos:{ops}:{s1}:window";
    app.remember(
        "ops",
        "deploy freeze starts Friday",
        json!({"session_id": "s1"}),
    )
    .await;
    assert_eq!(llen(&url, key).await, Some(1));

    redis.kill().await;
    // Writes keep being acknowledged, and land in SQL, while Redis is down.
    let mut during = Vec::new();
    for i in 0..5 {
        let body = app
            .remember(
                "ops",
                &format!("outage note {i}: rollback plan ready"),
                json!({"session_id": "s1"}),
            )
            .await;
        during.push(body["memory"]["id"].as_str().unwrap().to_string());
    }
    let state = working_state(&app).await;
    assert_eq!(state["state"], "degraded", "{state}");
    assert!(
        state["fallback"]
            .as_str()
            .unwrap()
            .contains("Redis unreachable"),
        "{state}"
    );
    let health = assert_status(app.get("/health").await, StatusCode::OK).await;
    assert_eq!(health["status"], "degraded");
    // Recall keeps answering, with the session's window served in-process.
    let recalled = app
        .recall(
            "ops",
            "rollback plan",
            json!({"session_id": "s1", "debug": true}),
        )
        .await;
    assert!(
        recalled["results"].as_array().unwrap().iter().any(|r| {
            r["matched_by"]
                .as_array()
                .unwrap()
                .contains(&json!("working"))
        }),
        "{recalled}"
    );
    for id in &during {
        let response = app.get(&format!("/v1/memories/{id}?agent_id=ops")).await;
        assert_status(response, StatusCode::OK).await;
    }

    // Redis comes back (empty: it keeps nothing on disk); the store reconnects on its own
    // at the next use and copies the outage's window back.
    let _redis = PrivateRedis::start(port).await.expect("redis restarts");
    let recovered = eventually(Duration::from_secs(15), || async {
        app.recall("ops", "rollback", json!({"session_id": "s1"}))
            .await;
        working_state(&app).await["state"] == "up"
    })
    .await;
    assert!(
        recovered,
        "working memory did not reconnect: {}",
        working_state(&app).await
    );
    assert_eq!(
        llen(&url, key).await,
        Some(5),
        "the outage's window was copied back"
    );
    app.remember("ops", "freeze lifted Monday", json!({"session_id": "s1"}))
        .await;
    assert_eq!(llen(&url, key).await, Some(6));
}

#[tokio::test]
async fn an_unreachable_redis_at_start_is_a_degraded_start_not_a_failure() {
    let port = free_port();
    let app = redis_app(&format!("redis://127.0.0.1:{port}/0")).await;
    let body = app
        .remember("x", "works without redis", json!({"session_id": "s"}))
        .await;
    assert!(body["memory"]["id"].is_string());
    let state = working_state(&app).await;
    assert_eq!(state["state"], "degraded", "{state}");
    // A malformed URL is refused at start, naming the key.
    let temp = tempfile::tempdir().unwrap();
    let mut settings = test_settings(temp.path());
    settings.working.backend = "redis".into();
    settings.working.url = "http://nope".into();
    let error = match try_spawn_with(settings, Some(temp)).await {
        Ok(_) => panic!("a bad working.url must refuse to start"),
        Err(error) => error.to_string(),
    };
    assert!(error.contains("working.url"), "{error}");
}

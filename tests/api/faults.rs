//! Backend faults under load: with writers and readers running throughout, Redis
//! (working memory) goes down, then FalkorDB (the graph projection), and both come back
//! empty. Every acknowledged write is in SQL, recall answers throughout, working memory
//! reconnects by itself and the projection converges within 60 s of recovery.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mnemos::graph::falkordb::FalkorProjection;
use mnemos_actors::model::AgentId;
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::falkordb::{falkor_or_skip, free_port, projection_state, Falkor};
use crate::helpers::*;
use crate::redis_working::PrivateRedis;

async fn working_state(app: &TestApp) -> String {
    let health = assert_status(app.get("/health").await, StatusCode::OK).await;
    health["backends"]["working"]["state"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Wait until at least `more` writes beyond `from` are acknowledged.
async fn writes_beyond(acknowledged: &Mutex<Vec<String>>, from: usize, more: usize) -> bool {
    eventually(Duration::from_secs(60), || async {
        acknowledged.lock().unwrap().len() >= from + more
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_then_falkordb_go_down_under_load_and_nothing_acknowledged_is_lost() {
    let test = "redis_then_falkordb_go_down_under_load_and_nothing_acknowledged_is_lost";
    let Some(bin) = falkor_or_skip(test).await else {
        return;
    };
    let redis_port = free_port();
    let Some(mut redis) = PrivateRedis::start(redis_port).await else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have redis-server on PATH"
        );
        skipped(test, "redis-server is not on PATH");
        return;
    };
    let falkor_port = free_port();
    let mut falkor = Falkor::start(&bin, falkor_port).await;
    let temp = tempfile::tempdir().unwrap();
    let mut settings = test_settings(temp.path());
    settings.working.backend = "redis".into();
    settings.working.url = redis.url();
    settings.working.timeout_ms = 300;
    settings.graph.backend = "falkordb".into();
    settings.graph.url = falkor.url();
    settings.graph.name = "faults".into();
    settings.graph.timeout_ms = 1000;
    settings.projector.interval_ms = 50;
    settings.projector.retry_initial_ms = 100;
    settings.projector.retry_max_ms = 1000;
    let app = Arc::new(spawn_with(settings, Some(temp)).await);

    let stop = Arc::new(AtomicBool::new(false));
    let acknowledged = Arc::new(Mutex::new(Vec::<String>::new()));
    let recalls = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for writer in 0..3 {
        let (app, stop, acknowledged) = (app.clone(), stop.clone(), acknowledged.clone());
        tasks.push(tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let content = format!(
                    "writer {writer} note {n}: {} checked",
                    uuid::Uuid::new_v4().simple()
                );
                let response = app
                    .post(
                        "/tools/remember",
                        &json!({"agent_id": "ops", "content": content, "session_id": format!("s{writer}")}),
                    )
                    .await;
                assert_eq!(
                    response.status(),
                    StatusCode::CREATED,
                    "every write is acknowledged, whatever is down"
                );
                let body: Value = response.json().await.unwrap();
                acknowledged
                    .lock()
                    .unwrap()
                    .push(body["memory"]["id"].as_str().unwrap().to_string());
                n += 1;
            }
        }));
    }
    {
        let (app, stop, recalls) = (app.clone(), stop.clone(), recalls.clone());
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let response = app
                    .post(
                        "/tools/recall",
                        &json!({"agent_id": "ops", "query": "writer note checked", "session_id": "s0"}),
                    )
                    .await;
                assert_eq!(response.status(), StatusCode::OK, "recall answers throughout");
                recalls.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }

    assert!(writes_beyond(&acknowledged, 0, 30).await);
    redis.kill().await;
    let degraded = eventually(Duration::from_secs(30), || async {
        working_state(&app).await == "degraded"
    })
    .await;
    assert!(degraded, "working memory never reported the Redis outage");
    let count = acknowledged.lock().unwrap().len();
    assert!(writes_beyond(&acknowledged, count, 20).await);

    falkor.kill().await;
    let behind = eventually(Duration::from_secs(30), || async {
        projection_state(&app).await["state"] == "behind"
    })
    .await;
    assert!(behind, "{}", projection_state(&app).await);
    let count = acknowledged.lock().unwrap().len();
    assert!(writes_beyond(&acknowledged, count, 20).await);

    // Both come back empty (they keep nothing on disk).
    let _redis = PrivateRedis::start(redis_port)
        .await
        .expect("redis restarts");
    let _falkor = Falkor::start(&bin, falkor_port).await;
    let recovered = eventually(Duration::from_secs(30), || async {
        working_state(&app).await == "up"
    })
    .await;
    assert!(recovered, "working memory did not reconnect by itself");
    let count = acknowledged.lock().unwrap().len();
    assert!(writes_beyond(&acknowledged, count, 20).await);
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.unwrap();
    }
    assert!(recalls.load(Ordering::Relaxed) > 0);

    // Every acknowledged write is in SQL.
    let ids = acknowledged.lock().unwrap().clone();
    for id in &ids {
        assert_status(
            app.get(&format!("/v1/memories/{id}?agent_id=ops")).await,
            StatusCode::OK,
        )
        .await;
    }
    let stats = assert_status(
        app.post("/tools/reflect", &json!({"agent_id": "ops"}))
            .await,
        StatusCode::OK,
    )
    .await;
    let total = stats["total"].as_i64().unwrap();
    assert_eq!(total as usize, ids.len(), "{stats}");
    // The projection converges within 60 s of recovery, and recall reads it again.
    let graph =
        FalkorProjection::new(&falkor_url(falkor_port), "faults", Duration::from_secs(5)).unwrap();
    let agent = AgentId::parse("ops").unwrap();
    let converged = eventually(Duration::from_secs(60), || async {
        graph.counts(&agent).await.ok().map(|c| c.0) == Some(total)
            && projection_state(&app).await["lag_entries"] == 0
    })
    .await;
    assert!(
        converged,
        "graph {:?} vs SQL {total}; projection {}",
        graph.counts(&agent).await,
        projection_state(&app).await
    );
    let recalled = app
        .recall("ops", "writer note", json!({"debug": true}))
        .await;
    assert_eq!(recalled["sources"]["graph"], "falkordb", "{recalled}");
}

fn falkor_url(port: u16) -> String {
    format!("redis://127.0.0.1:{port}")
}

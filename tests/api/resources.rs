//! Resource routes: browse, get, patch, delete, history, health, metrics, OpenAPI.

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_pages_newest_first_with_a_cursor_and_filters() {
    let app = spawn_app().await;
    let mut ids = Vec::new();
    for n in 0..7 {
        let kind = if n % 2 == 0 { "episodic" } else { "semantic" };
        let tags = if n == 3 {
            json!(["special"])
        } else {
            json!([])
        };
        ids.push(
            app.remember(
                "p",
                &format!("memory number {n}"),
                json!({"type": kind, "tags": tags}),
            )
            .await["memory"]["id"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    let first = assert_status(
        app.get("/v1/memories?agent_id=p&limit=3").await,
        StatusCode::OK,
    )
    .await;
    let page: Vec<&str> = first["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        page,
        vec![ids[6].as_str(), ids[5].as_str(), ids[4].as_str()]
    );
    let cursor = first["next_cursor"].as_str().unwrap();
    let second = assert_status(
        app.get(&format!("/v1/memories?agent_id=p&limit=3&cursor={cursor}"))
            .await,
        StatusCode::OK,
    )
    .await;
    let page: Vec<&str> = second["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        page,
        vec![ids[3].as_str(), ids[2].as_str(), ids[1].as_str()]
    );
    let cursor = second["next_cursor"].as_str().unwrap();
    let last = assert_status(
        app.get(&format!("/v1/memories?agent_id=p&limit=3&cursor={cursor}"))
            .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(last["memories"].as_array().unwrap().len(), 1);
    assert!(last["next_cursor"].is_null());

    let semantic = assert_status(
        app.get("/v1/memories?agent_id=p&type=semantic").await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(semantic["memories"].as_array().unwrap().len(), 3);
    let tagged = assert_status(
        app.get("/v1/memories?agent_id=p&tag=special").await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(tagged["memories"][0]["id"], ids[3].as_str());
    let archived = assert_status(
        app.get("/v1/memories?agent_id=p&status=archived").await,
        StatusCode::OK,
    )
    .await;
    assert!(archived["memories"].as_array().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_keeps_every_previous_version_and_reindexes() {
    let app = spawn_app().await;
    let stored = app
        .remember(
            "u",
            "I live in Paris",
            json!({"type": "semantic", "importance": 0.4}),
        )
        .await;
    let id = stored["memory"]["id"].as_str().unwrap();
    let patched = assert_status(
        app.patch(
            &format!("/v1/memories/{id}?agent_id=u"),
            &json!({"content": "I live in Tokyo", "importance": 0.9}),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(patched["content"], "I live in Tokyo");
    assert_eq!(patched["version"], 2);
    assert_eq!(patched["importance"], 0.9);
    assert_eq!(patched["type"], "semantic");
    let retitled = assert_status(
        app.patch(
            &format!("/v1/memories/{id}?agent_id=u"),
            &json!({"title": "home", "tags": ["home"]}),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(retitled["version"], 3);
    assert_eq!(retitled["title"], "home");

    let history = assert_status(
        app.post("/tools/memory_history", &json!({"id": id, "agent_id": "u"}))
            .await,
        StatusCode::OK,
    )
    .await;
    let versions = history["versions"].as_array().unwrap();
    assert_eq!(versions.len(), 2);
    assert_eq!(versions[0]["version"], 1);
    assert_eq!(versions[0]["content"], "I live in Paris");
    assert_eq!(versions[0]["importance"], 0.4);
    assert_eq!(versions[0]["reason"], "update");
    assert_eq!(versions[1]["content"], "I live in Tokyo");

    let found = app.recall("u", "tokyo", json!({})).await;
    assert_eq!(found["results"][0]["memory"]["id"], id);
    let old = app.recall("u", "paris", json!({})).await;
    assert!(
        old["results"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["matched_by"] != json!(["keyword"])),
        "old content no longer keyword-matches"
    );

    let archived = assert_status(
        app.patch(
            &format!("/v1/memories/{id}?agent_id=u"),
            &json!({"status": "archived"}),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(archived["status"], "archived");
    assert!(app.recall("u", "tokyo", json!({})).await["results"]
        .as_array()
        .unwrap()
        .is_empty());
    let active = assert_status(
        app.patch(
            &format!("/v1/memories/{id}?agent_id=u"),
            &json!({"status": "active"}),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(active["status"], "active");
    assert_eq!(
        app.recall("u", "tokyo", json!({})).await["results"][0]["memory"]["id"],
        id,
        "reactivated memories are recalled again"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_removes_the_memory_its_history_and_its_edges() {
    let app = spawn_app().await;
    let a = app.remember("d", "to be deleted", json!({})).await["memory"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let b = app.remember("d", "stays", json!({})).await["memory"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_status(
        app.post(
            "/tools/associate",
            &json!({"agent_id": "d", "from_id": a, "to_id": b}),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    let deleted = assert_status(
        app.delete(&format!("/v1/memories/{a}?agent_id=d")).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(deleted["deleted"], a.as_str());
    assert_error(
        app.get(&format!("/v1/memories/{a}?agent_id=d")).await,
        StatusCode::NOT_FOUND,
        "not_found",
        None,
    )
    .await;
    assert_error(
        app.get(&format!("/v1/memories/{a}/history?agent_id=d"))
            .await,
        StatusCode::NOT_FOUND,
        "not_found",
        None,
    )
    .await;
    assert_error(
        app.delete(&format!("/v1/memories/{a}?agent_id=d")).await,
        StatusCode::NOT_FOUND,
        "not_found",
        None,
    )
    .await;
    assert!(app.recall("d", "deleted", json!({})).await["results"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["memory"]["id"] != a.as_str()));
    let spread = assert_status(
        app.post(
            "/tools/spreading_activation",
            &json!({"agent_id": "d", "seed_id": b}),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert!(
        spread["results"].as_array().unwrap().is_empty(),
        "no edge survives its memory"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_metrics_and_openapi_describe_the_server() {
    let app = spawn_app().await;
    app.remember("m", "something", json!({})).await;
    let health = assert_status(app.get("/health").await, StatusCode::OK).await;
    assert_eq!(health["status"], "ok");
    let backend = if crate::helpers::on_postgres() {
        "postgres"
    } else {
        "sqlite"
    };
    assert_eq!(health["backends"]["store"]["backend"], backend);
    assert_eq!(health["backends"]["vectors"]["indexed"], 1);
    let actors: Vec<&str> = health["actors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        actors,
        vec![
            "working",
            "episodic",
            "vectors",
            "graph",
            "namespaces",
            "consolidator",
            "projector",
            "cognition"
        ]
    );
    assert!(health["actors"]
        .as_array()
        .unwrap()
        .iter()
        .all(|a| a["state"] == "running"));

    let metrics = app.get("/metrics").await;
    assert_eq!(metrics.status(), StatusCode::OK);
    let text = metrics.text().await.unwrap();
    assert!(text.contains("mnemos_http_requests_total"), "{text}");
    assert!(text.contains("route=\"/tools/remember\""), "{text}");

    let openapi = assert_status(app.get("/openapi.json").await, StatusCode::OK).await;
    for path in [
        "/tools/remember",
        "/tools/recall",
        "/v1/memories/{id}",
        "/health",
    ] {
        assert!(openapi["paths"][path].is_object(), "openapi lacks {path}");
    }
}

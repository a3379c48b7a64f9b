//! What a browser of the memory reads (the web console's server side): the agents of a
//! tenant, memories filtered by session, time and full text with a total, bulk forget
//! and restore, a memory's associations, neighbourhood and retention curve, an agent's
//! sessions, the tenant's KV namespaces, build_context's sections and the schedule and
//! recall percentiles of `/health`.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::*;

async fn ok(response: reqwest::Response) -> Value {
    assert_status(response, StatusCode::OK).await
}

#[tokio::test]
async fn memories_filter_by_session_time_and_full_text_and_count_them() {
    let app = spawn_app().await;
    for (content, extra) in [
        (
            "Deploys freeze on Fridays at noon",
            json!({"session_id": "ops", "occurred_at": "2024-03-01T10:00:00Z"}),
        ),
        (
            "The deploy pipeline runs on GitHub Actions",
            json!({"session_id": "ops", "occurred_at": "2024-03-05T10:00:00Z"}),
        ),
        (
            "Lunch is at noon in the big room",
            json!({"session_id": "chat", "occurred_at": "2024-03-06T10:00:00Z"}),
        ),
        (
            "DEPLOY keys rotate monthly",
            json!({"occurred_at": "2024-04-01T10:00:00Z"}),
        ),
    ] {
        app.remember("ana", content, extra).await;
    }
    let page = ok(app
        .get("/v1/memories?agent_id=ana&session_id=ops&with_total=true")
        .await)
    .await;
    assert_eq!(page["total"], 2, "{page}");
    assert_eq!(page["memories"].as_array().unwrap().len(), 2);
    // Every word must appear, in any case.
    let page = ok(app
        .get("/v1/memories?agent_id=ana&q=deploy&with_total=true")
        .await)
    .await;
    assert_eq!(page["total"], 3, "{page}");
    let page = ok(app.get("/v1/memories?agent_id=ana&q=Deploy%20NOON").await).await;
    let contents: Vec<&str> = page["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(contents, ["Deploys freeze on Fridays at noon"]);
    // A time range keeps newest-first paging by cursor.
    let first = ok(app
        .get("/v1/memories?agent_id=ana&occurred_after=2024-03-01T00:00:00Z&occurred_before=2024-03-31T00:00:00Z&limit=2&with_total=true")
        .await)
    .await;
    assert_eq!(first["total"], 3, "{first}");
    assert_eq!(first["memories"].as_array().unwrap().len(), 2);
    let cursor = first["next_cursor"]
        .as_str()
        .expect("a second page")
        .to_string();
    let second = ok(app
        .get(&format!("/v1/memories?agent_id=ana&occurred_after=2024-03-01T00:00:00Z&occurred_before=2024-03-31T00:00:00Z&limit=2&cursor={cursor}"))
        .await)
    .await;
    assert_eq!(second["memories"].as_array().unwrap().len(), 1, "{second}");
    assert!(second["next_cursor"].is_null());
    // One bound alone is open on the other side.
    let since = ok(app
        .get("/v1/memories?agent_id=ana&occurred_after=2024-03-05T00:00:00Z&with_total=true")
        .await)
    .await;
    assert_eq!(since["total"], 3, "{since}");
    let until = ok(app
        .get("/v1/memories?agent_id=ana&occurred_before=2024-03-02T00:00:00Z&with_total=true")
        .await)
    .await;
    assert_eq!(until["total"], 1, "{until}");
    // Bad input names its field.
    for (query, field) in [
        ("cursor=zzz", "cursor"),
        (
            "occurred_after=2024-05-01T00:00:00Z&occurred_before=2024-04-01T00:00:00Z",
            "occurred_before",
        ),
        ("occurred_after=yesterday", "occurred_after"),
    ] {
        let response = app.get(&format!("/v1/memories?agent_id=ana&{query}")).await;
        assert_error(
            response,
            StatusCode::BAD_REQUEST,
            "invalid_argument",
            Some(field),
        )
        .await;
    }
}

#[tokio::test]
async fn bulk_forget_and_restore_report_each_id_and_keep_the_history() {
    let app = spawn_app().await;
    let a = app
        .remember("bo", "The cache TTL is ten minutes", json!({}))
        .await["memory"]["id"]
        .clone();
    let b = app
        .remember("bo", "Staging runs on port 5433", json!({}))
        .await["memory"]["id"]
        .clone();
    let other = app.remember("cy", "Cy's own note", json!({})).await["memory"]["id"].clone();
    let forgotten = ok(app
        .post("/v1/memories/bulk", &json!({"agent_id": "bo", "action": "forget", "ids": [a, b, other, "0190f0f0-0000-7000-8000-000000000000"]}))
        .await)
    .await;
    assert_eq!(forgotten["changed"], json!([a, b]), "{forgotten}");
    assert_eq!(
        forgotten["missing"].as_array().unwrap().len(),
        2,
        "another agent's memory is missing to bo"
    );
    let again = ok(app
        .post(
            "/v1/memories/bulk",
            &json!({"agent_id": "bo", "action": "forget", "ids": [a]}),
        )
        .await)
    .await;
    assert_eq!(again["unchanged"], json!([a]));
    let memory = ok(app
        .get(&format!("/v1/memories/{}?agent_id=bo", a.as_str().unwrap()))
        .await)
    .await;
    assert_eq!(memory["status"], "archived");
    let restored = ok(app
        .post(
            "/v1/memories/bulk",
            &json!({"agent_id": "bo", "action": "restore", "ids": [a]}),
        )
        .await)
    .await;
    assert_eq!(restored["changed"], json!([a]));
    let history = ok(app
        .get(&format!(
            "/v1/memories/{}/history?agent_id=bo",
            a.as_str().unwrap()
        ))
        .await)
    .await;
    let reasons: Vec<&str> = history["versions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["reason"].as_str())
        .collect();
    assert!(
        reasons.contains(&"forget") && reasons.contains(&"restore"),
        "{history}"
    );
    for (body, field) in [
        (
            json!({"agent_id": "bo", "action": "burn", "ids": [a]}),
            "action",
        ),
        (
            json!({"agent_id": "bo", "action": "forget", "ids": []}),
            "ids",
        ),
    ] {
        let response = app.post("/v1/memories/bulk", &body).await;
        assert_error(
            response,
            StatusCode::BAD_REQUEST,
            "invalid_argument",
            Some(field),
        )
        .await;
    }
}

#[tokio::test]
async fn associations_neighbourhood_and_retention_of_a_memory() {
    let app = spawn_app().await;
    let mut ids = Vec::new();
    for i in 0..6 {
        let stored = app
            .remember(
                "di",
                &format!("Chain link number {i} of the release checklist"),
                json!({"type": "episodic"}),
            )
            .await;
        ids.push(stored["memory"]["id"].as_str().unwrap().to_string());
    }
    // 0 - 1 - 2 - 3 - 4, and 0 - 5.
    for (from, to) in [(0, 1), (1, 2), (2, 3), (3, 4), (0, 5)] {
        let response = app
            .post("/tools/associate", &json!({"agent_id": "di", "from_id": ids[from], "to_id": ids[to], "relation": "follows", "weight": 0.7}))
            .await;
        assert!(
            response.status().is_success(),
            "{}",
            response.text().await.unwrap()
        );
    }
    let associations = ok(app
        .get(&format!("/v1/memories/{}/associations?agent_id=di", ids[0]))
        .await)
    .await;
    let others: Vec<&str> = associations["associations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["other"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(others.len(), 2, "{associations}");
    assert!(others.contains(&ids[1].as_str()) && others.contains(&ids[5].as_str()));
    assert_eq!(associations["associations"][0]["relation"], "follows");

    let graph = ok(app
        .get(&format!(
            "/v1/memories/{}/graph?agent_id=di&depth=2",
            ids[0]
        ))
        .await)
    .await;
    let depth_of = |id: &str| {
        graph["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["id"] == id)
            .map(|n| n["depth"].as_u64().unwrap())
    };
    assert_eq!(depth_of(&ids[0]), Some(0), "{graph}");
    assert_eq!(depth_of(&ids[1]), Some(1));
    assert_eq!(depth_of(&ids[5]), Some(1));
    assert_eq!(depth_of(&ids[2]), Some(2));
    assert_eq!(depth_of(&ids[3]), None, "three hops away");
    assert_eq!(graph["edges"].as_array().unwrap().len(), 3, "{graph}");
    let small = ok(app
        .get(&format!(
            "/v1/memories/{}/graph?agent_id=di&depth=4&limit=3",
            ids[0]
        ))
        .await)
    .await;
    assert_eq!(small["nodes"].as_array().unwrap().len(), 3);
    let error = app
        .get(&format!(
            "/v1/memories/{}/graph?agent_id=di&depth=9",
            ids[0]
        ))
        .await;
    assert_error(
        error,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("depth"),
    )
    .await;
    let error = app
        .get(&format!("/v1/memories/{}/graph?agent_id=ed", ids[0]))
        .await;
    assert_error(error, StatusCode::NOT_FOUND, "not_found", Some("id")).await;

    let curve = ok(app
        .get(&format!(
            "/v1/memories/{}/retention?agent_id=di&days=60&points=5",
            ids[0]
        ))
        .await)
    .await;
    let points = curve["points"].as_array().unwrap();
    assert_eq!(points.len(), 5, "{curve}");
    assert_eq!(points[0]["retention"], 1.0);
    let values: Vec<f64> = points
        .iter()
        .map(|p| p["retention"].as_f64().unwrap())
        .collect();
    assert!(values.windows(2).all(|w| w[1] <= w[0]), "{curve}");
    assert!(curve["retention"].as_f64().unwrap() > values[4]);
    let error = app
        .get(&format!(
            "/v1/memories/{}/retention?agent_id=di&points=1",
            ids[0]
        ))
        .await;
    assert_error(
        error,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("points"),
    )
    .await;
}

#[tokio::test]
async fn agents_sessions_and_namespaces_are_listed_within_the_tenant() {
    use mnemos::auth::Scope;
    let (app, secrets) = spawn_with_keys(&[
        KeySpec {
            tenant: "acme",
            agent: None,
            scopes: &[Scope::Read, Scope::Write],
            expires_at: None,
            revoked: false,
        },
        KeySpec {
            tenant: "acme",
            agent: Some("eve"),
            scopes: &[Scope::Read, Scope::Write],
            expires_at: None,
            revoked: false,
        },
        KeySpec {
            tenant: "globex",
            agent: None,
            scopes: &[Scope::Read, Scope::Write],
            expires_at: None,
            revoked: false,
        },
    ])
    .await;
    let (acme, eve, globex) = (
        format!("Bearer {}", secrets[0]),
        format!("Bearer {}", secrets[1]),
        format!("Bearer {}", secrets[2]),
    );
    let send = |auth: &str, method: reqwest::Method, path: &str, body: Option<Value>| {
        let auth = auth.to_string();
        let path = path.to_string();
        let app = &app;
        async move { app.send_as(Some(&auth), method, &path, body.as_ref()).await }
    };
    use reqwest::Method as M;
    for (agent, content) in [
        ("eve", "Eve likes green tea"),
        ("eve", "Eve deploys on Mondays"),
        ("fay", "Fay owns billing"),
    ] {
        let response = send(
            &acme,
            M::POST,
            "/tools/remember",
            Some(json!({"agent_id": agent, "content": content})),
        )
        .await;
        assert_eq!(response.status(), StatusCode::CREATED);
    }
    let response = send(
        &globex,
        M::POST,
        "/tools/remember",
        Some(json!({"agent_id": "eve", "content": "globex eve"})),
    )
    .await;
    assert_eq!(response.status(), StatusCode::CREATED);
    for session in ["s-old", "s-new"] {
        let response = send(
            &acme,
            M::POST,
            &format!("/v1/sessions/{session}/messages"),
            Some(json!({"agent_id": "eve", "role": "user", "content": "hello there"})),
        )
        .await;
        assert_eq!(response.status(), StatusCode::CREATED);
    }
    let response = send(
        &acme,
        M::PUT,
        "/v1/namespaces/cache",
        Some(json!({"max_entries": 10})),
    )
    .await;
    assert!(response.status().is_success());
    let response = send(
        &globex,
        M::PUT,
        "/v1/namespaces/other",
        Some(json!({"max_entries": 10})),
    )
    .await;
    assert!(response.status().is_success());

    let agents = ok(send(&acme, M::GET, "/v1/agents", None).await).await;
    assert_eq!(agents["agents"].as_array().unwrap().len(), 2, "{agents}");
    assert_eq!(agents["agents"][0]["agent_id"], "eve");
    assert_eq!(agents["agents"][0]["memories"], 2);
    assert_eq!(agents["agents"][0]["active"], 2);
    let only_eve = ok(send(&eve, M::GET, "/v1/agents", None).await).await;
    assert_eq!(
        only_eve["agents"].as_array().unwrap().len(),
        1,
        "{only_eve}"
    );
    let theirs = ok(send(&globex, M::GET, "/v1/agents", None).await).await;
    assert_eq!(theirs["agents"].as_array().unwrap().len(), 1, "{theirs}");
    assert_eq!(theirs["agents"][0]["memories"], 1);

    let sessions = ok(send(&eve, M::GET, "/v1/sessions", None).await).await;
    let names: Vec<&str> = sessions["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["session_id"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["s-new", "s-old"], "{sessions}");
    assert_eq!(sessions["sessions"][0]["total_messages"], 1);
    let none = ok(send(&globex, M::GET, "/v1/sessions?agent_id=eve", None).await).await;
    assert_eq!(
        none["sessions"],
        json!([]),
        "another tenant's eve has no sessions"
    );

    let namespaces = ok(send(&acme, M::GET, "/v1/namespaces", None).await).await;
    assert_eq!(
        namespaces["namespaces"].as_array().unwrap().len(),
        1,
        "{namespaces}"
    );
    assert_eq!(namespaces["namespaces"][0]["namespace"], "cache");
    assert_eq!(namespaces["namespaces"][0]["max_entries"], 10);
}

#[tokio::test]
async fn build_context_names_its_sections_and_health_tells_the_schedule_and_recall_time() {
    let app = spawn_app().await;
    app.remember(
        "gus",
        "1. Stop the worker. 2. Run make restart. 3. Check the logs.",
        json!({"type": "procedural"}),
    )
    .await;
    app.remember(
        "gus",
        "The worker restart takes about two minutes",
        json!({"type": "semantic"}),
    )
    .await;
    let built = ok(app
        .post("/tools/build_context", &json!({"agent_id": "gus", "query": "how do I restart the worker", "context_budget": 500}))
        .await)
    .await;
    let sections = built["metadata"]["sections"].as_array().unwrap();
    assert_eq!(sections[0]["name"], "Procedures and constraints", "{built}");
    assert_eq!(sections[0]["memories"], 1);
    let total: u64 = sections.iter().map(|s| s["tokens"].as_u64().unwrap()).sum();
    assert!(
        total > 0 && total as i64 - built["metadata"]["tokens_used"].as_i64().unwrap() <= 2,
        "{built}"
    );

    app.recall("gus", "restart the worker", json!({})).await;
    let health = ok(app.get("/health").await).await;
    let archival = &health["schedule"]["archival"];
    assert!(archival["cron"].is_string(), "{health}");
    assert!(health["schedule"]["sleep_cycle"].is_object(), "{health}");
    let latency = &health["recall_latency_ms"];
    assert!(latency["count"].as_u64().unwrap() >= 1, "{health}");
    assert!(latency["p50"].as_f64().unwrap() > 0.0);
    assert!(latency["p99"].as_f64().unwrap() >= latency["p50"].as_f64().unwrap());
}

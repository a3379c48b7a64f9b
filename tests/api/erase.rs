//! Erase: `DELETE /v1/agents/{agent}` and `DELETE /v1/tenants/{tenant}` remove
//! everything an agent owns from every store, report it per store, are audited, and a
//! scan of each store afterwards finds nothing of the agent.

use std::time::Duration;

use mnemos::graph::falkordb::FalkorProjection;
use mnemos_actors::model::AgentId;
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::helpers::*;
use mnemos::auth::Scope;

/// Rows of `agent` in every table of the system of record that holds an agent's data,
/// by table (only the tables with any).
async fn rows_of(
    settings: &mnemos::config::Settings,
    agent: &str,
    ids: &[String],
) -> Vec<(String, i64)> {
    let mut queries: Vec<(String, String)> = [
        "memories",
        "associations",
        "consolidation_runs",
        "session_archives",
        "sessions",
        "session_messages",
        "projects",
        "project_sessions",
        "outbox",
    ]
    .iter()
    .map(|t| {
        (
            t.to_string(),
            format!("SELECT COUNT(*) FROM {t} WHERE agent_id = '{agent}'"),
        )
    })
    .collect();
    queries.push((
        "kv_entries".into(),
        format!("SELECT COUNT(*) FROM kv_entries WHERE written_by = '{agent}'"),
    ));
    let list = ids
        .iter()
        .map(|i| format!("'{i}'"))
        .collect::<Vec<_>>()
        .join(",");
    if !list.is_empty() {
        for t in ["memory_versions", "memory_embeddings"] {
            queries.push((
                t.into(),
                format!("SELECT COUNT(*) FROM {t} WHERE memory_id IN ({list})"),
            ));
        }
        queries.push((
            "outbox (by memory)".into(),
            format!(
                "SELECT COUNT(*) FROM outbox WHERE memory_id IN ({list}) OR from_id IN ({list})"
            ),
        ));
    }
    let mut found = Vec::new();
    if on_postgres() {
        let pool = sqlx::PgPool::connect(&settings.storage.url).await.unwrap();
        for (table, sql) in queries {
            let (n,): (i64,) = sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .fetch_one(&pool)
                .await
                .unwrap();
            if n > 0 {
                found.push((table, n));
            }
        }
        pool.close().await;
    } else {
        let url = format!("sqlite://{}?mode=ro", settings.sqlite_path().display());
        let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
        for (table, sql) in queries {
            let (n,): (i64,) = sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .fetch_one(&pool)
                .await
                .unwrap();
            if n > 0 {
                found.push((table, n));
            }
        }
        pool.close().await;
    }
    found
}

/// Give `agent` one of everything: memories (with a version, an edge, a session),
/// session messages, a project, a KV entry. Returns the memory ids.
async fn seed(app: &TestApp, agent: &str) -> Vec<String> {
    let a = app
        .remember(
            agent,
            &format!("{agent} deploys from the blue laptop"),
            json!({"session_id": "s1"}),
        )
        .await["memory"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let b = app
        .remember(
            agent,
            &format!("{agent} keeps the deploy key in the vault"),
            json!({}),
        )
        .await["memory"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    for (method, path, body) in [
        (
            Method::PATCH,
            format!("/v1/memories/{a}?agent_id={agent}"),
            json!({"importance": 0.9}),
        ),
        (
            Method::POST,
            "/tools/associate".to_string(),
            json!({"agent_id": agent, "from_id": a, "to_id": b}),
        ),
        (
            Method::POST,
            "/v1/sessions/chat/messages".to_string(),
            json!({"agent_id": agent, "role": "user", "content": "I deploy on Tuesdays."}),
        ),
        (
            Method::PUT,
            "/v1/projects/infra".to_string(),
            json!({"agent_id": agent, "name": "Infra"}),
        ),
        (
            Method::PUT,
            "/v1/projects/infra/sessions/chat".to_string(),
            json!({"agent_id": agent}),
        ),
        (
            Method::PUT,
            format!("/v1/namespaces/team/entries/{agent}-note"),
            json!({"agent_id": agent, "value": "left by the agent"}),
        ),
    ] {
        let response = app
            .send_as(
                app.key.as_ref().map(|k| format!("Bearer {k}")).as_deref(),
                method.clone(),
                &path,
                Some(&body),
            )
            .await;
        assert!(
            response.status().is_success(),
            "{method} {path}: {}",
            response.text().await.unwrap()
        );
    }
    vec![a, b]
}

#[tokio::test]
async fn erasing_an_agent_removes_it_from_every_store_and_leaves_the_others() {
    let temp = tempfile::tempdir().unwrap();
    let mut settings = test_settings(temp.path());
    settings.projector.interval_ms = 50;
    let app = spawn_with(settings.clone(), Some(temp)).await;
    let ids = seed(&app, "alice").await;
    let kept = seed(&app, "bob").await;

    let report = assert_status(app.delete("/v1/agents/alice").await, StatusCode::OK).await;
    let sor = &report["system_of_record"];
    assert_eq!(report["agent_id"], "alice", "{report}");
    assert!(sor["memories"].as_u64().unwrap() >= 2, "{report}");
    assert!(sor["versions"].as_u64().unwrap() >= 1, "{report}");
    assert_eq!(sor["edges"], 1, "{report}");
    assert_eq!(sor["projects"], 1, "{report}");
    assert_eq!(sor["kv_entries"], 1, "{report}");
    assert!(sor["sessions"].as_u64().unwrap() >= 1, "{report}");
    assert!(sor["session_messages"].as_u64().unwrap() >= 1, "{report}");
    assert!(report["vector_index"].as_u64().unwrap() >= 2, "{report}");

    // Scan every store: nothing of alice is left (the outbox's deletes drain once
    // projected), while bob keeps all of his.
    let scanned = eventually(Duration::from_secs(30), || async {
        rows_of(&settings, "alice", &ids).await.is_empty()
    })
    .await;
    assert!(
        scanned,
        "left behind: {:?}",
        rows_of(&settings, "alice", &ids).await
    );
    assert!(!rows_of(&settings, "bob", &kept).await.is_empty());
    if settings.graph.backend == "falkordb" {
        let graph = FalkorProjection::new(
            &settings.graph.url,
            &settings.graph.name,
            Duration::from_secs(5),
        )
        .unwrap();
        let alice = AgentId::parse("alice").unwrap();
        let emptied = eventually(Duration::from_secs(60), || async {
            graph.counts(&alice).await.ok() == Some((0, 0))
        })
        .await;
        assert!(
            emptied,
            "FalkorDB still holds alice: {:?}",
            graph.counts(&alice).await
        );
        let bob = graph.counts(&AgentId::parse("bob").unwrap()).await.unwrap();
        assert_eq!(bob.0, 2, "bob's graph is untouched");
    }
    // Through the API too: recall (vector index and keywords), lists, the session.
    let recalled = app
        .recall(
            "alice",
            "deploy laptop vault",
            json!({"include_shared": false}),
        )
        .await;
    assert_eq!(
        recalled["results"].as_array().map(Vec::len),
        Some(0),
        "{recalled}"
    );
    let window = app.get("/v1/sessions/chat/messages?agent_id=alice").await;
    assert_eq!(window.status(), StatusCode::NOT_FOUND);
    let bob_recall = app.recall("bob", "deploy laptop vault", json!({})).await;
    assert!(
        bob_recall.to_string().contains("bob deploys"),
        "{bob_recall}"
    );
    // The erasure is in the audit log.
    let log = assert_status(app.get("/v1/admin/audit").await, StatusCode::OK).await;
    assert!(
        log["entries"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["action"] == "erase.agent" && e["target"] == "alice"),
        "{log}"
    );
}

#[tokio::test]
async fn only_admins_erase_and_a_tenant_is_erased_whole() {
    const RW: &[Scope] = &[Scope::Read, Scope::Write];
    const ADMIN: &[Scope] = &[Scope::Read, Scope::Write, Scope::Admin];
    let key = |tenant, agent, scopes| KeySpec {
        tenant,
        agent,
        scopes,
        expires_at: None,
        revoked: false,
    };
    let (app, secrets) = spawn_with_keys(&[
        SERVER_ADMIN,
        key("acme", Some("alice"), RW),
        key("acme", None, ADMIN),
        key("globex", None, ADMIN),
    ])
    .await;
    let bearer = |i: usize| format!("Bearer {}", secrets[i]);
    for (agent, content) in [("alice", "acme alice note"), ("bob", "acme bob note")] {
        assert_status(
            app.send_as(
                Some(&bearer(2)),
                Method::POST,
                "/tools/remember",
                Some(&json!({"agent_id": agent, "content": content})),
            )
            .await,
            StatusCode::CREATED,
        )
        .await;
    }
    // A key without admin, and another tenant's admin, cannot erase alice.
    assert_error(
        app.send_as(Some(&bearer(1)), Method::DELETE, "/v1/agents/alice", None)
            .await,
        StatusCode::FORBIDDEN,
        "permission_denied",
        None,
    )
    .await;
    let other = assert_status(
        app.send_as(Some(&bearer(3)), Method::DELETE, "/v1/agents/alice", None)
            .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(
        other["system_of_record"]["memories"], 0,
        "globex's alice is another agent: {other}"
    );
    // acme's admin erases acme's alice; bob stays.
    let erased = assert_status(
        app.send_as(Some(&bearer(2)), Method::DELETE, "/v1/agents/alice", None)
            .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(
        (
            erased["tenant"].as_str(),
            erased["system_of_record"]["memories"].as_u64()
        ),
        (Some("acme"), Some(1))
    );
    // A tenant: the server admin only; every agent goes and its keys stop working.
    assert_error(
        app.send_as(Some(&bearer(2)), Method::DELETE, "/v1/tenants/acme", None)
            .await,
        StatusCode::FORBIDDEN,
        "permission_denied",
        None,
    )
    .await;
    let tenant = assert_status(app.delete("/v1/tenants/acme").await, StatusCode::OK).await;
    assert_eq!(tenant["agents"].as_array().unwrap().len(), 1, "{tenant}");
    assert_eq!(tenant["keys_revoked"], 2, "{tenant}");
    assert_error(
        app.send_as(
            Some(&bearer(2)),
            Method::GET,
            "/v1/memories?agent_id=bob",
            None,
        )
        .await,
        StatusCode::UNAUTHORIZED,
        "unauthenticated",
        None,
    )
    .await;
}

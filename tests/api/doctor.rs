//! One bad row never breaks reads: instants no store can read back are refused at the
//! edge, a row an older version wrote anyway is skipped by every read (and reported in
//! `/health`), and `mnemos doctor --repair` rewrites it.

use std::process::Command;

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::{
    assert_error, assert_status, backend_env, spawn_app, spawn_with, test_settings,
};

/// Instants outside the years 1 to 9999 (chrono parses all of them).
const POISON: [&str; 3] = [
    "-0001-01-01T00:00:00Z",
    "+10000-01-01T00:00:00Z",
    "-262143-01-01T00:00:00Z",
];

#[tokio::test]
async fn instants_no_store_can_read_back_are_refused_on_every_route() {
    let app = spawn_app().await;
    for at in POISON {
        let body = json!({"agent_id": "mallory", "content": "staging port", "shared": true, "occurred_at": at});
        assert_error(
            app.post("/tools/remember", &body).await,
            StatusCode::BAD_REQUEST,
            "invalid_argument",
            Some("occurred_at"),
        )
        .await;
        let batch = json!({"agent_id": "mallory", "memories": [{"content": "fine"}, {"content": "bad", "occurred_at": at}]});
        assert_error(
            app.post("/tools/remember_batch", &batch).await,
            StatusCode::BAD_REQUEST,
            "invalid_argument",
            Some("memories[1].occurred_at"),
        )
        .await;
        let message = json!({"agent_id": "mallory", "messages": [{"role": "user", "content": "hi", "at": at}]});
        assert_error(
            app.post("/v1/sessions/s1/messages", &message).await,
            StatusCode::BAD_REQUEST,
            "invalid_argument",
            Some("messages[0].at"),
        )
        .await;
    }
    let listed = assert_status(
        app.get("/v1/memories?agent_id=mallory").await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(
        listed["memories"],
        json!([]),
        "nothing was stored: {listed}"
    );
    app.stop().await;
}

/// Run `mnemos <args>` on `data_dir`; its stdout.
fn mnemos(data_dir: &std::path::Path, args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_mnemos"))
        .args(args)
        .envs(backend_env(data_dir))
        .env("MNEMOS__DATA_DIR", data_dir)
        .env("MNEMOS__LOG__LEVEL", "warn")
        .output()
        .expect("mnemos runs");
    assert!(
        output.status.success(),
        "mnemos {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("utf-8 output")
}

fn ids(body: &Value, key: &str) -> Vec<String> {
    body[key]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i["memory"]["id"].as_str().or(i["id"].as_str()))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Poison memory `id` as an older version or a hand edit could: on SQLite an instant
/// it cannot read back, on PostgreSQL (whose typed columns hold no such instant) a type
/// no version knows. Answers the column poisoned.
async fn poison(data_dir: &std::path::Path, id: &str) -> &'static str {
    use sqlx::Connection;
    match crate::helpers::postgres_test_url(data_dir) {
        Some(url) => {
            let mut pg = sqlx::PgConnection::connect(&url).await.unwrap();
            sqlx::query("UPDATE memories SET memory_type = 'bogus' WHERE id = $1")
                .bind(id)
                .execute(&mut pg)
                .await
                .unwrap();
            "memory_type"
        }
        None => {
            let database = data_dir.join("mnemos.db");
            let mut sqlite =
                sqlx::SqliteConnection::connect(&format!("sqlite://{}", database.display()))
                    .await
                    .unwrap();
            sqlx::query(
                "UPDATE memories SET occurred_at = '-0001-01-01T00:00:00.000000Z' WHERE id = ?",
            )
            .bind(id)
            .execute(&mut sqlite)
            .await
            .unwrap();
            "occurred_at"
        }
    }
}

#[tokio::test]
async fn a_poisoned_row_never_breaks_reads_and_the_doctor_repairs_it() {
    let app = spawn_app().await;
    let poisoned = app
        .remember(
            "mallory",
            "The staging port is 5433",
            json!({"shared": true}),
        )
        .await["memory"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let alices = app
        .remember("alice", "Alice keeps the staging port notes", json!({}))
        .await["memory"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let column = poison(&app.data_dir, &poisoned).await;

    // Every read of everyone else goes on; the row reads as absent.
    for agent in ["alice", "bob"] {
        let recalled = app.recall(agent, "staging port", json!({})).await;
        assert!(!ids(&recalled, "results").contains(&poisoned), "{recalled}");
    }
    let alice = app.recall("alice", "staging port", json!({})).await;
    assert_eq!(ids(&alice, "results"), vec![alices.clone()]);
    assert_status(
        app.get("/v1/memories?agent_id=mallory").await,
        StatusCode::OK,
    )
    .await;
    assert_status(
        app.post("/tools/reflect", &json!({"agent_id": "mallory"}))
            .await,
        StatusCode::OK,
    )
    .await;
    assert_status(
        app.post("/tools/consolidate", &json!({"agent_id": "mallory"}))
            .await,
        StatusCode::OK,
    )
    .await;
    let health = assert_status(app.get("/health").await, StatusCode::OK).await;
    let store = &health["backends"]["store"];
    assert_eq!(health["status"], "degraded", "{health}");
    assert_eq!(store["state"], "degraded", "{health}");
    assert_eq!(store["unreadable"][0]["id"], poisoned.as_str(), "{health}");
    assert_eq!(store["repair"], "mnemos doctor --repair");

    // The operator finds it and repairs it.
    let temp = app.stop().await;
    let dir = temp.as_ref().unwrap().path().to_path_buf();
    let data_dir = dir.as_path();
    let found = mnemos(data_dir, &["doctor"]);
    assert!(
        found.contains(&poisoned) && found.contains(column),
        "{found}"
    );
    let repaired: Value =
        serde_json::from_str(&mnemos(data_dir, &["--json", "doctor", "--repair"])).unwrap();
    assert_eq!(repaired[0]["id"], poisoned.as_str(), "{repaired}");
    assert_eq!(repaired[0]["column"], column);
    assert!(mnemos(data_dir, &["doctor"]).contains("nothing to repair"));

    let app = spawn_with(test_settings(data_dir), temp).await;
    let memory = assert_status(
        app.get(&format!("/v1/memories/{poisoned}?agent_id=mallory"))
            .await,
        StatusCode::OK,
    )
    .await;
    if column == "occurred_at" {
        assert!(
            memory["occurred_at"]
                .as_str()
                .is_some_and(|at| at.starts_with("0001-01-01")),
            "{memory}"
        );
    } else {
        assert_eq!(memory["type"], "episodic", "{memory}");
    }
    let health = assert_status(app.get("/health").await, StatusCode::OK).await;
    assert_eq!(health["backends"]["store"]["state"], "up", "{health}");
    app.stop().await;
}

/// Give memory `id` a session id no version would write (a hand edit).
async fn mangle_session(data_dir: &std::path::Path, id: &str) {
    use sqlx::Connection;
    match crate::helpers::postgres_test_url(data_dir) {
        Some(url) => {
            let mut pg = sqlx::PgConnection::connect(&url).await.unwrap();
            sqlx::query("UPDATE memories SET session_id = 'not a session!' WHERE id = $1")
                .bind(id)
                .execute(&mut pg)
                .await
                .unwrap();
        }
        None => {
            let database = data_dir.join("mnemos.db");
            let mut sqlite =
                sqlx::SqliteConnection::connect(&format!("sqlite://{}", database.display()))
                    .await
                    .unwrap();
            sqlx::query("UPDATE memories SET session_id = 'not a session!' WHERE id = ?")
                .bind(id)
                .execute(&mut sqlite)
                .await
                .unwrap();
        }
    }
}

/// A malformed stored session id (read since the indexes keep each session's order)
/// makes only its row unreadable: after a restart the indexes rebuild without it,
/// `/health` names it, and the other turns of the session are recalled.
#[tokio::test]
async fn a_malformed_stored_session_id_never_breaks_the_index_rebuild() {
    let app = spawn_app().await;
    let mut turns = Vec::new();
    for content in [
        "Carol set the staging port to 5433",
        "then she restarted the proxy",
        "and the health check turned green",
    ] {
        let stored = app
            .remember("carol", content, json!({"session_id": "s1"}))
            .await;
        turns.push(stored["memory"]["id"].as_str().unwrap().to_string());
    }
    mangle_session(&app.data_dir, &turns[1]).await;
    let temp = app.stop().await;
    let dir = temp.as_ref().unwrap().path().to_path_buf();
    let app = spawn_with(test_settings(&dir), temp).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let health = assert_status(app.get("/health").await, StatusCode::OK).await;
        let vectors = &health["backends"]["vectors"];
        if vectors["indexed"] == 2 && vectors["keyword_indexed"] == 2 {
            let store = &health["backends"]["store"];
            assert_eq!(store["unreadable"][0]["id"], turns[1].as_str(), "{health}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the indexes did not rebuild: {health}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let recalled = app.recall("carol", "staging port", json!({})).await;
    let found = ids(&recalled, "results");
    assert_eq!(found.first(), Some(&turns[0]), "{recalled}");
    assert!(found.contains(&turns[2]), "{recalled}");
    assert!(!found.contains(&turns[1]), "{recalled}");
    app.stop().await;
}

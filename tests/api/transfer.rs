//! Export and import over REST (`GET /v1/export`, `POST /v1/import`): a round trip
//! keeps every record (SQLite to SQLite, and SQLite to PostgreSQL), a second import
//! changes nothing, invalid lines refuse the import (or are skipped and reported), a
//! truncated file is refused, and keys reach only what they own.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::*;

/// Settings on SQLite whatever backend the suite runs on, without background
/// extraction (so nothing changes between two exports).
fn sqlite_settings(dir: &std::path::Path) -> mnemos::config::Settings {
    let mut settings = test_settings(dir);
    settings.storage.backend = "sqlite".into();
    settings.graph.backend = "sql".into();
    settings.sessions.extract = false;
    settings
}

/// The id of a remembered memory.
fn id_of(remembered: &Value) -> String {
    remembered["memory"]["id"].as_str().unwrap().to_string()
}

/// Write a data set with one of everything an export holds, for `agent` (and a KV
/// namespace shared with another node): memories of every type, one patched twice,
/// one superseded, one archived, edges, sessions with messages and a compaction, an
/// isolated project with a session, KV entries with tags and a TTL.
async fn rich_data_set(app: &TestApp, agent: &str) {
    let kinds = [
        ("working", "Scratch: the build is red"),
        ("episodic", "We shipped v2 on Friday"),
        ("affective", "I was thrilled when the release went out"),
        ("semantic", "The staging DB runs on port 5433"),
        (
            "procedural",
            "To deploy: run make deploy, then check the dashboard",
        ),
    ];
    let mut ids = Vec::new();
    for (memory_type, content) in kinds {
        let extra = json!({"type": memory_type, "tags": ["t1", memory_type], "importance": 0.7,
            "metadata": {"source": "test", "n": 1.5}, "shared": memory_type == "semantic"});
        ids.push(id_of(&app.remember(agent, content, extra).await));
    }
    for (n, change) in [
        json!({"content": "The staging DB runs on port 5434"}),
        json!({"importance": 0.9, "tags": ["db", "staging"]}),
    ]
    .iter()
    .enumerate()
    {
        let patched = app
            .patch(&format!("/v1/memories/{}?agent_id={agent}", ids[3]), change)
            .await;
        let patched = assert_status(patched, StatusCode::OK).await;
        assert_eq!(patched["version"], n + 2);
    }
    // Entity merges travel too: one stated by a memory, one made by a person and undone.
    app.remember(
        agent,
        "Yesterday, Melanie (Mel) painted landscapes.",
        json!({}),
    )
    .await;
    app.remember(agent, "Later, Robert and Bob fixed the sink.", json!({}))
        .await;
    let entity = |name: &'static str| async move {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
        loop {
            let found = app
                .entities(agent, &format!("q={}", name.to_lowercase()))
                .await;
            if let Some(id) = found["entities"][0]["id"].as_str() {
                return id.to_string();
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no entity {name}: {}",
                app.entities(agent, "limit=100").await
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    };
    let (robert, bob) = (entity("Robert").await, entity("Bob").await);
    for (path, body) in [
        (
            format!("/v1/entities/{bob}/merge"),
            json!({"agent_id": agent, "into": robert}),
        ),
        (
            format!("/v1/entities/{robert}/split"),
            json!({"agent_id": agent, "alias": "bob"}),
        ),
    ] {
        assert_status(app.post(&path, &body).await, StatusCode::OK).await;
    }
    let melanie = entity("Melanie").await;
    let stated = crate::helpers::eventually(std::time::Duration::from_secs(15), || async {
        app.entity(agent, &melanie).await["merges"]
            .as_array()
            .is_some_and(|m| m.len() == 1)
    })
    .await;
    assert!(stated, "{}", app.entity(agent, &melanie).await);
    app.remember(agent, "I live in Paris", json!({"type": "semantic"}))
        .await;
    let tokyo = app
        .remember(agent, "I live in Tokyo", json!({"type": "semantic"}))
        .await;
    assert_eq!(tokyo["superseded"].as_array().unwrap().len(), 1, "{tokyo}");
    let forgotten = app
        .post("/tools/forget", &json!({"agent_id": agent, "id": ids[1]}))
        .await;
    assert_status(forgotten, StatusCode::OK).await;
    let linked = app
        .post(
            "/tools/associate",
            &json!({"agent_id": agent, "from_id": ids[2], "to_id": ids[4], "relation": "related_to", "weight": 0.8}),
        )
        .await;
    assert_status(linked, StatusCode::CREATED).await;
    for session in ["chat-1", "chat-2"] {
        let posted = app
            .post(
                &format!("/v1/sessions/{session}/messages"),
                &json!({"agent_id": agent, "messages": [
                    {"role": "user", "content": "We deploy on Tuesdays."},
                    {"role": "assistant", "content": "Noted."},
                    {"role": "user", "content": "And we freeze on Fridays."}]}),
            )
            .await;
        assert_status(posted, StatusCode::CREATED).await;
    }
    let compacted = app
        .post("/v1/sessions/chat-1/compact", &json!({"agent_id": agent}))
        .await;
    let compacted = assert_status(compacted, StatusCode::OK).await;
    assert_eq!(compacted["compacted"], true, "{compacted}");
    let project = app
        .client
        .put(format!("{}/v1/projects/acme", app.address))
        .json(&json!({"agent_id": agent, "name": "ACME audit", "isolated": true}))
        .send()
        .await
        .unwrap();
    assert_status(project, StatusCode::OK).await;
    let attached = app
        .client
        .put(format!("{}/v1/projects/acme/sessions/chat-2", app.address))
        .json(&json!({"agent_id": agent}))
        .send()
        .await
        .unwrap();
    assert_status(attached, StatusCode::OK).await;
    app.remember(
        agent,
        "ACME keeps books in SAP",
        json!({"session_id": "chat-2"}),
    )
    .await;
    let namespace = app
        .client
        .put(format!("{}/v1/namespaces/crew", app.address))
        .json(&json!({"max_entries": 10}))
        .send()
        .await
        .unwrap();
    assert_status(namespace, StatusCode::OK).await;
    for (key, writer, extra) in [
        (
            format!("{agent}:1"),
            agent,
            json!({"tags": ["open"], "ttl_seconds": 3600}),
        ),
        (format!("{agent}:2"), agent, json!({})),
        (format!("{agent}:3"), "planner", json!({"tags": ["done"]})),
    ] {
        let mut body = json!({"agent_id": writer, "value": {"goal": key, "n": [1, 2]}});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let put = app
            .client
            .put(format!("{}/v1/namespaces/crew/entries/{key}", app.address))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_status(put, StatusCode::CREATED).await;
    }
}

/// The lines of an export as JSON values.
fn lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|line| serde_json::from_str(line).expect("every line is JSON"))
        .collect()
}

/// The lines with the header's fields that name the source and the time removed.
fn comparable(text: &str) -> Vec<Value> {
    let mut found = lines(text);
    let header = found[0].as_object_mut().expect("a header object");
    header.remove("source_backend");
    header.remove("exported_at");
    found
}

/// How many lines of `kind` an export holds.
fn count(text: &str, kind: &str) -> usize {
    lines(text).iter().filter(|l| l["kind"] == kind).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_imported_elsewhere_exports_the_same_and_a_second_import_changes_nothing() {
    let source_dir = tempfile::tempdir().unwrap();
    let source = spawn_with(sqlite_settings(source_dir.path()), Some(source_dir)).await;
    rich_data_set(&source, "alice").await;
    let exported = source.export("tenant=default&with_embeddings=true").await;
    let all = lines(&exported);
    assert_eq!(all[0]["kind"], "header");
    assert_eq!(all[0]["source_backend"], "sqlite");
    assert_eq!(all.last().unwrap()["kind"], "trailer");
    assert_eq!(all[0]["counts"], all.last().unwrap()["counts"]);
    for kind in [
        "memory",
        "edge",
        "session",
        "project",
        "namespace",
        "kv_entry",
    ] {
        assert!(count(&exported, kind) > 0, "no {kind} line in {exported}");
    }
    let statuses: Vec<&str> = all
        .iter()
        .filter(|l| l["kind"] == "memory")
        .filter_map(|l| l["status"].as_str())
        .collect();
    for status in ["active", "superseded", "archived"] {
        assert!(
            statuses.contains(&status),
            "no {status} memory: {statuses:?}"
        );
    }
    assert!(
        all.iter()
            .any(|l| l["kind"] == "memory" && l["versions"].as_array().unwrap().len() == 2),
        "the memory patched twice carries both past versions"
    );
    assert!(
        all.iter().any(|l| l["kind"] == "session"
            && l["log"]["compactions"] == 1
            && l["messages"].as_array().unwrap().len() == 3),
        "the compacted session keeps every message"
    );

    let target_dir = tempfile::tempdir().unwrap();
    let target = spawn_with(sqlite_settings(target_dir.path()), Some(target_dir)).await;
    let first = assert_status(target.import(exported.clone(), "").await, StatusCode::OK).await;
    assert_eq!(first["read"], all[0]["counts"], "{first}");
    assert_eq!(first["written"], all[0]["counts"], "{first}");
    assert_eq!(
        first["embeddings_reused"], all[0]["counts"]["memories"],
        "the same model: vectors reused, nothing embedded again: {first}"
    );
    assert_eq!(first["re_embedded"], 0);
    let second = assert_status(target.import(exported.clone(), "").await, StatusCode::OK).await;
    assert_eq!(second["unchanged"], all[0]["counts"], "{second}");
    assert!(
        second["written"]
            .as_object()
            .unwrap()
            .values()
            .all(|n| n == 0),
        "the second import wrote something: {second}"
    );
    let again = target.export("tenant=default&with_embeddings=true").await;
    assert_eq!(comparable(&again), comparable(&exported));
    assert_eq!(count(&exported, "entity_merge"), 2, "{exported}");
    // The merges answer as they did: Mel is Melanie's, Bob is his own again.
    let indexed = crate::helpers::eventually(std::time::Duration::from_secs(15), || async {
        target.entities("alice", "q=melanie").await["entities"][0]["name"] == "Melanie"
    })
    .await;
    assert!(indexed, "{}", target.entities("alice", "").await);
    let melanie = target.entities("alice", "q=melanie").await["entities"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let detail = target.entity("alice", &melanie).await;
    let merges: Vec<(&str, &str)> = detail["merges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["alias"].as_str().unwrap(), m["origin"].as_str().unwrap()))
        .collect();
    assert_eq!(merges, [("mel", "stated")], "{detail}");
    let bob = target.entities("alice", "q=bob").await;
    assert_eq!(bob["entities"][0]["name"], "Bob", "{bob}");

    // What was imported answers as it did at the source: recall, history, sessions, KV.
    let recalled = target.recall("alice", "staging port", json!({})).await;
    assert!(
        recalled["results"][0]["memory"]["content"]
            .as_str()
            .unwrap()
            .contains("5434"),
        "{recalled}"
    );
    let entry = assert_status(
        target.get("/v1/namespaces/crew/entries/alice:3").await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(entry["written_by"], "planner");
    let posted = target
        .post(
            "/v1/sessions/chat-1/messages",
            &json!({"agent_id": "alice", "role": "user", "content": "One more thing."}),
        )
        .await;
    let posted = assert_status(posted, StatusCode::CREATED).await;
    assert_eq!(
        posted["messages"][0]["seq"], 4,
        "an imported log goes on: {posted}"
    );
    source.stop().await;
    target.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_trip_from_sqlite_to_postgresql_loses_nothing() {
    let test = "a_round_trip_from_sqlite_to_postgresql_loses_nothing";
    let base = postgres_base_url();
    let reachable = {
        use sqlx::Connection;
        sqlx::PgConnection::connect(&base).await.is_ok()
    };
    if !reachable {
        assert!(
            std::env::var_os("CI").is_none(),
            "{test}: PostgreSQL at {base} is unreachable under CI"
        );
        skipped(test, &format!("PostgreSQL at {base} is unreachable"));
        return;
    }
    let source_dir = tempfile::tempdir().unwrap();
    let source = spawn_with(sqlite_settings(source_dir.path()), Some(source_dir)).await;
    rich_data_set(&source, "alice").await;
    rich_data_set(&source, "bob").await;
    let exported = source.export("tenant=default").await;

    let target_dir = tempfile::tempdir().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let schema = format!("it_{now}_{}", uuid::Uuid::new_v4().simple());
    let separator = if base.contains('?') { '&' } else { '?' };
    let mut settings = sqlite_settings(target_dir.path());
    settings.storage.backend = "postgres".into();
    settings.storage.url = format!("{base}{separator}options=-csearch_path%3D{schema}");
    let target = spawn_with(settings, Some(target_dir)).await;
    let imported = assert_status(target.import(exported.clone(), "").await, StatusCode::OK).await;
    assert_eq!(
        imported["written"],
        lines(&exported)[0]["counts"],
        "{imported}"
    );
    assert_eq!(imported["re_embedded"], imported["written"]["memories"]);
    let again = target.export("tenant=default").await;
    assert_eq!(lines(&again)[0]["source_backend"], "postgres");
    let (before, after) = (comparable(&exported), comparable(&again));
    assert_eq!(before.len(), after.len());
    for (a, b) in before.iter().zip(&after) {
        assert_eq!(a, b, "a record changed on the way to PostgreSQL");
    }
    source.stop().await;
    target.stop().await;
    drop_schema_now(&schema);
}

/// A small export to corrupt: one agent's three memories.
async fn small_export() -> (TestApp, String) {
    let app = spawn_app().await;
    for content in ["first fact", "second fact", "third fact"] {
        app.remember("carol", content, json!({})).await;
    }
    let text = app.export("agent_id=carol").await;
    (app, text)
}

/// `text` with line `number` (1-based) changed by `change`.
fn with_line(text: &str, number: usize, change: impl Fn(&mut Value)) -> String {
    text.lines()
        .enumerate()
        .map(|(index, line)| {
            if index + 1 == number {
                let mut value: Value = serde_json::from_str(line).unwrap();
                change(&mut value);
                value.to_string()
            } else {
                line.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn invalid_lines_refuse_the_import_naming_line_and_field_unless_skipped_and_reported() {
    let (source, text) = small_export().await;
    source.stop().await;
    let bad = with_line(&text, 2, |v| v["importance"] = json!(3.0));
    let bad = with_line(&bad, 3, |v| v["type"] = json!("dream"));
    let app = spawn_app().await;
    let refused = assert_error(
        app.import(bad.clone(), "").await,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("importance"),
    )
    .await;
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("line 2"), "{message}");
    assert!(
        message.contains("line 3") && message.contains("type"),
        "{message}"
    );
    let listed = assert_status(app.get("/v1/memories?agent_id=carol").await, StatusCode::OK).await;
    assert_eq!(
        listed["memories"],
        json!([]),
        "a refused import wrote nothing"
    );

    let skipped = assert_status(app.import(bad, "skip_invalid=true").await, StatusCode::OK).await;
    assert_eq!(skipped["written"]["memories"], 1, "{skipped}");
    let reported: Vec<(u64, String)> = skipped["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["line"].as_u64().unwrap(),
                p["field"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        reported,
        [(2, "importance".to_string()), (3, "type".to_string())]
    );

    // A file without its trailer is truncated; one with a line too many does not add up.
    let truncated: Vec<&str> = text.lines().collect();
    let truncated = truncated[..truncated.len() - 1].join("\n");
    assert_error(
        app.import(truncated, "").await,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("trailer"),
    )
    .await;
    let mut doubled: Vec<&str> = text.lines().collect();
    doubled.insert(1, doubled[1]);
    assert_error(
        app.import(doubled.join("\n"), "").await,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("trailer"),
    )
    .await;
    assert_error(
        app.import("{\"kind\":\"memory\"}", "").await,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        None,
    )
    .await;
    // Only an export file is taken on this route besides JSON.
    let plain = app
        .client
        .post(format!("{}/v1/import", app.address))
        .header("content-type", "text/plain")
        .body(text.clone())
        .send()
        .await
        .unwrap();
    assert_error(
        plain,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "invalid_argument",
        Some("content-type"),
    )
    .await;
    app.stop().await;
}

#[tokio::test]
async fn export_and_import_reach_only_what_the_key_owns() {
    use mnemos::auth::Scope;
    let specs = [
        KeySpec {
            tenant: "acme",
            agent: Some("alice"),
            scopes: &[Scope::Read, Scope::Write],
            expires_at: None,
            revoked: false,
        },
        KeySpec {
            tenant: "acme",
            agent: None,
            scopes: &[Scope::Read, Scope::Write, Scope::Admin],
            expires_at: None,
            revoked: false,
        },
        KeySpec {
            tenant: "globex",
            agent: None,
            scopes: &[Scope::Read, Scope::Write, Scope::Admin],
            expires_at: None,
            revoked: false,
        },
    ];
    let (mut app, keys) = spawn_with_keys(&specs).await;
    let (alice, acme_admin, globex_admin) = (keys[0].clone(), keys[1].clone(), keys[2].clone());
    app.key = Some(acme_admin.clone());
    app.remember("alice", "Alice's secret plan", json!({}))
        .await;
    app.remember("bob", "Bob's secret plan", json!({})).await;

    // A key bound to alice exports alice, and only alice.
    app.key = Some(alice.clone());
    let own = app.export("").await;
    assert_eq!(count(&own, "memory"), 1);
    assert!(own.contains("Alice's secret plan") && !own.contains("Bob"));
    assert_eq!(
        lines(&own)[0]["scope"],
        json!({"agent_id": "alice", "tenant": "acme"})
    );
    assert_error(
        app.get("/v1/export?agent_id=bob").await,
        StatusCode::FORBIDDEN,
        "permission_denied",
        Some("agent_id"),
    )
    .await;
    assert_error(
        app.get("/v1/export?tenant=acme").await,
        StatusCode::FORBIDDEN,
        "permission_denied",
        None,
    )
    .await;
    // The tenant's admin exports the tenant; another tenant's admin cannot reach it.
    app.key = Some(acme_admin.clone());
    let tenant = app.export("tenant=acme").await;
    assert_eq!(count(&tenant, "memory"), 2);
    app.key = Some(globex_admin.clone());
    assert_error(
        app.get("/v1/export?tenant=acme").await,
        StatusCode::FORBIDDEN,
        "permission_denied",
        Some("tenant"),
    )
    .await;
    let theirs = app.export("agent_id=alice").await;
    assert_eq!(
        count(&theirs, "memory"),
        0,
        "globex's alice is another agent"
    );

    // Importing acme's file: alice's key may write alice's record only, globex none.
    app.key = Some(alice.clone());
    let refused = assert_error(
        app.import(tenant.clone(), "").await,
        StatusCode::FORBIDDEN,
        "permission_denied",
        Some("agent_id"),
    )
    .await;
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("line"),
        "{refused}"
    );
    app.key = Some(globex_admin.clone());
    assert_error(
        app.import(tenant.clone(), "").await,
        StatusCode::FORBIDDEN,
        "permission_denied",
        Some("tenant"),
    )
    .await;
    app.key = Some(acme_admin);
    let unchanged = assert_status(app.import(tenant, "").await, StatusCode::OK).await;
    assert_eq!(unchanged["unchanged"]["memories"], 2, "{unchanged}");
    app.key = None;
    assert_error(
        app.get("/v1/export?agent_id=alice").await,
        StatusCode::UNAUTHORIZED,
        "unauthenticated",
        None,
    )
    .await;
    app.stop().await;
}

#[tokio::test]
async fn an_import_cannot_take_an_id_another_agent_owns() {
    let (source, text) = small_export().await;
    source.stop().await;
    let app = spawn_app().await;
    assert_status(app.import(text.clone(), "").await, StatusCode::OK).await;
    let stolen = with_line(&text, 2, |v| v["agent_id"] = json!("mallory"));
    assert_error(
        app.import(stolen, "").await,
        StatusCode::CONFLICT,
        "conflict",
        Some("id"),
    )
    .await;
    app.stop().await;
}

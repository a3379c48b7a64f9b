//! Entities: who and what an agent's memories name, kept from the outbox in the system
//! of record's database and read over `GET /v1/entities` and `GET /v1/entities/{id}`.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::*;

/// The agent's entities by name, once every one of `names` is there.
async fn entities_named(app: &TestApp, agent: &str, names: &[&str]) -> Vec<Value> {
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let listed = app.entities(agent, "").await["entities"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if names
            .iter()
            .all(|name| listed.iter().any(|e| e["name"] == *name))
        {
            return listed;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "entities {names:?} never appeared: {listed:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn named<'a>(entities: &'a [Value], name: &str) -> &'a Value {
    entities.iter().find(|e| e["name"] == name).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memories_name_entities_that_follow_forgetting_and_erasure() {
    let app = spawn_app().await;
    let pottery = app
        .remember(
            "ent",
            "Melanie went to the pottery class with Caroline.",
            json!({}),
        )
        .await["memory"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    app.remember("ent", "Caroline moved to Lisbon in June 2024.", json!({}))
        .await;
    app.remember(
        "ent",
        "Ping @dana_k about src/main.rs before v2.1.0 ships.",
        json!({}),
    )
    .await;
    app.remember("other", "Melanie runs the Berlin office.", json!({}))
        .await;
    let listed = entities_named(
        &app,
        "ent",
        &[
            "Melanie",
            "Caroline",
            "Lisbon",
            "June 2024",
            "@dana_k",
            "src/main.rs",
            "v2.1.0",
        ],
    )
    .await;
    let kinds: Vec<(&str, &str)> = listed
        .iter()
        .map(|e| (e["name"].as_str().unwrap(), e["kind"].as_str().unwrap()))
        .collect();
    for expected in [
        ("Caroline", "person"),
        ("Lisbon", "place"),
        ("June 2024", "date"),
        ("@dana_k", "handle"),
        ("src/main.rs", "path"),
        ("v2.1.0", "version"),
    ] {
        assert!(kinds.contains(&expected), "{expected:?} in {kinds:?}");
    }
    let caroline = named(&listed, "Caroline");
    assert_eq!(caroline["mentions"], 2);

    // One entity: the memories naming it (with the span) and what is named beside it.
    let id = caroline["id"].as_str().unwrap();
    let detail = app.entity("ent", id).await;
    let memories = detail["memories"].as_array().unwrap();
    assert_eq!(memories.len(), 2, "{detail}");
    for mention in memories {
        let content = mention["memory"]["content"].as_str().unwrap();
        let (start, end) = (
            mention["start"].as_u64().unwrap() as usize,
            mention["end"].as_u64().unwrap() as usize,
        );
        assert_eq!(&content[start..end], "Caroline");
    }
    let related: Vec<&str> = detail["related"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["entity"]["name"].as_str().unwrap())
        .collect();
    assert!(
        related.contains(&"Melanie") && related.contains(&"Lisbon"),
        "{related:?}"
    );

    // Search, kind and pages.
    let searched = app.entities("ent", "q=lis").await;
    assert_eq!(searched["entities"][0]["name"], "Lisbon", "{searched}");
    assert_eq!(searched["entities"].as_array().unwrap().len(), 1);
    let places = app.entities("ent", "kind=place").await;
    assert_eq!(places["entities"].as_array().unwrap().len(), 1);
    let mut seen = Vec::new();
    let mut cursor = String::new();
    loop {
        let page = app.entities("ent", &format!("limit=2{cursor}")).await;
        seen.extend(
            page["entities"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["id"].clone()),
        );
        match page["next_cursor"].as_str() {
            Some(next) => cursor = format!("&cursor={next}"),
            None => break,
        }
    }
    assert_eq!(seen.len(), listed.len(), "pages cover the list once");

    // Another agent's Melanie is another entity, and this agent's ids are not its own.
    let other = entities_named(&app, "other", &["Melanie"]).await;
    assert_ne!(
        named(&other, "Melanie")["id"],
        named(&listed, "Melanie")["id"]
    );
    assert_error(
        app.get(&format!("/v1/entities/{id}?agent_id=other")).await,
        StatusCode::NOT_FOUND,
        "not_found",
        Some("id"),
    )
    .await;

    // Refusals name the field.
    for (query, field) in [
        ("kind=planet", "kind"),
        ("limit=0", "limit"),
        ("cursor=zz", "cursor"),
        ("colour=red", "colour"),
    ] {
        assert_error(
            app.get(&format!("/v1/entities?agent_id=ent&{query}")).await,
            StatusCode::BAD_REQUEST,
            "invalid_argument",
            Some(field),
        )
        .await;
    }

    // Forgetting the pottery memory takes Melanie away from this agent (nothing else names her).
    assert_status(
        app.post("/tools/forget", &json!({"agent_id": "ent", "id": pottery}))
            .await,
        StatusCode::OK,
    )
    .await;
    let gone = eventually(Duration::from_secs(15), || async {
        let listed = app.entities("ent", "").await;
        !listed["entities"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "Melanie")
    })
    .await;
    assert!(gone, "a forgotten memory still names Melanie");
    assert_eq!(app.entity("ent", id).await["entity"]["mentions"], 1);

    // Erasing the agent erases its entities; the other agent keeps its own.
    let erased = assert_status(app.delete("/v1/agents/ent").await, StatusCode::OK).await;
    assert!(
        erased["system_of_record"]["entities"].as_u64().unwrap() >= 5,
        "{erased}"
    );
    assert_eq!(app.entities("ent", "").await["entities"], json!([]));
    assert_eq!(
        app.entities("other", "").await["entities"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_entity_index_is_rebuilt_from_the_memories_with_the_same_ids() {
    let temp = tempfile::tempdir().unwrap();
    let settings = test_settings(temp.path());
    let app = spawn_with(settings.clone(), None).await;
    app.remember(
        "re",
        "Omar grew up in Cairo and studied in London.",
        json!({}),
    )
    .await;
    let before = entities_named(&app, "re", &["Omar", "Cairo", "London"]).await;
    app.stop().await;
    // `mnemos reindex --projection entities` empties the index and rebuilds it from
    // the memories: the same entities come back with the same ids.
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_mnemos"))
        .args(["--json", "reindex", "--projection", "entities"])
        .env("MNEMOS__DATA_DIR", temp.path())
        .env("MNEMOS__COGNITION__ENABLED", "false")
        .envs(backend_env(temp.path()))
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report[0]["projection"], "entities", "{report}");
    let app = spawn_with(settings, Some(temp)).await;
    let after = entities_named(&app, "re", &["Omar", "Cairo", "London"]).await;
    assert_eq!(before, after);
}

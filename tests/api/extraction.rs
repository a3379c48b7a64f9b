//! `POST /tools/extract_turn`: mining an exchange for memories through the remember pipeline.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::*;

async fn extract(app: &TestApp, agent: &str, user: &str, assistant: &str) -> Vec<Value> {
    let response = app
        .post(
            "/tools/extract_turn",
            &json!({"agent_id": agent, "user": user, "assistant": assistant, "session_id": "s1"}),
        )
        .await;
    let body = assert_status(response, StatusCode::OK).await;
    body["stored"].as_array().cloned().unwrap_or_default()
}

fn tags(memory: &Value) -> Vec<String> {
    memory["tags"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

async fn active_count(app: &TestApp, agent: &str) -> usize {
    let body = assert_status(
        app.get(&format!(
            "/v1/memories?agent_id={agent}&status=active&limit=200"
        ))
        .await,
        StatusCode::OK,
    )
    .await;
    body["memories"].as_array().map(Vec::len).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_realistic_exchange_stores_typed_tagged_memories_once() {
    let app = spawn_app().await;
    let user = "Hi! I'm a backend developer and I live in Lyon. I prefer Postgres over MySQL. \
        How do I rotate the API keys?";
    let assistant = "Great question! Here are the steps:\n\
        1. Open the admin console.\n\
        2. Generate a new key under Settings > Keys.\n\
        3. Revoke the old key after deploying the new one.\n\
        Let me know if anything is unclear.";
    let stored = extract(&app, "eve", user, assistant).await;
    let summary: Vec<(String, String, Vec<String>)> = stored
        .iter()
        .map(|m| {
            (
                m["content"].as_str().unwrap_or("").to_string(),
                m["type"].as_str().unwrap_or("").to_string(),
                tags(m),
            )
        })
        .collect();
    assert_eq!(stored.len(), 3, "{summary:#?}");
    assert_eq!(
        summary[0].0,
        "User: I'm a backend developer and I live in Lyon."
    );
    assert_eq!(
        (summary[0].1.as_str(), summary[0].2.clone()),
        ("semantic", vec!["fact".to_string()])
    );
    assert_eq!(summary[1].0, "User: I prefer Postgres over MySQL.");
    assert_eq!(summary[1].2, vec!["preference".to_string()]);
    assert_eq!(summary[2].1, "procedural");
    assert_eq!(summary[2].2, vec!["procedure".to_string()]);
    assert!(
        summary[2]
            .0
            .starts_with("How to rotate the api keys: 1. Open the admin console."),
        "{summary:#?}"
    );
    assert!(stored.iter().all(|m| m["agent_id"] == "eve"));
    assert!(stored.iter().all(|m| m["session_id"] == "s1"), "{stored:?}");

    // Re-sending the same turn creates nothing: the same memories come back.
    let again = extract(&app, "eve", user, assistant).await;
    let ids = |list: &[Value]| -> Vec<String> {
        list.iter()
            .map(|m| m["id"].as_str().unwrap_or("").to_string())
            .collect()
    };
    assert_eq!(ids(&again), ids(&stored));
    assert_eq!(active_count(&app, "eve").await, 3);

    // Nothing worth keeping: an empty list, nothing stored.
    let nothing = extract(&app, "eve", "Thanks, that's all!", "You're welcome!").await;
    assert!(nothing.is_empty(), "{nothing:?}");
    assert_eq!(active_count(&app, "eve").await, 3);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_preference_supersedes_the_old_one() {
    let app = spawn_app().await;
    let old = extract(&app, "pat", "I prefer coffee.", "Noted.").await;
    assert_eq!(old.len(), 1, "{old:?}");
    let new = extract(&app, "pat", "Actually, I now prefer tea.", "Got it.").await;
    assert_eq!(new.len(), 1, "{new:?}");
    assert_eq!(new[0]["content"], "User: I prefer tea.");
    let old_id = old[0]["id"].as_str().unwrap_or("");
    let old_now = assert_status(
        app.get(&format!("/v1/memories/{old_id}?agent_id=pat"))
            .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(old_now["status"], "superseded", "{old_now}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_write_budget_caps_the_memories_of_one_turn() {
    let temp = tempfile::tempdir().expect("temp dir");
    let mut settings = test_settings(temp.path());
    settings.extraction.max_memories_per_turn = 2;
    settings.inner_thought.entities = false;
    let app = spawn_with(settings, Some(temp)).await;
    let stored = extract(
        &app,
        "bo",
        "I like jazz. I live in Oslo. My name is Bo. We decided to use Rust.",
        "",
    )
    .await;
    assert_eq!(stored.len(), 2, "{stored:?}");
    assert_eq!(stored[0]["content"], "User: I like jazz.");
    assert_eq!(active_count(&app, "bo").await, 2);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_naming_the_field() {
    let app = spawn_app().await;
    let response = app
        .post(
            "/tools/extract_turn",
            &json!({"agent_id": "x", "assistant": "hello"}),
        )
        .await;
    assert_error(
        response,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("user"),
    )
    .await;
    let response = app
        .post(
            "/tools/extract_turn",
            &json!({"agent_id": "x", "user": 42, "assistant": "hello"}),
        )
        .await;
    assert_error(
        response,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("user"),
    )
    .await;
    let response = app
        .post(
            "/tools/extract_turn",
            &json!({"agent_id": "x", "user": " ", "assistant": ""}),
        )
        .await;
    assert_error(
        response,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("user"),
    )
    .await;
    let response = app
        .post(
            "/tools/extract_turn",
            &json!({"agent_id": "x", "user": "I like tea", "assistant": "", "extra": 1}),
        )
        .await;
    assert_error(
        response,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("extra"),
    )
    .await;
    let huge = "I like tea. ".repeat(6000);
    let response = app
        .post(
            "/tools/extract_turn",
            &json!({"agent_id": "x", "user": "hi", "assistant": huge}),
        )
        .await;
    assert_error(
        response,
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        Some("assistant"),
    )
    .await;
    app.stop().await;
}

#[tokio::test]
async fn with_an_llm_configured_extraction_asks_it_for_structured_memories() {
    let test = "with_an_llm_configured_extraction_asks_it_for_structured_memories";
    let Some(url) = llm_url(test) else {
        return;
    };
    let temp = tempfile::tempdir().unwrap();
    let mut settings = test_settings(temp.path());
    settings.inner_thought.provider = "openai".into();
    settings.inner_thought.base_url = url;
    settings.inner_thought.model = "smollm2".into();
    settings.inner_thought.timeout_ms = 120_000;
    // Two memories of at most 240 characters fit the 400 tokens the model may write,
    // so its answer cannot be cut off mid-JSON.
    settings.inner_thought.max_tokens = 400;
    settings.inner_thought.temperature = 0.0;
    settings.extraction.max_memories_per_turn = 2;
    let app = spawn_with(settings, Some(temp)).await;
    let stored = extract(
        &app,
        "lee",
        "I always deploy on Tuesdays and I prefer PostgreSQL for new services.",
        "Got it: Tuesday deploys and PostgreSQL by default.",
    )
    .await;
    // The model answered in the schema (llama.cpp enforces it as a grammar); whatever it
    // chose went through the remember pipeline with its kind's tag.
    let metrics = app.get("/metrics").await.text().await.unwrap();
    let calls: f64 = metrics
        .lines()
        .filter(|l| {
            l.starts_with("mnemos_llm_calls_total")
                && l.contains("purpose=\"extract_turn\"")
                && l.contains("outcome=\"ok\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(
        calls >= 1.0,
        "no successful extract_turn call to the LLM:\n{metrics}"
    );
    assert!(stored.len() <= 2, "the write budget holds for the LLM too");
    for memory in &stored {
        let tags = tags(memory);
        assert!(
            ["preference", "fact", "decision", "procedure"]
                .iter()
                .any(|kind| tags.iter().any(|t| t == kind)),
            "{memory}"
        );
        assert_eq!(memory["session_id"], "s1");
    }
}

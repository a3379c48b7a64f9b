//! Sessions: `POST`/`GET /v1/sessions/{id}/messages` and `POST /v1/sessions/{id}/compact`:
//! the durable log, the live window, background extraction and compaction.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::*;

async fn post_message(
    app: &TestApp,
    session: &str,
    agent: &str,
    role: &str,
    content: &str,
) -> Value {
    let response = app
        .post(
            &format!("/v1/sessions/{session}/messages"),
            &json!({"agent_id": agent, "role": role, "content": content}),
        )
        .await;
    assert_status(response, StatusCode::CREATED).await
}

async fn session(app: &TestApp, session: &str, agent: &str) -> Value {
    let response = app
        .get(&format!("/v1/sessions/{session}/messages?agent_id={agent}"))
        .await;
    assert_status(response, StatusCode::OK).await
}

fn contents(view: &Value) -> Vec<String> {
    view["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap().to_string())
        .collect()
}

fn small_sessions(settings: &mut mnemos::config::Settings) {
    settings.sessions.window = 4;
    settings.sessions.context_tokens = 200;
    settings.sessions.compact_at_pct = 0.5;
}

#[tokio::test]
async fn messages_are_logged_in_order_and_the_window_keeps_the_newest() {
    let temp = tempfile::tempdir().unwrap();
    let mut settings = test_settings(temp.path());
    small_sessions(&mut settings);
    settings.sessions.extract = false;
    let app = spawn_with(settings, Some(temp)).await;

    let first = post_message(&app, "s1", "ana", "user", "hello there").await;
    assert_eq!(first["messages"][0]["seq"], 1);
    assert_eq!(first["messages"][0]["role"], "user");
    assert!(first["messages"][0]["tokens"].as_u64().unwrap() >= 4);
    assert_eq!(first["compaction_scheduled"], false);
    // Several at once, in order.
    let batch = app
        .post(
            "/v1/sessions/s1/messages",
            &json!({"agent_id": "ana", "messages": [
                {"role": "assistant", "content": "hi, how can I help"},
                {"role": "user", "content": "one"},
                {"role": "assistant", "content": "two"},
                {"role": "user", "content": "three"},
            ]}),
        )
        .await;
    let batch = assert_status(batch, StatusCode::CREATED).await;
    let seqs: Vec<u64> = batch["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [2, 3, 4, 5]);

    let view = session(&app, "s1", "ana").await;
    assert_eq!(view["total_messages"], 5);
    assert_eq!(
        contents(&view),
        ["hi, how can I help", "one", "two", "three"]
    );
    assert_eq!(view["beyond_window"], 1);
    assert_eq!(view["expired"], false);
    assert_eq!(view["summary"], Value::Null);
    assert_eq!(view["context_tokens"], 200);
    assert_eq!(view["compact_at_tokens"], 100);
    let tokens: u64 = [&first["messages"], &batch["messages"]]
        .iter()
        .flat_map(|m| m.as_array().unwrap().iter())
        .map(|m| m["tokens"].as_u64().unwrap())
        .sum();
    assert_eq!(view["tokens"], tokens);

    // Sessions are per agent: another agent's session of the same id is separate.
    let other = app.get("/v1/sessions/s1/messages?agent_id=bob").await;
    assert_error(other, StatusCode::NOT_FOUND, "not_found", None).await;
}

#[tokio::test]
async fn bad_session_requests_get_clear_errors() {
    let app = spawn_app().await;
    let cases = [
        (
            json!({"agent_id": "ana", "role": "robot", "content": "x"}),
            "role",
        ),
        (
            json!({"agent_id": "ana", "role": "user", "content": "   "}),
            "messages[0].content",
        ),
        (json!({"agent_id": "ana"}), "content"),
        (json!({"agent_id": "ana", "role": "user"}), "content"),
        (
            json!({"agent_id": "ana", "role": "user", "content": "x", "messages": []}),
            "messages",
        ),
        (json!({"agent_id": "ana", "messages": []}), "messages"),
        (
            json!({"agent_id": "ana", "messages": [{"role": "wizard", "content": "x"}]}),
            "messages[0].role",
        ),
        (
            json!({"agent_id": "not valid!", "role": "user", "content": "x"}),
            "agent_id",
        ),
    ];
    for (body, field) in cases {
        let response = app.post("/v1/sessions/s1/messages", &body).await;
        assert_error(
            response,
            StatusCode::BAD_REQUEST,
            "invalid_argument",
            Some(field),
        )
        .await;
    }
    let bad_id = app
        .post(
            "/v1/sessions/bad%20id/messages",
            &json!({"agent_id": "ana", "role": "user", "content": "x"}),
        )
        .await;
    assert_error(
        bad_id,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("session_id"),
    )
    .await;
    let unknown_field = app
        .post(
            "/v1/sessions/s1/messages",
            &json!({"agent_id": "ana", "role": "user", "content": "x", "colour": "red"}),
        )
        .await;
    assert_error(
        unknown_field,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        None,
    )
    .await;
    let too_big = app
        .post(
            "/v1/sessions/s1/messages",
            &json!({"agent_id": "ana", "role": "user", "content": "x".repeat(70 * 1024)}),
        )
        .await;
    assert_error(
        too_big,
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        Some("messages[0].content"),
    )
    .await;
    let no_agent = app.get("/v1/sessions/s1/messages").await;
    assert_error(
        no_agent,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("agent_id"),
    )
    .await;
    let missing = app
        .post("/v1/sessions/nothing/compact", &json!({"agent_id": "ana"}))
        .await;
    assert_error(missing, StatusCode::NOT_FOUND, "not_found", None).await;
    // Nothing was stored by the failed posts.
    let none = app.get("/v1/sessions/s1/messages?agent_id=ana").await;
    assert_error(none, StatusCode::NOT_FOUND, "not_found", None).await;
}

#[tokio::test]
async fn passing_the_threshold_compacts_into_a_summary_and_an_archive_memory() {
    let temp = tempfile::tempdir().unwrap();
    let mut settings = test_settings(temp.path());
    small_sessions(&mut settings);
    settings.sessions.extract = false;
    let app = spawn_with(settings, Some(temp)).await;

    let turns = [
        (
            "user",
            "We are planning the Lisbon offsite for the data team in March.",
        ),
        (
            "assistant",
            "Great. How many people are coming and what is the budget?",
        ),
        (
            "user",
            "Twelve people, and the budget is 9000 euros including flights.",
        ),
        (
            "assistant",
            "Then a guesthouse in Alfama for three nights fits the budget.",
        ),
        (
            "user",
            "Book the guesthouse and keep Friday free for the river cruise.",
        ),
        (
            "assistant",
            "Noted: guesthouse in Alfama, Friday reserved for the river cruise.",
        ),
    ];
    let mut scheduled = false;
    for (role, content) in turns {
        let posted = post_message(&app, "trip", "ana", role, content).await;
        scheduled |= posted["compaction_scheduled"] == true;
    }
    assert!(scheduled, "six long turns pass 100 tokens");

    // Fire-and-forget: poll until the summary replaces the window.
    let compacted = eventually(Duration::from_secs(20), || async {
        session(&app, "trip", "ana").await["compactions"].as_u64() >= Some(1)
    })
    .await;
    let view = session(&app, "trip", "ana").await;
    assert!(compacted, "no compaction: {view}");
    let summary = view["summary"].as_str().expect("a summary once compacted");
    assert!(!summary.is_empty());
    // The summary stands for what was compacted; the window holds what came after.
    assert_eq!(
        view["compacted_through"].as_u64().unwrap()
            + view["messages"].as_array().unwrap().len() as u64,
        6,
        "{view}"
    );
    assert!(view["tokens"].as_u64().unwrap() < 100, "{view}");
    assert_eq!(view["total_messages"], 6);

    // The full history is an episodic memory tagged archive_summary, recallable.
    let archived = app
        .get("/v1/memories?agent_id=ana&tag=archive_summary")
        .await;
    let archived = assert_status(archived, StatusCode::OK).await;
    let memories = archived["memories"].as_array().unwrap();
    assert_eq!(memories.len(), 1, "{archived}");
    let archive = &memories[0];
    assert_eq!(archive["type"], "episodic");
    assert_eq!(archive["session_id"], "trip");
    let content = archive["content"].as_str().unwrap();
    assert!(content.contains("Transcript:"));
    assert!(content.contains("Twelve people, and the budget is 9000 euros"));
    assert_eq!(archive["metadata"]["compaction"]["from_seq"], 1);
    let hits = app
        .recall("ana", "budget of the Lisbon offsite", json!({}))
        .await;
    assert_eq!(hits["results"][0]["memory"]["id"], archive["id"], "{hits}");

    // New messages follow the summary; an on-demand compaction covers them too.
    post_message(
        &app,
        "trip",
        "ana",
        "user",
        "Also add a vegetarian dinner on Thursday.",
    )
    .await;
    let view = session(&app, "trip", "ana").await;
    assert_eq!(view["summary"], summary);
    let last = view["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["content"], "Also add a vegetarian dinner on Thursday.");
    let report = app
        .post("/v1/sessions/trip/compact", &json!({"agent_id": "ana"}))
        .await;
    let report = assert_status(report, StatusCode::OK).await;
    assert_eq!(report["compacted"], true, "{report}");
    assert_eq!(report["compacted_through"], 7);
    assert_eq!(report["inner_thought"], "none");
    assert!(report["tokens_after"].as_u64() < report["tokens_before"].as_u64());
    let view = session(&app, "trip", "ana").await;
    assert!(view["messages"].as_array().unwrap().is_empty());
    assert_ne!(view["summary"], Value::Null);
    // Nothing left: a second compaction says so and writes nothing.
    let again = app
        .post("/v1/sessions/trip/compact", &json!({"agent_id": "ana"}))
        .await;
    let again = assert_status(again, StatusCode::OK).await;
    assert_eq!(again["compacted"], false);
    assert!(again["reason"]
        .as_str()
        .unwrap()
        .contains("nothing to compact"));
    let archived = app
        .get("/v1/memories?agent_id=ana&tag=archive_summary")
        .await;
    let archived = assert_status(archived, StatusCode::OK).await;
    assert_eq!(archived["memories"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn each_exchange_is_mined_for_memories_in_the_background() {
    let app = spawn_app().await;
    post_message(
        &app,
        "s1",
        "ana",
        "user",
        "I prefer dark mode in every editor.",
    )
    .await;
    let posted = post_message(
        &app,
        "s1",
        "ana",
        "assistant",
        "Understood, dark mode it is.",
    )
    .await;
    assert_eq!(posted["extractions_scheduled"], 1);
    let found = eventually(Duration::from_secs(10), || async {
        let list = app.get("/v1/memories?agent_id=ana").await;
        let list = assert_status(list, StatusCode::OK).await;
        list["memories"].as_array().unwrap().iter().any(|m| {
            m["content"].as_str().unwrap_or("").contains("dark mode") && m["session_id"] == "s1"
        })
    })
    .await;
    assert!(found, "the preference was not extracted");
}

#[tokio::test]
async fn messages_survive_a_restart() {
    let temp = tempfile::tempdir().unwrap();
    let settings = test_settings(temp.path());
    let app = spawn_with(settings.clone(), None).await;
    post_message(&app, "s1", "ana", "user", "remember the blue folder").await;
    post_message(&app, "s1", "ana", "assistant", "the blue folder, noted").await;
    app.stop().await;
    let app = spawn_with(settings, Some(temp)).await;
    let view = session(&app, "s1", "ana").await;
    assert_eq!(
        contents(&view),
        ["remember the blue folder", "the blue folder, noted"]
    );
    let next = post_message(&app, "s1", "ana", "user", "and the red one").await;
    assert_eq!(next["messages"][0]["seq"], 3);
}

#[tokio::test]
async fn an_idle_session_expires_and_its_history_is_archived() {
    let temp = tempfile::tempdir().unwrap();
    let mut settings = test_settings(temp.path());
    settings.sessions.ttl_seconds = 3600;
    settings.sessions.extract = false;
    let app = spawn_with(settings, Some(temp)).await;
    // Messages said two hours ago: the conversation is over.
    let old = chrono::Utc::now() - chrono::Duration::hours(2);
    let posted = app
        .post(
            "/v1/sessions/old/messages",
            &json!({"agent_id": "ana", "messages": [
                {"role": "user", "content": "The staging database password rotates every Monday.", "at": old},
                {"role": "assistant", "content": "Noted, Monday rotation.", "at": old},
            ]}),
        )
        .await;
    let posted = assert_status(posted, StatusCode::CREATED).await;
    assert_eq!(posted["session"]["expired"], true);
    assert_eq!(posted["compaction_scheduled"], true);
    let archived = eventually(Duration::from_secs(10), || async {
        let view = session(&app, "old", "ana").await;
        view["compacted_through"] == 2
    })
    .await;
    assert!(archived, "the expired conversation was not archived");
    let view = session(&app, "old", "ana").await;
    assert_eq!(view["expired"], true);
    assert!(view["messages"].as_array().unwrap().is_empty());
    // A new message starts a fresh window without the old summary.
    let fresh = post_message(&app, "old", "ana", "user", "new topic").await;
    assert_eq!(fresh["session"]["expired"], false);
    assert_eq!(contents(&fresh["session"]), ["new topic"]);
    assert_eq!(fresh["session"]["summary"], Value::Null);
}

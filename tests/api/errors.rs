//! Bad input is answered with the contract's codes, never a 500.

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_bodies_get_invalid_argument_naming_the_field() {
    let app = spawn_app().await;
    let cases = [
        (json!({"content": "x"}), "agent_id"),
        (json!({"agent_id": "a"}), "content"),
        (json!({"agent_id": "a", "content": 5}), "content"),
        (json!({"agent_id": 7, "content": "x"}), "agent_id"),
        (
            json!({"agent_id": "a", "content": "x", "importance": "high"}),
            "importance",
        ),
        (
            json!({"agent_id": "a", "content": "x", "importance": 1.5}),
            "importance",
        ),
        (
            json!({"agent_id": "a", "content": "x", "importance": -0.1}),
            "importance",
        ),
        (
            json!({"agent_id": "a", "content": "x", "valence": 2}),
            "valence",
        ),
        (
            json!({"agent_id": "a", "content": "x", "arousal": -1}),
            "arousal",
        ),
        (
            json!({"agent_id": "a", "content": "x", "type": "dream"}),
            "type",
        ),
        (
            json!({"agent_id": "a", "content": "x", "tags": "one"}),
            "tags",
        ),
        (
            json!({"agent_id": "a", "content": "x", "tags": [""]}),
            "tags",
        ),
        (
            json!({"agent_id": "a", "content": "x", "metadata": [1]}),
            "metadata",
        ),
        (
            json!({"agent_id": "a", "content": "x", "occurred_at": "last tuesday"}),
            "occurred_at",
        ),
        (
            json!({"agent_id": "a", "content": "x", "session_id": "has space"}),
            "session_id",
        ),
        (
            json!({"agent_id": "a", "content": "x", "shared": "yes"}),
            "shared",
        ),
        (
            json!({"agent_id": "a", "content": "x", "imortance": 0.5}),
            "imortance",
        ),
        (json!({"agent_id": "a b", "content": "x"}), "agent_id"),
        (json!({"agent_id": "", "content": "x"}), "agent_id"),
        (json!({"agent_id": "a", "content": "   "}), "content"),
    ];
    for (body, field) in cases {
        let response = app.post("/tools/remember", &body).await;
        assert_error(
            response,
            StatusCode::BAD_REQUEST,
            "invalid_argument",
            Some(field),
        )
        .await;
    }
    assert_error(
        app.post_raw("/tools/remember", "{\"agent_id\": ").await,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("body"),
    )
    .await;
    assert_error(
        app.post_raw("/tools/remember", "").await,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("body"),
    )
    .await;
    assert_error(
        app.post_raw("/tools/remember", "[1, 2]").await,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        None,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recall_and_tools_reject_out_of_range_values() {
    let app = spawn_app().await;
    let bad = [
        (
            "/tools/recall",
            json!({"agent_id": "a", "query": "x", "limit": 0}),
            "limit",
        ),
        (
            "/tools/recall",
            json!({"agent_id": "a", "query": "x", "limit": 201}),
            "limit",
        ),
        (
            "/tools/recall",
            json!({"agent_id": "a", "query": "x", "limit": -1}),
            "limit",
        ),
        (
            "/tools/recall",
            json!({"agent_id": "a", "query": ""}),
            "query",
        ),
        ("/tools/recall", json!({"agent_id": "a"}), "query"),
        (
            "/tools/recall",
            json!({"agent_id": "a", "query": "x", "type": ["nope"]}),
            "type",
        ),
        (
            "/tools/recall",
            json!({"agent_id": "a", "query": "x", "time_query": "when pigs fly"}),
            "time_query",
        ),
        (
            "/tools/recall",
            json!({"agent_id": "a", "query": "x", "time_query": "last week", "now": "tuesday"}),
            "now",
        ),
        // Calendar arithmetic at chrono's limits would overflow: a 400, not a panic.
        (
            "/tools/recall",
            json!({"agent_id": "a", "query": "what happened yesterday", "time_query": "last 2 days", "now": "+262143-12-31T23:59:59Z"}),
            "now",
        ),
        (
            "/tools/recall",
            json!({"agent_id": "a", "query": "what happened yesterday", "now": "-262143-01-01T00:00:00Z"}),
            "now",
        ),
        ("/tools/forget", json!({"agent_id": "a"}), "id"),
        (
            "/tools/forget",
            json!({"agent_id": "a", "id": "x", "query": "y"}),
            "id",
        ),
        (
            "/tools/remember_batch",
            json!({"agent_id": "a", "memories": []}),
            "memories",
        ),
        (
            "/tools/remember_batch",
            json!({"agent_id": "a", "memories": [{"content": "ok"}, {"content": 3}]}),
            "memories[1].content",
        ),
        (
            "/tools/reflect",
            json!({"agent_id": "bad agent"}),
            "agent_id",
        ),
        (
            "/tools/associate",
            json!({"agent_id": "a", "from_id": "x"}),
            "to_id",
        ),
    ];
    for (path, body, field) in bad {
        let response = app.post(path, &body).await;
        assert_error(
            response,
            StatusCode::BAD_REQUEST,
            "invalid_argument",
            Some(field),
        )
        .await;
    }
    assert_error(
        app.get("/v1/memories").await,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("agent_id"),
    )
    .await;
    assert_error(
        app.get("/v1/memories?agent_id=a&limit=abc").await,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        None,
    )
    .await;
    assert_error(
        app.get("/v1/memories?agent_id=a&type=dream").await,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("type"),
    )
    .await;
    assert_error(
        app.get("/v1/memories?agent_id=a&limit=1000").await,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("limit"),
    )
    .await;
    let stored = app.remember("a", "patch me", json!({})).await;
    let id = stored["memory"]["id"].as_str().unwrap();
    assert_error(
        app.patch(&format!("/v1/memories/{id}?agent_id=a"), &json!({}))
            .await,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("body"),
    )
    .await;
    assert_error(
        app.patch(
            &format!("/v1/memories/{id}?agent_id=a"),
            &json!({"status": "gone"}),
        )
        .await,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("status"),
    )
    .await;
    assert_error(
        app.patch(
            &format!("/v1/memories/{id}?agent_id=a"),
            &json!({"importance": 3}),
        )
        .await,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("importance"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_ids_and_routes_are_not_found() {
    let app = spawn_app().await;
    assert_error(
        app.get("/v1/memories/no-such-id?agent_id=a").await,
        StatusCode::NOT_FOUND,
        "not_found",
        Some("id"),
    )
    .await;
    assert_error(
        app.patch(
            "/v1/memories/no-such-id?agent_id=a",
            &json!({"content": "x"}),
        )
        .await,
        StatusCode::NOT_FOUND,
        "not_found",
        Some("id"),
    )
    .await;
    assert_error(
        app.delete("/v1/memories/no-such-id?agent_id=a").await,
        StatusCode::NOT_FOUND,
        "not_found",
        Some("id"),
    )
    .await;
    assert_error(
        app.post(
            "/tools/memory_history",
            &json!({"agent_id": "bob", "id": "no-such-id"}),
        )
        .await,
        StatusCode::NOT_FOUND,
        "not_found",
        Some("id"),
    )
    .await;
    assert_error(
        app.post(
            "/tools/forget",
            &json!({"agent_id": "a", "id": "no-such-id"}),
        )
        .await,
        StatusCode::NOT_FOUND,
        "not_found",
        Some("id"),
    )
    .await;
    assert_error(
        app.post(
            "/tools/spreading_activation",
            &json!({"agent_id": "a", "seed_id": "nope"}),
        )
        .await,
        StatusCode::NOT_FOUND,
        "not_found",
        Some("seed_id"),
    )
    .await;
    assert_error(
        app.get("/no/such/route").await,
        StatusCode::NOT_FOUND,
        "not_found",
        None,
    )
    .await;
    assert_error(
        app.get("/tools/remember").await,
        StatusCode::METHOD_NOT_ALLOWED,
        "invalid_argument",
        None,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_answer_payload_too_large() {
    let temp = tempfile::tempdir().unwrap();
    let mut settings = test_settings(temp.path());
    settings.limits.max_content_bytes = 1000;
    settings.limits.max_batch = 3;
    settings.limits.max_metadata_bytes = 100;
    settings.server.max_body_bytes = 64 * 1024;
    let app = spawn_with(settings, Some(temp)).await;
    assert_error(
        app.post(
            "/tools/remember",
            &json!({"agent_id": "a", "content": "x".repeat(1001)}),
        )
        .await,
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        Some("content"),
    )
    .await;
    app.remember("a", &"x".repeat(1000), json!({})).await;
    let batch = json!({"agent_id": "a", "memories": [{"content": "1"}, {"content": "2"}, {"content": "3"}, {"content": "4"}]});
    assert_error(
        app.post("/tools/remember_batch", &batch).await,
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        Some("memories"),
    )
    .await;
    assert_error(
        app.post(
            "/tools/remember",
            &json!({"agent_id": "a", "content": "x", "metadata": {"blob": "y".repeat(200)}}),
        )
        .await,
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        Some("metadata"),
    )
    .await;
    let huge = json!({"agent_id": "a", "content": "z".repeat(100 * 1024)}).to_string();
    assert_error(
        app.post_raw("/tools/remember", huge).await,
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        Some("body"),
    )
    .await;
    assert_error(
        app.post("/v1/admin/actors/nobody/fail", &json!({})).await,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("child"),
    )
    .await;
}

#[tokio::test]
async fn a_path_parameter_that_is_not_utf8_gets_the_contract_error() {
    let app = spawn_app().await;
    for (path, field) in [
        ("/v1/memories/%FF", "id"),
        ("/v1/memories/%FF/history", "id"),
        ("/v1/sessions/%FF/messages?agent_id=a", "id"),
        ("/v1/namespaces/%FF/entries/k", "namespace"),
        ("/v1/namespaces/plan/entries/%FF", "key"),
    ] {
        assert_error(
            app.get(path).await,
            StatusCode::BAD_REQUEST,
            "invalid_argument",
            Some(field),
        )
        .await;
    }
    // A query parameter of the wrong type is named too.
    assert_error(
        app.get("/v1/memories?agent_id=a&limit=abc").await,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("limit"),
    )
    .await;
    app.stop().await;
}

/// A query parameter a route does not take is refused naming it, on every route (a
/// misspelt filter is never silently ignored).
#[tokio::test]
async fn an_unknown_query_parameter_is_refused_naming_it() {
    let app = spawn_app().await;
    let response = app
        .client
        .put(format!("{}/v1/namespaces/qq", app.address))
        .json(&json!({"max_entries": 5}))
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success());
    for path in [
        "/v1/namespaces/qq/stats?bogus=1",
        "/v1/namespaces/qq/entries/k?bogus=1",
        "/v1/namespaces?bogus=1",
        "/v1/agents?bogus=1",
        "/v1/memories?agent_id=a&bogus=1",
    ] {
        let response = app.get(path).await;
        assert_error(
            response,
            StatusCode::BAD_REQUEST,
            "invalid_argument",
            Some("bogus"),
        )
        .await;
    }
    let response = app.delete("/v1/namespaces/qq/entries/k?bogus=1").await;
    assert_error(
        response,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("bogus"),
    )
    .await;
}

//! What integrators build on: a client generated from `/openapi.json` by
//! openapi-python-client (`tests/openapi_client.py`), and the REST routes a mem0-style
//! client calls (`POST /v1/memories` with chat messages, `DELETE /v1/memories`, recall's
//! `min_score`, scores on 0..1 without zero-score padding), and the Python package in
//! `clients/python` running its own suite against a live server. The generator needs
//! `pip install openapi-python-client`; without it that test says SKIPPED (under `CI` it fails).

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::{spawn_app, spawn_with_keys, SERVER_ADMIN};

/// Whether `python3 -m openapi_python_client` runs; when not, fail under CI or say SKIPPED.
async fn generator_available(test: &str) -> bool {
    let probe = tokio::process::Command::new("python3")
        .args(["-m", "openapi_python_client", "--version"])
        .output()
        .await;
    if probe.is_ok_and(|output| output.status.success()) {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI must install openapi-python-client (python3 -m pip install openapi-python-client)"
    );
    crate::helpers::skipped(test, "pip install openapi-python-client");
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generated_python_client_keeps_every_operation_and_works() {
    let test = "a_generated_python_client_keeps_every_operation_and_works";
    if !generator_available(test).await {
        return;
    }
    let (app, secrets) = spawn_with_keys(&[SERVER_ADMIN]).await;
    let work = tempfile::tempdir().expect("temp dir");
    let output = tokio::time::timeout(
        std::time::Duration::from_secs(600),
        tokio::process::Command::new("python3")
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/openapi_client.py"
            ))
            .arg(&app.address)
            .arg(&secrets[0])
            .arg(work.path())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the generator finishes within ten minutes")
    .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "tests/openapi_client.py failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary: Value = serde_json::from_str(stdout.trim()).expect("JSON summary");
    assert_eq!(summary["operations"], summary["modules"], "{summary}");
    app.stop().await;
}

/// Whether the Python client's test dependencies (httpx, pytest) import; when not, fail
/// under CI or say SKIPPED.
async fn python_client_deps(test: &str) -> bool {
    let probe = tokio::process::Command::new("python3")
        .args(["-c", "import httpx, pytest"])
        .output()
        .await;
    if probe.is_ok_and(|output| output.status.success()) {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI must install the Python client with its test extra (python3 -m pip install './clients/python[test]')"
    );
    crate::helpers::skipped(test, "pip install './clients/python[test]'");
    false
}

/// The Python package in `clients/python` runs its own suite (sync and async clients,
/// the mem0-shaped methods, every resource, errors) against a real server with a key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_client_package_passes_its_suite_against_a_real_server() {
    let test = "the_python_client_package_passes_its_suite_against_a_real_server";
    if !python_client_deps(test).await {
        return;
    }
    let (app, secrets) = spawn_with_keys(&[SERVER_ADMIN]).await;
    let output = tokio::time::timeout(
        std::time::Duration::from_secs(600),
        tokio::process::Command::new("python3")
            .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/clients/python/tests"))
            .env("MNEMOS_URL", &app.address)
            .env("MNEMOS_API_KEY", &secrets[0])
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the suite finishes within ten minutes")
    .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "clients/python/tests failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains(" passed") && !stdout.contains(" skipped"),
        "every test of the Python client ran: {stdout}"
    );
    app.stop().await;
}

#[tokio::test]
async fn query_parameters_are_declared_in_the_query_and_every_operation_is_tagged() {
    let app = spawn_app().await;
    let document: Value = app.get("/openapi.json").await.json().await.unwrap();
    let list = &document["paths"]["/v1/memories"]["get"];
    let agent = list["parameters"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["name"] == "agent_id"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(agent["in"], "query", "{agent}");
    assert_ne!(agent["required"], true, "{agent}");
    for path in [
        "/v1/chat/completions",
        "/v1/responses",
        "/v1/embeddings",
        "/v1/models",
        "/mcp",
    ] {
        assert!(
            document["paths"][path].is_object(),
            "{path} is not described"
        );
    }
    assert_eq!(
        document["paths"]["/tools/recall"]["post"]["tags"],
        json!(["tools"])
    );
    assert!(document["servers"][0]["url"].is_string());
    app.stop().await;
}

#[tokio::test]
async fn a_chat_transcript_posted_to_memories_is_mined_exchange_by_exchange() {
    let app = spawn_app().await;
    let response = app
        .post(
            "/v1/memories",
            &json!({"agent_id": "mia", "session_id": "s1", "messages": [
                {"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": "I prefer dark roast coffee in the morning."},
                {"role": "assistant", "content": "Noted: dark roast in the morning."},
                {"role": "user", "content": "How do I restart the worker?"},
                {"role": "assistant", "content": "1. Stop the worker.\n2. Run make restart."}
            ]}),
        )
        .await;
    assert_eq!(response.status(), StatusCode::CREATED);
    let body: Value = response.json().await.unwrap();
    let stored = body["stored"].as_array().cloned().unwrap_or_default();
    let mut kinds: Vec<&str> = stored.iter().filter_map(|m| m["type"].as_str()).collect();
    kinds.sort_unstable();
    assert_eq!(kinds, ["procedural", "semantic"], "{body}");
    assert!(stored.iter().all(|m| m["session_id"] == "s1"), "{body}");
    // A role the contract does not know is refused naming the message.
    let refused = app
        .post(
            "/v1/memories",
            &json!({"agent_id": "mia", "messages": [{"role": "robot", "content": "beep"}]}),
        )
        .await;
    assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    let error: Value = refused.json().await.unwrap();
    assert_eq!(error["error"]["field"], "messages[0].role", "{error}");
    let empty = app
        .post("/v1/memories", &json!({"agent_id": "mia", "messages": []}))
        .await;
    assert_eq!(empty.status(), StatusCode::BAD_REQUEST);
    app.stop().await;
}

#[tokio::test]
async fn delete_all_removes_every_memory_of_one_agent_and_no_other() {
    let app = spawn_app().await;
    for n in 0..5 {
        app.remember(
            "dora",
            &format!("Dora's note number {n} about tulips"),
            json!({}),
        )
        .await;
    }
    let archived = app
        .remember("dora", "Dora once liked daffodils", json!({}))
        .await;
    let id = archived["memory"]["id"].as_str().unwrap().to_string();
    app.post("/tools/forget", &json!({"agent_id": "dora", "id": id}))
        .await;
    app.remember("eve", "Eve grows tulips too", json!({})).await;
    let response = app.delete("/v1/memories?agent_id=dora").await;
    assert_eq!(response.status(), StatusCode::OK);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["deleted"], 6, "{body}");
    let left: Value = app
        .get("/v1/memories?agent_id=dora")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(left["memories"], json!([]), "{left}");
    let archived_left: Value = app
        .get("/v1/memories?agent_id=dora&status=archived")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(archived_left["memories"], json!([]), "{archived_left}");
    let eve: Value = app
        .get("/v1/memories?agent_id=eve")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(eve["memories"].as_array().map(Vec::len), Some(1), "{eve}");
    // Naming no agent is refused, not "everything".
    assert_eq!(
        app.delete("/v1/memories").await.status(),
        StatusCode::BAD_REQUEST
    );
    app.stop().await;
}

#[tokio::test]
async fn recall_scores_stay_in_zero_to_one_without_padding_and_honour_min_score() {
    let app = spawn_app().await;
    app.remember(
        "sam",
        "The staging database runs on port 5433",
        json!({"importance": 1.0}),
    )
    .await;
    app.remember("sam", "Sam's cat is called Pixel", json!({}))
        .await;
    app.remember("sam", "Lunch on Fridays is pizza", json!({}))
        .await;
    let all = app
        .recall(
            "sam",
            "staging database port",
            json!({"limit": 10, "session_id": "x"}),
        )
        .await;
    let results = all["results"].as_array().cloned().unwrap_or_default();
    assert!(!results.is_empty(), "{all}");
    assert!(
        results
            .iter()
            .all(|r| r["score"].as_f64().is_some_and(|s| s > 0.0 && s <= 1.0)),
        "{all}"
    );
    assert!(results.len() < 10, "padded to the limit: {all}");
    assert!(
        all["note"]
            .as_str()
            .is_some_and(|n| n.contains("of the 10")),
        "{all}"
    );
    let top = results[0]["score"].as_f64().unwrap();
    let strict = app
        .recall("sam", "staging database port", json!({"min_score": top}))
        .await;
    let strict_results = strict["results"].as_array().cloned().unwrap_or_default();
    assert!(!strict_results.is_empty(), "{strict}");
    assert!(
        strict_results
            .iter()
            .all(|r| r["score"].as_f64().unwrap() >= top),
        "{strict}"
    );
    let refused = app
        .post(
            "/tools/recall",
            &json!({"agent_id": "sam", "query": "port", "min_score": 1.5}),
        )
        .await;
    assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    let error: Value = refused.json().await.unwrap();
    assert_eq!(error["error"]["field"], "min_score", "{error}");
    app.stop().await;
}

//! Embedding models over HTTP: a data directory of another model keeps serving its
//! vectors until it is re-embedded, the re-embedding runs beside live traffic and
//! switches without an error, an unbuildable stored model is refused with the way
//! out, and the `openai` provider serves recall from a real OpenAI-compatible server
//! (llama.cpp) and rides out its transient failures.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::{
    assert_status, embed_url, eventually, spawn_with, test_settings, try_spawn_with, TestApp,
};

/// `count` distinct memories of `agent` in one batch; answers their ids in order.
async fn remember_many(app: &TestApp, agent: &str, count: usize, topic: &str) -> Vec<String> {
    let memories: Vec<Value> = (0..count)
        .map(|i| json!({ "content": format!("{topic} note {i}: item {} of the {topic} list", i * 7 + 3), "type": "episodic" }))
        .collect();
    let answer = assert_status(
        app.post(
            "/tools/remember_batch",
            &json!({ "agent_id": agent, "memories": memories }),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    answer["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| r["memory"]["id"].as_str().expect("id").to_string())
        .collect()
}

async fn model_of(app: &TestApp) -> String {
    let health = assert_status(app.get("/health").await, StatusCode::OK).await;
    health["backends"]["vectors"]["model"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

async fn reembed_status(app: &TestApp) -> Value {
    assert_status(app.get("/v1/admin/reembed").await, StatusCode::OK).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_model_serves_its_vectors_until_reembedded_then_switches_under_live_traffic() {
    let temp = tempfile::tempdir().unwrap();
    let mut hashing = test_settings(temp.path());
    hashing.embedding.provider = "builtin".into();
    let app = spawn_with(hashing, None).await;
    let coffee = app
        .remember(
            "reader",
            "My burr grinder makes the espresso beans too coarse",
            json!({}),
        )
        .await["memory"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let mut ids = remember_many(&app, "reader", 1000, "garden").await;
    ids.extend(remember_many(&app, "reader", 1000, "harbour").await);
    ids.push(coffee.clone());
    let before = model_of(&app).await;
    assert!(before.starts_with("builtin-hash-v1-"), "{before}");
    app.stop().await;

    // The default configuration names the static table; the directory holds hashing
    // vectors. It starts, serves the stored model and says what would switch it.
    let app = spawn_with(test_settings(temp.path()), None).await;
    assert_eq!(model_of(&app).await, before);
    let idle = reembed_status(&app).await;
    assert_eq!(idle["phase"], "idle", "{idle}");
    assert!(
        idle["target"].as_str().unwrap_or("").starts_with("static-"),
        "{idle}"
    );
    let found = app.recall("reader", "espresso grinder", json!({})).await;
    assert_eq!(
        found["results"][0]["memory"]["id"],
        coffee.as_str(),
        "{found}"
    );

    let started = assert_status(
        app.post("/v1/admin/reembed", &json!({})).await,
        StatusCode::ACCEPTED,
    )
    .await;
    assert!(
        matches!(
            started["phase"].as_str(),
            Some("embedding" | "switching" | "done")
        ),
        "{started}"
    );

    // Live traffic while it runs: writes and recalls all answer, none fails. The task
    // answers the first failure with its status and body rather than panicking, so a
    // failure says what failed.
    let written = Arc::new(AtomicUsize::new(0));
    let traffic = {
        let (address, written) = (app.address.clone(), written.clone());
        tokio::spawn(async move {
            let client = reqwest::Client::new();
            let mut new_ids = Vec::new();
            for i in 0..40 {
                let remembered = client
                    .post(format!("{address}/tools/remember"))
                    .json(&json!({"agent_id": "reader", "content": format!("During the switch, parcel {i} went to dock {}", i % 5)}))
                    .send()
                    .await
                    .map_err(|e| format!("remember {i} was not answered: {e}"))?;
                let status = remembered.status();
                let body: Value = remembered.json().await.unwrap_or(Value::Null);
                if status != StatusCode::CREATED {
                    return Err(format!("remember {i} answered {status}: {body}"));
                }
                new_ids.push(
                    body["memory"]["id"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                );
                written.fetch_add(1, Ordering::SeqCst);
                let recalled = client
                    .post(format!("{address}/tools/recall"))
                    .json(&json!({"agent_id": "reader", "query": "coffee beans grinder"}))
                    .send()
                    .await
                    .map_err(|e| format!("recall {i} was not answered: {e}"))?;
                let status = recalled.status();
                if status != StatusCode::OK {
                    let body = recalled.text().await.unwrap_or_default();
                    return Err(format!("recall {i} answered {status}: {body}"));
                }
            }
            Ok::<_, String>(new_ids)
        })
    };
    assert!(
        eventually(Duration::from_secs(180), || async {
            matches!(
                reembed_status(&app).await["phase"].as_str(),
                Some("done" | "failed")
            )
        })
        .await,
        "the re-embedding did not finish: {}",
        reembed_status(&app).await
    );
    let finished = reembed_status(&app).await;
    assert_eq!(finished["phase"], "done", "{finished}");
    let new_ids = match traffic.await.unwrap() {
        Ok(ids) => ids,
        Err(failure) => panic!(
            "live traffic failed during the re-embedding after {} writes: {failure}",
            written.load(Ordering::SeqCst)
        ),
    };
    let done = reembed_status(&app).await;
    assert!(done["pause_ms"].as_f64().is_some(), "{done}");
    assert_eq!(done["done"], done["total"], "{done}");
    let after = model_of(&app).await;
    assert!(after.starts_with("static-"), "{after}");

    // Every memory, old or written during the run, is found by its meaning now.
    let found = app.recall("reader", "coffee mill", json!({})).await;
    assert_eq!(
        found["results"][0]["memory"]["id"],
        coffee.as_str(),
        "{found}"
    );
    for (i, id) in new_ids.iter().enumerate().step_by(13) {
        let found = app
            .recall(
                "reader",
                &format!("During the switch, parcel {i} went to dock {}", i % 5),
                json!({"limit": 3}),
            )
            .await;
        assert!(
            found["results"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["memory"]["id"] == id.as_str()),
            "{found}"
        );
    }
    let health = assert_status(app.get("/health").await, StatusCode::OK).await;
    assert_eq!(
        health["backends"]["vectors"]["indexed"].as_u64(),
        Some((ids.len() + new_ids.len()) as u64),
        "{health}"
    );
    app.stop().await;

    // The switch is durable: the next start serves the new model, nothing pending.
    let app = spawn_with(test_settings(temp.path()), None).await;
    assert_eq!(model_of(&app).await, after);
    // Nothing is pending any more: asking again is a conflict that says what to change.
    let again = app.post("/v1/admin/reembed", &json!({})).await;
    assert_eq!(again.status(), StatusCode::CONFLICT);
    let body: Value = again.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("[embedding]"),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_model_that_cannot_be_built_is_refused_naming_reembed_which_then_switches() {
    let temp = tempfile::tempdir().unwrap();
    // A table of our own (the compiled-in one with another description, so another model).
    let mut table = mnemos::embedding::static_table::StaticTable::from_bytes(
        mnemos::embedding::static_table::MINILM_TABLE,
        "compiled-in",
    )
    .unwrap();
    table.source.push_str("; a copy for the test");
    let table_path = temp.path().join("custom.static");
    std::fs::write(&table_path, table.to_bytes()).unwrap();
    let data_dir = temp.path().join("data");
    let mut custom = test_settings(&data_dir);
    custom.embedding.static_table = table_path.clone();
    let app = spawn_with(custom, None).await;
    let id = app
        .remember(
            "keeper",
            "The staging database listens on port 5433",
            json!({}),
        )
        .await["memory"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    remember_many(&app, "keeper", 50, "ledger").await;
    app.stop().await;
    std::fs::remove_file(&table_path).unwrap();

    let error = match try_spawn_with(test_settings(&data_dir), None).await {
        Ok(_) => panic!("a server whose stored model cannot be built must not start"),
        Err(error) => format!("{error:#}"),
    };
    assert!(
        error.contains("mnemos reindex --reembed") && error.contains("custom.static"),
        "{error}"
    );

    // The way out it names: the CLI re-embeds with the configured model, then it starts.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mnemos"))
        .args(["--json", "reindex", "--reembed"])
        .env("MNEMOS__DATA_DIR", &data_dir)
        .env("MNEMOS__COGNITION__ENABLED", "false")
        .envs(crate::helpers::backend_env(&data_dir))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["phase"], "done", "{report}");
    assert_eq!(report["embedded"], 51, "{report}");
    let app = spawn_with(test_settings(&data_dir), None).await;
    let found = app.recall("keeper", "staging db port", json!({})).await;
    assert_eq!(found["results"][0]["memory"]["id"], id.as_str(), "{found}");
}

/// An OpenAI-compatible front that fails the first `failures` requests with 503 (then
/// passes everything to `upstream`): a server having a bad moment.
async fn flaky_front(upstream: String, failures: usize) -> (String, Arc<AtomicUsize>) {
    use axum::body::Bytes;
    use axum::extract::State;
    use axum::response::IntoResponse;
    let seen = Arc::new(AtomicUsize::new(0));
    let state = (upstream, seen.clone(), failures);
    let app = axum::Router::new()
        .route(
            "/v1/embeddings",
            axum::routing::post(
                |State((upstream, seen, failures)): State<(String, Arc<AtomicUsize>, usize)>,
                 body: Bytes| async move {
                    if seen.fetch_add(1, Ordering::SeqCst) < failures {
                        return (
                            StatusCode::SERVICE_UNAVAILABLE,
                            [("content-type", "application/json")],
                            r#"{"error":{"message":"loading model","type":"unavailable"}}"#
                                .to_string(),
                        )
                            .into_response();
                    }
                    let answer = reqwest::Client::new()
                        .post(format!("{}/embeddings", upstream.trim_end_matches('/')))
                        .header("content-type", "application/json")
                        .body(body.to_vec())
                        .send()
                        .await
                        .unwrap();
                    let status = answer.status();
                    let text = answer.text().await.unwrap();
                    (status, [("content-type", "application/json")], text).into_response()
                },
            ),
        )
        .with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (address, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_provider_serves_recall_from_a_real_server_and_rides_out_its_failures() {
    let Some(upstream) = embed_url("the_openai_provider_serves_recall_from_a_real_server") else {
        return;
    };
    // Two 503s first: the probe at start and the first write are retried, not failed.
    let (front, seen) = flaky_front(upstream.clone(), 2).await;
    let temp = tempfile::tempdir().unwrap();
    let mut settings = test_settings(temp.path());
    settings.embedding.provider = "openai".into();
    settings.embedding.base_url = front;
    settings.embedding.model = "SmolLM2".into();
    settings.embedding.batch_size = 8;
    settings.embedding.max_input_chars = 1000;
    let app = spawn_with(settings, None).await;
    assert!(seen.load(Ordering::SeqCst) >= 3, "the probe was retried");
    let model = model_of(&app).await;
    assert!(model.starts_with("openai:SmolLM2:"), "{model}");

    let kettle = app
        .remember(
            "chef",
            "The kettle in the office kitchen is broken",
            json!({}),
        )
        .await["memory"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let ids = remember_many(&app, "chef", 20, "invoice").await;
    assert_eq!(ids.len(), 20);
    let found = app
        .recall(
            "chef",
            "The kettle in the office kitchen is broken",
            json!({"debug": true}),
        )
        .await;
    assert_eq!(
        found["results"][0]["memory"]["id"],
        kettle.as_str(),
        "{found}"
    );
    app.stop().await;

    // A server that is not there: the start names the setting and how to start without it.
    let mut gone = test_settings(&temp.path().join("other"));
    gone.embedding.provider = "openai".into();
    gone.embedding.base_url = "http://127.0.0.1:9/v1".into();
    gone.embedding.model = "SmolLM2".into();
    gone.embedding.max_retries = 1;
    let error = match try_spawn_with(gone, None).await {
        Ok(_) => panic!("no server, no dimension: the start must be refused"),
        Err(error) => format!("{error:#}"),
    };
    assert!(
        error.contains("127.0.0.1:9") && error.contains("embedding.dimensions"),
        "{error}"
    );
}

/// An OpenAI-compatible embedding server that answers every request after `delay`,
/// with a small vector derived from each input's bytes.
async fn slow_server(delay: Duration) -> String {
    let app = axum::Router::new().route(
        "/v1/embeddings",
        axum::routing::post(move |axum::Json(body): axum::Json<Value>| async move {
            tokio::time::sleep(delay).await;
            let inputs: Vec<String> = match &body["input"] {
                Value::String(one) => vec![one.clone()],
                Value::Array(many) => many
                    .iter()
                    .map(|v| v.as_str().unwrap_or_default().to_string())
                    .collect(),
                _ => Vec::new(),
            };
            let data: Vec<Value> = inputs
                .iter()
                .enumerate()
                .map(|(index, text)| {
                    let mut vector = [0.1f32; 8];
                    for (i, byte) in text.bytes().enumerate() {
                        vector[i % 8] += f32::from(byte) / 255.0;
                    }
                    json!({"object": "embedding", "index": index, "embedding": vector})
                })
                .collect();
            axum::Json(json!({
                "object": "list",
                "data": data,
                "model": "slow",
                "usage": {"prompt_tokens": 1, "total_tokens": 1}
            }))
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    address
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_embedder_slower_than_the_call_timeout_still_serves_writes_and_recalls() {
    // Each request takes longer than the actors' call timeout, well within the
    // embedder's own timeout: the work is slow, not hung, so it must complete.
    let server = slow_server(Duration::from_millis(2_500)).await;
    let temp = tempfile::tempdir().unwrap();
    let mut settings = test_settings(temp.path());
    settings.supervisor.call_timeout_ms = 1_000;
    settings.embedding.provider = "openai".into();
    settings.embedding.base_url = server;
    settings.embedding.model = "slow".into();
    settings.embedding.timeout_ms = 10_000;
    settings.embedding.max_retries = 1;
    let app = spawn_with(settings, None).await;
    let stored = app
        .remember(
            "patient",
            "The kettle in the office kitchen is broken",
            json!({}),
        )
        .await;
    assert!(stored["memory"]["id"].is_string(), "{stored}");
    let batch = assert_status(
        app.post(
            "/tools/remember_batch",
            &json!({"agent_id": "patient", "memories": [
                {"content": "The printer on floor two jams"},
                {"content": "Invoices are due on the fifth"}
            ]}),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(
        batch["results"].as_array().map(Vec::len),
        Some(2),
        "{batch}"
    );
    let found = app.recall("patient", "kettle broken", json!({})).await;
    assert!(!found["results"].as_array().unwrap().is_empty(), "{found}");
    app.stop().await;
}

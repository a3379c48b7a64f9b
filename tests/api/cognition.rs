//! The sleep cycle, archival and their schedules, over HTTP: consolidation into
//! knowledge, the run log, cron firing, one runner across two server processes, and
//! the openai inner-thought provider against a real llama.cpp server.

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::{assert_status, eventually, spawn_app, spawn_with, test_settings, TestApp};

const COFFEE: [&str; 3] = [
    "I drank a flat white coffee at the Blue Bottle cafe this morning",
    "Had a flat white coffee at Blue Bottle cafe again today",
    "Morning flat white coffee at the Blue Bottle cafe, as usual",
];

async fn seed(app: &TestApp, agent: &str) {
    for text in COFFEE {
        app.remember(agent, text, json!({ "type": "episodic" }))
            .await;
    }
    app.remember(
        agent,
        "The dentist appointment moved to Thursday",
        json!({ "type": "episodic" }),
    )
    .await;
}

async fn consolidate(app: &TestApp, agent: &str) -> Value {
    assert_status(
        app.post("/tools/consolidate", &json!({ "agent_id": agent }))
            .await,
        StatusCode::OK,
    )
    .await
}

async fn runs(app: &TestApp, query: &str) -> Vec<Value> {
    let body = assert_status(
        app.get(&format!("/v1/cognition/runs?{query}")).await,
        StatusCode::OK,
    )
    .await;
    body["runs"].as_array().cloned().unwrap_or_default()
}

fn lower_threshold(settings: &mut mnemos::config::Settings) {
    // The built-in hashing embedder scores paraphrases lower than a sentence model.
    settings.cognition.cluster_threshold = 0.6;
}

/// Three topics of four paraphrases each: they share few words, so only an embedder
/// that knows meaning links them.
const PARAPHRASED_TOPICS: [[&str; 4]; 3] = [
    [
        "My coffee grinder is too loud in the morning.",
        "The burr grinder makes a racket when I grind beans early.",
        "Grinding coffee at dawn wakes everyone because the mill is noisy.",
        "I need a quieter machine to grind my espresso beans.",
    ],
    [
        "We paddled the river rapids last Saturday.",
        "The kayak trip down the river was wild this weekend.",
        "Running the whitewater on the river took all afternoon.",
        "Our canoe run on the river had three big rapids.",
    ],
    [
        "Nobody may deploy while the deploy lock is held.",
        "Take the deploy lock before pushing to production.",
        "The release lock blocks deployments until it is released.",
        "Deployments wait for the lock on the prod pipeline.",
    ],
];

#[tokio::test]
async fn the_default_embedder_clusters_paraphrases_and_never_mixes_topics() {
    // The embedded default (the static table), with the default cluster threshold.
    let app = spawn_app().await;
    // Memory id → the topic it was written for.
    let mut topic_of: HashMap<String, usize> = HashMap::new();
    for (topic, texts) in PARAPHRASED_TOPICS.iter().enumerate() {
        for text in texts {
            let stored = app
                .remember("paraphraser", text, json!({ "type": "episodic" }))
                .await;
            let id = stored["memory"]["id"].as_str().or(stored["id"].as_str());
            topic_of.insert(id.expect("remember answers the id").to_string(), topic);
        }
    }
    let run = consolidate(&app, "paraphraser").await;
    let clusters = run["report"]["clusters"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    // The local MiniLM forms two of these three at the default threshold (the river
    // runs share the fewest words); the static table must do at least as well.
    assert!(clusters.len() >= 2, "paraphrases are clustered: {run}");
    let made =
        run["new_semantic"].as_u64().unwrap_or(0) + run["new_procedural"].as_u64().unwrap_or(0);
    assert_eq!(
        made as usize,
        clusters.len(),
        "each cluster became knowledge: {run}"
    );
    for cluster in &clusters {
        let sources: Vec<&str> = cluster["sources"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|s| s.as_str())
            .collect();
        assert!(sources.len() >= 3, "{cluster}");
        let first = topic_of.get(sources[0]);
        assert!(first.is_some(), "{cluster}");
        assert!(
            sources.iter().all(|id| topic_of.get(*id) == first),
            "a cluster mixes topics: {cluster}"
        );
    }
}

#[tokio::test]
async fn the_sleep_cycle_turns_repeated_experience_into_recallable_knowledge_once() {
    let temp = tempfile::tempdir().unwrap();
    let mut settings = test_settings(temp.path());
    lower_threshold(&mut settings);
    let app = spawn_with(settings, Some(temp)).await;
    seed(&app, "sleeper").await;

    let run = consolidate(&app, "sleeper").await;
    assert_eq!(run["processed"], 4, "{run}");
    assert_eq!(run["consolidated"], 3, "{run}");
    assert_eq!(run["new_semantic"], 1, "{run}");
    assert_eq!(run["trigger"], "api");
    let derived_id = run["report"]["clusters"][0]["derived_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(run["report"]["clusters"][0]["provider"], "none");

    let derived = assert_status(
        app.get(&format!("/v1/memories/{derived_id}?agent_id=sleeper"))
            .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(derived["type"], "semantic");
    assert_eq!(derived["consolidation_level"], 1.0);
    assert_eq!(derived["provenance"]["surface"], "sleep_cycle", "{derived}");
    assert!(
        derived["content"].as_str().unwrap().contains("Blue Bottle"),
        "{derived}"
    );
    // Linked to its sources.
    let spread = assert_status(
        app.post(
            "/tools/spreading_activation",
            &json!({ "agent_id": "sleeper", "seed_id": derived_id, "depth": 1 }),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(spread["results"].as_array().unwrap().len(), 3, "{spread}");
    // Recallable as semantic knowledge.
    let recalled = app
        .recall(
            "sleeper",
            "Blue Bottle flat white",
            json!({ "type": ["semantic"] }),
        )
        .await;
    assert_eq!(
        recalled["results"][0]["memory"]["id"],
        derived_id.as_str(),
        "{recalled}"
    );

    // Idempotent: a second pass consolidates nothing and creates nothing.
    let again = consolidate(&app, "sleeper").await;
    assert_eq!(again["consolidated"], 0, "{again}");
    assert_eq!(again["new_semantic"], 0);
    let listed = assert_status(
        app.get("/v1/memories?agent_id=sleeper&limit=50").await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(listed["memories"].as_array().unwrap().len(), 5);

    // The run log lists both runs, newest first, with their reports.
    let logged = runs(&app, "agent_id=sleeper").await;
    assert_eq!(logged.len(), 2);
    assert_eq!(logged[0]["id"], again["id"]);
    assert!(logged[1]["report"]["stats"]["total"].as_u64().unwrap() >= 4);
    app.stop().await;
}

#[tokio::test]
async fn archival_summarises_idle_sessions_from_the_cli_step() {
    let temp = tempfile::tempdir().unwrap();
    let mut settings = test_settings(temp.path());
    settings.archival.idle_hours = 0;
    let app = spawn_with(settings, Some(temp)).await;
    for text in [
        "We chose Postgres for the billing service",
        "Migration plan: dual writes for a week",
    ] {
        app.remember("archivist", text, json!({ "session_id": "s-42" }))
            .await;
    }
    let run = assert_status(
        app.post("/v1/admin/archive", &json!({})).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(run["processed"], 1, "{run}");
    let summary_id = run["report"]["archived_sessions"][0]["summary_id"]
        .as_str()
        .unwrap()
        .to_string();
    let summary = assert_status(
        app.get(&format!("/v1/memories/{summary_id}?agent_id=archivist"))
            .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(summary["tags"], json!(["archive_summary"]));
    assert_eq!(summary["session_id"], "s-42");
    assert!(
        summary["content"].as_str().unwrap().contains("Postgres"),
        "{summary}"
    );
    let again = assert_status(
        app.post("/v1/admin/archive", &json!({})).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(again["processed"], 0, "idempotent: {again}");
    app.stop().await;
}

#[tokio::test]
async fn the_cron_schedule_fires_both_jobs_through_ticks() {
    let temp = tempfile::tempdir().unwrap();
    let mut settings = test_settings(temp.path());
    settings.cognition.enabled = true;
    settings.cognition.schedule = "* * * * * *".into();
    settings.archival.schedule = "*/2 * * * * *".into();
    settings.archival.timezone = "Europe/Paris".into();
    let app = spawn_with(settings, Some(temp)).await;
    app.remember("cron", "something happened", json!({})).await;
    let fired = eventually(Duration::from_secs(15), || async {
        let all = runs(&app, "limit=100").await;
        let has = |prefix: &str| {
            all.iter()
                .any(|r| r["trigger"].as_str().unwrap_or("").starts_with(prefix))
        };
        has("schedule:sleep_cycle@") && has("schedule:archival@")
    })
    .await;
    assert!(
        fired,
        "both jobs fired: {:?}",
        runs(&app, "limit=100").await
    );
    app.stop().await;
}

/// A `mnemos serve` child process, killed on drop.
struct ServerProcess {
    child: Child,
    address: String,
    log: std::path::PathBuf,
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start_process(data_dir: &std::path::Path, database: &std::path::Path) -> ServerProcess {
    let port = free_port();
    std::fs::create_dir_all(data_dir).unwrap();
    let log = std::fs::File::create(data_dir.join("server.log")).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_mnemos"));
    // On PostgreSQL both processes share one schema (kept beside the shared database path).
    if let Some(shared) = database.parent() {
        command.envs(crate::helpers::backend_env(shared));
    }
    let child = command
        .arg("serve")
        .env("MNEMOS__DATA_DIR", data_dir)
        .env("MNEMOS__STORAGE__PATH", database)
        .env("MNEMOS__SERVER__BIND", format!("127.0.0.1:{port}"))
        .env("MNEMOS__COGNITION__ENABLED", "true")
        .env("MNEMOS__COGNITION__SCHEDULE", "* * * * * *")
        .env("MNEMOS__ARCHIVAL__SCHEDULE", "* * * * * *")
        .env("MNEMOS__ARCHIVAL__IDLE_HOURS", "0")
        .env("MNEMOS__LOG__LEVEL", "warn")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("mnemos binary starts");
    ServerProcess {
        child,
        address: format!("http://127.0.0.1:{port}"),
        log: data_dir.join("server.log"),
    }
}

/// Start a server process and wait until it answers. The free port it was given can
/// be taken by a parallel test before it binds; then it exits and is started again
/// on another port.
async fn start_ready_process(
    data_dir: &std::path::Path,
    database: &std::path::Path,
) -> ServerProcess {
    let client = reqwest::Client::new();
    let mut last_log = String::new();
    for _attempt in 0..3 {
        let mut server = start_process(data_dir, database);
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while std::time::Instant::now() < deadline {
            if server.child.try_wait().ok().flatten().is_some() {
                break;
            }
            let answered = client
                .get(format!("{}/health", server.address))
                .send()
                .await
                .is_ok();
            // Still running after answering: the answer was ours, not another test's server.
            if answered && server.child.try_wait().ok().flatten().is_none() {
                return server;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        last_log = std::fs::read_to_string(&server.log).unwrap_or_default();
    }
    panic!("a mnemos server process did not start; its last log:\n{last_log}");
}

#[tokio::test]
async fn two_server_processes_on_one_database_run_each_firing_once() {
    let temp = tempfile::tempdir().unwrap();
    let database = temp.path().join("shared.db");
    let a = start_ready_process(&temp.path().join("a"), &database).await;
    let b = start_ready_process(&temp.path().join("b"), &database).await;
    let client = reqwest::Client::new();
    for server in [&a, &b] {
        let up = eventually(Duration::from_secs(30), || async {
            client
                .get(format!("{}/health", server.address))
                .send()
                .await
                .is_ok()
        })
        .await;
        assert!(
            up,
            "server at {} started; its log: {}",
            server.address,
            std::fs::read_to_string(&server.log).unwrap_or_default()
        );
    }
    for text in COFFEE {
        let response = client
            .post(format!("{}/tools/remember", a.address))
            .json(&json!({ "agent_id": "shared-agent", "content": text, "session_id": "s1" }))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
    }
    // Let both processes race for several firings of both jobs.
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<Value>::new()));
    let enough = eventually(Duration::from_secs(20), || {
        let client = client.clone();
        let address = b.address.clone();
        let seen = seen.clone();
        async move {
            let body: Value = client
                .get(format!("{address}/v1/cognition/runs?limit=200"))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let all = body["runs"].as_array().cloned().unwrap_or_default();
            *seen.lock().unwrap() = all.clone();
            let scheduled = |job: &str| {
                all.iter()
                    .filter(|r| r["trigger"].as_str().unwrap_or("").starts_with(job))
                    .count()
            };
            scheduled("schedule:sleep_cycle@") >= 4 && scheduled("schedule:archival@") >= 4
        }
    })
    .await;
    let all = seen.lock().unwrap().clone();
    assert!(enough, "scheduled runs recorded: {all:?}");
    // Every firing (job and slot) ran exactly once, in one of the two processes.
    let mut per_firing: HashMap<String, usize> = HashMap::new();
    let mut holders = std::collections::HashSet::new();
    for run in &all {
        let trigger = run["trigger"].as_str().unwrap_or("");
        if let Some(rest) = trigger.strip_prefix("schedule:") {
            let (firing, holder) = rest.split_once(" by ").expect("trigger names its holder");
            // One sleep-cycle run per agent per firing; one agent here.
            *per_firing.entry(firing.to_string()).or_default() += 1;
            holders.insert(holder.to_string());
        }
    }
    assert!(
        per_firing.values().all(|&n| n == 1),
        "a firing ran twice: {per_firing:?}"
    );
    assert!(!holders.is_empty() && holders.len() <= 2, "{holders:?}");
    drop(a);
    drop(b);
}

async fn llm_app(url: &str, timeout_ms: u64, max_tokens: u32) -> TestApp {
    let temp = tempfile::tempdir().unwrap();
    let mut settings = test_settings(temp.path());
    lower_threshold(&mut settings);
    settings.inner_thought.provider = "openai".into();
    settings.inner_thought.base_url = url.to_string();
    settings.inner_thought.model = "smollm2".into();
    settings.inner_thought.timeout_ms = timeout_ms;
    settings.inner_thought.max_tokens = max_tokens;
    // These tests are about the sleep cycle's calls: the model names no entities here.
    settings.inner_thought.entities = false;
    spawn_with(settings, Some(temp)).await
}

#[tokio::test]
async fn the_openai_provider_abstracts_a_cluster_with_a_real_llm() {
    let Some(url) =
        crate::helpers::llm_url("the_openai_provider_abstracts_a_cluster_with_a_real_llm")
    else {
        return;
    };
    let app = llm_app(&url, 120_000, 200).await;
    let health = assert_status(app.get("/health").await, StatusCode::OK).await;
    assert_eq!(
        health["backends"]["inner_thought"]["provider"], "openai",
        "{health}"
    );
    // A 135M-parameter model sometimes loops until `max_tokens` and returns truncated
    // JSON; the run then falls back to the rules (and says why), which is correct
    // behaviour but not what this test is about: give the model three fresh clusters.
    let mut attempts = Vec::new();
    let run = loop {
        let agent = format!("llm-{}", attempts.len());
        seed(&app, &agent).await;
        let run = consolidate(&app, &agent).await;
        let cluster = &run["report"]["clusters"][0];
        if cluster["provider"] == "openai" {
            break run;
        }
        assert_eq!(cluster["provider"], "none", "{run}");
        assert!(
            cluster["fallback"].is_string(),
            "a fallback says why: {run}"
        );
        attempts.push(run);
        assert!(
            attempts.len() < 3,
            "the model never produced a usable abstraction: {attempts:?}"
        );
    };
    let cluster = &run["report"]["clusters"][0];
    assert!(cluster["fallback"].is_null(), "{run}");
    assert!(
        run["report"]["inner_thought"]["tokens"].as_u64().unwrap() > 0,
        "{run}"
    );
    let derived = assert_status(
        app.get(&format!(
            "/v1/memories/{}?agent_id={}",
            cluster["derived_id"].as_str().unwrap(),
            run["agent_id"].as_str().unwrap_or_default()
        ))
        .await,
        StatusCode::OK,
    )
    .await;
    assert!(!derived["content"].as_str().unwrap().trim().is_empty());
    assert!(matches!(
        derived["type"].as_str(),
        Some("semantic" | "procedural")
    ));
    assert_eq!(derived["metadata"]["inner_thought"], "openai");
    let metrics = app.get("/metrics").await.text().await.unwrap();
    assert!(
        metrics.contains("mnemos_llm_tokens_total"),
        "token usage is exported"
    );
    assert!(metrics.contains("outcome=\"ok\""), "{metrics}");
    app.stop().await;
}

#[tokio::test]
async fn the_openai_provider_falls_back_to_rules_on_timeout() {
    let Some(url) = crate::helpers::llm_url("the_openai_provider_falls_back_to_rules_on_timeout")
    else {
        return;
    };
    let app = llm_app(&url, 1, 200).await;
    seed(&app, "slow").await;
    let started = std::time::Instant::now();
    let run = consolidate(&app, "slow").await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the timeout is hard"
    );
    let cluster = &run["report"]["clusters"][0];
    assert_eq!(cluster["provider"], "none", "{run}");
    assert!(
        cluster["fallback"].as_str().unwrap().contains("timeout"),
        "{run}"
    );
    assert!(
        cluster["derived_id"].is_string(),
        "the rules still consolidated: {run}"
    );
    app.stop().await;
}

#[tokio::test]
async fn the_openai_provider_falls_back_to_rules_on_a_malformed_answer() {
    let Some(url) =
        crate::helpers::llm_url("the_openai_provider_falls_back_to_rules_on_a_malformed_answer")
    else {
        return;
    };
    // Three tokens cannot hold the required JSON object: the server's answer is cut short.
    let app = llm_app(&url, 120_000, 3).await;
    seed(&app, "terse").await;
    let run = consolidate(&app, "terse").await;
    let cluster = &run["report"]["clusters"][0];
    assert_eq!(cluster["provider"], "none", "{run}");
    assert!(
        cluster["fallback"].as_str().unwrap().contains("malformed"),
        "{run}"
    );
    assert!(cluster["derived_id"].is_string(), "{run}");
    let metrics = app.get("/metrics").await.text().await.unwrap();
    assert!(metrics.contains("outcome=\"malformed\""), "{metrics}");
    app.stop().await;
}

#[tokio::test]
async fn consolidate_rejects_bad_input_with_a_typed_error() {
    let app = spawn_app().await;
    let response = app.post("/tools/consolidate", &json!({})).await;
    let body = assert_status(response, StatusCode::BAD_REQUEST).await;
    assert_eq!(body["error"]["field"], "agent_id", "{body}");
    let response = app.get("/v1/cognition/runs?limit=0").await;
    let body = assert_status(response, StatusCode::BAD_REQUEST).await;
    assert_eq!(body["error"]["field"], "limit", "{body}");
    app.stop().await;
}

#[tokio::test]
async fn the_llm_arbiter_decides_routing_the_rules_are_unsure_about() {
    let Some(url) =
        crate::helpers::llm_url("the_llm_arbiter_decides_routing_the_rules_are_unsure_about")
    else {
        return;
    };
    let temp = tempfile::tempdir().unwrap();
    let mut settings = test_settings(temp.path());
    settings.inner_thought.provider = "openai".into();
    settings.inner_thought.base_url = url;
    settings.inner_thought.model = "smollm2".into();
    settings.inner_thought.timeout_ms = 120_000;
    settings.inner_thought.arbiter = true;
    settings.inner_thought.entities = false;
    let app = spawn_with(settings, Some(temp)).await;
    // No rule matches this text, so the rules are unsure and ask the model.
    let stored = app.remember("arbitrated", "blue lagoon", json!({})).await;
    let reason = stored["routing"]["reason"].as_str().unwrap();
    assert!(reason.starts_with("arbiter chose "), "{stored}");
    assert_eq!(
        reason
            .trim_start_matches("arbiter chose ")
            .split(' ')
            .next(),
        stored["memory"]["type"].as_str(),
        "{stored}"
    );
    // An explicit type never goes to the model.
    let explicit = app
        .remember("arbitrated", "green valley", json!({ "type": "semantic" }))
        .await;
    assert_eq!(
        explicit["routing"]["reason"],
        "explicit type given by the caller"
    );
    let metrics = app.get("/metrics").await.text().await.unwrap();
    assert!(metrics.contains("purpose=\"route\""), "{metrics}");
    app.stop().await;
}

#[tokio::test]
async fn build_context_counts_tokens_within_five_percent_of_a_real_tokenizer() {
    let Some(url) = crate::helpers::llm_url(
        "build_context_counts_tokens_within_five_percent_of_a_real_tokenizer",
    ) else {
        return;
    };
    let app = spawn_app().await;
    let lines = [
        "Caroline: I went to the LGBTQ support group yesterday and it was so powerful.",
        "Melanie: That's amazing! How did it feel to share your story with everyone?",
        "Caroline: Honestly, nerve-wracking at first, but the people there were incredibly kind.",
        "Melanie: I painted a sunrise over the lake last week; it's my favourite piece so far.",
        "Deploy staging: run `cargo build --release`, then restart mnemos on port 5433.",
        "The rate limit of the billing API is 1,000 requests per minute (burst: 50).",
        "Remind me to call the adoption agency on 2023-06-12 at 10:30.",
        "Caroline: I'm researching adoption agencies — it's been a long-time dream of mine!",
    ];
    for line in lines {
        app.remember("tokens", line, json!({})).await;
    }
    let body = assert_status(
        app.post(
            "/tools/build_context",
            &json!({ "agent_id": "tokens", "query": "Caroline support group adoption painting deploy", "context_budget": 2000 }),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    let context = body["context"].as_str().unwrap();
    let estimated = body["metadata"]["tokens_used"].as_u64().unwrap() as f64;
    assert_eq!(body["metadata"]["injected_count"], lines.len(), "{body}");
    let tokenize = format!(
        "{}/tokenize",
        url.trim_end_matches('/').trim_end_matches("/v1")
    );
    let real: Value = reqwest::Client::new()
        .post(tokenize)
        .json(&json!({ "content": context }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let real = real["tokens"].as_array().unwrap().len() as f64;
    let error = (estimated - real).abs() / real;
    assert!(
        error <= 0.05,
        "estimated {estimated} vs {real} real tokens ({:.1}%):\n{context}",
        error * 100.0
    );
    app.stop().await;
}

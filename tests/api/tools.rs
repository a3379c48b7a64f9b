//! The tool routes of the contract.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remember_then_recall_finds_the_memory_with_both_retrievers() {
    let app = spawn_app().await;
    let stored = app
        .remember(
            "alice",
            "The deploy script lives in ops/deploy.sh and needs AWS_PROFILE",
            json!({"tags": ["ops"], "importance": 0.8}),
        )
        .await;
    assert_eq!(stored["memory"]["agent_id"], "alice");
    assert_eq!(
        stored["memory"]["type"], "semantic",
        "routed by its definitional phrasing"
    );
    assert_eq!(stored["memory"]["status"], "active");
    assert_eq!(stored["memory"]["importance"], 0.8);
    assert_eq!(stored["routing"]["type"], "semantic");
    assert!(stored["routing"]["reason"]
        .as_str()
        .unwrap()
        .contains("lives in"));
    assert!(stored["deduplicated_into"].is_null());
    app.remember("alice", "Lunch was a bowl of ramen", json!({}))
        .await;

    let recalled = app
        .recall("alice", "where is the deploy script?", json!({}))
        .await;
    let results = recalled["results"].as_array().unwrap();
    assert_eq!(results[0]["memory"]["id"], stored["memory"]["id"]);
    let matched: Vec<&str> = results[0]["matched_by"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        matched.contains(&"keyword") && matched.contains(&"vector"),
        "{matched:?}"
    );
    assert!(results[0]["retention"].as_f64().unwrap() > 0.99);
    assert!(recalled["took_ms"].as_f64().unwrap() >= 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recall_filters_by_type_and_tag_and_reports_debug_scores() {
    let app = spawn_app().await;
    app.remember(
        "a",
        "Rust ownership rules prevent data races",
        json!({"type": "semantic", "tags": ["rust"]}),
    )
    .await;
    app.remember(
        "a",
        "Yesterday I fixed a Rust data race in the cache",
        json!({"type": "episodic", "tags": ["work"]}),
    )
    .await;
    let semantic = app
        .recall(
            "a",
            "rust data races",
            json!({"type": ["semantic"], "debug": true}),
        )
        .await;
    let results = semantic["results"].as_array().unwrap();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["memory"]["type"], "semantic");
    assert!(results[0]["components"].is_object());
    let tagged = app
        .recall("a", "rust data races", json!({"tags": ["work"]}))
        .await;
    assert_eq!(tagged["results"].as_array().unwrap().len(), 1);
    assert_eq!(tagged["results"][0]["memory"]["tags"][0], "work");
    let single_type = app
        .recall(
            "a",
            "rust data races",
            json!({"type": "episodic", "limit": 1}),
        )
        .await;
    assert_eq!(single_type["results"][0]["memory"]["type"], "episodic");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remember_batch_keeps_order_and_is_atomic_on_bad_input() {
    let app = spawn_app().await;
    let body = json!({"agent_id": "b", "memories": [
        {"content": "first", "session_id": "s1"},
        {"content": "second", "type": "procedural", "metadata": {"step": 2}},
        {"content": "third", "occurred_at": "2023-05-08T13:56:00Z"}
    ]});
    let response = assert_status(
        app.post("/tools/remember_batch", &body).await,
        StatusCode::CREATED,
    )
    .await;
    let results = response["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    assert_eq!(results[0]["memory"]["content"], "first");
    assert_eq!(results[0]["memory"]["session_id"], "s1");
    assert_eq!(results[1]["memory"]["type"], "procedural");
    assert_eq!(results[1]["memory"]["metadata"], json!({"step": 2}));
    assert_eq!(results[2]["memory"]["occurred_at"], "2023-05-08T13:56:00Z");

    let bad = json!({"agent_id": "b", "memories": [{"content": "ok"}, {"content": "bad", "importance": 7}]});
    assert_error(
        app.post("/tools/remember_batch", &bad).await,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("memories[1].importance"),
    )
    .await;
    let listed = assert_status(app.get("/v1/memories?agent_id=b").await, StatusCode::OK).await;
    assert_eq!(
        listed["memories"].as_array().unwrap().len(),
        3,
        "nothing of the rejected batch was stored"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_are_isolated_unless_memories_are_shared() {
    let app = spawn_app().await;
    let private = app
        .remember(
            "alice",
            "alice's secret launch codes for project falcon",
            json!({}),
        )
        .await;
    let shared = app
        .remember(
            "alice",
            "team wiki: project falcon launches in June",
            json!({"shared": true}),
        )
        .await;
    let id = private["memory"]["id"].as_str().unwrap();

    let bob = app.recall("bob", "project falcon launch", json!({})).await;
    let ids: Vec<&str> = bob["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["memory"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![shared["memory"]["id"].as_str().unwrap()]);
    let bob_private = app
        .recall(
            "bob",
            "project falcon launch",
            json!({"include_shared": false}),
        )
        .await;
    assert!(bob_private["results"].as_array().unwrap().is_empty());

    assert_error(
        app.get(&format!("/v1/memories/{id}?agent_id=bob")).await,
        StatusCode::NOT_FOUND,
        "not_found",
        None,
    )
    .await;
    assert_error(
        app.patch(
            &format!("/v1/memories/{id}?agent_id=bob"),
            &json!({"content": "mine"}),
        )
        .await,
        StatusCode::NOT_FOUND,
        "not_found",
        None,
    )
    .await;
    assert_error(
        app.delete(&format!("/v1/memories/{id}?agent_id=bob")).await,
        StatusCode::NOT_FOUND,
        "not_found",
        None,
    )
    .await;
    assert_error(
        app.post("/tools/forget", &json!({"agent_id": "bob", "id": id}))
            .await,
        StatusCode::NOT_FOUND,
        "not_found",
        None,
    )
    .await;
    assert_error(
        app.post(
            "/tools/memory_history",
            &json!({"agent_id": "bob", "id": id}),
        )
        .await,
        StatusCode::NOT_FOUND,
        "not_found",
        None,
    )
    .await;
    let listed = assert_status(app.get("/v1/memories?agent_id=bob").await, StatusCode::OK).await;
    assert!(listed["memories"].as_array().unwrap().is_empty());
    assert_status(
        app.get(&format!("/v1/memories/{id}?agent_id=alice")).await,
        StatusCode::OK,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forget_archives_without_deleting_and_supports_dry_runs() {
    let app = spawn_app().await;
    let a = app
        .remember("f", "the wifi password is hunter2", json!({}))
        .await;
    let b = app
        .remember("f", "the office wifi is slow on fridays", json!({}))
        .await;
    let id_a = a["memory"]["id"].as_str().unwrap();

    let dry = assert_status(
        app.post(
            "/tools/forget",
            &json!({"agent_id": "f", "query": "wifi password", "dry_run": true}),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert!(dry["dry_run"].as_bool().unwrap());
    assert!(dry["forgotten"]
        .as_array()
        .unwrap()
        .iter()
        .any(|v| v == id_a));
    assert_eq!(
        app.recall("f", "wifi", json!({})).await["results"]
            .as_array()
            .unwrap()
            .len(),
        2,
        "a dry run changes nothing"
    );

    let done = assert_status(
        app.post("/tools/forget", &json!({"agent_id": "f", "id": id_a}))
            .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(done["forgotten"], json!([id_a]));
    let after = app.recall("f", "wifi password", json!({})).await;
    let ids: Vec<&str> = after["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["memory"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![b["memory"]["id"].as_str().unwrap()]);
    let kept = assert_status(
        app.get(&format!("/v1/memories/{id_a}?agent_id=f")).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(kept["status"], "archived");
    let history = assert_status(
        app.get(&format!("/v1/memories/{id_a}/history?agent_id=f"))
            .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(history["versions"][0]["reason"], "forget");
    assert_eq!(history["versions"][0]["status"], "active");
    // Forgetting again is a no-op.
    let again = assert_status(
        app.post("/tools/forget", &json!({"agent_id": "f", "id": id_a}))
            .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(again["forgotten"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forget_by_query_needs_every_word_or_a_score_and_says_why() {
    let app = spawn_app().await;
    let port = app
        .remember("fq", "The staging DB runs on port 5433", json!({}))
        .await["memory"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let restart = app
        .remember(
            "fq",
            "How to restart staging: stop the pods, then start them again",
            json!({}),
        )
        .await["memory"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    app.remember("fq", "The production DB runs on port 5432", json!({}))
        .await;
    let forget = |body: Value| {
        let app = &app;
        async move { app.post("/tools/forget", &body).await }
    };

    // One shared keyword is not enough: only the memory holding both words matches.
    let dry = assert_status(
        forget(json!({"agent_id": "fq", "query": "staging port", "dry_run": true})).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(dry["forgotten"], json!([port]), "{dry}");
    assert_eq!(
        dry["matches"][0]["content"],
        "The staging DB runs on port 5433"
    );
    assert_eq!(
        dry["matches"][0]["why"],
        "contains every word of the query: staging, port"
    );
    assert!(dry["matches"][0]["score"].is_null());

    // By score: exactly the hits recall scores at or above the threshold, each saying so.
    let recalled = app.recall("fq", "restart staging", json!({})).await;
    let hits = recalled["results"].as_array().unwrap();
    let best = hits[0]["score"].as_f64().unwrap();
    assert_eq!(hits[0]["memory"]["id"], restart.as_str(), "{recalled}");
    let expected: Vec<&Value> = hits
        .iter()
        .filter(|h| h["score"].as_f64().unwrap() >= best)
        .map(|h| &h["memory"]["id"])
        .collect();
    let scored = assert_status(
        forget(json!({"agent_id": "fq", "query": "restart staging", "min_score": best, "dry_run": true}))
            .await,
        StatusCode::OK,
    )
    .await;
    let ids: Vec<&Value> = scored["forgotten"].as_array().unwrap().iter().collect();
    assert_eq!(ids, expected, "{scored}");
    let why = scored["matches"][0]["why"].as_str().unwrap();
    assert!(
        why.starts_with("recall score ") && why.contains("≥ min_score"),
        "{why}"
    );
    assert!((scored["matches"][0]["score"].as_f64().unwrap() - best).abs() < 1e-3);

    // The real thing archives what the dry run showed, and only that.
    let done = assert_status(
        forget(json!({"agent_id": "fq", "query": "staging port"})).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(done["forgotten"], json!([port]));
    let kept = app
        .get(&format!("/v1/memories/{restart}?agent_id=fq"))
        .await;
    assert_eq!(
        assert_status(kept, StatusCode::OK).await["status"],
        "active"
    );
    let again = assert_status(
        forget(json!({"agent_id": "fq", "query": "staging port"})).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(
        again["forgotten"],
        json!([]),
        "archived memories match no more"
    );

    // Refusals name the field.
    for (body, field) in [
        (json!({"agent_id": "fq", "query": "the of and"}), "query"),
        (
            json!({"agent_id": "fq", "id": restart, "min_score": 0.5}),
            "min_score",
        ),
        (
            json!({"agent_id": "fq", "query": "staging", "min_score": 1.5}),
            "min_score",
        ),
    ] {
        let refused = assert_status(forget(body).await, StatusCode::BAD_REQUEST).await;
        assert_eq!(refused["error"]["field"], field, "{refused}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn associations_drive_spreading_activation() {
    let app = spawn_app().await;
    let mut ids = Vec::new();
    for content in ["coffee", "morning routine", "alarm clock", "unrelated note"] {
        ids.push(
            app.remember("g", content, json!({})).await["memory"]["id"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    let edge = assert_status(
        app.post("/tools/associate", &json!({"agent_id": "g", "from_id": ids[0], "to_id": ids[1], "relation": "part_of", "weight": 0.9})).await,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(edge["relation"], "part_of");
    assert_eq!(edge["weight"], 0.9);
    assert_status(
        app.post(
            "/tools/associate",
            &json!({"agent_id": "g", "from_id": ids[1], "to_id": ids[2]}),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;

    let spread = assert_status(
        app.post(
            "/tools/spreading_activation",
            &json!({"agent_id": "g", "seed_id": ids[0]}),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    let results = spread["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["memory"]["id"], ids[1].as_str());
    assert_eq!(results[1]["memory"]["id"], ids[2].as_str());
    assert!(
        results[0]["activation"].as_f64().unwrap() > results[1]["activation"].as_f64().unwrap()
    );
    assert_eq!(results[1]["path"], json!([ids[0], ids[1], ids[2]]));
    let shallow = assert_status(
        app.post(
            "/tools/spreading_activation",
            &json!({"agent_id": "g", "seed_id": ids[0], "depth": 1}),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(shallow["results"].as_array().unwrap().len(), 1);

    let other = app.remember("h", "someone else's memory", json!({})).await;
    let other_id = other["memory"]["id"].as_str().unwrap();
    assert_error(
        app.post(
            "/tools/associate",
            &json!({"agent_id": "g", "from_id": ids[0], "to_id": other_id}),
        )
        .await,
        StatusCode::NOT_FOUND,
        "not_found",
        Some("to_id"),
    )
    .await;
    assert_error(
        app.post(
            "/tools/associate",
            &json!({"agent_id": "g", "from_id": ids[0], "to_id": ids[0]}),
        )
        .await,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("to_id"),
    )
    .await;
    assert_error(
        app.post(
            "/tools/associate",
            &json!({"agent_id": "g", "from_id": ids[0], "to_id": ids[3], "weight": 1.5}),
        )
        .await,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("weight"),
    )
    .await;
    assert_error(
        app.post(
            "/tools/spreading_activation",
            &json!({"agent_id": "g", "seed_id": ids[0], "depth": 9}),
        )
        .await,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("depth"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflect_and_consolidate_report_on_the_agent() {
    let app = spawn_app().await;
    app.remember("r", "one", json!({"tags": ["x", "y"]})).await;
    app.remember("r", "two", json!({"tags": ["x"], "type": "semantic"}))
        .await;
    let stats = assert_status(
        app.post("/tools/reflect", &json!({"agent_id": "r"})).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(stats["total"], 2);
    assert_eq!(stats["by_type"]["episodic"], 1);
    assert_eq!(stats["by_type"]["semantic"], 1);
    assert_eq!(stats["by_status"]["active"], 2);
    assert_eq!(stats["top_tags"][0], json!({"tag": "x", "count": 2}));
    assert!(stats["mean_retention"].as_f64().unwrap() > 0.99);

    let run = assert_status(
        app.post("/tools/consolidate", &json!({"agent_id": "r"}))
            .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(run["agent_id"], "r");
    assert_eq!(run["trigger"], "api");
    assert_eq!(run["processed"], 1, "one episodic candidate");
    assert_eq!(run["forgotten"], 0, "fresh memories are never forgotten");
    let runs = assert_status(
        app.get("/v1/cognition/runs?agent_id=r").await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(runs["runs"][0]["id"], run["id"]);
    let none = assert_status(
        app.get("/v1/cognition/runs?agent_id=nobody").await,
        StatusCode::OK,
    )
    .await;
    assert!(none["runs"].as_array().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn time_queries_restrict_recall_to_the_range_relative_to_now() {
    let app = spawn_app().await;
    let may = app
        .remember(
            "t",
            "We discussed the pricing page redesign",
            json!({"occurred_at": "2023-05-08T13:56:00Z"}),
        )
        .await;
    let june = app
        .remember(
            "t",
            "We discussed the pricing experiment results",
            json!({"occurred_at": "2023-06-20T09:00:00Z"}),
        )
        .await;
    let in_may = app
        .recall("t", "pricing", json!({"time_query": "in May 2023"}))
        .await;
    let results = in_may["results"].as_array().unwrap();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["memory"]["id"], may["memory"]["id"]);
    assert!(results[0]["matched_by"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m == "time"));

    // Relative forms resolve against the request's `now` (replayed histories work).
    let last_week = app
        .recall(
            "t",
            "what did we talk about",
            json!({"time_query": "last week", "now": "2023-06-26T10:00:00Z"}),
        )
        .await;
    let results = last_week["results"].as_array().unwrap();
    assert_eq!(
        results.len(),
        1,
        "found by time alone, with no shared words"
    );
    assert_eq!(results[0]["memory"]["id"], june["memory"]["id"]);
    let empty = app
        .recall(
            "t",
            "pricing",
            json!({"time_query": "yesterday", "now": "2024-01-01T00:00:00Z"}),
        )
        .await;
    assert!(empty["results"].as_array().unwrap().is_empty());
    let both = app
        .recall(
            "t",
            "pricing",
            json!({"time_query": "between 2023-05-01 and 2023-06-30"}),
        )
        .await;
    assert_eq!(both["results"].as_array().unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn untyped_memories_are_routed_by_rules_and_an_explicit_type_wins() {
    let app = spawn_app().await;
    let cases = [
        ("Current task: migrate the billing tables", "working"),
        (
            "1. install rust\n2. run cargo build\n3. start the server",
            "procedural",
        ),
        ("Yesterday we shipped the new search page", "episodic"),
        ("Paris is the capital of France", "semantic"),
    ];
    for (content, expected) in cases {
        let stored = app.remember("route", content, json!({})).await;
        assert_eq!(stored["memory"]["type"], expected, "{content}");
        assert!(!stored["routing"]["reason"].as_str().unwrap().is_empty());
    }
    let affective = app
        .remember(
            "route",
            "I am so happy and excited about the launch",
            json!({}),
        )
        .await;
    assert_eq!(affective["memory"]["type"], "affective");
    assert!(affective["memory"]["valence"].as_f64().unwrap() > 0.5);
    assert!(affective["memory"]["arousal"].as_f64().unwrap() > 0.5);
    let explicit = app
        .remember(
            "route",
            "Paris is the capital of France, noted on a trip",
            json!({"type": "episodic"}),
        )
        .await;
    assert_eq!(explicit["memory"]["type"], "episodic");
    assert_eq!(
        explicit["routing"]["reason"],
        "explicit type given by the caller"
    );
    // An explicit affective type still gets its feeling from the words; a given one wins.
    let typed = app
        .remember(
            "route",
            "I wasn't happy with how the review went",
            json!({"type": "affective"}),
        )
        .await;
    assert!(
        typed["memory"]["valence"].as_f64().unwrap() < 0.0,
        "{typed}"
    );
    assert!(typed["memory"]["arousal"].as_f64().is_some());
    let given = app
        .remember(
            "route",
            "I am glad the migration is over",
            json!({"type": "affective", "valence": -0.2}),
        )
        .await;
    assert!((given["memory"]["valence"].as_f64().unwrap() + 0.2).abs() < 1e-6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_and_near_duplicates_return_the_existing_memory_and_reinforce_it() {
    let app = spawn_app().await;
    let first = app
        .remember(
            "dup",
            "The staging database listens on port 5433",
            json!({"type": "semantic"}),
        )
        .await;
    let id = first["memory"]["id"].as_str().unwrap();
    let exact = app
        .remember(
            "dup",
            "the staging database listens on port 5433.",
            json!({"type": "semantic"}),
        )
        .await;
    assert_eq!(exact["deduplicated_into"], id);
    assert_eq!(exact["memory"]["id"], id);
    assert_eq!(
        exact["memory"]["access_count"], 1,
        "a duplicate counts as an access"
    );
    let near = app
        .remember(
            "dup",
            "The staging database listens on port 5433 now",
            json!({"type": "semantic"}),
        )
        .await;
    assert_eq!(
        near["deduplicated_into"], id,
        "a near-duplicate (cosine ≥ dedup.threshold) of the same type"
    );
    let near_other_type = app
        .remember(
            "dup",
            "The staging database listens on port 5433 now",
            json!({"type": "episodic"}),
        )
        .await;
    assert!(
        near_other_type["deduplicated_into"].is_null(),
        "near-duplicates must share the type"
    );
    // Another agent, or another type for a near-duplicate, is a new memory.
    let other_agent = app
        .remember(
            "dup2",
            "The staging database listens on port 5433",
            json!({}),
        )
        .await;
    assert!(other_agent["deduplicated_into"].is_null());
    let batch = assert_status(
        app.post(
            "/tools/remember_batch",
            &json!({"agent_id": "dup", "memories": [
                {"content": "Deploys happen on Tuesdays", "type": "semantic"},
                {"content": "deploys happen on tuesdays", "type": "semantic"},
                {"content": "The staging database listens on port 5433", "type": "semantic"}
            ]}),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    let results = batch["results"].as_array().unwrap();
    assert!(results[0]["deduplicated_into"].is_null());
    assert_eq!(results[1]["deduplicated_into"], results[0]["memory"]["id"]);
    assert_eq!(results[2]["deduplicated_into"], id);
    // Two identical items that near-duplicate a stored memory both land on it.
    let chained = assert_status(
        app.post(
            "/tools/remember_batch",
            &json!({"agent_id": "dup", "memories": [
                {"content": "Now the staging database listens on port 5433", "type": "semantic"},
                {"content": "now the staging database listens on port 5433", "type": "semantic"}
            ]}),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(chained["results"][0]["deduplicated_into"], id);
    assert_eq!(chained["results"][1]["deduplicated_into"], id);
    let listed = assert_status(app.get("/v1/memories?agent_id=dup").await, StatusCode::OK).await;
    assert_eq!(
        listed["memories"].as_array().unwrap().len(),
        3,
        "no duplicate was stored"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contradicting_fact_supersedes_the_old_one_which_keeps_its_history() {
    let app = spawn_app().await;
    let paris = app
        .remember("c", "I live in Paris", json!({"type": "semantic"}))
        .await;
    let paris_id = paris["memory"]["id"].as_str().unwrap();
    app.remember(
        "c",
        "I love pastries from Paris",
        json!({"type": "semantic"}),
    )
    .await;
    let tokyo = app
        .remember("c", "I live in Tokyo", json!({"type": "semantic"}))
        .await;
    assert_eq!(tokyo["superseded"], json!([paris_id]));
    let old = assert_status(
        app.get(&format!("/v1/memories/{paris_id}?agent_id=c"))
            .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(old["status"], "superseded");
    let history = assert_status(
        app.get(&format!("/v1/memories/{paris_id}/history?agent_id=c"))
            .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(history["versions"][0]["reason"], "conflict_replace");
    assert_eq!(history["versions"][0]["content"], "I live in Paris");
    let recalled = app.recall("c", "where do I live", json!({})).await;
    let ids: Vec<&str> = recalled["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["memory"]["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&tokyo["memory"]["id"].as_str().unwrap()));
    assert!(
        !ids.contains(&paris_id),
        "superseded memories are left out of recall"
    );

    let limit = app
        .remember(
            "c",
            "The API rate limit is 1000 req/min",
            json!({"type": "semantic"}),
        )
        .await;
    let lowered = app
        .remember(
            "c",
            "The API rate limit is 500 req/min",
            json!({"type": "semantic"}),
        )
        .await;
    assert_eq!(lowered["superseded"], json!([limit["memory"]["id"]]));
    // Episodic memories are experiences, not facts: they never supersede each other.
    app.remember(
        "c",
        "I lived in Berlin in 2019",
        json!({"type": "episodic"}),
    )
    .await;
    let later = app
        .remember(
            "c",
            "I lived in Madrid in 2019",
            json!({"type": "episodic"}),
        )
        .await;
    assert_eq!(later["superseded"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn facts_stated_without_a_type_are_kept_consistent() {
    let app = spawn_app().await;
    // Routed as knowledge by the rules, so the change of city supersedes.
    let paris = app.remember("u", "I live in Paris", json!({})).await;
    assert_eq!(paris["memory"]["type"], "semantic", "{paris}");
    let tokyo = app.remember("u", "I live in Tokyo", json!({})).await;
    assert_eq!(tokyo["superseded"], json!([paris["memory"]["id"]]));
    // A negation barely moves the vector: it must supersede, not deduplicate into the old fact.
    let bottleneck = app
        .remember("u", "The billing service is the bottleneck", json!({}))
        .await;
    let negated = app
        .remember("u", "The billing service is not the bottleneck", json!({}))
        .await;
    assert!(negated["deduplicated_into"].is_null(), "{negated}");
    assert_eq!(negated["superseded"], json!([bottleneck["memory"]["id"]]));
    // A different subject is a second fact, not a replacement.
    let alice = app.remember("u", "Alice lives in Berlin", json!({})).await;
    let bob = app.remember("u", "Bob lives in Berlin", json!({})).await;
    assert_eq!(bob["superseded"], json!([]), "{bob}");
    let old = assert_status(
        app.get(&format!(
            "/v1/memories/{}?agent_id=u",
            alice["memory"]["id"].as_str().unwrap()
        ))
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(old["status"], "active");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn build_context_fits_the_budget_puts_procedures_first_and_drops_stale_sources() {
    let project = tempfile::tempdir().unwrap();
    let temp = tempfile::tempdir().unwrap();
    let mut settings = test_settings(temp.path());
    settings.server.project_roots = vec![project.path().to_path_buf()];
    let app = spawn_with(settings, Some(temp)).await;
    std::fs::write(project.path().join("deploy.md"), "run ./deploy.sh").unwrap();
    std::fs::write(project.path().join("old.md"), "version one").unwrap();
    let fresh_hash = mnemos::context::sha256_hex(b"run ./deploy.sh");
    let old_hash = mnemos::context::sha256_hex(b"version one");
    app.remember(
        "ctx",
        "Deploy with ./deploy.sh after the tests pass",
        json!({"type": "procedural", "source": {"path": "deploy.md", "hash": fresh_hash}}),
    )
    .await;
    app.remember(
        "ctx",
        "The deploy target is the eu-west cluster",
        json!({"type": "semantic", "source": {"path": "old.md", "hash": old_hash}}),
    )
    .await;
    app.remember(
        "ctx",
        "Last deploy failed because of a missing secret",
        json!({"type": "episodic", "occurred_at": "2023-05-08T13:56:00Z"}),
    )
    .await;
    std::fs::write(project.path().join("old.md"), "version two").unwrap();

    let root = project.path().to_str().unwrap();
    let built = assert_status(
        app.post("/tools/build_context", &json!({"agent_id": "ctx", "query": "how do we deploy", "context_budget": 500, "project_root": root})).await,
        StatusCode::OK,
    )
    .await;
    let context = built["context"].as_str().unwrap();
    assert!(
        context.starts_with("## Procedures and constraints"),
        "{context}"
    );
    assert!(context.contains("./deploy.sh"));
    assert!(context.contains("[2023-05-08]"));
    assert!(
        !context.contains("eu-west"),
        "a memory whose source changed is left out"
    );
    assert_eq!(built["metadata"]["stale_files"], json!(["old.md"]));
    assert_eq!(built["metadata"]["injected_count"], 2);
    assert!(built["metadata"]["tokens_used"].as_u64().unwrap() <= 500);

    for budget in [1, 10, 25, 40] {
        let small = assert_status(
            app.post(
                "/tools/build_context",
                &json!({"agent_id": "ctx", "query": "deploy", "context_budget": budget}),
            )
            .await,
            StatusCode::OK,
        )
        .await;
        assert!(
            small["metadata"]["tokens_used"].as_u64().unwrap() <= budget,
            "budget {budget}: {small}"
        );
    }
    assert_error(
        app.post(
            "/tools/build_context",
            &json!({"agent_id": "ctx", "query": "x", "context_budget": 0}),
        )
        .await,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("context_budget"),
    )
    .await;
    assert_error(
        app.post(
            "/tools/build_context",
            &json!({"agent_id": "ctx", "query": "x", "project_root": project.path().join("no-such-dir")}),
        )
        .await,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("project_root"),
    )
    .await;
    // A server with no project_roots reads no files at all.
    let closed = spawn_app().await;
    assert_error(
        closed
            .post(
                "/tools/build_context",
                &json!({"agent_id": "ctx", "query": "x", "project_root": root}),
            )
            .await,
        StatusCode::FORBIDDEN,
        "permission_denied",
        Some("project_root"),
    )
    .await;
    closed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_on_one_database_store_the_same_text_once() {
    // Two runtimes with their own pools, locks and indexes, sharing one system of
    // record (a SQLite file, or one PostgreSQL schema): what two processes see.
    let temp = tempfile::tempdir().unwrap();
    let mut first = test_settings(&temp.path().join("a"));
    let mut second = test_settings(&temp.path().join("b"));
    if on_postgres() {
        second.storage.url = first.storage.url.clone();
        second.graph = first.graph.clone();
    } else {
        let database = temp.path().join("shared.db");
        first.storage.path = database.to_string_lossy().into_owned();
        second.storage.path = first.storage.path.clone();
    }
    let a = spawn_with(first, None).await;
    let b = spawn_with(second, None).await;
    let rounds = 12;
    for round in 0..rounds {
        let text = format!("The staging password rotates every {round} days");
        let (from_a, from_b) = tokio::join!(
            a.remember("twins", &text, json!({"type": "semantic"})),
            b.remember("twins", &text, json!({"type": "semantic"}))
        );
        assert_eq!(
            from_a["memory"]["id"], from_b["memory"]["id"],
            "round {round}: both writes answer with one memory: {from_a} {from_b}"
        );
        let merged = [&from_a, &from_b]
            .iter()
            .filter(|answer| !answer["deduplicated_into"].is_null())
            .count();
        assert_eq!(
            merged, 1,
            "round {round}: one write stored it, the other was merged: {from_a} {from_b}"
        );
    }
    let listed = assert_status(
        a.get("/v1/memories?agent_id=twins&limit=100").await,
        StatusCode::OK,
    )
    .await;
    let stored = listed["memories"].as_array().unwrap();
    assert_eq!(stored.len(), rounds, "{listed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn project_root_must_lie_in_the_configured_trees() {
    let temp = tempfile::tempdir().unwrap();
    let allowed = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let project = allowed.path().join("repo");
    std::fs::create_dir(&project).unwrap();
    std::fs::write(outside.path().join("secret.txt"), "top secret").unwrap();
    // A link inside the allowed tree that leads out of it.
    std::os::unix::fs::symlink(outside.path(), allowed.path().join("escape")).unwrap();
    let mut settings = test_settings(temp.path());
    settings.server.project_roots = vec![allowed.path().to_path_buf()];
    let app = spawn_with(settings, Some(temp)).await;
    app.remember(
        "roots",
        "The deploy script is ./deploy.sh",
        json!({"type": "procedural"}),
    )
    .await;

    let inside = assert_status(
        app.post(
            "/tools/build_context",
            &json!({"agent_id": "roots", "query": "deploy", "project_root": project}),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(inside["metadata"]["injected_count"], 1, "{inside}");
    // The allowed tree itself, named through its child.
    assert_status(
        app.post(
            "/tools/build_context",
            &json!({"agent_id": "roots", "query": "deploy", "project_root": project.join("..")}),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    for refused in [
        outside.path().to_path_buf(),
        allowed.path().join("escape"),
        project.join("../.."),
        // Refused whether or not it exists: the answer must not tell.
        outside.path().join("missing"),
    ] {
        let body = assert_error(
            app.post(
                "/tools/build_context",
                &json!({"agent_id": "roots", "query": "deploy", "project_root": refused}),
            )
            .await,
            StatusCode::FORBIDDEN,
            "permission_denied",
            Some("project_root"),
        )
        .await;
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("server.project_roots"),
            "{body}"
        );
    }
    // A missing directory is still a bad value, wherever it would be.
    assert_error(
        app.post(
            "/tools/build_context",
            &json!({"agent_id": "roots", "query": "deploy", "project_root": project.join("missing")}),
        )
        .await,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("project_root"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_time_expression_inside_the_query_ranks_that_period_first_without_filtering() {
    let app = spawn_app().await;
    let old = app
        .remember(
            "q",
            "We discussed the database migration plan",
            json!({"occurred_at": "2023-04-03T10:00:00Z"}),
        )
        .await;
    let recent = app
        .remember(
            "q",
            "We discussed the database migration rollback",
            json!({"occurred_at": "2023-06-20T10:00:00Z"}),
        )
        .await;
    let found = app
        .recall(
            "q",
            "what did we discuss about the database migration last week",
            json!({"now": "2023-06-26T09:00:00Z"}),
        )
        .await;
    let results = found["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "a hint, not a filter");
    assert_eq!(results[0]["memory"]["id"], recent["memory"]["id"]);
    assert!(results[0]["matched_by"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m == "time"));
    assert_eq!(results[1]["memory"]["id"], old["memory"]["id"]);
    let april = app
        .recall("q", "database migration in April 2023", json!({}))
        .await;
    assert_eq!(april["results"][0]["memory"]["id"], old["memory"]["id"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recall_brings_associated_memories_and_session_neighbours_of_strong_hits() {
    let app = spawn_app().await;
    let hit = app
        .remember(
            "n",
            "The Falcon project kickoff is on Monday",
            json!({"type": "episodic"}),
        )
        .await;
    let linked = app
        .remember(
            "n",
            "Budget approval came from Dana",
            json!({"type": "episodic"}),
        )
        .await;
    assert_status(
        app.post("/tools/associate", &json!({"agent_id": "n", "from_id": hit["memory"]["id"], "to_id": linked["memory"]["id"], "weight": 0.9})).await,
        StatusCode::CREATED,
    )
    .await;
    let before = app
        .remember(
            "n",
            "Welcome everyone, let's start",
            json!({"session_id": "standup", "type": "episodic"}),
        )
        .await;
    let turn = app
        .remember(
            "n",
            "Ravens migrate north in spring",
            json!({"session_id": "standup", "type": "episodic"}),
        )
        .await;
    let after = app
        .remember(
            "n",
            "Sounds good to me",
            json!({"session_id": "standup", "type": "episodic"}),
        )
        .await;

    let found = app
        .recall("n", "falcon project kickoff", json!({"limit": 5}))
        .await;
    let results = found["results"].as_array().unwrap();
    let linked_hit = results
        .iter()
        .find(|r| r["memory"]["id"] == linked["memory"]["id"])
        .expect("the associated memory is recalled");
    assert!(
        linked_hit["matched_by"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m == "graph"),
        "{linked_hit}"
    );

    for n in 0..15 {
        app.remember(
            "n",
            &format!("Quarterly meeting notes about budget item {n}"),
            json!({"type": "episodic"}),
        )
        .await;
    }
    let found = app
        .recall("n", "ravens migrate north", json!({"limit": 3}))
        .await;
    let ids: Vec<&serde_json::Value> = found["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["memory"]["id"])
        .collect();
    assert_eq!(ids[0], &turn["memory"]["id"]);
    assert!(
        ids.contains(&&before["memory"]["id"]) && ids.contains(&&after["memory"]["id"]),
        "neighbouring turns of the session come along"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recall_draws_on_the_sessions_working_memory() {
    let app = spawn_app().await;
    app.remember(
        "w",
        "current task: migrate the billing tables to Postgres",
        json!({"session_id": "focus"}),
    )
    .await;
    app.remember(
        "w",
        "the billing tables hold invoices since 2019",
        json!({}),
    )
    .await;
    // In the session, its working memory is one of the retrievers.
    let in_session = app
        .recall(
            "w",
            "billing tables",
            json!({"session_id": "focus", "debug": true}),
        )
        .await;
    let task = in_session["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| {
            r["memory"]["content"]
                .as_str()
                .unwrap()
                .starts_with("current task")
        })
        .expect("the session's task is recalled");
    assert!(
        task["matched_by"]
            .as_array()
            .unwrap()
            .contains(&json!("working")),
        "{in_session}"
    );
    // Outside the session it is not.
    let elsewhere = app.recall("w", "billing tables", json!({})).await;
    assert!(elsewhere["results"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| !r["matched_by"]
            .as_array()
            .unwrap()
            .contains(&json!("working"))));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recall_matches_other_forms_of_a_word() {
    let app = spawn_app().await;
    let camped = app
        .remember(
            "a",
            "We camped by the lake with the kids",
            json!({"type": "episodic"}),
        )
        .await;
    app.remember(
        "a",
        "The quarterly budget review is on Friday",
        json!({"type": "episodic"}),
    )
    .await;
    let recalled = app
        .recall("a", "camping trips", json!({"debug": true}))
        .await;
    let first = &recalled["results"][0];
    assert_eq!(first["memory"]["id"], camped["memory"]["id"], "{recalled}");
    assert!(
        first["matched_by"]
            .as_array()
            .unwrap()
            .contains(&json!("keyword")),
        "'camping' finds 'camped' through their common stem: {first}"
    );
}

/// A memory attributed to the person the question names scores `1 + speaker_boost`
/// times what it scores without the boost (before the compression onto 0..1, shown as
/// the `ranked` debug component); others are untouched. Attribution is a
/// transcript label ("Bob: …") or `metadata.speaker`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recall_favours_what_the_named_speaker_said() {
    let contents = [
        (
            "Alice: the move to Lisbon went smoothly and the flat is great",
            json!({}),
        ),
        (
            "Bob: my move to Porto was chaotic, boxes everywhere",
            json!({}),
        ),
        (
            "Moving day again next spring, the lease ends",
            json!({"metadata": {"speaker": "Bob"}}),
        ),
    ];
    let mut scores: Vec<Vec<f64>> = Vec::new();
    for boost in [0.0, 0.5] {
        let temp = tempfile::tempdir().unwrap();
        let mut settings = test_settings(temp.path());
        settings.recall.speaker_boost = boost;
        // Nothing else may move the scores between the two runs (the topic step has
        // its own test in the runtime).
        settings.recall.neighbour_weight = 0.0;
        settings.recall.topic_without_speakers = false;
        let app = spawn_with(settings, Some(temp)).await;
        let mut ids = Vec::new();
        for (content, extra) in &contents {
            let mut extra = extra.clone();
            extra["type"] = json!("episodic");
            let stored = app.remember("a", content, extra).await;
            ids.push(stored["memory"]["id"].clone());
        }
        let recalled = app
            .recall(
                "a",
                "How did Bob's move go?",
                json!({"limit": 10, "debug": true}),
            )
            .await;
        let results = recalled["results"].as_array().unwrap();
        // The re-ranked score before it is compressed onto 0..1 for callers.
        let score_of = |id: &serde_json::Value| {
            results
                .iter()
                .find(|r| r["memory"]["id"] == *id)
                .unwrap_or_else(|| panic!("{id} recalled: {recalled}"))["components"]["ranked"]
                .as_f64()
                .unwrap_or_else(|| panic!("ranked component of {id}: {recalled}"))
        };
        scores.push(ids.iter().map(score_of).collect());
        if boost > 0.0 {
            assert_eq!(results[0]["memory"]["id"], ids[1], "{recalled}");
        }
    }
    let ratio = |i: usize| scores[1][i] / scores[0][i];
    assert!((ratio(0) - 1.0).abs() < 1e-6, "{scores:?}");
    assert!((ratio(1) - 1.5).abs() < 1e-6, "{scores:?}");
    assert!((ratio(2) - 1.5).abs() < 1e-6, "{scores:?}");
}

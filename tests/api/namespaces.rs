//! Projects (isolation of memories between an agent's projects), KV namespaces (LRU,
//! sharing between nodes, tags, search, stats, durability, concurrency) and a scope
//! edge case of the shared pool.

use std::time::Duration;

use reqwest::{Response, StatusCode};
use serde_json::{json, Value};

use crate::helpers::*;

async fn put(app: &TestApp, path: &str, body: &Value) -> Response {
    app.client
        .put(format!("{}{path}", app.address))
        .json(body)
        .send()
        .await
        .expect("request sent")
}

async fn project(app: &TestApp, agent: &str, id: &str, isolated: bool) -> Value {
    assert_status(
        put(
            app,
            &format!("/v1/projects/{id}"),
            &json!({"agent_id": agent, "isolated": isolated}),
        )
        .await,
        StatusCode::OK,
    )
    .await
}

fn ids(body: &Value) -> Vec<String> {
    body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["memory"]["id"].as_str().unwrap().to_string())
        .collect()
}

/// Ids reached by spreading activation from `seed` (alice's).
async fn spread(app: &TestApp, seed: &str) -> Vec<String> {
    let body = assert_status(
        app.post(
            "/tools/spreading_activation",
            &json!({"agent_id": "alice", "seed_id": seed}),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["memory"]["id"].as_str().unwrap().to_string())
        .collect()
}

fn id(body: &Value) -> String {
    body["memory"]["id"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn isolated_project_memories_never_leave_their_project_and_open_ones_are_seen_everywhere() {
    let app = spawn_app().await;
    let created = project(&app, "alice", "secret", true).await;
    assert_eq!(created["isolated"], true);
    assert_eq!(created["name"], "secret");
    project(&app, "alice", "open", false).await;
    project(&app, "alice", "other", false).await;
    let secret = id(&app
        .remember(
            "alice",
            "Falcon launch codename is bluebird",
            json!({"project_id": "secret", "shared": true}),
        )
        .await);
    let open = id(&app
        .remember(
            "alice",
            "Falcon launch checklist lives in the wiki",
            json!({"project_id": "open"}),
        )
        .await);
    let loose = id(&app
        .remember("alice", "Falcon launch party is on Friday", json!({}))
        .await);

    // No project, and another project: the isolated project's memory is invisible.
    for extra in [
        json!({}),
        json!({"project_id": "other"}),
        json!({"project_id": "open"}),
    ] {
        let found = ids(&app.recall("alice", "falcon launch", extra.clone()).await);
        assert!(!found.contains(&secret), "{extra}: {found:?}");
        assert!(
            found.contains(&open) && found.contains(&loose),
            "{extra}: {found:?}"
        );
    }
    // Inside the isolated project: its memory is visible and ranks first; the rest stays visible.
    let inside = ids(&app
        .recall("alice", "falcon launch", json!({"project_id": "secret"}))
        .await);
    assert_eq!(inside.first(), Some(&secret), "{inside:?}");
    assert!(inside.contains(&open) && inside.contains(&loose));
    // The request's own (open) project is boosted: against the same memory outside any
    // project, its re-ranked score grows by the project boost (1.1), whatever the embedder.
    let ranked = |body: &Value, id: &str| -> f64 {
        body["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["memory"]["id"] == id)
            .and_then(|r| r["components"]["ranked"].as_f64())
            .unwrap_or_else(|| panic!("{id} missing from {body}"))
    };
    let plain = app
        .recall("alice", "falcon launch", json!({"debug": true}))
        .await;
    let focused = app
        .recall(
            "alice",
            "falcon launch",
            json!({"project_id": "open", "debug": true}),
        )
        .await;
    let boost = (ranked(&focused, &open) / ranked(&focused, &loose))
        / (ranked(&plain, &open) / ranked(&plain, &loose));
    assert!(
        (boost - 1.1).abs() < 1e-6,
        "project boost {boost}: {plain} {focused}"
    );
    // Shared, but isolated: other agents never see it either.
    let bob = ids(&app.recall("bob", "falcon launch codename", json!({})).await);
    assert!(!bob.contains(&secret), "{bob:?}");
    // build_context follows the same rule.
    let context = assert_status(
        app.post(
            "/tools/build_context",
            &json!({"agent_id": "alice", "query": "falcon launch codename"}),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert!(!context["context"].as_str().unwrap().contains("bluebird"));
    let context = assert_status(
        app.post(
            "/tools/build_context",
            &json!({"agent_id": "alice", "query": "falcon launch codename", "project_id": "secret"}),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert!(context["context"].as_str().unwrap().contains("bluebird"));

    // Spreading activation does not carry the isolated memory out of its project either.
    assert_status(
        app.post(
            "/tools/associate",
            &json!({"agent_id": "alice", "from_id": open, "to_id": secret}),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    let from_open = spread(&app, &open).await;
    assert!(!from_open.contains(&secret), "{from_open:?}");
    let from_secret = spread(&app, &secret).await;
    assert!(from_secret.contains(&open), "{from_secret:?}");

    // Lifting isolation applies at once to the memories already there.
    let changed = project(&app, "alice", "secret", false).await;
    assert_eq!(changed["created_at"], created["created_at"]);
    let found = ids(&app
        .recall("alice", "falcon launch codename", json!({}))
        .await);
    assert!(found.contains(&secret), "{found:?}");
    let bob = ids(&app.recall("bob", "falcon launch codename", json!({})).await);
    assert!(
        bob.contains(&secret),
        "shared and no longer isolated: {bob:?}"
    );
    let from_open = spread(&app, &open).await;
    assert!(from_open.contains(&secret), "{from_open:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_attached_to_a_project_put_their_memories_in_it() {
    let app = spawn_app().await;
    project(&app, "alice", "p1", true).await;
    project(&app, "alice", "p2", false).await;
    let attached = assert_status(
        put(
            &app,
            "/v1/projects/p1/sessions/s1",
            &json!({"agent_id": "alice"}),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(attached["sessions"], json!(["s1"]));
    let memory = app
        .remember(
            "alice",
            "We chose Postgres for the ledger",
            json!({"session_id": "s1"}),
        )
        .await;
    assert_eq!(memory["memory"]["project_id"], "p1");
    // A session belongs to one project.
    assert_error(
        app.post(
            "/tools/remember",
            &json!({"agent_id": "alice", "content": "x y z", "session_id": "s1", "project_id": "p2"}),
        )
        .await,
        StatusCode::CONFLICT,
        "conflict",
        Some("session_id"),
    )
    .await;
    assert_error(
        put(
            &app,
            "/v1/projects/p2/sessions/s1",
            &json!({"agent_id": "alice"}),
        )
        .await,
        StatusCode::CONFLICT,
        "conflict",
        Some("session_id"),
    )
    .await;
    // remember with a project and a new session attaches the session.
    let batch = assert_status(
        app.post(
            "/tools/remember_batch",
            &json!({"agent_id": "alice", "memories": [
                {"content": "The ledger uses double entry", "session_id": "s2", "project_id": "p2"},
                {"content": "Reconciliation runs nightly", "session_id": "s2"}
            ]}),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(batch["results"][0]["memory"]["project_id"], "p2");
    assert_eq!(batch["results"][1]["memory"]["project_id"], "p2");
    let p2 = assert_status(
        app.get("/v1/projects/p2?agent_id=alice").await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(p2["sessions"], json!(["s2"]));
    let listed = assert_status(app.get("/v1/projects?agent_id=alice").await, StatusCode::OK).await;
    let names: Vec<&str> = listed["projects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["project_id"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["p1", "p2"]);
    // Projects are per agent: bob has none, and cannot see alice's.
    let bobs = assert_status(app.get("/v1/projects?agent_id=bob").await, StatusCode::OK).await;
    assert_eq!(bobs["projects"], json!([]));
    assert_error(
        app.get("/v1/projects/p1?agent_id=bob").await,
        StatusCode::NOT_FOUND,
        "not_found",
        Some("project_id"),
    )
    .await;
    // The same content in two projects is two memories (no deduplication across projects).
    let a = id(&app
        .remember(
            "alice",
            "Deploys happen on Tuesdays",
            json!({"project_id": "p1"}),
        )
        .await);
    let b = app
        .remember(
            "alice",
            "Deploys happen on Tuesdays",
            json!({"project_id": "p2"}),
        )
        .await;
    assert_ne!(a, id(&b));
    assert!(b["deduplicated_into"].is_null());
    // Browsing by project.
    let in_p2 = assert_status(
        app.get("/v1/memories?agent_id=alice&project_id=p2").await,
        StatusCode::OK,
    )
    .await;
    let projects: Vec<&str> = in_p2["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["project_id"].as_str().unwrap())
        .collect();
    assert_eq!(projects, vec!["p2", "p2", "p2"]);
    assert_error(
        app.get("/v1/memories?agent_id=alice&project_id=b%20d")
            .await,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("project_id"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn project_requests_are_validated_with_the_contract_errors() {
    let app = spawn_app().await;
    assert_error(
        put(&app, "/v1/projects/bad%20id", &json!({"agent_id": "alice"})).await,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("project_id"),
    )
    .await;
    assert_error(
        put(&app, "/v1/projects/p", &json!({"isolated": true})).await,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("agent_id"),
    )
    .await;
    assert_error(
        put(
            &app,
            "/v1/projects/p",
            &json!({"agent_id": "alice", "name": " "}),
        )
        .await,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("name"),
    )
    .await;
    assert_error(
        put(
            &app,
            "/v1/projects/p",
            &json!({"agent_id": "alice", "isolated": "yes"}),
        )
        .await,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("isolated"),
    )
    .await;
    assert_error(
        app.get("/v1/projects").await,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("agent_id"),
    )
    .await;
    assert_error(
        app.post(
            "/tools/remember",
            &json!({"agent_id": "alice", "content": "hello there", "project_id": "nope"}),
        )
        .await,
        StatusCode::NOT_FOUND,
        "not_found",
        Some("project_id"),
    )
    .await;
    assert_error(
        app.post(
            "/tools/recall",
            &json!({"agent_id": "alice", "query": "hello", "project_id": "nope"}),
        )
        .await,
        StatusCode::NOT_FOUND,
        "not_found",
        Some("project_id"),
    )
    .await;
    assert_error(
        app.post(
            "/tools/recall",
            &json!({"agent_id": "alice", "query": "hello", "project_id": "bad id"}),
        )
        .await,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("project_id"),
    )
    .await;
    project(&app, "alice", "p", false).await;
    assert_error(
        app.post(
            "/tools/remember_batch",
            &json!({"agent_id": "alice", "memories": [
                {"content": "one", "project_id": "p"},
                {"content": "two", "project_id": "missing"}
            ]}),
        )
        .await,
        StatusCode::NOT_FOUND,
        "not_found",
        Some("memories[1].project_id"),
    )
    .await;
    assert_error(
        app.post(
            "/tools/remember_batch",
            &json!({"agent_id": "alice", "memories": [{"content": "one", "project_id": "b d"}]}),
        )
        .await,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("memories[0].project_id"),
    )
    .await;
    assert_error(
        put(
            &app,
            "/v1/projects/missing/sessions/s",
            &json!({"agent_id": "alice"}),
        )
        .await,
        StatusCode::NOT_FOUND,
        "not_found",
        Some("project_id"),
    )
    .await;
    // The failed batch wrote nothing.
    let listed = assert_status(app.get("/v1/memories?agent_id=alice").await, StatusCode::OK).await;
    assert_eq!(listed["memories"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_unshared_by_patch_leaves_other_agents_recall_at_once() {
    let app = spawn_app().await;
    let shared = id(&app
        .remember(
            "alice",
            "Team rota: Kim is on call this week",
            json!({"shared": true}),
        )
        .await);
    let bob = ids(&app.recall("bob", "who is on call", json!({})).await);
    assert_eq!(bob, vec![shared.clone()]);
    assert_status(
        app.patch(
            &format!("/v1/memories/{shared}?agent_id=alice"),
            &json!({"shared": false}),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    let bob = ids(&app.recall("bob", "who is on call", json!({})).await);
    assert!(bob.is_empty(), "{bob:?}");
    // Another agent cannot re-share it either.
    assert_error(
        app.patch(
            &format!("/v1/memories/{shared}?agent_id=bob"),
            &json!({"shared": true}),
        )
        .await,
        StatusCode::NOT_FOUND,
        "not_found",
        None,
    )
    .await;
}

async fn kv_put(
    app: &TestApp,
    ns: &str,
    agent: &str,
    key: &str,
    value: Value,
    extra: Value,
) -> Value {
    let mut body = json!({"agent_id": agent, "value": value});
    if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        body.extend(extra.clone());
    }
    let response = put(app, &format!("/v1/namespaces/{ns}/entries/{key}"), &body).await;
    let status = response.status();
    assert!(
        status == StatusCode::CREATED || status == StatusCode::OK,
        "put {key}: {status}"
    );
    response.json().await.unwrap()
}

async fn stats(app: &TestApp, ns: &str) -> Value {
    assert_status(
        app.get(&format!("/v1/namespaces/{ns}/stats")).await,
        StatusCode::OK,
    )
    .await
}

fn keys(body: &Value) -> Vec<String> {
    body["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["key"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kv_namespace_evicts_the_least_recently_used_entry() {
    let app = spawn_app().await;
    let configured = assert_status(
        put(&app, "/v1/namespaces/plan", &json!({"max_entries": 3})).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(configured["stats"]["max_entries"], 3);
    for key in ["a", "b", "c"] {
        let written = kv_put(&app, "plan", "node-1", key, json!({"step": key}), json!({})).await;
        assert_eq!(written["created"], true);
        assert_eq!(written["evicted"], json!([]));
    }
    // Reading "a" makes "b" the least recently used.
    let a = assert_status(
        app.get("/v1/namespaces/plan/entries/a").await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(a["value"], json!({"step": "a"}));
    let written = kv_put(&app, "plan", "node-1", "d", json!(4), json!({})).await;
    assert_eq!(written["evicted"], json!(["b"]));
    assert_error(
        app.get("/v1/namespaces/plan/entries/b").await,
        StatusCode::NOT_FOUND,
        "not_found",
        Some("key"),
    )
    .await;
    // Overwriting "c" is a use: "a" is now the oldest.
    let written = kv_put(&app, "plan", "node-1", "c", json!("c2"), json!({})).await;
    assert_eq!(
        (written["created"].clone(), written["evicted"].clone()),
        (json!(false), json!([]))
    );
    let written = kv_put(&app, "plan", "node-1", "e", json!(5), json!({})).await;
    assert_eq!(written["evicted"], json!(["a"]));
    let listed = assert_status(app.get("/v1/namespaces/plan/entries").await, StatusCode::OK).await;
    assert_eq!(keys(&listed), vec!["e", "c", "d"]);
    let s = stats(&app, "plan").await;
    assert_eq!(s["entries"], 3);
    assert_eq!(s["max_entries"], 3);
    assert_eq!(s["hits"], 1);
    assert_eq!(s["misses"], 1);
    assert_eq!(s["evictions"], 2);
    assert_eq!(s["puts"], 6);
    // Shrinking the bound evicts at once, least recently used first.
    let shrunk = assert_status(
        put(&app, "/v1/namespaces/plan", &json!({"max_entries": 1})).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(shrunk["evicted"], json!(["d", "c"]));
    assert_eq!(shrunk["stats"]["entries"], 1);
    // Delete.
    assert_status(
        app.delete("/v1/namespaces/plan/entries/e").await,
        StatusCode::OK,
    )
    .await;
    assert_error(
        app.delete("/v1/namespaces/plan/entries/e").await,
        StatusCode::NOT_FOUND,
        "not_found",
        Some("key"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kv_namespace_is_shared_by_every_node_that_names_it() {
    let app = spawn_app().await;
    // The first put creates the namespace with namespaces.default_max_entries.
    let first = kv_put(
        &app,
        "crew",
        "planner",
        "task:1",
        json!({"owner": null}),
        json!({}),
    )
    .await;
    assert_eq!(first["entry"]["written_by"], "planner");
    assert_eq!(stats(&app, "crew").await["max_entries"], 1000);
    let seen = assert_status(
        app.get("/v1/namespaces/crew/entries/task:1").await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(seen["value"], json!({"owner": null}));
    let claimed = kv_put(
        &app,
        "crew",
        "worker-7",
        "task:1",
        json!({"owner": "worker-7"}),
        json!({}),
    )
    .await;
    assert_eq!(claimed["created"], false);
    assert_eq!(claimed["entry"]["written_by"], "worker-7");
    assert_eq!(claimed["entry"]["created_at"], first["entry"]["created_at"]);
    let seen = assert_status(
        app.get("/v1/namespaces/crew/entries/task:1").await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(seen["value"], json!({"owner": "worker-7"}));
    // The routes are in the OpenAPI document.
    let openapi = assert_status(app.get("/openapi.json").await, StatusCode::OK).await;
    for path in [
        "/v1/projects",
        "/v1/projects/{project_id}",
        "/v1/projects/{project_id}/sessions/{session_id}",
        "/v1/namespaces/{namespace}",
        "/v1/namespaces/{namespace}/stats",
        "/v1/namespaces/{namespace}/entries",
        "/v1/namespaces/{namespace}/entries/{key}",
        "/v1/namespaces/{namespace}/search",
    ] {
        assert!(openapi["paths"][path].is_object(), "openapi lacks {path}");
    }
    // Another namespace is another store.
    assert_error(
        app.get("/v1/namespaces/crew2/entries/task:1").await,
        StatusCode::NOT_FOUND,
        "not_found",
        Some("namespace"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kv_entries_are_listed_by_tag_and_found_by_search() {
    let app = spawn_app().await;
    kv_put(
        &app,
        "ops",
        "n1",
        "deploy-plan",
        json!({"steps": "build, test, ship"}),
        json!({"tags": ["plan"]}),
    )
    .await;
    kv_put(
        &app,
        "ops",
        "n2",
        "incident-42",
        json!({"summary": "deploy failed on the canary"}),
        json!({"tags": ["incident", "open"]}),
    )
    .await;
    kv_put(
        &app,
        "ops",
        "n1",
        "rota",
        json!(["kim", "lee"]),
        json!({"tags": ["open"]}),
    )
    .await;
    let open = assert_status(
        app.get("/v1/namespaces/ops/entries?tag=open").await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(keys(&open), vec!["rota", "incident-42"]);
    let limited = assert_status(
        app.get("/v1/namespaces/ops/entries?tag=open&limit=1").await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(keys(&limited), vec!["rota"]);
    let none = assert_status(
        app.get("/v1/namespaces/ops/entries?tag=nothing").await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(keys(&none), Vec::<String>::new());

    let found = assert_status(
        app.post("/v1/namespaces/ops/search", &json!({"query": "deploy"}))
            .await,
        StatusCode::OK,
    )
    .await;
    let hits: Vec<&str> = found["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["entry"]["key"].as_str().unwrap())
        .collect();
    assert_eq!(
        hits,
        vec!["deploy-plan", "incident-42"],
        "key matches rank first"
    );
    assert!(
        found["results"][0]["score"].as_f64().unwrap()
            > found["results"][1]["score"].as_f64().unwrap()
    );
    let found = assert_status(
        app.post("/v1/namespaces/ops/search", &json!({"query": "kim"}))
            .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(found["results"][0]["entry"]["key"], "rota");
    // Listing and searching are not uses: the counters did not move.
    let s = stats(&app, "ops").await;
    assert_eq!(
        (s["hits"].clone(), s["misses"].clone(), s["puts"].clone()),
        (json!(0), json!(0), json!(3))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kv_requests_are_validated_with_the_contract_errors() {
    let app = spawn_app().await;
    let cases: Vec<(Response, StatusCode, &str)> = vec![
        (
            put(
                &app,
                "/v1/namespaces/bad%20name/entries/k",
                &json!({"agent_id": "a", "value": 1}),
            )
            .await,
            StatusCode::BAD_REQUEST,
            "namespace",
        ),
        (
            put(
                &app,
                "/v1/namespaces/ns/entries/k",
                &json!({"agent_id": "a"}),
            )
            .await,
            StatusCode::BAD_REQUEST,
            "value",
        ),
        (
            put(&app, "/v1/namespaces/ns/entries/k", &json!({"value": 1})).await,
            StatusCode::BAD_REQUEST,
            "agent_id",
        ),
        (
            put(
                &app,
                "/v1/namespaces/ns/entries/k",
                &json!({"agent_id": "a", "value": "x".repeat(70_000)}),
            )
            .await,
            StatusCode::PAYLOAD_TOO_LARGE,
            "value",
        ),
        (
            put(
                &app,
                "/v1/namespaces/ns/entries/k",
                &json!({"agent_id": "a", "value": 1, "ttl_seconds": 0}),
            )
            .await,
            StatusCode::BAD_REQUEST,
            "ttl_seconds",
        ),
        (
            put(
                &app,
                "/v1/namespaces/ns/entries/k",
                &json!({"agent_id": "a", "value": 1, "ttl_seconds": -1}),
            )
            .await,
            StatusCode::BAD_REQUEST,
            "ttl_seconds",
        ),
        (
            put(
                &app,
                &format!("/v1/namespaces/ns/entries/{}", "k".repeat(600)),
                &json!({"agent_id": "a", "value": 1}),
            )
            .await,
            StatusCode::BAD_REQUEST,
            "key",
        ),
        (
            put(&app, "/v1/namespaces/ns", &json!({"max_entries": 0})).await,
            StatusCode::BAD_REQUEST,
            "max_entries",
        ),
        (
            put(&app, "/v1/namespaces/ns", &json!({})).await,
            StatusCode::BAD_REQUEST,
            "max_entries",
        ),
        (
            app.get("/v1/namespaces/ns/stats").await,
            StatusCode::NOT_FOUND,
            "namespace",
        ),
        (
            app.post("/v1/namespaces/ns/search", &json!({"query": "x"}))
                .await,
            StatusCode::NOT_FOUND,
            "namespace",
        ),
    ];
    for (response, status, field) in cases {
        let code = match status {
            StatusCode::NOT_FOUND => "not_found",
            StatusCode::PAYLOAD_TOO_LARGE => "payload_too_large",
            _ => "invalid_argument",
        };
        assert_error(response, status, code, Some(field)).await;
    }
    kv_put(&app, "ns", "a", "k", json!(1), json!({})).await;
    assert_error(
        app.post("/v1/namespaces/ns/search", &json!({"query": " "}))
            .await,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("query"),
    )
    .await;
    assert_error(
        app.get("/v1/namespaces/ns/entries?limit=0").await,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("limit"),
    )
    .await;
    assert_error(
        app.get("/v1/namespaces/ns/entries?limit=x").await,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        None,
    )
    .await;
    // Nothing invalid was stored.
    assert_eq!(stats(&app, "ns").await["entries"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kv_entries_their_use_order_and_counters_survive_a_restart() {
    let temp = tempfile::tempdir().unwrap();
    let app = spawn_with(test_settings(temp.path()), None).await;
    assert_status(
        put(&app, "/v1/namespaces/durable", &json!({"max_entries": 3})).await,
        StatusCode::OK,
    )
    .await;
    for key in ["a", "b", "c"] {
        kv_put(
            &app,
            "durable",
            "n1",
            key,
            json!({"k": key}),
            json!({"tags": ["t"]}),
        )
        .await;
    }
    assert_status(
        app.get("/v1/namespaces/durable/entries/a").await,
        StatusCode::OK,
    )
    .await;
    // Projects survive too.
    project(&app, "alice", "vault", true).await;
    app.remember(
        "alice",
        "The vault combination is 1234",
        json!({"project_id": "vault"}),
    )
    .await;
    app.stop().await;

    let app = spawn_with(test_settings(temp.path()), None).await;
    let s = stats(&app, "durable").await;
    assert_eq!(
        (
            s["entries"].clone(),
            s["max_entries"].clone(),
            s["hits"].clone(),
            s["puts"].clone()
        ),
        (json!(3), json!(3), json!(1), json!(3))
    );
    // "b" is still the least recently used after the restart.
    let written = kv_put(&app, "durable", "n2", "d", json!(4), json!({})).await;
    assert_eq!(written["evicted"], json!(["b"]));
    let entry = assert_status(
        app.get("/v1/namespaces/durable/entries/c").await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(entry["value"], json!({"k": "c"}));
    assert_eq!(entry["tags"], json!(["t"]));
    let outside = ids(&app.recall("alice", "vault combination", json!({})).await);
    assert!(outside.is_empty(), "{outside:?}");
    let inside = ids(&app
        .recall("alice", "vault combination", json!({"project_id": "vault"}))
        .await);
    assert_eq!(inside.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_puts_from_many_nodes_never_exceed_max_entries_or_lose_a_write() {
    let app = std::sync::Arc::new(spawn_app().await);
    assert_status(
        put(&app, "/v1/namespaces/race", &json!({"max_entries": 10})).await,
        StatusCode::OK,
    )
    .await;
    let nodes = 6;
    let per_node = 30;
    let mut tasks = Vec::new();
    for node in 0..nodes {
        let app = app.clone();
        tasks.push(tokio::spawn(async move {
            let mut evicted = Vec::new();
            for i in 0..per_node {
                let key = format!("n{node}-k{i}");
                let body = kv_put(
                    &app,
                    "race",
                    &format!("node-{node}"),
                    &key,
                    json!(i),
                    json!({}),
                )
                .await;
                for e in body["evicted"].as_array().unwrap() {
                    evicted.push(e.as_str().unwrap().to_string());
                }
            }
            evicted
        }));
    }
    // While the writers run, the namespace never holds more than its bound.
    let watcher = {
        let app = app.clone();
        tokio::spawn(async move {
            let mut peak = 0;
            for _ in 0..50 {
                let s = stats(&app, "race").await;
                peak = peak.max(s["entries"].as_u64().unwrap());
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            peak
        })
    };
    let mut evicted: Vec<String> = Vec::new();
    for task in tasks {
        evicted.extend(task.await.unwrap());
    }
    assert!(watcher.await.unwrap() <= 10);
    let total = nodes * per_node;
    let s = stats(&app, "race").await;
    assert_eq!(s["entries"], 10);
    assert_eq!(s["puts"], total);
    assert_eq!(s["evictions"], total - 10);
    // Every write is accounted for: evicted exactly once, or still there.
    let listed = assert_status(
        app.get("/v1/namespaces/race/entries?limit=200").await,
        StatusCode::OK,
    )
    .await;
    let mut all: Vec<String> = evicted.clone();
    all.extend(keys(&listed));
    all.sort();
    let before = all.len();
    all.dedup();
    assert_eq!(before, all.len(), "no key evicted twice");
    assert_eq!(all.len(), total);
    // Each node writes in order, so what survives of a node is its latest writes.
    let survivors = keys(&listed);
    for node in 0..nodes {
        let mut kept: Vec<usize> = survivors
            .iter()
            .filter_map(|k| k.strip_prefix(&format!("n{node}-k")))
            .map(|i| i.parse().unwrap())
            .collect();
        kept.sort();
        if let Some(first) = kept.first() {
            assert_eq!(kept, (*first..per_node).collect::<Vec<_>>(), "node {node}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kv_puts_keep_working_while_the_namespaces_actor_restarts() {
    let app = spawn_app().await;
    assert_status(
        put(&app, "/v1/namespaces/sturdy", &json!({"max_entries": 100})).await,
        StatusCode::OK,
    )
    .await;
    for i in 0..40 {
        if i % 10 == 5 {
            assert_status(
                app.post("/v1/admin/actors/namespaces/fail", &json!({}))
                    .await,
                StatusCode::ACCEPTED,
            )
            .await;
        }
        kv_put(&app, "sturdy", "n1", &format!("k{i}"), json!(i), json!({})).await;
    }
    let restarted = eventually(Duration::from_secs(10), || async {
        let health = assert_status(app.get("/health").await, StatusCode::OK).await;
        health["actors"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["name"] == "namespaces" && a["restarts"].as_u64() >= Some(1))
            && health["status"] == "ok"
    })
    .await;
    assert!(restarted, "the namespaces actor was restarted");
    let s = stats(&app, "sturdy").await;
    assert_eq!(
        (s["entries"].clone(), s["puts"].clone()),
        (json!(40), json!(40))
    );
    assert_eq!(
        assert_status(app.get("/health").await, StatusCode::OK).await["backends"]["namespaces"]
            ["backend"],
        if crate::helpers::on_postgres() {
            "postgres"
        } else {
            "sqlite"
        }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_in_an_isolated_project_keeps_its_archive_and_extractions_in_the_project() {
    let app = spawn_app().await;
    project(&app, "alice", "vault", true).await;
    assert_status(
        put(
            &app,
            "/v1/projects/vault/sessions/chat",
            &json!({"agent_id": "alice"}),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    for (role, content) in [
        (
            "user",
            "I prefer the vault combination written as 4-8-15-16.",
        ),
        (
            "assistant",
            "Noted: the vault combination format is 4-8-15-16.",
        ),
    ] {
        assert_status(
            app.post(
                "/v1/sessions/chat/messages",
                &json!({"agent_id": "alice", "role": role, "content": content}),
            )
            .await,
            StatusCode::CREATED,
        )
        .await;
    }
    let report = assert_status(
        app.post("/v1/sessions/chat/compact", &json!({"agent_id": "alice"}))
            .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(report["compacted"], true, "{report}");
    // The archive (and whatever the background extraction stored) is in the project.
    let archived = eventually(Duration::from_secs(10), || async {
        let listed = assert_status(
            app.get("/v1/memories?agent_id=alice&tag=archive_summary")
                .await,
            StatusCode::OK,
        )
        .await;
        !listed["memories"].as_array().unwrap().is_empty()
    })
    .await;
    assert!(archived, "the compaction stored an archive memory");
    let all = assert_status(app.get("/v1/memories?agent_id=alice").await, StatusCode::OK).await;
    for memory in all["memories"].as_array().unwrap() {
        assert_eq!(memory["project_id"], "vault", "{memory}");
    }
    let outside = ids(&app.recall("alice", "vault combination", json!({})).await);
    assert!(outside.is_empty(), "{outside:?}");
    let inside = ids(&app
        .recall("alice", "vault combination", json!({"project_id": "vault"}))
        .await);
    assert!(!inside.is_empty());
}

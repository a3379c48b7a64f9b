//! Entities: who and what an agent's memories name, kept from the outbox in the system
//! of record's database and read over `GET /v1/entities` and `GET /v1/entities/{id}`.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::*;

/// The agent's entities by name, once every one of `names` is there.
async fn entities_named(app: &TestApp, agent: &str, names: &[&str]) -> Vec<Value> {
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let listed = app.entities(agent, "").await["entities"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if names
            .iter()
            .all(|name| listed.iter().any(|e| e["name"] == *name))
        {
            return listed;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "entities {names:?} never appeared: {listed:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn named<'a>(entities: &'a [Value], name: &str) -> &'a Value {
    entities.iter().find(|e| e["name"] == name).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memories_name_entities_that_follow_forgetting_and_erasure() {
    let app = spawn_app().await;
    let pottery = app
        .remember(
            "ent",
            "Melanie went to the pottery class with Caroline.",
            json!({}),
        )
        .await["memory"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    app.remember("ent", "Caroline moved to Lisbon in June 2024.", json!({}))
        .await;
    app.remember(
        "ent",
        "Ping @dana_k about src/main.rs before v2.1.0 ships.",
        json!({}),
    )
    .await;
    app.remember("other", "Melanie runs the Berlin office.", json!({}))
        .await;
    let listed = entities_named(
        &app,
        "ent",
        &[
            "Melanie",
            "Caroline",
            "Lisbon",
            "June 2024",
            "@dana_k",
            "src/main.rs",
            "v2.1.0",
        ],
    )
    .await;
    let kinds: Vec<(&str, &str)> = listed
        .iter()
        .map(|e| (e["name"].as_str().unwrap(), e["kind"].as_str().unwrap()))
        .collect();
    for expected in [
        ("Caroline", "person"),
        ("Lisbon", "place"),
        ("June 2024", "date"),
        ("@dana_k", "handle"),
        ("src/main.rs", "path"),
        ("v2.1.0", "version"),
    ] {
        assert!(kinds.contains(&expected), "{expected:?} in {kinds:?}");
    }
    let caroline = named(&listed, "Caroline");
    assert_eq!(caroline["mentions"], 2);

    // One entity: the memories naming it (with the span) and what is named beside it.
    let id = caroline["id"].as_str().unwrap();
    let detail = app.entity("ent", id).await;
    let memories = detail["memories"].as_array().unwrap();
    assert_eq!(memories.len(), 2, "{detail}");
    for mention in memories {
        let content = mention["memory"]["content"].as_str().unwrap();
        let (start, end) = (
            mention["start"].as_u64().unwrap() as usize,
            mention["end"].as_u64().unwrap() as usize,
        );
        assert_eq!(&content[start..end], "Caroline");
    }
    let related: Vec<&str> = detail["related"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["entity"]["name"].as_str().unwrap())
        .collect();
    assert!(
        related.contains(&"Melanie") && related.contains(&"Lisbon"),
        "{related:?}"
    );

    // Search, kind and pages.
    let searched = app.entities("ent", "q=lis").await;
    assert_eq!(searched["entities"][0]["name"], "Lisbon", "{searched}");
    assert_eq!(searched["entities"].as_array().unwrap().len(), 1);
    let places = app.entities("ent", "kind=place").await;
    assert_eq!(places["entities"].as_array().unwrap().len(), 1);
    let mut seen = Vec::new();
    let mut cursor = String::new();
    loop {
        let page = app.entities("ent", &format!("limit=2{cursor}")).await;
        seen.extend(
            page["entities"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["id"].clone()),
        );
        match page["next_cursor"].as_str() {
            Some(next) => cursor = format!("&cursor={next}"),
            None => break,
        }
    }
    assert_eq!(seen.len(), listed.len(), "pages cover the list once");

    // Another agent's Melanie is another entity, and this agent's ids are not its own.
    let other = entities_named(&app, "other", &["Melanie"]).await;
    assert_ne!(
        named(&other, "Melanie")["id"],
        named(&listed, "Melanie")["id"]
    );
    assert_error(
        app.get(&format!("/v1/entities/{id}?agent_id=other")).await,
        StatusCode::NOT_FOUND,
        "not_found",
        Some("id"),
    )
    .await;

    // Refusals name the field.
    for (query, field) in [
        ("kind=planet", "kind"),
        ("limit=0", "limit"),
        ("cursor=zz", "cursor"),
        ("colour=red", "colour"),
    ] {
        assert_error(
            app.get(&format!("/v1/entities?agent_id=ent&{query}")).await,
            StatusCode::BAD_REQUEST,
            "invalid_argument",
            Some(field),
        )
        .await;
    }

    // Forgetting the pottery memory takes Melanie away from this agent (nothing else names her).
    assert_status(
        app.post("/tools/forget", &json!({"agent_id": "ent", "id": pottery}))
            .await,
        StatusCode::OK,
    )
    .await;
    let gone = eventually(Duration::from_secs(15), || async {
        let listed = app.entities("ent", "").await;
        !listed["entities"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "Melanie")
    })
    .await;
    assert!(gone, "a forgotten memory still names Melanie");
    assert_eq!(app.entity("ent", id).await["entity"]["mentions"], 1);

    // Erasing the agent erases its entities; the other agent keeps its own.
    let erased = assert_status(app.delete("/v1/agents/ent").await, StatusCode::OK).await;
    assert!(
        erased["system_of_record"]["entities"].as_u64().unwrap() >= 5,
        "{erased}"
    );
    assert_eq!(app.entities("ent", "").await["entities"], json!([]));
    assert_eq!(
        app.entities("other", "").await["entities"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_entity_index_is_rebuilt_from_the_memories_with_the_same_ids() {
    let temp = tempfile::tempdir().unwrap();
    let settings = test_settings(temp.path());
    let app = spawn_with(settings.clone(), None).await;
    app.remember(
        "re",
        "Omar grew up in Cairo and studied in London.",
        json!({}),
    )
    .await;
    let before = entities_named(&app, "re", &["Omar", "Cairo", "London"]).await;
    app.stop().await;
    // `mnemos reindex --projection entities` empties the index and rebuilds it from
    // the memories: the same entities come back with the same ids.
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_mnemos"))
        .args(["--json", "reindex", "--projection", "entities"])
        .env("MNEMOS__DATA_DIR", temp.path())
        .env("MNEMOS__COGNITION__ENABLED", "false")
        .envs(backend_env(temp.path()))
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report[0]["projection"], "entities", "{report}");
    let app = spawn_with(settings, Some(temp)).await;
    let after = entities_named(&app, "re", &["Omar", "Cairo", "London"]).await;
    assert_eq!(before, after);
}

/// `(value, valid_from, valid_to)` of each fact of a `GET /v1/facts` answer.
fn windows(facts: &Value) -> Vec<(String, String, Option<String>)> {
    facts["facts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["value"].as_str().unwrap().to_string(),
                f["valid_from"].as_str().unwrap().to_string(),
                f["valid_to"].as_str().map(str::to_string),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn facts_keep_their_validity_windows_and_answer_as_of_a_time() {
    let app = spawn_app().await;
    let at = |day: &str| json!({ "occurred_at": format!("{day}T09:00:00Z") });
    app.remember("facts", "Alice lives in Lisbon.", at("2023-01-10"))
        .await;
    app.remember("facts", "Alice works at Acme Corp.", at("2023-01-12"))
        .await;
    let porto = app
        .remember("facts", "Alice moved to Porto.", at("2023-06-01"))
        .await["memory"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    app.remember("facts", "Bob joined Acme Corp.", at("2023-02-01"))
        .await;
    app.remember("other", "Alice lives in Madrid.", at("2023-01-01"))
        .await;
    let ready = eventually(Duration::from_secs(15), || async {
        app.facts("facts", "subject=alice&attribute=lives_in").await["facts"]
            .as_array()
            .is_some_and(|f| f.len() == 2)
    })
    .await;
    assert!(ready, "{}", app.facts("facts", "").await);

    // The later value closes the earlier one; both stay.
    let lived = app.facts("facts", "subject=Alice&attribute=lives_in").await;
    assert_eq!(
        windows(&lived),
        [
            (
                "Lisbon".to_string(),
                "2023-01-10T09:00:00Z".to_string(),
                Some("2023-06-01T09:00:00Z".to_string())
            ),
            (
                "Porto".to_string(),
                "2023-06-01T09:00:00Z".to_string(),
                None
            ),
        ],
        "{lived}"
    );
    assert_eq!(lived["facts"][0]["current"], false);
    assert_eq!(lived["facts"][0]["closed_by_memory_id"], porto.as_str());
    assert_eq!(lived["facts"][1]["source_memory_ids"], json!([porto]));

    // As of an instant, a date, a period.
    for (as_of, expected) in [
        ("2023-03-01T00:00:00Z", vec!["Lisbon"]),
        ("2023-07-15", vec!["Porto"]),
        ("in%20May%202023", vec!["Lisbon"]),
        (
            "between%202023-05-01%20and%202023-07-01",
            vec!["Lisbon", "Porto"],
        ),
        ("2022-12-01", vec![]),
    ] {
        let found = app
            .facts(
                "facts",
                &format!("subject=alice&attribute=lives_in&as_of={as_of}"),
            )
            .await;
        let values: Vec<&str> = found["facts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["value"].as_str().unwrap())
            .collect();
        assert_eq!(values, expected, "as_of={as_of}: {found}");
    }

    // Every fact of the agent (never another agent's), with entity ids where the
    // subject and value are entities.
    let all = app.facts("facts", "").await;
    let triples: Vec<(String, String, String)> = all["facts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["subject"].as_str().unwrap().to_string(),
                f["attribute"].as_str().unwrap().to_string(),
                f["value"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(triples.len(), 4, "{all}");
    assert!(!triples.iter().any(|t| t.2 == "Madrid"), "{all}");
    let acme = all["facts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["subject"] == "Bob")
        .unwrap()["value_entity_id"]
        .as_str()
        .expect("Acme Corp is an entity")
        .to_string();

    // The entity's page: what points at it (relationships), and its own facts.
    let detail = app.entity("facts", &acme).await;
    let pointing: Vec<&str> = detail["referenced_by"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["subject"].as_str().unwrap())
        .collect();
    assert_eq!(pointing, ["Alice", "Bob"], "{detail}");
    let alice = app.entities("facts", "q=alice").await["entities"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let alice = app.entity("facts", &alice).await;
    assert_eq!(alice["facts"].as_array().unwrap().len(), 3, "{alice}");

    // Recall as of a time answers from what the memories said then: the memory that
    // stated where Alice lived in March first (superseded or not), nothing said later,
    // and the facts that held.
    let then = app
        .recall(
            "facts",
            "Where does Alice live?",
            json!({"as_of": "2023-03-01", "limit": 3}),
        )
        .await;
    let said: Vec<&str> = then["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["memory"]["content"].as_str().unwrap())
        .collect();
    assert_eq!(said.first(), Some(&"Alice lives in Lisbon."), "{then}");
    assert!(!said.contains(&"Alice moved to Porto."), "{then}");
    assert!(!said.contains(&"Alice lives in Madrid."), "{then}");
    let first = &then["results"][0];
    assert!(
        first["matched_by"]
            .as_array()
            .unwrap()
            .contains(&json!("facts")),
        "{then}"
    );
    let held: Vec<(&str, &str)> = then["facts"]
        .as_array()
        .expect("facts with as_of")
        .iter()
        .map(|f| {
            (
                f["attribute"].as_str().unwrap(),
                f["value"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        held,
        [("lives_in", "Lisbon"), ("works_at", "Acme Corp")],
        "{then}"
    );
    let today = app
        .recall("facts", "Where does Alice live?", json!({}))
        .await;
    assert!(today.get("facts").is_none(), "{today}");
    assert_error(
        app.post(
            "/tools/recall",
            &json!({"agent_id": "facts", "query": "Alice", "as_of": "when pigs fly"}),
        )
        .await,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("as_of"),
    )
    .await;

    // Refusals name the field; another agent's facts are not there to be found.
    for (query, field) in [
        ("as_of=when%20pigs%20fly", "as_of"),
        ("limit=0", "limit"),
        ("colour=red", "colour"),
    ] {
        assert_error(
            app.get(&format!("/v1/facts?agent_id=facts&{query}")).await,
            StatusCode::BAD_REQUEST,
            "invalid_argument",
            Some(field),
        )
        .await;
    }
    assert_eq!(
        app.facts("nobody", "subject=alice").await["facts"],
        json!([])
    );

    // Forgetting what said Alice moved makes Lisbon hold again: a forgotten memory
    // said nothing.
    assert_status(
        app.post("/tools/forget", &json!({"agent_id": "facts", "id": porto}))
            .await,
        StatusCode::OK,
    )
    .await;
    let reopened = eventually(Duration::from_secs(15), || async {
        windows(&app.facts("facts", "subject=alice&attribute=lives_in").await)
            == [(
                "Lisbon".to_string(),
                "2023-01-10T09:00:00Z".to_string(),
                None,
            )]
    })
    .await;
    assert!(reopened, "{}", app.facts("facts", "subject=alice").await);

    // Erasing the agent erases its facts; the other agent keeps its own.
    let erased = assert_status(app.delete("/v1/agents/facts").await, StatusCode::OK).await;
    assert!(
        erased["system_of_record"]["facts"].as_u64().unwrap() >= 3,
        "{erased}"
    );
    assert_eq!(app.facts("facts", "").await["facts"], json!([]));
    assert_eq!(
        app.facts("other", "").await["facts"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

/// The entity of `agent` named `name`, once it is listed (None: not within 15 s).
async fn entity_named(app: &TestApp, agent: &str, name: &str) -> Option<Value> {
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let found = app.entities(agent, "").await["entities"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .cloned();
        if found.is_some() || std::time::Instant::now() > deadline {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aliases_merge_when_a_memory_states_them_and_a_split_is_never_undone() {
    let app = spawn_app().await;
    app.remember("alias", "Yesterday, Melanie painted the fence.", json!({}))
        .await;
    app.remember("alias", "Yesterday, Mel moved to Porto.", json!({}))
        .await;
    let melanie = entity_named(&app, "alias", "Melanie").await.unwrap();
    let mel = entity_named(&app, "alias", "Mel").await.unwrap();
    let melanie_id = melanie["id"].as_str().unwrap().to_string();

    // A memory says who Mel is: Mel's mentions and facts move to Melanie.
    let stating = app
        .remember(
            "alias",
            "Our teacher is Melanie (Mel) from the studio.",
            json!({}),
        )
        .await["memory"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let merged = eventually(Duration::from_secs(15), || async {
        app.entity("alias", &melanie_id).await["memories"]
            .as_array()
            .is_some_and(|m| m.len() == 3)
    })
    .await;
    let detail = app.entity("alias", &melanie_id).await;
    assert!(merged, "{detail}");
    assert_eq!(detail["entity"]["name"], "Melanie", "{detail}");
    assert_eq!(detail["aliases"], json!(["mel"]));
    assert_eq!(detail["merges"][0]["origin"], "stated");
    assert_eq!(detail["merges"][0]["memory_id"], stating.as_str());
    assert!(entity_named(&app, "alias", "Mel").await.is_none());
    let lives = app.facts("alias", "subject=Mel&attribute=lives_in").await;
    assert_eq!(
        lives["facts"][0]["subject_entity_id"],
        melanie_id.as_str(),
        "{lives}"
    );
    // A question naming the alias finds the entity's memories through the index.
    let recalled = app
        .recall("alias", "what did mel paint", json!({"debug": true}))
        .await;
    assert!(
        recalled["results"].as_array().unwrap().iter().any(|r| {
            r["memory"]["content"] == "Yesterday, Melanie painted the fence."
                && r["matched_by"]
                    .as_array()
                    .unwrap()
                    .contains(&json!("entity"))
        }),
        "{recalled}"
    );

    // Split: Mel is her own entity again, with her id, and the undone merge is not
    // made again by another memory saying the same.
    let split = assert_status(
        app.post(
            &format!("/v1/entities/{melanie_id}/split"),
            &json!({"agent_id": "alias", "alias": "Mel"}),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert!(split["merge"]["undone_at"].is_string(), "{split}");
    assert_eq!(split["entity"]["id"], mel["id"], "{split}");
    app.remember("alias", "Later, Melanie (Mel) called.", json!({}))
        .await;
    let indexed = eventually(Duration::from_secs(15), || async {
        app.entity("alias", &melanie_id).await["memories"]
            .as_array()
            .is_some_and(|m| m.len() == 3)
    })
    .await;
    assert!(indexed, "{}", app.entity("alias", &melanie_id).await);
    let mel_now = entity_named(&app, "alias", "Mel")
        .await
        .expect("Mel stays split");
    assert_eq!(mel_now["mentions"], 3, "{mel_now}");
    let history = app.entity("alias", &melanie_id).await["merges"].clone();
    assert_eq!(history.as_array().unwrap().len(), 1, "{history}");

    // A person's merge, and what is refused.
    let merged = assert_status(
        app.post(
            &format!("/v1/entities/{}/merge", mel["id"].as_str().unwrap()),
            &json!({"agent_id": "alias", "into": melanie_id}),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(merged["merge"]["origin"], "user");
    assert_eq!(merged["entity"]["mentions"], 6, "{merged}");
    for (path, body, status, field) in [
        (
            format!("/v1/entities/{melanie_id}/merge"),
            json!({"agent_id": "alias", "into": melanie_id}),
            StatusCode::BAD_REQUEST,
            "into",
        ),
        (
            format!("/v1/entities/{melanie_id}/merge"),
            json!({"agent_id": "alias", "into": "ent_000000000000000000000000"}),
            StatusCode::NOT_FOUND,
            "into",
        ),
        (
            format!("/v1/entities/{melanie_id}/split"),
            json!({"agent_id": "alias", "alias": "nobody"}),
            StatusCode::NOT_FOUND,
            "alias",
        ),
        (
            format!("/v1/entities/{melanie_id}/merge"),
            json!({"agent_id": "alias"}),
            StatusCode::BAD_REQUEST,
            "into",
        ),
    ] {
        let code = if status == StatusCode::NOT_FOUND {
            "not_found"
        } else {
            "invalid_argument"
        };
        assert_error(app.post(&path, &body).await, status, code, Some(field)).await;
    }
    // Another agent cannot see or merge these entities.
    assert_error(
        app.post(
            &format!("/v1/entities/{melanie_id}/split"),
            &json!({"agent_id": "other", "alias": "mel"}),
        )
        .await,
        StatusCode::NOT_FOUND,
        "not_found",
        Some("id"),
    )
    .await;
}

/// The agent's profile memories (tag `profile`).
async fn profiles(app: &TestApp, agent: &str) -> Vec<Value> {
    let listed = assert_status(
        app.get(&format!("/v1/memories?agent_id={agent}&tag=profile"))
            .await,
        StatusCode::OK,
    )
    .await;
    listed["memories"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sleep_cycle_keeps_a_profile_of_each_often_named_entity_true_to_its_facts() {
    let app = spawn_app().await;
    let at = |day: &str| json!({ "occurred_at": format!("{day}T09:00:00Z"), "type": "episodic" });
    for (day, text) in [
        ("2023-01-10", "Alice lives in Lisbon."),
        ("2023-01-12", "Alice works at Acme Corp."),
        ("2023-02-03", "Alice likes jazz."),
        (
            "2023-02-20",
            "On Monday, Alice fixed the boiler in the basement.",
        ),
        ("2023-03-02", "Alice and Bob went hiking near Sintra."),
    ] {
        app.remember("prof", text, at(day)).await;
    }
    let indexed = eventually(Duration::from_secs(15), || async {
        app.entities("prof", "q=alice").await["entities"][0]["mentions"] == 5
            && app.facts("prof", "subject=alice").await["facts"]
                .as_array()
                .is_some_and(|f| f.len() == 3)
    })
    .await;
    assert!(indexed, "{}", app.entities("prof", "").await);
    let sleep = || async {
        assert_status(
            app.post("/tools/consolidate", &json!({ "agent_id": "prof" }))
                .await,
            StatusCode::OK,
        )
        .await
    };

    // Alice is named five times and facts are stated about her: one profile, from
    // her facts; Bob and Sintra, named once, get none.
    sleep().await;
    let written = profiles(&app, "prof").await;
    assert_eq!(written.len(), 1, "{written:?}");
    let profile = &written[0];
    let content = profile["content"].as_str().unwrap();
    assert!(content.starts_with("Profile of Alice ("), "{content}");
    for said in [
        "lives in Lisbon (since 2023-01-10)",
        "works at Acme Corp (since 2023-01-12)",
        "likes jazz (since 2023-02-03)",
    ] {
        assert!(content.contains(said), "{said}: {content}");
    }
    assert_eq!(profile["type"], "semantic");
    assert_eq!(profile["title"], "Profile: Alice");
    let id = profile["id"].as_str().unwrap().to_string();

    // Nothing changed: the next run leaves it as it is.
    sleep().await;
    let again = profiles(&app, "prof").await;
    assert_eq!(again.len(), 1);
    assert_eq!(again[0]["version"], profile["version"], "{again:?}");

    // Alice moves: the profile is rewritten (the old text stays in its history) and
    // adds no claim of its own to her facts.
    app.remember("prof", "Alice moved to Porto.", at("2023-06-01"))
        .await;
    let moved = eventually(Duration::from_secs(15), || async {
        app.facts("prof", "subject=alice&attribute=lives_in").await["facts"]
            .as_array()
            .is_some_and(|f| f.len() == 2)
    })
    .await;
    assert!(moved, "{}", app.facts("prof", "subject=alice").await);
    sleep().await;
    let refreshed = profiles(&app, "prof").await;
    assert_eq!(refreshed.len(), 1, "{refreshed:?}");
    assert_eq!(refreshed[0]["id"], id.as_str());
    let content = refreshed[0]["content"].as_str().unwrap();
    assert!(
        content.contains(
            "lives in Porto (since 2023-06-01); before: Lisbon (2023-01-10 to 2023-06-01)"
        ),
        "{content}"
    );
    let history = assert_status(
        app.get(&format!("/v1/memories/{id}/history?agent_id=prof"))
            .await,
        StatusCode::OK,
    )
    .await;
    let reasons: Vec<&str> = history["versions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["reason"].as_str())
        .collect();
    assert!(reasons.contains(&"refresh_profile"), "{history}");
    let facts = app.facts("prof", "subject=alice").await;
    assert_eq!(facts["facts"].as_array().unwrap().len(), 4, "{facts}");

    // Recall finds the profile when the question names her.
    let answer = app
        .recall("prof", "What do we know about Alice?", json!({}))
        .await;
    assert!(
        answer["results"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["memory"]["id"] == id.as_str()),
        "{answer}"
    );
}

/// The sum of the samples of counter `name` in `/metrics` whose labels hold `label`.
async fn counter(app: &TestApp, name: &str, label: &str) -> f64 {
    let text = app.get("/metrics").await.text().await.unwrap();
    text.lines()
        .filter(|line| line.starts_with(name) && line.contains(label))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Every mention of every entity of `agent`: (surface, source, memory content, start, end).
async fn all_mentions(app: &TestApp, agent: &str) -> Vec<(String, String, String, usize, usize)> {
    let listed = app.entities(agent, "limit=200").await;
    let mut out = Vec::new();
    for entity in listed["entities"].as_array().unwrap() {
        let detail = app.entity(agent, entity["id"].as_str().unwrap()).await;
        for mention in detail["memories"].as_array().unwrap() {
            out.push((
                mention["surface"].as_str().unwrap().to_string(),
                mention["source"].as_str().unwrap().to_string(),
                mention["memory"]["content"].as_str().unwrap().to_string(),
                mention["start"].as_u64().unwrap() as usize,
                mention["end"].as_u64().unwrap() as usize,
            ));
        }
    }
    out
}

/// A server that accepts connections and never answers.
async fn silent_server() -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    address
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_that_never_answers_delays_no_write_and_the_rules_entities_stand() {
    let address = silent_server().await;
    let temp = tempfile::tempdir().unwrap();
    let mut settings = test_settings(temp.path());
    settings.inner_thought.provider = "openai".into();
    settings.inner_thought.base_url = format!("http://{address}/v1");
    settings.inner_thought.model = "silent".into();
    settings.inner_thought.timeout_ms = 4_000;
    let app = spawn_with(settings, Some(temp)).await;
    // The model is asked after the write is durable: two writes are acknowledged long
    // before one model call could time out.
    let started = std::time::Instant::now();
    app.remember(
        "quiet",
        "Omar grew up in Cairo and studied in London.",
        json!({}),
    )
    .await;
    app.remember("quiet", "Omar joined Initech in 2021.", json!({}))
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "a write waited for the model: {:?}",
        started.elapsed()
    );
    entities_named(&app, "quiet", &["Omar", "Cairo", "London", "Initech"]).await;
    // Each is asked, times out, and is asked again 5 s later.
    let timed_out = eventually(Duration::from_secs(45), || async {
        counter(&app, "mnemos_entity_naming_total", "outcome=\"timeout\"").await >= 4.0
    })
    .await;
    assert!(
        timed_out,
        "{}",
        app.get("/metrics").await.text().await.unwrap()
    );
    // The rules' entities stand, and only theirs.
    let mentions = all_mentions(&app, "quiet").await;
    assert!(mentions.len() >= 5, "{mentions:?}");
    assert!(mentions.iter().all(|m| m.1 == "rules"), "{mentions:?}");
    let facts = app.facts("quiet", "subject=omar").await;
    assert!(
        facts["facts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["attribute"] == "works_at" && f["value"] == "Initech"),
        "{facts}"
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_llm_names_entities_in_the_background_checked_against_the_text() {
    let test = "a_real_llm_names_entities_in_the_background_checked_against_the_text";
    let Some(url) = llm_url(test) else {
        return;
    };
    let temp = tempfile::tempdir().unwrap();
    let mut settings = test_settings(temp.path());
    settings.inner_thought.provider = "openai".into();
    settings.inner_thought.base_url = url;
    settings.inner_thought.model = "smollm2".into();
    settings.inner_thought.timeout_ms = 120_000;
    // Room for the whole answer the schema allows (ten names, five relationships).
    settings.inner_thought.max_tokens = 500;
    settings.inner_thought.temperature = 0.0;
    let app = spawn_with(settings.clone(), None).await;
    // Lower-case names the rules cannot tell from words.
    let texts = [
        "tom from accounting joined the hiking club in grenoble.",
        "we moved the billing service from heroku to fly.io.",
    ];
    for text in texts {
        app.remember("named", text, json!({})).await;
    }
    // A busy server may time a call out: it is asked again, so wait until this server
    // has nothing left to ask (its own counts: `/metrics` reports them per server).
    let asked = eventually(Duration::from_secs(300), || async {
        counter(&app, "mnemos_entity_naming_total", "outcome=").await >= texts.len() as f64
            && counter(&app, "mnemos_entity_naming_total", "outcome=\"ok\"").await >= 1.0
            && counter(&app, "mnemos_entity_naming_queued", "").await == 0.0
    })
    .await;
    assert!(asked, "{}", app.get("/metrics").await.text().await.unwrap());
    // Whatever the model said, the index holds only words of the memories, at their
    // place; and it found names the rules did not.
    let named = eventually(Duration::from_secs(15), || async {
        all_mentions(&app, "named")
            .await
            .iter()
            .any(|m| m.1 == "model")
    })
    .await;
    let mentions = all_mentions(&app, "named").await;
    assert!(
        named,
        "the model named nothing the rules missed: {mentions:?}"
    );
    for (surface, _, content, start, end) in &mentions {
        assert_eq!(&content[*start..*end], surface, "{mentions:?}");
    }
    let by_model = |mentions: &[(String, String, String, usize, usize)]| {
        let mut found: Vec<(String, usize)> = mentions
            .iter()
            .filter(|m| m.1 == "model")
            .map(|m| (m.0.clone(), m.3))
            .collect();
        found.sort();
        found
    };
    let before = by_model(&mentions);
    app.stop().await;

    // A rebuild without the model keeps what it said: its answers are stored.
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_mnemos"))
        .args(["--json", "reindex", "--projection", "entities"])
        .env("MNEMOS__DATA_DIR", temp.path())
        .env("MNEMOS__COGNITION__ENABLED", "false")
        .envs(backend_env(temp.path()))
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut offline = settings;
    offline.inner_thought.provider = "none".into();
    let app = spawn_with(offline, Some(temp)).await;
    let rebuilt = eventually(Duration::from_secs(15), || async {
        by_model(&all_mentions(&app, "named").await) == before
    })
    .await;
    assert!(
        rebuilt,
        "{before:?} != {:?}",
        by_model(&all_mentions(&app, "named").await)
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_name_for_two_people_in_two_projects_is_split_by_project_and_joined_again() {
    let app = spawn_app().await;
    for project in ["atlas", "borealis"] {
        let created = app
            .client
            .put(format!("{}/v1/projects/{project}", app.address))
            .json(&json!({"agent_id": "two"}))
            .send()
            .await
            .unwrap();
        assert_status(created, StatusCode::OK).await;
    }
    let build = app
        .remember(
            "two",
            "Later, Alex fixed the build pipeline.",
            json!({"project_id": "atlas"}),
        )
        .await["memory"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let lease = app
        .remember(
            "two",
            "Later, Alex signed the lease for the new office.",
            json!({"project_id": "borealis"}),
        )
        .await["memory"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let alexes = || async {
        let listed = app.entities("two", "q=alex").await;
        listed["entities"].as_array().cloned().unwrap_or_default()
    };
    let one = eventually(Duration::from_secs(15), || async {
        alexes().await.first().is_some_and(|e| e["mentions"] == 2)
    })
    .await;
    assert!(one, "{:?}", alexes().await);
    let alex = alexes().await[0]["id"].as_str().unwrap().to_string();

    // Borealis's Alex is someone else: the name gets its own entity there.
    let split = assert_status(
        app.post(
            &format!("/v1/entities/{alex}/split"),
            &json!({"agent_id": "two", "project_id": "borealis"}),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(split["merge"]["project_id"], "borealis", "{split}");
    assert_eq!(split["merge"]["name"], "alex (borealis)", "{split}");
    let theirs = split["entity"]["id"].as_str().unwrap().to_string();
    assert_ne!(theirs, alex);
    let two = alexes().await;
    assert_eq!(two.len(), 2, "{two:?}");
    assert!(
        two.iter()
            .all(|e| e["name"] == "Alex" && e["mentions"] == 1),
        "{two:?}"
    );
    let named = |id: String| {
        let app = &app;
        async move {
            app.entity("two", &id).await["memories"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["memory"]["id"].as_str().unwrap().to_string())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(named(alex.clone()).await, vec![build]);
    assert_eq!(named(theirs.clone()).await, vec![lease.clone()]);
    // A new memory of the project names the split-off entity too.
    app.remember(
        "two",
        "Later, Alex moved the office plants.",
        json!({"project_id": "borealis"}),
    )
    .await;
    let followed = eventually(Duration::from_secs(15), || async {
        named(theirs.clone()).await.len() == 2
    })
    .await;
    assert!(followed, "{}", app.entity("two", &theirs).await);
    // Recall inside the project finds its Alex through the entity index.
    let asked = app
        .recall(
            "two",
            "What did Alex sign?",
            json!({"project_id": "borealis", "debug": true}),
        )
        .await;
    let hit = asked["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["memory"]["id"] == lease.as_str())
        .unwrap_or_else(|| panic!("{asked}"));
    assert!(
        hit["matched_by"]
            .as_array()
            .unwrap()
            .contains(&json!("entity")),
        "{asked}"
    );

    // Refusals: both or neither, a project that names nothing of it, an unknown one.
    for (body, status, field) in [
        (
            json!({"agent_id": "two", "alias": "x", "project_id": "atlas"}),
            StatusCode::BAD_REQUEST,
            "project_id",
        ),
        (json!({"agent_id": "two"}), StatusCode::BAD_REQUEST, "alias"),
        (
            json!({"agent_id": "two", "project_id": "borealis"}),
            StatusCode::BAD_REQUEST,
            "project_id",
        ),
        (
            json!({"agent_id": "two", "project_id": "nowhere"}),
            StatusCode::NOT_FOUND,
            "project_id",
        ),
    ] {
        let code = if status == StatusCode::NOT_FOUND {
            "not_found"
        } else {
            "invalid_argument"
        };
        assert_error(
            app.post(&format!("/v1/entities/{alex}/split"), &body).await,
            status,
            code,
            Some(field),
        )
        .await;
    }

    // The same person after all: splitting the name off the project's entity joins
    // them again, and the history keeps both steps.
    assert_status(
        app.post(
            &format!("/v1/entities/{theirs}/split"),
            &json!({"agent_id": "two", "alias": "alex"}),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    let joined = alexes().await;
    assert_eq!(joined.len(), 1, "{joined:?}");
    assert_eq!(joined[0]["id"], alex.as_str());
    assert_eq!(joined[0]["mentions"], 3, "{joined:?}");
    let history = app.entity("two", &alex).await["merges"].clone();
    assert_eq!(history[0]["project_id"], "borealis", "{history}");
    assert!(history[0]["undone_at"].is_string(), "{history}");
}

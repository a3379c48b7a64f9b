//! The Qdrant vector projection (`vectors.backend = "qdrant"`), against the server named
//! by `MNEMOS_TEST_QDRANT_URL` (gRPC, e.g. `http://127.0.0.1:6334`). Qdrant cannot be
//! installed on the CI machine: without the variable the suite prints a SKIPPED line
//! naming it. Each test uses its own collection and deletes it afterwards.

use std::time::Duration;

use mnemos::vectors::qdrant::QdrantProjection;
use mnemos_actors::embedding::{BuiltinEmbedder, Embedder};
use mnemos_actors::model::AgentId;
use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::*;

fn qdrant_or_skip(test: &str) -> Option<String> {
    match std::env::var("MNEMOS_TEST_QDRANT_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            skipped(
                test,
                "set MNEMOS_TEST_QDRANT_URL (Qdrant's gRPC URL, e.g. http://127.0.0.1:6334) to run the Qdrant suite",
            );
            None
        }
    }
}

fn probe(url: &str, collection: &str, dimension: usize) -> QdrantProjection {
    QdrantProjection::new(url, collection, dimension, Duration::from_secs(10)).unwrap()
}

#[tokio::test]
async fn memories_reach_the_qdrant_collection_and_leave_it_on_delete_and_forget() {
    let Some(url) =
        qdrant_or_skip("memories_reach_the_qdrant_collection_and_leave_it_on_delete_and_forget")
    else {
        return;
    };
    let collection = format!("mnemos_test_{}", uuid::Uuid::new_v4().simple());
    let temp = tempfile::tempdir().unwrap();
    let mut settings = test_settings(temp.path());
    settings.vectors.backend = "qdrant".into();
    settings.vectors.url = url.clone();
    settings.vectors.collection = collection.clone();
    settings.projector.interval_ms = 50;
    let app = spawn_with(settings, Some(temp)).await;
    let qdrant = probe(&url, &collection, 256);
    let embedder = BuiltinEmbedder::new(256);
    let agent = AgentId::parse("qa").unwrap();

    let mut ids = Vec::new();
    for text in [
        "the deploy script lives in ops",
        "staging runs on port 5433",
        "lunch is at noon",
    ] {
        let body = app.remember("qa", text, json!({})).await;
        ids.push(body["memory"]["id"].as_str().unwrap().to_string());
    }
    let query = embedder.embed("staging runs on port 5433").unwrap();
    let found = eventually(Duration::from_secs(60), || async {
        qdrant
            .search(&agent, query.clone(), false, 10)
            .await
            .is_ok_and(|hits| hits.len() == 3 && hits[0].0 .0 == ids[1])
    })
    .await;
    assert!(
        found,
        "{:?}",
        qdrant.search(&agent, query.clone(), false, 10).await
    );
    // Another agent's filter sees nothing.
    let other = qdrant
        .search(
            &AgentId::parse("someone-else").unwrap(),
            query.clone(),
            false,
            10,
        )
        .await
        .unwrap();
    assert!(other.is_empty());
    // The type filter applies in Qdrant.
    let procedural = qdrant
        .search_types(
            &agent,
            query.clone(),
            false,
            &[mnemos_actors::model::MemoryType::Procedural],
            10,
        )
        .await
        .unwrap();
    assert!(procedural.is_empty(), "{procedural:?}");
    // Recall's vector reads go to Qdrant once it is caught up, and say so.
    let read_qdrant = eventually(Duration::from_secs(30), || async {
        let recalled = app
            .recall("qa", "which port does staging use", json!({"debug": true}))
            .await;
        recalled["sources"]["vector"] == "qdrant"
            && recalled["results"][0]["memory"]["id"] == ids[1].as_str()
    })
    .await;
    assert!(
        read_qdrant,
        "recall never read the caught-up Qdrant projection"
    );

    let deleted = app
        .delete(&format!("/v1/memories/{}?agent_id=qa", ids[1]))
        .await;
    assert_status(deleted, StatusCode::OK).await;
    let forgot = app
        .post("/tools/forget", &json!({"agent_id": "qa", "id": ids[2]}))
        .await;
    assert_status(forgot, StatusCode::OK).await;
    let gone = eventually(Duration::from_secs(60), || async {
        qdrant
            .search(&agent, query.clone(), false, 10)
            .await
            .is_ok_and(|hits| hits.len() == 1 && hits[0].0 .0 == ids[0])
    })
    .await;
    assert!(
        gone,
        "{:?}",
        qdrant.search(&agent, query.clone(), false, 10).await
    );

    // The server loses the collection (restarted with empty storage): the projection
    // creates it again and rebuilds it from SQL by itself, no `mnemos reindex` needed.
    qdrant.drop_collection().await.unwrap();
    let rebuilt = eventually(Duration::from_secs(60), || async {
        qdrant
            .search(&agent, query.clone(), false, 10)
            .await
            .is_ok_and(|hits| hits.len() == 1 && hits[0].0 .0 == ids[0])
    })
    .await;
    assert!(rebuilt, "the emptied collection was not rebuilt");
    let health = assert_status(app.get("/health").await, StatusCode::OK).await;
    let projection = &health["backends"]["projections"][0];
    assert_eq!(projection["state"], "up", "{health}");
    assert!(projection["rebuilds"].as_u64() >= Some(2), "{health}");
    app.stop().await;
    qdrant.drop_collection().await.unwrap();
}

#[tokio::test]
async fn a_collection_of_another_application_is_never_touched() {
    let test = "a_collection_of_another_application_is_never_touched";
    let Some(url) = qdrant_or_skip(test) else {
        return;
    };
    use qdrant_client::qdrant::{
        CountPointsBuilder, CreateCollectionBuilder, Distance, PointStruct, UpsertPointsBuilder,
        VectorParamsBuilder,
    };
    let collection = format!("mnemos_test_{}", uuid::Uuid::new_v4().simple());
    let client = qdrant_client::Qdrant::from_url(&url)
        .skip_compatibility_check()
        .build()
        .unwrap();
    // Another application's collection with mnemos's shape (256-d cosine) and ten points.
    client
        .create_collection(
            CreateCollectionBuilder::new(&collection)
                .vectors_config(VectorParamsBuilder::new(256, Distance::Cosine)),
        )
        .await
        .unwrap();
    let points: Vec<PointStruct> = (0..10u64)
        .map(|i| {
            let mut vector = vec![0.0f32; 256];
            vector[i as usize] = 1.0;
            PointStruct::new(i, vector, qdrant_client::Payload::new())
        })
        .collect();
    client
        .upsert_points(UpsertPointsBuilder::new(&collection, points).wait(true))
        .await
        .unwrap();
    let temp = tempfile::tempdir().unwrap();
    let mut settings = test_settings(temp.path());
    settings.vectors.backend = "qdrant".into();
    settings.vectors.url = url.clone();
    settings.vectors.collection = collection.clone();
    let error = match try_spawn_with(settings, Some(temp)).await {
        Ok(_) => panic!("another application's collection must be refused"),
        Err(error) => error.to_string(),
    };
    assert!(
        error.contains("vectors.collection") && error.contains("another application"),
        "{error}"
    );
    let count = client
        .count(CountPointsBuilder::new(&collection).exact(true))
        .await
        .unwrap()
        .result
        .map_or(0, |c| c.count);
    assert_eq!(
        count, 10,
        "none of the other application's points was touched"
    );
    client.delete_collection(&collection).await.unwrap();
}

#[tokio::test]
async fn a_collection_of_another_dimension_is_refused_with_a_clear_error() {
    let Some(url) =
        qdrant_or_skip("a_collection_of_another_dimension_is_refused_with_a_clear_error")
    else {
        return;
    };
    let collection = format!("mnemos_test_{}", uuid::Uuid::new_v4().simple());
    // Someone else's 1536-dimensional collection under the name mnemos is told to use.
    let foreign = probe(&url, &collection, 1536);
    foreign.ensure_collection().await.unwrap();
    let temp = tempfile::tempdir().unwrap();
    let mut settings = test_settings(temp.path());
    settings.vectors.backend = "qdrant".into();
    settings.vectors.url = url.clone();
    settings.vectors.collection = collection.clone();
    let error = match try_spawn_with(settings, Some(temp)).await {
        Ok(_) => {
            panic!("a 1536-dimensional collection must be refused for 256-dimensional vectors")
        }
        Err(error) => error.to_string(),
    };
    assert!(
        error.contains("vectors.collection") && error.contains("1536"),
        "{error}"
    );
    foreign.drop_collection().await.unwrap();
}

//! One set of store-level tests, run against every system of record (SQLite and
//! PostgreSQL) through the same generic bodies, plus a keyword-ranking parity check
//! between the two.
//!
//! PostgreSQL tests connect to `MNEMOS_TEST_POSTGRES_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`), each in a fresh schema that is dropped
//! afterwards. When the server is unreachable they print a `SKIPPED` line, except under
//! `CI`, where they fail.

use std::future::Future;

use chrono::{DateTime, Duration, TimeZone, Utc};
use mnemos_actors::error::ErrorCode;
use mnemos_actors::kv::NamespaceName;
use mnemos_actors::model::{
    version_of, AgentId, Association, ConsolidationRun, Memory, MemoryId, MemoryStatus, MemoryType,
    MessageRole, SessionId, SourceRef,
};
use mnemos_actors::policy::consistency::normalized_hash;
use mnemos_actors::policy::lru::simple_put;
use mnemos_actors::policy::time::TimeRange;
use mnemos_actors::store::kv::KvStore;
use mnemos_actors::store::projects::ProjectStore;
use mnemos_actors::store::ProjectedChange;
use mnemos_actors::store::{
    ConsolidationCommit, GraphStore, KeywordQuery, ListQuery, MemoryStore, RowStamp,
    SessionArchive, SessionCompaction, StoredMemory,
};
use mnemos_actors::testing::memory_fixture;
use sqlx::Connection;

use super::postgres::PostgresStore;
use super::sqlite::SqliteStore;

/// A test store: every trait a system of record implements.
pub(crate) trait TestStore: MemoryStore + GraphStore + KvStore + ProjectStore {}
impl<T: MemoryStore + GraphStore + KvStore + ProjectStore> TestStore for T {}

/// The base URL of the test server.
fn postgres_url() -> String {
    std::env::var("MNEMOS_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// `url` with its connections' search path set to `schema`.
pub(crate) fn with_schema(url: &str, schema: &str) -> String {
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}options=-csearch_path%3D{schema}")
}

async fn sqlite_store() -> (SqliteStore, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("mnemos.db"))
        .await
        .unwrap();
    (store, dir)
}

/// Run `body` against a PostgreSQL store in a fresh schema, dropped afterwards (also
/// when the body panics). Skips (prints `SKIPPED`) when the server is unreachable,
/// unless `CI` is set.
async fn with_postgres<F, Fut>(test: &str, body: F)
where
    F: FnOnce(PostgresStore) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let url = postgres_url();
    let mut admin = match sqlx::PgConnection::connect(&url).await {
        Ok(conn) => conn,
        Err(error) => {
            if std::env::var_os("CI").is_some() {
                panic!("{test}: PostgreSQL at {url} is unreachable under CI: {error}");
            }
            // Straight to stderr (the harness captures `eprintln!`), so the line always shows.
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED {test}: PostgreSQL at {url} is unreachable ({error}); set MNEMOS_TEST_POSTGRES_URL"
            );
            return;
        }
    };
    let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
    let store = PostgresStore::open(&with_schema(&url, &schema))
        .await
        .expect("store opens in a fresh schema");
    // On a task of its own, so a failing body still lets the schema be dropped.
    let outcome = tokio::spawn(body(store.clone())).await;
    store.close().await;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP SCHEMA IF EXISTS {schema} CASCADE"
    )))
    .execute(&mut admin)
    .await
    .expect("test schema dropped");
    if let Err(error) = outcome {
        match error.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(error) => panic!("{test}: {error}"),
        }
    }
}

/// Generate `sqlite::<name>` and `postgres::<name>` tests for each generic body.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $name() {
                    let (store, _dir) = super::sqlite_store().await;
                    super::$name(&store).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test]
                async fn $name() {
                    super::with_postgres(concat!("store::conformance::postgres::", stringify!($name)), |store| async move {
                        super::$name(&store).await;
                    })
                    .await;
                }
            )*
        }
    };
}

on_both_backends!(
    round_trips_a_memory_and_its_embedding,
    keyword_search_stays_in_scope_and_ranks_matches,
    refuses_vectors_of_another_model,
    deleting_a_memory_removes_its_edges,
    inserts_are_idempotent_by_id,
    insert_new_content_skips_what_the_agent_already_holds,
    update_is_compare_and_swap_with_history,
    updates_keep_the_content_hash_in_step_with_the_content,
    list_filters_and_pages,
    embeddings_page_in_id_order_of_active_memories,
    leases_let_one_holder_claim_each_slot,
    consolidation_commits_whole_or_not_at_all,
    session_archive_is_idempotent_and_idle_sessions_follow_it,
    purge_removes_only_memories_forgotten_long_enough,
    touch_find_by_hash_neighbours_and_runs,
    keyword_search_filters_status_time_and_follows_updates,
    session_log_appends_and_compacts_once,
    kv_namespaces_evict_in_use_order,
    outbox_records_every_change_in_order,
    refuses_what_it_cannot_store_as_invalid_input,
    the_entity_index_names_what_active_memories_name_and_rebuilds_alike,
    stamps_move_with_every_change_and_whole_rows_come_beside_them,
);

/// Apply the whole outbox to the entity index, twice (a repeated apply is harmless).
async fn entity_catch_up<D>(
    store: &super::dialect::SqlStore<D>,
    index: &super::entities::EntityProjection<D>,
) where
    D: super::dialect::Dialect,
    super::dialect::SqlStore<D>: TestStore,
{
    use mnemos_actors::store::Projection;
    let entries = store.outbox_after(0, 1000).await.unwrap();
    let last = entries.last().map(|e| e.seq);
    let changes: Vec<_> = entries.into_iter().map(|e| e.change).collect();
    index.apply(&changes, last).await.unwrap();
    index.apply(&changes, last).await.unwrap();
}

/// The entity index follows the outbox: what active memories name, per agent; an
/// archived or deleted memory's mentions go, an entity no memory names goes, applying
/// twice changes nothing, a rebuild gives the same entities and ids, erase removes them.
async fn the_entity_index_names_what_active_memories_name_and_rebuilds_alike<D>(
    store: &super::dialect::SqlStore<D>,
) where
    D: super::dialect::Dialect,
    super::dialect::SqlStore<D>: TestStore,
{
    use mnemos_actors::store::entities::{EntityIndex, EntityQuery};
    use mnemos_actors::store::Projection;
    let index = super::entities::EntityProjection::new(store.clone());
    assert_eq!(
        index.applied().await.unwrap(),
        None,
        "a fresh index asks to be rebuilt"
    );
    let first = fixture("ana", "Melanie went to the park with Caroline.", t0());
    let second = fixture(
        "ana",
        "Caroline moved to Lisbon in June 2024.",
        t0() + chrono::Duration::days(3),
    );
    let other = fixture("bob", "Melanie runs the Berlin office.", t0());
    store
        .insert(&[stored(&first), stored(&second), stored(&other)])
        .await
        .unwrap();
    entity_catch_up(store, &index).await;
    let page = |agent: &str| EntityQuery {
        agent_id: Some(AgentId::parse(agent).unwrap()),
        limit: 100,
        ..EntityQuery::default()
    };
    let names = |entities: &[mnemos_actors::store::entities::Entity]| {
        entities
            .iter()
            .map(|e| (e.name.clone(), e.kind.as_str(), e.mentions))
            .collect::<Vec<_>>()
    };
    let ana = index.entities(&page("ana")).await.unwrap();
    assert_eq!(
        names(&ana),
        [
            ("Caroline".to_string(), "person", 2),
            ("June 2024".to_string(), "date", 1),
            ("Lisbon".to_string(), "place", 1),
            ("Melanie".to_string(), "person", 1),
        ],
        "{ana:?}"
    );
    let caroline = ana.iter().find(|e| e.key == "caroline").unwrap().clone();
    assert_eq!(caroline.first_seen, first.occurred_at);
    assert_eq!(caroline.last_seen, second.occurred_at);
    // Another agent's entity of the same name is another entity.
    let bob = index.entities(&page("bob")).await.unwrap();
    let bob_melanie = bob.iter().find(|e| e.key == "melanie").unwrap();
    let ana_melanie = ana.iter().find(|e| e.key == "melanie").unwrap();
    assert_ne!(bob_melanie.id, ana_melanie.id);
    assert!(index
        .entity(&agent("bob"), &ana_melanie.id)
        .await
        .unwrap()
        .is_none());
    // Mentions, newest first; co-mentions; memories naming keys; known keys.
    let mentions = index
        .mentions(&agent("ana"), &caroline.id, 10)
        .await
        .unwrap();
    assert_eq!(
        mentions
            .iter()
            .map(|m| m.memory_id.clone())
            .collect::<Vec<_>>(),
        [second.id.clone(), first.id.clone()]
    );
    assert_eq!(
        &second.content[mentions[0].start..mentions[0].end],
        "Caroline"
    );
    let related = index
        .co_mentioned(&agent("ana"), &caroline.id, 10)
        .await
        .unwrap();
    assert_eq!(related.len(), 3, "{related:?}");
    let naming = index
        .memories_naming(
            &agent("ana"),
            &["lisbon".to_string(), "melanie".to_string()],
            10,
        )
        .await
        .unwrap();
    assert_eq!(
        naming,
        [
            (second.id.clone(), "lisbon".to_string()),
            (first.id.clone(), "melanie".to_string())
        ]
    );
    assert_eq!(
        index
            .known_keys(&agent("ana"), &["lisbon".into(), "porto".into()])
            .await
            .unwrap(),
        ["lisbon"]
    );
    // Search, kind and paging.
    let searched = index
        .entities(&EntityQuery {
            search: Some("lin".into()),
            ..page("ana")
        })
        .await
        .unwrap();
    assert_eq!(names(&searched), [("Caroline".to_string(), "person", 2)]);
    let people = index
        .entities(&EntityQuery {
            kind: Some(mnemos_actors::policy::entities::EntityKind::Person),
            after_key: Some("caroline".into()),
            ..page("ana")
        })
        .await
        .unwrap();
    assert_eq!(names(&people), [("Melanie".to_string(), "person", 1)]);

    // Archiving the second memory takes its mentions away, and Lisbon with them.
    let mut archived = second.clone();
    archived.status = MemoryStatus::Archived;
    archived.version = 2;
    store
        .update(&archived, &version_of(&second, "forget", t0()), None)
        .await
        .unwrap();
    entity_catch_up(store, &index).await;
    // What an entity is and when it was seen follow the mentions left: "with Caroline"
    // alone does not say she is a person.
    let ana = index.entities(&page("ana")).await.unwrap();
    assert_eq!(
        names(&ana),
        [
            ("Caroline".to_string(), "name", 1),
            ("Melanie".to_string(), "person", 1)
        ]
    );
    assert_eq!(ana[0].last_seen, first.occurred_at);

    // A rebuild from the memories gives the same entities with the same ids.
    let before = index.entities(&page("ana")).await.unwrap();
    index.reset().await.unwrap();
    assert_eq!(index.applied().await.unwrap(), None);
    let mut memories = store.agent_memories(&agent("ana")).await.unwrap();
    memories.extend(store.agent_memories(&agent("bob")).await.unwrap());
    let changes: Vec<_> = memories
        .iter()
        .map(mnemos_actors::actors::projector::memory_change)
        .collect();
    (&index as &dyn Projection)
        .apply(&changes, Some(7))
        .await
        .unwrap();
    assert_eq!(index.entities(&page("ana")).await.unwrap(), before);
    assert_eq!(index.applied().await.unwrap(), Some(7));

    // Claims of facts: the archived memory's claim went with it; a superseded
    // memory's claim stays (a contradiction closes a fact, it never deletes it) while
    // its mentions go.
    let about_caroline = mnemos_actors::store::entities::FactQuery {
        agent_id: agent("ana"),
        subject_key: Some("caroline".into()),
        attribute: None,
        value_key: None,
        limit: 100,
    };
    assert!(index.fact_claims(&about_caroline).await.unwrap().is_empty());
    let porto = fixture(
        "ana",
        "Caroline lives in Porto.",
        t0() + chrono::Duration::days(5),
    );
    store.insert(&[stored(&porto)]).await.unwrap();
    entity_catch_up(store, &index).await;
    let found = index.fact_claims(&about_caroline).await.unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(
        (
            found[0].attribute.as_str(),
            found[0].value.as_str(),
            found[0].observed_at
        ),
        ("lives_in", "Porto", porto.occurred_at)
    );
    let mut superseded = porto.clone();
    superseded.status = MemoryStatus::Superseded;
    superseded.version = 2;
    store
        .update(&superseded, &version_of(&porto, "supersede", t0()), None)
        .await
        .unwrap();
    entity_catch_up(store, &index).await;
    assert_eq!(index.fact_claims(&about_caroline).await.unwrap(), found);
    assert!(!index
        .entities(&page("ana"))
        .await
        .unwrap()
        .iter()
        .any(|e| e.key == "porto"));

    // Erasing the agent removes its entities and mentions; the other agent keeps its own.
    let erased = store.erase_agent(&agent("ana")).await.unwrap();
    assert_eq!(erased.entities, 2);
    assert_eq!(erased.facts, 1);
    assert!(index.fact_claims(&about_caroline).await.unwrap().is_empty());
    assert!(index.entities(&page("ana")).await.unwrap().is_empty());
    assert!(index
        .mentions(&agent("ana"), &caroline.id, 10)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(index.entities(&page("bob")).await.unwrap().len(), 2);
}

/// Values one of the databases cannot keep (NUL in text or JSON, an instant outside the
/// years 1 to 9999) are `invalid_argument` naming the field on both, before anything is
/// written (PostgreSQL used to answer `backend_unavailable`, which clients retry forever).
async fn refuses_what_it_cannot_store_as_invalid_input<S: TestStore>(store: &S) {
    let base = fixture("nul", "plain", t0());
    let year_minus_one = chrono::NaiveDate::from_ymd_opt(-1, 1, 1)
        .unwrap()
        .and_hms_opt(0, 0, 0)
        .unwrap()
        .and_utc();
    let cases: Vec<(Memory, &str)> = vec![
        (
            Memory {
                content: "a\0b".into(),
                ..fixture("nul", "x", t0())
            },
            "content",
        ),
        (
            Memory {
                tags: vec!["t\0".into()],
                ..fixture("nul", "y", t0())
            },
            "tags",
        ),
        (
            Memory {
                metadata: serde_json::json!({"k": "v\u{0}"}),
                ..fixture("nul", "z", t0())
            },
            "metadata",
        ),
        (
            Memory {
                occurred_at: year_minus_one,
                ..fixture("nul", "w", t0())
            },
            "occurred_at",
        ),
    ];
    for (memory, field) in cases {
        let error = store.insert(&[stored(&memory)]).await.unwrap_err();
        assert_eq!(error.code, ErrorCode::InvalidArgument, "{field}: {error:?}");
        assert_eq!(error.field.as_deref(), Some(field));
        let error = store
            .insert_new_content(&[stored(&memory)])
            .await
            .unwrap_err();
        assert_eq!(error.field.as_deref(), Some(field));
    }
    store.insert(&[stored(&base)]).await.unwrap();
    let mut next = base.clone();
    next.content = "still\0bad".into();
    next.version += 1;
    let error = store
        .update(&next, &version_of(&base, "update", t0()), None)
        .await
        .unwrap_err();
    assert_eq!(error.field.as_deref(), Some("content"));
    let error = store
        .append_session_message(
            &agent("nul"),
            &SessionId::parse("s").unwrap(),
            MessageRole::User,
            "hi\0",
            1,
            t0(),
        )
        .await
        .unwrap_err();
    assert_eq!(error.field.as_deref(), Some("content"));
    assert_eq!(
        store.agent_memories(&agent("nul")).await.unwrap(),
        vec![base]
    );
}

/// A fixed instant with whole microseconds (both stores keep microseconds).
fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 1, 12, 0, 0).unwrap()
}

fn agent(name: &str) -> AgentId {
    AgentId::parse(name).unwrap()
}

fn stored(memory: &Memory) -> StoredMemory {
    StoredMemory::new(memory.clone(), vec![1.0, 0.0])
}

/// A fixture with an id that sorts after every earlier one (ids are compared as text).
fn fixture(agent: &str, content: &str, at: DateTime<Utc>) -> Memory {
    memory_fixture(agent, content, at)
}

fn search(agent_name: &str, text: &str, include_shared: bool) -> KeywordQuery {
    KeywordQuery {
        agent_id: agent(agent_name),
        include_shared,
        text: text.into(),
        occurred: None,
        limit: 10,
    }
}

fn ids(hits: &[(MemoryId, f64)]) -> Vec<MemoryId> {
    hits.iter().map(|h| h.0.clone()).collect()
}

async fn round_trips_a_memory_and_its_embedding<S: TestStore>(store: &S) {
    let mut memory = fixture(
        "alice",
        "The API rate limit is 1000 requests per minute",
        t0(),
    );
    memory.tags = vec!["api".into(), "limits".into()];
    memory.metadata = serde_json::json!({"k": [1, 2], "nested": {"x": 0.25}});
    memory.source = Some(SourceRef {
        path: "src/a.rs".into(),
        hash: "abc".into(),
    });
    memory.title = Some("Rate limit".into());
    memory.session_id = Some(SessionId::parse("s1").unwrap());
    memory.valence = Some(-0.5);
    memory.arousal = Some(0.75);
    memory.importance = 0.8;
    memory.memory_type = MemoryType::Semantic;
    memory.shared = true;
    store
        .insert(&[StoredMemory::new(memory.clone(), vec![0.5, -0.25])])
        .await
        .unwrap();
    let loaded = store.get(&memory.id).await.unwrap().unwrap();
    assert_eq!(loaded, memory);
    assert_eq!(
        store.embedding(&memory.id).await.unwrap().unwrap(),
        vec![0.5, -0.25]
    );
    assert_eq!(store.count().await.unwrap(), 1);
    assert_eq!(store.agents().await.unwrap(), vec![agent("alice")]);
    assert!(store.get(&MemoryId::generate()).await.unwrap().is_none());
    let many = store
        .get_many(&[memory.id.clone(), MemoryId::generate()])
        .await
        .unwrap();
    assert_eq!(many, vec![memory.clone()]);
    // Text that needs escaping and numbers without an exact decimal form read back
    // exactly, several at a time (SQLite reads them as one aggregated JSON row).
    let mut odd = fixture(
        "alice",
        "She said \"ça va?\" \\ then\nleft \u{1f980} \u{7}",
        t0() + chrono::Duration::microseconds(1),
    );
    odd.importance = 0.1;
    odd.valence = Some(1.0 / 3.0);
    odd.consolidation_level = 0.7;
    odd.tags = vec!["\"quoted\"".into(), "ünï".into()];
    odd.metadata = serde_json::json!({"big": 9_007_199_254_740_993_u64, "tiny": 1e-7});
    store.insert(&[stored(&odd)]).await.unwrap();
    let mut many = store
        .get_many(&[odd.id.clone(), memory.id.clone()])
        .await
        .unwrap();
    many.sort_by(|a, b| a.id.cmp(&b.id));
    let mut expected = vec![memory.clone(), odd];
    expected.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(many, expected);
    let of = store
        .embeddings_of(std::slice::from_ref(&memory.id))
        .await
        .unwrap();
    assert_eq!(of, vec![(memory.id.clone(), vec![0.5, -0.25])]);
}

async fn keyword_search_stays_in_scope_and_ranks_matches<S: TestStore>(store: &S) {
    let now = t0();
    let alice = fixture("alice", "deploy the service with cargo build", now);
    let alice2 = fixture("alice", "lunch was pasta", now);
    let bob = fixture("bob", "deploy checklist for the service", now);
    let mut shared = fixture("bob", "shared deploy guide", now);
    shared.shared = true;
    let records: Vec<StoredMemory> = [&alice, &alice2, &bob, &shared]
        .iter()
        .map(|m| stored(m))
        .collect();
    store.insert(&records).await.unwrap();
    let hits = store
        .keyword_search(&search("alice", "how do I deploy?", false))
        .await
        .unwrap();
    assert_eq!(ids(&hits), vec![alice.id.clone()]);
    let hits = store
        .keyword_search(&search("alice", "how do I deploy?", true))
        .await
        .unwrap();
    assert_eq!(hits.len(), 2);
    assert!(hits.iter().all(|h| h.0 != bob.id));
    // More matching terms rank higher.
    let hits = store
        .keyword_search(&search("alice", "deploy service cargo", false))
        .await
        .unwrap();
    assert_eq!(ids(&hits), vec![alice.id.clone()]);
    assert!(hits[0].1 > 0.0);
    assert!(store
        .keyword_search(&search("alice", "the of and", false))
        .await
        .unwrap()
        .is_empty());
}

async fn refuses_vectors_of_another_model<S: TestStore>(store: &S) {
    store
        .check_embedding_model("builtin-hash-v1-256", 256)
        .await
        .unwrap();
    store
        .check_embedding_model("builtin-hash-v1-256", 256)
        .await
        .unwrap();
    let error = store
        .check_embedding_model("local-bert-384", 384)
        .await
        .unwrap_err();
    assert_eq!(error.field.as_deref(), Some("embedding.provider"));
    assert!(error.message.contains("384"));
}

async fn deleting_a_memory_removes_its_edges<S: TestStore>(store: &S) {
    let now = t0();
    let a = fixture("alice", "a", now);
    let b = fixture("alice", "b", now);
    store.insert(&[stored(&a), stored(&b)]).await.unwrap();
    let edge = Association {
        agent_id: a.agent_id.clone(),
        from_id: a.id.clone(),
        to_id: b.id.clone(),
        relation: "related_to".into(),
        weight: 0.7,
        created_at: now,
    };
    assert_eq!(store.upsert_edge(&edge).await.unwrap(), edge);
    let heavier = Association {
        weight: 0.9,
        ..edge.clone()
    };
    assert_eq!(store.upsert_edge(&heavier).await.unwrap().weight, 0.9);
    let around = store
        .edges_around(&a.agent_id, std::slice::from_ref(&b.id), 1, 10)
        .await
        .unwrap();
    assert_eq!(around, vec![heavier]);
    let dangling = Association {
        to_id: MemoryId::generate(),
        ..edge.clone()
    };
    assert_eq!(
        store.upsert_edge(&dangling).await.unwrap_err().code,
        ErrorCode::NotFound
    );
    assert!(store.delete(&a.id).await.unwrap());
    assert!(!store.delete(&a.id).await.unwrap());
    assert!(store
        .edges_around(&a.agent_id, std::slice::from_ref(&b.id), 1, 10)
        .await
        .unwrap()
        .is_empty());
    assert!(store.history(&a.id).await.unwrap().is_empty());
    assert!(store.embedding(&a.id).await.unwrap().is_none());
    // Edges two hops away are found at depth 2; remove_memory drops a memory's edges.
    let c = fixture("alice", "c", now);
    store.insert(&[stored(&c)]).await.unwrap();
    let bc = Association {
        from_id: b.id.clone(),
        to_id: c.id.clone(),
        ..edge.clone()
    };
    store.upsert_edge(&bc).await.unwrap();
    assert_eq!(
        store
            .edges_around(&b.agent_id, std::slice::from_ref(&c.id), 2, 10)
            .await
            .unwrap()
            .len(),
        1
    );
    store.remove_memory(&c.id).await.unwrap();
    assert!(store
        .edges_around(&b.agent_id, std::slice::from_ref(&b.id), 2, 10)
        .await
        .unwrap()
        .is_empty());
}

async fn inserts_are_idempotent_by_id<S: TestStore>(store: &S) {
    let memory = fixture("alice", "retry safe deploy note", t0());
    store.insert(&[stored(&memory)]).await.unwrap();
    let mut changed = memory.clone();
    changed.content = "something else entirely".into();
    let other = fixture("alice", "another deploy note", t0());
    store
        .insert(&[stored(&changed), stored(&other)])
        .await
        .unwrap();
    assert_eq!(store.count().await.unwrap(), 2);
    assert_eq!(
        store.get(&memory.id).await.unwrap().unwrap().content,
        memory.content
    );
    let hits = store
        .keyword_search(&search("alice", "deploy", false))
        .await
        .unwrap();
    assert_eq!(hits.len(), 2);
    assert!(store
        .keyword_search(&search("alice", "entirely", false))
        .await
        .unwrap()
        .is_empty());
}

async fn insert_new_content_skips_what_the_agent_already_holds<S: TestStore>(store: &S) {
    let held = fixture("alice", "Deploy with ./deploy.sh", t0());
    store.insert(&[stored(&held)]).await.unwrap();
    let same = fixture("alice", "deploy with ./deploy.sh.", t0());
    let other_agent = fixture("bob", "Deploy with ./deploy.sh", t0());
    let mut in_project = fixture("alice", "Deploy with ./deploy.sh", t0());
    in_project.project_id = Some(mnemos_actors::projects::ProjectId::parse("apollo").unwrap());
    let mut outdated = fixture("alice", "Deploy with ./deploy.sh", t0());
    outdated.status = MemoryStatus::Superseded;
    let fresh = fixture("alice", "Roll back with ./rollback.sh", t0());
    let skipped = store
        .insert_new_content(&[
            stored(&same),
            stored(&other_agent),
            stored(&in_project),
            stored(&outdated),
            stored(&held),
            stored(&fresh),
        ])
        .await
        .unwrap();
    assert_eq!(
        skipped,
        vec![(same.id.clone(), held.id.clone())],
        "only the same agent's active text in the same project is held already; \
         a retried id is not its own duplicate"
    );
    assert!(store.get(&same.id).await.unwrap().is_none());
    for written in [&other_agent, &in_project, &outdated, &fresh] {
        assert!(
            store.get(&written.id).await.unwrap().is_some(),
            "{}",
            written.content
        );
    }
    assert_eq!(store.count().await.unwrap(), 5);
    // The project's copy is now held too.
    let mut again = fixture("alice", "DEPLOY with ./deploy.sh", t0());
    again.project_id = in_project.project_id.clone();
    assert_eq!(
        store.insert_new_content(&[stored(&again)]).await.unwrap(),
        vec![(again.id.clone(), in_project.id.clone())]
    );
}

/// What the episodic actor's row cache relies on: `stamps_and_memories` answers the
/// stamps of the held ids and the whole rows of the missing ones (also past one
/// statement's worth of ids), skips what does not exist, and a stamp moves with every
/// change of its row: an edit, a reinforcement.
async fn stamps_and_whole_rows<S: TestStore>(
    store: &S,
    held: &[MemoryId],
    missing: &[MemoryId],
) -> (Vec<(MemoryId, RowStamp)>, Vec<Memory>) {
    let (mut stamps, mut rows) = store.stamps_and_memories(held, missing).await.unwrap();
    stamps.sort_by(|a, b| a.0.cmp(&b.0));
    rows.sort_by(|a, b| a.id.cmp(&b.id));
    (stamps, rows)
}

async fn stamps_move_with_every_change_and_whole_rows_come_beside_them<S: TestStore>(store: &S) {
    let a = fixture("alice", "Staging listens on port 5433", t0());
    let b = fixture("alice", "The cache TTL is ten minutes", t0());
    let c = fixture("alice", "Deploys go out on Tuesdays", t0());
    store
        .insert(&[stored(&a), stored(&b), stored(&c)])
        .await
        .unwrap();
    let ghost = MemoryId("0190f0f0-0000-7000-8000-000000000000".into());
    let (stamps, rows) = stamps_and_whole_rows(
        store,
        &[a.id.clone(), ghost.clone()],
        std::slice::from_ref(&c.id),
    )
    .await;
    assert_eq!(stamps, vec![(a.id.clone(), RowStamp::of(&a))]);
    assert_eq!(rows, vec![store.get(&c.id).await.unwrap().unwrap()]);
    // Each list alone.
    assert_eq!(
        stamps_and_whole_rows(store, std::slice::from_ref(&b.id), &[]).await,
        (vec![(b.id.clone(), RowStamp::of(&b))], Vec::new())
    );
    assert_eq!(
        stamps_and_whole_rows(store, &[], &[b.id.clone(), ghost.clone()]).await,
        (Vec::new(), vec![store.get(&b.id).await.unwrap().unwrap()])
    );
    // More ids than one statement binds.
    let many_ghosts = |prefix: &str| -> Vec<MemoryId> {
        (0..300)
            .map(|n| MemoryId(format!("{prefix}-{n}")))
            .collect()
    };
    let mut held = many_ghosts("held");
    held.push(a.id.clone());
    let mut missing = many_ghosts("missing");
    missing.push(b.id.clone());
    let (stamps, rows) = stamps_and_whole_rows(store, &held, &missing).await;
    assert_eq!(stamps, vec![(a.id.clone(), RowStamp::of(&a))]);
    assert_eq!(rows, vec![store.get(&b.id).await.unwrap().unwrap()]);

    // A reinforcement moves the access count, an edit the version, a deletion the row.
    store
        .touch(std::slice::from_ref(&a.id), t0())
        .await
        .unwrap();
    let later = t0() + Duration::hours(1);
    let mut next = b.clone();
    next.content = "The cache TTL is an hour".into();
    next.version = 2;
    next.updated_at = later;
    store
        .update(&next, &version_of(&b, "patch", later), None)
        .await
        .unwrap();
    store.delete(&c.id).await.unwrap();
    let (stamps, _) =
        stamps_and_whole_rows(store, &[a.id.clone(), b.id.clone(), c.id.clone()], &[]).await;
    let mut expected = vec![
        (
            a.id.clone(),
            RowStamp {
                version: a.version,
                access_count: a.access_count + 1,
            },
        ),
        (b.id.clone(), RowStamp::of(&next)),
    ];
    expected.sort_by(|x, y| x.0.cmp(&y.0));
    assert_eq!(stamps, expected);
    assert_ne!(RowStamp::of(&b), RowStamp::of(&next));
}

async fn update_is_compare_and_swap_with_history<S: TestStore>(store: &S) {
    let memory = fixture("alice", "I live in Paris", t0());
    store.insert(&[stored(&memory)]).await.unwrap();
    let later = t0() + Duration::hours(1);
    let mut next = memory.clone();
    next.content = "I live in Tokyo".into();
    next.version = 2;
    next.updated_at = later;
    let previous = version_of(&memory, "patch", later);
    store
        .update(&next, &previous, Some(&[0.0, 1.0]))
        .await
        .unwrap();
    assert_eq!(store.get(&memory.id).await.unwrap().unwrap(), next);
    assert_eq!(
        store.embedding(&memory.id).await.unwrap().unwrap(),
        vec![0.0, 1.0]
    );
    assert_eq!(
        store.history(&memory.id).await.unwrap(),
        vec![previous.clone()]
    );
    // A writer that read version 1 loses.
    let mut stale = memory.clone();
    stale.content = "I live in Rome".into();
    stale.version = 2;
    let error = store.update(&stale, &previous, None).await.unwrap_err();
    assert_eq!(error.code, ErrorCode::Conflict);
    assert_eq!(
        store.get(&memory.id).await.unwrap().unwrap().content,
        "I live in Tokyo"
    );
    // A missing memory is not_found.
    let mut ghost = fixture("alice", "ghost", t0());
    ghost.version = 2;
    let error = store
        .update(&ghost, &version_of(&ghost, "patch", later), None)
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::NotFound);
    // The keyword index follows the content.
    assert!(store
        .keyword_search(&search("alice", "paris", false))
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        ids(&store
            .keyword_search(&search("alice", "tokyo", false))
            .await
            .unwrap()),
        vec![memory.id.clone()]
    );
    // Archiving removes it from keyword search but keeps it and its history.
    let mut archived = next.clone();
    archived.status = MemoryStatus::Archived;
    archived.version = 3;
    let second = version_of(&next, "forget", later);
    store.update(&archived, &second, None).await.unwrap();
    assert!(store
        .keyword_search(&search("alice", "tokyo", false))
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        store.history(&memory.id).await.unwrap(),
        vec![previous, second]
    );
}

/// The deduplication key is the one the record carried (the store never hashes what it
/// is handed), stays through an update that keeps the content, and follows one that
/// changes it.
async fn updates_keep_the_content_hash_in_step_with_the_content<S: TestStore>(store: &S) {
    let memory = fixture("alice", "I live in Paris", t0());
    let carried = StoredMemory::with_hash(memory.clone(), vec![1.0, 0.0], "carried".into());
    store.insert(&[carried]).await.unwrap();
    let found = |hash: String| async move {
        store
            .find_by_content_hash(&agent("alice"), &[hash])
            .await
            .unwrap()
            .into_iter()
            .map(|(_, m)| m.id)
            .collect::<Vec<_>>()
    };
    assert_eq!(found("carried".into()).await, vec![memory.id.clone()]);
    let later = t0() + Duration::hours(1);
    let mut reweighted = memory.clone();
    reweighted.importance = 0.9;
    reweighted.version = 2;
    store
        .update(&reweighted, &version_of(&memory, "patch", later), None)
        .await
        .unwrap();
    assert_eq!(found("carried".into()).await, vec![memory.id.clone()]);
    let mut moved = reweighted.clone();
    moved.content = "I live in Tokyo".into();
    moved.version = 3;
    store
        .update(&moved, &version_of(&reweighted, "patch", later), None)
        .await
        .unwrap();
    assert!(found("carried".into()).await.is_empty());
    assert_eq!(
        found(normalized_hash("i live in   TOKYO")).await,
        vec![memory.id.clone()]
    );
}

async fn list_filters_and_pages<S: TestStore>(store: &S) {
    let mut memories = Vec::new();
    for i in 0..6 {
        let mut m = fixture("alice", &format!("note {i}"), t0() + Duration::days(i));
        if i % 2 == 0 {
            m.tags = vec!["even".into()];
            m.memory_type = MemoryType::Semantic;
        }
        if i == 5 {
            m.status = MemoryStatus::Archived;
        }
        memories.push(m);
    }
    memories.push(fixture("bob", "bob's note", t0()));
    let records: Vec<StoredMemory> = memories.iter().map(stored).collect();
    store.insert(&records).await.unwrap();
    let mut alice_ids: Vec<MemoryId> = memories[..6].iter().map(|m| m.id.clone()).collect();
    alice_ids.sort_by(|a, b| b.0.cmp(&a.0));
    let query = |f: &dyn Fn(&mut ListQuery)| {
        let mut q = ListQuery {
            agent_id: Some(agent("alice")),
            limit: 50,
            ..ListQuery::default()
        };
        f(&mut q);
        q
    };
    let listed = |ms: Vec<Memory>| ms.into_iter().map(|m| m.id).collect::<Vec<_>>();
    assert_eq!(
        listed(store.list(&query(&|_| {})).await.unwrap()),
        alice_ids
    );
    let page = listed(store.list(&query(&|q| q.limit = 2)).await.unwrap());
    assert_eq!(page, alice_ids[..2].to_vec());
    let cursor = page[1].clone();
    let next = listed(
        store
            .list(&query(&|q| {
                q.limit = 2;
                q.cursor = Some(cursor.clone());
            }))
            .await
            .unwrap(),
    );
    assert_eq!(next, alice_ids[2..4].to_vec());
    assert_eq!(
        store
            .list(&query(&|q| q.tag = Some("even".into())))
            .await
            .unwrap()
            .len(),
        3
    );
    assert_eq!(
        store
            .list(&query(&|q| q.memory_type = Some(MemoryType::Episodic)))
            .await
            .unwrap()
            .len(),
        3
    );
    assert_eq!(
        listed(
            store
                .list(&query(&|q| q.status = Some(MemoryStatus::Archived)))
                .await
                .unwrap()
        ),
        vec![memories[5].id.clone()]
    );
    let in_range = store
        .list(&query(&|q| {
            q.occurred = Some(TimeRange {
                start: t0() + Duration::days(1),
                end: t0() + Duration::days(3),
            })
        }))
        .await
        .unwrap();
    assert_eq!(
        listed(in_range),
        vec![memories[2].id.clone(), memories[1].id.clone()]
    );
    // `within` filters by occurrence but keeps id order; the count ignores cursor and
    // page size; every filter agrees with `ListQuery::admits`.
    let within = |q: &mut ListQuery| {
        q.within = Some(TimeRange {
            start: t0() + Duration::days(1),
            end: t0() + Duration::days(4),
        })
    };
    assert_eq!(
        listed(store.list(&query(&within)).await.unwrap()),
        vec![
            memories[3].id.clone(),
            memories[2].id.clone(),
            memories[1].id.clone()
        ]
    );
    assert_eq!(store.count_listed(&query(&within)).await.unwrap(), 3);
    assert_eq!(
        store
            .count_listed(&query(&|q| {
                within(q);
                q.limit = 1;
                q.cursor = Some(memories[3].id.clone());
            }))
            .await
            .unwrap(),
        3
    );
    // Open-ended ranges use chrono's extremes; both stores compare them as bounds.
    let since = |q: &mut ListQuery| {
        q.within = Some(TimeRange {
            start: t0() + Duration::days(4),
            end: chrono::DateTime::<chrono::Utc>::MAX_UTC,
        })
    };
    assert_eq!(store.count_listed(&query(&since)).await.unwrap(), 2);
    let until = |q: &mut ListQuery| {
        q.within = Some(TimeRange {
            start: chrono::DateTime::<chrono::Utc>::MIN_UTC,
            end: t0() + Duration::days(1),
        })
    };
    assert_eq!(store.count_listed(&query(&until)).await.unwrap(), 1);
    let words = |q: &mut ListQuery| q.words = vec!["note".into(), "3".into()];
    assert_eq!(
        listed(store.list(&query(&words)).await.unwrap()),
        vec![memories[3].id.clone()]
    );
    assert_eq!(store.count_listed(&query(&|_| {})).await.unwrap(), 6);
    let summaries = store.agent_summaries().await.unwrap();
    let alice = summaries
        .iter()
        .find(|s| s.agent_id == agent("alice"))
        .expect("alice is listed");
    assert_eq!((alice.memories, alice.active), (6, 5));
    assert!(alice.last_at.is_some());
    assert_eq!(summaries.len(), 2);
}

async fn embeddings_page_in_id_order_of_active_memories<S: TestStore>(store: &S) {
    let mut memories: Vec<Memory> = (0..7)
        .map(|i| {
            fixture(
                if i % 2 == 0 { "alice" } else { "bob" },
                &format!("m{i}"),
                t0(),
            )
        })
        .collect();
    memories[3].status = MemoryStatus::Archived;
    memories[4].shared = true;
    memories[4].memory_type = MemoryType::Procedural;
    memories[4].session_id = Some(SessionId::parse("s9").unwrap());
    store
        .insert(&memories.iter().map(stored).collect::<Vec<_>>())
        .await
        .unwrap();
    let mut expected: Vec<&Memory> = memories
        .iter()
        .filter(|m| m.status == MemoryStatus::Active)
        .collect();
    expected.sort_by(|a, b| a.id.0.cmp(&b.id.0));
    let mut seen = Vec::new();
    let mut after: Option<MemoryId> = None;
    loop {
        let page = store.embeddings_page(after.as_ref(), 4).await.unwrap();
        if page.is_empty() {
            break;
        }
        after = page.last().map(|r| r.id.clone());
        seen.extend(page);
    }
    assert_eq!(
        seen.iter().map(|r| r.id.clone()).collect::<Vec<_>>(),
        expected.iter().map(|m| m.id.clone()).collect::<Vec<_>>()
    );
    let shared = seen.iter().find(|r| r.id == memories[4].id).unwrap();
    assert!(shared.shared);
    assert_eq!(shared.memory_type, MemoryType::Procedural);
    assert_eq!(shared.agent_id, agent("alice"));
    assert_eq!(shared.vector, vec![1.0, 0.0]);
    assert_eq!(
        shared.session_id, memories[4].session_id,
        "recall's session order"
    );
    assert!(seen
        .iter()
        .filter(|r| r.id != memories[4].id)
        .all(|r| r.session_id.is_none()));
}

async fn leases_let_one_holder_claim_each_slot<S: TestStore>(store: &S) {
    let slot = t0();
    let now = t0();
    let until = now + Duration::minutes(10);
    assert!(store
        .try_acquire_lease("sleep", "p1", slot, until, now)
        .await
        .unwrap());
    // The same slot is claimed once, by anyone.
    assert!(!store
        .try_acquire_lease("sleep", "p1", slot, until, now)
        .await
        .unwrap());
    assert!(!store
        .try_acquire_lease("sleep", "p2", slot, until, now)
        .await
        .unwrap());
    // A later slot while p1's claim is live: only p1.
    let slot2 = slot + Duration::hours(1);
    assert!(!store
        .try_acquire_lease("sleep", "p2", slot2, until, now)
        .await
        .unwrap());
    assert!(store.renew_lease("sleep", "p1", until).await.unwrap());
    assert!(!store.renew_lease("sleep", "p2", until).await.unwrap());
    store.release_lease("sleep", "p1", now).await.unwrap();
    assert!(store
        .try_acquire_lease("sleep", "p2", slot2, until, now)
        .await
        .unwrap());
    // After expiry another holder may take the next slot.
    let slot3 = slot2 + Duration::hours(1);
    assert!(!store
        .try_acquire_lease("sleep", "p1", slot3, until, now)
        .await
        .unwrap());
    assert!(store
        .try_acquire_lease("sleep", "p1", slot3, until + Duration::hours(1), until)
        .await
        .unwrap());
    // Jobs are independent.
    assert!(store
        .try_acquire_lease("archive", "p2", slot, until, now)
        .await
        .unwrap());
}

async fn consolidation_commits_whole_or_not_at_all<S: TestStore>(store: &S) {
    let now = t0();
    let a = fixture("alice", "met Sam at the cafe", now);
    let b = fixture("alice", "met Sam at the park", now);
    let c = fixture("alice", "Sam plays the cello", now);
    store
        .insert(&[stored(&a), stored(&b), stored(&c)])
        .await
        .unwrap();
    let derived_of = |content: &str| {
        let mut derived = fixture("alice", content, now);
        derived.memory_type = MemoryType::Semantic;
        derived
    };
    let edges = |derived: &Memory, sources: &[&Memory]| -> Vec<Association> {
        sources
            .iter()
            .map(|source| Association {
                agent_id: agent("alice"),
                from_id: derived.id.clone(),
                to_id: source.id.clone(),
                relation: "derived_from".into(),
                weight: 1.0,
                created_at: now,
            })
            .collect()
    };
    let raised = |m: &Memory| {
        let mut next = m.clone();
        next.consolidation_level = 1.0;
        next.version = m.version + 1;
        (next, version_of(m, "consolidated", now))
    };
    // b changed since it was read: nothing of the batch is written, not even the
    // cluster of c that read fresh.
    let mut b_now = b.clone();
    b_now.content = "met Sam at the park on Sunday".into();
    b_now.version = 2;
    store
        .update(&b_now, &version_of(&b, "patch", now), None)
        .await
        .unwrap();
    let music = derived_of("Sam is a musician");
    let failed = derived_of("Sam is a friend");
    let error = store
        .commit_consolidation(&[
            ConsolidationCommit {
                derived: stored(&music),
                edges: edges(&music, &[&c]),
                sources: vec![raised(&c)],
            },
            ConsolidationCommit {
                derived: stored(&failed),
                edges: edges(&failed, &[&a, &b]),
                sources: vec![raised(&a), raised(&b)],
            },
        ])
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::Conflict);
    assert!(store.get(&failed.id).await.unwrap().is_none());
    assert!(store.get(&music.id).await.unwrap().is_none());
    assert_eq!(store.get(&a.id).await.unwrap().unwrap(), a);
    assert_eq!(store.get(&c.id).await.unwrap().unwrap(), c);
    assert!(store.history(&a.id).await.unwrap().is_empty());
    assert!(store.history(&c.id).await.unwrap().is_empty());
    assert!(store
        .edges_around(&agent("alice"), std::slice::from_ref(&c.id), 1, 10)
        .await
        .unwrap()
        .is_empty());
    // With fresh reads the batch commits whole.
    let derived = derived_of("Sam is a friend");
    store
        .commit_consolidation(&[
            ConsolidationCommit {
                derived: stored(&derived),
                edges: edges(&derived, &[&a, &b_now]),
                sources: vec![raised(&a), raised(&b_now)],
            },
            ConsolidationCommit {
                derived: stored(&music),
                edges: edges(&music, &[&c]),
                sources: vec![raised(&c)],
            },
        ])
        .await
        .unwrap();
    assert!(store.get(&music.id).await.unwrap().is_some());
    let raised_c = store.get(&c.id).await.unwrap().unwrap();
    assert_eq!(raised_c.consolidation_level, 1.0);
    assert_eq!(raised_c.version, c.version + 1);
    assert_eq!(store.history(&c.id).await.unwrap().len(), 1);
    // One source in two clusters of a batch: conflict, and nothing written.
    let twice = derived_of("Sam again");
    let raised_c_now = store.get(&c.id).await.unwrap().unwrap();
    let error = store
        .commit_consolidation(&[
            ConsolidationCommit {
                derived: stored(&twice),
                edges: Vec::new(),
                sources: vec![raised(&raised_c_now)],
            },
            ConsolidationCommit {
                derived: stored(&derived_of("Sam once more")),
                edges: Vec::new(),
                sources: vec![raised(&raised_c_now)],
            },
        ])
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::Conflict);
    assert!(store.get(&twice.id).await.unwrap().is_none());
    assert_eq!(store.get(&c.id).await.unwrap().unwrap(), raised_c_now);
    // A source that is gone: not found, and nothing written.
    let ghost = fixture("alice", "never stored", now);
    let orphan = derived_of("about nothing");
    let error = store
        .commit_consolidation(&[ConsolidationCommit {
            derived: stored(&orphan),
            edges: Vec::new(),
            sources: vec![raised(&ghost)],
        }])
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::NotFound);
    assert!(store.get(&orphan.id).await.unwrap().is_none());
    // A raised source is still found by its words (its keyword row was kept).
    let hits = store
        .keyword_search(&search("alice", "cello", false))
        .await
        .unwrap();
    assert!(hits.iter().any(|(id, _)| id == &c.id), "{hits:?}");
    assert!(store.get(&derived.id).await.unwrap().is_some());
    assert_eq!(
        store.get(&a.id).await.unwrap().unwrap().consolidation_level,
        1.0
    );
    assert_eq!(
        store
            .edges_around(&agent("alice"), std::slice::from_ref(&derived.id), 1, 10)
            .await
            .unwrap()
            .len(),
        2
    );
}

async fn session_archive_is_idempotent_and_idle_sessions_follow_it<S: TestStore>(store: &S) {
    let session = SessionId::parse("chat-1").unwrap();
    let mut first = fixture("alice", "asked about trains", t0());
    first.session_id = Some(session.clone());
    let mut second = fixture("alice", "booked a ticket", t0() + Duration::minutes(5));
    second.session_id = Some(session.clone());
    store
        .insert(&[stored(&first), stored(&second)])
        .await
        .unwrap();
    let idle = store
        .idle_sessions(t0() + Duration::hours(2), 10)
        .await
        .unwrap();
    assert_eq!(idle.len(), 1);
    assert_eq!(idle[0].session_id, session);
    assert_eq!(idle[0].first_at, t0());
    assert_eq!(idle[0].last_at, t0() + Duration::minutes(5));
    assert_eq!(idle[0].last_activity, t0() + Duration::minutes(5));
    assert!(store.idle_sessions(t0(), 10).await.unwrap().is_empty());
    assert_eq!(
        store
            .session_memories(&agent("alice"), &session)
            .await
            .unwrap()
            .iter()
            .map(|m| m.id.clone())
            .collect::<Vec<_>>(),
        vec![first.id.clone(), second.id.clone()]
    );
    let summary = |text: &str| {
        let mut summary = fixture("alice", text, t0() + Duration::hours(3));
        summary.session_id = Some(session.clone());
        summary.tags = vec!["archive_summary".into()];
        summary
    };
    let archive = |memory: &Memory| SessionArchive {
        summary: stored(memory),
        agent_id: agent("alice"),
        session_id: session.clone(),
        archived_through: idle[0].last_activity,
    };
    let one = summary("trains and a ticket");
    assert!(store.commit_session_archive(&archive(&one)).await.unwrap());
    let two = summary("again");
    assert!(!store.commit_session_archive(&archive(&two)).await.unwrap());
    assert!(store.get(&two.id).await.unwrap().is_none());
    // The summary is not activity: the session stays archived.
    assert!(store
        .idle_sessions(t0() + Duration::days(1), 10)
        .await
        .unwrap()
        .is_empty());
}

async fn purge_removes_only_memories_forgotten_long_enough<S: TestStore>(store: &S) {
    let old = fixture("alice", "forgotten long ago", t0());
    let kept = fixture("alice", "archived for another reason", t0());
    let recent = fixture("alice", "forgotten yesterday", t0());
    store
        .insert(&[stored(&old), stored(&kept), stored(&recent)])
        .await
        .unwrap();
    let archive = |m: &Memory, reason: &str, at: DateTime<Utc>| {
        let mut next = m.clone();
        next.status = MemoryStatus::Archived;
        next.version = 2;
        next.updated_at = at;
        (next, version_of(m, reason, at))
    };
    for (next, previous) in [
        archive(&old, "forget_decay", t0()),
        archive(&kept, "consolidated", t0()),
        archive(&recent, "forget", t0() + Duration::days(30)),
    ] {
        store.update(&next, &previous, None).await.unwrap();
    }
    let purged = store
        .purge_forgotten(&agent("alice"), t0() + Duration::days(10))
        .await
        .unwrap();
    assert_eq!(purged, vec![old.id.clone()]);
    assert!(store.get(&old.id).await.unwrap().is_none());
    assert!(store.history(&old.id).await.unwrap().is_empty());
    assert_eq!(store.count().await.unwrap(), 2);
    assert!(store
        .purge_forgotten(&agent("bob"), t0() + Duration::days(100))
        .await
        .unwrap()
        .is_empty());
}

async fn touch_find_by_hash_neighbours_and_runs<S: TestStore>(store: &S) {
    let session = SessionId::parse("s").unwrap();
    let turns: Vec<Memory> = (0..5)
        .map(|i| {
            let mut m = fixture(
                "alice",
                &format!("Turn number {i}!"),
                t0() + Duration::seconds(i),
            );
            m.session_id = Some(session.clone());
            m
        })
        .collect();
    store
        .insert(&turns.iter().map(stored).collect::<Vec<_>>())
        .await
        .unwrap();
    let mut sorted: Vec<MemoryId> = turns.iter().map(|m| m.id.clone()).collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let middle = turns.iter().find(|m| m.id == sorted[2]).unwrap();
    assert_eq!(
        store.session_neighbours(middle, 1).await.unwrap(),
        vec![sorted[1].clone(), sorted[3].clone()]
    );
    assert_eq!(
        store.session_neighbours(middle, 5).await.unwrap(),
        vec![
            sorted[1].clone(),
            sorted[0].clone(),
            sorted[3].clone(),
            sorted[4].clone()
        ]
    );
    // Several seeds at once: (seed, neighbour) pairs in the order of the seeds, each
    // seed's as `session_neighbours` answers them; a seed without a session has none.
    let first = turns.iter().find(|m| m.id == sorted[0]).unwrap();
    let mut sessionless = middle.clone();
    sessionless.id = MemoryId("zz-no-session".into());
    sessionless.session_id = None;
    let seeds = vec![middle.clone(), sessionless, first.clone()];
    for radius in [1, 5] {
        let mut expected = Vec::new();
        for seed in &seeds {
            for neighbour in store.session_neighbours(seed, radius).await.unwrap() {
                expected.push((seed.id.clone(), neighbour));
            }
        }
        assert_eq!(
            store.session_neighbours_of(&seeds, radius).await.unwrap(),
            expected,
            "radius {radius}"
        );
    }
    assert_eq!(
        store.session_neighbours_of(&seeds, 1).await.unwrap(),
        vec![
            (sorted[2].clone(), sorted[1].clone()),
            (sorted[2].clone(), sorted[3].clone()),
            (sorted[0].clone(), sorted[1].clone()),
        ]
    );
    assert!(store
        .session_neighbours_of(&seeds[1..2], 5)
        .await
        .unwrap()
        .is_empty());
    // The in-process session order (the keyword index, loaded from the store's
    // embeddings pages as the vector actor loads it) answers the same pairs.
    let mut pages = Vec::new();
    let mut after: Option<MemoryId> = None;
    loop {
        let page = store.embeddings_page(after.as_ref(), 2).await.unwrap();
        let Some(last) = page.last() else { break };
        after = Some(last.id.clone());
        pages.push(page);
    }
    let index = mnemos_actors::store::keywords::KeywordIndex::new();
    index.load(pages);
    let session_seeds: Vec<_> = seeds
        .iter()
        .filter_map(mnemos_actors::store::keywords::SessionSeed::of)
        .collect();
    for radius in [1, 2, 5] {
        assert_eq!(
            index.session_neighbours(&session_seeds, radius),
            Some(store.session_neighbours_of(&seeds, radius).await.unwrap()),
            "radius {radius}"
        );
    }
    // Touch counts each id once and never moves last access backwards.
    let later = t0() + Duration::hours(1);
    store
        .touch(
            &[
                turns[0].id.clone(),
                turns[0].id.clone(),
                turns[1].id.clone(),
            ],
            later,
        )
        .await
        .unwrap();
    store.touch(&[turns[0].id.clone()], t0()).await.unwrap();
    let touched = store.get(&turns[0].id).await.unwrap().unwrap();
    assert_eq!(touched.access_count, 2);
    assert_eq!(touched.last_accessed_at, later);
    // Exact duplicates are found by normalised hash, among active memories of the agent.
    let hash = normalized_hash("turn NUMBER 3");
    let found = store
        .find_by_content_hash(&agent("alice"), &[hash.clone(), "nothing".into()])
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].0, hash);
    assert_eq!(found[0].1.id, turns[3].id);
    assert!(store
        .find_by_content_hash(&agent("bob"), &[hash])
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        store.agent_memories(&agent("alice")).await.unwrap().len(),
        5
    );
    // The run log, newest first.
    for (i, who) in ["alice", "bob", "alice"].iter().enumerate() {
        store
            .record_run(&ConsolidationRun {
                id: format!("run-{i}"),
                agent_id: Some(agent(who)),
                trigger: "manual".into(),
                started_at: t0() + Duration::minutes(i as i64),
                finished_at: t0() + Duration::minutes(i as i64 + 1),
                processed: 3,
                consolidated: 1,
                forgotten: 0,
                new_semantic: 1,
                new_procedural: 0,
                report: serde_json::json!({"clusters": [i]}),
            })
            .await
            .unwrap();
    }
    let runs = store.runs(Some(&agent("alice")), 10).await.unwrap();
    assert_eq!(
        runs.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        vec!["run-2", "run-0"]
    );
    assert_eq!(runs[0].report, serde_json::json!({"clusters": [2]}));
    assert_eq!(store.runs(None, 2).await.unwrap().len(), 2);
}

async fn keyword_search_filters_status_time_and_follows_updates<S: TestStore>(store: &S) {
    let early = fixture("alice", "hiking trip to the alps", t0());
    let late = fixture("alice", "hiking boots bought", t0() + Duration::days(10));
    let mut archived = fixture("alice", "hiking is fun", t0());
    archived.status = MemoryStatus::Archived;
    store
        .insert(&[stored(&early), stored(&late), stored(&archived)])
        .await
        .unwrap();
    let all = store
        .keyword_search(&search("alice", "hiking", false))
        .await
        .unwrap();
    assert_eq!(all.len(), 2);
    let mut ranged = search("alice", "hiking", false);
    ranged.occurred = Some(TimeRange {
        start: t0() + Duration::days(5),
        end: t0() + Duration::days(20),
    });
    assert_eq!(
        ids(&store.keyword_search(&ranged).await.unwrap()),
        vec![late.id.clone()]
    );
    // "Before X" starts at chrono's earliest instant (`policy::time`).
    let mut before = search("alice", "hiking", false);
    before.occurred = Some(TimeRange {
        start: DateTime::<Utc>::MIN_UTC,
        end: t0() + Duration::days(5),
    });
    assert_eq!(
        ids(&store.keyword_search(&before).await.unwrap()),
        vec![early.id.clone()]
    );
    let listed = store
        .list(&ListQuery {
            agent_id: Some(agent("alice")),
            limit: 10,
            occurred: Some(TimeRange {
                start: t0() + Duration::days(5),
                end: Utc.with_ymd_and_hms(9999, 12, 31, 0, 0, 0).unwrap(),
            }),
            ..ListQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(
        listed.into_iter().map(|m| m.id).collect::<Vec<_>>(),
        vec![late.id.clone()]
    );
    let mut limited = search("alice", "hiking", false);
    limited.limit = 1;
    assert_eq!(store.keyword_search(&limited).await.unwrap().len(), 1);
    assert!(store.delete(&late.id).await.unwrap());
    assert_eq!(
        ids(&store
            .keyword_search(&search("alice", "hiking", false))
            .await
            .unwrap()),
        vec![early.id.clone()]
    );
}

async fn session_log_appends_and_compacts_once<S: TestStore>(store: &S) {
    let alice = agent("alice");
    let chat = SessionId::parse("chat").unwrap();
    assert!(store.session_record(&alice, &chat).await.unwrap().is_none());
    let roles = [MessageRole::User, MessageRole::Assistant];
    for i in 0..4u32 {
        let message = store
            .append_session_message(
                &alice,
                &chat,
                roles[i as usize % 2],
                &format!("message {i}"),
                10 + i,
                t0() + Duration::seconds(i64::from(i)),
            )
            .await
            .unwrap();
        assert_eq!(message.seq, u64::from(i) + 1);
    }
    // A message said earlier than the newest does not move last_message_at back.
    store
        .append_session_message(&alice, &chat, MessageRole::User, "late", 5, t0())
        .await
        .unwrap();
    let record = store.session_record(&alice, &chat).await.unwrap().unwrap();
    // An agent's sessions list the same record, the most recently spoken first.
    let later = SessionId::parse("later").unwrap();
    store
        .append_session_message(
            &alice,
            &later,
            MessageRole::User,
            "hi",
            1,
            t0() + Duration::hours(1),
        )
        .await
        .unwrap();
    let sessions = store.agent_sessions(&alice, 10).await.unwrap();
    assert_eq!(sessions.len(), 2);
    assert_eq!(sessions[0].session_id, later);
    assert_eq!(sessions[1], record);
    assert_eq!(store.agent_sessions(&alice, 1).await.unwrap().len(), 1);
    assert!(store
        .agent_sessions(&agent("nobody"), 10)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(record.last_seq, 5);
    assert_eq!(record.compacted_through, 0);
    assert_eq!(record.pending_tokens, 10 + 11 + 12 + 13 + 5);
    assert_eq!(record.created_at, t0());
    assert_eq!(record.last_message_at, t0() + Duration::seconds(3));
    assert_eq!(record.summary, None);
    let after = store
        .session_messages_after(&alice, &chat, 3)
        .await
        .unwrap();
    assert_eq!(after.iter().map(|m| m.seq).collect::<Vec<_>>(), vec![4, 5]);
    assert_eq!(after[0].role, MessageRole::Assistant);
    assert_eq!(after[0].content, "message 3");
    assert_eq!(after[0].tokens, 13);
    assert_eq!(after[0].at, t0() + Duration::seconds(3));
    // Another agent's session of the same name is another session.
    assert!(store
        .session_record(&agent("bob"), &chat)
        .await
        .unwrap()
        .is_none());
    let compaction = |archive: &Memory, through: u64| SessionCompaction {
        archive: stored(archive),
        agent_id: alice.clone(),
        session_id: chat.clone(),
        through,
        summary: format!("summary through {through}"),
        at: t0() + Duration::seconds(2),
    };
    let mut archive = fixture("alice", "message 0 message 1 message 2", t0());
    archive.tags = vec!["archive_summary".into()];
    assert!(store
        .commit_session_compaction(&compaction(&archive, 3))
        .await
        .unwrap());
    let again = fixture("alice", "the same messages again", t0());
    assert!(!store
        .commit_session_compaction(&compaction(&again, 3))
        .await
        .unwrap());
    assert!(store.get(&again.id).await.unwrap().is_none());
    // Not past the end of the log.
    let beyond = fixture("alice", "messages never posted", t0());
    assert!(!store
        .commit_session_compaction(&compaction(&beyond, 9))
        .await
        .unwrap());
    let record = store.session_record(&alice, &chat).await.unwrap().unwrap();
    assert_eq!(record.compacted_through, 3);
    assert_eq!(record.compactions, 1);
    assert_eq!(record.pending_tokens, 13 + 5);
    assert_eq!(record.summary.as_deref(), Some("summary through 3"));
    assert_eq!(record.summarized_at, Some(t0() + Duration::seconds(2)));
    assert!(store.get(&archive.id).await.unwrap().is_some());
    // The log keeps every message.
    assert_eq!(
        store
            .session_messages_after(&alice, &chat, 0)
            .await
            .unwrap()
            .len(),
        5
    );
}

async fn kv_namespaces_evict_in_use_order<S: TestStore>(store: &S) {
    use serde_json::json;
    let ns = NamespaceName::parse("team").unwrap();
    let node = agent("n1");
    let now = t0();
    assert!(store.kv_namespaces().await.unwrap().is_empty());
    store.kv_configure(&ns, 3, now).await.unwrap();
    let other = NamespaceName::stored("acme/team").unwrap();
    store.kv_configure(&other, 3, now).await.unwrap();
    assert_eq!(
        store.kv_namespaces().await.unwrap(),
        vec![other, ns.clone()]
    );
    for key in ["a", "b", "c"] {
        store
            .kv_put(&simple_put(&ns, &node, key, json!(key), now))
            .await
            .unwrap();
    }
    store.kv_get(&ns, "a", now).await.unwrap();
    let outcome = store
        .kv_put(&simple_put(
            &ns,
            &node,
            "d",
            json!({"n": 4, "x": [1.5, "y"]}),
            now,
        ))
        .await
        .unwrap();
    assert_eq!(outcome.evicted, vec!["b".to_string()]);
    assert!(outcome.created);
    let listed = store.kv_list(&ns, None, 10, now).await.unwrap();
    assert_eq!(
        listed.iter().map(|e| e.key.as_str()).collect::<Vec<_>>(),
        vec!["d", "a", "c"]
    );
    assert_eq!(listed[0].value, json!({"n": 4, "x": [1.5, "y"]}));
    let stats = store.kv_stats(&ns, now).await.unwrap();
    assert_eq!(
        (stats.entries, stats.hits, stats.evictions, stats.puts),
        (3, 1, 1, 4)
    );
    let mut tagged = simple_put(&ns, &node, "t", json!({"note": "deploy friday"}), now);
    tagged.tags = vec!["plan".into()];
    store.kv_put(&tagged).await.unwrap();
    let listed = store.kv_list(&ns, Some("plan"), 10, now).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].tags, vec!["plan".to_string()]);
    let found = store.kv_search(&ns, "deploy", 10, now).await.unwrap();
    assert_eq!(found[0].0.key, "t");
    let accented = simple_put(&ns, &node, "u", json!("École du Louvre"), now);
    store.kv_put(&accented).await.unwrap();
    let found = store.kv_search(&ns, "école", 10, now).await.unwrap();
    assert_eq!(found[0].0.key, "u");
    assert!(store.kv_get(&ns, "zzz", now).await.is_err());
    assert_eq!(store.kv_stats(&ns, now).await.unwrap().misses, 1);
    // Expired entries are gone; a delete of a missing key is not_found.
    let mut brief = simple_put(&ns, &node, "brief", json!(1), now);
    brief.expires_at = Some(now + Duration::seconds(10));
    store.kv_put(&brief).await.unwrap();
    assert!(store
        .kv_get(&ns, "brief", now + Duration::seconds(11))
        .await
        .is_err());
    store.kv_delete(&ns, "t", now).await.unwrap();
    assert_eq!(
        store.kv_delete(&ns, "t", now).await.unwrap_err().code,
        ErrorCode::NotFound
    );
    // Projects and their sessions.
    let project = mnemos_actors::projects::Project {
        agent_id: agent("alice"),
        project_id: mnemos_actors::projects::ProjectId::parse("apollo").unwrap(),
        name: "Apollo".into(),
        isolated: true,
        created_at: now,
        updated_at: now,
    };
    assert_eq!(store.upsert_project(&project).await.unwrap(), project);
    let session = SessionId::parse("s1").unwrap();
    store
        .attach_session(&project.agent_id, &project.project_id, &session, now)
        .await
        .unwrap();
    assert_eq!(
        store
            .session_project(&project.agent_id, &session)
            .await
            .unwrap(),
        Some(project.project_id.clone())
    );
    let detail = store
        .project(&project.agent_id, &project.project_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(detail.sessions, vec![session.clone()]);
    assert_eq!(store.projects(&project.agent_id).await.unwrap().len(), 1);
    assert_eq!(
        store
            .isolated_projects(&[
                (project.agent_id.clone(), project.project_id.clone()),
                (agent("bob"), project.project_id.clone()),
            ])
            .await
            .unwrap(),
        vec![(project.agent_id.clone(), project.project_id.clone())]
    );
    // A memory remembers its project; listing filters by it.
    let mut inside = fixture("alice", "moon landing plan", now);
    inside.project_id = Some(project.project_id.clone());
    let outside = fixture("alice", "grocery list", now);
    store
        .insert(&[stored(&inside), stored(&outside)])
        .await
        .unwrap();
    assert_eq!(store.get(&inside.id).await.unwrap().unwrap(), inside);
    let listed = store
        .list(&ListQuery {
            agent_id: Some(agent("alice")),
            project_id: Some(project.project_id.clone()),
            limit: 10,
            ..ListQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(
        listed.into_iter().map(|m| m.id).collect::<Vec<_>>(),
        vec![inside.id.clone()]
    );
}

async fn outbox_records_every_change_in_order<S: TestStore>(store: &S) {
    assert_eq!(store.outbox_bounds().await.unwrap().head, 0);
    let a = fixture("alice", "first", t0());
    let mut b = fixture("alice", "second", t0());
    b.shared = true;
    b.session_id = Some(SessionId::parse("s").unwrap());
    store.insert(&[stored(&a), stored(&b)]).await.unwrap();
    let edge = Association {
        agent_id: agent("alice"),
        from_id: a.id.clone(),
        to_id: b.id.clone(),
        relation: "related_to".into(),
        weight: 0.5,
        created_at: t0(),
    };
    store.upsert_edge(&edge).await.unwrap();
    // Reinforcement is not projected.
    store
        .touch(std::slice::from_ref(&a.id), t0())
        .await
        .unwrap();
    let mut archived = a.clone();
    archived.status = MemoryStatus::Archived;
    archived.version = 2;
    store
        .update(&archived, &version_of(&a, "forget", t0()), None)
        .await
        .unwrap();
    store.delete(&b.id).await.unwrap();
    let entries = store.outbox_after(0, 100).await.unwrap();
    let seqs: Vec<u64> = entries.iter().map(|e| e.seq).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    let changes: Vec<&ProjectedChange> = entries.iter().map(|e| &e.change).collect();
    assert_eq!(changes.len(), 6, "{changes:?}");
    assert!(matches!(changes[0], ProjectedChange::UpsertMemory { id, .. } if *id == a.id));
    match changes[1] {
        ProjectedChange::UpsertMemory {
            id,
            shared,
            session_id,
            memory_type,
            status,
            ..
        } => {
            assert_eq!(id, &b.id);
            assert!(*shared);
            assert_eq!(session_id.as_deref(), Some("s"));
            assert_eq!(memory_type, "episodic");
            assert_eq!(status, "active");
        }
        other => panic!("{other:?}"),
    }
    assert!(
        matches!(changes[2], ProjectedChange::UpsertEdge { weight, relation, .. } if *weight == 0.5 && relation == "related_to")
    );
    assert!(
        matches!(changes[3], ProjectedChange::UpsertMemory { id, status, .. } if *id == a.id && status == "archived")
    );
    // Deleting b removes its edge too (in either order).
    assert!(changes[4..]
        .iter()
        .any(|c| matches!(c, ProjectedChange::DeleteMemory { id, .. } if *id == b.id)));
    assert!(changes[4..]
        .iter()
        .any(|c| matches!(c, ProjectedChange::DeleteEdge { .. })));
    let bounds = store.outbox_bounds().await.unwrap();
    assert_eq!(bounds.oldest, Some(seqs[0]));
    assert_eq!(bounds.head, *seqs.last().unwrap());
    assert_eq!(store.trim_outbox(seqs[2]).await.unwrap(), 3);
    let bounds = store.outbox_bounds().await.unwrap();
    assert_eq!(bounds.oldest, Some(seqs[3]));
    assert_eq!(bounds.head, *seqs.last().unwrap());
    assert_eq!(store.outbox_after(seqs[3], 10).await.unwrap().len(), 2);
}

/// A corpus with repeated words, titles, accents, shared memories, several agents and
/// lengths, so BM25's idf, length normalisation and tie-breaking all matter.
fn parity_corpus() -> Vec<Memory> {
    let texts = [
        (
            "alice",
            "The deploy pipeline runs cargo build then cargo test",
            false,
        ),
        (
            "alice",
            "Deploy on Fridays is forbidden; deploy on Mondays",
            false,
        ),
        (
            "alice",
            "Lunch at the café near the office was great",
            false,
        ),
        ("alice", "The cafe serves pasta and espresso", false),
        ("alice", "Paris trip: visited the Louvre and a café", false),
        (
            "alice",
            "Rate limit is 1000 requests per minute for the API",
            false,
        ),
        (
            "alice",
            "API keys rotate monthly; the API gateway checks them",
            true,
        ),
        ("alice", "deploy deploy deploy", false),
        ("alice", "Naïve Bayes classifier notes", false),
        ("alice", "naive approach to deploy", false),
        ("bob", "Bob's deploy checklist for the service", false),
        ("bob", "Shared deploy guide with cargo commands", true),
        ("bob", "Shared espresso recipe", true),
        ("bob", "Private notes about pasta", false),
        ("carol", "deploy", false),
        ("carol", "pasta pasta pasta pasta", true),
        ("alice", "Equal words alpha beta", false),
        ("alice", "Equal words beta alpha", false),
        ("alice", "Tie breaker alpha", false),
        ("alice", "Tie breaker alpha", false),
    ];
    let mut corpus: Vec<Memory> = texts
        .iter()
        .enumerate()
        .map(|(i, (who, text, shared))| {
            let mut m = fixture(who, text, t0() + Duration::hours(i as i64));
            m.shared = *shared;
            if i % 5 == 0 {
                m.title = Some(format!("Title {i} deploy"));
            }
            m
        })
        .collect();
    // More occurrences of one term than the in-process index's packed postings hold.
    let heavy = format!("{} espresso", ["pasta"; 300].join(" "));
    corpus.push(fixture(
        "carol",
        &heavy,
        t0() + Duration::hours(texts.len() as i64),
    ));
    corpus
}

fn parity_queries() -> Vec<KeywordQuery> {
    let texts = [
        "how do I deploy?",
        "deploy cargo",
        "cafe",
        "café",
        "pasta espresso",
        "API rate limit",
        "naive",
        "alpha beta",
        "tie breaker alpha",
        "title deploy",
        "nothing matches this",
        "deploy pasta espresso cargo api",
    ];
    let mut queries = Vec::new();
    for who in ["alice", "bob", "carol"] {
        for text in texts {
            for include_shared in [false, true] {
                queries.push(search(who, text, include_shared));
            }
        }
    }
    let mut ranged = search("alice", "deploy", true);
    ranged.occurred = Some(TimeRange {
        start: t0() + Duration::hours(2),
        end: t0() + Duration::hours(12),
    });
    queries.push(ranged);
    let mut short = search("alice", "deploy cafe api", true);
    short.limit = 3;
    queries.push(short);
    queries
}

/// Insert the corpus, change it (update, archive, delete), and answer every query.
async fn parity_answers<S: TestStore>(store: &S, corpus: &[Memory]) -> Vec<Vec<(MemoryId, f64)>> {
    store
        .insert(&corpus.iter().map(stored).collect::<Vec<_>>())
        .await
        .unwrap();
    let later = t0() + Duration::days(1);
    let mut edited = corpus[3].clone();
    edited.content = "The cafe now serves espresso only, no pasta".into();
    edited.version = 2;
    store
        .update(&edited, &version_of(&corpus[3], "patch", later), None)
        .await
        .unwrap();
    let mut archived = corpus[1].clone();
    archived.status = MemoryStatus::Archived;
    archived.version = 2;
    store
        .update(&archived, &version_of(&corpus[1], "forget", later), None)
        .await
        .unwrap();
    store.delete(&corpus[13].id).await.unwrap();
    let mut answers = Vec::new();
    for query in parity_queries() {
        answers.push(store.keyword_search(&query).await.unwrap());
    }
    answers
}

/// `answers` to [`parity_queries`] are `expected`'s: the same memories in the same
/// order, each score equal to within 1e-12 (relative).
fn assert_same_ranking(answers: &[Vec<(MemoryId, f64)>], expected: &[Vec<(MemoryId, f64)>]) {
    let queries = parity_queries();
    assert_eq!(answers.len(), queries.len());
    for ((got, want), query) in answers.iter().zip(expected).zip(&queries) {
        assert_eq!(
            ids(got),
            ids(want),
            "query {:?} (agent {}, shared {})",
            query.text,
            query.agent_id,
            query.include_shared
        );
        for (g, w) in got.iter().zip(want) {
            assert!(
                g.1 == w.1 || (g.1 - w.1).abs() <= 1e-12 * w.1.abs().max(1.0),
                "score of {} for {:?}: {} vs {}",
                g.0,
                query.text,
                g.1,
                w.1
            );
        }
    }
}

/// Keyword search on PostgreSQL answers exactly as SQLite's FTS5: same memories, same
/// order, same scores.
#[tokio::test]
async fn postgres_keyword_ranking_matches_sqlite() {
    let corpus = parity_corpus();
    let (sqlite, _dir) = sqlite_store().await;
    let expected = parity_answers(&sqlite, &corpus).await;
    assert!(expected.iter().filter(|a| !a.is_empty()).count() > 20);
    with_postgres(
        "store::conformance::postgres_keyword_ranking_matches_sqlite",
        |store| async move {
            let answers = parity_answers(&store, &corpus).await;
            assert_same_ranking(&answers, &expected);
        },
    )
    .await;
}

/// Recall's in-process keyword index, loaded the way the vector actor loads it (pages of
/// active embeddings with their text), answers exactly as the SQL stores: same memories,
/// same order, same scores, after updates, an archive and a delete.
#[tokio::test]
async fn in_process_keyword_index_matches_the_sql_stores() {
    use mnemos_actors::store::keywords::KeywordIndex;
    let corpus = parity_corpus();
    let (sqlite, _dir) = sqlite_store().await;
    let expected = parity_answers(&sqlite, &corpus).await;
    assert!(expected.iter().filter(|a| !a.is_empty()).count() > 20);
    let index = KeywordIndex::new();
    let mut pages = Vec::new();
    let mut after: Option<MemoryId> = None;
    // Small pages, so the load crosses page boundaries as a large store does.
    loop {
        let page = sqlite.embeddings_page(after.as_ref(), 7).await.unwrap();
        let Some(last) = page.last() else { break };
        after = Some(last.id.clone());
        pages.push(page);
    }
    index.load(pages);
    assert_eq!(
        index.len(),
        corpus.len() - 2,
        "archived and deleted are not indexed"
    );
    let answers: Vec<Vec<(MemoryId, f64)>> = parity_queries()
        .iter()
        .map(|query| index.search(query).expect("loaded"))
        .collect();
    assert_same_ranking(&answers, &expected);
}

/// Two replicas on one schema: writers queue instead of deadlocking, a compare-and-swap
/// has one winner, a slot one holder, and the keyword statistics stay exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_replicas_on_one_schema_serialise_their_writes() {
    with_postgres(
        "store::conformance::postgres_replicas_on_one_schema_serialise_their_writes",
        |first| async move {
            let schema: String = sqlx::query_scalar("SELECT current_schema()")
                .fetch_one(first.pool())
                .await
                .unwrap();
            let second = PostgresStore::open(&with_schema(&postgres_url(), &schema))
                .await
                .unwrap();
            let replicas = [first.clone(), second.clone()];
            let memories: Vec<Memory> = (0..40)
                .map(|i| fixture("alice", &format!("replica note {i} about deploys"), t0()))
                .collect();
            // Inserts (overlapping batches, in opposite orders) from both replicas at once.
            let mut tasks = Vec::new();
            for (r, store) in replicas.iter().enumerate() {
                for chunk in 0..4 {
                    let store = store.clone();
                    let mut batch: Vec<StoredMemory> = memories
                        [chunk * 10..chunk * 10 + 15.min(40 - chunk * 10)]
                        .iter()
                        .map(stored)
                        .collect();
                    if r == 1 {
                        batch.reverse();
                    }
                    tasks.push(tokio::spawn(async move { store.insert(&batch).await }));
                }
            }
            for task in tasks {
                task.await.unwrap().unwrap();
            }
            assert_eq!(first.count().await.unwrap(), 40);
            // Touches of overlapping sets in opposite orders.
            let all_ids: Vec<MemoryId> = memories.iter().map(|m| m.id.clone()).collect();
            let mut tasks = Vec::new();
            for round in 0..10 {
                let store = replicas[round % 2].clone();
                let mut ids = all_ids.clone();
                if round % 2 == 1 {
                    ids.reverse();
                }
                tasks.push(tokio::spawn(async move {
                    store.touch(&ids, t0() + Duration::minutes(1)).await
                }));
            }
            for task in tasks {
                task.await.unwrap().unwrap();
            }
            assert_eq!(
                first.get(&all_ids[7]).await.unwrap().unwrap().access_count,
                10
            );
            // Ten compare-and-swaps from version 1: one wins, the rest are conflicts.
            let target = memories[0].clone();
            let mut tasks = Vec::new();
            for i in 0..10 {
                let store = replicas[i % 2].clone();
                let target = target.clone();
                tasks.push(tokio::spawn(async move {
                    let mut next = target.clone();
                    next.content = format!("edited by writer {i}");
                    next.version = 2;
                    store
                        .update(&next, &version_of(&target, "patch", t0()), None)
                        .await
                }));
            }
            let mut wins = 0;
            for task in tasks {
                match task.await.unwrap() {
                    Ok(()) => wins += 1,
                    Err(error) => assert_eq!(error.code, ErrorCode::Conflict),
                }
            }
            assert_eq!(wins, 1);
            assert_eq!(first.history(&target.id).await.unwrap().len(), 1);
            // Ten holders race for one slot: one claims it.
            let mut tasks = Vec::new();
            for i in 0..10 {
                let store = replicas[i % 2].clone();
                tasks.push(tokio::spawn(async move {
                    store
                        .try_acquire_lease(
                            "sleep",
                            &format!("p{i}"),
                            t0(),
                            t0() + Duration::minutes(5),
                            t0(),
                        )
                        .await
                        .unwrap()
                }));
            }
            let mut claimed = 0;
            for task in tasks {
                claimed += usize::from(task.await.unwrap());
            }
            assert_eq!(claimed, 1);
            // Concurrent appends to one session from both replicas: gap-free sequence numbers.
            let chat = SessionId::parse("busy").unwrap();
            let mut tasks = Vec::new();
            for i in 0..20 {
                let store = replicas[i % 2].clone();
                let chat = chat.clone();
                tasks.push(tokio::spawn(async move {
                    store
                        .append_session_message(
                            &agent("alice"),
                            &chat,
                            MessageRole::User,
                            &format!("m{i}"),
                            1,
                            t0(),
                        )
                        .await
                        .unwrap()
                        .seq
                }));
            }
            let mut seqs = Vec::new();
            for task in tasks {
                seqs.push(task.await.unwrap());
            }
            seqs.sort_unstable();
            assert_eq!(seqs, (1..=20).collect::<Vec<u64>>());
            // Deletes from both replicas; the statistics match the index exactly.
            let mut tasks = Vec::new();
            for (i, id) in all_ids.iter().take(10).enumerate() {
                let store = replicas[i % 2].clone();
                let id = id.clone();
                tasks.push(tokio::spawn(async move { store.delete(&id).await }));
            }
            for task in tasks {
                assert!(task.await.unwrap().unwrap());
            }
            let (docs, tokens): (i64, i64) =
                sqlx::query_as("SELECT docs, tokens FROM keyword_stats")
                    .fetch_one(first.pool())
                    .await
                    .unwrap();
            let (rows, length): (i64, i64) = sqlx::query_as(
                "SELECT count(*), COALESCE(sum(length), 0)::bigint FROM memory_search",
            )
            .fetch_one(first.pool())
            .await
            .unwrap();
            assert_eq!((docs, tokens), (rows, length));
            assert_eq!(docs, 30);
            second.close().await;
        },
    )
    .await;
}

/// A rebuild records the committed head: while a writer holds a sequence number it has
/// not committed, `outbox_bounds` already counts it, but `outbox_committed_head` waits
/// for the writer (recording the uncommitted number would skip its entry forever).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_committed_head_waits_for_the_writer_in_flight() {
    with_postgres(
        "store::conformance::postgres_committed_head_waits_for_the_writer_in_flight",
        |store| async move {
            let mut writer = store.pool().begin().await.unwrap();
            sqlx::query(
                "SELECT pg_advisory_xact_lock(hashtext('mnemos.write:' || current_schema()))",
            )
            .execute(&mut *writer)
            .await
            .unwrap();
            let seq: i64 = sqlx::query_scalar(
                "INSERT INTO outbox (entity, op, agent_id, memory_id) \
                 VALUES ('memory', 'delete', 'alice', 'm-in-flight') RETURNING seq",
            )
            .fetch_one(&mut *writer)
            .await
            .unwrap();
            assert_eq!(store.outbox_bounds().await.unwrap().head, seq as u64);
            assert!(store.outbox_after(0, 10).await.unwrap().is_empty());
            let reader = store.clone();
            let head = tokio::spawn(async move { reader.outbox_committed_head().await });
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            assert!(
                !head.is_finished(),
                "the committed head must wait for the writer"
            );
            writer.commit().await.unwrap();
            let head = tokio::time::timeout(std::time::Duration::from_secs(10), head)
                .await
                .expect("answers once the writer commits")
                .unwrap()
                .unwrap();
            assert_eq!(head, seq as u64);
            assert_eq!(store.outbox_after(0, 10).await.unwrap().len(), 1);
        },
    )
    .await;
}

/// The keyword index a store found written with another form of terms (an upgrade that
/// changes `keyword_terms`, simulated by recording an old form and dropping the rows)
/// is re-derived on open: a stemmed query then finds what was stored before.
#[tokio::test]
async fn sqlite_rederives_a_keyword_index_of_another_term_form() {
    let (store, dir) = sqlite_store().await;
    let camped = fixture("alice", "We camped by the lake with the kids", t0());
    let other = fixture("alice", "Lunch was pasta", t0());
    store
        .insert(&[stored(&camped), stored(&other)])
        .await
        .unwrap();
    let (recorded,): (String,) =
        sqlx::query_as("SELECT value FROM store_meta WHERE key = 'keyword_terms'")
            .fetch_one(store.pool())
            .await
            .unwrap();
    assert_eq!(recorded, mnemos_actors::text::KEYWORD_TERMS_VERSION);
    sqlx::query("DELETE FROM memories_fts")
        .execute(store.pool())
        .await
        .unwrap();
    sqlx::query("UPDATE store_meta SET value = 'words' WHERE key = 'keyword_terms'")
        .execute(store.pool())
        .await
        .unwrap();
    assert!(store
        .keyword_search(&search("alice", "camping", false))
        .await
        .unwrap()
        .is_empty());
    store.close().await;
    let reopened = SqliteStore::open(&dir.path().join("mnemos.db"))
        .await
        .unwrap();
    let hits = reopened
        .keyword_search(&search("alice", "camping kid", false))
        .await
        .unwrap();
    assert_eq!(ids(&hits), vec![camped.id.clone()]);
    reopened.close().await;
}

/// The same upgrade path on PostgreSQL (its keyword statistics follow the rewrite).
#[tokio::test]
async fn postgres_rederives_a_keyword_index_of_another_term_form() {
    with_postgres(
        "store::conformance::postgres_rederives_a_keyword_index_of_another_term_form",
        |store| async move {
            let camped = fixture("alice", "We camped by the lake with the kids", t0());
            let other = fixture("alice", "Lunch was pasta", t0());
            store
                .insert(&[stored(&camped), stored(&other)])
                .await
                .unwrap();
            let schema: String = sqlx::query_scalar("SELECT current_schema()")
                .fetch_one(store.pool())
                .await
                .unwrap();
            sqlx::query("DELETE FROM memory_search")
                .execute(store.pool())
                .await
                .unwrap();
            sqlx::query("UPDATE store_meta SET value = 'words' WHERE key = 'keyword_terms'")
                .execute(store.pool())
                .await
                .unwrap();
            let reopened = PostgresStore::open(&with_schema(&postgres_url(), &schema))
                .await
                .unwrap();
            let hits = reopened
                .keyword_search(&search("alice", "camping kid", false))
                .await
                .unwrap();
            assert_eq!(ids(&hits), vec![camped.id.clone()]);
            let stats: (i64, i64) =
                sqlx::query_as("SELECT docs, tokens FROM keyword_stats WHERE id = 1")
                    .fetch_one(reopened.pool())
                    .await
                    .unwrap();
            assert_eq!(stats.0, 2, "statistics count the re-derived rows");
            assert!(stats.1 > 0);
            reopened.close().await;
        },
    )
    .await;
}

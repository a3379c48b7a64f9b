//! Runtime-level tests: the library API on in-memory stores, recall's question cache,
//! pseudo-relevance feedback and speaker handling, concurrent identical writes, and supervision.

use std::time::{Duration, Instant};

use super::*;
use crate::supervisor::{ChildHealth, RestartPolicy};

fn config() -> RuntimeConfig {
    RuntimeConfig {
        restart: RestartPolicy {
            initial_backoff: Duration::from_millis(5),
            max_backoff: Duration::from_millis(20),
            max_restarts: 2,
            window: Duration::from_secs(60),
        },
        call_timeout: Duration::from_millis(500),
        ..RuntimeConfig::default()
    }
}

async fn wait_for(
    runtime: &Runtime,
    child: ChildKind,
    state: crate::supervisor::ChildState,
) -> ChildHealth {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let health = runtime.health().await;
        let found = health
            .children
            .into_iter()
            .find(|c| c.child == child)
            .expect("child is reported");
        if found.state == state || Instant::now() > deadline {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_library_api_works_on_in_memory_stores_with_session_windows() {
    let runtime = Runtime::start(RuntimeParts::in_memory(), config())
        .await
        .unwrap();
    let agent = AgentId::parse("lib").unwrap();
    let session = SessionId::parse("s1").unwrap();
    let input = RememberInput {
        content: "the build is green again".into(),
        session_id: Some(session.clone()),
        ..Default::default()
    };
    let stored = runtime.remember(&agent, input).await.unwrap();
    let window = runtime.working_window(&agent, &session).await.unwrap();
    assert_eq!(window.len(), 1);
    assert_eq!(window[0].memory_id, stored.memory.id);
    let found = runtime
        .recall(RecallInput::new(agent.clone(), "is the build green"))
        .await
        .unwrap();
    assert_eq!(found.hits[0].memory.id, stored.memory.id);
    runtime.shutdown().await.unwrap();
}

/// The built-in embedder, counting the texts it is asked to embed.
struct CountingEmbedder {
    /// The model that does the work.
    inner: crate::embedding::BuiltinEmbedder,
    /// Texts embedded so far.
    texts: std::sync::atomic::AtomicUsize,
}

impl crate::embedding::Embedder for CountingEmbedder {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }
    fn dimension(&self) -> usize {
        self.inner.dimension()
    }
    fn embed_batch(&self, texts: &[&str]) -> MemoryResult<Vec<Vec<f32>>> {
        self.texts
            .fetch_add(texts.len(), std::sync::atomic::Ordering::SeqCst);
        self.inner.embed_batch(texts)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recall_without_the_vector_retriever_does_not_embed_the_question() {
    let embedder = Arc::new(CountingEmbedder {
        inner: crate::embedding::BuiltinEmbedder::new(256),
        texts: std::sync::atomic::AtomicUsize::new(0),
    });
    let mut parts = RuntimeParts::in_memory();
    parts.embedder = embedder.clone();
    let mut settings = config();
    settings.recall.vector_weight = 0.0;
    let runtime = Runtime::start(parts, settings).await.unwrap();
    let agent = AgentId::parse("lib").unwrap();
    let stored = runtime
        .remember(
            &agent,
            RememberInput {
                content: "the deploy key rotates every Friday".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let embedded = embedder.texts.load(std::sync::atomic::Ordering::SeqCst);
    assert!(embedded >= 1, "the memory itself is embedded");
    let found = runtime
        .recall(RecallInput::new(
            agent.clone(),
            "when does the deploy key rotate",
        ))
        .await
        .unwrap();
    assert_eq!(found.hits[0].memory.id, stored.memory.id);
    assert!(!found.hits[0].matched_by.contains(&"vector"));
    assert_eq!(
        embedder.texts.load(std::sync::atomic::Ordering::SeqCst),
        embedded
    );
    runtime.shutdown().await.unwrap();
}

/// Recall on in-memory stores with only the keyword retrievers (no vectors, no
/// neighbours), feedback weighted as given.
async fn keyword_only_runtime(feedback_weight: f64) -> Runtime {
    let mut settings = config();
    settings.recall.vector_weight = 0.0;
    settings.recall.neighbour_weight = 0.0;
    settings.recall.entity_weight = 0.0;
    settings.recall.feedback_weight = feedback_weight;
    Runtime::start(RuntimeParts::in_memory(), settings)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feedback_finds_a_memory_that_shares_words_with_the_best_keyword_hits_only() {
    let agent = AgentId::parse("lib").unwrap();
    for weight in [0.2, 0.0] {
        let runtime = keyword_only_runtime(weight).await;
        let mut ids = Vec::new();
        for content in [
            "the deploy lock is held during the payments freeze",
            "nobody may lift the deploy lock until the payments freeze is over",
            "the payments freeze ends on Friday at noon",
            "lunch was pasta today",
        ] {
            let input = RememberInput {
                content: content.into(),
                ..Default::default()
            };
            ids.push(runtime.remember(&agent, input).await.unwrap().memory.id);
        }
        let found = runtime
            .recall(RecallInput::new(agent.clone(), "who holds the deploy lock"))
            .await
            .unwrap();
        let found_ids: Vec<&MemoryId> = found.hits.iter().map(|h| &h.memory.id).collect();
        assert!(found_ids.contains(&&ids[0]) && found_ids.contains(&&ids[1]));
        assert!(!found_ids.contains(&&ids[3]), "lunch shares nothing");
        let freeze = found.hits.iter().find(|h| h.memory.id == ids[2]);
        if weight > 0.0 {
            // "payments" and "freeze" are in both keyword hits and not in the question.
            let freeze = freeze.expect("feedback finds the end of the freeze");
            assert_eq!(freeze.matched_by, vec!["feedback"]);
            assert!(freeze.score < found.hits[0].score);
        } else {
            assert!(freeze.is_none(), "without feedback nothing finds it");
            assert!(found
                .hits
                .iter()
                .all(|h| !h.matched_by.contains(&"feedback")));
        }
        runtime.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_asked_again_is_not_embedded_again() {
    let embedder = Arc::new(CountingEmbedder {
        inner: crate::embedding::BuiltinEmbedder::new(256),
        texts: std::sync::atomic::AtomicUsize::new(0),
    });
    let mut parts = RuntimeParts::in_memory();
    parts.embedder = embedder.clone();
    let runtime = Runtime::start(parts, config()).await.unwrap();
    let agent = AgentId::parse("lib").unwrap();
    runtime
        .remember(
            &agent,
            RememberInput {
                content: "the deploy key rotates every Friday".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let embedded = || embedder.texts.load(std::sync::atomic::Ordering::SeqCst);
    let ask = |question: &str| RecallInput {
        debug: true,
        ..RecallInput::new(agent.clone(), question)
    };
    let first = runtime
        .recall(ask("when does the deploy key rotate"))
        .await
        .unwrap();
    let after_first = embedded();
    let again = runtime
        .recall(ask("when does the deploy key rotate"))
        .await
        .unwrap();
    assert_eq!(
        embedded(),
        after_first,
        "the second asking reuses the vector"
    );
    // Each retriever scores exactly as the first time (the re-ranked score moves with
    // retention, which decays between the two askings).
    let retrievers = |hit: &crate::runtime::RecallHit| {
        let mut components = hit.components.clone().unwrap_or_default();
        components.remove(crate::runtime::RANKED_COMPONENT);
        components
    };
    assert_eq!(
        retrievers(&first.hits[0]),
        retrievers(&again.hits[0]),
        "and scores exactly as the first"
    );
    runtime
        .recall(ask("when does the deploy key rotate next"))
        .await
        .unwrap();
    assert_eq!(embedded(), after_first + 1, "another question is embedded");
    runtime.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn similarity_compares_the_topic_without_the_named_speaker() {
    use crate::embedding::Embedder;
    let parts = RuntimeParts::in_memory();
    let embedder = crate::embedding::BuiltinEmbedder::new(256);
    let content = "Alice: I restore vintage motorbikes on weekends";
    let question = "What does Alice restore on weekends?";
    // The question's vector against the stored one, as the index holds it.
    let cosine = |a: &str, b: &str| {
        let a = embedder.embed(a).unwrap();
        let b = crate::store::memory::as_stored(&embedder.embed(b).unwrap());
        a.iter().zip(&b).map(|(x, y)| f64::from(x * y)).sum::<f64>()
    };
    let expected = cosine("What does restore on weekends?", content);
    assert!((expected - cosine(question, content)).abs() > 1e-3);
    let vector_of =
        |outcome: &RecallOutcome| outcome.hits[0].components.as_ref().unwrap()["vector"];
    let agent = AgentId::parse("lib").unwrap();
    let ask = || RecallInput {
        debug: true,
        ..RecallInput::new(agent.clone(), question)
    };
    let runtime = Runtime::start(parts.clone(), config()).await.unwrap();
    runtime
        .remember(
            &agent,
            RememberInput {
                content: content.into(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    // The speaker is known from the write: the question is embedded without the name.
    let known = runtime.recall(ask()).await.unwrap();
    assert!((vector_of(&known) - expected).abs() < 1e-4, "{known:?}");
    runtime.shutdown().await.unwrap();
    // After a restart the speaker is learnt from the candidates: the same similarity.
    let restarted = Runtime::start(parts, config()).await.unwrap();
    let learnt = restarted.recall(ask()).await.unwrap();
    assert!((vector_of(&learnt) - expected).abs() < 1e-4, "{learnt:?}");
    restarted.shutdown().await.unwrap();
}

/// The contents recall returns for a question naming Alice, with only keyword search
/// and one seed's session neighbours (turns that share no word with the question), the
/// speaker boost as given; after a restart (`restart`), when the speakers are not
/// known yet and recall gathers the expansion early, or without one.
async fn expanded_contents(speaker_boost: f64, restart: bool) -> Vec<String> {
    let mut settings = config();
    settings.recall.vector_weight = 0.0;
    settings.recall.entity_weight = 0.0;
    settings.recall.feedback_weight = 0.0;
    settings.recall.expansion_seeds = 1;
    settings.recall.session_radius = 1;
    settings.recall.speaker_boost = speaker_boost;
    let parts = RuntimeParts::in_memory();
    let mut runtime = Runtime::start(parts.clone(), settings.clone())
        .await
        .unwrap();
    let agent = AgentId::parse("lib").unwrap();
    let mut turns = vec![
        (
            "s1",
            "Bob: the grinder burrs, the grinder burrs, cleaning grinder burrs",
        ),
        ("s1", "sure, Thursday then"),
        ("s2", "Alice: burrs"),
        ("s2", "I ordered a replacement set"),
    ];
    let fillers = [
        "Carol: lunch at noon",
        "Carol: the train was late",
        "Dave: the tests are green",
        "Dave: deploy after standup",
    ];
    for filler in fillers {
        turns.push(("s3", filler));
    }
    for (session, content) in turns {
        runtime
            .remember(
                &agent,
                RememberInput {
                    content: content.into(),
                    session_id: Some(SessionId::parse(session).unwrap()),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
    }
    if restart {
        runtime.shutdown().await.unwrap();
        runtime = Runtime::start(parts, settings).await.unwrap();
        // The session order is back once the keyword index has loaded.
        let deadline = Instant::now() + Duration::from_secs(5);
        while runtime
            .actors()
            .vectors
            .status()
            .await
            .map(|s| s.keyword_memories)
            != Some(8)
        {
            assert!(Instant::now() < deadline, "the keyword index did not load");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    let found = runtime
        .recall(RecallInput::new(
            agent.clone(),
            "What did Alice say about the grinder burrs?",
        ))
        .await
        .unwrap();
    runtime.shutdown().await.unwrap();
    found.hits.into_iter().map(|h| h.memory.content).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expansion_follows_the_seed_the_speaker_boost_chose() {
    for restart in [false, true] {
        // Without the boost Bob's turn is the best hit and seeds the expansion (which
        // recall gathers beside the read-back, by id)...
        let plain = expanded_contents(0.0, restart).await;
        assert!(plain[0].starts_with("Bob: the grinder"), "{plain:?}");
        assert!(
            plain.iter().any(|c| c == "sure, Thursday then"),
            "{plain:?}"
        );
        assert!(
            !plain.iter().any(|c| c.contains("replacement")),
            "{plain:?}"
        );
        // ...with it Alice's is, and the expansion follows Alice's turn instead: not
        // gathered early when Alice is a known speaker; gathered early for Bob's turn
        // after a restart (nobody is known yet), then gathered again.
        let boosted = expanded_contents(3.0, restart).await;
        assert_eq!(boosted[0], "Alice: burrs", "{boosted:?}");
        assert!(
            boosted.iter().any(|c| c == "I ordered a replacement set"),
            "{boosted:?}"
        );
        assert!(
            !boosted.iter().any(|c| c.contains("Thursday")),
            "{boosted:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_identical_writes_store_one_memory() {
    let runtime = Runtime::start(RuntimeParts::in_memory(), config())
        .await
        .unwrap();
    let agent = AgentId::parse("lib").unwrap();
    let mut writes = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let runtime = runtime.clone();
        let agent = agent.clone();
        writes.spawn(async move {
            runtime
                .remember(
                    &agent,
                    RememberInput {
                        content: "The staging database lives on host db-7".into(),
                        ..Default::default()
                    },
                )
                .await
                .unwrap()
        });
    }
    let outcomes = writes.join_all().await;
    let stored: Vec<&RememberOutcome> = outcomes
        .iter()
        .filter(|o| o.deduplicated_into.is_none())
        .collect();
    assert_eq!(stored.len(), 1, "exactly one write inserts");
    for outcome in &outcomes {
        if let Some(target) = &outcome.deduplicated_into {
            assert_eq!(target, &stored[0].memory.id);
        }
    }
    assert_eq!(runtime.inner.content_locks.live(), 0, "locks are forgotten");
    runtime.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_that_keeps_failing_is_left_down_after_its_restart_budget() {
    let runtime = Runtime::start(RuntimeParts::in_memory(), config())
        .await
        .unwrap();
    for round in 1..=2 {
        runtime.inject_fault(ChildKind::Consolidator).unwrap();
        let health = wait_for(
            &runtime,
            ChildKind::Consolidator,
            crate::supervisor::ChildState::Running,
        )
        .await;
        let restarted = async {
            let deadline = Instant::now() + Duration::from_secs(5);
            while runtime
                .health()
                .await
                .children
                .iter()
                .find(|c| c.child == ChildKind::Consolidator)
                .unwrap()
                .restarts
                < round
            {
                assert!(Instant::now() < deadline, "restart {round} never happened");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        restarted.await;
        assert_eq!(health.state, crate::supervisor::ChildState::Running);
    }
    runtime.inject_fault(ChildKind::Consolidator).unwrap();
    let health = wait_for(
        &runtime,
        ChildKind::Consolidator,
        crate::supervisor::ChildState::Failed,
    )
    .await;
    assert_eq!(
        health.state,
        crate::supervisor::ChildState::Failed,
        "{health:?}"
    );
    assert!(health.last_error.unwrap().contains("fault injected"));
    // Requests that need the failed child get a typed error; the rest of the tree serves on.
    let agent = AgentId::parse("lib").unwrap();
    let error = runtime.consolidate(&agent, "test").await.unwrap_err();
    assert_eq!(error.code, crate::error::ErrorCode::BackendUnavailable);
    runtime
        .remember(
            &agent,
            RememberInput {
                content: "still writing".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    runtime.shutdown().await.unwrap();
}

/// The vector actor's start reads the system of record. When both fail together and the
/// vector actor's backoff ends first, its start waits for the episodic actor, which only a
/// free supervisor can restart: the supervisor must not wait for a child's start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_whose_start_waits_for_another_failed_child_does_not_block_its_restart() {
    let call_timeout = Duration::from_secs(3);
    let config = RuntimeConfig {
        restart: RestartPolicy {
            initial_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_secs(1),
            max_restarts: 10,
            window: Duration::from_secs(60),
        },
        call_timeout,
        ..RuntimeConfig::default()
    };
    let runtime = Runtime::start(RuntimeParts::in_memory(), config)
        .await
        .unwrap();
    let restarts = |health: &RuntimeHealth, child: ChildKind| {
        health
            .children
            .iter()
            .find(|c| c.child == child)
            .map(|c| (c.state, c.restarts))
            .unwrap()
    };
    // A first episodic failure, so its next backoff (100 ms) outlasts the vector actor's (50 ms).
    runtime.inject_fault(ChildKind::Episodic).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while restarts(&runtime.health().await, ChildKind::Episodic).1 < 1 {
        assert!(
            Instant::now() < deadline,
            "the first restart never happened"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    runtime.inject_fault(ChildKind::Episodic).unwrap();
    runtime.inject_fault(ChildKind::Vectors).unwrap();
    let agent = AgentId::parse("lib").unwrap();
    let started = Instant::now();
    let written = runtime
        .remember(
            &agent,
            RememberInput {
                content: "written while two children restart".into(),
                ..Default::default()
            },
        )
        .await;
    assert!(
        written.is_ok(),
        "a write during the restarts succeeds within the call timeout: {written:?}"
    );
    assert!(started.elapsed() < call_timeout);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let health = runtime.health().await;
        let (episodic, vectors) = (
            restarts(&health, ChildKind::Episodic),
            restarts(&health, ChildKind::Vectors),
        );
        if episodic == (crate::supervisor::ChildState::Running, 2)
            && vectors == (crate::supervisor::ChildState::Running, 1)
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "both children run again, each restarted once more: {episodic:?} {vectors:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let found = runtime
        .recall(RecallInput::new(
            agent.clone(),
            "written while two children restart",
        ))
        .await
        .unwrap();
    assert_eq!(found.hits.len(), 1, "the write is in the rebuilt index");
    runtime.shutdown().await.unwrap();
}

#[tokio::test]
async fn instants_outside_years_1_to_9999_are_refused_naming_their_field() {
    use chrono::TimeZone;
    let runtime = Runtime::start(RuntimeParts::in_memory(), config())
        .await
        .unwrap();
    let agent = AgentId::parse("mallory").unwrap();
    let too_early = chrono::NaiveDate::from_ymd_opt(-1, 1, 1)
        .unwrap()
        .and_hms_opt(0, 0, 0)
        .unwrap()
        .and_utc();
    let too_late = Utc.with_ymd_and_hms(10000, 1, 1, 0, 0, 0).unwrap();
    for at in [too_early, too_late, DateTime::<Utc>::MIN_UTC] {
        let error = runtime
            .remember(
                &agent,
                RememberInput {
                    content: "staging port".into(),
                    occurred_at: Some(at),
                    ..Default::default()
                },
            )
            .await
            .unwrap_err();
        assert_eq!(error.code, crate::error::ErrorCode::InvalidArgument);
        assert_eq!(error.field.as_deref(), Some("occurred_at"), "{at}");
        let error = runtime
            .remember_batch(
                &agent,
                vec![
                    RememberInput {
                        content: "fine".into(),
                        ..Default::default()
                    },
                    RememberInput {
                        content: "not fine".into(),
                        occurred_at: Some(at),
                        ..Default::default()
                    },
                ],
            )
            .await
            .unwrap_err();
        assert_eq!(error.field.as_deref(), Some("memories[1].occurred_at"));
        let error = runtime
            .post_session_messages(
                &agent,
                &SessionId::parse("s").unwrap(),
                vec![SessionMessageInput {
                    role: crate::model::MessageRole::User,
                    content: "hello".into(),
                    at: Some(at),
                }],
            )
            .await
            .unwrap_err();
        assert_eq!(error.field.as_deref(), Some("messages[0].at"));
        let error = runtime
            .recall(RecallInput {
                now: Some(at),
                ..RecallInput::new(agent.clone(), "staging port")
            })
            .await
            .unwrap_err();
        assert_eq!(error.field.as_deref(), Some("now"));
    }
    assert_eq!(runtime.count().await.unwrap(), 0, "nothing was stored");
    let edge = Utc.with_ymd_and_hms(9999, 12, 31, 23, 59, 59).unwrap();
    runtime
        .remember(
            &agent,
            RememberInput {
                content: "the last second of 9999".into(),
                occurred_at: Some(edge),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    runtime.shutdown().await.unwrap();
}

#[tokio::test]
async fn text_no_store_can_keep_is_refused_naming_its_field() {
    let runtime = Runtime::start(RuntimeParts::in_memory(), config())
        .await
        .unwrap();
    let agent = AgentId::parse("mallory").unwrap();
    let field_of = |error: MemoryError| {
        assert_eq!(error.code, crate::error::ErrorCode::InvalidArgument);
        error.field.unwrap_or_default()
    };
    let remember = |input: RememberInput| runtime.remember(&agent, input);
    let nul = "staging\0port".to_string();
    let cases = [
        (
            RememberInput {
                content: nul.clone(),
                ..Default::default()
            },
            "content",
        ),
        (
            RememberInput {
                content: "ok".into(),
                title: Some(nul.clone()),
                ..Default::default()
            },
            "title",
        ),
        (
            RememberInput {
                content: "ok".into(),
                tags: vec![nul.clone()],
                ..Default::default()
            },
            "tags",
        ),
        (
            RememberInput {
                content: "ok".into(),
                metadata: Some(serde_json::json!({ "note": { "deep": [nul.clone()] } })),
                ..Default::default()
            },
            "metadata",
        ),
        (
            RememberInput {
                content: "ok".into(),
                source: Some(crate::model::SourceRef {
                    path: "a".repeat(5000),
                    hash: "h".into(),
                }),
                ..Default::default()
            },
            "source",
        ),
    ];
    for (input, field) in cases {
        assert_eq!(field_of(remember(input).await.unwrap_err()), field);
    }
    let error = runtime
        .recall(RecallInput::new(agent.clone(), nul.clone()))
        .await
        .unwrap_err();
    assert_eq!(field_of(error), "query");
    let ns = crate::kv::NamespaceName::parse("plan").unwrap();
    let error = runtime
        .kv_put(
            &agent,
            &ns,
            "k",
            KvPutInput {
                value: serde_json::json!({ "a\u{0}b": 1 }),
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(field_of(error), "value");
    assert_eq!(runtime.count().await.unwrap(), 0);
    runtime.shutdown().await.unwrap();
}

/// The built-in embedder, made slow: `per_text` of sleep for each text (a loaded CPU).
struct SlowEmbedder {
    /// The model that does the work.
    inner: crate::embedding::BuiltinEmbedder,
    /// Time each text takes.
    per_text: Duration,
    /// Texts of the largest batch begun so far.
    largest_begun: Arc<std::sync::atomic::AtomicUsize>,
}

impl crate::embedding::Embedder for SlowEmbedder {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }
    fn dimension(&self) -> usize {
        self.inner.dimension()
    }
    fn embed_batch(&self, texts: &[&str]) -> MemoryResult<Vec<Vec<f32>>> {
        self.largest_begun
            .fetch_max(texts.len(), std::sync::atomic::Ordering::SeqCst);
        std::thread::sleep(self.per_text * texts.len() as u32);
        self.inner.embed_batch(texts)
    }
}

fn slow_parts(per_text: Duration) -> (RuntimeParts, Arc<std::sync::atomic::AtomicUsize>) {
    let largest_begun = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let parts = RuntimeParts {
        embedder: Arc::new(SlowEmbedder {
            inner: crate::embedding::BuiltinEmbedder::new(256),
            per_text,
            largest_begun: largest_begun.clone(),
        }),
        ..RuntimeParts::in_memory()
    };
    (parts, largest_begun)
}

fn turns(count: usize, topic: &str) -> Vec<RememberInput> {
    (0..count)
        .map(|i| RememberInput {
            content: format!("turn {i} of the conversation about {topic}"),
            ..Default::default()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_that_takes_longer_than_the_call_timeout_is_still_stored() {
    // 150 texts at 10 ms each: three times the call timeout of `config()` (500 ms).
    let runtime = Runtime::start(slow_parts(Duration::from_millis(10)).0, config())
        .await
        .unwrap();
    let agent = AgentId::parse("talker").unwrap();
    let started = Instant::now();
    let stored = runtime
        .remember_batch(&agent, turns(150, "rivers"))
        .await
        .unwrap();
    assert!(started.elapsed() > runtime.config().call_timeout);
    assert_eq!(stored.len(), 150);
    assert_eq!(runtime.count().await.unwrap(), 150);
    runtime.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saturated_embedder_refuses_more_work_with_rate_limited_and_loses_nothing() {
    let mut settings = config();
    settings.embedding.concurrency = 1;
    settings.embedding.max_queued_texts = 40;
    let (parts, largest_begun) = slow_parts(Duration::from_millis(20));
    let runtime = Runtime::start(parts, settings).await.unwrap();
    let agent = AgentId::parse("talker").unwrap();
    let busy = {
        let (runtime, agent) = (runtime.clone(), agent.clone());
        tokio::spawn(async move { runtime.remember_batch(&agent, turns(40, "rivers")).await })
    };
    // Once the 40 texts are being embedded (800 ms), the queue has no room for 5 more.
    let deadline = Instant::now() + Duration::from_secs(5);
    while largest_begun.load(std::sync::atomic::Ordering::SeqCst) < 40 {
        assert!(Instant::now() < deadline, "the batch never began");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let refused = runtime
        .remember_batch(&agent, turns(5, "grinders"))
        .await
        .unwrap_err();
    assert_eq!(refused.code, crate::error::ErrorCode::RateLimited);
    assert!(refused.message.contains("embedding.max_queued_texts"));
    assert_eq!(
        busy.await.unwrap().unwrap().len(),
        40,
        "the accepted batch is stored"
    );
    // Once the queue drains the same request goes through.
    assert_eq!(
        runtime
            .remember_batch(&agent, turns(5, "grinders"))
            .await
            .unwrap()
            .len(),
        5
    );
    runtime.shutdown().await.unwrap();
}

/// An embedder of another model that fails once it has embedded `budget` texts (a
/// server that went away midway), counting what it embedded.
struct FailingAfter {
    /// The model that does the work (128 dimensions: another model than the default).
    inner: crate::embedding::BuiltinEmbedder,
    /// Texts it still embeds before failing.
    budget: std::sync::atomic::AtomicI64,
    /// Texts embedded so far.
    embedded: std::sync::atomic::AtomicUsize,
}

impl crate::embedding::Embedder for FailingAfter {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }
    fn dimension(&self) -> usize {
        self.inner.dimension()
    }
    fn embed_batch(&self, texts: &[&str]) -> MemoryResult<Vec<Vec<f32>>> {
        use std::sync::atomic::Ordering::SeqCst;
        if self.budget.fetch_sub(texts.len() as i64, SeqCst) < texts.len() as i64 {
            return Err(MemoryError::unavailable("the embedding server went away"));
        }
        self.embedded.fetch_add(texts.len(), SeqCst);
        self.inner.embed_batch(texts)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_reembedding_carries_on_where_it_stopped_and_switches_once() {
    let parts = RuntimeParts::in_memory();
    let store = parts.memories.clone();
    let runtime = Runtime::start(parts, config()).await.unwrap();
    let agent = AgentId::parse("lib").unwrap();
    let inputs: Vec<RememberInput> = (0..600)
        .map(|i| RememberInput {
            content: format!("ledger line {i}: paid invoice {}", i * 3),
            ..Default::default()
        })
        .collect();
    runtime.remember_batch(&agent, inputs).await.unwrap();
    let target = Arc::new(FailingAfter {
        inner: crate::embedding::BuiltinEmbedder::new(128),
        budget: std::sync::atomic::AtomicI64::new(300),
        embedded: Default::default(),
    });
    let failed = runtime
        .reembed(target.clone(), "{}".into(), &|_| {})
        .await
        .unwrap_err();
    assert!(failed.message.contains("went away"), "{failed:?}");
    let status = runtime.reembed_status().await;
    assert_eq!(status.phase, ReembedPhase::Failed);
    assert_eq!(status.counts.total, 600);
    let done_before = status.counts.done;
    assert!(done_before > 0 && done_before < 600, "{status:?}");
    // Nothing switched: the old model still serves and recall still answers.
    assert_eq!(
        runtime.reembed_status().await.serving,
        "builtin-hash-v1-256|256"
    );
    let found = runtime
        .recall(RecallInput::new(agent.clone(), "paid invoice 30"))
        .await
        .unwrap();
    assert!(!found.hits.is_empty());

    // Started again (the server came back): only what was missing is embedded.
    target
        .budget
        .store(i64::MAX / 2, std::sync::atomic::Ordering::SeqCst);
    let before = target.embedded.load(std::sync::atomic::Ordering::SeqCst);
    let done = runtime
        .reembed(target.clone(), "{\"provider\":\"builtin\"}".into(), &|_| {})
        .await
        .unwrap();
    assert_eq!(done.phase, ReembedPhase::Done);
    let embedded_now = target.embedded.load(std::sync::atomic::Ordering::SeqCst) - before;
    assert_eq!(
        embedded_now as u64,
        600 - done_before,
        "resumed, not restarted"
    );
    assert_eq!(done.serving, "builtin-hash-v1-128|128");
    assert_eq!(
        store.meta("embedding_spec").await.unwrap().as_deref(),
        Some("{\"provider\":\"builtin\"}")
    );
    assert_eq!(store.meta("reembed_target").await.unwrap(), None);
    // Recall now embeds the question with the new model and finds by it.
    let found = runtime
        .recall(RecallInput::new(
            agent.clone(),
            "ledger line 7: paid invoice 21",
        ))
        .await
        .unwrap();
    assert!(found.hits[0].memory.content.starts_with("ledger line 7:"));
    // A second request for the same model has nothing to do.
    let again = runtime
        .reembed(target.clone(), "{}".into(), &|_| {})
        .await
        .unwrap();
    assert_eq!(again.phase, ReembedPhase::Done);
    runtime.shutdown().await.unwrap();
}

/// The built-in embedder as a model whose batches pay: each call takes a while, like a
/// forward pass, and records its size.
struct BatchingEmbedder {
    /// The model that does the work.
    inner: crate::embedding::BuiltinEmbedder,
    /// Texts per call, in call order.
    calls: std::sync::Mutex<Vec<usize>>,
    /// How long each call takes.
    pass: Duration,
}

impl crate::embedding::Embedder for BatchingEmbedder {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }
    fn dimension(&self) -> usize {
        self.inner.dimension()
    }
    fn embed_batch(&self, texts: &[&str]) -> MemoryResult<Vec<Vec<f32>>> {
        self.calls.lock().unwrap().push(texts.len());
        std::thread::sleep(self.pass);
        self.inner.embed_batch(texts)
    }
    fn batching_pays(&self) -> bool {
        true
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_embedding_never_waits_and_concurrent_ones_share_model_calls_each_getting_its_own_vector(
) {
    let embedder = Arc::new(BatchingEmbedder {
        inner: crate::embedding::BuiltinEmbedder::new(256),
        calls: Default::default(),
        pass: Duration::from_millis(50),
    });
    let mut parts = RuntimeParts::in_memory();
    parts.embedder = embedder.clone();
    let mut settings = config();
    // A window far longer than the test may take: nothing here waits it out.
    let window = Duration::from_secs(5);
    settings.embedding.micro_batch = window;
    let runtime = Runtime::start(parts, settings).await.unwrap();
    let vectors = runtime.actors().vectors.clone();
    embedder.calls.lock().unwrap().clear();

    // A lone question on an idle embedder goes at once: there is nobody to wait for.
    let started = std::time::Instant::now();
    vectors
        .embed_queries(&["where is the deploy lock".to_string()])
        .await
        .unwrap();
    assert!(
        started.elapsed() < window / 2,
        "a lone question waited for company: {:?}",
        started.elapsed()
    );
    assert_eq!(*embedder.calls.lock().unwrap(), vec![1]);
    embedder.calls.lock().unwrap().clear();

    // Requests that arrive while the model is busy share the next call, which starts as
    // soon as the model is free (not when the window ends).
    let started = std::time::Instant::now();
    let texts: Vec<String> = (0..24)
        .map(|i| {
            format!(
                "note {i} about the {} service",
                ["billing", "search", "auth"][i % 3]
            )
        })
        .collect();
    let asked = texts.iter().enumerate().map(|(i, text)| {
        let vectors = vectors.clone();
        let text = text.clone();
        async move {
            if i % 2 == 0 {
                vectors.embed(&[text]).await
            } else {
                vectors.embed_queries(&[text]).await
            }
        }
    });
    let answers = futures_join_all(asked).await;
    assert!(
        started.elapsed() < window / 2,
        "requests behind a busy model waited for the window: {:?}",
        started.elapsed()
    );
    let reference = crate::embedding::BuiltinEmbedder::new(256);
    for (text, answer) in texts.iter().zip(answers) {
        let got = answer.unwrap();
        assert_eq!(
            got,
            vec![crate::embedding::Embedder::embed(&reference, text).unwrap()],
            "{text}"
        );
    }
    let calls = embedder.calls.lock().unwrap().clone();
    assert_eq!(calls.iter().sum::<usize>(), 24);
    assert!(
        calls.len() < 24 && calls.iter().any(|&n| n > 1),
        "24 concurrent single embeddings took {} model calls: {calls:?}",
        calls.len()
    );

    // A batch is a batch already: it goes straight to the model in one call.
    embedder.calls.lock().unwrap().clear();
    vectors.embed(&texts).await.unwrap();
    assert_eq!(*embedder.calls.lock().unwrap(), vec![24]);
    runtime.shutdown().await.unwrap();
}

/// Await every future (in order), without a futures dependency.
async fn futures_join_all<F: std::future::Future + Send + 'static>(
    futures: impl IntoIterator<Item = F>,
) -> Vec<F::Output>
where
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futures.into_iter().map(tokio::spawn).collect();
    let mut out = Vec::new();
    for handle in handles {
        out.push(handle.await.unwrap());
    }
    out
}

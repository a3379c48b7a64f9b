//! The typed in-process handle over the actor tree: what the HTTP service, the CLI
//! and library users call. It validates input, orchestrates the actors for each
//! operation, and retries a call while the actor it needs is being restarted.
//!
//! Ordering of a write: embed → system of record (the acknowledgement point) →
//! projections (vector index, working window). A projection that misses a write
//! catches up when its actor restarts, because it is rebuilt from the system of record.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use ractor::{Actor, ActorRef, Message, RpcReplyPort};
use serde::Serialize;

use crate::actors::consolidator::{ConsolidatorArgs, ConsolidatorMsg, LeaseSettings, ScheduledJob};
use crate::actors::episodic::{EpisodicArgs, EpisodicMsg};
use crate::actors::graph::{GraphArgs, GraphMsg};
use crate::actors::namespaces::{NamespacesArgs, NamespacesMsg};
use crate::actors::projector::{ProjectionStatus, ProjectorArgs, ProjectorMsg};
use crate::actors::vectors::{IndexStatus, VectorsArgs, VectorsMsg};
use crate::actors::working::{WorkingArgs, WorkingMsg};
use crate::clock::Clock;
use crate::embedding::Embedder;
use crate::error::{MemoryError, MemoryResult};
use crate::model::{
    apply_patch, version_of, AgentId, Association, ConsolidationRun, Memory, MemoryId, MemoryPatch,
    MemoryStatus, MemoryType, MemoryVersion, SessionId, SourceRef,
};
use crate::namespaces::ProjectId;
use crate::policy::clustering::ClusterParams;
use crate::policy::consistency::normalized_hash;
use crate::policy::consolidation::ForgetPolicy;
use crate::policy::consolidation::PromotePolicy;
use crate::policy::fusion::{score_fusion, NeighbourLink, RankedList, Retriever};
use crate::policy::retention::RetentionPolicy;
use crate::policy::schedule::{Schedule, ScheduleZone};
use crate::policy::session::SessionSettings;
use crate::policy::stats::{agent_stats, AgentStats};
use crate::policy::time::{find_time_expression, TimeRange};
use crate::store::{
    EmbeddingRecord, GraphStore, KeywordQuery, ListQuery, MemoryStore, StoredMemory, VectorIndex,
    VectorQuery, WorkingItem, WorkingStore,
};
use crate::supervisor::{
    ChildHealth, ChildKind, Children, CognitionSettings, Directory, RestartPolicy, Supervisor,
    SupervisorArgs, SupervisorMsg, SupervisorRef,
};

mod key_locks;
mod namespaces;
pub use namespaces::{KvPutInput, NamespaceSettings, ProjectInput};

mod projected;
mod question_vectors;
pub use projected::ReadSource;

mod sessions;
pub use sessions::{
    CompactionReport, PostedMessages, SessionMessageInput, SessionView, SESSION_COMPACTION_TAG,
};

/// Input limits; exceeding one is a typed error naming the field.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest `content` in bytes (413 beyond).
    pub max_content_bytes: usize,
    /// Most memories in one `remember_batch` (413 beyond).
    pub max_batch: usize,
    /// Largest `limit` of recall and list (400 beyond).
    pub max_result_limit: usize,
    /// Most tags on one memory.
    pub max_tags: usize,
    /// Longest tag in bytes.
    pub max_tag_bytes: usize,
    /// Largest serialized `metadata` in bytes (413 beyond).
    pub max_metadata_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_content_bytes: 64 * 1024,
            max_batch: 1000,
            max_result_limit: 200,
            max_tags: 64,
            max_tag_bytes: 128,
            max_metadata_bytes: 16 * 1024,
        }
    }
}

/// How recall combines its retrievers.
#[derive(Debug, Clone, Copy)]
pub struct RecallSettings {
    /// Fusion weight of the vector retriever (0 disables it).
    pub vector_weight: f64,
    /// Fusion weight of the keyword retriever (0 disables it).
    pub keyword_weight: f64,
    /// Fusion weight of the time retriever.
    pub time_weight: f64,
    /// Share of a strong hit's score its graph and session neighbours receive (0 disables expansion).
    pub neighbour_weight: f64,
    /// How many of the strongest hits are expanded.
    pub expansion_seeds: usize,
    /// Session neighbours taken on each side of a seed.
    pub session_radius: usize,
    /// Re-rank with importance, retention, session and scope (false: fused relevance only).
    pub rerank: bool,
    /// Weight of the request session's working memory (items sharing query terms).
    pub working_weight: f64,
    /// Weight of the second BM25 pass expanded with feedback terms (0 turns it off).
    pub feedback_weight: f64,
    /// Top keyword hits the feedback terms are drawn from.
    pub feedback_documents: usize,
    /// Most feedback terms added to the query.
    pub feedback_terms: usize,
    /// Score multiplier (1 + this) for a memory attributed to someone the query names
    /// (`metadata.speaker`, or a transcript line "Alice: …"); 0 turns it off.
    pub speaker_boost: f64,
    /// Score the similarity to the question without the names of the speakers it
    /// names (attribution is `speaker_boost`'s job); needs `speaker_boost` > 0.
    pub topic_without_speakers: bool,
    /// Recently asked questions whose vectors are kept, so a question asked again is
    /// not embedded again (0 keeps none).
    pub question_cache: usize,
    /// Penalty (0..1) per hit already taken from the same session when the final list
    /// is picked (`policy::fusion::diversify`); 0 keeps the plain score order.
    pub session_diversity: f64,
}

impl Default for RecallSettings {
    fn default() -> Self {
        Self {
            vector_weight: 0.6,
            keyword_weight: 0.4,
            time_weight: 0.25,
            neighbour_weight: 0.3,
            expansion_seeds: 20,
            session_radius: 1,
            rerank: true,
            working_weight: 0.5,
            feedback_weight: 0.0,
            feedback_documents: 3,
            feedback_terms: 5,
            session_diversity: 0.0,
            speaker_boost: 1.0,
            topic_without_speakers: true,
            question_cache: 1024,
        }
    }
}

/// Tunables of the sleep cycle and archival.
#[derive(Debug, Clone)]
pub struct SleepSettings {
    /// Promotion thresholds.
    pub promote: PromotePolicy,
    /// Clustering parameters.
    pub clustering: ClusterParams,
    /// Days a forgotten memory is kept archived before it is deleted (0: never).
    pub purge_after_days: i64,
    /// Hours without activity after which a session is archived.
    pub idle_hours: i64,
    /// How long a claim on a scheduled firing lasts without renewal.
    pub lease_ttl: chrono::Duration,
    /// This process's lease holder id.
    pub holder: String,
}

impl Default for SleepSettings {
    fn default() -> Self {
        Self {
            promote: PromotePolicy::default(),
            clustering: ClusterParams::default(),
            purge_after_days: 30,
            idle_hours: 24,
            lease_ttl: chrono::Duration::minutes(10),
            holder: format!(
                "pid{}-{}",
                std::process::id(),
                &uuid::Uuid::new_v4().simple().to_string()[..8]
            ),
        }
    }
}

/// Tunables of the runtime.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Input limits.
    pub limits: Limits,
    /// Retention curve.
    pub retention: RetentionPolicy,
    /// Forgetting thresholds of consolidation.
    pub forget: ForgetPolicy,
    /// Supervisor backoff and budget.
    pub restart: RestartPolicy,
    /// Cron schedules.
    pub cognition: CognitionSettings,
    /// Sleep-cycle and archival tunables.
    pub sleep: SleepSettings,
    /// How long a call waits for an actor (including restarts) before `backend_unavailable`.
    pub call_timeout: Duration,
    /// How often expired working-memory sessions are dropped.
    pub working_sweep_interval: Duration,
    /// How often recall reinforcement is written.
    pub touch_flush_interval: Duration,
    /// Importance of a memory stored without one.
    pub default_importance: f32,
    /// Retriever weights and expansion.
    pub recall: RecallSettings,
    /// Cosine similarity at or above which a new memory of the same type is a near-duplicate.
    pub dedup_threshold: f32,
    /// Similarity from which a semantic/procedural memory is checked for contradiction.
    pub contradiction_min_similarity: f32,
    /// Hard timeout of an arbiter call.
    pub arbiter_timeout: Duration,
    /// Most memories one `extract_turn` call stores (its write budget).
    pub extraction_max_per_turn: usize,
    /// Bounds of KV namespaces.
    pub namespaces: NamespaceSettings,
    /// Session windows, TTL and compaction.
    pub sessions: SessionSettings,
    /// Time between projector ticks (outbox → projections).
    pub projector_interval: Duration,
    /// Outbox entries per projection batch.
    pub projector_batch: usize,
    /// First and longest retry delay of a failing projection.
    pub projector_retry: (Duration, Duration),
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            limits: Limits::default(),
            retention: RetentionPolicy::default(),
            forget: ForgetPolicy::default(),
            restart: RestartPolicy::default(),
            cognition: CognitionSettings {
                enabled: false,
                sleep_schedule: Schedule::parse(
                    "cognition.schedule",
                    "0 */30 * * * *",
                    ScheduleZone::Local,
                )
                .expect("the default sleep schedule parses"),
                archival_schedule: Schedule::parse(
                    "archival.schedule",
                    "0 0 3 * * *",
                    ScheduleZone::Local,
                )
                .expect("the default archival schedule parses"),
            },
            sleep: SleepSettings::default(),
            call_timeout: Duration::from_secs(10),
            working_sweep_interval: Duration::from_secs(60),
            touch_flush_interval: Duration::from_secs(1),
            default_importance: 0.5,
            recall: RecallSettings::default(),
            dedup_threshold: 0.92,
            contradiction_min_similarity: 0.6,
            arbiter_timeout: Duration::from_secs(2),
            extraction_max_per_turn: 8,
            namespaces: NamespaceSettings::default(),
            sessions: SessionSettings::default(),
            projector_interval: Duration::from_millis(200),
            projector_batch: 256,
            projector_retry: (Duration::from_millis(500), Duration::from_secs(30)),
        }
    }
}

/// The stores and models the runtime runs on.
#[derive(Clone)]
pub struct RuntimeParts {
    /// System of record.
    pub memories: Arc<dyn MemoryStore>,
    /// Vector index projection.
    pub vectors: Arc<dyn VectorIndex>,
    /// Association graph.
    pub graph: Arc<dyn GraphStore>,
    /// Session windows.
    pub working: Arc<dyn WorkingStore>,
    /// Projects and KV namespaces.
    pub namespaces: Arc<dyn crate::store::namespaces::NamespaceStore>,
    /// Embedding model.
    pub embedder: Arc<dyn Embedder>,
    /// Time source.
    pub clock: Arc<dyn Clock>,
    /// Model consulted when routing or contradiction rules are unsure (None: rules only).
    pub arbiter: Option<Arc<dyn crate::arbiter::Arbiter>>,
    /// Abstracts clusters and summarises sessions in the sleep cycle.
    pub thought: Arc<dyn crate::thought::InnerThought>,
    /// External projections kept in sync from the outbox (empty: none).
    pub projections: Vec<Arc<dyn crate::store::Projection>>,
}

impl RuntimeParts {
    /// Everything in memory, with the built-in embedder: for tests and file-less library use.
    pub fn in_memory() -> Self {
        use crate::store::memory::*;
        Self {
            memories: Arc::new(InMemoryMemoryStore::new()),
            vectors: Arc::new(FlatVectorIndex::new()),
            graph: Arc::new(InMemoryGraphStore::new()),
            working: Arc::new(InMemoryWorkingStore::new(32, 3600)),
            namespaces: Arc::new(crate::store::namespaces::InMemoryNamespaceStore::new()),
            embedder: Arc::new(crate::embedding::BuiltinEmbedder::new(256)),
            clock: Arc::new(crate::clock::SystemClock),
            arbiter: None,
            thought: Arc::new(crate::thought::RuleThought),
            projections: Vec::new(),
        }
    }
}

/// One memory to remember (agent given separately).
#[derive(Debug, Clone, Default)]
pub struct RememberInput {
    /// The text.
    pub content: String,
    /// Explicit type; when absent the runtime chooses.
    pub memory_type: Option<MemoryType>,
    /// Optional title.
    pub title: Option<String>,
    /// 0..1; default from config.
    pub importance: Option<f32>,
    /// Labels.
    pub tags: Vec<String>,
    /// Session it belongs to.
    pub session_id: Option<SessionId>,
    /// When it happened; default now.
    pub occurred_at: Option<DateTime<Utc>>,
    /// Visible to other agents asking for shared memories.
    pub shared: bool,
    /// Caller's JSON object.
    pub metadata: Option<serde_json::Value>,
    /// Source file reference.
    pub source: Option<SourceRef>,
    /// Project of the owner it belongs to (default: the project of its session, if any).
    pub project_id: Option<ProjectId>,
    /// −1..1 for affective memories.
    pub valence: Option<f32>,
    /// 0..1 for affective memories.
    pub arousal: Option<f32>,
}

/// Why a memory got its type.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Routing {
    /// The chosen type.
    #[serde(rename = "type")]
    pub memory_type: MemoryType,
    /// A human-readable reason.
    pub reason: String,
}

/// What `remember` did.
#[derive(Debug, Clone, PartialEq)]
pub struct RememberOutcome {
    /// The stored (or existing) memory.
    pub memory: Memory,
    /// How its type was chosen.
    pub routing: Routing,
    /// Set when the input duplicated an existing memory.
    pub deduplicated_into: Option<MemoryId>,
    /// Memories this one replaced.
    pub superseded: Vec<MemoryId>,
}

/// A recall request.
#[derive(Debug, Clone)]
pub struct RecallInput {
    /// Whose memories.
    pub agent_id: AgentId,
    /// What to look for.
    pub query: String,
    /// Only these types (empty: all).
    pub types: Vec<MemoryType>,
    /// Results wanted (default 10).
    pub limit: Option<usize>,
    /// Session in focus: its memories rank slightly higher.
    pub session_id: Option<SessionId>,
    /// Only memories with at least one of these tags.
    pub tags: Vec<String>,
    /// Search the shared pool too.
    pub include_shared: bool,
    /// Return per-retriever scores.
    pub debug: bool,
    /// Only memories that occurred in this range (a resolved `time_query`).
    pub time_range: Option<TimeRange>,
    /// The request's "now" for time expressions inside the query (default: the clock).
    pub now: Option<DateTime<Utc>>,
    /// Project in focus: its memories rank slightly higher, and only it sees its memories when it is isolated.
    pub project_id: Option<ProjectId>,
}

impl RecallInput {
    /// A plain query: all types, 10 results, shared memories included, no filters.
    pub fn new(agent_id: AgentId, query: impl Into<String>) -> Self {
        Self {
            agent_id,
            query: query.into(),
            types: Vec::new(),
            limit: None,
            session_id: None,
            tags: Vec::new(),
            include_shared: true,
            debug: false,
            time_range: None,
            now: None,
            project_id: None,
        }
    }
}

/// One recalled memory.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecallHit {
    /// The memory.
    pub memory: Memory,
    /// Final score (higher is better).
    pub score: f64,
    /// Retention at recall time.
    pub retention: f64,
    /// Retrievers that found it.
    pub matched_by: Vec<&'static str>,
    /// Raw score per retriever (filled when debugging).
    pub components: Option<HashMap<&'static str, f64>>,
}

/// Recall's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct RecallOutcome {
    /// Ranked hits.
    pub hits: Vec<RecallHit>,
    /// Server-side time spent.
    pub took_ms: f64,
    /// Time per stage (vector, keyword, time, fetch), in milliseconds.
    pub timings_ms: Vec<(&'static str, f64)>,
    /// What answered each vector and graph read: a projection, or the embedded
    /// backend with the reason it stood in.
    pub sources: Vec<ReadSource>,
}

/// Await `work` and measure it in milliseconds.
async fn timed<T>(work: impl std::future::Future<Output = T>) -> (T, f64) {
    let started = Instant::now();
    let output = work.await;
    (output, started.elapsed().as_secs_f64() * 1000.0)
}

/// What to forget.
#[derive(Debug, Clone)]
pub enum ForgetTarget {
    /// One memory.
    Id(MemoryId),
    /// Memories that keyword-match a query (at most `limit`).
    Query {
        /// The query.
        text: String,
        /// Most memories to forget.
        limit: usize,
    },
}

/// One node reached by spreading activation.
#[derive(Debug, Clone, PartialEq)]
pub struct ActivatedMemory {
    /// The memory.
    pub memory: Memory,
    /// Activation in 0..1.
    pub activation: f64,
    /// Ids from the seed to it.
    pub path: Vec<MemoryId>,
}

/// Runtime-level health.
#[derive(Debug, Clone, PartialEq)]
pub struct RuntimeHealth {
    /// Per-child supervision state.
    pub children: Vec<ChildHealth>,
    /// Vector index status (None when the vector actor is down).
    pub index: Option<IndexStatus>,
    /// System-of-record backend name.
    pub store_backend: &'static str,
    /// Graph backend name.
    pub graph_backend: &'static str,
    /// Working-memory backend name.
    pub working_backend: &'static str,
    /// Projects and KV namespaces backend name.
    pub namespaces_backend: &'static str,
    /// Why working memory is serving from its fallback, if it is.
    pub working_degraded: Option<String>,
    /// External projections and their lag (empty when none is configured or the projector is down).
    pub projections: Vec<ProjectionStatus>,
    /// Inner-thought provider of the sleep cycle (`none`, `openai`).
    pub inner_thought: &'static str,
}

/// The typed handle. Cheap to clone.
#[derive(Clone)]
pub struct Runtime {
    /// Shared state of the handle.
    inner: Arc<RuntimeInner>,
}

/// Shared state behind [`Runtime`].
struct RuntimeInner {
    /// Current actor refs and health, published by the supervisor.
    directory: Arc<Directory>,
    /// The root supervisor.
    supervisor: SupervisorRef,
    /// Tunables.
    config: RuntimeConfig,
    /// Time source.
    clock: Arc<dyn Clock>,
    /// Backend names for health.
    backends: (&'static str, &'static str, &'static str),
    /// Inner-thought provider name, for health.
    inner_thought: &'static str,
    /// Projects and KV namespaces backend name, for health.
    namespaces_backend: &'static str,
    /// Model consulted when the rules are unsure.
    arbiter: Option<Arc<dyn crate::arbiter::Arbiter>>,
    /// Summarises sessions on compaction.
    thought: Arc<dyn crate::thought::InnerThought>,
    /// The working-memory store, asked for its degraded state by health.
    working: Arc<dyn WorkingStore>,
    /// Sessions with a background compaction running (one at a time per session).
    compacting: std::sync::Mutex<std::collections::HashSet<(AgentId, SessionId)>>,
    /// The system of record, read directly only to learn whether a projection is
    /// caught up (one indexed outbox read per projected recall read).
    store: Arc<dyn MemoryStore>,
    /// External projections, read by recall when caught up.
    projections: Vec<Arc<dyn crate::store::Projection>>,
    /// Per (agent, content hash) locks: identical concurrent writes take turns, so the
    /// later one is deduplicated instead of inserting a twin.
    content_locks: key_locks::KeyLocks,
    /// Speakers each agent's memories are attributed to (lower case), learnt from what
    /// is remembered and recalled, so recall knows before it embeds a question which of
    /// its words name a speaker (lost on restart and learnt again; see `recall`).
    speakers: std::sync::Mutex<HashMap<AgentId, std::collections::HashSet<String>>>,
    /// Vectors of recently asked questions (`recall.question_cache`), so a question
    /// asked again skips the embedder (lost on restart).
    question_vectors: std::sync::Mutex<question_vectors::QuestionVectors>,
    /// How far each projection has applied (published by the projector).
    watermarks: Arc<crate::actors::projector::Watermarks>,
    /// Name of the embedded vector index (the fallback of a vector projection).
    index_backend: &'static str,
}

impl Runtime {
    /// Start the actor tree on `parts`. Fails if a child cannot start (for example an
    /// embedding-model mismatch with stored vectors).
    pub async fn start(parts: RuntimeParts, config: RuntimeConfig) -> MemoryResult<Self> {
        let directory = Arc::new(Directory::default());
        let watermarks = Arc::new(crate::actors::projector::Watermarks::new(
            parts.projections.len(),
        ));
        let args = SupervisorArgs {
            working: WorkingArgs {
                store: parts.working.clone(),
                clock: parts.clock.clone(),
                sweep_interval: config.working_sweep_interval,
            },
            episodic: EpisodicArgs {
                store: parts.memories.clone(),
                clock: parts.clock.clone(),
                touch_flush_interval: config.touch_flush_interval,
            },
            vectors: VectorsArgs {
                embedder: parts.embedder.clone(),
                index: parts.vectors.clone(),
                store: parts.memories.clone(),
            },
            graph: GraphArgs {
                store: parts.graph.clone(),
            },
            namespaces: NamespacesArgs {
                store: parts.namespaces.clone(),
            },
            consolidator: ConsolidatorArgs {
                store: parts.memories.clone(),
                index: parts.vectors.clone(),
                graph: parts.graph.clone(),
                working: parts.working.clone(),
                embedder: parts.embedder.clone(),
                thought: parts.thought.clone(),
                clock: parts.clock.clone(),
                retention: config.retention,
                forget: config.forget,
                promote: config.sleep.promote,
                clustering: config.sleep.clustering,
                purge_after_days: config.sleep.purge_after_days,
                idle_hours: config.sleep.idle_hours,
                lease: LeaseSettings {
                    holder: config.sleep.holder.clone(),
                    ttl: config.sleep.lease_ttl,
                },
            },
            projector: ProjectorArgs {
                store: parts.memories.clone(),
                graph: parts.graph.clone(),
                projections: parts.projections.clone(),
                clock: parts.clock.clone(),
                interval: config.projector_interval,
                batch: config.projector_batch,
                retry_initial: config.projector_retry.0,
                retry_max: config.projector_retry.1,
                watermarks: watermarks.clone(),
            },
            cognition: config.cognition.clone(),
            restart: config.restart,
            directory: directory.clone(),
        };
        let (supervisor, _handle) =
            Actor::spawn(None, Supervisor, args)
                .await
                .map_err(|error| {
                    // A child's MemoryError (e.g. a config problem) surfaces as the spawn error's text.
                    MemoryError::unavailable(format!("the runtime could not start: {error}"))
                })?;
        Ok(Self {
            inner: Arc::new(RuntimeInner {
                directory,
                supervisor,
                config: config.clone(),
                clock: parts.clock.clone(),
                arbiter: parts.arbiter.clone(),
                inner_thought: parts.thought.provider_name(),
                namespaces_backend: parts.namespaces.backend_name(),
                thought: parts.thought.clone(),
                working: parts.working.clone(),
                compacting: Default::default(),
                store: parts.memories.clone(),
                projections: parts.projections.clone(),
                content_locks: Default::default(),
                speakers: Default::default(),
                question_vectors: std::sync::Mutex::new(question_vectors::QuestionVectors::new(
                    config.recall.question_cache,
                )),
                watermarks,
                index_backend: parts.vectors.backend_name(),
                backends: (
                    parts.memories.backend_name(),
                    parts.graph.backend_name(),
                    parts.working.backend_name(),
                ),
            }),
        })
    }

    /// The runtime's tunables.
    pub fn config(&self) -> &RuntimeConfig {
        &self.inner.config
    }

    /// Now, by the injected clock.
    pub fn now(&self) -> DateTime<Utc> {
        use chrono::SubsecRound;
        // Microseconds: what every store keeps, so an answer never differs from a re-read.
        self.inner.clock.now().trunc_subsecs(6)
    }

    /// Stop every actor after flushing pending reinforcement and checkpointing the store.
    pub async fn shutdown(&self) -> MemoryResult<()> {
        let flushed = self.episodic(|reply| EpisodicMsg::Flush { reply }).await;
        let _ = self
            .inner
            .supervisor
            .call(
                |reply| SupervisorMsg::Shutdown { reply },
                Some(Duration::from_secs(30)),
            )
            .await;
        self.inner.supervisor.stop(Some("shutdown".into()));
        flushed
    }

    /// Supervision and index health.
    pub async fn health(&self) -> RuntimeHealth {
        let index = match self.inner.directory.children().vectors {
            Some(vectors) => match vectors
                .call(
                    |reply| VectorsMsg::Status { reply },
                    Some(Duration::from_secs(2)),
                )
                .await
            {
                Ok(ractor::rpc::CallResult::Success(Ok(status))) => Some(status),
                _ => None,
            },
            None => None,
        };
        RuntimeHealth {
            children: self.inner.directory.health(),
            index,
            store_backend: self.inner.backends.0,
            graph_backend: self.inner.backends.1,
            working_backend: self.inner.backends.2,
            namespaces_backend: self.inner.namespaces_backend,
            working_degraded: self.inner.working.degraded(),
            projections: self.projection_status().await.unwrap_or_default(),
            inner_thought: self.inner.inner_thought,
        }
    }

    /// Per-projection state and lag.
    pub async fn projection_status(&self) -> MemoryResult<Vec<ProjectionStatus>> {
        self.ask(
            ChildKind::Projector,
            |c| c.projector.clone(),
            |reply| ProjectorMsg::Status { reply },
        )
        .await
    }

    /// Rebuild one projection (or every one) from SQL now (`mnemos reindex`); answers
    /// (projection, outbox sequence number it now holds) for each.
    pub async fn rebuild_projections(
        &self,
        name: Option<String>,
    ) -> MemoryResult<Vec<(String, u64)>> {
        self.ask_within(
            ChildKind::Projector,
            Some(Duration::from_secs(3600)),
            |c| c.projector.clone(),
            |reply| ProjectorMsg::Rebuild {
                name: name.clone(),
                reply,
            },
        )
        .await
    }

    /// Make a child fail (test hook for supervision; the service exposes it only when configured).
    pub fn inject_fault(&self, child: ChildKind) -> MemoryResult<()> {
        self.inner
            .supervisor
            .cast(SupervisorMsg::InjectFault(child))
            .map_err(|_| MemoryError::unavailable("the supervisor is not running"))
    }

    /// Call an actor, retrying while it is restarting, until the call timeout.
    async fn ask<M, T, P, B>(&self, kind: ChildKind, pick: P, build: B) -> MemoryResult<T>
    where
        M: Message,
        T: Send + 'static,
        P: Fn(&Children) -> Option<ActorRef<M>>,
        B: Fn(RpcReplyPort<MemoryResult<T>>) -> M,
    {
        self.ask_within(kind, None, pick, build).await
    }

    /// [`Self::ask`], but once the message is delivered wait up to `answer_timeout` for
    /// the answer (long-running work such as a sleep cycle). Finding a live actor still
    /// gives up after `call_timeout`.
    async fn ask_within<M, T, P, B>(
        &self,
        kind: ChildKind,
        answer_timeout: Option<Duration>,
        pick: P,
        build: B,
    ) -> MemoryResult<T>
    where
        M: Message,
        T: Send + 'static,
        P: Fn(&Children) -> Option<ActorRef<M>>,
        B: Fn(RpcReplyPort<MemoryResult<T>>) -> M,
    {
        let timeout = self.inner.config.call_timeout;
        let deadline = Instant::now() + timeout;
        let mut pause = Duration::from_millis(5);
        loop {
            if let Some(actor) = pick(&self.inner.directory.children()) {
                let remaining = deadline
                    .saturating_duration_since(Instant::now())
                    .max(Duration::from_millis(1));
                let wait = answer_timeout.unwrap_or(remaining);
                match actor.call(&build, Some(wait)).await {
                    Ok(ractor::rpc::CallResult::Success(result)) => return result,
                    Ok(ractor::rpc::CallResult::Timeout) => {
                        return Err(MemoryError::unavailable(format!(
                            "the {} actor did not answer within {wait:?}; retry later",
                            kind.as_str(),
                        )))
                    }
                    // The actor died with our message in its mailbox, or before we sent: retry.
                    Ok(ractor::rpc::CallResult::SenderError) | Err(_) => {}
                }
            }
            if Instant::now() >= deadline {
                return Err(MemoryError::unavailable(format!(
                    "the {} actor is restarting and did not come back within {timeout:?}; retry later",
                    kind.as_str(),
                )));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(100));
        }
    }

    /// Call the episodic actor (retrying while it restarts).
    async fn episodic<T: Send + 'static>(
        &self,
        build: impl Fn(RpcReplyPort<MemoryResult<T>>) -> EpisodicMsg,
    ) -> MemoryResult<T> {
        self.ask(ChildKind::Episodic, |c| c.episodic.clone(), build)
            .await
    }

    /// Call the vector actor (retrying while it restarts).
    async fn vectors<T: Send + 'static>(
        &self,
        build: impl Fn(RpcReplyPort<MemoryResult<T>>) -> VectorsMsg,
    ) -> MemoryResult<T> {
        self.ask(ChildKind::Vectors, |c| c.vectors.clone(), build)
            .await
    }

    /// Call the graph actor (retrying while it restarts).
    async fn graph<T: Send + 'static>(
        &self,
        build: impl Fn(RpcReplyPort<MemoryResult<T>>) -> GraphMsg,
    ) -> MemoryResult<T> {
        self.ask(ChildKind::Graph, |c| c.graph.clone(), build).await
    }

    /// Call the working-memory actor (retrying while it restarts).
    async fn working<T: Send + 'static>(
        &self,
        build: impl Fn(RpcReplyPort<MemoryResult<T>>) -> WorkingMsg,
    ) -> MemoryResult<T> {
        self.ask(ChildKind::Working, |c| c.working.clone(), build)
            .await
    }

    /// Call the namespaces actor (retrying while it restarts).
    async fn namespaces<T: Send + 'static>(
        &self,
        build: impl Fn(RpcReplyPort<MemoryResult<T>>) -> NamespacesMsg,
    ) -> MemoryResult<T> {
        self.ask(ChildKind::Namespaces, |c| c.namespaces.clone(), build)
            .await
    }

    /// Call the consolidator actor (retrying while it restarts).
    async fn consolidator<T: Send + 'static>(
        &self,
        build: impl Fn(RpcReplyPort<MemoryResult<T>>) -> ConsolidatorMsg,
    ) -> MemoryResult<T> {
        // A sleep cycle over a large agent, or with an LLM, may take minutes.
        self.ask_within(
            ChildKind::Consolidator,
            Some(Duration::from_secs(3600)),
            |c| c.consolidator.clone(),
            build,
        )
        .await
    }

    /// The vector of a question, from the recent questions when it was asked lately.
    async fn embed_question(&self, text: &str) -> MemoryResult<Vec<f32>> {
        let cached = self
            .inner
            .question_vectors
            .lock()
            .ok()
            .and_then(|mut cache| cache.get(text));
        if let Some(vector) = cached {
            return Ok(vector.as_ref().clone());
        }
        let vector = self
            .embed(vec![text.to_string()])
            .await?
            .pop()
            .unwrap_or_default();
        if !vector.is_empty() {
            if let Ok(mut cache) = self.inner.question_vectors.lock() {
                cache.put(text, Arc::new(vector.clone()));
            }
        }
        Ok(vector)
    }

    async fn embed(&self, texts: Vec<String>) -> MemoryResult<Vec<Vec<f32>>> {
        self.vectors(|reply| VectorsMsg::Embed {
            texts: texts.clone(),
            reply,
        })
        .await
    }

    /// Best effort: a projection that misses an update is rebuilt from SQL when its actor restarts.
    async fn project_vectors(&self, upsert: Vec<EmbeddingRecord>, remove: Vec<MemoryId>) {
        if !remove.is_empty() {
            if let Err(error) = self
                .vectors(|reply| VectorsMsg::Remove {
                    ids: remove.clone(),
                    reply,
                })
                .await
            {
                tracing::warn!(%error, "vector index removal deferred to the next rebuild");
            }
        }
        if !upsert.is_empty() {
            if let Err(error) = self
                .vectors(|reply| VectorsMsg::Upsert {
                    entries: upsert.clone(),
                    reply,
                })
                .await
            {
                tracing::warn!(%error, "vector index update deferred to the next rebuild");
            }
        }
    }

    fn validate_input(&self, input: &RememberInput, prefix: &str) -> MemoryResult<()> {
        let limits = &self.inner.config.limits;
        let field = |name: &str| format!("{prefix}{name}");
        if input.content.trim().is_empty() {
            return Err(MemoryError::invalid(
                field("content"),
                "content must not be empty",
            ));
        }
        if input.content.len() > limits.max_content_bytes {
            return Err(MemoryError::too_large(
                field("content"),
                format!(
                    "content is {} bytes; the limit is {} (limits.max_content_bytes)",
                    input.content.len(),
                    limits.max_content_bytes
                ),
            ));
        }
        if let Some(importance) = input.importance {
            if !(0.0..=1.0).contains(&importance) || importance.is_nan() {
                return Err(MemoryError::invalid(
                    field("importance"),
                    "importance must be between 0 and 1",
                ));
            }
        }
        if let Some(valence) = input.valence {
            if !(-1.0..=1.0).contains(&valence) || valence.is_nan() {
                return Err(MemoryError::invalid(
                    field("valence"),
                    "valence must be between -1 and 1",
                ));
            }
        }
        if let Some(arousal) = input.arousal {
            if !(0.0..=1.0).contains(&arousal) || arousal.is_nan() {
                return Err(MemoryError::invalid(
                    field("arousal"),
                    "arousal must be between 0 and 1",
                ));
            }
        }
        validate_tags(&input.tags, limits, &field("tags"))?;
        if let Some(title) = &input.title {
            if title.len() > 1024 {
                return Err(MemoryError::invalid(
                    field("title"),
                    "title must be at most 1024 bytes",
                ));
            }
        }
        if let Some(metadata) = &input.metadata {
            validate_metadata(metadata, limits, &field("metadata"))?;
        }
        if let Some(source) = &input.source {
            if source.path.is_empty() || source.hash.is_empty() {
                return Err(MemoryError::invalid(
                    field("source"),
                    "source needs a non-empty path and hash",
                ));
            }
        }
        Ok(())
    }

    /// Decide the type: an explicit type wins; otherwise the rules, and the arbiter when they are unsure.
    async fn route(&self, input: &RememberInput) -> (Routing, Option<f32>, Option<f32>) {
        // An affective memory gets its feeling from its words unless the caller said it.
        let felt = |memory_type: MemoryType| {
            let found = (memory_type == MemoryType::Affective)
                .then(|| crate::policy::routing::emotion_of(&input.content))
                .flatten();
            (
                input.valence.or(found.map(|(v, _)| v)),
                input.arousal.or(found.map(|(_, a)| a)),
            )
        };
        if let Some(memory_type) = input.memory_type {
            let (valence, arousal) = felt(memory_type);
            return (
                Routing {
                    memory_type,
                    reason: "explicit type given by the caller".into(),
                },
                valence,
                arousal,
            );
        }
        let decision = crate::policy::routing::route(&input.content);
        let mut routing = Routing {
            memory_type: decision.memory_type,
            reason: decision.reason,
        };
        if decision.ambiguous {
            if let Some(arbiter) = &self.inner.arbiter {
                let asked = tokio::time::timeout(
                    self.inner.config.arbiter_timeout,
                    arbiter.route(&input.content, &MemoryType::ALL),
                )
                .await;
                match asked {
                    Ok(Some(memory_type)) => {
                        routing = Routing {
                            memory_type,
                            reason: format!(
                                "arbiter chose {} where the rules were unsure",
                                memory_type.as_str()
                            ),
                        };
                    }
                    Ok(None) => {}
                    Err(_) => tracing::warn!("routing arbiter timed out; the rules decide"),
                }
            }
        }
        let (valence, arousal) = felt(routing.memory_type);
        (routing, valence, arousal)
    }

    fn build_memory(
        &self,
        agent: &AgentId,
        input: RememberInput,
        routing: &Routing,
        affect: (Option<f32>, Option<f32>),
        now: DateTime<Utc>,
    ) -> Memory {
        Memory {
            id: MemoryId::generate(),
            agent_id: agent.clone(),
            memory_type: routing.memory_type,
            content: input.content,
            title: input.title,
            importance: input
                .importance
                .unwrap_or(self.inner.config.default_importance),
            tags: input.tags,
            session_id: input.session_id,
            project_id: input.project_id,
            occurred_at: input.occurred_at.unwrap_or(now),
            created_at: now,
            updated_at: now,
            last_accessed_at: now,
            access_count: 0,
            consolidation_level: 0.0,
            valence: affect.0,
            arousal: affect.1,
            status: MemoryStatus::Active,
            shared: input.shared,
            metadata: input.metadata.unwrap_or_else(|| serde_json::json!({})),
            source: input.source,
            version: 1,
        }
    }

    /// Remember one memory.
    pub async fn remember(
        &self,
        agent: &AgentId,
        input: RememberInput,
    ) -> MemoryResult<RememberOutcome> {
        let mut outcomes = self.remember_many(agent, vec![input], "").await?;
        outcomes
            .pop()
            .ok_or_else(|| MemoryError::internal("remember produced no outcome"))
    }

    /// Mine one user/assistant exchange for memories worth keeping
    /// ([`crate::policy::extraction`]) and store them through the `remember_batch`
    /// pipeline (routing, exact and near deduplication, contradiction supersede), at most
    /// `budget` of them.
    ///
    /// Returns the memories the turn landed on, each once and in the order extracted:
    /// newly created ones and existing ones a candidate duplicated (which are reinforced),
    /// so re-sending a turn creates nothing and returns the same memories. An exchange
    /// with nothing worth keeping returns an empty list.
    pub async fn extract_turn(
        &self,
        agent: &AgentId,
        user: &str,
        assistant: &str,
        session_id: Option<SessionId>,
        budget: usize,
    ) -> MemoryResult<Vec<RememberOutcome>> {
        let limits = &self.inner.config.limits;
        for (field, text) in [("user", user), ("assistant", assistant)] {
            if text.len() > limits.max_content_bytes {
                return Err(MemoryError::too_large(
                    field,
                    format!(
                        "{field} is {} bytes; the limit is {} (limits.max_content_bytes)",
                        text.len(),
                        limits.max_content_bytes
                    ),
                ));
            }
        }
        if user.trim().is_empty() && assistant.trim().is_empty() {
            return Err(MemoryError::invalid(
                "user",
                "give the user's message, the assistant's reply, or both",
            ));
        }
        let thought = self
            .inner
            .thought
            .extract_exchange(user, assistant, budget)
            .await;
        if let Some(why) = &thought.fallback {
            tracing::debug!(reason = %why, "extract_turn fell back to rules");
        }
        let mut candidates = thought.value;
        candidates.truncate(budget);
        let inputs: Vec<RememberInput> = candidates
            .into_iter()
            // A procedure stitched from a long reply may outgrow the content limit: skip it.
            .filter(|c| c.content.len() <= limits.max_content_bytes)
            .map(|c| {
                tracing::debug!(kind = ?c.kind, reason = %c.reason, "extracted a memory");
                RememberInput {
                    content: c.content,
                    memory_type: Some(c.memory_type),
                    tags: c.tags,
                    session_id: session_id.clone(),
                    ..Default::default()
                }
            })
            .collect();
        if inputs.is_empty() {
            return Ok(Vec::new());
        }
        let outcomes = self.remember_many(agent, inputs, "").await?;
        let mut seen = std::collections::HashSet::new();
        Ok(outcomes
            .into_iter()
            .filter(|o| seen.insert(o.memory.id.clone()))
            .collect())
    }

    /// Remember several memories in one transaction, in order.
    pub async fn remember_batch(
        &self,
        agent: &AgentId,
        inputs: Vec<RememberInput>,
    ) -> MemoryResult<Vec<RememberOutcome>> {
        let limits = &self.inner.config.limits;
        if inputs.is_empty() {
            return Err(MemoryError::invalid(
                "memories",
                "memories must hold at least one memory",
            ));
        }
        if inputs.len() > limits.max_batch {
            return Err(MemoryError::too_large(
                "memories",
                format!(
                    "a batch holds at most {} memories (limits.max_batch); got {}",
                    limits.max_batch,
                    inputs.len()
                ),
            ));
        }
        self.remember_many(agent, inputs, "memories").await
    }

    async fn remember_many(
        &self,
        agent: &AgentId,
        inputs: Vec<RememberInput>,
        batch_field: &str,
    ) -> MemoryResult<Vec<RememberOutcome>> {
        for (index, input) in inputs.iter().enumerate() {
            let prefix = if batch_field.is_empty() {
                String::new()
            } else {
                format!("{batch_field}[{index}].")
            };
            self.validate_input(input, &prefix)?;
        }
        let mut inputs = inputs;
        self.resolve_projects(agent, &mut inputs, batch_field)
            .await?;
        let now = self.now();
        let mut built: Vec<(Memory, Routing)> = Vec::with_capacity(inputs.len());
        for input in inputs {
            let (routing, valence, arousal) = self.route(&input).await;
            built.push((
                self.build_memory(agent, input, &routing, (valence, arousal), now),
                routing,
            ));
        }

        // Exact duplicates: of a stored memory, or of an earlier item of this batch.
        let hashes: Vec<String> = built
            .iter()
            .map(|(m, _)| normalized_hash(&m.content))
            .collect();
        // Held until this batch is stored: a concurrent write of the same content waits,
        // then finds this one.
        let _same_content = self
            .inner
            .content_locks
            .acquire(hashes.iter().map(|h| format!("{agent}\u{1f}{h}")).collect())
            .await;
        // Look up exact duplicates while embedding everything: exact duplicates are rare, the saved round trip is not.
        let (stored, all_embeddings) = tokio::join!(
            self.episodic(|reply| EpisodicMsg::FindByContentHash {
                agent: agent.clone(),
                hashes: hashes.clone(),
                reply,
            }),
            self.embed(built.iter().map(|(m, _)| embedding_text(m)).collect()),
        );
        let stored = stored?;
        let mut all_embeddings: Vec<Option<Vec<f32>>> =
            all_embeddings?.into_iter().map(Some).collect();
        // A duplicate must be in the same project: projects are separate contexts, and a
        // memory merged into an isolated project's copy would vanish from this one's recall.
        let stored_by_hash: HashMap<(&str, Option<&ProjectId>), &MemoryId> = stored
            .iter()
            .map(|(h, m)| ((h.as_str(), m.project_id.as_ref()), &m.id))
            .collect();
        let mut duplicate_of: Vec<Option<MemoryId>> = vec![None; built.len()];
        let mut first_in_batch: HashMap<(&str, Option<&ProjectId>), usize> = HashMap::new();
        for (index, hash) in hashes.iter().enumerate() {
            let key = (hash.as_str(), built[index].0.project_id.as_ref());
            if let Some(id) = stored_by_hash.get(&key) {
                duplicate_of[index] = Some((*id).clone());
            } else if let Some(first) = first_in_batch.get(&key) {
                duplicate_of[index] = Some(built[*first].0.id.clone());
            } else {
                first_in_batch.insert(key, index);
            }
        }

        // Embed what is new, then look for near-duplicates and contradiction candidates.
        let fresh: Vec<usize> = (0..built.len())
            .filter(|i| duplicate_of[*i].is_none())
            .collect();
        let embeddings: Vec<Vec<f32>> = fresh
            .iter()
            .map(|i| all_embeddings[*i].take().unwrap_or_default())
            .collect();
        let queries: Vec<VectorQuery> = fresh
            .iter()
            .zip(&embeddings)
            .map(|(i, vector)| {
                let memory_type = built[*i].0.memory_type;
                let types = if is_knowledge(memory_type) {
                    vec![MemoryType::Semantic, MemoryType::Procedural]
                } else {
                    vec![memory_type]
                };
                VectorQuery {
                    agent_id: agent.clone(),
                    include_shared: false,
                    types,
                    vector: vector.clone(),
                    limit: 5,
                }
            })
            .collect();
        let neighbours = if queries.is_empty() {
            Vec::new()
        } else {
            self.vectors(|reply| VectorsMsg::SearchMany {
                queries: queries.clone(),
                reply,
            })
            .await?
        };
        let threshold = self.inner.config.dedup_threshold;
        // A near-duplicate must have the same type and must not contradict the new text
        // (a negation or a changed number can leave the vectors almost equal); read the
        // close hits.
        let close: Vec<MemoryId> = neighbours
            .iter()
            .flatten()
            .filter(|(_, s)| *s >= threshold)
            .map(|(id, _)| id.clone())
            .collect();
        let close_memories: HashMap<MemoryId, Memory> = self
            .get_many(&close)
            .await?
            .into_iter()
            .map(|m| (m.id.clone(), m))
            .collect();
        let mut records = Vec::new();
        let mut contradiction_checks: Vec<(usize, Vec<MemoryId>)> = Vec::new();
        for ((index, embedding), hits) in fresh.iter().zip(embeddings).zip(&neighbours) {
            let memory = &built[*index].0;
            let near = hits.iter().find(|(id, similarity)| {
                *similarity >= threshold
                    && close_memories.get(id).is_some_and(|old| {
                        old.memory_type == memory.memory_type
                            && old.project_id == memory.project_id
                            && crate::policy::consistency::contradiction(
                                &old.content,
                                &memory.content,
                            )
                            .is_none()
                    })
            });
            if let Some((id, _)) = near {
                duplicate_of[*index] = Some(id.clone());
                continue;
            }
            if is_knowledge(memory.memory_type) {
                let band: Vec<MemoryId> = hits
                    .iter()
                    .filter(|(_, similarity)| {
                        *similarity >= self.inner.config.contradiction_min_similarity
                    })
                    .map(|(id, _)| id.clone())
                    .collect();
                contradiction_checks.push((*index, band));
            }
            records.push(StoredMemory {
                memory: memory.clone(),
                embedding,
            });
        }
        redirect_duplicates(&built, &mut duplicate_of);
        contradiction_checks.retain(|(index, _)| duplicate_of[*index].is_none());
        let mut superseded = self
            .find_contradictions(agent, &built, &contradiction_checks)
            .await?;

        if !records.is_empty() {
            // The store checks the content again inside its write transaction: another
            // process sharing the database may have stored the same text since the
            // lookup above (the content locks only order this process's writers).
            let stored_elsewhere = self
                .episodic(|reply| EpisodicMsg::InsertNewContent {
                    records: records.clone(),
                    reply,
                })
                .await?;
            if !stored_elsewhere.is_empty() {
                for (new_id, existing) in &stored_elsewhere {
                    if let Some(index) = built.iter().position(|(m, _)| m.id == *new_id) {
                        duplicate_of[index] = Some(existing.clone());
                        superseded.retain(|(i, _, _)| *i != index);
                    }
                }
                records.retain(|r| !stored_elsewhere.iter().any(|(id, _)| *id == r.memory.id));
                redirect_duplicates(&built, &mut duplicate_of);
            }
            self.learn_speakers(agent, records.iter().map(|r| &r.memory));
            let entries: Vec<EmbeddingRecord> = records
                .iter()
                .map(|r| embedding_record(&r.memory, r.embedding.clone()))
                .collect();
            self.project_vectors(entries, Vec::new()).await;
        }
        let memories: Vec<&Memory> = records.iter().map(|r| &r.memory).collect();
        self.push_working(agent, &memories, now).await;

        // Contradicted knowledge is superseded (kept, with history), never deleted.
        let mut superseded_by: HashMap<usize, Vec<MemoryId>> = HashMap::new();
        for (index, old_id, why) in superseded {
            let patch = MemoryPatch {
                status: Some(MemoryStatus::Superseded),
                ..Default::default()
            };
            match self
                .change(Some(agent), &old_id, patch, "conflict_replace")
                .await
            {
                Ok(_) => {
                    tracing::info!(old = %old_id, new = %built[index].0.id, reason = %why, "memory superseded");
                    let edge = Association {
                        agent_id: agent.clone(),
                        from_id: built[index].0.id.clone(),
                        to_id: old_id.clone(),
                        relation: "supersedes".into(),
                        weight: 1.0,
                        created_at: now,
                    };
                    if let Err(error) = self
                        .graph(|reply| GraphMsg::Upsert {
                            edge: edge.clone(),
                            reply,
                        })
                        .await
                    {
                        tracing::warn!(%error, "supersedes edge not recorded");
                    }
                    superseded_by.entry(index).or_default().push(old_id);
                }
                // Already changed by someone else: leave it.
                Err(error)
                    if error.code == crate::error::ErrorCode::Conflict
                        || error.code == crate::error::ErrorCode::NotFound => {}
                Err(error) => return Err(error),
            }
        }

        // Deduplication counts as an access of the memory it lands on.
        let mut targets: Vec<MemoryId> = duplicate_of.iter().flatten().cloned().collect();
        targets.sort();
        targets.dedup();
        targets.retain(|id| {
            !built
                .iter()
                .any(|(m, _)| m.id == *id && records.iter().any(|r| r.memory.id == *id))
        });
        let mut existing: HashMap<MemoryId, Memory> = HashMap::new();
        if !targets.is_empty() {
            self.episodic(|reply| EpisodicMsg::TouchNow {
                ids: targets.clone(),
                at: now,
                reply,
            })
            .await?;
            existing = self
                .get_many(&targets)
                .await?
                .into_iter()
                .map(|m| (m.id.clone(), m))
                .collect();
        }
        let by_new_id: HashMap<MemoryId, Memory> = records
            .iter()
            .map(|r| (r.memory.id.clone(), r.memory.clone()))
            .collect();
        built
            .into_iter()
            .enumerate()
            .map(|(index, (memory, routing))| match &duplicate_of[index] {
                Some(target) => {
                    let found = existing
                        .get(target)
                        .or_else(|| by_new_id.get(target))
                        .cloned();
                    let memory = found.ok_or_else(|| {
                        MemoryError::internal(format!("duplicate target {target} vanished"))
                    })?;
                    Ok(RememberOutcome {
                        memory,
                        routing,
                        deduplicated_into: Some(target.clone()),
                        superseded: Vec::new(),
                    })
                }
                None => Ok(RememberOutcome {
                    memory,
                    routing,
                    deduplicated_into: None,
                    superseded: superseded_by.remove(&index).unwrap_or_default(),
                }),
            })
            .collect()
    }

    /// Put each input in its project: an explicit `project_id` must name one of the
    /// agent's projects (and attaches the input's session to it); without one, an input
    /// goes to the project its session is attached to, if any.
    async fn resolve_projects(
        &self,
        agent: &AgentId,
        inputs: &mut [RememberInput],
        batch_field: &str,
    ) -> MemoryResult<()> {
        let mut known: std::collections::HashSet<ProjectId> = std::collections::HashSet::new();
        let mut session_projects: HashMap<SessionId, Option<ProjectId>> = HashMap::new();
        for (index, input) in inputs.iter_mut().enumerate() {
            let prefix = if batch_field.is_empty() {
                String::new()
            } else {
                format!("{batch_field}[{index}].")
            };
            if let Some(project) = input.project_id.clone() {
                if !known.contains(&project) {
                    self.project(agent, &project)
                        .await
                        .map_err(|e| MemoryError {
                            field: Some(format!("{prefix}project_id")),
                            ..e
                        })?;
                    known.insert(project.clone());
                }
                if let Some(session) = &input.session_id {
                    if session_projects.get(session) != Some(&Some(project.clone())) {
                        self.attach_session(agent, &project, session)
                            .await
                            .map_err(|e| MemoryError {
                                field: Some(format!("{prefix}session_id")),
                                ..e
                            })?;
                        session_projects.insert(session.clone(), Some(project));
                    }
                }
            } else if let Some(session) = &input.session_id {
                let project = match session_projects.get(session) {
                    Some(project) => project.clone(),
                    None => {
                        let project = self
                            .namespaces(|reply| NamespacesMsg::SessionProject {
                                agent: agent.clone(),
                                session: session.clone(),
                                reply,
                            })
                            .await?;
                        session_projects.insert(session.clone(), project.clone());
                        project
                    }
                };
                input.project_id = project;
            }
        }
        Ok(())
    }

    /// Links from `seeds` to their association-graph neighbours and to the turns next to
    /// them in their sessions.
    async fn neighbours(
        &self,
        agent: &AgentId,
        seeds: &[MemoryId],
        radius: usize,
    ) -> (MemoryResult<Vec<NeighbourLink>>, ReadSource) {
        let ((edges, source), in_session) = tokio::join!(
            self.links_around(agent, seeds, 200),
            self.session_neighbours(seeds, radius),
        );
        let links = match (edges, in_session) {
            (Ok(edges), Ok(in_session)) => Ok(neighbour_links(seeds, &edges, in_session)),
            (Err(error), _) | (_, Err(error)) => Err(error),
        };
        (links, source)
    }
}

/// An exact duplicate of an earlier item of a batch follows that item wherever it went
/// (the earlier item may itself have turned out a duplicate of a stored memory).
fn redirect_duplicates<R>(built: &[(Memory, R)], duplicate_of: &mut [Option<MemoryId>]) {
    for index in 0..built.len() {
        let Some(target) = duplicate_of[index].clone() else {
            continue;
        };
        if let Some(first) = built.iter().position(|(m, _)| m.id == target) {
            if let Some(redirect) = duplicate_of[first].clone() {
                duplicate_of[index] = Some(redirect);
            }
        }
    }
}

/// The links recall spreads relevance along: each association touching a seed (weighted
/// by its strength; a `supersedes` edge leads to an outdated memory and is skipped), and
/// each (seed, session neighbour) pair at full weight.
fn neighbour_links(
    seeds: &[MemoryId],
    edges: &[crate::store::Link],
    in_session: Vec<(MemoryId, MemoryId)>,
) -> Vec<NeighbourLink> {
    let mut links: Vec<NeighbourLink> = Vec::new();
    for seed in seeds {
        for edge in edges {
            let other = if edge.from_id == *seed {
                &edge.to_id
            } else if edge.to_id == *seed {
                &edge.from_id
            } else {
                continue;
            };
            if edge.relation != "supersedes" {
                links.push(NeighbourLink {
                    seed: seed.clone(),
                    neighbour: other.clone(),
                    weight: f64::from(edge.weight).clamp(0.0, 1.0),
                });
            }
        }
    }
    links.extend(
        in_session
            .into_iter()
            .map(|(seed, neighbour)| NeighbourLink {
                seed,
                neighbour,
                weight: 1.0,
            }),
    );
    links
}

impl Runtime {
    async fn get_many(&self, ids: &[MemoryId]) -> MemoryResult<Vec<Memory>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        self.episodic(|reply| EpisodicMsg::GetMany {
            ids: ids.to_vec(),
            reply,
        })
        .await
    }

    /// Mirror new session memories into their windows, in one working-store call
    /// (one Redis round trip for a whole batch). Best effort: working memory is a cache.
    async fn push_working(&self, agent: &AgentId, memories: &[&Memory], now: DateTime<Utc>) {
        let items: Vec<(SessionId, WorkingItem)> = memories
            .iter()
            .filter_map(|memory| {
                Some((
                    memory.session_id.clone()?,
                    WorkingItem {
                        memory_id: memory.id.clone(),
                        content: memory.content.clone(),
                        at: now,
                    },
                ))
            })
            .collect();
        if items.is_empty() {
            return;
        }
        let pushed = self
            .working(|reply| WorkingMsg::PushMany {
                agent: agent.clone(),
                items: items.clone(),
                reply,
            })
            .await;
        if let Err(error) = pushed {
            tracing::warn!(%error, "working-memory window not updated");
        }
    }

    /// For each new knowledge memory, the stored knowledge it contradicts: candidates are
    /// its vector neighbours in the similarity band plus its keyword matches; the rule
    /// decides, and the arbiter (if any) may confirm a case the rule does not catch.
    async fn find_contradictions(
        &self,
        agent: &AgentId,
        built: &[(Memory, Routing)],
        checks: &[(usize, Vec<MemoryId>)],
    ) -> MemoryResult<Vec<(usize, MemoryId, String)>> {
        let mut found = Vec::new();
        for (index, band) in checks {
            let new = &built[*index].0;
            let query = KeywordQuery {
                agent_id: agent.clone(),
                include_shared: false,
                text: new.content.clone(),
                // Episodic memories share the words too and are filtered out below.
                limit: 20,
                occurred: None,
            };
            let keyword = self
                .episodic(|reply| EpisodicMsg::KeywordSearch {
                    query: query.clone(),
                    reply,
                })
                .await?;
            let mut candidates: Vec<MemoryId> = band.clone();
            candidates.extend(keyword.into_iter().map(|(id, _)| id));
            candidates.sort();
            candidates.dedup();
            for old in self.get_many(&candidates).await? {
                if old.agent_id != *agent
                    || old.status != MemoryStatus::Active
                    || !is_knowledge(old.memory_type)
                    || old.id == new.id
                    // Projects are separate contexts: one project's knowledge does not replace another's.
                    || old.project_id != new.project_id
                {
                    continue;
                }
                let verdict =
                    match crate::policy::consistency::contradiction(&old.content, &new.content) {
                        Some(why) => Some(why),
                        None if band.contains(&old.id) => match &self.inner.arbiter {
                            Some(arbiter) => {
                                match tokio::time::timeout(
                                    self.inner.config.arbiter_timeout,
                                    arbiter.contradicts(&old.content, &new.content),
                                )
                                .await
                                {
                                    Ok(Some(true)) => {
                                        Some("the arbiter judged it replaced".to_string())
                                    }
                                    _ => None,
                                }
                            }
                            None => None,
                        },
                        None => None,
                    };
                if let Some(why) = verdict {
                    found.push((*index, old.id.clone(), why));
                }
            }
        }
        Ok(found)
    }

    /// Remember who `agent`'s memories are attributed to (at most `MAX_SPEAKERS`).
    fn learn_speakers<'a>(&self, agent: &AgentId, memories: impl Iterator<Item = &'a Memory>) {
        const MAX_SPEAKERS: usize = 4096;
        let mut found: Vec<String> = memories
            .filter(|m| m.agent_id == *agent)
            .filter_map(speaker_of)
            .map(str::to_lowercase)
            .collect();
        if found.is_empty() {
            return;
        }
        found.sort_unstable();
        found.dedup();
        let mut speakers = self
            .inner
            .speakers
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let known = speakers.entry(agent.clone()).or_default();
        for speaker in found {
            if known.len() >= MAX_SPEAKERS {
                break;
            }
            known.insert(speaker);
        }
    }

    /// The known speakers of `agent` that `words` name.
    fn named_speakers(
        &self,
        agent: &AgentId,
        words: &std::collections::HashSet<String>,
    ) -> Vec<String> {
        let speakers = self
            .inner
            .speakers
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let mut named: Vec<String> = speakers
            .get(agent)
            .map(|known| {
                known
                    .iter()
                    .filter(|s| crate::policy::fusion::names_speaker(words, s))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        named.sort_unstable();
        named
    }

    /// Recall: vector and keyword retrieval in parallel, fused, filtered and re-ranked.
    pub async fn recall(&self, input: RecallInput) -> MemoryResult<RecallOutcome> {
        let started = Instant::now();
        let limits = &self.inner.config.limits;
        let limit = input.limit.unwrap_or(10);
        if limit == 0 || limit > limits.max_result_limit {
            return Err(MemoryError::invalid(
                "limit",
                format!(
                    "limit must be between 1 and {} (limits.max_result_limit)",
                    limits.max_result_limit
                ),
            ));
        }
        if input.query.trim().is_empty() {
            return Err(MemoryError::invalid("query", "query must not be empty"));
        }
        if input.query.len() > limits.max_content_bytes {
            return Err(MemoryError::too_large(
                "query",
                format!("query is longer than {} bytes", limits.max_content_bytes),
            ));
        }
        validate_tags(&input.tags, limits, "tags")?;
        if let Some(project) = &input.project_id {
            self.project(&input.agent_id, project).await?;
        }
        // A time expression inside the question is a hint (a time retriever and a boost), not a filter.
        let hinted = match input.time_range {
            Some(_) => None,
            None => find_time_expression(&input.query, input.now.unwrap_or_else(|| self.now())),
        };
        let search_text = hinted
            .as_ref()
            .filter(|found| !found.rest.trim().is_empty())
            .map_or_else(|| input.query.clone(), |found| found.rest.clone());
        // The question's topic without the speakers it names (see `without_speakers`):
        // what the vector retriever and the similarity compare, when the speakers are
        // already known; else the whole question, corrected below once the candidates
        // show who is named.
        let settings = self.inner.config.recall;
        let strips_speakers = settings.speaker_boost > 0.0 && settings.topic_without_speakers;
        let asked_words = crate::policy::fusion::query_words(&input.query);
        let topic_text = if strips_speakers {
            let named = self.named_speakers(&input.agent_id, &asked_words);
            let named: Vec<&str> = named.iter().map(String::as_str).collect();
            crate::policy::fusion::without_speakers(&search_text, &named)
        } else {
            None
        };
        let embedded_text = topic_text.clone().unwrap_or_else(|| search_text.clone());
        let time_window = input
            .time_range
            .or(hinted.as_ref().map(|found| found.range));
        // A time, tag or type filter discards candidates afterwards, so fetch deeper.
        let filtered =
            input.time_range.is_some() || !input.tags.is_empty() || !input.types.is_empty();
        let fetch = if filtered {
            (limit * 10 + 100).min(2000)
        } else {
            (limit * 3 + 20).min(1000)
        };
        let vector_query = VectorQuery {
            agent_id: input.agent_id.clone(),
            include_shared: input.include_shared,
            types: input.types.clone(),
            vector: Vec::new(),
            limit: fetch,
        };
        let keyword_query = KeywordQuery {
            agent_id: input.agent_id.clone(),
            include_shared: input.include_shared,
            text: search_text.clone(),
            limit: fetch,
            occurred: input.time_range,
        };
        let time_query = time_window.map(|range| ListQuery {
            agent_id: Some(input.agent_id.clone()),
            memory_type: None,
            status: Some(MemoryStatus::Active),
            tag: None,
            limit: fetch,
            cursor: None,
            occurred: Some(range),
            project_id: None,
        });
        let (
            (vector_hits, vector_ms),
            (keyword_hits, keyword_ms),
            (time_hits, time_ms),
            (window, working_ms),
        ) = tokio::join!(
            // With the vector retriever weighted out, the question is not even embedded.
            timed(async {
                if settings.vector_weight > 0.0 {
                    Some(self.embed_and_search(&embedded_text, &vector_query).await)
                } else {
                    None
                }
            }),
            timed(self.episodic(|reply| EpisodicMsg::KeywordSearch {
                query: keyword_query.clone(),
                reply,
            })),
            timed(async {
                match &time_query {
                    Some(query) => {
                        self.episodic(|reply| EpisodicMsg::List {
                            query: query.clone(),
                            reply,
                        })
                        .await
                    }
                    None => Ok(Vec::new()),
                }
            }),
            timed(async {
                match &input.session_id {
                    Some(session) if settings.working_weight > 0.0 => self
                        .working(|reply| WorkingMsg::Window {
                            agent: input.agent_id.clone(),
                            session: session.clone(),
                            reply,
                        })
                        .await
                        // Working memory is an extra: recall answers without it.
                        .unwrap_or_else(|error| {
                            tracing::warn!(%error, "working memory unavailable; recall goes on without it");
                            Vec::new()
                        }),
                    _ => Vec::new(),
                }
            }),
        );
        let (query_vector, vector_hits, mut sources) = match vector_hits {
            Some((hits, source)) => {
                let (query_vector, hits) = hits?;
                (query_vector, hits, vec![source])
            }
            None => (Vec::new(), Vec::new(), Vec::new()),
        };
        let window: Vec<(MemoryId, String)> = window
            .into_iter()
            .map(|item| (item.memory_id, item.content))
            .collect();
        let mut lists = vec![
            RankedList {
                retriever: Retriever::Vector,
                weight: settings.vector_weight,
                hits: vector_hits
                    .into_iter()
                    .map(|(id, s)| (id, f64::from(s)))
                    .collect(),
            },
            RankedList {
                retriever: Retriever::Keyword,
                weight: settings.keyword_weight,
                hits: keyword_hits?,
            },
            // The memories of the range, so a query with no matching words still finds them.
            RankedList {
                retriever: Retriever::Time,
                weight: settings.time_weight,
                hits: time_hits?.into_iter().map(|m| (m.id, 1.0)).collect(),
            },
            // What the session is working on right now.
            RankedList {
                retriever: Retriever::Working,
                weight: settings.working_weight,
                hits: crate::policy::fusion::rank_window(&search_text, &window),
            },
        ];
        // Pseudo-relevance feedback: search again with the words the best keyword hits share.
        let mut feedback_ms = 0.0;
        if settings.feedback_weight > 0.0 && settings.feedback_terms > 0 {
            let keyword_list = lists.iter().find(|l| l.retriever == Retriever::Keyword);
            let top: Vec<MemoryId> = keyword_list
                .map(|l| l.hits.as_slice())
                .unwrap_or_default()
                .iter()
                .take(settings.feedback_documents)
                .map(|(id, _)| id.clone())
                .collect();
            if top.len() >= 2 {
                let (expanded, took) = timed(async {
                    let documents = self.get_many(&top).await?;
                    let texts: Vec<&str> = documents.iter().map(|m| m.content.as_str()).collect();
                    let extra = crate::policy::fusion::feedback_terms(
                        &search_text,
                        &texts,
                        settings.feedback_terms,
                    );
                    if extra.is_empty() {
                        return Ok(Vec::new());
                    }
                    let query = KeywordQuery {
                        text: format!("{search_text} {}", extra.join(" ")),
                        ..keyword_query.clone()
                    };
                    self.episodic(|reply| EpisodicMsg::KeywordSearch {
                        query: query.clone(),
                        reply,
                    })
                    .await
                })
                .await;
                feedback_ms = took;
                lists.push(RankedList {
                    retriever: Retriever::Feedback,
                    weight: settings.feedback_weight,
                    hits: expanded?,
                });
            }
        }
        lists.retain(|l| l.weight > 0.0);
        // Every candidate is scored by its exact similarity to the query, whichever
        // retriever found it.
        let scores_similarity = settings.vector_weight > 0.0;
        let candidates: Vec<MemoryId> = {
            let mut seen = std::collections::HashSet::new();
            lists
                .iter()
                .flat_map(|l| l.hits.iter().map(|(id, _)| id))
                .filter(|id| seen.insert(*id))
                .cloned()
                .collect()
        };
        let (similarity, mut similarity_ms) = timed(async {
            if scores_similarity {
                self.similarity(&query_vector, &candidates).await
            } else {
                Ok(HashMap::new())
            }
        })
        .await;
        let mut similarity = similarity?;
        let mut fused = score_fusion(&lists, &similarity);
        // Only the best candidates are worth reading back; filters rarely drop many of them.
        fused.truncate(fetch);
        let ids: Vec<MemoryId> = fused.iter().map(|h| h.id.clone()).collect();
        let (memories, mut fetch_ms) = timed(self.episodic(|reply| EpisodicMsg::GetMany {
            ids: ids.clone(),
            reply,
        }))
        .await;
        let mut memories = memories?;
        self.learn_speakers(&input.agent_id, memories.iter());
        // A memory attributed to someone the question names ("what did Alice say …").
        let attributed = |memory: &Memory| {
            settings.speaker_boost > 0.0
                && speaker_of(memory)
                    .is_some_and(|s| crate::policy::fusion::names_speaker(&asked_words, s))
        };
        // The candidates name a speaker recall did not know when it embedded the
        // question (the first such question after a restart): embed the topic without
        // the name now, score the similarities again and fuse again.
        let mut query_vector = query_vector;
        if scores_similarity && strips_speakers {
            let mut named_speakers: Vec<&str> = memories
                .iter()
                .filter(|m| attributed(m))
                .filter_map(speaker_of)
                .collect();
            named_speakers.sort_unstable();
            named_speakers.dedup();
            let topic = crate::policy::fusion::without_speakers(&search_text, &named_speakers)
                .filter(|topic| *topic != embedded_text);
            if let Some(topic) = topic {
                let (rescored, took) = timed(async {
                    let vector = self.embed_question(&topic).await?;
                    let similarity = self.similarity(&vector, &candidates).await?;
                    Ok::<_, MemoryError>((vector, similarity))
                })
                .await;
                similarity_ms += took;
                (query_vector, similarity) = rescored?;
                fused = score_fusion(&lists, &similarity);
                fused.truncate(fetch);
                let known: std::collections::HashSet<&MemoryId> =
                    memories.iter().map(|m| &m.id).collect();
                let missing: Vec<MemoryId> = fused
                    .iter()
                    .map(|h| h.id.clone())
                    .filter(|id| !known.contains(id))
                    .collect();
                if !missing.is_empty() {
                    let (more, took) = timed(self.get_many(&missing)).await;
                    fetch_ms += took;
                    memories.extend(more?);
                }
            }
        }
        // The best similarity among the candidates, to score memories the expansion adds.
        let best_similarity = if similarity.is_empty() {
            lists
                .iter()
                .filter(|l| l.retriever == Retriever::Vector)
                .flat_map(|l| l.hits.iter().map(|(_, s)| *s))
                .fold(0.0, f64::max)
        } else {
            similarity.values().copied().fold(0.0, f64::max)
        };
        if settings.speaker_boost > 0.0 {
            let named: std::collections::HashSet<&MemoryId> = memories
                .iter()
                .filter(|m| attributed(m))
                .map(|m| &m.id)
                .collect();
            for hit in &mut fused {
                if named.contains(&hit.id) {
                    hit.score *= 1.0 + settings.speaker_boost;
                }
            }
            crate::policy::fusion::sort_fused(&mut fused);
        }
        let mut expand_ms = 0.0;
        if settings.neighbour_weight > 0.0 && settings.expansion_seeds > 0 && !fused.is_empty() {
            let started_expansion = Instant::now();
            let seeds: Vec<MemoryId> = fused
                .iter()
                .take(settings.expansion_seeds)
                .map(|h| h.id.clone())
                .collect();
            let (links, graph_source) = self
                .neighbours(&input.agent_id, &seeds, settings.session_radius)
                .await;
            sources.push(graph_source);
            let links = links?;
            let known: std::collections::HashSet<MemoryId> =
                fused.iter().map(|h| h.id.clone()).collect();
            let mut added: Vec<MemoryId> = links
                .iter()
                .map(|l| l.neighbour.clone())
                .filter(|id| !known.contains(id))
                .collect();
            added.sort();
            added.dedup();
            let (added_memories, added_similarity) = tokio::join!(self.get_many(&added), async {
                if scores_similarity {
                    self.similarity(&query_vector, &added).await
                } else {
                    Ok(HashMap::new())
                }
            });
            let added_memories = added_memories?;
            let added_similarity = added_similarity?;
            // A memory the expansion adds scores on its own by its similarity alone.
            let mut scores: HashMap<MemoryId, f64> =
                fused.iter().map(|h| (h.id.clone(), h.score)).collect();
            for memory in &added_memories {
                let own = match added_similarity.get(&memory.id) {
                    Some(value) if best_similarity > 0.0 => {
                        settings.vector_weight * value.max(0.0) / best_similarity
                    }
                    _ => 0.0,
                };
                let boost = if attributed(memory) {
                    1.0 + settings.speaker_boost
                } else {
                    1.0
                };
                scores.insert(memory.id.clone(), own * boost);
            }
            let lifted =
                crate::policy::fusion::propagate(&scores, &links, settings.neighbour_weight);
            for hit in &mut fused {
                if let Some(score) = lifted.get(&hit.id) {
                    hit.score = *score;
                    hit.matched_by.push(Retriever::Graph);
                    hit.matched_by.sort();
                    hit.components.push((Retriever::Graph, *score));
                }
            }
            for memory in &added_memories {
                if let Some(score) = lifted.get(&memory.id) {
                    let mut components = vec![(Retriever::Graph, *score)];
                    if let Some(value) = added_similarity.get(&memory.id) {
                        components.push((Retriever::Vector, *value));
                    }
                    fused.push(crate::policy::fusion::FusedHit {
                        id: memory.id.clone(),
                        score: *score,
                        matched_by: vec![Retriever::Graph],
                        components,
                    });
                }
            }
            memories.extend(added_memories);
            crate::policy::fusion::sort_fused(&mut fused);
            expand_ms = started_expansion.elapsed().as_secs_f64() * 1000.0;
        }
        let isolated = self.isolated_among(&memories).await?;
        let by_id: HashMap<&MemoryId, &Memory> = memories.iter().map(|m| (&m.id, m)).collect();
        let now = self.now();
        // The best possible fused score (a perfect match of every main retriever), to put
        // relevance on 0..1 before re-ranking.
        let max_fused = lists
            .iter()
            .filter(|l| l.retriever != Retriever::Time || time_window.is_some())
            .filter(|l| {
                !matches!(
                    l.retriever,
                    Retriever::Graph | Retriever::Working | Retriever::Feedback
                )
            })
            .map(|l| l.weight)
            .sum::<f64>()
            .max(f64::EPSILON);
        let mut hits: Vec<RecallHit> = fused
            .iter()
            .filter_map(|hit| {
                let memory = *by_id.get(&hit.id)?;
                let in_project = input.project_id.is_some()
                    && memory.agent_id == input.agent_id
                    && memory.project_id == input.project_id;
                // An isolated project's memories (shared ones included) stay inside it.
                let walled_off = !in_project
                    && memory
                        .project_id
                        .as_ref()
                        .is_some_and(|p| isolated.contains(&(memory.agent_id.clone(), p.clone())));
                let visible = !walled_off
                    && (memory.agent_id == input.agent_id
                        || (input.include_shared && memory.shared));
                let wanted = memory.status == MemoryStatus::Active
                    && (input.types.is_empty() || input.types.contains(&memory.memory_type))
                    && (input.tags.is_empty()
                        || memory.tags.iter().any(|t| input.tags.contains(t)))
                    && input
                        .time_range
                        .is_none_or(|r| r.contains(memory.occurred_at));
                if !visible || !wanted {
                    return None;
                }
                let retention = self.inner.config.retention.retention(memory, now);
                let in_session =
                    input.session_id.is_some() && memory.session_id == input.session_id;
                let relevance = hit.score / max_fused;
                let in_hinted_time = hinted
                    .as_ref()
                    .is_some_and(|found| found.range.contains(memory.occurred_at));
                let score = if !settings.rerank {
                    relevance
                } else {
                    relevance
                        * if in_hinted_time { 1.25 } else { 1.0 }
                        * (0.85 + 0.15 * f64::from(memory.importance))
                        * (0.9 + 0.1 * retention)
                        * if in_session { 1.1 } else { 1.0 }
                        * if in_project { 1.1 } else { 1.0 }
                        * if memory.agent_id == input.agent_id {
                            1.0
                        } else {
                            0.9
                        }
                };
                Some(RecallHit {
                    memory: memory.clone(),
                    score,
                    retention,
                    matched_by: {
                        let mut matched: Vec<&'static str> =
                            hit.matched_by.iter().map(|r| r.as_str()).collect();
                        if (input.time_range.is_some() || in_hinted_time)
                            && !hit.matched_by.contains(&Retriever::Time)
                        {
                            matched.push(Retriever::Time.as_str());
                        }
                        matched
                    },
                    components: input.debug.then(|| {
                        hit.components
                            .iter()
                            .map(|(r, s)| (r.as_str(), *s))
                            .collect()
                    }),
                })
            })
            .collect();
        hits.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| a.memory.id.cmp(&b.memory.id))
        });
        if settings.session_diversity > 0.0 {
            hits = crate::policy::fusion::diversify(
                hits,
                limit,
                settings.session_diversity,
                |h| h.score,
                |h| h.memory.session_id.as_ref().map(|s| s.as_str().to_string()),
            );
        } else {
            hits.truncate(limit);
        }
        if !hits.is_empty() {
            let touched: Vec<MemoryId> = hits.iter().map(|h| h.memory.id.clone()).collect();
            if let Some(episodic) = self.inner.directory.children().episodic {
                let _ = episodic.cast(EpisodicMsg::Touch {
                    ids: touched,
                    at: now,
                });
            }
        }
        Ok(RecallOutcome {
            hits,
            took_ms: started.elapsed().as_secs_f64() * 1000.0,
            timings_ms: vec![
                ("expand", expand_ms),
                ("vector", vector_ms),
                ("keyword", keyword_ms),
                ("time", time_ms),
                ("working", working_ms),
                ("feedback", feedback_ms),
                ("fetch", fetch_ms),
                ("similarity", similarity_ms),
            ],
            sources,
        })
    }

    /// The isolated projects among those of `memories` (one lookup, none when no memory has a project).
    async fn isolated_among(
        &self,
        memories: &[Memory],
    ) -> MemoryResult<std::collections::HashSet<(AgentId, ProjectId)>> {
        let keys: std::collections::HashSet<(AgentId, ProjectId)> = memories
            .iter()
            .filter_map(|m| m.project_id.clone().map(|p| (m.agent_id.clone(), p)))
            .collect();
        if keys.is_empty() {
            return Ok(std::collections::HashSet::new());
        }
        let projects: Vec<(AgentId, ProjectId)> = keys.into_iter().collect();
        Ok(self
            .namespaces(|reply| NamespacesMsg::IsolatedProjects {
                projects: projects.clone(),
                reply,
            })
            .await?
            .into_iter()
            .collect())
    }

    /// One memory, checked against `agent` when one is given (another agent's memory is `not_found`).
    pub async fn get(&self, agent: Option<&AgentId>, id: &MemoryId) -> MemoryResult<Memory> {
        let found = self
            .episodic(|reply| EpisodicMsg::Get {
                id: id.clone(),
                reply,
            })
            .await?;
        match found {
            Some(memory) if agent.is_none_or(|a| memory.agent_id == *a) => Ok(memory),
            _ => Err(not_found(id, agent)),
        }
    }

    /// Browse newest first; returns the page and the cursor of the next page.
    pub async fn list(
        &self,
        mut query: ListQuery,
    ) -> MemoryResult<(Vec<Memory>, Option<MemoryId>)> {
        let max = self.inner.config.limits.max_result_limit;
        if query.limit == 0 || query.limit > max {
            return Err(MemoryError::invalid(
                "limit",
                format!("limit must be between 1 and {max} (limits.max_result_limit)"),
            ));
        }
        let page_size = query.limit;
        query.limit = page_size + 1;
        let mut page = self
            .episodic(|reply| EpisodicMsg::List {
                query: query.clone(),
                reply,
            })
            .await?;
        let next = if page.len() > page_size {
            page.truncate(page_size);
            page.last().map(|m| m.id.clone())
        } else {
            None
        };
        Ok((page, next))
    }

    /// Change a memory, archiving its previous state with reason `update`.
    pub async fn patch(
        &self,
        agent: Option<&AgentId>,
        id: &MemoryId,
        patch: MemoryPatch,
    ) -> MemoryResult<Memory> {
        self.change(agent, id, patch, "update").await
    }

    async fn change(
        &self,
        agent: Option<&AgentId>,
        id: &MemoryId,
        patch: MemoryPatch,
        reason: &str,
    ) -> MemoryResult<Memory> {
        let limits = &self.inner.config.limits;
        if patch.is_empty() {
            return Err(MemoryError::invalid(
                "body",
                "the patch changes nothing; send at least one field to change",
            ));
        }
        if let Some(content) = &patch.content {
            if content.trim().is_empty() {
                return Err(MemoryError::invalid("content", "content must not be empty"));
            }
            if content.len() > limits.max_content_bytes {
                return Err(MemoryError::too_large(
                    "content",
                    format!("content is longer than {} bytes", limits.max_content_bytes),
                ));
            }
        }
        if let Some(importance) = patch.importance {
            if !(0.0..=1.0).contains(&importance) || importance.is_nan() {
                return Err(MemoryError::invalid(
                    "importance",
                    "importance must be between 0 and 1",
                ));
            }
        }
        if let Some(tags) = &patch.tags {
            validate_tags(tags, limits, "tags")?;
        }
        if let Some(metadata) = &patch.metadata {
            validate_metadata(metadata, limits, "metadata")?;
        }
        let current = self.get(agent, id).await?;
        let now = self.now();
        let next = apply_patch(&current, &patch, now);
        let content_changed = next.content != current.content || next.title != current.title;
        let embedding = if content_changed {
            Some(self.embed(vec![embedding_text(&next)]).await?.remove(0))
        } else {
            None
        };
        let previous = version_of(&current, reason, now);
        self.episodic(|reply| EpisodicMsg::Update {
            next: Box::new(next.clone()),
            previous: previous.clone(),
            embedding: embedding.clone(),
            reply,
        })
        .await?;
        // Keep the projection in step with status, type, sharing and content.
        if next.status == MemoryStatus::Active {
            let vector = match embedding {
                Some(vector) => Some(vector),
                None => self.stored_embedding(&next.id).await?,
            };
            if let Some(vector) = vector {
                self.project_vectors(vec![embedding_record(&next, vector)], Vec::new())
                    .await;
            }
        } else {
            self.project_vectors(Vec::new(), vec![next.id.clone()])
                .await;
        }
        Ok(next)
    }

    async fn stored_embedding(&self, id: &MemoryId) -> MemoryResult<Option<Vec<f32>>> {
        self.episodic(|reply| EpisodicMsg::Embedding {
            id: id.clone(),
            reply,
        })
        .await
    }

    /// Delete a memory from every store (history included).
    pub async fn delete(&self, agent: Option<&AgentId>, id: &MemoryId) -> MemoryResult<()> {
        self.get(agent, id).await?;
        self.graph(|reply| GraphMsg::RemoveMemory {
            id: id.clone(),
            reply,
        })
        .await?;
        self.episodic(|reply| EpisodicMsg::Delete {
            id: id.clone(),
            reply,
        })
        .await?;
        self.project_vectors(Vec::new(), vec![id.clone()]).await;
        Ok(())
    }

    /// Forget: archive (never delete) one memory or the memories matching a query. `dry_run` only reports.
    pub async fn forget(
        &self,
        agent: &AgentId,
        target: ForgetTarget,
        dry_run: bool,
    ) -> MemoryResult<Vec<MemoryId>> {
        let ids = match target {
            ForgetTarget::Id(id) => {
                let memory = self.get(Some(agent), &id).await?;
                if memory.status == MemoryStatus::Archived {
                    Vec::new()
                } else {
                    vec![id]
                }
            }
            ForgetTarget::Query { text, limit } => {
                if text.trim().is_empty() {
                    return Err(MemoryError::invalid("query", "query must not be empty"));
                }
                let max = self.inner.config.limits.max_result_limit;
                if limit == 0 || limit > max {
                    return Err(MemoryError::invalid(
                        "limit",
                        format!("limit must be between 1 and {max}"),
                    ));
                }
                // Only keyword matches: forgetting by vague similarity would archive the wrong things.
                let query = KeywordQuery {
                    agent_id: agent.clone(),
                    include_shared: false,
                    text,
                    limit,
                    occurred: None,
                };
                self.episodic(|reply| EpisodicMsg::KeywordSearch {
                    query: query.clone(),
                    reply,
                })
                .await?
                .into_iter()
                .map(|(id, _)| id)
                .collect()
            }
        };
        if dry_run {
            return Ok(ids);
        }
        let mut forgotten = Vec::new();
        for id in ids {
            let patch = MemoryPatch {
                status: Some(MemoryStatus::Archived),
                ..Default::default()
            };
            self.change(Some(agent), &id, patch, "forget").await?;
            forgotten.push(id);
        }
        Ok(forgotten)
    }

    /// Version history of a memory, oldest first.
    pub async fn history(
        &self,
        agent: Option<&AgentId>,
        id: &MemoryId,
    ) -> MemoryResult<Vec<MemoryVersion>> {
        self.get(agent, id).await?;
        self.episodic(|reply| EpisodicMsg::History {
            id: id.clone(),
            reply,
        })
        .await
    }

    /// Link two memories of the same agent.
    pub async fn associate(
        &self,
        agent: &AgentId,
        from: &MemoryId,
        to: &MemoryId,
        relation: Option<String>,
        weight: Option<f32>,
    ) -> MemoryResult<Association> {
        if from == to {
            return Err(MemoryError::invalid(
                "to_id",
                "a memory cannot be associated with itself",
            ));
        }
        let relation = relation.unwrap_or_else(|| "related_to".to_string());
        if relation.is_empty()
            || relation.len() > 64
            || !relation
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Err(MemoryError::invalid(
                "relation",
                "relation must be 1 to 64 characters of letters, digits and _",
            ));
        }
        let weight = weight.unwrap_or(0.5);
        if !(0.0..=1.0).contains(&weight) || weight.is_nan() {
            return Err(MemoryError::invalid(
                "weight",
                "weight must be between 0 and 1",
            ));
        }
        self.get(Some(agent), from)
            .await
            .map_err(|e| with_field(e, "from_id"))?;
        self.get(Some(agent), to)
            .await
            .map_err(|e| with_field(e, "to_id"))?;
        let edge = Association {
            agent_id: agent.clone(),
            from_id: from.clone(),
            to_id: to.clone(),
            relation,
            weight,
            created_at: self.now(),
        };
        self.graph(|reply| GraphMsg::Upsert {
            edge: edge.clone(),
            reply,
        })
        .await
    }

    /// Spread activation from a seed memory through the association graph.
    pub async fn spreading_activation(
        &self,
        agent: &AgentId,
        seed: &MemoryId,
        depth: u32,
        limit: usize,
    ) -> MemoryResult<Vec<ActivatedMemory>> {
        if !(1..=5).contains(&depth) {
            return Err(MemoryError::invalid(
                "depth",
                "depth must be between 1 and 5",
            ));
        }
        let max = self.inner.config.limits.max_result_limit;
        if limit == 0 || limit > max {
            return Err(MemoryError::invalid(
                "limit",
                format!("limit must be between 1 and {max}"),
            ));
        }
        let seed_memory = self
            .get(Some(agent), seed)
            .await
            .map_err(|e| with_field(e, "seed_id"))?;
        let (activations, source) = self.activate(agent, seed, depth, 0.8, limit * 2).await;
        tracing::debug!(answered_by = %source.answered_by, "spreading activation");
        let activations = activations?;
        let ids: Vec<MemoryId> = activations.iter().map(|a| a.id.clone()).collect();
        let memories = self
            .episodic(|reply| EpisodicMsg::GetMany {
                ids: ids.clone(),
                reply,
            })
            .await?;
        // Activation does not carry an isolated project's memories out of it: from a seed
        // outside that project they are not returned (paths through them still count).
        let isolated = self.isolated_among(&memories).await?;
        let by_id: HashMap<&MemoryId, &Memory> = memories.iter().map(|m| (&m.id, m)).collect();
        Ok(activations
            .into_iter()
            .filter_map(|a| {
                let memory = by_id.get(&a.id)?;
                let walled_off = memory.project_id != seed_memory.project_id
                    && memory
                        .project_id
                        .as_ref()
                        .is_some_and(|p| isolated.contains(&(memory.agent_id.clone(), p.clone())));
                (memory.status == MemoryStatus::Active && !walled_off).then(|| ActivatedMemory {
                    memory: (*memory).clone(),
                    activation: a.activation,
                    path: a.path,
                })
            })
            .take(limit)
            .collect())
    }

    /// Statistics of an agent's memories.
    pub async fn reflect(&self, agent: &AgentId) -> MemoryResult<AgentStats> {
        let memories = self
            .episodic(|reply| EpisodicMsg::AgentMemories {
                agent: agent.clone(),
                reply,
            })
            .await?;
        Ok(agent_stats(
            &memories,
            &self.inner.config.retention,
            self.now(),
        ))
    }

    /// Run one sleep-cycle pass for an agent now; `trigger` (`api`, `cli`, ...) is recorded in the run.
    pub async fn consolidate(
        &self,
        agent: &AgentId,
        trigger: &str,
    ) -> MemoryResult<ConsolidationRun> {
        self.consolidator(|reply| ConsolidatorMsg::Consolidate {
            agent: agent.clone(),
            trigger: trigger.into(),
            reply,
        })
        .await
    }

    /// Run archival of idle sessions now; `trigger` is recorded in the run.
    pub async fn archive(&self, trigger: &str) -> MemoryResult<ConsolidationRun> {
        self.consolidator(|reply| ConsolidatorMsg::Archive {
            trigger: trigger.into(),
            reply,
        })
        .await
    }

    /// Run one scheduled firing now, as the scheduler would (claiming its lease):
    /// None when another process already claimed `slot`.
    pub async fn run_scheduled(
        &self,
        job: ScheduledJob,
        slot: DateTime<Utc>,
    ) -> MemoryResult<Option<Vec<ConsolidationRun>>> {
        self.consolidator(|reply| ConsolidatorMsg::Scheduled {
            job,
            slot,
            reply: Some(reply),
        })
        .await
    }

    /// Latest consolidation runs.
    pub async fn runs(
        &self,
        agent: Option<&AgentId>,
        limit: usize,
    ) -> MemoryResult<Vec<ConsolidationRun>> {
        let max = self.inner.config.limits.max_result_limit;
        if limit == 0 || limit > max {
            return Err(MemoryError::invalid(
                "limit",
                format!("limit must be between 1 and {max}"),
            ));
        }
        self.episodic(|reply| EpisodicMsg::Runs {
            agent: agent.cloned(),
            limit,
            reply,
        })
        .await
    }

    /// A session's working-memory window.
    pub async fn working_window(
        &self,
        agent: &AgentId,
        session: &SessionId,
    ) -> MemoryResult<Vec<WorkingItem>> {
        self.working(|reply| WorkingMsg::Window {
            agent: agent.clone(),
            session: session.clone(),
            reply,
        })
        .await
    }

    /// Number of stored memories.
    pub async fn count(&self) -> MemoryResult<u64> {
        self.episodic(|reply| EpisodicMsg::Count { reply }).await
    }

    /// Rebuild the vector index from the system of record.
    pub async fn reindex(&self) -> MemoryResult<usize> {
        self.vectors(|reply| VectorsMsg::Rebuild { reply }).await
    }
}

/// Who a memory is attributed to: `metadata.speaker` when it is a string, else the label
/// of a transcript line ("Alice: …").
fn speaker_of(memory: &Memory) -> Option<&str> {
    memory
        .metadata
        .get("speaker")
        .and_then(serde_json::Value::as_str)
        .or_else(|| crate::policy::fusion::speaker_label(&memory.content))
}

/// The text a memory is embedded from: its title (if any) and content.
pub fn embedding_text(memory: &Memory) -> String {
    match &memory.title {
        Some(title) if !title.is_empty() => format!("{title}\n{}", memory.content),
        _ => memory.content.clone(),
    }
}

/// Semantic and procedural memories: the lasting knowledge that contradictions replace.
fn is_knowledge(memory_type: MemoryType) -> bool {
    matches!(memory_type, MemoryType::Semantic | MemoryType::Procedural)
}

fn embedding_record(memory: &Memory, vector: Vec<f32>) -> EmbeddingRecord {
    EmbeddingRecord {
        id: memory.id.clone(),
        agent_id: memory.agent_id.clone(),
        memory_type: memory.memory_type,
        shared: memory.shared,
        vector,
    }
}

fn not_found(id: &MemoryId, agent: Option<&AgentId>) -> MemoryError {
    match agent {
        Some(agent) => {
            MemoryError::not_found(format!("memory {id} does not exist for agent {agent}"))
        }
        None => MemoryError::not_found(format!("memory {id} does not exist")),
    }
}

fn with_field(mut error: MemoryError, field: &str) -> MemoryError {
    error.field.get_or_insert_with(|| field.to_string());
    error
}

fn validate_tags(tags: &[String], limits: &Limits, field: &str) -> MemoryResult<()> {
    if tags.len() > limits.max_tags {
        return Err(MemoryError::invalid(
            field,
            format!("at most {} tags are allowed", limits.max_tags),
        ));
    }
    if let Some(bad) = tags
        .iter()
        .find(|t| t.trim().is_empty() || t.len() > limits.max_tag_bytes)
    {
        return Err(MemoryError::invalid(
            field,
            format!(
                "tag {bad:?} must be 1 to {} bytes and not blank",
                limits.max_tag_bytes
            ),
        ));
    }
    Ok(())
}

fn validate_metadata(
    metadata: &serde_json::Value,
    limits: &Limits,
    field: &str,
) -> MemoryResult<()> {
    if !metadata.is_object() {
        return Err(MemoryError::invalid(
            field,
            "metadata must be a JSON object",
        ));
    }
    let size = metadata.to_string().len();
    if size > limits.max_metadata_bytes {
        return Err(MemoryError::too_large(
            field,
            format!(
                "metadata is {size} bytes; the limit is {} (limits.max_metadata_bytes)",
                limits.max_metadata_bytes
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn neighbour_links_follow_associations_and_sessions_but_not_supersedes() {
        let id = |s: &str| crate::model::MemoryId(s.to_string());
        let link = |from: &str, to: &str, relation: &str, weight: f32| crate::store::Link {
            from_id: id(from),
            to_id: id(to),
            relation: relation.to_string(),
            weight,
        };
        let edges = [
            link("s1", "a", "related_to", 0.5),
            link("b", "s1", "related_to", 0.25),
            link("s1", "old", "supersedes", 1.0),
            link("x", "y", "related_to", 1.0),
        ];
        let links = neighbour_links(&[id("s1")], &edges, vec![(id("s1"), id("next"))]);
        let found: Vec<(&str, &str, f64)> = links
            .iter()
            .map(|l| (l.seed.0.as_str(), l.neighbour.0.as_str(), l.weight))
            .collect();
        assert_eq!(
            found,
            [("s1", "a", 0.5), ("s1", "b", 0.25), ("s1", "next", 1.0)]
        );
    }

    use super::*;

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
        assert_eq!(
            first.hits[0].components, again.hits[0].components,
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
        let cosine = |a: &str, b: &str| {
            let (a, b) = (embedder.embed(a).unwrap(), embedder.embed(b).unwrap());
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
}

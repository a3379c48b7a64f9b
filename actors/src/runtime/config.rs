//! The runtime's tunables ([`RuntimeConfig`]) and the stores and models it runs on
//! ([`RuntimeParts`]). The service fills them from its layered configuration.

use std::sync::Arc;
use std::time::Duration;

use crate::clock::Clock;
use crate::embedding::Embedder;
use crate::policy::clustering::ClusterParams;
use crate::policy::consolidation::{ForgetPolicy, PromotePolicy};
use crate::policy::retention::RetentionPolicy;
use crate::policy::schedule::{Schedule, ScheduleZone};
use crate::policy::session::SessionSettings;
use crate::store::{GraphStore, MemoryStore, VectorIndex, WorkingStore};
use crate::supervisor::RestartPolicy;

pub use super::kv::KvSettings;

/// Schedules of the BackgroundCognition child.
#[derive(Debug, Clone)]
pub struct CognitionSettings {
    /// Run the schedules at all.
    pub enabled: bool,
    /// When the sleep cycle fires.
    pub sleep_schedule: Schedule,
    /// When archival fires (with its time zone).
    pub archival_schedule: Schedule,
}

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

/// How recall combines its retrievers (`[recall]` of the service's configuration).
#[derive(Debug, Clone, Copy, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
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
    /// Weight of the memories naming an entity the question names, from the entity
    /// index (0 turns it off; stores without an index have none to give).
    pub entity_weight: f64,
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

/// Default weight of the entity retriever (see docs/measurements-2026-12.md, the
/// entity ablation).
const ENTITY_WEIGHT: f64 = 0.1;

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
            feedback_weight: 0.2,
            entity_weight: ENTITY_WEIGHT,
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
    /// Memories an entity must be named in before the sleep cycle writes its profile
    /// (a semantic memory of its facts, refreshed when they change; 0: no profiles).
    pub profile_min_mentions: u64,
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
            profile_min_mentions: 5,
            lease_ttl: chrono::Duration::minutes(10),
            holder: format!(
                "pid{}-{}",
                std::process::id(),
                &uuid::Uuid::new_v4().simple().to_string()[..8]
            ),
        }
    }
}

/// How embedding work is queued.
#[derive(Debug, Clone, Copy)]
pub struct EmbedSettings {
    /// Embedding jobs run at once (default: the number of cores).
    pub concurrency: usize,
    /// Most texts waiting or being embedded; a request beyond is `rate_limited` (429).
    pub max_queued_texts: usize,
    /// Time allowed per text on top of `call_timeout` before an embedding is given up.
    pub time_per_text: Duration,
    /// How long small requests that find the embedder busy wait for others to be
    /// embedded with them, for an embedder whose batches pay (zero: never).
    pub micro_batch: Duration,
    /// The longest one request of a remote embedder may take (its timeout times its
    /// attempts, plus the backoff between them), allowed again for every
    /// `request_texts` texts: a slow server's work completes instead of timing out
    /// into a 503. Zero for embedders in the process.
    pub request_allowance: Duration,
    /// Texts per request of a remote embedder.
    pub request_texts: usize,
}

impl Default for EmbedSettings {
    fn default() -> Self {
        Self {
            concurrency: std::thread::available_parallelism().map_or(1, |n| n.get()),
            max_queued_texts: 8192,
            time_per_text: Duration::from_millis(250),
            micro_batch: Duration::from_millis(2),
            request_allowance: Duration::ZERO,
            request_texts: 1,
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
    /// The embedder's queue and time allowance.
    pub embedding: EmbedSettings,
    /// How often expired working-memory sessions are dropped.
    pub working_sweep_interval: Duration,
    /// How often recall reinforcement is written.
    pub touch_flush_interval: Duration,
    /// Most memories the episodic actor keeps decoded for reads by id (0: off), each
    /// checked against its row's stamp on every read.
    pub row_cache: usize,
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
    pub kv: KvSettings,
    /// Session windows, TTL and compaction.
    pub sessions: SessionSettings,
    /// Time between projector ticks (outbox → projections).
    pub projector_interval: Duration,
    /// Outbox entries per projection batch.
    pub projector_batch: usize,
    /// First and longest retry delay of a failing projection.
    pub projector_retry: (Duration, Duration),
    /// Prompt-injection and secret screening of every write.
    pub screening: crate::policy::screening::ScreeningConfig,
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
            embedding: EmbedSettings::default(),
            working_sweep_interval: Duration::from_secs(60),
            touch_flush_interval: Duration::from_secs(1),
            row_cache: 10_000,
            default_importance: 0.5,
            recall: RecallSettings::default(),
            dedup_threshold: 0.92,
            contradiction_min_similarity: 0.6,
            arbiter_timeout: Duration::from_secs(2),
            extraction_max_per_turn: 8,
            kv: KvSettings::default(),
            sessions: SessionSettings::default(),
            projector_interval: Duration::from_millis(200),
            projector_batch: 256,
            projector_retry: (Duration::from_millis(500), Duration::from_secs(30)),
            screening: crate::policy::screening::ScreeningConfig::default(),
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
    /// Projects and their sessions.
    pub projects: Arc<dyn crate::store::projects::ProjectStore>,
    /// KV namespaces.
    pub kv: Arc<dyn crate::store::kv::KvStore>,
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
    /// Reads of the entity index (one of `projections`); None: no entity index.
    pub entities: Option<Arc<dyn crate::store::entities::EntityIndex>>,
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
            projects: Arc::new(crate::store::projects::InMemoryProjectStore::new()),
            kv: Arc::new(crate::store::kv::InMemoryKvStore::new()),
            embedder: Arc::new(crate::embedding::BuiltinEmbedder::new(256)),
            clock: Arc::new(crate::clock::SystemClock),
            arbiter: None,
            thought: Arc::new(crate::thought::RuleThought),
            projections: Vec::new(),
            entities: None,
        }
    }
}

//! Layered configuration: compiled-in `config/default.toml` → `config/<MNEMOS_ENV>.toml`
//! → an explicit file → `MNEMOS__SECTION__KEY` environment variables, deserialized into
//! typed [`Settings`] and validated. Every error names the key to fix.

use std::path::{Path, PathBuf};
use std::time::Duration;

use config::{Config, Environment, File, FileFormat};
use mnemos_actors::policy::clustering::ClusterParams;
use mnemos_actors::policy::consolidation::PromotePolicy;
use mnemos_actors::policy::retention::RetentionPolicy;
use mnemos_actors::policy::schedule::{Schedule, ScheduleZone};
use mnemos_actors::runtime::CognitionSettings;
use mnemos_actors::runtime::{KvSettings, RecallSettings};
use mnemos_actors::runtime::{Limits, RuntimeConfig, SleepSettings};
use mnemos_actors::supervisor::RestartPolicy;
use serde::Deserialize;

/// The defaults, compiled in so the binary runs from any directory.
pub const DEFAULT_TOML: &str = include_str!("../../config/default.toml");

/// All settings.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Where embedded stores keep their files.
    pub data_dir: PathBuf,
    /// HTTP server.
    pub server: ServerSettings,
    /// Who may call the server.
    pub auth: AuthSettings,
    /// System of record.
    pub storage: StorageSettings,
    /// Embedding model.
    pub embedding: EmbeddingSettings,
    /// Vector index.
    pub vectors: VectorSettings,
    /// Working memory.
    pub working: WorkingSettings,
    /// Association-graph projection.
    pub graph: GraphSettings,
    /// The outbox projector.
    pub projector: ProjectorSettings,
    /// Input limits.
    pub limits: LimitSettings,
    /// Memory defaults.
    pub memory: MemorySettings,
    /// Retention curve.
    pub retention: RetentionSettings,
    /// Recall fusion: the runtime's own settings, read from `[recall]` key for key.
    pub recall: RecallSettings,
    /// Deduplication.
    pub dedup: DedupSettings,
    /// Contradiction detection.
    pub contradiction: ContradictionSettings,
    /// Mining exchanges for memories (`extract_turn`).
    pub extraction: ExtractionSettings,
    /// Bounds of KV namespaces: the runtime's own settings, read from `[namespaces]`.
    pub namespaces: KvSettings,
    /// Session message logs, windows and compaction.
    pub sessions: SessionsConfig,
    /// The OpenAI-compatible memory proxy.
    pub proxy: ProxySettings,
    /// Prompt-injection and secret screening of writes: the runtime's own settings.
    pub screening: mnemos_actors::policy::screening::ScreeningConfig,
    /// Sleep-cycle schedule.
    pub cognition: CognitionConfig,
    /// Archival schedule.
    pub archival: ArchivalSettings,
    /// The inner-thought model of the sleep cycle.
    pub inner_thought: InnerThoughtSettings,
    /// Actor supervision.
    pub supervisor: SupervisorSettings,
    /// Logging.
    pub log: LogSettings,
}

/// `[auth]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthSettings {
    /// `none` (no keys; only on a loopback address) or `keys` (every request carries
    /// `Authorization: Bearer <key>`).
    pub mode: String,
    /// Start without keys on a non-loopback address anyway (logged loudly at start).
    pub allow_unauthenticated_network: bool,
    /// Serve `/metrics` and the detail of `/health` without an admin key.
    pub public_metrics: bool,
    /// Length of the rate window, in seconds.
    pub rate_window_seconds: u64,
    /// Requests per key per window (0: unlimited).
    pub requests_per_window: u32,
    /// Memories written per key per window (0: unlimited).
    pub writes_per_window: u32,
    /// Memories `extract_turn`, session messages and the proxy write per key and session
    /// per hour (0: unlimited).
    pub session_writes_per_hour: u32,
}

impl AuthSettings {
    /// True when requests must carry a key.
    pub fn keys(&self) -> bool {
        self.mode == "keys"
    }

    /// The limits every key is held to.
    pub fn rate_limits(&self) -> crate::auth::limits::RateLimits {
        crate::auth::limits::RateLimits {
            window: std::time::Duration::from_secs(self.rate_window_seconds),
            requests: self.requests_per_window,
            writes: self.writes_per_window,
            session_writes: self.session_writes_per_hour,
        }
    }
}

/// `[server]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSettings {
    /// Listen address.
    pub bind: String,
    /// Largest request body.
    pub max_body_bytes: usize,
    /// Largest body of `POST /v1/import` (a JSONL export, larger than any JSON request).
    pub max_import_bytes: usize,
    /// Drain time on shutdown.
    pub shutdown_grace_seconds: u64,
    /// Expose the actor fault-injection route.
    pub fault_injection: bool,
    /// `Host` names (or `host:port`) every route accepts: a page on another site that
    /// rebinds its DNS name to this server cannot reach it through a victim's browser.
    /// Empty accepts any `Host`.
    pub allowed_hosts: Vec<String>,
    /// The old name of `allowed_hosts`, from when only `/mcp` checked the `Host`. Absent
    /// from `config/default.toml`; when an overlay or the environment still sets it, it
    /// wins over `allowed_hosts` (it is the operator's explicit choice) and start-up
    /// warns. Read through [`ServerSettings::host_allow_list`].
    #[serde(default)]
    pub mcp_allowed_hosts: Option<Vec<String>>,
    /// Origins (`scheme://host[:port]`) besides the server's own that may send requests
    /// from a browser (a request whose `Origin` is neither is 403), and that get CORS
    /// answers. Empty by default: no cross-site page can write, and CORS stays off.
    pub allowed_origins: Vec<String>,
    /// Milliseconds a client has to send a request's headers, counted from the
    /// connection's accept or from the first byte of the next request on a kept-alive
    /// connection; past it the connection is closed (slow-header clients cannot pile up).
    pub header_timeout_ms: u64,
    /// Milliseconds a client has, after the headers, to send the whole body; past it the
    /// request is answered 408 and the connection closed. Responses (SSE streams of the
    /// proxy and of `/mcp`) are never cut by it.
    pub body_timeout_ms: u64,
    /// Milliseconds a kept-alive connection may sit with no request in flight before it
    /// is closed.
    pub idle_timeout_ms: u64,
    /// Most connections served at once; further clients wait in the listen backlog
    /// until one closes (the timeouts above bound how long a slow client holds one).
    pub max_connections: usize,
    /// Most live MCP sessions on `/mcp`; each holds about 60 KB, so the bound caps that
    /// memory. A new session beyond it is refused with 429 `rate_limited` (sessions in
    /// use are never evicted).
    pub mcp_max_sessions: usize,
    /// Milliseconds an MCP session may go without a request before it expires and its
    /// memory is freed (the client then gets 404 and starts a new session).
    pub mcp_session_idle_timeout_ms: u64,
    /// Directories build_context's `project_root` must lie in; empty admits any readable one.
    pub project_roots: Vec<PathBuf>,
}

impl ServerSettings {
    /// The `Host` allow-list in force: `mcp_allowed_hosts` when it is still set (the old
    /// name), else `allowed_hosts`.
    pub fn host_allow_list(&self) -> &[String] {
        self.mcp_allowed_hosts
            .as_deref()
            .unwrap_or(&self.allowed_hosts)
    }
}

/// `[storage]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageSettings {
    /// `sqlite` (embedded, default) or `postgres`.
    pub backend: String,
    /// SQLite database file; empty: `<data_dir>/mnemos.db`.
    pub path: String,
    /// PostgreSQL connection URL (`postgres://user@host:5432/db`), required when `backend = "postgres"`.
    pub url: String,
    /// SQLite memory-mapped reads per connection, in MiB (0: off): faster keyword search
    /// for memory that shows in the process's RSS.
    pub mmap_mib: u64,
    /// SQLite page cache per connection, in MiB: resident memory against batch-write
    /// speed (pages the process keeps rather than the operating system's file cache).
    pub cache_mib: u32,
    /// Memories kept decoded for recall's reads by id (0: off); each is checked against
    /// its row on every read, so it trades resident memory for decoding, never freshness.
    pub row_cache: usize,
}

/// `[embedding]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbeddingSettings {
    /// `static` (the default), `builtin` (hashing) or `local`.
    pub provider: String,
    /// Local model directory.
    pub model_dir: PathBuf,
    /// A table made by `mnemos embedder distill` for `static`; empty: the compiled-in all-MiniLM-L6-v2 table.
    pub static_table: PathBuf,
    /// Model name: a Hugging Face id for `local` (resolved in the cache or downloaded), the request's `model` for `openai`.
    pub model: String,
    /// The Hugging Face cache `local` models by name are found in and downloaded into;
    /// empty: `HF_HUB_CACHE`, else `HF_HOME/hub`, else `~/.cache/huggingface/hub`.
    pub hub_cache: PathBuf,
    /// Where models by name are downloaded from; empty: `HF_ENDPOINT`, else huggingface.co.
    pub hub_endpoint: String,
    /// Never download a model by name (also when `HF_HUB_OFFLINE=1`): only the cache counts.
    pub offline: bool,
    /// OpenAI-compatible API base for `openai` (…/v1).
    pub base_url: String,
    /// Bearer key for `openai`; empty: `OPENAI_API_KEY` (or none).
    pub api_key: String,
    /// Vector length asked of `openai` (`dimensions`) and expected; 0: the model's own.
    pub dimensions: u32,
    /// Texts per `openai` request.
    pub batch_size: usize,
    /// Budget of one `openai` attempt in milliseconds.
    pub timeout_ms: u64,
    /// Retries of an `openai` request after a 429, a 5xx, a timeout or a broken connection.
    pub max_retries: u32,
    /// Characters of a text sent to `openai` at most.
    pub max_input_chars: usize,
    /// Builtin embedder dimension.
    pub builtin_dimension: usize,
    /// Embedding jobs run at once (0: one per core).
    pub concurrency: usize,
    /// Most texts waiting or being embedded; a request beyond is 429 `rate_limited`.
    pub max_queued_texts: usize,
    /// Time an embedding may take per text on top of `supervisor.call_timeout_ms`.
    pub ms_per_text: u64,
    /// Threads one forward pass of a `local` model uses (0: every core).
    pub threads: usize,
    /// How long a small request that finds the model busy waits for others to be
    /// embedded with it, for a model whose batches pay (`local`, `openai`); 0: never.
    pub micro_batch_ms: u64,
    /// How a `local` model's linear layers compute: `float32`, `int8` (8-bit
    /// integers, on CPUs with VNNI), or `auto` (`int8` where the CPU has VNNI).
    pub precision: String,
}

/// `[vectors]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VectorSettings {
    /// `embedded` (in-process only) or `qdrant` (plus a Qdrant projection).
    pub backend: String,
    /// Qdrant gRPC URL for `qdrant` (`http://127.0.0.1:6334`).
    pub url: String,
    /// Qdrant collection name.
    pub collection: String,
    /// Budget of one Qdrant call in milliseconds.
    pub timeout_ms: u64,
    /// Partition size from which an HNSW graph is kept.
    pub hnsw_threshold: usize,
}

/// `[working]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkingSettings {
    /// `memory` (in-process) or `redis`.
    pub backend: String,
    /// Redis URL when `backend = "redis"` (`redis://127.0.0.1:6379/0`).
    pub url: String,
    /// Budget of one Redis call in milliseconds; past it the call falls back in-process.
    pub timeout_ms: u64,
    /// Items per session.
    pub window: usize,
    /// Session expiry after the last write.
    pub ttl_seconds: u64,
}

/// `[graph]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphSettings {
    /// `sql` (the SQL graph only), `falkordb` or `neo4j` (plus that projection).
    pub backend: String,
    /// Server URL for `falkordb` (`redis://127.0.0.1:6380`).
    pub url: String,
    /// Graph name inside FalkorDB.
    pub name: String,
    /// Neo4j user (`neo4j` backend).
    pub user: String,
    /// Neo4j password (`neo4j` backend).
    pub password: String,
    /// Budget of one call to the graph server in milliseconds.
    pub timeout_ms: u64,
}

/// `[projector]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProjectorSettings {
    /// Milliseconds between projector ticks.
    pub interval_ms: u64,
    /// Outbox entries per batch.
    pub batch: usize,
    /// First retry delay of a failing projection, in milliseconds (doubles per failure).
    pub retry_initial_ms: u64,
    /// Longest retry delay, in milliseconds.
    pub retry_max_ms: u64,
}

/// `[limits]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitSettings {
    /// Largest content.
    pub max_content_bytes: usize,
    /// Largest batch.
    pub max_batch: usize,
    /// Largest result limit.
    pub max_result_limit: usize,
    /// Most tags.
    pub max_tags: usize,
    /// Largest metadata.
    pub max_metadata_bytes: usize,
}

/// `[memory]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemorySettings {
    /// Default importance.
    pub default_importance: f32,
}

/// `[retention]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetentionSettings {
    /// k of the retention curve.
    pub scale_days: f64,
}

/// `[dedup]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DedupSettings {
    /// Near-duplicate cosine threshold.
    pub threshold: f32,
}

/// `[contradiction]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContradictionSettings {
    /// Lowest similarity of a vector candidate.
    pub min_similarity: f32,
}

/// `[extraction]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtractionSettings {
    /// Most memories one `extract_turn` call stores.
    pub max_memories_per_turn: usize,
}

/// `[sessions]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionsConfig {
    /// Most messages the live window returns.
    pub window: usize,
    /// Seconds of inactivity after which a session's window expires.
    pub ttl_seconds: u64,
    /// Context size of the model the session feeds, in tokens.
    pub context_tokens: u64,
    /// Compact past this fraction of `context_tokens` (0 < pct <= 1).
    pub compact_at_pct: f64,
    /// Mine each user → assistant exchange with extract_turn in the background.
    pub extract: bool,
}

/// `[proxy]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProxySettings {
    /// Base URL of the OpenAI-compatible API requests are forwarded to (…/v1); empty disables the proxy.
    pub upstream_url: String,
    /// Base URL of the OpenAI-compatible API `POST /v1/embeddings` is passed to (…/v1);
    /// empty uses `upstream_url` (embedding models are often served apart).
    pub embeddings_url: String,
    /// Key sent upstream when the client sends no `Authorization` header; empty sends none.
    pub api_key: String,
    /// Share of the model's context the `<memory>` block may use (clamped to 0.05–0.40).
    pub memory_budget_pct: f64,
    /// Context size of the upstream model in tokens (a request may override it with `X-Mnemos-Context-Tokens`).
    pub context_tokens: u64,
    /// Seconds an upstream call may take (a streamed answer included).
    pub timeout_seconds: u64,
    /// Mine each exchange with extract_turn after the answer.
    pub extract: bool,
}

impl ProxySettings {
    /// Smallest and largest accepted `memory_budget_pct`.
    pub const BUDGET_RANGE: (f64, f64) = (0.05, 0.40);

    /// `pct` clamped into [`Self::BUDGET_RANGE`].
    pub fn clamp_budget(pct: f64) -> f64 {
        pct.clamp(Self::BUDGET_RANGE.0, Self::BUDGET_RANGE.1)
    }
}

/// `[cognition]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CognitionConfig {
    /// Run schedules.
    pub enabled: bool,
    /// Sleep-cycle cron.
    pub schedule: String,
    /// Days a forgotten memory stays archived before it is deleted (0: never).
    pub purge_after_days: i64,
    /// Memories an entity is named in before it gets a profile (0: no profiles).
    pub profile_min_mentions: u64,
    /// Affinity at or above which two candidates cluster.
    pub cluster_threshold: f32,
    /// Smallest cluster abstracted.
    pub min_cluster_size: usize,
    /// Largest cluster per abstraction.
    pub max_cluster_size: usize,
    /// Weight of shared tags in the affinity.
    pub cluster_tag_bonus: f32,
    /// Bonus of an association edge in the affinity.
    pub cluster_edge_bonus: f32,
    /// Weight of closeness in time in the affinity.
    pub cluster_time_bonus: f32,
    /// Hours over which closeness in time decays.
    pub cluster_time_scale_hours: f64,
    /// Importance from which an experience may be promoted.
    pub promote_importance: f32,
    /// Access count from which an experience may be promoted.
    pub promote_access_count: u32,
    /// Seconds a claim on a scheduled firing lasts without renewal.
    pub lease_seconds: u64,
}

/// `[archival]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchivalSettings {
    /// Archival cron.
    pub schedule: String,
    /// Zone of both schedules: `local` or an IANA name.
    pub timezone: String,
    /// Hours without activity after which a session is archived.
    pub idle_hours: i64,
}

/// `[inner_thought]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InnerThoughtSettings {
    /// `none` (offline rules) or `openai` (any OpenAI-compatible server).
    pub provider: String,
    /// Base URL of the OpenAI-compatible API, e.g. `http://127.0.0.1:8080/v1`.
    pub base_url: String,
    /// Model name sent to the server.
    pub model: String,
    /// API key; empty: the `OPENAI_API_KEY` environment variable, or none.
    pub api_key: String,
    /// Hard timeout of one call, in milliseconds.
    pub timeout_ms: u64,
    /// Most tokens the model may generate per call.
    pub max_tokens: u32,
    /// Sampling temperature.
    pub temperature: f32,
    /// Also consult the model when routing or contradiction rules are unsure.
    pub arbiter: bool,
    /// Also ask the model who and what each memory names (the entity index, in the background).
    pub entities: bool,
}

/// `[supervisor]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SupervisorSettings {
    /// First restart delay.
    pub initial_backoff_ms: u64,
    /// Longest restart delay.
    pub max_backoff_ms: u64,
    /// Restart budget.
    pub max_restarts: usize,
    /// Budget window.
    pub window_seconds: u64,
    /// Request wait for an actor.
    pub call_timeout_ms: u64,
}

/// `[log]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogSettings {
    /// tracing filter.
    pub level: String,
    /// `text` or `json`.
    pub format: String,
}

/// A configuration problem, naming the key.
#[derive(Debug, thiserror::Error)]
#[error("configuration error: {0}")]
pub struct ConfigError(pub String);

mod validate;

/// A [`ConfigError`] naming `key`.
fn bad(key: &str, message: impl std::fmt::Display) -> ConfigError {
    ConfigError(format!("{key}: {message}"))
}

impl Settings {
    /// Load settings: defaults, the `MNEMOS_ENV` overlay from `config_dir`, `extra_file`, then the environment.
    pub fn load(config_dir: Option<&Path>, extra_file: Option<&Path>) -> Result<Self, ConfigError> {
        let mut builder =
            Config::builder().add_source(File::from_str(DEFAULT_TOML, FileFormat::Toml));
        if let Ok(environment) = std::env::var("MNEMOS_ENV") {
            let dir = config_dir
                .map(Path::to_path_buf)
                .unwrap_or_else(|| PathBuf::from("config"));
            let path = dir.join(format!("{environment}.toml"));
            if !path.exists() {
                return Err(ConfigError(format!(
                    "MNEMOS_ENV={environment} but {} does not exist; create it or unset MNEMOS_ENV",
                    path.display()
                )));
            }
            builder = builder.add_source(File::from(path).format(FileFormat::Toml));
        }
        if let Some(file) = extra_file {
            if !file.exists() {
                return Err(ConfigError(format!(
                    "config file {} does not exist",
                    file.display()
                )));
            }
            builder = builder.add_source(File::from(file.to_path_buf()).format(FileFormat::Toml));
        }
        builder = builder.add_source(
            Environment::with_prefix("MNEMOS")
                .prefix_separator("__")
                .separator("__")
                .try_parsing(true)
                .list_separator(",")
                .with_list_parse_key("server.allowed_hosts")
                .with_list_parse_key("server.mcp_allowed_hosts")
                .with_list_parse_key("server.allowed_origins")
                .with_list_parse_key("server.project_roots"),
        );
        let settings: Settings = builder
            .build()
            .and_then(|c| c.try_deserialize())
            .map_err(|e| ConfigError(e.to_string()))?;
        settings.validate()?;
        Ok(settings)
    }

    /// The compiled-in defaults alone (no files, no environment): a base for tests and tools.
    pub fn defaults() -> Self {
        Config::builder()
            .add_source(File::from_str(DEFAULT_TOML, FileFormat::Toml))
            .build()
            .and_then(|c| c.try_deserialize())
            .expect("config/default.toml deserializes into Settings")
    }

    /// Check values the types alone cannot, section by section; the first bad value
    /// found is the error, naming its key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_server()?;
        self.validate_auth()?;
        self.validate_storage()?;
        self.validate_embedding()?;
        self.validate_vectors()?;
        self.validate_graph()?;
        self.validate_projector()?;
        self.validate_working()?;
        self.validate_sessions_and_proxy()?;
        self.validate_limits()?;
        self.validate_recall()?;
        self.validate_similarity()?;
        self.schedules()?;
        self.validate_cognition()?;
        self.validate_inner_thought()?;
        self.validate_supervisor()?;
        self.validate_log()?;
        Ok(())
    }

    /// The parsed sleep-cycle and archival schedules, in `archival.timezone`.
    pub fn schedules(&self) -> Result<(Schedule, Schedule), ConfigError> {
        let zone = ScheduleZone::parse("archival.timezone", &self.archival.timezone)
            .map_err(|e| ConfigError(e.message))?;
        let sleep = Schedule::parse("cognition.schedule", &self.cognition.schedule, zone)
            .map_err(|e| ConfigError(e.message))?;
        let archival = Schedule::parse("archival.schedule", &self.archival.schedule, zone)
            .map_err(|e| ConfigError(e.message))?;
        Ok((sleep, archival))
    }

    /// The SQLite database file.
    pub fn sqlite_path(&self) -> PathBuf {
        if self.storage.path.trim().is_empty() {
            self.data_dir.join("mnemos.db")
        } else {
            PathBuf::from(self.storage.path.trim())
        }
    }

    /// The runtime's tunables from these settings.
    pub fn runtime_config(&self) -> RuntimeConfig {
        let (sleep_schedule, archival_schedule) = self
            .schedules()
            .expect("validated settings hold valid schedules");
        RuntimeConfig {
            limits: Limits {
                max_content_bytes: self.limits.max_content_bytes,
                max_batch: self.limits.max_batch,
                max_result_limit: self.limits.max_result_limit,
                max_tags: self.limits.max_tags,
                max_tag_bytes: 128,
                max_metadata_bytes: self.limits.max_metadata_bytes,
            },
            retention: RetentionPolicy {
                scale_days: self.retention.scale_days,
            },
            forget: Default::default(),
            restart: RestartPolicy {
                initial_backoff: Duration::from_millis(self.supervisor.initial_backoff_ms),
                max_backoff: Duration::from_millis(self.supervisor.max_backoff_ms),
                max_restarts: self.supervisor.max_restarts,
                window: Duration::from_secs(self.supervisor.window_seconds),
            },
            cognition: CognitionSettings {
                enabled: self.cognition.enabled,
                sleep_schedule,
                archival_schedule,
            },
            sleep: SleepSettings {
                promote: PromotePolicy {
                    min_importance: self.cognition.promote_importance,
                    min_access_count: self.cognition.promote_access_count,
                },
                clustering: ClusterParams {
                    threshold: self.cognition.cluster_threshold,
                    tag_bonus: self.cognition.cluster_tag_bonus,
                    edge_bonus: self.cognition.cluster_edge_bonus,
                    time_bonus: self.cognition.cluster_time_bonus,
                    time_scale_hours: self.cognition.cluster_time_scale_hours,
                    min_size: self.cognition.min_cluster_size,
                    max_size: self.cognition.max_cluster_size,
                },
                purge_after_days: self.cognition.purge_after_days,
                idle_hours: self.archival.idle_hours,
                profile_min_mentions: self.cognition.profile_min_mentions,
                lease_ttl: chrono::Duration::seconds(self.cognition.lease_seconds as i64),
                ..SleepSettings::default()
            },
            call_timeout: Duration::from_millis(self.supervisor.call_timeout_ms),
            embedding: mnemos_actors::runtime::EmbedSettings {
                concurrency: match self.embedding.concurrency {
                    0 => mnemos_actors::runtime::EmbedSettings::default().concurrency,
                    n => n,
                },
                max_queued_texts: self.embedding.max_queued_texts,
                time_per_text: Duration::from_millis(self.embedding.ms_per_text),
                micro_batch: Duration::from_millis(self.embedding.micro_batch_ms),
                request_allowance: if self.embedding.provider == "openai" {
                    crate::embedding::openai::worst_case(
                        Duration::from_millis(self.embedding.timeout_ms.max(1)),
                        self.embedding.max_retries,
                    )
                } else {
                    Duration::ZERO
                },
                request_texts: self.embedding.batch_size.max(1),
            },
            working_sweep_interval: Duration::from_secs(60),
            touch_flush_interval: Duration::from_secs(1),
            row_cache: self.storage.row_cache,
            default_importance: self.memory.default_importance,
            recall: self.recall,
            dedup_threshold: self.dedup.threshold,
            contradiction_min_similarity: self.contradiction.min_similarity,
            arbiter_timeout: Duration::from_millis(self.inner_thought.timeout_ms),
            extraction_max_per_turn: self.extraction.max_memories_per_turn,
            projector_interval: Duration::from_millis(self.projector.interval_ms),
            projector_batch: self.projector.batch,
            projector_retry: (
                Duration::from_millis(self.projector.retry_initial_ms),
                Duration::from_millis(self.projector.retry_max_ms),
            ),
            kv: self.namespaces,
            screening: self.screening,
            sessions: mnemos_actors::policy::session::SessionSettings {
                window: self.sessions.window,
                ttl: chrono::Duration::seconds(
                    i64::try_from(self.sessions.ttl_seconds).unwrap_or(i64::MAX / 1000),
                ),
                context_tokens: self.sessions.context_tokens,
                compact_at_pct: self.sessions.compact_at_pct,
                extract: self.sessions.extract,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaults() -> Settings {
        Settings::defaults()
    }

    #[test]
    fn every_shipped_overlay_loads_and_the_images_default_is_embedded_with_keys() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
        for overlay in ["production", "production-like", "container", "test"] {
            let file = dir.join(format!("{overlay}.toml"));
            Settings::load(None, Some(&file)).unwrap_or_else(|e| panic!("{overlay}: {e}"));
        }
        let container = Settings::load(None, Some(&dir.join("container.toml"))).unwrap();
        assert_eq!(container.storage.backend, "sqlite");
        assert_eq!(container.working.backend, "memory");
        assert!(container.auth.keys());
        assert_eq!(container.server.bind, "0.0.0.0:8077");
    }

    #[test]
    fn defaults_are_valid_and_documented_names_hold() {
        let settings = defaults();
        settings.validate().unwrap();
        assert_eq!(settings.server.bind, "127.0.0.1:8077");
        assert_eq!(settings.data_dir, PathBuf::from("./data"));
        assert_eq!(settings.embedding.provider, "static");
    }

    #[test]
    fn bad_values_name_their_key() {
        let mut settings = defaults();
        settings.embedding.provider = "magic".into();
        assert!(settings
            .validate()
            .unwrap_err()
            .0
            .starts_with("embedding.provider"));
        let mut settings = defaults();
        settings.server.bind = "nowhere".into();
        assert!(settings
            .validate()
            .unwrap_err()
            .0
            .starts_with("server.bind"));
        let mut settings = defaults();
        settings.cognition.schedule = "every tuesday".into();
        assert!(settings
            .validate()
            .unwrap_err()
            .0
            .contains("cognition.schedule"));
        type Change = Box<dyn Fn(&mut Settings)>;
        let cases: Vec<(&str, Change)> = vec![
            (
                "recall.question_cache",
                Box::new(|s| s.recall.question_cache = 1_000_000),
            ),
            (
                "embedding.max_queued_texts",
                Box::new(|s| s.embedding.max_queued_texts = 0),
            ),
            (
                "embedding.ms_per_text",
                Box::new(|s| s.embedding.ms_per_text = 0),
            ),
            (
                "embedding.micro_batch_ms",
                Box::new(|s| s.embedding.micro_batch_ms = 1000),
            ),
            (
                "embedding.precision",
                Box::new(|s| s.embedding.precision = "int4".into()),
            ),
            (
                "archival.timezone",
                Box::new(|s| s.archival.timezone = "Mars/Olympus".into()),
            ),
            (
                "recall.session_diversity",
                Box::new(|s| s.recall.session_diversity = 1.0),
            ),
            (
                "recall.session_diversity",
                Box::new(|s| s.recall.session_diversity = -0.1),
            ),
            (
                "recall.speaker_boost",
                Box::new(|s| s.recall.speaker_boost = -0.5),
            ),
            (
                "storage.backend",
                Box::new(|s| s.storage.backend = "oracle".into()),
            ),
            ("storage.mmap_mib", Box::new(|s| s.storage.mmap_mib = 4096)),
            ("storage.cache_mib", Box::new(|s| s.storage.cache_mib = 0)),
            (
                "storage.row_cache",
                Box::new(|s| s.storage.row_cache = 2_000_000),
            ),
            (
                "storage.cache_mib",
                Box::new(|s| s.storage.cache_mib = 4096),
            ),
            (
                "storage.url",
                Box::new(|s| s.storage.backend = "postgres".into()),
            ),
            (
                "storage.url",
                Box::new(|s| {
                    s.storage.backend = "postgres".into();
                    s.storage.url = "mysql://root@localhost/mnemos".into();
                }),
            ),
            (
                "inner_thought.provider",
                Box::new(|s| s.inner_thought.provider = "gpt".into()),
            ),
            (
                "inner_thought.base_url",
                Box::new(|s| s.inner_thought.provider = "openai".into()),
            ),
            (
                "inner_thought.model",
                Box::new(|s| {
                    s.inner_thought.provider = "openai".into();
                    s.inner_thought.base_url = "http://127.0.0.1:8080/v1".into();
                }),
            ),
            (
                "inner_thought.timeout_ms",
                Box::new(|s| s.inner_thought.timeout_ms = 0),
            ),
            (
                "cognition.min_cluster_size",
                Box::new(|s| s.cognition.min_cluster_size = 1),
            ),
            (
                "cognition.max_cluster_size",
                Box::new(|s| s.cognition.max_cluster_size = 2),
            ),
            (
                "cognition.purge_after_days",
                Box::new(|s| s.cognition.purge_after_days = -1),
            ),
            (
                "cognition.lease_seconds",
                Box::new(|s| s.cognition.lease_seconds = 1),
            ),
            (
                "sessions.compact_at_pct",
                Box::new(|s| s.sessions.compact_at_pct = 0.0),
            ),
            ("sessions.window", Box::new(|s| s.sessions.window = 0)),
            (
                "proxy.upstream_url",
                Box::new(|s| s.proxy.upstream_url = "localhost:8080".into()),
            ),
            (
                "proxy.memory_budget_pct",
                Box::new(|s| s.proxy.memory_budget_pct = f64::NAN),
            ),
            (
                "server.header_timeout_ms",
                Box::new(|s| s.server.header_timeout_ms = 0),
            ),
            (
                "server.body_timeout_ms",
                Box::new(|s| s.server.body_timeout_ms = 99),
            ),
            (
                "server.idle_timeout_ms",
                Box::new(|s| s.server.idle_timeout_ms = 100_000_000),
            ),
            (
                "server.mcp_session_idle_timeout_ms",
                Box::new(|s| s.server.mcp_session_idle_timeout_ms = 0),
            ),
            (
                "server.max_connections",
                Box::new(|s| s.server.max_connections = 0),
            ),
            (
                "server.mcp_max_sessions",
                Box::new(|s| s.server.mcp_max_sessions = 0),
            ),
            (
                "server.allowed_hosts",
                Box::new(|s| s.server.allowed_hosts = vec!["http://x/".into()]),
            ),
            (
                "server.mcp_allowed_hosts",
                Box::new(|s| s.server.mcp_allowed_hosts = Some(vec!["".into()])),
            ),
            (
                "server.allowed_origins",
                Box::new(|s| s.server.allowed_origins = vec!["app.example.com".into()]),
            ),
            (
                "server.allowed_origins",
                Box::new(|s| s.server.allowed_origins = vec!["https://a.example/path".into()]),
            ),
        ];
        for (key, change) in cases {
            let mut settings = defaults();
            change(&mut settings);
            let error = settings.validate().unwrap_err().0;
            assert!(error.contains(key), "{key}: {error}");
        }
        let mut settings = defaults();
        settings.archival.timezone = "Europe/Paris".into();
        settings.validate().unwrap();
    }

    #[test]
    fn the_old_host_key_still_works_and_wins() {
        let settings: Settings = Config::builder()
            .add_source(File::from_str(DEFAULT_TOML, FileFormat::Toml))
            .add_source(File::from_str(
                "[server]\nmcp_allowed_hosts = [\"mnemos\"]",
                FileFormat::Toml,
            ))
            .build()
            .unwrap()
            .try_deserialize()
            .unwrap();
        settings.validate().unwrap();
        assert_eq!(settings.server.host_allow_list(), ["mnemos".to_string()]);
        let defaults = defaults();
        assert_eq!(
            defaults.server.host_allow_list(),
            ["localhost", "127.0.0.1", "::1"].map(String::from)
        );
        assert!(defaults.server.allowed_origins.is_empty());
    }

    #[test]
    fn unknown_keys_are_rejected() {
        let result: Result<Settings, _> = Config::builder()
            .add_source(File::from_str(DEFAULT_TOML, FileFormat::Toml))
            .add_source(File::from_str("[server]\nbindd = \"x\"", FileFormat::Toml))
            .build()
            .unwrap()
            .try_deserialize();
        assert!(result.unwrap_err().to_string().contains("bindd"));
    }
}

//! The typed in-process handle over the actor tree: what the HTTP service, the CLI
//! and library users call. A thin façade: each public method hands its request to the
//! module of its operation, which validates it, asks the pure planners in
//! [`crate::policy`] what to do, and does the IO through the actors' handles.
//!
//! | operation | module |
//! |---|---|
//! | remember, remember_batch, extract_turn | [`remember`] |
//! | recall | [`recall`] |
//! | get, list, patch, delete, forget, history | [`memories`] |
//! | associate, spreading_activation | [`graph`] |
//! | reflect, consolidate, archive, run_scheduled, runs | [`sleep`] |
//! | sessions | [`sessions`] |
//! | projects | [`projects`] |
//! | KV namespaces | [`kv`] |
//! | re-embedding with another model | [`reembed`] |
//!
//! Ordering of a write: embed → system of record (the acknowledgement point) →
//! projections (vector index, working window). A projection that misses a write
//! catches up when its actor restarts, because it is rebuilt from the system of record.

mod background;
mod config;
mod entities;
mod erase;
mod graph;
mod health;
mod key_locks;
mod kv;
mod memories;
mod projected;
mod projects;
mod question_vectors;
mod recall;
mod reembed;
mod remember;
mod sessions;
mod sleep;
mod speakers;
#[cfg(test)]
mod tests;
mod transfer;
mod validate;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use ractor::Actor;

pub use config::{
    CognitionSettings, EmbedSettings, Limits, RecallSettings, RuntimeConfig, RuntimeParts,
    SleepSettings,
};
pub use entities::{EntityDetail, SameCandidate};
pub use erase::EraseReport;
pub use graph::{ActivatedMemory, AssociationOf, Neighbourhood};
pub use health::RuntimeHealth;
pub use kv::{KvPutInput, KvSettings};
pub use memories::{ForgetMatch, ForgetTarget};
pub use projected::ReadSource;
pub use projects::ProjectInput;
pub use recall::{RecallHit, RecallInput, RecallOutcome, RANKED_COMPONENT};
pub use reembed::{model_key, ReembedPhase, ReembedStatus};
pub use remember::{embedding_text, RememberInput, RememberOutcome, Routing};
pub use sessions::{
    CompactionReport, PostedMessages, SessionMessageInput, SessionView, SESSION_COMPACTION_TAG,
};
pub use transfer::IMPORT_BATCH;

use crate::actors::cognition::{CognitionActor, CognitionArgs};
use crate::actors::consolidator::{
    ConsolidatorActor, ConsolidatorArgs, ConsolidatorHandle, LeaseSettings, ScheduledJob,
};
use crate::actors::episodic::{EpisodicActor, EpisodicArgs, EpisodicHandle};
use crate::actors::graph::{GraphActor, GraphArgs, GraphHandle};
use crate::actors::namespaces::{NamespacesActor, NamespacesArgs, NamespacesHandle};
use crate::actors::projector::{
    ActorSource, ProjectionStatus, ProjectorActor, ProjectorArgs, ProjectorHandle, Watermarks,
};
use crate::actors::vectors::{EmbedderSlot, VectorsActor, VectorsArgs, VectorsHandle};
use crate::actors::working::{WorkingActor, WorkingArgs, WorkingHandle};
use crate::actors::Caller;
use crate::clock::Clock;
use crate::error::{MemoryError, MemoryResult};
use crate::kv::{KvEntry, KvHit, KvPutOutcome, NamespaceName, NamespaceStats};
use crate::model::{
    AgentId, Association, ConsolidationRun, Memory, MemoryId, MemoryPatch, MemoryVersion,
    SessionId, SessionRecord,
};
use crate::policy::stats::AgentStats;
use crate::projects::{Project, ProjectDetail, ProjectId};
use crate::store::{ListQuery, WorkingItem};
use crate::supervisor::{
    ChildKind, ChildSpec, Directory, Supervisor, SupervisorArgs, SupervisorMsg, SupervisorRef,
};

/// The typed handle. Cheap to clone.
#[derive(Clone)]
pub struct Runtime {
    /// Shared state of the handle.
    inner: Arc<RuntimeInner>,
}

/// The handles of every actor the runtime asks.
#[derive(Clone)]
struct Actors {
    /// The system of record.
    episodic: EpisodicHandle,
    /// The embedder and the embedded vector index.
    vectors: VectorsHandle,
    /// The SQL (or in-memory) association graph.
    graph: GraphHandle,
    /// Session windows.
    working: WorkingHandle,
    /// Projects and KV namespaces.
    namespaces: NamespacesHandle,
    /// The sleep cycle and archival.
    consolidator: ConsolidatorHandle,
    /// The outbox → external projections.
    projector: ProjectorHandle,
}

/// Names of the configured backends, for health and read sources.
#[derive(Debug, Clone, Copy)]
struct Backends {
    /// System of record (`sqlite`, `postgres`, `memory`).
    store: &'static str,
    /// Association graph (`sql`, `memory`).
    graph: &'static str,
    /// Working memory (`redis`, `memory`).
    working: &'static str,
    /// Projects and KV namespaces.
    namespaces: &'static str,
    /// The embedded vector index (the fallback of a vector projection).
    index: &'static str,
    /// Inner-thought provider of the sleep cycle (`none`, `openai`).
    inner_thought: &'static str,
}

/// Shared state behind [`Runtime`].
struct RuntimeInner {
    /// The root supervisor.
    supervisor: SupervisorRef,
    /// Current actor refs and health, published by the supervisor.
    directory: Arc<Directory>,
    /// Tunables.
    config: RuntimeConfig,
    /// Time source.
    clock: Arc<dyn Clock>,
    /// Every actor's handle.
    actors: Actors,
    /// Backend names.
    backends: Backends,
    /// Model consulted when the rules are unsure.
    arbiter: Option<Arc<dyn crate::arbiter::Arbiter>>,
    /// Summarises sessions on compaction and mines exchanges.
    thought: Arc<dyn crate::thought::InnerThought>,
    /// Sessions with a background compaction running (one at a time per session).
    compacting: std::sync::Mutex<std::collections::HashSet<(AgentId, SessionId)>>,
    /// External projections, read by recall when caught up.
    projections: Vec<Arc<dyn crate::store::Projection>>,
    /// How far each projection has applied (published by the projector).
    watermarks: Arc<Watermarks>,
    /// Per (agent, content hash) locks: identical concurrent writes take turns, so the
    /// later one is deduplicated instead of inserting a twin.
    content_locks: key_locks::KeyLocks,
    /// Speakers each agent's memories are attributed to, learnt from what is
    /// remembered and recalled (lost on restart and learnt again).
    speakers: speakers::Speakers,
    /// Vectors of recently asked questions (`recall.question_cache`), so a question
    /// asked again skips the embedder (lost on restart).
    question_vectors: std::sync::Mutex<question_vectors::QuestionVectors>,
    /// The latencies of recent recalls, for the percentiles `/health` reports.
    recall_latency: std::sync::Mutex<crate::policy::stats::LatencyWindow>,
    /// The current or last re-embedding (one at a time).
    reembed: reembed::ReembedTracker,
    /// Reads of the entity index (None: the stores keep none).
    entities: Option<Arc<dyn crate::store::entities::EntityIndex>>,
    /// Mining and compaction started after an answer; shutdown waits for them.
    background: Arc<background::BackgroundWork>,
    /// The consolidator's arguments, for tests that run a sleep-cycle step directly.
    #[cfg_attr(not(test), allow(dead_code))]
    sleep_args: ConsolidatorArgs,
}

impl Runtime {
    /// Start the actor tree on `parts`. Fails if a child cannot start (for example an
    /// embedding-model mismatch with stored vectors).
    pub async fn start(parts: RuntimeParts, config: RuntimeConfig) -> MemoryResult<Self> {
        let directory = Arc::new(Directory::default());
        let timeout = config.call_timeout;
        let actors = Actors {
            episodic: EpisodicHandle(Caller::new(directory.clone(), ChildKind::Episodic, timeout)),
            vectors: VectorsHandle {
                caller: Caller::new(directory.clone(), ChildKind::Vectors, timeout),
                gate: Default::default(),
                time_per_text: config.embedding.time_per_text,
                request_allowance: config.embedding.request_allowance,
                request_texts: config.embedding.request_texts.max(1),
            },
            graph: GraphHandle(Caller::new(directory.clone(), ChildKind::Graph, timeout)),
            working: WorkingHandle(Caller::new(directory.clone(), ChildKind::Working, timeout)),
            namespaces: NamespacesHandle(Caller::new(
                directory.clone(),
                ChildKind::Namespaces,
                timeout,
            )),
            consolidator: ConsolidatorHandle(Caller::new(
                directory.clone(),
                ChildKind::Consolidator,
                timeout,
            )),
            projector: ProjectorHandle(Caller::new(
                directory.clone(),
                ChildKind::Projector,
                timeout,
            )),
        };
        let watermarks = Arc::new(Watermarks::new(parts.projections.len()));
        let sleep_args = consolidator_args(&parts, &config, &actors);
        let (supervisor, _handle) = Actor::spawn(
            None,
            Supervisor,
            SupervisorArgs {
                children: child_specs(&parts, &config, &actors, &sleep_args, &watermarks),
                restart: config.restart,
                directory: directory.clone(),
            },
        )
        .await
        .map_err(|error| {
            // A child's MemoryError (e.g. a config problem) surfaces as the spawn error's text.
            MemoryError::unavailable(format!("the runtime could not start: {error}"))
        })?;
        Ok(Self {
            inner: Arc::new(RuntimeInner {
                supervisor,
                directory,
                clock: parts.clock.clone(),
                backends: Backends {
                    store: parts.memories.backend_name(),
                    graph: parts.graph.backend_name(),
                    working: parts.working.backend_name(),
                    namespaces: parts.projects.backend_name(),
                    index: parts.vectors.backend_name(),
                    inner_thought: parts.thought.provider_name(),
                },
                arbiter: parts.arbiter.clone(),
                thought: parts.thought.clone(),
                compacting: Default::default(),
                projections: parts.projections.clone(),
                watermarks,
                content_locks: Default::default(),
                speakers: Default::default(),
                question_vectors: std::sync::Mutex::new(question_vectors::QuestionVectors::new(
                    config.recall.question_cache,
                )),
                recall_latency: std::sync::Mutex::new(crate::policy::stats::LatencyWindow::new(
                    2048,
                )),
                reembed: Default::default(),
                background: Default::default(),
                entities: parts.entities.clone(),
                actors,
                sleep_args,
                config,
            }),
        })
    }

    /// The system of record's backend name (`sqlite`, `postgres`, `memory`).
    pub fn store_backend(&self) -> &'static str {
        self.inner.backends.store
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

    /// The actors' handles.
    fn actors(&self) -> &Actors {
        &self.inner.actors
    }

    /// The consolidator's arguments (tests run sleep-cycle steps with them directly).
    #[cfg(test)]
    pub(crate) fn consolidator_args(&self) -> ConsolidatorArgs {
        self.inner.sleep_args.clone()
    }

    /// Stop every actor after flushing pending reinforcement and checkpointing the store.
    pub async fn shutdown(&self) -> MemoryResult<()> {
        // Exchanges being mined and sessions being compacted finish first (bounded).
        if !self.inner.background.settle(Duration::from_secs(20)).await {
            tracing::warn!(
                running = self.inner.background.running(),
                "background work still running at shutdown: its messages stay in the session log (an unfinished compaction runs again on the next message)"
            );
        }
        let flushed = self.actors().episodic.flush().await;
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

    /// Supervision, index, backend and projection health.
    pub async fn health(&self) -> RuntimeHealth {
        health::health(self).await
    }

    /// Per-projection state and lag.
    pub async fn projection_status(&self) -> MemoryResult<Vec<ProjectionStatus>> {
        self.actors().projector.status().await
    }

    /// Rebuild one projection (or every one) from SQL now (`mnemos reindex`); answers
    /// (projection, outbox sequence number it now holds) for each.
    pub async fn rebuild_projections(
        &self,
        name: Option<String>,
    ) -> MemoryResult<Vec<(String, u64)>> {
        self.actors().projector.rebuild(name).await
    }

    /// Make a child fail (test hook for supervision; the service exposes it only when configured).
    pub fn inject_fault(&self, child: ChildKind) -> MemoryResult<()> {
        self.inner
            .supervisor
            .cast(SupervisorMsg::InjectFault(child))
            .map_err(|_| MemoryError::unavailable("the supervisor is not running"))
    }

    // ---- remember ----

    /// Remember one memory.
    pub async fn remember(
        &self,
        agent: &AgentId,
        input: RememberInput,
    ) -> MemoryResult<RememberOutcome> {
        remember::one(self, agent, input).await
    }

    /// Remember several memories in one transaction, in order.
    pub async fn remember_batch(
        &self,
        agent: &AgentId,
        inputs: Vec<RememberInput>,
    ) -> MemoryResult<Vec<RememberOutcome>> {
        remember::batch(self, agent, inputs).await
    }

    /// Mine one user/assistant exchange for memories worth keeping
    /// ([`crate::policy::extraction`]) and store them through the `remember_batch`
    /// pipeline (routing, exact and near deduplication, contradiction supersede), at most
    /// `budget` of them.
    ///
    /// `metadata` goes on every memory it stores (the contract's provenance).
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
        metadata: Option<serde_json::Value>,
    ) -> MemoryResult<Vec<RememberOutcome>> {
        remember::extract_turn(self, agent, user, assistant, session_id, budget, metadata).await
    }

    // ---- recall ----

    /// Recall: vector, keyword, time and working-memory retrieval in parallel, fused,
    /// expanded to neighbours, filtered and re-ranked.
    pub async fn recall(&self, input: RecallInput) -> MemoryResult<RecallOutcome> {
        let outcome = recall::recall(self, input).await?;
        if let Ok(mut window) = self.inner.recall_latency.lock() {
            window.record(outcome.took_ms);
        }
        Ok(outcome)
    }

    // ---- memories by id ----

    /// One memory, checked against `agent` when one is given (another agent's memory is `not_found`).
    pub async fn get(&self, agent: Option<&AgentId>, id: &MemoryId) -> MemoryResult<Memory> {
        memories::get(self, agent, id).await
    }

    /// Browse newest first; returns the page and the cursor of the next page.
    pub async fn list(&self, query: ListQuery) -> MemoryResult<(Vec<Memory>, Option<MemoryId>)> {
        memories::list(self, query).await
    }

    /// How many memories pass a browse's filters (its cursor and page size aside).
    pub async fn count_listed(&self, query: &ListQuery) -> MemoryResult<u64> {
        self.actors().episodic.count_listed(query).await
    }

    /// Make an archived (forgotten) memory active again, archiving its previous state
    /// with reason `restore`.
    pub async fn restore(&self, agent: &AgentId, id: &MemoryId) -> MemoryResult<Memory> {
        let patch = MemoryPatch {
            status: Some(crate::model::MemoryStatus::Active),
            ..MemoryPatch::default()
        };
        memories::change(self, Some(agent), id, patch, "restore").await
    }

    /// Every agent with memories and how many, as stored (tenant-qualified).
    pub async fn agent_summaries(&self) -> MemoryResult<Vec<crate::model::AgentSummary>> {
        self.actors().episodic.agent_summaries().await
    }

    /// A memory's retention sampled `points` times from its last access until `days`
    /// from now, with its retention now (the curve of `policy::retention`).
    pub async fn retention_curve(
        &self,
        agent: &AgentId,
        id: &MemoryId,
        days: u32,
        points: usize,
    ) -> MemoryResult<(f64, Vec<(chrono::DateTime<chrono::Utc>, f64)>)> {
        let memory = self.get(Some(agent), id).await?;
        let now = self.now();
        let policy = self.inner.config.retention;
        let until = now + chrono::Duration::days(i64::from(days));
        Ok((
            policy.retention(&memory, now),
            policy.curve(&memory, until, points),
        ))
    }

    /// Change a memory, archiving its previous state with reason `update`.
    pub async fn patch(
        &self,
        agent: Option<&AgentId>,
        id: &MemoryId,
        patch: MemoryPatch,
    ) -> MemoryResult<Memory> {
        memories::change(self, agent, id, patch, "update").await
    }

    /// Every agent with memories, as stored (tenant-qualified).
    pub async fn agents(&self) -> MemoryResult<Vec<AgentId>> {
        self.actors().episodic.agents().await
    }

    /// Erase everything `agent` owns from every store; the report says what each removed.
    pub async fn erase_agent(&self, agent: &AgentId) -> MemoryResult<erase::EraseReport> {
        erase::erase_agent(self, agent).await
    }

    /// Delete a memory from every store (history included).
    pub async fn delete(&self, agent: Option<&AgentId>, id: &MemoryId) -> MemoryResult<()> {
        memories::delete(self, agent, id).await
    }

    /// Forget: archive (never delete) one memory or the memories matching a query. `dry_run` only reports.
    pub async fn forget(
        &self,
        agent: &AgentId,
        target: ForgetTarget,
        dry_run: bool,
    ) -> MemoryResult<Vec<ForgetMatch>> {
        memories::forget(self, agent, target, dry_run).await
    }

    /// A page of an agent's entities in key order (`query.agent_id` names the agent).
    pub async fn entities(
        &self,
        query: &crate::store::entities::EntityQuery,
    ) -> MemoryResult<Vec<crate::store::entities::Entity>> {
        entities::entities(self, query).await
    }

    /// One entity of `agent` with the newest `limit` memories naming it and the
    /// entities named beside it.
    pub async fn entity(
        &self,
        agent: &AgentId,
        id: &str,
        limit: usize,
    ) -> MemoryResult<EntityDetail> {
        entities::entity(self, agent, id, limit).await
    }

    /// Merge entity `id` of `agent` into entity `into`: its key becomes an alias, what
    /// named it names `into`; recorded in the agent's merge history.
    pub async fn merge_entities(
        &self,
        agent: &AgentId,
        id: &str,
        into: &str,
    ) -> MemoryResult<crate::store::entities::EntityMerge> {
        entities::merge(self, agent, id, into).await
    }

    /// Undo the merge of `alias` into entity `id` of `agent` (a split).
    pub async fn split_entity(
        &self,
        agent: &AgentId,
        id: &str,
        alias: &str,
    ) -> MemoryResult<crate::store::entities::EntityMerge> {
        entities::split(self, agent, id, alias).await
    }

    /// Give entity `id`'s name its own entity in `project`'s memories (the same name
    /// for someone else there); undone with [`Runtime::split_entity`] of its key.
    pub async fn split_entity_by_project(
        &self,
        agent: &AgentId,
        id: &str,
        project: &crate::projects::ProjectId,
    ) -> MemoryResult<crate::store::entities::EntityMerge> {
        entities::split_project(self, agent, id, project).await
    }

    /// Whether this runtime keeps an entity index (SQL stores do, the in-memory one not).
    pub fn keeps_entities(&self) -> bool {
        self.inner.entities.is_some()
    }

    /// `agent`'s whole merge history, oldest first (export).
    pub async fn entity_merges(
        &self,
        agent: &AgentId,
    ) -> MemoryResult<Vec<crate::store::entities::EntityMerge>> {
        match &self.inner.entities {
            Some(index) => index.merges(agent, None).await,
            None => Ok(Vec::new()),
        }
    }

    /// The keys among `candidates` that are entities of `agent`.
    pub async fn known_entity_keys(
        &self,
        agent: &AgentId,
        candidates: &[String],
    ) -> MemoryResult<Vec<String>> {
        entities::known_keys(self, agent, candidates).await
    }

    /// The facts of `agent` with their validity windows, about one subject key and
    /// attribute when given, only those holding at some time `during` when given.
    pub async fn facts(
        &self,
        agent: &AgentId,
        subject_key: Option<&str>,
        attribute: Option<&str>,
        during: Option<&crate::policy::time::TimeRange>,
    ) -> MemoryResult<Vec<crate::policy::facts::Fact>> {
        entities::facts(self, agent, subject_key, attribute, during).await
    }

    /// Version history of a memory, oldest first.
    pub async fn history(
        &self,
        agent: Option<&AgentId>,
        id: &MemoryId,
    ) -> MemoryResult<Vec<MemoryVersion>> {
        memories::history(self, agent, id).await
    }

    /// Number of stored memories.
    pub async fn count(&self) -> MemoryResult<u64> {
        self.actors().episodic.count().await
    }

    /// Rebuild the vector index from the system of record.
    pub async fn reindex(&self) -> MemoryResult<usize> {
        self.actors().vectors.rebuild().await
    }

    // ---- graph ----

    /// Link two memories of the same agent.
    pub async fn associate(
        &self,
        agent: &AgentId,
        from: &MemoryId,
        to: &MemoryId,
        relation: Option<String>,
        weight: Option<f32>,
    ) -> MemoryResult<Association> {
        graph::associate(self, agent, from, to, relation, weight).await
    }

    /// The associations of a memory, strongest first, each with the memory at its other end.
    pub async fn associations(
        &self,
        agent: &AgentId,
        id: &MemoryId,
    ) -> MemoryResult<Vec<AssociationOf>> {
        graph::associations(self, agent, id).await
    }

    /// The memories within `depth` hops of `seed` (at most `limit`) and the edges between them.
    pub async fn neighbourhood(
        &self,
        agent: &AgentId,
        seed: &MemoryId,
        depth: u32,
        limit: usize,
    ) -> MemoryResult<Neighbourhood> {
        graph::neighbourhood(self, agent, seed, depth, limit).await
    }

    /// Spread activation from a seed memory through the association graph.
    pub async fn spreading_activation(
        &self,
        agent: &AgentId,
        seed: &MemoryId,
        depth: u32,
        limit: usize,
    ) -> MemoryResult<Vec<ActivatedMemory>> {
        graph::spreading_activation(self, agent, seed, depth, limit).await
    }

    // ---- reflection and the sleep cycle ----

    /// Statistics of an agent's memories.
    pub async fn reflect(&self, agent: &AgentId) -> MemoryResult<AgentStats> {
        sleep::reflect(self, agent).await
    }

    /// Run one sleep-cycle pass for an agent now; `trigger` (`api`, `cli`, ...) is recorded in the run.
    pub async fn consolidate(
        &self,
        agent: &AgentId,
        trigger: &str,
    ) -> MemoryResult<ConsolidationRun> {
        self.actors().consolidator.consolidate(agent, trigger).await
    }

    /// Run archival of idle sessions now; `trigger` is recorded in the run.
    pub async fn archive(&self, trigger: &str) -> MemoryResult<ConsolidationRun> {
        self.actors().consolidator.archive(trigger).await
    }

    /// Run one scheduled firing now, as the scheduler would (claiming its lease):
    /// None when another process already claimed `slot`.
    pub async fn run_scheduled(
        &self,
        job: ScheduledJob,
        slot: DateTime<Utc>,
    ) -> MemoryResult<Option<Vec<ConsolidationRun>>> {
        self.actors().consolidator.run_scheduled(job, slot).await
    }

    /// Latest consolidation runs.
    pub async fn runs(
        &self,
        agent: Option<&AgentId>,
        limit: usize,
    ) -> MemoryResult<Vec<ConsolidationRun>> {
        sleep::runs(self, agent, limit).await
    }

    /// A session's working-memory window.
    pub async fn working_window(
        &self,
        agent: &AgentId,
        session: &SessionId,
    ) -> MemoryResult<Vec<WorkingItem>> {
        self.actors().working.window(agent, session).await
    }

    // ---- sessions ----

    /// Append messages to a session's log (each durable before this returns), then, in
    /// the background: mine each new user → assistant exchange for memories
    /// (`sessions.extract`), and compact the session when it passed
    /// `sessions.compact_at_pct` of `sessions.context_tokens` or an earlier conversation
    /// in it ended (idle past the TTL).
    pub async fn post_session_messages(
        &self,
        agent: &AgentId,
        session: &SessionId,
        inputs: Vec<SessionMessageInput>,
    ) -> MemoryResult<PostedMessages> {
        self.post_messages(agent, session, inputs).await
    }

    /// An agent's sessions, the most recently spoken first, at most `limit`.
    pub async fn sessions(
        &self,
        agent: &AgentId,
        limit: usize,
    ) -> MemoryResult<Vec<crate::model::SessionRecord>> {
        self.actors().episodic.agent_sessions(agent, limit).await
    }

    /// A session's live window and budget; `not_found` when it has no message. An ended
    /// conversation found here is compacted in the background.
    pub async fn session(&self, agent: &AgentId, session: &SessionId) -> MemoryResult<SessionView> {
        self.view(agent, session).await
    }

    /// Compact a session now (`through`: the newest message to compact, default all):
    /// inner thought summarises the uncompacted messages (with the previous summary),
    /// the history is stored as an episodic memory tagged `archive_summary` in the same
    /// transaction that moves the session's compaction mark, and the summary replaces
    /// the window. Idempotent: a concurrent compaction of the same messages commits once.
    pub async fn compact_session(
        &self,
        agent: &AgentId,
        session: &SessionId,
        through: Option<u64>,
    ) -> MemoryResult<CompactionReport> {
        self.compact(agent, session, through).await
    }

    // ---- projects ----

    /// Create a project of `agent`, or change its name or isolation. Changing
    /// `isolated` applies at once to every memory already in the project.
    pub async fn put_project(
        &self,
        agent: &AgentId,
        project_id: &ProjectId,
        input: ProjectInput,
    ) -> MemoryResult<Project> {
        projects::put(self, agent, project_id, input).await
    }

    /// One project of `agent` with its sessions; `not_found` (field `project_id`) when it has none by that id.
    pub async fn project(
        &self,
        agent: &AgentId,
        project_id: &ProjectId,
    ) -> MemoryResult<ProjectDetail> {
        projects::get(self, agent, project_id).await
    }

    /// Every project of `agent`, in id order.
    pub async fn projects(&self, agent: &AgentId) -> MemoryResult<Vec<Project>> {
        self.actors().namespaces.projects(agent).await
    }

    /// Attach a session of `agent` to one of its projects (idempotent): memories written
    /// in the session from now on belong to the project. A session belongs to one
    /// project; attaching it to another is `conflict`.
    pub async fn attach_session(
        &self,
        agent: &AgentId,
        project_id: &ProjectId,
        session: &SessionId,
    ) -> MemoryResult<()> {
        let now = self.now();
        self.actors()
            .namespaces
            .attach_session(agent, project_id, session, now)
            .await
    }

    // ---- KV namespaces ----

    /// Create a KV namespace bounded by `max_entries`, or change its bound (shrinking
    /// evicts the least recently used entries at once); returns its stats and the evicted keys.
    pub async fn kv_configure(
        &self,
        namespace: &NamespaceName,
        max_entries: usize,
    ) -> MemoryResult<(NamespaceStats, Vec<String>)> {
        kv::configure(self, namespace, max_entries).await
    }

    /// Write `key` in `namespace` as node `agent` (creating the namespace with
    /// `namespaces.default_max_entries` if nobody has yet). The entry becomes the most
    /// recently used; if the namespace is then over its bound, the least recently used
    /// entries are evicted and named in the outcome. Committed before it answers.
    pub async fn kv_put(
        &self,
        agent: &AgentId,
        namespace: &NamespaceName,
        key: &str,
        input: KvPutInput,
    ) -> MemoryResult<KvPutOutcome> {
        kv::put(self, agent, namespace, key, input).await
    }

    /// Read `key` of `namespace` (a use: it becomes the most recently used entry; counted
    /// as a hit). A missing key is `not_found` with field `key` (counted as a miss); a
    /// missing namespace is `not_found` with field `namespace`.
    pub async fn kv_get(&self, namespace: &NamespaceName, key: &str) -> MemoryResult<KvEntry> {
        kv::get(self, namespace, key).await
    }

    /// Remove `key` from `namespace`; `not_found` when it is not there.
    pub async fn kv_delete(&self, namespace: &NamespaceName, key: &str) -> MemoryResult<()> {
        kv::delete(self, namespace, key).await
    }

    /// Entries of `namespace` whose key, tags or value match the words of `query`,
    /// best first ([`crate::policy::lru::rank`]). Searching is not a use.
    pub async fn kv_search(
        &self,
        namespace: &NamespaceName,
        query: &str,
        limit: usize,
    ) -> MemoryResult<Vec<KvHit>> {
        kv::search(self, namespace, query, limit).await
    }

    /// Entries of `namespace` carrying `tag` (all entries when None), most recently used
    /// first. Listing is not a use.
    pub async fn kv_list_by_tag(
        &self,
        namespace: &NamespaceName,
        tag: Option<&str>,
        limit: usize,
    ) -> MemoryResult<Vec<KvEntry>> {
        kv::list_by_tag(self, namespace, tag, limit).await
    }

    /// Every KV namespace, as stored (tenant-qualified).
    pub async fn kv_namespaces(&self) -> MemoryResult<Vec<NamespaceName>> {
        self.actors().namespaces.kv_namespaces().await
    }

    /// Entries, bound, hits, misses, evictions and puts of `namespace`.
    pub async fn kv_stats(&self, namespace: &NamespaceName) -> MemoryResult<NamespaceStats> {
        let now = self.now();
        self.actors().namespaces.kv_stats(namespace, now).await
    }

    /// Every session of `agent` that has a message log, in id order (export).
    pub async fn export_sessions(&self, agent: &AgentId) -> MemoryResult<Vec<SessionRecord>> {
        self.actors().episodic.export_sessions(agent).await
    }

    /// Delete one session of `agent`: its memories (out of the vector index and the
    /// graph too), its message log and its working-memory window. Answers how many
    /// memories and messages went.
    pub async fn clear_session(
        &self,
        agent: &AgentId,
        session: &SessionId,
    ) -> MemoryResult<(u64, u64)> {
        let actors = self.actors();
        let (ids, messages) = actors.episodic.clear_session(agent, session).await?;
        for id in &ids {
            actors.graph.remove_memory(id).await?;
        }
        actors.vectors.project(&[], &ids).await;
        actors.working.clear(agent, session).await?;
        Ok((ids.len() as u64, messages))
    }

    // ---- export and import ----

    /// Every agent owning a record of any kind (who an export of everything covers).
    pub async fn transfer_agents(&self) -> MemoryResult<Vec<AgentId>> {
        transfer::agents(self).await
    }

    /// How many memories, edges, sessions, projects and runs `agent` owns.
    pub async fn transfer_counts(
        &self,
        agent: &AgentId,
    ) -> MemoryResult<crate::transfer::TransferCounts> {
        transfer::counts(self, agent).await
    }

    /// Everything `agent` owns in the system of record (embeddings when asked).
    pub async fn export_agent(
        &self,
        agent: &AgentId,
        with_embeddings: bool,
    ) -> MemoryResult<crate::transfer::AgentTransfer> {
        transfer::export_agent(self, agent, with_embeddings).await
    }

    /// Every KV namespace's configuration and counters, in name order.
    pub async fn export_namespaces(&self) -> MemoryResult<Vec<crate::transfer::NamespaceTransfer>> {
        transfer::namespaces(self).await
    }

    /// The entries of a KV namespace in key order (only `writer`'s when given).
    pub async fn export_kv_entries(
        &self,
        namespace: &NamespaceName,
        writer: Option<&AgentId>,
    ) -> MemoryResult<Vec<KvEntry>> {
        transfer::kv_entries(self, namespace, writer).await
    }

    /// Check records before an import writes any (screening them as every write is);
    /// answers the failures as (index, error naming the field).
    pub async fn check_import(
        &self,
        records: &mut [crate::transfer::TransferRecord],
    ) -> MemoryResult<Vec<(usize, MemoryError)>> {
        transfer::check(self, records).await
    }

    /// Import checked records, keeping their ids; records already stored are left as
    /// they are. Memories without a vector of the configured model are embedded.
    pub async fn import(
        &self,
        records: Vec<crate::transfer::TransferRecord>,
    ) -> MemoryResult<Vec<crate::transfer::ImportOutcome>> {
        transfer::import(self, records).await
    }

    /// The embedding model's id and dimension (None while the vector actor does not answer).
    pub async fn embedding_model(&self) -> Option<(String, usize)> {
        self.actors()
            .vectors
            .status()
            .await
            .map(|s| (s.model, s.dimension))
    }
}

/// The consolidator's arguments: the handles of the actors that own what it changes.
fn consolidator_args(
    parts: &RuntimeParts,
    config: &RuntimeConfig,
    actors: &Actors,
) -> ConsolidatorArgs {
    ConsolidatorArgs {
        episodic: actors.episodic.clone(),
        vectors: actors.vectors.clone(),
        graph: actors.graph.clone(),
        working: actors.working.clone(),
        edges_in_store: parts.memories.keeps_edges() && parts.graph.backend_name() == "sql",
        thought: parts.thought.clone(),
        clock: parts.clock.clone(),
        retention: config.retention,
        forget: config.forget,
        promote: config.sleep.promote,
        clustering: config.sleep.clustering,
        purge_after_days: config.sleep.purge_after_days,
        idle_hours: config.sleep.idle_hours,
        entities: parts.entities.clone(),
        profile_min_mentions: config.sleep.profile_min_mentions,
        lease: LeaseSettings {
            holder: config.sleep.holder.clone(),
            ttl: config.sleep.lease_ttl,
        },
    }
}

/// Every child in start order: the one place that lists the actors. The cognition actor
/// comes last (it fires the consolidator); each store is handed to exactly one actor.
fn child_specs(
    parts: &RuntimeParts,
    config: &RuntimeConfig,
    actors: &Actors,
    sleep_args: &ConsolidatorArgs,
    watermarks: &Arc<Watermarks>,
) -> Vec<ChildSpec> {
    vec![
        ChildSpec::new(
            ChildKind::Working,
            WorkingActor,
            WorkingArgs {
                store: parts.working.clone(),
                clock: parts.clock.clone(),
                sweep_interval: config.working_sweep_interval,
            },
        ),
        ChildSpec::new(
            ChildKind::Episodic,
            EpisodicActor,
            EpisodicArgs {
                store: parts.memories.clone(),
                clock: parts.clock.clone(),
                touch_flush_interval: config.touch_flush_interval,
                row_cache: config.row_cache,
            },
        ),
        ChildSpec::new(
            ChildKind::Vectors,
            VectorsActor,
            VectorsArgs {
                embedder: EmbedderSlot::new(parts.embedder.clone()),
                index: parts.vectors.clone(),
                keywords: Arc::new(crate::store::keywords::KeywordIndex::new()),
                episodic: actors.episodic.clone(),
                embed_concurrency: config.embedding.concurrency,
                max_queued_texts: config.embedding.max_queued_texts,
                micro_batch: config.embedding.micro_batch,
            },
        ),
        ChildSpec::new(
            ChildKind::Graph,
            GraphActor,
            GraphArgs {
                store: parts.graph.clone(),
            },
        ),
        ChildSpec::new(
            ChildKind::Namespaces,
            NamespacesActor,
            NamespacesArgs {
                projects: parts.projects.clone(),
                kv: parts.kv.clone(),
            },
        ),
        ChildSpec::new(
            ChildKind::Consolidator,
            ConsolidatorActor,
            sleep_args.clone(),
        ),
        ChildSpec::new(
            ChildKind::Projector,
            ProjectorActor,
            ProjectorArgs {
                source: ActorSource {
                    episodic: actors.episodic.clone(),
                    graph: actors.graph.clone(),
                    entities: parts.entities.clone(),
                },
                keeps_outbox: parts.memories.keeps_outbox(),
                projections: parts.projections.clone(),
                clock: parts.clock.clone(),
                interval: config.projector_interval,
                batch: config.projector_batch,
                retry_initial: config.projector_retry.0,
                retry_max: config.projector_retry.1,
                watermarks: watermarks.clone(),
            },
        ),
        ChildSpec::new(
            ChildKind::Cognition,
            CognitionActor,
            CognitionArgs {
                enabled: config.cognition.enabled,
                sleep_schedule: config.cognition.sleep_schedule.clone(),
                archival_schedule: config.cognition.archival_schedule.clone(),
                clock: parts.clock.clone(),
                consolidator: actors.consolidator.clone(),
            },
        ),
    ]
}

//! The projector actor: applies the outbox, in commit order, to each external
//! projection (FalkorDB, ...), with retries and backoff, rebuilds a projection from SQL
//! when it comes back empty, reports lag, and trims what every projection has applied.
//!
//! The SQL store writes an outbox entry in the same transaction as every change (by
//! trigger), so a projection can be behind but never silently miss a write. Each tick
//! (`ProjectorArgs::interval`) handles every projection whose backoff has passed:
//! 1. learn how far it is (`Projection::applied`, recorded inside the projection); when
//!    it holds nothing known, or the outbox was trimmed past it, rebuild it from SQL;
//! 2. apply batches of entries, recording the last applied sequence number with each;
//! 3. on failure, forget what it knew (it may restart empty) and back off
//!    (`retry_initial` doubling to `retry_max`).
//!
//! Then the outbox is trimmed through the smallest applied sequence number (through
//! the head when no projection is configured).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use serde::Serialize;

use super::episodic::EpisodicHandle;
use super::graph::GraphHandle;
use super::{answer_in_task, injected_fault, Caller, Reply};
use crate::clock::Clock;
use crate::error::{MemoryError, MemoryResult};
use crate::model::{AgentId, Association, Memory, MemoryId};
use crate::store::entities::EntityAliases;
use crate::store::{OutboxBounds, OutboxEntry, ProjectedChange, Projection, ProjectionReads};
use crate::supervisor::InjectedFault;

/// Ref of the projector actor.
pub type ProjectorRef = ActorRef<ProjectorMsg>;

/// Messages of the projector actor.
pub enum ProjectorMsg {
    /// Apply what is pending (sent by its timer).
    Tick,
    /// Per-projection state and lag.
    Status { reply: Reply<Vec<ProjectionStatus>> },
    /// Rebuild one projection (or every one, `None`) from SQL now; answers the entries covered.
    Rebuild {
        name: Option<String>,
        reply: Reply<Vec<(String, u64)>>,
    },
    /// Test hook: fail the actor as if its state were broken.
    InjectFault,
}

impl From<InjectedFault> for ProjectorMsg {
    fn from(_: InjectedFault) -> Self {
        ProjectorMsg::InjectFault
    }
}

/// The typed handle of the projector actor (retries while it restarts).
#[derive(Clone)]
pub struct ProjectorHandle(pub(crate) Caller<ProjectorMsg>);

impl ProjectorHandle {
    /// Per-projection state and lag.
    pub async fn status(&self) -> MemoryResult<Vec<ProjectionStatus>> {
        self.0.ask(|reply| ProjectorMsg::Status { reply }).await
    }
    /// Rebuild one projection (or every one) from SQL now, waiting up to an hour.
    pub async fn rebuild(&self, name: Option<String>) -> MemoryResult<Vec<(String, u64)>> {
        self.0
            .ask_within(Some(Duration::from_secs(3600)), |reply| {
                ProjectorMsg::Rebuild {
                    name: name.clone(),
                    reply,
                }
            })
            .await
    }
}

/// What projections are filled from: the outbox, and every memory and edge for a
/// rebuild. In the service it is the episodic and graph actors ([`ActorSource`]).
#[async_trait]
pub trait ProjectionSource: Send + Sync {
    /// The range of stored outbox entries.
    async fn outbox_bounds(&self) -> MemoryResult<OutboxBounds>;
    /// Outbox entries after `after`, at most `limit`.
    async fn outbox_after(&self, after: u64, limit: usize) -> MemoryResult<Vec<OutboxEntry>>;
    /// The newest outbox entry of a committed transaction.
    async fn outbox_committed_head(&self) -> MemoryResult<u64>;
    /// Every agent with a memory.
    async fn agents(&self) -> MemoryResult<Vec<AgentId>>;
    /// Every memory of an agent.
    async fn agent_memories(&self, agent: &AgentId) -> MemoryResult<Vec<Memory>>;
    /// Every edge of an agent.
    async fn agent_edges(&self, agent: &AgentId) -> MemoryResult<Vec<Association>>;
    /// The stored embeddings of these memories (those that still have one).
    async fn embeddings_of(&self, ids: &[MemoryId]) -> MemoryResult<Vec<(MemoryId, Vec<f32>)>>;
    /// The memories with these ids that exist (for projections that keep entities).
    async fn memories_of(&self, ids: &[MemoryId]) -> MemoryResult<Vec<Memory>>;
    /// The agent's merged entity aliases, for projections that keep entities; none
    /// without an entity index.
    async fn aliases_of(&self, agent: &AgentId) -> MemoryResult<EntityAliases>;
}

/// The service's [`ProjectionSource`]: the actors that own the system of record and the graph.
#[derive(Clone)]
pub struct ActorSource {
    /// Owner of the memories and the outbox.
    pub episodic: EpisodicHandle,
    /// Owner of the edges.
    pub graph: GraphHandle,
    /// The entity index (its merges), when there is one.
    pub entities: Option<Arc<dyn crate::store::entities::EntityIndex>>,
}

#[async_trait]
impl ProjectionSource for ActorSource {
    async fn aliases_of(&self, agent: &AgentId) -> MemoryResult<EntityAliases> {
        match &self.entities {
            Some(index) => index.aliases(agent).await,
            None => Ok(EntityAliases::default()),
        }
    }
    async fn outbox_bounds(&self) -> MemoryResult<OutboxBounds> {
        self.episodic.outbox_bounds().await
    }
    async fn outbox_after(&self, after: u64, limit: usize) -> MemoryResult<Vec<OutboxEntry>> {
        self.episodic.outbox_after(after, limit).await
    }
    async fn outbox_committed_head(&self) -> MemoryResult<u64> {
        self.episodic.outbox_committed_head().await
    }
    async fn agents(&self) -> MemoryResult<Vec<AgentId>> {
        self.episodic.agents().await
    }
    async fn agent_memories(&self, agent: &AgentId) -> MemoryResult<Vec<Memory>> {
        self.episodic.agent_memories(agent).await
    }
    async fn agent_edges(&self, agent: &AgentId) -> MemoryResult<Vec<Association>> {
        self.graph.agent_edges(agent).await
    }
    async fn embeddings_of(&self, ids: &[MemoryId]) -> MemoryResult<Vec<(MemoryId, Vec<f32>)>> {
        self.episodic.embeddings_of(ids).await
    }

    async fn memories_of(&self, ids: &[MemoryId]) -> MemoryResult<Vec<Memory>> {
        self.episodic.get_many(ids).await
    }
}

/// The ids of the memories `changes` upsert.
fn upserted_ids(changes: &[ProjectedChange]) -> Vec<MemoryId> {
    changes
        .iter()
        .filter_map(|c| match c {
            ProjectedChange::UpsertMemory { id, .. } => Some(id.clone()),
            _ => None,
        })
        .collect()
}

/// Attach each upserted memory's stored embedding to its change, for a projection that
/// holds vectors; a memory deleted since keeps None (its delete follows in the outbox).
async fn with_vectors(
    source: &dyn ProjectionSource,
    projection: &dyn Projection,
    mut changes: Vec<ProjectedChange>,
) -> MemoryResult<Vec<ProjectedChange>> {
    if !projection.holds_vectors() {
        return Ok(changes);
    }
    let ids = upserted_ids(&changes);
    if ids.is_empty() {
        return Ok(changes);
    }
    let mut vectors: std::collections::HashMap<MemoryId, Vec<f32>> =
        source.embeddings_of(&ids).await?.into_iter().collect();
    for change in &mut changes {
        if let ProjectedChange::UpsertMemory { id, embedding, .. } = change {
            *embedding = vectors.remove(id);
        }
    }
    Ok(changes)
}

/// Attach what each upserted memory names, read from the system of record as it is
/// now, for a projection that keeps entities (others get `changes` unchanged). A
/// memory gone since its upsert names nothing.
async fn with_named(
    source: &dyn ProjectionSource,
    projection: &dyn Projection,
    mut changes: Vec<ProjectedChange>,
) -> MemoryResult<Vec<ProjectedChange>> {
    if !projection.holds_entities() {
        return Ok(changes);
    }
    let ids = upserted_ids(&changes);
    if ids.is_empty() {
        return Ok(changes);
    }
    let memories: HashMap<MemoryId, Memory> = source
        .memories_of(&ids)
        .await?
        .into_iter()
        .map(|m| (m.id.clone(), m))
        .collect();
    let mut aliases: HashMap<AgentId, EntityAliases> = HashMap::new();
    for memory in memories.values() {
        if !aliases.contains_key(&memory.agent_id) {
            let of_agent = source.aliases_of(&memory.agent_id).await?;
            aliases.insert(memory.agent_id.clone(), of_agent);
        }
    }
    let none = EntityAliases::default();
    for change in &mut changes {
        if let ProjectedChange::UpsertMemory { id, named, .. } = change {
            *named = Some(
                memories
                    .get(id)
                    .map(|m| {
                        crate::store::entities::named_in(
                            m,
                            aliases.get(&m.agent_id).unwrap_or(&none),
                        )
                    })
                    .unwrap_or_default(),
            );
        }
    }
    Ok(changes)
}

/// Start-up arguments (kept by the supervisor and reused on restart).
#[derive(Clone)]
pub struct ProjectorArgs {
    /// The outbox, memories and edges, read through their actors.
    pub source: ActorSource,
    /// Whether the system of record keeps an outbox at all (the in-memory store does not).
    pub keeps_outbox: bool,
    /// The projections to keep in sync (empty: only trim the outbox).
    pub projections: Vec<Arc<dyn Projection>>,
    /// Time source for lag.
    pub clock: Arc<dyn Clock>,
    /// Time between ticks.
    pub interval: Duration,
    /// Entries per batch.
    pub batch: usize,
    /// First retry delay after a failure.
    pub retry_initial: Duration,
    /// Longest retry delay.
    pub retry_max: Duration,
    /// How far each projection has applied, published for recall's reads.
    pub watermarks: Arc<Watermarks>,
}

/// How far each projection (in `ProjectorArgs::projections` order) has applied the
/// outbox, as the projector last saw it: shared with the runtime so that recall reads
/// a projection only when nothing committed is missing from it. A projection that is
/// failing, unknown (just started or restarted) or being rebuilt has no mark.
#[derive(Debug)]
pub struct Watermarks {
    /// Applied-through sequence numbers; `NO_MARK` when unknown or failing.
    marks: Vec<std::sync::atomic::AtomicU64>,
    /// Recall reads each projection answered (shown in health and metrics).
    served: Vec<std::sync::atomic::AtomicU64>,
    /// Recall reads that went to the embedded fallback instead (behind, down or failed).
    fallbacks: Vec<std::sync::atomic::AtomicU64>,
}

/// The mark of a projection that must not be read.
const NO_MARK: u64 = u64::MAX;

impl Watermarks {
    /// Marks for `count` projections, all unknown.
    pub fn new(count: usize) -> Self {
        Self {
            marks: (0..count)
                .map(|_| std::sync::atomic::AtomicU64::new(NO_MARK))
                .collect(),
            served: (0..count)
                .map(|_| std::sync::atomic::AtomicU64::new(0))
                .collect(),
            fallbacks: (0..count)
                .map(|_| std::sync::atomic::AtomicU64::new(0))
                .collect(),
        }
    }

    /// Count one recall read of projection `index`: answered by it, or by the fallback.
    pub fn count_read(&self, index: usize, served: bool) {
        let counters = if served {
            &self.served
        } else {
            &self.fallbacks
        };
        if let Some(counter) = counters.get(index) {
            counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Reads of projection `index` so far: (answered by it, sent to the fallback).
    pub fn reads(&self, index: usize) -> (u64, u64) {
        let load = |counters: &[std::sync::atomic::AtomicU64]| {
            counters
                .get(index)
                .map_or(0, |c| c.load(std::sync::atomic::Ordering::Relaxed))
        };
        (load(&self.served), load(&self.fallbacks))
    }

    /// The sequence number projection `index` has applied through, if it is up.
    pub fn applied(&self, index: usize) -> Option<u64> {
        self.marks
            .get(index)
            .map(|mark| mark.load(std::sync::atomic::Ordering::Acquire))
            .filter(|mark| *mark != NO_MARK)
    }

    /// Publish projection `index`'s progress (None: do not read it).
    pub fn set(&self, index: usize, applied: Option<u64>) {
        if let Some(mark) = self.marks.get(index) {
            mark.store(
                applied.unwrap_or(NO_MARK),
                std::sync::atomic::Ordering::Release,
            );
        }
    }
}

/// What the projector knows about one projection.
#[derive(Debug, Default, Clone)]
struct Track {
    /// Applied through this sequence number (None: unknown, ask the projection).
    applied: Option<u64>,
    /// Consecutive failures (for the backoff).
    failures: u32,
    /// Not before this instant after a failure.
    retry_at: Option<Instant>,
    /// The last failure's message, cleared on success.
    last_error: Option<String>,
    /// Rebuilds done since start.
    rebuilds: u32,
    /// When the projection itself last confirmed `applied` (None: never): a projection
    /// server that restarted empty while idle is noticed at the next confirmation.
    confirmed_at: Option<Instant>,
}

/// Longest a stopping projector waits for the apply or rebuild in flight.
const STOP_WAIT: Duration = Duration::from_secs(5);

/// How long an applied mark is trusted before the projection is asked for it again.
const CONFIRM_MARK_EVERY: Duration = Duration::from_secs(10);

/// The actor's state.
pub struct ProjectorState {
    /// Arguments and tracks, shared with the tasks doing the work.
    shared: Arc<Shared>,
    /// Timer sending `Tick`; aborted when the actor stops.
    timer: Option<tokio::task::JoinHandle<()>>,
}

/// What the actor's work tasks share. Applying runs on a spawned task so that a long
/// catch-up or rebuild never holds up `Status` (health) in the mailbox.
struct Shared {
    /// Stores, projections and tunables.
    args: ProjectorArgs,
    /// One track per projection, in `args.projections` order.
    tracks: std::sync::Mutex<Vec<Track>>,
    /// Held while applying or rebuilding: one at a time (a tick finding it held is skipped).
    work: tokio::sync::Mutex<()>,
    /// Set when the actor stops: a tick spawned just before then applies nothing, so no
    /// work outlives the actor into stores being closed.
    stopped: std::sync::atomic::AtomicBool,
}

/// One projection's health.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProjectionStatus {
    /// Projection name.
    pub name: String,
    /// `up` (applying), `behind` (retrying after a failure) or `unknown` (not reached yet).
    pub state: String,
    /// Applied through this outbox sequence number.
    pub applied: Option<u64>,
    /// Newest outbox sequence number.
    pub head: u64,
    /// Entries not applied yet.
    pub lag_entries: u64,
    /// Age of the oldest entry not applied yet, in seconds (0 when caught up).
    pub lag_seconds: f64,
    /// Consecutive failures.
    pub failures: u32,
    /// The last failure, if the projection is failing.
    pub last_error: Option<String>,
    /// Rebuilds from SQL since start.
    pub rebuilds: u32,
    /// Whether recall reads it (`vectors`, `graph`) or only writes to it (`none`).
    pub serves: &'static str,
    /// Recall reads it answered since start.
    pub reads_served: u64,
    /// Recall reads answered by the embedded fallback instead since start (it was
    /// behind, down, or the read failed).
    pub reads_fallback: u64,
}

/// The projector actor.
#[derive(Clone)]
pub struct ProjectorActor;

/// The upsert of a memory as a projection sees it.
pub fn memory_change(memory: &Memory) -> ProjectedChange {
    ProjectedChange::UpsertMemory {
        id: memory.id.clone(),
        agent_id: memory.agent_id.clone(),
        memory_type: memory.memory_type.as_str().to_string(),
        status: memory.status.as_str().to_string(),
        shared: memory.shared,
        session_id: memory.session_id.as_ref().map(|s| s.as_str().to_string()),
        embedding: None,
        named: None,
    }
}

/// Rebuild `projection` from SQL: reset it, upsert every memory and edge, then record
/// the outbox head read before the copy (entries after it are applied next, twice at
/// worst, which is harmless: changes are idempotent). Returns that head.
pub async fn rebuild(
    source: &dyn ProjectionSource,
    projection: &dyn Projection,
    batch: usize,
) -> MemoryResult<u64> {
    let head = source.outbox_committed_head().await?;
    projection.reset().await?;
    for agent in source.agents().await? {
        let memories = source.agent_memories(&agent).await?;
        let aliases = if projection.holds_entities() {
            source.aliases_of(&agent).await?
        } else {
            EntityAliases::default()
        };
        for chunk in memories.chunks(batch.max(1)) {
            let changes: Vec<ProjectedChange> = chunk
                .iter()
                .map(|memory| {
                    let mut change = memory_change(memory);
                    if projection.holds_entities() {
                        if let ProjectedChange::UpsertMemory { named, .. } = &mut change {
                            *named = Some(crate::store::entities::named_in(memory, &aliases));
                        }
                    }
                    change
                })
                .collect();
            let changes = with_vectors(source, projection, changes).await?;
            projection.apply(&changes, None).await?;
        }
        let edges = source.agent_edges(&agent).await?;
        for chunk in edges.chunks(batch.max(1)) {
            let changes: Vec<ProjectedChange> = chunk
                .iter()
                .map(|e| ProjectedChange::UpsertEdge {
                    agent_id: e.agent_id.clone(),
                    from_id: e.from_id.clone(),
                    to_id: e.to_id.clone(),
                    relation: e.relation.clone(),
                    weight: e.weight,
                })
                .collect();
            projection.apply(&changes, None).await?;
        }
    }
    projection.apply(&[], Some(head)).await?;
    Ok(head)
}

/// One step for one projection: catch up as far as `max_batches` batches go. Returns
/// the sequence number applied through (tests call this directly).
pub async fn catch_up(
    source: &dyn ProjectionSource,
    projection: &dyn Projection,
    known: Option<u64>,
    batch: usize,
    max_batches: usize,
) -> MemoryResult<(u64, bool)> {
    let bounds = source.outbox_bounds().await?;
    let mut rebuilt = false;
    let mut applied = match known {
        Some(applied) => applied,
        None => match projection.applied().await? {
            // Trimmed past what it holds (it was down through a trim), or ahead of the
            // store (it was filled from another database, or SQL was restored from a
            // backup): rebuild.
            Some(applied)
                if applied <= bounds.head
                    && bounds.oldest.is_none_or(|oldest| applied + 1 >= oldest) =>
            {
                applied
            }
            Some(_) | None => {
                rebuilt = true;
                rebuild(source, projection, batch).await?
            }
        },
    };
    for _ in 0..max_batches {
        let entries = source.outbox_after(applied, batch).await?;
        let Some(last) = entries.last().map(|e| e.seq) else {
            break;
        };
        let changes: Vec<ProjectedChange> = entries.into_iter().map(|e| e.change).collect();
        let changes = with_vectors(source, projection, changes).await?;
        let changes = with_named(source, projection, changes).await?;
        projection.apply(&changes, Some(last)).await?;
        applied = last;
    }
    Ok((applied, rebuilt))
}

impl Shared {
    fn track(&self, index: usize) -> Track {
        self.tracks
            .lock()
            .map(|tracks| tracks[index].clone())
            .unwrap_or_default()
    }

    fn set_track(&self, index: usize, track: Track) {
        self.args.watermarks.set(index, track.applied);
        if let Ok(mut tracks) = self.tracks.lock() {
            tracks[index] = track;
        }
    }

    async fn tick(&self) {
        if !self.args.keeps_outbox {
            return;
        }
        let source = &self.args.source;
        let Ok(_working) = self.work.try_lock() else {
            return;
        };
        if self.stopped.load(std::sync::atomic::Ordering::Acquire) {
            return;
        }
        for (index, projection) in self.args.projections.clone().iter().enumerate() {
            let mut track = self.track(index);
            let track = &mut track;
            if track.retry_at.is_some_and(|at| Instant::now() < at) {
                continue;
            }
            let known = track.applied.filter(|_| {
                track
                    .confirmed_at
                    .is_some_and(|at| at.elapsed() < CONFIRM_MARK_EVERY)
            });
            match catch_up(source, projection.as_ref(), known, self.args.batch, 16).await {
                Ok((applied, rebuilt)) => {
                    if known.is_none() {
                        track.confirmed_at = Some(Instant::now());
                    }
                    if track.failures > 0 || rebuilt {
                        tracing::info!(
                            projection = projection.name(),
                            applied,
                            rebuilt,
                            "projection is up"
                        );
                    }
                    if rebuilt {
                        track.rebuilds += 1;
                    }
                    track.applied = Some(applied);
                    track.failures = 0;
                    track.retry_at = None;
                    track.last_error = None;
                }
                Err(error) => {
                    if track.failures == 0 {
                        tracing::warn!(projection = projection.name(), %error, "projection is behind; retrying with backoff");
                    }
                    track.failures += 1;
                    track.applied = None;
                    let delay = self
                        .args
                        .retry_initial
                        .saturating_mul(2u32.saturating_pow(track.failures.min(16) - 1))
                        .min(self.args.retry_max);
                    track.retry_at = Some(Instant::now() + delay);
                    track.last_error = Some(error.message);
                }
            }
            let track = track.clone();
            self.set_track(index, track);
        }
        // Trim what every projection has applied (everything when there is none); an
        // empty outbox is not touched, so an idle store sees no writes.
        let Ok(bounds) = source.outbox_bounds().await else {
            return;
        };
        let Some(oldest) = bounds.oldest else {
            return;
        };
        let through = if self.args.projections.is_empty() {
            Some(bounds.head)
        } else {
            self.tracks
                .lock()
                .map(|tracks| tracks.clone())
                .unwrap_or_default()
                .iter()
                .map(|t| t.applied)
                .collect::<Option<Vec<u64>>>()
                .and_then(|applied| applied.into_iter().min())
        };
        if let Some(through) = through.filter(|t| *t >= oldest) {
            if let Err(error) = source.episodic.trim_outbox(through).await {
                tracing::debug!(%error, "outbox trim deferred");
            }
        }
    }

    async fn status(&self) -> MemoryResult<Vec<ProjectionStatus>> {
        let source = &self.args.source;
        let head = source.outbox_bounds().await?.head;
        let now: DateTime<Utc> = self.args.clock.now();
        let mut out = Vec::new();
        let tracks = self
            .tracks
            .lock()
            .map(|tracks| tracks.clone())
            .unwrap_or_default();
        for (index, (projection, track)) in self.args.projections.iter().zip(&tracks).enumerate() {
            let (reads_served, reads_fallback) = self.args.watermarks.reads(index);
            let from = track.applied.unwrap_or(0);
            let oldest_pending = source.outbox_after(from, 1).await?;
            let lag_seconds = oldest_pending
                .first()
                .map(|e| ((now - e.created_at).num_milliseconds().max(0) as f64) / 1000.0)
                .unwrap_or(0.0);
            out.push(ProjectionStatus {
                name: projection.name().to_string(),
                state: match (track.applied, track.failures) {
                    (_, failures) if failures > 0 => "behind",
                    (Some(_), _) => "up",
                    (None, _) => "unknown",
                }
                .to_string(),
                applied: track.applied,
                head,
                // Sequence numbers can have gaps (PostgreSQL): nothing pending is no lag.
                lag_entries: if oldest_pending.is_empty() {
                    0
                } else {
                    head.saturating_sub(from)
                },
                lag_seconds,
                failures: track.failures,
                last_error: track.last_error.clone(),
                rebuilds: track.rebuilds,
                serves: match projection.serves() {
                    ProjectionReads::None => "none",
                    ProjectionReads::Vectors => "vectors",
                    ProjectionReads::Graph => "graph",
                },
                reads_served,
                reads_fallback,
            });
        }
        Ok(out)
    }
}

impl Shared {
    /// Rebuild one projection (or every one) from SQL, after any running tick.
    async fn rebuild_named(&self, name: Option<String>) -> MemoryResult<Vec<(String, u64)>> {
        let _working = self.work.lock().await;
        if self.stopped.load(std::sync::atomic::Ordering::Acquire) {
            return Err(MemoryError::unavailable("the projector is stopping"));
        }
        let mut done = Vec::new();
        for (index, projection) in self.args.projections.iter().enumerate() {
            if name.as_deref().is_some_and(|n| n != projection.name()) {
                continue;
            }
            // Emptied and refilled: not readable until done.
            self.args.watermarks.set(index, None);
            let head = rebuild(&self.args.source, projection.as_ref(), self.args.batch).await?;
            let mut track = self.track(index);
            track.applied = Some(head);
            track.rebuilds += 1;
            track.failures = 0;
            track.retry_at = None;
            track.last_error = None;
            self.set_track(index, track);
            done.push((projection.name().to_string(), head));
        }
        match name {
            Some(name) if done.is_empty() => Err(MemoryError::invalid(
                "projection",
                format!(
                    "no projection named {name:?} is configured (configured: {})",
                    self.args
                        .projections
                        .iter()
                        .map(|p| p.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )),
            _ => Ok(done),
        }
    }
}

impl Actor for ProjectorActor {
    type Msg = ProjectorMsg;
    type State = ProjectorState;
    type Arguments = ProjectorArgs;

    async fn pre_start(
        &self,
        myself: ProjectorRef,
        args: ProjectorArgs,
    ) -> Result<ProjectorState, ActorProcessingErr> {
        let timer = myself.send_interval(args.interval, || ProjectorMsg::Tick);
        // A restart forgets how far each projection got: unread until the first tick.
        for index in 0..args.projections.len() {
            args.watermarks.set(index, None);
        }
        let tracks = args.projections.iter().map(|_| Track::default()).collect();
        Ok(ProjectorState {
            shared: Arc::new(Shared {
                args,
                tracks: std::sync::Mutex::new(tracks),
                work: tokio::sync::Mutex::new(()),
                stopped: std::sync::atomic::AtomicBool::new(false),
            }),
            timer: Some(timer),
        })
    }

    async fn post_stop(
        &self,
        _myself: ProjectorRef,
        state: &mut ProjectorState,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(timer) = state.timer.take() {
            timer.abort();
        }
        // The tick or rebuild in flight finishes (bounded) before the actor is reported
        // stopped, so shutdown never closes the stores under it; later ones do nothing.
        state
            .shared
            .stopped
            .store(true, std::sync::atomic::Ordering::Release);
        if tokio::time::timeout(STOP_WAIT, state.shared.work.lock())
            .await
            .is_err()
        {
            tracing::warn!(
                "a projection was still applying when the projector stopped; the outbox keeps what it had not applied"
            );
        }
        Ok(())
    }

    #[tracing::instrument(name = "projector", skip_all)]
    async fn handle(
        &self,
        _myself: ProjectorRef,
        message: ProjectorMsg,
        state: &mut ProjectorState,
    ) -> Result<(), ActorProcessingErr> {
        let shared = state.shared.clone();
        match message {
            // A tick finding the previous one still applying is skipped (`work` is held).
            ProjectorMsg::Tick => {
                tokio::spawn(async move { shared.tick().await });
            }
            ProjectorMsg::Status { reply } => {
                answer_in_task(reply, async move { shared.status().await })
            }
            ProjectorMsg::Rebuild { name, reply } => {
                answer_in_task(reply, async move { shared.rebuild_named(name).await })
            }
            ProjectorMsg::InjectFault => return Err(injected_fault("projector")),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::Watermarks;

    #[test]
    fn a_projection_is_unreadable_until_marked_and_after_being_cleared() {
        let marks = Watermarks::new(2);
        assert_eq!(marks.applied(0), None, "unknown at start");
        marks.set(0, Some(0));
        assert_eq!(
            marks.applied(0),
            Some(0),
            "applied nothing yet is still a mark"
        );
        marks.set(0, Some(42));
        assert_eq!(marks.applied(0), Some(42));
        assert_eq!(marks.applied(1), None, "marks are per projection");
        marks.set(0, None);
        assert_eq!(marks.applied(0), None, "a failure clears the mark");
        assert_eq!(marks.applied(7), None, "no such projection");
        marks.set(7, Some(1));
    }

    #[test]
    fn reads_are_counted_per_projection_and_outcome() {
        let marks = Watermarks::new(2);
        marks.count_read(0, true);
        marks.count_read(0, true);
        marks.count_read(0, false);
        marks.count_read(1, false);
        marks.count_read(9, true);
        assert_eq!(marks.reads(0), (2, 1));
        assert_eq!(marks.reads(1), (0, 1));
        assert_eq!(marks.reads(9), (0, 0));
    }
}

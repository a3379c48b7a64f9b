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

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde::Serialize;

use super::injected_fault;
use crate::clock::Clock;
use crate::error::{MemoryError, MemoryResult};
use crate::model::Memory;
use crate::store::{GraphStore, MemoryStore, ProjectedChange, Projection};

/// Handle to the projector actor.
pub type ProjectorRef = ActorRef<ProjectorMsg>;
type Reply<T> = RpcReplyPort<MemoryResult<T>>;

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

/// Start-up arguments (kept by the supervisor and reused on restart).
#[derive(Clone)]
pub struct ProjectorArgs {
    /// The system of record holding the outbox.
    pub store: Arc<dyn MemoryStore>,
    /// The SQL graph, read to rebuild graph projections.
    pub graph: Arc<dyn GraphStore>,
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
}

/// What the projector knows about one projection.
#[derive(Debug, Default)]
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
}

/// The actor's state.
pub struct ProjectorState {
    /// Stores, projections and tunables.
    args: ProjectorArgs,
    /// One track per projection, in `args.projections` order.
    tracks: Vec<Track>,
    /// Timer sending `Tick`; aborted when the actor stops.
    timer: Option<tokio::task::JoinHandle<()>>,
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
}

/// The projector actor.
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
    }
}

/// Rebuild `projection` from SQL: reset it, upsert every memory and edge, then record
/// the outbox head read before the copy (entries after it are applied next, twice at
/// worst, which is harmless: changes are idempotent). Returns that head.
pub async fn rebuild(
    store: &dyn MemoryStore,
    graph: &dyn GraphStore,
    projection: &dyn Projection,
    batch: usize,
) -> MemoryResult<u64> {
    let head = store.outbox_bounds().await?.head;
    projection.reset().await?;
    for agent in store.agents().await? {
        let memories = store.agent_memories(&agent).await?;
        for chunk in memories.chunks(batch.max(1)) {
            let changes: Vec<ProjectedChange> = chunk.iter().map(memory_change).collect();
            projection.apply(&changes, None).await?;
        }
        let edges = graph.agent_edges(&agent).await?;
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
    store: &dyn MemoryStore,
    graph: &dyn GraphStore,
    projection: &dyn Projection,
    known: Option<u64>,
    batch: usize,
    max_batches: usize,
) -> MemoryResult<(u64, bool)> {
    let bounds = store.outbox_bounds().await?;
    let mut rebuilt = false;
    let mut applied = match known {
        Some(applied) => applied,
        None => match projection.applied().await? {
            // Trimmed past what it holds (it was down through a trim): rebuild.
            Some(applied) if bounds.oldest.is_none_or(|oldest| applied + 1 >= oldest) => applied,
            Some(_) | None => {
                rebuilt = true;
                rebuild(store, graph, projection, batch).await?
            }
        },
    };
    for _ in 0..max_batches {
        let entries = store.outbox_after(applied, batch).await?;
        let Some(last) = entries.last().map(|e| e.seq) else {
            break;
        };
        let changes: Vec<ProjectedChange> = entries.into_iter().map(|e| e.change).collect();
        projection.apply(&changes, Some(last)).await?;
        applied = last;
    }
    Ok((applied, rebuilt))
}

impl ProjectorState {
    async fn tick(&mut self) {
        let store = self.args.store.clone();
        if !store.keeps_outbox() {
            return;
        }
        for (index, projection) in self.args.projections.clone().iter().enumerate() {
            let track = &mut self.tracks[index];
            if track.retry_at.is_some_and(|at| Instant::now() < at) {
                continue;
            }
            match catch_up(
                store.as_ref(),
                self.args.graph.as_ref(),
                projection.as_ref(),
                track.applied,
                self.args.batch,
                16,
            )
            .await
            {
                Ok((applied, rebuilt)) => {
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
        }
        // Trim what every projection has applied (everything when there is none).
        let through = if self.args.projections.is_empty() {
            store
                .outbox_bounds()
                .await
                .map(|b| Some(b.head))
                .unwrap_or(None)
        } else {
            self.tracks
                .iter()
                .map(|t| t.applied)
                .collect::<Option<Vec<u64>>>()
                .and_then(|applied| applied.into_iter().min())
        };
        if let Some(through) = through.filter(|t| *t > 0) {
            if let Err(error) = store.trim_outbox(through).await {
                tracing::debug!(%error, "outbox trim deferred");
            }
        }
    }

    async fn status(&self) -> MemoryResult<Vec<ProjectionStatus>> {
        let store = &self.args.store;
        let head = store.outbox_bounds().await?.head;
        let now: DateTime<Utc> = self.args.clock.now();
        let mut out = Vec::new();
        for (projection, track) in self.args.projections.iter().zip(&self.tracks) {
            let from = track.applied.unwrap_or(0);
            let oldest_pending = store.outbox_after(from, 1).await?;
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
                lag_entries: head.saturating_sub(from),
                lag_seconds,
                failures: track.failures,
                last_error: track.last_error.clone(),
                rebuilds: track.rebuilds,
            });
        }
        Ok(out)
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
        let tracks = args.projections.iter().map(|_| Track::default()).collect();
        Ok(ProjectorState {
            args,
            tracks,
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
        Ok(())
    }

    #[tracing::instrument(name = "projector", skip_all)]
    async fn handle(
        &self,
        _myself: ProjectorRef,
        message: ProjectorMsg,
        state: &mut ProjectorState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            ProjectorMsg::Tick => state.tick().await,
            ProjectorMsg::Status { reply } => {
                let _ = reply.send(state.status().await);
            }
            ProjectorMsg::Rebuild { name, reply } => {
                let mut done = Vec::new();
                let mut result = Ok(());
                for (index, projection) in state.args.projections.clone().iter().enumerate() {
                    if name.as_deref().is_some_and(|n| n != projection.name()) {
                        continue;
                    }
                    match rebuild(
                        state.args.store.as_ref(),
                        state.args.graph.as_ref(),
                        projection.as_ref(),
                        state.args.batch,
                    )
                    .await
                    {
                        Ok(head) => {
                            let track = &mut state.tracks[index];
                            track.applied = Some(head);
                            track.rebuilds += 1;
                            track.failures = 0;
                            track.retry_at = None;
                            track.last_error = None;
                            done.push((projection.name().to_string(), head));
                        }
                        Err(error) => {
                            result = Err(error);
                            break;
                        }
                    }
                }
                let answer = match (result, &name) {
                    (Err(error), _) => Err(error),
                    (Ok(()), Some(name)) if done.is_empty() => Err(MemoryError::invalid(
                        "projection",
                        format!(
                            "no projection named {name:?} is configured (configured: {})",
                            state
                                .args
                                .projections
                                .iter()
                                .map(|p| p.name())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    )),
                    (Ok(()), _) => Ok(done),
                };
                let _ = reply.send(answer);
            }
            ProjectorMsg::InjectFault => return Err(injected_fault("projector")),
        }
        Ok(())
    }
}

//! The root supervisor: spawns every actor linked to itself, keeps the shared
//! [`Directory`] of current actor refs and their health, and restarts a failed child
//! with exponential backoff inside a restart budget.
//!
//! ractor restarts nothing by itself: on `ActorFailed` we get an event and decide. A
//! child is restarted with the same arguments it first had; those hold the stores, so
//! a restart loses only the messages in the child's mailbox at the moment it died,
//! and callers retry those (every write is idempotent by id).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use ractor::{
    Actor, ActorCell, ActorId, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent,
};
use serde::Serialize;

use crate::actors::cognition::{CognitionActor, CognitionArgs, CognitionMsg, CognitionRef};
use crate::actors::consolidator::{
    ConsolidatorActor, ConsolidatorArgs, ConsolidatorMsg, ConsolidatorRef,
};
use crate::actors::episodic::{EpisodicActor, EpisodicArgs, EpisodicMsg, EpisodicRef};
use crate::actors::graph::{GraphActor, GraphArgs, GraphMsg, GraphRef};
use crate::actors::namespaces::{NamespacesActor, NamespacesArgs, NamespacesMsg, NamespacesRef};
use crate::actors::projector::{ProjectorActor, ProjectorArgs, ProjectorMsg, ProjectorRef};
use crate::actors::vectors::{VectorsActor, VectorsArgs, VectorsMsg, VectorsRef};
use crate::actors::working::{WorkingActor, WorkingArgs, WorkingMsg, WorkingRef};
use crate::policy::schedule::Schedule;

/// Handle to the supervisor.
pub type SupervisorRef = ActorRef<SupervisorMsg>;

/// The supervised children, in start order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum ChildKind {
    /// Session windows.
    Working,
    /// System of record.
    Episodic,
    /// Embedder and vector index.
    Vectors,
    /// Association graph.
    Graph,
    /// Projects and KV namespaces.
    Namespaces,
    /// Consolidation and archival.
    Consolidator,
    /// Outbox → external projections.
    Projector,
    /// Cron-driven background cognition.
    Cognition,
}

impl ChildKind {
    /// Every child, in start order (cognition last: it needs the consolidator).
    pub const ALL: [ChildKind; 8] = [
        ChildKind::Working,
        ChildKind::Episodic,
        ChildKind::Vectors,
        ChildKind::Graph,
        ChildKind::Namespaces,
        ChildKind::Consolidator,
        ChildKind::Projector,
        ChildKind::Cognition,
    ];
    /// The child's name in health reports and errors.
    pub fn as_str(self) -> &'static str {
        match self {
            ChildKind::Working => "working",
            ChildKind::Episodic => "episodic",
            ChildKind::Vectors => "vectors",
            ChildKind::Graph => "graph",
            ChildKind::Namespaces => "namespaces",
            ChildKind::Consolidator => "consolidator",
            ChildKind::Projector => "projector",
            ChildKind::Cognition => "cognition",
        }
    }
    /// Parse a child name.
    pub fn parse(raw: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == raw)
    }
}

/// Lifecycle of a supervised child.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChildState {
    /// Serving messages.
    Running,
    /// Failed; a restart is scheduled.
    Restarting,
    /// Out of restart budget; stays down.
    Failed,
}

/// Health of one child for `/health`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChildHealth {
    /// Which child.
    pub child: ChildKind,
    /// Its lifecycle state.
    pub state: ChildState,
    /// Restarts since the runtime started.
    pub restarts: u32,
    /// The last failure, if any.
    pub last_error: Option<String>,
}

/// Current refs of every child (None while restarting).
#[derive(Default, Clone)]
pub struct Children {
    /// Working memory.
    pub working: Option<WorkingRef>,
    /// Episodic storage.
    pub episodic: Option<EpisodicRef>,
    /// Vectors.
    pub vectors: Option<VectorsRef>,
    /// Graph.
    pub graph: Option<GraphRef>,
    /// Projects and KV namespaces.
    pub namespaces: Option<NamespacesRef>,
    /// Consolidator.
    pub consolidator: Option<ConsolidatorRef>,
    /// Projector.
    pub projector: Option<ProjectorRef>,
    /// Background cognition.
    pub cognition: Option<CognitionRef>,
}

/// Shared between the supervisor (writer) and the runtime handle (reader).
#[derive(Default)]
pub struct Directory {
    /// Current child refs.
    children: RwLock<Children>,
    /// Health per child.
    health: RwLock<HashMap<ChildKind, ChildHealth>>,
}

impl Directory {
    /// A snapshot of the current refs.
    pub fn children(&self) -> Children {
        self.children
            .read()
            .expect("directory lock poisoned")
            .clone()
    }
    /// Health of every child, in start order.
    pub fn health(&self) -> Vec<ChildHealth> {
        let health = self.health.read().expect("directory lock poisoned");
        ChildKind::ALL
            .iter()
            .filter_map(|k| health.get(k).cloned())
            .collect()
    }
    fn set_health(&self, kind: ChildKind, update: impl FnOnce(&mut ChildHealth)) {
        let mut health = self.health.write().expect("directory lock poisoned");
        let entry = health.entry(kind).or_insert(ChildHealth {
            child: kind,
            state: ChildState::Running,
            restarts: 0,
            last_error: None,
        });
        update(entry);
    }
    fn set_child(&self, kind: ChildKind, cell: Option<ActorCell>) {
        let mut children = self.children.write().expect("directory lock poisoned");
        match kind {
            ChildKind::Working => children.working = cell.map(ActorRef::from),
            ChildKind::Episodic => children.episodic = cell.map(ActorRef::from),
            ChildKind::Vectors => children.vectors = cell.map(ActorRef::from),
            ChildKind::Graph => children.graph = cell.map(ActorRef::from),
            ChildKind::Namespaces => children.namespaces = cell.map(ActorRef::from),
            ChildKind::Consolidator => children.consolidator = cell.map(ActorRef::from),
            ChildKind::Projector => children.projector = cell.map(ActorRef::from),
            ChildKind::Cognition => children.cognition = cell.map(ActorRef::from),
        }
    }
}

/// Restart backoff and budget.
#[derive(Debug, Clone, Copy)]
pub struct RestartPolicy {
    /// Delay before the first restart in a burst.
    pub initial_backoff: Duration,
    /// Upper bound of the delay.
    pub max_backoff: Duration,
    /// Restarts allowed per child within `window` before it is left failed.
    pub max_restarts: usize,
    /// Sliding window of the budget.
    pub window: Duration,
}

impl Default for RestartPolicy {
    fn default() -> Self {
        Self {
            initial_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_secs(5),
            max_restarts: 10,
            window: Duration::from_secs(60),
        }
    }
}

impl RestartPolicy {
    /// Delay before restart number `recent` (1-based) within the window: doubles each time, capped.
    pub fn backoff(&self, recent: usize) -> Duration {
        let exponent = recent.saturating_sub(1).min(20) as u32;
        self.initial_backoff
            .saturating_mul(2u32.saturating_pow(exponent))
            .min(self.max_backoff)
    }
}

/// Everything the children need, kept to restart them identically.
#[derive(Clone)]
pub struct SupervisorArgs {
    /// Working-memory child arguments.
    pub working: WorkingArgs,
    /// Episodic child arguments.
    pub episodic: EpisodicArgs,
    /// Vector child arguments.
    pub vectors: VectorsArgs,
    /// Graph child arguments.
    pub graph: GraphArgs,
    /// Namespaces child arguments.
    pub namespaces: NamespacesArgs,
    /// Consolidator child arguments.
    pub consolidator: ConsolidatorArgs,
    /// Projector child arguments.
    pub projector: ProjectorArgs,
    /// Cognition child arguments, minus the consolidator lookup the supervisor fills in.
    pub cognition: CognitionSettings,
    /// Backoff and budget.
    pub restart: RestartPolicy,
    /// Where current refs and health are published.
    pub directory: Arc<Directory>,
}

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

/// Messages of the supervisor.
pub enum SupervisorMsg {
    /// Restart a child now (sent to itself after the backoff).
    Restart(ChildKind),
    /// Make a child fail (test hook for supervision).
    InjectFault(ChildKind),
    /// Stop every child in reverse start order, then answer.
    Shutdown { reply: RpcReplyPort<()> },
}

/// The supervisor's state.
pub struct SupervisorState {
    /// Children's arguments, reused on restart.
    args: SupervisorArgs,
    /// Which child each live actor id is.
    kinds: HashMap<ActorId, ChildKind>,
    /// Recent restart times per child, for the budget and the backoff.
    recent_restarts: HashMap<ChildKind, VecDeque<Instant>>,
    /// Set once shutdown begins, so stopping children are not restarted.
    shutting_down: bool,
}

/// The root supervisor.
pub struct Supervisor;

async fn spawn_child(
    kind: ChildKind,
    args: &SupervisorArgs,
    supervisor: ActorCell,
) -> Result<ActorCell, ActorProcessingErr> {
    let cell = match kind {
        ChildKind::Working => {
            Actor::spawn_linked(None, WorkingActor, args.working.clone(), supervisor)
                .await?
                .0
                .get_cell()
        }
        ChildKind::Episodic => {
            Actor::spawn_linked(None, EpisodicActor, args.episodic.clone(), supervisor)
                .await?
                .0
                .get_cell()
        }
        ChildKind::Vectors => {
            Actor::spawn_linked(None, VectorsActor, args.vectors.clone(), supervisor)
                .await?
                .0
                .get_cell()
        }
        ChildKind::Graph => Actor::spawn_linked(None, GraphActor, args.graph.clone(), supervisor)
            .await?
            .0
            .get_cell(),
        ChildKind::Namespaces => {
            Actor::spawn_linked(None, NamespacesActor, args.namespaces.clone(), supervisor)
                .await?
                .0
                .get_cell()
        }
        ChildKind::Consolidator => Actor::spawn_linked(
            None,
            ConsolidatorActor,
            args.consolidator.clone(),
            supervisor,
        )
        .await?
        .0
        .get_cell(),
        ChildKind::Projector => {
            Actor::spawn_linked(None, ProjectorActor, args.projector.clone(), supervisor)
                .await?
                .0
                .get_cell()
        }
        ChildKind::Cognition => {
            let directory = args.directory.clone();
            let cognition = CognitionArgs {
                enabled: args.cognition.enabled,
                sleep_schedule: args.cognition.sleep_schedule.clone(),
                archival_schedule: args.cognition.archival_schedule.clone(),
                clock: args.consolidator.clock.clone(),
                consolidator: Arc::new(move || directory.children().consolidator),
            };
            Actor::spawn_linked(None, CognitionActor, cognition, supervisor)
                .await?
                .0
                .get_cell()
        }
    };
    Ok(cell)
}

impl Supervisor {
    async fn start_child(
        &self,
        myself: &SupervisorRef,
        kind: ChildKind,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        let cell = spawn_child(kind, &state.args, myself.get_cell()).await?;
        state.kinds.insert(cell.get_id(), kind);
        state.args.directory.set_child(kind, Some(cell));
        state
            .args
            .directory
            .set_health(kind, |h| h.state = ChildState::Running);
        Ok(())
    }

    fn schedule_restart(
        &self,
        myself: &SupervisorRef,
        kind: ChildKind,
        error: String,
        state: &mut SupervisorState,
    ) {
        let policy = state.args.restart;
        let now = Instant::now();
        let recent = state.recent_restarts.entry(kind).or_default();
        while recent
            .front()
            .is_some_and(|t| now.duration_since(*t) > policy.window)
        {
            recent.pop_front();
        }
        recent.push_back(now);
        let count = recent.len();
        let directory = &state.args.directory;
        if count > policy.max_restarts {
            tracing::error!(child = kind.as_str(), %error, "restart budget exhausted; child left down");
            directory.set_health(kind, |h| {
                h.state = ChildState::Failed;
                h.last_error = Some(error);
            });
            return;
        }
        let delay = policy.backoff(count);
        tracing::warn!(child = kind.as_str(), %error, delay_ms = delay.as_millis() as u64, "child failed; restarting");
        directory.set_health(kind, |h| {
            h.state = ChildState::Restarting;
            h.last_error = Some(error);
        });
        myself.send_after(delay, move || SupervisorMsg::Restart(kind));
    }
}

impl Actor for Supervisor {
    type Msg = SupervisorMsg;
    type State = SupervisorState;
    type Arguments = SupervisorArgs;

    async fn pre_start(
        &self,
        myself: SupervisorRef,
        args: SupervisorArgs,
    ) -> Result<SupervisorState, ActorProcessingErr> {
        let mut state = SupervisorState {
            args,
            kinds: HashMap::new(),
            recent_restarts: HashMap::new(),
            shutting_down: false,
        };
        for kind in ChildKind::ALL {
            self.start_child(&myself, kind, &mut state).await?;
        }
        Ok(state)
    }

    async fn handle(
        &self,
        myself: SupervisorRef,
        message: SupervisorMsg,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            SupervisorMsg::Restart(kind) => {
                if state.shutting_down {
                    return Ok(());
                }
                if let Err(error) = self.start_child(&myself, kind, state).await {
                    self.schedule_restart(&myself, kind, format!("restart failed: {error}"), state);
                } else {
                    state.args.directory.set_health(kind, |h| h.restarts += 1);
                    tracing::info!(child = kind.as_str(), "child restarted");
                }
            }
            SupervisorMsg::InjectFault(kind) => {
                let children = state.args.directory.children();
                let sent = match kind {
                    ChildKind::Working => children
                        .working
                        .map(|r| r.cast(WorkingMsg::InjectFault).is_ok()),
                    ChildKind::Episodic => children
                        .episodic
                        .map(|r| r.cast(EpisodicMsg::InjectFault).is_ok()),
                    ChildKind::Vectors => children
                        .vectors
                        .map(|r| r.cast(VectorsMsg::InjectFault).is_ok()),
                    ChildKind::Graph => children
                        .graph
                        .map(|r| r.cast(GraphMsg::InjectFault).is_ok()),
                    ChildKind::Namespaces => children
                        .namespaces
                        .map(|r| r.cast(NamespacesMsg::InjectFault).is_ok()),
                    ChildKind::Consolidator => children
                        .consolidator
                        .map(|r| r.cast(ConsolidatorMsg::InjectFault).is_ok()),
                    ChildKind::Projector => children
                        .projector
                        .map(|r| r.cast(ProjectorMsg::InjectFault).is_ok()),
                    ChildKind::Cognition => children
                        .cognition
                        .map(|r| r.cast(CognitionMsg::InjectFault).is_ok()),
                };
                if sent != Some(true) {
                    tracing::warn!(
                        child = kind.as_str(),
                        "fault not injected: child is not running"
                    );
                }
            }
            SupervisorMsg::Shutdown { reply } => {
                state.shutting_down = true;
                for kind in ChildKind::ALL.into_iter().rev() {
                    let cell: Option<ActorCell> = {
                        let children = state.args.directory.children();
                        match kind {
                            ChildKind::Working => children.working.map(|r| r.get_cell()),
                            ChildKind::Episodic => children.episodic.map(|r| r.get_cell()),
                            ChildKind::Vectors => children.vectors.map(|r| r.get_cell()),
                            ChildKind::Graph => children.graph.map(|r| r.get_cell()),
                            ChildKind::Namespaces => children.namespaces.map(|r| r.get_cell()),
                            ChildKind::Consolidator => children.consolidator.map(|r| r.get_cell()),
                            ChildKind::Projector => children.projector.map(|r| r.get_cell()),
                            ChildKind::Cognition => children.cognition.map(|r| r.get_cell()),
                        }
                    };
                    if let Some(cell) = cell {
                        let _ = cell
                            .stop_and_wait(Some("shutdown".into()), Some(Duration::from_secs(10)))
                            .await;
                    }
                    state.args.directory.set_child(kind, None);
                }
                let _ = reply.send(());
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: SupervisorRef,
        event: SupervisionEvent,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        let (cell, error) = match event {
            SupervisionEvent::ActorFailed(cell, error) => (cell, error.to_string()),
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                (cell, format!("stopped: {}", reason.unwrap_or_default()))
            }
            _ => return Ok(()),
        };
        let Some(kind) = state.kinds.remove(&cell.get_id()) else {
            return Ok(());
        };
        state.args.directory.set_child(kind, None);
        if state.shutting_down {
            return Ok(());
        }
        self.schedule_restart(&myself, kind, error, state);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps() {
        let policy = RestartPolicy {
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(1),
            max_restarts: 5,
            window: Duration::from_secs(60),
        };
        assert_eq!(policy.backoff(1), Duration::from_millis(100));
        assert_eq!(policy.backoff(2), Duration::from_millis(200));
        assert_eq!(policy.backoff(4), Duration::from_millis(800));
        assert_eq!(policy.backoff(5), Duration::from_secs(1));
        assert_eq!(policy.backoff(50), Duration::from_secs(1));
    }
}

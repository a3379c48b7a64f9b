//! The root supervisor: spawns every actor linked to itself, keeps the shared
//! [`Directory`] of current actor cells (keyed by [`ChildKind`]) and their health, and
//! restarts a failed child with exponential backoff inside a restart budget.
//!
//! ractor restarts nothing by itself: on `ActorFailed` we get an event and decide. A
//! child is restarted from its [`ChildSpec`] with the same arguments it first had;
//! those hold the stores (or the handles of the actors that own them), so a restart
//! loses only the messages in the child's mailbox at the moment it died, and callers
//! retry those (every write is idempotent by id).
//!
//! A restart runs in a task beside the supervisor, which learns the outcome from a
//! `Started` message: a child's `pre_start` may call another child (the vector actor reads
//! the system of record), and if both failed together only a free supervisor can bring
//! the other one back.
//!
//! The supervisor knows nothing about the children's message types: the list of
//! children is the list of specs [`crate::runtime::Runtime::start`] hands it, in start
//! order, so adding an actor is one spec there plus its [`ChildKind`] name here.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use ractor::{
    Actor, ActorCell, ActorId, ActorProcessingErr, ActorRef, Message, RpcReplyPort,
    SupervisionEvent,
};
use serde::Serialize;

/// Handle to the supervisor.
pub type SupervisorRef = ActorRef<SupervisorMsg>;

/// The supervised children.
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
    /// Projects (with their sessions) and KV namespaces.
    Namespaces,
    /// Consolidation and archival.
    Consolidator,
    /// Outbox → external projections.
    Projector,
    /// Cron-driven background cognition.
    Cognition,
}

impl ChildKind {
    /// Every child, in the order health reports them.
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

/// The test hook every child's message type converts from: fail the actor as if its
/// state were broken (its `handle` returns an error and the supervisor restarts it).
#[derive(Debug, Clone, Copy)]
pub struct InjectedFault;

/// A live child: its cell, and how to make it fail (typed by its message). Opaque outside
/// this module; it travels in [`SupervisorMsg::Started`].
#[derive(Clone)]
pub struct LiveChild {
    /// The running actor.
    cell: ActorCell,
    /// Sends the child its [`InjectedFault`] message; false when it is gone.
    inject_fault: Arc<dyn Fn() -> bool + Send + Sync>,
}

/// Shared between the supervisor (writer) and the handles (readers).
#[derive(Default)]
pub struct Directory {
    /// Current child cells (absent while restarting).
    children: RwLock<HashMap<ChildKind, LiveChild>>,
    /// Health per child.
    health: RwLock<HashMap<ChildKind, ChildHealth>>,
}

impl Directory {
    /// The current ref of child `kind`, typed by its message (None while it restarts).
    pub fn actor<M: Message>(&self, kind: ChildKind) -> Option<ActorRef<M>> {
        self.children
            .read()
            .expect("directory lock poisoned")
            .get(&kind)
            .map(|child| ActorRef::from(child.cell.clone()))
    }
    /// Health of every child, in [`ChildKind::ALL`] order.
    pub fn health(&self) -> Vec<ChildHealth> {
        let health = self.health.read().expect("directory lock poisoned");
        ChildKind::ALL
            .iter()
            .filter_map(|k| health.get(k).cloned())
            .collect()
    }
    fn live(&self, kind: ChildKind) -> Option<LiveChild> {
        self.children
            .read()
            .expect("directory lock poisoned")
            .get(&kind)
            .cloned()
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
    fn set_child(&self, kind: ChildKind, child: Option<LiveChild>) {
        let mut children = self.children.write().expect("directory lock poisoned");
        match child {
            Some(child) => children.insert(kind, child),
            None => children.remove(&kind),
        };
    }
}

/// A boxed future of a child's spawn.
type SpawnFuture = Pin<Box<dyn Future<Output = Result<LiveChild, ActorProcessingErr>> + Send>>;

/// How to start one child, again and again with the same arguments.
#[derive(Clone)]
pub struct ChildSpec {
    /// Which child.
    kind: ChildKind,
    /// Spawns it linked to the given supervisor cell.
    spawn: Arc<dyn Fn(ActorCell) -> SpawnFuture + Send + Sync>,
}

impl ChildSpec {
    /// Child `kind` is `actor` started with (a clone of) `args`.
    pub fn new<A>(kind: ChildKind, actor: A, args: A::Arguments) -> Self
    where
        A: Actor + Clone + Sync,
        A::Arguments: Clone + Sync,
        A::Msg: From<InjectedFault>,
    {
        Self {
            kind,
            spawn: Arc::new(move |supervisor| {
                let (actor, args) = (actor.clone(), args.clone());
                Box::pin(async move {
                    let (actor_ref, _) = Actor::spawn_linked(None, actor, args, supervisor).await?;
                    let target = actor_ref.clone();
                    Ok(LiveChild {
                        cell: actor_ref.get_cell(),
                        inject_fault: Arc::new(move || {
                            target.cast(A::Msg::from(InjectedFault)).is_ok()
                        }),
                    })
                })
            }),
        }
    }
    /// Which child this spec starts.
    pub fn kind(&self) -> ChildKind {
        self.kind
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

/// Everything the supervisor needs, kept to restart children identically.
#[derive(Clone)]
pub struct SupervisorArgs {
    /// The children, in start order.
    pub children: Vec<ChildSpec>,
    /// Backoff and budget.
    pub restart: RestartPolicy,
    /// Where current refs and health are published.
    pub directory: Arc<Directory>,
}

/// Messages of the supervisor.
pub enum SupervisorMsg {
    /// Restart a child now (sent to itself after the backoff).
    Restart(ChildKind),
    /// A restart's spawn finished (it runs beside the supervisor, which stays free to
    /// restart the children a starting child waits for).
    Started {
        /// Which child was started.
        kind: ChildKind,
        /// The running child, or why it did not start.
        child: Result<LiveChild, String>,
    },
    /// Make a child fail (test hook for supervision).
    InjectFault(ChildKind),
    /// Stop every child in reverse start order, then answer.
    Shutdown { reply: RpcReplyPort<()> },
}

/// The supervisor's state.
pub struct SupervisorState {
    /// Children's specs, reused on restart.
    args: SupervisorArgs,
    /// Which child each live actor id is.
    kinds: HashMap<ActorId, ChildKind>,
    /// Recent restart times per child, for the budget and the backoff.
    recent_restarts: HashMap<ChildKind, VecDeque<Instant>>,
    /// Set once shutdown begins, so stopping children are not restarted.
    shutting_down: bool,
    /// Exits of children whose `Started` had not been handled yet (supervision events
    /// overtake ordinary messages), so the restart is not lost.
    early_exits: HashMap<ActorId, String>,
}

/// The root supervisor.
pub struct Supervisor;

impl Supervisor {
    async fn start_child(
        &self,
        myself: &SupervisorRef,
        kind: ChildKind,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        let spec = state
            .args
            .children
            .iter()
            .find(|spec| spec.kind == kind)
            .cloned()
            .ok_or_else(|| format!("no spec for child {}", kind.as_str()))?;
        let child = (spec.spawn)(myself.get_cell()).await?;
        self.adopt(kind, child, state);
        Ok(())
    }

    /// Publish a started child and watch for its exit.
    fn adopt(&self, kind: ChildKind, child: LiveChild, state: &mut SupervisorState) {
        state.kinds.insert(child.cell.get_id(), kind);
        state.args.directory.set_child(kind, Some(child));
        state
            .args
            .directory
            .set_health(kind, |h| h.state = ChildState::Running);
    }

    /// Start a child again without waiting for it here: a child's `pre_start` may call
    /// another child (the vector actor reads the system of record), and if that one is
    /// down too, only a free supervisor can bring it back.
    fn restart_in_background(
        &self,
        myself: &SupervisorRef,
        kind: ChildKind,
        state: &SupervisorState,
    ) {
        let Some(spec) = state
            .args
            .children
            .iter()
            .find(|spec| spec.kind == kind)
            .cloned()
        else {
            tracing::error!(child = kind.as_str(), "no spec for child; left down");
            return;
        };
        let supervisor = myself.clone();
        tokio::spawn(async move {
            let child = (spec.spawn)(supervisor.get_cell())
                .await
                .map_err(|error| error.to_string());
            // The supervisor is gone: nobody will watch this child, so stop it.
            if let Err(ractor::MessagingErr::SendErr(SupervisorMsg::Started {
                child: Ok(orphan),
                ..
            })) = supervisor.cast(SupervisorMsg::Started { kind, child })
            {
                orphan.cell.stop(Some("supervisor gone".into()));
            }
        });
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

    async fn shutdown(&self, state: &mut SupervisorState) {
        state.shutting_down = true;
        let order: Vec<ChildKind> = state.args.children.iter().map(ChildSpec::kind).collect();
        for kind in order.into_iter().rev() {
            if let Some(child) = state.args.directory.live(kind) {
                let _ = child
                    .cell
                    .stop_and_wait(Some("shutdown".into()), Some(Duration::from_secs(10)))
                    .await;
            }
            state.args.directory.set_child(kind, None);
        }
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
        let order: Vec<ChildKind> = args.children.iter().map(ChildSpec::kind).collect();
        let mut state = SupervisorState {
            args,
            kinds: HashMap::new(),
            recent_restarts: HashMap::new(),
            shutting_down: false,
            early_exits: HashMap::new(),
        };
        for kind in order {
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
                if !state.shutting_down {
                    self.restart_in_background(&myself, kind, state);
                }
            }
            SupervisorMsg::Started { kind, child } => match child {
                Ok(child) if state.shutting_down => {
                    child.cell.stop(Some("shutdown".into()));
                }
                Ok(child) => {
                    if let Some(error) = state.early_exits.remove(&child.cell.get_id()) {
                        state.args.directory.set_health(kind, |h| h.restarts += 1);
                        self.schedule_restart(&myself, kind, error, state);
                    } else {
                        self.adopt(kind, child, state);
                        state.args.directory.set_health(kind, |h| h.restarts += 1);
                        tracing::info!(child = kind.as_str(), "child restarted");
                    }
                }
                Err(_) if state.shutting_down => {}
                Err(error) => {
                    self.schedule_restart(&myself, kind, format!("restart failed: {error}"), state);
                }
            },
            SupervisorMsg::InjectFault(kind) => {
                let sent = state
                    .args
                    .directory
                    .live(kind)
                    .is_some_and(|child| (child.inject_fault)());
                if !sent {
                    tracing::warn!(
                        child = kind.as_str(),
                        "fault not injected: child is not running"
                    );
                }
            }
            SupervisorMsg::Shutdown { reply } => {
                self.shutdown(state).await;
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
            // A restarted child that exited before its `Started` arrived.
            state.early_exits.insert(cell.get_id(), error);
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
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A child that fails when told to, and fails in `post_start` on the start numbered
    /// `fail_on` (after its spawn has returned, the way a child dies at once).
    #[derive(Clone)]
    struct Blinker;

    /// [`Blinker`]'s only message: the injected fault.
    struct Fault;

    impl From<InjectedFault> for Fault {
        fn from(_: InjectedFault) -> Self {
            Fault
        }
    }

    /// Shared with the test: how many times the child started, and which start fails.
    #[derive(Clone)]
    struct BlinkerArgs {
        starts: Arc<AtomicUsize>,
        fail_on: usize,
    }

    impl Actor for Blinker {
        type Msg = Fault;
        type State = BlinkerArgs;
        type Arguments = BlinkerArgs;

        async fn pre_start(
            &self,
            _myself: ActorRef<Fault>,
            args: BlinkerArgs,
        ) -> Result<BlinkerArgs, ActorProcessingErr> {
            Ok(args)
        }

        async fn post_start(
            &self,
            _myself: ActorRef<Fault>,
            state: &mut BlinkerArgs,
        ) -> Result<(), ActorProcessingErr> {
            let start = state.starts.fetch_add(1, Ordering::SeqCst) + 1;
            if start == state.fail_on {
                return Err("failed right after starting".into());
            }
            Ok(())
        }

        async fn handle(
            &self,
            _myself: ActorRef<Fault>,
            _message: Fault,
            _state: &mut BlinkerArgs,
        ) -> Result<(), ActorProcessingErr> {
            Err("injected fault".into())
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_restarted_child_that_exits_before_its_start_is_handled_is_restarted_again() {
        let starts = Arc::new(AtomicUsize::new(0));
        let args = BlinkerArgs {
            starts: starts.clone(),
            fail_on: 2,
        };
        let plain = ChildSpec::new(ChildKind::Working, Blinker, args);
        // The first restart's spawn hands its child over only once that child has died,
        // so its exit reaches the supervisor before `Started` does (supervision events
        // are handled before ordinary messages): the race, staged every time.
        let spawns = Arc::new(AtomicUsize::new(0));
        let spec = ChildSpec {
            kind: ChildKind::Working,
            spawn: Arc::new(move |supervisor| {
                let (plain, spawns) = (plain.clone(), spawns.clone());
                Box::pin(async move {
                    let child = (plain.spawn)(supervisor).await?;
                    if spawns.fetch_add(1, Ordering::SeqCst) + 1 == 2 {
                        let deadline = Instant::now() + Duration::from_secs(5);
                        while child.cell.get_status() != ractor::ActorStatus::Stopped {
                            assert!(Instant::now() < deadline, "the child did not die");
                            tokio::time::sleep(Duration::from_millis(1)).await;
                        }
                    }
                    Ok(child)
                })
            }),
        };
        let directory = Arc::new(Directory::default());
        let restart = RestartPolicy {
            initial_backoff: Duration::from_millis(10),
            ..RestartPolicy::default()
        };
        let (supervisor, _) = Actor::spawn(
            None,
            Supervisor,
            SupervisorArgs {
                children: vec![spec],
                restart,
                directory: directory.clone(),
            },
        )
        .await
        .expect("supervisor starts");
        supervisor
            .cast(SupervisorMsg::InjectFault(ChildKind::Working))
            .expect("supervisor is up");
        // Restarted once into a child that died at once, then again into a live one.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let health = directory.health();
            let live = directory
                .actor::<Fault>(ChildKind::Working)
                .is_some_and(|child| child.get_status() == ractor::ActorStatus::Running);
            if live && health[0].restarts == 2 && health[0].state == ChildState::Running {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the child was not restarted after dying before its start was handled: \
                 {health:?}, live: {live}, starts: {}",
                starts.load(Ordering::SeqCst)
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(starts.load(Ordering::SeqCst), 3);
        ractor::call!(supervisor, |reply| SupervisorMsg::Shutdown { reply })
            .expect("supervisor shuts down");
        supervisor.stop(None);
    }

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

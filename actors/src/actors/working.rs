//! The working-memory actor: owns each session's short rolling window ([`WorkingStore`])
//! and sweeps expired sessions.

use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef};

use super::{injected_fault, Caller, Reply};
use crate::clock::Clock;
use crate::error::MemoryResult;
use crate::model::{AgentId, SessionId};
use crate::store::{WorkingItem, WorkingStore};
use crate::supervisor::InjectedFault;

/// Ref of the working-memory actor.
pub type WorkingRef = ActorRef<WorkingMsg>;

/// Messages of the working-memory actor.
pub enum WorkingMsg {
    /// Append items to several session windows of one agent, in order.
    PushMany {
        agent: AgentId,
        items: Vec<(SessionId, WorkingItem)>,
        reply: Reply<()>,
    },
    /// Read a session window.
    Window {
        agent: AgentId,
        session: SessionId,
        reply: Reply<Vec<WorkingItem>>,
    },
    /// Clear a session window.
    Clear {
        agent: AgentId,
        session: SessionId,
        reply: Reply<usize>,
    },
    /// Drop expired sessions (sent by a timer).
    Sweep,
    /// Drop expired sessions now and answer how many (archival).
    SweepNow { reply: Reply<usize> },
    /// Why the store serves from its fallback, if it does (health).
    Degraded { reply: Reply<Option<String>> },
    /// Test hook: fail the actor as if its state were broken.
    InjectFault,
}

impl From<InjectedFault> for WorkingMsg {
    fn from(_: InjectedFault) -> Self {
        WorkingMsg::InjectFault
    }
}

/// The typed handle of the working-memory actor (retries while it restarts).
#[derive(Clone)]
pub struct WorkingHandle(pub(crate) Caller<WorkingMsg>);

impl WorkingHandle {
    /// Append items to several session windows of `agent`, in order.
    pub async fn push_many(
        &self,
        agent: &AgentId,
        items: &[(SessionId, WorkingItem)],
    ) -> MemoryResult<()> {
        self.0
            .ask(|reply| WorkingMsg::PushMany {
                agent: agent.clone(),
                items: items.to_vec(),
                reply,
            })
            .await
    }
    /// A session's window.
    pub async fn window(
        &self,
        agent: &AgentId,
        session: &SessionId,
    ) -> MemoryResult<Vec<WorkingItem>> {
        self.0
            .ask(|reply| WorkingMsg::Window {
                agent: agent.clone(),
                session: session.clone(),
                reply,
            })
            .await
    }
    /// Clear a session's window; answers how many items it held.
    pub async fn clear(&self, agent: &AgentId, session: &SessionId) -> MemoryResult<usize> {
        self.0
            .ask(|reply| WorkingMsg::Clear {
                agent: agent.clone(),
                session: session.clone(),
                reply,
            })
            .await
    }
    /// Drop expired windows now; answers how many.
    pub async fn sweep(&self) -> MemoryResult<usize> {
        self.0.ask(|reply| WorkingMsg::SweepNow { reply }).await
    }
    /// Why working memory serves from its fallback (None: it does not, or the actor is down).
    pub async fn degraded(&self) -> Option<String> {
        self.0
            .try_ask(std::time::Duration::from_secs(2), |reply| {
                WorkingMsg::Degraded { reply }
            })
            .await
            .flatten()
    }
}

/// Start-up arguments (kept by the supervisor and reused on restart).
#[derive(Clone)]
pub struct WorkingArgs {
    /// The window store (survives restarts).
    pub store: Arc<dyn WorkingStore>,
    /// Time source for TTLs.
    pub clock: Arc<dyn Clock>,
    /// How often expired sessions are swept.
    pub sweep_interval: Duration,
}

/// The actor's state.
pub struct WorkingState {
    /// The window store.
    store: Arc<dyn WorkingStore>,
    /// Time source for TTLs.
    clock: Arc<dyn Clock>,
    /// Timer sending `Sweep`; aborted when the actor stops.
    sweep_timer: Option<tokio::task::JoinHandle<()>>,
}

/// The working-memory actor.
#[derive(Clone)]
pub struct WorkingActor;

impl Actor for WorkingActor {
    type Msg = WorkingMsg;
    type State = WorkingState;
    type Arguments = WorkingArgs;

    async fn pre_start(
        &self,
        myself: WorkingRef,
        args: WorkingArgs,
    ) -> Result<WorkingState, ActorProcessingErr> {
        let timer = myself.send_interval(args.sweep_interval, || WorkingMsg::Sweep);
        Ok(WorkingState {
            store: args.store,
            clock: args.clock,
            sweep_timer: Some(timer),
        })
    }

    async fn post_stop(
        &self,
        _myself: WorkingRef,
        state: &mut WorkingState,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(timer) = state.sweep_timer.take() {
            timer.abort();
        }
        Ok(())
    }

    #[tracing::instrument(name = "working", skip_all)]
    async fn handle(
        &self,
        _myself: WorkingRef,
        message: WorkingMsg,
        state: &mut WorkingState,
    ) -> Result<(), ActorProcessingErr> {
        let now = state.clock.now();
        match message {
            WorkingMsg::PushMany {
                agent,
                items,
                reply,
            } => {
                let _ = reply.send(state.store.push_many(&agent, items, now).await);
            }
            WorkingMsg::Window {
                agent,
                session,
                reply,
            } => {
                let _ = reply.send(state.store.window(&agent, &session, now).await);
            }
            WorkingMsg::Clear {
                agent,
                session,
                reply,
            } => {
                let _ = reply.send(state.store.clear(&agent, &session).await);
            }
            WorkingMsg::Sweep => match state.store.sweep(now).await {
                Ok(0) => {}
                Ok(dropped) => tracing::debug!(dropped, "expired working-memory sessions dropped"),
                Err(error) => tracing::warn!(%error, "working-memory sweep failed"),
            },
            WorkingMsg::SweepNow { reply } => {
                let _ = reply.send(state.store.sweep(now).await);
            }
            WorkingMsg::Degraded { reply } => {
                let _ = reply.send(Ok(state.store.degraded()));
            }
            WorkingMsg::InjectFault => return Err(injected_fault("working")),
        }
        Ok(())
    }
}

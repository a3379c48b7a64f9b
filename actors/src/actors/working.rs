//! The working-memory actor: owns each session's short rolling window ([`WorkingStore`])
//! and sweeps expired sessions.

use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

use super::injected_fault;
use crate::clock::Clock;
use crate::error::MemoryResult;
use crate::model::{AgentId, SessionId};
use crate::store::{WorkingItem, WorkingStore};

/// Handle to the working-memory actor.
pub type WorkingRef = ActorRef<WorkingMsg>;
type Reply<T> = RpcReplyPort<MemoryResult<T>>;

/// Messages of the working-memory actor.
pub enum WorkingMsg {
    /// Append an item to a session window.
    Push {
        agent: AgentId,
        session: SessionId,
        item: WorkingItem,
        reply: Reply<()>,
    },
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
    /// Test hook: fail the actor as if its state were broken.
    InjectFault,
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
            WorkingMsg::Push {
                agent,
                session,
                item,
                reply,
            } => {
                let _ = reply.send(state.store.push(&agent, &session, item, now).await);
            }
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
            WorkingMsg::InjectFault => return Err(injected_fault("working")),
        }
        Ok(())
    }
}

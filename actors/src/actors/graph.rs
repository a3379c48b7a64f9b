//! The association-graph actor: owns the [`GraphStore`] of typed, weighted edges.

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

use super::{answer_in_task, injected_fault};
use crate::error::MemoryResult;
use crate::model::{AgentId, Association, MemoryId};
use crate::store::GraphStore;

/// Handle to the graph actor.
pub type GraphRef = ActorRef<GraphMsg>;
type Reply<T> = RpcReplyPort<MemoryResult<T>>;

/// Messages of the graph actor.
pub enum GraphMsg {
    /// Create or re-weight an edge.
    Upsert {
        edge: Association,
        reply: Reply<Association>,
    },
    /// Edges within `depth` hops of `seeds`.
    Around {
        agent: AgentId,
        seeds: Vec<MemoryId>,
        depth: u32,
        max_edges: usize,
        reply: Reply<Vec<Association>>,
    },
    /// Drop every edge of a memory.
    RemoveMemory { id: MemoryId, reply: Reply<()> },
    /// Test hook: fail the actor as if its state were broken.
    InjectFault,
}

/// Start-up arguments (kept by the supervisor and reused on restart).
#[derive(Clone)]
pub struct GraphArgs {
    /// The edge store.
    pub store: Arc<dyn GraphStore>,
}

/// The actor's state.
pub struct GraphState {
    /// The edge store.
    store: Arc<dyn GraphStore>,
}

/// The graph actor.
pub struct GraphActor;

impl Actor for GraphActor {
    type Msg = GraphMsg;
    type State = GraphState;
    type Arguments = GraphArgs;

    async fn pre_start(
        &self,
        _myself: GraphRef,
        args: GraphArgs,
    ) -> Result<GraphState, ActorProcessingErr> {
        Ok(GraphState { store: args.store })
    }

    #[tracing::instrument(name = "graph", skip_all)]
    async fn handle(
        &self,
        _myself: GraphRef,
        message: GraphMsg,
        state: &mut GraphState,
    ) -> Result<(), ActorProcessingErr> {
        let store = state.store.clone();
        match message {
            GraphMsg::Upsert { edge, reply } => {
                let _ = reply.send(store.upsert_edge(&edge).await);
            }
            GraphMsg::RemoveMemory { id, reply } => {
                let _ = reply.send(store.remove_memory(&id).await);
            }
            GraphMsg::Around {
                agent,
                seeds,
                depth,
                max_edges,
                reply,
            } => answer_in_task(reply, async move {
                store.edges_around(&agent, &seeds, depth, max_edges).await
            }),
            GraphMsg::InjectFault => return Err(injected_fault("graph")),
        }
        Ok(())
    }
}

//! The association-graph actor: owns the [`GraphStore`] of typed, weighted edges.

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef};

use super::{answer_in_task, injected_fault, Caller, Reply};
use crate::error::MemoryResult;
use crate::model::{AgentId, Association, MemoryId};
use crate::store::GraphStore;
use crate::supervisor::InjectedFault;

/// Ref of the graph actor.
pub type GraphRef = ActorRef<GraphMsg>;

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
    /// Every edge of an agent (projection rebuilds).
    AgentEdges {
        agent: AgentId,
        reply: Reply<Vec<Association>>,
    },
    /// Test hook: fail the actor as if its state were broken.
    InjectFault,
}

impl From<InjectedFault> for GraphMsg {
    fn from(_: InjectedFault) -> Self {
        GraphMsg::InjectFault
    }
}

/// The typed handle of the graph actor (retries while it restarts).
#[derive(Clone)]
pub struct GraphHandle(pub(crate) Caller<GraphMsg>);

impl GraphHandle {
    /// Create or re-weight an edge.
    pub async fn upsert(&self, edge: &Association) -> MemoryResult<Association> {
        self.0
            .ask(|reply| GraphMsg::Upsert {
                edge: edge.clone(),
                reply,
            })
            .await
    }
    /// Edges within `depth` hops of `seeds`, at most `max_edges`.
    pub async fn around(
        &self,
        agent: &AgentId,
        seeds: &[MemoryId],
        depth: u32,
        max_edges: usize,
    ) -> MemoryResult<Vec<Association>> {
        self.0
            .ask(|reply| GraphMsg::Around {
                agent: agent.clone(),
                seeds: seeds.to_vec(),
                depth,
                max_edges,
                reply,
            })
            .await
    }
    /// Drop every edge of a memory.
    pub async fn remove_memory(&self, id: &MemoryId) -> MemoryResult<()> {
        self.0
            .ask(|reply| GraphMsg::RemoveMemory {
                id: id.clone(),
                reply,
            })
            .await
    }
    /// Every edge of an agent.
    pub async fn agent_edges(&self, agent: &AgentId) -> MemoryResult<Vec<Association>> {
        self.0
            .ask(|reply| GraphMsg::AgentEdges {
                agent: agent.clone(),
                reply,
            })
            .await
    }
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
#[derive(Clone)]
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
            GraphMsg::AgentEdges { agent, reply } => {
                answer_in_task(reply, async move { store.agent_edges(&agent).await })
            }
            GraphMsg::InjectFault => return Err(injected_fault("graph")),
        }
        Ok(())
    }
}

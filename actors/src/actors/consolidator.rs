//! The consolidator/archiver actor: carries out consolidation plans and archival.
//!
//! Today a consolidation pass computes the agent's statistics and archives the
//! memories that [`crate::policy::consolidation::plan`] says have faded (never
//! deleting them); archival drops expired working-memory sessions. Both record a
//! run in the run log. Clustering and abstraction arrive with the sleep-cycle work.

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

use super::injected_fault;
use crate::clock::Clock;
use crate::error::{ErrorCode, MemoryResult};
use crate::model::{apply_patch, version_of, AgentId, ConsolidationRun, MemoryPatch, MemoryStatus};
use crate::policy::consolidation::{plan, ForgetPolicy};
use crate::policy::retention::RetentionPolicy;
use crate::policy::stats::agent_stats;
use crate::store::{MemoryStore, VectorIndex, WorkingStore};

/// Handle to the consolidator actor.
pub type ConsolidatorRef = ActorRef<ConsolidatorMsg>;
type Reply<T> = RpcReplyPort<MemoryResult<T>>;

/// Messages of the consolidator actor.
pub enum ConsolidatorMsg {
    /// Consolidate one agent.
    Consolidate {
        agent: AgentId,
        trigger: String,
        reply: Reply<ConsolidationRun>,
    },
    /// Consolidate every agent.
    ConsolidateAll {
        trigger: String,
        reply: Option<Reply<Vec<ConsolidationRun>>>,
    },
    /// Archive idle sessions.
    Archive {
        trigger: String,
        reply: Option<Reply<ConsolidationRun>>,
    },
    /// Test hook: fail the actor as if its state were broken.
    InjectFault,
}

/// Start-up arguments (kept by the supervisor and reused on restart).
#[derive(Clone)]
pub struct ConsolidatorArgs {
    /// The system of record.
    pub store: Arc<dyn MemoryStore>,
    /// The vector index, so forgotten memories leave recall at once.
    pub index: Arc<dyn VectorIndex>,
    /// Working-memory windows to archive.
    pub working: Arc<dyn WorkingStore>,
    /// Time source.
    pub clock: Arc<dyn Clock>,
    /// Retention curve.
    pub retention: RetentionPolicy,
    /// Forgetting thresholds.
    pub forget: ForgetPolicy,
}

/// The actor's state: its arguments (it keeps no other state between runs).
pub struct ConsolidatorState {
    /// Stores, clock and policies.
    args: ConsolidatorArgs,
}

/// The consolidator actor.
pub struct ConsolidatorActor;

/// One consolidation step for one agent: plan and apply. Tests and the CLI call it directly.
pub async fn consolidate_agent(
    args: &ConsolidatorArgs,
    agent: &AgentId,
    trigger: &str,
) -> MemoryResult<ConsolidationRun> {
    let started_at = args.clock.now();
    let memories = args.store.agent_memories(agent).await?;
    let stats = agent_stats(&memories, &args.retention, started_at);
    let planned = plan(&memories, &args.retention, &args.forget, started_at);
    let mut forgotten = 0u32;
    for id in &planned.forget {
        let Some(memory) = memories.iter().find(|m| m.id == *id) else {
            continue;
        };
        let now = args.clock.now();
        let patch = MemoryPatch {
            status: Some(MemoryStatus::Archived),
            ..Default::default()
        };
        let next = apply_patch(memory, &patch, now);
        match args
            .store
            .update(&next, &version_of(memory, "forget_decay", now), None)
            .await
        {
            Ok(()) => {
                args.index.remove(std::slice::from_ref(id));
                forgotten += 1;
            }
            // Changed since we read it (recalled, patched): leave it for the next run.
            Err(error)
                if error.code == ErrorCode::Conflict || error.code == ErrorCode::NotFound => {}
            Err(error) => return Err(error),
        }
    }
    let run = ConsolidationRun {
        id: uuid::Uuid::now_v7().to_string(),
        agent_id: Some(agent.clone()),
        trigger: trigger.to_string(),
        started_at,
        finished_at: args.clock.now(),
        processed: planned.candidates as u32,
        consolidated: 0,
        forgotten,
        new_semantic: 0,
        new_procedural: 0,
        report: serde_json::json!({ "stats": stats, "forgotten_ids": planned.forget }),
    };
    args.store.record_run(&run).await?;
    tracing::info!(agent = %agent, processed = run.processed, forgotten, trigger, "consolidation run finished");
    Ok(run)
}

/// One archival step: drop expired working-memory sessions and log the run.
pub async fn archive_once(
    args: &ConsolidatorArgs,
    trigger: &str,
) -> MemoryResult<ConsolidationRun> {
    let started_at = args.clock.now();
    let dropped = args.working.sweep(started_at).await?;
    let run = ConsolidationRun {
        id: uuid::Uuid::now_v7().to_string(),
        agent_id: None,
        trigger: trigger.to_string(),
        started_at,
        finished_at: args.clock.now(),
        processed: dropped as u32,
        consolidated: 0,
        forgotten: 0,
        new_semantic: 0,
        new_procedural: 0,
        report: serde_json::json!({ "expired_sessions_cleared": dropped }),
    };
    args.store.record_run(&run).await?;
    Ok(run)
}

impl Actor for ConsolidatorActor {
    type Msg = ConsolidatorMsg;
    type State = ConsolidatorState;
    type Arguments = ConsolidatorArgs;

    async fn pre_start(
        &self,
        _myself: ConsolidatorRef,
        args: ConsolidatorArgs,
    ) -> Result<ConsolidatorState, ActorProcessingErr> {
        Ok(ConsolidatorState { args })
    }

    #[tracing::instrument(name = "consolidator", skip_all)]
    async fn handle(
        &self,
        _myself: ConsolidatorRef,
        message: ConsolidatorMsg,
        state: &mut ConsolidatorState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            ConsolidatorMsg::Consolidate {
                agent,
                trigger,
                reply,
            } => {
                let _ = reply.send(consolidate_agent(&state.args, &agent, &trigger).await);
            }
            ConsolidatorMsg::ConsolidateAll { trigger, reply } => {
                let result = async {
                    let mut runs = Vec::new();
                    for agent in state.args.store.agents().await? {
                        runs.push(consolidate_agent(&state.args, &agent, &trigger).await?);
                    }
                    Ok(runs)
                }
                .await;
                match reply {
                    Some(reply) => {
                        let _ = reply.send(result);
                    }
                    None => {
                        if let Err(error) = result {
                            tracing::warn!(%error, "scheduled consolidation failed");
                        }
                    }
                }
            }
            ConsolidatorMsg::Archive { trigger, reply } => {
                let result = archive_once(&state.args, &trigger).await;
                match reply {
                    Some(reply) => {
                        let _ = reply.send(result);
                    }
                    None => {
                        if let Err(error) = result {
                            tracing::warn!(%error, "scheduled archival failed");
                        }
                    }
                }
            }
            ConsolidatorMsg::InjectFault => return Err(injected_fault("consolidator")),
        }
        Ok(())
    }
}

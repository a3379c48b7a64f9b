//! The episodic storage actor: the one owner of the system of record ([`MemoryStore`]):
//! every durable memory, its versions, the keyword index, sessions' message logs, the
//! consolidation run log, scheduling leases and the outbox. It batches reinforcement.
//!
//! Writes ([`WriteOp`]) are carried out in mailbox order; reads ([`ReadOp`]) are
//! answered from their own tasks so a slow read never holds up the mailbox.
//! Everybody else uses [`EpisodicHandle`].

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use ractor::{Actor, ActorProcessingErr, ActorRef};

use super::{answer_in_task, injected_fault, Caller, Reply};
use crate::clock::Clock;
use crate::error::MemoryResult;
use crate::kv::{KvEntry, NamespaceName};
use crate::model::{
    AgentId, ConsolidationRun, Memory, MemoryId, MemoryVersion, MessageRole, SessionId,
    SessionMessage, SessionRecord,
};
use crate::store::{
    ConsolidationCommit, EmbeddingRecord, IdleSession, KeywordQuery, ListQuery, MemoryStore,
    NextEmbedding, OutboxBounds, OutboxEntry, ReembedCounts, ReembedRow, SessionArchive,
    SessionCompaction, StoreCondition, StoredMemory,
};
use crate::supervisor::InjectedFault;
use crate::transfer::{
    AgentTransfer, ImportOutcome, NamespaceTransfer, TransferCounts, TransferRecord,
};

mod handle;
mod ops;
mod rows;

pub use handle::{EpisodicHandle, SWITCH_TIME_PER_MEMORY};
use ops::{read, write};
pub use ops::{ReadOp, WriteOp};
pub use rows::RowCache;
use rows::{with_rows, SharedRows};

/// Ref of the episodic actor.
pub type EpisodicRef = ActorRef<EpisodicMsg>;

/// Messages of the episodic actor.
pub enum EpisodicMsg {
    /// A write, carried out in mailbox order.
    Write(WriteOp),
    /// A read, answered from its own task.
    Read(ReadOp),
    /// Queue reinforcement of recalled memories (applied in batches, never on the request path).
    Touch {
        ids: Vec<MemoryId>,
        at: DateTime<Utc>,
    },
    /// Apply queued reinforcement now (sent by a timer).
    FlushTouches,
    /// Apply queued reinforcement and checkpoint the store (shutdown).
    Flush { reply: Reply<()> },
    /// Test hook: fail the actor as if its state were broken.
    InjectFault,
}

impl From<InjectedFault> for EpisodicMsg {
    fn from(_: InjectedFault) -> Self {
        EpisodicMsg::InjectFault
    }
}

/// Start-up arguments (kept by the supervisor and reused on restart).
#[derive(Clone)]
pub struct EpisodicArgs {
    /// The system of record.
    pub store: Arc<dyn MemoryStore>,
    /// Time source for reinforcement.
    pub clock: Arc<dyn Clock>,
    /// How often queued reinforcement is written.
    pub touch_flush_interval: Duration,
    /// Most memories the row cache holds for reads by id (0: off; [`RowCache`]).
    pub row_cache: usize,
}

/// The actor's state.
pub struct EpisodicState {
    /// The system of record.
    store: Arc<dyn MemoryStore>,
    /// Time of a reinforcement batch whose callers gave none.
    clock: Arc<dyn Clock>,
    /// Reinforcements not yet written.
    pending_touches: HashSet<MemoryId>,
    /// Latest access time among pending touches.
    pending_touch_at: Option<DateTime<Utc>>,
    /// Timer that sends `FlushTouches`; aborted when the actor stops.
    flush_timer: Option<tokio::task::JoinHandle<()>>,
    /// Decoded copies of memories read by id, checked against the store on every read
    /// (shared with the read tasks).
    rows: SharedRows,
}

/// The episodic storage actor.
#[derive(Clone)]
pub struct EpisodicActor;

impl EpisodicState {
    async fn flush_touches(&mut self) -> MemoryResult<()> {
        if self.pending_touches.is_empty() {
            return Ok(());
        }
        let ids: Vec<MemoryId> = self.pending_touches.drain().collect();
        let at = self
            .pending_touch_at
            .take()
            .unwrap_or_else(|| self.clock.now());
        self.store.touch(&ids, at).await?;
        with_rows(&self.rows, |rows| rows.touched(&ids, at));
        Ok(())
    }
}

impl Actor for EpisodicActor {
    type Msg = EpisodicMsg;
    type State = EpisodicState;
    type Arguments = EpisodicArgs;

    async fn pre_start(
        &self,
        myself: EpisodicRef,
        args: EpisodicArgs,
    ) -> Result<EpisodicState, ActorProcessingErr> {
        let timer = myself.send_interval(args.touch_flush_interval, || EpisodicMsg::FlushTouches);
        Ok(EpisodicState {
            store: args.store,
            clock: args.clock,
            pending_touches: HashSet::new(),
            pending_touch_at: None,
            flush_timer: Some(timer),
            rows: Arc::new(std::sync::Mutex::new(RowCache::new(args.row_cache))),
        })
    }

    async fn post_stop(
        &self,
        _myself: EpisodicRef,
        state: &mut EpisodicState,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(timer) = state.flush_timer.take() {
            timer.abort();
        }
        if let Err(error) = state.flush_touches().await {
            tracing::warn!(%error, "could not write pending reinforcements while stopping");
        }
        Ok(())
    }

    #[tracing::instrument(name = "episodic", skip_all)]
    async fn handle(
        &self,
        _myself: EpisodicRef,
        message: EpisodicMsg,
        state: &mut EpisodicState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            EpisodicMsg::Write(op) => {
                if let WriteOp::Delete { id, .. } = &op {
                    state.pending_touches.remove(id);
                }
                // Stamps cannot tell a row written again under an old id and version
                // from the one held (see `rows`): what may be, is dropped.
                match &op {
                    WriteOp::Delete { id, .. } => {
                        with_rows(&state.rows, |rows| rows.forget(std::slice::from_ref(id)))
                    }
                    WriteOp::EraseAgent { .. } | WriteOp::Import { .. } => {
                        with_rows(&state.rows, |rows| rows.clear())
                    }
                    _ => {}
                }
                write(state.store.as_ref(), &state.rows, op).await;
            }
            EpisodicMsg::Read(op) => read(state.store.clone(), state.rows.clone(), op),
            EpisodicMsg::Touch { ids, at } => {
                state.pending_touches.extend(ids);
                state.pending_touch_at = Some(state.pending_touch_at.map_or(at, |t| t.max(at)));
                if state.pending_touches.len() >= 1024 {
                    if let Err(error) = state.flush_touches().await {
                        tracing::warn!(%error, "reinforcement batch failed; dropped");
                    }
                }
            }
            EpisodicMsg::FlushTouches => {
                if let Err(error) = state.flush_touches().await {
                    tracing::warn!(%error, "reinforcement batch failed; dropped");
                }
            }
            EpisodicMsg::Flush { reply } => {
                let touched = state.flush_touches().await;
                let flushed = state.store.flush().await;
                let _ = reply.send(touched.and(flushed));
            }
            EpisodicMsg::InjectFault => return Err(injected_fault("episodic")),
        }
        Ok(())
    }
}

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

/// Writes to the system of record.
pub enum WriteOp {
    /// Insert the records whose content the agent does not already hold (same hash,
    /// project, active); the others come back as (record id, stored id). The
    /// acknowledgement point of `remember`.
    InsertNewContent {
        records: Vec<StoredMemory>,
        reply: Reply<Vec<(MemoryId, MemoryId)>>,
    },
    /// Replace a memory, archiving its previous version.
    Update {
        next: Box<Memory>,
        previous: MemoryVersion,
        embedding: Option<Vec<f32>>,
        reply: Reply<()>,
    },
    /// Delete a memory and everything stored with it.
    Delete { id: MemoryId, reply: Reply<bool> },
    /// Reinforce now (deduplication counts as an access) and answer when written.
    TouchNow {
        ids: Vec<MemoryId>,
        at: DateTime<Utc>,
        reply: Reply<()>,
    },
    /// Clusters' consolidations, in one transaction.
    CommitConsolidation {
        commits: Vec<ConsolidationCommit>,
        reply: Reply<()>,
    },
    /// Delete everything an agent owns in the store; answers what was removed.
    EraseAgent {
        agent: AgentId,
        reply: Reply<crate::store::ErasedRecords>,
    },
    /// Delete an agent's memories forgotten before a cutoff; answers their ids.
    PurgeForgotten {
        agent: AgentId,
        archived_before: DateTime<Utc>,
        reply: Reply<Vec<MemoryId>>,
    },
    /// A session's archive summary with its mark; false when already archived that far.
    CommitSessionArchive {
        archive: Box<SessionArchive>,
        reply: Reply<bool>,
    },
    /// Append a message to a session's log (the acknowledgement point of a session message).
    AppendMessage {
        agent: AgentId,
        session: SessionId,
        role: MessageRole,
        content: String,
        tokens: u32,
        at: DateTime<Utc>,
        reply: Reply<SessionMessage>,
    },
    /// Commit a session compaction atomically; false when it was already compacted that far.
    CommitCompaction {
        compaction: Box<SessionCompaction>,
        reply: Reply<bool>,
    },
    /// Record a consolidation or archival run.
    RecordRun {
        run: Box<ConsolidationRun>,
        reply: Reply<()>,
    },
    /// Claim a scheduled firing (see [`MemoryStore::try_acquire_lease`]).
    TryAcquireLease {
        job: String,
        holder: String,
        slot: DateTime<Utc>,
        expires_at: DateTime<Utc>,
        now: DateTime<Utc>,
        reply: Reply<bool>,
    },
    /// Extend a live claim; false when it is no longer held.
    RenewLease {
        job: String,
        holder: String,
        expires_at: DateTime<Utc>,
        reply: Reply<bool>,
    },
    /// Give up a claim.
    ReleaseLease {
        job: String,
        holder: String,
        now: DateTime<Utc>,
        reply: Reply<()>,
    },
    /// Drop outbox entries through a sequence number; answers how many.
    TrimOutbox { through: u64, reply: Reply<usize> },
    /// Delete one session with its memories and log.
    ClearSession {
        agent: AgentId,
        session: SessionId,
        reply: Reply<(Vec<MemoryId>, u64)>,
    },
    /// Write imported records in one transaction (see [`MemoryStore::import_records`]).
    Import {
        records: Vec<TransferRecord>,
        reply: Reply<Vec<ImportOutcome>>,
    },
    /// Record the embedding model on first use, refuse another one later.
    CheckEmbeddingModel {
        model_id: String,
        dimension: usize,
        reply: Reply<()>,
    },
    /// Record or remove a bookkeeping value.
    SetMeta {
        key: &'static str,
        value: Option<String>,
        reply: Reply<()>,
    },
    /// Store vectors of the next embedding model.
    PutNextEmbeddings {
        rows: Vec<NextEmbedding>,
        reply: Reply<()>,
    },
    /// Swap every vector for its next-model vector and record the new model.
    SwitchEmbeddings {
        model: String,
        spec: String,
        reply: Reply<u64>,
    },
    /// Forget every next-model vector.
    ClearNextEmbeddings { reply: Reply<()> },
}

/// Reads of the system of record.
pub enum ReadOp {
    /// One memory.
    Get {
        id: MemoryId,
        reply: Reply<Option<Memory>>,
    },
    /// Several memories.
    GetMany {
        ids: Vec<MemoryId>,
        reply: Reply<Vec<Memory>>,
    },
    /// Active memories of an agent by normalised content hash.
    FindByContentHash {
        agent: AgentId,
        hashes: Vec<String>,
        reply: Reply<Vec<(String, Memory)>>,
    },
    /// Neighbouring memories of several memories in their sessions, as (seed, neighbour)
    /// pairs in the order of `seeds`.
    SessionNeighbours {
        seeds: Vec<Memory>,
        radius: usize,
        reply: Reply<Vec<(MemoryId, MemoryId)>>,
    },
    /// Browse newest first.
    List {
        query: ListQuery,
        reply: Reply<Vec<Memory>>,
    },
    /// How many memories pass a browse's filters.
    CountListed { query: ListQuery, reply: Reply<u64> },
    /// Version history of a memory.
    History {
        id: MemoryId,
        reply: Reply<Vec<MemoryVersion>>,
    },
    /// The stored embedding of a memory.
    Embedding {
        id: MemoryId,
        reply: Reply<Option<Vec<f32>>>,
    },
    /// The stored embeddings of several memories.
    EmbeddingsOf {
        ids: Vec<MemoryId>,
        reply: Reply<Vec<(MemoryId, Vec<f32>)>>,
    },
    /// Active embeddings in id order after `after` (index rebuilds).
    EmbeddingsPage {
        after: Option<MemoryId>,
        limit: usize,
        reply: Reply<Vec<EmbeddingRecord>>,
    },
    /// A bookkeeping value.
    Meta {
        key: &'static str,
        reply: Reply<Option<String>>,
    },
    /// A page of a re-embedding's work list.
    ReembedPage {
        after: Option<MemoryId>,
        limit: usize,
        reply: Reply<Vec<ReembedRow>>,
    },
    /// How far a re-embedding is.
    ReembedCounts { reply: Reply<ReembedCounts> },
    /// BM25 search.
    KeywordSearch {
        query: KeywordQuery,
        reply: Reply<Vec<(MemoryId, f64)>>,
    },
    /// Every memory of an agent.
    AgentMemories {
        agent: AgentId,
        reply: Reply<Vec<Memory>>,
    },
    /// Every agent with a memory.
    Agents { reply: Reply<Vec<AgentId>> },
    /// Every agent with its memory counts.
    AgentSummaries {
        reply: Reply<Vec<crate::model::AgentSummary>>,
    },
    /// An agent's sessions, the most recently spoken first.
    AgentSessions {
        agent: AgentId,
        limit: usize,
        reply: Reply<Vec<crate::model::SessionRecord>>,
    },
    /// Number of stored memories.
    Count { reply: Reply<u64> },
    /// Consolidation run log.
    Runs {
        agent: Option<AgentId>,
        limit: usize,
        reply: Reply<Vec<ConsolidationRun>>,
    },
    /// Sessions idle since a cutoff that have no summary covering their activity.
    IdleSessions {
        idle_before: DateTime<Utc>,
        limit: usize,
        reply: Reply<Vec<IdleSession>>,
    },
    /// Every memory of one session.
    SessionMemories {
        agent: AgentId,
        session: SessionId,
        reply: Reply<Vec<Memory>>,
    },
    /// A session's state and its uncompacted messages (None: no such session).
    SessionLog {
        agent: AgentId,
        session: SessionId,
        reply: Reply<Option<(SessionRecord, Vec<SessionMessage>)>>,
    },
    /// Outbox entries after a sequence number.
    OutboxAfter {
        after: u64,
        limit: usize,
        reply: Reply<Vec<OutboxEntry>>,
    },
    /// The range of stored outbox entries.
    OutboxBounds { reply: Reply<OutboxBounds> },
    /// The newest outbox entry of a committed transaction.
    OutboxCommittedHead { reply: Reply<u64> },
    /// Whether the backend answers, and the rows reads skipped.
    Condition { reply: Reply<StoreCondition> },
    /// Every agent owning a record of any kind.
    TransferAgents { reply: Reply<Vec<AgentId>> },
    /// How many records of each kind an agent owns.
    TransferCounts {
        agent: AgentId,
        reply: Reply<TransferCounts>,
    },
    /// Everything an agent owns.
    ExportAgent {
        agent: AgentId,
        with_embeddings: bool,
        reply: Reply<AgentTransfer>,
    },
    /// Every KV namespace's configuration.
    ExportNamespaces {
        reply: Reply<Vec<NamespaceTransfer>>,
    },
    /// The entries of a KV namespace (of one writer, when given).
    ExportKvEntries {
        namespace: NamespaceName,
        writer: Option<AgentId>,
        reply: Reply<Vec<KvEntry>>,
    },
    /// Every session of an agent that has a message log, in id order (export).
    ExportSessions {
        agent: AgentId,
        reply: Reply<Vec<SessionRecord>>,
    },
    /// The owners of stored memories.
    MemoryOwners {
        ids: Vec<MemoryId>,
        reply: Reply<Vec<(MemoryId, AgentId)>>,
    },
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
        self.store.touch(&ids, at).await
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
                write(state.store.as_ref(), op).await;
            }
            EpisodicMsg::Read(op) => read(state.store.clone(), op),
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

/// Carry out one write and answer it.
async fn write(store: &dyn MemoryStore, op: WriteOp) {
    match op {
        WriteOp::InsertNewContent { records, reply } => {
            let _ = reply.send(store.insert_new_content(&records).await);
        }
        WriteOp::Update {
            next,
            previous,
            embedding,
            reply,
        } => {
            let _ = reply.send(store.update(&next, &previous, embedding.as_deref()).await);
        }
        WriteOp::Delete { id, reply } => {
            let _ = reply.send(store.delete(&id).await);
        }
        WriteOp::TouchNow { ids, at, reply } => {
            let _ = reply.send(store.touch(&ids, at).await);
        }
        WriteOp::CommitConsolidation { commits, reply } => {
            let _ = reply.send(store.commit_consolidation(&commits).await);
        }
        WriteOp::ClearSession {
            agent,
            session,
            reply,
        } => {
            let _ = reply.send(store.clear_session(&agent, &session).await);
        }
        WriteOp::Import { records, reply } => {
            let _ = reply.send(store.import_records(&records).await);
        }
        WriteOp::EraseAgent { agent, reply } => {
            let _ = reply.send(store.erase_agent(&agent).await);
        }
        WriteOp::PurgeForgotten {
            agent,
            archived_before,
            reply,
        } => {
            let _ = reply.send(store.purge_forgotten(&agent, archived_before).await);
        }
        WriteOp::CommitSessionArchive { archive, reply } => {
            let _ = reply.send(store.commit_session_archive(&archive).await);
        }
        WriteOp::AppendMessage {
            agent,
            session,
            role,
            content,
            tokens,
            at,
            reply,
        } => {
            let appended = store
                .append_session_message(&agent, &session, role, &content, tokens, at)
                .await;
            let _ = reply.send(appended);
        }
        WriteOp::CommitCompaction { compaction, reply } => {
            let _ = reply.send(store.commit_session_compaction(&compaction).await);
        }
        WriteOp::RecordRun { run, reply } => {
            let _ = reply.send(store.record_run(&run).await);
        }
        WriteOp::TryAcquireLease {
            job,
            holder,
            slot,
            expires_at,
            now,
            reply,
        } => {
            let claimed = store
                .try_acquire_lease(&job, &holder, slot, expires_at, now)
                .await;
            let _ = reply.send(claimed);
        }
        WriteOp::RenewLease {
            job,
            holder,
            expires_at,
            reply,
        } => {
            let _ = reply.send(store.renew_lease(&job, &holder, expires_at).await);
        }
        WriteOp::ReleaseLease {
            job,
            holder,
            now,
            reply,
        } => {
            let _ = reply.send(store.release_lease(&job, &holder, now).await);
        }
        WriteOp::TrimOutbox { through, reply } => {
            let _ = reply.send(store.trim_outbox(through).await);
        }
        WriteOp::CheckEmbeddingModel {
            model_id,
            dimension,
            reply,
        } => {
            let _ = reply.send(store.check_embedding_model(&model_id, dimension).await);
        }
        WriteOp::SetMeta { key, value, reply } => {
            let _ = reply.send(store.set_meta(key, value.as_deref()).await);
        }
        WriteOp::PutNextEmbeddings { rows, reply } => {
            let _ = reply.send(store.put_next_embeddings(&rows).await);
        }
        WriteOp::SwitchEmbeddings { model, spec, reply } => {
            let _ = reply.send(store.switch_embeddings(&model, &spec).await);
        }
        WriteOp::ClearNextEmbeddings { reply } => {
            let _ = reply.send(store.clear_next_embeddings().await);
        }
    }
}

/// Answer one read from its own task.
fn read(store: Arc<dyn MemoryStore>, op: ReadOp) {
    match op {
        ReadOp::Get { id, reply } => answer_in_task(reply, async move { store.get(&id).await }),
        ReadOp::GetMany { ids, reply } => {
            answer_in_task(reply, async move { store.get_many(&ids).await })
        }
        ReadOp::FindByContentHash {
            agent,
            hashes,
            reply,
        } => answer_in_task(reply, async move {
            store.find_by_content_hash(&agent, &hashes).await
        }),
        ReadOp::SessionNeighbours {
            seeds,
            radius,
            reply,
        } => answer_in_task(reply, async move {
            store.session_neighbours_of(&seeds, radius).await
        }),
        ReadOp::List { query, reply } => {
            answer_in_task(reply, async move { store.list(&query).await })
        }
        ReadOp::CountListed { query, reply } => {
            answer_in_task(reply, async move { store.count_listed(&query).await })
        }
        ReadOp::History { id, reply } => {
            answer_in_task(reply, async move { store.history(&id).await })
        }
        ReadOp::Embedding { id, reply } => {
            answer_in_task(reply, async move { store.embedding(&id).await })
        }
        ReadOp::EmbeddingsOf { ids, reply } => {
            answer_in_task(reply, async move { store.embeddings_of(&ids).await })
        }
        ReadOp::EmbeddingsPage {
            after,
            limit,
            reply,
        } => answer_in_task(reply, async move {
            store.embeddings_page(after.as_ref(), limit).await
        }),
        ReadOp::Meta { key, reply } => answer_in_task(reply, async move { store.meta(key).await }),
        ReadOp::ReembedPage {
            after,
            limit,
            reply,
        } => answer_in_task(reply, async move {
            store.reembed_page(after.as_ref(), limit).await
        }),
        ReadOp::ReembedCounts { reply } => {
            answer_in_task(reply, async move { store.reembed_counts().await })
        }
        ReadOp::KeywordSearch { query, reply } => {
            answer_in_task(reply, async move { store.keyword_search(&query).await })
        }
        ReadOp::AgentMemories { agent, reply } => {
            answer_in_task(reply, async move { store.agent_memories(&agent).await })
        }
        ReadOp::Agents { reply } => answer_in_task(reply, async move { store.agents().await }),
        ReadOp::AgentSummaries { reply } => {
            answer_in_task(reply, async move { store.agent_summaries().await })
        }
        ReadOp::AgentSessions {
            agent,
            limit,
            reply,
        } => answer_in_task(
            reply,
            async move { store.agent_sessions(&agent, limit).await },
        ),
        ReadOp::Count { reply } => answer_in_task(reply, async move { store.count().await }),
        ReadOp::Runs {
            agent,
            limit,
            reply,
        } => answer_in_task(
            reply,
            async move { store.runs(agent.as_ref(), limit).await },
        ),
        ReadOp::IdleSessions {
            idle_before,
            limit,
            reply,
        } => answer_in_task(reply, async move {
            store.idle_sessions(idle_before, limit).await
        }),
        ReadOp::SessionMemories {
            agent,
            session,
            reply,
        } => answer_in_task(reply, async move {
            store.session_memories(&agent, &session).await
        }),
        ReadOp::SessionLog {
            agent,
            session,
            reply,
        } => answer_in_task(reply, session_log(store, agent, session)),
        ReadOp::OutboxAfter {
            after,
            limit,
            reply,
        } => answer_in_task(reply, async move { store.outbox_after(after, limit).await }),
        ReadOp::OutboxBounds { reply } => {
            answer_in_task(reply, async move { store.outbox_bounds().await })
        }
        ReadOp::OutboxCommittedHead { reply } => {
            answer_in_task(reply, async move { store.outbox_committed_head().await })
        }
        ReadOp::Condition { reply } => {
            answer_in_task(reply, async move { Ok(store.condition().await) })
        }
        ReadOp::TransferAgents { reply } => {
            answer_in_task(reply, async move { store.transfer_agents().await })
        }
        ReadOp::TransferCounts { agent, reply } => {
            answer_in_task(reply, async move { store.transfer_counts(&agent).await })
        }
        ReadOp::ExportAgent {
            agent,
            with_embeddings,
            reply,
        } => answer_in_task(reply, async move {
            store.export_agent(&agent, with_embeddings).await
        }),
        ReadOp::ExportNamespaces { reply } => {
            answer_in_task(reply, async move { store.export_namespaces().await })
        }
        ReadOp::ExportKvEntries {
            namespace,
            writer,
            reply,
        } => answer_in_task(reply, async move {
            store.export_kv_entries(&namespace, writer.as_ref()).await
        }),
        ReadOp::ExportSessions { agent, reply } => {
            answer_in_task(reply, async move { store.export_sessions(&agent).await })
        }
        ReadOp::MemoryOwners { ids, reply } => {
            answer_in_task(reply, async move { store.memory_owners(&ids).await })
        }
    }
}

/// A session's record and the messages after its compaction mark.
async fn session_log(
    store: Arc<dyn MemoryStore>,
    agent: AgentId,
    session: SessionId,
) -> MemoryResult<Option<(SessionRecord, Vec<SessionMessage>)>> {
    let Some(record) = store.session_record(&agent, &session).await? else {
        return Ok(None);
    };
    let pending = store
        .session_messages_after(&agent, &session, record.compacted_through)
        .await?;
    Ok(Some((record, pending)))
}

/// Time the re-embedding switch may take per memory on top of the call timeout (see
/// [`EpisodicHandle::switch_embeddings`]); generous, since it only bounds a hung store.
pub const SWITCH_TIME_PER_MEMORY: std::time::Duration = std::time::Duration::from_millis(2);

/// The typed handle of the episodic actor (retries while it restarts).
#[derive(Clone)]
pub struct EpisodicHandle(pub(crate) Caller<EpisodicMsg>);

impl EpisodicHandle {
    async fn write<T: Send + 'static>(
        &self,
        build: impl Fn(Reply<T>) -> WriteOp,
    ) -> MemoryResult<T> {
        self.0.ask(|reply| EpisodicMsg::Write(build(reply))).await
    }

    async fn read<T: Send + 'static>(&self, build: impl Fn(Reply<T>) -> ReadOp) -> MemoryResult<T> {
        self.0.ask(|reply| EpisodicMsg::Read(build(reply))).await
    }

    /// Insert the records the agent does not hold yet; the others come back as
    /// (record id, id of the stored memory with that content).
    pub async fn insert_new_content(
        &self,
        records: &[StoredMemory],
    ) -> MemoryResult<Vec<(MemoryId, MemoryId)>> {
        self.write(|reply| WriteOp::InsertNewContent {
            records: records.to_vec(),
            reply,
        })
        .await
    }
    /// Replace a memory with `next`, archiving `previous` (version-checked).
    pub async fn update(
        &self,
        next: &Memory,
        previous: &MemoryVersion,
        embedding: Option<&[f32]>,
    ) -> MemoryResult<()> {
        self.write(|reply| WriteOp::Update {
            next: Box::new(next.clone()),
            previous: previous.clone(),
            embedding: embedding.map(<[f32]>::to_vec),
            reply,
        })
        .await
    }
    /// Delete a memory and its versions; false when it did not exist.
    pub async fn delete(&self, id: &MemoryId) -> MemoryResult<bool> {
        self.write(|reply| WriteOp::Delete {
            id: id.clone(),
            reply,
        })
        .await
    }
    /// Reinforce now and answer when written.
    pub async fn touch_now(&self, ids: &[MemoryId], at: DateTime<Utc>) -> MemoryResult<()> {
        self.write(|reply| WriteOp::TouchNow {
            ids: ids.to_vec(),
            at,
            reply,
        })
        .await
    }
    /// Queue reinforcement of recalled memories (best effort, never waits).
    pub fn touch_later(&self, ids: Vec<MemoryId>, at: DateTime<Utc>) {
        self.0.cast(EpisodicMsg::Touch { ids, at });
    }
    /// Write queued reinforcement and checkpoint the store.
    pub async fn flush(&self) -> MemoryResult<()> {
        self.0.ask(|reply| EpisodicMsg::Flush { reply }).await
    }
    /// Clusters' consolidations in one transaction: all of them or none.
    pub async fn commit_consolidation(&self, commits: &[ConsolidationCommit]) -> MemoryResult<()> {
        self.write(|reply| WriteOp::CommitConsolidation {
            commits: commits.to_vec(),
            reply,
        })
        .await
    }
    /// Delete everything `agent` owns in the store.
    pub async fn erase_agent(&self, agent: &AgentId) -> MemoryResult<crate::store::ErasedRecords> {
        self.write(|reply| WriteOp::EraseAgent {
            agent: agent.clone(),
            reply,
        })
        .await
    }
    /// Write imported records in one transaction; waits up to `allowance` for it.
    pub async fn import_records(
        &self,
        records: &[TransferRecord],
        allowance: Duration,
    ) -> MemoryResult<Vec<ImportOutcome>> {
        self.0
            .ask_within(Some(allowance), |reply| {
                EpisodicMsg::Write(WriteOp::Import {
                    records: records.to_vec(),
                    reply,
                })
            })
            .await
    }
    /// Delete one session of `agent` with its memories and log.
    pub async fn clear_session(
        &self,
        agent: &AgentId,
        session: &SessionId,
    ) -> MemoryResult<(Vec<MemoryId>, u64)> {
        self.write(|reply| WriteOp::ClearSession {
            agent: agent.clone(),
            session: session.clone(),
            reply,
        })
        .await
    }
    /// Every session of `agent` that has a message log, in id order (export).
    pub async fn export_sessions(&self, agent: &AgentId) -> MemoryResult<Vec<SessionRecord>> {
        self.read(|reply| ReadOp::ExportSessions {
            agent: agent.clone(),
            reply,
        })
        .await
    }
    /// Every agent owning a record of any kind.
    pub async fn transfer_agents(&self) -> MemoryResult<Vec<AgentId>> {
        self.read(|reply| ReadOp::TransferAgents { reply }).await
    }
    /// How many records of each kind `agent` owns.
    pub async fn transfer_counts(&self, agent: &AgentId) -> MemoryResult<TransferCounts> {
        self.read(|reply| ReadOp::TransferCounts {
            agent: agent.clone(),
            reply,
        })
        .await
    }
    /// Everything `agent` owns; waits up to `allowance` for the read.
    pub async fn export_agent(
        &self,
        agent: &AgentId,
        with_embeddings: bool,
        allowance: Duration,
    ) -> MemoryResult<AgentTransfer> {
        self.0
            .ask_within(Some(allowance), |reply| {
                EpisodicMsg::Read(ReadOp::ExportAgent {
                    agent: agent.clone(),
                    with_embeddings,
                    reply,
                })
            })
            .await
    }
    /// Every KV namespace's configuration.
    pub async fn export_namespaces(&self) -> MemoryResult<Vec<NamespaceTransfer>> {
        self.read(|reply| ReadOp::ExportNamespaces { reply }).await
    }
    /// The entries of `namespace` (only `writer`'s when given); waits up to `allowance`.
    pub async fn export_kv_entries(
        &self,
        namespace: &NamespaceName,
        writer: Option<&AgentId>,
        allowance: Duration,
    ) -> MemoryResult<Vec<KvEntry>> {
        self.0
            .ask_within(Some(allowance), |reply| {
                EpisodicMsg::Read(ReadOp::ExportKvEntries {
                    namespace: namespace.clone(),
                    writer: writer.cloned(),
                    reply,
                })
            })
            .await
    }
    /// The owners of those of `ids` that are stored.
    pub async fn memory_owners(&self, ids: &[MemoryId]) -> MemoryResult<Vec<(MemoryId, AgentId)>> {
        self.read(|reply| ReadOp::MemoryOwners {
            ids: ids.to_vec(),
            reply,
        })
        .await
    }
    /// Delete `agent`'s memories forgotten before `archived_before`.
    pub async fn purge_forgotten(
        &self,
        agent: &AgentId,
        archived_before: DateTime<Utc>,
    ) -> MemoryResult<Vec<MemoryId>> {
        self.write(|reply| WriteOp::PurgeForgotten {
            agent: agent.clone(),
            archived_before,
            reply,
        })
        .await
    }
    /// A session's archive summary; false when already archived that far.
    pub async fn commit_session_archive(&self, archive: &SessionArchive) -> MemoryResult<bool> {
        self.write(|reply| WriteOp::CommitSessionArchive {
            archive: Box::new(archive.clone()),
            reply,
        })
        .await
    }
    /// Append one message to a session's log.
    pub async fn append_message(
        &self,
        agent: &AgentId,
        session: &SessionId,
        role: MessageRole,
        content: &str,
        tokens: u32,
        at: DateTime<Utc>,
    ) -> MemoryResult<SessionMessage> {
        self.write(|reply| WriteOp::AppendMessage {
            agent: agent.clone(),
            session: session.clone(),
            role,
            content: content.to_string(),
            tokens,
            at,
            reply,
        })
        .await
    }
    /// Commit a session compaction; false when it was already compacted that far.
    pub async fn commit_compaction(&self, compaction: &SessionCompaction) -> MemoryResult<bool> {
        self.write(|reply| WriteOp::CommitCompaction {
            compaction: Box::new(compaction.clone()),
            reply,
        })
        .await
    }
    /// Record a run in the run log.
    pub async fn record_run(&self, run: &ConsolidationRun) -> MemoryResult<()> {
        self.write(|reply| WriteOp::RecordRun {
            run: Box::new(run.clone()),
            reply,
        })
        .await
    }
    /// Claim firing `slot` of `job` for `holder` until `expires_at`.
    pub async fn try_acquire_lease(
        &self,
        job: &str,
        holder: &str,
        slot: DateTime<Utc>,
        expires_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> MemoryResult<bool> {
        self.write(|reply| WriteOp::TryAcquireLease {
            job: job.to_string(),
            holder: holder.to_string(),
            slot,
            expires_at,
            now,
            reply,
        })
        .await
    }
    /// Extend `holder`'s claim of `job`; false when it no longer holds it.
    pub async fn renew_lease(
        &self,
        job: &str,
        holder: &str,
        expires_at: DateTime<Utc>,
    ) -> MemoryResult<bool> {
        self.write(|reply| WriteOp::RenewLease {
            job: job.to_string(),
            holder: holder.to_string(),
            expires_at,
            reply,
        })
        .await
    }
    /// Give up `holder`'s claim of `job`.
    pub async fn release_lease(
        &self,
        job: &str,
        holder: &str,
        now: DateTime<Utc>,
    ) -> MemoryResult<()> {
        self.write(|reply| WriteOp::ReleaseLease {
            job: job.to_string(),
            holder: holder.to_string(),
            now,
            reply,
        })
        .await
    }
    /// Drop outbox entries through `through`.
    pub async fn trim_outbox(&self, through: u64) -> MemoryResult<usize> {
        self.write(|reply| WriteOp::TrimOutbox { through, reply })
            .await
    }
    /// Record the embedding model on first use; refuse another one later.
    pub async fn check_embedding_model(
        &self,
        model_id: &str,
        dimension: usize,
    ) -> MemoryResult<()> {
        self.write(|reply| WriteOp::CheckEmbeddingModel {
            model_id: model_id.to_string(),
            dimension,
            reply,
        })
        .await
    }

    /// A bookkeeping value of the store (`embedding_model`, `embedding_spec`, `reembed_target`).
    pub async fn meta(&self, key: &'static str) -> MemoryResult<Option<String>> {
        self.read(|reply| ReadOp::Meta { key, reply }).await
    }
    /// Record (or with `None` remove) a bookkeeping value.
    pub async fn set_meta(&self, key: &'static str, value: Option<&str>) -> MemoryResult<()> {
        self.write(|reply| WriteOp::SetMeta {
            key,
            value: value.map(str::to_string),
            reply,
        })
        .await
    }
    /// A page of every memory with a vector, after `after` (a re-embedding's work list).
    pub async fn reembed_page(
        &self,
        after: Option<&MemoryId>,
        limit: usize,
    ) -> MemoryResult<Vec<ReembedRow>> {
        self.read(|reply| ReadOp::ReembedPage {
            after: after.cloned(),
            limit,
            reply,
        })
        .await
    }
    /// How far a re-embedding is.
    pub async fn reembed_counts(&self) -> MemoryResult<ReembedCounts> {
        self.read(|reply| ReadOp::ReembedCounts { reply }).await
    }
    /// Store vectors of the next embedding model.
    pub async fn put_next_embeddings(&self, rows: &[NextEmbedding]) -> MemoryResult<()> {
        self.write(|reply| WriteOp::PutNextEmbeddings {
            rows: rows.to_vec(),
            reply,
        })
        .await
    }
    /// Swap every vector for its next-model one and record `model` and `spec` (one
    /// transaction). The answer may take the call timeout plus
    /// [`SWITCH_TIME_PER_MEMORY`] for each of the `memories` swapped: the transaction
    /// grows with the store, and giving up on one that then commits would leave the
    /// store on the new model and the index on the old.
    pub async fn switch_embeddings(
        &self,
        model: &str,
        spec: &str,
        memories: u64,
    ) -> MemoryResult<u64> {
        let allowance = self.0.call_timeout()
            + SWITCH_TIME_PER_MEMORY.saturating_mul(u32::try_from(memories).unwrap_or(u32::MAX));
        self.0
            .ask_within(Some(allowance), |reply| {
                EpisodicMsg::Write(WriteOp::SwitchEmbeddings {
                    model: model.to_string(),
                    spec: spec.to_string(),
                    reply,
                })
            })
            .await
    }
    /// Forget every next-model vector.
    pub async fn clear_next_embeddings(&self) -> MemoryResult<()> {
        self.write(|reply| WriteOp::ClearNextEmbeddings { reply })
            .await
    }

    /// One memory.
    pub async fn get(&self, id: &MemoryId) -> MemoryResult<Option<Memory>> {
        self.read(|reply| ReadOp::Get {
            id: id.clone(),
            reply,
        })
        .await
    }
    /// Several memories (those that exist), in one read.
    pub async fn get_many(&self, ids: &[MemoryId]) -> MemoryResult<Vec<Memory>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        self.read(|reply| ReadOp::GetMany {
            ids: ids.to_vec(),
            reply,
        })
        .await
    }
    /// Active memories of `agent` with one of these content hashes, with their hash.
    pub async fn find_by_content_hash(
        &self,
        agent: &AgentId,
        hashes: &[String],
    ) -> MemoryResult<Vec<(String, Memory)>> {
        self.read(|reply| ReadOp::FindByContentHash {
            agent: agent.clone(),
            hashes: hashes.to_vec(),
            reply,
        })
        .await
    }
    /// (seed, neighbour) pairs of the seeds' session neighbours within `radius`.
    pub async fn session_neighbours(
        &self,
        seeds: &[Memory],
        radius: usize,
    ) -> MemoryResult<Vec<(MemoryId, MemoryId)>> {
        self.read(|reply| ReadOp::SessionNeighbours {
            seeds: seeds.to_vec(),
            radius,
            reply,
        })
        .await
    }
    /// Browse newest first.
    pub async fn list(&self, query: &ListQuery) -> MemoryResult<Vec<Memory>> {
        self.read(|reply| ReadOp::List {
            query: query.clone(),
            reply,
        })
        .await
    }

    /// How many memories pass `query`'s filters (the cursor and page size aside).
    pub async fn count_listed(&self, query: &ListQuery) -> MemoryResult<u64> {
        self.read(|reply| ReadOp::CountListed {
            query: query.clone(),
            reply,
        })
        .await
    }
    /// Version history, oldest first.
    pub async fn history(&self, id: &MemoryId) -> MemoryResult<Vec<MemoryVersion>> {
        self.read(|reply| ReadOp::History {
            id: id.clone(),
            reply,
        })
        .await
    }
    /// The stored embedding of a memory.
    pub async fn embedding(&self, id: &MemoryId) -> MemoryResult<Option<Vec<f32>>> {
        self.read(|reply| ReadOp::Embedding {
            id: id.clone(),
            reply,
        })
        .await
    }
    /// The stored embeddings of several memories.
    pub async fn embeddings_of(&self, ids: &[MemoryId]) -> MemoryResult<Vec<(MemoryId, Vec<f32>)>> {
        self.read(|reply| ReadOp::EmbeddingsOf {
            ids: ids.to_vec(),
            reply,
        })
        .await
    }
    /// Active embeddings in id order after `after`, at most `limit`.
    pub async fn embeddings_page(
        &self,
        after: Option<&MemoryId>,
        limit: usize,
    ) -> MemoryResult<Vec<EmbeddingRecord>> {
        self.read(|reply| ReadOp::EmbeddingsPage {
            after: after.cloned(),
            limit,
            reply,
        })
        .await
    }
    /// BM25 search.
    pub async fn keyword_search(&self, query: &KeywordQuery) -> MemoryResult<Vec<(MemoryId, f64)>> {
        self.read(|reply| ReadOp::KeywordSearch {
            query: query.clone(),
            reply,
        })
        .await
    }
    /// Every memory of an agent.
    pub async fn agent_memories(&self, agent: &AgentId) -> MemoryResult<Vec<Memory>> {
        self.read(|reply| ReadOp::AgentMemories {
            agent: agent.clone(),
            reply,
        })
        .await
    }
    /// Every agent with a memory.
    pub async fn agents(&self) -> MemoryResult<Vec<AgentId>> {
        self.read(|reply| ReadOp::Agents { reply }).await
    }
    /// Every agent with its memory counts.
    pub async fn agent_summaries(&self) -> MemoryResult<Vec<crate::model::AgentSummary>> {
        self.read(|reply| ReadOp::AgentSummaries { reply }).await
    }
    /// An agent's sessions, the most recently spoken first, at most `limit`.
    pub async fn agent_sessions(
        &self,
        agent: &AgentId,
        limit: usize,
    ) -> MemoryResult<Vec<crate::model::SessionRecord>> {
        self.read(|reply| ReadOp::AgentSessions {
            agent: agent.clone(),
            limit,
            reply,
        })
        .await
    }
    /// Number of stored memories.
    pub async fn count(&self) -> MemoryResult<u64> {
        self.read(|reply| ReadOp::Count { reply }).await
    }
    /// The latest runs, of one agent or all.
    pub async fn runs(
        &self,
        agent: Option<&AgentId>,
        limit: usize,
    ) -> MemoryResult<Vec<ConsolidationRun>> {
        self.read(|reply| ReadOp::Runs {
            agent: agent.cloned(),
            limit,
            reply,
        })
        .await
    }
    /// Sessions idle since `idle_before` without a summary covering their activity.
    pub async fn idle_sessions(
        &self,
        idle_before: DateTime<Utc>,
        limit: usize,
    ) -> MemoryResult<Vec<IdleSession>> {
        self.read(|reply| ReadOp::IdleSessions {
            idle_before,
            limit,
            reply,
        })
        .await
    }
    /// Every memory of one session.
    pub async fn session_memories(
        &self,
        agent: &AgentId,
        session: &SessionId,
    ) -> MemoryResult<Vec<Memory>> {
        self.read(|reply| ReadOp::SessionMemories {
            agent: agent.clone(),
            session: session.clone(),
            reply,
        })
        .await
    }
    /// A session's record and uncompacted messages (None: no such session).
    pub async fn session_log(
        &self,
        agent: &AgentId,
        session: &SessionId,
    ) -> MemoryResult<Option<(SessionRecord, Vec<SessionMessage>)>> {
        self.read(|reply| ReadOp::SessionLog {
            agent: agent.clone(),
            session: session.clone(),
            reply,
        })
        .await
    }
    /// Outbox entries after `after`, at most `limit`.
    pub async fn outbox_after(&self, after: u64, limit: usize) -> MemoryResult<Vec<OutboxEntry>> {
        self.read(|reply| ReadOp::OutboxAfter {
            after,
            limit,
            reply,
        })
        .await
    }
    /// The range of stored outbox entries.
    pub async fn outbox_bounds(&self) -> MemoryResult<OutboxBounds> {
        self.read(|reply| ReadOp::OutboxBounds { reply }).await
    }
    /// Whether the backend answers and which rows reads skipped (None: the actor did not
    /// answer within a few seconds; health must not wait for a restart).
    pub async fn condition(&self) -> Option<StoreCondition> {
        self.0
            .try_ask(Duration::from_secs(5), |reply| {
                EpisodicMsg::Read(ReadOp::Condition { reply })
            })
            .await
    }
    /// The newest outbox entry of a committed transaction.
    pub async fn outbox_committed_head(&self) -> MemoryResult<u64> {
        self.read(|reply| ReadOp::OutboxCommittedHead { reply })
            .await
    }
}

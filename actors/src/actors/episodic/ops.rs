//! What the episodic actor can be asked ([`WriteOp`], [`ReadOp`]) and how each is
//! carried out against the store.

use super::*;

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

/// Carry out one write and answer it.
pub(super) async fn write(store: &dyn MemoryStore, rows: &SharedRows, op: WriteOp) {
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
            let touched = store.touch(&ids, at).await;
            if touched.is_ok() {
                with_rows(rows, |rows| rows.touched(&ids, at));
            }
            let _ = reply.send(touched);
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
pub(super) fn read(store: Arc<dyn MemoryStore>, rows: SharedRows, op: ReadOp) {
    match op {
        ReadOp::Get { id, reply } => answer_in_task(reply, async move { store.get(&id).await }),
        ReadOp::GetMany { ids, reply } => answer_in_task(reply, async move {
            super::rows::get_many(store.as_ref(), &rows, &ids).await
        }),
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

//! [`EpisodicHandle`]: the typed calls everybody else makes to the episodic actor.

use super::*;

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

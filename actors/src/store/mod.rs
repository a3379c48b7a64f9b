//! Store traits: what each actor needs from its backend, and nothing about how.
//!
//! The SQL [`MemoryStore`] is the system of record. The [`VectorIndex`] and the
//! [`GraphStore`] hold projections that can be rebuilt from it; [`WorkingStore`]
//! holds the short-lived per-session window. Every trait has an in-memory
//! implementation in [`memory`] used by unit tests and by library users who want no
//! files at all; the service (`src/`) adds SQLite and an HNSW index.

pub mod entities;
pub mod keywords;
pub mod kv;
pub mod memory;
pub mod projects;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::error::{MemoryError, MemoryResult};
use crate::model::{
    AgentId, Association, ConsolidationRun, Memory, MemoryId, MemoryStatus, MemoryType,
    MemoryVersion, MessageRole, SessionId, SessionMessage, SessionRecord,
};
use crate::transfer::{
    AgentTransfer, ImportOutcome, NamespaceTransfer, TransferCounts, TransferRecord,
};

/// What changes whenever a memory's row does: its version (every edit, status change
/// and consolidation writes the next one) and its access count (every reinforcement adds
/// one, and moves `last_accessed_at` with it). Two reads of a row with equal stamps
/// read the same memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowStamp {
    /// `Memory::version`.
    pub version: u32,
    /// `Memory::access_count`.
    pub access_count: u32,
}

impl RowStamp {
    /// The stamp of a memory as read.
    pub fn of(memory: &Memory) -> Self {
        Self {
            version: memory.version,
            access_count: memory.access_count,
        }
    }
}

/// A memory together with its embedding, as written to the system of record.
#[derive(Debug, Clone)]
pub struct StoredMemory {
    /// The memory.
    pub memory: Memory,
    /// Its L2-normalised embedding.
    pub embedding: Vec<f32>,
    /// [`crate::policy::consistency::normalized_hash`] of its content, computed once by
    /// whoever builds the record and stored as the deduplication key.
    pub content_hash: String,
}

impl StoredMemory {
    /// A record for `memory`, hashing its content.
    pub fn new(memory: Memory, embedding: Vec<f32>) -> Self {
        let content_hash = crate::policy::consistency::normalized_hash(&memory.content);
        Self::with_hash(memory, embedding, content_hash)
    }
    /// A record whose content hash the caller already computed.
    pub fn with_hash(memory: Memory, embedding: Vec<f32>, content_hash: String) -> Self {
        Self {
            memory,
            embedding,
            content_hash,
        }
    }
}

/// An active memory's content key, as [`MemoryStore::insert_new_content`] compares it.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredContent {
    /// Whose memory it is.
    pub agent_id: AgentId,
    /// [`crate::policy::consistency::normalized_hash`] of its content.
    pub content_hash: String,
    /// Its project (a duplicate must be in the same one).
    pub project_id: Option<crate::projects::ProjectId>,
    /// Its id.
    pub id: MemoryId,
}

impl StoredContent {
    /// From a stored row's id, content hash and project column, for `agent_id`.
    pub fn from_row(
        agent_id: &AgentId,
        (id, content_hash, project): (String, String, Option<String>),
    ) -> MemoryResult<Self> {
        Ok(Self {
            agent_id: agent_id.clone(),
            content_hash,
            project_id: project
                .as_deref()
                .map(crate::projects::ProjectId::parse)
                .transpose()?,
            id: MemoryId(id),
        })
    }
}

/// The content hashes of the active records, per agent: what
/// [`MemoryStore::insert_new_content`] looks up before writing.
pub fn active_content_hashes(records: &[StoredMemory]) -> Vec<(AgentId, Vec<String>)> {
    let mut by_agent: Vec<(AgentId, Vec<String>)> = Vec::new();
    let mut seen: std::collections::HashSet<(&AgentId, String)> = Default::default();
    for record in records
        .iter()
        .filter(|r| r.memory.status == MemoryStatus::Active)
    {
        let hash = record.content_hash.clone();
        if !seen.insert((&record.memory.agent_id, hash.clone())) {
            continue;
        }
        match by_agent
            .iter_mut()
            .find(|(agent, _)| *agent == record.memory.agent_id)
        {
            Some((_, hashes)) => hashes.push(hash),
            None => by_agent.push((record.memory.agent_id.clone(), vec![hash])),
        }
    }
    by_agent
}

/// Split `records` into those to write and those whose content `stored` already holds
/// (same agent, hash and project; active records only), paired with the stored id.
pub fn split_stored_content<'a>(
    records: &'a [StoredMemory],
    stored: &[StoredContent],
) -> (Vec<&'a StoredMemory>, Vec<(MemoryId, MemoryId)>) {
    type Key<'k> = (&'k AgentId, &'k str, Option<&'k crate::projects::ProjectId>);
    let mut held: std::collections::HashMap<Key<'_>, Vec<&MemoryId>> = Default::default();
    for s in stored {
        held.entry((&s.agent_id, s.content_hash.as_str(), s.project_id.as_ref()))
            .or_default()
            .push(&s.id);
    }
    let mut fresh = Vec::new();
    let mut duplicates = Vec::new();
    for record in records {
        let memory = &record.memory;
        let existing = (memory.status == MemoryStatus::Active && !held.is_empty())
            .then_some(record.content_hash.as_str())
            .and_then(|hash| {
                held.get(&(&memory.agent_id, hash, memory.project_id.as_ref()))?
                    .iter()
                    .find(|id| ***id != memory.id)
                    .copied()
            });
        match existing {
            Some(found) => duplicates.push((memory.id.clone(), found.clone())),
            None => fresh.push(record),
        }
    }
    (fresh, duplicates)
}

/// Filters for browsing memories, newest first.
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    /// Owner (required: browsing never crosses agents).
    pub agent_id: Option<AgentId>,
    /// Only this type.
    pub memory_type: Option<MemoryType>,
    /// Only this status.
    pub status: Option<MemoryStatus>,
    /// Only memories carrying this tag.
    pub tag: Option<String>,
    /// Page size.
    pub limit: usize,
    /// Return memories with ids strictly below this one (the previous page's last id).
    pub cursor: Option<MemoryId>,
    /// Only memories that occurred in this range, newest occurrence first (instead of newest id first).
    pub occurred: Option<crate::policy::time::TimeRange>,
    /// Only memories of this project (of the owner).
    pub project_id: Option<crate::projects::ProjectId>,
    /// Only memories of this session.
    pub session_id: Option<crate::model::SessionId>,
    /// Only memories whose content holds every one of these words (lowercase; matched
    /// without regard to ASCII case).
    pub words: Vec<String>,
    /// Only memories that occurred in this range, still newest id first (so pages
    /// follow the cursor), unlike `occurred`, which orders by occurrence.
    pub within: Option<crate::policy::time::TimeRange>,
}

impl ListQuery {
    /// Whether `memory` passes every filter but the cursor and the page size (the
    /// reference the stores' SQL follows; the in-memory store uses it directly).
    pub fn admits(&self, memory: &Memory) -> bool {
        self.agent_id.as_ref().is_none_or(|a| memory.agent_id == *a)
            && self.memory_type.is_none_or(|t| memory.memory_type == t)
            && self.status.is_none_or(|s| memory.status == s)
            && self.tag.as_ref().is_none_or(|t| memory.tags.contains(t))
            && self.occurred.is_none_or(|r| r.contains(memory.occurred_at))
            && self.within.is_none_or(|r| r.contains(memory.occurred_at))
            && (self.project_id.is_none() || memory.project_id == self.project_id)
            && (self.session_id.is_none() || memory.session_id == self.session_id)
            && (self.words.is_empty() || {
                let content = memory.content.to_ascii_lowercase();
                self.words.iter().all(|w| content.contains(w.as_str()))
            })
    }
}

/// A keyword (BM25) search within one agent's scope.
#[derive(Debug, Clone)]
pub struct KeywordQuery {
    /// Whose memories.
    pub agent_id: AgentId,
    /// Also search memories other agents marked shared.
    pub include_shared: bool,
    /// Query text (terms are extracted by the store).
    pub text: String,
    /// Only memories that occurred in this range.
    pub occurred: Option<crate::policy::time::TimeRange>,
    /// Maximum hits.
    pub limit: usize,
}

/// An embedding as stored, with what the vector index needs to place it.
#[derive(Debug, Clone)]
pub struct EmbeddingRecord {
    /// Memory id.
    pub id: MemoryId,
    /// Owner.
    pub agent_id: AgentId,
    /// Type, which picks the collection.
    pub memory_type: MemoryType,
    /// Shared memories are also indexed in the shared pool.
    pub shared: bool,
    /// The vector.
    pub vector: Vec<f32>,
    /// When it happened (the keyword index filters a query's time range on it).
    pub occurred_at: DateTime<Utc>,
    /// Its title and content (`keywords::keyword_text`), which the keyword index reads.
    pub text: String,
    /// Its conversation, if any: the keyword index keeps each session's memories in id
    /// order so recall's expansion finds a hit's session neighbours without SQL.
    pub session_id: Option<SessionId>,
}

impl EmbeddingRecord {
    /// The index entry of `memory` with its `vector`.
    pub fn of(memory: &Memory, vector: Vec<f32>) -> Self {
        Self {
            id: memory.id.clone(),
            agent_id: memory.agent_id.clone(),
            memory_type: memory.memory_type,
            shared: memory.shared,
            vector,
            occurred_at: memory.occurred_at,
            text: keywords::keyword_text(memory.title.as_deref(), &memory.content),
            session_id: memory.session_id.clone(),
        }
    }
}

/// One cluster's consolidation, applied in one transaction: the derived memory, its
/// `derived_from` edges to the sources, and the sources' raised consolidation level.
#[derive(Debug, Clone)]
pub struct ConsolidationCommit {
    /// The new semantic or procedural memory with its embedding.
    pub derived: StoredMemory,
    /// `derived_from` edges from the derived memory to each source.
    pub edges: Vec<Association>,
    /// Each source's next state and the version it replaces (checked: a source
    /// changed since it was read fails the whole commit with `conflict`). Only the
    /// next state's consolidation level, version and update time are written.
    pub sources: Vec<(Memory, MemoryVersion)>,
}

/// A session with no new memory since a cutoff that has not been summarised since.
#[derive(Debug, Clone, PartialEq)]
pub struct IdleSession {
    /// Whose session.
    pub agent_id: AgentId,
    /// Which session.
    pub session_id: SessionId,
    /// Earliest `occurred_at` of its memories.
    pub first_at: DateTime<Utc>,
    /// Latest `occurred_at` of its memories.
    pub last_at: DateTime<Utc>,
    /// Latest `created_at`: the session's last activity.
    pub last_activity: DateTime<Utc>,
}

/// A session's archive summary, recorded in one transaction with the mark that the
/// session is summarised through `archived_through` (archival is idempotent).
#[derive(Debug, Clone)]
pub struct SessionArchive {
    /// The summary memory (episodic, tagged `archive_summary`).
    pub summary: StoredMemory,
    /// Whose session.
    pub agent_id: AgentId,
    /// Which session.
    pub session_id: SessionId,
    /// Activity up to this instant is covered by the summary.
    pub archived_through: DateTime<Utc>,
}

/// A session compaction, committed atomically: the archive memory holding the compacted
/// history, and the session's new summary and compaction mark. Idempotent: a session
/// already compacted through `through` is left alone.
#[derive(Debug, Clone)]
pub struct SessionCompaction {
    /// The archive memory (episodic, tagged `archive_summary`): the full compacted history.
    pub archive: StoredMemory,
    /// Whose session.
    pub agent_id: AgentId,
    /// Which session.
    pub session_id: SessionId,
    /// Messages up to this sequence number are covered.
    pub through: u64,
    /// The running summary that replaces them in the window.
    pub summary: String,
    /// When the newest message it covers was said (the summary's place in the conversation).
    pub at: DateTime<Utc>,
}

/// A change a projection must apply, as the outbox recorded it (in commit order).
#[derive(Debug, Clone, PartialEq)]
pub enum ProjectedChange {
    /// A memory was created or its projected properties changed.
    UpsertMemory {
        /// The memory.
        id: MemoryId,
        /// Its owner.
        agent_id: AgentId,
        /// Its type name.
        memory_type: String,
        /// Its status name.
        status: String,
        /// Whether it is in the shared pool.
        shared: bool,
        /// Its session, if any.
        session_id: Option<String>,
        /// Its stored embedding, filled by the projector for projections that hold
        /// vectors ([`Projection::holds_vectors`]); None otherwise (the outbox keeps none).
        embedding: Option<Vec<f32>>,
        /// What it names, filled by the projector for projections that keep entities
        /// ([`Projection::holds_entities`]); None otherwise.
        named: Option<crate::store::entities::NamedInMemory>,
    },
    /// A memory was deleted (its edges go with it).
    DeleteMemory {
        /// The memory.
        id: MemoryId,
        /// Its owner.
        agent_id: AgentId,
    },
    /// An association was created or re-weighted.
    UpsertEdge {
        /// Owner.
        agent_id: AgentId,
        /// Source memory.
        from_id: MemoryId,
        /// Target memory.
        to_id: MemoryId,
        /// Relation name.
        relation: String,
        /// Weight in 0..1.
        weight: f32,
    },
    /// An association was removed.
    DeleteEdge {
        /// Owner.
        agent_id: AgentId,
        /// Source memory.
        from_id: MemoryId,
        /// Target memory.
        to_id: MemoryId,
        /// Relation name.
        relation: String,
    },
}

/// One outbox entry.
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxEntry {
    /// Position in the outbox (commit order, gap-free per store).
    pub seq: u64,
    /// What changed.
    pub change: ProjectedChange,
    /// When it was committed.
    pub created_at: DateTime<Utc>,
}

/// The range of outbox entries still stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OutboxBounds {
    /// Sequence number of the oldest stored entry (None: the outbox is empty).
    pub oldest: Option<u64>,
    /// Sequence number of the newest entry ever written (0: none yet).
    pub head: u64,
}

/// An external read model kept in sync from the outbox (FalkorDB, Neo4j, Qdrant).
/// Applying a change twice must leave the same state (idempotent), since a failed
/// batch is retried whole.
#[async_trait]
pub trait Projection: Send + Sync + 'static {
    /// Name in health, metrics and `mnemos reindex` (`falkordb`, ...).
    fn name(&self) -> &'static str;
    /// The outbox sequence number the projection has applied through, as recorded in
    /// the projection itself; None when it holds nothing known (fresh or flushed) and
    /// must be rebuilt from SQL.
    async fn applied(&self) -> MemoryResult<Option<u64>>;
    /// Apply changes in order, then (when `through` is given) record it as applied.
    async fn apply(&self, changes: &[ProjectedChange], through: Option<u64>) -> MemoryResult<()>;
    /// Remove everything, before a rebuild.
    async fn reset(&self) -> MemoryResult<()>;
    /// True when it stores vectors: the projector then attaches each upserted memory's
    /// stored embedding to its change (the projection never reads the system of record).
    fn holds_vectors(&self) -> bool {
        false
    }
    /// True when it keeps entities and their relationships: the projector then
    /// attaches what each upserted memory names ([`crate::store::entities::named_in`]).
    fn holds_entities(&self) -> bool {
        false
    }
    /// Which reads this projection can answer for recall once it has applied every
    /// committed change (until then, and when a read fails, the embedded index and the
    /// SQL graph answer instead).
    fn serves(&self) -> ProjectionReads {
        ProjectionReads::None
    }
    /// Vector projections: the nearest active memories to `query.vector` under its
    /// filters (owner or shared pool, types), best first, as (memory, cosine).
    async fn nearest(&self, _query: &VectorQuery) -> MemoryResult<Vec<(MemoryId, f32)>> {
        Err(MemoryError::unavailable(format!(
            "the {} projection holds no vectors",
            self.name()
        )))
    }
    /// Graph projections: the associations of `agent` touching any of `seeds`, at most `limit`.
    async fn links_around(
        &self,
        _agent: &AgentId,
        _seeds: &[MemoryId],
        _limit: usize,
    ) -> MemoryResult<Vec<Link>> {
        Err(MemoryError::unavailable(format!(
            "the {} projection holds no associations",
            self.name()
        )))
    }
    /// Graph projections: spreading activation from `seed` over `agent`'s associations
    /// within `depth` hops (a path's activation is the product of weight · `decay` per
    /// hop; the best path wins, as [`crate::policy::activation::spread`] computes it on
    /// the SQL graph), best first, at most `limit`, inactive memories included.
    async fn spread(
        &self,
        _agent: &AgentId,
        _seed: &MemoryId,
        _depth: u32,
        _decay: f64,
        _limit: usize,
    ) -> MemoryResult<Vec<crate::policy::activation::Activation>> {
        Err(MemoryError::unavailable(format!(
            "the {} projection holds no associations",
            self.name()
        )))
    }
}

/// The reads a projection can serve for recall.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProjectionReads {
    /// Write-only (kept in sync, never read by recall).
    None,
    /// Nearest-neighbour search ([`Projection::nearest`]).
    Vectors,
    /// Association reads ([`Projection::links_around`], [`Projection::spread`]).
    Graph,
}

/// An association as a graph projection returns it (no timestamps: projections keep
/// only what reads need).
#[derive(Debug, Clone, PartialEq)]
pub struct Link {
    /// Source memory.
    pub from_id: MemoryId,
    /// Target memory.
    pub to_id: MemoryId,
    /// Relation name.
    pub relation: String,
    /// 0..1 strength.
    pub weight: f32,
}

impl From<&Association> for Link {
    fn from(edge: &Association) -> Self {
        Self {
            from_id: edge.from_id.clone(),
            to_id: edge.to_id.clone(),
            relation: edge.relation.clone(),
            weight: edge.weight,
        }
    }
}

/// Version reasons of memories archived by forgetting (by decay or on request): only
/// these are purged after `cognition.purge_after_days`.
pub const FORGET_REASONS: [&str; 2] = ["forget_decay", "forget"];

/// The system of record: memories, versions, embeddings, keyword index, run log.
#[async_trait]
pub trait MemoryStore: Send + Sync + 'static {
    /// Short backend name for health and logs (`sqlite`, `memory`).
    fn backend_name(&self) -> &'static str;
    /// True when the store also holds the association edges (the SQL graph), so that
    /// edges written in its transactions need no separate projection.
    fn keeps_edges(&self) -> bool {
        false
    }
    /// Record the embedding model in use, or fail if stored vectors come from another model or dimension.
    async fn check_embedding_model(&self, model_id: &str, dimension: usize) -> MemoryResult<()>;
    /// Insert memories with their embeddings atomically; ids already present are left untouched (idempotent retries).
    async fn insert(&self, records: &[StoredMemory]) -> MemoryResult<()>;
    /// Insert like [`MemoryStore::insert`], except an active record whose agent already
    /// has an active memory with the same normalised content in the same project: it is
    /// not written and comes back as (its id, the stored memory's id). The SQL stores
    /// check inside their write transaction (serialised across processes), so two
    /// processes writing one text at once store it once; this default (look up, then
    /// insert) is only as atomic as the caller's own locking.
    async fn insert_new_content(
        &self,
        records: &[StoredMemory],
    ) -> MemoryResult<Vec<(MemoryId, MemoryId)>> {
        let mut stored = Vec::new();
        for (agent, hashes) in active_content_hashes(records) {
            for (hash, memory) in self.find_by_content_hash(&agent, &hashes).await? {
                stored.push(StoredContent {
                    agent_id: agent.clone(),
                    content_hash: hash,
                    project_id: memory.project_id,
                    id: memory.id,
                });
            }
        }
        let (fresh, duplicates) = split_stored_content(records, &stored);
        let fresh: Vec<StoredMemory> = fresh.into_iter().cloned().collect();
        self.insert(&fresh).await?;
        Ok(duplicates)
    }
    /// One memory by id, in any status.
    async fn get(&self, id: &MemoryId) -> MemoryResult<Option<Memory>>;
    /// Active memories of `agent` whose normalised content hash
    /// ([`crate::policy::consistency::normalized_hash`]) is one of `hashes`, keyed by hash.
    async fn find_by_content_hash(
        &self,
        agent: &AgentId,
        hashes: &[String],
    ) -> MemoryResult<Vec<(String, Memory)>>;
    /// Ids of the memories stored just before and just after `memory` in its session
    /// (by creation order), at most `radius` on each side, nearest first.
    async fn session_neighbours(
        &self,
        memory: &Memory,
        radius: usize,
    ) -> MemoryResult<Vec<MemoryId>>;
    /// [`Self::session_neighbours`] of several seeds, as (seed, neighbour) pairs in the
    /// order of `seeds` (recall's expansion asks for up to `expansion_seeds` at once).
    /// This default asks seed by seed; the SQL store answers in one statement.
    async fn session_neighbours_of(
        &self,
        seeds: &[Memory],
        radius: usize,
    ) -> MemoryResult<Vec<(MemoryId, MemoryId)>> {
        let mut pairs = Vec::new();
        for seed in seeds {
            for neighbour in self.session_neighbours(seed, radius).await? {
                pairs.push((seed.id.clone(), neighbour));
            }
        }
        Ok(pairs)
    }
    /// Several memories by id (missing ones are skipped; order not guaranteed).
    async fn get_many(&self, ids: &[MemoryId]) -> MemoryResult<Vec<Memory>>;
    /// The [`RowStamp`]s of those of `held` that exist and read cleanly, and the whole
    /// rows of those of `missing` that exist (order not guaranteed), in one read where
    /// the store can: what the episodic actor's row cache asks on each read by id. The
    /// default reads whole rows for both; the SQL stores read only the stamps of `held`.
    async fn stamps_and_memories(
        &self,
        held: &[MemoryId],
        missing: &[MemoryId],
    ) -> MemoryResult<(Vec<(MemoryId, RowStamp)>, Vec<Memory>)> {
        let stamps = self
            .get_many(held)
            .await?
            .iter()
            .map(|m| (m.id.clone(), RowStamp::of(m)))
            .collect();
        Ok((stamps, self.get_many(missing).await?))
    }
    /// Browse, newest first.
    async fn list(&self, query: &ListQuery) -> MemoryResult<Vec<Memory>>;
    /// How many memories pass `query`'s filters (its cursor and page size aside).
    async fn count_listed(&self, query: &ListQuery) -> MemoryResult<u64>;
    /// Replace a memory with `next` if its stored version is `previous.version`, archiving `previous`;
    /// a new embedding replaces the old one when content changed. Fails with `conflict` on a version race.
    async fn update(
        &self,
        next: &Memory,
        previous: &MemoryVersion,
        embedding: Option<&[f32]>,
    ) -> MemoryResult<()>;
    /// Delete a memory with its versions, embedding and edges; false when it did not exist.
    async fn delete(&self, id: &MemoryId) -> MemoryResult<bool>;
    /// Past versions, oldest first.
    async fn history(&self, id: &MemoryId) -> MemoryResult<Vec<MemoryVersion>>;
    /// BM25 keyword search over active memories, best first, scores higher-is-better.
    async fn keyword_search(&self, query: &KeywordQuery) -> MemoryResult<Vec<(MemoryId, f64)>>;
    /// Reinforce: bump `access_count` and set `last_accessed_at` for each id.
    async fn touch(&self, ids: &[MemoryId], at: DateTime<Utc>) -> MemoryResult<()>;
    /// Every memory of one agent (for reflection and consolidation).
    async fn agent_memories(&self, agent: &AgentId) -> MemoryResult<Vec<Memory>>;
    /// Every agent that has memories.
    async fn agents(&self) -> MemoryResult<Vec<AgentId>>;
    /// Every agent with memories and how many (a browser's agent list), by agent id.
    async fn agent_summaries(&self) -> MemoryResult<Vec<crate::model::AgentSummary>>;
    /// An agent's sessions, the most recently spoken first, at most `limit`.
    async fn agent_sessions(
        &self,
        agent: &AgentId,
        limit: usize,
    ) -> MemoryResult<Vec<SessionRecord>>;
    /// The stored embedding of one memory.
    async fn embedding(&self, id: &MemoryId) -> MemoryResult<Option<Vec<f32>>>;
    /// Embeddings of active memories in id order after `after`, for rebuilding the vector index.
    async fn embeddings_page(
        &self,
        after: Option<&MemoryId>,
        limit: usize,
    ) -> MemoryResult<Vec<EmbeddingRecord>>;
    /// A value of the store's own bookkeeping (one of [`META_KEYS`]), if recorded.
    async fn meta(&self, key: &str) -> MemoryResult<Option<String>>;
    /// Record (or with `None` remove) a value of the store's bookkeeping.
    async fn set_meta(&self, key: &str, value: Option<&str>) -> MemoryResult<()>;
    /// Every memory with a stored vector, in id order after `after`, with the source
    /// hash of its vector of the next model if it has one (a re-embedding's work list).
    async fn reembed_page(
        &self,
        after: Option<&MemoryId>,
        limit: usize,
    ) -> MemoryResult<Vec<ReembedRow>>;
    /// Store vectors of the next model, replacing earlier ones of the same memories
    /// (a memory deleted meanwhile is skipped).
    async fn put_next_embeddings(&self, rows: &[NextEmbedding]) -> MemoryResult<()>;
    /// How far a re-embedding is: memories with a vector, and of them with a next one.
    async fn reembed_counts(&self) -> MemoryResult<ReembedCounts>;
    /// In one transaction: replace every memory's vector by its next-model vector,
    /// record `model` (`id|dimension`) as the embedding model and `spec` as how to
    /// build it, and forget the next vectors. Refused (`conflict`, nothing changed)
    /// when a memory with a vector has no next one. Answers the vectors replaced.
    async fn switch_embeddings(&self, model: &str, spec: &str) -> MemoryResult<u64>;
    /// Forget every next-model vector (the target changed, or the work is abandoned).
    async fn clear_next_embeddings(&self) -> MemoryResult<()>;
    /// Number of memories in every status.
    async fn count(&self) -> MemoryResult<u64>;
    /// Append a consolidation run to the run log.
    async fn record_run(&self, run: &ConsolidationRun) -> MemoryResult<()>;
    /// Latest runs, newest first, optionally for one agent.
    async fn runs(
        &self,
        agent: Option<&AgentId>,
        limit: usize,
    ) -> MemoryResult<Vec<ConsolidationRun>>;
    /// Apply clusters' consolidations in one transaction (see [`ConsolidationCommit`]):
    /// all of them or, when any fails (a source changed: `conflict`), none.
    async fn commit_consolidation(&self, commits: &[ConsolidationCommit]) -> MemoryResult<()>;
    /// Stored embeddings of several memories (missing ones are skipped; order not guaranteed).
    async fn embeddings_of(&self, ids: &[MemoryId]) -> MemoryResult<Vec<(MemoryId, Vec<f32>)>>;
    /// Delete `agent`'s memories archived by forgetting ([`FORGET_REASONS`]) before
    /// `archived_before`, with their versions, embeddings and edges; returns their ids.
    async fn purge_forgotten(
        &self,
        agent: &AgentId,
        archived_before: DateTime<Utc>,
    ) -> MemoryResult<Vec<MemoryId>>;
    /// Delete everything `agent` owns in this store, in one transaction: memories with
    /// their versions, embeddings and edges, sessions with their logs and archive marks,
    /// projects, run log entries, and the KV entries it wrote. The outbox takes the
    /// deletions to the projections. Answers what was removed.
    async fn erase_agent(&self, agent: &AgentId) -> MemoryResult<ErasedRecords>;
    /// Sessions whose last activity is before `idle_before` and that have no archive
    /// summary covering that activity, oldest activity first, at most `limit`.
    async fn idle_sessions(
        &self,
        idle_before: DateTime<Utc>,
        limit: usize,
    ) -> MemoryResult<Vec<IdleSession>>;
    /// Every memory of one session, oldest first.
    async fn session_memories(
        &self,
        agent: &AgentId,
        session: &SessionId,
    ) -> MemoryResult<Vec<Memory>>;
    /// Record a session's summary and archive mark atomically; false (and nothing
    /// written) when the session is already summarised through `archived_through`.
    async fn commit_session_archive(&self, archive: &SessionArchive) -> MemoryResult<bool>;
    /// True when every change enqueues an outbox entry in its own transaction (the SQL
    /// stores); the in-memory store keeps no outbox and supports no projections.
    fn keeps_outbox(&self) -> bool {
        false
    }
    /// Outbox entries after `after`, oldest first, at most `limit`.
    async fn outbox_after(&self, _after: u64, _limit: usize) -> MemoryResult<Vec<OutboxEntry>> {
        Ok(Vec::new())
    }
    /// The range of stored outbox entries.
    async fn outbox_bounds(&self) -> MemoryResult<OutboxBounds> {
        Ok(OutboxBounds::default())
    }
    /// The newest outbox sequence number with no write in flight below it: everything
    /// up to it is committed. A rebuild records this as applied, so it must not count
    /// a sequence number taken by a transaction that has not committed yet (PostgreSQL
    /// allocates sequence numbers outside transactions; SQLite's counter is
    /// transactional, so its head already is this).
    async fn outbox_committed_head(&self) -> MemoryResult<u64> {
        Ok(self.outbox_bounds().await?.head)
    }
    /// Delete outbox entries up to `through` (every projection has applied them).
    async fn trim_outbox(&self, _through: u64) -> MemoryResult<usize> {
        Ok(0)
    }
    /// Append a message to a session's log (creating the session) and return it with its
    /// sequence number; durable when this returns (the acknowledgement point of a message).
    async fn append_session_message(
        &self,
        agent: &AgentId,
        session: &SessionId,
        role: MessageRole,
        content: &str,
        tokens: u32,
        at: DateTime<Utc>,
    ) -> MemoryResult<SessionMessage>;
    /// A session's state, or None when it has no message.
    async fn session_record(
        &self,
        agent: &AgentId,
        session: &SessionId,
    ) -> MemoryResult<Option<SessionRecord>>;
    /// A session's messages with sequence numbers after `after`, oldest first.
    async fn session_messages_after(
        &self,
        agent: &AgentId,
        session: &SessionId,
        after: u64,
    ) -> MemoryResult<Vec<SessionMessage>>;
    /// Commit a compaction (see [`SessionCompaction`]); false, with nothing written, when
    /// the session is already compacted through `through`.
    async fn commit_session_compaction(&self, compaction: &SessionCompaction)
        -> MemoryResult<bool>;
    /// Claim scheduled job `job` for firing `slot` until `expires_at`: succeeds when
    /// this slot has not been claimed yet and no other holder's claim is live at `now`.
    /// With several processes on one database, each firing runs in exactly one of them.
    async fn try_acquire_lease(
        &self,
        job: &str,
        holder: &str,
        slot: DateTime<Utc>,
        expires_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> MemoryResult<bool>;
    /// Extend `holder`'s live claim of `job`; false when it no longer holds it.
    async fn renew_lease(
        &self,
        job: &str,
        holder: &str,
        expires_at: DateTime<Utc>,
    ) -> MemoryResult<bool>;
    /// Give up `holder`'s claim of `job` (its slot stays claimed).
    async fn release_lease(&self, job: &str, holder: &str, now: DateTime<Utc>) -> MemoryResult<()>;
    /// Make everything durable (checkpoint); called on shutdown.
    async fn flush(&self) -> MemoryResult<()>;
    /// Whether the backend answers now (a cheap query under a short deadline), and the
    /// rows reads had to skip because they could not be decoded, for `/health`.
    async fn condition(&self) -> StoreCondition {
        StoreCondition::default()
    }
    /// Every agent that owns a record of any kind (a memory, a session, a project, a
    /// run, a KV entry it wrote), in id order: who an export of everything covers.
    async fn transfer_agents(&self) -> MemoryResult<Vec<AgentId>> {
        Err(no_transfer(self.backend_name()))
    }
    /// How many memories, edges, sessions, projects and runs `agent` owns (the KV
    /// counts are left 0), for an export's header.
    async fn transfer_counts(&self, agent: &AgentId) -> MemoryResult<TransferCounts> {
        let _ = agent;
        Err(no_transfer(self.backend_name()))
    }
    /// Everything `agent` owns, in a stable order ([`AgentTransfer`]); stored
    /// embeddings too when `with_embeddings`.
    async fn export_agent(
        &self,
        agent: &AgentId,
        with_embeddings: bool,
    ) -> MemoryResult<AgentTransfer> {
        let _ = (agent, with_embeddings);
        Err(no_transfer(self.backend_name()))
    }
    /// Every KV namespace's configuration and counters, in name order.
    async fn export_namespaces(&self) -> MemoryResult<Vec<NamespaceTransfer>> {
        Err(no_transfer(self.backend_name()))
    }
    /// The entries of one KV namespace in key order, expired ones included; only those
    /// `writer` wrote when given.
    async fn export_kv_entries(
        &self,
        namespace: &crate::kv::NamespaceName,
        writer: Option<&AgentId>,
    ) -> MemoryResult<Vec<crate::kv::KvEntry>> {
        let _ = (namespace, writer);
        Err(no_transfer(self.backend_name()))
    }
    /// The owner of each of `ids` that is stored (an import refuses to give a stored
    /// id to another agent).
    async fn memory_owners(&self, ids: &[MemoryId]) -> MemoryResult<Vec<(MemoryId, AgentId)>> {
        let _ = ids;
        Err(no_transfer(self.backend_name()))
    }
    /// Every session of `agent` that has a message log, in id order (export).
    async fn export_sessions(&self, agent: &AgentId) -> MemoryResult<Vec<SessionRecord>> {
        let _ = agent;
        Err(no_transfer(self.backend_name()))
    }
    /// Delete one session of `agent` in one transaction: its memories (with their
    /// versions, embeddings and edges), its message log, archival mark and project
    /// attachment. Answers the deleted memories' ids and how many messages went.
    async fn clear_session(
        &self,
        agent: &AgentId,
        session: &SessionId,
    ) -> MemoryResult<(Vec<MemoryId>, u64)> {
        let _ = (agent, session);
        Err(no_transfer(self.backend_name()))
    }
    /// Write imported records in one write transaction, in order, keeping their ids,
    /// times and counters; a record already stored is left as it is. Answers what
    /// happened to each record.
    async fn import_records(&self, records: &[TransferRecord]) -> MemoryResult<Vec<ImportOutcome>> {
        let _ = records;
        Err(no_transfer(self.backend_name()))
    }
}

/// The keys of the store's bookkeeping that [`MemoryStore::meta`] reads.
pub const META_KEYS: [&str; 3] = ["embedding_model", "embedding_spec", "reembed_target"];

/// The refusal of a bookkeeping key outside [`META_KEYS`] (a bug, not user input).
pub fn unknown_meta_key(key: &str) -> MemoryError {
    MemoryError::internal(format!("unknown store bookkeeping key {key:?}"))
}

/// A memory on a re-embedding's work list.
#[derive(Debug, Clone, PartialEq)]
pub struct ReembedRow {
    /// The memory.
    pub id: MemoryId,
    /// Its title (part of the embedded text).
    pub title: Option<String>,
    /// Its content.
    pub content: String,
    /// Source hash of the next model's vector stored for it, if any.
    pub next_hash: Option<String>,
}

/// A vector of the next model for one memory.
#[derive(Debug, Clone, PartialEq)]
pub struct NextEmbedding {
    /// The memory.
    pub id: MemoryId,
    /// The vector.
    pub vector: Vec<f32>,
    /// Hash of the text it was made from, so a text changed since is embedded again.
    pub source_hash: String,
}

/// How far a re-embedding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct ReembedCounts {
    /// Memories with a stored vector (what must be re-embedded).
    pub total: u64,
    /// Of them, those with a vector of the next model.
    pub done: u64,
}

/// The refusal of a store that neither exports nor imports (the in-memory one).
fn no_transfer(backend: &str) -> MemoryError {
    MemoryError::invalid(
        "storage.backend",
        format!("the {backend} store neither exports nor imports; use sqlite or postgres"),
    )
}

/// A stored row a read could not decode. Reads skip it (one bad row never fails a
/// query) and log it; `/health` lists it until `mnemos doctor --repair` fixes it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct UnreadableRow {
    /// The table it is in (`memories`, `memory_versions`, …).
    pub table: String,
    /// Its key (a memory id; `memory id#version` for a version).
    pub id: String,
    /// What could not be decoded.
    pub error: String,
}

/// What the system of record says about itself.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StoreCondition {
    /// Why the backend did not answer the probe, if it did not.
    pub unreachable: Option<String>,
    /// Rows reads have skipped since start (at most a few hundred are kept).
    pub unreadable: Vec<UnreadableRow>,
}

/// Which vector collection a memory type lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Collection {
    /// Lasting facts.
    Semantic,
    /// How-tos.
    Procedural,
    /// Episodic, affective and working memories: the embeddings recall needs for experience.
    Experience,
}

impl Collection {
    /// The collection a type belongs to.
    pub fn of(memory_type: MemoryType) -> Self {
        match memory_type {
            MemoryType::Semantic => Collection::Semantic,
            MemoryType::Procedural => Collection::Procedural,
            MemoryType::Episodic | MemoryType::Affective | MemoryType::Working => {
                Collection::Experience
            }
        }
    }
}

/// A nearest-neighbour query.
#[derive(Debug, Clone)]
pub struct VectorQuery {
    /// Whose vectors.
    pub agent_id: AgentId,
    /// Also search the shared pool.
    pub include_shared: bool,
    /// Only these types (empty: all).
    pub types: Vec<MemoryType>,
    /// The L2-normalised query vector.
    pub vector: Vec<f32>,
    /// Maximum hits.
    pub limit: usize,
}

/// In-process vector index over active memories, partitioned by agent and collection.
pub trait VectorIndex: Send + Sync + 'static {
    /// Short backend name for health (`flat`, `hnsw`).
    fn backend_name(&self) -> &'static str;
    /// Add or replace entries.
    fn upsert(&self, entries: &[EmbeddingRecord]);
    /// Remove entries (unknown ids are ignored).
    fn remove(&self, ids: &[MemoryId]);
    /// Drop everything (before a rebuild).
    fn clear(&self);
    /// Cosine-similarity search, best first; a memory appears at most once.
    fn search(&self, query: &VectorQuery) -> Vec<(MemoryId, f32)>;
    /// Exact cosine similarity of `vector` to each of `ids` that is indexed (others are
    /// left out): recall scores every candidate a retriever found, not only the nearest.
    fn similarity(&self, vector: &[f32], ids: &[MemoryId]) -> Vec<(MemoryId, f32)>;
    /// Number of indexed vectors.
    fn len(&self) -> usize;
    /// True when nothing is indexed.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The association graph.
#[async_trait]
pub trait GraphStore: Send + Sync + 'static {
    /// Short backend name for health (`sql`, `memory`).
    fn backend_name(&self) -> &'static str;
    /// Create an edge, or update relation weight if (from, to, relation) exists; returns the stored edge.
    async fn upsert_edge(&self, edge: &Association) -> MemoryResult<Association>;
    /// Edges reachable from `seeds` within `depth` hops (both directions), at most `max_edges`.
    async fn edges_around(
        &self,
        agent: &AgentId,
        seeds: &[MemoryId],
        depth: u32,
        max_edges: usize,
    ) -> MemoryResult<Vec<Association>>;
    /// Remove every edge touching a memory.
    async fn remove_memory(&self, id: &MemoryId) -> MemoryResult<()>;
    /// Every edge of one agent (to rebuild a graph projection).
    async fn agent_edges(&self, agent: &AgentId) -> MemoryResult<Vec<Association>>;
}

/// One item of a session's working-memory window.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkingItem {
    /// The memory it mirrors.
    pub memory_id: MemoryId,
    /// Its content (working memory is read without touching SQL).
    pub content: String,
    /// When it entered the window.
    pub at: DateTime<Utc>,
}

/// What [`MemoryStore::erase_agent`] removed from the system of record.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ErasedRecords {
    /// Memories (every status).
    pub memories: u64,
    /// Archived versions of them.
    pub versions: u64,
    /// Their stored embeddings.
    pub embeddings: u64,
    /// Associations from or to them.
    pub edges: u64,
    /// Sessions (their records and archive marks).
    pub sessions: u64,
    /// Messages of those sessions.
    pub session_messages: u64,
    /// Projects and their session attachments.
    pub projects: u64,
    /// Consolidation and archival runs of the agent.
    pub runs: u64,
    /// KV entries the agent wrote.
    pub kv_entries: u64,
    /// Entities of the agent's memories (the entity index, in the same database).
    pub entities: u64,
    /// Claims of facts the agent's memories made (the entity index).
    pub facts: u64,
    /// Merges of the agent's entities (its merge history).
    pub entity_merges: u64,
    /// The ids of the erased memories (to remove from indexes outside the store).
    #[serde(skip)]
    pub memory_ids: Vec<MemoryId>,
    /// The sessions the agent had (to clear their working-memory windows).
    #[serde(skip)]
    pub session_ids: Vec<SessionId>,
}

/// A session's working-memory window, with expiry.
#[async_trait]
pub trait WorkingStore: Send + Sync + 'static {
    /// Short backend name for health (`memory`, `redis`).
    fn backend_name(&self) -> &'static str;
    /// Why the backend is serving from a fallback, if it is (shown in `/health`).
    fn degraded(&self) -> Option<String> {
        None
    }
    /// Append to a session's window (dropping the oldest beyond the window size) and refresh its TTL.
    async fn push(
        &self,
        agent: &AgentId,
        session: &SessionId,
        item: WorkingItem,
        now: DateTime<Utc>,
    ) -> MemoryResult<()>;
    /// Append items to several windows of one agent, in order (a backend may send them
    /// in one round trip).
    async fn push_many(
        &self,
        agent: &AgentId,
        items: Vec<(SessionId, WorkingItem)>,
        now: DateTime<Utc>,
    ) -> MemoryResult<()> {
        for (session, item) in items {
            self.push(agent, &session, item, now).await?;
        }
        Ok(())
    }
    /// The live window of a session, oldest first (empty when expired).
    async fn window(
        &self,
        agent: &AgentId,
        session: &SessionId,
        now: DateTime<Utc>,
    ) -> MemoryResult<Vec<WorkingItem>>;
    /// Clear a session's window; returns how many items it held.
    async fn clear(&self, agent: &AgentId, session: &SessionId) -> MemoryResult<usize>;
    /// Drop expired sessions; returns how many were dropped.
    async fn sweep(&self, now: DateTime<Utc>) -> MemoryResult<usize>;
}

//! In-memory implementations of every store trait.
//!
//! They keep the same contracts as the SQL/HNSW adapters (idempotent inserts,
//! version checks, active-only keyword search) so that the actors and the runtime can
//! be tested, and embedded in a library, without files. The memory store is here; the
//! vector index, the graph and the working store are in the submodules (re-exported).

mod graph;
mod vectors;
mod working;

pub use graph::InMemoryGraphStore;
#[cfg(test)]
pub(crate) use vectors::as_stored;
pub use vectors::{merge_hits, FlatPartition, FlatVectorIndex, PartitionKey};
pub use working::InMemoryWorkingStore;

use std::collections::{BTreeMap, HashSet};
use std::sync::{Mutex, RwLock};

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{
    unknown_meta_key, ConsolidationCommit, EmbeddingRecord, IdleSession, KeywordQuery, ListQuery,
    MemoryStore, NextEmbedding, ReembedCounts, ReembedRow, SessionArchive, SessionCompaction,
    StoredMemory, META_KEYS,
};
use crate::error::{MemoryError, MemoryResult};
use crate::model::{
    AgentId, ConsolidationRun, Memory, MemoryId, MemoryStatus, MemoryVersion, MessageRole,
    SessionId, SessionMessage, SessionRecord,
};
use crate::text::keyword_terms;

/// One memory with everything stored beside it.
#[derive(Debug, Clone)]
struct Row {
    /// Current state.
    memory: Memory,
    /// Current embedding.
    embedding: Vec<f32>,
    /// Normalised hash of the current content (the deduplication key).
    content_hash: String,
    /// Past states, oldest first.
    versions: Vec<MemoryVersion>,
}

/// A session's state and its messages, oldest first.
type SessionLog = (SessionRecord, Vec<SessionMessage>);

/// A job lease: (holder, expires_at, last claimed slot).
type Lease = (String, DateTime<Utc>, DateTime<Utc>);

/// A [`MemoryStore`] in a `BTreeMap`, ordered by id like the SQL store.
#[derive(Debug, Default)]
pub struct InMemoryMemoryStore {
    /// Every memory by id.
    rows: RwLock<BTreeMap<MemoryId, Row>>,
    /// Embedding model recorded by the first `check_embedding_model`.
    model: Mutex<Option<(String, usize)>>,
    /// Run log, oldest first.
    runs: Mutex<Vec<ConsolidationRun>>,
    /// Archive marks: each summarised session and the instant it is summarised through.
    archives: Mutex<BTreeMap<(AgentId, SessionId), DateTime<Utc>>>,
    /// Job leases by job name.
    leases: Mutex<BTreeMap<String, Lease>>,
    /// Session logs: each session's state and its messages, oldest first.
    sessions: Mutex<BTreeMap<(AgentId, SessionId), SessionLog>>,
    /// Bookkeeping values other than the model (`embedding_spec`, `reembed_target`).
    meta: Mutex<BTreeMap<String, String>>,
    /// Vectors of the next embedding model and their source hashes, by memory.
    next: Mutex<BTreeMap<MemoryId, (Vec<f32>, String)>>,
}

impl InMemoryMemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }
}

impl InMemoryMemoryStore {
    /// Replace every vector by its next-model one, or refuse when one is missing.
    fn swap_in_next_embeddings(&self) -> MemoryResult<u64> {
        let mut rows = self.rows.write().map_err(lock_error)?;
        let mut next = self.next.lock().map_err(lock_error)?;
        let missing = rows
            .iter()
            .filter(|(id, r)| !r.embedding.is_empty() && !next.contains_key(*id))
            .count();
        if missing > 0 {
            return Err(MemoryError::conflict(format!(
                "{missing} memories have no vector of the new model yet"
            )));
        }
        let mut replaced = 0;
        for (id, (vector, _)) in std::mem::take(&mut *next) {
            if let Some(row) = rows.get_mut(&id) {
                row.embedding = vector;
                replaced += 1;
            }
        }
        Ok(replaced)
    }
}

fn lock_error<T>(_: T) -> MemoryError {
    MemoryError::internal("in-memory store lock poisoned")
}

/// Okapi BM25 of `documents` against `query_terms` (k1 = 1.2, b = 0.75); returns (index, score) with score > 0.
pub fn bm25(documents: &[Vec<String>], query_terms: &[String]) -> Vec<(usize, f64)> {
    let count = documents.len() as f64;
    if documents.is_empty() || query_terms.is_empty() {
        return Vec::new();
    }
    let average_length = documents.iter().map(|d| d.len()).sum::<usize>() as f64 / count;
    let unique_terms: HashSet<&String> = query_terms.iter().collect();
    let mut scores = vec![0.0f64; documents.len()];
    for term in unique_terms {
        let containing = documents.iter().filter(|d| d.contains(term)).count() as f64;
        if containing == 0.0 {
            continue;
        }
        let idf = ((count - containing + 0.5) / (containing + 0.5) + 1.0).ln();
        for (index, document) in documents.iter().enumerate() {
            let frequency = document.iter().filter(|t| *t == term).count() as f64;
            if frequency > 0.0 {
                let length_norm =
                    1.0 - 0.75 + 0.75 * document.len() as f64 / average_length.max(1.0);
                scores[index] += idf * frequency * 2.2 / (frequency + 1.2 * length_norm);
            }
        }
    }
    scores
        .into_iter()
        .enumerate()
        .filter(|(_, s)| *s > 0.0)
        .collect()
}

#[async_trait]
impl MemoryStore for InMemoryMemoryStore {
    fn backend_name(&self) -> &'static str {
        "memory"
    }

    async fn check_embedding_model(&self, model_id: &str, dimension: usize) -> MemoryResult<()> {
        let mut model = self.model.lock().map_err(lock_error)?;
        match &*model {
            Some((stored_id, stored_dimension)) if stored_id != model_id || *stored_dimension != dimension => {
                Err(MemoryError::invalid(
                    "embedding.provider",
                    format!("the store holds vectors of model {stored_id} ({stored_dimension} dimensions) but the configured embedder is {model_id} ({dimension} dimensions)"),
                ))
            }
            Some(_) => Ok(()),
            None => {
                *model = Some((model_id.to_string(), dimension));
                Ok(())
            }
        }
    }

    async fn insert(&self, records: &[StoredMemory]) -> MemoryResult<()> {
        let mut rows = self.rows.write().map_err(lock_error)?;
        for record in records {
            rows.entry(record.memory.id.clone()).or_insert_with(|| Row {
                memory: record.memory.clone(),
                embedding: record.embedding.clone(),
                content_hash: record.content_hash.clone(),
                versions: Vec::new(),
            });
        }
        Ok(())
    }

    async fn insert_new_content(
        &self,
        records: &[StoredMemory],
    ) -> MemoryResult<Vec<(MemoryId, MemoryId)>> {
        let mut rows = self.rows.write().map_err(lock_error)?;
        let wanted = super::active_content_hashes(records);
        let stored: Vec<super::StoredContent> = rows
            .values()
            .filter(|r| r.memory.status == MemoryStatus::Active)
            .filter_map(|r| {
                let (_, hashes) = wanted.iter().find(|(a, _)| *a == r.memory.agent_id)?;
                hashes
                    .contains(&r.content_hash)
                    .then(|| super::StoredContent {
                        agent_id: r.memory.agent_id.clone(),
                        content_hash: r.content_hash.clone(),
                        project_id: r.memory.project_id.clone(),
                        id: r.memory.id.clone(),
                    })
            })
            .collect();
        let (fresh, duplicates) = super::split_stored_content(records, &stored);
        for record in fresh {
            rows.entry(record.memory.id.clone()).or_insert_with(|| Row {
                memory: record.memory.clone(),
                embedding: record.embedding.clone(),
                content_hash: record.content_hash.clone(),
                versions: Vec::new(),
            });
        }
        Ok(duplicates)
    }

    async fn get(&self, id: &MemoryId) -> MemoryResult<Option<Memory>> {
        Ok(self
            .rows
            .read()
            .map_err(lock_error)?
            .get(id)
            .map(|r| r.memory.clone()))
    }

    async fn find_by_content_hash(
        &self,
        agent: &AgentId,
        hashes: &[String],
    ) -> MemoryResult<Vec<(String, Memory)>> {
        let rows = self.rows.read().map_err(lock_error)?;
        Ok(rows
            .values()
            .filter(|r| r.memory.agent_id == *agent && r.memory.status == MemoryStatus::Active)
            .filter(|r| hashes.contains(&r.content_hash))
            .map(|r| (r.content_hash.clone(), r.memory.clone()))
            .collect())
    }

    async fn session_neighbours(
        &self,
        memory: &Memory,
        radius: usize,
    ) -> MemoryResult<Vec<MemoryId>> {
        let Some(session) = &memory.session_id else {
            return Ok(Vec::new());
        };
        let rows = self.rows.read().map_err(lock_error)?;
        let same = |r: &&Row| {
            r.memory.agent_id == memory.agent_id
                && r.memory.session_id.as_ref() == Some(session)
                && r.memory.status == MemoryStatus::Active
        };
        let before = rows
            .range(..memory.id.clone())
            .rev()
            .map(|(_, r)| r)
            .filter(same)
            .take(radius);
        let after = rows
            .range((
                std::ops::Bound::Excluded(memory.id.clone()),
                std::ops::Bound::Unbounded,
            ))
            .map(|(_, r)| r)
            .filter(same)
            .take(radius);
        Ok(before.chain(after).map(|r| r.memory.id.clone()).collect())
    }

    async fn get_many(&self, ids: &[MemoryId]) -> MemoryResult<Vec<Memory>> {
        let rows = self.rows.read().map_err(lock_error)?;
        Ok(ids
            .iter()
            .filter_map(|id| rows.get(id).map(|r| r.memory.clone()))
            .collect())
    }

    async fn list(&self, query: &ListQuery) -> MemoryResult<Vec<Memory>> {
        let rows = self.rows.read().map_err(lock_error)?;
        Ok(rows
            .values()
            .rev()
            .map(|r| &r.memory)
            .filter(|m| query.cursor.as_ref().is_none_or(|c| m.id < *c))
            .filter(|m| query.admits(m))
            .cloned()
            .collect::<Vec<_>>())
        .map(|mut found: Vec<Memory>| {
            if query.occurred.is_some() {
                found.sort_by(|a, b| {
                    b.occurred_at
                        .cmp(&a.occurred_at)
                        .then_with(|| b.id.cmp(&a.id))
                });
            }
            found.truncate(query.limit);
            found
        })
    }

    async fn count_listed(&self, query: &ListQuery) -> MemoryResult<u64> {
        let rows = self.rows.read().map_err(lock_error)?;
        Ok(rows.values().filter(|r| query.admits(&r.memory)).count() as u64)
    }

    async fn update(
        &self,
        next: &Memory,
        previous: &MemoryVersion,
        embedding: Option<&[f32]>,
    ) -> MemoryResult<()> {
        let mut rows = self.rows.write().map_err(lock_error)?;
        let row = rows
            .get_mut(&next.id)
            .ok_or_else(|| MemoryError::not_found(format!("memory {} does not exist", next.id)))?;
        if row.memory.version != previous.version {
            return Err(MemoryError::conflict(format!(
                "memory {} changed concurrently (version {} is now {}); read it again and retry",
                next.id, previous.version, row.memory.version
            )));
        }
        row.versions.push(previous.clone());
        if next.content != row.memory.content {
            row.content_hash = crate::policy::consistency::normalized_hash(&next.content);
        }
        row.memory = next.clone();
        if let Some(embedding) = embedding {
            row.embedding = embedding.to_vec();
        }
        Ok(())
    }

    async fn delete(&self, id: &MemoryId) -> MemoryResult<bool> {
        Ok(self.rows.write().map_err(lock_error)?.remove(id).is_some())
    }

    async fn history(&self, id: &MemoryId) -> MemoryResult<Vec<MemoryVersion>> {
        Ok(self
            .rows
            .read()
            .map_err(lock_error)?
            .get(id)
            .map(|r| r.versions.clone())
            .unwrap_or_default())
    }

    async fn keyword_search(&self, query: &KeywordQuery) -> MemoryResult<Vec<(MemoryId, f64)>> {
        let rows = self.rows.read().map_err(lock_error)?;
        let candidates: Vec<&Memory> = rows
            .values()
            .map(|r| &r.memory)
            .filter(|m| m.status == MemoryStatus::Active)
            .filter(|m| m.agent_id == query.agent_id || (query.include_shared && m.shared))
            .filter(|m| query.occurred.is_none_or(|r| r.contains(m.occurred_at)))
            .collect();
        let documents: Vec<Vec<String>> = candidates
            .iter()
            .map(|m| keyword_terms(&m.content))
            .collect();
        let mut scored: Vec<(MemoryId, f64)> = bm25(&documents, &keyword_terms(&query.text))
            .into_iter()
            .map(|(index, score)| (candidates[index].id.clone(), score))
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        scored.truncate(query.limit);
        Ok(scored)
    }

    async fn touch(&self, ids: &[MemoryId], at: DateTime<Utc>) -> MemoryResult<()> {
        let mut rows = self.rows.write().map_err(lock_error)?;
        for id in ids {
            if let Some(row) = rows.get_mut(id) {
                row.memory.access_count += 1;
                row.memory.last_accessed_at = at;
            }
        }
        Ok(())
    }

    async fn agent_memories(&self, agent: &AgentId) -> MemoryResult<Vec<Memory>> {
        let rows = self.rows.read().map_err(lock_error)?;
        Ok(rows
            .values()
            .filter(|r| r.memory.agent_id == *agent)
            .map(|r| r.memory.clone())
            .collect())
    }

    async fn agents(&self) -> MemoryResult<Vec<AgentId>> {
        let rows = self.rows.read().map_err(lock_error)?;
        let agents: std::collections::BTreeSet<AgentId> =
            rows.values().map(|r| r.memory.agent_id.clone()).collect();
        Ok(agents.into_iter().collect())
    }

    async fn agent_summaries(&self) -> MemoryResult<Vec<crate::model::AgentSummary>> {
        let rows = self.rows.read().map_err(lock_error)?;
        let mut by_agent: std::collections::BTreeMap<AgentId, crate::model::AgentSummary> =
            std::collections::BTreeMap::new();
        for memory in rows.values().map(|r| &r.memory) {
            let summary = by_agent.entry(memory.agent_id.clone()).or_insert_with(|| {
                crate::model::AgentSummary {
                    agent_id: memory.agent_id.clone(),
                    memories: 0,
                    active: 0,
                    last_at: None,
                }
            });
            summary.memories += 1;
            summary.active += u64::from(memory.status == MemoryStatus::Active);
            summary.last_at = summary.last_at.max(Some(memory.created_at));
        }
        Ok(by_agent.into_values().collect())
    }

    async fn agent_sessions(
        &self,
        agent: &AgentId,
        limit: usize,
    ) -> MemoryResult<Vec<SessionRecord>> {
        let sessions = self.sessions.lock().map_err(lock_error)?;
        let mut found: Vec<SessionRecord> = sessions
            .iter()
            .filter(|((owner, _), _)| owner == agent)
            .map(|(_, (record, _))| record.clone())
            .collect();
        found.sort_by(|a, b| {
            b.last_message_at
                .cmp(&a.last_message_at)
                .then_with(|| a.session_id.cmp(&b.session_id))
        });
        found.truncate(limit);
        Ok(found)
    }

    async fn embedding(&self, id: &MemoryId) -> MemoryResult<Option<Vec<f32>>> {
        Ok(self
            .rows
            .read()
            .map_err(lock_error)?
            .get(id)
            .map(|r| r.embedding.clone()))
    }

    async fn embeddings_page(
        &self,
        after: Option<&MemoryId>,
        limit: usize,
    ) -> MemoryResult<Vec<EmbeddingRecord>> {
        let rows = self.rows.read().map_err(lock_error)?;
        let range = match after {
            Some(after) => rows.range((
                std::ops::Bound::Excluded(after.clone()),
                std::ops::Bound::Unbounded,
            )),
            None => rows.range(..),
        };
        Ok(range
            .filter(|(_, r)| r.memory.status == MemoryStatus::Active)
            .take(limit)
            .map(|(_, r)| EmbeddingRecord::of(&r.memory, r.embedding.clone()))
            .collect())
    }

    async fn count(&self) -> MemoryResult<u64> {
        Ok(self.rows.read().map_err(lock_error)?.len() as u64)
    }

    async fn meta(&self, key: &str) -> MemoryResult<Option<String>> {
        if !META_KEYS.contains(&key) {
            return Err(unknown_meta_key(key));
        }
        if key == "embedding_model" {
            let model = self.model.lock().map_err(lock_error)?;
            return Ok(model.as_ref().map(|(id, dim)| format!("{id}|{dim}")));
        }
        Ok(self.meta.lock().map_err(lock_error)?.get(key).cloned())
    }

    async fn set_meta(&self, key: &str, value: Option<&str>) -> MemoryResult<()> {
        if !META_KEYS.contains(&key) {
            return Err(unknown_meta_key(key));
        }
        if key == "embedding_model" {
            let parsed = value.and_then(|v| {
                let (id, dim) = v.rsplit_once('|')?;
                Some((id.to_string(), dim.parse().ok()?))
            });
            *self.model.lock().map_err(lock_error)? = parsed;
            return Ok(());
        }
        let mut meta = self.meta.lock().map_err(lock_error)?;
        match value {
            Some(value) => meta.insert(key.to_string(), value.to_string()),
            None => meta.remove(key),
        };
        Ok(())
    }

    async fn reembed_page(
        &self,
        after: Option<&MemoryId>,
        limit: usize,
    ) -> MemoryResult<Vec<ReembedRow>> {
        let rows = self.rows.read().map_err(lock_error)?;
        let next = self.next.lock().map_err(lock_error)?;
        let range = match after {
            Some(after) => rows.range((
                std::ops::Bound::Excluded(after.clone()),
                std::ops::Bound::Unbounded,
            )),
            None => rows.range(..),
        };
        Ok(range
            .filter(|(_, r)| !r.embedding.is_empty())
            .take(limit)
            .map(|(id, r)| ReembedRow {
                id: id.clone(),
                title: r.memory.title.clone(),
                content: r.memory.content.clone(),
                next_hash: next.get(id).map(|(_, hash)| hash.clone()),
            })
            .collect())
    }

    async fn put_next_embeddings(&self, rows: &[NextEmbedding]) -> MemoryResult<()> {
        let memories = self.rows.read().map_err(lock_error)?;
        let mut next = self.next.lock().map_err(lock_error)?;
        for row in rows.iter().filter(|r| memories.contains_key(&r.id)) {
            next.insert(
                row.id.clone(),
                (row.vector.clone(), row.source_hash.clone()),
            );
        }
        Ok(())
    }

    async fn reembed_counts(&self) -> MemoryResult<ReembedCounts> {
        let rows = self.rows.read().map_err(lock_error)?;
        let next = self.next.lock().map_err(lock_error)?;
        let with_vectors = rows.iter().filter(|(_, r)| !r.embedding.is_empty());
        let (mut total, mut done) = (0, 0);
        for (id, _) in with_vectors {
            total += 1;
            done += u64::from(next.contains_key(id));
        }
        Ok(ReembedCounts { total, done })
    }

    async fn switch_embeddings(&self, model: &str, spec: &str) -> MemoryResult<u64> {
        let replaced = self.swap_in_next_embeddings()?;
        self.set_meta("embedding_model", Some(model)).await?;
        self.set_meta("embedding_spec", Some(spec)).await?;
        self.set_meta("reembed_target", None).await?;
        Ok(replaced)
    }

    async fn clear_next_embeddings(&self) -> MemoryResult<()> {
        self.next.lock().map_err(lock_error)?.clear();
        Ok(())
    }

    async fn record_run(&self, run: &ConsolidationRun) -> MemoryResult<()> {
        self.runs.lock().map_err(lock_error)?.push(run.clone());
        Ok(())
    }

    async fn runs(
        &self,
        agent: Option<&AgentId>,
        limit: usize,
    ) -> MemoryResult<Vec<ConsolidationRun>> {
        let runs = self.runs.lock().map_err(lock_error)?;
        Ok(runs
            .iter()
            .rev()
            .filter(|r| agent.is_none_or(|a| r.agent_id.as_ref() == Some(a)))
            .take(limit)
            .cloned()
            .collect())
    }

    async fn commit_consolidation(&self, commits: &[ConsolidationCommit]) -> MemoryResult<()> {
        let mut rows = self.rows.write().map_err(lock_error)?;
        // Every check before any write; a source twice in one batch is a change too.
        let mut seen = HashSet::new();
        for (next, previous) in commits.iter().flat_map(|c| &c.sources) {
            let row = rows.get(&next.id).ok_or_else(|| {
                MemoryError::not_found(format!("memory {} does not exist", next.id))
            })?;
            if row.memory.version != previous.version || !seen.insert(&next.id) {
                return Err(MemoryError::conflict(format!(
                    "memory {} changed during consolidation; the next run retries it",
                    next.id
                )));
            }
        }
        for commit in commits {
            for (next, previous) in &commit.sources {
                if let Some(row) = rows.get_mut(&next.id) {
                    row.versions.push(previous.clone());
                    row.memory.consolidation_level = next.consolidation_level;
                    row.memory.version = next.version;
                    row.memory.updated_at = next.updated_at;
                }
            }
            rows.entry(commit.derived.memory.id.clone())
                .or_insert_with(|| Row {
                    memory: commit.derived.memory.clone(),
                    embedding: commit.derived.embedding.clone(),
                    content_hash: commit.derived.content_hash.clone(),
                    versions: Vec::new(),
                });
        }
        // Edges live in the graph store here; the consolidator projects them there.
        Ok(())
    }

    async fn embeddings_of(&self, ids: &[MemoryId]) -> MemoryResult<Vec<(MemoryId, Vec<f32>)>> {
        let rows = self.rows.read().map_err(lock_error)?;
        Ok(ids
            .iter()
            .filter_map(|id| rows.get(id).map(|r| (id.clone(), r.embedding.clone())))
            .collect())
    }

    async fn purge_forgotten(
        &self,
        agent: &AgentId,
        archived_before: DateTime<Utc>,
    ) -> MemoryResult<Vec<MemoryId>> {
        let mut rows = self.rows.write().map_err(lock_error)?;
        let doomed: Vec<MemoryId> = rows
            .values()
            .filter(|r| {
                r.memory.agent_id == *agent
                    && r.memory.status == MemoryStatus::Archived
                    && r.memory.updated_at < archived_before
                    && r.versions
                        .last()
                        .is_some_and(|v| crate::store::FORGET_REASONS.contains(&v.reason.as_str()))
            })
            .map(|r| r.memory.id.clone())
            .collect();
        for id in &doomed {
            rows.remove(id);
        }
        Ok(doomed)
    }

    async fn erase_agent(&self, agent: &AgentId) -> MemoryResult<crate::store::ErasedRecords> {
        let mut erased = crate::store::ErasedRecords::default();
        let mut sessions: Vec<SessionId> = Vec::new();
        {
            let mut rows = self.rows.write().map_err(lock_error)?;
            let doomed: Vec<MemoryId> = rows
                .values()
                .filter(|r| r.memory.agent_id == *agent)
                .map(|r| r.memory.id.clone())
                .collect();
            for id in &doomed {
                if let Some(row) = rows.remove(id) {
                    erased.versions += row.versions.len() as u64;
                    erased.embeddings += 1;
                    if let Some(session) = row.memory.session_id {
                        if !sessions.contains(&session) {
                            sessions.push(session);
                        }
                    }
                }
            }
            erased.memories = doomed.len() as u64;
            erased.memory_ids = doomed;
        }
        {
            let mut logs = self.sessions.lock().map_err(lock_error)?;
            let keys: Vec<(AgentId, SessionId)> =
                logs.keys().filter(|(a, _)| a == agent).cloned().collect();
            for key in keys {
                if let Some(log) = logs.remove(&key) {
                    erased.sessions += 1;
                    erased.session_messages += log.1.len() as u64;
                }
                if !sessions.contains(&key.1) {
                    sessions.push(key.1);
                }
            }
        }
        self.archives
            .lock()
            .map_err(lock_error)?
            .retain(|(a, _), _| a != agent);
        {
            let mut runs = self.runs.lock().map_err(lock_error)?;
            let before = runs.len();
            runs.retain(|r| r.agent_id.as_ref() != Some(agent));
            erased.runs = (before - runs.len()) as u64;
        }
        erased.session_ids = sessions;
        Ok(erased)
    }

    async fn idle_sessions(
        &self,
        idle_before: DateTime<Utc>,
        limit: usize,
    ) -> MemoryResult<Vec<IdleSession>> {
        let rows = self.rows.read().map_err(lock_error)?;
        let archives = self.archives.lock().map_err(lock_error)?;
        let mut sessions: BTreeMap<(AgentId, SessionId), IdleSession> = BTreeMap::new();
        for memory in rows.values().map(|r| &r.memory) {
            let Some(session) = &memory.session_id else {
                continue;
            };
            // A summary is not activity: it would make its session look busy again.
            if memory
                .tags
                .iter()
                .any(|t| t == crate::actors::consolidator::ARCHIVE_SUMMARY_TAG)
            {
                continue;
            }
            let entry = sessions
                .entry((memory.agent_id.clone(), session.clone()))
                .or_insert_with(|| IdleSession {
                    agent_id: memory.agent_id.clone(),
                    session_id: session.clone(),
                    first_at: memory.occurred_at,
                    last_at: memory.occurred_at,
                    last_activity: memory.created_at,
                });
            entry.first_at = entry.first_at.min(memory.occurred_at);
            entry.last_at = entry.last_at.max(memory.occurred_at);
            entry.last_activity = entry.last_activity.max(memory.created_at);
        }
        let mut idle: Vec<IdleSession> = sessions
            .into_iter()
            .filter(|(key, s)| {
                s.last_activity < idle_before
                    && archives
                        .get(key)
                        .is_none_or(|through| s.last_activity > *through)
            })
            .map(|(_, s)| s)
            .collect();
        idle.sort_by_key(|s| s.last_activity);
        idle.truncate(limit);
        Ok(idle)
    }

    async fn session_memories(
        &self,
        agent: &AgentId,
        session: &SessionId,
    ) -> MemoryResult<Vec<Memory>> {
        let rows = self.rows.read().map_err(lock_error)?;
        Ok(rows
            .values()
            .map(|r| &r.memory)
            .filter(|m| m.agent_id == *agent && m.session_id.as_ref() == Some(session))
            .cloned()
            .collect())
    }

    async fn commit_session_archive(&self, archive: &SessionArchive) -> MemoryResult<bool> {
        let mut rows = self.rows.write().map_err(lock_error)?;
        let mut archives = self.archives.lock().map_err(lock_error)?;
        let key = (archive.agent_id.clone(), archive.session_id.clone());
        if archives
            .get(&key)
            .is_some_and(|through| *through >= archive.archived_through)
        {
            return Ok(false);
        }
        archives.insert(key, archive.archived_through);
        rows.entry(archive.summary.memory.id.clone())
            .or_insert_with(|| Row {
                memory: archive.summary.memory.clone(),
                embedding: archive.summary.embedding.clone(),
                content_hash: archive.summary.content_hash.clone(),
                versions: Vec::new(),
            });
        Ok(true)
    }

    async fn append_session_message(
        &self,
        agent: &AgentId,
        session: &SessionId,
        role: MessageRole,
        content: &str,
        tokens: u32,
        at: DateTime<Utc>,
    ) -> MemoryResult<SessionMessage> {
        let mut sessions = self.sessions.lock().map_err(lock_error)?;
        let (record, messages) = sessions
            .entry((agent.clone(), session.clone()))
            .or_insert_with(|| {
                (
                    SessionRecord {
                        agent_id: agent.clone(),
                        session_id: session.clone(),
                        last_seq: 0,
                        compacted_through: 0,
                        summary: None,
                        summarized_at: None,
                        pending_tokens: 0,
                        compactions: 0,
                        created_at: at,
                        last_message_at: at,
                    },
                    Vec::new(),
                )
            });
        record.last_seq += 1;
        record.pending_tokens += u64::from(tokens);
        record.last_message_at = record.last_message_at.max(at);
        let message = SessionMessage {
            seq: record.last_seq,
            role,
            content: content.to_string(),
            tokens,
            at,
        };
        messages.push(message.clone());
        Ok(message)
    }

    async fn session_record(
        &self,
        agent: &AgentId,
        session: &SessionId,
    ) -> MemoryResult<Option<SessionRecord>> {
        let sessions = self.sessions.lock().map_err(lock_error)?;
        Ok(sessions
            .get(&(agent.clone(), session.clone()))
            .map(|(record, _)| record.clone()))
    }

    async fn session_messages_after(
        &self,
        agent: &AgentId,
        session: &SessionId,
        after: u64,
    ) -> MemoryResult<Vec<SessionMessage>> {
        let sessions = self.sessions.lock().map_err(lock_error)?;
        Ok(sessions
            .get(&(agent.clone(), session.clone()))
            .map(|(_, messages)| messages.iter().filter(|m| m.seq > after).cloned().collect())
            .unwrap_or_default())
    }

    async fn commit_session_compaction(
        &self,
        compaction: &SessionCompaction,
    ) -> MemoryResult<bool> {
        let mut rows = self.rows.write().map_err(lock_error)?;
        let mut sessions = self.sessions.lock().map_err(lock_error)?;
        let Some((record, messages)) =
            sessions.get_mut(&(compaction.agent_id.clone(), compaction.session_id.clone()))
        else {
            return Ok(false);
        };
        if record.compacted_through >= compaction.through || compaction.through > record.last_seq {
            return Ok(false);
        }
        record.compacted_through = compaction.through;
        record.summary = Some(compaction.summary.clone());
        record.summarized_at = Some(compaction.at);
        record.compactions += 1;
        record.pending_tokens = messages
            .iter()
            .filter(|m| m.seq > compaction.through)
            .map(|m| u64::from(m.tokens))
            .sum();
        rows.entry(compaction.archive.memory.id.clone())
            .or_insert_with(|| Row {
                memory: compaction.archive.memory.clone(),
                embedding: compaction.archive.embedding.clone(),
                content_hash: compaction.archive.content_hash.clone(),
                versions: Vec::new(),
            });
        Ok(true)
    }

    async fn try_acquire_lease(
        &self,
        job: &str,
        holder: &str,
        slot: DateTime<Utc>,
        expires_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> MemoryResult<bool> {
        let mut leases = self.leases.lock().map_err(lock_error)?;
        let free = leases.get(job).is_none_or(|(current, until, last_slot)| {
            *last_slot < slot && (*until <= now || current == holder)
        });
        if free {
            leases.insert(job.to_string(), (holder.to_string(), expires_at, slot));
        }
        Ok(free)
    }

    async fn renew_lease(
        &self,
        job: &str,
        holder: &str,
        expires_at: DateTime<Utc>,
    ) -> MemoryResult<bool> {
        let mut leases = self.leases.lock().map_err(lock_error)?;
        match leases.get_mut(job) {
            Some((current, until, _)) if current == holder => {
                *until = expires_at;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn release_lease(&self, job: &str, holder: &str, now: DateTime<Utc>) -> MemoryResult<()> {
        let mut leases = self.leases.lock().map_err(lock_error)?;
        if let Some((current, until, _)) = leases.get_mut(job) {
            if current == holder {
                *until = now;
            }
        }
        Ok(())
    }

    async fn flush(&self) -> MemoryResult<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::memory_fixture;

    #[test]
    fn bm25_prefers_rarer_terms() {
        let docs = vec![
            keyword_terms("the cat sat on the mat"),
            keyword_terms("the dog sat on the log"),
            keyword_terms("a cat and a dog"),
        ];
        let scores = bm25(&docs, &keyword_terms("cat mat"));
        let best = scores.iter().max_by(|a, b| a.1.total_cmp(&b.1)).unwrap();
        assert_eq!(best.0, 0);
    }

    #[tokio::test]
    async fn insert_new_content_skips_the_agents_active_copy_in_the_same_project() {
        let store = InMemoryMemoryStore::new();
        let now = Utc::now();
        let stored = |memory: &Memory| StoredMemory::new(memory.clone(), vec![1.0]);
        let held = memory_fixture("alice", "Deploy with ./deploy.sh", now);
        store.insert(&[stored(&held)]).await.unwrap();
        let same = memory_fixture("alice", "deploy with ./deploy.sh.", now);
        let other_agent = memory_fixture("bob", "Deploy with ./deploy.sh", now);
        let mut in_project = memory_fixture("alice", "Deploy with ./deploy.sh", now);
        in_project.project_id = Some(crate::projects::ProjectId::parse("apollo").unwrap());
        let skipped = store
            .insert_new_content(&[
                stored(&same),
                stored(&other_agent),
                stored(&in_project),
                stored(&held),
            ])
            .await
            .unwrap();
        assert_eq!(skipped, vec![(same.id.clone(), held.id.clone())]);
        assert!(store.get(&same.id).await.unwrap().is_none());
        assert_eq!(store.count().await.unwrap(), 3);
    }

    #[tokio::test]
    async fn store_update_archives_previous_version_and_checks_races() {
        let store = InMemoryMemoryStore::new();
        let now = Utc::now();
        let memory = memory_fixture("alice", "I live in Paris", now);
        store
            .insert(&[StoredMemory::new(memory.clone(), vec![1.0])])
            .await
            .unwrap();
        // Inserting the same id again is a no-op.
        store
            .insert(&[StoredMemory::new(memory.clone(), vec![0.0])])
            .await
            .unwrap();
        let previous = crate::model::version_of(&memory, "update", now);
        let mut next = memory.clone();
        next.content = "I live in Tokyo".into();
        next.version = 2;
        store.update(&next, &previous, None).await.unwrap();
        assert_eq!(
            store.history(&memory.id).await.unwrap()[0].content,
            "I live in Paris"
        );
        let stale = store.update(&next, &previous, None).await.unwrap_err();
        assert_eq!(stale.code, crate::error::ErrorCode::Conflict);
    }
}

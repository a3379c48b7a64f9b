//! [`MemoryStore`] on either SQL database: the system of record's memories, versions,
//! embeddings, run log, session archives and log, leases and outbox.
//!
//! Each operation is one statement or one transaction whose text is in `sql.rs`; what a
//! dialect does its own way (inserting with keyword terms, the keyword search, a few
//! spellings) comes from its [`Dialect`].

use std::collections::{HashMap, HashSet};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use mnemos_actors::error::{MemoryError, MemoryResult};
use mnemos_actors::model::{
    check_instant, AgentId, Association, ConsolidationRun, Memory, MemoryId, MemoryVersion,
    MessageRole, SessionId, SessionMessage, SessionRecord,
};
use mnemos_actors::store::{active_content_hashes, split_stored_content, StoredContent};
use mnemos_actors::store::{
    unknown_meta_key, ConsolidationCommit, EmbeddingRecord, IdleSession, KeywordQuery, ListQuery,
    MemoryStore, NextEmbedding, OutboxBounds, OutboxEntry, ReembedCounts, ReembedRow, RowStamp,
    SessionArchive, SessionCompaction, StoreCondition, StoredMemory, FORGET_REASONS, META_KEYS,
};

use super::dialect::{
    archive_versions, commit, one_row, raise_consolidated, rows, run, update_record, Dialect,
    SqlStore,
};
use super::rows::{self as map, Columns};
use super::sql::{self, id_texts, Arg, Statement};

/// `value` as a bound whole number (saturating: sequence numbers never reach it).
/// A memory's values both databases can keep, checked before anything is written:
/// PostgreSQL refuses NUL characters in text and JSON, SQLite could not read back an
/// instant outside the years 1 to 9999. Either is a 400 naming the field, on both
/// backends alike, never a backend error a client would retry.
fn storable(memory: &Memory) -> MemoryResult<()> {
    let text = |field: &str, value: &str| {
        if value.contains('\0') {
            Err(MemoryError::invalid(
                field,
                format!("{field} contains a NUL character, which cannot be stored"),
            ))
        } else {
            Ok(())
        }
    };
    text("content", &memory.content)?;
    if let Some(title) = &memory.title {
        text("title", title)?;
    }
    for tag in &memory.tags {
        text("tags", tag)?;
    }
    if memory.metadata.to_string().contains("\\u0000") {
        return Err(MemoryError::invalid(
            "metadata",
            "metadata contains a NUL character, which cannot be stored",
        ));
    }
    if let Some(source) = &memory.source {
        text("source.path", &source.path)?;
        text("source.hash", &source.hash)?;
    }
    for (field, at) in [
        ("occurred_at", memory.occurred_at),
        ("created_at", memory.created_at),
        ("updated_at", memory.updated_at),
        ("last_accessed_at", memory.last_accessed_at),
    ] {
        check_instant(field, at)?;
    }
    Ok(())
}

/// [`storable`] for each record.
fn all_storable<'a>(records: impl IntoIterator<Item = &'a StoredMemory>) -> MemoryResult<()> {
    records.into_iter().try_for_each(|r| storable(&r.memory))
}

fn whole(value: u64) -> Arg<'static> {
    Arg::Integer(i64::try_from(value).unwrap_or(i64::MAX))
}

impl<D: Dialect> SqlStore<D> {
    /// The [`RowStamp`] of each of `ids` that exists and reads cleanly.
    async fn row_stamps(&self, ids: &[MemoryId]) -> MemoryResult<Vec<(MemoryId, RowStamp)>> {
        let mut stamps = Vec::with_capacity(ids.len());
        for chunk in D::LISTS.chunks(ids, 500) {
            let mut statement = Statement::new(sql::STAMPS_WHERE, []);
            statement.push_in(D::LISTS, "id", id_texts(chunk));
            if let Some(found) = D::stamps_in_one_row(self, &statement).await {
                stamps.extend(found);
                continue;
            }
            // A row whose stamp does not read is left out: the cache reads it again whole,
            // tolerantly, like any row it does not hold.
            stamps.extend(self.rows(&statement).await?.iter().filter_map(|row| {
                let stamp = RowStamp {
                    version: u32::try_from(row.integer("version").ok()?).ok()?,
                    access_count: u32::try_from(row.integer("access_count").ok()?).ok()?,
                };
                Some((MemoryId(row.text("id").ok()?), stamp))
            }));
        }
        Ok(stamps)
    }
}

#[async_trait]
impl<D: Dialect> MemoryStore for SqlStore<D> {
    fn backend_name(&self) -> &'static str {
        D::STORE_NAME
    }

    fn keeps_edges(&self) -> bool {
        true
    }

    async fn check_embedding_model(&self, model_id: &str, dimension: usize) -> MemoryResult<()> {
        D::check_embedding_model(self, model_id, dimension).await
    }

    async fn insert(&self, records: &[StoredMemory]) -> MemoryResult<()> {
        all_storable(records)?;
        let mut tx = self.write_transaction().await?;
        D::insert_records(&mut tx, &records.iter().collect::<Vec<_>>()).await?;
        commit(tx).await?;
        D::inserted(self, records.len() as u64);
        Ok(())
    }

    async fn insert_new_content(
        &self,
        records: &[StoredMemory],
    ) -> MemoryResult<Vec<(MemoryId, MemoryId)>> {
        all_storable(records)?;
        // Under the write lock: a process writing the same content at once waits, then
        // finds this one's row, so nothing can store it between the check and the write.
        let mut tx = self.write_transaction().await?;
        let mut stored = Vec::new();
        for (agent, hashes) in active_content_hashes(records) {
            for chunk in D::LISTS.chunks(&hashes, 400) {
                let mut statement =
                    Statement::new(sql::ACTIVE_CONTENT, [Arg::Text(agent.as_str())]);
                statement.push_in(D::LISTS, "content_hash", chunk.iter().map(String::as_str));
                for row in rows::<D>(&mut tx, &statement).await? {
                    let key = (
                        row.text("id")?,
                        row.text("content_hash")?,
                        row.optional_text("project_id")?,
                    );
                    stored.push(StoredContent::from_row(&agent, key)?);
                }
            }
        }
        let (fresh, duplicates) = split_stored_content(records, &stored);
        D::insert_records(&mut tx, &fresh).await?;
        commit(tx).await?;
        D::inserted(self, fresh.len() as u64);
        Ok(duplicates)
    }

    async fn get(&self, id: &MemoryId) -> MemoryResult<Option<Memory>> {
        let statement = Statement::new(sql::MEMORY, [Arg::Text(id.as_str())]);
        self.first_readable(&statement, "memories", map::memory_key, map::memory)
            .await
    }

    async fn find_by_content_hash(
        &self,
        agent: &AgentId,
        hashes: &[String],
    ) -> MemoryResult<Vec<(String, Memory)>> {
        let mut found = Vec::new();
        for chunk in D::LISTS.chunks(hashes, 400) {
            let mut statement = Statement::new(sql::ACTIVE_BY_HASH, [Arg::Text(agent.as_str())]);
            statement.push_in(D::LISTS, "content_hash", chunk.iter().map(String::as_str));
            let read = |row: &D::Row| Ok((row.text("content_hash")?, map::memory(row)?));
            found.extend(
                self.all_readable(&statement, "memories", map::memory_key, read)
                    .await?,
            );
        }
        Ok(found)
    }

    async fn session_neighbours(
        &self,
        memory: &Memory,
        radius: usize,
    ) -> MemoryResult<Vec<MemoryId>> {
        let Some(session) = &memory.session_id else {
            return Ok(Vec::new());
        };
        let statement = Statement::new(
            sql::SESSION_NEIGHBOURS,
            [
                Arg::Text(memory.agent_id.as_str()),
                Arg::Text(session.as_str()),
                Arg::Text(memory.id.as_str()),
                Arg::Integer(radius as i64),
            ],
        );
        let ids = self
            .rows(&statement)
            .await?
            .iter()
            .map(|row| row.text("id"))
            .collect::<MemoryResult<Vec<String>>>()?;
        // Before first (nearest first), then after (nearest first). Ids compare as
        // bytes in both databases (SQLite's BINARY, PostgreSQL's "C" collation).
        let (mut before, mut after): (Vec<String>, Vec<String>) = ids
            .into_iter()
            .partition(|id| id.as_str() < memory.id.as_str());
        before.sort_by(|a, b| b.cmp(a));
        after.sort();
        Ok(before.into_iter().chain(after).map(MemoryId).collect())
    }

    async fn session_neighbours_of(
        &self,
        seeds: &[Memory],
        radius: usize,
    ) -> MemoryResult<Vec<(MemoryId, MemoryId)>> {
        let in_sessions: Vec<&Memory> = seeds.iter().filter(|m| m.session_id.is_some()).collect();
        if in_sessions.is_empty() || radius == 0 {
            return Ok(Vec::new());
        }
        // Each seed's neighbours: those before it and those after it.
        let mut found: HashMap<String, (Vec<String>, Vec<String>)> = HashMap::new();
        for chunk in in_sessions.chunks(sql::SESSION_NEIGHBOUR_SEEDS) {
            let statement = sql::session_neighbours(chunk, radius);
            for row in self.rows(&statement).await? {
                let (seed, id) = (row.text("seed")?, row.text("id")?);
                let sides = found.entry(seed.clone()).or_default();
                // Ids compare as bytes in both databases (SQLite's BINARY, PostgreSQL's
                // "C" collation), as in `session_neighbours`.
                if id < seed {
                    sides.0.push(id);
                } else {
                    sides.1.push(id);
                }
            }
        }
        let mut pairs = Vec::new();
        for seed in &in_sessions {
            let Some((mut before, mut after)) = found.remove(seed.id.as_str()) else {
                continue;
            };
            // A seed named twice in `seeds` answers its rows twice.
            before.sort_by(|a, b| b.cmp(a));
            before.dedup();
            after.sort();
            after.dedup();
            pairs.extend(
                before
                    .into_iter()
                    .chain(after)
                    .map(|id| (seed.id.clone(), MemoryId(id))),
            );
        }
        Ok(pairs)
    }

    async fn get_many(&self, ids: &[MemoryId]) -> MemoryResult<Vec<Memory>> {
        let mut memories = Vec::with_capacity(ids.len());
        for chunk in D::LISTS.chunks(ids, 500) {
            let mut statement = Statement::new(sql::MEMORIES_WHERE, []);
            statement.push_in(D::LISTS, "id", id_texts(chunk));
            if let Some(found) = D::memories_in_one_row(self, &statement).await {
                memories.extend(found);
                continue;
            }
            memories.extend(
                self.all_readable(&statement, "memories", map::memory_key, map::memory)
                    .await?,
            );
        }
        Ok(memories)
    }

    async fn stamps_and_memories(
        &self,
        held: &[MemoryId],
        missing: &[MemoryId],
    ) -> MemoryResult<(Vec<(MemoryId, RowStamp)>, Vec<Memory>)> {
        if held.is_empty() || missing.is_empty() {
            return Ok((self.row_stamps(held).await?, self.get_many(missing).await?));
        }
        if held.len() + missing.len() <= 500 {
            if let Some(found) = D::stamps_and_memories_in_one_row(self, held, missing).await {
                return Ok(found);
            }
        }
        // One read rather than two: the held rows whole, their stamps taken from them.
        let all: Vec<MemoryId> = held.iter().chain(missing).cloned().collect();
        let held: HashSet<&MemoryId> = held.iter().collect();
        let (held_rows, missing_rows): (Vec<Memory>, Vec<Memory>) = self
            .get_many(&all)
            .await?
            .into_iter()
            .partition(|m| held.contains(&m.id));
        let stamps = held_rows
            .iter()
            .map(|m| (m.id.clone(), RowStamp::of(m)))
            .collect();
        Ok((stamps, missing_rows))
    }

    async fn list(&self, query: &ListQuery) -> MemoryResult<Vec<Memory>> {
        let statement = sql::list_memories(query, D::HAS_TAG, D::POSITION);
        self.all_readable(&statement, "memories", map::memory_key, map::memory)
            .await
    }

    async fn count_listed(&self, query: &ListQuery) -> MemoryResult<u64> {
        let statement = sql::count_listed(query, D::HAS_TAG, D::POSITION);
        let mut conn = self.connection().await?;
        let row = one_row::<D>(&mut conn, &statement).await?;
        Ok(row.integer("n")?.max(0) as u64)
    }

    async fn update(
        &self,
        next: &Memory,
        previous: &MemoryVersion,
        embedding: Option<&[f32]>,
    ) -> MemoryResult<()> {
        storable(next)?;
        let mut tx = self.write_transaction().await?;
        update_record::<D>(&mut tx, next, previous, embedding).await?;
        commit(tx).await
    }

    async fn delete(&self, id: &MemoryId) -> MemoryResult<bool> {
        let statement = Statement::new(sql::DELETE_MEMORY, [Arg::Text(id.as_str())]);
        Ok(self.run_alone(&statement).await? > 0)
    }

    async fn history(&self, id: &MemoryId) -> MemoryResult<Vec<MemoryVersion>> {
        let statement = Statement::new(sql::HISTORY, [Arg::Text(id.as_str())]);
        let key = |row: &D::Row| format!("{id}#{}", row.integer("version").unwrap_or(-1));
        self.all_readable(&statement, "memory_versions", key, map::version)
            .await
    }

    async fn keyword_search(&self, query: &KeywordQuery) -> MemoryResult<Vec<(MemoryId, f64)>> {
        D::keyword_search(self, query).await
    }

    async fn touch(&self, ids: &[MemoryId], at: DateTime<Utc>) -> MemoryResult<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let mut tx = self.write_transaction().await?;
        for chunk in D::LISTS.chunks(ids, 500) {
            let mut statement = Statement::new(
                format!(
                    "UPDATE memories SET access_count = access_count + 1, \
                     last_accessed_at = {}(last_accessed_at, $1) WHERE ",
                    D::GREATEST
                ),
                [Arg::Time(at)],
            );
            statement.push_in(D::LISTS, "id", id_texts(chunk));
            run::<D>(&mut tx, &statement).await?;
        }
        commit(tx).await
    }

    async fn agent_memories(&self, agent: &AgentId) -> MemoryResult<Vec<Memory>> {
        let statement = Statement::new(sql::AGENT_MEMORIES, [Arg::Text(agent.as_str())]);
        self.all_readable(&statement, "memories", map::memory_key, map::memory)
            .await
    }

    async fn agents(&self) -> MemoryResult<Vec<AgentId>> {
        let rows = self.rows(&Statement::new(sql::AGENTS, [])).await?;
        rows.iter()
            .map(|row| AgentId::stored(&row.text("agent_id")?))
            .collect()
    }

    async fn agent_summaries(&self) -> MemoryResult<Vec<mnemos_actors::model::AgentSummary>> {
        let statement = Statement::new(sql::AGENT_SUMMARIES, []);
        let key = |row: &D::Row| row.text("agent_id").unwrap_or_default();
        self.all_readable(&statement, "memories", key, map::agent_summary)
            .await
    }

    async fn agent_sessions(
        &self,
        agent: &AgentId,
        limit: usize,
    ) -> MemoryResult<Vec<SessionRecord>> {
        let statement = Statement::new(
            sql::AGENT_SESSIONS,
            [Arg::Text(agent.as_str()), Arg::Integer(limit as i64)],
        );
        let key = |row: &D::Row| format!("{agent}/{}", row.text("session_id").unwrap_or_default());
        self.all_readable(&statement, "sessions", key, |row| {
            let session = SessionId::parse(&row.text("session_id")?)?;
            map::session_record(row, agent, &session)
        })
        .await
    }

    async fn embedding(&self, id: &MemoryId) -> MemoryResult<Option<Vec<f32>>> {
        let statement = Statement::new(sql::EMBEDDING, [Arg::Text(id.as_str())]);
        self.row(&statement)
            .await?
            .map(|row| row.vector("vector"))
            .transpose()
    }

    async fn embeddings_page(
        &self,
        after: Option<&MemoryId>,
        limit: usize,
    ) -> MemoryResult<Vec<EmbeddingRecord>> {
        let statement = Statement::new(
            sql::EMBEDDINGS_PAGE,
            [
                Arg::Text(after.map(MemoryId::as_str).unwrap_or("")),
                Arg::Integer(limit as i64),
            ],
        );
        let key = |row: &D::Row| {
            row.text("memory_id")
                .or_else(|_| row.text("id"))
                .unwrap_or_default()
        };
        self.all_readable(&statement, "memories", key, map::embedding_record)
            .await
    }

    async fn meta(&self, key: &str) -> MemoryResult<Option<String>> {
        if !META_KEYS.contains(&key) {
            return Err(unknown_meta_key(key));
        }
        self.row(&Statement::new(sql::META, [Arg::Text(key)]))
            .await?
            .map(|row| row.text("value"))
            .transpose()
    }

    async fn set_meta(&self, key: &str, value: Option<&str>) -> MemoryResult<()> {
        if !META_KEYS.contains(&key) {
            return Err(unknown_meta_key(key));
        }
        let statement = match value {
            Some(value) => Statement::new(sql::SET_META, [Arg::Text(key), Arg::Text(value)]),
            None => Statement::new(sql::DELETE_META, [Arg::Text(key)]),
        };
        self.run_alone(&statement).await?;
        Ok(())
    }

    async fn reembed_page(
        &self,
        after: Option<&MemoryId>,
        limit: usize,
    ) -> MemoryResult<Vec<ReembedRow>> {
        let statement = Statement::new(
            sql::REEMBED_PAGE,
            [
                Arg::Text(after.map(MemoryId::as_str).unwrap_or("")),
                Arg::Integer(limit as i64),
            ],
        );
        let key = |row: &D::Row| row.text("id").unwrap_or_default();
        self.all_readable(&statement, "memories", key, |row| {
            Ok(ReembedRow {
                id: MemoryId(row.text("id")?),
                title: row.optional_text("title")?,
                content: row.text("content")?,
                next_hash: row.optional_text("source_hash")?,
            })
        })
        .await
    }

    async fn put_next_embeddings(&self, rows: &[NextEmbedding]) -> MemoryResult<()> {
        let mut tx = self.write_transaction().await?;
        for row in rows {
            let put = Statement::new(
                sql::PUT_NEXT_EMBEDDING,
                [
                    Arg::Text(row.id.as_str()),
                    Arg::Vector(&row.vector),
                    Arg::Text(&row.source_hash),
                ],
            );
            run::<D>(&mut tx, &put).await?;
        }
        commit(tx).await
    }

    async fn reembed_counts(&self) -> MemoryResult<ReembedCounts> {
        let mut conn = self.connection().await?;
        let row = one_row::<D>(&mut conn, &Statement::new(sql::REEMBED_COUNTS, [])).await?;
        Ok(ReembedCounts {
            total: row.integer("total")?.max(0) as u64,
            done: row.integer("done")?.max(0) as u64,
        })
    }

    async fn switch_embeddings(&self, model: &str, spec: &str) -> MemoryResult<u64> {
        let mut tx = self.write_transaction().await?;
        let missing = one_row::<D>(&mut tx, &Statement::new(sql::REEMBED_MISSING, []))
            .await?
            .integer("missing")?;
        if missing > 0 {
            return Err(MemoryError::conflict(format!(
                "{missing} memories have no vector of the new model yet"
            )));
        }
        let replaced = run::<D>(&mut tx, &Statement::new(sql::SWAP_IN_NEXT_EMBEDDINGS, [])).await?;
        run::<D>(&mut tx, &Statement::new(sql::CLEAR_NEXT_EMBEDDINGS, [])).await?;
        for (key, value) in [("embedding_model", model), ("embedding_spec", spec)] {
            run::<D>(
                &mut tx,
                &Statement::new(sql::SET_META, [Arg::Text(key), Arg::Text(value)]),
            )
            .await?;
        }
        run::<D>(
            &mut tx,
            &Statement::new(sql::DELETE_META, [Arg::Text("reembed_target")]),
        )
        .await?;
        commit(tx).await?;
        Ok(replaced)
    }

    async fn clear_next_embeddings(&self) -> MemoryResult<()> {
        self.run_alone(&Statement::new(sql::CLEAR_NEXT_EMBEDDINGS, []))
            .await?;
        Ok(())
    }

    async fn count(&self) -> MemoryResult<u64> {
        let mut conn = self.connection().await?;
        let row = one_row::<D>(&mut conn, &Statement::new(sql::COUNT_MEMORIES, [])).await?;
        Ok(row.integer("total")?.max(0) as u64)
    }

    async fn record_run(&self, run: &ConsolidationRun) -> MemoryResult<()> {
        self.run(&Statement::new(D::RECORD_RUN, sql::run_args(run)))
            .await?;
        Ok(())
    }

    async fn runs(
        &self,
        agent: Option<&AgentId>,
        limit: usize,
    ) -> MemoryResult<Vec<ConsolidationRun>> {
        let statement = sql::runs(agent, limit);
        self.all_readable(&statement, "consolidation_runs", map::memory_key, map::run)
            .await
    }

    async fn commit_consolidation(&self, commits: &[ConsolidationCommit]) -> MemoryResult<()> {
        for commit in commits {
            storable(&commit.derived.memory)?;
        }
        let mut tx = self.write_transaction().await?;
        // Sources first: a source changed since it was read fails the whole batch. Only
        // their level and bookkeeping change, so their keyword rows stay as they are.
        let sources: Vec<(&Memory, &MemoryVersion)> = commits
            .iter()
            .flat_map(|c| &c.sources)
            .map(|(next, previous)| (next, previous))
            .collect();
        raise_consolidated::<D>(&mut tx, &sources).await?;
        let versions: Vec<(&MemoryId, &MemoryVersion)> = sources
            .iter()
            .map(|(next, previous)| (&next.id, *previous))
            .collect();
        archive_versions::<D>(&mut tx, &versions).await?;
        let derived: Vec<&StoredMemory> = commits.iter().map(|c| &c.derived).collect();
        D::insert_records(&mut tx, &derived).await?;
        let edges: Vec<Association> = commits
            .iter()
            .flat_map(|c| c.edges.iter().cloned())
            .collect();
        for chunk in edges.chunks(sql::EDGES_PER_UPSERT) {
            D::execute(&mut tx, &sql::upsert_edges(chunk))
                .await
                .map_err(super::graph::edge_error::<D>)?;
        }
        commit(tx).await
    }

    async fn embeddings_of(&self, ids: &[MemoryId]) -> MemoryResult<Vec<(MemoryId, Vec<f32>)>> {
        let mut out = Vec::with_capacity(ids.len());
        for chunk in D::LISTS.chunks(ids, 500) {
            let mut statement = Statement::new(sql::EMBEDDINGS_WHERE, []);
            statement.push_in(D::LISTS, "memory_id", id_texts(chunk));
            for row in self.rows(&statement).await? {
                out.push((MemoryId(row.text("memory_id")?), row.vector("vector")?));
            }
        }
        Ok(out)
    }

    async fn purge_forgotten(
        &self,
        agent: &AgentId,
        archived_before: DateTime<Utc>,
    ) -> MemoryResult<Vec<MemoryId>> {
        let mut tx = self.write_transaction().await?;
        let forgotten = Statement::new(
            format!("{}{}", sql::FORGOTTEN, D::PURGE_ORDER),
            [
                Arg::Text(agent.as_str()),
                Arg::Bound(archived_before),
                Arg::Text(FORGET_REASONS[0]),
                Arg::Text(FORGET_REASONS[1]),
            ],
        );
        let ids = rows::<D>(&mut tx, &forgotten)
            .await?
            .iter()
            .map(|row| row.text("id"))
            .collect::<MemoryResult<Vec<String>>>()?;
        for chunk in ids.chunks(D::PURGE_CHUNK) {
            // Versions, embedding, edges and keyword terms go with them (cascades and trigger).
            let mut statement = Statement::new(sql::DELETE_MEMORIES_WHERE, []);
            statement.push_in(D::LISTS, "id", chunk.iter().map(String::as_str));
            run::<D>(&mut tx, &statement).await?;
        }
        commit(tx).await?;
        Ok(ids.into_iter().map(MemoryId).collect())
    }

    async fn erase_agent(
        &self,
        agent: &AgentId,
    ) -> MemoryResult<mnemos_actors::store::ErasedRecords> {
        let mut tx = self.write_transaction().await?;
        let by_agent = |sql: &'static str| Statement::new(sql, [Arg::Text(agent.as_str())]);
        let mut erased = mnemos_actors::store::ErasedRecords::default();
        let memories = rows::<D>(
            &mut tx,
            &by_agent("SELECT id, session_id FROM memories WHERE agent_id = $1"),
        )
        .await?;
        let mut sessions: Vec<String> = Vec::new();
        for row in &memories {
            erased.memory_ids.push(MemoryId(row.text("id")?));
            if let Some(session) = row.optional_text("session_id")? {
                if !sessions.contains(&session) {
                    sessions.push(session);
                }
            }
        }
        for row in rows::<D>(
            &mut tx,
            &by_agent(
                "SELECT session_id FROM sessions WHERE agent_id = $1 \
                 UNION SELECT session_id FROM session_archives WHERE agent_id = $1",
            ),
        )
        .await?
        {
            let session = row.text("session_id")?;
            if !sessions.contains(&session) {
                sessions.push(session);
            }
        }
        let count = |row: Option<&D::Row>| -> MemoryResult<u64> {
            Ok(row.map(|r| r.integer("n")).transpose()?.unwrap_or(0).max(0) as u64)
        };
        for (table, counted) in [
            ("memory_versions", &mut erased.versions),
            ("memory_embeddings", &mut erased.embeddings),
        ] {
            let statement = Statement::new(
                format!(
                    "SELECT COUNT(*) AS n FROM {table} WHERE memory_id IN \
                     (SELECT id FROM memories WHERE agent_id = $1)"
                ),
                [Arg::Text(agent.as_str())],
            );
            *counted = count(rows::<D>(&mut tx, &statement).await?.first())?;
        }
        // Edges first, so each leaves its own delete in the outbox for the graph
        // projection; last the outbox's upserts not yet projected, which carry the
        // agent's content (the deletes behind them are all a projection needs).
        let (mut archives, mut attachments, mut upserts, mut mentions, mut model_answers) =
            (0u64, 0u64, 0u64, 0u64, 0u64);
        for (statement, removed) in [
            (
                "DELETE FROM associations WHERE agent_id = $1",
                &mut erased.edges,
            ),
            (
                "DELETE FROM memories WHERE agent_id = $1",
                &mut erased.memories,
            ),
            (
                "DELETE FROM session_messages WHERE agent_id = $1",
                &mut erased.session_messages,
            ),
            (
                "DELETE FROM sessions WHERE agent_id = $1",
                &mut erased.sessions,
            ),
            (
                "DELETE FROM session_archives WHERE agent_id = $1",
                &mut archives,
            ),
            (
                "DELETE FROM project_sessions WHERE agent_id = $1",
                &mut attachments,
            ),
            (
                "DELETE FROM projects WHERE agent_id = $1",
                &mut erased.projects,
            ),
            (
                "DELETE FROM consolidation_runs WHERE agent_id = $1",
                &mut erased.runs,
            ),
            (
                "DELETE FROM kv_entries WHERE written_by = $1",
                &mut erased.kv_entries,
            ),
            (
                "DELETE FROM outbox WHERE agent_id = $1 AND op = 'upsert'",
                &mut upserts,
            ),
            (
                "DELETE FROM entity_facts WHERE agent_id = $1",
                &mut erased.facts,
            ),
            (
                "DELETE FROM entity_merges WHERE agent_id = $1",
                &mut erased.entity_merges,
            ),
            (
                "DELETE FROM entity_model_answers WHERE agent_id = $1",
                &mut model_answers,
            ),
            (
                "DELETE FROM entity_mentions WHERE agent_id = $1",
                &mut mentions,
            ),
            (
                "DELETE FROM entities WHERE agent_id = $1",
                &mut erased.entities,
            ),
        ] {
            *removed = run::<D>(&mut tx, &by_agent(statement)).await?;
        }
        commit(tx).await?;
        erased.session_ids = sessions
            .into_iter()
            .filter_map(|s| SessionId::parse(&s).ok())
            .collect();
        Ok(erased)
    }

    async fn idle_sessions(
        &self,
        idle_before: DateTime<Utc>,
        limit: usize,
    ) -> MemoryResult<Vec<IdleSession>> {
        let statement = Statement::new(
            sql::idle_sessions(D::NOT_ARCHIVE_SUMMARY),
            [Arg::Bound(idle_before), Arg::Integer(limit as i64)],
        );
        let key = |row: &D::Row| {
            format!(
                "{}/{}",
                row.text("agent_id").unwrap_or_default(),
                row.text("session_id").unwrap_or_default()
            )
        };
        self.all_readable(
            &statement,
            "memories (idle session)",
            key,
            map::idle_session,
        )
        .await
    }

    async fn session_memories(
        &self,
        agent: &AgentId,
        session: &SessionId,
    ) -> MemoryResult<Vec<Memory>> {
        let statement = Statement::new(
            sql::SESSION_MEMORIES,
            [Arg::Text(agent.as_str()), Arg::Text(session.as_str())],
        );
        self.all_readable(&statement, "memories", map::memory_key, map::memory)
            .await
    }

    async fn commit_session_archive(&self, archive: &SessionArchive) -> MemoryResult<bool> {
        storable(&archive.summary.memory)?;
        let mut tx = self.write_transaction().await?;
        let mark = Statement::new(
            sql::MARK_SESSION_ARCHIVED,
            [
                Arg::Text(archive.agent_id.as_str()),
                Arg::Text(archive.session_id.as_str()),
                Arg::Time(archive.archived_through),
                Arg::Text(archive.summary.memory.id.as_str()),
            ],
        );
        if run::<D>(&mut tx, &mark).await? == 0 {
            return Ok(false);
        }
        D::insert_records(&mut tx, &[&archive.summary]).await?;
        commit(tx).await?;
        Ok(true)
    }

    fn keeps_outbox(&self) -> bool {
        true
    }

    async fn outbox_after(&self, after: u64, limit: usize) -> MemoryResult<Vec<OutboxEntry>> {
        let statement = Statement::new(
            sql::OUTBOX_AFTER,
            [whole(after), Arg::Integer(limit as i64)],
        );
        self.all(&statement, map::outbox_entry).await
    }

    async fn outbox_bounds(&self) -> MemoryResult<OutboxBounds> {
        let mut conn = self.connection().await?;
        let row = one_row::<D>(&mut conn, &Statement::new(D::OUTBOX_BOUNDS, [])).await?;
        Ok(OutboxBounds {
            oldest: row.optional_integer("oldest")?.map(|s| s.max(0) as u64),
            head: row.integer("head")?.max(0) as u64,
        })
    }

    async fn outbox_committed_head(&self) -> MemoryResult<u64> {
        D::outbox_committed_head(self).await
    }

    async fn trim_outbox(&self, through: u64) -> MemoryResult<usize> {
        let deleted = self
            .run(&Statement::new(sql::TRIM_OUTBOX, [whole(through)]))
            .await?;
        Ok(deleted as usize)
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
        if content.contains('\0') {
            return Err(MemoryError::invalid(
                "content",
                "content contains a NUL character, which cannot be stored",
            ));
        }
        check_instant("at", at)?;
        let mut tx = self.session_transaction().await?;
        let next = Statement::new(
            sql::append_session(D::GREATEST),
            [
                Arg::Text(agent.as_str()),
                Arg::Text(session.as_str()),
                Arg::Integer(i64::from(tokens)),
                Arg::Time(at),
            ],
        );
        let seq = one_row::<D>(&mut tx, &next).await?.integer("last_seq")?;
        let message = Statement::new(
            sql::INSERT_SESSION_MESSAGE,
            [
                Arg::Text(agent.as_str()),
                Arg::Text(session.as_str()),
                Arg::Integer(seq),
                Arg::Text(role.as_str()),
                Arg::Text(content),
                Arg::Integer(i64::from(tokens)),
                Arg::Time(at),
            ],
        );
        run::<D>(&mut tx, &message).await?;
        commit(tx).await?;
        Ok(SessionMessage {
            seq: seq as u64,
            role,
            content: content.to_string(),
            tokens,
            at,
        })
    }

    async fn session_record(
        &self,
        agent: &AgentId,
        session: &SessionId,
    ) -> MemoryResult<Option<SessionRecord>> {
        let statement = Statement::new(
            sql::SESSION_RECORD,
            [Arg::Text(agent.as_str()), Arg::Text(session.as_str())],
        );
        let key = |_: &D::Row| format!("{agent}/{}", session.as_str());
        self.first_readable(&statement, "sessions", key, |row| {
            map::session_record(row, agent, session)
        })
        .await
    }

    async fn session_messages_after(
        &self,
        agent: &AgentId,
        session: &SessionId,
        after: u64,
    ) -> MemoryResult<Vec<SessionMessage>> {
        let statement = Statement::new(
            sql::SESSION_MESSAGES_AFTER,
            [
                Arg::Text(agent.as_str()),
                Arg::Text(session.as_str()),
                whole(after),
            ],
        );
        let key = |row: &D::Row| {
            format!(
                "{agent}/{}#{}",
                session.as_str(),
                row.integer("seq").unwrap_or(-1)
            )
        };
        self.all_readable(&statement, "session_messages", key, map::session_message)
            .await
    }

    async fn commit_session_compaction(
        &self,
        compaction: &SessionCompaction,
    ) -> MemoryResult<bool> {
        storable(&compaction.archive.memory)?;
        let mut tx = self.write_transaction().await?;
        let mark = Statement::new(
            sql::COMPACT_SESSION,
            [
                whole(compaction.through),
                Arg::Text(&compaction.summary),
                Arg::Time(compaction.at),
                Arg::Text(compaction.agent_id.as_str()),
                Arg::Text(compaction.session_id.as_str()),
            ],
        );
        if run::<D>(&mut tx, &mark).await? == 0 {
            return Ok(false);
        }
        D::insert_records(&mut tx, &[&compaction.archive]).await?;
        commit(tx).await?;
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
        let statement = Statement::new(
            sql::ACQUIRE_LEASE,
            [
                Arg::Text(job),
                Arg::Text(holder),
                Arg::Time(expires_at),
                Arg::Time(slot),
                Arg::Time(now),
            ],
        );
        Ok(self.run(&statement).await? > 0)
    }

    async fn renew_lease(
        &self,
        job: &str,
        holder: &str,
        expires_at: DateTime<Utc>,
    ) -> MemoryResult<bool> {
        let statement = Statement::new(
            sql::SET_LEASE_EXPIRY,
            [Arg::Time(expires_at), Arg::Text(job), Arg::Text(holder)],
        );
        Ok(self.run(&statement).await? > 0)
    }

    async fn release_lease(&self, job: &str, holder: &str, now: DateTime<Utc>) -> MemoryResult<()> {
        let statement = Statement::new(
            sql::SET_LEASE_EXPIRY,
            [Arg::Time(now), Arg::Text(job), Arg::Text(holder)],
        );
        self.run(&statement).await?;
        Ok(())
    }

    async fn flush(&self) -> MemoryResult<()> {
        D::flush(self).await
    }

    async fn export_sessions(&self, agent: &AgentId) -> MemoryResult<Vec<SessionRecord>> {
        super::transfer::agent_sessions(self, agent).await
    }

    async fn clear_session(
        &self,
        agent: &AgentId,
        session: &SessionId,
    ) -> MemoryResult<(Vec<MemoryId>, u64)> {
        super::transfer::clear_session(self, agent, session).await
    }

    async fn transfer_agents(&self) -> MemoryResult<Vec<AgentId>> {
        super::transfer::agents(self).await
    }

    async fn transfer_counts(
        &self,
        agent: &AgentId,
    ) -> MemoryResult<mnemos_actors::transfer::TransferCounts> {
        super::transfer::counts(self, agent).await
    }

    async fn export_agent(
        &self,
        agent: &AgentId,
        with_embeddings: bool,
    ) -> MemoryResult<mnemos_actors::transfer::AgentTransfer> {
        super::transfer::export_agent(self, agent, with_embeddings).await
    }

    async fn export_namespaces(
        &self,
    ) -> MemoryResult<Vec<mnemos_actors::transfer::NamespaceTransfer>> {
        super::transfer::namespaces(self).await
    }

    async fn export_kv_entries(
        &self,
        namespace: &mnemos_actors::kv::NamespaceName,
        writer: Option<&AgentId>,
    ) -> MemoryResult<Vec<mnemos_actors::kv::KvEntry>> {
        super::transfer::kv_entries(self, namespace, writer).await
    }

    async fn memory_owners(&self, ids: &[MemoryId]) -> MemoryResult<Vec<(MemoryId, AgentId)>> {
        super::transfer::owners(self, ids).await
    }

    async fn import_records(
        &self,
        records: &[mnemos_actors::transfer::TransferRecord],
    ) -> MemoryResult<Vec<mnemos_actors::transfer::ImportOutcome>> {
        super::transfer::import(self, records).await
    }

    async fn condition(&self) -> StoreCondition {
        let probe = async {
            self.rows(&Statement::new("SELECT 1 AS one", []))
                .await
                .map(|_| ())
        };
        let unreachable = match tokio::time::timeout(PROBE_TIMEOUT, probe).await {
            Ok(Ok(())) => None,
            Ok(Err(error)) => Some(error.message),
            Err(_) => Some(format!(
                "the database did not answer a probe within {PROBE_TIMEOUT:?}"
            )),
        };
        StoreCondition {
            unreachable,
            unreadable: self.unreadable.list(),
        }
    }
}

/// How long `/health`'s probe of the database may take before it is reported down.
const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

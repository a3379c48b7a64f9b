//! The embedded system of record: SQLite through sqlx (WAL, foreign keys, FTS5).
//!
//! One [`SqliteStore`] implements both [`MemoryStore`] and [`GraphStore`]: association
//! edges reference memories with `ON DELETE CASCADE`, so deleting a memory can never
//! leave an edge behind.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, SecondsFormat, Utc};
use mnemos_actors::error::{MemoryError, MemoryResult};
use mnemos_actors::model::{
    AgentId, Association, ConsolidationRun, Memory, MemoryId, MemoryStatus, MemoryType,
    MemoryVersion, MessageRole, SessionId, SessionMessage, SessionRecord, SourceRef,
};
use mnemos_actors::policy::consistency::normalized_hash;
use mnemos_actors::store::{active_content_hashes, split_stored_content, StoredContent};
use mnemos_actors::store::{
    ConsolidationCommit, EmbeddingRecord, GraphStore, IdleSession, KeywordQuery, ListQuery,
    MemoryStore, OutboxBounds, OutboxEntry, ProjectedChange, SessionArchive, SessionCompaction,
    StoredMemory, FORGET_REASONS,
};
use mnemos_actors::text::{keyword_terms, KEYWORD_TERMS_VERSION};

use super::keyword::{bm25, fold, idf};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};
use sqlx::{QueryBuilder, Row, Sqlite, SqliteConnection};
use std::collections::HashMap;

mod namespaces;

/// The migrations of the SQLite schema, embedded in the binary.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

/// SQLite-backed store.
#[derive(Clone, Debug)]
pub struct SqliteStore {
    /// Connection pool (WAL lets readers run beside the one writer).
    pool: SqlitePool,
}

const MEMORY_COLUMNS: &str = "id, agent_id, memory_type, content, title, importance, tags, session_id, occurred_at, \
     created_at, updated_at, last_accessed_at, access_count, consolidation_level, valence, arousal, status, shared, \
     metadata, source_path, source_hash, version, project_id";

/// The columns written on insert: [`MEMORY_COLUMNS`] plus the derived content hash.
const INSERT_COLUMNS: &str = "id, agent_id, memory_type, content, title, importance, tags, session_id, occurred_at, \
     created_at, updated_at, last_accessed_at, access_count, consolidation_level, valence, arousal, status, shared, \
     metadata, source_path, source_hash, version, content_hash, project_id";

fn backend_error(error: sqlx::Error) -> MemoryError {
    MemoryError::unavailable(format!("sqlite: {error}"))
}

/// Fixed-width RFC 3339 so text order is time order.
pub fn format_time(time: &DateTime<Utc>) -> String {
    time.to_rfc3339_opts(SecondsFormat::Micros, true)
}

fn parse_time(raw: &str) -> MemoryResult<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(raw)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| MemoryError::internal(format!("corrupt timestamp {raw:?} in store: {e}")))
}

fn vector_to_blob(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn blob_to_vector(blob: &[u8]) -> Vec<f32> {
    blob.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn memory_from_row(row: &SqliteRow) -> MemoryResult<Memory> {
    let get_err = |e: sqlx::Error| MemoryError::internal(format!("corrupt memory row: {e}"));
    let tags: String = row.try_get("tags").map_err(get_err)?;
    let metadata: String = row.try_get("metadata").map_err(get_err)?;
    let memory_type: String = row.try_get("memory_type").map_err(get_err)?;
    let status: String = row.try_get("status").map_err(get_err)?;
    let session_id: Option<String> = row.try_get("session_id").map_err(get_err)?;
    let source_path: Option<String> = row.try_get("source_path").map_err(get_err)?;
    let source_hash: Option<String> = row.try_get("source_hash").map_err(get_err)?;
    let agent: String = row.try_get("agent_id").map_err(get_err)?;
    let project_id: Option<String> = row.try_get("project_id").map_err(get_err)?;
    Ok(Memory {
        id: MemoryId(row.try_get("id").map_err(get_err)?),
        agent_id: AgentId::parse(&agent)?,
        memory_type: MemoryType::parse("type", &memory_type)?,
        content: row.try_get("content").map_err(get_err)?,
        title: row.try_get("title").map_err(get_err)?,
        importance: row.try_get::<f64, _>("importance").map_err(get_err)? as f32,
        tags: serde_json::from_str(&tags)
            .map_err(|e| MemoryError::internal(format!("corrupt tags: {e}")))?,
        session_id: session_id.as_deref().map(SessionId::parse).transpose()?,
        project_id: project_id
            .as_deref()
            .map(mnemos_actors::projects::ProjectId::parse)
            .transpose()?,
        occurred_at: parse_time(row.try_get("occurred_at").map_err(get_err)?)?,
        created_at: parse_time(row.try_get("created_at").map_err(get_err)?)?,
        updated_at: parse_time(row.try_get("updated_at").map_err(get_err)?)?,
        last_accessed_at: parse_time(row.try_get("last_accessed_at").map_err(get_err)?)?,
        access_count: row
            .try_get::<i64, _>("access_count")
            .map_err(get_err)?
            .max(0) as u32,
        consolidation_level: row
            .try_get::<f64, _>("consolidation_level")
            .map_err(get_err)? as f32,
        valence: row
            .try_get::<Option<f64>, _>("valence")
            .map_err(get_err)?
            .map(|v| v as f32),
        arousal: row
            .try_get::<Option<f64>, _>("arousal")
            .map_err(get_err)?
            .map(|v| v as f32),
        status: MemoryStatus::parse("status", &status)?,
        shared: row.try_get::<i64, _>("shared").map_err(get_err)? != 0,
        metadata: serde_json::from_str(&metadata)
            .map_err(|e| MemoryError::internal(format!("corrupt metadata: {e}")))?,
        source: match (source_path, source_hash) {
            (Some(path), Some(hash)) => Some(SourceRef { path, hash }),
            _ => None,
        },
        version: row.try_get::<i64, _>("version").map_err(get_err)?.max(0) as u32,
    })
}

/// Quote a term for an FTS5 query (doubling embedded quotes).
fn fts_quote(term: &str) -> String {
    format!("\"{}\"", term.replace('"', "\"\""))
}

/// The term form recorded beside the keyword index, if any.
async fn keyword_terms_recorded<'e, E>(executor: E) -> MemoryResult<Option<String>>
where
    E: sqlx::Executor<'e, Database = Sqlite>,
{
    sqlx::query_scalar("SELECT value FROM store_meta WHERE key = 'keyword_terms'")
        .fetch_optional(executor)
        .await
        .map_err(backend_error)
}

/// The row count and total length of FTS5's averages record (its `%_data` row 1: SQLite
/// varints, the row count first, then one total per column; `memories_fts` has one).
fn fts5_averages(block: &[u8]) -> Option<(i64, i64)> {
    let (rows, used) = sqlite_varint(block)?;
    let (tokens, _) = sqlite_varint(block.get(used..)?)?;
    Some((i64::try_from(rows).ok()?, i64::try_from(tokens).ok()?))
}

/// One SQLite varint: big-endian groups of 7 bits, the high bit set on every byte but
/// the last; a ninth byte contributes all 8 bits. Returns the value and bytes used.
fn sqlite_varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value: u64 = 0;
    for (index, byte) in bytes.iter().enumerate().take(9) {
        if index == 8 {
            return Some(((value << 8) | u64::from(*byte), 9));
        }
        value = (value << 7) | u64::from(byte & 0x7f);
        if byte & 0x80 == 0 {
            return Some((value, index + 1));
        }
    }
    None
}

/// Prefix of the shared pool's copies of search terms (not a possible agent prefix: those start with `a`).
pub(crate) const SHARED_TERM_PREFIX: &str = "sharedpol";

/// Prefix of an agent's search terms: `a` + 8 hex digits of a stable hash of the id.
/// A collision only merges two agents' posting lists; searches still filter by agent.
pub(crate) fn agent_term_prefix(agent: &AgentId) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in agent.as_str().bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("a{:08x}", hash as u32)
}

/// The FTS row of a memory: its title and content terms under its agent's prefix,
/// and again under the shared prefix when the memory is shared.
fn fts_terms(memory: &Memory) -> String {
    let text = match &memory.title {
        Some(title) => format!("{title} {}", memory.content),
        None => memory.content.clone(),
    };
    let terms = keyword_terms(&text);
    let prefix = agent_term_prefix(&memory.agent_id);
    let mut out = String::with_capacity(text.len() * 2);
    for term in &terms {
        out.push_str(&prefix);
        out.push_str(term);
        out.push(' ');
    }
    if memory.shared {
        for term in &terms {
            out.push_str(SHARED_TERM_PREFIX);
            out.push_str(term);
            out.push(' ');
        }
    }
    out
}

/// Insert memories with their embeddings and keyword terms inside a transaction;
/// ids already stored are skipped whole (idempotent retries).
/// `SELECT <columns>` of `agent`'s active memories whose content hash is one of `hashes`.
fn active_with_hashes(columns: &str, agent: &AgentId, hashes: &[String]) -> QueryBuilder<Sqlite> {
    let mut builder: QueryBuilder<Sqlite> = QueryBuilder::new(format!(
        "SELECT {columns} FROM memories WHERE status = 'active' AND agent_id = "
    ));
    builder
        .push_bind(agent.as_str())
        .push(" AND content_hash IN (");
    let mut separated = builder.separated(", ");
    for hash in hashes {
        separated.push_bind(hash.as_str());
    }
    builder.push(")");
    builder
}

async fn insert_records(conn: &mut SqliteConnection, records: &[StoredMemory]) -> MemoryResult<()> {
    // Ids already stored (a retried request) are skipped whole: nothing of theirs is written twice.
    let mut existing = std::collections::HashSet::new();
    for chunk in records.chunks(500) {
        let mut builder: QueryBuilder<Sqlite> =
            QueryBuilder::new("SELECT id FROM memories WHERE id IN (");
        let mut separated = builder.separated(", ");
        for record in chunk {
            separated.push_bind(record.memory.id.as_str());
        }
        builder.push(")");
        let rows: Vec<(String,)> = builder
            .build_query_as()
            .fetch_all(&mut *conn)
            .await
            .map_err(backend_error)?;
        existing.extend(rows.into_iter().map(|(id,)| id));
    }
    let fresh: Vec<&StoredMemory> = records
        .iter()
        .filter(|r| !existing.contains(r.memory.id.as_str()))
        .collect();
    for chunk in fresh.chunks(200) {
        let mut builder: QueryBuilder<Sqlite> =
            QueryBuilder::new(format!("INSERT INTO memories ({INSERT_COLUMNS}) "));
        builder.push_values(chunk, |mut row, record| {
            let m = &record.memory;
            row.push_bind(m.id.as_str())
                .push_bind(m.agent_id.as_str())
                .push_bind(m.memory_type.as_str())
                .push_bind(m.content.as_str())
                .push_bind(m.title.as_deref())
                .push_bind(f64::from(m.importance))
                .push_bind(serde_json::to_string(&m.tags).unwrap_or_else(|_| "[]".into()))
                .push_bind(m.session_id.as_ref().map(|s| s.as_str()))
                .push_bind(format_time(&m.occurred_at))
                .push_bind(format_time(&m.created_at))
                .push_bind(format_time(&m.updated_at))
                .push_bind(format_time(&m.last_accessed_at))
                .push_bind(i64::from(m.access_count))
                .push_bind(f64::from(m.consolidation_level))
                .push_bind(m.valence.map(f64::from))
                .push_bind(m.arousal.map(f64::from))
                .push_bind(m.status.as_str())
                .push_bind(i64::from(m.shared))
                .push_bind(m.metadata.to_string())
                .push_bind(m.source.as_ref().map(|s| s.path.as_str()))
                .push_bind(m.source.as_ref().map(|s| s.hash.as_str()))
                .push_bind(i64::from(m.version))
                .push_bind(record.content_hash.as_str())
                .push_bind(m.project_id.as_ref().map(|p| p.as_str()));
        });
        builder
            .build()
            .execute(&mut *conn)
            .await
            .map_err(backend_error)?;
        let mut builder: QueryBuilder<Sqlite> =
            QueryBuilder::new("INSERT INTO memory_embeddings (memory_id, vector) ");
        builder.push_values(chunk, |mut row, record| {
            row.push_bind(record.memory.id.as_str())
                .push_bind(vector_to_blob(&record.embedding));
        });
        builder
            .build()
            .execute(&mut *conn)
            .await
            .map_err(backend_error)?;
        let active: Vec<&&StoredMemory> = chunk
            .iter()
            .filter(|r| r.memory.status == MemoryStatus::Active)
            .collect();
        if !active.is_empty() {
            let mut builder: QueryBuilder<Sqlite> =
                QueryBuilder::new("INSERT INTO memories_fts (rowid, terms) ");
            builder.push_values(active, |mut row, record| {
                row.push("(SELECT rowid FROM memories WHERE id = ")
                    .push_bind_unseparated(record.memory.id.as_str())
                    .push_unseparated(")")
                    .push_bind(fts_terms(&record.memory));
            });
            builder
                .build()
                .execute(&mut *conn)
                .await
                .map_err(backend_error)?;
        }
    }
    Ok(())
}

/// Replace a memory inside a transaction if its stored version is `previous.version`,
/// archiving `previous` and refreshing keyword terms (and the embedding when given).
async fn update_record(
    conn: &mut SqliteConnection,
    next: &Memory,
    previous: &MemoryVersion,
    embedding: Option<&[f32]>,
) -> MemoryResult<()> {
    let updated = sqlx::query(
            "UPDATE memories SET memory_type = ?, content = ?, title = ?, importance = ?, tags = ?, session_id = ?, \
             occurred_at = ?, updated_at = ?, last_accessed_at = ?, access_count = ?, consolidation_level = ?, \
             valence = ?, arousal = ?, status = ?, shared = ?, metadata = ?, source_path = ?, source_hash = ?, version = ?, content_hash = ?, project_id = ? \
             WHERE id = ? AND version = ?",
        )
        .bind(next.memory_type.as_str())
        .bind(&next.content)
        .bind(next.title.as_deref())
        .bind(f64::from(next.importance))
        .bind(serde_json::to_string(&next.tags).unwrap_or_else(|_| "[]".into()))
        .bind(next.session_id.as_ref().map(|s| s.as_str()))
        .bind(format_time(&next.occurred_at))
        .bind(format_time(&next.updated_at))
        .bind(format_time(&next.last_accessed_at))
        .bind(i64::from(next.access_count))
        .bind(f64::from(next.consolidation_level))
        .bind(next.valence.map(f64::from))
        .bind(next.arousal.map(f64::from))
        .bind(next.status.as_str())
        .bind(i64::from(next.shared))
        .bind(next.metadata.to_string())
        .bind(next.source.as_ref().map(|s| s.path.as_str()))
        .bind(next.source.as_ref().map(|s| s.hash.as_str()))
        .bind(i64::from(next.version))
        .bind(normalized_hash(&next.content))
        .bind(next.project_id.as_ref().map(|p| p.as_str()))
        .bind(next.id.as_str())
        .bind(i64::from(previous.version))
        .execute(&mut *conn)
        .await
        .map_err(backend_error)?;
    if updated.rows_affected() == 0 {
        let exists: Option<(i64,)> = sqlx::query_as("SELECT version FROM memories WHERE id = ?")
            .bind(next.id.as_str())
            .fetch_optional(&mut *conn)
            .await
            .map_err(backend_error)?;
        return Err(match exists {
                None => MemoryError::not_found(format!("memory {} does not exist", next.id)),
                Some((version,)) => MemoryError::conflict(format!(
                    "memory {} changed concurrently (expected version {}, found {version}); read it again and retry",
                    next.id, previous.version
                )),
            });
    }
    sqlx::query(
            "INSERT OR REPLACE INTO memory_versions (memory_id, version, content, importance, tags, status, archived_at, reason) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(next.id.as_str())
        .bind(i64::from(previous.version))
        .bind(&previous.content)
        .bind(f64::from(previous.importance))
        .bind(serde_json::to_string(&previous.tags).unwrap_or_else(|_| "[]".into()))
        .bind(previous.status.as_str())
        .bind(format_time(&previous.archived_at))
        .bind(&previous.reason)
        .execute(&mut *conn)
        .await
        .map_err(backend_error)?;
    sqlx::query("DELETE FROM memories_fts WHERE rowid = (SELECT rowid FROM memories WHERE id = ?)")
        .bind(next.id.as_str())
        .execute(&mut *conn)
        .await
        .map_err(backend_error)?;
    if next.status == MemoryStatus::Active {
        sqlx::query("INSERT INTO memories_fts (rowid, terms) VALUES ((SELECT rowid FROM memories WHERE id = ?), ?)")
                .bind(next.id.as_str())
                .bind(fts_terms(next))
                .execute(&mut *conn)
                .await
                .map_err(backend_error)?;
    }
    if let Some(embedding) = embedding {
        sqlx::query("INSERT OR REPLACE INTO memory_embeddings (memory_id, vector) VALUES (?, ?)")
            .bind(next.id.as_str())
            .bind(vector_to_blob(embedding))
            .execute(&mut *conn)
            .await
            .map_err(backend_error)?;
    }
    Ok(())
}

impl SqliteStore {
    /// Open (creating if needed) the database file at `path` and apply migrations.
    pub async fn open(path: &Path) -> MemoryResult<Self> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| {
                MemoryError::invalid(
                    "storage.path",
                    format!("cannot create directory {}: {e}", parent.display()),
                )
            })?;
        }
        let options = SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))
            .map_err(backend_error)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(10))
            .pragma("cache_size", "-8000")
            .pragma("temp_store", "memory");
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .min_connections(1)
            .connect_with(options)
            .await
            .map_err(|e| {
                MemoryError::unavailable(format!("cannot open {}: {e}", path.display()))
            })?;
        let store = Self { pool };
        store.migrate().await?;
        store.refresh_keyword_index().await?;
        Ok(store)
    }

    /// Re-derive the keyword index when it was written with another form of terms
    /// (`KEYWORD_TERMS_VERSION`, recorded in `store_meta`): after an upgrade that
    /// changes the terms, queries would otherwise miss what the old index spelled
    /// differently. One write transaction; a fresh database just records the version.
    async fn refresh_keyword_index(&self) -> MemoryResult<()> {
        // The usual case (index current) reads one row and takes no write lock.
        if keyword_terms_recorded(&self.pool).await?.as_deref() == Some(KEYWORD_TERMS_VERSION) {
            return Ok(());
        }
        let mut tx = self.write_transaction().await?;
        // Checked again under the lock: another process may have just done it.
        if keyword_terms_recorded(&mut *tx).await?.as_deref() == Some(KEYWORD_TERMS_VERSION) {
            return Ok(());
        }
        sqlx::query("DELETE FROM memories_fts")
            .execute(&mut *tx)
            .await
            .map_err(backend_error)?;
        let mut after: i64 = 0;
        let mut rewritten = 0usize;
        loop {
            let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT rowid, {MEMORY_COLUMNS} FROM memories \
                 WHERE status = 'active' AND rowid > ? ORDER BY rowid LIMIT 2000"
            )))
            .bind(after)
            .fetch_all(&mut *tx)
            .await
            .map_err(backend_error)?;
            let Some(last) = rows.last() else { break };
            after = last.try_get("rowid").map_err(backend_error)?;
            let mut builder: QueryBuilder<Sqlite> =
                QueryBuilder::new("INSERT INTO memories_fts (rowid, terms) ");
            let mut entries = Vec::with_capacity(rows.len());
            for row in &rows {
                let rowid: i64 = row.try_get("rowid").map_err(backend_error)?;
                entries.push((rowid, fts_terms(&memory_from_row(row)?)));
            }
            rewritten += entries.len();
            builder.push_values(entries, |mut row, (rowid, terms)| {
                row.push_bind(rowid).push_bind(terms);
            });
            builder
                .build()
                .execute(&mut *tx)
                .await
                .map_err(backend_error)?;
        }
        sqlx::query("INSERT OR REPLACE INTO store_meta (key, value) VALUES ('keyword_terms', ?)")
            .bind(KEYWORD_TERMS_VERSION)
            .execute(&mut *tx)
            .await
            .map_err(backend_error)?;
        tx.commit().await.map_err(backend_error)?;
        if rewritten > 0 {
            tracing::info!(
                memories = rewritten,
                terms = KEYWORD_TERMS_VERSION,
                "keyword index re-derived"
            );
        }
        Ok(())
    }

    /// Apply pending migrations.
    pub async fn migrate(&self) -> MemoryResult<()> {
        // Processes sharing one database file may start together; SQLite has no
        // migration lock, so the loser of that race retries and finds the work done.
        let mut attempt = 0;
        loop {
            match MIGRATOR.run(&self.pool).await {
                Ok(()) => return Ok(()),
                Err(error) if attempt < 5 => {
                    attempt += 1;
                    tracing::warn!(%error, attempt, "sqlite migrations raced another process; retrying");
                    tokio::time::sleep(Duration::from_millis(200 * attempt)).await;
                }
                Err(error) => {
                    return Err(MemoryError::unavailable(format!(
                        "sqlite migrations failed: {error}"
                    )))
                }
            }
        }
    }

    /// A write transaction that takes SQLite's write lock when it begins (`BEGIN
    /// IMMEDIATE`), so it waits its turn (up to the busy timeout) instead of failing with
    /// SQLITE_BUSY_SNAPSHOT when another writer commits between its first read and its
    /// first write.
    async fn write_transaction(&self) -> MemoryResult<sqlx::Transaction<'static, Sqlite>> {
        self.pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(backend_error)
    }

    /// The pool (for maintenance commands).
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// Close the pool.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

#[async_trait]
impl MemoryStore for SqliteStore {
    fn backend_name(&self) -> &'static str {
        "sqlite"
    }

    async fn check_embedding_model(&self, model_id: &str, dimension: usize) -> MemoryResult<()> {
        let stored: Option<(String,)> =
            sqlx::query_as("SELECT value FROM store_meta WHERE key = 'embedding_model'")
                .fetch_optional(&self.pool)
                .await
                .map_err(backend_error)?;
        let current = format!("{model_id}|{dimension}");
        match stored {
            Some((value,)) if value != current => {
                let (stored_model, stored_dimension) =
                    value.split_once('|').unwrap_or((value.as_str(), "?"));
                Err(MemoryError::invalid(
                    "embedding.provider",
                    format!(
                        "the data directory holds vectors of model {stored_model} ({stored_dimension} dimensions) but the configured embedder is {model_id} ({dimension} dimensions); use the original embedding settings, or a new data_dir"
                    ),
                ))
            }
            Some(_) => Ok(()),
            None => {
                sqlx::query(
                    "INSERT OR IGNORE INTO store_meta (key, value) VALUES ('embedding_model', ?)",
                )
                .bind(current)
                .execute(&self.pool)
                .await
                .map_err(backend_error)?;
                Ok(())
            }
        }
    }

    async fn insert(&self, records: &[StoredMemory]) -> MemoryResult<()> {
        let mut tx = self.write_transaction().await?;
        insert_records(&mut tx, records).await?;
        tx.commit().await.map_err(backend_error)
    }

    async fn insert_new_content(
        &self,
        records: &[StoredMemory],
    ) -> MemoryResult<Vec<(MemoryId, MemoryId)>> {
        // BEGIN IMMEDIATE: every writer of the file, in any process, waits its turn,
        // so nothing can store the same content between the check and the write.
        let mut tx = self.write_transaction().await?;
        let mut stored = Vec::new();
        for (agent, hashes) in active_content_hashes(records) {
            for chunk in hashes.chunks(400) {
                let rows: Vec<(String, String, Option<String>)> =
                    active_with_hashes("id, content_hash, project_id", &agent, chunk)
                        .build_query_as()
                        .fetch_all(&mut *tx)
                        .await
                        .map_err(backend_error)?;
                for row in rows {
                    stored.push(StoredContent::from_row(&agent, row)?);
                }
            }
        }
        let (fresh, duplicates) = split_stored_content(records, &stored);
        let fresh: Vec<StoredMemory> = fresh.into_iter().cloned().collect();
        insert_records(&mut tx, &fresh).await?;
        tx.commit().await.map_err(backend_error)?;
        Ok(duplicates)
    }

    async fn find_by_content_hash(
        &self,
        agent: &AgentId,
        hashes: &[String],
    ) -> MemoryResult<Vec<(String, Memory)>> {
        let mut found = Vec::new();
        for chunk in hashes.chunks(400) {
            let mut builder =
                active_with_hashes(&format!("{MEMORY_COLUMNS}, content_hash"), agent, chunk);
            let rows = builder
                .build()
                .fetch_all(&self.pool)
                .await
                .map_err(backend_error)?;
            for row in &rows {
                found.push((row.get::<String, _>("content_hash"), memory_from_row(row)?));
            }
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
        let rows: Vec<(String,)> = sqlx::query_as(
            "SELECT id FROM (SELECT id FROM memories WHERE agent_id = ?1 AND session_id = ?2 AND status = 'active' AND id < ?3 \
             ORDER BY id DESC LIMIT ?4) \
             UNION ALL SELECT id FROM (SELECT id FROM memories WHERE agent_id = ?1 AND session_id = ?2 AND status = 'active' AND id > ?3 \
             ORDER BY id LIMIT ?4)",
        )
        .bind(memory.agent_id.as_str())
        .bind(session.as_str())
        .bind(memory.id.as_str())
        .bind(radius as i64)
        .fetch_all(&self.pool)
        .await
        .map_err(backend_error)?;
        Ok(rows.into_iter().map(|(id,)| MemoryId(id)).collect())
    }

    async fn get(&self, id: &MemoryId) -> MemoryResult<Option<Memory>> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {MEMORY_COLUMNS} FROM memories WHERE id = ?"
        )))
        .bind(id.as_str())
        .fetch_optional(&self.pool)
        .await
        .map_err(backend_error)?;
        row.as_ref().map(memory_from_row).transpose()
    }

    async fn get_many(&self, ids: &[MemoryId]) -> MemoryResult<Vec<Memory>> {
        let mut memories = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(500) {
            let mut builder: QueryBuilder<Sqlite> = QueryBuilder::new(format!(
                "SELECT {MEMORY_COLUMNS} FROM memories WHERE id IN ("
            ));
            let mut separated = builder.separated(", ");
            for id in chunk {
                separated.push_bind(id.as_str());
            }
            builder.push(")");
            let rows = builder
                .build()
                .fetch_all(&self.pool)
                .await
                .map_err(backend_error)?;
            for row in &rows {
                memories.push(memory_from_row(row)?);
            }
        }
        Ok(memories)
    }

    async fn list(&self, query: &ListQuery) -> MemoryResult<Vec<Memory>> {
        let mut builder: QueryBuilder<Sqlite> =
            QueryBuilder::new(format!("SELECT {MEMORY_COLUMNS} FROM memories WHERE 1 = 1"));
        if let Some(agent) = &query.agent_id {
            builder.push(" AND agent_id = ").push_bind(agent.as_str());
        }
        if let Some(memory_type) = query.memory_type {
            builder
                .push(" AND memory_type = ")
                .push_bind(memory_type.as_str());
        }
        if let Some(status) = query.status {
            builder.push(" AND status = ").push_bind(status.as_str());
        }
        if let Some(tag) = &query.tag {
            builder
                .push(" AND EXISTS (SELECT 1 FROM json_each(memories.tags) WHERE value = ")
                .push_bind(tag.as_str())
                .push(")");
        }
        if let Some(cursor) = &query.cursor {
            builder.push(" AND id < ").push_bind(cursor.as_str());
        }
        if let Some(project) = &query.project_id {
            builder
                .push(" AND project_id = ")
                .push_bind(project.as_str());
        }
        match &query.occurred {
            Some(range) => {
                builder
                    .push(" AND occurred_at >= ")
                    .push_bind(format_time(&range.start))
                    .push(" AND occurred_at < ")
                    .push_bind(format_time(&range.end))
                    .push(" ORDER BY occurred_at DESC, id DESC LIMIT ");
            }
            None => {
                builder.push(" ORDER BY id DESC LIMIT ");
            }
        }
        builder.push_bind(query.limit as i64);
        let rows = builder
            .build()
            .fetch_all(&self.pool)
            .await
            .map_err(backend_error)?;
        rows.iter().map(memory_from_row).collect()
    }

    async fn update(
        &self,
        next: &Memory,
        previous: &MemoryVersion,
        embedding: Option<&[f32]>,
    ) -> MemoryResult<()> {
        let mut tx = self.write_transaction().await?;
        update_record(&mut tx, next, previous, embedding).await?;
        tx.commit().await.map_err(backend_error)
    }

    async fn delete(&self, id: &MemoryId) -> MemoryResult<bool> {
        let result = sqlx::query("DELETE FROM memories WHERE id = ?")
            .bind(id.as_str())
            .execute(&self.pool)
            .await
            .map_err(backend_error)?;
        Ok(result.rows_affected() > 0)
    }

    async fn history(&self, id: &MemoryId) -> MemoryResult<Vec<MemoryVersion>> {
        let rows = sqlx::query(
            "SELECT version, content, importance, tags, status, archived_at, reason FROM memory_versions \
             WHERE memory_id = ? ORDER BY version",
        )
        .bind(id.as_str())
        .fetch_all(&self.pool)
        .await
        .map_err(backend_error)?;
        rows.iter()
            .map(|row| {
                let tags: String = row.get("tags");
                let status: String = row.get("status");
                Ok(MemoryVersion {
                    version: row.get::<i64, _>("version") as u32,
                    content: row.get("content"),
                    importance: row.get::<f64, _>("importance") as f32,
                    tags: serde_json::from_str(&tags).unwrap_or_default(),
                    status: MemoryStatus::parse("status", &status)?,
                    archived_at: parse_time(row.get("archived_at"))?,
                    reason: row.get("reason"),
                })
            })
            .collect()
    }

    async fn keyword_search(&self, query: &KeywordQuery) -> MemoryResult<Vec<(MemoryId, f64)>> {
        let mut terms = keyword_terms(&query.text);
        terms.sort();
        terms.dedup();
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        let prefix = agent_term_prefix(&query.agent_id);
        let mut phrases: Vec<String> = terms
            .iter()
            .map(|t| fts_quote(&format!("{prefix}{t}")))
            .collect();
        if query.include_shared {
            phrases.extend(
                terms
                    .iter()
                    .map(|t| fts_quote(&format!("{SHARED_TERM_PREFIX}{t}"))),
            );
        }
        // The same phrases unquoted and folded as FTS5 folds them, to count them in a row.
        let folded: Vec<String> = terms
            .iter()
            .map(|t| fold(&format!("{prefix}{t}")).into_owned())
            .chain(
                terms
                    .iter()
                    .filter(|_| query.include_shared)
                    .map(|t| fold(&format!("{SHARED_TERM_PREFIX}{t}")).into_owned()),
            )
            .collect();
        // Without a range the bounds cover every RFC 3339 timestamp.
        let (from, to) = match &query.occurred {
            Some(range) => (format_time(&range.start), format_time(&range.end)),
            None => (String::new(), "~".to_string()),
        };
        // One read transaction: statistics, frequencies and matches from one snapshot.
        let mut tx = self.pool.begin().await.map_err(backend_error)?;
        // FTS5's averages record: the row count, then each column's total length.
        let averages: Option<(Vec<u8>,)> =
            sqlx::query_as("SELECT block FROM memories_fts_data WHERE id = 1")
                .fetch_optional(&mut *tx)
                .await
                .map_err(backend_error)?;
        let Some((rows_total, tokens_total)) = averages.and_then(|(block,)| fts5_averages(&block))
        else {
            return Ok(Vec::new());
        };
        if rows_total <= 0 {
            return Ok(Vec::new());
        }
        let mut hits: HashMap<&str, i64> = HashMap::new();
        for phrase in &phrases {
            if hits.contains_key(phrase.as_str()) {
                continue;
            }
            let (count,): (i64,) =
                sqlx::query_as("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH ?")
                    .bind(phrase)
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(backend_error)?;
            hits.insert(phrase, count);
        }
        let idfs: Vec<f64> = phrases
            .iter()
            .map(|p| idf(rows_total, hits.get(p.as_str()).copied().unwrap_or(0)))
            .collect();
        let avgdl = tokens_total as f64 / rows_total as f64;
        // CROSS JOIN fixes the join order: the (small, per-agent) FTS matches drive, never a scan of memories.
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SELECT m.id, memories_fts.terms FROM memories_fts \
             CROSS JOIN memories m ON m.rowid = memories_fts.rowid \
             WHERE memories_fts MATCH ? AND (m.agent_id = ? OR (? AND m.shared = 1)) AND m.status = 'active' \
             AND m.occurred_at >= ? AND m.occurred_at < ?",
        )
        .bind(phrases.join(" OR "))
        .bind(query.agent_id.as_str())
        .bind(query.include_shared)
        .bind(from)
        .bind(to)
        .fetch_all(&mut *tx)
        .await
        .map_err(backend_error)?;
        tx.commit().await.map_err(backend_error)?;
        let mut scored: Vec<(MemoryId, f64)> = rows
            .into_iter()
            .map(|(id, row_terms)| {
                let mut freqs = vec![0.0; folded.len()];
                let mut length = 0usize;
                for token in row_terms.split_whitespace() {
                    length += 1;
                    let token = fold(token);
                    for (position, phrase) in folded.iter().enumerate() {
                        if phrase.as_str() == token.as_ref() {
                            freqs[position] += 1.0;
                        }
                    }
                }
                (MemoryId(id), bm25(&freqs, &idfs, length as f64, avgdl))
            })
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0 .0.cmp(&b.0 .0)));
        scored.truncate(query.limit);
        Ok(scored)
    }

    async fn touch(&self, ids: &[MemoryId], at: DateTime<Utc>) -> MemoryResult<()> {
        let mut tx = self.write_transaction().await?;
        let at = format_time(&at);
        for chunk in ids.chunks(500) {
            let mut builder: QueryBuilder<Sqlite> = QueryBuilder::new("UPDATE memories SET access_count = access_count + 1, last_accessed_at = max(last_accessed_at, ");
            builder.push_bind(at.as_str()).push(") WHERE id IN (");
            let mut separated = builder.separated(", ");
            for id in chunk {
                separated.push_bind(id.as_str());
            }
            builder.push(")");
            builder
                .build()
                .execute(&mut *tx)
                .await
                .map_err(backend_error)?;
        }
        tx.commit().await.map_err(backend_error)
    }

    async fn agent_memories(&self, agent: &AgentId) -> MemoryResult<Vec<Memory>> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {MEMORY_COLUMNS} FROM memories WHERE agent_id = ? ORDER BY id"
        )))
        .bind(agent.as_str())
        .fetch_all(&self.pool)
        .await
        .map_err(backend_error)?;
        rows.iter().map(memory_from_row).collect()
    }

    async fn agents(&self) -> MemoryResult<Vec<AgentId>> {
        let rows: Vec<(String,)> =
            sqlx::query_as("SELECT DISTINCT agent_id FROM memories ORDER BY agent_id")
                .fetch_all(&self.pool)
                .await
                .map_err(backend_error)?;
        rows.iter().map(|(a,)| AgentId::parse(a)).collect()
    }

    async fn embedding(&self, id: &MemoryId) -> MemoryResult<Option<Vec<f32>>> {
        let row: Option<(Vec<u8>,)> =
            sqlx::query_as("SELECT vector FROM memory_embeddings WHERE memory_id = ?")
                .bind(id.as_str())
                .fetch_optional(&self.pool)
                .await
                .map_err(backend_error)?;
        Ok(row.map(|(blob,)| blob_to_vector(&blob)))
    }

    async fn embeddings_page(
        &self,
        after: Option<&MemoryId>,
        limit: usize,
    ) -> MemoryResult<Vec<EmbeddingRecord>> {
        let rows = sqlx::query(
            "SELECT m.id, m.agent_id, m.memory_type, m.shared, e.vector FROM memories m \
             JOIN memory_embeddings e ON e.memory_id = m.id \
             WHERE m.status = 'active' AND m.id > ? ORDER BY m.id LIMIT ?",
        )
        .bind(after.map(|a| a.as_str()).unwrap_or(""))
        .bind(limit as i64)
        .fetch_all(&self.pool)
        .await
        .map_err(backend_error)?;
        rows.iter()
            .map(|row| {
                let agent: String = row.get("agent_id");
                let memory_type: String = row.get("memory_type");
                let blob: Vec<u8> = row.get("vector");
                Ok(EmbeddingRecord {
                    id: MemoryId(row.get("id")),
                    agent_id: AgentId::parse(&agent)?,
                    memory_type: MemoryType::parse("type", &memory_type)?,
                    shared: row.get::<i64, _>("shared") != 0,
                    vector: blob_to_vector(&blob),
                })
            })
            .collect()
    }

    async fn count(&self) -> MemoryResult<u64> {
        let (count,): (i64,) = sqlx::query_as("SELECT count(*) FROM memories")
            .fetch_one(&self.pool)
            .await
            .map_err(backend_error)?;
        Ok(count as u64)
    }

    async fn record_run(&self, run: &ConsolidationRun) -> MemoryResult<()> {
        sqlx::query(
            "INSERT OR REPLACE INTO consolidation_runs (id, agent_id, trigger, started_at, finished_at, processed, consolidated, \
             forgotten, new_semantic, new_procedural, report) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&run.id)
        .bind(run.agent_id.as_ref().map(|a| a.as_str()))
        .bind(&run.trigger)
        .bind(format_time(&run.started_at))
        .bind(format_time(&run.finished_at))
        .bind(i64::from(run.processed))
        .bind(i64::from(run.consolidated))
        .bind(i64::from(run.forgotten))
        .bind(i64::from(run.new_semantic))
        .bind(i64::from(run.new_procedural))
        .bind(run.report.to_string())
        .execute(&self.pool)
        .await
        .map_err(backend_error)?;
        Ok(())
    }

    async fn runs(
        &self,
        agent: Option<&AgentId>,
        limit: usize,
    ) -> MemoryResult<Vec<ConsolidationRun>> {
        let mut builder: QueryBuilder<Sqlite> =
            QueryBuilder::new("SELECT * FROM consolidation_runs");
        if let Some(agent) = agent {
            builder.push(" WHERE agent_id = ").push_bind(agent.as_str());
        }
        builder
            .push(" ORDER BY started_at DESC, id DESC LIMIT ")
            .push_bind(limit as i64);
        let rows = builder
            .build()
            .fetch_all(&self.pool)
            .await
            .map_err(backend_error)?;
        rows.iter()
            .map(|row| {
                let agent: Option<String> = row.get("agent_id");
                let report: String = row.get("report");
                Ok(ConsolidationRun {
                    id: row.get("id"),
                    agent_id: agent.as_deref().map(AgentId::parse).transpose()?,
                    trigger: row.get("trigger"),
                    started_at: parse_time(row.get("started_at"))?,
                    finished_at: parse_time(row.get("finished_at"))?,
                    processed: row.get::<i64, _>("processed") as u32,
                    consolidated: row.get::<i64, _>("consolidated") as u32,
                    forgotten: row.get::<i64, _>("forgotten") as u32,
                    new_semantic: row.get::<i64, _>("new_semantic") as u32,
                    new_procedural: row.get::<i64, _>("new_procedural") as u32,
                    report: serde_json::from_str(&report).unwrap_or(serde_json::Value::Null),
                })
            })
            .collect()
    }

    fn keeps_edges(&self) -> bool {
        true
    }

    async fn commit_consolidation(&self, commit: &ConsolidationCommit) -> MemoryResult<()> {
        let mut tx = self.write_transaction().await?;
        // Sources first: a source changed since it was read fails the whole cluster.
        for (next, previous) in &commit.sources {
            update_record(&mut tx, next, previous, None).await?;
        }
        insert_records(&mut tx, std::slice::from_ref(&commit.derived)).await?;
        for edge in &commit.edges {
            sqlx::query(
                "INSERT INTO associations (agent_id, from_id, to_id, relation, weight, created_at) VALUES (?, ?, ?, ?, ?, ?) \
                 ON CONFLICT (from_id, to_id, relation) DO UPDATE SET weight = excluded.weight",
            )
            .bind(edge.agent_id.as_str())
            .bind(edge.from_id.as_str())
            .bind(edge.to_id.as_str())
            .bind(&edge.relation)
            .bind(f64::from(edge.weight))
            .bind(format_time(&edge.created_at))
            .execute(&mut *tx)
            .await
            .map_err(backend_error)?;
        }
        tx.commit().await.map_err(backend_error)
    }

    async fn embeddings_of(&self, ids: &[MemoryId]) -> MemoryResult<Vec<(MemoryId, Vec<f32>)>> {
        let mut out = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(500) {
            let mut builder: QueryBuilder<Sqlite> = QueryBuilder::new(
                "SELECT memory_id, vector FROM memory_embeddings WHERE memory_id IN (",
            );
            let mut separated = builder.separated(", ");
            for id in chunk {
                separated.push_bind(id.as_str());
            }
            builder.push(")");
            let rows: Vec<(String, Vec<u8>)> = builder
                .build_query_as()
                .fetch_all(&self.pool)
                .await
                .map_err(backend_error)?;
            out.extend(
                rows.into_iter()
                    .map(|(id, blob)| (MemoryId(id), blob_to_vector(&blob))),
            );
        }
        Ok(out)
    }

    async fn purge_forgotten(
        &self,
        agent: &AgentId,
        archived_before: DateTime<Utc>,
    ) -> MemoryResult<Vec<MemoryId>> {
        let mut tx = self.write_transaction().await?;
        let rows: Vec<(String,)> = sqlx::query_as(
            "SELECT m.id FROM memories m WHERE m.agent_id = ? AND m.status = 'archived' AND m.updated_at < ? \
             AND (SELECT v.reason FROM memory_versions v WHERE v.memory_id = m.id ORDER BY v.version DESC LIMIT 1) IN (?, ?)",
        )
        .bind(agent.as_str())
        .bind(format_time(&archived_before))
        .bind(FORGET_REASONS[0])
        .bind(FORGET_REASONS[1])
        .fetch_all(&mut *tx)
        .await
        .map_err(backend_error)?;
        for (id,) in &rows {
            // Versions, embedding, edges and keyword terms go with it (cascades and trigger).
            sqlx::query("DELETE FROM memories WHERE id = ?")
                .bind(id)
                .execute(&mut *tx)
                .await
                .map_err(backend_error)?;
        }
        tx.commit().await.map_err(backend_error)?;
        Ok(rows.into_iter().map(|(id,)| MemoryId(id)).collect())
    }

    async fn idle_sessions(
        &self,
        idle_before: DateTime<Utc>,
        limit: usize,
    ) -> MemoryResult<Vec<IdleSession>> {
        // Archive summaries are not activity (they would make their session look busy again).
        let rows = sqlx::query(
            "SELECT g.agent_id, g.session_id, g.first_at, g.last_at, g.last_activity FROM ( \
                 SELECT agent_id, session_id, MIN(occurred_at) AS first_at, MAX(occurred_at) AS last_at, \
                        MAX(created_at) AS last_activity \
                 FROM memories WHERE session_id IS NOT NULL AND tags NOT LIKE '%\"archive_summary\"%' \
                 GROUP BY agent_id, session_id) g \
             LEFT JOIN session_archives a ON a.agent_id = g.agent_id AND a.session_id = g.session_id \
             WHERE g.last_activity < ? AND (a.archived_through IS NULL OR g.last_activity > a.archived_through) \
             ORDER BY g.last_activity LIMIT ?",
        )
        .bind(format_time(&idle_before))
        .bind(limit as i64)
        .fetch_all(&self.pool)
        .await
        .map_err(backend_error)?;
        rows.iter()
            .map(|row| {
                Ok(IdleSession {
                    agent_id: AgentId::parse(row.get("agent_id"))?,
                    session_id: SessionId::parse(row.get("session_id"))?,
                    first_at: parse_time(row.get("first_at"))?,
                    last_at: parse_time(row.get("last_at"))?,
                    last_activity: parse_time(row.get("last_activity"))?,
                })
            })
            .collect()
    }

    async fn session_memories(
        &self,
        agent: &AgentId,
        session: &SessionId,
    ) -> MemoryResult<Vec<Memory>> {
        let rows = sqlx::query(
            "SELECT * FROM memories WHERE agent_id = ? AND session_id = ? ORDER BY occurred_at, id",
        )
        .bind(agent.as_str())
        .bind(session.as_str())
        .fetch_all(&self.pool)
        .await
        .map_err(backend_error)?;
        rows.iter().map(memory_from_row).collect()
    }

    async fn commit_session_archive(&self, archive: &SessionArchive) -> MemoryResult<bool> {
        let mut tx = self.write_transaction().await?;
        let through = format_time(&archive.archived_through);
        let marked = sqlx::query(
            "INSERT INTO session_archives (agent_id, session_id, archived_through, summary_id) VALUES (?, ?, ?, ?) \
             ON CONFLICT (agent_id, session_id) DO UPDATE SET archived_through = excluded.archived_through, \
             summary_id = excluded.summary_id WHERE session_archives.archived_through < excluded.archived_through",
        )
        .bind(archive.agent_id.as_str())
        .bind(archive.session_id.as_str())
        .bind(&through)
        .bind(archive.summary.memory.id.as_str())
        .execute(&mut *tx)
        .await
        .map_err(backend_error)?;
        if marked.rows_affected() == 0 {
            return Ok(false);
        }
        insert_records(&mut tx, std::slice::from_ref(&archive.summary)).await?;
        tx.commit().await.map_err(backend_error)?;
        Ok(true)
    }

    fn keeps_outbox(&self) -> bool {
        true
    }

    async fn outbox_after(&self, after: u64, limit: usize) -> MemoryResult<Vec<OutboxEntry>> {
        let rows = sqlx::query(
            "SELECT seq, entity, op, agent_id, memory_id, from_id, to_id, relation, payload, created_at \
             FROM outbox WHERE seq > ? ORDER BY seq LIMIT ?",
        )
        .bind(after as i64)
        .bind(limit as i64)
        .fetch_all(&self.pool)
        .await
        .map_err(backend_error)?;
        rows.iter().map(outbox_entry_from_row).collect()
    }

    async fn outbox_bounds(&self) -> MemoryResult<OutboxBounds> {
        let row = sqlx::query(
            "SELECT (SELECT MIN(seq) FROM outbox) AS oldest, \
             COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'outbox'), 0) AS head",
        )
        .fetch_one(&self.pool)
        .await
        .map_err(backend_error)?;
        Ok(OutboxBounds {
            oldest: row.get::<Option<i64>, _>("oldest").map(|s| s as u64),
            head: row.get::<i64, _>("head") as u64,
        })
    }

    async fn trim_outbox(&self, through: u64) -> MemoryResult<usize> {
        let deleted = sqlx::query("DELETE FROM outbox WHERE seq <= ?")
            .bind(through as i64)
            .execute(&self.pool)
            .await
            .map_err(backend_error)?;
        Ok(deleted.rows_affected() as usize)
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
        let mut tx = self.write_transaction().await?;
        let at_text = format_time(&at);
        let seq: i64 = sqlx::query_scalar(
            "INSERT INTO sessions (agent_id, session_id, last_seq, pending_tokens, created_at, last_message_at) \
             VALUES (?1, ?2, 1, ?3, ?4, ?4) \
             ON CONFLICT (agent_id, session_id) DO UPDATE SET last_seq = sessions.last_seq + 1, \
             pending_tokens = sessions.pending_tokens + excluded.pending_tokens, \
             last_message_at = MAX(sessions.last_message_at, excluded.last_message_at) \
             RETURNING last_seq",
        )
        .bind(agent.as_str())
        .bind(session.as_str())
        .bind(i64::from(tokens))
        .bind(&at_text)
        .fetch_one(&mut *tx)
        .await
        .map_err(backend_error)?;
        sqlx::query(
            "INSERT INTO session_messages (agent_id, session_id, seq, role, content, tokens, at) \
             VALUES (?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(agent.as_str())
        .bind(session.as_str())
        .bind(seq)
        .bind(role.as_str())
        .bind(content)
        .bind(i64::from(tokens))
        .bind(&at_text)
        .execute(&mut *tx)
        .await
        .map_err(backend_error)?;
        tx.commit().await.map_err(backend_error)?;
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
        let row = sqlx::query(
            "SELECT last_seq, compacted_through, summary, summarized_at, pending_tokens, compactions, \
             created_at, last_message_at FROM sessions WHERE agent_id = ? AND session_id = ?",
        )
        .bind(agent.as_str())
        .bind(session.as_str())
        .fetch_optional(&self.pool)
        .await
        .map_err(backend_error)?;
        let Some(row) = row else {
            return Ok(None);
        };
        let summarized_at: Option<String> = row.get("summarized_at");
        Ok(Some(SessionRecord {
            agent_id: agent.clone(),
            session_id: session.clone(),
            last_seq: row.get::<i64, _>("last_seq") as u64,
            compacted_through: row.get::<i64, _>("compacted_through") as u64,
            summary: row.get("summary"),
            summarized_at: summarized_at.as_deref().map(parse_time).transpose()?,
            pending_tokens: row.get::<i64, _>("pending_tokens") as u64,
            compactions: row.get::<i64, _>("compactions") as u32,
            created_at: parse_time(row.get("created_at"))?,
            last_message_at: parse_time(row.get("last_message_at"))?,
        }))
    }

    async fn session_messages_after(
        &self,
        agent: &AgentId,
        session: &SessionId,
        after: u64,
    ) -> MemoryResult<Vec<SessionMessage>> {
        let rows = sqlx::query(
            "SELECT seq, role, content, tokens, at FROM session_messages \
             WHERE agent_id = ? AND session_id = ? AND seq > ? ORDER BY seq",
        )
        .bind(agent.as_str())
        .bind(session.as_str())
        .bind(after as i64)
        .fetch_all(&self.pool)
        .await
        .map_err(backend_error)?;
        rows.iter()
            .map(|row| {
                Ok(SessionMessage {
                    seq: row.get::<i64, _>("seq") as u64,
                    role: MessageRole::parse(row.get("role"))?,
                    content: row.get("content"),
                    tokens: row.get::<i64, _>("tokens") as u32,
                    at: parse_time(row.get("at"))?,
                })
            })
            .collect()
    }

    async fn commit_session_compaction(
        &self,
        compaction: &SessionCompaction,
    ) -> MemoryResult<bool> {
        let mut tx = self.write_transaction().await?;
        let through = compaction.through as i64;
        let marked = sqlx::query(
            "UPDATE sessions SET compacted_through = ?1, summary = ?2, summarized_at = ?3, \
             compactions = compactions + 1, \
             pending_tokens = (SELECT COALESCE(SUM(tokens), 0) FROM session_messages m \
                 WHERE m.agent_id = ?4 AND m.session_id = ?5 AND m.seq > ?1) \
             WHERE agent_id = ?4 AND session_id = ?5 AND compacted_through < ?1 AND last_seq >= ?1",
        )
        .bind(through)
        .bind(&compaction.summary)
        .bind(format_time(&compaction.at))
        .bind(compaction.agent_id.as_str())
        .bind(compaction.session_id.as_str())
        .execute(&mut *tx)
        .await
        .map_err(backend_error)?;
        if marked.rows_affected() == 0 {
            return Ok(false);
        }
        insert_records(&mut tx, std::slice::from_ref(&compaction.archive)).await?;
        tx.commit().await.map_err(backend_error)?;
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
        // One statement, so two processes racing for a slot cannot both win.
        let claimed = sqlx::query(
            "INSERT INTO job_leases (job, holder, expires_at, last_slot) VALUES (?1, ?2, ?3, ?4) \
             ON CONFLICT (job) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at, \
             last_slot = excluded.last_slot \
             WHERE job_leases.last_slot < excluded.last_slot AND (job_leases.expires_at <= ?5 OR job_leases.holder = excluded.holder)",
        )
        .bind(job)
        .bind(holder)
        .bind(format_time(&expires_at))
        .bind(format_time(&slot))
        .bind(format_time(&now))
        .execute(&self.pool)
        .await
        .map_err(backend_error)?;
        Ok(claimed.rows_affected() > 0)
    }

    async fn renew_lease(
        &self,
        job: &str,
        holder: &str,
        expires_at: DateTime<Utc>,
    ) -> MemoryResult<bool> {
        let renewed =
            sqlx::query("UPDATE job_leases SET expires_at = ? WHERE job = ? AND holder = ?")
                .bind(format_time(&expires_at))
                .bind(job)
                .bind(holder)
                .execute(&self.pool)
                .await
                .map_err(backend_error)?;
        Ok(renewed.rows_affected() > 0)
    }

    async fn release_lease(&self, job: &str, holder: &str, now: DateTime<Utc>) -> MemoryResult<()> {
        sqlx::query("UPDATE job_leases SET expires_at = ? WHERE job = ? AND holder = ?")
            .bind(format_time(&now))
            .bind(job)
            .bind(holder)
            .execute(&self.pool)
            .await
            .map_err(backend_error)?;
        Ok(())
    }

    async fn flush(&self) -> MemoryResult<()> {
        sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
            .execute(&self.pool)
            .await
            .map_err(backend_error)?;
        Ok(())
    }
}

#[async_trait]
impl GraphStore for SqliteStore {
    fn backend_name(&self) -> &'static str {
        "sql"
    }

    async fn upsert_edge(&self, edge: &Association) -> MemoryResult<Association> {
        sqlx::query(
            "INSERT INTO associations (agent_id, from_id, to_id, relation, weight, created_at) VALUES (?, ?, ?, ?, ?, ?) \
             ON CONFLICT (from_id, to_id, relation) DO UPDATE SET weight = excluded.weight",
        )
        .bind(edge.agent_id.as_str())
        .bind(edge.from_id.as_str())
        .bind(edge.to_id.as_str())
        .bind(&edge.relation)
        .bind(f64::from(edge.weight))
        .bind(format_time(&edge.created_at))
        .execute(&self.pool)
        .await
        .map_err(|e| match &e {
            sqlx::Error::Database(db) if db.is_foreign_key_violation() => {
                MemoryError::not_found("one end of the association no longer exists")
            }
            _ => backend_error(e),
        })?;
        let row = sqlx::query(
            "SELECT * FROM associations WHERE from_id = ? AND to_id = ? AND relation = ?",
        )
        .bind(edge.from_id.as_str())
        .bind(edge.to_id.as_str())
        .bind(&edge.relation)
        .fetch_one(&self.pool)
        .await
        .map_err(backend_error)?;
        association_from_row(&row)
    }

    async fn edges_around(
        &self,
        agent: &AgentId,
        seeds: &[MemoryId],
        depth: u32,
        max_edges: usize,
    ) -> MemoryResult<Vec<Association>> {
        let mut frontier: Vec<String> = seeds.iter().map(|s| s.0.clone()).collect();
        let mut visited: std::collections::HashSet<String> = frontier.iter().cloned().collect();
        let mut seen_edges = std::collections::HashSet::new();
        let mut edges = Vec::new();
        for _ in 0..depth {
            if frontier.is_empty() {
                break;
            }
            let mut next = Vec::new();
            for chunk in frontier.chunks(400) {
                let mut builder: QueryBuilder<Sqlite> =
                    QueryBuilder::new("SELECT * FROM associations WHERE agent_id = ");
                builder.push_bind(agent.as_str()).push(" AND (from_id IN (");
                let mut separated = builder.separated(", ");
                for id in chunk {
                    separated.push_bind(id.as_str());
                }
                builder.push(") OR to_id IN (");
                let mut separated = builder.separated(", ");
                for id in chunk {
                    separated.push_bind(id.as_str());
                }
                builder.push("))");
                let rows = builder
                    .build()
                    .fetch_all(&self.pool)
                    .await
                    .map_err(backend_error)?;
                for row in &rows {
                    let edge = association_from_row(row)?;
                    let key = (
                        edge.from_id.0.clone(),
                        edge.to_id.0.clone(),
                        edge.relation.clone(),
                    );
                    if !seen_edges.insert(key) {
                        continue;
                    }
                    for end in [&edge.from_id.0, &edge.to_id.0] {
                        if visited.insert(end.clone()) {
                            next.push(end.clone());
                        }
                    }
                    edges.push(edge);
                    if edges.len() >= max_edges {
                        return Ok(edges);
                    }
                }
            }
            frontier = next;
        }
        Ok(edges)
    }

    async fn remove_memory(&self, id: &MemoryId) -> MemoryResult<()> {
        sqlx::query("DELETE FROM associations WHERE from_id = ? OR to_id = ?")
            .bind(id.as_str())
            .bind(id.as_str())
            .execute(&self.pool)
            .await
            .map_err(backend_error)?;
        Ok(())
    }

    async fn agent_edges(&self, agent: &AgentId) -> MemoryResult<Vec<Association>> {
        let rows = sqlx::query(
            "SELECT agent_id, from_id, to_id, relation, weight, created_at FROM associations \
             WHERE agent_id = ? ORDER BY from_id, to_id, relation",
        )
        .bind(agent.as_str())
        .fetch_all(&self.pool)
        .await
        .map_err(backend_error)?;
        rows.iter().map(association_from_row).collect()
    }
}

fn outbox_entry_from_row(row: &SqliteRow) -> MemoryResult<OutboxEntry> {
    let entity: String = row.get("entity");
    let op: String = row.get("op");
    let agent_id = AgentId::parse(row.get("agent_id"))?;
    let payload: serde_json::Value =
        serde_json::from_str(row.get("payload")).unwrap_or(serde_json::Value::Null);
    let id = |column: &str| MemoryId(row.get::<Option<String>, _>(column).unwrap_or_default());
    let text = |key: &str| payload[key].as_str().unwrap_or_default().to_string();
    let change = match (entity.as_str(), op.as_str()) {
        ("memory", "upsert") => ProjectedChange::UpsertMemory {
            id: id("memory_id"),
            agent_id,
            memory_type: text("type"),
            status: text("status"),
            shared: payload["shared"].as_i64().unwrap_or(0) != 0,
            session_id: payload["session_id"].as_str().map(String::from),
        },
        ("memory", _) => ProjectedChange::DeleteMemory {
            id: id("memory_id"),
            agent_id,
        },
        ("edge", "upsert") => ProjectedChange::UpsertEdge {
            agent_id,
            from_id: id("from_id"),
            to_id: id("to_id"),
            relation: row.get::<Option<String>, _>("relation").unwrap_or_default(),
            weight: payload["weight"].as_f64().unwrap_or(0.0) as f32,
        },
        _ => ProjectedChange::DeleteEdge {
            agent_id,
            from_id: id("from_id"),
            to_id: id("to_id"),
            relation: row.get::<Option<String>, _>("relation").unwrap_or_default(),
        },
    };
    Ok(OutboxEntry {
        seq: row.get::<i64, _>("seq") as u64,
        change,
        created_at: parse_time(row.get("created_at"))?,
    })
}

fn association_from_row(row: &SqliteRow) -> MemoryResult<Association> {
    let agent: String = row.get("agent_id");
    Ok(Association {
        agent_id: AgentId::parse(&agent)?,
        from_id: MemoryId(row.get("from_id")),
        to_id: MemoryId(row.get("to_id")),
        relation: row.get("relation"),
        weight: row.get::<f64, _>("weight") as f32,
        created_at: parse_time(row.get("created_at"))?,
    })
}

// The store-level tests run against SQLite and PostgreSQL through one body each:
// `src/store/conformance.rs`.

#[cfg(test)]
mod tests {
    #[test]
    fn fts5_averages_decode_sqlite_varints() {
        assert_eq!(fts5_averages(&[0x03, 0x0a]), Some((3, 10)));
        // 300 = 0b10_0101100: two bytes, the first with the continuation bit.
        assert_eq!(sqlite_varint(&[0x82, 0x2c, 0xff]), Some((300, 2)));
        assert_eq!(fts5_averages(&[0x82, 0x2c, 0x81, 0x00]), Some((300, 128)));
        assert_eq!(sqlite_varint(&[0xff; 9]), Some((u64::MAX, 9)));
        assert_eq!(fts5_averages(&[0x82]), None);
        assert_eq!(fts5_averages(&[]), None);
    }

    use super::*;
    use mnemos_actors::testing::memory_fixture;

    async fn store() -> (SqliteStore, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        (
            SqliteStore::open(&dir.path().join("mnemos.db"))
                .await
                .unwrap(),
            dir,
        )
    }

    /// Records what a projection was asked to apply.
    #[derive(Default)]
    struct Recording {
        changes: std::sync::Mutex<Vec<ProjectedChange>>,
        applied: std::sync::Mutex<Option<u64>>,
    }

    #[async_trait]
    impl mnemos_actors::store::Projection for Recording {
        fn name(&self) -> &'static str {
            "recording"
        }
        async fn applied(&self) -> MemoryResult<Option<u64>> {
            Ok(*self.applied.lock().unwrap())
        }
        async fn apply(
            &self,
            changes: &[ProjectedChange],
            through: Option<u64>,
        ) -> MemoryResult<()> {
            self.changes.lock().unwrap().extend_from_slice(changes);
            if through.is_some() {
                *self.applied.lock().unwrap() = through;
            }
            Ok(())
        }
        async fn reset(&self) -> MemoryResult<()> {
            self.changes.lock().unwrap().clear();
            *self.applied.lock().unwrap() = None;
            Ok(())
        }
    }

    #[tokio::test]
    async fn every_change_enqueues_an_outbox_entry_in_its_transaction() {
        use mnemos_actors::actors::projector::catch_up;
        use mnemos_actors::testing::StoreSource;
        let (store, _dir) = store().await;
        let now = Utc::now();
        let a = memory_fixture("alice", "a", now);
        let b = memory_fixture("alice", "b", now);
        store
            .insert(&[
                StoredMemory::new(a.clone(), vec![1.0]),
                StoredMemory::new(b.clone(), vec![1.0]),
            ])
            .await
            .unwrap();
        store
            .upsert_edge(&Association {
                agent_id: a.agent_id.clone(),
                from_id: a.id.clone(),
                to_id: b.id.clone(),
                relation: "related_to".into(),
                weight: 0.7,
                created_at: now,
            })
            .await
            .unwrap();
        // Reinforcement is not a projected change.
        store.touch(std::slice::from_ref(&a.id), now).await.unwrap();
        assert!(store.delete(&b.id).await.unwrap());
        let entries = store.outbox_after(0, 100).await.unwrap();
        let kinds: Vec<&str> = entries
            .iter()
            .map(|e| match &e.change {
                ProjectedChange::UpsertMemory { .. } => "upsert_memory",
                ProjectedChange::DeleteMemory { .. } => "delete_memory",
                ProjectedChange::UpsertEdge { .. } => "upsert_edge",
                ProjectedChange::DeleteEdge { .. } => "delete_edge",
            })
            .collect();
        // The cascade deletes the edge before the memory row goes.
        assert_eq!(
            kinds,
            [
                "upsert_memory",
                "upsert_memory",
                "upsert_edge",
                "delete_edge",
                "delete_memory"
            ]
        );
        assert!(entries.windows(2).all(|w| w[0].seq < w[1].seq));
        let bounds = store.outbox_bounds().await.unwrap();
        assert_eq!(bounds.head, entries.last().unwrap().seq);

        // A fresh projection is rebuilt from SQL, then follows the outbox.
        let projection = Recording::default();
        let (applied, rebuilt) = catch_up(
            &StoreSource {
                store: &store,
                graph: &store,
            },
            &projection,
            None,
            2,
            8,
        )
        .await
        .unwrap();
        assert!(rebuilt);
        assert_eq!(applied, bounds.head);
        assert_eq!(
            projection.changes.lock().unwrap().len(),
            1,
            "only a survives"
        );
        let c = memory_fixture("alice", "c", now);
        store
            .insert(&[StoredMemory::new(c.clone(), vec![1.0])])
            .await
            .unwrap();
        let (applied, rebuilt) = catch_up(
            &StoreSource {
                store: &store,
                graph: &store,
            },
            &projection,
            Some(applied),
            2,
            8,
        )
        .await
        .unwrap();
        assert!(!rebuilt);
        assert!(
            matches!(&projection.changes.lock().unwrap()[1], ProjectedChange::UpsertMemory { id, .. } if *id == c.id)
        );
        // Trimmed through what was applied; the head survives trimming.
        assert_eq!(store.trim_outbox(applied).await.unwrap(), entries.len() + 1);
        let after = store.outbox_bounds().await.unwrap();
        assert_eq!((after.oldest, after.head), (None, applied));

        // A projection that claims more than the store ever wrote was filled from
        // another database: it is rebuilt, not trusted.
        *projection.applied.lock().unwrap() = Some(applied + 1000);
        let (again, rebuilt) = catch_up(
            &StoreSource {
                store: &store,
                graph: &store,
            },
            &projection,
            None,
            2,
            8,
        )
        .await
        .unwrap();
        assert!(rebuilt);
        assert_eq!(again, applied);
        assert_eq!(projection.changes.lock().unwrap().len(), 2, "a and c");
    }
}

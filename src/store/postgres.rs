//! The shared system of record: PostgreSQL through sqlx.
//!
//! [`PostgresStore`] implements [`MemoryStore`], [`GraphStore`] and (in `namespaces`)
//! `ProjectStore` and `KvStore` with the semantics of
//! [`super::sqlite::SqliteStore`]: idempotent inserts by id, compare-and-swap updates
//! with version history in the same transaction, edges that cascade with their memory,
//! and keyword search that ranks exactly as SQLite's FTS5 does.
//!
//! **Writers.** Several server replicas may share one database. Every transaction that
//! writes memories (or their terms, versions, embeddings and edges) first takes a
//! transaction-scoped advisory lock of the schema (`pg_advisory_xact_lock`), the
//! PostgreSQL counterpart of SQLite's `BEGIN IMMEDIATE`: writers queue instead of
//! deadlocking on row locks taken in different orders, a compare-and-swap sees the
//! latest committed version, the keyword statistics row is never contended, and outbox
//! entries commit in sequence order. Readers never wait (MVCC). Appending a session
//! message locks only its session's row; leases and run-log rows are single statements.
//!
//! **Keyword search.** The store writes the same agent-prefixed terms as SQLite
//! (`memory_search`: distinct terms as a GIN-indexed `tsvector`, their counts as
//! `jsonb`, the document length), keeps FTS5's collection statistics exact in
//! `keyword_stats`, reads the matches, document frequencies and statistics in one
//! statement (one snapshot), and scores them with `store::keyword::bm25`, as the SQLite
//! store does from the same inputs: the scores, and therefore the order and ties, are
//! those of SQLite.

use std::collections::HashMap;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use mnemos_actors::error::{ErrorCode, MemoryError, MemoryResult};
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
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions, PgRow};
use sqlx::types::Json;
use sqlx::{ConnectOptions, Connection, Postgres, QueryBuilder, Row};

use super::keyword::{bm25, fold, idf};
use super::redact_url;

mod namespaces;
use super::sqlite::{agent_term_prefix, SHARED_TERM_PREFIX};

/// The migrations of the PostgreSQL schema, embedded in the binary.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

/// PostgreSQL-backed store.
#[derive(Clone, Debug)]
pub struct PostgresStore {
    /// Connection pool.
    pool: PgPool,
    /// Memories inserted since the planner statistics were last refreshed: after a bulk
    /// load the planner would otherwise keep estimating from the empty tables (a 150×
    /// slower keyword plan until autovacuum analyses them, up to a minute later).
    inserted_since_analyze: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

/// Inserted memories after which the store refreshes planner statistics itself.
const ANALYZE_EVERY: u64 = 20_000;

const MEMORY_COLUMNS: &str = "id, agent_id, memory_type, content, title, importance, tags, session_id, occurred_at, \
     created_at, updated_at, last_accessed_at, access_count, consolidation_level, valence, arousal, status, shared, \
     metadata, source_path, source_hash, version, project_id";

/// The columns written on insert: [`MEMORY_COLUMNS`] plus the derived content hash.
const INSERT_COLUMNS: &str = "id, agent_id, memory_type, content, title, importance, tags, session_id, occurred_at, \
     created_at, updated_at, last_accessed_at, access_count, consolidation_level, valence, arousal, status, shared, \
     metadata, source_path, source_hash, version, content_hash, project_id";

/// Longest term stored as itself; longer ones are stored as a prefix and a hash
/// (PostgreSQL limits a `tsvector` lexeme to 2 KiB).
const MAX_LEXEME_BYTES: usize = 1000;

/// `time` within what `timestamptz` holds (4713 BC to 294276 AD). Open-ended ranges
/// use chrono's extremes (`DateTime::<Utc>::MIN_UTC` for "before X"), which SQLite
/// compares as text but PostgreSQL refuses; no storable instant lies beyond the clamp.
fn pg_time(time: DateTime<Utc>) -> DateTime<Utc> {
    use chrono::TimeZone;
    let earliest = Utc
        .with_ymd_and_hms(-4700, 1, 1, 0, 0, 0)
        .single()
        .unwrap_or(DateTime::<Utc>::MIN_UTC);
    let latest = Utc
        .with_ymd_and_hms(262_000, 1, 1, 0, 0, 0)
        .single()
        .unwrap_or(DateTime::<Utc>::MAX_UTC);
    time.clamp(earliest, latest)
}

fn backend_error(error: sqlx::Error) -> MemoryError {
    MemoryError::unavailable(format!("postgres: {error}"))
}

fn corrupt(error: sqlx::Error) -> MemoryError {
    MemoryError::internal(format!("corrupt row in store: {error}"))
}

/// The stored form of a (prefixed, folded) term: itself, or a prefix and a hash when
/// it is too long for a `tsvector` lexeme. Queries map their terms the same way.
fn lexeme(term: String) -> String {
    if term.len() <= MAX_LEXEME_BYTES {
        return term;
    }
    use sha2::{Digest, Sha256};
    let mut cut = MAX_LEXEME_BYTES - 80;
    while !term.is_char_boundary(cut) {
        cut -= 1;
    }
    let digest = Sha256::digest(term.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("{}#{hex}", &term[..cut])
}

/// A memory's postings, with repeats, in the order SQLite writes them: its title and
/// content terms under its agent's prefix, and again under the shared prefix when the
/// memory is shared.
fn postings(memory: &Memory) -> Vec<String> {
    let text = match &memory.title {
        Some(title) => format!("{title} {}", memory.content),
        None => memory.content.clone(),
    };
    let terms: Vec<String> = keyword_terms(&text)
        .iter()
        .map(|t| fold(t).into_owned())
        .collect();
    let prefix = agent_term_prefix(&memory.agent_id);
    let mut out: Vec<String> = terms
        .iter()
        .map(|t| lexeme(format!("{prefix}{t}")))
        .collect();
    if memory.shared {
        out.extend(
            terms
                .iter()
                .map(|t| lexeme(format!("{SHARED_TERM_PREFIX}{t}"))),
        );
    }
    out
}

/// The keyword-index row of a memory: distinct terms, each term's count, and length.
struct SearchRow {
    terms: Vec<String>,
    tf: HashMap<String, i64>,
    length: i32,
}

fn search_row(memory: &Memory) -> SearchRow {
    let all = postings(memory);
    let mut tf: HashMap<String, i64> = HashMap::new();
    for term in &all {
        *tf.entry(term.clone()).or_default() += 1;
    }
    let mut terms: Vec<String> = tf.keys().cloned().collect();
    terms.sort();
    SearchRow {
        terms,
        tf,
        length: i32::try_from(all.len()).unwrap_or(i32::MAX),
    }
}

/// A `tsquery` matching any of `lexemes` literally (each quoted, no normalisation).
fn any_of(lexemes: &[String]) -> String {
    lexemes
        .iter()
        .map(|l| single(l))
        .collect::<Vec<_>>()
        .join(" | ")
}

/// A `tsquery` matching one lexeme literally.
fn single(lexeme: &str) -> String {
    format!("'{}'", lexeme.replace('\\', "\\\\").replace('\'', "''"))
}

fn memory_from_row(row: &PgRow) -> MemoryResult<Memory> {
    let memory_type: String = row.try_get("memory_type").map_err(corrupt)?;
    let status: String = row.try_get("status").map_err(corrupt)?;
    let session_id: Option<String> = row.try_get("session_id").map_err(corrupt)?;
    let source_path: Option<String> = row.try_get("source_path").map_err(corrupt)?;
    let source_hash: Option<String> = row.try_get("source_hash").map_err(corrupt)?;
    let agent: String = row.try_get("agent_id").map_err(corrupt)?;
    let Json(tags): Json<Vec<String>> = row.try_get("tags").map_err(corrupt)?;
    let project_id: Option<String> = row.try_get("project_id").map_err(corrupt)?;
    Ok(Memory {
        project_id: project_id
            .as_deref()
            .map(mnemos_actors::projects::ProjectId::parse)
            .transpose()?,
        id: MemoryId(row.try_get("id").map_err(corrupt)?),
        agent_id: AgentId::parse(&agent)?,
        memory_type: MemoryType::parse("type", &memory_type)?,
        content: row.try_get("content").map_err(corrupt)?,
        title: row.try_get("title").map_err(corrupt)?,
        importance: row.try_get("importance").map_err(corrupt)?,
        tags,
        session_id: session_id.as_deref().map(SessionId::parse).transpose()?,
        occurred_at: row.try_get("occurred_at").map_err(corrupt)?,
        created_at: row.try_get("created_at").map_err(corrupt)?,
        updated_at: row.try_get("updated_at").map_err(corrupt)?,
        last_accessed_at: row.try_get("last_accessed_at").map_err(corrupt)?,
        access_count: row
            .try_get::<i64, _>("access_count")
            .map_err(corrupt)?
            .clamp(0, i64::from(u32::MAX)) as u32,
        consolidation_level: row.try_get("consolidation_level").map_err(corrupt)?,
        valence: row.try_get("valence").map_err(corrupt)?,
        arousal: row.try_get("arousal").map_err(corrupt)?,
        status: MemoryStatus::parse("status", &status)?,
        shared: row.try_get("shared").map_err(corrupt)?,
        metadata: row.try_get("metadata").map_err(corrupt)?,
        source: match (source_path, source_hash) {
            (Some(path), Some(hash)) => Some(SourceRef { path, hash }),
            _ => None,
        },
        version: row
            .try_get::<i64, _>("version")
            .map_err(corrupt)?
            .clamp(0, i64::from(u32::MAX)) as u32,
    })
}

fn association_from_row(row: &PgRow) -> MemoryResult<Association> {
    let agent: String = row.try_get("agent_id").map_err(corrupt)?;
    Ok(Association {
        agent_id: AgentId::parse(&agent)?,
        from_id: MemoryId(row.try_get("from_id").map_err(corrupt)?),
        to_id: MemoryId(row.try_get("to_id").map_err(corrupt)?),
        relation: row.try_get("relation").map_err(corrupt)?,
        weight: row.try_get("weight").map_err(corrupt)?,
        created_at: row.try_get("created_at").map_err(corrupt)?,
    })
}

fn outbox_entry_from_row(row: &PgRow) -> MemoryResult<OutboxEntry> {
    let entity: String = row.try_get("entity").map_err(corrupt)?;
    let op: String = row.try_get("op").map_err(corrupt)?;
    let agent: String = row.try_get("agent_id").map_err(corrupt)?;
    let agent_id = AgentId::parse(&agent)?;
    let payload: serde_json::Value = row.try_get("payload").map_err(corrupt)?;
    let id = |column: &str| -> MemoryResult<MemoryId> {
        Ok(MemoryId(
            row.try_get::<Option<String>, _>(column)
                .map_err(corrupt)?
                .unwrap_or_default(),
        ))
    };
    let relation = || -> MemoryResult<String> {
        Ok(row
            .try_get::<Option<String>, _>("relation")
            .map_err(corrupt)?
            .unwrap_or_default())
    };
    let text = |key: &str| payload[key].as_str().unwrap_or_default().to_string();
    let change = match (entity.as_str(), op.as_str()) {
        ("memory", "upsert") => ProjectedChange::UpsertMemory {
            id: id("memory_id")?,
            agent_id,
            memory_type: text("type"),
            status: text("status"),
            shared: payload["shared"].as_bool().unwrap_or(false),
            session_id: payload["session_id"].as_str().map(String::from),
        },
        ("memory", _) => ProjectedChange::DeleteMemory {
            id: id("memory_id")?,
            agent_id,
        },
        ("edge", "upsert") => ProjectedChange::UpsertEdge {
            agent_id,
            from_id: id("from_id")?,
            to_id: id("to_id")?,
            relation: relation()?,
            weight: payload["weight"].as_f64().unwrap_or(0.0) as f32,
        },
        _ => ProjectedChange::DeleteEdge {
            agent_id,
            from_id: id("from_id")?,
            to_id: id("to_id")?,
            relation: relation()?,
        },
    };
    Ok(OutboxEntry {
        seq: row.try_get::<i64, _>("seq").map_err(corrupt)?.max(0) as u64,
        change,
        created_at: row.try_get("created_at").map_err(corrupt)?,
    })
}

fn ids_of(ids: &[MemoryId]) -> Vec<String> {
    ids.iter().map(|id| id.0.clone()).collect()
}

/// Insert memories with their embeddings and keyword terms inside a write transaction;
/// ids already stored are skipped whole (idempotent retries).
async fn insert_records(conn: &mut PgConnection, records: &[StoredMemory]) -> MemoryResult<()> {
    for chunk in records.chunks(200) {
        let mut builder: QueryBuilder<Postgres> =
            QueryBuilder::new(format!("INSERT INTO memories ({INSERT_COLUMNS}) "));
        builder.push_values(chunk, |mut row, record| {
            let m = &record.memory;
            row.push_bind(m.id.0.clone())
                .push_bind(m.agent_id.as_str().to_string())
                .push_bind(m.memory_type.as_str())
                .push_bind(m.content.clone())
                .push_bind(m.title.clone())
                .push_bind(m.importance)
                .push_bind(Json(m.tags.clone()))
                .push_bind(m.session_id.as_ref().map(|s| s.as_str().to_string()))
                .push_bind(m.occurred_at)
                .push_bind(m.created_at)
                .push_bind(m.updated_at)
                .push_bind(m.last_accessed_at)
                .push_bind(i64::from(m.access_count))
                .push_bind(m.consolidation_level)
                .push_bind(m.valence)
                .push_bind(m.arousal)
                .push_bind(m.status.as_str())
                .push_bind(m.shared)
                .push_bind(m.metadata.clone())
                .push_bind(m.source.as_ref().map(|s| s.path.clone()))
                .push_bind(m.source.as_ref().map(|s| s.hash.clone()))
                .push_bind(i64::from(m.version))
                .push_bind(record.content_hash.clone())
                .push_bind(m.project_id.as_ref().map(|p| p.as_str().to_string()));
        });
        // Ids already stored (a retried request) are skipped whole: nothing of theirs is written twice.
        builder.push(" ON CONFLICT (id) DO NOTHING RETURNING id");
        let inserted: Vec<(String,)> = builder
            .build_query_as()
            .fetch_all(&mut *conn)
            .await
            .map_err(backend_error)?;
        if inserted.is_empty() {
            continue;
        }
        let fresh: std::collections::HashSet<String> =
            inserted.into_iter().map(|(id,)| id).collect();
        let fresh: Vec<&StoredMemory> = chunk
            .iter()
            .filter(|r| fresh.contains(r.memory.id.as_str()))
            .collect();
        let mut builder: QueryBuilder<Postgres> =
            QueryBuilder::new("INSERT INTO memory_embeddings (memory_id, vector) ");
        builder.push_values(&fresh, |mut row, record| {
            row.push_bind(record.memory.id.0.clone())
                .push_bind(record.embedding.clone());
        });
        builder
            .build()
            .execute(&mut *conn)
            .await
            .map_err(backend_error)?;
        let active: Vec<&&StoredMemory> = fresh
            .iter()
            .filter(|r| r.memory.status == MemoryStatus::Active)
            .collect();
        let active: Vec<&Memory> = active.iter().map(|r| &r.memory).collect();
        insert_search_rows(conn, &active).await?;
    }
    Ok(())
}

/// Write memories' keyword-index rows (after any old ones were removed), in one statement.
async fn insert_search_rows(conn: &mut PgConnection, memories: &[&Memory]) -> MemoryResult<()> {
    if memories.is_empty() {
        return Ok(());
    }
    let mut builder: QueryBuilder<Postgres> =
        QueryBuilder::new("INSERT INTO memory_search (memory_id, terms, tf, length) ");
    builder.push_values(memories, |mut row, memory| {
        let search = search_row(memory);
        row.push_bind(memory.id.0.clone())
            .push("array_to_tsvector(CAST(")
            .push_bind_unseparated(search.terms)
            .push_unseparated(" AS text[]))")
            .push_bind(Json(search.tf))
            .push_bind(search.length);
    });
    builder
        .build()
        .execute(&mut *conn)
        .await
        .map_err(backend_error)?;
    Ok(())
}

/// Replace a memory inside a write transaction if its stored version is
/// `previous.version`, archiving `previous` and refreshing keyword terms (and the
/// embedding when given).
async fn update_record(
    conn: &mut PgConnection,
    next: &Memory,
    previous: &MemoryVersion,
    embedding: Option<&[f32]>,
) -> MemoryResult<()> {
    let updated = sqlx::query(
        "UPDATE memories SET memory_type = $1, content = $2, title = $3, importance = $4, tags = $5, session_id = $6, \
         occurred_at = $7, updated_at = $8, last_accessed_at = $9, access_count = $10, consolidation_level = $11, \
         valence = $12, arousal = $13, status = $14, shared = $15, metadata = $16, source_path = $17, \
         source_hash = $18, version = $19, content_hash = $20, project_id = $23 \
         WHERE id = $21 AND version = $22",
    )
    .bind(next.memory_type.as_str())
    .bind(&next.content)
    .bind(next.title.as_deref())
    .bind(next.importance)
    .bind(Json(&next.tags))
    .bind(next.session_id.as_ref().map(|s| s.as_str()))
    .bind(next.occurred_at)
    .bind(next.updated_at)
    .bind(next.last_accessed_at)
    .bind(i64::from(next.access_count))
    .bind(next.consolidation_level)
    .bind(next.valence)
    .bind(next.arousal)
    .bind(next.status.as_str())
    .bind(next.shared)
    .bind(&next.metadata)
    .bind(next.source.as_ref().map(|s| s.path.as_str()))
    .bind(next.source.as_ref().map(|s| s.hash.as_str()))
    .bind(i64::from(next.version))
    .bind(normalized_hash(&next.content))
    .bind(next.id.as_str())
    .bind(i64::from(previous.version))
    .bind(next.project_id.as_ref().map(|p| p.as_str()))
    .execute(&mut *conn)
    .await
    .map_err(backend_error)?;
    if updated.rows_affected() == 0 {
        let exists: Option<(i64,)> = sqlx::query_as("SELECT version FROM memories WHERE id = $1")
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
        "INSERT INTO memory_versions (memory_id, version, content, importance, tags, status, archived_at, reason) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
         ON CONFLICT (memory_id, version) DO UPDATE SET content = excluded.content, importance = excluded.importance, \
         tags = excluded.tags, status = excluded.status, archived_at = excluded.archived_at, reason = excluded.reason",
    )
    .bind(next.id.as_str())
    .bind(i64::from(previous.version))
    .bind(&previous.content)
    .bind(previous.importance)
    .bind(Json(&previous.tags))
    .bind(previous.status.as_str())
    .bind(previous.archived_at)
    .bind(&previous.reason)
    .execute(&mut *conn)
    .await
    .map_err(backend_error)?;
    sqlx::query("DELETE FROM memory_search WHERE memory_id = $1")
        .bind(next.id.as_str())
        .execute(&mut *conn)
        .await
        .map_err(backend_error)?;
    if next.status == MemoryStatus::Active {
        insert_search_rows(conn, &[next]).await?;
    }
    if let Some(embedding) = embedding {
        sqlx::query(
            "INSERT INTO memory_embeddings (memory_id, vector) VALUES ($1, $2) \
             ON CONFLICT (memory_id) DO UPDATE SET vector = excluded.vector",
        )
        .bind(next.id.as_str())
        .bind(embedding)
        .execute(&mut *conn)
        .await
        .map_err(backend_error)?;
    }
    Ok(())
}

/// Upsert one association edge inside a transaction.
async fn upsert_edge_in(conn: &mut PgConnection, edge: &Association) -> MemoryResult<PgRow> {
    sqlx::query(
        "INSERT INTO associations (agent_id, from_id, to_id, relation, weight, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6) \
         ON CONFLICT (from_id, to_id, relation) DO UPDATE SET weight = excluded.weight \
         RETURNING agent_id, from_id, to_id, relation, weight, created_at",
    )
    .bind(edge.agent_id.as_str())
    .bind(edge.from_id.as_str())
    .bind(edge.to_id.as_str())
    .bind(&edge.relation)
    .bind(edge.weight)
    .bind(edge.created_at)
    .fetch_one(&mut *conn)
    .await
    .map_err(|e| match &e {
        sqlx::Error::Database(db) if db.is_foreign_key_violation() => {
            MemoryError::not_found("one end of the association no longer exists")
        }
        _ => backend_error(e),
    })
}

/// The first schema named in a `search_path` setting (skipping `"$user"`), unquoted.
fn first_schema(search_path: &str) -> Option<String> {
    search_path
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty() && *s != "\"$user\"" && *s != "$user")
        .map(|s| {
            s.strip_prefix('"')
                .and_then(|s| s.strip_suffix('"'))
                .map(|s| s.replace("\"\"", "\""))
                .unwrap_or_else(|| s.to_lowercase())
        })
        .next()
}

/// `name` as a quoted SQL identifier.
fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

impl PostgresStore {
    /// Connect to the server at `url` (`storage.url`), create the first schema of the
    /// connection's `search_path` when it is missing, and apply migrations.
    pub async fn open(url: &str) -> MemoryResult<Self> {
        let shown = redact_url(url);
        let unavailable = |message: String| MemoryError {
            code: ErrorCode::BackendUnavailable,
            message,
            field: Some("storage.url".into()),
        };
        let options = PgConnectOptions::from_str(url).map_err(|e| {
            MemoryError::invalid(
                "storage.url",
                format!("{shown:?} is not a valid PostgreSQL URL: {e}"),
            )
        })?;
        let pool = PgPoolOptions::new()
            .max_connections(8)
            .min_connections(0)
            .acquire_timeout(Duration::from_secs(5))
            .idle_timeout(Duration::from_secs(300))
            .connect_with(options)
            .await
            .map_err(|e| {
                unavailable(format!(
                    "storage.url: cannot connect to PostgreSQL at {shown}: {e}; check that the server is running and the URL is right"
                ))
            })?;
        let store = Self {
            pool,
            inserted_since_analyze: Default::default(),
        };
        store
            .ensure_schema()
            .await
            .map_err(|e| unavailable(e.message))?;
        store.migrate().await.map_err(|e| unavailable(e.message))?;
        store
            .refresh_keyword_index()
            .await
            .map_err(|e| unavailable(e.message))?;
        Ok(store)
    }

    /// Re-derive the keyword index when it was written with another form of terms
    /// (`KEYWORD_TERMS_VERSION`, recorded in `store_meta`), as the SQLite store does;
    /// under the write lock, so replicas starting together do it once.
    async fn refresh_keyword_index(&self) -> MemoryResult<()> {
        // The usual case (index current) reads one row and takes no lock.
        if self.keyword_terms_recorded(&self.pool).await?.as_deref() == Some(KEYWORD_TERMS_VERSION)
        {
            return Ok(());
        }
        let mut tx = self.write_transaction().await?;
        // Checked again under the lock: another replica may have just done it.
        if self.keyword_terms_recorded(&mut *tx).await?.as_deref() == Some(KEYWORD_TERMS_VERSION) {
            return Ok(());
        }
        sqlx::query("DELETE FROM memory_search")
            .execute(&mut *tx)
            .await
            .map_err(backend_error)?;
        let mut after = String::new();
        let mut rewritten = 0usize;
        loop {
            let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT {MEMORY_COLUMNS} FROM memories \
                 WHERE status = 'active' AND id > $1 ORDER BY id LIMIT 2000"
            )))
            .bind(&after)
            .fetch_all(&mut *tx)
            .await
            .map_err(backend_error)?;
            if rows.is_empty() {
                break;
            }
            let memories = rows
                .iter()
                .map(memory_from_row)
                .collect::<MemoryResult<Vec<Memory>>>()?;
            if let Some(last) = memories.last() {
                after = last.id.0.clone();
            }
            rewritten += memories.len();
            let memories: Vec<&Memory> = memories.iter().collect();
            insert_search_rows(&mut tx, &memories).await?;
        }
        sqlx::query(
            "INSERT INTO store_meta (key, value) VALUES ('keyword_terms', $1) \
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        )
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

    /// The term form recorded beside the keyword index, if any.
    async fn keyword_terms_recorded<'e, E>(&self, executor: E) -> MemoryResult<Option<String>>
    where
        E: sqlx::Executor<'e, Database = Postgres>,
    {
        sqlx::query_scalar("SELECT value FROM store_meta WHERE key = 'keyword_terms'")
            .fetch_optional(executor)
            .await
            .map_err(backend_error)
    }

    /// Create the first schema of the search path when the connection has none.
    async fn ensure_schema(&self) -> MemoryResult<()> {
        let current: Option<String> = sqlx::query_scalar("SELECT current_schema()")
            .fetch_one(&self.pool)
            .await
            .map_err(backend_error)?;
        if current.is_some() {
            return Ok(());
        }
        let path: String = sqlx::query_scalar("SHOW search_path")
            .fetch_one(&self.pool)
            .await
            .map_err(backend_error)?;
        let Some(schema) = first_schema(&path) else {
            return Err(MemoryError::unavailable(format!(
                "storage.url: the search_path {path:?} names no schema to create the tables in"
            )));
        };
        let created = sqlx::query(sqlx::AssertSqlSafe(format!(
            "CREATE SCHEMA IF NOT EXISTS {}",
            quote_ident(&schema)
        )))
        .execute(&self.pool)
        .await;
        match created {
            Ok(_) => Ok(()),
            // Two processes creating it at once: the loser finds it made.
            Err(sqlx::Error::Database(db)) if db.is_unique_violation() => Ok(()),
            Err(error) => Err(MemoryError::unavailable(format!(
                "storage.url: cannot create schema {schema:?}: {error}"
            ))),
        }
    }

    /// Apply pending migrations (the migrator's advisory lock serialises replicas).
    pub async fn migrate(&self) -> MemoryResult<()> {
        MIGRATOR.run(&self.pool).await.map_err(|error| {
            MemoryError::unavailable(format!("postgres migrations failed: {error}"))
        })
    }

    /// A write transaction holding the schema's write lock (see the module docs), so
    /// writers queue like SQLite's `BEGIN IMMEDIATE` writers do.
    async fn write_transaction(&self) -> MemoryResult<sqlx::Transaction<'static, Postgres>> {
        let mut tx = self.pool.begin().await.map_err(backend_error)?;
        sqlx::query("SELECT pg_advisory_xact_lock(hashtext('mnemos.write:' || current_schema()))")
            .execute(&mut *tx)
            .await
            .map_err(backend_error)?;
        Ok(tx)
    }

    /// Count inserted memories; past [`ANALYZE_EVERY`], refresh the statistics of the
    /// search tables in the background (never on the request path; best effort).
    fn analyze_after_bulk(&self, inserted: u64) {
        use std::sync::atomic::Ordering;
        let total = self
            .inserted_since_analyze
            .fetch_add(inserted, Ordering::Relaxed)
            + inserted;
        if total < ANALYZE_EVERY {
            return;
        }
        self.inserted_since_analyze.store(0, Ordering::Relaxed);
        // On a connection of its own that does not report ANALYZE (seconds on a large
        // store, and expected) as a slow statement.
        let options = (*self.pool.connect_options())
            .clone()
            .log_slow_statements(log::LevelFilter::Off, Duration::ZERO);
        tokio::spawn(async move {
            let analyzed = async {
                let mut connection = options.connect().await?;
                sqlx::query("ANALYZE memories, memory_search, memory_embeddings")
                    .execute(&mut connection)
                    .await?;
                connection.close().await
            }
            .await;
            if let Err(error) = analyzed {
                tracing::debug!(%error, "refreshing planner statistics failed; autovacuum will");
            }
        });
    }

    /// The pool (for maintenance commands).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Close the pool.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

#[async_trait]
impl MemoryStore for PostgresStore {
    fn backend_name(&self) -> &'static str {
        "postgres"
    }

    fn keeps_edges(&self) -> bool {
        true
    }

    async fn check_embedding_model(&self, model_id: &str, dimension: usize) -> MemoryResult<()> {
        let current = format!("{model_id}|{dimension}");
        sqlx::query(
            "INSERT INTO store_meta (key, value) VALUES ('embedding_model', $1) ON CONFLICT (key) DO NOTHING",
        )
        .bind(&current)
        .execute(&self.pool)
        .await
        .map_err(backend_error)?;
        let (value,): (String,) =
            sqlx::query_as("SELECT value FROM store_meta WHERE key = 'embedding_model'")
                .fetch_one(&self.pool)
                .await
                .map_err(backend_error)?;
        if value == current {
            return Ok(());
        }
        let (stored_model, stored_dimension) =
            value.split_once('|').unwrap_or((value.as_str(), "?"));
        Err(MemoryError::invalid(
            "embedding.provider",
            format!(
                "the database (storage.url) holds vectors of model {stored_model} ({stored_dimension} dimensions) but the configured embedder is {model_id} ({dimension} dimensions); use the original embedding settings, or a new database or schema"
            ),
        ))
    }

    async fn insert(&self, records: &[StoredMemory]) -> MemoryResult<()> {
        let mut tx = self.write_transaction().await?;
        insert_records(&mut tx, records).await?;
        tx.commit().await.map_err(backend_error)?;
        self.analyze_after_bulk(records.len() as u64);
        Ok(())
    }

    async fn get(&self, id: &MemoryId) -> MemoryResult<Option<Memory>> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {MEMORY_COLUMNS} FROM memories WHERE id = $1"
        )))
        .bind(id.as_str())
        .fetch_optional(&self.pool)
        .await
        .map_err(backend_error)?;
        row.as_ref().map(memory_from_row).transpose()
    }

    async fn insert_new_content(
        &self,
        records: &[StoredMemory],
    ) -> MemoryResult<Vec<(MemoryId, MemoryId)>> {
        // The write transaction holds the schema's write lock: a process writing the
        // same content at once waits, then finds this one's row.
        let mut tx = self.write_transaction().await?;
        let mut stored = Vec::new();
        for (agent, hashes) in active_content_hashes(records) {
            let rows: Vec<(String, String, Option<String>)> = sqlx::query_as(
                "SELECT id, content_hash, project_id FROM memories \
                 WHERE status = 'active' AND agent_id = $1 AND content_hash = ANY($2)",
            )
            .bind(agent.as_str())
            .bind(&hashes)
            .fetch_all(&mut *tx)
            .await
            .map_err(backend_error)?;
            for row in rows {
                stored.push(StoredContent::from_row(&agent, row)?);
            }
        }
        let (fresh, duplicates) = split_stored_content(records, &stored);
        let fresh: Vec<StoredMemory> = fresh.into_iter().cloned().collect();
        insert_records(&mut tx, &fresh).await?;
        tx.commit().await.map_err(backend_error)?;
        self.analyze_after_bulk(fresh.len() as u64);
        Ok(duplicates)
    }

    async fn find_by_content_hash(
        &self,
        agent: &AgentId,
        hashes: &[String],
    ) -> MemoryResult<Vec<(String, Memory)>> {
        if hashes.is_empty() {
            return Ok(Vec::new());
        }
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {MEMORY_COLUMNS}, content_hash FROM memories \
             WHERE status = 'active' AND agent_id = $1 AND content_hash = ANY($2)"
        )))
        .bind(agent.as_str())
        .bind(hashes)
        .fetch_all(&self.pool)
        .await
        .map_err(backend_error)?;
        rows.iter()
            .map(|row| {
                Ok((
                    row.try_get::<String, _>("content_hash").map_err(corrupt)?,
                    memory_from_row(row)?,
                ))
            })
            .collect()
    }

    async fn session_neighbours(
        &self,
        memory: &Memory,
        radius: usize,
    ) -> MemoryResult<Vec<MemoryId>> {
        let Some(session) = &memory.session_id else {
            return Ok(Vec::new());
        };
        let rows: Vec<(String, i32)> = sqlx::query_as(
            "(SELECT id, 0 AS side FROM memories WHERE agent_id = $1 AND session_id = $2 AND status = 'active' AND id < $3 \
              ORDER BY id DESC LIMIT $4) \
             UNION ALL (SELECT id, 1 AS side FROM memories WHERE agent_id = $1 AND session_id = $2 AND status = 'active' \
              AND id > $3 ORDER BY id LIMIT $4)",
        )
        .bind(memory.agent_id.as_str())
        .bind(session.as_str())
        .bind(memory.id.as_str())
        .bind(radius as i64)
        .fetch_all(&self.pool)
        .await
        .map_err(backend_error)?;
        // Before first (nearest first), then after (nearest first), as SQLite answers.
        let (mut before, mut after): (Vec<_>, Vec<_>) =
            rows.into_iter().partition(|(_, side)| *side == 0);
        before.sort_by(|a, b| b.0.cmp(&a.0));
        after.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(before
            .into_iter()
            .chain(after)
            .map(|(id, _)| MemoryId(id))
            .collect())
    }

    async fn get_many(&self, ids: &[MemoryId]) -> MemoryResult<Vec<Memory>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {MEMORY_COLUMNS} FROM memories WHERE id = ANY($1)"
        )))
        .bind(ids_of(ids))
        .fetch_all(&self.pool)
        .await
        .map_err(backend_error)?;
        rows.iter().map(memory_from_row).collect()
    }

    async fn list(&self, query: &ListQuery) -> MemoryResult<Vec<Memory>> {
        let mut builder: QueryBuilder<Postgres> =
            QueryBuilder::new(format!("SELECT {MEMORY_COLUMNS} FROM memories WHERE TRUE"));
        if let Some(agent) = &query.agent_id {
            builder
                .push(" AND agent_id = ")
                .push_bind(agent.as_str().to_string());
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
                .push(" AND tags @> jsonb_build_array(CAST(")
                .push_bind(tag.clone())
                .push(" AS text))");
        }
        if let Some(cursor) = &query.cursor {
            builder.push(" AND id < ").push_bind(cursor.0.clone());
        }
        if let Some(project) = &query.project_id {
            builder
                .push(" AND project_id = ")
                .push_bind(project.as_str().to_string());
        }
        match &query.occurred {
            Some(range) => {
                builder
                    .push(" AND occurred_at >= ")
                    .push_bind(pg_time(range.start))
                    .push(" AND occurred_at < ")
                    .push_bind(pg_time(range.end))
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
        let mut tx = self.write_transaction().await?;
        // Versions, embedding, edges and keyword terms go with it (cascades).
        let result = sqlx::query("DELETE FROM memories WHERE id = $1")
            .bind(id.as_str())
            .execute(&mut *tx)
            .await
            .map_err(backend_error)?;
        tx.commit().await.map_err(backend_error)?;
        Ok(result.rows_affected() > 0)
    }

    async fn history(&self, id: &MemoryId) -> MemoryResult<Vec<MemoryVersion>> {
        let rows = sqlx::query(
            "SELECT version, content, importance, tags, status, archived_at, reason FROM memory_versions \
             WHERE memory_id = $1 ORDER BY version",
        )
        .bind(id.as_str())
        .fetch_all(&self.pool)
        .await
        .map_err(backend_error)?;
        rows.iter()
            .map(|row| {
                let status: String = row.try_get("status").map_err(corrupt)?;
                let Json(tags): Json<Vec<String>> = row.try_get("tags").map_err(corrupt)?;
                Ok(MemoryVersion {
                    version: row.try_get::<i64, _>("version").map_err(corrupt)? as u32,
                    content: row.try_get("content").map_err(corrupt)?,
                    importance: row.try_get("importance").map_err(corrupt)?,
                    tags,
                    status: MemoryStatus::parse("status", &status)?,
                    archived_at: row.try_get("archived_at").map_err(corrupt)?,
                    reason: row.try_get("reason").map_err(corrupt)?,
                })
            })
            .collect()
    }

    async fn keyword_search(&self, query: &KeywordQuery) -> MemoryResult<Vec<(MemoryId, f64)>> {
        let mut terms = keyword_terms(&query.text);
        terms.sort();
        terms.dedup();
        if terms.is_empty() || query.limit == 0 {
            return Ok(Vec::new());
        }
        // The phrases of SQLite's MATCH expression, in its order: the agent's terms, then the shared pool's.
        let prefix = agent_term_prefix(&query.agent_id);
        let mut phrases: Vec<String> = terms
            .iter()
            .map(|t| lexeme(format!("{prefix}{}", fold(t))))
            .collect();
        if query.include_shared {
            phrases.extend(
                terms
                    .iter()
                    .map(|t| lexeme(format!("{SHARED_TERM_PREFIX}{}", fold(t)))),
            );
        }
        let mut distinct = phrases.clone();
        distinct.sort();
        distinct.dedup();
        let singles: Vec<String> = distinct.iter().map(|l| single(l)).collect();
        // One statement, so one snapshot (as one FTS5 query sees the index) and one round
        // trip: the matches, each with the collection statistics and the document
        // frequency of every distinct term (uncorrelated subqueries, computed once).
        let mut builder: QueryBuilder<Postgres> = QueryBuilder::new(
            "SELECT m.id, s.length, ARRAY(SELECT COALESCE(CAST(s.tf ->> x.lexeme AS bigint), 0) \
             FROM unnest(CAST(",
        );
        builder
            .push_bind(phrases.clone())
            .push(
                " AS text[])) WITH ORDINALITY AS x(lexeme, position) ORDER BY x.position) AS freqs, \
                 (SELECT docs FROM keyword_stats WHERE id = 1) AS docs, \
                 (SELECT tokens FROM keyword_stats WHERE id = 1) AS tokens, \
                 ARRAY(SELECT (SELECT count(*) FROM memory_search h WHERE h.terms @@ CAST(u.query AS tsquery)) \
                 FROM unnest(CAST(",
            )
            .push_bind(singles)
            .push(
                " AS text[])) WITH ORDINALITY AS u(query, position) ORDER BY u.position) AS hits \
                 FROM memory_search s JOIN memories m ON m.id = s.memory_id \
                 WHERE s.terms @@ CAST(",
            )
            .push_bind(any_of(&distinct))
            .push(" AS tsquery) AND m.status = 'active' AND (m.agent_id = ")
            .push_bind(query.agent_id.as_str().to_string())
            .push(" OR (")
            .push_bind(query.include_shared)
            .push(" AND m.shared))");
        if let Some(range) = &query.occurred {
            builder
                .push(" AND m.occurred_at >= ")
                .push_bind(pg_time(range.start))
                .push(" AND m.occurred_at < ")
                .push_bind(pg_time(range.end));
        }
        type Match = (String, i32, Vec<i64>, i64, i64, Vec<i64>);
        let matches: Vec<Match> = builder
            .build_query_as()
            .fetch_all(&self.pool)
            .await
            .map_err(backend_error)?;
        let Some((_, _, _, rows_total, tokens_total, hits)) = matches.first() else {
            return Ok(Vec::new());
        };
        let (rows_total, tokens_total) = (*rows_total, *tokens_total);
        if rows_total <= 0 {
            return Ok(Vec::new());
        }
        let hits: HashMap<&String, i64> = distinct.iter().zip(hits.iter().copied()).collect();
        let idfs: Vec<f64> = phrases
            .iter()
            .map(|p| idf(rows_total, hits.get(p).copied().unwrap_or(0)))
            .collect();
        let avgdl = tokens_total as f64 / rows_total as f64;
        let mut scored: Vec<(MemoryId, f64)> = matches
            .into_iter()
            .map(|(id, length, freqs, _, _, _)| {
                let freqs: Vec<f64> = freqs.iter().map(|f| *f as f64).collect();
                (MemoryId(id), bm25(&freqs, &idfs, f64::from(length), avgdl))
            })
            .collect();
        // SQLite orders by bm25() (the negated score) ascending, then id.
        scored.sort_by(|a, b| (-a.1).total_cmp(&-b.1).then_with(|| a.0 .0.cmp(&b.0 .0)));
        scored.truncate(query.limit);
        Ok(scored)
    }

    async fn touch(&self, ids: &[MemoryId], at: DateTime<Utc>) -> MemoryResult<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let mut tx = self.write_transaction().await?;
        sqlx::query(
            "UPDATE memories SET access_count = access_count + 1, \
             last_accessed_at = GREATEST(last_accessed_at, $1) WHERE id = ANY($2)",
        )
        .bind(at)
        .bind(ids_of(ids))
        .execute(&mut *tx)
        .await
        .map_err(backend_error)?;
        tx.commit().await.map_err(backend_error)
    }

    async fn agent_memories(&self, agent: &AgentId) -> MemoryResult<Vec<Memory>> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {MEMORY_COLUMNS} FROM memories WHERE agent_id = $1 ORDER BY id"
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
        let row: Option<(Vec<f32>,)> =
            sqlx::query_as("SELECT vector FROM memory_embeddings WHERE memory_id = $1")
                .bind(id.as_str())
                .fetch_optional(&self.pool)
                .await
                .map_err(backend_error)?;
        Ok(row.map(|(vector,)| vector))
    }

    async fn embeddings_page(
        &self,
        after: Option<&MemoryId>,
        limit: usize,
    ) -> MemoryResult<Vec<EmbeddingRecord>> {
        let rows = sqlx::query(
            "SELECT m.id, m.agent_id, m.memory_type, m.shared, e.vector FROM memories m \
             JOIN memory_embeddings e ON e.memory_id = m.id \
             WHERE m.status = 'active' AND m.id > $1 ORDER BY m.id LIMIT $2",
        )
        .bind(after.map(|a| a.as_str()).unwrap_or(""))
        .bind(limit as i64)
        .fetch_all(&self.pool)
        .await
        .map_err(backend_error)?;
        rows.iter()
            .map(|row| {
                let agent: String = row.try_get("agent_id").map_err(corrupt)?;
                let memory_type: String = row.try_get("memory_type").map_err(corrupt)?;
                Ok(EmbeddingRecord {
                    id: MemoryId(row.try_get("id").map_err(corrupt)?),
                    agent_id: AgentId::parse(&agent)?,
                    memory_type: MemoryType::parse("type", &memory_type)?,
                    shared: row.try_get("shared").map_err(corrupt)?,
                    vector: row.try_get("vector").map_err(corrupt)?,
                })
            })
            .collect()
    }

    async fn count(&self) -> MemoryResult<u64> {
        let (count,): (i64,) = sqlx::query_as("SELECT count(*) FROM memories")
            .fetch_one(&self.pool)
            .await
            .map_err(backend_error)?;
        Ok(count.max(0) as u64)
    }

    async fn record_run(&self, run: &ConsolidationRun) -> MemoryResult<()> {
        sqlx::query(
            "INSERT INTO consolidation_runs (id, agent_id, trigger, started_at, finished_at, processed, consolidated, \
             forgotten, new_semantic, new_procedural, report) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
             ON CONFLICT (id) DO UPDATE SET agent_id = excluded.agent_id, trigger = excluded.trigger, \
             started_at = excluded.started_at, finished_at = excluded.finished_at, processed = excluded.processed, \
             consolidated = excluded.consolidated, forgotten = excluded.forgotten, new_semantic = excluded.new_semantic, \
             new_procedural = excluded.new_procedural, report = excluded.report",
        )
        .bind(&run.id)
        .bind(run.agent_id.as_ref().map(|a| a.as_str()))
        .bind(&run.trigger)
        .bind(run.started_at)
        .bind(run.finished_at)
        .bind(i64::from(run.processed))
        .bind(i64::from(run.consolidated))
        .bind(i64::from(run.forgotten))
        .bind(i64::from(run.new_semantic))
        .bind(i64::from(run.new_procedural))
        .bind(&run.report)
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
        let mut builder: QueryBuilder<Postgres> =
            QueryBuilder::new("SELECT * FROM consolidation_runs");
        if let Some(agent) = agent {
            builder
                .push(" WHERE agent_id = ")
                .push_bind(agent.as_str().to_string());
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
                let agent: Option<String> = row.try_get("agent_id").map_err(corrupt)?;
                let count = |name: &str| -> MemoryResult<u32> {
                    Ok(row.try_get::<i64, _>(name).map_err(corrupt)? as u32)
                };
                Ok(ConsolidationRun {
                    id: row.try_get("id").map_err(corrupt)?,
                    agent_id: agent.as_deref().map(AgentId::parse).transpose()?,
                    trigger: row.try_get("trigger").map_err(corrupt)?,
                    started_at: row.try_get("started_at").map_err(corrupt)?,
                    finished_at: row.try_get("finished_at").map_err(corrupt)?,
                    processed: count("processed")?,
                    consolidated: count("consolidated")?,
                    forgotten: count("forgotten")?,
                    new_semantic: count("new_semantic")?,
                    new_procedural: count("new_procedural")?,
                    report: row.try_get("report").map_err(corrupt)?,
                })
            })
            .collect()
    }

    async fn commit_consolidation(&self, commit: &ConsolidationCommit) -> MemoryResult<()> {
        let mut tx = self.write_transaction().await?;
        // Sources first: a source changed since it was read fails the whole cluster.
        for (next, previous) in &commit.sources {
            update_record(&mut tx, next, previous, None).await?;
        }
        insert_records(&mut tx, std::slice::from_ref(&commit.derived)).await?;
        for edge in &commit.edges {
            upsert_edge_in(&mut tx, edge).await?;
        }
        tx.commit().await.map_err(backend_error)
    }

    async fn embeddings_of(&self, ids: &[MemoryId]) -> MemoryResult<Vec<(MemoryId, Vec<f32>)>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let rows: Vec<(String, Vec<f32>)> = sqlx::query_as(
            "SELECT memory_id, vector FROM memory_embeddings WHERE memory_id = ANY($1)",
        )
        .bind(ids_of(ids))
        .fetch_all(&self.pool)
        .await
        .map_err(backend_error)?;
        Ok(rows
            .into_iter()
            .map(|(id, vector)| (MemoryId(id), vector))
            .collect())
    }

    async fn purge_forgotten(
        &self,
        agent: &AgentId,
        archived_before: DateTime<Utc>,
    ) -> MemoryResult<Vec<MemoryId>> {
        let mut tx = self.write_transaction().await?;
        let rows: Vec<(String,)> = sqlx::query_as(
            "SELECT m.id FROM memories m WHERE m.agent_id = $1 AND m.status = 'archived' AND m.updated_at < $2 \
             AND (SELECT v.reason FROM memory_versions v WHERE v.memory_id = m.id ORDER BY v.version DESC LIMIT 1) \
             IN ($3, $4) ORDER BY m.updated_at, m.id",
        )
        .bind(agent.as_str())
        .bind(pg_time(archived_before))
        .bind(FORGET_REASONS[0])
        .bind(FORGET_REASONS[1])
        .fetch_all(&mut *tx)
        .await
        .map_err(backend_error)?;
        let ids: Vec<String> = rows.into_iter().map(|(id,)| id).collect();
        if !ids.is_empty() {
            // Versions, embedding, edges and keyword terms go with them (cascades).
            sqlx::query("DELETE FROM memories WHERE id = ANY($1)")
                .bind(&ids)
                .execute(&mut *tx)
                .await
                .map_err(backend_error)?;
        }
        tx.commit().await.map_err(backend_error)?;
        Ok(ids.into_iter().map(MemoryId).collect())
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
                 FROM memories WHERE session_id IS NOT NULL \
                 AND NOT (tags @> CAST('[\"archive_summary\"]' AS jsonb)) \
                 GROUP BY agent_id, session_id) g \
             LEFT JOIN session_archives a ON a.agent_id = g.agent_id AND a.session_id = g.session_id \
             WHERE g.last_activity < $1 AND (a.archived_through IS NULL OR g.last_activity > a.archived_through) \
             ORDER BY g.last_activity LIMIT $2",
        )
        .bind(pg_time(idle_before))
        .bind(limit as i64)
        .fetch_all(&self.pool)
        .await
        .map_err(backend_error)?;
        rows.iter()
            .map(|row| {
                let agent: String = row.try_get("agent_id").map_err(corrupt)?;
                let session: String = row.try_get("session_id").map_err(corrupt)?;
                Ok(IdleSession {
                    agent_id: AgentId::parse(&agent)?,
                    session_id: SessionId::parse(&session)?,
                    first_at: row.try_get("first_at").map_err(corrupt)?,
                    last_at: row.try_get("last_at").map_err(corrupt)?,
                    last_activity: row.try_get("last_activity").map_err(corrupt)?,
                })
            })
            .collect()
    }

    async fn session_memories(
        &self,
        agent: &AgentId,
        session: &SessionId,
    ) -> MemoryResult<Vec<Memory>> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {MEMORY_COLUMNS} FROM memories WHERE agent_id = $1 AND session_id = $2 ORDER BY occurred_at, id"
        )))
        .bind(agent.as_str())
        .bind(session.as_str())
        .fetch_all(&self.pool)
        .await
        .map_err(backend_error)?;
        rows.iter().map(memory_from_row).collect()
    }

    async fn commit_session_archive(&self, archive: &SessionArchive) -> MemoryResult<bool> {
        let mut tx = self.write_transaction().await?;
        let marked = sqlx::query(
            "INSERT INTO session_archives (agent_id, session_id, archived_through, summary_id) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (agent_id, session_id) DO UPDATE SET archived_through = excluded.archived_through, \
             summary_id = excluded.summary_id WHERE session_archives.archived_through < excluded.archived_through",
        )
        .bind(archive.agent_id.as_str())
        .bind(archive.session_id.as_str())
        .bind(archive.archived_through)
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
             FROM outbox WHERE seq > $1 ORDER BY seq LIMIT $2",
        )
        .bind(i64::try_from(after).unwrap_or(i64::MAX))
        .bind(limit as i64)
        .fetch_all(&self.pool)
        .await
        .map_err(backend_error)?;
        rows.iter().map(outbox_entry_from_row).collect()
    }

    async fn outbox_bounds(&self) -> MemoryResult<OutboxBounds> {
        let (oldest, head): (Option<i64>, i64) = sqlx::query_as(
            "SELECT (SELECT MIN(seq) FROM outbox), \
             COALESCE(pg_sequence_last_value(CAST(pg_get_serial_sequence('outbox', 'seq') AS regclass)), 0)",
        )
        .fetch_one(&self.pool)
        .await
        .map_err(backend_error)?;
        Ok(OutboxBounds {
            oldest: oldest.map(|s| s.max(0) as u64),
            head: head.max(0) as u64,
        })
    }

    async fn outbox_committed_head(&self) -> MemoryResult<u64> {
        // Behind the write lock no writer is in flight, so every sequence number taken
        // so far belongs to a committed (or rolled-back) transaction.
        let mut tx = self.write_transaction().await?;
        let (head,): (i64,) = sqlx::query_as(
            "SELECT COALESCE(pg_sequence_last_value(CAST(pg_get_serial_sequence('outbox', 'seq') AS regclass)), 0)",
        )
        .fetch_one(&mut *tx)
        .await
        .map_err(backend_error)?;
        tx.commit().await.map_err(backend_error)?;
        Ok(head.max(0) as u64)
    }

    async fn trim_outbox(&self, through: u64) -> MemoryResult<usize> {
        let deleted = sqlx::query("DELETE FROM outbox WHERE seq <= $1")
            .bind(i64::try_from(through).unwrap_or(i64::MAX))
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
        // The upsert locks the session's row until commit, so concurrent appends to one
        // session (from any replica) take consecutive sequence numbers.
        let mut tx = self.pool.begin().await.map_err(backend_error)?;
        let seq: i64 = sqlx::query_scalar(
            "INSERT INTO sessions (agent_id, session_id, last_seq, pending_tokens, created_at, last_message_at) \
             VALUES ($1, $2, 1, $3, $4, $4) \
             ON CONFLICT (agent_id, session_id) DO UPDATE SET last_seq = sessions.last_seq + 1, \
             pending_tokens = sessions.pending_tokens + excluded.pending_tokens, \
             last_message_at = GREATEST(sessions.last_message_at, excluded.last_message_at) \
             RETURNING last_seq",
        )
        .bind(agent.as_str())
        .bind(session.as_str())
        .bind(i64::from(tokens))
        .bind(at)
        .fetch_one(&mut *tx)
        .await
        .map_err(backend_error)?;
        sqlx::query(
            "INSERT INTO session_messages (agent_id, session_id, seq, role, content, tokens, at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(agent.as_str())
        .bind(session.as_str())
        .bind(seq)
        .bind(role.as_str())
        .bind(content)
        .bind(i64::from(tokens))
        .bind(at)
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
             created_at, last_message_at FROM sessions WHERE agent_id = $1 AND session_id = $2",
        )
        .bind(agent.as_str())
        .bind(session.as_str())
        .fetch_optional(&self.pool)
        .await
        .map_err(backend_error)?;
        let Some(row) = row else {
            return Ok(None);
        };
        let count = |name: &str| -> MemoryResult<u64> {
            Ok(row.try_get::<i64, _>(name).map_err(corrupt)?.max(0) as u64)
        };
        Ok(Some(SessionRecord {
            agent_id: agent.clone(),
            session_id: session.clone(),
            last_seq: count("last_seq")?,
            compacted_through: count("compacted_through")?,
            summary: row.try_get("summary").map_err(corrupt)?,
            summarized_at: row.try_get("summarized_at").map_err(corrupt)?,
            pending_tokens: count("pending_tokens")?,
            compactions: count("compactions")? as u32,
            created_at: row.try_get("created_at").map_err(corrupt)?,
            last_message_at: row.try_get("last_message_at").map_err(corrupt)?,
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
             WHERE agent_id = $1 AND session_id = $2 AND seq > $3 ORDER BY seq",
        )
        .bind(agent.as_str())
        .bind(session.as_str())
        .bind(i64::try_from(after).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await
        .map_err(backend_error)?;
        rows.iter()
            .map(|row| {
                let role: String = row.try_get("role").map_err(corrupt)?;
                Ok(SessionMessage {
                    seq: row.try_get::<i64, _>("seq").map_err(corrupt)? as u64,
                    role: MessageRole::parse(&role)?,
                    content: row.try_get("content").map_err(corrupt)?,
                    tokens: row.try_get::<i64, _>("tokens").map_err(corrupt)? as u32,
                    at: row.try_get("at").map_err(corrupt)?,
                })
            })
            .collect()
    }

    async fn commit_session_compaction(
        &self,
        compaction: &SessionCompaction,
    ) -> MemoryResult<bool> {
        let mut tx = self.write_transaction().await?;
        let through = i64::try_from(compaction.through).unwrap_or(i64::MAX);
        // Only while the mark is behind: two compactions of the same messages commit once.
        let marked = sqlx::query(
            "UPDATE sessions SET compacted_through = $1, summary = $2, summarized_at = $3, \
             compactions = compactions + 1, \
             pending_tokens = (SELECT COALESCE(SUM(tokens), 0) FROM session_messages m \
                 WHERE m.agent_id = $4 AND m.session_id = $5 AND m.seq > $1) \
             WHERE agent_id = $4 AND session_id = $5 AND compacted_through < $1 AND last_seq >= $1",
        )
        .bind(through)
        .bind(&compaction.summary)
        .bind(compaction.at)
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
        // One statement (the conflicting row is locked and the condition re-checked), so two
        // processes racing for a slot cannot both win.
        let claimed = sqlx::query(
            "INSERT INTO job_leases (job, holder, expires_at, last_slot) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (job) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at, \
             last_slot = excluded.last_slot \
             WHERE job_leases.last_slot < excluded.last_slot \
             AND (job_leases.expires_at <= $5 OR job_leases.holder = excluded.holder)",
        )
        .bind(job)
        .bind(holder)
        .bind(expires_at)
        .bind(slot)
        .bind(now)
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
            sqlx::query("UPDATE job_leases SET expires_at = $1 WHERE job = $2 AND holder = $3")
                .bind(expires_at)
                .bind(job)
                .bind(holder)
                .execute(&self.pool)
                .await
                .map_err(backend_error)?;
        Ok(renewed.rows_affected() > 0)
    }

    async fn release_lease(&self, job: &str, holder: &str, now: DateTime<Utc>) -> MemoryResult<()> {
        sqlx::query("UPDATE job_leases SET expires_at = $1 WHERE job = $2 AND holder = $3")
            .bind(now)
            .bind(job)
            .bind(holder)
            .execute(&self.pool)
            .await
            .map_err(backend_error)?;
        Ok(())
    }

    async fn flush(&self) -> MemoryResult<()> {
        // Every acknowledged write is a committed transaction; the server owns durability.
        Ok(())
    }
}

#[async_trait]
impl GraphStore for PostgresStore {
    fn backend_name(&self) -> &'static str {
        "sql"
    }

    async fn upsert_edge(&self, edge: &Association) -> MemoryResult<Association> {
        // Under the write lock: edge changes enqueue outbox entries, which must commit in order.
        let mut tx = self.write_transaction().await?;
        let row = upsert_edge_in(&mut tx, edge).await?;
        tx.commit().await.map_err(backend_error)?;
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
            let rows = sqlx::query(
                "SELECT agent_id, from_id, to_id, relation, weight, created_at FROM associations \
                 WHERE agent_id = $1 AND (from_id = ANY($2) OR to_id = ANY($2)) \
                 ORDER BY from_id, to_id, relation",
            )
            .bind(agent.as_str())
            .bind(&frontier)
            .fetch_all(&self.pool)
            .await
            .map_err(backend_error)?;
            let mut next = Vec::new();
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
            frontier = next;
        }
        Ok(edges)
    }

    async fn remove_memory(&self, id: &MemoryId) -> MemoryResult<()> {
        let mut tx = self.write_transaction().await?;
        sqlx::query("DELETE FROM associations WHERE from_id = $1 OR to_id = $1")
            .bind(id.as_str())
            .execute(&mut *tx)
            .await
            .map_err(backend_error)?;
        tx.commit().await.map_err(backend_error)
    }

    async fn agent_edges(&self, agent: &AgentId) -> MemoryResult<Vec<Association>> {
        let rows = sqlx::query(
            "SELECT agent_id, from_id, to_id, relation, weight, created_at FROM associations \
             WHERE agent_id = $1 ORDER BY from_id, to_id, relation",
        )
        .bind(agent.as_str())
        .fetch_all(&self.pool)
        .await
        .map_err(backend_error)?;
        rows.iter().map(association_from_row).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_names_come_from_the_search_path() {
        assert_eq!(first_schema("t_abc").as_deref(), Some("t_abc"));
        assert_eq!(first_schema("\"$user\", public").as_deref(), Some("public"));
        assert_eq!(first_schema("\"My\"\"S\", x").as_deref(), Some("My\"S"));
        assert_eq!(first_schema("\"$user\""), None);
    }

    #[test]
    fn long_terms_become_bounded_lexemes_and_accents_fold() {
        let long = "x".repeat(5000);
        let stored = lexeme(long.clone());
        assert!(stored.len() < 2047);
        assert_eq!(stored, lexeme(long));
        assert_eq!(fold("café"), "cafe");
        assert_eq!(fold("naïve"), "naive");
        assert_eq!(fold("plain"), "plain");
        assert_eq!(single("it's"), "'it''s'");
    }
}

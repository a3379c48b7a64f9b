//! The embedded system of record: SQLite through sqlx (WAL, foreign keys, FTS5).
//!
//! [`SqliteStore`] is [`SqlStore`] over the [`Dialect`] below, which holds what SQLite
//! does its own way: times as fixed-width RFC 3339 text, flags as 0 or 1, JSON as text,
//! embeddings as little-endian f32 blobs; `BEGIN IMMEDIATE` as the write lock; id lists
//! bound one placeholder per value; and the FTS5 keyword index, whose terms the store
//! writes itself (agent-prefixed, see `store::keyword`) and whose BM25 it computes from
//! FTS5's own statistics.

use std::collections::HashMap;
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, SecondsFormat, Utc};
use mnemos_actors::error::{MemoryError, MemoryResult};
use mnemos_actors::model::{Memory, MemoryId, MemoryStatus};
use mnemos_actors::store::{KeywordQuery, MemoryStore, RowStamp, StoredMemory};
use sqlx::pool::PoolConnection;
use sqlx::query::Query;
use sqlx::sqlite::{
    SqliteArguments, SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePool,
    SqlitePoolOptions, SqliteRow, SqliteSynchronous,
};
use sqlx::{AssertSqlSafe, Row, Sqlite, Transaction};

use super::dialect::{other_embedding_model, rows, run, Dialect, SqlStore};
use super::keyword::{best, bm25, fold, idf, postings, query_phrases, query_terms};
use super::rows::{self as map, corrupt, Columns};
use super::sql::{self, id_texts, memory_columns, Arg, ListBinding, Statement};

/// The migrations of the SQLite schema, embedded in the binary.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

/// SQLite-backed store.
pub type SqliteStore = SqlStore<Sqlite>;

/// The queue this process's SQLite writers take turns on (one writer at a time, as
/// SQLite allows), shared by the store's clones.
#[derive(Clone, Debug, Default)]
pub struct WriteQueue(Arc<tokio::sync::Mutex<()>>);

/// How often the store copies its write-ahead log into the database in the background.
/// SQLite would otherwise make the commit that crosses 1,000 log pages do it, and that
/// remember waits for the copy (single remember p99 7.4-11 ms with it, 2.9-4.0 ms
/// without: docs/measurements-2026-12.md, 2026-12-06 night).
const CHECKPOINT_EVERY: Duration = Duration::from_secs(1);

/// Log pages after which a committing connection checkpoints anyway (about 40 MB): the
/// backstop that keeps the log bounded should the background checkpoints fall behind.
const AUTOCHECKPOINT_PAGES: &str = "10000";

/// Checkpoint `store`'s log every [`CHECKPOINT_EVERY`] (PASSIVE: readers and the writer
/// carry on meanwhile) until the pool is closed or the store's last clone is dropped.
fn checkpoint_in_background(store: &SqliteStore) {
    let pool = store.pool.clone();
    let alive = Arc::downgrade(&store.state.0);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(CHECKPOINT_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if alive.strong_count() == 0 || pool.is_closed() {
                break;
            }
            if let Err(error) = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
                .execute(&pool)
                .await
            {
                tracing::debug!(%error, "background WAL checkpoint failed; the next one retries");
            }
        }
    });
}

/// A database error as the store reports it: the backend is unavailable.
fn backend_error(error: sqlx::Error) -> MemoryError {
    MemoryError::unavailable(format!("sqlite: {error}"))
}

/// Fixed-width RFC 3339 so text order is time order.
pub fn format_time(time: &DateTime<Utc>) -> String {
    time.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// A stored [`format_time`] text as an instant.
fn parse_time(raw: &str) -> MemoryResult<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(raw)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| MemoryError::internal(format!("corrupt timestamp {raw:?} in store: {e}")))
}

/// An embedding as stored: its floats as little-endian bytes.
fn vector_to_blob(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A stored embedding as floats.
fn blob_to_vector(blob: &[u8]) -> Vec<f32> {
    blob.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

impl Columns for SqliteRow {
    fn text(&self, column: &str) -> MemoryResult<String> {
        self.try_get(column).map_err(corrupt)
    }
    fn optional_text(&self, column: &str) -> MemoryResult<Option<String>> {
        self.try_get(column).map_err(corrupt)
    }
    fn integer(&self, column: &str) -> MemoryResult<i64> {
        self.try_get(column).map_err(corrupt)
    }
    fn optional_integer(&self, column: &str) -> MemoryResult<Option<i64>> {
        self.try_get(column).map_err(corrupt)
    }
    fn real(&self, column: &str) -> MemoryResult<f32> {
        Ok(self.try_get::<f64, _>(column).map_err(corrupt)? as f32)
    }
    fn optional_real(&self, column: &str) -> MemoryResult<Option<f32>> {
        let value: Option<f64> = self.try_get(column).map_err(corrupt)?;
        Ok(value.map(|v| v as f32))
    }
    fn flag(&self, column: &str) -> MemoryResult<bool> {
        Ok(self.try_get::<i64, _>(column).map_err(corrupt)? != 0)
    }
    fn time(&self, column: &str) -> MemoryResult<DateTime<Utc>> {
        parse_time(self.try_get(column).map_err(corrupt)?)
    }
    fn optional_time(&self, column: &str) -> MemoryResult<Option<DateTime<Utc>>> {
        let raw: Option<&str> = self.try_get(column).map_err(corrupt)?;
        raw.map(parse_time).transpose()
    }
    fn json(&self, column: &str) -> MemoryResult<Result<serde_json::Value, serde_json::Error>> {
        Ok(serde_json::from_str(self.try_get(column).map_err(corrupt)?))
    }
    fn tags(&self, column: &str) -> MemoryResult<Result<Vec<String>, serde_json::Error>> {
        Ok(serde_json::from_str(self.try_get(column).map_err(corrupt)?))
    }
    fn vector(&self, column: &str) -> MemoryResult<Vec<f32>> {
        Ok(blob_to_vector(self.try_get(column).map_err(corrupt)?))
    }
}

/// A memory row as `json_array(memory_columns)` renders it: SQLite's values as JSON
/// (text as strings, numbers as numbers, NULL as null), in `memory_columns!` order.
struct JsonColumns<'a>(&'a [serde_json::Value]);

/// The names of `memory_columns!`, in order: where `JsonColumns` finds a column.
static MEMORY_COLUMN_NAMES: std::sync::LazyLock<Vec<&'static str>> =
    std::sync::LazyLock::new(|| memory_columns!().split(',').map(str::trim).collect());

impl JsonColumns<'_> {
    /// The value of `column`; an unknown column is a bug, reported as a corrupt row.
    fn value(&self, column: &str) -> MemoryResult<&serde_json::Value> {
        MEMORY_COLUMN_NAMES
            .iter()
            .position(|name| *name == column)
            .and_then(|index| self.0.get(index))
            .ok_or_else(|| MemoryError::internal(format!("no column {column} in the row")))
    }
    /// `column` unless it is NULL.
    fn present(&self, column: &str) -> MemoryResult<Option<&serde_json::Value>> {
        Ok(Some(self.value(column)?).filter(|v| !v.is_null()))
    }
    /// `column` as text (NULL or a number is a corrupt row).
    fn text_value(&self, column: &str) -> MemoryResult<&str> {
        self.value(column)?
            .as_str()
            .ok_or_else(|| wrong_type(column, "text"))
    }
}

/// A column whose value is not of the type the row needs.
fn wrong_type(column: &str, wanted: &str) -> MemoryError {
    MemoryError::internal(format!("corrupt row in store: {column} is not {wanted}"))
}

impl Columns for JsonColumns<'_> {
    fn text(&self, column: &str) -> MemoryResult<String> {
        self.text_value(column).map(str::to_string)
    }
    fn optional_text(&self, column: &str) -> MemoryResult<Option<String>> {
        self.present(column)?
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| wrong_type(column, "text"))
            })
            .transpose()
    }
    fn integer(&self, column: &str) -> MemoryResult<i64> {
        self.value(column)?
            .as_i64()
            .ok_or_else(|| wrong_type(column, "an integer"))
    }
    fn optional_integer(&self, column: &str) -> MemoryResult<Option<i64>> {
        self.present(column)?
            .map(|v| v.as_i64().ok_or_else(|| wrong_type(column, "an integer")))
            .transpose()
    }
    fn real(&self, column: &str) -> MemoryResult<f32> {
        self.value(column)?
            .as_f64()
            .map(|v| v as f32)
            .ok_or_else(|| wrong_type(column, "a number"))
    }
    fn optional_real(&self, column: &str) -> MemoryResult<Option<f32>> {
        self.present(column)?
            .map(|v| {
                v.as_f64()
                    .map(|v| v as f32)
                    .ok_or_else(|| wrong_type(column, "a number"))
            })
            .transpose()
    }
    fn flag(&self, column: &str) -> MemoryResult<bool> {
        Ok(self.integer(column)? != 0)
    }
    fn time(&self, column: &str) -> MemoryResult<DateTime<Utc>> {
        parse_time(self.text_value(column)?)
    }
    fn optional_time(&self, column: &str) -> MemoryResult<Option<DateTime<Utc>>> {
        self.present(column)?
            .map(|v| v.as_str().ok_or_else(|| wrong_type(column, "text")))
            .transpose()?
            .map(parse_time)
            .transpose()
    }
    fn json(&self, column: &str) -> MemoryResult<Result<serde_json::Value, serde_json::Error>> {
        Ok(serde_json::from_str(self.text_value(column)?))
    }
    fn tags(&self, column: &str) -> MemoryResult<Result<Vec<String>, serde_json::Error>> {
        Ok(serde_json::from_str(self.text_value(column)?))
    }
    fn vector(&self, column: &str) -> MemoryResult<Vec<f32>> {
        // JSON cannot hold a blob; no aggregated read asks for one.
        Err(wrong_type(column, "readable from JSON"))
    }
}

/// A range bound as stored text compares: clamped to the years every stored instant
/// lies in (1 to 9999, `model::INSTANT_YEARS`), because chrono's extremes of an
/// open-ended range print with a sign (`+262143-…`) that sorts before every year.
fn text_bound(time: DateTime<Utc>) -> DateTime<Utc> {
    use chrono::TimeZone;
    let earliest = Utc
        .with_ymd_and_hms(1, 1, 1, 0, 0, 0)
        .single()
        .unwrap_or(DateTime::<Utc>::MIN_UTC);
    let latest = Utc
        .with_ymd_and_hms(9999, 12, 31, 23, 59, 59)
        .single()
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
        + chrono::Duration::nanoseconds(999_999_999);
    time.clamp(earliest, latest)
}

/// `statement` as a sqlx query, each argument in SQLite's column type.
fn query(statement: &Statement<'_>) -> Query<'static, Sqlite, SqliteArguments> {
    let query = sqlx::query(AssertSqlSafe(positional(statement.text())));
    statement.args().iter().fold(query, |query, arg| match arg {
        Arg::Text(value) => query.bind(*value),
        Arg::OptionalText(value) => query.bind(*value),
        Arg::Integer(value) => query.bind(*value),
        Arg::Real(value) => query.bind(f64::from(*value)),
        Arg::OptionalReal(value) => query.bind(value.map(f64::from)),
        Arg::Flag(value) => query.bind(i64::from(*value)),
        Arg::Time(time) => query.bind(format_time(time)),
        Arg::Bound(time) => query.bind(format_time(&text_bound(*time))),
        Arg::OptionalTime(time) => query.bind(time.as_ref().map(format_time)),
        Arg::Json(value) => query.bind(value.to_string()),
        Arg::Tags(tags) => query.bind(serde_json::to_string(tags).unwrap_or_else(|_| "[]".into())),
        Arg::Vector(vector) => query.bind(vector_to_blob(vector)),
        // Never built for SQLite (its lists are expanded); as JSON text if it were.
        Arg::TextArray(values) => query.bind(serde_json::to_string(values).unwrap_or_default()),
    })
}

/// `text` with `$1, $2, …, $n` (each once, in order, outside string literals) written as
/// anonymous `?`s, binding the same arguments: SQLite looks a numbered parameter up by
/// name in a list, so binding the thousands of a multi-row insert by number costs
/// O(n²), while anonymous ones bind in O(n). Any other use of numbers is left as it is.
// The `Cow` itself is taken so that text with nothing to change is returned without a copy.
#[allow(clippy::ptr_arg)]
fn positional(text: &std::borrow::Cow<'static, str>) -> std::borrow::Cow<'static, str> {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let (mut expected, mut in_literal, mut last) = (1u64, false, 0usize);
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\'' => in_literal = !in_literal,
            b'$' if !in_literal && bytes.get(i + 1).is_some_and(u8::is_ascii_digit) => {
                let end = (i + 1..bytes.len())
                    .find(|&j| !bytes[j].is_ascii_digit())
                    .unwrap_or(bytes.len());
                if text[i + 1..end].parse::<u64>().ok() != Some(expected) {
                    return text.clone();
                }
                expected += 1;
                out.push_str(&text[last..i]);
                out.push('?');
                last = end;
                i = end;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    if expected == 1 {
        return text.clone();
    }
    out.push_str(&text[last..]);
    std::borrow::Cow::Owned(out)
}

/// Quote a term for an FTS5 query (doubling embedded quotes).
fn fts_quote(term: &str) -> String {
    format!("\"{}\"", term.replace('"', "\"\""))
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

/// The FTS row of a memory: its postings (`keyword::postings`), each followed by a space.
fn fts_terms(memory: &Memory) -> String {
    let mut out = String::with_capacity(memory.content.len() * 2);
    for posting in postings(memory, |prefix, term| format!("{prefix}{term}")) {
        out.push_str(&posting);
        out.push(' ');
    }
    out
}

/// `INSERT INTO memories_fts` of `memories` (by their rowids in `memories`).
fn insert_fts<'a>(memories: &[&'a Memory], terms: &'a [String]) -> Statement<'a> {
    let mut statement = Statement::new("INSERT INTO memories_fts (rowid, terms) VALUES ", []);
    for (index, (memory, terms)) in memories.iter().zip(terms).enumerate() {
        if index > 0 {
            statement.push(", ");
        }
        statement
            .push("((SELECT rowid FROM memories WHERE id = ")
            .bind(Arg::Text(memory.id.as_str()))
            .push("), ")
            .bind(Arg::Text(terms))
            .push(")");
    }
    statement
}

#[async_trait]
impl Dialect for Sqlite {
    const STORE_NAME: &'static str = "sqlite";
    const LISTS: ListBinding = ListBinding::Expanded;
    const GREATEST: &'static str = "max";
    const HAS_TAG: (&'static str, &'static str) = (
        " AND EXISTS (SELECT 1 FROM json_each(memories.tags) WHERE value = ",
        ")",
    );
    const NOT_ARCHIVE_SUMMARY: &'static str = "tags NOT LIKE '%\"archive_summary\"%'";
    const ARCHIVE_VERSIONS: &'static str = "INSERT OR REPLACE INTO memory_versions \
         (memory_id, version, content, importance, tags, status, archived_at, reason) ";
    const ARCHIVE_VERSIONS_END: &'static str = "";
    const PUT_EMBEDDING: &'static str =
        "INSERT OR REPLACE INTO memory_embeddings (memory_id, vector) VALUES ($1, $2)";
    const RECORD_RUN: &'static str = "INSERT OR REPLACE INTO consolidation_runs (id, agent_id, \
         trigger, started_at, finished_at, processed, consolidated, forgotten, new_semantic, \
         new_procedural, report) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)";
    const RECORD_KEYWORD_TERMS: &'static str =
        "INSERT OR REPLACE INTO store_meta (key, value) VALUES ('keyword_terms', $1)";
    const OUTBOX_BOUNDS: &'static str = "SELECT (SELECT MIN(seq) FROM outbox) AS oldest, \
         COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'outbox'), 0) AS head";
    const EDGE_ORDER: &'static str = "";
    const PURGE_ORDER: &'static str = "";
    const PURGE_CHUNK: usize = 1;
    const POSITION: &'static str = "instr";

    type State = WriteQueue;
    type LoneWrite = PoolConnection<Sqlite>;

    fn write_queue(state: &WriteQueue) -> Option<Arc<tokio::sync::Mutex<()>>> {
        Some(state.0.clone())
    }

    fn backend_error(error: sqlx::Error) -> MemoryError {
        backend_error(error)
    }

    async fn fetch_all(
        conn: &mut SqliteConnection,
        statement: &Statement<'_>,
    ) -> Result<Vec<SqliteRow>, sqlx::Error> {
        query(statement).fetch_all(conn).await
    }

    async fn execute(
        conn: &mut SqliteConnection,
        statement: &Statement<'_>,
    ) -> Result<u64, sqlx::Error> {
        Ok(query(statement).execute(conn).await?.rows_affected())
    }

    /// `BEGIN IMMEDIATE` takes SQLite's write lock when the transaction begins, so it
    /// waits its turn (up to the busy timeout) instead of failing with
    /// SQLITE_BUSY_SNAPSHOT when another writer commits between its first read and its
    /// first write.
    async fn write_transaction(pool: &SqlitePool) -> MemoryResult<Transaction<'static, Sqlite>> {
        pool.begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(backend_error)
    }

    async fn session_transaction(pool: &SqlitePool) -> MemoryResult<Transaction<'static, Sqlite>> {
        Self::write_transaction(pool).await
    }

    /// A statement alone is its own transaction.
    async fn begin_lone_write(pool: &SqlitePool) -> MemoryResult<PoolConnection<Sqlite>> {
        pool.acquire().await.map_err(backend_error)
    }

    async fn end_lone_write(_write: PoolConnection<Sqlite>) -> MemoryResult<()> {
        Ok(())
    }

    async fn check_embedding_model(
        store: &SqliteStore,
        model_id: &str,
        dimension: usize,
    ) -> MemoryResult<()> {
        let stored = store.row(&Statement::new(sql::EMBEDDING_MODEL, [])).await?;
        let current = format!("{model_id}|{dimension}");
        match stored.map(|row| row.text("value")).transpose()? {
            Some(value) if value != current => Err(other_embedding_model(
                &value,
                model_id,
                dimension,
                "the data directory",
                "a new data_dir",
            )),
            Some(_) => Ok(()),
            None => {
                let record = Statement::new(
                    "INSERT OR IGNORE INTO store_meta (key, value) VALUES ('embedding_model', $1)",
                    [Arg::Text(&current)],
                );
                store.run(&record).await?;
                Ok(())
            }
        }
    }

    async fn insert_records(
        conn: &mut SqliteConnection,
        records: &[&StoredMemory],
    ) -> MemoryResult<()> {
        // Ids already stored (a retried request) are skipped whole: nothing of theirs is written twice.
        let mut existing = std::collections::HashSet::new();
        for chunk in records.chunks(500) {
            let mut statement = Statement::new("SELECT id FROM memories WHERE ", []);
            statement.push_in(
                Self::LISTS,
                "id",
                chunk.iter().map(|r| r.memory.id.as_str()),
            );
            for row in rows::<Self>(conn, &statement).await? {
                existing.insert(row.text("id")?);
            }
        }
        let fresh: Vec<&StoredMemory> = records
            .iter()
            .copied()
            .filter(|r| !existing.contains(r.memory.id.as_str()))
            .collect();
        for chunk in fresh.chunks(200) {
            run::<Self>(conn, &sql::insert_memories(chunk.iter().copied())).await?;
            run::<Self>(conn, &sql::insert_embeddings(chunk.iter().copied())).await?;
            let active: Vec<&Memory> = chunk
                .iter()
                .map(|r| &r.memory)
                .filter(|m| m.status == MemoryStatus::Active)
                .collect();
            if !active.is_empty() {
                let terms: Vec<String> = active.iter().map(|m| fts_terms(m)).collect();
                run::<Self>(conn, &insert_fts(&active, &terms)).await?;
            }
        }
        Ok(())
    }

    async fn replace_keyword_row(conn: &mut SqliteConnection, memory: &Memory) -> MemoryResult<()> {
        let delete = Statement::new(
            "DELETE FROM memories_fts WHERE rowid = (SELECT rowid FROM memories WHERE id = $1)",
            [Arg::Text(memory.id.as_str())],
        );
        run::<Self>(conn, &delete).await?;
        if memory.status == MemoryStatus::Active {
            let terms = [fts_terms(memory)];
            run::<Self>(conn, &insert_fts(&[memory], &terms)).await?;
        }
        Ok(())
    }

    async fn rebuild_keyword_index(conn: &mut SqliteConnection) -> MemoryResult<usize> {
        run::<Self>(conn, &Statement::new("DELETE FROM memories_fts", [])).await?;
        let mut after: i64 = 0;
        let mut rewritten = 0usize;
        loop {
            let page = Statement::new(
                concat!(
                    "SELECT rowid, ",
                    memory_columns!(),
                    " FROM memories WHERE status = 'active' AND rowid > $1 ORDER BY rowid LIMIT 2000"
                ),
                [Arg::Integer(after)],
            );
            let rows = rows::<Self>(conn, &page).await?;
            let Some(last) = rows.last() else { break };
            after = last.integer("rowid")?;
            let mut entries = Vec::with_capacity(rows.len());
            for row in &rows {
                entries.push((row.integer("rowid")?, fts_terms(&map::memory(row)?)));
            }
            rewritten += entries.len();
            let mut insert = Statement::new("INSERT INTO memories_fts (rowid, terms) ", []);
            insert.values(&entries, |(rowid, terms)| {
                [Arg::Integer(*rowid), Arg::Text(terms)]
            });
            run::<Self>(conn, &insert).await?;
        }
        Ok(rewritten)
    }

    async fn keyword_search(
        store: &SqliteStore,
        query: &KeywordQuery,
    ) -> MemoryResult<Vec<(MemoryId, f64)>> {
        keyword_search(store, query).await
    }

    /// One `json_group_array` row instead of a row per memory: sqlx moves every row
    /// from its worker thread to the reading task, which costs more than the read.
    async fn memories_in_one_row(
        store: &SqliteStore,
        statement: &Statement<'_>,
    ) -> Option<Vec<Memory>> {
        let mut aggregated = Statement::new(
            concat!(
                "SELECT json_group_array(json_array(",
                memory_columns!(),
                ")) AS found FROM ("
            ),
            statement.args().iter().cloned(),
        );
        aggregated.push(statement.text()).push(")");
        let row = store.row(&aggregated).await.ok()??;
        let found: &str = row.try_get("found").ok()?;
        let rows: Vec<Vec<serde_json::Value>> = serde_json::from_str(found).ok()?;
        rows.iter()
            .map(|values| map::memory(&JsonColumns(values)))
            .collect::<MemoryResult<Vec<Memory>>>()
            .ok()
    }

    async fn stamps_in_one_row(
        store: &SqliteStore,
        statement: &Statement<'_>,
    ) -> Option<Vec<(MemoryId, RowStamp)>> {
        let mut aggregated = Statement::new(
            "SELECT json_group_array(json_array(id, version, access_count)) AS found FROM (",
            statement.args().iter().cloned(),
        );
        aggregated.push(statement.text()).push(")");
        let row = store.row(&aggregated).await.ok()??;
        let found: &str = row.try_get("found").ok()?;
        let rows: Vec<(String, u32, u32)> = serde_json::from_str(found).ok()?;
        Some(
            rows.into_iter()
                .map(|(id, version, access_count)| {
                    let stamp = RowStamp {
                        version,
                        access_count,
                    };
                    (MemoryId(id), stamp)
                })
                .collect(),
        )
    }

    async fn stamps_and_memories_in_one_row(
        store: &SqliteStore,
        held: &[MemoryId],
        missing: &[MemoryId],
    ) -> Option<(Vec<(MemoryId, RowStamp)>, Vec<Memory>)> {
        let mut statement = Statement::new("SELECT json_group_array(CASE WHEN ", []);
        statement.push_in(Self::LISTS, "id", id_texts(missing));
        statement.push(concat!(
            " THEN json_array(",
            memory_columns!(),
            ") ELSE json_array(id, version, access_count) END) AS found FROM memories WHERE "
        ));
        statement.push_in(Self::LISTS, "id", id_texts(held).chain(id_texts(missing)));
        let row = store.row(&statement).await.ok()??;
        let found: &str = row.try_get("found").ok()?;
        let rows: Vec<Vec<serde_json::Value>> = serde_json::from_str(found).ok()?;
        let mut stamps = Vec::new();
        let mut memories = Vec::new();
        for values in &rows {
            match values.as_slice() {
                [id, version, access_count] => {
                    let stamp = RowStamp {
                        version: u32::try_from(version.as_u64()?).ok()?,
                        access_count: u32::try_from(access_count.as_u64()?).ok()?,
                    };
                    stamps.push((MemoryId(id.as_str()?.to_string()), stamp));
                }
                _ => memories.push(map::memory(&JsonColumns(values)).ok()?),
            }
        }
        Some((stamps, memories))
    }

    /// SQLite's sequence counter is transactional: its head is already committed.
    async fn outbox_committed_head(store: &SqliteStore) -> MemoryResult<u64> {
        Ok(store.outbox_bounds().await?.head)
    }

    async fn flush(store: &SqliteStore) -> MemoryResult<()> {
        store
            .run(&Statement::new("PRAGMA wal_checkpoint(TRUNCATE)", []))
            .await?;
        Ok(())
    }
}

/// BM25 over FTS5 in one statement (so one snapshot and one round trip to sqlx's worker
/// thread): the matches, each with FTS5's averages record and every distinct phrase's
/// document frequency (uncorrelated subqueries, which SQLite evaluates once), scored by
/// `keyword::bm25` from the same inputs as PostgreSQL.
async fn keyword_search(
    store: &SqliteStore,
    query: &KeywordQuery,
) -> MemoryResult<Vec<(MemoryId, f64)>> {
    let terms = query_terms(&query.text);
    if terms.is_empty() || query.limit == 0 {
        return Ok(Vec::new());
    }
    let phrases = query_phrases(query, &terms, |prefix, term| {
        fts_quote(&format!("{prefix}{term}"))
    });
    // The same phrases unquoted and folded as FTS5 folds them, to count them in a row.
    let folded = query_phrases(query, &terms, |prefix, term| {
        fold(&format!("{prefix}{term}")).into_owned()
    });
    let mut distinct: Vec<&str> = phrases.iter().map(String::as_str).collect();
    distinct.sort_unstable();
    distinct.dedup();
    // Without a range the bounds cover every RFC 3339 timestamp.
    let (from, to) = match &query.occurred {
        Some(range) => (format_time(&range.start), format_time(&range.end)),
        None => (String::new(), "~".to_string()),
    };
    let mut builder: sqlx::QueryBuilder<Sqlite> = sqlx::QueryBuilder::new(
        "SELECT json_group_array(json_array(m.id, memories_fts.terms)), \
         (SELECT block FROM memories_fts_data WHERE id = 1) AS averages",
    );
    for phrase in &distinct {
        builder
            .push(", (SELECT count(*) FROM memories_fts WHERE memories_fts MATCH ")
            .push_bind(*phrase)
            .push(")");
    }
    // CROSS JOIN fixes the join order: the (small, per-agent) FTS matches drive, never a scan of memories.
    builder
        .push(
            " FROM memories_fts CROSS JOIN memories m ON m.rowid = memories_fts.rowid \
             WHERE memories_fts MATCH ",
        )
        .push_bind(phrases.join(" OR "))
        .push(" AND (m.agent_id = ")
        .push_bind(query.agent_id.as_str())
        .push(" OR (")
        .push_bind(query.include_shared)
        .push(" AND m.shared = 1)) AND m.status = 'active' AND m.occurred_at >= ")
        .push_bind(from)
        .push(" AND m.occurred_at < ")
        .push_bind(to);
    // One row whatever matches: sqlx hands each row across threads, which costs more
    // than the search itself for the hundreds of rows a frequent term matches.
    let row: SqliteRow = builder
        .build()
        .fetch_one(store.pool())
        .await
        .map_err(backend_error)?;
    let matches: &str = row.try_get(0).map_err(backend_error)?;
    let matches: Vec<(String, String)> = serde_json::from_str(matches)
        .map_err(|e| MemoryError::internal(format!("keyword matches from sqlite: {e}")))?;
    if matches.is_empty() {
        return Ok(Vec::new());
    }
    let averages: Option<Vec<u8>> = row.try_get(1).map_err(backend_error)?;
    let Some((rows_total, tokens_total)) = averages.as_deref().and_then(fts5_averages) else {
        return Ok(Vec::new());
    };
    if rows_total <= 0 {
        return Ok(Vec::new());
    }
    let mut hits: HashMap<&str, i64> = HashMap::with_capacity(distinct.len());
    for (index, phrase) in distinct.iter().enumerate() {
        hits.insert(phrase, row.try_get(2 + index).map_err(backend_error)?);
    }
    let idfs: Vec<f64> = phrases
        .iter()
        .map(|p| idf(rows_total, hits.get(p.as_str()).copied().unwrap_or(0)))
        .collect();
    let avgdl = tokens_total as f64 / rows_total as f64;
    let mut scored: Vec<(MemoryId, f64)> = Vec::with_capacity(matches.len());
    for (id, row_terms) in matches {
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
        scored.push((MemoryId(id), bm25(&freqs, &idfs, length as f64, avgdl)));
    }
    Ok(best(scored, query.limit))
}

/// How each pooled connection reads the database file (`storage.mmap_mib`,
/// `storage.cache_mib`): memory the process keeps against time spent reading.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SqliteTuning {
    /// Bytes of the file a connection reads through a memory map (0: none).
    pub mmap_bytes: u64,
    /// Each connection's page cache, in MiB: the pool's four connections keep the pages
    /// they read, which at 8 MiB each was 25-37 MiB of `mnemos bench`'s peak RSS at
    /// 100,000 memories for no faster recall; 2 (about SQLite's own default) leaves
    /// recall's reads by id to the operating system's file cache.
    pub cache_mib: u32,
}

impl Default for SqliteTuning {
    fn default() -> Self {
        Self {
            mmap_bytes: 0,
            cache_mib: 2,
        }
    }
}

/// Rows sqlx's SQLite worker thread may run ahead of the task reading them (sqlx's
/// default is 50): list pages, session neighbours and export pages read hundreds of
/// rows, and a worker blocked on a full channel costs a thread switch per few rows.
const ROW_BUFFER: usize = 1024;

impl SqliteStore {
    /// Open (creating if needed) the database file at `path` and apply migrations.
    pub async fn open(path: &Path) -> MemoryResult<Self> {
        Self::open_tuned(path, SqliteTuning::default()).await
    }

    /// [`Self::open`], each connection with the memory map and page cache `tuning` asks for.
    pub async fn open_tuned(path: &Path, tuning: SqliteTuning) -> MemoryResult<Self> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            crate::data_dir::create_private_dir(parent).map_err(|e| {
                MemoryError::invalid(
                    "storage.path",
                    format!("cannot create directory {}: {e}", parent.display()),
                )
            })?;
        }
        // Readable by its owner only (SQLite gives the WAL and shared-memory files the
        // database file's permissions).
        crate::data_dir::create_private_file(path).map_err(|e| {
            MemoryError::invalid(
                "storage.path",
                format!("cannot create {}: {e}", path.display()),
            )
        })?;
        let options = SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))
            .map_err(backend_error)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(10))
            .row_buffer_size(ROW_BUFFER)
            // Negative: KiB rather than pages.
            .pragma(
                "cache_size",
                format!("-{}", u64::from(tuning.cache_mib) * 1024),
            )
            .pragma("temp_store", "memory")
            .pragma("wal_autocheckpoint", AUTOCHECKPOINT_PAGES)
            .pragma("mmap_size", tuning.mmap_bytes.to_string());
        // A connection to a local file does not go stale, so it is not pinged on each
        // acquire: the ping is a round trip to the connection's worker thread, as long
        // as a short read (sqlx tests before acquiring by default).
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .min_connections(1)
            .test_before_acquire(false)
            .connect_with(options)
            .await
            .map_err(|e| {
                MemoryError::unavailable(format!("cannot open {}: {e}", path.display()))
            })?;
        let store = Self {
            pool,
            state: WriteQueue::default(),
            unreadable: Default::default(),
        };
        checkpoint_in_background(&store);
        store.migrate().await?;
        store.refresh_keyword_index().await?;
        Ok(store)
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
}

// The store-level tests run against SQLite and PostgreSQL through one body each:
// `src/store/conformance.rs`.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_order_numbered_parameters_become_anonymous_ones() {
        let shown = |t: &'static str| positional(&std::borrow::Cow::Borrowed(t)).into_owned();
        assert_eq!(shown("SELECT 1"), "SELECT 1");
        assert_eq!(
            shown("INSERT INTO t VALUES ($1, $2), ($3, $4)"),
            "INSERT INTO t VALUES (?, ?), (?, ?)"
        );
        assert_eq!(
            shown("SELECT $2, $1"),
            "SELECT $2, $1",
            "out of order: kept"
        );
        assert_eq!(
            shown("SELECT $1 WHERE x = $1"),
            "SELECT $1 WHERE x = $1",
            "reused: kept"
        );
        assert_eq!(
            shown("SELECT '$1', $1, $2"),
            "SELECT '$1', ?, ?",
            "literals are not parameters"
        );
        assert_eq!(shown("SELECT $10"), "SELECT $10");
    }

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

    use crate::store::dialect::commit;
    use mnemos_actors::model::Association;
    use mnemos_actors::store::{GraphStore, ProjectedChange};
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

    /// Bring `projection` up to date from `known` (pages of 2 entries, at most 8 pages).
    async fn follow(
        store: &SqliteStore,
        projection: &Recording,
        known: Option<u64>,
    ) -> (u64, bool) {
        use mnemos_actors::actors::projector::catch_up;
        use mnemos_actors::testing::StoreSource;
        let source = StoreSource {
            store,
            graph: store,
        };
        catch_up(&source, projection, known, 2, 8).await.unwrap()
    }

    #[tokio::test]
    async fn writers_of_one_process_take_turns_until_commit_or_rollback() {
        let (store, _dir) = store().await;
        let queue = &store.state.0;
        let held = store.write_transaction().await.unwrap();
        assert!(
            queue.try_lock().is_err(),
            "a write transaction holds the turn"
        );
        // A second writer waits its turn, then writes once the first commits.
        let waiting = {
            let store = store.clone();
            tokio::spawn(async move {
                let now = Utc::now();
                let memory = memory_fixture("alice", "queued", now);
                store.insert(&[StoredMemory::new(memory, vec![1.0])]).await
            })
        };
        tokio::task::yield_now().await;
        assert!(
            !waiting.is_finished(),
            "the second writer waits for the turn"
        );
        commit(held).await.unwrap();
        waiting.await.unwrap().unwrap();
        assert!(queue.try_lock().is_ok(), "a commit gives the turn back");
        // A transaction dropped without commit (rolled back) gives it back as well.
        drop(store.write_transaction().await.unwrap());
        assert!(queue.try_lock().is_ok(), "a rollback gives the turn back");
        let count = store
            .row(&Statement::new("SELECT COUNT(*) AS n FROM memories", []))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(count.integer("n").unwrap(), 1);
    }

    #[tokio::test]
    async fn every_change_enqueues_an_outbox_entry_in_its_transaction() {
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
        let (applied, rebuilt) = follow(&store, &projection, None).await;
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
        let (applied, rebuilt) = follow(&store, &projection, Some(applied)).await;
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
        let (again, rebuilt) = follow(&store, &projection, None).await;
        assert!(rebuilt);
        assert_eq!(again, applied);
        assert_eq!(projection.changes.lock().unwrap().len(), 2, "a and c");
    }

    /// A projection whose every apply takes a while, saying when one starts and ends.
    #[derive(Default)]
    struct SlowProjection {
        applies_started: std::sync::atomic::AtomicUsize,
        applies_finished: std::sync::atomic::AtomicUsize,
    }

    #[async_trait]
    impl mnemos_actors::store::Projection for SlowProjection {
        fn name(&self) -> &'static str {
            "slow"
        }
        async fn applied(&self) -> MemoryResult<Option<u64>> {
            Ok(None)
        }
        async fn apply(&self, _: &[ProjectedChange], _: Option<u64>) -> MemoryResult<()> {
            use std::sync::atomic::Ordering::SeqCst;
            self.applies_started.fetch_add(1, SeqCst);
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            self.applies_finished.fetch_add(1, SeqCst);
            Ok(())
        }
        async fn reset(&self) -> MemoryResult<()> {
            Ok(())
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn shutdown_waits_for_the_projection_apply_in_flight_before_the_store_closes() {
        use mnemos_actors::runtime::{RememberInput, Runtime, RuntimeConfig, RuntimeParts};
        use std::sync::atomic::Ordering::SeqCst;
        let (store, _dir) = store().await;
        let projection = Arc::new(SlowProjection::default());
        let mut parts = RuntimeParts::in_memory();
        parts.memories = Arc::new(store.clone());
        parts.graph = Arc::new(store.clone());
        parts.projections = vec![projection.clone()];
        let config = RuntimeConfig {
            projector_interval: std::time::Duration::from_millis(20),
            ..RuntimeConfig::default()
        };
        let runtime = Runtime::start(parts, config).await.unwrap();
        let agent = mnemos_actors::model::AgentId::parse("alice").unwrap();
        let input = RememberInput {
            content: "the deploy lock is held until Friday".into(),
            ..Default::default()
        };
        runtime.remember(&agent, input).await.unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while projection.applies_started.load(SeqCst) == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "the projector never applied"
            );
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        runtime.shutdown().await.unwrap();
        let started = projection.applies_started.load(SeqCst);
        assert_eq!(
            projection.applies_finished.load(SeqCst),
            started,
            "every apply that started has finished when shutdown returns"
        );
        // The store can now be closed under nothing: a tick spawned before the stop
        // applies nothing more.
        store.close().await;
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        assert_eq!(projection.applies_started.load(SeqCst), started);
    }

    #[tokio::test]
    async fn the_write_ahead_log_is_checkpointed_in_the_background_not_by_a_commit() {
        let (store, dir) = store().await;
        let path = dir.path().join("mnemos.db");
        let database_size = || std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        let setting = store
            .row(&Statement::new("PRAGMA wal_autocheckpoint", []))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            setting.integer("wal_autocheckpoint").unwrap(),
            AUTOCHECKPOINT_PAGES.parse::<i64>().unwrap()
        );
        // Far fewer log pages than the backstop: only the background task copies them.
        store
            .run(&Statement::new(
                "CREATE TABLE filler (id INTEGER PRIMARY KEY, body TEXT NOT NULL)",
                [],
            ))
            .await
            .unwrap();
        let before = database_size();
        for _ in 0..20 {
            store
                .run(&Statement::new(
                    "INSERT INTO filler (body) VALUES (hex(randomblob(4000)))",
                    [],
                ))
                .await
                .unwrap();
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while database_size() <= before {
            assert!(
                std::time::Instant::now() < deadline,
                "the database file never grew: nothing checkpointed the log ({before} bytes)"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    #[tokio::test]
    async fn storage_mmap_and_cache_settings_reach_every_connection() {
        let dir = tempfile::tempdir().unwrap();
        let tuned = SqliteStore::open_tuned(
            &dir.path().join("tuned.db"),
            SqliteTuning {
                mmap_bytes: 16 << 20,
                cache_mib: 8,
            },
        )
        .await
        .unwrap();
        let (plain, _plain_dir) = store().await;
        let pragma = |store: SqliteStore, name: &'static str| async move {
            let statement = Statement::new(format!("PRAGMA {name}"), []);
            // Two reads at once: whichever pooled connections answer are tuned.
            let (a, b) = tokio::join!(store.row(&statement), store.row(&statement));
            [a, b].map(|row| row.unwrap().unwrap().integer(name).unwrap())
        };
        assert_eq!(
            pragma(tuned.clone(), "mmap_size").await,
            [16 << 20, 16 << 20]
        );
        assert_eq!(pragma(tuned, "cache_size").await, [-8192, -8192]);
        assert_eq!(pragma(plain.clone(), "mmap_size").await, [0, 0]);
        assert_eq!(pragma(plain, "cache_size").await, [-2048, -2048]);
    }
}

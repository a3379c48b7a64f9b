//! The shared system of record: PostgreSQL through sqlx.
//!
//! [`PostgresStore`] is [`SqlStore`] over the [`Dialect`] below, with the semantics of
//! `SqliteStore`: idempotent inserts by id, compare-and-swap updates with version
//! history in the same transaction, edges that cascade with their memory, and keyword
//! search that ranks exactly as SQLite's FTS5 does.
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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use mnemos_actors::error::{ErrorCode, MemoryError, MemoryResult};
use mnemos_actors::model::{Memory, MemoryId, MemoryStatus};
use mnemos_actors::store::{KeywordQuery, StoredMemory};
use sqlx::postgres::{PgArguments, PgConnectOptions, PgConnection, PgPool, PgPoolOptions, PgRow};
use sqlx::query::Query;
use sqlx::types::Json;
use sqlx::{AssertSqlSafe, ConnectOptions, Connection, Postgres, QueryBuilder, Row, Transaction};

use super::dialect::{commit, one_row, other_embedding_model, rows, run, Dialect, SqlStore};
use super::keyword::{best, bm25, fold, idf, postings, query_phrases, query_terms};
use super::redact_url;
use super::rows::{self as map, corrupt, Columns};
use super::sql::{self, memory_columns, Arg, ListBinding, Statement};

/// The migrations of the PostgreSQL schema, embedded in the binary.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

/// PostgreSQL-backed store.
pub type PostgresStore = SqlStore<Postgres>;

/// What the PostgreSQL store keeps beside its pool.
#[derive(Clone, Debug, Default)]
pub struct PgState {
    /// Memories inserted since the planner statistics were last refreshed: after a bulk
    /// load the planner would otherwise keep estimating from the empty tables (a 150×
    /// slower keyword plan until autovacuum analyses them, up to a minute later).
    inserted_since_analyze: Arc<AtomicU64>,
}

/// Inserted memories after which the store refreshes planner statistics itself.
const ANALYZE_EVERY: u64 = 20_000;

/// Longest term stored as itself; longer ones are stored as a prefix and a hash
/// (PostgreSQL limits a `tsvector` lexeme to 2 KiB).
const MAX_LEXEME_BYTES: usize = 1000;

/// The last sequence number the outbox handed out, as a literal for `concat!`.
macro_rules! outbox_head {
    () => {
        "COALESCE(pg_sequence_last_value(CAST(pg_get_serial_sequence('outbox', 'seq') AS regclass)), 0)"
    };
}

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

/// A database error as the store reports it: the backend is unavailable.
fn backend_error(error: sqlx::Error) -> MemoryError {
    // Class 22 (data exception: a value out of range, a character the encoding cannot
    // hold) is the request's fault, not an outage: a client must not retry it.
    let data_exception = error
        .as_database_error()
        .and_then(|e| e.code())
        .is_some_and(|code| code.starts_with("22"));
    if data_exception {
        return MemoryError::new(
            ErrorCode::InvalidArgument,
            format!("PostgreSQL cannot store a value of this request: {error}"),
        );
    }
    MemoryError::unavailable(format!("postgres: {error}"))
}

impl Columns for PgRow {
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
        self.try_get(column).map_err(corrupt)
    }
    fn optional_real(&self, column: &str) -> MemoryResult<Option<f32>> {
        self.try_get(column).map_err(corrupt)
    }
    fn flag(&self, column: &str) -> MemoryResult<bool> {
        self.try_get(column).map_err(corrupt)
    }
    fn time(&self, column: &str) -> MemoryResult<DateTime<Utc>> {
        self.try_get(column).map_err(corrupt)
    }
    fn optional_time(&self, column: &str) -> MemoryResult<Option<DateTime<Utc>>> {
        self.try_get(column).map_err(corrupt)
    }
    fn json(&self, column: &str) -> MemoryResult<Result<serde_json::Value, serde_json::Error>> {
        Ok(Ok(self.try_get(column).map_err(corrupt)?))
    }
    fn tags(&self, column: &str) -> MemoryResult<Result<Vec<String>, serde_json::Error>> {
        let Json(tags): Json<Vec<String>> = self.try_get(column).map_err(corrupt)?;
        Ok(Ok(tags))
    }
    fn vector(&self, column: &str) -> MemoryResult<Vec<f32>> {
        self.try_get(column).map_err(corrupt)
    }
}

/// `statement` as a sqlx query, each argument in PostgreSQL's column type.
fn query(statement: &Statement<'_>) -> Query<'static, Postgres, PgArguments> {
    let query = sqlx::query(AssertSqlSafe(statement.text().clone()));
    statement.args().iter().fold(query, |query, arg| match arg {
        Arg::Text(value) => query.bind(*value),
        Arg::OptionalText(value) => query.bind(*value),
        Arg::Integer(value) => query.bind(*value),
        Arg::Real(value) => query.bind(*value),
        Arg::OptionalReal(value) => query.bind(*value),
        Arg::Flag(value) => query.bind(*value),
        Arg::Time(time) => query.bind(*time),
        Arg::OptionalTime(time) => query.bind(*time),
        Arg::Bound(time) => query.bind(pg_time(*time)),
        Arg::Json(value) => query.bind(*value),
        Arg::Tags(tags) => query.bind(Json(*tags)),
        Arg::Vector(vector) => query.bind(*vector),
        Arg::TextArray(values) => query.bind(values.clone()),
    })
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

/// A (prefix, term) as stored and matched: folded as FTS5 folds it, bounded in length.
fn spell(prefix: &str, term: &str) -> String {
    lexeme(format!("{prefix}{}", fold(term)))
}

/// The keyword-index row of a memory: distinct terms, each term's count, and length.
struct SearchRow {
    /// The distinct terms, sorted (the `tsvector`).
    terms: Vec<String>,
    /// How often each term occurs (FTS5 counts repeats).
    tf: HashMap<String, i64>,
    /// How many terms the memory has, repeats included.
    length: i32,
}

/// A memory's keyword-index row.
fn search_row(memory: &Memory) -> SearchRow {
    let all = postings(memory, spell);
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

#[async_trait]
impl Dialect for Postgres {
    const STORE_NAME: &'static str = "postgres";
    const LISTS: ListBinding = ListBinding::Array;
    const GREATEST: &'static str = "GREATEST";
    const HAS_TAG: (&'static str, &'static str) =
        (" AND tags @> jsonb_build_array(CAST(", " AS text))");
    const NOT_ARCHIVE_SUMMARY: &'static str =
        "NOT (tags @> CAST('[\"archive_summary\"]' AS jsonb))";
    const ARCHIVE_VERSIONS: &'static str = "INSERT INTO memory_versions \
         (memory_id, version, content, importance, tags, status, archived_at, reason) ";
    const ARCHIVE_VERSIONS_END: &'static str = " \
         ON CONFLICT (memory_id, version) DO UPDATE SET content = excluded.content, \
         importance = excluded.importance, tags = excluded.tags, status = excluded.status, \
         archived_at = excluded.archived_at, reason = excluded.reason";
    const PUT_EMBEDDING: &'static str = "INSERT INTO memory_embeddings (memory_id, vector) \
         VALUES ($1, $2) ON CONFLICT (memory_id) DO UPDATE SET vector = excluded.vector";
    const RECORD_RUN: &'static str = "INSERT INTO consolidation_runs (id, agent_id, trigger, \
         started_at, finished_at, processed, consolidated, forgotten, new_semantic, \
         new_procedural, report) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
         ON CONFLICT (id) DO UPDATE SET agent_id = excluded.agent_id, trigger = excluded.trigger, \
         started_at = excluded.started_at, finished_at = excluded.finished_at, \
         processed = excluded.processed, consolidated = excluded.consolidated, \
         forgotten = excluded.forgotten, new_semantic = excluded.new_semantic, \
         new_procedural = excluded.new_procedural, report = excluded.report";
    const RECORD_KEYWORD_TERMS: &'static str = "INSERT INTO store_meta (key, value) \
         VALUES ('keyword_terms', $1) ON CONFLICT (key) DO UPDATE SET value = excluded.value";
    const OUTBOX_BOUNDS: &'static str = concat!(
        "SELECT (SELECT MIN(seq) FROM outbox) AS oldest, ",
        outbox_head!(),
        " AS head"
    );
    const EDGE_ORDER: &'static str = " ORDER BY from_id, to_id, relation";
    const PURGE_ORDER: &'static str = " ORDER BY m.updated_at, m.id";
    const PURGE_CHUNK: usize = usize::MAX;
    const POSITION: &'static str = "strpos";

    type State = PgState;
    type LoneWrite = Transaction<'static, Postgres>;

    fn backend_error(error: sqlx::Error) -> MemoryError {
        backend_error(error)
    }

    async fn fetch_all(
        conn: &mut PgConnection,
        statement: &Statement<'_>,
    ) -> Result<Vec<PgRow>, sqlx::Error> {
        query(statement).fetch_all(conn).await
    }

    async fn execute(
        conn: &mut PgConnection,
        statement: &Statement<'_>,
    ) -> Result<u64, sqlx::Error> {
        Ok(query(statement).execute(conn).await?.rows_affected())
    }

    /// The schema's write lock (see the module docs), so writers queue like SQLite's
    /// `BEGIN IMMEDIATE` writers do.
    async fn write_transaction(pool: &PgPool) -> MemoryResult<Transaction<'static, Postgres>> {
        let mut tx = pool.begin().await.map_err(backend_error)?;
        sqlx::query("SELECT pg_advisory_xact_lock(hashtext('mnemos.write:' || current_schema()))")
            .execute(&mut *tx)
            .await
            .map_err(backend_error)?;
        Ok(tx)
    }

    /// The upsert of the session's row locks it until commit, so concurrent appends to
    /// one session (from any replica) take consecutive sequence numbers.
    async fn session_transaction(pool: &PgPool) -> MemoryResult<Transaction<'static, Postgres>> {
        pool.begin().await.map_err(backend_error)
    }

    /// Under the write lock: memory and edge changes enqueue outbox entries, which must
    /// commit in order.
    async fn begin_lone_write(pool: &PgPool) -> MemoryResult<Transaction<'static, Postgres>> {
        Self::write_transaction(pool).await
    }

    async fn end_lone_write(write: Transaction<'static, Postgres>) -> MemoryResult<()> {
        write.commit().await.map_err(backend_error)
    }

    async fn check_embedding_model(
        store: &PostgresStore,
        model_id: &str,
        dimension: usize,
    ) -> MemoryResult<()> {
        let current = format!("{model_id}|{dimension}");
        let record = Statement::new(
            "INSERT INTO store_meta (key, value) VALUES ('embedding_model', $1) ON CONFLICT (key) DO NOTHING",
            [Arg::Text(&current)],
        );
        store.run(&record).await?;
        let mut conn = store.connection().await?;
        let value = one_row::<Self>(&mut conn, &Statement::new(sql::EMBEDDING_MODEL, []))
            .await?
            .text("value")?;
        if value == current {
            return Ok(());
        }
        Err(other_embedding_model(
            &value,
            model_id,
            dimension,
            "the database (storage.url)",
            "a new database or schema",
        ))
    }

    async fn insert_records(
        conn: &mut PgConnection,
        records: &[&StoredMemory],
    ) -> MemoryResult<()> {
        for chunk in records.chunks(200) {
            let mut statement = sql::insert_memories(chunk.iter().copied());
            // Ids already stored (a retried request) are skipped whole: nothing of theirs is written twice.
            statement.push(" ON CONFLICT (id) DO NOTHING RETURNING id");
            let inserted = rows::<Self>(conn, &statement).await?;
            if inserted.is_empty() {
                continue;
            }
            let fresh = inserted
                .iter()
                .map(|row| row.text("id"))
                .collect::<MemoryResult<std::collections::HashSet<String>>>()?;
            let fresh: Vec<&StoredMemory> = chunk
                .iter()
                .copied()
                .filter(|r| fresh.contains(r.memory.id.as_str()))
                .collect();
            run::<Self>(conn, &sql::insert_embeddings(fresh.iter().copied())).await?;
            let active: Vec<&Memory> = fresh
                .iter()
                .map(|r| &r.memory)
                .filter(|m| m.status == MemoryStatus::Active)
                .collect();
            insert_search_rows(conn, &active).await?;
        }
        Ok(())
    }

    fn inserted(store: &PostgresStore, count: u64) {
        analyze_after_bulk(store, count);
    }

    async fn replace_keyword_row(conn: &mut PgConnection, memory: &Memory) -> MemoryResult<()> {
        let delete = Statement::new(
            "DELETE FROM memory_search WHERE memory_id = $1",
            [Arg::Text(memory.id.as_str())],
        );
        run::<Self>(conn, &delete).await?;
        if memory.status == MemoryStatus::Active {
            insert_search_rows(conn, &[memory]).await?;
        }
        Ok(())
    }

    async fn rebuild_keyword_index(conn: &mut PgConnection) -> MemoryResult<usize> {
        run::<Self>(conn, &Statement::new("DELETE FROM memory_search", [])).await?;
        let mut after = String::new();
        let mut rewritten = 0usize;
        loop {
            let page = Statement::new(
                concat!(
                    "SELECT ",
                    memory_columns!(),
                    " FROM memories WHERE status = 'active' AND id > $1 ORDER BY id LIMIT 2000"
                ),
                [Arg::Text(&after)],
            );
            let memories = rows::<Self>(conn, &page)
                .await?
                .iter()
                .map(map::memory)
                .collect::<MemoryResult<Vec<Memory>>>()?;
            let Some(last) = memories.last() else { break };
            after = last.id.0.clone();
            rewritten += memories.len();
            let memories: Vec<&Memory> = memories.iter().collect();
            insert_search_rows(conn, &memories).await?;
        }
        Ok(rewritten)
    }

    async fn keyword_search(
        store: &PostgresStore,
        query: &KeywordQuery,
    ) -> MemoryResult<Vec<(MemoryId, f64)>> {
        keyword_search(store, query).await
    }

    async fn outbox_committed_head(store: &PostgresStore) -> MemoryResult<u64> {
        // Behind the write lock no writer is in flight, so every sequence number taken
        // so far belongs to a committed (or rolled-back) transaction.
        let mut tx = store.write_transaction().await?;
        let head = Statement::new(concat!("SELECT ", outbox_head!(), " AS head"), []);
        let head = one_row::<Self>(&mut tx, &head).await?.integer("head")?;
        commit(tx).await?;
        Ok(head.max(0) as u64)
    }

    async fn flush(_store: &PostgresStore) -> MemoryResult<()> {
        // Every acknowledged write is a committed transaction; the server owns durability.
        Ok(())
    }
}

/// BM25 over `memory_search`: one statement, so one snapshot (as one FTS5 query sees the
/// index) and one round trip, scored by `keyword::bm25` from the same inputs as SQLite.
async fn keyword_search(
    store: &PostgresStore,
    query: &KeywordQuery,
) -> MemoryResult<Vec<(MemoryId, f64)>> {
    let terms = query_terms(&query.text);
    if terms.is_empty() || query.limit == 0 {
        return Ok(Vec::new());
    }
    // The phrases of SQLite's MATCH expression, in its order: the agent's terms, then the shared pool's.
    let phrases = query_phrases(query, &terms, spell);
    let mut distinct = phrases.clone();
    distinct.sort();
    distinct.dedup();
    let singles: Vec<String> = distinct.iter().map(|l| single(l)).collect();
    // The matches, each with the collection statistics and the document frequency of
    // every distinct term (uncorrelated subqueries, computed once).
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
        .fetch_all(store.pool())
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
    let scored: Vec<(MemoryId, f64)> = matches
        .into_iter()
        .map(|(id, length, freqs, _, _, _)| {
            let freqs: Vec<f64> = freqs.iter().map(|f| *f as f64).collect();
            (MemoryId(id), bm25(&freqs, &idfs, f64::from(length), avgdl))
        })
        .collect();
    Ok(best(scored, query.limit))
}

/// Count inserted memories; past [`ANALYZE_EVERY`], refresh the statistics of the
/// search tables in the background (never on the request path; best effort).
fn analyze_after_bulk(store: &PostgresStore, inserted: u64) {
    let counter = &store.state.inserted_since_analyze;
    let total = counter.fetch_add(inserted, Ordering::Relaxed) + inserted;
    if total < ANALYZE_EVERY {
        return;
    }
    counter.store(0, Ordering::Relaxed);
    // On a connection of its own that does not report ANALYZE (seconds on a large
    // store, and expected) as a slow statement.
    let options = (*store.pool.connect_options())
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
            state: PgState::default(),
            unreadable: Default::default(),
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

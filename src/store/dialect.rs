//! The seam between the two SQL stores: [`Dialect`] is what differs between SQLite and
//! PostgreSQL, and [`SqlStore`] is the store written once over it. `SqliteStore` is
//! `SqlStore<Sqlite>` and `PostgresStore` is `SqlStore<Postgres>`; the trait
//! implementations (`memories.rs`, `graph.rs`, `projects.rs`, `kv.rs`) are generic, and
//! each dialect's file holds only what its database does its own way.
//!
//! **Transactions.** Every transaction that writes memories (or their terms, versions,
//! embeddings, edges or KV entries) is a [`Dialect::write_transaction`]: SQLite's
//! `BEGIN IMMEDIATE`, PostgreSQL's transaction-scoped advisory lock of the schema.
//! Writers therefore queue, in any number of processes, instead of failing or
//! deadlocking. A write that is one statement outside such a transaction is a
//! [`Dialect::LoneWrite`]: SQLite runs it as its own transaction, PostgreSQL under the
//! write lock, so that the outbox entries its triggers add commit in sequence order.
//! Within one process, SQLite's writers first take their turn on an in-process queue
//! ([`WriteTx`]): they wait in order and wake the moment the writer before them
//! finishes, where SQLite's busy handler would poll with sleeps of up to 100 ms.

use std::collections::HashMap;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use mnemos_actors::error::{MemoryError, MemoryResult};
use mnemos_actors::model::{Memory, MemoryId, MemoryVersion};
use mnemos_actors::policy::consistency::normalized_hash;
use mnemos_actors::store::{KeywordQuery, RowStamp, StoredMemory};
use mnemos_actors::text::KEYWORD_TERMS_VERSION;
use sqlx::pool::PoolConnection;
use sqlx::{Database, Pool, Transaction};

use super::rows::{Columns, UnreadableRows};
use super::sql::{self, Arg, ListBinding, Statement};

/// What one SQL database does its own way; everything else is written once.
#[async_trait]
pub trait Dialect: Database<Row: Columns> + Sync {
    /// The store's name in health reports and logs.
    const STORE_NAME: &'static str;
    /// How a statement asks whether a column holds one of a list of values.
    const LISTS: ListBinding;
    /// The function that picks the later of two stored times (`max`, `GREATEST`).
    const GREATEST: &'static str;
    /// "`memories.tags` holds the tag `$n`": the SQL before and after the placeholder.
    const HAS_TAG: (&'static str, &'static str);
    /// "This memory is not an archive summary", for the idle-session scan.
    const NOT_ARCHIVE_SUMMARY: &'static str;
    /// Archive versions (`sql::version_args`), replacing those of the same numbers: the
    /// statement before its `VALUES` tuples.
    const ARCHIVE_VERSIONS: &'static str;
    /// What follows [`Dialect::ARCHIVE_VERSIONS`]'s tuples (PostgreSQL's `ON CONFLICT`).
    const ARCHIVE_VERSIONS_END: &'static str;
    /// Store a memory's embedding (`$1` id, `$2` vector), replacing the one it had.
    const PUT_EMBEDDING: &'static str;
    /// Record a run (`sql::run_args`), replacing one with its id.
    const RECORD_RUN: &'static str;
    /// Record the term form of the keyword index (`$1`).
    const RECORD_KEYWORD_TERMS: &'static str;
    /// The oldest outbox entry (`oldest`, NULL when empty) and the last sequence number
    /// handed out (`head`).
    const OUTBOX_BOUNDS: &'static str;
    /// The `ORDER BY` of the edge reads of `edges_around` (SQLite reads in scan order).
    const EDGE_ORDER: &'static str;
    /// The `ORDER BY` of the memories a purge finds (SQLite reads in scan order).
    const PURGE_ORDER: &'static str;
    /// How many memories one purge statement deletes (SQLite: one per statement).
    const PURGE_CHUNK: usize;
    /// The function finding a substring (`instr`, `strpos`: haystack first).
    const POSITION: &'static str;

    /// What the store keeps beside its pool.
    type State: Clone + fmt::Debug + Default + Send + Sync + 'static;
    /// The connection a lone write runs on (see the module docs).
    type LoneWrite: DerefMut<Target = Self::Connection> + Send;

    /// A database error as the store reports it (`backend_unavailable`, naming the database).
    fn backend_error(error: sqlx::Error) -> MemoryError;

    /// Run a statement, returning its rows.
    async fn fetch_all(
        conn: &mut Self::Connection,
        statement: &Statement<'_>,
    ) -> Result<Vec<Self::Row>, sqlx::Error>;
    /// Run a statement, returning how many rows it changed.
    async fn execute(
        conn: &mut Self::Connection,
        statement: &Statement<'_>,
    ) -> Result<u64, sqlx::Error>;

    /// The in-process queue this process's writers take turns on before they ask the
    /// database for its write lock (none: the database queues them itself).
    fn write_queue(_state: &Self::State) -> Option<Arc<tokio::sync::Mutex<()>>> {
        None
    }

    /// Begin a transaction holding the store's write lock.
    async fn write_transaction(pool: &Pool<Self>) -> MemoryResult<Transaction<'static, Self>>;
    /// Begin the transaction that appends a session message (SQLite: a write
    /// transaction; PostgreSQL: a plain one, which locks only the session's row).
    async fn session_transaction(pool: &Pool<Self>) -> MemoryResult<Transaction<'static, Self>>;
    /// Begin a lone write.
    async fn begin_lone_write(pool: &Pool<Self>) -> MemoryResult<Self::LoneWrite>;
    /// Finish a lone write.
    async fn end_lone_write(write: Self::LoneWrite) -> MemoryResult<()>;

    /// Record the embedding model in use, or refuse another one.
    async fn check_embedding_model(
        store: &SqlStore<Self>,
        model_id: &str,
        dimension: usize,
    ) -> MemoryResult<()>;
    /// Insert memories with their embeddings and keyword terms inside a write
    /// transaction; ids already stored are skipped whole (idempotent retries).
    async fn insert_records(
        conn: &mut Self::Connection,
        records: &[&StoredMemory],
    ) -> MemoryResult<()>;
    /// After `count` memories were inserted by `insert` (PostgreSQL refreshes its
    /// planner statistics after a bulk load).
    fn inserted(_store: &SqlStore<Self>, _count: u64) {}
    /// Replace a memory's keyword-index row inside a write transaction (none unless active).
    async fn replace_keyword_row(conn: &mut Self::Connection, memory: &Memory) -> MemoryResult<()>;
    /// Empty the keyword index and index every active memory again; returns how many.
    async fn rebuild_keyword_index(conn: &mut Self::Connection) -> MemoryResult<usize>;
    /// BM25 keyword search (`MemoryStore::keyword_search`).
    async fn keyword_search(
        store: &SqlStore<Self>,
        query: &KeywordQuery,
    ) -> MemoryResult<Vec<(MemoryId, f64)>>;
    /// The memories a `SELECT memory_columns FROM memories …` statement reads, decoded
    /// from one aggregated row where that is faster for the dialect; `None` (the default,
    /// and on any failure, a corrupt row included) has the caller read them row by row,
    /// tolerantly.
    async fn memories_in_one_row(
        _store: &SqlStore<Self>,
        _statement: &Statement<'_>,
    ) -> Option<Vec<Memory>> {
        None
    }
    /// The stamps a `SELECT id, version, access_count FROM memories …` statement reads,
    /// from one aggregated row where that is faster for the dialect; `None` (the
    /// default, and on any failure) has the caller read them row by row.
    async fn stamps_in_one_row(
        _store: &SqlStore<Self>,
        _statement: &Statement<'_>,
    ) -> Option<Vec<(MemoryId, RowStamp)>> {
        None
    }
    /// `MemoryStore::stamps_and_memories` in one statement answering one row, where the
    /// dialect can; `None` (the default, and on any failure, a corrupt row included)
    /// has the caller read stamps and rows apart, tolerantly.
    async fn stamps_and_memories_in_one_row(
        _store: &SqlStore<Self>,
        _held: &[MemoryId],
        _missing: &[MemoryId],
    ) -> Option<(Vec<(MemoryId, RowStamp)>, Vec<Memory>)> {
        None
    }
    /// `MemoryStore::outbox_committed_head`.
    async fn outbox_committed_head(store: &SqlStore<Self>) -> MemoryResult<u64>;
    /// `MemoryStore::flush`.
    async fn flush(store: &SqlStore<Self>) -> MemoryResult<()>;
}

/// A SQL system of record over dialect `D`.
pub struct SqlStore<D: Dialect> {
    /// Connection pool.
    pub(crate) pool: Pool<D>,
    /// What the dialect keeps beside the pool.
    pub(crate) state: D::State,
    /// Rows reads could not decode and skipped (shared by clones).
    pub(crate) unreadable: std::sync::Arc<UnreadableRows>,
}

impl<D: Dialect> Clone for SqlStore<D> {
    fn clone(&self) -> Self {
        Self {
            pool: self.pool.clone(),
            state: self.state.clone(),
            unreadable: self.unreadable.clone(),
        }
    }
}

impl<D: Dialect> fmt::Debug for SqlStore<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqlStore")
            .field("dialect", &D::STORE_NAME)
            .field("pool", &self.pool)
            .field("state", &self.state)
            .finish()
    }
}

impl<D: Dialect> SqlStore<D> {
    /// The pool (for maintenance commands).
    pub fn pool(&self) -> &Pool<D> {
        &self.pool
    }

    /// Close the pool.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// A connection of the pool.
    pub(crate) async fn connection(&self) -> MemoryResult<PoolConnection<D>> {
        self.pool.acquire().await.map_err(D::backend_error)
    }

    /// A transaction holding the write lock.
    pub(crate) async fn write_transaction(&self) -> MemoryResult<WriteTx<D>> {
        let turn = self.write_turn().await?;
        Ok(WriteTx {
            tx: D::write_transaction(&self.pool).await?,
            _turn: turn,
        })
    }

    /// The transaction that appends a session message (see [`Dialect::session_transaction`]).
    pub(crate) async fn session_transaction(&self) -> MemoryResult<WriteTx<D>> {
        let turn = self.write_turn().await?;
        Ok(WriteTx {
            tx: D::session_transaction(&self.pool).await?,
            _turn: turn,
        })
    }

    /// This process's turn to write, where the dialect queues writers in process; the
    /// wait is bounded like the database's own busy timeout.
    pub(crate) async fn write_turn(&self) -> MemoryResult<Option<WriteTurn>> {
        let Some(queue) = D::write_queue(&self.state) else {
            return Ok(None);
        };
        match tokio::time::timeout(WRITE_TURN_WAIT, queue.lock_owned()).await {
            Ok(turn) => Ok(Some(turn)),
            Err(_) => Err(MemoryError::unavailable(format!(
                "{} is busy: no turn to write within {} s",
                D::STORE_NAME,
                WRITE_TURN_WAIT.as_secs()
            ))),
        }
    }

    /// Run a statement on a pool connection, returning its rows.
    pub(crate) async fn rows(&self, statement: &Statement<'_>) -> MemoryResult<Vec<D::Row>> {
        rows::<D>(&mut *self.connection().await?, statement).await
    }

    /// Run a statement on a pool connection, returning its first row if any.
    pub(crate) async fn row(&self, statement: &Statement<'_>) -> MemoryResult<Option<D::Row>> {
        row::<D>(&mut *self.connection().await?, statement).await
    }

    /// Run a statement on a pool connection, reading each row with `read`; a row that
    /// cannot be decoded is skipped, logged and recorded under `table` and its `key`
    /// (one bad row never fails a read of the others).
    pub(crate) async fn all_readable<T: Send>(
        &self,
        statement: &Statement<'_>,
        table: &'static str,
        key: impl Fn(&D::Row) -> String + Send,
        read: impl Fn(&D::Row) -> MemoryResult<T> + Send,
    ) -> MemoryResult<Vec<T>> {
        Ok(self
            .rows(statement)
            .await?
            .iter()
            .filter_map(|row| self.readable(table, row, &key, &read))
            .collect())
    }

    /// [`Self::all_readable`] for the first row: an undecodable row reads as absent.
    pub(crate) async fn first_readable<T: Send>(
        &self,
        statement: &Statement<'_>,
        table: &'static str,
        key: impl Fn(&D::Row) -> String + Send,
        read: impl Fn(&D::Row) -> MemoryResult<T> + Send,
    ) -> MemoryResult<Option<T>> {
        Ok(self
            .row(statement)
            .await?
            .and_then(|row| self.readable(table, &row, &key, &read)))
    }

    /// `read` of `row`, or None with the failure recorded.
    pub(crate) fn readable<T>(
        &self,
        table: &'static str,
        row: &D::Row,
        key: &impl Fn(&D::Row) -> String,
        read: &impl Fn(&D::Row) -> MemoryResult<T>,
    ) -> Option<T> {
        match read(row) {
            Ok(value) => Some(value),
            Err(error) => {
                self.unreadable.record(table, key(row), &error.message);
                None
            }
        }
    }

    /// Run a statement on a pool connection, reading each row with `read`.
    pub(crate) async fn all<T: Send>(
        &self,
        statement: &Statement<'_>,
        read: impl Fn(&D::Row) -> MemoryResult<T> + Send,
    ) -> MemoryResult<Vec<T>> {
        self.rows(statement).await?.iter().map(read).collect()
    }

    /// Run a statement on a pool connection, returning how many rows it changed.
    pub(crate) async fn run(&self, statement: &Statement<'_>) -> MemoryResult<u64> {
        run::<D>(&mut *self.connection().await?, statement).await
    }

    /// Run one write statement as a lone write, returning how many rows it changed.
    pub(crate) async fn run_alone(&self, statement: &Statement<'_>) -> MemoryResult<u64> {
        let _turn = self.write_turn().await?;
        let mut write = D::begin_lone_write(&self.pool).await?;
        let changed = run::<D>(&mut write, statement).await?;
        D::end_lone_write(write).await?;
        Ok(changed)
    }

    /// Re-derive the keyword index when it was written with another form of terms
    /// (`KEYWORD_TERMS_VERSION`, recorded in `store_meta`): after an upgrade that
    /// changes the terms, queries would otherwise miss what the old index spelled
    /// differently. One write transaction, so processes starting together do it once;
    /// a fresh database just records the version.
    pub(crate) async fn refresh_keyword_index(&self) -> MemoryResult<()> {
        let recorded = Statement::new(sql::KEYWORD_TERMS, []);
        let current = |row: Option<D::Row>| -> MemoryResult<bool> {
            Ok(row.map(|r| r.text("value")).transpose()?.as_deref() == Some(KEYWORD_TERMS_VERSION))
        };
        // The usual case (index current) reads one row and takes no write lock.
        if current(self.row(&recorded).await?)? {
            return Ok(());
        }
        let mut tx = self.write_transaction().await?;
        // Checked again under the lock: another process may have just done it.
        if current(row::<D>(&mut tx, &recorded).await?)? {
            return Ok(());
        }
        let rewritten = D::rebuild_keyword_index(&mut tx).await?;
        let record = Statement::new(D::RECORD_KEYWORD_TERMS, [Arg::Text(KEYWORD_TERMS_VERSION)]);
        run::<D>(&mut tx, &record).await?;
        commit(tx).await?;
        if rewritten > 0 {
            tracing::info!(
                memories = rewritten,
                terms = KEYWORD_TERMS_VERSION,
                "keyword index re-derived"
            );
        }
        Ok(())
    }
}

/// Run a statement, returning its rows.
pub(crate) async fn rows<D: Dialect>(
    conn: &mut D::Connection,
    statement: &Statement<'_>,
) -> MemoryResult<Vec<D::Row>> {
    D::fetch_all(conn, statement)
        .await
        .map_err(D::backend_error)
}

/// Run a statement that returns at most one row, returning it.
pub(crate) async fn row<D: Dialect>(
    conn: &mut D::Connection,
    statement: &Statement<'_>,
) -> MemoryResult<Option<D::Row>> {
    Ok(rows::<D>(conn, statement).await?.into_iter().next())
}

/// Run a statement that returns a row (an `INSERT … RETURNING`, an aggregate).
pub(crate) async fn one_row<D: Dialect>(
    conn: &mut D::Connection,
    statement: &Statement<'_>,
) -> MemoryResult<D::Row> {
    row::<D>(conn, statement)
        .await?
        .ok_or_else(|| D::backend_error(sqlx::Error::RowNotFound))
}

/// Run a statement, returning how many rows it changed.
pub(crate) async fn run<D: Dialect>(
    conn: &mut D::Connection,
    statement: &Statement<'_>,
) -> MemoryResult<u64> {
    D::execute(conn, statement).await.map_err(D::backend_error)
}

/// How long a writer waits for its turn in the process's queue (as SQLite's busy timeout).
const WRITE_TURN_WAIT: Duration = Duration::from_secs(10);

/// A writer's place at the head of the in-process queue, held until it finishes.
pub(crate) type WriteTurn = tokio::sync::OwnedMutexGuard<()>;

/// A write transaction and, where the dialect queues writers in process, the turn it
/// holds until it commits or is dropped (rolled back).
pub(crate) struct WriteTx<D: Database> {
    /// The database transaction.
    tx: Transaction<'static, D>,
    /// Released after the transaction ends: the next writer of this process goes then.
    _turn: Option<WriteTurn>,
}

impl<D: Database> Deref for WriteTx<D> {
    type Target = Transaction<'static, D>;
    fn deref(&self) -> &Self::Target {
        &self.tx
    }
}

impl<D: Database> DerefMut for WriteTx<D> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.tx
    }
}

/// Commit a write transaction, then give the turn to the next writer.
pub(crate) async fn commit<D: Dialect>(tx: WriteTx<D>) -> MemoryResult<()> {
    tx.tx.commit().await.map_err(D::backend_error)
}

/// Replace a memory inside a write transaction if its stored version is
/// `previous.version`, archiving `previous` and refreshing its keyword terms (and its
/// embedding when given). The content hash is computed only when the content changed.
pub(crate) async fn update_record<D: Dialect>(
    conn: &mut D::Connection,
    next: &Memory,
    previous: &MemoryVersion,
    embedding: Option<&[f32]>,
) -> MemoryResult<()> {
    replace_if_version::<D>(conn, next, previous).await?;
    archive_versions::<D>(conn, &[(&next.id, previous)]).await?;
    D::replace_keyword_row(conn, next).await?;
    if let Some(embedding) = embedding {
        let put = Statement::new(
            D::PUT_EMBEDDING,
            [Arg::Text(next.id.as_str()), Arg::Vector(embedding)],
        );
        run::<D>(conn, &put).await?;
    }
    Ok(())
}

/// Versions per statement of [`archive_versions`] (eight arguments each).
const ARCHIVE_CHUNK: usize = 500;

/// Archive each (memory, version it replaced) inside a write transaction, in one
/// statement per [`ARCHIVE_CHUNK`].
pub(crate) async fn archive_versions<D: Dialect>(
    conn: &mut D::Connection,
    versions: &[(&MemoryId, &MemoryVersion)],
) -> MemoryResult<()> {
    for chunk in versions.chunks(ARCHIVE_CHUNK) {
        let mut archive = Statement::new(D::ARCHIVE_VERSIONS, []);
        archive.values(chunk, |(id, previous)| sql::version_args(id, previous));
        archive.push(D::ARCHIVE_VERSIONS_END);
        run::<D>(conn, &archive).await?;
    }
    Ok(())
}

/// Sources per statement of [`raise_consolidated`] (five arguments each).
const RAISE_CHUNK: usize = 400;

/// Write each source's consolidation level, version and update time (nothing else)
/// inside a write transaction, in one statement per [`RAISE_CHUNK`], if every stored
/// version is the one it was read at; otherwise not found or conflict, naming the first
/// source that changed (the caller's transaction then writes nothing).
pub(crate) async fn raise_consolidated<D: Dialect>(
    conn: &mut D::Connection,
    sources: &[(&Memory, &MemoryVersion)],
) -> MemoryResult<()> {
    for chunk in sources.chunks(RAISE_CHUNK) {
        let mut raise = Statement::new(
            "WITH raised (id, expected, level, version, updated_at) AS (",
            [],
        );
        raise.values(chunk, |(next, previous)| {
            [
                Arg::Text(next.id.as_str()),
                Arg::Integer(i64::from(previous.version)),
                Arg::Real(next.consolidation_level),
                Arg::Integer(i64::from(next.version)),
                Arg::Time(next.updated_at),
            ]
        });
        raise.push(
            ") UPDATE memories SET consolidation_level = raised.level,              version = raised.version, updated_at = raised.updated_at FROM raised              WHERE memories.id = raised.id AND memories.version = raised.expected",
        );
        if run::<D>(conn, &raise).await? == chunk.len() as u64 {
            continue;
        }
        let mut stored = Statement::new("SELECT id, version FROM memories WHERE ", []);
        stored.push_in(
            D::LISTS,
            "id",
            chunk.iter().map(|(next, _)| next.id.as_str()),
        );
        let mut found = HashMap::new();
        for row in rows::<D>(conn, &stored).await? {
            found.insert(row.text("id")?, row.integer("version")?);
        }
        for (next, previous) in chunk {
            match found.get(next.id.as_str()) {
                None => {
                    return Err(MemoryError::not_found(format!(
                        "memory {} does not exist",
                        next.id
                    )))
                }
                Some(&version) if version != i64::from(previous.version) => {
                    return Err(MemoryError::conflict(format!(
                        "memory {} changed concurrently (expected version {}, found {version}); read it again and retry",
                        next.id, previous.version
                    )))
                }
                Some(_) => {}
            }
        }
        return Err(MemoryError::conflict(
            "a source is listed twice in one consolidation; read the sources again and retry",
        ));
    }
    Ok(())
}

/// Replace every field of a memory inside a write transaction if its stored version is
/// `previous.version` (not found or conflict otherwise); nothing else is written.
async fn replace_if_version<D: Dialect>(
    conn: &mut D::Connection,
    next: &Memory,
    previous: &MemoryVersion,
) -> MemoryResult<()> {
    let content_hash = (next.content != previous.content).then(|| normalized_hash(&next.content));
    let update = sql::update_memory(next, previous.version, content_hash.as_deref());
    if run::<D>(conn, &update).await? == 0 {
        let stored = Statement::new(sql::MEMORY_VERSION, [Arg::Text(next.id.as_str())]);
        return Err(match row::<D>(conn, &stored).await? {
            None => MemoryError::not_found(format!("memory {} does not exist", next.id)),
            Some(row) => MemoryError::conflict(format!(
                "memory {} changed concurrently (expected version {}, found {}); read it again and retry",
                next.id,
                previous.version,
                row.integer("version")?
            )),
        });
    }
    Ok(())
}

/// The refusal of an embedder other than the one the stored vectors come from
/// (`stored` is `model|dimension`); `holder` names where they are, `fresh` what to use
/// instead.
pub(crate) fn other_embedding_model(
    stored: &str,
    model_id: &str,
    dimension: usize,
    holder: &str,
    fresh: &str,
) -> MemoryError {
    let (stored_model, stored_dimension) = stored.split_once('|').unwrap_or((stored, "?"));
    MemoryError::invalid(
        "embedding.provider",
        format!(
            "{holder} holds vectors of model {stored_model} ({stored_dimension} dimensions) but the configured embedder is {model_id} ({dimension} dimensions); use the original embedding settings, or {fresh}"
        ),
    )
}

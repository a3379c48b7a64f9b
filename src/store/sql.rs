//! The SQL text both stores run, and the form a statement takes between them.
//!
//! A [`Statement`] is dialect-neutral: its text numbers its placeholders `$1`, `$2`, …
//! (PostgreSQL's form, which sqlx's SQLite driver accepts as well) and its arguments are
//! [`Arg`]s, logical values that each dialect binds in its own column type: a time is
//! fixed-width RFC 3339 text on SQLite and a `timestamptz` on PostgreSQL, tags are JSON
//! text on one and `jsonb` on the other. The statements below are those whose text is
//! the same on both databases; what is spelt differently is a constant or a function of
//! the dialect (`super::dialect::Dialect`), next to the rest of that database's code.
//!
//! Statement text is built only from the constants of this crate: values always travel
//! as arguments, never inside the text.

use std::borrow::Cow;
use std::fmt::Write as _;

use chrono::{DateTime, Utc};
use mnemos_actors::model::{
    Association, ConsolidationRun, Memory, MemoryId, MemoryVersion, SessionId,
};
use mnemos_actors::store::StoredMemory;

/// The columns of a memory row (`rows::memory` reads them by name), as a literal so
/// that statements can be `concat!`ed at compile time.
macro_rules! memory_columns {
    () => {
        "id, agent_id, created_at, memory_type, content, title, importance, tags, session_id, \
         occurred_at, updated_at, last_accessed_at, access_count, consolidation_level, valence, \
         arousal, status, shared, metadata, source_path, source_hash, version, project_id"
    };
}
pub(crate) use memory_columns;

/// The columns of a KV entry row (`rows::kv_entry` reads them by name).
macro_rules! entry_columns {
    () => {
        "namespace, key, value, tags, written_by, created_at, updated_at, expires_at, last_used"
    };
}

/// One bound value, as the logical type both schemas store; each dialect binds it in its
/// own column type (see the variants).
#[derive(Clone, Debug)]
pub enum Arg<'a> {
    /// Text (`TEXT` on both).
    Text(&'a str),
    /// Text or NULL.
    OptionalText(Option<&'a str>),
    /// A whole number (SQLite `INTEGER`, PostgreSQL `bigint`).
    Integer(i64),
    /// A float (SQLite `REAL`, bound as an f64; PostgreSQL `real`).
    Real(f32),
    /// A float or NULL.
    OptionalReal(Option<f32>),
    /// A truth value (SQLite `INTEGER` 0 or 1, PostgreSQL `boolean`).
    Flag(bool),
    /// An instant to store (SQLite: fixed-width RFC 3339 text, so that text order is
    /// time order; PostgreSQL `timestamptz`).
    Time(DateTime<Utc>),
    /// An instant or NULL.
    OptionalTime(Option<DateTime<Utc>>),
    /// An instant a query compares against: as [`Arg::Time`], but clamped on PostgreSQL
    /// to what `timestamptz` holds, because open-ended ranges use chrono's extremes.
    Bound(DateTime<Utc>),
    /// A JSON document (SQLite: its text; PostgreSQL `jsonb`).
    Json(&'a serde_json::Value),
    /// A JSON array of strings, such as tags (SQLite: its text; PostgreSQL `jsonb`).
    Tags(&'a [String]),
    /// An embedding (SQLite: a `BLOB` of little-endian f32; PostgreSQL `real[]`).
    Vector(&'a [f32]),
    /// A whole list of texts as one value, PostgreSQL's `text[]` behind `= ANY(…)`.
    /// SQLite has no arrays: its lists bind one placeholder per value
    /// ([`ListBinding::Expanded`]), so it is never handed one.
    TextArray(Vec<&'a str>),
}

/// How a dialect asks whether a column holds one of a list of values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListBinding {
    /// `column IN ($1, $2, …)`: one placeholder per value, the list read in chunks (SQLite).
    Expanded,
    /// `column = ANY($1)`: the whole list bound as one array (PostgreSQL).
    Array,
}

impl ListBinding {
    /// `items` in the pieces one statement binds: chunks of `expanded` values when each
    /// value takes a placeholder, else the whole list at once.
    pub fn chunks<T>(self, items: &[T], expanded: usize) -> std::slice::Chunks<'_, T> {
        items.chunks(match self {
            Self::Expanded => expanded,
            Self::Array => usize::MAX,
        })
    }
}

/// A statement's text and its arguments, the `n`-th argument bound to `$n`.
#[derive(Clone, Debug)]
pub struct Statement<'a> {
    /// The SQL, numbering its placeholders in argument order.
    text: Cow<'static, str>,
    /// What `$1`, `$2`, … stand for.
    args: Vec<Arg<'a>>,
}

impl<'a> Statement<'a> {
    /// A statement whose text already numbers `args`.
    pub fn new(
        text: impl Into<Cow<'static, str>>,
        args: impl IntoIterator<Item = Arg<'a>>,
    ) -> Self {
        Self {
            text: text.into(),
            args: args.into_iter().collect(),
        }
    }

    /// The SQL.
    pub fn text(&self) -> &Cow<'static, str> {
        &self.text
    }

    /// The arguments, `$1` first.
    pub fn args(&self) -> &[Arg<'a>] {
        &self.args
    }

    /// Append SQL text.
    pub fn push(&mut self, text: &str) -> &mut Self {
        self.text.to_mut().push_str(text);
        self
    }

    /// Append the placeholder of a new argument.
    pub fn bind(&mut self, arg: Arg<'a>) -> &mut Self {
        self.args.push(arg);
        let number = self.args.len();
        let _ = write!(self.text.to_mut(), "${number}");
        self
    }

    /// Add arguments without placeholders (the text numbers them itself).
    pub fn bind_args(&mut self, args: impl IntoIterator<Item = Arg<'a>>) -> &mut Self {
        self.args.extend(args);
        self
    }

    /// Append `(…)` holding one placeholder per argument.
    pub fn bind_tuple(&mut self, args: impl IntoIterator<Item = Arg<'a>>) -> &mut Self {
        self.push("(");
        for (index, arg) in args.into_iter().enumerate() {
            if index > 0 {
                self.push(", ");
            }
            self.bind(arg);
        }
        self.push(")")
    }

    /// Append `VALUES (…), (…)`: one tuple per item, of the arguments `row` gives it.
    pub fn values<T, R>(
        &mut self,
        items: impl IntoIterator<Item = T>,
        row: impl Fn(T) -> R,
    ) -> &mut Self
    where
        R: IntoIterator<Item = Arg<'a>>,
    {
        self.push("VALUES ");
        for (index, item) in items.into_iter().enumerate() {
            if index > 0 {
                self.push(", ");
            }
            self.bind_tuple(row(item));
        }
        self
    }

    /// Append "`column` is one of `values`", as `binding` spells it.
    pub fn push_in(
        &mut self,
        binding: ListBinding,
        column: &str,
        values: impl IntoIterator<Item = &'a str>,
    ) -> &mut Self {
        self.push(column);
        match binding {
            ListBinding::Expanded => {
                self.push(" IN ");
                self.bind_tuple(values.into_iter().map(Arg::Text))
            }
            ListBinding::Array => {
                self.push(" = ANY(");
                self.bind(Arg::TextArray(values.into_iter().collect()));
                self.push(")")
            }
        }
    }
}

/// `ids` as the texts a list binds.
pub fn id_texts(ids: &[MemoryId]) -> impl Iterator<Item = &str> {
    ids.iter().map(MemoryId::as_str)
}

// ---------------------------------------------------------------------------------------
// store_meta
// ---------------------------------------------------------------------------------------

/// The term form recorded beside the keyword index (`KEYWORD_TERMS_VERSION`).
pub const KEYWORD_TERMS: &str = "SELECT value FROM store_meta WHERE key = 'keyword_terms'";
/// The embedding model (`model|dimension`) the stored vectors come from.
pub const EMBEDDING_MODEL: &str = "SELECT value FROM store_meta WHERE key = 'embedding_model'";
/// One bookkeeping value by key.
pub const META: &str = "SELECT value FROM store_meta WHERE key = $1";
/// Record a bookkeeping value (`$1` key, `$2` value), replacing the one it had.
pub const SET_META: &str = "INSERT INTO store_meta (key, value) VALUES ($1, $2) \
     ON CONFLICT (key) DO UPDATE SET value = excluded.value";
/// Remove a bookkeeping value.
pub const DELETE_META: &str = "DELETE FROM store_meta WHERE key = $1";

// ---------------------------------------------------------------------------------------
// memories
// ---------------------------------------------------------------------------------------

/// One memory by id.
pub const MEMORY: &str = concat!("SELECT ", memory_columns!(), " FROM memories WHERE id = $1");
/// Memories by id (append the id list).
pub const MEMORIES_WHERE: &str = concat!("SELECT ", memory_columns!(), " FROM memories WHERE ");
/// The [`mnemos_actors::store::RowStamp`] columns of memories; the caller appends its condition.
pub const STAMPS_WHERE: &str = "SELECT id, version, access_count FROM memories WHERE ";
/// Every memory of an agent, in id order.
pub const AGENT_MEMORIES: &str = concat!(
    "SELECT ",
    memory_columns!(),
    " FROM memories WHERE agent_id = $1 ORDER BY id"
);
/// The memories of one session of an agent, in time order.
pub const SESSION_MEMORIES: &str = concat!(
    "SELECT ",
    memory_columns!(),
    " FROM memories WHERE agent_id = $1 AND session_id = $2 ORDER BY occurred_at, id"
);
/// An agent's active memories with a content hash in a list (append the list), with
/// their hashes.
pub const ACTIVE_BY_HASH: &str = concat!(
    "SELECT ",
    memory_columns!(),
    ", content_hash FROM memories WHERE status = 'active' AND agent_id = $1 AND "
);
/// The content keys of an agent's active memories with a hash in a list (append it).
pub const ACTIVE_CONTENT: &str = "SELECT id, content_hash, project_id FROM memories \
     WHERE status = 'active' AND agent_id = $1 AND ";
/// Up to `$4` active memories of the session on each side of `$3`, in id order. The
/// two halves come back in no set order; the caller sorts them.
pub const SESSION_NEIGHBOURS: &str = "SELECT id FROM (SELECT id FROM memories \
     WHERE agent_id = $1 AND session_id = $2 AND status = 'active' AND id < $3 \
     ORDER BY id DESC LIMIT $4) AS earlier \
     UNION ALL SELECT id FROM (SELECT id FROM memories \
     WHERE agent_id = $1 AND session_id = $2 AND status = 'active' AND id > $3 \
     ORDER BY id LIMIT $4) AS later";
/// Seeds per statement of [`session_neighbours`] (three arguments each, far below
/// either database's limit on bound arguments).
pub const SESSION_NEIGHBOUR_SEEDS: usize = 100;

/// [`SESSION_NEIGHBOURS`] of several seeds in one statement: rows of (`seed`, `id`),
/// the two halves of each seed in no set order (the caller sorts them). Seeds without
/// a session are left out; at least one seed must have one.
pub fn session_neighbours<'a>(seeds: &[&'a Memory], radius: usize) -> Statement<'a> {
    let mut statement = Statement::new("", [Arg::Integer(radius as i64)]);
    for (index, seed) in seeds.iter().enumerate() {
        let Some(session) = &seed.session_id else {
            continue;
        };
        let first = statement.args().len() + 1;
        statement.bind_args([
            Arg::Text(seed.id.as_str()),
            Arg::Text(seed.agent_id.as_str()),
            Arg::Text(session.as_str()),
        ]);
        let (id, agent, session) = (first, first + 1, first + 2);
        if first > 2 {
            // Not the first seed with a session.
            statement.push(" UNION ALL ");
        }
        let half = |order: &str, compare: &str, alias: &str| {
            format!(
                "SELECT CAST(${id} AS TEXT) AS seed, id FROM (SELECT id FROM memories \
                 WHERE agent_id = ${agent} AND session_id = ${session} AND status = 'active' \
                 AND id {compare} ${id} ORDER BY id {order} LIMIT $1) AS {alias}{index}"
            )
        };
        statement.push(&half("DESC", "<", "earlier"));
        statement.push(" UNION ALL ");
        statement.push(&half("ASC", ">", "later"));
    }
    statement
}

/// Every agent that has memories.
pub const AGENTS: &str = "SELECT DISTINCT agent_id FROM memories ORDER BY agent_id";
/// Every agent with its memory counts and newest memory.
pub const AGENT_SUMMARIES: &str = "SELECT agent_id, COUNT(*) AS memories, \
     SUM(CASE WHEN status = 'active' THEN 1 ELSE 0 END) AS active, MAX(created_at) AS last_at \
     FROM memories GROUP BY agent_id ORDER BY agent_id";
/// An agent's sessions, the most recently spoken first (`$2` at most).
pub const AGENT_SESSIONS: &str = "SELECT session_id, last_seq, compacted_through, summary, \
     summarized_at, pending_tokens, compactions, created_at, last_message_at FROM sessions \
     WHERE agent_id = $1 ORDER BY last_message_at DESC, session_id LIMIT $2";
/// How many memories there are.
pub const COUNT_MEMORIES: &str = "SELECT count(*) AS total FROM memories";
/// The stored version of a memory (to tell a missing memory from a changed one).
pub const MEMORY_VERSION: &str = "SELECT version FROM memories WHERE id = $1";
/// Delete a memory; versions, embedding, edges and keyword terms go with it (cascades
/// and triggers).
pub const DELETE_MEMORY: &str = "DELETE FROM memories WHERE id = $1";
/// Delete memories by id (append the id list).
pub const DELETE_MEMORIES_WHERE: &str = "DELETE FROM memories WHERE ";
/// An agent's memories archived by forgetting before `$2` (the newest version's reason
/// is `$3` or `$4`); the dialect appends its order.
pub const FORGOTTEN: &str = "SELECT m.id FROM memories m \
     WHERE m.agent_id = $1 AND m.status = 'archived' AND m.updated_at < $2 \
     AND (SELECT v.reason FROM memory_versions v WHERE v.memory_id = m.id \
     ORDER BY v.version DESC LIMIT 1) IN ($3, $4)";
/// Past versions of a memory, oldest first.
pub const HISTORY: &str = "SELECT version, content, importance, tags, status, archived_at, reason \
     FROM memory_versions WHERE memory_id = $1 ORDER BY version";

/// A memory's fields after its id, agent and creation time, in the order of
/// `memory_columns!`: what an update replaces.
fn memory_fields(m: &Memory) -> [Arg<'_>; 20] {
    [
        Arg::Text(m.memory_type.as_str()),
        Arg::Text(&m.content),
        Arg::OptionalText(m.title.as_deref()),
        Arg::Real(m.importance),
        Arg::Tags(&m.tags),
        Arg::OptionalText(m.session_id.as_ref().map(SessionId::as_str)),
        Arg::Time(m.occurred_at),
        Arg::Time(m.updated_at),
        Arg::Time(m.last_accessed_at),
        Arg::Integer(i64::from(m.access_count)),
        Arg::Real(m.consolidation_level),
        Arg::OptionalReal(m.valence),
        Arg::OptionalReal(m.arousal),
        Arg::Text(m.status.as_str()),
        Arg::Flag(m.shared),
        Arg::Json(&m.metadata),
        Arg::OptionalText(m.source.as_ref().map(|s| s.path.as_str())),
        Arg::OptionalText(m.source.as_ref().map(|s| s.hash.as_str())),
        Arg::Integer(i64::from(m.version)),
        Arg::OptionalText(m.project_id.as_ref().map(|p| p.as_str())),
    ]
}

/// The memories `records` hold, as one multi-row insert.
pub fn insert_memories<'a>(records: impl IntoIterator<Item = &'a StoredMemory>) -> Statement<'a> {
    let mut statement = Statement::new(
        concat!(
            "INSERT INTO memories (",
            memory_columns!(),
            ", content_hash) "
        ),
        [],
    );
    statement.values(records, |record| {
        let m = &record.memory;
        [
            Arg::Text(m.id.as_str()),
            Arg::Text(m.agent_id.as_str()),
            Arg::Time(m.created_at),
        ]
        .into_iter()
        .chain(memory_fields(m))
        .chain([Arg::Text(&record.content_hash)])
    });
    statement
}

/// The embeddings `records` hold, as one multi-row insert.
pub fn insert_embeddings<'a>(records: impl IntoIterator<Item = &'a StoredMemory>) -> Statement<'a> {
    let mut statement = Statement::new("INSERT INTO memory_embeddings (memory_id, vector) ", []);
    statement.values(records, |record| {
        [
            Arg::Text(record.memory.id.as_str()),
            Arg::Vector(&record.embedding),
        ]
    });
    statement
}

/// Replace every field of a memory if its stored version is `expected`. The content
/// hash is set only when `content_hash` is given (the content changed); otherwise the
/// stored one stays.
pub fn update_memory<'a>(
    next: &'a Memory,
    expected: u32,
    content_hash: Option<&'a str>,
) -> Statement<'a> {
    Statement::new(
        "UPDATE memories SET memory_type = $1, content = $2, title = $3, importance = $4, \
         tags = $5, session_id = $6, occurred_at = $7, updated_at = $8, last_accessed_at = $9, \
         access_count = $10, consolidation_level = $11, valence = $12, arousal = $13, \
         status = $14, shared = $15, metadata = $16, source_path = $17, source_hash = $18, \
         version = $19, project_id = $20, content_hash = COALESCE($21, content_hash) \
         WHERE id = $22 AND version = $23",
        memory_fields(next).into_iter().chain([
            Arg::OptionalText(content_hash),
            Arg::Text(next.id.as_str()),
            Arg::Integer(i64::from(expected)),
        ]),
    )
}

/// The arguments of a dialect's "archive this version" statement: `$1` memory id,
/// `$2` version, `$3` content, `$4` importance, `$5` tags, `$6` status, `$7` archived
/// at, `$8` reason.
pub fn version_args<'a>(id: &'a MemoryId, previous: &'a MemoryVersion) -> [Arg<'a>; 8] {
    [
        Arg::Text(id.as_str()),
        Arg::Integer(i64::from(previous.version)),
        Arg::Text(&previous.content),
        Arg::Real(previous.importance),
        Arg::Tags(&previous.tags),
        Arg::Text(previous.status.as_str()),
        Arg::Time(previous.archived_at),
        Arg::Text(&previous.reason),
    ]
}

/// Browse memories: the filters of a `ListQuery`, newest first. `has_tag` is the
/// dialect's test of one tag, the text before and after its placeholder.
pub fn list_memories<'a>(
    query: &'a mnemos_actors::store::ListQuery,
    has_tag: (&str, &str),
    position: &str,
) -> Statement<'a> {
    let mut statement = Statement::new(
        concat!("SELECT ", memory_columns!(), " FROM memories WHERE TRUE"),
        [],
    );
    list_filters(&mut statement, query, has_tag, position);
    if let Some(cursor) = &query.cursor {
        statement
            .push(" AND id < ")
            .bind(Arg::Text(cursor.as_str()));
    }
    match &query.occurred {
        Some(range) => {
            statement
                .push(" AND occurred_at >= ")
                .bind(Arg::Bound(range.start))
                .push(" AND occurred_at < ")
                .bind(Arg::Bound(range.end))
                .push(" ORDER BY occurred_at DESC, id DESC LIMIT ");
        }
        None => {
            statement.push(" ORDER BY id DESC LIMIT ");
        }
    }
    statement.bind(Arg::Integer(query.limit as i64));
    statement
}

/// How many memories pass a browse's filters (its cursor and page size aside): the
/// count is `n`.
pub fn count_listed<'a>(
    query: &'a mnemos_actors::store::ListQuery,
    has_tag: (&str, &str),
    position: &str,
) -> Statement<'a> {
    let mut statement = Statement::new("SELECT COUNT(*) AS n FROM memories WHERE TRUE", []);
    list_filters(&mut statement, query, has_tag, position);
    if let Some(range) = &query.occurred {
        statement
            .push(" AND occurred_at >= ")
            .bind(Arg::Bound(range.start))
            .push(" AND occurred_at < ")
            .bind(Arg::Bound(range.end));
    }
    statement
}

/// The filters a browse and its count share (`ListQuery::admits` is their reference):
/// `has_tag` is the dialect's tag test, `position` its substring function taking
/// (haystack, needle) and answering 0 when absent (`instr`, `strpos`).
fn list_filters<'a>(
    statement: &mut Statement<'a>,
    query: &'a mnemos_actors::store::ListQuery,
    has_tag: (&str, &str),
    position: &str,
) {
    if let Some(agent) = &query.agent_id {
        statement
            .push(" AND agent_id = ")
            .bind(Arg::Text(agent.as_str()));
    }
    if let Some(memory_type) = query.memory_type {
        statement
            .push(" AND memory_type = ")
            .bind(Arg::Text(memory_type.as_str()));
    }
    if let Some(status) = query.status {
        statement
            .push(" AND status = ")
            .bind(Arg::Text(status.as_str()));
    }
    if let Some(tag) = &query.tag {
        statement
            .push(has_tag.0)
            .bind(Arg::Text(tag))
            .push(has_tag.1);
    }
    if let Some(project) = &query.project_id {
        statement
            .push(" AND project_id = ")
            .bind(Arg::Text(project.as_str()));
    }
    if let Some(session) = &query.session_id {
        statement
            .push(" AND session_id = ")
            .bind(Arg::Text(session.as_str()));
    }
    if let Some(range) = &query.within {
        statement
            .push(" AND occurred_at >= ")
            .bind(Arg::Bound(range.start))
            .push(" AND occurred_at < ")
            .bind(Arg::Bound(range.end));
    }
    for word in &query.words {
        statement
            .push(&format!(" AND {position}(LOWER(content), "))
            .bind(Arg::Text(word))
            .push(") > 0");
    }
}

// ---------------------------------------------------------------------------------------
// embeddings
// ---------------------------------------------------------------------------------------

/// The stored embedding of one memory.
pub const EMBEDDING: &str = "SELECT vector FROM memory_embeddings WHERE memory_id = $1";
/// Embeddings by memory id (append the id list).
pub const EMBEDDINGS_WHERE: &str = "SELECT memory_id, vector FROM memory_embeddings WHERE ";
/// A page of active memories' embeddings in id order after `$1`.
pub const EMBEDDINGS_PAGE: &str = "SELECT m.id, m.agent_id, m.memory_type, m.shared, e.vector, \
     m.occurred_at, m.title, m.content, m.session_id \
     FROM memories m JOIN memory_embeddings e ON e.memory_id = m.id \
     WHERE m.status = 'active' AND m.id > $1 ORDER BY m.id LIMIT $2";

/// A page of the memories with a vector after `$1` (limit `$2`), with the source hash of
/// their next-model vector (a re-embedding's work list).
pub const REEMBED_PAGE: &str = "SELECT m.id, m.title, m.content, n.source_hash \
     FROM memories m JOIN memory_embeddings e ON e.memory_id = m.id \
     LEFT JOIN memory_embeddings_next n ON n.memory_id = m.id \
     WHERE m.id > $1 ORDER BY m.id LIMIT $2";
/// Store a next-model vector (`$1` id, `$2` vector, `$3` source hash) of a memory that exists.
pub const PUT_NEXT_EMBEDDING: &str = "INSERT INTO memory_embeddings_next (memory_id, vector, source_hash) \
     SELECT id, $2, $3 FROM memories WHERE id = $1 \
     ON CONFLICT (memory_id) DO UPDATE SET vector = excluded.vector, source_hash = excluded.source_hash";
/// Memories with a vector (`total`) and of them with a next-model vector (`done`).
pub const REEMBED_COUNTS: &str = "SELECT (SELECT COUNT(*) FROM memory_embeddings) AS total, \
     (SELECT COUNT(*) FROM memory_embeddings_next n \
      JOIN memory_embeddings e ON e.memory_id = n.memory_id) AS done";
/// Memories with a vector but no next-model vector.
pub const REEMBED_MISSING: &str = "SELECT COUNT(*) AS missing FROM memory_embeddings e \
     LEFT JOIN memory_embeddings_next n ON n.memory_id = e.memory_id WHERE n.memory_id IS NULL";
/// Every vector replaced by its next-model vector.
pub const SWAP_IN_NEXT_EMBEDDINGS: &str = "UPDATE memory_embeddings SET vector = \
     (SELECT n.vector FROM memory_embeddings_next n WHERE n.memory_id = memory_embeddings.memory_id)";
/// Forget every next-model vector.
pub const CLEAR_NEXT_EMBEDDINGS: &str = "DELETE FROM memory_embeddings_next";

// ---------------------------------------------------------------------------------------
// consolidation runs, session archives, leases, outbox
// ---------------------------------------------------------------------------------------

/// The arguments of a dialect's "record this run" statement, in column order: id,
/// agent_id, trigger, started_at, finished_at, processed, consolidated, forgotten,
/// new_semantic, new_procedural, report.
pub fn run_args(run: &ConsolidationRun) -> [Arg<'_>; 11] {
    [
        Arg::Text(&run.id),
        Arg::OptionalText(run.agent_id.as_ref().map(|a| a.as_str())),
        Arg::Text(&run.trigger),
        Arg::Time(run.started_at),
        Arg::Time(run.finished_at),
        Arg::Integer(i64::from(run.processed)),
        Arg::Integer(i64::from(run.consolidated)),
        Arg::Integer(i64::from(run.forgotten)),
        Arg::Integer(i64::from(run.new_semantic)),
        Arg::Integer(i64::from(run.new_procedural)),
        Arg::Json(&run.report),
    ]
}

/// The newest runs, of one agent when given.
pub fn runs(agent: Option<&mnemos_actors::model::AgentId>, limit: usize) -> Statement<'_> {
    let mut statement = Statement::new("SELECT * FROM consolidation_runs", []);
    if let Some(agent) = agent {
        statement
            .push(" WHERE agent_id = ")
            .bind(Arg::Text(agent.as_str()));
    }
    statement
        .push(" ORDER BY started_at DESC, id DESC LIMIT ")
        .bind(Arg::Integer(limit as i64));
    statement
}

/// Idle sessions (newest activity before `$1`, not covered by an archive summary), the
/// oldest `$2` first. `not_summary` is the dialect's test that a row is not an archive
/// summary: summaries are not activity.
pub fn idle_sessions(not_summary: &str) -> String {
    format!(
        "SELECT g.agent_id, g.session_id, g.first_at, g.last_at, g.last_activity FROM ( \
             SELECT agent_id, session_id, MIN(occurred_at) AS first_at, MAX(occurred_at) AS last_at, \
                    MAX(created_at) AS last_activity \
             FROM memories WHERE session_id IS NOT NULL AND {not_summary} \
             GROUP BY agent_id, session_id) g \
         LEFT JOIN session_archives a ON a.agent_id = g.agent_id AND a.session_id = g.session_id \
         WHERE g.last_activity < $1 AND (a.archived_through IS NULL OR g.last_activity > a.archived_through) \
         ORDER BY g.last_activity LIMIT $2"
    )
}

/// Mark a session archived through `$3` by summary `$4`, unless a mark already covers it.
pub const MARK_SESSION_ARCHIVED: &str = "INSERT INTO session_archives \
     (agent_id, session_id, archived_through, summary_id) VALUES ($1, $2, $3, $4) \
     ON CONFLICT (agent_id, session_id) DO UPDATE SET archived_through = excluded.archived_through, \
     summary_id = excluded.summary_id WHERE session_archives.archived_through < excluded.archived_through";

/// Claim a job's slot `$4` for holder `$2` until `$3`: one statement, so two processes
/// racing for a slot cannot both win.
pub const ACQUIRE_LEASE: &str = "INSERT INTO job_leases (job, holder, expires_at, last_slot) \
     VALUES ($1, $2, $3, $4) \
     ON CONFLICT (job) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at, \
     last_slot = excluded.last_slot \
     WHERE job_leases.last_slot < excluded.last_slot \
     AND (job_leases.expires_at <= $5 OR job_leases.holder = excluded.holder)";
/// Move a held lease's expiry to `$1` (renewal, or release with `$1` = now).
pub const SET_LEASE_EXPIRY: &str =
    "UPDATE job_leases SET expires_at = $1 WHERE job = $2 AND holder = $3";

/// Outbox entries after sequence number `$1`, at most `$2`.
pub const OUTBOX_AFTER: &str = "SELECT seq, entity, op, agent_id, memory_id, from_id, to_id, \
     relation, payload, created_at FROM outbox WHERE seq > $1 ORDER BY seq LIMIT $2";
/// Delete outbox entries up to `$1`.
pub const TRIM_OUTBOX: &str = "DELETE FROM outbox WHERE seq <= $1";

// ---------------------------------------------------------------------------------------
// sessions
// ---------------------------------------------------------------------------------------

/// Start a session or take its next sequence number, adding `$3` pending tokens;
/// `greatest` is the dialect's two-argument maximum.
pub fn append_session(greatest: &str) -> String {
    format!(
        "INSERT INTO sessions (agent_id, session_id, last_seq, pending_tokens, created_at, last_message_at) \
         VALUES ($1, $2, 1, $3, $4, $4) \
         ON CONFLICT (agent_id, session_id) DO UPDATE SET last_seq = sessions.last_seq + 1, \
         pending_tokens = sessions.pending_tokens + excluded.pending_tokens, \
         last_message_at = {greatest}(sessions.last_message_at, excluded.last_message_at) \
         RETURNING last_seq"
    )
}
/// Append one message to a session's log.
pub const INSERT_SESSION_MESSAGE: &str = "INSERT INTO session_messages \
     (agent_id, session_id, seq, role, content, tokens, at) VALUES ($1, $2, $3, $4, $5, $6, $7)";
/// A session's bookkeeping row.
pub const SESSION_RECORD: &str = "SELECT last_seq, compacted_through, summary, summarized_at, \
     pending_tokens, compactions, created_at, last_message_at FROM sessions \
     WHERE agent_id = $1 AND session_id = $2";
/// A session's messages after sequence number `$3`.
pub const SESSION_MESSAGES_AFTER: &str =
    "SELECT seq, role, content, tokens, at FROM session_messages \
     WHERE agent_id = $1 AND session_id = $2 AND seq > $3 ORDER BY seq";
/// Move a session's compaction mark to `$1` with summary `$2`, only while the mark is
/// behind: two compactions of the same messages commit once.
pub const COMPACT_SESSION: &str = "UPDATE sessions SET compacted_through = $1, summary = $2, \
     summarized_at = $3, compactions = compactions + 1, \
     pending_tokens = (SELECT COALESCE(SUM(tokens), 0) FROM session_messages m \
         WHERE m.agent_id = $4 AND m.session_id = $5 AND m.seq > $1) \
     WHERE agent_id = $4 AND session_id = $5 AND compacted_through < $1 AND last_seq >= $1";

// ---------------------------------------------------------------------------------------
// associations
// ---------------------------------------------------------------------------------------

/// The columns of an association row.
const EDGE_COLUMNS: &str = "agent_id, from_id, to_id, relation, weight, created_at";

/// Insert an edge or set its weight, returning the stored edge.
pub fn upsert_edge(edge: &Association) -> Statement<'_> {
    Statement::new(
        "INSERT INTO associations (agent_id, from_id, to_id, relation, weight, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6) \
         ON CONFLICT (from_id, to_id, relation) DO UPDATE SET weight = excluded.weight \
         RETURNING agent_id, from_id, to_id, relation, weight, created_at",
        edge_args(edge),
    )
}

/// An edge's columns in `associations` order: agent, from, to, relation, weight,
/// created at.
pub fn edge_args(edge: &Association) -> [Arg<'_>; 6] {
    [
        Arg::Text(edge.agent_id.as_str()),
        Arg::Text(edge.from_id.as_str()),
        Arg::Text(edge.to_id.as_str()),
        Arg::Text(&edge.relation),
        Arg::Real(edge.weight),
        Arg::Time(edge.created_at),
    ]
}

/// Edges per statement of [`upsert_edges`] (six arguments each).
pub const EDGES_PER_UPSERT: usize = 500;

/// [`upsert_edge`] of several edges in one statement, without reading them back; no two
/// may share (from, to, relation) (PostgreSQL refuses to update one row twice).
pub fn upsert_edges(edges: &[Association]) -> Statement<'_> {
    let mut statement = Statement::new(
        "INSERT INTO associations (agent_id, from_id, to_id, relation, weight, created_at) ",
        [],
    );
    statement.values(edges, edge_args);
    statement
        .push(" ON CONFLICT (from_id, to_id, relation) DO UPDATE SET weight = excluded.weight");
    statement
}

/// An agent's edges touching any of `ends`; `order` is the dialect's `ORDER BY` (or none).
pub fn edges_touching<'a>(
    binding: ListBinding,
    agent: &'a str,
    ends: &'a [String],
    order: &str,
) -> Statement<'a> {
    let mut statement = Statement::new(
        format!("SELECT {EDGE_COLUMNS} FROM associations WHERE agent_id = $1 AND ("),
        [Arg::Text(agent)],
    );
    statement
        .push_in(binding, "from_id", ends.iter().map(String::as_str))
        .push(" OR ")
        .push_in(binding, "to_id", ends.iter().map(String::as_str))
        .push(")")
        .push(order);
    statement
}

/// Every edge of an agent, in key order.
pub const AGENT_EDGES: &str = "SELECT agent_id, from_id, to_id, relation, weight, created_at \
     FROM associations WHERE agent_id = $1 ORDER BY from_id, to_id, relation";
/// Delete every edge touching a memory.
pub const REMOVE_EDGES_OF: &str = "DELETE FROM associations WHERE from_id = $1 OR to_id = $1";

// ---------------------------------------------------------------------------------------
// projects
// ---------------------------------------------------------------------------------------

/// Create a project or rename it and set its isolation, returning the stored row.
pub const UPSERT_PROJECT: &str = "INSERT INTO projects \
     (agent_id, project_id, name, isolated, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6) \
     ON CONFLICT (agent_id, project_id) DO UPDATE SET name = excluded.name, \
     isolated = excluded.isolated, updated_at = excluded.updated_at \
     RETURNING agent_id, project_id, name, isolated, created_at, updated_at";
/// One project of an agent.
pub const PROJECT: &str = "SELECT agent_id, project_id, name, isolated, created_at, updated_at \
     FROM projects WHERE agent_id = $1 AND project_id = $2";
/// Every project of an agent, in id order.
pub const PROJECTS: &str = "SELECT agent_id, project_id, name, isolated, created_at, updated_at \
     FROM projects WHERE agent_id = $1 ORDER BY project_id";
/// The sessions attached to a project, in id order.
pub const PROJECT_SESSIONS: &str = "SELECT session_id FROM project_sessions \
     WHERE agent_id = $1 AND project_id = $2 ORDER BY session_id";
/// Whether a project exists.
pub const PROJECT_EXISTS: &str =
    "SELECT 1 AS found FROM projects WHERE agent_id = $1 AND project_id = $2";
/// The project a session is attached to.
pub const SESSION_PROJECT: &str =
    "SELECT project_id FROM project_sessions WHERE agent_id = $1 AND session_id = $2";
/// Attach a session to a project.
pub const ATTACH_SESSION: &str = "INSERT INTO project_sessions \
     (agent_id, session_id, project_id, attached_at) VALUES ($1, $2, $3, $4)";

/// Which of `projects` are isolated.
pub fn isolated_projects(
    projects: &[(
        mnemos_actors::model::AgentId,
        mnemos_actors::projects::ProjectId,
    )],
) -> Statement<'_> {
    let mut statement = Statement::new(
        "SELECT agent_id, project_id FROM projects WHERE isolated = $1 \
         AND (agent_id, project_id) IN (VALUES ",
        [Arg::Flag(true)],
    );
    for (index, (agent, project)) in projects.iter().enumerate() {
        if index > 0 {
            statement.push(", ");
        }
        statement
            .push("(CAST(")
            .bind(Arg::Text(agent.as_str()))
            .push(" AS text), CAST(")
            .bind(Arg::Text(project.as_str()))
            .push(" AS text))");
    }
    statement.push(")");
    statement
}

// ---------------------------------------------------------------------------------------
// KV namespaces
// ---------------------------------------------------------------------------------------

/// A namespace's bound.
pub const NAMESPACE_BOUND: &str = "SELECT max_entries FROM kv_namespaces WHERE name = $1";
/// Create a namespace with bound `$2`, or set the bound of an existing one.
pub const CONFIGURE_NAMESPACE: &str = "INSERT INTO kv_namespaces \
     (name, max_entries, created_at, updated_at) VALUES ($1, $2, $3, $3) \
     ON CONFLICT (name) DO UPDATE SET max_entries = excluded.max_entries, updated_at = excluded.updated_at";
/// Create a namespace with bound `$2` unless it exists.
pub const ENSURE_NAMESPACE: &str = "INSERT INTO kv_namespaces \
     (name, max_entries, created_at, updated_at) VALUES ($1, $2, $3, $3) ON CONFLICT (name) DO NOTHING";
/// Drop a namespace's entries expired at `$2`.
pub const PURGE_EXPIRED: &str =
    "DELETE FROM kv_entries WHERE namespace = $1 AND expires_at IS NOT NULL AND expires_at <= $2";
/// How many entries a namespace holds.
pub const COUNT_ENTRIES: &str = "SELECT COUNT(*) AS entries FROM kv_entries WHERE namespace = $1";
/// Delete the `$2` least recently used entries of a namespace.
pub const EVICT: &str = "DELETE FROM kv_entries WHERE namespace = $1 AND key IN \
     (SELECT key FROM kv_entries WHERE namespace = $1 ORDER BY last_used LIMIT $2) \
     RETURNING last_used, key";
/// Count `$1` evictions.
pub const COUNT_EVICTIONS: &str =
    "UPDATE kv_namespaces SET evictions = evictions + $1 WHERE name = $2";
/// A namespace's counters and its live entries at `$1`.
pub const NAMESPACE_STATS: &str = "SELECT max_entries, hits, misses, evictions, puts, created_at, \
     (SELECT COUNT(*) FROM kv_entries e WHERE e.namespace = n.name \
      AND (e.expires_at IS NULL OR e.expires_at > $1)) AS entries \
     FROM kv_namespaces n WHERE name = $2";
/// Take a namespace's next use number, bumping `counter` (`hits` or `puts`) with it.
pub fn next_use(counter: &'static str) -> String {
    format!(
        "UPDATE kv_namespaces SET clock = clock + 1, {counter} = {counter} + 1, updated_at = $1 \
         WHERE name = $2 RETURNING clock, max_entries"
    )
}
/// When an entry was created.
pub const ENTRY_CREATED: &str =
    "SELECT created_at FROM kv_entries WHERE namespace = $1 AND key = $2";
/// Write an entry (keeping its creation time when it exists).
pub const PUT_ENTRY: &str = concat!(
    "INSERT INTO kv_entries (",
    entry_columns!(),
    ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
     ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value, tags = excluded.tags, \
     written_by = excluded.written_by, updated_at = excluded.updated_at, \
     expires_at = excluded.expires_at, last_used = excluded.last_used"
);
/// Forget an entry's tags.
pub const DELETE_ENTRY_TAGS: &str = "DELETE FROM kv_entry_tags WHERE namespace = $1 AND key = $2";
/// Record an entry's tags (append `VALUES`).
pub const INSERT_ENTRY_TAGS: &str = "INSERT INTO kv_entry_tags (namespace, key, tag) ";
/// One entry.
pub const ENTRY: &str = concat!(
    "SELECT ",
    entry_columns!(),
    " FROM kv_entries WHERE namespace = $1 AND key = $2"
);
/// Give an entry use number `$1`.
pub const USE_ENTRY: &str =
    "UPDATE kv_entries SET last_used = $1 WHERE namespace = $2 AND key = $3";
/// Delete an entry.
pub const DELETE_ENTRY: &str = "DELETE FROM kv_entries WHERE namespace = $1 AND key = $2";
/// Delete an entry, returning when it would have expired.
pub const TAKE_ENTRY: &str =
    "DELETE FROM kv_entries WHERE namespace = $1 AND key = $2 RETURNING expires_at";
/// Count a miss.
pub const COUNT_MISS: &str = "UPDATE kv_namespaces SET misses = misses + 1 WHERE name = $1";
/// A namespace's entries live at `$2` (append further conditions).
pub const LIVE_ENTRIES: &str = concat!(
    "SELECT ",
    entry_columns!(),
    " FROM kv_entries WHERE namespace = $1 AND (expires_at IS NULL OR expires_at > $2)"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_number_arguments_in_order() {
        let mut statement = Statement::new("SELECT 1 WHERE a = $1", [Arg::Integer(1)]);
        statement
            .push(" AND ")
            .push_in(ListBinding::Expanded, "b", ["x", "y"])
            .push(" AND ")
            .push_in(ListBinding::Array, "c", ["z"]);
        assert_eq!(
            statement.text(),
            "SELECT 1 WHERE a = $1 AND b IN ($2, $3) AND c = ANY($4)"
        );
        assert_eq!(statement.args().len(), 4);
        let mut values = Statement::new("INSERT INTO t (a, b) ", []);
        values.values([1, 2], |n| [Arg::Integer(n), Arg::Integer(n * 10)]);
        assert_eq!(
            values.text(),
            "INSERT INTO t (a, b) VALUES ($1, $2), ($3, $4)"
        );
    }

    #[test]
    fn lists_are_chunked_only_when_each_value_takes_a_placeholder() {
        let items = [1, 2, 3, 4, 5];
        assert_eq!(ListBinding::Expanded.chunks(&items, 2).count(), 3);
        assert_eq!(ListBinding::Array.chunks(&items, 2).count(), 1);
        assert_eq!(ListBinding::Array.chunks(&items[..0], 2).count(), 0);
    }
}

//! From a row to a domain record, once for both stores.
//!
//! A dialect says how it reads a column of each logical type ([`Columns`]: a time is
//! RFC 3339 text on SQLite and a `timestamptz` on PostgreSQL); the functions below say
//! which columns make a [`Memory`], a [`MemoryVersion`], a [`ConsolidationRun`], a
//! [`KvEntry`], a [`Project`], … and how a stored value becomes a field (ids parsed,
//! counts clamped to their unsigned type).
//!
//! A column that cannot be read as its type is an `internal` error ("corrupt row in
//! store"); so is malformed JSON in a column whose value matters (tags, metadata, a KV
//! value), while a malformed run report, outbox payload or version's tags reads as
//! empty, as the SQLite store always did (PostgreSQL's `jsonb` cannot be malformed).

use chrono::{DateTime, Utc};
use mnemos_actors::error::{MemoryError, MemoryResult};
use mnemos_actors::kv::{KvEntry, NamespaceName, NamespaceStats};
use mnemos_actors::model::{
    AgentId, Association, ConsolidationRun, Memory, MemoryId, MemoryStatus, MemoryType,
    MemoryVersion, MessageRole, SessionId, SessionMessage, SessionRecord, SourceRef,
};
use mnemos_actors::projects::{Project, ProjectId};
use mnemos_actors::store::{EmbeddingRecord, IdleSession, OutboxEntry, ProjectedChange};

/// A row's columns read as the logical types both schemas store.
///
/// JSON readers return the parse result inside the read result: the outer error is a
/// column that is not text (or `jsonb`), the inner one text that is not the JSON
/// expected, so each caller decides whether such a value fails the read.
pub trait Columns {
    /// A text column.
    fn text(&self, column: &str) -> MemoryResult<String>;
    /// A nullable text column.
    fn optional_text(&self, column: &str) -> MemoryResult<Option<String>>;
    /// A whole-number column.
    fn integer(&self, column: &str) -> MemoryResult<i64>;
    /// A nullable whole-number column.
    fn optional_integer(&self, column: &str) -> MemoryResult<Option<i64>>;
    /// A float column.
    fn real(&self, column: &str) -> MemoryResult<f32>;
    /// A nullable float column.
    fn optional_real(&self, column: &str) -> MemoryResult<Option<f32>>;
    /// A truth-value column.
    fn flag(&self, column: &str) -> MemoryResult<bool>;
    /// An instant.
    fn time(&self, column: &str) -> MemoryResult<DateTime<Utc>>;
    /// A nullable instant.
    fn optional_time(&self, column: &str) -> MemoryResult<Option<DateTime<Utc>>>;
    /// A JSON document.
    fn json(&self, column: &str) -> MemoryResult<Result<serde_json::Value, serde_json::Error>>;
    /// A JSON array of strings.
    fn tags(&self, column: &str) -> MemoryResult<Result<Vec<String>, serde_json::Error>>;
    /// An embedding.
    fn vector(&self, column: &str) -> MemoryResult<Vec<f32>>;
}

/// A column that could not be read as its type.
pub fn corrupt(error: sqlx::Error) -> MemoryError {
    MemoryError::internal(format!("corrupt row in store: {error}"))
}

/// Malformed JSON in a column whose value matters.
fn corrupt_json(what: &str, error: serde_json::Error) -> MemoryError {
    MemoryError::internal(format!("corrupt {what}: {error}"))
}

/// A stored count as a `u32` (never negative, saturating).
fn count_u32(value: i64) -> u32 {
    value.clamp(0, i64::from(u32::MAX)) as u32
}

/// A stored count as a `u64` (never negative).
fn count_u64(value: i64) -> u64 {
    value.max(0) as u64
}

/// A memory row (the columns of `sql::memory_columns!`).
pub fn memory(row: &impl Columns) -> MemoryResult<Memory> {
    let source = match (
        row.optional_text("source_path")?,
        row.optional_text("source_hash")?,
    ) {
        (Some(path), Some(hash)) => Some(SourceRef { path, hash }),
        _ => None,
    };
    Ok(Memory {
        id: MemoryId(row.text("id")?),
        agent_id: AgentId::stored(&row.text("agent_id")?)?,
        memory_type: MemoryType::parse("type", &row.text("memory_type")?)?,
        content: row.text("content")?,
        title: row.optional_text("title")?,
        importance: row.real("importance")?,
        tags: row.tags("tags")?.map_err(|e| corrupt_json("tags", e))?,
        session_id: row
            .optional_text("session_id")?
            .as_deref()
            .map(SessionId::parse)
            .transpose()?,
        project_id: row
            .optional_text("project_id")?
            .as_deref()
            .map(ProjectId::parse)
            .transpose()?,
        occurred_at: row.time("occurred_at")?,
        created_at: row.time("created_at")?,
        updated_at: row.time("updated_at")?,
        last_accessed_at: row.time("last_accessed_at")?,
        access_count: count_u32(row.integer("access_count")?),
        consolidation_level: row.real("consolidation_level")?,
        valence: row.optional_real("valence")?,
        arousal: row.optional_real("arousal")?,
        status: MemoryStatus::parse("status", &row.text("status")?)?,
        shared: row.flag("shared")?,
        metadata: row
            .json("metadata")?
            .map_err(|e| corrupt_json("metadata", e))?,
        source,
        version: count_u32(row.integer("version")?),
    })
}

/// A `memory_versions` row.
pub fn version(row: &impl Columns) -> MemoryResult<MemoryVersion> {
    Ok(MemoryVersion {
        version: count_u32(row.integer("version")?),
        content: row.text("content")?,
        importance: row.real("importance")?,
        tags: row.tags("tags")?.unwrap_or_default(),
        status: MemoryStatus::parse("status", &row.text("status")?)?,
        archived_at: row.time("archived_at")?,
        reason: row.text("reason")?,
    })
}

/// A memory's embedding with what the vector index files it under.
pub fn embedding_record(row: &impl Columns) -> MemoryResult<EmbeddingRecord> {
    Ok(EmbeddingRecord {
        id: MemoryId(row.text("id")?),
        agent_id: AgentId::stored(&row.text("agent_id")?)?,
        memory_type: MemoryType::parse("type", &row.text("memory_type")?)?,
        shared: row.flag("shared")?,
        vector: row.vector("vector")?,
        occurred_at: row.time("occurred_at")?,
        text: mnemos_actors::store::keywords::keyword_text(
            row.optional_text("title")?.as_deref(),
            &row.text("content")?,
        ),
        // Read as `memory` reads it: a malformed one makes the row unreadable, which the
        // rebuild's pages skip and `/health` reports, like any other bad column.
        session_id: row
            .optional_text("session_id")?
            .as_deref()
            .map(SessionId::parse)
            .transpose()?,
    })
}

/// A `consolidation_runs` row.
pub fn run(row: &impl Columns) -> MemoryResult<ConsolidationRun> {
    Ok(ConsolidationRun {
        id: row.text("id")?,
        agent_id: row
            .optional_text("agent_id")?
            .as_deref()
            .map(AgentId::stored)
            .transpose()?,
        trigger: row.text("trigger")?,
        started_at: row.time("started_at")?,
        finished_at: row.time("finished_at")?,
        processed: count_u32(row.integer("processed")?),
        consolidated: count_u32(row.integer("consolidated")?),
        forgotten: count_u32(row.integer("forgotten")?),
        new_semantic: count_u32(row.integer("new_semantic")?),
        new_procedural: count_u32(row.integer("new_procedural")?),
        report: row.json("report")?.unwrap_or(serde_json::Value::Null),
    })
}

/// An idle session found by `sql::idle_sessions`.
pub fn idle_session(row: &impl Columns) -> MemoryResult<IdleSession> {
    Ok(IdleSession {
        agent_id: AgentId::stored(&row.text("agent_id")?)?,
        session_id: SessionId::parse(&row.text("session_id")?)?,
        first_at: row.time("first_at")?,
        last_at: row.time("last_at")?,
        last_activity: row.time("last_activity")?,
    })
}

/// The `sessions` row of `agent`'s `session`.
pub fn session_record(
    row: &impl Columns,
    agent: &AgentId,
    session: &SessionId,
) -> MemoryResult<SessionRecord> {
    Ok(SessionRecord {
        agent_id: agent.clone(),
        session_id: session.clone(),
        last_seq: count_u64(row.integer("last_seq")?),
        compacted_through: count_u64(row.integer("compacted_through")?),
        summary: row.optional_text("summary")?,
        summarized_at: row.optional_time("summarized_at")?,
        pending_tokens: count_u64(row.integer("pending_tokens")?),
        compactions: count_u32(row.integer("compactions")?),
        created_at: row.time("created_at")?,
        last_message_at: row.time("last_message_at")?,
    })
}

/// A row of [`super::sql::AGENT_SUMMARIES`].
pub fn agent_summary(row: &impl Columns) -> MemoryResult<mnemos_actors::model::AgentSummary> {
    Ok(mnemos_actors::model::AgentSummary {
        agent_id: AgentId::stored(&row.text("agent_id")?)?,
        memories: count_u64(row.integer("memories")?),
        active: count_u64(row.integer("active")?),
        last_at: row.optional_time("last_at")?,
    })
}

/// A `session_messages` row.
pub fn session_message(row: &impl Columns) -> MemoryResult<SessionMessage> {
    Ok(SessionMessage {
        seq: count_u64(row.integer("seq")?),
        role: MessageRole::parse(&row.text("role")?)?,
        content: row.text("content")?,
        tokens: count_u32(row.integer("tokens")?),
        at: row.time("at")?,
    })
}

/// An `associations` row.
pub fn association(row: &impl Columns) -> MemoryResult<Association> {
    Ok(Association {
        agent_id: AgentId::stored(&row.text("agent_id")?)?,
        from_id: MemoryId(row.text("from_id")?),
        to_id: MemoryId(row.text("to_id")?),
        relation: row.text("relation")?,
        weight: row.real("weight")?,
        created_at: row.time("created_at")?,
    })
}

/// An `outbox` row as the change a projection applies.
pub fn outbox_entry(row: &impl Columns) -> MemoryResult<OutboxEntry> {
    let entity = row.text("entity")?;
    let op = row.text("op")?;
    let agent_id = AgentId::stored(&row.text("agent_id")?)?;
    let payload = row.json("payload")?.unwrap_or(serde_json::Value::Null);
    let id = |column: &str| -> MemoryResult<MemoryId> {
        Ok(MemoryId(row.optional_text(column)?.unwrap_or_default()))
    };
    let relation =
        || -> MemoryResult<String> { Ok(row.optional_text("relation")?.unwrap_or_default()) };
    let text = |key: &str| payload[key].as_str().unwrap_or_default().to_string();
    let change = match (entity.as_str(), op.as_str()) {
        ("memory", "upsert") => ProjectedChange::UpsertMemory {
            id: id("memory_id")?,
            agent_id,
            memory_type: text("type"),
            status: text("status"),
            // PostgreSQL's trigger writes a boolean, SQLite's the column's 0 or 1.
            shared: payload["shared"]
                .as_bool()
                .unwrap_or_else(|| payload["shared"].as_i64().unwrap_or(0) != 0),
            session_id: payload["session_id"].as_str().map(String::from),
            embedding: None,
            named: None,
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
        seq: count_u64(row.integer("seq")?),
        change,
        created_at: row.time("created_at")?,
    })
}

/// A `projects` row.
pub fn project(row: &impl Columns) -> MemoryResult<Project> {
    Ok(Project {
        agent_id: AgentId::stored(&row.text("agent_id")?)?,
        project_id: ProjectId::parse(&row.text("project_id")?)?,
        name: row.text("name")?,
        isolated: row.flag("isolated")?,
        created_at: row.time("created_at")?,
        updated_at: row.time("updated_at")?,
    })
}

/// A `kv_entries` row.
pub fn kv_entry(row: &impl Columns) -> MemoryResult<KvEntry> {
    Ok(KvEntry {
        namespace: NamespaceName::stored(&row.text("namespace")?)?,
        key: row.text("key")?,
        value: row
            .json("value")?
            .map_err(|e| corrupt_json("KV value", e))?,
        tags: row.tags("tags")?.map_err(|e| corrupt_json("KV tags", e))?,
        written_by: AgentId::stored(&row.text("written_by")?)?,
        created_at: row.time("created_at")?,
        updated_at: row.time("updated_at")?,
        expires_at: row.optional_time("expires_at")?,
        last_used: count_u64(row.integer("last_used")?),
    })
}

/// A namespace's counters (`sql::NAMESPACE_STATS`).
pub fn namespace_stats(
    row: &impl Columns,
    namespace: &NamespaceName,
) -> MemoryResult<NamespaceStats> {
    Ok(NamespaceStats {
        namespace: namespace.clone(),
        entries: count_u64(row.integer("entries")?) as usize,
        max_entries: count_u64(row.integer("max_entries")?) as usize,
        hits: count_u64(row.integer("hits")?),
        misses: count_u64(row.integer("misses")?),
        evictions: count_u64(row.integer("evictions")?),
        puts: count_u64(row.integer("puts")?),
        created_at: row.time("created_at")?,
    })
}

/// Rows reads could not decode: each is skipped, logged once and kept (at most
/// [`UnreadableRows::KEPT`]) for `/health` until `mnemos doctor --repair` fixes it.
#[derive(Debug, Default)]
pub struct UnreadableRows {
    /// (table, key) → what could not be decoded.
    seen: std::sync::Mutex<std::collections::BTreeMap<(String, String), String>>,
}

impl UnreadableRows {
    /// Most rows kept for the report.
    pub const KEPT: usize = 256;

    /// A read skipped row `key` of `table` because of `error`.
    pub fn record(&self, table: &str, key: String, error: &str) {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let entry = (table.to_string(), key);
        if seen.contains_key(&entry) || seen.len() >= Self::KEPT {
            return;
        }
        tracing::warn!(table, key = %entry.1, error, "unreadable row skipped; run `mnemos doctor` to repair it");
        seen.insert(entry, error.to_string());
    }

    /// Every row recorded, in table and key order.
    pub fn list(&self) -> Vec<mnemos_actors::store::UnreadableRow> {
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|((table, id), error)| mnemos_actors::store::UnreadableRow {
                table: table.clone(),
                id: id.clone(),
                error: error.clone(),
            })
            .collect()
    }

    /// Forget what was recorded (after a repair; a row still broken is recorded again).
    pub fn clear(&self) {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

/// The key of a memory row (its id, or `?` when even that is unreadable).
pub fn memory_key(row: &impl Columns) -> String {
    row.text("id").unwrap_or_else(|_| "?".into())
}

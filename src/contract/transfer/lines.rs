//! The lines of an export file: one wire type per `kind`, and [`Line`] over them.

use super::*;

/// What an export covers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ScopeView {
    /// One agent (with its tenant), when the export is of one agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// The tenant, when the export is of one tenant or one agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
}

/// The first line of a file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HeaderLine {
    /// Always `mnemos-export`.
    pub format: String,
    /// The format's version (1).
    pub format_version: u32,
    /// The mnemos that wrote it.
    pub mnemos_version: String,
    /// The system of record it was read from (`sqlite`, `postgres`).
    pub source_backend: String,
    /// When it was written.
    pub exported_at: DateTime<Utc>,
    /// What it covers (empty: everything).
    pub scope: ScopeView,
    /// Whether memories carry their vectors.
    pub with_embeddings: bool,
    /// The embedding model of those vectors (and of the source store).
    pub embedding_model: Option<String>,
    /// Their dimension.
    pub embedding_dimension: Option<usize>,
    /// Records of each kind, counted when the export began (the trailer has the
    /// records written).
    #[schema(value_type = Object)]
    pub counts: TransferCounts,
}

/// The last line of a complete file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TrailerLine {
    /// Records of each kind the file holds.
    #[schema(value_type = Object)]
    pub counts: TransferCounts,
}

/// A past version of a memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VersionLine {
    /// Its number.
    pub version: u32,
    /// Its content.
    pub content: String,
    /// Its importance.
    pub importance: f32,
    /// Its tags.
    pub tags: Vec<String>,
    /// Its status.
    pub status: String,
    /// When it was replaced.
    pub archived_at: DateTime<Utc>,
    /// Why.
    pub reason: String,
}

/// A stored vector with the model that made it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EmbeddingLine {
    /// The model id (`builtin-hash-v1-256`, a sentence-transformers directory's name, …).
    pub model: String,
    /// The vector's length.
    pub dimension: usize,
    /// The L2-normalised vector.
    pub vector: Vec<f32>,
}

/// A memory's file of origin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SourceLine {
    /// Path relative to the project root.
    pub path: String,
    /// The file's hash when the memory was made.
    pub hash: String,
}

/// A memory in every stored field, with its versions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryLine {
    /// Its tenant.
    pub tenant: String,
    /// Its owner.
    pub agent_id: String,
    /// Its id (kept by an import).
    pub id: String,
    /// working | episodic | affective | semantic | procedural.
    #[serde(rename = "type")]
    pub memory_type: String,
    /// The text.
    pub content: String,
    /// Optional title.
    pub title: Option<String>,
    /// 0..1.
    pub importance: f32,
    /// Labels.
    pub tags: Vec<String>,
    /// Its session.
    pub session_id: Option<String>,
    /// Its project.
    pub project_id: Option<String>,
    /// When it happened.
    pub occurred_at: DateTime<Utc>,
    /// When it was stored.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
    /// Last recall.
    pub last_accessed_at: DateTime<Utc>,
    /// Recalls.
    pub access_count: u32,
    /// 0..1.
    pub consolidation_level: f32,
    /// −1..1.
    pub valence: Option<f32>,
    /// 0..1.
    pub arousal: Option<f32>,
    /// active | superseded | stale | archived.
    pub status: String,
    /// In the shared pool.
    pub shared: bool,
    /// The stored metadata (the client's object with the server's provenance and
    /// screening marks).
    #[schema(value_type = Object)]
    pub metadata: serde_json::Value,
    /// Its file of origin.
    pub source: Option<SourceLine>,
    /// Its current version number.
    pub version: u32,
    /// Its past versions, oldest first.
    pub versions: Vec<VersionLine>,
    /// Its vector (with `--with-embeddings`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedding: Option<EmbeddingLine>,
}

/// An association.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EdgeLine {
    /// Its tenant.
    pub tenant: String,
    /// Its owner.
    pub agent_id: String,
    /// Source memory.
    pub from_id: String,
    /// Target memory.
    pub to_id: String,
    /// Relation.
    pub relation: String,
    /// 0..1.
    pub weight: f32,
    /// When it was made or last strengthened.
    pub created_at: DateTime<Utc>,
}

/// A session message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageLine {
    /// Its sequence number in the session.
    pub seq: u64,
    /// user | assistant | system | tool.
    pub role: String,
    /// The text.
    pub content: String,
    /// Its token estimate.
    pub tokens: u32,
    /// When it was said.
    pub at: DateTime<Utc>,
}

/// A session's log state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionLogLine {
    /// The last sequence number handed out.
    pub last_seq: u64,
    /// Messages through this number are compacted.
    pub compacted_through: u64,
    /// The running summary.
    pub summary: Option<String>,
    /// When the summary was last made.
    pub summarized_at: Option<DateTime<Utc>>,
    /// Tokens since the last compaction.
    pub pending_tokens: u64,
    /// Compactions so far.
    pub compactions: u32,
    /// When the session began.
    pub created_at: DateTime<Utc>,
    /// Its last message.
    pub last_message_at: DateTime<Utc>,
}

/// Archival's mark on a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ArchiveLine {
    /// Activity through this instant is summarised.
    pub archived_through: DateTime<Utc>,
    /// The summary memory.
    pub summary_id: String,
}

/// A session with its messages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionLine {
    /// Its tenant.
    pub tenant: String,
    /// Its agent.
    pub agent_id: String,
    /// Its id.
    pub session_id: String,
    /// The log's state (null: no message log, only memories).
    pub log: Option<SessionLogLine>,
    /// Every message, oldest first.
    pub messages: Vec<MessageLine>,
    /// Archival's mark.
    pub archive: Option<ArchiveLine>,
}

/// A session attached to a project.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AttachedLine {
    /// The session.
    pub session_id: String,
    /// When it was attached.
    pub attached_at: DateTime<Utc>,
}

/// A project with its sessions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProjectLine {
    /// Its tenant.
    pub tenant: String,
    /// Its agent.
    pub agent_id: String,
    /// Its id.
    pub project_id: String,
    /// Its name.
    pub name: String,
    /// Whether its memories stay inside it.
    pub isolated: bool,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
    /// Its sessions.
    pub sessions: Vec<AttachedLine>,
}

/// A sleep-cycle or archival run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunLine {
    /// Its tenant.
    pub tenant: String,
    /// Its agent.
    pub agent_id: String,
    /// Its id.
    pub id: String,
    /// What started it.
    pub trigger: String,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// When it finished.
    pub finished_at: DateTime<Utc>,
    /// Candidates.
    pub processed: u32,
    /// Consolidated.
    pub consolidated: u32,
    /// Forgotten.
    pub forgotten: u32,
    /// New semantic memories.
    pub new_semantic: u32,
    /// New procedural memories.
    pub new_procedural: u32,
    /// Its report.
    #[schema(value_type = Object)]
    pub report: serde_json::Value,
}

/// A KV namespace's configuration and counters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NamespaceLine {
    /// Its tenant.
    pub tenant: String,
    /// Its name.
    pub namespace: String,
    /// The LRU bound.
    pub max_entries: u64,
    /// The last use number handed out.
    pub clock: u64,
    /// Hits.
    pub hits: u64,
    /// Misses.
    pub misses: u64,
    /// Evictions.
    pub evictions: u64,
    /// Puts.
    pub puts: u64,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
}

/// A KV entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct KvEntryLine {
    /// Its tenant.
    pub tenant: String,
    /// Its namespace.
    pub namespace: String,
    /// Its key.
    pub key: String,
    /// Its value.
    #[schema(value_type = Object)]
    pub value: serde_json::Value,
    /// Its tags.
    pub tags: Vec<String>,
    /// The agent that wrote it.
    pub written_by: String,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// Last write.
    pub updated_at: DateTime<Utc>,
    /// When it expires.
    pub expires_at: Option<DateTime<Utc>>,
    /// Its use number (LRU order).
    pub last_used: u64,
}

/// A merge of two of an agent's entities, from the entity index's history (a person's
/// merge, or an alias a memory stated), undone (split) or not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EntityMergeLine {
    /// Its tenant.
    pub tenant: String,
    /// Its agent.
    pub agent_id: String,
    /// Its id.
    pub id: String,
    /// The merged key (the alias: "mel").
    pub alias: String,
    /// The key it stands for ("melanie").
    pub name: String,
    /// `user` (a person merged) or `stated` (a memory said so).
    pub origin: String,
    /// The memory stating the alias.
    pub memory_id: Option<String>,
    /// When it was merged.
    pub created_at: DateTime<Utc>,
    /// When it was undone (split), if it was.
    pub undone_at: Option<DateTime<Utc>>,
    /// The project it applies in (a name split off for that project), if only one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_id: Option<String>,
}

/// One line of a file, by its `kind`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Line {
    /// The first line.
    Header(HeaderLine),
    /// A memory with its versions.
    Memory(Box<MemoryLine>),
    /// An association.
    Edge(EdgeLine),
    /// A session with its messages.
    Session(Box<SessionLine>),
    /// A project with its sessions.
    Project(ProjectLine),
    /// A run of the run log.
    Run(RunLine),
    /// A KV namespace.
    Namespace(NamespaceLine),
    /// A KV entry.
    KvEntry(KvEntryLine),
    /// A merge of entities.
    EntityMerge(EntityMergeLine),
    /// The last line.
    Trailer(TrailerLine),
}

impl Line {
    /// The line's `kind`.
    pub fn kind(&self) -> &'static str {
        match self {
            Line::Header(_) => "header",
            Line::Memory(_) => "memory",
            Line::Edge(_) => "edge",
            Line::Session(_) => "session",
            Line::Project(_) => "project",
            Line::Run(_) => "run",
            Line::Namespace(_) => "namespace",
            Line::KvEntry(_) => "kv_entry",
            Line::EntityMerge(_) => "entity_merge",
            Line::Trailer(_) => "trailer",
        }
    }

    /// The line as JSON text with its newline.
    pub fn to_json_line(&self) -> Vec<u8> {
        let mut bytes = serde_json::to_vec(self).unwrap_or_default();
        bytes.push(b'\n');
        bytes
    }
}

/// Count `kind` in `counts`.
pub(super) fn count_kind(counts: &mut TransferCounts, kind: &str) {
    match kind {
        "memory" => counts.memories += 1,
        "edge" => counts.edges += 1,
        "session" => counts.sessions += 1,
        "project" => counts.projects += 1,
        "run" => counts.runs += 1,
        "namespace" => counts.namespaces += 1,
        "kv_entry" => counts.kv_entries += 1,
        "entity_merge" => counts.entity_merges += 1,
        _ => {}
    }
}

//! Export and import as JSONL (`mnemos export` / `import`, `GET /v1/export`,
//! `POST /v1/import`): one JSON object per line, each with a `kind`. A file starts with
//! a `header` (format version, mnemos version, source backend, scope, counts) and ends
//! with a `trailer` repeating the counts, so a truncated file is detected. Between
//! them, per agent in id order: its `memory` lines (each with its versions and, with
//! embeddings, its vector and model), `edge`, `session` (with its messages), `project`
//! and `run` lines; then per KV namespace a `namespace` line and its `kv_entry` lines.
//! Agents, projects, sessions and namespaces are named as their tenant's clients name
//! them, beside a `tenant` field.
//!
//! Who may do what: an export of one agent needs `read` on it (a key bound to an agent
//! exports only that agent, and the KV entries it wrote); of a tenant an `admin` key of
//! that tenant (or the server's admin); of everything the operator (CLI) or the
//! server's admin. An import needs `write`, and every record must belong to an agent the
//! caller may act as, in the caller's tenant (the operator keeps each record's tenant).

use chrono::{DateTime, Utc};
use mnemos_actors::error::{ErrorCode, MemoryError, MemoryResult};
use mnemos_actors::kv::{KvEntry, NamespaceName};
use mnemos_actors::model::{
    AgentId, Association, ConsolidationRun, Memory, MemoryId, MemoryStatus, MemoryType,
    MemoryVersion, MessageRole, SessionId, SessionMessage, SessionRecord, SourceRef, TenantId,
};
use mnemos_actors::projects::{Project, ProjectId};
use mnemos_actors::transfer::{
    AgentTransfer, ArchiveMark, ImportOutcome, MemoryRecord, NamespaceTransfer, ProjectTransfer,
    SessionTransfer, TransferCounts, TransferRecord,
};
use mnemos_actors::Runtime;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::parse::{from_json_slice, from_json_value};
use crate::auth::{Caller, Scope, DEFAULT_TENANT};

/// The `format` every header names.
pub const FORMAT: &str = "mnemos-export";
/// The format version this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;
/// The media type of an export (`application/x-ndjson`).
pub const MEDIA_TYPE: &str = "application/x-ndjson";

// ---------------------------------------------------------------------------------------
// the lines
// ---------------------------------------------------------------------------------------

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
fn count_kind(counts: &mut TransferCounts, kind: &str) {
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

// ---------------------------------------------------------------------------------------
// domain → lines
// ---------------------------------------------------------------------------------------

/// An agent's (tenant, local id) as a file names them.
fn named(agent: &AgentId) -> (String, String) {
    (
        agent.tenant().unwrap_or(DEFAULT_TENANT).to_string(),
        agent.local().to_string(),
    )
}

/// A namespace's (tenant, local name) as a file names them.
fn namespace_named(name: &NamespaceName) -> (String, String) {
    (
        namespace_tenant(name).unwrap_or(DEFAULT_TENANT).to_string(),
        name.local().to_string(),
    )
}

/// The tenant a stored namespace name belongs to (None: the default tenant).
fn namespace_tenant(name: &NamespaceName) -> Option<&str> {
    name.as_str()
        .split_once(mnemos_actors::model::TENANT_SEPARATOR)
        .map(|(tenant, _)| tenant)
}

/// The lines of a memory record.
fn memory_line(record: MemoryRecord, model: Option<&(String, usize)>) -> MemoryLine {
    let m = record.memory;
    let (tenant, agent_id) = named(&m.agent_id);
    MemoryLine {
        tenant,
        agent_id,
        id: m.id.0,
        memory_type: m.memory_type.as_str().to_string(),
        content: m.content,
        title: m.title,
        importance: m.importance,
        tags: m.tags,
        session_id: m.session_id.map(|s| s.as_str().to_string()),
        project_id: m.project_id.map(|p| p.as_str().to_string()),
        occurred_at: m.occurred_at,
        created_at: m.created_at,
        updated_at: m.updated_at,
        last_accessed_at: m.last_accessed_at,
        access_count: m.access_count,
        consolidation_level: m.consolidation_level,
        valence: m.valence,
        arousal: m.arousal,
        status: m.status.as_str().to_string(),
        shared: m.shared,
        metadata: m.metadata,
        source: m.source.map(|s| SourceLine {
            path: s.path,
            hash: s.hash,
        }),
        version: m.version,
        versions: record
            .versions
            .into_iter()
            .map(|v| VersionLine {
                version: v.version,
                content: v.content,
                importance: v.importance,
                tags: v.tags,
                status: v.status.as_str().to_string(),
                archived_at: v.archived_at,
                reason: v.reason,
            })
            .collect(),
        embedding: record.embedding.map(|vector| EmbeddingLine {
            model: model.map(|m| m.0.clone()).unwrap_or_default(),
            dimension: vector.len(),
            vector,
        }),
    }
}

/// Every line of an agent's records, in file order.
fn agent_lines(transfer: AgentTransfer, model: Option<&(String, usize)>) -> Vec<Line> {
    let mut lines = Vec::new();
    for record in transfer.memories {
        lines.push(Line::Memory(Box::new(memory_line(record, model))));
    }
    for edge in transfer.edges {
        let (tenant, agent_id) = named(&edge.agent_id);
        lines.push(Line::Edge(EdgeLine {
            tenant,
            agent_id,
            from_id: edge.from_id.0,
            to_id: edge.to_id.0,
            relation: edge.relation,
            weight: edge.weight,
            created_at: edge.created_at,
        }));
    }
    for session in transfer.sessions {
        let (tenant, agent_id) = named(&session.agent_id);
        lines.push(Line::Session(Box::new(SessionLine {
            tenant,
            agent_id,
            session_id: session.session_id.as_str().to_string(),
            log: session.log.map(|log| SessionLogLine {
                last_seq: log.last_seq,
                compacted_through: log.compacted_through,
                summary: log.summary,
                summarized_at: log.summarized_at,
                pending_tokens: log.pending_tokens,
                compactions: log.compactions,
                created_at: log.created_at,
                last_message_at: log.last_message_at,
            }),
            messages: session
                .messages
                .into_iter()
                .map(|m| MessageLine {
                    seq: m.seq,
                    role: m.role.as_str().to_string(),
                    content: m.content,
                    tokens: m.tokens,
                    at: m.at,
                })
                .collect(),
            archive: session.archive.map(|a| ArchiveLine {
                archived_through: a.archived_through,
                summary_id: a.summary_id.0,
            }),
        })));
    }
    for transfer in transfer.projects {
        let p = transfer.project;
        let (tenant, agent_id) = named(&p.agent_id);
        lines.push(Line::Project(ProjectLine {
            tenant,
            agent_id,
            project_id: p.project_id.as_str().to_string(),
            name: p.name,
            isolated: p.isolated,
            created_at: p.created_at,
            updated_at: p.updated_at,
            sessions: transfer
                .sessions
                .into_iter()
                .map(|(session, at)| AttachedLine {
                    session_id: session.as_str().to_string(),
                    attached_at: at,
                })
                .collect(),
        }));
    }
    for run in transfer.runs {
        let Some(agent) = &run.agent_id else { continue };
        let (tenant, agent_id) = named(agent);
        lines.push(Line::Run(RunLine {
            tenant,
            agent_id,
            id: run.id,
            trigger: run.trigger,
            started_at: run.started_at,
            finished_at: run.finished_at,
            processed: run.processed,
            consolidated: run.consolidated,
            forgotten: run.forgotten,
            new_semantic: run.new_semantic,
            new_procedural: run.new_procedural,
            report: run.report,
        }));
    }
    lines
}

/// The agent's merge history (none when the runtime keeps no entity index).
async fn entity_merges(
    runtime: &Runtime,
    agent: &AgentId,
) -> MemoryResult<Vec<mnemos_actors::store::entities::EntityMerge>> {
    if !runtime.keeps_entities() {
        return Ok(Vec::new());
    }
    runtime.entity_merges(agent).await
}

/// A merge's line.
fn merge_line(agent: &AgentId, merge: mnemos_actors::store::entities::EntityMerge) -> Line {
    let (tenant, agent_id) = named(agent);
    Line::EntityMerge(EntityMergeLine {
        tenant,
        agent_id,
        id: merge.id,
        alias: merge.alias,
        name: merge.name,
        origin: merge.origin,
        memory_id: merge.memory_id.map(|m| m.0),
        created_at: merge.created_at,
        undone_at: merge.undone_at,
        project_id: merge.project_id,
    })
}

/// A namespace's line.
fn namespace_line(ns: NamespaceTransfer) -> Line {
    let (tenant, namespace) = namespace_named(&ns.name);
    Line::Namespace(NamespaceLine {
        tenant,
        namespace,
        max_entries: ns.max_entries,
        clock: ns.clock,
        hits: ns.hits,
        misses: ns.misses,
        evictions: ns.evictions,
        puts: ns.puts,
        created_at: ns.created_at,
        updated_at: ns.updated_at,
    })
}

/// An entry's line.
fn entry_line(entry: KvEntry) -> Line {
    let (tenant, namespace) = namespace_named(&entry.namespace);
    Line::KvEntry(KvEntryLine {
        tenant,
        namespace,
        key: entry.key,
        value: entry.value,
        tags: entry.tags,
        written_by: entry.written_by.local().to_string(),
        created_at: entry.created_at,
        updated_at: entry.updated_at,
        expires_at: entry.expires_at,
        last_used: entry.last_used,
    })
}

// ---------------------------------------------------------------------------------------
// export
// ---------------------------------------------------------------------------------------

/// `GET /v1/export`'s query.
#[derive(Debug, Clone, Default, Deserialize, IntoParams, ToSchema)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ExportParams {
    /// One agent (a key bound to an agent supplies it).
    pub agent_id: Option<String>,
    /// Every agent and KV namespace of a tenant (an admin key of that tenant, or the
    /// server's admin); with `agent_id`, the tenant of that agent.
    pub tenant: Option<String>,
    /// Include each memory's stored vector and the model that made it.
    pub with_embeddings: Option<bool>,
}

/// What an export covers, after the caller's rights were checked.
#[derive(Debug, Clone, PartialEq)]
pub enum ExportScope {
    /// One agent, and the KV entries it wrote.
    Agent(AgentId),
    /// Every agent and namespace of a tenant (None: the default tenant).
    Tenant(Option<TenantId>),
    /// Every tenant.
    Everything,
}

/// Whether the caller is the server's admin: the operator, or an admin key of the
/// default tenant bound to no agent.
fn server_admin(caller: &Caller) -> bool {
    caller.tenant.is_none() && caller.agent.is_none() && caller.scopes.contains(&Scope::Admin)
}

/// `caller` acting in `tenant` when it names one: only the server's admin, or a
/// caller of that tenant already, may.
fn in_tenant(caller: &Caller, tenant: Option<&str>) -> MemoryResult<Caller> {
    let Some(raw) = tenant else {
        return Ok(caller.clone());
    };
    let tenant = TenantId::parse(raw)?;
    let wanted = Caller::tenant_of(&tenant);
    if wanted == caller.tenant {
        return Ok(caller.clone());
    }
    if !server_admin(caller) {
        return Err(MemoryError {
            field: Some("tenant".into()),
            ..crate::auth::denied(format!(
                "this key acts in tenant {}; it cannot reach tenant {tenant}",
                caller
                    .tenant
                    .as_ref()
                    .map_or(DEFAULT_TENANT, |t| t.as_str())
            ))
        });
    }
    let mut moved = caller.clone();
    moved.tenant = wanted;
    Ok(moved)
}

/// Decide what an export covers: `agent` (or the key's agent), else `tenant`, else
/// everything when `everything` (the CLI with neither flag); refused when the caller
/// may not read it.
pub fn export_scope(
    caller: &Caller,
    agent: Option<&str>,
    tenant: Option<&str>,
    everything: bool,
) -> MemoryResult<ExportScope> {
    if agent.is_some() || (caller.agent.is_some() && tenant.is_none()) {
        caller.require(Scope::Read)?;
        let caller = in_tenant(caller, tenant)?;
        return Ok(ExportScope::Agent(caller.agent("agent_id", agent)?));
    }
    if let Some(raw) = tenant {
        caller.require(Scope::Admin)?;
        if let Some(own) = &caller.agent {
            return Err(crate::auth::denied(format!(
                "this key acts as agent {own} only; it exports that agent, not a tenant"
            )));
        }
        let caller = in_tenant(caller, Some(raw))?;
        return Ok(ExportScope::Tenant(caller.tenant));
    }
    if everything {
        caller.require(Scope::Admin)?;
        if !server_admin(caller) {
            return Err(crate::auth::denied(
                "only the server's admin exports every tenant; name --tenant or --agent",
            ));
        }
        return Ok(ExportScope::Everything);
    }
    Err(MemoryError::invalid(
        "agent_id",
        "name what to export: agent_id (one agent) or tenant (an admin key: every agent of the tenant)",
    ))
}

/// An export ready to be written: its header and what it reads.
pub struct ExportPlan {
    /// The first line.
    pub header: HeaderLine,
    /// The agents whose records it holds, in id order.
    agents: Vec<AgentId>,
    /// The KV namespaces and their entries it holds, in name order.
    namespaces: Vec<(NamespaceTransfer, Vec<KvEntry>)>,
    /// The embedding model, when vectors are exported.
    model: Option<(String, usize)>,
}

impl ExportPlan {
    /// How many records the header announced.
    pub fn expected(&self) -> u64 {
        self.header.counts.total()
    }
}

/// Plan an export of `scope`: who it covers and how many records of each kind.
pub async fn plan_export(
    runtime: &Runtime,
    scope: &ExportScope,
    with_embeddings: bool,
    backend: &str,
) -> MemoryResult<ExportPlan> {
    let tenant_of = |agent: &AgentId| agent.tenant().map(str::to_string);
    let (agents, kv_tenant, kv_writer): (Vec<AgentId>, Option<Option<String>>, Option<&AgentId>) =
        match scope {
            ExportScope::Agent(agent) => (vec![agent.clone()], Some(tenant_of(agent)), Some(agent)),
            ExportScope::Tenant(tenant) => {
                let wanted = tenant.as_ref().map(|t| t.as_str().to_string());
                let agents = runtime
                    .transfer_agents()
                    .await?
                    .into_iter()
                    .filter(|a| tenant_of(a) == wanted)
                    .collect();
                (agents, Some(wanted), None)
            }
            ExportScope::Everything => (runtime.transfer_agents().await?, None, None),
        };
    let mut counts = TransferCounts::default();
    for agent in &agents {
        counts.add(&runtime.transfer_counts(agent).await?);
        counts.entity_merges += entity_merges(runtime, agent).await?.len() as u64;
    }
    let mut namespaces = Vec::new();
    for ns in runtime.export_namespaces().await? {
        if let Some(tenant) = &kv_tenant {
            if namespace_tenant(&ns.name).map(str::to_string) != *tenant {
                continue;
            }
        }
        let entries = runtime.export_kv_entries(&ns.name, kv_writer).await?;
        if kv_writer.is_some() && entries.is_empty() {
            continue;
        }
        counts.namespaces += 1;
        counts.kv_entries += entries.len() as u64;
        namespaces.push((ns, entries));
    }
    let model = runtime.embedding_model().await;
    let scope_view = match scope {
        ExportScope::Agent(agent) => {
            let (tenant, agent_id) = named(agent);
            ScopeView {
                agent_id: Some(agent_id),
                tenant: Some(tenant),
            }
        }
        ExportScope::Tenant(tenant) => ScopeView {
            agent_id: None,
            tenant: Some(
                tenant
                    .as_ref()
                    .map_or(DEFAULT_TENANT, |t| t.as_str())
                    .to_string(),
            ),
        },
        ExportScope::Everything => ScopeView::default(),
    };
    Ok(ExportPlan {
        header: HeaderLine {
            format: FORMAT.into(),
            format_version: FORMAT_VERSION,
            mnemos_version: env!("CARGO_PKG_VERSION").into(),
            source_backend: backend.to_string(),
            exported_at: runtime.now(),
            scope: scope_view,
            with_embeddings,
            embedding_model: model.as_ref().map(|m| m.0.clone()),
            embedding_dimension: model.as_ref().map(|m| m.1),
            counts,
        },
        agents,
        namespaces,
        model: with_embeddings.then_some(model).flatten(),
    })
}

/// Write a planned export to `sink`, line by line (each with its newline): the header,
/// every agent's records, the namespaces, the trailer. Answers the records written. A
/// failure stops the export before the trailer, so the file reads as truncated.
pub async fn write_export(
    runtime: &Runtime,
    plan: ExportPlan,
    sink: tokio::sync::mpsc::Sender<Vec<u8>>,
) -> MemoryResult<TransferCounts> {
    let closed = || MemoryError::unavailable("the export's reader went away");
    let mut written = TransferCounts::default();
    sink.send(Line::Header(plan.header.clone()).to_json_line())
        .await
        .map_err(|_| closed())?;
    let with_embeddings = plan.model.is_some() || plan.header.with_embeddings;
    for agent in &plan.agents {
        let transfer = runtime.export_agent(agent, with_embeddings).await?;
        // Merges first: an import commits them no later than the memories stating
        // them, so the target's index never records a stated alias a second time.
        let merges = entity_merges(runtime, agent).await?;
        let lines = merges
            .into_iter()
            .map(|merge| merge_line(agent, merge))
            .chain(agent_lines(transfer, plan.model.as_ref()));
        for line in lines {
            count_kind(&mut written, line.kind());
            sink.send(line.to_json_line()).await.map_err(|_| closed())?;
        }
    }
    for (ns, entries) in plan.namespaces {
        written.namespaces += 1;
        sink.send(namespace_line(ns).to_json_line())
            .await
            .map_err(|_| closed())?;
        for entry in entries {
            written.kv_entries += 1;
            sink.send(entry_line(entry).to_json_line())
                .await
                .map_err(|_| closed())?;
        }
    }
    sink.send(Line::Trailer(TrailerLine { counts: written }).to_json_line())
        .await
        .map_err(|_| closed())?;
    Ok(written)
}

// ---------------------------------------------------------------------------------------
// import
// ---------------------------------------------------------------------------------------

/// `POST /v1/import`'s query.
#[derive(Debug, Clone, Default, Deserialize, IntoParams, ToSchema)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ImportParams {
    /// Skip invalid lines (and report them) instead of refusing the whole import.
    pub skip_invalid: Option<bool>,
    /// Check every line and report what would be written, writing nothing.
    pub dry_run: Option<bool>,
}

/// A line an import refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct InvalidLine {
    /// Its line number (1 is the header).
    pub line: usize,
    /// Its kind, when it could be read.
    pub kind: Option<String>,
    /// The error code (`invalid_argument`, `permission_denied`, `conflict`).
    pub code: String,
    /// The field at fault.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

/// What an import did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ImportReport {
    /// The header's source backend.
    pub source_backend: String,
    /// The header's mnemos version.
    pub source_version: String,
    /// Records the file holds, by kind.
    #[schema(value_type = Object)]
    pub read: TransferCounts,
    /// Records written.
    #[schema(value_type = Object)]
    pub written: TransferCounts,
    /// Records already stored, left as they were.
    #[schema(value_type = Object)]
    pub unchanged: TransferCounts,
    /// Associations whose memories, and KV entries whose namespace, are not stored.
    #[schema(value_type = Object)]
    pub orphaned: TransferCounts,
    /// Memories whose vector came from the file.
    pub embeddings_reused: u64,
    /// Memories embedded again (no vector in the file, or one of another model).
    pub re_embedded: u64,
    /// Lines refused (with `skip_invalid`; otherwise the import is refused whole).
    pub skipped: Vec<InvalidLine>,
    /// True when nothing was written because `dry_run` asked only for the checks.
    pub dry_run: bool,
}

/// A line as the import reads it: its number and record (None for the header and trailer).
struct ReadLine {
    /// 1-based line number.
    number: usize,
    /// Its kind.
    kind: &'static str,
    /// The record to import.
    record: TransferRecord,
}

/// An invalid line from an error.
fn invalid(number: usize, kind: Option<&str>, error: MemoryError) -> InvalidLine {
    InvalidLine {
        line: number,
        kind: kind.map(str::to_string),
        code: error.code.as_str().to_string(),
        field: error.field,
        message: error.message,
    }
}

/// Parse a field with `parse`, naming `field` on failure.
fn field<T>(field: &str, parsed: MemoryResult<T>) -> MemoryResult<T> {
    parsed.map_err(|mut e| {
        e.field = Some(field.to_string());
        e
    })
}

/// The agent a record names, as the caller may act as it: in the caller's tenant
/// (the operator keeps the record's tenant), and one the caller's key may act as.
fn record_agent(caller: &Caller, tenant: &str, agent: &str) -> MemoryResult<AgentId> {
    let caller = in_tenant(caller, Some(tenant))?;
    caller.agent("agent_id", Some(agent))
}

/// A namespace a record names, in the caller's tenant.
fn record_namespace(caller: &Caller, tenant: &str, name: &str) -> MemoryResult<NamespaceName> {
    let caller = in_tenant(caller, Some(tenant))?;
    let local = field("namespace", NamespaceName::parse(name))?;
    Ok(caller.namespace(&local))
}

/// A memory id as a file names it: 1–128 characters, no control character.
fn memory_id(name: &str, raw: &str) -> MemoryResult<MemoryId> {
    if raw.is_empty() || raw.len() > 128 || raw.chars().any(char::is_control) {
        return Err(MemoryError::invalid(
            name,
            format!("{name} must be 1 to 128 characters without control characters"),
        ));
    }
    Ok(MemoryId(raw.to_string()))
}

/// A memory line as a record, checked against the caller's rights; `model` is the
/// configured embedder's (id, dimension): a vector of another model is dropped (the
/// import embeds the memory again).
fn memory_record(
    caller: &Caller,
    line: MemoryLine,
    model: Option<&(String, usize)>,
) -> MemoryResult<MemoryRecord> {
    let agent = record_agent(caller, &line.tenant, &line.agent_id)?;
    let status = |name: &str, raw: &str| MemoryStatus::parse(name, raw);
    let versions = line
        .versions
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            Ok(MemoryVersion {
                version: v.version,
                content: v.content,
                importance: v.importance,
                tags: v.tags,
                status: status(&format!("versions[{i}].status"), &v.status)?,
                archived_at: v.archived_at,
                reason: v.reason,
            })
        })
        .collect::<MemoryResult<Vec<_>>>()?;
    let embedding = match (line.embedding, model) {
        (Some(e), Some((id, dimension))) if e.model == *id && e.vector.len() == *dimension => {
            if e.dimension != e.vector.len() {
                return Err(MemoryError::invalid(
                    "embedding.dimension",
                    format!(
                        "embedding.dimension is {} but the vector has {} numbers",
                        e.dimension,
                        e.vector.len()
                    ),
                ));
            }
            Some(e.vector)
        }
        _ => None,
    };
    let memory = Memory {
        id: memory_id("id", &line.id)?,
        agent_id: agent,
        memory_type: MemoryType::parse("type", &line.memory_type)?,
        content: line.content,
        title: line.title,
        importance: line.importance,
        tags: line.tags,
        session_id: line
            .session_id
            .as_deref()
            .map(|s| field("session_id", SessionId::parse(s)))
            .transpose()?,
        project_id: line
            .project_id
            .as_deref()
            .map(|p| field("project_id", ProjectId::parse(p)))
            .transpose()?,
        occurred_at: line.occurred_at,
        created_at: line.created_at,
        updated_at: line.updated_at,
        last_accessed_at: line.last_accessed_at,
        access_count: line.access_count,
        consolidation_level: line.consolidation_level,
        valence: line.valence,
        arousal: line.arousal,
        status: status("status", &line.status)?,
        shared: line.shared,
        metadata: line.metadata,
        source: line.source.map(|s| SourceRef {
            path: s.path,
            hash: s.hash,
        }),
        version: line.version,
    };
    Ok(MemoryRecord {
        memory,
        versions,
        embedding,
    })
}

/// One parsed line as a record the caller may import.
fn line_record(
    caller: &Caller,
    line: Line,
    model: Option<&(String, usize)>,
) -> MemoryResult<Option<TransferRecord>> {
    Ok(Some(match line {
        Line::Header(_) | Line::Trailer(_) => return Ok(None),
        Line::Memory(m) => TransferRecord::Memory(Box::new(memory_record(caller, *m, model)?)),
        Line::Edge(e) => TransferRecord::Edge(Association {
            agent_id: record_agent(caller, &e.tenant, &e.agent_id)?,
            from_id: memory_id("from_id", &e.from_id)?,
            to_id: memory_id("to_id", &e.to_id)?,
            relation: e.relation,
            weight: e.weight,
            created_at: e.created_at,
        }),
        Line::Session(s) => {
            let agent = record_agent(caller, &s.tenant, &s.agent_id)?;
            let session = field("session_id", SessionId::parse(&s.session_id))?;
            let messages = s
                .messages
                .into_iter()
                .enumerate()
                .map(|(i, m)| {
                    Ok(SessionMessage {
                        seq: m.seq,
                        role: field(&format!("messages[{i}].role"), MessageRole::parse(&m.role))?,
                        content: m.content,
                        tokens: m.tokens,
                        at: m.at,
                    })
                })
                .collect::<MemoryResult<Vec<_>>>()?;
            TransferRecord::Session(Box::new(SessionTransfer {
                log: s.log.map(|log| SessionRecord {
                    agent_id: agent.clone(),
                    session_id: session.clone(),
                    last_seq: log.last_seq,
                    compacted_through: log.compacted_through,
                    summary: log.summary,
                    summarized_at: log.summarized_at,
                    pending_tokens: log.pending_tokens,
                    compactions: log.compactions,
                    created_at: log.created_at,
                    last_message_at: log.last_message_at,
                }),
                archive: s
                    .archive
                    .map(|a| {
                        Ok::<_, MemoryError>(ArchiveMark {
                            archived_through: a.archived_through,
                            summary_id: memory_id("archive.summary_id", &a.summary_id)?,
                        })
                    })
                    .transpose()?,
                agent_id: agent,
                session_id: session,
                messages,
            }))
        }
        Line::Project(p) => {
            let agent = record_agent(caller, &p.tenant, &p.agent_id)?;
            let sessions = p
                .sessions
                .into_iter()
                .enumerate()
                .map(|(i, a)| {
                    Ok((
                        field(
                            &format!("sessions[{i}].session_id"),
                            SessionId::parse(&a.session_id),
                        )?,
                        a.attached_at,
                    ))
                })
                .collect::<MemoryResult<Vec<_>>>()?;
            TransferRecord::Project(ProjectTransfer {
                project: Project {
                    agent_id: agent,
                    project_id: field("project_id", ProjectId::parse(&p.project_id))?,
                    name: p.name,
                    isolated: p.isolated,
                    created_at: p.created_at,
                    updated_at: p.updated_at,
                },
                sessions,
            })
        }
        Line::EntityMerge(m) => {
            TransferRecord::EntityMerge(mnemos_actors::transfer::EntityMergeTransfer {
                agent_id: record_agent(caller, &m.tenant, &m.agent_id)?,
                merge: mnemos_actors::store::entities::EntityMerge {
                    id: m.id,
                    alias: mnemos_actors::policy::entities::entity_key(&m.alias),
                    name: mnemos_actors::policy::entities::entity_key(&m.name),
                    origin: m.origin,
                    memory_id: m
                        .memory_id
                        .map(|id| memory_id("memory_id", &id))
                        .transpose()?,
                    created_at: m.created_at,
                    undone_at: m.undone_at,
                    project_id: m
                        .project_id
                        .map(|p| {
                            mnemos_actors::projects::ProjectId::parse_field("project_id", &p)
                                .map(|p| p.as_str().to_string())
                        })
                        .transpose()?,
                },
            })
        }
        Line::Run(r) => TransferRecord::Run(ConsolidationRun {
            agent_id: Some(record_agent(caller, &r.tenant, &r.agent_id)?),
            id: memory_id("id", &r.id)?.0,
            trigger: r.trigger,
            started_at: r.started_at,
            finished_at: r.finished_at,
            processed: r.processed,
            consolidated: r.consolidated,
            forgotten: r.forgotten,
            new_semantic: r.new_semantic,
            new_procedural: r.new_procedural,
            report: r.report,
        }),
        Line::Namespace(n) => TransferRecord::Namespace(NamespaceTransfer {
            name: record_namespace(caller, &n.tenant, &n.namespace)?,
            max_entries: n.max_entries,
            clock: n.clock,
            hits: n.hits,
            misses: n.misses,
            evictions: n.evictions,
            puts: n.puts,
            created_at: n.created_at,
            updated_at: n.updated_at,
        }),
        Line::KvEntry(e) => {
            if e.key.is_empty() {
                return Err(MemoryError::invalid("key", "key must not be empty"));
            }
            TransferRecord::KvEntry(KvEntry {
                namespace: record_namespace(caller, &e.tenant, &e.namespace)?,
                key: e.key,
                value: e.value,
                tags: e.tags,
                written_by: field("written_by", record_agent(caller, &e.tenant, &e.written_by))?,
                created_at: e.created_at,
                updated_at: e.updated_at,
                expires_at: e.expires_at,
                last_used: e.last_used,
            })
        }
    }))
}

/// Parse one line's JSON: the `kind` first, then the fields of that kind (each failure
/// naming its field).
fn parse_line(text: &str) -> (Option<String>, MemoryResult<Line>) {
    let value: serde_json::Value = match from_json_slice(text.as_bytes()) {
        Ok(value) => value,
        Err(_) => {
            let message = serde_json::from_str::<serde_json::Value>(text)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            return (
                None,
                Err(MemoryError::invalid(
                    "line",
                    format!("not a JSON object: {message}"),
                )),
            );
        }
    };
    let kind = value
        .get("kind")
        .and_then(|k| k.as_str())
        .map(str::to_string);
    let Some(kind_name) = kind.clone() else {
        return (
            None,
            Err(MemoryError::invalid(
                "kind",
                "every line needs a \"kind\": header, memory, edge, session, project, run, namespace, kv_entry, entity_merge or trailer",
            )),
        );
    };
    let mut fields = value;
    if let Some(map) = fields.as_object_mut() {
        map.remove("kind");
    }
    let parsed = match kind_name.as_str() {
        "header" => from_json_value(fields).map(Line::Header),
        "memory" => from_json_value(fields).map(|m| Line::Memory(Box::new(m))),
        "edge" => from_json_value(fields).map(Line::Edge),
        "session" => from_json_value(fields).map(|s| Line::Session(Box::new(s))),
        "project" => from_json_value(fields).map(Line::Project),
        "run" => from_json_value(fields).map(Line::Run),
        "namespace" => from_json_value(fields).map(Line::Namespace),
        "kv_entry" => from_json_value(fields).map(Line::KvEntry),
        "entity_merge" => from_json_value(fields).map(Line::EntityMerge),
        "trailer" => from_json_value(fields).map(Line::Trailer),
        other => Err(MemoryError::invalid(
            "kind",
            format!("unknown kind {other:?}: header, memory, edge, session, project, run, namespace, kv_entry, entity_merge or trailer"),
        )),
    };
    (kind, parsed)
}

/// The import's refusal: the invalid lines, the first ten quoted.
fn refusal(problems: &[InvalidLine]) -> MemoryError {
    let first = &problems[0];
    let listed: Vec<String> = problems
        .iter()
        .take(10)
        .map(|p| {
            format!(
                "line {}{}{}: {}",
                p.line,
                p.kind
                    .as_deref()
                    .map(|k| format!(" ({k})"))
                    .unwrap_or_default(),
                p.field
                    .as_deref()
                    .map(|f| format!(" field {f}"))
                    .unwrap_or_default(),
                p.message
            )
        })
        .collect();
    let more = problems.len().saturating_sub(10);
    let code = problems
        .iter()
        .map(|p| p.code.as_str())
        .find(|c| *c != "invalid_argument")
        .and_then(error_code)
        .unwrap_or(ErrorCode::InvalidArgument);
    MemoryError {
        field: first.field.clone().or_else(|| Some("line".into())),
        ..MemoryError::new(
            code,
            format!(
                "nothing was imported: {} invalid line(s): {}{}; fix them, or import with skip_invalid to skip and report them",
                problems.len(),
                listed.join("; "),
                if more > 0 {
                    format!("; and {more} more")
                } else {
                    String::new()
                }
            ),
        )
    }
}

/// The error code named `name`.
fn error_code(name: &str) -> Option<ErrorCode> {
    [
        ErrorCode::PermissionDenied,
        ErrorCode::Conflict,
        ErrorCode::InvalidArgument,
    ]
    .into_iter()
    .find(|c| c.as_str() == name)
}

/// Parse a whole file: the header, every record line, the trailer (checked against the
/// lines read). Answers the header, the records, and the invalid lines.
fn read_file(
    caller: &Caller,
    text: &str,
    model: Option<&(String, usize)>,
) -> MemoryResult<(HeaderLine, Vec<ReadLine>, Vec<InvalidLine>, TransferCounts)> {
    let mut header: Option<HeaderLine> = None;
    let mut trailer: Option<(usize, TrailerLine)> = None;
    let mut records = Vec::new();
    let mut problems = Vec::new();
    let mut read = TransferCounts::default();
    for (index, raw) in text.split('\n').enumerate() {
        let number = index + 1;
        let raw = raw.trim_end_matches('\r');
        if raw.trim().is_empty() {
            continue;
        }
        if let Some((at, _)) = &trailer {
            return Err(MemoryError::invalid(
                "trailer",
                format!("line {number}: the trailer (line {at}) must be the last line"),
            ));
        }
        let (kind, parsed) = parse_line(raw);
        if let Some(kind) = &kind {
            count_kind(&mut read, kind);
        }
        let line = match parsed {
            Ok(line) => line,
            Err(error) if header.is_none() => {
                return Err(MemoryError {
                    field: error.field.clone(),
                    ..MemoryError::invalid(
                        "header",
                        format!("line 1 must be the export's header: {}", error.message),
                    )
                });
            }
            Err(error) => {
                problems.push(invalid(number, kind.as_deref(), error));
                continue;
            }
        };
        match line {
            Line::Header(h) => {
                if header.is_some() {
                    problems.push(invalid(
                        number,
                        Some("header"),
                        MemoryError::invalid("kind", "a file has one header, on its first line"),
                    ));
                    continue;
                }
                if h.format != FORMAT || h.format_version != FORMAT_VERSION {
                    return Err(MemoryError::invalid(
                        "format_version",
                        format!(
                            "line {number}: this mnemos reads {FORMAT} version {FORMAT_VERSION}, not {} version {}",
                            h.format, h.format_version
                        ),
                    ));
                }
                header = Some(h);
            }
            Line::Trailer(t) => trailer = Some((number, t)),
            line if header.is_none() => {
                return Err(MemoryError::invalid(
                    "header",
                    format!(
                        "line {number} ({}) comes before the header: a file starts with its header line",
                        line.kind()
                    ),
                ));
            }
            line => {
                let kind = line.kind();
                match line_record(caller, line, model) {
                    Ok(Some(record)) => records.push(ReadLine {
                        number,
                        kind,
                        record,
                    }),
                    Ok(None) => {}
                    Err(error) => problems.push(invalid(number, Some(kind), error)),
                }
            }
        }
    }
    let Some(header) = header else {
        return Err(MemoryError::invalid(
            "header",
            "the file is empty: an export starts with its header line",
        ));
    };
    let Some((_, trailer)) = trailer else {
        return Err(MemoryError::invalid(
            "trailer",
            format!(
                "the file ends without its trailer line after {} record(s): it is truncated; export it again",
                read.total()
            ),
        ));
    };
    if trailer.counts != read {
        return Err(MemoryError::invalid(
            "trailer",
            format!(
                "the trailer counts {:?} but the file holds {:?}: lines are missing or added",
                trailer.counts, read
            ),
        ));
    }
    Ok((header, records, problems, read))
}

/// Import a JSONL file (its whole text): every line is checked first; an invalid line
/// refuses the whole import unless `skip_invalid`, which skips and reports it. Records
/// keep their ids; those already stored are left as they are, so a second import of
/// the same file changes nothing. `progress` is told how many records were written.
pub async fn import(
    runtime: &Runtime,
    caller: &Caller,
    text: &str,
    params: &ImportParams,
    progress: &(dyn Fn(u64, u64) + Send + Sync),
) -> MemoryResult<ImportReport> {
    caller.require(Scope::Write)?;
    let model = runtime.embedding_model().await;
    let (header, lines, mut problems, read) = read_file(caller, text, model.as_ref())?;
    let mut records: Vec<TransferRecord> = Vec::with_capacity(lines.len());
    let mut numbers: Vec<(usize, &'static str)> = Vec::with_capacity(lines.len());
    for line in lines {
        numbers.push((line.number, line.kind));
        records.push(line.record);
    }
    for (index, error) in runtime.check_import(&mut records).await? {
        let (number, kind) = numbers[index];
        problems.push(invalid(number, Some(kind), error));
    }
    problems.sort_by_key(|p| p.line);
    let skip_invalid = params.skip_invalid.unwrap_or(false);
    if !problems.is_empty() && !skip_invalid {
        return Err(refusal(&problems));
    }
    let refused: std::collections::HashSet<usize> = problems.iter().map(|p| p.line).collect();
    let kept: Vec<(&'static str, TransferRecord)> = numbers
        .iter()
        .zip(records)
        .filter(|((number, _), _)| !refused.contains(number))
        .map(|((_, kind), record)| (*kind, record))
        .collect();
    let memories = kept
        .iter()
        .filter(|(_, r)| matches!(r, TransferRecord::Memory(_)))
        .count();
    if caller.key_id.is_some() && !caller.scopes.contains(&Scope::Admin) {
        caller.spend_writes(memories.saturating_sub(1))?;
    }
    let mut report = ImportReport {
        source_backend: header.source_backend,
        source_version: header.mnemos_version,
        read,
        skipped: problems,
        dry_run: params.dry_run.unwrap_or(false),
        ..ImportReport::default()
    };
    if report.dry_run {
        return Ok(report);
    }
    let total = kept.len() as u64;
    let mut done = 0u64;
    progress(0, total);
    let mut batch: Vec<TransferRecord> = Vec::new();
    let mut kinds: Vec<&'static str> = Vec::new();
    let mut rest = kept.into_iter().peekable();
    while rest.peek().is_some() {
        batch.clear();
        kinds.clear();
        for (kind, record) in rest.by_ref().take(mnemos_actors::runtime::IMPORT_BATCH) {
            kinds.push(kind);
            batch.push(record);
        }
        // For each memory: whether the file brought its vector.
        let vectors: Vec<Option<bool>> = batch
            .iter()
            .map(|r| match r {
                TransferRecord::Memory(m) => Some(m.embedding.is_some()),
                _ => None,
            })
            .collect();
        let outcomes = runtime.import(std::mem::take(&mut batch)).await?;
        for (vector, outcome) in vectors.iter().zip(&outcomes) {
            match (vector, outcome) {
                (Some(true), ImportOutcome::Written) => report.embeddings_reused += 1,
                (Some(false), ImportOutcome::Written) => report.re_embedded += 1,
                _ => {}
            }
        }
        for (kind, outcome) in kinds.iter().zip(&outcomes) {
            let counts = match outcome {
                ImportOutcome::Written => &mut report.written,
                ImportOutcome::Unchanged => &mut report.unchanged,
                ImportOutcome::Orphaned => &mut report.orphaned,
            };
            count_kind(counts, kind);
        }
        done += outcomes.len() as u64;
        progress(done, total);
    }
    Ok(report)
}

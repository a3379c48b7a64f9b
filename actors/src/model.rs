//! The domain model: memories, their types and lifecycle, versions, associations,
//! and the validated identifiers every request carries.

use chrono::{DateTime, Datelike, Utc};
use serde::{Deserialize, Serialize};
use std::fmt;

use crate::error::{MemoryError, MemoryResult};

/// Opaque memory identifier (a UUIDv7 string, so ids sort by creation time).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct MemoryId(pub String);

impl MemoryId {
    /// A fresh, time-ordered id.
    pub fn generate() -> Self {
        Self(uuid::Uuid::now_v7().to_string())
    }
    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for MemoryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Validated agent identifier: 1–128 characters of `[A-Za-z0-9_.:-]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AgentId(String);

impl AgentId {
    /// Validate and wrap an agent id as a client names it; the error names the
    /// `agent_id` field. A client's id never holds [`TENANT_SEPARATOR`].
    pub fn parse(raw: &str) -> MemoryResult<Self> {
        validate_identifier("agent_id", raw)?;
        Ok(Self(raw.to_string()))
    }
    /// The agent `local` of `tenant` as the runtime and the stores know it:
    /// `tenant/local`, or `local` itself in the default tenant (None).
    pub fn qualified(tenant: Option<&TenantId>, local: &AgentId) -> Self {
        match tenant {
            Some(tenant) => Self(format!("{tenant}{TENANT_SEPARATOR}{}", local.0)),
            None => local.clone(),
        }
    }
    /// An agent id as stored: `local` or `tenant/local`, each part validated.
    pub fn stored(raw: &str) -> MemoryResult<Self> {
        match raw.split_once(TENANT_SEPARATOR) {
            Some((tenant, local)) => {
                validate_identifier("tenant", tenant)?;
                validate_identifier("agent_id", local)?;
            }
            None => validate_identifier("agent_id", raw)?,
        }
        Ok(Self(raw.to_string()))
    }
    /// The tenant the agent belongs to (None: the default tenant).
    pub fn tenant(&self) -> Option<&str> {
        self.0
            .split_once(TENANT_SEPARATOR)
            .map(|(tenant, _)| tenant)
    }
    /// The agent's id within its tenant, as its clients name it.
    pub fn local(&self) -> &str {
        self.0
            .split_once(TENANT_SEPARATOR)
            .map_or(self.0.as_str(), |(_, local)| local)
    }
    /// True when both agents belong to one tenant (the shared pool is per tenant).
    pub fn same_tenant(&self, other: &AgentId) -> bool {
        self.tenant() == other.tenant()
    }
    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Separates a tenant from an agent in the runtime's agent ids (`acme/alice`). It is
/// not in the alphabet of the ids clients send, so no client can name another
/// tenant's agent, and the default tenant's ids are the ids clients send.
pub const TENANT_SEPARATOR: char = '/';

/// The key of a memory's metadata that says where it came from: which key, which
/// surface (rest, mcp, proxy, cli, session, sleep_cycle, archival), which session or
/// task, which request. The contract layer writes it (a client's own value under it is
/// replaced); the sleep cycle writes its own.
pub const PROVENANCE_KEY: &str = "mnemos_provenance";

/// Validated tenant identifier (same alphabet as agent ids): a partition of agents,
/// projects, the shared pool, KV namespaces and sessions.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TenantId(String);

impl TenantId {
    /// Validate and wrap a tenant id; the error names the `tenant` field.
    pub fn parse(raw: &str) -> MemoryResult<Self> {
        validate_identifier("tenant", raw)?;
        Ok(Self(raw.to_string()))
    }
    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TenantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for AgentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Validated session identifier (same alphabet as agent ids).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SessionId(String);

impl SessionId {
    /// Validate and wrap a session id; the error names the `session_id` field.
    pub fn parse(raw: &str) -> MemoryResult<Self> {
        validate_identifier("session_id", raw)?;
        Ok(Self(raw.to_string()))
    }
    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Who wrote a session message (the roles of OpenAI-style chat messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MessageRole {
    /// Instructions to the model (and compaction summaries).
    System,
    /// The human or calling program.
    User,
    /// The model.
    Assistant,
    /// A tool's answer.
    Tool,
}

impl MessageRole {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::System => "system",
            Self::User => "user",
            Self::Assistant => "assistant",
            Self::Tool => "tool",
        }
    }
    /// Parse a wire name; the error names the `role` field and the accepted values.
    pub fn parse(raw: &str) -> MemoryResult<Self> {
        match raw {
            "system" => Ok(Self::System),
            "user" => Ok(Self::User),
            "assistant" => Ok(Self::Assistant),
            "tool" => Ok(Self::Tool),
            other => Err(MemoryError::invalid(
                "role",
                format!("role must be one of system, user, assistant, tool (got {other:?})"),
            )),
        }
    }
}

/// One message of a session's conversation log (durable in the system of record).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionMessage {
    /// Position in the session, from 1, gap-free: the order messages were acknowledged in.
    pub seq: u64,
    /// Who wrote it.
    pub role: MessageRole,
    /// Its text.
    pub content: String,
    /// Estimated tokens ([`crate::text::estimate_tokens`] plus the chat template's per-message overhead).
    pub tokens: u32,
    /// When it was said.
    pub at: DateTime<Utc>,
}

/// A session's durable state: how long its log is, how far compaction has reached, and
/// the running summary that stands in for the compacted part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionRecord {
    /// Whose session.
    pub agent_id: AgentId,
    /// Which session.
    pub session_id: SessionId,
    /// Sequence number of the newest message (= messages ever posted).
    pub last_seq: u64,
    /// Messages up to this sequence number are summarised and archived.
    pub compacted_through: u64,
    /// The summary of the compacted messages, if any compaction ran.
    pub summary: Option<String>,
    /// When the newest message the summary covers was said (the summary's place in the
    /// conversation, for the TTL).
    pub summarized_at: Option<DateTime<Utc>>,
    /// Estimated tokens of the messages after `compacted_through`.
    pub pending_tokens: u64,
    /// Compactions so far.
    pub compactions: u32,
    /// When the first message arrived.
    pub created_at: DateTime<Utc>,
    /// When the newest message was said.
    pub last_message_at: DateTime<Utc>,
}

/// One agent as a browser lists it: how many memories it has and how recent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentSummary {
    /// The agent, as stored (tenant-qualified).
    pub agent_id: AgentId,
    /// Memories in every status.
    pub memories: u64,
    /// Active memories.
    pub active: u64,
    /// When its newest memory was stored.
    pub last_at: Option<DateTime<Utc>>,
}

/// Years an instant given by a caller may fall in: what every store can write and read
/// back (SQLite keeps RFC 3339 text, PostgreSQL `timestamptz`), and where calendar
/// arithmetic on it cannot overflow.
pub const INSTANT_YEARS: std::ops::RangeInclusive<i32> = 1..=9999;

/// Refuse an instant outside [`INSTANT_YEARS`] with an error naming `field`.
pub fn check_instant(field: &str, at: DateTime<Utc>) -> MemoryResult<()> {
    if INSTANT_YEARS.contains(&at.year()) {
        return Ok(());
    }
    Err(MemoryError::invalid(
        field,
        format!("{field} {at} is outside the years 1 to 9999"),
    ))
}

/// Check an identifier: 1–128 characters of `[A-Za-z0-9_.:-]`; the error names `field`.
pub(crate) fn validate_identifier(field: &str, raw: &str) -> MemoryResult<()> {
    if raw.is_empty() || raw.len() > 128 {
        return Err(MemoryError::invalid(
            field,
            format!(
                "{field} must be 1 to 128 characters long (got {})",
                raw.len()
            ),
        ));
    }
    if let Some(bad) = raw
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-')))
    {
        return Err(MemoryError::invalid(
            field,
            format!("{field} may only contain letters, digits and _ . : - (found {bad:?})"),
        ));
    }
    Ok(())
}

/// The five memory systems a memory can live in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum MemoryType {
    /// Short-lived task context of a session.
    Working,
    /// Something that happened, at a time.
    Episodic,
    /// Something that happened and carried emotion (valence, arousal).
    Affective,
    /// A lasting fact or definition.
    Semantic,
    /// How to do something.
    Procedural,
}

impl MemoryType {
    /// Every type, in a fixed order (used by stats).
    pub const ALL: [MemoryType; 5] = [
        MemoryType::Working,
        MemoryType::Episodic,
        MemoryType::Affective,
        MemoryType::Semantic,
        MemoryType::Procedural,
    ];
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            MemoryType::Working => "working",
            MemoryType::Episodic => "episodic",
            MemoryType::Affective => "affective",
            MemoryType::Semantic => "semantic",
            MemoryType::Procedural => "procedural",
        }
    }
    /// Parse a wire name; the error names `field` and lists the accepted values.
    pub fn parse(field: &str, raw: &str) -> MemoryResult<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == raw).ok_or_else(|| {
            MemoryError::invalid(field, format!("unknown memory type {raw:?}; use one of working, episodic, affective, semantic, procedural"))
        })
    }
}

/// Lifecycle of a memory. Only `active` memories are recalled by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum MemoryStatus {
    /// Current and recallable.
    Active,
    /// Replaced by a newer, contradicting memory; kept for history.
    Superseded,
    /// Its source changed; kept but not trusted.
    Stale,
    /// Forgotten or consolidated away; kept, out of recall, purged later.
    Archived,
}

impl MemoryStatus {
    /// Every status, in a fixed order (used by stats).
    pub const ALL: [MemoryStatus; 4] = [
        MemoryStatus::Active,
        MemoryStatus::Superseded,
        MemoryStatus::Stale,
        MemoryStatus::Archived,
    ];
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            MemoryStatus::Active => "active",
            MemoryStatus::Superseded => "superseded",
            MemoryStatus::Stale => "stale",
            MemoryStatus::Archived => "archived",
        }
    }
    /// Parse a wire name; the error names `field` and lists the accepted values.
    pub fn parse(field: &str, raw: &str) -> MemoryResult<Self> {
        Self::ALL
            .into_iter()
            .find(|t| t.as_str() == raw)
            .ok_or_else(|| {
                MemoryError::invalid(
                    field,
                    format!(
                        "unknown status {raw:?}; use one of active, superseded, stale, archived"
                    ),
                )
            })
    }
}

/// Where a memory came from in a project tree, so stale sources can be detected.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceRef {
    /// Path relative to the project root.
    pub path: String,
    /// Content hash of the file when the memory was made.
    pub hash: String,
}

/// A stored memory: the memory object of the HTTP contract.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    /// Unique id.
    pub id: MemoryId,
    /// Owner.
    pub agent_id: AgentId,
    /// Which memory system it belongs to.
    pub memory_type: MemoryType,
    /// The text itself.
    pub content: String,
    /// Optional short title.
    pub title: Option<String>,
    /// 0..1, how much it matters; drives retention.
    pub importance: f32,
    /// Caller's labels.
    pub tags: Vec<String>,
    /// Session it was observed in, if any.
    pub session_id: Option<SessionId>,
    /// Project of the owner it belongs to, if any (isolated projects keep it out of other projects' recall).
    pub project_id: Option<crate::projects::ProjectId>,
    /// When the remembered thing happened (defaults to creation time).
    pub occurred_at: DateTime<Utc>,
    /// When it was stored.
    pub created_at: DateTime<Utc>,
    /// Last change of content or fields.
    pub updated_at: DateTime<Utc>,
    /// Last time recall returned it (reinforcement).
    pub last_accessed_at: DateTime<Utc>,
    /// How often recall returned it.
    pub access_count: u32,
    /// 0..1, how far the sleep cycle has abstracted it.
    pub consolidation_level: f32,
    /// −1..1 for affective memories.
    pub valence: Option<f32>,
    /// 0..1 for affective memories.
    pub arousal: Option<f32>,
    /// Lifecycle state.
    pub status: MemoryStatus,
    /// Visible to other agents that ask for shared memories.
    pub shared: bool,
    /// Caller's JSON object, stored and returned unchanged.
    pub metadata: serde_json::Value,
    /// File the memory was derived from, if any.
    pub source: Option<SourceRef>,
    /// Number of the current version (1 for a new memory, +1 on every change).
    pub version: u32,
}

/// One archived past state of a memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryVersion {
    /// The version number this state had.
    pub version: u32,
    /// Content at that version.
    pub content: String,
    /// Importance at that version.
    pub importance: f32,
    /// Tags at that version.
    pub tags: Vec<String>,
    /// Status at that version.
    pub status: MemoryStatus,
    /// When this state was replaced.
    pub archived_at: DateTime<Utc>,
    /// Why it was replaced (`update`, `forget`, `conflict_replace`, ...).
    pub reason: String,
}

/// A typed, weighted, directed association between two memories of one agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Association {
    /// Owner of both endpoints.
    pub agent_id: AgentId,
    /// Source memory.
    pub from_id: MemoryId,
    /// Target memory.
    pub to_id: MemoryId,
    /// Relation name (`related_to`, `derived_from`, `follows`, ...).
    pub relation: String,
    /// 0..1 strength.
    pub weight: f32,
    /// When the edge was made or last strengthened.
    pub created_at: DateTime<Utc>,
}

/// A change requested by PATCH; `None` leaves a field as it is.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemoryPatch {
    /// New content.
    pub content: Option<String>,
    /// New title (Some(None) clears it).
    pub title: Option<Option<String>>,
    /// New importance.
    pub importance: Option<f32>,
    /// New tag list.
    pub tags: Option<Vec<String>>,
    /// New status.
    pub status: Option<MemoryStatus>,
    /// New shared flag.
    pub shared: Option<bool>,
    /// New metadata object.
    pub metadata: Option<serde_json::Value>,
    /// New memory type.
    pub memory_type: Option<MemoryType>,
}

impl MemoryPatch {
    /// True when the patch changes nothing.
    pub fn is_empty(&self) -> bool {
        *self == MemoryPatch::default()
    }
}

/// Apply a patch to a memory (pure); returns the new state with version and `updated_at` advanced.
pub fn apply_patch(memory: &Memory, patch: &MemoryPatch, now: DateTime<Utc>) -> Memory {
    let mut next = memory.clone();
    if let Some(content) = &patch.content {
        next.content = content.clone();
    }
    if let Some(title) = &patch.title {
        next.title = title.clone();
    }
    if let Some(importance) = patch.importance {
        next.importance = importance;
    }
    if let Some(tags) = &patch.tags {
        next.tags = tags.clone();
    }
    if let Some(status) = patch.status {
        next.status = status;
    }
    if let Some(shared) = patch.shared {
        next.shared = shared;
    }
    if let Some(metadata) = &patch.metadata {
        next.metadata = metadata.clone();
    }
    if let Some(memory_type) = patch.memory_type {
        next.memory_type = memory_type;
    }
    next.version = memory.version + 1;
    next.updated_at = now;
    next
}

/// The archived form of a memory's current state.
pub fn version_of(memory: &Memory, reason: &str, now: DateTime<Utc>) -> MemoryVersion {
    MemoryVersion {
        version: memory.version,
        content: memory.content.clone(),
        importance: memory.importance,
        tags: memory.tags.clone(),
        status: memory.status,
        archived_at: now,
        reason: reason.to_string(),
    }
}

/// A record of one consolidation (sleep-cycle) run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConsolidationRun {
    /// Run id.
    pub id: String,
    /// Agent the run covered (None: all agents).
    pub agent_id: Option<AgentId>,
    /// What started it: `manual`, `schedule`, `archival`.
    pub trigger: String,
    /// Start time.
    pub started_at: DateTime<Utc>,
    /// End time.
    pub finished_at: DateTime<Utc>,
    /// Candidates examined.
    pub processed: u32,
    /// Memories consolidated into others.
    pub consolidated: u32,
    /// Memories archived as forgotten.
    pub forgotten: u32,
    /// New semantic memories made.
    pub new_semantic: u32,
    /// New procedural memories made.
    pub new_procedural: u32,
    /// Free-form details.
    pub report: serde_json::Value,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_qualifies_its_agents_and_clients_cannot_forge_it() {
        let acme = TenantId::parse("acme").unwrap();
        let alice = AgentId::parse("alice").unwrap();
        let theirs = AgentId::qualified(Some(&acme), &alice);
        assert_eq!(theirs.as_str(), "acme/alice");
        assert_eq!((theirs.tenant(), theirs.local()), (Some("acme"), "alice"));
        assert_eq!(AgentId::qualified(None, &alice), alice);
        assert_eq!(alice.tenant(), None);
        assert!(!theirs.same_tenant(&alice));
        assert!(
            AgentId::parse("acme/alice").is_err(),
            "clients send local ids only"
        );
        assert_eq!(AgentId::stored("acme/alice").unwrap(), theirs);
        assert!(AgentId::stored("acme/al/ice").is_err());
        assert!(AgentId::stored("/alice").is_err());
    }

    #[test]
    fn agent_ids_are_validated() {
        assert!(AgentId::parse("alice").is_ok());
        assert!(AgentId::parse("team:bot-1.v2_x").is_ok());
        assert_eq!(
            AgentId::parse("").unwrap_err().field.as_deref(),
            Some("agent_id")
        );
        assert!(AgentId::parse("bad agent").is_err());
        assert!(AgentId::parse(&"a".repeat(129)).is_err());
        assert!(AgentId::parse(&"a".repeat(128)).is_ok());
    }

    #[test]
    fn types_and_statuses_round_trip() {
        for t in MemoryType::ALL {
            assert_eq!(MemoryType::parse("type", t.as_str()).unwrap(), t);
        }
        for s in MemoryStatus::ALL {
            assert_eq!(MemoryStatus::parse("status", s.as_str()).unwrap(), s);
        }
        assert!(MemoryType::parse("type", "dream")
            .unwrap_err()
            .message
            .contains("episodic"));
    }

    #[test]
    fn patch_advances_version_and_keeps_unset_fields() {
        let now = Utc::now();
        let memory = Memory {
            id: MemoryId::generate(),
            agent_id: AgentId::parse("a").unwrap(),
            memory_type: MemoryType::Semantic,
            content: "old".into(),
            title: Some("t".into()),
            importance: 0.5,
            tags: vec!["x".into()],
            session_id: None,
            project_id: None,
            occurred_at: now,
            created_at: now,
            updated_at: now,
            last_accessed_at: now,
            access_count: 0,
            consolidation_level: 0.0,
            valence: None,
            arousal: None,
            status: MemoryStatus::Active,
            shared: false,
            metadata: serde_json::json!({}),
            source: None,
            version: 1,
        };
        let patch = MemoryPatch {
            content: Some("new".into()),
            ..Default::default()
        };
        let next = apply_patch(&memory, &patch, now);
        assert_eq!(next.content, "new");
        assert_eq!(next.title.as_deref(), Some("t"));
        assert_eq!(next.version, 2);
        let archived = version_of(&memory, "update", now);
        assert_eq!(archived.content, "old");
        assert_eq!(archived.version, 1);
    }
}

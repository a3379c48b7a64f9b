//! Export and import: the system of record's records as they travel between stores
//! (`mnemos export` / `import`, `GET /v1/export`, `POST /v1/import`). An export reads
//! them per agent and per KV namespace; an import writes them back with their ids,
//! times and counters, leaving every record already stored as it is (so importing a
//! file twice changes nothing the second time).

use chrono::{DateTime, Utc};

use crate::kv::{KvEntry, NamespaceName};
use crate::model::{
    AgentId, Association, ConsolidationRun, Memory, MemoryId, MemoryVersion, SessionId,
    SessionMessage, SessionRecord,
};
use crate::projects::Project;

/// A memory with its archived versions and (when asked for) its stored embedding.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryRecord {
    /// The memory in its current version.
    pub memory: Memory,
    /// Its past versions, oldest first.
    pub versions: Vec<MemoryVersion>,
    /// Its stored embedding; None when not exported (an import embeds it again).
    pub embedding: Option<Vec<f32>>,
}

/// The mark that archival summarised a session through an instant.
#[derive(Debug, Clone, PartialEq)]
pub struct ArchiveMark {
    /// Activity up to this instant is covered by the summary.
    pub archived_through: DateTime<Utc>,
    /// The summary memory.
    pub summary_id: MemoryId,
}

/// A session of an agent: its log state and messages (when it has a log) and its
/// archival mark (when archival summarised it).
#[derive(Debug, Clone, PartialEq)]
pub struct SessionTransfer {
    /// Whose session.
    pub agent_id: AgentId,
    /// Which session.
    pub session_id: SessionId,
    /// The log's state (None: the session has no message log, only memories).
    pub log: Option<SessionRecord>,
    /// Every message of the log, oldest first (compacted ones included).
    pub messages: Vec<SessionMessage>,
    /// Archival's mark, if any.
    pub archive: Option<ArchiveMark>,
}

/// A project with the sessions attached to it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProjectTransfer {
    /// The project.
    pub project: Project,
    /// Its sessions and when each was attached, in session order.
    pub sessions: Vec<(SessionId, DateTime<Utc>)>,
}

/// A KV namespace's configuration and counters.
#[derive(Debug, Clone, PartialEq)]
pub struct NamespaceTransfer {
    /// Its name as stored (`tenant/name` outside the default tenant).
    pub name: NamespaceName,
    /// The LRU bound.
    pub max_entries: u64,
    /// The last use number handed out (orders entries by recency).
    pub clock: u64,
    /// Gets that found their entry.
    pub hits: u64,
    /// Gets that did not.
    pub misses: u64,
    /// Entries evicted by the bound.
    pub evictions: u64,
    /// Puts.
    pub puts: u64,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When its configuration last changed.
    pub updated_at: DateTime<Utc>,
}

/// Everything an agent owns in the system of record, in a stable order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentTransfer {
    /// Memories in id order.
    pub memories: Vec<MemoryRecord>,
    /// Associations in (from, to, relation) order.
    pub edges: Vec<Association>,
    /// Sessions in id order.
    pub sessions: Vec<SessionTransfer>,
    /// Projects in id order.
    pub projects: Vec<ProjectTransfer>,
    /// Sleep-cycle and archival runs in id order.
    pub runs: Vec<ConsolidationRun>,
}

/// How many records of each kind an export holds (or an import read).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TransferCounts {
    /// Memories (each with its versions).
    pub memories: u64,
    /// Associations.
    pub edges: u64,
    /// Sessions (each with its messages).
    pub sessions: u64,
    /// Projects.
    pub projects: u64,
    /// Sleep-cycle and archival runs.
    pub runs: u64,
    /// KV namespaces.
    pub namespaces: u64,
    /// KV entries.
    pub kv_entries: u64,
    /// Merges of entities (and their undoing), from the entity index's history.
    #[serde(default)]
    pub entity_merges: u64,
}

impl TransferCounts {
    /// The sum of every kind.
    pub fn total(&self) -> u64 {
        self.memories
            + self.edges
            + self.sessions
            + self.projects
            + self.runs
            + self.namespaces
            + self.kv_entries
            + self.entity_merges
    }

    /// Add `other` to these counts.
    pub fn add(&mut self, other: &TransferCounts) {
        self.memories += other.memories;
        self.edges += other.edges;
        self.sessions += other.sessions;
        self.projects += other.projects;
        self.runs += other.runs;
        self.namespaces += other.namespaces;
        self.kv_entries += other.kv_entries;
        self.entity_merges += other.entity_merges;
    }
}

/// One record to import.
#[derive(Debug, Clone, PartialEq)]
pub enum TransferRecord {
    /// A memory with its versions; its embedding must be set (the runtime embeds the
    /// ones a file does not carry before they reach the store).
    Memory(Box<MemoryRecord>),
    /// An association between two stored memories of one agent.
    Edge(Association),
    /// A session with its messages and archival mark.
    Session(Box<SessionTransfer>),
    /// A project with its sessions.
    Project(ProjectTransfer),
    /// A run of the run log.
    Run(ConsolidationRun),
    /// A KV namespace's configuration.
    Namespace(NamespaceTransfer),
    /// A KV entry of a stored namespace.
    KvEntry(KvEntry),
    /// A merge of two of an agent's entities (a person's decision, or a memory's
    /// stated alias), undone or not.
    EntityMerge(EntityMergeTransfer),
}

/// A merge of the entity index's history, with whose it is.
#[derive(Debug, Clone, PartialEq)]
pub struct EntityMergeTransfer {
    /// Whose entities.
    pub agent_id: AgentId,
    /// The merge.
    pub merge: crate::store::entities::EntityMerge,
}

/// What importing one record did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ImportOutcome {
    /// Written.
    Written,
    /// Already stored: left as it was.
    Unchanged,
    /// An association whose memories are not stored, or a KV entry whose namespace is
    /// not: nothing to attach it to.
    Orphaned,
}

//! Wire types of the memory tools and resources (`shared/api.md`): what REST, MCP and
//! the CLI read and print. They exist only at the edge and convert to and from the
//! domain types with `From`, or with `into_*` functions that name the offending field.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use mnemos_actors::error::MemoryResult;
use mnemos_actors::model::{
    AgentId, Association, ConsolidationRun, Memory, MemoryPatch, MemoryVersion, SourceRef,
};
use mnemos_actors::policy::stats::AgentStats;
use mnemos_actors::runtime::{RecallHit, RecallOutcome, RememberInput, RememberOutcome, Routing};
use serde::{Deserialize, Deserializer, Serialize};
use utoipa::ToSchema;

use super::parse::{memory_status, memory_type, project, session};

/// A memory on the wire.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct MemoryView {
    /// Opaque id.
    pub id: String,
    /// Owner.
    pub agent_id: String,
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
    /// Session, if any.
    pub session_id: Option<String>,
    /// Project of the owner, if any.
    pub project_id: Option<String>,
    /// When it happened.
    pub occurred_at: DateTime<Utc>,
    /// When it was stored.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
    /// Last recall.
    pub last_accessed_at: DateTime<Utc>,
    /// Recall count.
    pub access_count: u32,
    /// 0..1.
    pub consolidation_level: f32,
    /// −1..1 (affective).
    pub valence: Option<f32>,
    /// 0..1 (affective).
    pub arousal: Option<f32>,
    /// active | superseded | stale | archived.
    pub status: String,
    /// Visible to other agents asking for shared memories.
    pub shared: bool,
    /// Caller's JSON object.
    #[schema(value_type = Object)]
    pub metadata: serde_json::Value,
    /// Source file, if any.
    pub source: Option<SourceView>,
    /// Current version number.
    pub version: u32,
    /// Screening marked it as aimed at the model (prompt injection): it is quoted as
    /// untrusted data in contexts, never injected as instructions.
    pub suspicious: bool,
    /// Why it is suspicious (empty when it is not).
    pub suspicious_reasons: Vec<String>,
    /// Kinds of secret redacted from it before it was stored.
    pub redacted: Vec<String>,
    /// Where it came from: the key, the surface (rest, mcp, proxy, cli, session,
    /// sleep_cycle, archival), the session, the request id (null when not recorded).
    #[schema(value_type = Option<Object>)]
    pub provenance: Option<serde_json::Value>,
    /// How much of it is still alive now, 0..1 (on reads of memories as resources:
    /// a page of `GET /v1/memories`, `GET /v1/memories/{id}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retention: Option<f64>,
}

impl MemoryView {
    /// The memory's view with its retention at `now` under `policy`.
    pub fn with_retention(
        memory: Memory,
        policy: &mnemos_actors::policy::retention::RetentionPolicy,
        now: DateTime<Utc>,
    ) -> Self {
        let retention = round_score(policy.retention(&memory, now));
        Self {
            retention: Some(retention),
            ..memory.into()
        }
    }
}

impl From<Memory> for MemoryView {
    fn from(m: Memory) -> Self {
        let (suspicious_reasons, redacted) =
            mnemos_actors::policy::screening::recorded(&m.metadata);
        let mut m = m;
        // What the server wrote in the metadata is shown as fields of its own; the
        // metadata is the client's object as it sent it.
        let provenance = m.metadata.as_object_mut().and_then(|map| {
            map.remove(mnemos_actors::policy::screening::METADATA_KEY);
            map.remove(mnemos_actors::model::PROVENANCE_KEY)
        });
        Self {
            provenance,
            suspicious: !suspicious_reasons.is_empty(),
            suspicious_reasons,
            redacted,
            id: m.id.0,
            agent_id: m.agent_id.local().to_string(),
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
            source: m.source.map(|s| SourceView {
                path: s.path,
                hash: s.hash,
            }),
            version: m.version,
            retention: None,
        }
    }
}

/// A source file reference.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SourceView {
    /// Path relative to the project root.
    pub path: String,
    /// Content hash when the memory was made.
    pub hash: String,
}

/// One or many memory types (`"semantic"` or `["semantic", "procedural"]`).
#[derive(Debug, Clone, Default, ToSchema)]
#[schema(value_type = Vec<String>)]
pub struct TypeList(pub Vec<String>);

impl<'de> Deserialize<'de> for TypeList {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        /// The two spellings the contract accepts.
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum OneOrMany {
            /// `"type": "semantic"`.
            One(String),
            /// `"type": ["semantic", "procedural"]`.
            Many(Vec<String>),
        }
        Ok(match OneOrMany::deserialize(deserializer)? {
            OneOrMany::One(one) => TypeList(vec![one]),
            OneOrMany::Many(many) => TypeList(many),
        })
    }
}

/// A memory to store (without agent).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RememberItem {
    /// The text (required).
    pub content: String,
    /// Type; chosen by the server when absent.
    #[serde(rename = "type")]
    pub memory_type: Option<String>,
    /// Optional title.
    pub title: Option<String>,
    /// 0..1.
    pub importance: Option<f32>,
    /// Labels.
    pub tags: Option<Vec<String>>,
    /// Session.
    pub session_id: Option<String>,
    /// One of the agent's projects (default: the project the session is attached to); with a session, attaches it.
    pub project_id: Option<String>,
    /// When it happened (RFC 3339).
    pub occurred_at: Option<DateTime<Utc>>,
    /// Share with other agents.
    pub shared: Option<bool>,
    /// Caller's JSON object.
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<serde_json::Value>,
    /// Source file reference.
    pub source: Option<SourceView>,
    /// −1..1.
    pub valence: Option<f32>,
    /// 0..1.
    pub arousal: Option<f32>,
}

impl RememberItem {
    /// Convert to the runtime's input; `prefix` names the item in a batch.
    pub fn into_input(self, prefix: &str) -> MemoryResult<RememberInput> {
        let memory_type = memory_type(&format!("{prefix}type"), self.memory_type.as_deref())?;
        Ok(RememberInput {
            content: self.content,
            memory_type,
            title: self.title,
            importance: self.importance,
            tags: self.tags.unwrap_or_default(),
            session_id: session(&format!("{prefix}session_id"), self.session_id.as_deref())?,
            project_id: project(&format!("{prefix}project_id"), self.project_id.as_deref())?,
            occurred_at: self.occurred_at,
            shared: self.shared.unwrap_or(false),
            metadata: self.metadata,
            source: self.source.map(|s| SourceRef {
                path: s.path,
                hash: s.hash,
            }),
            valence: self.valence,
            arousal: self.arousal,
        })
    }
}

/// `POST /tools/remember`: a [`RememberItem`] plus its owner.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RememberBody {
    /// Owner (required unless the API key is bound to one agent, which supplies it).
    pub agent_id: Option<String>,
    /// The text (required).
    pub content: String,
    /// Type; chosen by the server when absent.
    #[serde(rename = "type")]
    pub memory_type: Option<String>,
    /// Optional title.
    pub title: Option<String>,
    /// 0..1.
    pub importance: Option<f32>,
    /// Labels.
    pub tags: Option<Vec<String>>,
    /// Session.
    pub session_id: Option<String>,
    /// One of the agent's projects (default: the project the session is attached to); with a session, attaches it.
    pub project_id: Option<String>,
    /// When it happened (RFC 3339).
    pub occurred_at: Option<DateTime<Utc>>,
    /// Share with other agents.
    pub shared: Option<bool>,
    /// Caller's JSON object.
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<serde_json::Value>,
    /// Source file reference.
    pub source: Option<SourceView>,
    /// −1..1.
    pub valence: Option<f32>,
    /// 0..1.
    pub arousal: Option<f32>,
}

impl RememberBody {
    /// Split into the owner and the item (serde's `flatten` cannot deny unknown fields).
    pub fn into_parts(self) -> (Option<String>, RememberItem) {
        let item = RememberItem {
            content: self.content,
            memory_type: self.memory_type,
            title: self.title,
            importance: self.importance,
            tags: self.tags,
            session_id: self.session_id,
            project_id: self.project_id,
            occurred_at: self.occurred_at,
            shared: self.shared,
            metadata: self.metadata,
            source: self.source,
            valence: self.valence,
            arousal: self.arousal,
        };
        (self.agent_id, item)
    }
}

/// How a memory's type was chosen.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RoutingView {
    /// The type.
    #[serde(rename = "type")]
    pub memory_type: String,
    /// Why.
    pub reason: String,
}

impl From<Routing> for RoutingView {
    fn from(r: Routing) -> Self {
        Self {
            memory_type: r.memory_type.as_str().to_string(),
            reason: r.reason,
        }
    }
}

/// Answer of remember.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RememberResponse {
    /// The stored memory.
    pub memory: MemoryView,
    /// Type routing.
    pub routing: RoutingView,
    /// Existing memory this one duplicated.
    pub deduplicated_into: Option<String>,
    /// Memories this one replaced.
    pub superseded: Vec<String>,
}

impl From<RememberOutcome> for RememberResponse {
    fn from(o: RememberOutcome) -> Self {
        Self {
            memory: o.memory.into(),
            routing: o.routing.into(),
            deduplicated_into: o.deduplicated_into.map(|i| i.0),
            superseded: o.superseded.into_iter().map(|i| i.0).collect(),
        }
    }
}

/// `POST /tools/remember_batch`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RememberBatchBody {
    /// Owner (required unless the API key is bound to one agent, which supplies it).
    pub agent_id: Option<String>,
    /// The memories (required).
    pub memories: Vec<RememberItem>,
}

/// Answer of remember_batch.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RememberBatchResponse {
    /// One result per input, in order.
    pub results: Vec<RememberResponse>,
}

/// `POST /tools/recall`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RecallBody {
    /// Owner (required unless the API key is bound to one agent, which supplies it).
    pub agent_id: Option<String>,
    /// What to look for (required).
    pub query: String,
    /// Only these types.
    #[serde(rename = "type", default)]
    pub types: Option<TypeList>,
    /// Results wanted (default 10, max 200).
    pub limit: Option<usize>,
    /// Time filter (`last week`, `in May 2023`, ...).
    pub time_query: Option<String>,
    /// Reference time for relative time queries.
    pub now: Option<DateTime<Utc>>,
    /// Session in focus.
    pub session_id: Option<String>,
    /// Only memories with one of these tags.
    pub tags: Option<Vec<String>>,
    /// Include other agents' shared memories (default true).
    pub include_shared: Option<bool>,
    /// Project in focus: ranks its memories first, and is the only recall that sees an isolated project's memories.
    pub project_id: Option<String>,
    /// Return per-retriever scores.
    pub debug: Option<bool>,
    /// Only results scoring at least this (0..1; see `score`). Default: every result with
    /// some evidence (a score above 0).
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub min_score: Option<f64>,
    /// Recall as of a time: an RFC 3339 instant, a date or a period (`2023-03-15`,
    /// `March 2023`). Only memories that had happened by then are returned, and the
    /// facts that held then about the entities the question names (with the memories
    /// stating them, superseded ones too) come first and are listed in `facts`.
    #[schema(example = "2023-03-15")]
    pub as_of: Option<String>,
}

/// One recall result.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RecallResult {
    /// The memory.
    pub memory: MemoryView,
    /// Final score on 0..1: the fused evidence of the retrievers relative to a perfect
    /// match by each, times the re-rank factors (importance, retention, session, project,
    /// a period the question names), compressed above 0.8 so it never passes 1. Higher is
    /// better; a result with no evidence (score 0) is never returned.
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub score: f64,
    /// Retention now.
    pub retention: f64,
    /// vector | keyword | graph | time.
    pub matched_by: Vec<String>,
    /// Raw per-retriever scores and `ranked`, the score before its compression onto 0..1
    /// (debug only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub components: Option<BTreeMap<String, f64>>,
}

impl From<RecallHit> for RecallResult {
    fn from(h: RecallHit) -> Self {
        Self {
            memory: h.memory.into(),
            score: round_score(h.score),
            retention: round_score(h.retention),
            matched_by: h.matched_by.into_iter().map(str::to_string).collect(),
            components: h
                .components
                .map(|c| c.into_iter().map(|(k, v)| (k.to_string(), v)).collect()),
        }
    }
}

/// Answer of recall.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RecallResponse {
    /// Ranked results.
    pub results: Vec<RecallResult>,
    /// Server-side time.
    pub took_ms: f64,
    /// Time per stage (debug only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timings_ms: Option<BTreeMap<String, f64>>,
    /// What answered each read (debug only): `{"vector": "qdrant", "graph": "sql"}`, or
    /// the embedded backend with the reason a projection was not read
    /// (`"hnsw (qdrant behind: 12 entries)"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sources: Option<BTreeMap<String, String>>,
    /// Why there are fewer results than `limit`, when there are (no padding with
    /// unrelated memories).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// With `as_of`: the facts about the entities the question names that held then,
    /// each with its validity window (as `GET /v1/facts` gives them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub facts: Option<Vec<super::entities::FactView>>,
}

/// Round a score to 4 decimals (no f32 artefacts such as 0.800000011920929).
pub fn round_score(score: f64) -> f64 {
    (score * 10_000.0).round() / 10_000.0
}

impl RecallResponse {
    /// The wire answer; per-stage timings and read sources only when debugging. Results
    /// under `min_score` are dropped; when fewer than `limit` remain, `note` says why.
    pub fn from_outcome(
        outcome: RecallOutcome,
        debug: bool,
        limit: usize,
        min_score: Option<f64>,
    ) -> Self {
        let found = outcome.hits.len();
        let results: Vec<RecallResult> = outcome
            .hits
            .into_iter()
            .filter(|hit| min_score.is_none_or(|floor| hit.score >= floor))
            .map(Into::into)
            .collect();
        let note = (results.len() < limit).then(|| match min_score {
            Some(floor) if results.len() < found => format!(
                "{} of the {limit} results asked for scored at least min_score {floor}; {} more matched weakly",
                results.len(),
                found - results.len()
            ),
            _ => format!(
                "only {} memories matched the query (of the {limit} asked for); no unrelated memory is added",
                results.len()
            ),
        });
        Self {
            note,
            results,
            facts: None,
            took_ms: outcome.took_ms,
            sources: debug.then(|| {
                outcome
                    .sources
                    .iter()
                    .map(|s| (s.read.to_string(), s.answered_by.clone()))
                    .collect()
            }),
            timings_ms: debug.then(|| {
                outcome
                    .timings_ms
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect()
            }),
        }
    }
}

/// `POST /tools/build_context`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BuildContextBody {
    /// Owner (required unless the API key is bound to one agent, which supplies it).
    pub agent_id: Option<String>,
    /// What the context is for (required).
    pub query: String,
    /// Token budget of the block (default 2000).
    pub context_budget: Option<usize>,
    /// Directory that `source.path`s are relative to; sources that changed or vanished are left out.
    pub project_root: Option<String>,
    /// Session in focus.
    pub session_id: Option<String>,
    /// Include other agents' shared memories (default true).
    pub include_shared: Option<bool>,
    /// Project in focus (as in recall).
    pub project_id: Option<String>,
}

/// Facts about an assembled context.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ContextMetadata {
    /// Memories in the block.
    pub injected_count: usize,
    /// Estimated tokens of the block (≈ 4 characters per token, at least one per word).
    pub tokens_used: usize,
    /// Source files that changed or vanished; their memories were left out.
    pub stale_files: Vec<String>,
    /// Suspicious memories quoted in the block's "Untrusted notes" fence.
    pub untrusted_fenced: usize,
    /// Suspicious memories left out (`screening.untrusted = "omit"`).
    pub untrusted_withheld: usize,
    /// The block's sections in order (procedures first), with what each holds.
    pub sections: Vec<ContextSectionView>,
}

/// One section of a built context.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ContextSectionView {
    /// Its heading.
    pub name: String,
    /// Estimated tokens, heading included.
    pub tokens: usize,
    /// Memories in it.
    pub memories: usize,
}

/// Answer of build_context.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct BuildContextResponse {
    /// Ready-to-inject text.
    pub context: String,
    /// What went in.
    pub metadata: ContextMetadata,
}

/// `POST /tools/associate`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AssociateBody {
    /// Owner (required unless the API key is bound to one agent, which supplies it).
    pub agent_id: Option<String>,
    /// Source (required).
    pub from_id: String,
    /// Target (required).
    pub to_id: String,
    /// Relation name (default `related_to`).
    pub relation: Option<String>,
    /// 0..1 (default 0.5).
    pub weight: Option<f32>,
}

/// An association on the wire.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AssociationView {
    /// Owner.
    pub agent_id: String,
    /// Source.
    pub from_id: String,
    /// Target.
    pub to_id: String,
    /// Relation.
    pub relation: String,
    /// Weight.
    pub weight: f32,
    /// Creation time.
    pub created_at: DateTime<Utc>,
}

impl From<Association> for AssociationView {
    fn from(a: Association) -> Self {
        Self {
            agent_id: a.agent_id.local().to_string(),
            from_id: a.from_id.0,
            to_id: a.to_id.0,
            relation: a.relation,
            weight: a.weight,
            created_at: a.created_at,
        }
    }
}

/// `POST /tools/spreading_activation`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SpreadingActivationBody {
    /// Owner (required unless the API key is bound to one agent, which supplies it).
    pub agent_id: Option<String>,
    /// Start memory (required).
    pub seed_id: String,
    /// Hops (default 2, 1..=5).
    pub depth: Option<u32>,
    /// Results (default 10).
    pub limit: Option<usize>,
}

/// One activated memory.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ActivationResult {
    /// The memory.
    pub memory: MemoryView,
    /// Activation 0..1.
    pub activation: f64,
    /// Ids from the seed.
    pub path: Vec<String>,
}

/// Answer of spreading_activation.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SpreadingActivationResponse {
    /// Activated memories, strongest first.
    pub results: Vec<ActivationResult>,
}

/// `POST /tools/forget`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ForgetBody {
    /// Owner (required unless the API key is bound to one agent, which supplies it).
    pub agent_id: Option<String>,
    /// One memory to forget.
    pub id: Option<String>,
    /// Or: forget the memories holding every word of this query (stop words aside,
    /// compared by stem), or, with `min_score`, those recall scores at or above it.
    pub query: Option<String>,
    /// With `query`: match by recall's score (0..1, as recall reports it) instead of by
    /// every word.
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub min_score: Option<f64>,
    /// Most memories a query may forget (default 10).
    pub limit: Option<usize>,
    /// Only report what would be forgotten, and why.
    pub dry_run: Option<bool>,
}

/// Answer of forget.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ForgetResponse {
    /// Ids archived (or that would be, on a dry run).
    pub forgotten: Vec<String>,
    /// Each of them with its text and why it matched, in the same order.
    pub matches: Vec<ForgetMatchView>,
    /// Whether this was a dry run.
    pub dry_run: bool,
}

/// One memory a forget named.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ForgetMatchView {
    /// Memory id.
    pub id: String,
    /// Its text.
    pub content: String,
    /// Why it matched, in words ("contains every word of the query: staging, port";
    /// "recall score 0.812 ≥ min_score 0.5 (found by vector, keyword)"; "by id").
    pub why: String,
    /// Recall's score, when matched by score.
    pub score: Option<f64>,
}

impl From<mnemos_actors::runtime::ForgetMatch> for ForgetMatchView {
    fn from(found: mnemos_actors::runtime::ForgetMatch) -> Self {
        use mnemos_actors::policy::forget::ForgetReason;
        let score = match &found.reason {
            Some(ForgetReason::Score { score, .. }) => Some(round_score(*score)),
            Some(ForgetReason::AllTerms { .. }) | None => None,
        };
        Self {
            id: found.id.0,
            content: found.content,
            why: found
                .reason
                .as_ref()
                .map_or_else(|| "by id".to_string(), ForgetReason::explain),
            score,
        }
    }
}

/// Body of tools that take only an agent.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentBody {
    /// Owner (required unless the API key is bound to one agent, which supplies it).
    pub agent_id: Option<String>,
}

/// `POST /tools/extract_turn`: one user/assistant exchange to mine for memories.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExtractTurnBody {
    /// Owner (required unless the API key is bound to one agent, which supplies it).
    pub agent_id: Option<String>,
    /// The user's message (required; may be empty if the reply is not).
    pub user: String,
    /// The assistant's reply (required; may be empty if the message is not).
    pub assistant: String,
    /// Session the exchange belongs to.
    pub session_id: Option<String>,
}

/// Answer of `extract_turn`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ExtractTurnResponse {
    /// The memories the turn landed on, each once: newly stored ones and existing ones it
    /// duplicated (reinforced). Empty when nothing was worth keeping.
    pub stored: Vec<MemoryView>,
}

/// `POST /tools/memory_history`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HistoryBody {
    /// Memory (required).
    pub id: String,
    /// Owner (checked when given).
    pub agent_id: Option<String>,
}

/// A past version.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct VersionView {
    /// Version number.
    pub version: u32,
    /// Content then.
    pub content: String,
    /// Importance then.
    pub importance: f32,
    /// Tags then.
    pub tags: Vec<String>,
    /// Status then.
    pub status: String,
    /// When it was replaced.
    pub archived_at: DateTime<Utc>,
    /// Why.
    pub reason: String,
}

impl From<MemoryVersion> for VersionView {
    fn from(v: MemoryVersion) -> Self {
        Self {
            version: v.version,
            content: v.content,
            importance: v.importance,
            tags: v.tags,
            status: v.status.as_str().to_string(),
            archived_at: v.archived_at,
            reason: v.reason,
        }
    }
}

/// Answer of memory_history.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct HistoryResponse {
    /// The memory.
    pub id: String,
    /// Past versions, oldest first.
    pub versions: Vec<VersionView>,
}

/// Answer of reflect.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ReflectResponse {
    /// The agent.
    pub agent_id: String,
    /// Memories in every status.
    pub total: u64,
    /// Count per type.
    pub by_type: BTreeMap<String, u64>,
    /// Count per status.
    pub by_status: BTreeMap<String, u64>,
    /// Most used tags.
    pub top_tags: Vec<TagCount>,
    /// Share with consolidation_level ≥ 0.5.
    pub consolidation_ratio: f64,
    /// Mean retention of active memories.
    pub mean_retention: f64,
    /// Sessions seen.
    pub sessions: u64,
}

/// A tag and how many memories carry it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TagCount {
    /// Tag.
    pub tag: String,
    /// Memories with it.
    pub count: u64,
}

impl ReflectResponse {
    /// Build from stats.
    pub fn new(agent: &AgentId, s: AgentStats) -> Self {
        Self {
            agent_id: agent.local().to_string(),
            total: s.total,
            by_type: s.by_type,
            by_status: s.by_status,
            top_tags: s
                .top_tags
                .into_iter()
                .map(|(tag, count)| TagCount { tag, count })
                .collect(),
            consolidation_ratio: s.consolidation_ratio,
            mean_retention: s.mean_retention,
            sessions: s.sessions,
        }
    }
}

/// A consolidation run.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RunView {
    /// Run id.
    pub id: String,
    /// Agent (null: all).
    pub agent_id: Option<String>,
    /// Who started it: api, cli, test, or schedule:<job>@<slot>.
    pub trigger: String,
    /// Start.
    pub started_at: DateTime<Utc>,
    /// End.
    pub finished_at: DateTime<Utc>,
    /// Candidates examined.
    pub processed: u32,
    /// Consolidated.
    pub consolidated: u32,
    /// Forgotten (archived).
    pub forgotten: u32,
    /// New semantic memories.
    pub new_semantic: u32,
    /// New procedural memories.
    pub new_procedural: u32,
    /// Details.
    #[schema(value_type = Object)]
    pub report: serde_json::Value,
}

impl From<ConsolidationRun> for RunView {
    fn from(r: ConsolidationRun) -> Self {
        Self {
            id: r.id,
            agent_id: r.agent_id.map(|a| a.local().to_string()),
            trigger: r.trigger,
            started_at: r.started_at,
            finished_at: r.finished_at,
            processed: r.processed,
            consolidated: r.consolidated,
            forgotten: r.forgotten,
            new_semantic: r.new_semantic,
            new_procedural: r.new_procedural,
            report: r.report,
        }
    }
}

/// Answer of `GET /v1/cognition/runs`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RunsResponse {
    /// Newest first.
    pub runs: Vec<RunView>,
}

/// Query of `GET /v1/memories`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    /// Owner (required).
    pub agent_id: Option<String>,
    /// Only this type.
    #[serde(rename = "type")]
    pub memory_type: Option<String>,
    /// Only this status.
    pub status: Option<String>,
    /// Only this tag.
    pub tag: Option<String>,
    /// Page size (default 50).
    pub limit: Option<usize>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
    /// Only memories of this project.
    pub project_id: Option<String>,
    /// Only memories of this session.
    pub session_id: Option<String>,
    /// Only memories that occurred at or after this instant (RFC 3339).
    pub occurred_after: Option<DateTime<Utc>>,
    /// Only memories that occurred before this instant (RFC 3339).
    pub occurred_before: Option<DateTime<Utc>>,
    /// Full text: only memories whose content holds every word of this text
    /// (case-insensitive for ASCII letters).
    pub q: Option<String>,
    /// Also count every memory that passes the filters (`total`).
    pub with_total: Option<bool>,
}

/// A page of memories.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ListResponse {
    /// Newest first.
    pub memories: Vec<MemoryView>,
    /// Pass as `cursor` for the next page; null at the end.
    pub next_cursor: Option<String>,
    /// How many memories pass the filters in all (only with `with_total=true`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
}

/// The query of a route that takes no parameter: any parameter is refused naming it
/// (a misspelt filter is never silently ignored).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoQuery {}

/// Query naming an optional owner.
#[derive(Debug, Clone, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct AgentParam {
    /// When given, the memory must belong to this agent.
    pub agent_id: Option<String>,
}

/// Query of `GET /v1/cognition/runs`.
#[derive(Debug, Clone, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct RunsParams {
    /// Only this agent's runs.
    pub agent_id: Option<String>,
    /// Most runs (default 20).
    pub limit: Option<usize>,
}

/// `PATCH /v1/memories/{id}`: fields to change.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchBody {
    /// New content.
    pub content: Option<String>,
    /// New title (null clears it).
    #[serde(default, deserialize_with = "double_option")]
    #[schema(value_type = Option<String>)]
    pub title: Option<Option<String>>,
    /// New importance.
    pub importance: Option<f32>,
    /// New tags.
    pub tags: Option<Vec<String>>,
    /// New status.
    pub status: Option<String>,
    /// New shared flag.
    pub shared: Option<bool>,
    /// New metadata object.
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<serde_json::Value>,
    /// New type.
    #[serde(rename = "type")]
    pub memory_type: Option<String>,
}

fn double_option<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Option<String>>, D::Error> {
    Ok(Some(Option::deserialize(deserializer)?))
}

impl PatchBody {
    /// Convert to a domain patch.
    pub fn into_patch(self) -> MemoryResult<MemoryPatch> {
        Ok(MemoryPatch {
            content: self.content,
            title: self.title,
            importance: self.importance,
            tags: self.tags,
            status: memory_status("status", self.status.as_deref())?,
            shared: self.shared,
            metadata: self.metadata,
            memory_type: memory_type("type", self.memory_type.as_deref())?,
        })
    }
}

/// MCP `get_memory` and `delete_memory`: one memory by id.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryRefBody {
    /// The memory's id (required).
    pub id: String,
    /// Owner (required unless the API key or the connection supplies it).
    pub agent_id: Option<String>,
}

/// MCP `update_memory`: the memory by id and the fields to change (as `PATCH`).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateMemoryBody {
    /// The memory's id (required).
    pub id: String,
    /// Owner (required unless the API key or the connection supplies it).
    pub agent_id: Option<String>,
    /// New content.
    pub content: Option<String>,
    /// New importance (0..1).
    pub importance: Option<f32>,
    /// New tags.
    pub tags: Option<Vec<String>>,
    /// New status.
    pub status: Option<String>,
    /// New shared flag.
    pub shared: Option<bool>,
    /// New metadata object.
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<serde_json::Value>,
    /// New type.
    #[serde(rename = "type")]
    pub memory_type: Option<String>,
}

impl UpdateMemoryBody {
    /// The id, the owner as named, and the patch.
    pub fn into_parts(self) -> (String, AgentParam, PatchBody) {
        (
            self.id,
            AgentParam {
                agent_id: self.agent_id,
            },
            PatchBody {
                content: self.content,
                title: None,
                importance: self.importance,
                tags: self.tags,
                status: self.status,
                shared: self.shared,
                metadata: self.metadata,
                memory_type: self.memory_type,
            },
        )
    }
}

/// One chat message of `POST /v1/memories`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChatMessage {
    /// Who said it.
    #[schema(pattern = "^(user|assistant|system)$")]
    pub role: String,
    /// What was said.
    pub content: String,
}

/// `POST /v1/memories`: a conversation (a list of chat messages) to mine for memories.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddMemoriesBody {
    /// Owner (required unless the API key is bound to one agent, which supplies it).
    pub agent_id: Option<String>,
    /// The messages, in order (at least one). Each user message (with the assistant's
    /// reply that follows it) is one exchange, mined as `extract_turn` mines one; system
    /// messages are not mined.
    pub messages: Vec<ChatMessage>,
    /// Session the conversation belongs to.
    pub session_id: Option<String>,
    /// JSON object stored with every memory made from it.
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<serde_json::Value>,
}

/// Query of `DELETE /v1/memories` (every memory of one agent).
#[derive(Debug, Clone, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct DeleteAllParams {
    /// Owner whose memories are deleted (required unless the key is bound to one agent).
    pub agent_id: Option<String>,
}

/// Answer of `DELETE /v1/memories`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DeleteAllResponse {
    /// How many memories were deleted (history included).
    pub deleted: u64,
}

/// Answer of `DELETE /v1/memories/{id}`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DeleteResponse {
    /// The deleted id.
    pub deleted: String,
}

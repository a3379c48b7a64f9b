//! What a person browsing the memory (the web console, or any client) reads beyond the
//! basic resources: the agents of the caller's tenant, a memory's associations, its
//! neighbourhood in the association graph, its retention curve, an agent's sessions,
//! the tenant's KV namespaces, and forgetting or restoring many memories at once.

use chrono::{DateTime, Utc};
use mnemos_actors::error::{MemoryError, MemoryResult};
use mnemos_actors::kv::NamespaceName;
use mnemos_actors::model::{MemoryId, MemoryStatus, SessionRecord};
use mnemos_actors::runtime::ForgetTarget;
use mnemos_actors::Runtime;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::kv::NamespaceStatsView;
use super::wire::AgentParam;
use crate::auth::{Caller, Scope};

/// One agent of the caller's tenant.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AgentView {
    /// The agent.
    pub agent_id: String,
    /// Memories in every status.
    pub memories: u64,
    /// Active memories.
    pub active: u64,
    /// When its newest memory was stored.
    pub last_at: Option<DateTime<Utc>>,
}

/// Answer of `GET /v1/agents`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AgentsResponse {
    /// By agent id.
    pub agents: Vec<AgentView>,
}

/// The agents with memories that the caller may see: those of its tenant, or only its
/// own agent for a key bound to one.
pub async fn agents(runtime: &Runtime, caller: &Caller) -> MemoryResult<AgentsResponse> {
    caller.require(Scope::Read)?;
    let tenant = caller.tenant.as_ref().map(|t| t.as_str());
    let agents = runtime
        .agent_summaries()
        .await?
        .into_iter()
        .filter(|s| s.agent_id.tenant() == tenant)
        .filter(|s| {
            caller
                .agent
                .as_ref()
                .is_none_or(|own| own.as_str() == s.agent_id.local())
        })
        .map(|s| AgentView {
            agent_id: s.agent_id.local().to_string(),
            memories: s.memories,
            active: s.active,
            last_at: s.last_at,
        })
        .collect();
    Ok(AgentsResponse { agents })
}

/// `POST /v1/memories/bulk`: forget or restore many memories of one agent.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkBody {
    /// Owner (required unless the API key is bound to one agent).
    pub agent_id: Option<String>,
    /// The memories (1 to 500).
    pub ids: Vec<String>,
    /// `forget` (archive; kept with its history) or `restore` (make active again).
    pub action: String,
}

/// What a bulk change did to each id.
#[derive(Debug, Clone, Default, Serialize, ToSchema)]
pub struct BulkResponse {
    /// Changed.
    pub changed: Vec<String>,
    /// Already in the state asked for.
    pub unchanged: Vec<String>,
    /// Not a memory of this agent.
    pub missing: Vec<String>,
}

/// The most ids one bulk change takes.
const MAX_BULK: usize = 500;

/// Forget or restore each of `body.ids`; one missing id does not stop the others.
pub async fn bulk(
    runtime: &Runtime,
    caller: &Caller,
    body: BulkBody,
) -> MemoryResult<BulkResponse> {
    caller.require(Scope::Write)?;
    let agent = caller.agent("agent_id", body.agent_id.as_deref())?;
    let forget = match body.action.as_str() {
        "forget" => true,
        "restore" => false,
        other => {
            return Err(MemoryError::invalid(
                "action",
                format!("action must be forget or restore (got {other:?})"),
            ))
        }
    };
    if body.ids.is_empty() || body.ids.len() > MAX_BULK {
        return Err(MemoryError::invalid(
            "ids",
            format!("ids must name 1 to {MAX_BULK} memories"),
        ));
    }
    let mut answer = BulkResponse::default();
    for raw in body.ids {
        let id = MemoryId(raw.clone());
        let memory = match runtime.get(Some(&agent), &id).await {
            Ok(memory) => memory,
            Err(error) if error.code == mnemos_actors::error::ErrorCode::NotFound => {
                answer.missing.push(raw);
                continue;
            }
            Err(error) => return Err(error),
        };
        let wanted = if forget {
            MemoryStatus::Archived
        } else {
            MemoryStatus::Active
        };
        if memory.status == wanted {
            answer.unchanged.push(raw);
            continue;
        }
        if forget {
            runtime.forget(&agent, ForgetTarget::Id(id), false).await?;
        } else {
            runtime.restore(&agent, &id).await?;
        }
        answer.changed.push(raw);
    }
    Ok(answer)
}

/// The memory at the other end of an association, in brief.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct MemoryBrief {
    /// Its id.
    pub id: String,
    /// Its type.
    #[serde(rename = "type")]
    pub memory_type: String,
    /// Its content.
    pub content: String,
    /// Its status.
    pub status: String,
    /// Its importance.
    pub importance: f32,
}

impl From<&mnemos_actors::model::Memory> for MemoryBrief {
    fn from(m: &mnemos_actors::model::Memory) -> Self {
        Self {
            id: m.id.0.clone(),
            memory_type: m.memory_type.as_str().to_string(),
            content: m.content.clone(),
            status: m.status.as_str().to_string(),
            importance: m.importance,
        }
    }
}

/// One association of a memory.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AssociationOfView {
    /// Source.
    pub from_id: String,
    /// Target.
    pub to_id: String,
    /// Relation name.
    pub relation: String,
    /// 0..1 strength.
    pub weight: f32,
    /// When the edge was made or last strengthened.
    pub created_at: DateTime<Utc>,
    /// The memory at the other end.
    pub other: MemoryBrief,
}

/// Answer of `GET /v1/memories/{id}/associations`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AssociationsResponse {
    /// Strongest first.
    pub associations: Vec<AssociationOfView>,
}

/// A memory's associations, each with the memory at its other end.
pub async fn associations(
    runtime: &Runtime,
    caller: &Caller,
    id: String,
    owner: AgentParam,
) -> MemoryResult<AssociationsResponse> {
    caller.require(Scope::Read)?;
    let owner = caller.owner("agent_id", owner.agent_id.as_deref())?;
    let found = runtime.associations(&owner, &MemoryId(id)).await?;
    Ok(AssociationsResponse {
        associations: found
            .into_iter()
            .map(|a| AssociationOfView {
                from_id: a.edge.from_id.0,
                to_id: a.edge.to_id.0,
                relation: a.edge.relation,
                weight: a.edge.weight,
                created_at: a.edge.created_at,
                other: MemoryBrief::from(&a.other),
            })
            .collect(),
    })
}

/// Query of `GET /v1/memories/{id}/graph`.
#[derive(Debug, Clone, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct GraphParams {
    /// The owner (required unless the key is bound to one agent).
    pub agent_id: Option<String>,
    /// Hops from the memory (1 to 4, default 2).
    pub depth: Option<u32>,
    /// Most memories drawn, the memory itself included (1 to 1000, default 200).
    pub limit: Option<usize>,
}

/// One memory of a neighbourhood.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct GraphNode {
    /// The memory in brief.
    #[serde(flatten)]
    pub memory: MemoryBrief,
    /// Hops from the memory asked about (0: itself).
    pub depth: u32,
}

/// One edge of a neighbourhood.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct GraphEdge {
    /// Source.
    pub from_id: String,
    /// Target.
    pub to_id: String,
    /// Relation name.
    pub relation: String,
    /// 0..1 strength.
    pub weight: f32,
}

/// Answer of `GET /v1/memories/{id}/graph`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct GraphResponse {
    /// Nearest first; the memory asked about first.
    pub nodes: Vec<GraphNode>,
    /// Between those memories.
    pub edges: Vec<GraphEdge>,
}

/// A memory's neighbourhood in the association graph.
pub async fn graph(
    runtime: &Runtime,
    caller: &Caller,
    id: String,
    params: GraphParams,
) -> MemoryResult<GraphResponse> {
    caller.require(Scope::Read)?;
    let owner = caller.owner("agent_id", params.agent_id.as_deref())?;
    let found = runtime
        .neighbourhood(
            &owner,
            &MemoryId(id),
            params.depth.unwrap_or(2),
            params.limit.unwrap_or(200),
        )
        .await?;
    Ok(GraphResponse {
        nodes: found
            .nodes
            .iter()
            .map(|(memory, depth)| GraphNode {
                memory: MemoryBrief::from(memory),
                depth: *depth,
            })
            .collect(),
        edges: found
            .edges
            .into_iter()
            .map(|e| GraphEdge {
                from_id: e.from_id.0,
                to_id: e.to_id.0,
                relation: e.relation,
                weight: e.weight,
            })
            .collect(),
    })
}

/// Query of `GET /v1/memories/{id}/retention`.
#[derive(Debug, Clone, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct RetentionParams {
    /// The owner (required unless the key is bound to one agent).
    pub agent_id: Option<String>,
    /// Days ahead of now the curve reaches (0 to 3650, default 30).
    pub days: Option<u32>,
    /// Samples (2 to 500, default 31).
    pub points: Option<usize>,
}

/// One sample of a retention curve.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RetentionPoint {
    /// When.
    pub at: DateTime<Utc>,
    /// Retention then, 0..1.
    pub retention: f64,
}

/// Answer of `GET /v1/memories/{id}/retention`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RetentionResponse {
    /// Retention now, 0..1.
    pub retention: f64,
    /// From the last access until `days` from now, assuming no further use.
    pub points: Vec<RetentionPoint>,
}

/// A memory's retention curve.
pub async fn retention(
    runtime: &Runtime,
    caller: &Caller,
    id: String,
    params: RetentionParams,
) -> MemoryResult<RetentionResponse> {
    caller.require(Scope::Read)?;
    let owner = caller.owner("agent_id", params.agent_id.as_deref())?;
    let days = params.days.unwrap_or(30);
    if days > 3650 {
        return Err(MemoryError::invalid(
            "days",
            "days must be between 0 and 3650",
        ));
    }
    let points = params.points.unwrap_or(31);
    if !(2..=500).contains(&points) {
        return Err(MemoryError::invalid(
            "points",
            "points must be between 2 and 500",
        ));
    }
    let (now, curve) = runtime
        .retention_curve(&owner, &MemoryId(id), days, points)
        .await?;
    Ok(RetentionResponse {
        retention: super::wire::round_score(now),
        points: curve
            .into_iter()
            .map(|(at, retention)| RetentionPoint {
                at,
                retention: super::wire::round_score(retention),
            })
            .collect(),
    })
}

/// Query of `GET /v1/sessions`.
#[derive(Debug, Clone, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct SessionsParams {
    /// Whose sessions (required unless the key is bound to one agent).
    pub agent_id: Option<String>,
    /// Most sessions (1 to 1000, default 100).
    pub limit: Option<usize>,
}

/// One session in a list.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SessionSummaryView {
    /// The session.
    pub session_id: String,
    /// Messages ever posted.
    pub total_messages: u64,
    /// Estimated tokens of the uncompacted messages.
    pub tokens: u64,
    /// Compactions so far.
    pub compactions: u32,
    /// Messages up to this sequence number are compacted.
    pub compacted_through: u64,
    /// Summary of the compacted part, if any.
    pub summary: Option<String>,
    /// When the first message arrived.
    pub created_at: DateTime<Utc>,
    /// When the newest message was said.
    pub last_message_at: DateTime<Utc>,
}

impl From<SessionRecord> for SessionSummaryView {
    fn from(r: SessionRecord) -> Self {
        Self {
            session_id: r.session_id.as_str().to_string(),
            total_messages: r.last_seq,
            tokens: r.pending_tokens,
            compactions: r.compactions,
            compacted_through: r.compacted_through,
            summary: r.summary,
            created_at: r.created_at,
            last_message_at: r.last_message_at,
        }
    }
}

/// Answer of `GET /v1/sessions`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SessionsResponse {
    /// The most recently spoken first.
    pub sessions: Vec<SessionSummaryView>,
}

/// An agent's sessions.
pub async fn sessions(
    runtime: &Runtime,
    caller: &Caller,
    params: SessionsParams,
) -> MemoryResult<SessionsResponse> {
    caller.require(Scope::Read)?;
    let agent = caller.agent("agent_id", params.agent_id.as_deref())?;
    let limit = params.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(MemoryError::invalid(
            "limit",
            "limit must be between 1 and 1000",
        ));
    }
    let found = runtime.sessions(&agent, limit).await?;
    Ok(SessionsResponse {
        sessions: found.into_iter().map(Into::into).collect(),
    })
}

/// Answer of `GET /v1/namespaces`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct NamespacesResponse {
    /// By name, each with its counters.
    pub namespaces: Vec<NamespaceStatsView>,
}

/// The KV namespaces of the caller's tenant with their counters.
pub async fn namespaces(runtime: &Runtime, caller: &Caller) -> MemoryResult<NamespacesResponse> {
    caller.require(Scope::Read)?;
    let mut listed = Vec::new();
    for name in runtime.kv_namespaces().await? {
        let ours =
            NamespaceName::parse(name.local()).is_ok_and(|local| caller.namespace(&local) == name);
        if !ours {
            continue;
        }
        match runtime.kv_stats(&name).await {
            Ok(stats) => listed.push(stats.into()),
            // Dropped between the two reads.
            Err(error) if error.code == mnemos_actors::error::ErrorCode::NotFound => {}
            Err(error) => return Err(error),
        }
    }
    Ok(NamespacesResponse { namespaces: listed })
}

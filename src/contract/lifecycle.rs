//! Bulk housekeeping as operations: prune (archive or delete memories by age,
//! importance, status and type, with a dry run), clear (a session, an agent, every
//! agent), and the listings the CLI shows (an agent's sessions, a tenant's KV
//! namespaces). The choice of what to prune is a pure plan ([`prune_plan`]); the rest
//! is IO through the runtime, with the caller's rights checked as everywhere.

use chrono::{DateTime, Duration, Utc};
use mnemos_actors::error::{MemoryError, MemoryResult};
use mnemos_actors::model::{AgentId, Memory, MemoryId, MemoryStatus, MemoryType, SessionId};
use mnemos_actors::store::ListQuery;
use mnemos_actors::Runtime;
use serde::{Deserialize, Serialize};

use super::erase::EraseResponse;
use super::wire::{AgentParam, ForgetBody};
use crate::auth::keys::KeyStore;
use crate::auth::{Caller, Scope, DEFAULT_TENANT};

/// Which memories a prune takes: every criterion given must hold.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PruneCriteria {
    /// Stored longer ago than this.
    pub older_than: Option<Duration>,
    /// Importance strictly below this.
    pub importance_below: Option<f32>,
    /// In this status.
    pub status: Option<MemoryStatus>,
    /// Of this type.
    pub memory_type: Option<MemoryType>,
}

impl PruneCriteria {
    /// True when no criterion is given (a prune of everything, which is refused).
    pub fn is_empty(&self) -> bool {
        self.older_than.is_none()
            && self.importance_below.is_none()
            && self.status.is_none()
            && self.memory_type.is_none()
    }
}

/// What a prune does to the memories it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PruneAction {
    /// Archive them (forget: they keep their history and leave recall).
    Archive,
    /// Delete them with their versions, embeddings and edges.
    Delete,
}

/// The memories of one agent a prune takes, by `criteria` at `now`: archiving skips
/// those archived already.
pub fn prune_plan(
    memories: &[Memory],
    criteria: &PruneCriteria,
    action: PruneAction,
    now: DateTime<Utc>,
) -> Vec<MemoryId> {
    memories
        .iter()
        .filter(|m| {
            criteria
                .older_than
                .is_none_or(|age| m.created_at < now - age)
        })
        .filter(|m| criteria.importance_below.is_none_or(|x| m.importance < x))
        .filter(|m| criteria.status.is_none_or(|s| m.status == s))
        .filter(|m| criteria.memory_type.is_none_or(|t| m.memory_type == t))
        .filter(|m| action == PruneAction::Delete || m.status != MemoryStatus::Archived)
        .map(|m| m.id.clone())
        .collect()
}

/// What a prune took from one agent.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PrunedAgent {
    /// The agent.
    pub agent_id: String,
    /// The memories taken (or, in a dry run, that would be).
    pub memories: Vec<String>,
}

/// What a prune did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PruneReport {
    /// Archive or delete.
    pub action: PruneAction,
    /// True when nothing was changed.
    pub dry_run: bool,
    /// Per agent, those with something to prune.
    pub agents: Vec<PrunedAgent>,
}

/// Every memory of `agent` of the type and status asked, newest first.
async fn memories_of(
    runtime: &Runtime,
    agent: &AgentId,
    criteria: &PruneCriteria,
) -> MemoryResult<Vec<Memory>> {
    let mut found = Vec::new();
    let mut cursor = None;
    loop {
        let query = ListQuery {
            agent_id: Some(agent.clone()),
            memory_type: criteria.memory_type,
            status: criteria.status,
            limit: 200,
            cursor,
            ..ListQuery::default()
        };
        let (page, next) = runtime.list(query).await?;
        found.extend(page);
        match next {
            Some(next) => cursor = Some(next),
            None => return Ok(found),
        }
    }
}

/// The agents of the caller's tenant that have memories (the operator in the default
/// tenant: those of the default tenant).
async fn tenant_agents(runtime: &Runtime, caller: &Caller) -> MemoryResult<Vec<AgentId>> {
    let tenant = caller.tenant.as_ref().map(|t| t.as_str());
    Ok(runtime
        .agents()
        .await?
        .into_iter()
        .filter(|a| a.tenant() == tenant)
        .collect())
}

/// Prune the memories of `agent` (or, with None, of every agent of the caller's
/// tenant, which needs an admin) that meet `criteria`.
pub async fn prune(
    runtime: &Runtime,
    caller: &Caller,
    agent: Option<&str>,
    criteria: &PruneCriteria,
    action: PruneAction,
    dry_run: bool,
) -> MemoryResult<PruneReport> {
    if criteria.is_empty() {
        return Err(MemoryError::invalid(
            "criteria",
            "name what to prune: an age, an importance bound, a status or a type",
        ));
    }
    caller.require(if dry_run { Scope::Read } else { Scope::Write })?;
    let agents = match agent {
        Some(agent) => vec![caller.agent("agent_id", Some(agent))?],
        None => {
            caller.require(Scope::Admin)?;
            tenant_agents(runtime, caller).await?
        }
    };
    let now = runtime.now();
    let mut report = PruneReport {
        action,
        dry_run,
        agents: Vec::new(),
    };
    for agent in agents {
        let memories = memories_of(runtime, &agent, criteria).await?;
        let taken = prune_plan(&memories, criteria, action, now);
        if taken.is_empty() {
            continue;
        }
        let local = agent.local().to_string();
        if !dry_run {
            for id in &taken {
                match action {
                    PruneAction::Archive => {
                        let body = ForgetBody {
                            agent_id: Some(local.clone()),
                            id: Some(id.0.clone()),
                            query: None,
                            min_score: None,
                            limit: None,
                            dry_run: Some(false),
                        };
                        super::tools::forget(runtime, caller, body).await?;
                    }
                    PruneAction::Delete => {
                        let owner = AgentParam {
                            agent_id: Some(local.clone()),
                        };
                        super::memories::delete_memory(runtime, caller, id.0.clone(), owner)
                            .await?;
                    }
                }
            }
        }
        report.agents.push(PrunedAgent {
            agent_id: local,
            memories: taken.into_iter().map(|id| id.0).collect(),
        });
    }
    Ok(report)
}

/// What clearing a session removed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClearedSession {
    /// The agent.
    pub agent_id: String,
    /// The session.
    pub session_id: String,
    /// Its memories deleted.
    pub memories: u64,
    /// Its messages deleted.
    pub messages: u64,
}

/// Clear one session of an agent: its memories, message log, archival mark, project
/// attachment and working memory.
pub async fn clear_session(
    runtime: &Runtime,
    caller: &Caller,
    agent: &str,
    session: &str,
) -> MemoryResult<ClearedSession> {
    caller.require(Scope::Write)?;
    let agent = caller.agent("agent_id", Some(agent))?;
    let session = SessionId::parse(session)?;
    let (memories, messages) = runtime.clear_session(&agent, &session).await?;
    if memories == 0 && messages == 0 {
        return Err(MemoryError::not_found(format!(
            "agent {} has no session {}",
            agent.local(),
            session.as_str()
        )));
    }
    Ok(ClearedSession {
        agent_id: agent.local().to_string(),
        session_id: session.as_str().to_string(),
        memories,
        messages,
    })
}

/// Clear every agent the caller administers (the operator: of every tenant): each is
/// erased from every store, as `erase` does, and audited.
pub async fn clear_everything(
    runtime: &Runtime,
    keys: &dyn KeyStore,
    caller: &Caller,
) -> MemoryResult<Vec<EraseResponse>> {
    caller.require(Scope::Admin)?;
    let everyone = caller.tenant.is_none() && caller.agent.is_none();
    let tenant = caller.tenant.as_ref().map(|t| t.as_str());
    let mut erased = Vec::new();
    for agent in runtime.transfer_agents().await? {
        if !everyone && agent.tenant() != tenant {
            continue;
        }
        let mut acting = caller.clone();
        if let Some(t) = agent.tenant() {
            acting.tenant = Some(mnemos_actors::model::TenantId::parse(t)?);
        }
        erased.push(super::erase::erase_agent(runtime, keys, &acting, agent.local()).await?);
    }
    Ok(erased)
}

/// One session of an agent, as listed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionSummary {
    /// The session.
    pub session_id: String,
    /// Messages in its log.
    pub messages: u64,
    /// Messages compacted into its summary.
    pub compacted_through: u64,
    /// Compactions so far.
    pub compactions: u32,
    /// When it began.
    pub created_at: DateTime<Utc>,
    /// Its last message.
    pub last_message_at: DateTime<Utc>,
}

/// The sessions (with a message log) of an agent, in id order.
pub async fn list_sessions(
    runtime: &Runtime,
    caller: &Caller,
    agent: Option<&str>,
) -> MemoryResult<Vec<SessionSummary>> {
    caller.require(Scope::Read)?;
    let agent = caller.agent("agent_id", agent)?;
    Ok(runtime
        .export_sessions(&agent)
        .await?
        .into_iter()
        .map(|s| SessionSummary {
            session_id: s.session_id.as_str().to_string(),
            messages: s.last_seq,
            compacted_through: s.compacted_through,
            compactions: s.compactions,
            created_at: s.created_at,
            last_message_at: s.last_message_at,
        })
        .collect())
}

/// A KV namespace, as listed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NamespaceSummary {
    /// Its name in its tenant.
    pub namespace: String,
    /// Its tenant.
    pub tenant: String,
    /// The LRU bound.
    pub max_entries: u64,
    /// Puts so far.
    pub puts: u64,
    /// When it was created.
    pub created_at: DateTime<Utc>,
}

/// The KV namespaces of the caller's tenant, in name order.
pub async fn list_namespaces(
    runtime: &Runtime,
    caller: &Caller,
) -> MemoryResult<Vec<NamespaceSummary>> {
    caller.require(Scope::Read)?;
    let tenant = caller.tenant.as_ref().map(|t| t.as_str());
    Ok(runtime
        .export_namespaces()
        .await?
        .into_iter()
        .filter(|ns| {
            ns.name
                .as_str()
                .split_once(mnemos_actors::model::TENANT_SEPARATOR)
                .map(|(t, _)| t)
                == tenant
        })
        .map(|ns| NamespaceSummary {
            namespace: ns.name.local().to_string(),
            tenant: tenant.unwrap_or(DEFAULT_TENANT).to_string(),
            max_entries: ns.max_entries,
            puts: ns.puts,
            created_at: ns.created_at,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use mnemos_actors::testing::memory_fixture;

    fn at(days_ago: i64, now: DateTime<Utc>) -> DateTime<Utc> {
        now - Duration::days(days_ago)
    }

    #[test]
    fn a_prune_takes_what_meets_every_criterion_and_archiving_skips_the_archived() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-12-01T00:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let memory = |id: &str, days: i64, importance: f32, status, memory_type| {
            let mut m = memory_fixture("alice", id, now);
            m.id = MemoryId(id.into());
            m.created_at = at(days, now);
            m.importance = importance;
            m.status = status;
            m.memory_type = memory_type;
            m
        };
        let memories = vec![
            memory(
                "old-low",
                100,
                0.1,
                MemoryStatus::Active,
                MemoryType::Episodic,
            ),
            memory(
                "old-high",
                100,
                0.9,
                MemoryStatus::Active,
                MemoryType::Episodic,
            ),
            memory(
                "new-low",
                1,
                0.1,
                MemoryStatus::Active,
                MemoryType::Episodic,
            ),
            memory(
                "old-low-archived",
                100,
                0.1,
                MemoryStatus::Archived,
                MemoryType::Episodic,
            ),
            memory(
                "old-low-fact",
                100,
                0.1,
                MemoryStatus::Active,
                MemoryType::Semantic,
            ),
        ];
        let ids = |found: Vec<MemoryId>| found.into_iter().map(|i| i.0).collect::<Vec<_>>();
        let old_and_unimportant = PruneCriteria {
            older_than: Some(Duration::days(30)),
            importance_below: Some(0.5),
            ..PruneCriteria::default()
        };
        assert_eq!(
            ids(prune_plan(
                &memories,
                &old_and_unimportant,
                PruneAction::Archive,
                now
            )),
            ["old-low", "old-low-fact"]
        );
        assert_eq!(
            ids(prune_plan(
                &memories,
                &old_and_unimportant,
                PruneAction::Delete,
                now
            )),
            ["old-low", "old-low-archived", "old-low-fact"]
        );
        let episodes = PruneCriteria {
            memory_type: Some(MemoryType::Episodic),
            status: Some(MemoryStatus::Archived),
            ..PruneCriteria::default()
        };
        assert_eq!(
            ids(prune_plan(&memories, &episodes, PruneAction::Delete, now)),
            ["old-low-archived"]
        );
        assert!(PruneCriteria::default().is_empty());
    }
}

//! Erase as an operation (`DELETE /v1/agents/{agent}`, `DELETE /v1/tenants/{tenant}`,
//! `mnemos erase`): everything an agent (or every agent of a tenant) owns, from every
//! store, with a report per store and an entry in the audit log. Only admins erase: an
//! admin of a tenant erases that tenant's agents; a whole tenant only the server admin.

use chrono::Utc;
use mnemos_actors::error::{MemoryError, MemoryResult};
use mnemos_actors::model::{AgentId, TenantId};
use mnemos_actors::runtime::EraseReport;
use mnemos_actors::Runtime;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::auth::keys::KeyStore;
use crate::auth::{Caller, Scope, DEFAULT_TENANT};

/// What the system of record removed, by kind of record.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ErasedRecordsView {
    /// Memories (every status).
    pub memories: u64,
    /// Their archived versions.
    pub versions: u64,
    /// Their stored embeddings.
    pub embeddings: u64,
    /// Associations from or to them.
    pub edges: u64,
    /// Sessions.
    pub sessions: u64,
    /// Messages of those sessions.
    pub session_messages: u64,
    /// Projects.
    pub projects: u64,
    /// Consolidation and archival runs.
    pub runs: u64,
    /// KV entries the agent wrote.
    pub kv_entries: u64,
    /// Entities its memories named (and every mention of them).
    pub entities: u64,
    /// Claims of facts its memories made.
    pub facts: u64,
    /// Merges of its entities (the merge history).
    pub entity_merges: u64,
}

/// What erasing one agent removed, per store.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct EraseResponse {
    /// The agent erased (as the caller names it).
    pub agent_id: String,
    /// Its tenant.
    pub tenant: String,
    /// The system of record (SQLite or PostgreSQL).
    pub system_of_record: ErasedRecordsView,
    /// Entries removed from the in-process vector index.
    pub vector_index: u64,
    /// Working-memory items cleared (in-process or Redis).
    pub working_memory: u64,
    /// Deletions queued in the outbox for the projections (Qdrant, FalkorDB, Neo4j),
    /// applied by the projector within its interval.
    pub projection_deletes_queued: u64,
}

impl EraseResponse {
    /// The answer for `report`.
    fn of(report: EraseReport) -> Self {
        let r = report.system_of_record;
        Self {
            agent_id: report.agent_id.local().to_string(),
            tenant: report
                .agent_id
                .tenant()
                .unwrap_or(DEFAULT_TENANT)
                .to_string(),
            system_of_record: ErasedRecordsView {
                memories: r.memories,
                versions: r.versions,
                embeddings: r.embeddings,
                edges: r.edges,
                sessions: r.sessions,
                session_messages: r.session_messages,
                projects: r.projects,
                runs: r.runs,
                kv_entries: r.kv_entries,
                entities: r.entities,
                facts: r.facts,
                entity_merges: r.entity_merges,
            },
            vector_index: report.vector_index,
            working_memory: report.working_memory,
            projection_deletes_queued: report.projection_deletes_queued,
        }
    }
}

/// What erasing a tenant removed.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TenantEraseResponse {
    /// The tenant erased.
    pub tenant: String,
    /// Each of its agents' erasure.
    pub agents: Vec<EraseResponse>,
    /// Its API keys, revoked.
    pub keys_revoked: u64,
}

/// Erase one agent of the caller's tenant.
pub async fn erase_agent(
    runtime: &Runtime,
    keys: &dyn KeyStore,
    caller: &Caller,
    agent: &str,
) -> MemoryResult<EraseResponse> {
    caller.require(Scope::Admin)?;
    let agent = caller.agent("agent", Some(agent))?;
    let report = EraseResponse::of(runtime.erase_agent(&agent).await?);
    super::keys::audit(
        keys,
        caller,
        "erase.agent",
        Some(report.agent_id.clone()),
        serde_json::to_value(&report).unwrap_or_default(),
        Utc::now(),
    )
    .await;
    Ok(report)
}

/// Erase every agent of `tenant` and revoke its keys (the server admin only).
pub async fn erase_tenant(
    runtime: &Runtime,
    keys: &dyn KeyStore,
    caller: &Caller,
    tenant: &str,
) -> MemoryResult<TenantEraseResponse> {
    caller.require(Scope::Admin)?;
    if caller.tenant.is_some() || caller.agent.is_some() {
        return Err(crate::auth::denied(
            "only the server's admin (tenant default, every agent) erases a tenant",
        ));
    }
    let tenant = TenantId::parse(tenant).map_err(|mut e| {
        e.field = Some("tenant".into());
        e
    })?;
    let qualified = Caller::tenant_of(&tenant);
    let wanted = qualified.as_ref().map(|t| t.as_str());
    let agents: Vec<AgentId> = runtime
        .agents()
        .await?
        .into_iter()
        .filter(|a| a.tenant() == wanted)
        .collect();
    let mut erased = Vec::with_capacity(agents.len());
    for agent in &agents {
        erased.push(EraseResponse::of(runtime.erase_agent(agent).await?));
    }
    let now = Utc::now();
    let mut revoked = 0u64;
    for key in keys.keys(Some(&tenant)).await? {
        if key.revoked_at.is_none() && keys.revoke_key(&key.id, now).await? {
            revoked += 1;
        }
    }
    let answer = TenantEraseResponse {
        tenant: tenant.to_string(),
        agents: erased,
        keys_revoked: revoked,
    };
    super::keys::audit(
        keys,
        caller,
        "erase.tenant",
        Some(tenant.to_string()),
        serde_json::json!({
            "agents": answer.agents.iter().map(|a| a.agent_id.clone()).collect::<Vec<_>>(),
            "keys_revoked": revoked,
        }),
        now,
    )
    .await;
    if answer.agents.is_empty() && revoked == 0 {
        return Err(MemoryError::not_found(format!(
            "tenant {tenant} has no agents with memories and no keys"
        )));
    }
    Ok(answer)
}

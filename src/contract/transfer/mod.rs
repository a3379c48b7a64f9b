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

mod import;
mod lines;

pub use import::{import, ImportParams, ImportReport, InvalidLine};
pub use lines::*;

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

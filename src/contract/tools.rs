//! The memory tools of the contract, one function per tool: a parsed wire request in,
//! the wire response out. REST, MCP, the proxy and the CLI all call these, so the
//! surfaces cannot drift apart.

use mnemos_actors::error::{MemoryError, MemoryResult};
use mnemos_actors::model::{AgentId, MemoryId};
use mnemos_actors::runtime::{ForgetTarget, RecallInput};
use mnemos_actors::Runtime;

use super::parse::{memory_types, project, reference_time, session, time_query};
use super::wire::*;
use crate::auth::{Caller, Scope};

/// Store one memory.
pub async fn remember(
    runtime: &Runtime,
    caller: &Caller,
    body: RememberBody,
) -> MemoryResult<RememberResponse> {
    caller.require(Scope::Write)?;
    let (agent_id, item) = body.into_parts();
    let agent = caller.agent("agent_id", agent_id.as_deref())?;
    let mut input = item.into_input("")?;
    input.metadata = caller.with_provenance(
        input.metadata.take(),
        input.session_id.as_ref().map(|s| s.as_str()),
    );
    let outcome = runtime.remember(&agent, input).await?;
    Ok(outcome.into())
}

/// Store several memories atomically.
pub async fn remember_batch(
    runtime: &Runtime,
    caller: &Caller,
    body: RememberBatchBody,
) -> MemoryResult<RememberBatchResponse> {
    caller.require(Scope::Write)?;
    caller.spend_writes(body.memories.len().saturating_sub(1))?;
    let agent = caller.agent("agent_id", body.agent_id.as_deref())?;
    let inputs = body
        .memories
        .into_iter()
        .enumerate()
        .map(|(index, item)| {
            let mut input = item.into_input(&format!("memories[{index}]."))?;
            input.metadata = caller.with_provenance(
                input.metadata.take(),
                input.session_id.as_ref().map(|s| s.as_str()),
            );
            Ok(input)
        })
        .collect::<MemoryResult<Vec<_>>>()?;
    let outcomes = runtime.remember_batch(&agent, inputs).await?;
    Ok(RememberBatchResponse {
        results: outcomes.into_iter().map(Into::into).collect(),
    })
}

/// Mine one user/assistant exchange for memories worth keeping and store them (within
/// `extraction.max_memories_per_turn`).
pub async fn extract_turn(
    runtime: &Runtime,
    caller: &Caller,
    body: ExtractTurnBody,
) -> MemoryResult<ExtractTurnResponse> {
    caller.require(Scope::Write)?;
    let agent = caller.agent("agent_id", body.agent_id.as_deref())?;
    let session_id = session("session_id", body.session_id.as_deref())?;
    let budget = runtime.config().extraction_max_per_turn;
    caller.spend_session_writes(
        session_id.as_ref().map_or("", |s| s.as_str()),
        budget.max(1),
    )?;
    let outcomes = runtime
        .extract_turn(
            &agent,
            &body.user,
            &body.assistant,
            session_id.clone(),
            budget,
            caller.with_provenance(None, session_id.as_ref().map(|s| s.as_str())),
        )
        .await?;
    Ok(ExtractTurnResponse {
        stored: outcomes.into_iter().map(|o| o.memory.into()).collect(),
    })
}

/// Recall the memories that matter for a query.
pub async fn recall(
    runtime: &Runtime,
    caller: &Caller,
    body: RecallBody,
) -> MemoryResult<RecallResponse> {
    caller.require(Scope::Read)?;
    let agent = caller.agent("agent_id", body.agent_id.as_deref())?;
    let requested_now = reference_time(body.now)?;
    let now = requested_now.unwrap_or_else(|| runtime.now());
    let debug = body.debug.unwrap_or(false);
    let time_range = time_query(body.time_query.as_deref(), now)?;
    let types = memory_types("type", &body.types.map(|t| t.0).unwrap_or_default())?;
    let session_id = session("session_id", body.session_id.as_deref())?;
    let min_score = super::parse::min_score(body.min_score)?;
    let limit = body.limit.unwrap_or(10);
    let as_of = body
        .as_of
        .as_deref()
        .map(|raw| super::entities::as_of_range(raw, now))
        .transpose()?;
    let outcome = runtime
        .recall(RecallInput {
            agent_id: agent.clone(),
            query: body.query,
            types,
            limit: body.limit,
            session_id,
            tags: body.tags.unwrap_or_default(),
            include_shared: body.include_shared.unwrap_or(true),
            debug,
            time_range,
            now: requested_now,
            project_id: project("project_id", body.project_id.as_deref())?,
            as_of,
        })
        .await?;
    metrics::histogram!("mnemos_recall_server_seconds").record(outcome.took_ms / 1000.0);
    let held = outcome.facts.clone();
    let mut response = RecallResponse::from_outcome(outcome, debug, limit, min_score);
    if as_of.is_some() {
        response.facts = Some(super::entities::fact_views(runtime, &agent, held).await?);
    }
    Ok(response)
}

/// Assemble a ready-to-inject context block within a token budget; a `project_root`
/// must be a directory `roots` admits.
pub async fn build_context(
    runtime: &Runtime,
    caller: &Caller,
    roots: &crate::context::ProjectRoots,
    body: BuildContextBody,
) -> MemoryResult<BuildContextResponse> {
    caller.require(Scope::Read)?;
    let agent = caller.agent("agent_id", body.agent_id.as_deref())?;
    let budget = body.context_budget.unwrap_or(2000);
    if !(1..=1_000_000).contains(&budget) {
        return Err(MemoryError::invalid(
            "context_budget",
            "context_budget must be between 1 and 1000000 tokens",
        ));
    }
    // Resolving the root touches the file system: off the async workers.
    let root = match body.project_root.clone() {
        Some(root) => {
            let roots = roots.clone();
            let admitted =
                tokio::task::spawn_blocking(move || roots.admit(std::path::Path::new(&root)))
                    .await
                    .map_err(|error| {
                        MemoryError::internal(format!("project_root check failed: {error}"))
                    })?;
            Some(admitted?)
        }
        None => None,
    };
    let session_id = session("session_id", body.session_id.as_deref())?;
    let outcome = runtime
        .recall(RecallInput {
            limit: Some(runtime.config().limits.max_result_limit.min(50)),
            session_id,
            include_shared: body.include_shared.unwrap_or(true),
            project_id: project("project_id", body.project_id.as_deref())?,
            ..RecallInput::new(agent, body.query)
        })
        .await?;
    // Hashing files is blocking IO: off the async workers, all checks in one task.
    let hits = outcome.hits;
    let (hits, stale): (Vec<_>, Vec<bool>) = tokio::task::spawn_blocking(move || {
        let mut check = root.map(crate::context::FileCheck::new);
        let stale = hits
            .iter()
            .map(|hit| match (&mut check, &hit.memory.source) {
                (Some(check), Some(source)) => check.is_stale(source),
                _ => false,
            })
            .collect();
        (hits, stale)
    })
    .await
    .map_err(|error| MemoryError::internal(format!("file check failed: {error}")))?;
    let mut stale_files: Vec<String> = Vec::new();
    let mut ranked: Vec<(mnemos_actors::model::Memory, f64)> = Vec::new();
    for (hit, stale) in hits.into_iter().zip(stale) {
        match (&hit.memory.source, stale) {
            (Some(source), true) => {
                if !stale_files.contains(&source.path) {
                    stale_files.push(source.path.clone());
                }
            }
            _ => ranked.push((hit.memory, hit.score)),
        }
    }
    let untrusted = runtime.config().screening.untrusted;
    let block = mnemos_actors::policy::context::assemble(&ranked, budget, untrusted);
    Ok(BuildContextResponse {
        context: block.text,
        metadata: ContextMetadata {
            injected_count: block.injected,
            tokens_used: block.tokens_used,
            stale_files,
            untrusted_fenced: block.fenced,
            untrusted_withheld: block.withheld,
            sections: block
                .sections
                .into_iter()
                .map(|s| ContextSectionView {
                    name: s.name,
                    tokens: s.tokens,
                    memories: s.memories,
                })
                .collect(),
        },
    })
}

/// Link two memories.
pub async fn associate(
    runtime: &Runtime,
    caller: &Caller,
    body: AssociateBody,
) -> MemoryResult<AssociationView> {
    caller.require(Scope::Write)?;
    let agent = caller.agent("agent_id", body.agent_id.as_deref())?;
    let edge = runtime
        .associate(
            &agent,
            &MemoryId(body.from_id),
            &MemoryId(body.to_id),
            body.relation,
            body.weight,
        )
        .await?;
    Ok(edge.into())
}

/// Spread activation from a memory through its associations.
pub async fn spreading_activation(
    runtime: &Runtime,
    caller: &Caller,
    body: SpreadingActivationBody,
) -> MemoryResult<SpreadingActivationResponse> {
    caller.require(Scope::Read)?;
    let agent = caller.agent("agent_id", body.agent_id.as_deref())?;
    let activated = runtime
        .spreading_activation(
            &agent,
            &MemoryId(body.seed_id),
            body.depth.unwrap_or(2),
            body.limit.unwrap_or(10),
        )
        .await?;
    Ok(SpreadingActivationResponse {
        results: activated
            .into_iter()
            .map(|a| ActivationResult {
                memory: a.memory.into(),
                activation: a.activation,
                path: a.path.into_iter().map(|id| id.0).collect(),
            })
            .collect(),
    })
}

/// Forget (archive) a memory or the memories matching a query.
pub async fn forget(
    runtime: &Runtime,
    caller: &Caller,
    body: ForgetBody,
) -> MemoryResult<ForgetResponse> {
    caller.require(Scope::Write)?;
    let agent = caller.agent("agent_id", body.agent_id.as_deref())?;
    let min_score = super::parse::min_score(body.min_score)?;
    let target = match (body.id, body.query) {
        (Some(_), None) if min_score.is_some() => {
            return Err(MemoryError::invalid(
                "min_score",
                "min_score applies to a query; forgetting by id takes no threshold",
            ))
        }
        (Some(id), None) => ForgetTarget::Id(MemoryId(id)),
        (None, Some(text)) => ForgetTarget::Query {
            text,
            limit: body.limit.unwrap_or(10),
            min_score,
        },
        (Some(_), Some(_)) => {
            return Err(MemoryError::invalid(
                "id",
                "give either id or query, not both",
            ))
        }
        (None, None) => {
            return Err(MemoryError::invalid(
                "id",
                "give the id of a memory, or a query",
            ))
        }
    };
    let dry_run = body.dry_run.unwrap_or(false);
    let matches = runtime.forget(&agent, target, dry_run).await?;
    Ok(ForgetResponse {
        forgotten: matches.iter().map(|found| found.id.0.clone()).collect(),
        matches: matches.into_iter().map(Into::into).collect(),
        dry_run,
    })
}

/// Run a consolidation pass (sleep cycle) for an agent now; `trigger` names the surface.
pub async fn consolidate(
    runtime: &Runtime,
    caller: &Caller,
    body: AgentBody,
    trigger: &str,
) -> MemoryResult<RunView> {
    caller.require(Scope::Write)?;
    let agent = caller.agent("agent_id", body.agent_id.as_deref())?;
    Ok(runtime.consolidate(&agent, trigger).await?.into())
}

/// Statistics of an agent's memories.
pub async fn reflect(
    runtime: &Runtime,
    caller: &Caller,
    body: AgentBody,
) -> MemoryResult<ReflectResponse> {
    caller.require(Scope::Read)?;
    let agent = caller.agent("agent_id", body.agent_id.as_deref())?;
    let stats = runtime.reflect(&agent).await?;
    Ok(ReflectResponse::new(&agent, stats))
}

/// Version history of a memory (its owner must be named, or be the key's agent).
pub async fn memory_history(
    runtime: &Runtime,
    caller: &Caller,
    body: HistoryBody,
) -> MemoryResult<HistoryResponse> {
    caller.require(Scope::Read)?;
    let owner = caller.owner("agent_id", body.agent_id.as_deref())?;
    history_of(runtime, &owner, body.id).await
}

/// Version history of a memory of `owner` by id, for the tool and the resource route.
pub async fn history_of(
    runtime: &Runtime,
    owner: &AgentId,
    id: String,
) -> MemoryResult<HistoryResponse> {
    let id = MemoryId(id);
    let versions = runtime.history(Some(owner), &id).await?;
    Ok(HistoryResponse {
        id: id.0,
        versions: versions.into_iter().map(Into::into).collect(),
    })
}

//! Entity reads: an agent's entities, and one entity with the memories that name it
//! and the entities named beside it. The index is a projection kept from the outbox
//! (`store::entities`), so a memory written a moment ago may not show yet.

use super::Runtime;
use crate::error::{MemoryError, MemoryResult};
use crate::model::{AgentId, Memory, MemoryStatus};
use crate::policy::facts::{timeline, Fact};
use crate::store::entities::{
    Entity, EntityIndex, EntityMentionRef, EntityMerge, EntityQuery, FactQuery,
};

/// Most claims of facts read for one answer.
const MAX_CLAIMS: usize = 20_000;

/// One entity with where it is named.
#[derive(Debug, Clone)]
pub struct EntityDetail {
    /// The entity.
    pub entity: Entity,
    /// The memories naming it, newest first, each with the mention.
    pub mentions: Vec<(Memory, EntityMentionRef)>,
    /// Entities named in the same memories, with how many memories they share.
    pub related: Vec<(Entity, u64)>,
    /// What is said of it over time (it is the subject), oldest first per attribute.
    pub facts: Vec<Fact>,
    /// Facts of other subjects whose value it is (relationships pointing at it).
    pub referenced_by: Vec<Fact>,
    /// Merges into it or of it, oldest first (undone ones included).
    pub merges: Vec<EntityMerge>,
    /// Other entities that may be the same one: their names' forms say so
    /// ([`crate::policy::aliases::may_name_the_same`]), with how alike the memories
    /// naming each are (cosine of their mean embeddings), most alike first. A person
    /// confirms with a merge; nothing is merged by this.
    pub possibly_same: Vec<SameCandidate>,
}

/// An entity that may be another one.
#[derive(Debug, Clone)]
pub struct SameCandidate {
    /// The other entity.
    pub entity: Entity,
    /// Why its name may be the same one's.
    pub reason: &'static str,
    /// Cosine of the mean embeddings of the memories naming each (up to 20 each).
    pub similarity: f64,
}

/// Most candidates of one entity.
const MAX_CANDIDATES: usize = 10;

/// Memories per entity whose embeddings make its context.
const CONTEXT_MEMORIES: usize = 20;

/// The entity index, or why there is none.
fn index(rt: &Runtime) -> MemoryResult<&dyn EntityIndex> {
    rt.inner.entities.as_deref().ok_or_else(|| {
        MemoryError::unavailable(
            "this runtime keeps no entity index (the in-memory store has none; SQLite and PostgreSQL do)",
        )
    })
}

/// A page of the agent's entities in key order.
pub(super) async fn entities(rt: &Runtime, query: &EntityQuery) -> MemoryResult<Vec<Entity>> {
    index(rt)?.entities(query).await
}

/// One entity of `agent` with its newest `limit` mentions and its related entities.
pub(super) async fn entity(
    rt: &Runtime,
    agent: &AgentId,
    id: &str,
    limit: usize,
) -> MemoryResult<EntityDetail> {
    let index = index(rt)?;
    let entity = index.entity(agent, id).await?.ok_or_else(|| MemoryError {
        field: Some("id".into()),
        ..MemoryError::not_found(format!("agent {agent} has no entity {id}"))
    })?;
    // One entry per memory: the first of its mentions (a memory may name it twice,
    // "Melanie (Mel)").
    let mut seen = std::collections::HashSet::new();
    let mentions: Vec<EntityMentionRef> = index
        .mentions(agent, id, limit * 2)
        .await?
        .into_iter()
        .filter(|m| seen.insert(m.memory_id.clone()))
        .take(limit)
        .collect();
    let ids: Vec<_> = mentions.iter().map(|m| m.memory_id.clone()).collect();
    let memories = rt.actors().episodic.get_many(&ids).await?;
    let by_id: std::collections::HashMap<_, _> =
        memories.into_iter().map(|m| (m.id.clone(), m)).collect();
    let mentions = mentions
        .into_iter()
        .filter_map(|mention| {
            // The index may trail a forget or a delete by the projector's lag.
            let memory = by_id.get(&mention.memory_id)?;
            (memory.status == MemoryStatus::Active && memory.agent_id == *agent)
                .then(|| (memory.clone(), mention))
        })
        .collect();
    let related = index.co_mentioned(agent, id, 20).await?;
    let facts = facts(rt, agent, Some(&entity.key), None, None).await?;
    let referenced_by = referenced_by(index, agent, &entity.key).await?;
    let merges = index.merges(agent, Some(&entity.key)).await?;
    let possibly_same = possibly_same(rt, index, agent, &entity).await?;
    Ok(EntityDetail {
        entity,
        mentions,
        related,
        facts,
        referenced_by,
        merges,
        possibly_same,
    })
}

/// The mean of the stored embeddings of the memories naming entity `id` (normalised;
/// None when none has one).
async fn context_of(
    rt: &Runtime,
    index: &dyn EntityIndex,
    agent: &AgentId,
    id: &str,
) -> MemoryResult<Option<Vec<f32>>> {
    let ids: Vec<_> = index
        .mentions(agent, id, CONTEXT_MEMORIES * 2)
        .await?
        .into_iter()
        .map(|m| m.memory_id)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .take(CONTEXT_MEMORIES)
        .collect();
    let vectors = rt.actors().episodic.embeddings_of(&ids).await?;
    let Some(dimension) = vectors.first().map(|(_, v)| v.len()) else {
        return Ok(None);
    };
    let mut mean = vec![0.0f32; dimension];
    for (_, vector) in vectors.iter().filter(|(_, v)| v.len() == dimension) {
        for (sum, x) in mean.iter_mut().zip(vector) {
            *sum += x;
        }
    }
    crate::embedding::l2_normalize(&mut mean);
    Ok(Some(mean))
}

/// The agent's entities whose names may be `entity`'s (found by searching the index
/// for the first letters of each of its words), with how alike their contexts are.
async fn possibly_same(
    rt: &Runtime,
    index: &dyn EntityIndex,
    agent: &AgentId,
    entity: &Entity,
) -> MemoryResult<Vec<SameCandidate>> {
    use crate::policy::entities::EntityKind;
    let mut probes: Vec<String> = entity
        .key
        .split_whitespace()
        .map(|w| {
            w.chars()
                .filter(|c| c.is_alphanumeric())
                .take(3)
                .collect::<String>()
        })
        .filter(|w| w.chars().count() >= 2)
        .collect();
    probes.sort();
    probes.dedup();
    let specific = |kind: EntityKind| !matches!(kind, EntityKind::Name);
    let mut found: Vec<(Entity, &'static str)> = Vec::new();
    for probe in probes.into_iter().take(4) {
        let page = index
            .entities(&crate::store::entities::EntityQuery {
                agent_id: Some(agent.clone()),
                search: Some(probe),
                kind: None,
                after_key: None,
                limit: 200,
            })
            .await?;
        for other in page {
            let kinds_agree =
                other.kind == entity.kind || !specific(other.kind) || !specific(entity.kind);
            if other.id == entity.id || !kinds_agree || found.iter().any(|(e, _)| e.id == other.id)
            {
                continue;
            }
            if let Some(reason) = crate::policy::aliases::may_name_the_same(&entity.key, &other.key)
            {
                found.push((other, reason));
            }
        }
    }
    if found.is_empty() {
        return Ok(Vec::new());
    }
    let own = context_of(rt, index, agent, &entity.id).await?;
    let mut out = Vec::new();
    for (other, reason) in found.into_iter().take(MAX_CANDIDATES * 2) {
        let theirs = context_of(rt, index, agent, &other.id).await?;
        let similarity = match (&own, &theirs) {
            (Some(a), Some(b)) => f64::from(crate::embedding::dot(a, b)),
            _ => 0.0,
        };
        out.push(SameCandidate {
            entity: other,
            reason,
            similarity,
        });
    }
    out.sort_by(|a, b| {
        b.similarity
            .total_cmp(&a.similarity)
            .then_with(|| a.entity.key.cmp(&b.entity.key))
    });
    out.truncate(MAX_CANDIDATES);
    Ok(out)
}

/// Merge entity `id` of `agent` into entity `into` (see [`EntityIndex::merge`]).
pub(super) async fn merge(
    rt: &Runtime,
    agent: &AgentId,
    id: &str,
    into: &str,
) -> MemoryResult<EntityMerge> {
    index(rt)?.merge(agent, id, into, rt.now()).await
}

/// Undo the merge of `alias` into entity `id` of `agent` (see [`EntityIndex::split`]).
pub(super) async fn split(
    rt: &Runtime,
    agent: &AgentId,
    id: &str,
    alias: &str,
) -> MemoryResult<EntityMerge> {
    index(rt)?.split(agent, id, alias, rt.now()).await
}

/// Give entity `id`'s name its own entity in `project`'s memories (see
/// [`EntityIndex::split_project`]); the project must be the agent's.
pub(super) async fn split_project(
    rt: &Runtime,
    agent: &AgentId,
    id: &str,
    project: &crate::projects::ProjectId,
) -> MemoryResult<EntityMerge> {
    rt.project(agent, project)
        .await
        .map_err(|error| MemoryError {
            field: Some("project_id".into()),
            ..error
        })?;
    index(rt)?
        .split_project(agent, id, project.as_str(), rt.now())
        .await
}

/// The keys among `candidates` that are entities of `agent`.
pub(super) async fn known_keys(
    rt: &Runtime,
    agent: &AgentId,
    candidates: &[String],
) -> MemoryResult<Vec<String>> {
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    index(rt)?.known_keys(agent, candidates).await
}

/// The agent's facts with validity windows (see [`crate::policy::facts::timeline`]).
pub(super) async fn facts(
    rt: &Runtime,
    agent: &AgentId,
    subject_key: Option<&str>,
    attribute: Option<&str>,
    during: Option<&crate::policy::time::TimeRange>,
) -> MemoryResult<Vec<Fact>> {
    let index = index(rt)?;
    // A merged alias asks about the entity it stands for.
    let subject_key = match subject_key {
        Some(key) => Some(
            index
                .known_keys(agent, &[key.to_string()])
                .await?
                .pop()
                .unwrap_or_else(|| key.to_string()),
        ),
        None => None,
    };
    let claims = index
        .fact_claims(&FactQuery {
            agent_id: agent.clone(),
            subject_key,
            attribute: attribute.map(str::to_string),
            value_key: None,
            limit: MAX_CLAIMS,
        })
        .await?;
    let mut facts = timeline(&claims);
    if let Some(range) = during {
        facts.retain(|fact| fact.valid_during(range.start, range.end));
    }
    Ok(facts)
}

/// Facts of other subjects whose value is the entity `key`: every claim of each
/// (subject, attribute) that once named it is read, so the windows are whole.
async fn referenced_by(
    index: &dyn EntityIndex,
    agent: &AgentId,
    key: &str,
) -> MemoryResult<Vec<Fact>> {
    let naming = index
        .fact_claims(&FactQuery {
            agent_id: agent.clone(),
            subject_key: None,
            attribute: None,
            value_key: Some(key.to_string()),
            limit: 200,
        })
        .await?;
    let mut groups: Vec<(String, String)> = naming
        .into_iter()
        .filter(|claim| claim.value_is_entity && claim.subject_key != key)
        .map(|claim| (claim.subject_key, claim.attribute))
        .collect();
    groups.sort();
    groups.dedup();
    let mut out = Vec::new();
    for (subject_key, attribute) in groups.into_iter().take(50) {
        let claims = index
            .fact_claims(&FactQuery {
                agent_id: agent.clone(),
                subject_key: Some(subject_key),
                attribute: Some(attribute),
                value_key: None,
                limit: MAX_CLAIMS,
            })
            .await?;
        out.extend(
            timeline(&claims)
                .into_iter()
                .filter(|fact| fact.value_key == key),
        );
    }
    Ok(out)
}

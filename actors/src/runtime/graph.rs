//! Association-graph operations: `associate` and `spreading_activation`, and recall's
//! one-hop neighbours (association edges and session neighbours).

use std::collections::HashMap;

use super::projected::ReadSource;
use super::validate::{self, with_field};
use super::Runtime;
use crate::error::{MemoryError, MemoryResult};
use crate::model::{AgentId, Association, Memory, MemoryId, MemoryStatus};
use crate::policy::fusion::NeighbourLink;
use crate::policy::recall::neighbour_links;

/// One node reached by spreading activation.
#[derive(Debug, Clone, PartialEq)]
pub struct ActivatedMemory {
    /// The memory.
    pub memory: Memory,
    /// Activation in 0..1.
    pub activation: f64,
    /// Ids from the seed to it.
    pub path: Vec<MemoryId>,
}

/// A memory's neighbourhood in the association graph, for drawing it.
#[derive(Debug, Clone, PartialEq)]
pub struct Neighbourhood {
    /// The memories reached with their hop distance from the seed (the seed at 0),
    /// nearest first.
    pub nodes: Vec<(Memory, u32)>,
    /// The edges between those memories.
    pub edges: Vec<Association>,
}

/// One association of a memory, with the memory at its other end.
#[derive(Debug, Clone, PartialEq)]
pub struct AssociationOf {
    /// The edge.
    pub edge: Association,
    /// The memory at the other end.
    pub other: Memory,
}

/// The associations of `id` (owned by `agent`), strongest first, from the SQL graph
/// (the system of record).
pub(super) async fn associations(
    rt: &Runtime,
    agent: &AgentId,
    id: &MemoryId,
) -> MemoryResult<Vec<AssociationOf>> {
    rt.get(Some(agent), id).await?;
    let mut edges = rt
        .actors()
        .graph
        .around(agent, std::slice::from_ref(id), 1, 1000)
        .await?;
    edges.retain(|e| e.from_id == *id || e.to_id == *id);
    edges.sort_by(|a, b| {
        b.weight
            .total_cmp(&a.weight)
            .then_with(|| a.to_id.cmp(&b.to_id))
    });
    let others: Vec<MemoryId> = edges
        .iter()
        .map(|e| {
            if e.from_id == *id {
                e.to_id.clone()
            } else {
                e.from_id.clone()
            }
        })
        .collect();
    let memories = rt.actors().episodic.get_many(&others).await?;
    let by_id: HashMap<&MemoryId, &Memory> = memories.iter().map(|m| (&m.id, m)).collect();
    Ok(edges
        .into_iter()
        .zip(others.iter())
        .filter_map(|(edge, other)| {
            by_id.get(other).map(|memory| AssociationOf {
                edge,
                other: (*memory).clone(),
            })
        })
        .collect())
}

/// The memories within `depth` hops of `seed` (at most `limit`, the seed included) and
/// the edges between them, from the SQL graph.
pub(super) async fn neighbourhood(
    rt: &Runtime,
    agent: &AgentId,
    seed: &MemoryId,
    depth: u32,
    limit: usize,
) -> MemoryResult<Neighbourhood> {
    if !(1..=4).contains(&depth) {
        return Err(MemoryError::invalid(
            "depth",
            "depth must be between 1 and 4",
        ));
    }
    if !(1..=1000).contains(&limit) {
        return Err(MemoryError::invalid(
            "limit",
            "limit must be between 1 and 1000",
        ));
    }
    rt.get(Some(agent), seed).await?;
    let edges = rt
        .actors()
        .graph
        .around(agent, std::slice::from_ref(seed), depth, limit * 8)
        .await?;
    let reached = crate::policy::activation::hop_distances(seed, &edges, limit);
    let ids: Vec<MemoryId> = reached.iter().map(|(id, _)| id.clone()).collect();
    let memories = rt.actors().episodic.get_many(&ids).await?;
    let by_id: HashMap<&MemoryId, &Memory> = memories.iter().map(|m| (&m.id, m)).collect();
    let nodes: Vec<(Memory, u32)> = reached
        .iter()
        .filter_map(|(id, hops)| by_id.get(id).map(|m| ((*m).clone(), *hops)))
        .collect();
    let kept: std::collections::HashSet<&MemoryId> = nodes.iter().map(|(m, _)| &m.id).collect();
    let edges = edges
        .iter()
        .filter(|e| kept.contains(&e.from_id) && kept.contains(&e.to_id))
        .cloned()
        .collect();
    Ok(Neighbourhood { nodes, edges })
}

/// Link two memories of the same agent.
pub(super) async fn associate(
    rt: &Runtime,
    agent: &AgentId,
    from: &MemoryId,
    to: &MemoryId,
    relation: Option<String>,
    weight: Option<f32>,
) -> MemoryResult<Association> {
    if from == to {
        return Err(MemoryError::invalid(
            "to_id",
            "a memory cannot be associated with itself",
        ));
    }
    let relation = relation.unwrap_or_else(|| "related_to".to_string());
    if relation.is_empty()
        || relation.len() > 64
        || !relation
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return Err(MemoryError::invalid(
            "relation",
            "relation must be 1 to 64 characters of letters, digits and _",
        ));
    }
    let weight = weight.unwrap_or(0.5);
    if !(0.0..=1.0).contains(&weight) || weight.is_nan() {
        return Err(MemoryError::invalid(
            "weight",
            "weight must be between 0 and 1",
        ));
    }
    rt.get(Some(agent), from)
        .await
        .map_err(|e| with_field(e, "from_id"))?;
    rt.get(Some(agent), to)
        .await
        .map_err(|e| with_field(e, "to_id"))?;
    let edge = Association {
        agent_id: agent.clone(),
        from_id: from.clone(),
        to_id: to.clone(),
        relation,
        weight,
        created_at: rt.now(),
    };
    rt.actors().graph.upsert(&edge).await
}

/// Spread activation from a seed memory through the association graph (decay 0.8 per
/// hop), from the graph projection when it is caught up, else over SQL edges.
pub(super) async fn spreading_activation(
    rt: &Runtime,
    agent: &AgentId,
    seed: &MemoryId,
    depth: u32,
    limit: usize,
) -> MemoryResult<Vec<ActivatedMemory>> {
    if !(1..=5).contains(&depth) {
        return Err(MemoryError::invalid(
            "depth",
            "depth must be between 1 and 5",
        ));
    }
    validate::limit(&rt.inner.config.limits, limit)?;
    let seed_memory = rt
        .get(Some(agent), seed)
        .await
        .map_err(|e| with_field(e, "seed_id"))?;
    let (activations, source) = rt.activate(agent, seed, depth, 0.8, limit * 2).await;
    tracing::debug!(answered_by = %source.answered_by, "spreading activation");
    let activations = activations?;
    let ids: Vec<MemoryId> = activations.iter().map(|a| a.id.clone()).collect();
    let memories = rt.actors().episodic.get_many(&ids).await?;
    // Activation does not carry an isolated project's memories out of it: from a seed
    // outside that project they are not returned (paths through them still count).
    let isolated = rt.isolated_among(&memories).await?;
    let by_id: HashMap<&MemoryId, &Memory> = memories.iter().map(|m| (&m.id, m)).collect();
    Ok(activations
        .into_iter()
        .filter_map(|a| {
            let memory = by_id.get(&a.id)?;
            let walled_off = memory.project_id != seed_memory.project_id
                && memory
                    .project_id
                    .as_ref()
                    .is_some_and(|p| isolated.contains(&(memory.agent_id.clone(), p.clone())));
            (memory.status == MemoryStatus::Active && !walled_off).then(|| ActivatedMemory {
                memory: (*memory).clone(),
                activation: a.activation,
                path: a.path,
            })
        })
        .take(limit)
        .collect())
}

impl Runtime {
    /// (seed, neighbour) pairs of the seeds' session neighbours: from the vector actor's
    /// in-process session order, or from the system of record while that loads.
    async fn session_neighbours(
        &self,
        seeds: &[Memory],
        radius: usize,
    ) -> MemoryResult<Vec<(MemoryId, MemoryId)>> {
        let actors = self.actors();
        match actors.vectors.session_neighbours(seeds, radius).await? {
            Some(pairs) => Ok(pairs),
            None => actors.episodic.session_neighbours(seeds, radius).await,
        }
    }

    /// Links from `seeds` (memories already read, so their sessions need no read) to
    /// their association-graph neighbours and to the turns next to them in their sessions.
    pub(super) async fn neighbours(
        &self,
        agent: &AgentId,
        seeds: &[Memory],
        radius: usize,
    ) -> (MemoryResult<Vec<NeighbourLink>>, ReadSource) {
        let ids: Vec<MemoryId> = seeds.iter().map(|m| m.id.clone()).collect();
        let ((edges, source), in_session) = tokio::join!(
            self.links_around(agent, &ids, 200),
            self.session_neighbours(seeds, radius),
        );
        let links = match (edges, in_session) {
            (Ok(edges), Ok(in_session)) => Ok(neighbour_links(&ids, &edges, in_session)),
            (Err(error), _) | (_, Err(error)) => Err(error),
        };
        (links, source)
    }

    /// [`Self::neighbours`] of seeds named by id alone, before they are read: each in
    /// the session the vector actor's session order files it under, which comes back
    /// per seed (to be checked against the seeds once read). `None` while that order
    /// loads.
    pub(super) async fn neighbours_by_id(
        &self,
        agent: &AgentId,
        ids: &[MemoryId],
        radius: usize,
    ) -> (
        MemoryResult<Option<(Vec<NeighbourLink>, Vec<Option<String>>)>>,
        ReadSource,
    ) {
        let ((edges, source), in_session) = tokio::join!(
            self.links_around(agent, ids, 200),
            self.actors().vectors.filed_session_neighbours(ids, radius),
        );
        let links = match (edges, in_session) {
            (Ok(edges), Ok(Some(filed))) => Ok(Some((
                neighbour_links(ids, &edges, filed.pairs),
                filed.sessions,
            ))),
            (Ok(_), Ok(None)) => Ok(None),
            (Err(error), _) | (_, Err(error)) => Err(error),
        };
        (links, source)
    }
}

//! The association graph in a vector of edges.

use std::collections::HashSet;
use std::sync::RwLock;

use async_trait::async_trait;

use super::lock_error;
use crate::error::MemoryResult;
use crate::model::{AgentId, Association, MemoryId};
use crate::store::GraphStore;

/// A [`GraphStore`] in a vector of edges.
#[derive(Debug, Default)]
pub struct InMemoryGraphStore {
    /// Every edge.
    edges: RwLock<Vec<Association>>,
}

impl InMemoryGraphStore {
    /// An empty graph.
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl GraphStore for InMemoryGraphStore {
    fn backend_name(&self) -> &'static str {
        "memory"
    }

    async fn upsert_edge(&self, edge: &Association) -> MemoryResult<Association> {
        let mut edges = self.edges.write().map_err(lock_error)?;
        if let Some(existing) = edges.iter_mut().find(|e| {
            e.from_id == edge.from_id && e.to_id == edge.to_id && e.relation == edge.relation
        }) {
            existing.weight = edge.weight;
            return Ok(existing.clone());
        }
        edges.push(edge.clone());
        Ok(edge.clone())
    }

    async fn edges_around(
        &self,
        agent: &AgentId,
        seeds: &[MemoryId],
        depth: u32,
        max_edges: usize,
    ) -> MemoryResult<Vec<Association>> {
        let edges = self.edges.read().map_err(lock_error)?;
        let mut frontier: HashSet<MemoryId> = seeds.iter().cloned().collect();
        let mut visited = frontier.clone();
        let mut taken: Vec<Association> = Vec::new();
        let mut taken_keys = HashSet::new();
        for _ in 0..depth {
            let mut next = HashSet::new();
            for edge in edges.iter().filter(|e| e.agent_id == *agent) {
                if frontier.contains(&edge.from_id) || frontier.contains(&edge.to_id) {
                    let key = (
                        edge.from_id.clone(),
                        edge.to_id.clone(),
                        edge.relation.clone(),
                    );
                    if taken_keys.insert(key) {
                        taken.push(edge.clone());
                        if taken.len() >= max_edges {
                            return Ok(taken);
                        }
                    }
                    for id in [&edge.from_id, &edge.to_id] {
                        if visited.insert(id.clone()) {
                            next.insert(id.clone());
                        }
                    }
                }
            }
            frontier = next;
        }
        Ok(taken)
    }

    async fn remove_memory(&self, id: &MemoryId) -> MemoryResult<()> {
        self.edges
            .write()
            .map_err(lock_error)?
            .retain(|e| e.from_id != *id && e.to_id != *id);
        Ok(())
    }

    async fn agent_edges(&self, agent: &AgentId) -> MemoryResult<Vec<Association>> {
        Ok(self
            .edges
            .read()
            .map_err(lock_error)?
            .iter()
            .filter(|e| e.agent_id == *agent)
            .cloned()
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;

    #[tokio::test]
    async fn graph_walks_both_directions_within_depth() {
        let graph = InMemoryGraphStore::new();
        let agent = AgentId::parse("a").unwrap();
        let edge = |from: &str, to: &str| Association {
            agent_id: agent.clone(),
            from_id: MemoryId(from.into()),
            to_id: MemoryId(to.into()),
            relation: "related_to".into(),
            weight: 1.0,
            created_at: Utc::now(),
        };
        graph.upsert_edge(&edge("a", "b")).await.unwrap();
        graph.upsert_edge(&edge("c", "b")).await.unwrap();
        graph.upsert_edge(&edge("c", "d")).await.unwrap();
        assert_eq!(
            graph
                .edges_around(&agent, &[MemoryId("a".into())], 1, 100)
                .await
                .unwrap()
                .len(),
            1
        );
        assert_eq!(
            graph
                .edges_around(&agent, &[MemoryId("a".into())], 2, 100)
                .await
                .unwrap()
                .len(),
            2
        );
        assert_eq!(
            graph
                .edges_around(&agent, &[MemoryId("a".into())], 3, 100)
                .await
                .unwrap()
                .len(),
            3
        );
    }
}

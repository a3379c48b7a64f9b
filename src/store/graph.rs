//! [`GraphStore`] on either SQL database: association edges live beside the memories
//! and reference them with `ON DELETE CASCADE`, so deleting a memory can never leave an
//! edge behind.

use std::collections::HashSet;

use async_trait::async_trait;
use mnemos_actors::error::{MemoryError, MemoryResult};
use mnemos_actors::model::{AgentId, Association, MemoryId};
use mnemos_actors::store::GraphStore;

use super::dialect::{Dialect, SqlStore};
use super::rows;
use super::sql::{self, Arg, Statement};

/// An edge write's error: an end that no longer exists is `not_found`.
pub(crate) fn edge_error<D: Dialect>(error: sqlx::Error) -> MemoryError {
    match &error {
        sqlx::Error::Database(db) if db.is_foreign_key_violation() => {
            MemoryError::not_found("one end of the association no longer exists")
        }
        _ => D::backend_error(error),
    }
}

#[async_trait]
impl<D: Dialect> GraphStore for SqlStore<D> {
    fn backend_name(&self) -> &'static str {
        "sql"
    }

    async fn upsert_edge(&self, edge: &Association) -> MemoryResult<Association> {
        let _turn = self.write_turn().await?;
        let mut write = D::begin_lone_write(&self.pool).await?;
        let row = D::fetch_all(&mut write, &sql::upsert_edge(edge))
            .await
            .map_err(edge_error::<D>)?
            .into_iter()
            .next()
            .ok_or_else(|| D::backend_error(sqlx::Error::RowNotFound))?;
        D::end_lone_write(write).await?;
        rows::association(&row)
    }

    async fn edges_around(
        &self,
        agent: &AgentId,
        seeds: &[MemoryId],
        depth: u32,
        max_edges: usize,
    ) -> MemoryResult<Vec<Association>> {
        let mut frontier: Vec<String> = seeds.iter().map(|s| s.0.clone()).collect();
        let mut visited: HashSet<String> = frontier.iter().cloned().collect();
        let mut seen_edges = HashSet::new();
        let mut edges = Vec::new();
        for _ in 0..depth {
            if frontier.is_empty() {
                break;
            }
            let mut next = Vec::new();
            for chunk in D::LISTS.chunks(&frontier, 400) {
                let statement = sql::edges_touching(D::LISTS, agent.as_str(), chunk, D::EDGE_ORDER);
                for row in self.rows(&statement).await? {
                    let edge = rows::association(&row)?;
                    let key = (
                        edge.from_id.0.clone(),
                        edge.to_id.0.clone(),
                        edge.relation.clone(),
                    );
                    if !seen_edges.insert(key) {
                        continue;
                    }
                    for end in [&edge.from_id.0, &edge.to_id.0] {
                        if visited.insert(end.clone()) {
                            next.push(end.clone());
                        }
                    }
                    edges.push(edge);
                    if edges.len() >= max_edges {
                        return Ok(edges);
                    }
                }
            }
            frontier = next;
        }
        Ok(edges)
    }

    async fn remove_memory(&self, id: &MemoryId) -> MemoryResult<()> {
        let statement = Statement::new(sql::REMOVE_EDGES_OF, [Arg::Text(id.as_str())]);
        self.run_alone(&statement).await?;
        Ok(())
    }

    async fn agent_edges(&self, agent: &AgentId) -> MemoryResult<Vec<Association>> {
        let statement = Statement::new(sql::AGENT_EDGES, [Arg::Text(agent.as_str())]);
        self.all(&statement, rows::association).await
    }
}

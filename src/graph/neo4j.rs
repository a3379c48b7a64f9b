//! The Neo4j graph projection (`graph.backend = "neo4j"`): the outbox applied to Neo4j
//! over Bolt (neo4rs 0.9: Bolt 4.4, Neo4j 5 LTS and 2025.x) with the same statements as
//! FalkorDB ([`super::cypher`]), parameters passed natively. Each batch, with its
//! applied mark, is one transaction.

use std::time::Duration;

use async_trait::async_trait;
use mnemos_actors::error::{MemoryError, MemoryResult};
use mnemos_actors::model::{AgentId, MemoryId};
use mnemos_actors::policy::activation::Activation;
use mnemos_actors::store::{Link, ProjectedChange, Projection, ProjectionReads};
use neo4rs::{BoltType, Graph, Query};

use super::cypher::{self, Param};

/// A Neo4j database kept in sync from the outbox.
pub struct Neo4jProjection {
    /// The driver's pool (connects lazily).
    graph: Graph,
    /// Budget of one batch.
    timeout: Duration,
}

fn unavailable(what: impl std::fmt::Display) -> MemoryError {
    MemoryError::unavailable(format!("Neo4j: {what}"))
}

fn bolt(param: &Param) -> BoltType {
    match param {
        Param::Text(text) => BoltType::from(text.as_str()),
        Param::Number(n) => BoltType::from(*n),
        Param::Int(i) => BoltType::from(*i),
        Param::Bool(b) => BoltType::from(*b),
        Param::Null => BoltType::Null(neo4rs::BoltNull),
        Param::TextList(items) => BoltType::from(items.clone()),
    }
}

/// A neo4rs query for a statement and its parameters.
pub fn query(statement: &str, params: &[(&str, Param)]) -> Query {
    params
        .iter()
        .fold(neo4rs::query(statement), |q, (name, value)| {
            q.param(name, bolt(value))
        })
}

impl Neo4jProjection {
    /// A projection on `uri` (`bolt://host:7687` or `neo4j://…`) with these credentials.
    /// A malformed URI is an error naming `graph.url`; an unreachable server only makes
    /// the projection behind.
    pub fn new(uri: &str, user: &str, password: &str, timeout: Duration) -> MemoryResult<Self> {
        let graph = Graph::new(uri, user, password).map_err(|error| {
            MemoryError::invalid("graph.url", format!("cannot use Neo4j URI {uri}: {error}"))
        })?;
        Ok(Self { graph, timeout })
    }

    async fn within<T>(
        &self,
        work: impl std::future::Future<Output = Result<T, neo4rs::Error>>,
    ) -> MemoryResult<T> {
        tokio::time::timeout(self.timeout, work)
            .await
            .map_err(|_| unavailable(format!("no answer within {:?}", self.timeout)))?
            .map_err(unavailable)
    }

    async fn first_row(&self, q: Query) -> MemoryResult<Option<neo4rs::Row>> {
        self.within(async {
            let mut rows = self.graph.execute(q).await?;
            rows.next().await
        })
        .await
    }

    /// Memories and associations of `agent` in the graph (tests and diagnostics).
    pub async fn counts(&self, agent: &AgentId) -> MemoryResult<(i64, i64)> {
        let statement = "MATCH (m:Memory {agent_id: $agent_id}) \
             OPTIONAL MATCH (m)-[r:ASSOCIATED]->() RETURN count(DISTINCT m) AS memories, count(r) AS edges";
        let row = self
            .first_row(query(
                statement,
                &[("agent_id", Param::Text(agent.to_string()))],
            ))
            .await?;
        Ok(row
            .map(|row| {
                (
                    row.get::<i64>("memories").unwrap_or(0),
                    row.get::<i64>("edges").unwrap_or(0),
                )
            })
            .unwrap_or((0, 0)))
    }
}

#[async_trait]
impl Projection for Neo4jProjection {
    fn name(&self) -> &'static str {
        "neo4j"
    }

    async fn applied(&self) -> MemoryResult<Option<u64>> {
        // The uniqueness constraint doubles as the id index (idempotent).
        let _ = self
            .within(self.graph.run(neo4rs::query(
                "CREATE CONSTRAINT mnemos_memory_id IF NOT EXISTS FOR (m:Memory) REQUIRE m.id IS UNIQUE",
            )))
            .await;
        let _ = self
            .within(self.graph.run(neo4rs::query(
                "CREATE CONSTRAINT mnemos_entity_id IF NOT EXISTS FOR (e:Entity) REQUIRE e.id IS UNIQUE",
            )))
            .await;
        let row = self
            .first_row(neo4rs::query(
                "MATCH (c:MnemosProjection {id: 'outbox'}) RETURN c.applied AS applied",
            ))
            .await?;
        Ok(row
            .and_then(|row| row.get::<i64>("applied").ok())
            .map(|applied| applied.max(0) as u64))
    }

    async fn apply(&self, changes: &[ProjectedChange], through: Option<u64>) -> MemoryResult<()> {
        let mut queries: Vec<Query> = cypher::batch_queries(changes)
            .into_iter()
            .map(|(statement, params)| query(statement, &params))
            .collect();
        if let Some(through) = through {
            queries.push(query(
                cypher::SET_APPLIED,
                &[("applied", Param::Int(through as i64))],
            ));
        }
        if queries.is_empty() {
            return Ok(());
        }
        self.within(async {
            let mut txn = self.graph.start_txn().await?;
            txn.run_queries(queries).await?;
            txn.commit().await?;
            Ok(())
        })
        .await
    }

    async fn reset(&self) -> MemoryResult<()> {
        self.within(self.graph.run(neo4rs::query(cypher::RESET)))
            .await
            .map(|_| ())
    }

    fn serves(&self) -> ProjectionReads {
        ProjectionReads::Graph
    }

    fn holds_entities(&self) -> bool {
        true
    }

    async fn links_around(
        &self,
        agent: &AgentId,
        seeds: &[MemoryId],
        limit: usize,
    ) -> MemoryResult<Vec<Link>> {
        if seeds.is_empty() {
            return Ok(Vec::new());
        }
        let q = query(
            cypher::LINKS_AROUND,
            &cypher::links_params(agent, seeds, limit),
        );
        self.within(async {
            let mut rows = self.graph.execute(q).await?;
            let mut out = Vec::new();
            while let Some(row) = rows.next().await? {
                if let (Ok(from_id), Ok(to_id), Ok(relation), Ok(weight)) = (
                    row.get::<String>("from_id"),
                    row.get::<String>("to_id"),
                    row.get::<String>("relation"),
                    row.get::<f64>("weight"),
                ) {
                    out.push(Link {
                        from_id: MemoryId(from_id),
                        to_id: MemoryId(to_id),
                        relation,
                        weight: weight as f32,
                    });
                }
            }
            Ok(out)
        })
        .await
    }

    async fn spread(
        &self,
        agent: &AgentId,
        seed: &MemoryId,
        depth: u32,
        decay: f64,
        limit: usize,
    ) -> MemoryResult<Vec<Activation>> {
        let q = query(
            &cypher::activation(depth),
            &cypher::activation_params(agent, seed, decay, limit),
        );
        self.within(async {
            let mut rows = self.graph.execute(q).await?;
            let mut out = Vec::new();
            while let Some(row) = rows.next().await? {
                if let (Ok(id), Ok(activation), Ok(path)) = (
                    row.get::<String>("id"),
                    row.get::<f64>("activation"),
                    row.get::<String>("path"),
                ) {
                    out.push(Activation {
                        id: MemoryId(id),
                        activation,
                        path: cypher::path_ids(&path),
                    });
                }
            }
            Ok(out)
        })
        .await
    }
}

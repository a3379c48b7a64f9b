//! The FalkorDB graph projection (`graph.backend = "falkordb"`): the outbox applied to a
//! FalkorDB graph over the Redis protocol (`GRAPH.QUERY`), with the statements of
//! [`super::cypher`]. A batch is one pipeline on one connection (in order), ending with
//! the applied mark; a failure drops the connection and fails the batch, which the
//! projector retries whole (every statement is idempotent).

use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use mnemos_actors::error::{MemoryError, MemoryResult};
use mnemos_actors::model::{AgentId, MemoryId};
use mnemos_actors::policy::activation::Activation;
use mnemos_actors::store::{Link, ProjectedChange, Projection, ProjectionReads};
use redis::aio::MultiplexedConnection;
use redis::Value;

use super::cypher::{self, with_params, Param};

/// A FalkorDB graph kept in sync from the outbox.
pub struct FalkorProjection {
    /// Client for `graph.url`.
    client: redis::Client,
    /// Graph name (`graph.name`).
    graph: String,
    /// The live connection, None until (re)connected.
    connection: Mutex<Option<MultiplexedConnection>>,
    /// Budget of one call.
    timeout: Duration,
}

fn unavailable(what: impl std::fmt::Display) -> MemoryError {
    MemoryError::unavailable(format!("FalkorDB: {what}"))
}

impl FalkorProjection {
    /// A projection on `url`/`graph`; connects lazily (a server that is down at start
    /// only makes the projection behind). A malformed URL is an error naming `graph.url`.
    pub fn new(url: &str, graph: &str, timeout: Duration) -> MemoryResult<Self> {
        let client = redis::Client::open(url).map_err(|error| {
            MemoryError::invalid(
                "graph.url",
                format!("not a Redis-protocol URL ({url}): {error}"),
            )
        })?;
        Ok(Self {
            client,
            graph: graph.to_string(),
            connection: Mutex::new(None),
            timeout,
        })
    }

    async fn connection(&self) -> MemoryResult<MultiplexedConnection> {
        if let Some(connection) = self
            .connection
            .lock()
            .map_err(|_| MemoryError::internal("falkordb lock poisoned"))?
            .clone()
        {
            return Ok(connection);
        }
        let mut connection =
            tokio::time::timeout(self.timeout, self.client.get_multiplexed_async_connection())
                .await
                .map_err(|_| unavailable(format!("no connection within {:?}", self.timeout)))?
                .map_err(unavailable)?;
        // Idempotent: an existing index is reported as an error, which is fine.
        let _: Result<Value, _> = redis::cmd("GRAPH.QUERY")
            .arg(&self.graph)
            .arg(cypher::INDEX_MEMORY_ID)
            .query_async(&mut connection)
            .await;
        for index in [cypher::INDEX_ENTITY_ID, cypher::INDEX_ENTITY_AGENT] {
            let _: Result<Value, _> = redis::cmd("GRAPH.QUERY")
                .arg(&self.graph)
                .arg(index)
                .query_async(&mut connection)
                .await;
        }
        if let Ok(mut slot) = self.connection.lock() {
            *slot = Some(connection.clone());
        }
        Ok(connection)
    }

    fn drop_connection(&self) {
        if let Ok(mut slot) = self.connection.lock() {
            *slot = None;
        }
    }

    /// Run queries in one pipeline, in order.
    async fn run(&self, queries: &[String]) -> MemoryResult<Vec<Value>> {
        if queries.is_empty() {
            return Ok(Vec::new());
        }
        let mut connection = self.connection().await?;
        let mut pipe = redis::pipe();
        for query in queries {
            pipe.cmd("GRAPH.QUERY").arg(&self.graph).arg(query);
        }
        let result = tokio::time::timeout(
            self.timeout,
            pipe.query_async::<Vec<Value>>(&mut connection),
        )
        .await;
        match result {
            Ok(Ok(values)) => Ok(values),
            Ok(Err(error)) => {
                self.drop_connection();
                Err(unavailable(error))
            }
            Err(_) => {
                self.drop_connection();
                Err(unavailable(format!("no answer within {:?}", self.timeout)))
            }
        }
    }

    /// The rows of one `GRAPH.QUERY` answer (`[header, rows, stats]`).
    fn rows(value: &Value) -> Vec<Vec<Value>> {
        let Value::Array(parts) = value else {
            return Vec::new();
        };
        match parts.get(1) {
            Some(Value::Array(rows)) => rows
                .iter()
                .filter_map(|row| match row {
                    Value::Array(cells) => Some(cells.clone()),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        }
    }

    fn int(value: &Value) -> Option<i64> {
        match value {
            Value::Int(i) => Some(*i),
            Value::BulkString(bytes) => std::str::from_utf8(bytes).ok()?.parse().ok(),
            Value::SimpleString(text) => text.parse().ok(),
            Value::Double(d) => Some(*d as i64),
            _ => None,
        }
    }

    fn text(value: &Value) -> Option<String> {
        match value {
            Value::BulkString(bytes) => String::from_utf8(bytes.clone()).ok(),
            Value::SimpleString(text) => Some(text.clone()),
            _ => None,
        }
    }

    /// Memories and associations of `agent` in the graph (tests and diagnostics).
    pub async fn counts(&self, agent: &AgentId) -> MemoryResult<(i64, i64)> {
        let values = self
            .run(&[with_params(
                cypher::COUNT_AGENT,
                &[("agent_id", Param::Text(agent.to_string()))],
            )])
            .await?;
        let rows = values.first().map(Self::rows).unwrap_or_default();
        let row = rows.first().cloned().unwrap_or_default();
        Ok((
            row.first().and_then(Self::int).unwrap_or(0),
            row.get(1).and_then(Self::int).unwrap_or(0),
        ))
    }

    /// Entities, mentions and relationships of `agent` in the graph (tests, diagnostics).
    pub async fn entity_counts(&self, agent: &AgentId) -> MemoryResult<(i64, i64, i64)> {
        let values = self
            .run(&[with_params(
                cypher::COUNT_AGENT_ENTITIES,
                &[("agent_id", Param::Text(agent.to_string()))],
            )])
            .await?;
        let rows = values.first().map(Self::rows).unwrap_or_default();
        let row = rows.first().cloned().unwrap_or_default();
        let at = |i: usize| row.get(i).and_then(Self::int).unwrap_or(0);
        Ok((at(0), at(1), at(2)))
    }

    /// A memory's status as the graph holds it (tests and diagnostics; None: no node).
    pub async fn memory_status(&self, id: &MemoryId) -> MemoryResult<Option<String>> {
        let rows = self
            .read(with_params(
                "MATCH (m:Memory {id: $id}) RETURN m.status",
                &[("id", Param::Text(id.0.clone()))],
            ))
            .await?;
        Ok(rows
            .first()
            .and_then(|row| row.first())
            .and_then(Self::text))
    }

    /// The rows of one read query; a statement error is an error.
    async fn read(&self, query: String) -> MemoryResult<Vec<Vec<Value>>> {
        let values = self.run(&[query]).await?;
        match values.first() {
            Some(Value::ServerError(error)) => Err(unavailable(format!("{error:?}"))),
            Some(value) => Ok(Self::rows(value)),
            None => Err(unavailable("no answer")),
        }
    }

    fn number(value: &Value) -> Option<f64> {
        match value {
            Value::Double(d) => Some(*d),
            Value::Int(i) => Some(*i as f64),
            other => Self::text(other)?.parse().ok(),
        }
    }
}

/// The statement of one change, with its parameters rendered for `GRAPH.QUERY`.
pub fn statements(changes: &[ProjectedChange]) -> Vec<String> {
    cypher::batch_queries(changes)
        .into_iter()
        .map(|(query, params)| with_params(query, &params))
        .collect()
}

#[async_trait]
impl Projection for FalkorProjection {
    fn name(&self) -> &'static str {
        "falkordb"
    }

    async fn applied(&self) -> MemoryResult<Option<u64>> {
        let values = self.run(&[cypher::GET_APPLIED.to_string()]).await?;
        Ok(values
            .first()
            .map(Self::rows)
            .unwrap_or_default()
            .first()
            .and_then(|row| row.first())
            .and_then(Self::int)
            .map(|applied| applied.max(0) as u64))
    }

    async fn apply(&self, changes: &[ProjectedChange], through: Option<u64>) -> MemoryResult<()> {
        let mut queries: Vec<String> = statements(changes);
        if let Some(through) = through {
            queries.push(with_params(
                cypher::SET_APPLIED,
                &[("applied", Param::Int(through as i64))],
            ));
        }
        let answers = self.run(&queries).await?;
        // A statement error comes back as an error value inside the pipeline's answer.
        if let Some(error) = answers.iter().find_map(|v| match v {
            Value::ServerError(error) => Some(format!("{error:?}")),
            _ => None,
        }) {
            return Err(unavailable(format!("a statement failed: {error}")));
        }
        Ok(())
    }

    async fn reset(&self) -> MemoryResult<()> {
        self.run(&[cypher::RESET.to_string()]).await.map(|_| ())
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
        let params = cypher::links_params(agent, seeds, limit);
        let rows = self
            .read(with_params(cypher::LINKS_AROUND, &params))
            .await?;
        Ok(rows
            .iter()
            .filter_map(|row| {
                Some(Link {
                    from_id: MemoryId(Self::text(row.first()?)?),
                    to_id: MemoryId(Self::text(row.get(1)?)?),
                    relation: Self::text(row.get(2)?)?,
                    weight: Self::number(row.get(3)?)? as f32,
                })
            })
            .collect())
    }

    async fn spread(
        &self,
        agent: &AgentId,
        seed: &MemoryId,
        depth: u32,
        decay: f64,
        limit: usize,
    ) -> MemoryResult<Vec<Activation>> {
        let params = cypher::activation_params(agent, seed, decay, limit);
        let rows = self
            .read(with_params(&cypher::activation(depth), &params))
            .await?;
        Ok(rows
            .iter()
            .filter_map(|row| {
                Some(Activation {
                    id: MemoryId(Self::text(row.first()?)?),
                    activation: Self::number(row.get(1)?)?,
                    path: cypher::path_ids(&Self::text(row.get(2)?)?),
                })
            })
            .collect())
    }
}

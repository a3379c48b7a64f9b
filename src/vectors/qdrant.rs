//! The Qdrant vector projection (`vectors.backend = "qdrant"`): every memory's stored
//! embedding, with its owner, type, status and sharing as payload, in one Qdrant
//! collection over gRPC (qdrant-client), fed from the outbox. The in-process index stays
//! recall's vector retriever, so a Qdrant that is behind or down changes no answer.
//!
//! At start the collection is created (cosine, the embedder's dimension) with payload
//! indexes on `agent_id`, `type` and `status`, and a marker point (a fixed id, no
//! `agent_id`, so no filtered search sees it) that says mnemos owns it and records the
//! applied outbox sequence number. An existing collection of another dimension or
//! distance, or one holding points but no marker (another application's), is refused
//! with an error naming `vectors.collection`: mnemos never deletes a collection, and a
//! rebuild deletes only its own points. A server that lost the collection (restarted
//! empty) gets it back on the next batch, and the missing mark makes the projector
//! rebuild it from SQL. Embeddings arrive with the changes (the projector reads them
//! through the episodic actor); the projection never reads the system of record.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use mnemos_actors::error::{MemoryError, MemoryResult};
use mnemos_actors::model::{AgentId, MemoryId, MemoryType};
use mnemos_actors::store::{ProjectedChange, Projection, ProjectionReads, VectorQuery};
use qdrant_client::qdrant::{
    vectors_config, Condition, CreateCollectionBuilder, CreateFieldIndexCollectionBuilder,
    DeletePointsBuilder, Distance, FieldType, Filter, GetPointsBuilder, PointId, PointStruct,
    PointsIdsList, QueryPointsBuilder, UpsertPointsBuilder, VectorParamsBuilder,
};
use qdrant_client::{Payload, Qdrant};

/// Id of the point that records the applied outbox sequence number.
pub const MARKER_ID: &str = "00000000-0000-0000-0000-00000000a991";

/// A Qdrant collection kept in sync from the outbox.
pub struct QdrantProjection {
    /// gRPC client (compatibility check skipped: it prints to stdout, which would corrupt MCP stdio).
    client: Qdrant,
    /// Collection name (`vectors.collection`).
    collection: String,
    /// The embedder's dimension.
    dimension: u64,
    /// Set once the collection is known to exist, with the right shape and mnemos's mark;
    /// cleared when the server says it is gone (it is then created again).
    ready: Arc<AtomicBool>,
}

fn unavailable(what: impl std::fmt::Display) -> MemoryError {
    MemoryError::unavailable(format!("Qdrant: {what}"))
}

/// The marker point's payload key saying mnemos owns the collection.
const OWNER_KEY: &str = "mnemos_collection";

impl QdrantProjection {
    /// A projection on `url` (gRPC, e.g. `http://127.0.0.1:6334`).
    pub fn new(
        url: &str,
        collection: &str,
        dimension: usize,
        timeout: Duration,
    ) -> MemoryResult<Self> {
        let client = Qdrant::from_url(url)
            .timeout(timeout)
            .connect_timeout(timeout)
            .skip_compatibility_check()
            .build()
            .map_err(|error| {
                MemoryError::invalid(
                    "vectors.url",
                    format!("cannot use Qdrant URL {url}: {error}"),
                )
            })?;
        Ok(Self {
            client,
            collection: collection.to_string(),
            dimension: dimension as u64,
            ready: Arc::new(AtomicBool::new(false)),
        })
    }

    /// `unavailable`, and when the server no longer has the collection (it restarted
    /// empty), forget that it was ready so the next call creates it again.
    fn failed(&self, error: impl std::fmt::Display) -> MemoryError {
        let text = error.to_string();
        if text.contains("doesn't exist") || text.contains("Not found") {
            self.ready.store(false, Ordering::Release);
        }
        unavailable(text)
    }

    /// Whether the collection carries mnemos's marker point; when it has none, how many
    /// points it holds (0: empty, adoptable).
    async fn ownership(&self) -> MemoryResult<Result<(), u64>> {
        let marker = self
            .client
            .get_points(
                GetPointsBuilder::new(&self.collection, vec![PointId::from(MARKER_ID)])
                    .with_payload(true),
            )
            .await
            .map_err(|e| self.failed(e))?;
        if marker
            .result
            .first()
            .is_some_and(|p| p.payload.contains_key(OWNER_KEY))
        {
            return Ok(Ok(()));
        }
        let count = self
            .client
            .count(qdrant_client::qdrant::CountPointsBuilder::new(&self.collection).exact(true))
            .await
            .map_err(|e| self.failed(e))?
            .result
            .map_or(0, |c| c.count);
        Ok(Err(count))
    }

    /// Write the marker point: mnemos owns the collection, and (when given) has applied
    /// the outbox through `applied`.
    async fn mark(&self, applied: Option<u64>) -> MemoryResult<()> {
        let mut payload = serde_json::json!({ OWNER_KEY: true });
        if let Some(applied) = applied {
            payload["mnemos_applied"] = serde_json::json!(applied);
        }
        let payload = Payload::try_from(payload)
            .map_err(|e| MemoryError::internal(format!("qdrant payload: {e}")))?;
        self.client
            .upsert_points(
                UpsertPointsBuilder::new(
                    &self.collection,
                    vec![PointStruct::new(
                        MARKER_ID,
                        marker_vector(self.dimension),
                        payload,
                    )],
                )
                .wait(true),
            )
            .await
            .map_err(|e| self.failed(e))?;
        Ok(())
    }

    /// Delete the collection (tests clean up after themselves with it).
    pub async fn drop_collection(&self) -> MemoryResult<()> {
        if self
            .client
            .collection_exists(&self.collection)
            .await
            .map_err(unavailable)?
        {
            self.client
                .delete_collection(&self.collection)
                .await
                .map_err(unavailable)?;
        }
        self.ready.store(false, Ordering::Release);
        Ok(())
    }

    /// Create the collection and its payload indexes, or check an existing one's shape.
    /// A shape mismatch is `invalid_argument` naming `vectors.collection`; an unreachable
    /// server is `backend_unavailable`.
    pub async fn ensure_collection(&self) -> MemoryResult<()> {
        if self.ready.load(Ordering::Acquire) {
            return Ok(());
        }
        let exists = self
            .client
            .collection_exists(&self.collection)
            .await
            .map_err(unavailable)?;
        if exists {
            let info = self
                .client
                .collection_info(&self.collection)
                .await
                .map_err(unavailable)?;
            let params = info
                .result
                .and_then(|r| r.config)
                .and_then(|c| c.params)
                .and_then(|p| p.vectors_config)
                .and_then(|v| v.config);
            match params {
                Some(vectors_config::Config::Params(params))
                    if params.size == self.dimension && params.distance == Distance::Cosine as i32 => {}
                Some(vectors_config::Config::Params(params)) => {
                    return Err(MemoryError::invalid(
                        "vectors.collection",
                        format!(
                            "Qdrant collection {:?} holds {}-dimensional vectors with distance {:?}, but the embedding model gives {}-dimensional cosine vectors: use another vectors.collection, or delete it and run `mnemos reindex --projection qdrant`",
                            self.collection,
                            params.size,
                            Distance::try_from(params.distance).map(|d| d.as_str_name()).unwrap_or("unknown"),
                            self.dimension
                        ),
                    ))
                }
                _ => {
                    return Err(MemoryError::invalid(
                        "vectors.collection",
                        format!(
                            "Qdrant collection {:?} uses named vectors; mnemos needs one unnamed cosine vector per point",
                            self.collection
                        ),
                    ))
                }
            }
            match self.ownership().await? {
                Ok(()) => {}
                // An empty collection of the right shape (made by hand for mnemos) is adopted.
                Err(0) => self.mark(None).await?,
                Err(points) => {
                    return Err(MemoryError::invalid(
                        "vectors.collection",
                        format!(
                            "Qdrant collection {:?} holds {points} points but no mnemos marker: it belongs to another application, and mnemos never writes into or deletes such a collection; choose another vectors.collection",
                            self.collection
                        ),
                    ))
                }
            }
        } else {
            self.client
                .create_collection(
                    CreateCollectionBuilder::new(&self.collection)
                        .vectors_config(VectorParamsBuilder::new(self.dimension, Distance::Cosine)),
                )
                .await
                .map_err(unavailable)?;
            for field in ["agent_id", "type", "status"] {
                self.client
                    .create_field_index(CreateFieldIndexCollectionBuilder::new(
                        &self.collection,
                        field,
                        FieldType::Keyword,
                    ))
                    .await
                    .map_err(unavailable)?;
            }
            self.mark(None).await?;
        }
        self.ready.store(true, Ordering::Release);
        Ok(())
    }

    /// Filtered nearest neighbours: active memories of `agent` (and, with `shared`, the
    /// shared pool), best first, as (memory, cosine).
    pub async fn search(
        &self,
        agent: &AgentId,
        vector: Vec<f32>,
        shared: bool,
        limit: u64,
    ) -> MemoryResult<Vec<(MemoryId, f32)>> {
        self.search_types(agent, vector, shared, &[], limit).await
    }

    /// [`Self::search`] restricted to `types` (empty: every type).
    pub async fn search_types(
        &self,
        agent: &AgentId,
        vector: Vec<f32>,
        shared: bool,
        types: &[MemoryType],
        limit: u64,
    ) -> MemoryResult<Vec<(MemoryId, f32)>> {
        let owner = if shared {
            Filter::should([
                Condition::matches("agent_id", agent.to_string()),
                Condition::matches("shared", true),
            ])
        } else {
            Filter::must([Condition::matches("agent_id", agent.to_string())])
        };
        let mut must = vec![
            Condition::matches("status", "active".to_string()),
            owner.into(),
        ];
        if !types.is_empty() {
            must.push(Condition::matches(
                "type",
                types
                    .iter()
                    .map(|t| t.as_str().to_string())
                    .collect::<Vec<String>>(),
            ));
        }
        let filter = Filter {
            must,
            ..Default::default()
        };
        let response = self
            .client
            .query(
                QueryPointsBuilder::new(&self.collection)
                    .query(vector)
                    .filter(filter)
                    .limit(limit),
            )
            .await
            .map_err(unavailable)?;
        Ok(response
            .result
            .into_iter()
            .filter_map(|point| Some((point_uuid(point.id?)?, point.score)))
            .collect())
    }
}

fn point_uuid(id: PointId) -> Option<MemoryId> {
    match id.point_id_options? {
        qdrant_client::qdrant::point_id::PointIdOptions::Uuid(uuid) => Some(MemoryId(uuid)),
        qdrant_client::qdrant::point_id::PointIdOptions::Num(_) => None,
    }
}

fn marker_vector(dimension: u64) -> Vec<f32> {
    let mut vector = vec![0.0; dimension as usize];
    if let Some(first) = vector.first_mut() {
        *first = 1.0;
    }
    vector
}

#[async_trait]
impl Projection for QdrantProjection {
    fn name(&self) -> &'static str {
        "qdrant"
    }

    fn holds_vectors(&self) -> bool {
        true
    }

    fn serves(&self) -> ProjectionReads {
        ProjectionReads::Vectors
    }

    async fn nearest(&self, query: &VectorQuery) -> MemoryResult<Vec<(MemoryId, f32)>> {
        self.search_types(
            &query.agent_id,
            query.vector.clone(),
            query.include_shared,
            &query.types,
            query.limit as u64,
        )
        .await
    }

    async fn applied(&self) -> MemoryResult<Option<u64>> {
        self.ensure_collection().await?;
        let response = self
            .client
            .get_points(
                GetPointsBuilder::new(&self.collection, vec![PointId::from(MARKER_ID)])
                    .with_payload(true),
            )
            .await
            .map_err(|e| self.failed(e))?;
        Ok(response.result.first().and_then(|point| {
            point
                .payload
                .get("mnemos_applied")
                .and_then(|v| v.as_integer())
                .map(|applied| applied.max(0) as u64)
        }))
    }

    async fn apply(&self, changes: &[ProjectedChange], through: Option<u64>) -> MemoryResult<()> {
        self.ensure_collection().await?;
        // Consecutive runs of upserts and of deletes keep the outbox order.
        let mut index = 0;
        while index < changes.len() {
            let deleting = matches!(changes[index], ProjectedChange::DeleteMemory { .. });
            let run: Vec<&ProjectedChange> = changes[index..]
                .iter()
                .take_while(|c| match c {
                    ProjectedChange::DeleteMemory { .. } => deleting,
                    ProjectedChange::UpsertMemory { .. } => !deleting,
                    _ => true,
                })
                .collect();
            index += run.len();
            if deleting {
                self.delete(&run).await?;
            } else {
                self.upsert(&run).await?;
            }
        }
        if let Some(through) = through {
            self.mark(Some(through)).await?;
        }
        Ok(())
    }

    async fn reset(&self) -> MemoryResult<()> {
        self.ensure_collection().await?;
        // Only mnemos's points (every one has an agent_id; the marker has none), and the
        // collection stays: nothing of another application's is ever deleted.
        self.client
            .delete_points(
                DeletePointsBuilder::new(&self.collection)
                    .points(Filter::must_not([Condition::is_empty("agent_id")]))
                    .wait(true),
            )
            .await
            .map_err(|e| self.failed(e))?;
        self.mark(None).await
    }
}

impl QdrantProjection {
    /// Delete the memories of a run of delete changes.
    async fn delete(&self, run: &[&ProjectedChange]) -> MemoryResult<()> {
        let ids: Vec<PointId> = run
            .iter()
            .filter_map(|c| match c {
                ProjectedChange::DeleteMemory { id, .. } => Some(PointId::from(id.0.as_str())),
                _ => None,
            })
            .collect();
        if ids.is_empty() {
            return Ok(());
        }
        self.client
            .delete_points(
                DeletePointsBuilder::new(&self.collection)
                    .points(PointsIdsList { ids })
                    .wait(true),
            )
            .await
            .map_err(|e| self.failed(e))?;
        Ok(())
    }

    /// Upsert the memories of a run of upsert changes with the embeddings they carry (a
    /// memory deleted since carries none: its delete follows in the outbox).
    async fn upsert(&self, run: &[&ProjectedChange]) -> MemoryResult<()> {
        let mut points = Vec::new();
        for change in run {
            let ProjectedChange::UpsertMemory {
                id,
                agent_id,
                memory_type,
                status,
                shared,
                session_id,
                embedding: Some(vector),
                named: _,
            } = change
            else {
                continue;
            };
            let payload = Payload::try_from(serde_json::json!({
                "agent_id": agent_id.as_str(),
                "type": memory_type,
                "status": status,
                "shared": shared,
                "session_id": session_id,
            }))
            .map_err(|e| MemoryError::internal(format!("qdrant payload: {e}")))?;
            points.push(PointStruct::new(id.0.clone(), vector.clone(), payload));
        }
        if points.is_empty() {
            return Ok(());
        }
        self.client
            .upsert_points(UpsertPointsBuilder::new(&self.collection, points).wait(true))
            .await
            .map_err(|e| self.failed(e))?;
        Ok(())
    }
}

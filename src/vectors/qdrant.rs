//! The Qdrant vector projection (`vectors.backend = "qdrant"`): every memory's stored
//! embedding, with its owner, type, status and sharing as payload, in one Qdrant
//! collection over gRPC (qdrant-client), fed from the outbox. The in-process index stays
//! recall's vector retriever, so a Qdrant that is behind or down changes no answer.
//!
//! At start the collection is created (cosine, the embedder's dimension) with payload
//! indexes on `agent_id`, `type` and `status`; an existing collection of another
//! dimension or distance is refused with an error naming `vectors.collection` (never a
//! silent 1536-vs-384 mismatch). The applied outbox sequence number is kept in the
//! payload of one marker point (a fixed id, no `agent_id`, so no filtered search sees it).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use mnemos_actors::error::{MemoryError, MemoryResult};
use mnemos_actors::model::{AgentId, MemoryId, MemoryType};
use mnemos_actors::store::{
    MemoryStore, ProjectedChange, Projection, ProjectionReads, VectorQuery,
};
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
    /// Reads embeddings of upserted memories.
    store: Arc<dyn MemoryStore>,
    /// Set once the collection is known to exist with the right shape.
    ready: AtomicBool,
}

fn unavailable(what: impl std::fmt::Display) -> MemoryError {
    MemoryError::unavailable(format!("Qdrant: {what}"))
}

impl QdrantProjection {
    /// A projection on `url` (gRPC, e.g. `http://127.0.0.1:6334`).
    pub fn new(
        url: &str,
        collection: &str,
        dimension: usize,
        store: Arc<dyn MemoryStore>,
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
            store,
            ready: AtomicBool::new(false),
        })
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
            .map_err(unavailable)?;
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
                let ids: Vec<PointId> = run
                    .iter()
                    .filter_map(|c| match c {
                        ProjectedChange::DeleteMemory { id, .. } => {
                            Some(PointId::from(id.0.as_str()))
                        }
                        _ => None,
                    })
                    .collect();
                if !ids.is_empty() {
                    self.client
                        .delete_points(
                            DeletePointsBuilder::new(&self.collection)
                                .points(PointsIdsList { ids })
                                .wait(true),
                        )
                        .await
                        .map_err(unavailable)?;
                }
                continue;
            }
            let upserts: Vec<&ProjectedChange> = run
                .into_iter()
                .filter(|c| matches!(c, ProjectedChange::UpsertMemory { .. }))
                .collect();
            if upserts.is_empty() {
                continue;
            }
            let ids: Vec<MemoryId> = upserts
                .iter()
                .filter_map(|c| match c {
                    ProjectedChange::UpsertMemory { id, .. } => Some(id.clone()),
                    _ => None,
                })
                .collect();
            let vectors: std::collections::HashMap<MemoryId, Vec<f32>> =
                self.store.embeddings_of(&ids).await?.into_iter().collect();
            let mut points = Vec::new();
            for change in upserts {
                let ProjectedChange::UpsertMemory {
                    id,
                    agent_id,
                    memory_type,
                    status,
                    shared,
                    session_id,
                } = change
                else {
                    continue;
                };
                // Deleted since: its delete follows in the outbox.
                let Some(vector) = vectors.get(id) else {
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
            if !points.is_empty() {
                self.client
                    .upsert_points(UpsertPointsBuilder::new(&self.collection, points).wait(true))
                    .await
                    .map_err(unavailable)?;
            }
        }
        if let Some(through) = through {
            let payload = Payload::try_from(serde_json::json!({ "mnemos_applied": through }))
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
                .map_err(unavailable)?;
        }
        Ok(())
    }

    async fn reset(&self) -> MemoryResult<()> {
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
        self.ensure_collection().await
    }
}

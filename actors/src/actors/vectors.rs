//! The vector actor: owns the embedder and the in-process vector index (semantic,
//! procedural and experience collections, partitioned by agent). The index is a
//! projection of the embeddings stored in the system of record and is rebuilt from
//! it whenever the actor starts, so nothing is re-embedded after a restart.

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

use super::injected_fault;
use crate::embedding::Embedder;
use crate::error::{MemoryError, MemoryResult};
use crate::model::MemoryId;
use crate::store::{EmbeddingRecord, MemoryStore, VectorIndex, VectorQuery};

/// Handle to the vector actor.
pub type VectorsRef = ActorRef<VectorsMsg>;
type Reply<T> = RpcReplyPort<MemoryResult<T>>;

/// Messages of the vector actor.
pub enum VectorsMsg {
    /// Embed texts (on a blocking task).
    Embed {
        texts: Vec<String>,
        reply: Reply<Vec<Vec<f32>>>,
    },
    /// Add or replace index entries.
    Upsert {
        entries: Vec<EmbeddingRecord>,
        reply: Reply<()>,
    },
    /// Remove index entries.
    Remove {
        ids: Vec<MemoryId>,
        reply: Reply<()>,
    },
    /// Embed `text` into `query.vector` (when `text` is given) and search.
    Search {
        text: Option<String>,
        query: VectorQuery,
        reply: Reply<Vec<(MemoryId, f32)>>,
    },
    /// Exact similarity of a query vector to given memories (recall's candidates).
    Similarity {
        vector: Vec<f32>,
        ids: Vec<MemoryId>,
        reply: Reply<Vec<(MemoryId, f32)>>,
    },
    /// Several searches with given vectors, in one blocking task (deduplication of a batch).
    SearchMany {
        queries: Vec<VectorQuery>,
        reply: Reply<Vec<Vec<(MemoryId, f32)>>>,
    },
    /// Rebuild the index from the system of record.
    Rebuild { reply: Reply<usize> },
    /// What the index holds.
    Status { reply: Reply<IndexStatus> },
    /// Test hook: fail the actor as if its state were broken.
    InjectFault,
}

/// A snapshot of the index for `/health`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexStatus {
    /// Index backend name.
    pub backend: String,
    /// Embedding model id.
    pub model: String,
    /// Vector length.
    pub dimension: usize,
    /// Vectors indexed.
    pub vectors: usize,
}

/// Start-up arguments (kept by the supervisor and reused on restart).
#[derive(Clone)]
pub struct VectorsArgs {
    /// The embedding model.
    pub embedder: Arc<dyn Embedder>,
    /// The index (survives actor restarts; rebuilt on start).
    pub index: Arc<dyn VectorIndex>,
    /// Where embeddings are stored durably.
    pub store: Arc<dyn MemoryStore>,
}

/// The actor's state.
pub struct VectorsState {
    /// The embedding model.
    embedder: Arc<dyn Embedder>,
    /// The index.
    index: Arc<dyn VectorIndex>,
    /// Where embeddings are stored durably.
    store: Arc<dyn MemoryStore>,
}

/// The vector actor.
pub struct VectorsActor;

/// Embed on blocking threads; a large batch of a cheap embedder is split across cores.
async fn embed_on_blocking_threads(
    embedder: Arc<dyn Embedder>,
    texts: Vec<String>,
) -> MemoryResult<Vec<Vec<f32>>> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = if embedder.parallel_batches() && texts.len() >= 128 {
        texts.len().div_ceil(workers)
    } else {
        texts.len().max(1)
    };
    let mut tasks = Vec::new();
    for part in texts.chunks(chunk) {
        let part = part.to_vec();
        let embedder = embedder.clone();
        tasks.push(tokio::task::spawn_blocking(move || {
            let refs: Vec<&str> = part.iter().map(String::as_str).collect();
            embedder.embed_batch(&refs)
        }));
    }
    let mut vectors = Vec::with_capacity(texts.len());
    for task in tasks {
        let part = task
            .await
            .map_err(|e| MemoryError::internal(format!("embedding task failed: {e}")))??;
        vectors.extend(part);
    }
    Ok(vectors)
}

/// Run many searches on blocking threads, split across cores when there are many.
async fn search_on_blocking_threads(
    index: Arc<dyn VectorIndex>,
    queries: Vec<VectorQuery>,
) -> MemoryResult<Vec<Vec<(MemoryId, f32)>>> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = if queries.len() >= 64 {
        queries.len().div_ceil(workers)
    } else {
        queries.len().max(1)
    };
    let mut tasks = Vec::new();
    for part in queries.chunks(chunk) {
        let part = part.to_vec();
        let index = index.clone();
        tasks.push(tokio::task::spawn_blocking(move || {
            part.iter().map(|q| index.search(q)).collect::<Vec<_>>()
        }));
    }
    let mut results = Vec::with_capacity(queries.len());
    for task in tasks {
        results.extend(
            task.await
                .map_err(|e| MemoryError::internal(format!("vector search task failed: {e}")))?,
        );
    }
    Ok(results)
}

/// Rebuild `index` from every active embedding in `store`; returns the number indexed.
pub async fn rebuild_index(
    store: &dyn MemoryStore,
    index: &dyn VectorIndex,
    dimension: usize,
) -> MemoryResult<usize> {
    index.clear();
    let mut after: Option<MemoryId> = None;
    let mut total = 0;
    loop {
        let page = store.embeddings_page(after.as_ref(), 4096).await?;
        let Some(last) = page.last() else { break };
        after = Some(last.id.clone());
        if let Some(bad) = page.iter().find(|r| r.vector.len() != dimension) {
            return Err(MemoryError::invalid(
                "embedding.provider",
                format!("stored vector of memory {} has {} dimensions but the embedder makes {dimension}", bad.id, bad.vector.len()),
            ));
        }
        total += page.len();
        index.upsert(&page);
    }
    Ok(total)
}

impl Actor for VectorsActor {
    type Msg = VectorsMsg;
    type State = VectorsState;
    type Arguments = VectorsArgs;

    async fn pre_start(
        &self,
        _myself: VectorsRef,
        args: VectorsArgs,
    ) -> Result<VectorsState, ActorProcessingErr> {
        args.store
            .check_embedding_model(args.embedder.model_id(), args.embedder.dimension())
            .await?;
        let started = std::time::Instant::now();
        let count = rebuild_index(
            args.store.as_ref(),
            args.index.as_ref(),
            args.embedder.dimension(),
        )
        .await?;
        tracing::info!(
            vectors = count,
            took_ms = started.elapsed().as_millis() as u64,
            "vector index loaded"
        );
        Ok(VectorsState {
            embedder: args.embedder,
            index: args.index,
            store: args.store,
        })
    }

    #[tracing::instrument(name = "vectors", skip_all)]
    async fn handle(
        &self,
        _myself: VectorsRef,
        message: VectorsMsg,
        state: &mut VectorsState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            VectorsMsg::Embed { texts, reply } => {
                let embedder = state.embedder.clone();
                tokio::spawn(async move {
                    let _ = reply.send(embed_on_blocking_threads(embedder, texts).await);
                });
            }
            VectorsMsg::Search {
                text,
                mut query,
                reply,
            } => {
                let embedder = state.embedder.clone();
                let index = state.index.clone();
                tokio::spawn(async move {
                    let result = tokio::task::spawn_blocking(move || {
                        if let Some(text) = text {
                            query.vector = embedder.embed(&text)?;
                        }
                        Ok(index.search(&query))
                    })
                    .await
                    .unwrap_or_else(|e| {
                        Err(MemoryError::internal(format!(
                            "vector search task failed: {e}"
                        )))
                    });
                    let _ = reply.send(result);
                });
            }
            VectorsMsg::Similarity { vector, ids, reply } => {
                let _ = reply.send(Ok(state.index.similarity(&vector, &ids)));
            }
            VectorsMsg::SearchMany { queries, reply } => {
                let index = state.index.clone();
                tokio::spawn(async move {
                    let _ = reply.send(search_on_blocking_threads(index, queries).await);
                });
            }
            VectorsMsg::Upsert { entries, reply } => {
                state.index.upsert(&entries);
                let _ = reply.send(Ok(()));
            }
            VectorsMsg::Remove { ids, reply } => {
                state.index.remove(&ids);
                let _ = reply.send(Ok(()));
            }
            VectorsMsg::Rebuild { reply } => {
                let result = rebuild_index(
                    state.store.as_ref(),
                    state.index.as_ref(),
                    state.embedder.dimension(),
                )
                .await;
                let _ = reply.send(result);
            }
            VectorsMsg::Status { reply } => {
                let _ = reply.send(Ok(IndexStatus {
                    backend: state.index.backend_name().to_string(),
                    model: state.embedder.model_id().to_string(),
                    dimension: state.embedder.dimension(),
                    vectors: state.index.len(),
                }));
            }
            VectorsMsg::InjectFault => return Err(injected_fault("vectors")),
        }
        Ok(())
    }
}

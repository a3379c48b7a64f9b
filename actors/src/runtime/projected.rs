//! Recall's reads from external projections (Qdrant vectors, FalkorDB/Neo4j graph).
//!
//! A projection answers a read only when it is up and holds every committed change:
//! its watermark (published by the projector) is set and the outbox has no entry past
//! it. Otherwise, and whenever the read itself fails, the embedded index or the SQL
//! graph answers, and the reason goes into the recall's `sources` (shown by
//! `debug: true`) and into the projection's fallback counter (health, metrics). The
//! embedded index and the SQL graph are always kept, so a fallback answers the same
//! question over the same data.

use std::collections::HashMap;
use std::sync::Arc;

use super::Runtime;
use crate::error::MemoryResult;
use crate::model::{AgentId, MemoryId};
use crate::policy::activation::{spread, Activation};
use crate::store::{Link, Projection, ProjectionReads, VectorQuery};

/// Where one kind of read was answered, for the recall's `sources`.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadSource {
    /// `vector` or `graph`.
    pub read: &'static str,
    /// What answered: a projection's name (`qdrant`, `falkordb`), or the embedded
    /// backend with the reason it stood in (`embedded (qdrant behind: 3 entries)`).
    pub answered_by: String,
}

impl ReadSource {
    /// `backend` answered `read`; `fallback_reason` says why a projection did not.
    fn new(read: &'static str, backend: &str, fallback_reason: Option<String>) -> Self {
        Self {
            read,
            answered_by: match fallback_reason {
                None => backend.to_string(),
                Some(why) => format!("{backend} ({why})"),
            },
        }
    }
}

/// Whether a projection may be read now.
enum Readiness {
    /// No projection serves this read: the embedded backend is the configured one.
    NotConfigured,
    /// This projection (index, handle) holds every committed change.
    Ready(usize, Arc<dyn Projection>),
    /// The projection (index, name) cannot be read now, and why.
    Unready(usize, &'static str, String),
}

impl Runtime {
    /// The projection serving `reads`, if it may be read now.
    async fn readiness(&self, reads: ProjectionReads) -> Readiness {
        let Some((index, projection)) = self
            .inner
            .projections
            .iter()
            .enumerate()
            .find(|(_, p)| p.serves() == reads)
        else {
            return Readiness::NotConfigured;
        };
        let name = projection.name();
        let Some(applied) = self.inner.watermarks.applied(index) else {
            return Readiness::Unready(index, name, "down or catching up".into());
        };
        // One indexed read: is anything committed that the projection has not applied?
        let episodic = &self.actors().episodic;
        match episodic.outbox_after(applied, 1).await {
            Ok(pending) if pending.is_empty() => Readiness::Ready(index, projection.clone()),
            Ok(pending) => {
                let head = episodic
                    .outbox_bounds()
                    .await
                    .map(|b| b.head)
                    .unwrap_or_else(|_| pending[0].seq);
                Readiness::Unready(
                    index,
                    name,
                    format!("behind: {} entries", head.saturating_sub(applied)),
                )
            }
            Err(error) => Readiness::Unready(index, name, format!("lag unknown: {error}")),
        }
    }

    /// Ask the projection serving `reads` with `read` if it may be read now. `Ok` is its
    /// answer with its name; `Err` says the fallback must answer, with the reason to
    /// report (None: no projection serves these reads, nothing to report). Counts the
    /// read either way.
    async fn read_projection<T, F, Fut>(
        &self,
        reads: ProjectionReads,
        read: F,
    ) -> Result<(T, &'static str), Option<String>>
    where
        F: FnOnce(Arc<dyn Projection>) -> Fut,
        Fut: std::future::Future<Output = MemoryResult<T>>,
    {
        let (index, reason) = match self.readiness(reads).await {
            Readiness::NotConfigured => return Err(None),
            Readiness::Unready(index, name, reason) => (index, format!("{name} {reason}")),
            Readiness::Ready(index, projection) => {
                let name = projection.name();
                match read(projection).await {
                    Ok(answer) => {
                        self.inner.watermarks.count_read(index, true);
                        return Ok((answer, name));
                    }
                    Err(error) => (index, format!("{name} failed: {error}")),
                }
            }
        };
        self.inner.watermarks.count_read(index, false);
        tracing::debug!(%reason, "read answered by the embedded fallback");
        Err(Some(reason))
    }

    /// Nearest neighbours of `query.vector` for recall: from the vector projection when
    /// it is caught up, else from the embedded index.
    pub(super) async fn nearest(
        &self,
        query: &VectorQuery,
    ) -> (MemoryResult<Vec<(MemoryId, f32)>>, ReadSource) {
        let projected = self
            .read_projection(ProjectionReads::Vectors, |projection| async move {
                projection.nearest(query).await
            })
            .await;
        let reason = match projected {
            Ok((hits, name)) => return (Ok(hits), ReadSource::new("vector", name, None)),
            Err(reason) => reason,
        };
        let hits = self.actors().vectors.search(query).await;
        let source = ReadSource::new("vector", self.inner.backends.index, reason);
        (hits, source)
    }

    /// Embed the query, then its nearest neighbours (`nearest`); the vector comes back
    /// too, to score candidates other retrievers find.
    pub(super) async fn embed_and_search(
        &self,
        text: &str,
        query: &VectorQuery,
    ) -> (MemoryResult<(Vec<f32>, Vec<(MemoryId, f32)>)>, ReadSource) {
        let vector = match self.embed_question(text).await {
            Ok(vector) => vector,
            Err(error) => {
                return (
                    Err(error),
                    ReadSource::new("vector", self.inner.backends.index, None),
                )
            }
        };
        let query = VectorQuery {
            vector,
            ..query.clone()
        };
        let (hits, source) = self.nearest(&query).await;
        (hits.map(|hits| (query.vector, hits)), source)
    }

    /// Exact similarity of `vector` to `ids`, from the embedded index (which holds every
    /// active memory's vector whichever projection serves nearest-neighbour reads).
    pub(super) async fn similarity(
        &self,
        vector: &[f32],
        ids: &[MemoryId],
    ) -> MemoryResult<HashMap<MemoryId, f64>> {
        if ids.is_empty() || vector.is_empty() {
            return Ok(HashMap::new());
        }
        let scored = self.actors().vectors.similarity(vector, ids).await?;
        Ok(scored
            .into_iter()
            .map(|(id, score)| (id, f64::from(score)))
            .collect())
    }

    /// The associations touching `seeds` (one hop): from the graph projection when it
    /// is caught up, else from the SQL graph.
    pub(super) async fn links_around(
        &self,
        agent: &AgentId,
        seeds: &[MemoryId],
        limit: usize,
    ) -> (MemoryResult<Vec<Link>>, ReadSource) {
        let projected = self
            .read_projection(ProjectionReads::Graph, |projection| async move {
                projection.links_around(agent, seeds, limit).await
            })
            .await;
        let reason = match projected {
            Ok((links, name)) => return (Ok(links), ReadSource::new("graph", name, None)),
            Err(reason) => reason,
        };
        let edges = self
            .actors()
            .graph
            .around(agent, seeds, 1, limit)
            .await
            .map(|edges| edges.iter().map(Link::from).collect());
        (
            edges,
            ReadSource::new("graph", self.inner.backends.graph, reason),
        )
    }

    /// Spreading activation from `seed`: the graph projection's weighted variable-length
    /// paths when it is caught up, else [`spread`] over edges read from the SQL graph.
    pub(super) async fn activate(
        &self,
        agent: &AgentId,
        seed: &MemoryId,
        depth: u32,
        decay: f64,
        limit: usize,
    ) -> (MemoryResult<Vec<Activation>>, ReadSource) {
        let projected = self
            .read_projection(ProjectionReads::Graph, |projection| async move {
                projection.spread(agent, seed, depth, decay, limit).await
            })
            .await;
        let reason = match projected {
            Ok((found, name)) => return (Ok(found), ReadSource::new("graph", name, None)),
            Err(reason) => reason,
        };
        let activations = self
            .actors()
            .graph
            .around(agent, std::slice::from_ref(seed), depth, 10_000)
            .await
            .map(|edges| spread(seed, &edges, depth, decay, limit));
        (
            activations,
            ReadSource::new("graph", self.inner.backends.graph, reason),
        )
    }

    /// The vector of a question, from the recent questions when it was asked lately.
    pub(super) async fn embed_question(&self, text: &str) -> MemoryResult<Vec<f32>> {
        let cached = self
            .inner
            .question_vectors
            .lock()
            .ok()
            .and_then(|mut cache| cache.get(text));
        if let Some(vector) = cached {
            return Ok(vector.as_ref().clone());
        }
        let vector = self
            .actors()
            .vectors
            .embed_queries(&[text.to_string()])
            .await?
            .pop()
            .unwrap_or_default();
        if !vector.is_empty() {
            if let Ok(mut cache) = self.inner.question_vectors.lock() {
                cache.put(text, Arc::new(vector.clone()));
            }
        }
        Ok(vector)
    }
}

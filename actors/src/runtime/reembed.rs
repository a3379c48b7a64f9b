//! Re-embedding without downtime: every memory gets a vector of a new model while
//! recall and writes go on with the old one, then one switch makes the new vectors
//! the only ones.
//!
//! The work runs in the background (or in the caller's task for the CLI). Passes over
//! the work list embed what has no vector of the new model, or one made from a text
//! that changed since, into the store's next-model table; progress survives a crash
//! there, so a restarted run carries on. When a pass finds little left
//! (`policy::reembed::ready_to_switch`), the switch takes the model gate exclusively
//! (every write that embeds and every recall holds it shared): it embeds the last few,
//! swaps the vectors in one store transaction, rebuilds the vector index, points the
//! vector actor at the new model and forgets the cached question vectors. Requests
//! wait for that pause; none sees a mix of models.

use std::sync::Arc;
use std::time::Instant;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::Runtime;
use crate::embedding::Embedder;
use crate::error::{ErrorCode, MemoryError, MemoryResult};
use crate::model::MemoryId;
use crate::policy::reembed::{pending, ready_to_switch, Pending};
use crate::store::{NextEmbedding, ReembedCounts};

/// Memories read per page of the work list.
const PAGE: usize = 256;

/// What a re-embedding is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReembedPhase {
    /// Nothing has run since start.
    Idle,
    /// Passes are embedding in the background.
    Embedding,
    /// The exclusive pause: the last vectors, the swap, the index.
    Switching,
    /// The new model serves.
    Done,
    /// Stopped by an error (`error`); starting again carries on.
    Failed,
}

/// The state of the current (or last) re-embedding.
#[derive(Debug, Clone, Serialize)]
pub struct ReembedStatus {
    /// What it is doing.
    pub phase: ReembedPhase,
    /// The model whose vectors serve now (`id|dimension`).
    pub serving: String,
    /// The model being embedded with (`id|dimension`), when one is.
    pub target: Option<String>,
    /// Memories with a vector, and of them with a vector of the target.
    pub counts: ReembedCounts,
    /// Passes over the work list so far.
    pub passes: usize,
    /// Memories embedded by this run.
    pub embedded: u64,
    /// When this run began.
    pub started_at: Option<DateTime<Utc>>,
    /// When it ended.
    pub finished_at: Option<DateTime<Utc>>,
    /// How long requests waited during the switch, in milliseconds.
    pub pause_ms: Option<f64>,
    /// Why it failed.
    pub error: Option<String>,
}

/// The runtime's record of re-embedding (one at a time).
#[derive(Debug, Default)]
pub(super) struct ReembedTracker {
    /// The current or last run's state (None before any).
    state: std::sync::Mutex<Option<ReembedStatus>>,
}

impl ReembedTracker {
    fn get(&self) -> Option<ReembedStatus> {
        self.state.lock().ok().and_then(|s| s.clone())
    }
    fn update(&self, change: impl FnOnce(&mut ReembedStatus)) {
        if let Ok(mut state) = self.state.lock() {
            if let Some(status) = state.as_mut() {
                change(status);
            }
        }
    }
    /// Claim the tracker for a run, or answer the target of the run under way.
    fn begin(&self, status: ReembedStatus) -> Result<(), Option<String>> {
        let Ok(mut state) = self.state.lock() else {
            return Err(None);
        };
        if let Some(current) = state.as_ref() {
            if matches!(
                current.phase,
                ReembedPhase::Embedding | ReembedPhase::Switching
            ) {
                return Err(current.target.clone());
            }
        }
        *state = Some(status);
        Ok(())
    }
}

/// `id|dimension` of an embedder, as the store records it.
pub fn model_key(embedder: &dyn Embedder) -> String {
    format!("{}|{}", embedder.model_id(), embedder.dimension())
}

impl Runtime {
    /// Start re-embedding every memory with `target` in the background (or carry on
    /// with one interrupted); `spec` is how to build `target` again (recorded at the
    /// switch). Answers at once with the status; a run towards another model is refused.
    pub async fn start_reembed(
        &self,
        target: Arc<dyn Embedder>,
        spec: String,
    ) -> MemoryResult<ReembedStatus> {
        let status = self.prepare_reembed(target.as_ref()).await?;
        if status.phase == ReembedPhase::Done {
            return Ok(status);
        }
        let runtime = self.clone();
        tokio::spawn(async move {
            if let Err(error) = runtime.run_reembed(target, spec, &|_| {}).await {
                tracing::warn!(%error, "re-embedding stopped");
            }
        });
        Ok(self.reembed_status().await)
    }

    /// Re-embed every memory with `target` and switch to it, in this task;
    /// `progress` sees the status after each page (the CLI's progress bar).
    pub async fn reembed(
        &self,
        target: Arc<dyn Embedder>,
        spec: String,
        progress: &(dyn Fn(&ReembedStatus) + Sync),
    ) -> MemoryResult<ReembedStatus> {
        let status = self.prepare_reembed(target.as_ref()).await?;
        if status.phase == ReembedPhase::Done {
            return Ok(status);
        }
        self.run_reembed(target, spec, progress).await
    }

    /// The current or last re-embedding, with counts read now.
    pub async fn reembed_status(&self) -> ReembedStatus {
        let actors = self.actors();
        let serving = actors
            .vectors
            .status()
            .await
            .map(|s| format!("{}|{}", s.model, s.dimension))
            .unwrap_or_default();
        let counts = actors.episodic.reembed_counts().await.unwrap_or_default();
        let target = actors.episodic.meta("reembed_target").await.ok().flatten();
        match self.inner.reembed.get() {
            Some(mut status) => {
                status.serving = serving;
                status.counts = counts;
                if status.phase == ReembedPhase::Done {
                    // The next-model vectors became the vectors: every one is done.
                    status.counts.done = status.counts.total;
                }
                status
            }
            None => ReembedStatus {
                phase: ReembedPhase::Idle,
                serving,
                target,
                counts,
                passes: 0,
                embedded: 0,
                started_at: None,
                finished_at: None,
                pause_ms: None,
                error: None,
            },
        }
    }

    /// Record `target` as the run's target (forgetting next vectors of another one)
    /// and claim the tracker; `Done` when the store already serves it.
    async fn prepare_reembed(&self, target: &dyn Embedder) -> MemoryResult<ReembedStatus> {
        let actors = self.actors();
        let key = model_key(target);
        let serving = actors.episodic.meta("embedding_model").await?;
        let now = self.now();
        let mut status = ReembedStatus {
            phase: ReembedPhase::Embedding,
            serving: serving.clone().unwrap_or_default(),
            target: Some(key.clone()),
            counts: actors.episodic.reembed_counts().await?,
            passes: 0,
            embedded: 0,
            started_at: Some(now),
            finished_at: None,
            pause_ms: None,
            error: None,
        };
        if serving.as_deref() == Some(key.as_str()) {
            status.phase = ReembedPhase::Done;
            status.finished_at = Some(now);
            return Ok(status);
        }
        if let Err(running) = self.inner.reembed.begin(status.clone()) {
            let message = match &running {
                Some(other) if *other == key => {
                    format!("a re-embedding with {key} is already running")
                }
                other => format!(
                    "a re-embedding with {} is running; wait for it to finish",
                    other.as_deref().unwrap_or("another model")
                ),
            };
            return Err(MemoryError::conflict(message));
        }
        let recorded = actors.episodic.meta("reembed_target").await?;
        if recorded.as_deref() != Some(key.as_str()) {
            actors.episodic.clear_next_embeddings().await?;
            actors
                .episodic
                .set_meta("reembed_target", Some(&key))
                .await?;
        }
        Ok(status)
    }

    /// The passes and the switch; the tracker records how it ends.
    async fn run_reembed(
        &self,
        target: Arc<dyn Embedder>,
        spec: String,
        progress: &(dyn Fn(&ReembedStatus) + Sync),
    ) -> MemoryResult<ReembedStatus> {
        let result = self.passes_and_switch(&target, &spec, progress).await;
        let now = self.now();
        match &result {
            Ok(_) => self.inner.reembed.update(|s| {
                s.phase = ReembedPhase::Done;
                s.finished_at = Some(now);
            }),
            Err(error) => {
                let message = error.message.clone();
                self.inner.reembed.update(|s| {
                    s.phase = ReembedPhase::Failed;
                    s.finished_at = Some(now);
                    s.error = Some(message);
                });
            }
        }
        result?;
        let status = self.reembed_status().await;
        progress(&status);
        tracing::info!(model = ?status.serving, embedded = status.embedded, pause_ms = ?status.pause_ms, "re-embedding done");
        Ok(status)
    }

    async fn passes_and_switch(
        &self,
        target: &Arc<dyn Embedder>,
        spec: &str,
        progress: &(dyn Fn(&ReembedStatus) + Sync),
    ) -> MemoryResult<()> {
        let actors = self.actors();
        let mut passes = 0;
        loop {
            let embedded = self.pass(target, progress).await?;
            passes += 1;
            self.inner.reembed.update(|s| s.passes = passes);
            if ready_to_switch(embedded, passes) {
                break;
            }
        }
        self.inner
            .reembed
            .update(|s| s.phase = ReembedPhase::Switching);
        let gate = actors.vectors.exclusive().await;
        let paused = Instant::now();
        // Nobody embeds while the gate is held: this last pass leaves nothing behind.
        self.pass(target, progress).await?;
        let key = model_key(target.as_ref());
        let memories = actors.episodic.reembed_counts().await?.total;
        actors
            .episodic
            .switch_embeddings(&key, spec, memories)
            .await?;
        actors.vectors.switch(target.clone(), memories).await?;
        if let Ok(mut cache) = self.inner.question_vectors.lock() {
            cache.clear();
        }
        drop(gate);
        let pause_ms = paused.elapsed().as_secs_f64() * 1000.0;
        self.inner.reembed.update(|s| s.pause_ms = Some(pause_ms));
        Ok(())
    }

    /// One pass over the work list; answers how many memories it embedded.
    async fn pass(
        &self,
        target: &Arc<dyn Embedder>,
        progress: &(dyn Fn(&ReembedStatus) + Sync),
    ) -> MemoryResult<usize> {
        let actors = self.actors();
        let mut after: Option<MemoryId> = None;
        let mut embedded = 0;
        loop {
            let page = actors.episodic.reembed_page(after.as_ref(), PAGE).await?;
            let Some(last) = page.last() else { break };
            after = Some(last.id.clone());
            let work = pending(&page);
            if !work.is_empty() {
                let rows = embed_pending(target.clone(), work).await?;
                actors.episodic.put_next_embeddings(&rows).await?;
                embedded += rows.len();
                self.inner
                    .reembed
                    .update(|s| s.embedded += rows.len() as u64);
                if let Some(status) = self.inner.reembed.get() {
                    let counts = actors
                        .episodic
                        .reembed_counts()
                        .await
                        .unwrap_or(status.counts);
                    self.inner.reembed.update(|s| s.counts = counts);
                    progress(&ReembedStatus { counts, ..status });
                }
            }
        }
        Ok(embedded)
    }
}

/// Embed a page's pending texts with `target` on a blocking thread.
async fn embed_pending(
    target: Arc<dyn Embedder>,
    work: Vec<Pending>,
) -> MemoryResult<Vec<NextEmbedding>> {
    tokio::task::spawn_blocking(move || {
        let texts: Vec<&str> = work.iter().map(|p| p.text.as_str()).collect();
        let vectors = target.embed_batch(&texts)?;
        if vectors.len() != work.len() {
            return Err(MemoryError::new(
                ErrorCode::Internal,
                format!(
                    "the embedder returned {} vectors for {} texts",
                    vectors.len(),
                    work.len()
                ),
            ));
        }
        Ok(work
            .into_iter()
            .zip(vectors)
            .map(|(p, vector)| NextEmbedding {
                id: p.id,
                vector,
                source_hash: p.source_hash,
            })
            .collect())
    })
    .await
    .map_err(|e| MemoryError::internal(format!("re-embedding task failed: {e}")))?
}

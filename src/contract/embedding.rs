//! Re-embedding as an operation (`POST /v1/admin/reembed`, `GET /v1/admin/reembed`,
//! `mnemos reindex --reembed`): every memory of every tenant gets a vector of the
//! configured model while the stored model keeps serving, then one switch. The whole
//! store is touched, so only the server's admin (tenant default, every agent) may
//! start it; any admin may read its progress.

use chrono::{DateTime, Utc};
use mnemos_actors::error::{MemoryError, MemoryResult};
use mnemos_actors::runtime::{ReembedPhase, ReembedStatus};
use mnemos_actors::Runtime;
use serde::Serialize;
use utoipa::ToSchema;

use crate::auth::{Caller, Scope};
use crate::embedding::PendingEmbedder;

/// The progress of a re-embedding.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ReembedView {
    /// `idle`, `embedding`, `switching`, `done` or `failed`.
    #[schema(example = "embedding")]
    pub phase: String,
    /// The model whose vectors answer recall now (`id|dimension`).
    pub serving: String,
    /// The model being embedded with, or the configured one waiting for a re-embedding.
    pub target: Option<String>,
    /// Memories with a vector.
    pub total: u64,
    /// Of them, those with a vector of the target model.
    pub done: u64,
    /// Passes over the memories so far.
    pub passes: usize,
    /// Memories embedded by this run.
    pub embedded: u64,
    /// When this run began.
    pub started_at: Option<DateTime<Utc>>,
    /// When it ended.
    pub finished_at: Option<DateTime<Utc>>,
    /// How long requests waited during the switch, in milliseconds.
    pub pause_ms: Option<f64>,
    /// Why it failed (start it again to carry on).
    pub error: Option<String>,
}

impl ReembedView {
    /// The wire view of `status`; `pending` names the configured model while idle.
    pub fn of(status: ReembedStatus, pending: Option<&PendingEmbedder>) -> Self {
        let phase = match status.phase {
            ReembedPhase::Idle => "idle",
            ReembedPhase::Embedding => "embedding",
            ReembedPhase::Switching => "switching",
            ReembedPhase::Done => "done",
            ReembedPhase::Failed => "failed",
        };
        let target = status
            .target
            .or_else(|| pending.map(|p| mnemos_actors::runtime::model_key(p.embedder.as_ref())));
        Self {
            phase: phase.to_string(),
            serving: status.serving,
            target,
            total: status.counts.total,
            done: status.counts.done,
            passes: status.passes,
            embedded: status.embedded,
            started_at: status.started_at,
            finished_at: status.finished_at,
            pause_ms: status.pause_ms,
            error: status.error,
        }
    }
}

/// The refusal of a re-embedding the server cannot do now.
fn nothing_pending(serving: &str) -> MemoryError {
    MemoryError::conflict(format!(
        "the stored vectors already come from the configured model ({serving}): change [embedding] \
         in the configuration and restart (the server keeps serving the stored model), then re-embed"
    ))
}

/// Start re-embedding with the configured model in the background (server admin only).
pub async fn start(
    runtime: &Runtime,
    caller: &Caller,
    pending: Option<&PendingEmbedder>,
    vector_projection: bool,
) -> MemoryResult<ReembedView> {
    caller.require(Scope::Admin)?;
    if caller.tenant.is_some() || caller.agent.is_some() {
        return Err(crate::auth::denied(
            "only the server's admin (tenant default, every agent) re-embeds the store",
        ));
    }
    let Some(pending) = pending else {
        let status = runtime.reembed_status().await;
        if matches!(status.phase, ReembedPhase::Done) {
            return Ok(ReembedView::of(status, None));
        }
        return Err(nothing_pending(&status.serving));
    };
    if vector_projection {
        return Err(MemoryError::invalid(
            "vectors.backend",
            "re-embedding beside a Qdrant projection is not supported: its collection holds the old \
             model's vectors; set vectors.backend = \"embedded\" for the re-embedding, then point \
             vectors.collection at a new collection (it is filled from SQL)",
        ));
    }
    let status = runtime
        .start_reembed(pending.embedder.clone(), pending.spec.clone())
        .await?;
    Ok(ReembedView::of(status, Some(pending)))
}

/// The progress of the current or last re-embedding (admins).
pub async fn status(
    runtime: &Runtime,
    caller: &Caller,
    pending: Option<&PendingEmbedder>,
) -> MemoryResult<ReembedView> {
    caller.require(Scope::Admin)?;
    Ok(ReembedView::of(runtime.reembed_status().await, pending))
}

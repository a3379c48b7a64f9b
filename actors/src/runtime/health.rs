//! The runtime's health: supervision state of every child, the embedded index, the
//! backends, and the external projections with their lag.

use crate::actors::projector::ProjectionStatus;
use crate::actors::vectors::IndexStatus;
use crate::store::StoreCondition;
use crate::supervisor::ChildHealth;

use super::Runtime;

/// Runtime-level health.
#[derive(Debug, Clone, PartialEq)]
pub struct RuntimeHealth {
    /// Per-child supervision state.
    pub children: Vec<ChildHealth>,
    /// Vector index status (None when the vector actor is down).
    pub index: Option<IndexStatus>,
    /// System-of-record backend name.
    pub store_backend: &'static str,
    /// Whether the system of record answers and which rows its reads skipped (None when
    /// the episodic actor did not answer).
    pub store: Option<StoreCondition>,
    /// Graph backend name.
    pub graph_backend: &'static str,
    /// Working-memory backend name.
    pub working_backend: &'static str,
    /// Projects and KV namespaces backend name.
    pub namespaces_backend: &'static str,
    /// Why working memory is serving from its fallback, if it is.
    pub working_degraded: Option<String>,
    /// External projections and their lag (empty when none is configured or the projector is down).
    pub projections: Vec<ProjectionStatus>,
    /// Inner-thought provider of the sleep cycle (`none`, `openai`).
    pub inner_thought: &'static str,
    /// The scheduled jobs and when each fires next.
    pub schedules: Vec<ScheduleStatus>,
    /// Percentiles of recent recalls' server-side time (None before the first recall).
    pub recall_latency: Option<crate::policy::stats::LatencySummary>,
}

/// One scheduled job of BackgroundCognition.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ScheduleStatus {
    /// `sleep_cycle` or `archival`.
    pub job: &'static str,
    /// Its cron expression as configured.
    pub cron: String,
    /// Whether schedules run at all (`cognition.enabled`).
    pub enabled: bool,
    /// Its next firing after now (None when disabled or it never fires again).
    pub next_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// Ask every part how it is; a part that does not answer at once is reported as down.
pub(super) async fn health(rt: &Runtime) -> RuntimeHealth {
    let actors = rt.actors();
    let backends = rt.inner.backends;
    let (index, working_degraded, store) = tokio::join!(
        actors.vectors.status(),
        actors.working.degraded(),
        actors.episodic.condition()
    );
    RuntimeHealth {
        children: rt.inner.directory.health(),
        index,
        store_backend: backends.store,
        store,
        graph_backend: backends.graph,
        working_backend: backends.working,
        namespaces_backend: backends.namespaces,
        working_degraded,
        projections: actors.projector.status().await.unwrap_or_default(),
        inner_thought: backends.inner_thought,
        schedules: schedules(rt),
        recall_latency: rt
            .inner
            .recall_latency
            .lock()
            .ok()
            .and_then(|window| window.summary()),
    }
}

/// Each scheduled job with its next firing after the runtime's now.
fn schedules(rt: &Runtime) -> Vec<ScheduleStatus> {
    let cognition = &rt.inner.config.cognition;
    let now = rt.now();
    [
        ("sleep_cycle", &cognition.sleep_schedule),
        ("archival", &cognition.archival_schedule),
    ]
    .into_iter()
    .map(|(job, schedule)| ScheduleStatus {
        job,
        cron: schedule.expression.clone(),
        enabled: cognition.enabled,
        next_at: cognition
            .enabled
            .then(|| schedule.next_after(now))
            .flatten(),
    })
    .collect()
}

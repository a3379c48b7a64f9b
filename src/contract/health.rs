//! `/health` on the wire: liveness, the state of each backend and of each supervised
//! actor, computed from the runtime's health report.

use std::time::Instant;

use mnemos_actors::supervisor::{ChildKind, ChildState};
use mnemos_actors::Runtime;
use serde::Serialize;
use utoipa::ToSchema;

/// Health of one supervised actor.
#[derive(Debug, Serialize, ToSchema)]
pub struct ActorHealthView {
    /// Actor name.
    pub name: String,
    /// running | restarting | failed.
    pub state: String,
    /// Restarts so far.
    pub restarts: u32,
    /// Last failure.
    pub last_error: Option<String>,
}

/// Liveness and per-backend state.
#[derive(Debug, Serialize, ToSchema)]
pub struct HealthView {
    /// ok | degraded.
    pub status: String,
    /// Server version.
    pub version: String,
    /// Seconds since start.
    pub uptime_seconds: u64,
    /// Backend name and state per store (only for an admin, or with `auth.public_metrics`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub backends: Option<serde_json::Value>,
    /// Supervised actors (only for an admin, or with `auth.public_metrics`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actors: Option<Vec<ActorHealthView>>,
    /// The scheduled jobs (`sleep_cycle`, `archival`) with their cron and next firing
    /// (only for an admin, or with `auth.public_metrics`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub schedule: Option<serde_json::Value>,
    /// Server-side recall time over the most recent recalls: count, window, p50, p95,
    /// p99 in ms (only for an admin, or with `auth.public_metrics`; null before the
    /// first recall).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub recall_latency_ms: Option<serde_json::Value>,
}

/// The health answer of `runtime`, serving since `started`; `detail` adds the backends
/// and actors (what an anonymous caller may not see).
pub async fn health(runtime: &Runtime, started: Instant, detail: bool) -> HealthView {
    let health = runtime.health().await;
    let degraded = health
        .children
        .iter()
        .any(|c| c.state != ChildState::Running)
        || health.index.is_none()
        || health.working_degraded.is_some()
        || health.projections.iter().any(|p| p.state == "behind")
        || health
            .store
            .as_ref()
            .is_none_or(|s| s.unreachable.is_some() || !s.unreadable.is_empty());
    let state_of = |kind: ChildKind| {
        health
            .children
            .iter()
            .find(|c| c.child == kind)
            .map(|c| match c.state {
                ChildState::Running => "up",
                ChildState::Restarting => "restarting",
                ChildState::Failed => "down",
            })
            .unwrap_or("down")
    };
    let backends = serde_json::json!({
        "store": store_view(&health, state_of(ChildKind::Episodic)),
        "vectors": {
            "backend": health.index.as_ref().map(|i| i.backend.clone()),
            "state": state_of(ChildKind::Vectors),
            "model": health.index.as_ref().map(|i| i.model.clone()),
            "dimension": health.index.as_ref().map(|i| i.dimension),
            "indexed": health.index.as_ref().map(|i| i.vectors),
            "keyword_indexed": health.index.as_ref().map(|i| i.keyword_memories),
        },
        "graph": { "backend": health.graph_backend, "state": state_of(ChildKind::Graph) },
        "projections": health.projections,
        "working": {
            "backend": health.working_backend,
            "state": if health.working_degraded.is_some() { "degraded" } else { state_of(ChildKind::Working) },
            "fallback": health.working_degraded,
        },
        "namespaces": { "backend": health.namespaces_backend, "state": state_of(ChildKind::Namespaces) },
        "inner_thought": { "provider": health.inner_thought, "state": state_of(ChildKind::Consolidator) },
    });
    let schedule: serde_json::Map<String, serde_json::Value> = health
        .schedules
        .iter()
        .map(|s| {
            (
                s.job.to_string(),
                serde_json::json!({"cron": s.cron, "enabled": s.enabled, "next_at": s.next_at}),
            )
        })
        .collect();
    let recall_latency = serde_json::to_value(health.recall_latency).unwrap_or_default();
    HealthView {
        schedule: detail.then_some(serde_json::Value::Object(schedule)),
        recall_latency_ms: detail.then_some(recall_latency),
        status: if degraded { "degraded" } else { "ok" }.to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        uptime_seconds: started.elapsed().as_secs(),
        backends: detail.then_some(backends),
        actors: detail.then(|| {
            health
                .children
                .into_iter()
                .map(|c| ActorHealthView {
                    name: c.child.as_str().to_string(),
                    state: match c.state {
                        ChildState::Running => "running",
                        ChildState::Restarting => "restarting",
                        ChildState::Failed => "failed",
                    }
                    .to_string(),
                    restarts: c.restarts,
                    last_error: c.last_error,
                })
                .collect()
        }),
    }
}

/// The system of record's part of `/health`: `down` when its probe failed (or its actor
/// did not answer), `degraded` while reads skip rows they cannot decode (listed, at most
/// ten, with the command that repairs them).
fn store_view(
    health: &mnemos_actors::runtime::RuntimeHealth,
    actor_state: &str,
) -> serde_json::Value {
    let Some(condition) = &health.store else {
        return serde_json::json!({
            "backend": health.store_backend,
            "state": "down",
            "error": "the episodic actor did not answer",
        });
    };
    let state = if actor_state != "up" {
        actor_state
    } else if condition.unreachable.is_some() {
        "down"
    } else if !condition.unreadable.is_empty() {
        "degraded"
    } else {
        "up"
    };
    let mut view = serde_json::json!({ "backend": health.store_backend, "state": state });
    if let Some(error) = &condition.unreachable {
        view["error"] = serde_json::json!(error);
    }
    if !condition.unreadable.is_empty() {
        view["unreadable_rows"] = serde_json::json!(condition.unreadable.len());
        view["unreadable"] =
            serde_json::json!(condition.unreadable.iter().take(10).collect::<Vec<_>>());
        view["repair"] = serde_json::json!("mnemos doctor --repair");
    }
    view
}

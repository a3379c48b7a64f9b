//! What the REST handlers share at run time ([`AppState`]): built once by
//! `app::Application`, handed to the routes by `router::router`. A neutral module so
//! that neither the router nor the handlers own it.

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Instant;

use metrics_exporter_prometheus::PrometheusHandle;
use mnemos_actors::Runtime;

use crate::auth::keys::{Authenticator, KeyStore};
use crate::context::ProjectRoots;

/// State shared by every REST handler (behind an `Arc`).
#[derive(Clone)]
pub struct AppState {
    /// The runtime handle every operation goes through.
    pub runtime: Runtime,
    /// Whether the fault-injection route answers (`server.fault_injection`; supervision tests only).
    pub fault_injection: bool,
    /// Renders the process's Prometheus metrics for `/metrics`.
    pub metrics: PrometheusHandle,
    /// When serving started, for `/health`'s uptime.
    pub started: Instant,
    /// Directories build_context's `project_root` may name (`server.project_roots`).
    pub project_roots: ProjectRoots,
    /// Live MCP sessions on `/mcp` (kept by the MCP surface), for `/metrics`'s
    /// `mnemos_mcp_sessions`; a plain counter so the REST side needs nothing of MCP.
    pub mcp_sessions: Arc<AtomicUsize>,
    /// What the inner-thought model still has to name and has named (when it names
    /// entities), for `/metrics`'s `mnemos_entity_naming_*`.
    pub naming: Option<Arc<crate::store::model_entities::NamingQueue>>,
    /// API keys and the audit log (the admin routes manage them).
    pub keys: Arc<dyn KeyStore>,
    /// Checks keys (None without `auth.mode = "keys"`); told when a key is revoked so
    /// the revocation holds at once.
    pub authenticator: Option<Arc<Authenticator>>,
    /// `/metrics` and `/health`'s detail answer without an admin key (`auth.public_metrics`).
    pub public_metrics: bool,
    /// The configured embedder when the stored vectors come from another model
    /// (what `POST /v1/admin/reembed` re-embeds with).
    pub pending_embedder: Option<crate::embedding::PendingEmbedder>,
    /// A projection holds vectors (Qdrant): re-embedding is refused beside it.
    pub vector_projection: bool,
}

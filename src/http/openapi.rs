//! The OpenAPI document of the REST surface (`GET /openapi.json`), generated from the
//! handlers' `#[utoipa::path]` attributes and the contract's wire types.

use utoipa::OpenApi;

use super::{handlers, kv, projects, sessions};
use crate::contract;

/// The OpenAPI document, generated from the handlers and wire types.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "mnemos",
        description = "Cognitive memory runtime for AI agents"
    ),
    paths(
        handlers::remember,
        handlers::remember_batch,
        handlers::recall,
        handlers::associate,
        handlers::spreading_activation,
        handlers::forget,
        handlers::consolidate,
        handlers::archive,
        handlers::reflect,
        handlers::memory_history,
        handlers::build_context,
        handlers::extract_turn,
        handlers::list_memories,
        handlers::get_memory,
        handlers::patch_memory,
        handlers::delete_memory,
        handlers::memory_history_resource,
        handlers::cognition_runs,
        sessions::post_messages,
        sessions::get_messages,
        sessions::compact,
        handlers::health,
        handlers::metrics,
        projects::put_project,
        projects::list_projects,
        projects::get_project,
        projects::attach_session,
        kv::configure_namespace,
        kv::namespace_stats,
        kv::put_entry,
        kv::get_entry,
        kv::delete_entry,
        kv::list_entries,
        kv::search_entries,
    ),
    components(schemas(
        contract::errors::ErrorBody,
        contract::errors::ErrorDetail,
        contract::projects::ProjectPutBody,
        contract::projects::ProjectListBody,
        contract::kv::KvPutBody,
        contract::kv::KvKeyBody,
        contract::kv::KvSearchBody,
        contract::kv::KvListByTagBody,
        contract::kv::KvStatsBody,
    ))
)]
pub struct ApiDoc;

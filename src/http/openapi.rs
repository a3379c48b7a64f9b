//! The OpenAPI document of the REST surface (`GET /openapi.json`), generated from the
//! handlers' `#[utoipa::path]` attributes and the contract's wire types.

use utoipa::OpenApi;

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::Modify;

use super::{admin, handlers, kv, projects, sessions};
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
        admin::create_key,
        admin::list_keys,
        admin::revoke_key,
        admin::audit_log,
        admin::erase_agent,
        admin::erase_tenant,
    ),
    modifiers(&BearerKeys),
    security(("api_key" = [])),
    components(schemas(
        contract::errors::ErrorBody,
        contract::errors::ErrorDetail,
        contract::erase::EraseResponse,
        contract::erase::ErasedRecordsView,
        contract::erase::TenantEraseResponse,
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

/// Declares the `Authorization: Bearer <key>` scheme every route takes.
struct BearerKeys;

impl Modify for BearerKeys {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "api_key",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "A mnemos API key (mnm_<id>_<secret>); needed when auth.mode = \"keys\"",
                    ))
                    .build(),
            ),
        );
        // What every route may answer whoever asks: a refused request (400: a missing
        // owner, a bad field), no or a bad key (401), a missing scope or another agent
        // (403), a spent rate (429).
        let refusals = [
            ("400", "Invalid argument: the body says which field"),
            (
                "401",
                "No key, or a malformed, unknown, revoked or expired one",
            ),
            ("403", "The key may not do this (scope, agent or tenant)"),
            (
                "429",
                "Rate or write budget spent; Retry-After says when to retry",
            ),
        ];
        for item in openapi.paths.paths.values_mut() {
            for operation in [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
                &mut item.patch,
            ]
            .into_iter()
            .flatten()
            {
                for (status, description) in refusals {
                    if !operation.responses.responses.contains_key(status) {
                        operation.responses.responses.insert(
                            status.to_string(),
                            utoipa::openapi::RefOr::T(
                                utoipa::openapi::ResponseBuilder::new()
                                    .description(description)
                                    .content(
                                        "application/json",
                                        utoipa::openapi::ContentBuilder::new()
                                            .schema(Some(utoipa::openapi::Ref::from_schema_name(
                                                "ErrorBody",
                                            )))
                                            .build(),
                                    )
                                    .build(),
                            ),
                        );
                    }
                }
            }
        }
    }
}

//! The OpenAPI document of the REST surface (`GET /openapi.json`), generated from the
//! handlers' `#[utoipa::path]` attributes and the contract's wire types.

use utoipa::OpenApi;

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::Modify;

use std::sync::OnceLock;

use serde_json::{json, Value};

use super::{admin, browse, entities, handlers, kv, projects, sessions, transfer};
use crate::contract;

/// The document `/openapi.json` serves: the generated one plus what utoipa cannot derive
/// (servers, tag descriptions, the proxy's OpenAI-compatible routes and `/mcp`), built once.
pub fn document() -> &'static Value {
    static DOCUMENT: OnceLock<Value> = OnceLock::new();
    DOCUMENT.get_or_init(|| {
        let mut document = serde_json::to_value(ApiDoc::openapi()).unwrap_or_else(|_| json!({}));
        complete(&mut document);
        document
    })
}

/// Every tag an operation carries, with what it groups.
const TAGS: &[(&str, &str)] = &[
    ("tools", "The memory tools (the MCP tools' REST form): remember, recall, forget, consolidate, …"),
    ("memories", "Memories as resources: browse, read, change, delete, history"),
    ("sessions", "Conversation sessions: messages, the live window, compaction"),
    ("projects", "Projects: isolated groups of sessions and memories"),
    ("namespaces", "Key-value namespaces with eviction policies"),
    ("cognition", "The sleep cycle's run log"),
    ("admin", "API keys, the audit log, archival and erasure (admin scope)"),
    ("service", "Health and metrics"),
    ("transfer", "Export and import as JSONL (application/x-ndjson): one agent, or a tenant for an admin key"),
    ("proxy", "The OpenAI-compatible memory proxy (chat completions, responses, embeddings, models): chat and responses requests gain recalled memories, exchanges are remembered"),
    ("mcp", "The Model Context Protocol endpoint (streamable HTTP, protocol 2025-11-25)"),
];

/// Add servers, tags and the routes outside the REST handlers to the generated document.
fn complete(document: &mut Value) {
    document["servers"] = json!([
        {"url": "http://127.0.0.1:8077", "description": "a local `mnemos serve` on the default port"}
    ]);
    document["tags"] = Value::Array(
        TAGS.iter()
            .map(|(name, description)| json!({"name": name, "description": description}))
            .collect(),
    );
    let Some(paths) = document.get_mut("paths").and_then(Value::as_object_mut) else {
        return;
    };
    for (path, item) in extra_paths() {
        paths.insert(path.to_string(), item);
    }
    binary_alternatives(paths);
}

/// Export and import carry JSONL (`application/x-ndjson`), which client generators such
/// as openapi-python-client do not know: each also names `application/octet-stream`
/// (the same bytes), which they turn into a file or bytes argument. The server takes
/// both on `POST /v1/import` and answers `GET /v1/export` as x-ndjson.
fn binary_alternatives(paths: &mut serde_json::Map<String, Value>) {
    let binary = json!({"schema": {"type": "string", "format": "binary"}});
    if let Some(content) = paths
        .get_mut("/v1/export")
        .and_then(|item| item.pointer_mut("/get/responses/200/content"))
        .and_then(Value::as_object_mut)
    {
        content.insert("application/octet-stream".into(), binary.clone());
    }
    if let Some(body) = paths
        .get_mut("/v1/import")
        .and_then(|item| item.pointer_mut("/post/requestBody"))
    {
        body["description"] = json!(
            "An export file: one JSON object per line. Send it as application/x-ndjson or application/octet-stream."
        );
        body["content"] = json!({"application/octet-stream": binary});
    }
}

/// A JSON object of any shape (the OpenAI and MCP payloads, described by their own specs).
fn any_object(description: &str) -> Value {
    json!({"type": "object", "additionalProperties": true, "description": description})
}

/// One operation of the proxy or `/mcp`, answering JSON.
fn operation(tag: &str, id: &str, summary: &str, body: Option<&str>, answer: &str) -> Value {
    let mut operation = json!({
        "tags": [tag],
        "operationId": id,
        "summary": summary,
        "responses": {
            "200": {"description": answer, "content": {"application/json": {"schema": any_object(answer)}}},
            "400": {"description": "Invalid request", "content": {"application/json": {"schema": any_object("an error envelope")}}},
            "401": {"description": "No key, or a bad one", "content": {"application/json": {"schema": any_object("an error envelope")}}},
            "403": {"description": "The key may not do this", "content": {"application/json": {"schema": any_object("an error envelope")}}},
            "429": {"description": "Rate or write budget spent", "content": {"application/json": {"schema": any_object("an error envelope")}}},
        },
        "security": [{"api_key": []}],
    });
    if let Some(body) = body {
        operation["requestBody"] = json!({
            "required": true,
            "content": {"application/json": {"schema": any_object(body)}}
        });
    }
    operation
}

/// The proxy's routes and `/mcp`.
fn extra_paths() -> Vec<(&'static str, Value)> {
    let upstream = "Answered by the upstream model server unchanged (OpenAI's schema), with X-Mnemos-* headers saying what was injected; upstream errors come in OpenAI's error envelope";
    vec![
        (
            "/v1/chat/completions",
            json!({"post": operation(
            "proxy", "proxy_chat_completions",
            "OpenAI chat completions (plain or streaming) with the agent's memories injected; the exchange is remembered",
            Some("An OpenAI chat completion request; the agent comes from the key, X-Mnemos-Agent-Id or `user`"),
            upstream)}),
        ),
        (
            "/v1/responses",
            json!({"post": operation(
            "proxy", "proxy_responses",
            "OpenAI Responses API (plain or streaming) with the agent's memories added to `instructions`; the exchange is remembered",
            Some("An OpenAI responses request; the agent comes from the key, X-Mnemos-Agent-Id or `user`"),
            upstream)}),
        ),
        (
            "/v1/embeddings",
            json!({"post": operation(
            "proxy", "proxy_embeddings",
            "OpenAI embeddings, passed to proxy.embeddings_url (or proxy.upstream_url) unchanged",
            Some("An OpenAI embeddings request"),
            upstream)}),
        ),
        (
            "/v1/models",
            json!({"get": operation(
            "proxy", "proxy_models", "The upstream's models", None, upstream)}),
        ),
        (
            "/mcp",
            json!({
                "post": operation("mcp", "mcp_post",
                    "A JSON-RPC message of the Model Context Protocol (initialize opens a session, Mcp-Session-Id names it)",
                    Some("A JSON-RPC 2.0 request, notification or response"),
                    "A JSON-RPC response, or an event stream of them"),
                "delete": operation("mcp", "mcp_delete_session",
                    "End the session named by Mcp-Session-Id", None, "The session ended"),
            }),
        ),
    ]
}

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
        handlers::add_memories,
        handlers::delete_all_memories,
        handlers::get_memory,
        handlers::patch_memory,
        handlers::delete_memory,
        handlers::memory_history_resource,
        browse::agents,
        browse::bulk,
        browse::associations,
        browse::graph,
        browse::retention,
        browse::sessions,
        browse::namespaces,
        entities::list_entities,
        entities::get_entity,
        entities::list_facts,
        entities::merge_entity,
        entities::split_entity,
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
        admin::start_reembed,
        admin::reembed_status,
        transfer::export,
        transfer::import,
    ),
    modifiers(&BearerKeys),
    security(("api_key" = [])),
    components(schemas(
        contract::errors::ErrorBody,
        contract::errors::ErrorDetail,
        contract::erase::EraseResponse,
        contract::erase::ErasedRecordsView,
        contract::erase::TenantEraseResponse,
        contract::embedding::ReembedView,
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

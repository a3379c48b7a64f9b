//! The tools by name, for surfaces that receive a tool name and JSON arguments (MCP):
//! [`call_tool`] parses the arguments with the contract's strict rules and runs the
//! tool function, and [`input_schemas`] gives each tool body's JSON schema.

use mnemos_actors::error::{ErrorCode, MemoryError, MemoryResult};
use mnemos_actors::Runtime;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use utoipa::OpenApi;

use super::parse::from_json_value;
use super::{entities, kv, memories, projects, tools, wire};
use crate::auth::Caller;
use crate::context::ProjectRoots;

/// The tool bodies as OpenAPI components: the source of every tool's input schema.
#[derive(OpenApi)]
#[openapi(components(schemas(
    wire::RememberBody,
    wire::RememberBatchBody,
    wire::RecallBody,
    wire::AssociateBody,
    wire::SpreadingActivationBody,
    wire::ForgetBody,
    wire::AgentBody,
    wire::HistoryBody,
    wire::BuildContextBody,
    wire::ExtractTurnBody,
    wire::ListParams,
    wire::MemoryRefBody,
    wire::UpdateMemoryBody,
    wire::MemoryView,
    wire::RememberResponse,
    wire::RememberBatchResponse,
    wire::ExtractTurnResponse,
    wire::DeleteResponse,
    wire::HistoryResponse,
    wire::ForgetResponse,
    projects::ProjectPutBody,
    projects::ProjectListBody,
    kv::KvPutBody,
    kv::KvKeyBody,
    kv::KvSearchBody,
    kv::KvListByTagBody,
    kv::KvStatsBody,
    entities::EntitiesParams,
    entities::EntityBody,
    entities::FactsParams,
    entities::EntityMergeToolBody,
)))]
struct ToolBodies;

/// The JSON schemas of the tool bodies and of the types they refer to, keyed by type
/// name (`RememberBody`, ...), as in the OpenAPI document's `components.schemas`.
pub fn input_schemas() -> Value {
    serde_json::to_value(ToolBodies::openapi())
        .ok()
        .and_then(|document| document.pointer("/components/schemas").cloned())
        .unwrap_or(Value::Null)
}

/// Run the tool `name` with JSON `arguments` and answer with its wire response as JSON;
/// `trigger` names the surface in consolidation runs, `roots` bounds build_context.
pub async fn call_tool(
    runtime: &Runtime,
    caller: &Caller,
    roots: &ProjectRoots,
    trigger: &str,
    name: &str,
    arguments: Value,
) -> MemoryResult<Value> {
    let args = arguments;
    match name {
        "remember" => answer(tools::remember(runtime, caller, parse(args)?).await),
        "remember_batch" => answer(tools::remember_batch(runtime, caller, parse(args)?).await),
        "recall" => answer(tools::recall(runtime, caller, parse(args)?).await),
        "associate" => answer(tools::associate(runtime, caller, parse(args)?).await),
        "spreading_activation" => {
            answer(tools::spreading_activation(runtime, caller, parse(args)?).await)
        }
        "forget" => answer(tools::forget(runtime, caller, parse(args)?).await),
        "consolidate" => answer(tools::consolidate(runtime, caller, parse(args)?, trigger).await),
        "reflect" => answer(tools::reflect(runtime, caller, parse(args)?).await),
        "memory_history" => answer(tools::memory_history(runtime, caller, parse(args)?).await),
        "build_context" => answer(tools::build_context(runtime, caller, roots, parse(args)?).await),
        "extract_turn" => answer(tools::extract_turn(runtime, caller, parse(args)?).await),
        "list_memories" => answer(memories::list_memories(runtime, caller, parse(args)?).await),
        "get_memory" => {
            let body: wire::MemoryRefBody = parse(args)?;
            let owner = wire::AgentParam {
                agent_id: body.agent_id,
            };
            answer(memories::get_memory(runtime, caller, body.id, owner).await)
        }
        "update_memory" => {
            let (id, owner, patch) = parse::<wire::UpdateMemoryBody>(args)?.into_parts();
            answer(memories::patch_memory(runtime, caller, id, owner, patch).await)
        }
        "delete_memory" => {
            let body: wire::MemoryRefBody = parse(args)?;
            let owner = wire::AgentParam {
                agent_id: body.agent_id,
            };
            answer(memories::delete_memory(runtime, caller, body.id, owner).await)
        }
        "project_put" => answer(projects::project_put(runtime, caller, parse(args)?).await),
        "project_list" => answer(projects::project_list(runtime, caller, parse(args)?).await),
        "kv_put" => answer(kv::kv_put(runtime, caller, parse(args)?).await),
        "kv_get" => answer(kv::kv_get(runtime, caller, parse(args)?).await),
        "kv_search" => answer(kv::kv_search(runtime, caller, parse(args)?).await),
        "kv_list_by_tag" => answer(kv::kv_list_by_tag(runtime, caller, parse(args)?).await),
        "kv_stats" => answer(kv::kv_stats(runtime, caller, parse(args)?).await),
        "kv_delete" => answer(kv::kv_delete(runtime, caller, parse(args)?).await),
        "entities" => answer(entities::entities(runtime, caller, parse(args)?).await),
        "entity" => {
            let body: entities::EntityBody = parse(args)?;
            let params = entities::EntityParams {
                agent_id: body.agent_id,
                limit: body.limit,
            };
            answer(entities::entity(runtime, caller, body.id, params).await)
        }
        "facts" => answer(entities::facts(runtime, caller, parse(args)?).await),
        "entity_merge" => answer(entities::merge_tool(runtime, caller, parse(args)?, false).await),
        "entity_split" => answer(entities::merge_tool(runtime, caller, parse(args)?, true).await),
        unknown => Err(MemoryError::invalid(
            "name",
            format!("no tool named {unknown:?}; tools/list names the tools this server has"),
        )),
    }
}

/// Parse tool arguments with the REST surface's strict rules.
fn parse<T: DeserializeOwned>(arguments: Value) -> MemoryResult<T> {
    from_json_value(arguments)
}

/// A wire response as JSON (serialising a wire type cannot fail; if it did, it is a bug).
fn answer<T: Serialize>(result: MemoryResult<T>) -> MemoryResult<Value> {
    let response = result?;
    serde_json::to_value(response).map_err(|error| {
        MemoryError::new(
            ErrorCode::Internal,
            format!("could not serialise the answer: {error}"),
        )
    })
}

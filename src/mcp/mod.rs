//! The MCP (Model Context Protocol) surface: the contract's tools, served over stdio
//! (`mnemos mcp`) and over streamable HTTP (`/mcp` on the main router).
//!
//! Only the rmcp glue lives here: the tool list with its descriptions and annotations,
//! the `ServerHandler`, and the two transports. Every call goes through
//! [`crate::contract::catalog::call_tool`], which parses the arguments with the REST
//! surface's strict rules and runs the same function as the REST route, so the two
//! surfaces answer with the same JSON and the same errors. Input schemas are the tool
//! bodies' schemas ([`crate::contract::catalog::input_schemas`]) with every `$ref`
//! inlined. A failure is a JSON-RPC error whose code comes from
//! [`crate::contract::errors::mcp_error_code`] and whose `data` carries the contract's
//! `{"code", "message", "field"}`.
//!
//! Over HTTP, sessions are bounded ([`BoundedSessions`], `server.mcp_max_sessions`): a
//! new session past the bound is refused with 429 `rate_limited` ([`admit_session`]);
//! live sessions are never evicted; a session idle for
//! `server.mcp_session_idle_timeout_ms` expires and is dropped with its memory.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::extract::State;
use futures_util::Stream;
use mnemos_actors::error::{ErrorCode, MemoryError};
use mnemos_actors::Runtime;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientJsonRpcMessage, ErrorData,
    Implementation, JsonObject, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities,
    ServerConfig, ServerJsonRpcMessage, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::session::ServerSseMessage;
use rmcp::transport::streamable_http_server::{
    SessionId, SessionManager, StreamableHttpServerConfig, StreamableHttpService,
};
use rmcp::{RoleServer, ServerHandler};
use serde_json::{json, Value};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::auth::{Caller, Surface};

pub mod resources;
use crate::contract::catalog::{call_tool, input_schemas};
use crate::contract::errors::{mcp_error_code, ErrorDetail};

/// One tool of the contract: its name, the OpenAPI component of its arguments, when an
/// agent should call it, and whether it only reads.
struct ToolSpec {
    /// Tool name (the same as the REST route's last segment).
    name: &'static str,
    /// Name of the request body's schema in the OpenAPI components.
    body: &'static str,
    /// What the tool does and when to call it (shown to the model).
    description: &'static str,
    /// True when the tool changes nothing.
    read_only: bool,
    /// True when the tool removes memories from recall.
    destructive: bool,
}

/// The tools, in the order `tools/list` shows them.
const TOOLS: &[ToolSpec] = &[
    ToolSpec {
        name: "remember",
        body: "RememberBody",
        description: "Store one memory for an agent. Call it whenever the conversation reveals something worth \
            keeping for later: a fact or preference about the user, a decision, an event, how a task is done. \
            The type (episodic, semantic, procedural, affective, working) is chosen for you when omitted; \
            duplicates are merged and contradicted knowledge is superseded.",
        read_only: false,
        destructive: false,
    },
    ToolSpec {
        name: "remember_batch",
        body: "RememberBatchBody",
        description: "Store several memories for one agent at once, atomically and in order. Call it instead of \
            repeated remember calls when a turn or a document yields many facts.",
        read_only: false,
        destructive: false,
    },
    ToolSpec {
        name: "recall",
        body: "RecallBody",
        description: "Search an agent's memories. Call it before answering, to fetch what the agent knows about \
            the user, the topic or a past event (semantic, keyword, association and time retrieval fused and \
            ranked). Use time_query for periods such as 'last week' or 'in May 2023'.",
        read_only: true,
        destructive: false,
    },
    ToolSpec {
        name: "associate",
        body: "AssociateBody",
        description: "Link two of an agent's memories with a weighted, named relation (default related_to). Call it \
            when you notice that two memories belong together (cause and effect, same project, follow-up), so \
            that recalling one brings up the other.",
        read_only: false,
        destructive: false,
    },
    ToolSpec {
        name: "spreading_activation",
        body: "SpreadingActivationBody",
        description: "Starting from one memory, follow its associations (depth hops) and return the memories that \
            light up, strongest first, with the path to each. Call it to explore what is connected to a memory \
            you already have, e.g. after recall found the right starting point.",
        read_only: true,
        destructive: false,
    },
    ToolSpec {
        name: "forget",
        body: "ForgetBody",
        description: "Archive (not delete) one memory by id, or the memories holding every word of a query (with \
            min_score: those recall scores at or above it). Call it when the user asks you to forget something or a \
            memory is wrong or obsolete; use dry_run to see what a query would archive, and why, first. History is kept.",
        read_only: false,
        destructive: true,
    },
    ToolSpec {
        name: "consolidate",
        body: "AgentBody",
        description: "Run a sleep cycle for an agent now: cluster related episodic memories into semantic or \
            procedural knowledge and let weak, unused memories fade. Call it at the end of a long session or \
            when recall returns many near-duplicates; it also runs on a schedule.",
        read_only: false,
        destructive: false,
    },
    ToolSpec {
        name: "reflect",
        body: "AgentBody",
        description: "Statistics of an agent's memories: counts per type and status, top tags, consolidation ratio, \
            mean retention. Call it to get an overview of what the agent knows before planning, or to check \
            that memories are being stored.",
        read_only: true,
        destructive: false,
    },
    ToolSpec {
        name: "memory_history",
        body: "HistoryBody",
        description: "The earlier versions of one memory, with when and why each changed (patch, superseded, \
            consolidated, forgotten). Call it when you need to know what a memory used to say or why it changed.",
        read_only: true,
        destructive: false,
    },
    ToolSpec {
        name: "list_memories",
        body: "ListParams",
        description: "Browse an agent's memories, newest first, one page at a time (limit, cursor from next_cursor), \
            optionally only one type, status, tag or project. Call it to look through what is stored rather \
            than search it.",
        read_only: true,
        destructive: false,
    },
    ToolSpec {
        name: "get_memory",
        body: "MemoryRefBody",
        description: "Read one memory by id with all its fields (provenance, version, status). Call it when a recall \
            result's id needs its full record.",
        read_only: true,
        destructive: false,
    },
    ToolSpec {
        name: "update_memory",
        body: "UpdateMemoryBody",
        description: "Correct one memory by id: new content, importance, tags, type, status, shared flag or \
            metadata. The previous version stays in its history. Call it when the user corrects something the \
            agent remembered.",
        read_only: false,
        destructive: false,
    },
    ToolSpec {
        name: "delete_memory",
        body: "MemoryRefBody",
        description: "Delete one memory by id everywhere, history included (forget only archives). Call it when the \
            user asks for something to be erased for good.",
        read_only: false,
        destructive: true,
    },
    ToolSpec {
        name: "build_context",
        body: "BuildContextBody",
        description: "Assemble a ready-to-inject text block of the agent's most relevant memories for a query, within \
            a token budget (context_budget, default 2000). Call it at the start of a task or turn to prime your \
            context; give project_root to leave out memories whose source files changed.",
        read_only: true,
        destructive: false,
    },
    ToolSpec {
        name: "extract_turn",
        body: "ExtractTurnBody",
        description: "Mine one exchange (the user's message and your reply) for memories worth keeping and store \
            them: the user's preferences and facts about them, decisions taken, and step-by-step procedures you \
            explained. Call it after each exchange instead of picking memories by hand; questions and chit-chat \
            are skipped, duplicates are merged, changed preferences supersede old ones, and at most \
            extraction.max_memories_per_turn memories are stored per call.",
        read_only: false,
        destructive: false,
    },
    ToolSpec {
        name: "project_put",
        body: "ProjectPutBody",
        description: "Create one of the agent's projects, or change its name or isolation, and optionally attach a \
            session to it. Memories written in an attached session (or with project_id) belong to the project; \
            an isolated project's memories are recalled only when recall names that project_id. Call it when work \
            starts on a distinct project whose memories must not mix with others.",
        read_only: false,
        destructive: false,
    },
    ToolSpec {
        name: "project_list",
        body: "ProjectListBody",
        description: "List the agent's projects with their isolation flags. Call it to find the project_id to pass \
            to remember, recall or build_context.",
        read_only: true,
        destructive: false,
    },
    ToolSpec {
        name: "entities",
        body: "EntitiesParams",
        description: "List the people, organisations, places, products and other names an agent's memories \
            mention (q searches names, kind filters, cursor pages). Call it to find who or what the agent knows \
            about before asking about one of them with entity.",
        read_only: true,
        destructive: false,
    },
    ToolSpec {
        name: "entity",
        body: "EntityBody",
        description: "One entity by id: the memories naming it (newest first), the entities named beside it, the \
            facts about it over time (where someone lived, worked, what they use or like, with valid_from and \
            valid_to) and the facts pointing at it. Call it to gather everything about one person or thing.",
        read_only: true,
        destructive: false,
    },
    ToolSpec {
        name: "facts",
        body: "FactsParams",
        description: "Facts with validity windows (subject, attribute, value, valid_from, valid_to) stated in an \
            agent's memories; a replaced fact is kept with its end. Use as_of for what held at a time or in a \
            period ('where did Alice live in March 2023?': subject Alice, attribute lives_in, as_of March 2023).",
        read_only: true,
        destructive: false,
    },
    ToolSpec {
        name: "entity_merge",
        body: "EntityMergeToolBody",
        description: "Merge entity id into entity into when both are the same person or thing under two names \
            ('Mel' and 'Melanie'): the first name becomes an alias, its memories and facts move to the second. \
            Recorded in the merge history; entity_split undoes it.",
        read_only: false,
        destructive: false,
    },
    ToolSpec {
        name: "entity_split",
        body: "EntityMergeToolBody",
        description: "Undo a merge: split alias off entity id, so the memories naming the alias form their own \
            entity again (for two different people or things that were merged, by you or because a memory said \
            'X (Y)'). The merge stays in the history, marked undone, and is not made again. Or, with project_id \
            instead of alias: the memories of that project name someone else by this name, so the name gets an \
            entity of its own there (undone by splitting the name off that entity again).",
        read_only: false,
        destructive: false,
    },
    ToolSpec {
        name: "kv_put",
        body: "KvPutBody",
        description: "Write a key in a shared key-value namespace (any JSON value, optional tags and ttl_seconds). \
            Every agent naming the same namespace shares it: use it for coordination state of a multi-agent \
            workflow (plans, task claims, intermediate results). The namespace keeps at most max_entries keys \
            and evicts the least recently used; evicted keys are listed in the answer.",
        read_only: false,
        destructive: false,
    },
    ToolSpec {
        name: "kv_get",
        body: "KvKeyBody",
        description: "Read a key of a shared key-value namespace (a use: it becomes the most recently used entry). \
            Call it to fetch coordination state another agent (or you) wrote; a missing key is a not_found error.",
        read_only: false,
        destructive: false,
    },
    ToolSpec {
        name: "kv_search",
        body: "KvSearchBody",
        description: "Search a shared key-value namespace for entries whose key, tags or value contain the query's \
            words, best first. Call it when you do not know the exact key.",
        read_only: true,
        destructive: false,
    },
    ToolSpec {
        name: "kv_list_by_tag",
        body: "KvListByTagBody",
        description: "List the entries of a shared key-value namespace carrying a tag (every entry when tag is \
            omitted), most recently used first. Call it to collect related state, e.g. every open task.",
        read_only: true,
        destructive: false,
    },
    ToolSpec {
        name: "kv_stats",
        body: "KvStatsBody",
        description: "Counters of a shared key-value namespace: entries, max_entries, hits, misses, evictions, puts. \
            Call it to check whether the namespace is near its bound.",
        read_only: true,
        destructive: false,
    },
    ToolSpec {
        name: "kv_delete",
        body: "KvKeyBody",
        description: "Delete a key from a shared key-value namespace. Call it when the state it holds is finished \
            or wrong.",
        read_only: false,
        destructive: true,
    },
];

/// The MCP server: the contract's tools over one runtime. Cheap to clone; the streamable
/// HTTP transport makes one per session.
#[derive(Clone)]
pub struct MnemosMcp {
    /// The runtime every tool calls (the same one the REST surface uses).
    runtime: Runtime,
    /// Tool definitions, built once from the OpenAPI document.
    tools: Arc<Vec<Tool>>,
    /// Directories build_context's `project_root` may name (`server.project_roots`).
    project_roots: crate::context::ProjectRoots,
    /// Who calls when the transport carries no identity (stdio: the local operator);
    /// None over HTTP, where every request brings the caller the identity layer found.
    local: Option<Caller>,
    /// The agent of a call that names none (`mnemos mcp --agent`); over HTTP the URL's
    /// `agent_id` query parameter takes this role.
    default_agent: Option<String>,
}

impl MnemosMcp {
    /// A server over `runtime` whose build_context reads only under `project_roots`;
    /// `local` is the caller of a transport without identity (stdio).
    pub fn new(
        runtime: Runtime,
        project_roots: crate::context::ProjectRoots,
        local: Option<Caller>,
    ) -> Self {
        Self {
            runtime,
            tools: Arc::new(tool_definitions()),
            project_roots,
            local,
            default_agent: None,
        }
    }

    /// The same server, acting as `agent` when a call names no agent.
    pub fn with_default_agent(mut self, agent: Option<String>) -> Self {
        self.default_agent = agent;
        self
    }

    /// Run one tool as `caller`: parse its arguments like the REST route does, call the
    /// shared operation and return the REST route's JSON.
    pub async fn call(
        &self,
        caller: &Caller,
        name: &str,
        arguments: Value,
    ) -> Result<Value, MemoryError> {
        call_tool(
            &self.runtime,
            caller,
            &self.project_roots,
            "mcp",
            name,
            arguments,
        )
        .await
        .map_err(|error| caller.localize_error(error))
    }

    /// The caller of a request: the one the HTTP identity layer put in the request, or
    /// the transport's own (stdio).
    fn caller_of(&self, context: &RequestContext<RoleServer>) -> Result<Caller, MemoryError> {
        context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Caller>().cloned())
            .or_else(|| self.local.clone())
            .ok_or_else(|| {
                crate::auth::unauthenticated(
                    "this MCP request carried no API key: send Authorization: Bearer <key>",
                )
            })
    }

    /// Who reads a resource, and as which agent: the key's own, else the connection's
    /// (`/mcp?agent_id=`, `mnemos mcp --agent`); a reader with neither is told how to
    /// name one.
    fn resource_reader(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<(Caller, Option<String>), ErrorData> {
        let caller = self.caller_of(context).map_err(mcp_error)?;
        if caller.agent.is_some() {
            return Ok((caller, None));
        }
        match self.connection_agent(context) {
            Some(agent) => Ok((caller, Some(agent))),
            None => Err(mcp_error(MemoryError::invalid(
                "agent_id",
                "resources are one agent's memories: connect to /mcp?agent_id=<agent>, start `mnemos mcp --agent <agent>`, or use a key bound to one agent",
            ))),
        }
    }

    /// The agent a call that names none acts as: the `agent_id` of the `/mcp` URL
    /// (`/mcp?agent_id=alice`), else the transport's default (`mnemos mcp --agent`).
    fn connection_agent(&self, context: &RequestContext<RoleServer>) -> Option<String> {
        context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.uri.query())
            .and_then(|query| {
                query.split('&').find_map(|pair| {
                    pair.strip_prefix("agent_id=")
                        .filter(|v| !v.is_empty())
                        .map(str::to_string)
                })
            })
            .or_else(|| self.default_agent.clone())
    }

    /// The tool definitions `tools/list` answers with.
    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }
}

/// A [`MemoryError`] as a JSON-RPC error: the mapped code, the message, and the
/// contract's error object (`code`, `message`, `field`) as `data`.
pub fn mcp_error(error: MemoryError) -> ErrorData {
    if matches!(
        error.code,
        ErrorCode::Internal | ErrorCode::BackendUnavailable
    ) {
        tracing::error!(code = error.code.as_str(), message = %error.message, "MCP tool call failed");
    }
    let code = rmcp::model::ErrorCode(mcp_error_code(error.code));
    let message = error.message.clone();
    let data = serde_json::to_value(ErrorDetail::from(error)).ok();
    ErrorData::new(code, message, data)
}

/// Build the tool list: each tool's input schema is its body's schema from
/// [`input_schemas`] (the same schemas `/openapi.json` shows), with references inlined
/// and the contract's enums and bounds added ([`constrain`]); recall and list_memories
/// take `verbose`; each tool with a known answer declares it as `outputSchema`.
fn tool_definitions() -> Vec<Tool> {
    let components = input_schemas();
    TOOLS
        .iter()
        .map(|spec| {
            let mut schema = components
                .get(spec.body)
                .map(|schema| inline_refs(schema, &components, 0))
                .unwrap_or_else(|| {
                    // Only reachable if the OpenAPI document loses a body; the unit tests catch it.
                    tracing::error!(tool = spec.name, "no input schema in the OpenAPI document");
                    json!({"type": "object"})
                });
            constrain(&mut schema);
            if matches!(spec.name, "recall" | "list_memories") {
                schema["properties"]["verbose"] = json!({
                    "type": "boolean",
                    "description": "Answer every field of each memory (default false: id, type, content, score, dates, tags)"
                });
            }
            let object = match schema {
                Value::Object(object) => object,
                _ => JsonObject::new(),
            };
            let mut tool = Tool::new(spec.name, spec.description, Arc::new(object)).with_annotations(
                ToolAnnotations::new()
                    .read_only(spec.read_only)
                    .destructive(spec.destructive)
                    .open_world(false),
            );
            if let Some(Value::Object(output)) = output_schema(spec.name) {
                tool = tool.with_raw_output_schema(Arc::new(output));
            }
            tool
        })
        .collect()
}

/// The memory types, for `type` enums.
const MEMORY_TYPES: &[&str] = &["working", "episodic", "affective", "semantic", "procedural"];
/// The memory statuses, for `status` enums.
const MEMORY_STATUSES: &[&str] = &["active", "superseded", "stale", "archived"];

/// Add the contract's enums and numeric bounds to every property that has them (the
/// parser enforces them either way; the schema lets a model get them right first time).
fn constrain(schema: &mut Value) {
    fn allowing_null(values: &[&str], nullable: bool) -> Value {
        let mut list: Vec<Value> = values.iter().map(|v| json!(v)).collect();
        if nullable {
            list.push(Value::Null);
        }
        Value::Array(list)
    }
    fn nullable(property: &Value) -> bool {
        property["type"]
            .as_array()
            .is_some_and(|types| types.iter().any(|t| t == "null"))
    }
    if let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) {
        for (name, property) in properties.iter_mut() {
            let null = nullable(property);
            match name.as_str() {
                "type" if property["type"] == "array" || property.get("items").is_some() => {
                    property["items"]["enum"] = allowing_null(MEMORY_TYPES, false);
                }
                "type" => property["enum"] = allowing_null(MEMORY_TYPES, null),
                "status" => property["enum"] = allowing_null(MEMORY_STATUSES, null),
                "importance" | "weight" | "min_score" | "arousal" => {
                    property["minimum"] = json!(0);
                    property["maximum"] = json!(1);
                }
                "valence" => {
                    property["minimum"] = json!(-1);
                    property["maximum"] = json!(1);
                }
                "limit" => {
                    property["minimum"] = json!(1);
                    property["maximum"] = json!(200);
                }
                "depth" => {
                    property["minimum"] = json!(1);
                    property["maximum"] = json!(5);
                }
                "context_budget" => property["minimum"] = json!(1),
                _ => {}
            }
            constrain(property);
        }
    }
    if let Some(items) = schema.get_mut("items") {
        constrain(items);
    }
}

/// The JSON schema of a tool's answer: the REST route's response schema (references
/// inlined); for the compact tools, the compact shape.
fn output_schema(tool: &str) -> Option<Value> {
    // No `required`: with `verbose` a hit is the full `{memory, score, …}` instead.
    let compact_memory = json!({
        "type": "object",
        "properties": {
            "id": {"type": "string"}, "type": {"type": "string"}, "content": {"type": "string"},
            "score": {"type": "number", "minimum": 0, "maximum": 1},
            "occurred_at": {"type": "string"}, "created_at": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}}
        },
        "additionalProperties": true
    });
    match tool {
        "recall" => Some(json!({
            "type": "object",
            "required": ["results"],
            "properties": {
                "results": {"type": "array", "items": compact_memory},
                "note": {"type": "string"}
            },
            "additionalProperties": true
        })),
        "list_memories" => Some(json!({
            "type": "object",
            "required": ["memories"],
            "properties": {
                "memories": {"type": "array", "items": compact_memory},
                "next_cursor": {"type": ["string", "null"]}
            },
            "additionalProperties": true
        })),
        _ => {
            let name = match tool {
                "remember" => "RememberResponse",
                "remember_batch" => "RememberBatchResponse",
                "extract_turn" => "ExtractTurnResponse",
                "get_memory" | "update_memory" => "MemoryView",
                "delete_memory" => "DeleteResponse",
                "memory_history" => "HistoryResponse",
                "forget" => "ForgetResponse",
                _ => return None,
            };
            let components = input_schemas();
            let inlined = inline_refs(components.get(name)?, &components, 0);
            (inlined["type"] == "object").then_some(inlined)
        }
    }
}

/// Replace every `{"$ref": "#/components/schemas/X"}` with X's schema (depth-limited,
/// so a recursive type cannot loop).
fn inline_refs(schema: &Value, components: &Value, depth: usize) -> Value {
    match schema {
        Value::Object(object) => {
            if let Some(Value::String(reference)) = object.get("$ref") {
                let name = reference.trim_start_matches("#/components/schemas/");
                if let Some(target) = components.get(name).filter(|_| depth < 16) {
                    let mut inlined = inline_refs(target, components, depth + 1);
                    // Keep sibling keywords such as a description next to the reference.
                    if let Value::Object(inlined_object) = &mut inlined {
                        for (key, value) in object.iter().filter(|(k, _)| *k != "$ref") {
                            inlined_object
                                .insert(key.clone(), inline_refs(value, components, depth));
                        }
                    }
                    return inlined;
                }
                return json!({});
            }
            Value::Object(
                object
                    .iter()
                    .map(|(key, value)| (key.clone(), inline_refs(value, components, depth)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| inline_refs(item, components, depth))
                .collect(),
        ),
        other => other.clone(),
    }
}

impl ServerHandler for MnemosMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
            .with_server_info(
                Implementation::new("mnemos", env!("CARGO_PKG_VERSION"))
                    .with_title("mnemos memory"),
            )
            .with_instructions(
                "Long-term memory for this agent. Call recall (or build_context) before answering to fetch \
                 what you know; call extract_turn after each exchange (or remember for one thing) to keep what you learn; forget when asked to. \
                 A tool's agent_id may be left out when the API key is bound to one agent, the /mcp URL \
                 names one (?agent_id=) or the server was started with --agent. Failures come back as \
                 results with isError and {code, message, field}: read them and correct the call.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.to_vec()))
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let (caller, agent) = self.resource_reader(&context)?;
        let cursor = request.and_then(|r| r.cursor);
        resources::list(&self.runtime, &caller, agent, cursor).await
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(resources::templates())
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let (caller, agent) = self.resource_reader(&context)?;
        resources::read(&self.runtime, &caller, agent, &request.uri)
            .await
            .map(Into::into)
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools.iter().find(|tool| tool.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // An unknown tool is a protocol fault; everything else answers as a tool result.
        let Some(tool) = self.tools.iter().find(|tool| tool.name == request.name) else {
            let message = format!(
                "no tool named {:?}; tools/list names the tools this server has",
                request.name
            );
            return Err(mcp_error(MemoryError::invalid("name", message)));
        };
        let mut arguments = request.arguments.unwrap_or_default();
        let verbose = match arguments.remove("verbose") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(verbose)) => verbose,
            Some(_) => {
                return Ok(error_result(MemoryError::invalid(
                    "verbose",
                    "verbose must be true or false",
                ))
                .into())
            }
        };
        let span = tracing::info_span!("mcp_tool", tool = %request.name);
        let result = match self.caller_of(&context) {
            Ok(caller) => {
                if caller.agent.is_none() && tool.input_schema.contains_key("properties") {
                    let takes_agent = tool
                        .input_schema
                        .get("properties")
                        .is_some_and(|p| p.get("agent_id").is_some());
                    if let (true, false, Some(agent)) = (
                        takes_agent,
                        arguments.contains_key("agent_id"),
                        self.connection_agent(&context),
                    ) {
                        arguments.insert("agent_id".into(), Value::String(agent));
                    }
                }
                self.call(&caller, &request.name, Value::Object(arguments))
                    .instrument(span)
                    .await
            }
            Err(error) => Err(error),
        };
        metrics::counter!(
            "mnemos_mcp_tool_calls_total",
            "tool" => request.name.to_string(),
            "outcome" => match &result { Ok(_) => "ok", Err(e) => e.code.as_str() }
        )
        .increment(1);
        Ok(match result {
            Ok(value) if verbose => CallToolResult::structured(value).into(),
            Ok(value) => CallToolResult::structured(compact(&request.name, value)).into(),
            Err(error) => error_result(error).into(),
        })
    }
}

/// A failed tool call as MCP 2025-11-25 wants it (SEP-1303): a result with `isError`,
/// the message as text (for the model to read and correct itself) and the contract's
/// `{code, message, field}` as structured content.
pub fn error_result(error: MemoryError) -> CallToolResult {
    if matches!(
        error.code,
        ErrorCode::Internal | ErrorCode::BackendUnavailable
    ) {
        tracing::error!(code = error.code.as_str(), message = %error.message, "MCP tool call failed");
    }
    let message = match &error.field {
        Some(field) if !error.message.contains(field.as_str()) => {
            format!("{} ({field})", error.message)
        }
        _ => error.message.clone(),
    };
    let detail = serde_json::to_value(ErrorDetail::from(error)).unwrap_or(Value::Null);
    let mut result = CallToolResult::structured_error(detail);
    result.content = vec![rmcp::model::ContentBlock::text(message)];
    result
}

/// The fields of a memory a compact answer keeps: what a model needs to use it.
const COMPACT_FIELDS: &[&str] = &["id", "type", "content", "occurred_at", "created_at"];

/// A memory reduced to [`COMPACT_FIELDS`] (and its tags when it has any).
fn compact_memory(memory: &Value) -> Value {
    let mut out = serde_json::Map::new();
    for field in COMPACT_FIELDS {
        if let Some(value) = memory.get(*field) {
            out.insert((*field).to_string(), value.clone());
        }
    }
    if let Some(tags) = memory
        .get("tags")
        .filter(|t| t.as_array().is_some_and(|a| !a.is_empty()))
    {
        out.insert("tags".into(), tags.clone());
    }
    Value::Object(out)
}

/// The compact answer of a tool (recall and list_memories); others answer in full.
/// `verbose: true` asks for the full answer.
fn compact(tool: &str, mut value: Value) -> Value {
    match tool {
        "recall" => {
            if let Some(results) = value.get_mut("results").and_then(Value::as_array_mut) {
                for hit in results.iter_mut() {
                    let mut flat = compact_memory(&hit["memory"]);
                    flat["score"] = hit["score"].clone();
                    *hit = flat;
                }
            }
            if let Some(object) = value.as_object_mut() {
                object.remove("took_ms");
            }
            value
        }
        "list_memories" => {
            if let Some(memories) = value.get_mut("memories").and_then(Value::as_array_mut) {
                for memory in memories.iter_mut() {
                    *memory = compact_memory(memory);
                }
            }
            value
        }
        _ => value,
    }
}

/// What the streamable HTTP endpoint is built from besides the runtime (`[server]`).
pub struct HttpOptions {
    /// `Host` names rmcp itself also checks (the router's guard checks them first).
    pub allowed_hosts: Vec<String>,
    /// Directories build_context's `project_root` may name (`server.project_roots`).
    pub project_roots: crate::context::ProjectRoots,
    /// Largest request body (`server.max_body_bytes`).
    pub max_body_bytes: usize,
    /// Most live sessions (`server.mcp_max_sessions`).
    pub max_sessions: usize,
    /// A session without requests for this long expires (`server.mcp_session_idle_timeout_ms`).
    pub session_idle_timeout: Duration,
    /// Kept equal to the number of live sessions, for the `mnemos_mcp_sessions` gauge.
    pub live_sessions: Arc<AtomicUsize>,
    /// Cancelled at shutdown: ends the open sessions and streams so the drain can finish.
    pub shutdown: CancellationToken,
}

/// The `/mcp` endpoint: rmcp's streamable HTTP service over [`BoundedSessions`], behind
/// [`admit_session`], which refuses a new session past `server.mcp_max_sessions` with
/// 429 `rate_limited` (the contract's body) before rmcp reads it. Merge it into the
/// main router.
pub fn http_router(runtime: Runtime, options: HttpOptions) -> axum::Router {
    let server = MnemosMcp::new(runtime, options.project_roots, None);
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(options.allowed_hosts)
        .with_max_request_body_bytes(options.max_body_bytes)
        .with_cancellation_token(options.shutdown);
    let sessions = Arc::new(BoundedSessions::new(
        options.max_sessions,
        options.session_idle_timeout,
        options.live_sessions,
    ));
    let service = StreamableHttpService::new(move || Ok(server.clone()), sessions.clone(), config);
    axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(
            sessions,
            admit_session,
        ))
}

tokio::task_local! {
    /// The place [`admit_session`] reserved for the session the request it admitted is
    /// about to create; [`BoundedSessions::create_session`] (called by rmcp within the
    /// same request, on the same task) takes it. Handing it over this way makes the
    /// bound exact under concurrent `initialize`s: a place is reserved before rmcp runs,
    /// and it is released when the request made no session.
    static ADMITTED: RefCell<Option<OwnedSemaphorePermit>>;
}

/// Admission to `/mcp`: a request that may open a session (a POST without
/// `Mcp-Session-Id`) needs a free place, else it is refused with 429 `rate_limited`
/// and nothing is created. Requests within a session pass untouched.
pub async fn admit_session(
    State(sessions): State<Arc<BoundedSessions>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    if request.method() == axum::http::Method::DELETE {
        // rmcp answers a session's end with 202; the SDKs expect 200 or 204 (and log
        // "Session termination failed: 202" otherwise). Nothing follows the answer.
        let mut response = next.run(request).await;
        if response.status() == axum::http::StatusCode::ACCEPTED {
            *response.status_mut() = axum::http::StatusCode::NO_CONTENT;
            *response.body_mut() = axum::body::Body::empty();
        }
        return response;
    }
    let opens_session = request.method() == axum::http::Method::POST
        && !request.headers().contains_key("mcp-session-id");
    if !opens_session {
        return next.run(request).await;
    }
    let Ok(place) = sessions.places.clone().try_acquire_owned() else {
        metrics::counter!("mnemos_mcp_sessions_refused_total").increment(1);
        return crate::contract::errors::ApiError(MemoryError::new(
            ErrorCode::RateLimited,
            format!(
                "this server already holds its {} MCP sessions (server.mcp_max_sessions); end \
                 an unused session (DELETE /mcp) or retry once one expires",
                sessions.max_sessions
            ),
        ))
        .into_response();
    };
    ADMITTED
        .scope(RefCell::new(Some(place)), next.run(request))
        .await
}

/// Why [`BoundedSessions`] could not serve a session call.
#[derive(Debug, thiserror::Error)]
pub enum SessionsError {
    /// Every place is taken (only reachable when a session is created without going
    /// through [`admit_session`]).
    #[error("the server holds its limit of MCP sessions (server.mcp_max_sessions)")]
    Full,
    /// rmcp's own session error (unknown session, a session that ended, ...).
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
}

/// rmcp's in-memory [`LocalSessionManager`] with a bound on live sessions: each session
/// holds one of `server.mcp_max_sessions` places from creation until rmcp closes it
/// (DELETE, idle expiry after `server.mcp_session_idle_timeout_ms`, shutdown). rmcp
/// closes a session whose worker ended, which drops its entry here and in the inner map,
/// so an expired session's memory is freed; [`Self::live`] is what is left.
pub struct BoundedSessions {
    /// The sessions themselves (rmcp's manager, with the idle timeout set).
    inner: LocalSessionManager,
    /// One permit per place; a session keeps its permit in `held` while it lives.
    places: Arc<Semaphore>,
    /// Places taken, by session id (removing one releases its place).
    held: Mutex<HashMap<SessionId, OwnedSemaphorePermit>>,
    /// The bound, for messages.
    max_sessions: usize,
    /// Mirror of `held.len()`, read by `/metrics`.
    live: Arc<AtomicUsize>,
}

impl BoundedSessions {
    /// At most `max_sessions` live sessions, each expiring after `idle_timeout` without a request.
    pub fn new(max_sessions: usize, idle_timeout: Duration, live: Arc<AtomicUsize>) -> Self {
        let mut inner = LocalSessionManager::default();
        inner.session_config.keep_alive = Some(idle_timeout);
        live.store(0, Ordering::Relaxed);
        Self {
            inner,
            places: Arc::new(Semaphore::new(max_sessions)),
            held: Mutex::new(HashMap::new()),
            max_sessions,
            live,
        }
    }

    /// Change `held` and publish its size.
    fn update(&self, change: impl FnOnce(&mut HashMap<SessionId, OwnedSemaphorePermit>)) {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        change(&mut held);
        self.live.store(held.len(), Ordering::Relaxed);
    }
}

impl SessionManager for BoundedSessions {
    type Error = SessionsError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let place = ADMITTED
            .try_with(|slot| slot.borrow_mut().take())
            .ok()
            .flatten()
            .or_else(|| self.places.clone().try_acquire_owned().ok())
            .ok_or(SessionsError::Full)?;
        let (id, transport) = self.inner.create_session().await?;
        self.update(|held| {
            held.insert(id.clone(), place);
        });
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        let closed = self.inner.close_session(id).await;
        self.update(|held| {
            held.remove(id);
        });
        Ok(closed?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(
            <LocalSessionManager as SessionManager>::create_stream(&self.inner, id, message)
                .await?,
        )
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(
            <LocalSessionManager as SessionManager>::create_standalone_stream(&self.inner, id)
                .await?,
        )
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(<LocalSessionManager as SessionManager>::resume(&self.inner, id, last_event_id).await?)
    }
}

/// Serve MCP over stdin/stdout until the client closes stdin or `shutdown` completes.
/// Nothing but protocol messages goes to stdout (logs go to stderr).
pub async fn serve_stdio(
    runtime: Runtime,
    project_roots: crate::context::ProjectRoots,
    default_agent: Option<String>,
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    use rmcp::ServiceExt;
    let running = MnemosMcp::new(runtime, project_roots, Some(Caller::operator(Surface::Mcp)))
        .with_default_agent(default_agent)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|error| anyhow::anyhow!("MCP initialisation failed: {error}"))?;
    let cancel = running.cancellation_token();
    tokio::select! {
        reason = running.waiting() => {
            tracing::info!(reason = ?reason, "MCP client disconnected");
        }
        () = shutdown => {
            tracing::info!("shutdown requested; closing the MCP session");
            cancel.cancel();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_has_a_plain_object_schema_with_required_fields() {
        let tools = tool_definitions();
        assert_eq!(tools.len(), TOOLS.len());
        assert_eq!(tools.len(), 28);
        for tool in &tools {
            let schema = Value::Object((*tool.input_schema).clone());
            assert_eq!(schema["type"], "object", "{}: {schema}", tool.name);
            let required = schema["required"].as_array().cloned().unwrap_or_default();
            // A tool whose every argument has a default (forget takes an id or a query,
            // consolidate and reflect only an agent, which a bound key supplies) requires nothing.
            assert!(
                !required.is_empty()
                    || [
                        "forget",
                        "consolidate",
                        "reflect",
                        "project_list",
                        "list_memories",
                        "entities",
                        "facts"
                    ]
                    .contains(&tool.name.as_ref()),
                "{}: {schema}",
                tool.name
            );
            assert!(
                !schema.to_string().contains("$ref"),
                "{}: {schema}",
                tool.name
            );
        }
        let recall = tools
            .iter()
            .find(|t| t.name == "recall")
            .map(|t| Value::Object((*t.input_schema).clone()));
        let required = recall.as_ref().map(|s| s["required"].clone());
        assert_eq!(required, Some(json!(["query"])));
        let extract = tools
            .iter()
            .find(|t| t.name == "extract_turn")
            .map(|t| Value::Object((*t.input_schema).clone()));
        let required = extract.as_ref().map(|s| s["required"].clone());
        assert_eq!(required, Some(json!(["user", "assistant"])));
    }

    #[test]
    fn errors_carry_the_contract_code_and_field() {
        let error = mcp_error(MemoryError::invalid("query", "query: missing field"));
        assert_eq!(error.code.0, -32602);
        let data = error.data.unwrap_or(Value::Null);
        assert_eq!(data["code"], "invalid_argument");
        assert_eq!(data["field"], "query");
    }
}

//! Projects and KV namespaces on the wire: request and response types, the tool
//! functions that REST and MCP share (`kv_put`, `kv_get`, `kv_delete`, `kv_search`,
//! `kv_list_by_tag`, `kv_stats`, `project_put`, `project_list`), and the REST handlers
//! of `/v1/projects/...` and `/v1/namespaces/...`, which only move path parameters into
//! the tool bodies.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use chrono::{DateTime, Utc};
use mnemos_actors::error::MemoryResult;
use mnemos_actors::kv::{KvEntry, KvPutOutcome, NamespaceName, NamespaceStats};
use mnemos_actors::model::SessionId;
use mnemos_actors::projects::{Project, ProjectDetail, ProjectId};
use mnemos_actors::runtime::{KvPutInput, ProjectInput};
use mnemos_actors::Runtime;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::error::{ApiError, ErrorBody};
use super::wire::{agent, required};
use super::{ApiJson, ApiQuery, AppState};

type Shared = State<Arc<AppState>>;
type ApiResult<T> = Result<T, ApiError>;

// ---- wire types: projects ----

/// A project on the wire.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ProjectView {
    /// Id (unique among the owner's projects).
    pub project_id: String,
    /// Owner.
    pub agent_id: String,
    /// Human-readable name.
    pub name: String,
    /// When true, its memories appear only in recalls that name this project.
    pub isolated: bool,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Last change of name or isolation.
    pub updated_at: DateTime<Utc>,
    /// Attached sessions (on reads of one project).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sessions: Option<Vec<String>>,
}

impl From<Project> for ProjectView {
    fn from(p: Project) -> Self {
        Self {
            project_id: p.project_id.as_str().to_string(),
            agent_id: p.agent_id.as_str().to_string(),
            name: p.name,
            isolated: p.isolated,
            created_at: p.created_at,
            updated_at: p.updated_at,
            sessions: None,
        }
    }
}

impl From<ProjectDetail> for ProjectView {
    fn from(d: ProjectDetail) -> Self {
        Self {
            sessions: Some(
                d.sessions
                    .into_iter()
                    .map(|s| s.as_str().to_string())
                    .collect(),
            ),
            ..d.project.into()
        }
    }
}

/// Body of `PUT /v1/projects/{project_id}`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProjectPutRestBody {
    /// Owner (required).
    pub agent_id: String,
    /// Name (default on create: the id; omitted: unchanged).
    pub name: Option<String>,
    /// Keep its memories out of other projects' recall (default on create: false; omitted: unchanged).
    pub isolated: Option<bool>,
}

/// MCP `project_put`: create a project or change it, optionally attaching a session.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProjectPutBody {
    /// Owner (required).
    pub agent_id: String,
    /// Project id (required).
    pub project_id: String,
    /// Name (default on create: the id; omitted: unchanged).
    pub name: Option<String>,
    /// Keep its memories out of other projects' recall (default on create: false; omitted: unchanged).
    pub isolated: Option<bool>,
    /// A session to attach to the project (its later memories belong to the project).
    pub session_id: Option<String>,
}

/// MCP `project_list` and `GET /v1/projects`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProjectListBody {
    /// Owner (required).
    pub agent_id: String,
}

/// Query naming the owner of a project.
#[derive(Debug, Clone, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub struct ProjectOwnerParam {
    /// Owner (required).
    pub agent_id: Option<String>,
}

/// Body of `PUT /v1/projects/{project_id}/sessions/{session_id}`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AttachSessionBody {
    /// Owner of the project and the session (required).
    pub agent_id: String,
}

/// An agent's projects.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ProjectsResponse {
    /// In id order.
    pub projects: Vec<ProjectView>,
}

// ---- wire types: KV namespaces ----

/// A KV entry on the wire.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct KvEntryView {
    /// Namespace.
    pub namespace: String,
    /// Key.
    pub key: String,
    /// The stored JSON value.
    #[schema(value_type = Value)]
    pub value: serde_json::Value,
    /// Labels.
    pub tags: Vec<String>,
    /// Node (agent) that wrote the value.
    pub written_by: String,
    /// First write of the key.
    pub created_at: DateTime<Utc>,
    /// Last write of the value.
    pub updated_at: DateTime<Utc>,
    /// Expiry, if a TTL was given.
    pub expires_at: Option<DateTime<Utc>>,
    /// Use order within the namespace (higher: used more recently).
    pub last_used: u64,
}

impl From<KvEntry> for KvEntryView {
    fn from(e: KvEntry) -> Self {
        Self {
            namespace: e.namespace.as_str().to_string(),
            key: e.key,
            value: e.value,
            tags: e.tags,
            written_by: e.written_by.as_str().to_string(),
            created_at: e.created_at,
            updated_at: e.updated_at,
            expires_at: e.expires_at,
            last_used: e.last_used,
        }
    }
}

/// Counters of a namespace.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct NamespaceStatsView {
    /// Namespace.
    pub namespace: String,
    /// Live entries.
    pub entries: usize,
    /// Bound; a put beyond it evicts the least recently used entry.
    pub max_entries: usize,
    /// Gets that found an entry.
    pub hits: u64,
    /// Gets that found none.
    pub misses: u64,
    /// Entries evicted by the bound.
    pub evictions: u64,
    /// Puts accepted.
    pub puts: u64,
    /// Creation time.
    pub created_at: DateTime<Utc>,
}

impl From<NamespaceStats> for NamespaceStatsView {
    fn from(s: NamespaceStats) -> Self {
        Self {
            namespace: s.namespace.as_str().to_string(),
            entries: s.entries,
            max_entries: s.max_entries,
            hits: s.hits,
            misses: s.misses,
            evictions: s.evictions,
            puts: s.puts,
            created_at: s.created_at,
        }
    }
}

/// Body of `PUT /v1/namespaces/{namespace}`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NamespaceConfigureBody {
    /// Bound on entries (required; 1..namespaces.max_entries_limit).
    pub max_entries: usize,
    /// The node configuring it (optional, for logs).
    pub agent_id: Option<String>,
}

/// Answer of `PUT /v1/namespaces/{namespace}`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct NamespaceConfigureResponse {
    /// The namespace's counters after the change.
    pub stats: NamespaceStatsView,
    /// Keys evicted by a smaller bound, least recently used first.
    pub evicted: Vec<String>,
}

/// Body of `PUT /v1/namespaces/{namespace}/entries/{key}`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct KvPutRestBody {
    /// The writing node (required).
    pub agent_id: String,
    /// Any JSON value (required).
    #[schema(value_type = Value)]
    pub value: serde_json::Value,
    /// Labels for list_by_tag.
    pub tags: Option<Vec<String>>,
    /// Seconds until the entry expires.
    pub ttl_seconds: Option<u64>,
}

/// MCP `kv_put`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct KvPutBody {
    /// The writing node (required).
    pub agent_id: String,
    /// Namespace (required; created with namespaces.default_max_entries on first put).
    pub namespace: String,
    /// Key (required).
    pub key: String,
    /// Any JSON value (required).
    #[schema(value_type = Value)]
    pub value: serde_json::Value,
    /// Labels for kv_list_by_tag.
    pub tags: Option<Vec<String>>,
    /// Seconds until the entry expires.
    pub ttl_seconds: Option<u64>,
}

/// Answer of a put.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct KvPutResponse {
    /// The stored entry.
    pub entry: KvEntryView,
    /// True when the key was new.
    pub created: bool,
    /// Keys evicted to stay within max_entries, least recently used first.
    pub evicted: Vec<String>,
}

impl From<KvPutOutcome> for KvPutResponse {
    fn from(o: KvPutOutcome) -> Self {
        Self {
            entry: o.entry.into(),
            created: o.created,
            evicted: o.evicted,
        }
    }
}

/// MCP `kv_get` and `kv_delete`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct KvKeyBody {
    /// Namespace (required).
    pub namespace: String,
    /// Key (required).
    pub key: String,
    /// The calling node (optional).
    pub agent_id: Option<String>,
}

/// Answer of a delete.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct KvDeleteResponse {
    /// The deleted key.
    pub deleted: String,
}

/// Body of `POST /v1/namespaces/{namespace}/search`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct KvSearchRestBody {
    /// Words to look for in keys, tags and values (required).
    pub query: String,
    /// Most results (default 10).
    pub limit: Option<usize>,
    /// The calling node (optional).
    pub agent_id: Option<String>,
}

/// MCP `kv_search`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct KvSearchBody {
    /// Namespace (required).
    pub namespace: String,
    /// Words to look for in keys, tags and values (required).
    pub query: String,
    /// Most results (default 10).
    pub limit: Option<usize>,
    /// The calling node (optional).
    pub agent_id: Option<String>,
}

/// One search hit.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct KvSearchResult {
    /// The entry.
    pub entry: KvEntryView,
    /// Relevance (higher is better).
    pub score: f64,
}

/// Answer of a search.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct KvSearchResponse {
    /// Best first.
    pub results: Vec<KvSearchResult>,
}

/// Query of `GET /v1/namespaces/{namespace}/entries`.
#[derive(Debug, Clone, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub struct KvListParams {
    /// Only entries with this tag.
    pub tag: Option<String>,
    /// Most entries (default 50).
    pub limit: Option<usize>,
    /// The calling node (optional).
    pub agent_id: Option<String>,
}

/// MCP `kv_list_by_tag`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct KvListByTagBody {
    /// Namespace (required).
    pub namespace: String,
    /// Only entries with this tag (omitted: every entry).
    pub tag: Option<String>,
    /// Most entries (default 50).
    pub limit: Option<usize>,
    /// The calling node (optional).
    pub agent_id: Option<String>,
}

/// Answer of a listing.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct KvListResponse {
    /// Most recently used first.
    pub entries: Vec<KvEntryView>,
}

/// MCP `kv_stats`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct KvStatsBody {
    /// Namespace (required).
    pub namespace: String,
    /// The calling node (optional).
    pub agent_id: Option<String>,
}

// ---- tool functions (shared by REST and MCP) ----

fn namespace(raw: &str) -> MemoryResult<NamespaceName> {
    NamespaceName::parse(raw)
}

/// Check an optional calling node id (it is not otherwise used by reads).
fn caller(raw: Option<&str>) -> MemoryResult<()> {
    raw.map(agent).transpose().map(|_| ())
}

/// Create or change a project, attaching a session when one is named.
pub async fn project_put(runtime: &Runtime, body: ProjectPutBody) -> MemoryResult<ProjectView> {
    let owner = agent(&body.agent_id)?;
    let project_id = ProjectId::parse(&body.project_id)?;
    let session = body
        .session_id
        .as_deref()
        .map(SessionId::parse)
        .transpose()?;
    runtime
        .put_project(
            &owner,
            &project_id,
            ProjectInput {
                name: body.name,
                isolated: body.isolated,
            },
        )
        .await?;
    if let Some(session) = &session {
        runtime.attach_session(&owner, &project_id, session).await?;
    }
    Ok(runtime.project(&owner, &project_id).await?.into())
}

/// An agent's projects.
pub async fn project_list(
    runtime: &Runtime,
    body: ProjectListBody,
) -> MemoryResult<ProjectsResponse> {
    let owner = agent(&body.agent_id)?;
    Ok(ProjectsResponse {
        projects: runtime
            .projects(&owner)
            .await?
            .into_iter()
            .map(Into::into)
            .collect(),
    })
}

/// Write a KV entry.
pub async fn kv_put(runtime: &Runtime, body: KvPutBody) -> MemoryResult<KvPutResponse> {
    let node = agent(&body.agent_id)?;
    let ns = namespace(&body.namespace)?;
    let outcome = runtime
        .kv_put(
            &node,
            &ns,
            &body.key,
            KvPutInput {
                value: body.value,
                tags: body.tags.unwrap_or_default(),
                ttl_seconds: body.ttl_seconds,
            },
        )
        .await?;
    Ok(outcome.into())
}

/// Read a KV entry (a use).
pub async fn kv_get(runtime: &Runtime, body: KvKeyBody) -> MemoryResult<KvEntryView> {
    caller(body.agent_id.as_deref())?;
    let ns = namespace(&body.namespace)?;
    Ok(runtime.kv_get(&ns, &body.key).await?.into())
}

/// Remove a KV entry.
pub async fn kv_delete(runtime: &Runtime, body: KvKeyBody) -> MemoryResult<KvDeleteResponse> {
    caller(body.agent_id.as_deref())?;
    let ns = namespace(&body.namespace)?;
    runtime.kv_delete(&ns, &body.key).await?;
    Ok(KvDeleteResponse { deleted: body.key })
}

/// Ranked text search over a namespace.
pub async fn kv_search(runtime: &Runtime, body: KvSearchBody) -> MemoryResult<KvSearchResponse> {
    caller(body.agent_id.as_deref())?;
    let ns = namespace(&body.namespace)?;
    let hits = runtime
        .kv_search(&ns, &body.query, body.limit.unwrap_or(10))
        .await?;
    Ok(KvSearchResponse {
        results: hits
            .into_iter()
            .map(|h| KvSearchResult {
                entry: h.entry.into(),
                score: h.score,
            })
            .collect(),
    })
}

/// Entries with a tag, most recently used first.
pub async fn kv_list_by_tag(
    runtime: &Runtime,
    body: KvListByTagBody,
) -> MemoryResult<KvListResponse> {
    caller(body.agent_id.as_deref())?;
    let ns = namespace(&body.namespace)?;
    let entries = runtime
        .kv_list_by_tag(&ns, body.tag.as_deref(), body.limit.unwrap_or(50))
        .await?;
    Ok(KvListResponse {
        entries: entries.into_iter().map(Into::into).collect(),
    })
}

/// Counters of a namespace.
pub async fn kv_stats(runtime: &Runtime, body: KvStatsBody) -> MemoryResult<NamespaceStatsView> {
    caller(body.agent_id.as_deref())?;
    let ns = namespace(&body.namespace)?;
    Ok(runtime.kv_stats(&ns).await?.into())
}

// ---- REST handlers ----

/// Create a project or change its name or isolation.
#[utoipa::path(put, path = "/v1/projects/{project_id}", params(("project_id" = String, Path)),
    request_body = ProjectPutRestBody,
    responses((status = 200, body = ProjectView), (status = 400, body = ErrorBody)))]
pub async fn put_project(
    State(state): Shared,
    Path(project_id): Path<String>,
    ApiJson(body): ApiJson<ProjectPutRestBody>,
) -> ApiResult<Json<ProjectView>> {
    let body = ProjectPutBody {
        agent_id: body.agent_id,
        project_id,
        name: body.name,
        isolated: body.isolated,
        session_id: None,
    };
    Ok(Json(project_put(&state.runtime, body).await?))
}

/// An agent's projects.
#[utoipa::path(get, path = "/v1/projects", params(ProjectOwnerParam),
    responses((status = 200, body = ProjectsResponse), (status = 400, body = ErrorBody)))]
pub async fn list_projects(
    State(state): Shared,
    ApiQuery(params): ApiQuery<ProjectOwnerParam>,
) -> ApiResult<Json<ProjectsResponse>> {
    let agent_id = required("agent_id", params.agent_id)?;
    Ok(Json(
        project_list(&state.runtime, ProjectListBody { agent_id }).await?,
    ))
}

/// One project with its sessions.
#[utoipa::path(get, path = "/v1/projects/{project_id}", params(("project_id" = String, Path), ProjectOwnerParam),
    responses((status = 200, body = ProjectView), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn get_project(
    State(state): Shared,
    Path(project_id): Path<String>,
    ApiQuery(params): ApiQuery<ProjectOwnerParam>,
) -> ApiResult<Json<ProjectView>> {
    let owner = agent(&required("agent_id", params.agent_id)?)?;
    let project_id = ProjectId::parse(&project_id)?;
    Ok(Json(
        state.runtime.project(&owner, &project_id).await?.into(),
    ))
}

/// Attach a session to a project: its memories from now on belong to the project.
#[utoipa::path(put, path = "/v1/projects/{project_id}/sessions/{session_id}",
    params(("project_id" = String, Path), ("session_id" = String, Path)), request_body = AttachSessionBody,
    responses((status = 200, body = ProjectView), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn attach_session(
    State(state): Shared,
    Path((project_id, session_id)): Path<(String, String)>,
    ApiJson(body): ApiJson<AttachSessionBody>,
) -> ApiResult<Json<ProjectView>> {
    let owner = agent(&body.agent_id)?;
    let project_id = ProjectId::parse(&project_id)?;
    let session = SessionId::parse(&session_id)?;
    state
        .runtime
        .attach_session(&owner, &project_id, &session)
        .await?;
    Ok(Json(
        state.runtime.project(&owner, &project_id).await?.into(),
    ))
}

/// Create a KV namespace with a bound, or change its bound.
#[utoipa::path(put, path = "/v1/namespaces/{namespace}", params(("namespace" = String, Path)),
    request_body = NamespaceConfigureBody,
    responses((status = 200, body = NamespaceConfigureResponse), (status = 400, body = ErrorBody)))]
pub async fn configure_namespace(
    State(state): Shared,
    Path(ns): Path<String>,
    ApiJson(body): ApiJson<NamespaceConfigureBody>,
) -> ApiResult<Json<NamespaceConfigureResponse>> {
    caller(body.agent_id.as_deref())?;
    let ns = namespace(&ns)?;
    let (stats, evicted) = state.runtime.kv_configure(&ns, body.max_entries).await?;
    Ok(Json(NamespaceConfigureResponse {
        stats: stats.into(),
        evicted,
    }))
}

/// Counters of a namespace.
#[utoipa::path(get, path = "/v1/namespaces/{namespace}/stats", params(("namespace" = String, Path)),
    responses((status = 200, body = NamespaceStatsView), (status = 404, body = ErrorBody)))]
pub async fn namespace_stats(
    State(state): Shared,
    Path(ns): Path<String>,
) -> ApiResult<Json<NamespaceStatsView>> {
    let body = KvStatsBody {
        namespace: ns,
        agent_id: None,
    };
    Ok(Json(kv_stats(&state.runtime, body).await?))
}

/// Write an entry (201 when the key is new, 200 when it replaced a value).
#[utoipa::path(put, path = "/v1/namespaces/{namespace}/entries/{key}",
    params(("namespace" = String, Path), ("key" = String, Path)), request_body = KvPutRestBody,
    responses((status = 201, body = KvPutResponse), (status = 200, body = KvPutResponse), (status = 400, body = ErrorBody), (status = 413, body = ErrorBody)))]
pub async fn put_entry(
    State(state): Shared,
    Path((ns, key)): Path<(String, String)>,
    ApiJson(body): ApiJson<KvPutRestBody>,
) -> ApiResult<(StatusCode, Json<KvPutResponse>)> {
    let body = KvPutBody {
        agent_id: body.agent_id,
        namespace: ns,
        key,
        value: body.value,
        tags: body.tags,
        ttl_seconds: body.ttl_seconds,
    };
    let response = kv_put(&state.runtime, body).await?;
    let status = if response.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(response)))
}

/// Read an entry (it becomes the most recently used).
#[utoipa::path(get, path = "/v1/namespaces/{namespace}/entries/{key}",
    params(("namespace" = String, Path), ("key" = String, Path)),
    responses((status = 200, body = KvEntryView), (status = 404, body = ErrorBody)))]
pub async fn get_entry(
    State(state): Shared,
    Path((ns, key)): Path<(String, String)>,
) -> ApiResult<Json<KvEntryView>> {
    let body = KvKeyBody {
        namespace: ns,
        key,
        agent_id: None,
    };
    Ok(Json(kv_get(&state.runtime, body).await?))
}

/// Remove an entry.
#[utoipa::path(delete, path = "/v1/namespaces/{namespace}/entries/{key}",
    params(("namespace" = String, Path), ("key" = String, Path)),
    responses((status = 200, body = KvDeleteResponse), (status = 404, body = ErrorBody)))]
pub async fn delete_entry(
    State(state): Shared,
    Path((ns, key)): Path<(String, String)>,
) -> ApiResult<Json<KvDeleteResponse>> {
    let body = KvKeyBody {
        namespace: ns,
        key,
        agent_id: None,
    };
    Ok(Json(kv_delete(&state.runtime, body).await?))
}

/// Entries (optionally with a tag), most recently used first.
#[utoipa::path(get, path = "/v1/namespaces/{namespace}/entries",
    params(("namespace" = String, Path), KvListParams),
    responses((status = 200, body = KvListResponse), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn list_entries(
    State(state): Shared,
    Path(ns): Path<String>,
    ApiQuery(params): ApiQuery<KvListParams>,
) -> ApiResult<Json<KvListResponse>> {
    let body = KvListByTagBody {
        namespace: ns,
        tag: params.tag,
        limit: params.limit,
        agent_id: params.agent_id,
    };
    Ok(Json(kv_list_by_tag(&state.runtime, body).await?))
}

/// Ranked text search over a namespace's keys, tags and values.
#[utoipa::path(post, path = "/v1/namespaces/{namespace}/search", params(("namespace" = String, Path)),
    request_body = KvSearchRestBody,
    responses((status = 200, body = KvSearchResponse), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn search_entries(
    State(state): Shared,
    Path(ns): Path<String>,
    ApiJson(body): ApiJson<KvSearchRestBody>,
) -> ApiResult<Json<KvSearchResponse>> {
    let body = KvSearchBody {
        namespace: ns,
        query: body.query,
        limit: body.limit,
        agent_id: body.agent_id,
    };
    Ok(Json(kv_search(&state.runtime, body).await?))
}

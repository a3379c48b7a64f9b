//! KV namespaces on the wire: bounded, least-recently-used key-value spaces that agents
//! share for coordination state; their request and response types, and the tool
//! functions REST and MCP share (`kv_put`, `kv_get`, `kv_delete`, `kv_search`,
//! `kv_list_by_tag`, `kv_stats`, and `kv_configure` of `PUT /v1/namespaces/{namespace}`).

use chrono::{DateTime, Utc};
use mnemos_actors::error::MemoryResult;
use mnemos_actors::kv::{KvEntry, KvPutOutcome, NamespaceName, NamespaceStats};
use mnemos_actors::runtime::KvPutInput;
use mnemos_actors::Runtime;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::auth::{Caller, Scope};

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
            namespace: e.namespace.local().to_string(),
            key: e.key,
            value: e.value,
            tags: e.tags,
            written_by: e.written_by.local().to_string(),
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
            namespace: s.namespace.local().to_string(),
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
    /// Owner (required unless the API key is bound to one agent, which supplies it).
    pub agent_id: Option<String>,
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
    /// Owner (required unless the API key is bound to one agent, which supplies it).
    pub agent_id: Option<String>,
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
#[into_params(parameter_in = Query)]
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

impl KvPutRestBody {
    /// The tool body of `PUT /v1/namespaces/{namespace}/entries/{key}`: the path names both.
    pub fn into_tool_body(self, namespace: String, key: String) -> KvPutBody {
        KvPutBody {
            agent_id: self.agent_id,
            namespace,
            key,
            value: self.value,
            tags: self.tags,
            ttl_seconds: self.ttl_seconds,
        }
    }
}

impl KvSearchRestBody {
    /// The tool body of `POST /v1/namespaces/{namespace}/search`: the path names the namespace.
    pub fn into_tool_body(self, namespace: String) -> KvSearchBody {
        KvSearchBody {
            namespace,
            query: self.query,
            limit: self.limit,
            agent_id: self.agent_id,
        }
    }
}

impl KvListParams {
    /// The tool body of `GET /v1/namespaces/{namespace}/entries`: the path names the namespace.
    pub fn into_tool_body(self, namespace: String) -> KvListByTagBody {
        KvListByTagBody {
            namespace,
            tag: self.tag,
            limit: self.limit,
            agent_id: self.agent_id,
        }
    }
}

impl KvStatsBody {
    /// The body of `GET /v1/namespaces/{namespace}/stats`, where no calling node is named.
    pub fn of_path(namespace: String) -> Self {
        Self {
            namespace,
            agent_id: None,
        }
    }
}

impl KvKeyBody {
    /// The body of a by-path read or delete, where no calling node is named.
    pub fn of_path(namespace: String, key: String) -> Self {
        Self {
            namespace,
            key,
            agent_id: None,
        }
    }
}

fn namespace(raw: &str) -> MemoryResult<NamespaceName> {
    NamespaceName::parse(raw)
}

/// A namespace of the caller's tenant, after checking the calling node id when one is
/// named (a key bound to an agent must name itself or nobody).
fn tenant_namespace(
    caller: &Caller,
    scope: Scope,
    node: Option<&str>,
    raw: &str,
) -> MemoryResult<NamespaceName> {
    caller.require(scope)?;
    if node.is_some() {
        caller.agent("agent_id", node)?;
    }
    Ok(caller.namespace(&namespace(raw)?))
}

/// Write a KV entry.
pub async fn kv_put(
    runtime: &Runtime,
    caller: &Caller,
    body: KvPutBody,
) -> MemoryResult<KvPutResponse> {
    caller.require(Scope::Write)?;
    let node = caller.agent("agent_id", body.agent_id.as_deref())?;
    let ns = caller.namespace(&namespace(&body.namespace)?);
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
pub async fn kv_get(
    runtime: &Runtime,
    caller: &Caller,
    body: KvKeyBody,
) -> MemoryResult<KvEntryView> {
    // A get moves the entry in the use order and counts a hit: it is a read all the same.
    let ns = tenant_namespace(
        caller,
        Scope::Read,
        body.agent_id.as_deref(),
        &body.namespace,
    )?;
    Ok(runtime.kv_get(&ns, &body.key).await?.into())
}

/// Remove a KV entry.
pub async fn kv_delete(
    runtime: &Runtime,
    caller: &Caller,
    body: KvKeyBody,
) -> MemoryResult<KvDeleteResponse> {
    let ns = tenant_namespace(
        caller,
        Scope::Write,
        body.agent_id.as_deref(),
        &body.namespace,
    )?;
    runtime.kv_delete(&ns, &body.key).await?;
    Ok(KvDeleteResponse { deleted: body.key })
}

/// Ranked text search over a namespace.
pub async fn kv_search(
    runtime: &Runtime,
    caller: &Caller,
    body: KvSearchBody,
) -> MemoryResult<KvSearchResponse> {
    let ns = tenant_namespace(
        caller,
        Scope::Read,
        body.agent_id.as_deref(),
        &body.namespace,
    )?;
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
    caller: &Caller,
    body: KvListByTagBody,
) -> MemoryResult<KvListResponse> {
    let ns = tenant_namespace(
        caller,
        Scope::Read,
        body.agent_id.as_deref(),
        &body.namespace,
    )?;
    let entries = runtime
        .kv_list_by_tag(&ns, body.tag.as_deref(), body.limit.unwrap_or(50))
        .await?;
    Ok(KvListResponse {
        entries: entries.into_iter().map(Into::into).collect(),
    })
}

/// Counters of a namespace.
pub async fn kv_stats(
    runtime: &Runtime,
    caller: &Caller,
    body: KvStatsBody,
) -> MemoryResult<NamespaceStatsView> {
    let ns = tenant_namespace(
        caller,
        Scope::Read,
        body.agent_id.as_deref(),
        &body.namespace,
    )?;
    Ok(runtime.kv_stats(&ns).await?.into())
}

/// Create a namespace with a bound, or change its bound (evicting beyond a smaller one).
pub async fn kv_configure(
    runtime: &Runtime,
    caller: &Caller,
    namespace_name: &str,
    body: NamespaceConfigureBody,
) -> MemoryResult<NamespaceConfigureResponse> {
    let ns = tenant_namespace(
        caller,
        Scope::Write,
        body.agent_id.as_deref(),
        namespace_name,
    )?;
    let (stats, evicted) = runtime.kv_configure(&ns, body.max_entries).await?;
    Ok(NamespaceConfigureResponse {
        stats: stats.into(),
        evicted,
    })
}

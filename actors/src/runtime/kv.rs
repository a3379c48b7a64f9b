//! KV namespaces on the runtime handle: validation, then one call to the namespaces
//! actor, which owns the KV store.

use chrono::{DateTime, Utc};

use super::{validate, Runtime};
use crate::error::{MemoryError, MemoryResult};
use crate::kv::{KvEntry, KvHit, KvPut, KvPutOutcome, NamespaceName, NamespaceStats};
use crate::model::AgentId;

/// Bounds of KV namespaces.
#[derive(Debug, Clone, Copy, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KvSettings {
    /// `max_entries` of a namespace created by its first put.
    pub default_max_entries: usize,
    /// Largest `max_entries` a namespace may be given (400 beyond).
    pub max_entries_limit: usize,
    /// Largest serialized value in bytes (413 beyond).
    pub max_value_bytes: usize,
    /// Longest key in bytes (400 beyond).
    pub max_key_bytes: usize,
}

impl Default for KvSettings {
    fn default() -> Self {
        Self {
            default_max_entries: 1000,
            max_entries_limit: 1_000_000,
            max_value_bytes: 64 * 1024,
            max_key_bytes: 512,
        }
    }
}

/// A KV put (namespace, key and writer given separately).
#[derive(Debug, Clone, Default)]
pub struct KvPutInput {
    /// Any JSON value.
    pub value: serde_json::Value,
    /// Labels for `list_by_tag`.
    pub tags: Vec<String>,
    /// Seconds until the entry expires (None: never).
    pub ttl_seconds: Option<u64>,
}

/// Longest TTL: ten years.
const MAX_TTL_SECONDS: u64 = 10 * 365 * 24 * 3600;

/// A key is 1 to `namespaces.max_key_bytes` bytes without control characters.
fn check_key(rt: &Runtime, key: &str) -> MemoryResult<()> {
    let max = rt.inner.config.kv.max_key_bytes;
    if key.is_empty() || key.len() > max {
        return Err(MemoryError::invalid(
            "key",
            format!(
                "key must be 1 to {max} bytes long (namespaces.max_key_bytes); got {}",
                key.len()
            ),
        ));
    }
    if let Some(bad) = key.chars().find(|c| c.is_control()) {
        return Err(MemoryError::invalid(
            "key",
            format!("key must not contain control characters (found {bad:?})"),
        ));
    }
    Ok(())
}

/// Create a namespace bounded by `max_entries` (1 to `namespaces.max_entries_limit`),
/// or change its bound.
pub(super) async fn configure(
    rt: &Runtime,
    namespace: &NamespaceName,
    max_entries: usize,
) -> MemoryResult<(NamespaceStats, Vec<String>)> {
    let limit = rt.inner.config.kv.max_entries_limit;
    if max_entries == 0 || max_entries > limit {
        return Err(MemoryError::invalid(
            "max_entries",
            format!("max_entries must be between 1 and {limit} (namespaces.max_entries_limit)"),
        ));
    }
    let now = rt.now();
    rt.actors()
        .namespaces
        .kv_configure(namespace, max_entries, now)
        .await
}

/// Write `key` in `namespace` as node `agent` ([`Runtime::kv_put`]).
pub(super) async fn put(
    rt: &Runtime,
    agent: &AgentId,
    namespace: &NamespaceName,
    key: &str,
    input: KvPutInput,
) -> MemoryResult<KvPutOutcome> {
    let settings = rt.inner.config.kv;
    check_key(rt, key)?;
    let size = input.value.to_string().len();
    if size > settings.max_value_bytes {
        return Err(MemoryError::too_large(
            "value",
            format!(
                "value is {size} bytes as JSON; the limit is {} (namespaces.max_value_bytes)",
                settings.max_value_bytes
            ),
        ));
    }
    validate::storable_json("value", &input.value)?;
    validate::tags(&input.tags, &rt.inner.config.limits, "tags")?;
    let now = rt.now();
    let expires_at: Option<DateTime<Utc>> = match input.ttl_seconds {
        None => None,
        Some(ttl) if (1..=MAX_TTL_SECONDS).contains(&ttl) => {
            Some(now + chrono::Duration::seconds(ttl as i64))
        }
        Some(_) => {
            return Err(MemoryError::invalid(
                "ttl_seconds",
                format!("ttl_seconds must be between 1 and {MAX_TTL_SECONDS}"),
            ))
        }
    };
    let put = KvPut {
        namespace: namespace.clone(),
        key: key.to_string(),
        value: input.value,
        tags: input.tags,
        written_by: agent.clone(),
        expires_at,
        default_max_entries: settings.default_max_entries,
        now,
    };
    rt.actors().namespaces.kv_put(&put).await
}

/// Read `key` of `namespace` (a use).
pub(super) async fn get(
    rt: &Runtime,
    namespace: &NamespaceName,
    key: &str,
) -> MemoryResult<KvEntry> {
    check_key(rt, key)?;
    let now = rt.now();
    rt.actors().namespaces.kv_get(namespace, key, now).await
}

/// Remove `key` from `namespace`.
pub(super) async fn delete(rt: &Runtime, namespace: &NamespaceName, key: &str) -> MemoryResult<()> {
    check_key(rt, key)?;
    let now = rt.now();
    rt.actors().namespaces.kv_delete(namespace, key, now).await
}

/// Entries of `namespace` matching the words of `query`, best first.
pub(super) async fn search(
    rt: &Runtime,
    namespace: &NamespaceName,
    query: &str,
    limit: usize,
) -> MemoryResult<Vec<KvHit>> {
    let limits = &rt.inner.config.limits;
    if query.trim().is_empty() {
        return Err(MemoryError::invalid("query", "query must not be empty"));
    }
    validate::storable_text("query", query)?;
    if query.len() > limits.max_content_bytes {
        return Err(MemoryError::too_large(
            "query",
            format!(
                "query is longer than {} bytes (limits.max_content_bytes)",
                limits.max_content_bytes
            ),
        ));
    }
    validate::limit(limits, limit)?;
    let now = rt.now();
    Ok(rt
        .actors()
        .namespaces
        .kv_search(namespace, query, limit, now)
        .await?
        .into_iter()
        .map(|(entry, score)| KvHit { entry, score })
        .collect())
}

/// Entries of `namespace` carrying `tag` (all when None), most recently used first.
pub(super) async fn list_by_tag(
    rt: &Runtime,
    namespace: &NamespaceName,
    tag: Option<&str>,
    limit: usize,
) -> MemoryResult<Vec<KvEntry>> {
    let limits = &rt.inner.config.limits;
    if let Some(tag) = tag {
        validate::tags(&[tag.to_string()], limits, "tag")?;
    }
    validate::limit(limits, limit)?;
    let now = rt.now();
    rt.actors()
        .namespaces
        .kv_list(namespace, tag, limit, now)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::projects::ProjectId;
    use crate::runtime::{ProjectInput, RecallInput, RememberInput, RuntimeConfig, RuntimeParts};
    use serde_json::json;

    async fn runtime() -> Runtime {
        Runtime::start(RuntimeParts::in_memory(), RuntimeConfig::default())
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn kv_runtime_validates_and_bounds_a_namespace() {
        let rt = runtime().await;
        let agent = AgentId::parse("node-1").unwrap();
        let ns = NamespaceName::parse("plan").unwrap();
        assert_eq!(
            rt.kv_configure(&ns, 0).await.unwrap_err().field.as_deref(),
            Some("max_entries")
        );
        rt.kv_configure(&ns, 2).await.unwrap();
        for key in ["a", "b", "c"] {
            rt.kv_put(
                &agent,
                &ns,
                key,
                KvPutInput {
                    value: json!(key),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        }
        assert!(rt.kv_get(&ns, "a").await.is_err());
        assert_eq!(rt.kv_get(&ns, "c").await.unwrap().value, json!("c"));
        let stats = rt.kv_stats(&ns).await.unwrap();
        assert_eq!(
            (stats.entries, stats.evictions, stats.hits, stats.misses),
            (2, 1, 1, 1)
        );
        assert_eq!(
            rt.kv_put(&agent, &ns, "", KvPutInput::default())
                .await
                .unwrap_err()
                .field
                .as_deref(),
            Some("key")
        );
        rt.shutdown().await.unwrap();
    }

    #[tokio::test]
    async fn kv_isolated_project_memories_stay_in_their_project() {
        let rt = runtime().await;
        let agent = AgentId::parse("alice").unwrap();
        let secret = ProjectId::parse("secret").unwrap();
        rt.put_project(
            &agent,
            &secret,
            ProjectInput {
                name: None,
                isolated: Some(true),
            },
        )
        .await
        .unwrap();
        rt.remember(
            &agent,
            RememberInput {
                content: "The launch codename is bluebird".into(),
                project_id: Some(secret.clone()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
        let outside = rt
            .recall(RecallInput::new(agent.clone(), "launch codename bluebird"))
            .await
            .unwrap();
        assert!(outside.hits.is_empty());
        let inside = rt
            .recall(RecallInput {
                project_id: Some(secret.clone()),
                ..RecallInput::new(agent.clone(), "launch codename bluebird")
            })
            .await
            .unwrap();
        assert_eq!(inside.hits.len(), 1);
        assert_eq!(inside.hits[0].memory.project_id, Some(secret));
        rt.shutdown().await.unwrap();
    }
}

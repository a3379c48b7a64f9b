//! [`Runtime`] operations on projects and KV namespaces: validation, then one call to
//! the namespaces actor.

use chrono::{DateTime, Utc};

use super::{validate_tags, Runtime};
use crate::actors::namespaces::NamespacesMsg;
use crate::error::{MemoryError, MemoryResult};
use crate::model::{AgentId, SessionId};
use crate::namespaces::{
    no_such_project, KvEntry, KvHit, KvPut, KvPutOutcome, NamespaceName, NamespaceStats, Project,
    ProjectDetail, ProjectId,
};

/// Bounds of KV namespaces.
#[derive(Debug, Clone, Copy)]
pub struct NamespaceSettings {
    /// `max_entries` of a namespace created by its first put.
    pub default_max_entries: usize,
    /// Largest `max_entries` a namespace may be given (400 beyond).
    pub max_entries_limit: usize,
    /// Largest serialized value in bytes (413 beyond).
    pub max_value_bytes: usize,
    /// Longest key in bytes (400 beyond).
    pub max_key_bytes: usize,
}

impl Default for NamespaceSettings {
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

/// A project create-or-update; `None` keeps the current value (or the default on create).
#[derive(Debug, Clone, Default)]
pub struct ProjectInput {
    /// Human-readable name (default on create: the project id).
    pub name: Option<String>,
    /// Keep the project's memories out of other projects' recall (default on create: false).
    pub isolated: Option<bool>,
}

/// Longest project name in bytes.
const MAX_PROJECT_NAME_BYTES: usize = 256;
/// Longest TTL: ten years.
const MAX_TTL_SECONDS: u64 = 10 * 365 * 24 * 3600;

impl Runtime {
    /// A key is 1 to `namespaces.max_key_bytes` bytes without control characters.
    fn check_key(&self, key: &str) -> MemoryResult<()> {
        let max = self.inner.config.namespaces.max_key_bytes;
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

    /// A page size is 1 to `limits.max_result_limit`.
    fn check_limit(&self, limit: usize) -> MemoryResult<()> {
        let max = self.inner.config.limits.max_result_limit;
        if limit == 0 || limit > max {
            return Err(MemoryError::invalid(
                "limit",
                format!("limit must be between 1 and {max} (limits.max_result_limit)"),
            ));
        }
        Ok(())
    }

    /// A bound is 1 to `namespaces.max_entries_limit`.
    fn check_max_entries(&self, max_entries: usize) -> MemoryResult<()> {
        let limit = self.inner.config.namespaces.max_entries_limit;
        if max_entries == 0 || max_entries > limit {
            return Err(MemoryError::invalid(
                "max_entries",
                format!("max_entries must be between 1 and {limit} (namespaces.max_entries_limit)"),
            ));
        }
        Ok(())
    }

    // ---- projects ----

    /// Create a project of `agent`, or change its name or isolation. Changing
    /// `isolated` applies at once to every memory already in the project.
    pub async fn put_project(
        &self,
        agent: &AgentId,
        project_id: &ProjectId,
        input: ProjectInput,
    ) -> MemoryResult<Project> {
        if let Some(name) = &input.name {
            if name.trim().is_empty() || name.len() > MAX_PROJECT_NAME_BYTES {
                return Err(MemoryError::invalid(
                    "name",
                    format!("name must be 1 to {MAX_PROJECT_NAME_BYTES} bytes and not blank"),
                ));
            }
        }
        let now = self.now();
        let current = self
            .namespaces(|reply| NamespacesMsg::Project {
                agent: agent.clone(),
                project: project_id.clone(),
                reply,
            })
            .await?
            .map(|detail| detail.project);
        let project = Project {
            agent_id: agent.clone(),
            project_id: project_id.clone(),
            name: input
                .name
                .or_else(|| current.as_ref().map(|p| p.name.clone()))
                .unwrap_or_else(|| project_id.to_string()),
            isolated: input
                .isolated
                .or(current.as_ref().map(|p| p.isolated))
                .unwrap_or(false),
            created_at: current.as_ref().map_or(now, |p| p.created_at),
            updated_at: now,
        };
        self.namespaces(|reply| NamespacesMsg::UpsertProject {
            project: project.clone(),
            reply,
        })
        .await
    }

    /// One project of `agent` with its sessions; `not_found` (field `project_id`) when it has none by that id.
    pub async fn project(
        &self,
        agent: &AgentId,
        project_id: &ProjectId,
    ) -> MemoryResult<ProjectDetail> {
        self.namespaces(|reply| NamespacesMsg::Project {
            agent: agent.clone(),
            project: project_id.clone(),
            reply,
        })
        .await?
        .ok_or_else(|| no_such_project("project_id", agent, project_id))
    }

    /// Every project of `agent`, in id order.
    pub async fn projects(&self, agent: &AgentId) -> MemoryResult<Vec<Project>> {
        self.namespaces(|reply| NamespacesMsg::Projects {
            agent: agent.clone(),
            reply,
        })
        .await
    }

    /// Attach a session of `agent` to one of its projects (idempotent): memories written
    /// in the session from now on belong to the project. A session belongs to one
    /// project; attaching it to another is `conflict`.
    pub async fn attach_session(
        &self,
        agent: &AgentId,
        project_id: &ProjectId,
        session: &SessionId,
    ) -> MemoryResult<()> {
        let now = self.now();
        self.namespaces(|reply| NamespacesMsg::AttachSession {
            agent: agent.clone(),
            project: project_id.clone(),
            session: session.clone(),
            now,
            reply,
        })
        .await
    }

    // ---- KV namespaces ----

    /// Create a KV namespace bounded by `max_entries`, or change its bound (shrinking
    /// evicts the least recently used entries at once); returns its stats and the evicted keys.
    pub async fn kv_configure(
        &self,
        namespace: &NamespaceName,
        max_entries: usize,
    ) -> MemoryResult<(NamespaceStats, Vec<String>)> {
        self.check_max_entries(max_entries)?;
        let now = self.now();
        self.namespaces(|reply| NamespacesMsg::KvConfigure {
            namespace: namespace.clone(),
            max_entries,
            now,
            reply,
        })
        .await
    }

    /// Write `key` in `namespace` as node `agent` (creating the namespace with
    /// `namespaces.default_max_entries` if nobody has yet). The entry becomes the most
    /// recently used; if the namespace is then over its bound, the least recently used
    /// entries are evicted and named in the outcome. Committed before it answers.
    pub async fn kv_put(
        &self,
        agent: &AgentId,
        namespace: &NamespaceName,
        key: &str,
        input: KvPutInput,
    ) -> MemoryResult<KvPutOutcome> {
        let settings = self.inner.config.namespaces;
        self.check_key(key)?;
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
        validate_tags(&input.tags, &self.inner.config.limits, "tags")?;
        let now = self.now();
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
        self.namespaces(|reply| NamespacesMsg::KvPut {
            put: Box::new(put.clone()),
            reply,
        })
        .await
    }

    /// Read `key` of `namespace` (a use: it becomes the most recently used entry; counted
    /// as a hit). A missing key is `not_found` with field `key` (counted as a miss); a
    /// missing namespace is `not_found` with field `namespace`.
    pub async fn kv_get(&self, namespace: &NamespaceName, key: &str) -> MemoryResult<KvEntry> {
        self.check_key(key)?;
        let now = self.now();
        self.namespaces(|reply| NamespacesMsg::KvGet {
            namespace: namespace.clone(),
            key: key.to_string(),
            now,
            reply,
        })
        .await
    }

    /// Remove `key` from `namespace`; `not_found` when it is not there.
    pub async fn kv_delete(&self, namespace: &NamespaceName, key: &str) -> MemoryResult<()> {
        self.check_key(key)?;
        let now = self.now();
        self.namespaces(|reply| NamespacesMsg::KvDelete {
            namespace: namespace.clone(),
            key: key.to_string(),
            now,
            reply,
        })
        .await
    }

    /// Entries of `namespace` whose key, tags or value match the words of `query`,
    /// best first ([`crate::policy::lru::rank`]). Searching is not a use.
    pub async fn kv_search(
        &self,
        namespace: &NamespaceName,
        query: &str,
        limit: usize,
    ) -> MemoryResult<Vec<KvHit>> {
        if query.trim().is_empty() {
            return Err(MemoryError::invalid("query", "query must not be empty"));
        }
        let max = self.inner.config.limits.max_content_bytes;
        if query.len() > max {
            return Err(MemoryError::too_large(
                "query",
                format!("query is longer than {max} bytes (limits.max_content_bytes)"),
            ));
        }
        self.check_limit(limit)?;
        let now = self.now();
        Ok(self
            .namespaces(|reply| NamespacesMsg::KvSearch {
                namespace: namespace.clone(),
                query: query.to_string(),
                limit,
                now,
                reply,
            })
            .await?
            .into_iter()
            .map(|(entry, score)| KvHit { entry, score })
            .collect())
    }

    /// Entries of `namespace` carrying `tag` (all entries when None), most recently used
    /// first. Listing is not a use.
    pub async fn kv_list_by_tag(
        &self,
        namespace: &NamespaceName,
        tag: Option<&str>,
        limit: usize,
    ) -> MemoryResult<Vec<KvEntry>> {
        if let Some(tag) = tag {
            validate_tags(&[tag.to_string()], &self.inner.config.limits, "tag")?;
        }
        self.check_limit(limit)?;
        let now = self.now();
        self.namespaces(|reply| NamespacesMsg::KvList {
            namespace: namespace.clone(),
            tag: tag.map(str::to_string),
            limit,
            now,
            reply,
        })
        .await
    }

    /// Entries, bound, hits, misses, evictions and puts of `namespace`.
    pub async fn kv_stats(&self, namespace: &NamespaceName) -> MemoryResult<NamespaceStats> {
        let now = self.now();
        self.namespaces(|reply| NamespacesMsg::KvStats {
            namespace: namespace.clone(),
            now,
            reply,
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{RecallInput, RememberInput, RuntimeConfig, RuntimeParts};
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

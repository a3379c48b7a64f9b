//! The store of projects and KV namespaces ([`NamespaceStore`]) and its in-memory
//! implementation. The service's SQLite store implements the same trait durably.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::error::{MemoryError, MemoryResult};
use crate::model::{AgentId, SessionId};
use crate::namespaces::{
    no_such_key, no_such_namespace, KvEntry, KvPut, KvPutOutcome, NamespaceName, NamespaceStats,
    Project, ProjectDetail, ProjectId,
};
use crate::policy::lru::{rank, LruNamespace};

/// Projects (with their sessions) and KV namespaces.
///
/// Every KV write is atomic: after a put, the namespace never holds more than
/// `max_entries` live entries, however many nodes write at once, and no acknowledged
/// put is lost except by a later eviction, delete or overwrite.
#[async_trait]
pub trait NamespaceStore: Send + Sync + 'static {
    /// Short backend name for health and logs (`sqlite`, `memory`).
    fn backend_name(&self) -> &'static str;

    /// Create a namespace bounded by `max_entries`, or change the bound of an existing
    /// one (shrinking evicts least recently used entries at once); returns its stats
    /// and the evicted keys.
    async fn kv_configure(
        &self,
        namespace: &NamespaceName,
        max_entries: usize,
        now: DateTime<Utc>,
    ) -> MemoryResult<(NamespaceStats, Vec<String>)>;
    /// Write an entry (creating the namespace if needed) and evict down to the bound.
    async fn kv_put(&self, put: &KvPut) -> MemoryResult<KvPutOutcome>;
    /// Read an entry and mark it used; `not_found` for a missing namespace or key (a miss).
    async fn kv_get(
        &self,
        namespace: &NamespaceName,
        key: &str,
        now: DateTime<Utc>,
    ) -> MemoryResult<KvEntry>;
    /// Remove an entry; `not_found` for a missing namespace or key.
    async fn kv_delete(
        &self,
        namespace: &NamespaceName,
        key: &str,
        now: DateTime<Utc>,
    ) -> MemoryResult<()>;
    /// Live entries matching `query` ([`crate::policy::lru::rank`]), best first; no use is counted.
    async fn kv_search(
        &self,
        namespace: &NamespaceName,
        query: &str,
        limit: usize,
        now: DateTime<Utc>,
    ) -> MemoryResult<Vec<(KvEntry, f64)>>;
    /// Live entries carrying `tag` (every live entry when None), most recently used first; no use is counted.
    async fn kv_list(
        &self,
        namespace: &NamespaceName,
        tag: Option<&str>,
        limit: usize,
        now: DateTime<Utc>,
    ) -> MemoryResult<Vec<KvEntry>>;
    /// Counters and bounds of a namespace; `not_found` when it does not exist.
    async fn kv_stats(
        &self,
        namespace: &NamespaceName,
        now: DateTime<Utc>,
    ) -> MemoryResult<NamespaceStats>;

    /// Create a project or change its name and isolation (`created_at` is kept); returns the stored project.
    async fn upsert_project(&self, project: &Project) -> MemoryResult<Project>;
    /// One project of an agent with its sessions.
    async fn project(
        &self,
        agent: &AgentId,
        project: &ProjectId,
    ) -> MemoryResult<Option<ProjectDetail>>;
    /// Every project of an agent, in id order.
    async fn projects(&self, agent: &AgentId) -> MemoryResult<Vec<Project>>;
    /// Attach a session to a project (idempotent); `conflict` when it belongs to another project.
    async fn attach_session(
        &self,
        agent: &AgentId,
        project: &ProjectId,
        session: &SessionId,
        now: DateTime<Utc>,
    ) -> MemoryResult<()>;
    /// The project a session is attached to.
    async fn session_project(
        &self,
        agent: &AgentId,
        session: &SessionId,
    ) -> MemoryResult<Option<ProjectId>>;
    /// Which of these (owner, project) pairs are isolated projects.
    async fn isolated_projects(
        &self,
        projects: &[(AgentId, ProjectId)],
    ) -> MemoryResult<Vec<(AgentId, ProjectId)>>;
}

/// The conflict of attaching a session that already belongs to another project.
pub fn session_in_other_project(session: &SessionId, current: &ProjectId) -> MemoryError {
    MemoryError {
        field: Some("session_id".into()),
        ..MemoryError::conflict(format!(
            "session {} already belongs to project {current}; a session belongs to one project",
            session.as_str()
        ))
    }
}

/// Everything the in-memory store holds.
#[derive(Default)]
struct NamespaceState {
    /// KV namespaces by name.
    namespaces: HashMap<NamespaceName, LruNamespace>,
    /// Projects by owner and id.
    projects: HashMap<(AgentId, ProjectId), Project>,
    /// The project of each attached session.
    sessions: HashMap<(AgentId, SessionId), ProjectId>,
}

/// [`NamespaceStore`] in memory (tests, file-less library use). One lock makes every
/// operation atomic.
#[derive(Default)]
pub struct InMemoryNamespaceStore {
    /// The state behind one lock.
    state: Mutex<NamespaceState>,
}

impl InMemoryNamespaceStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn with<T>(&self, f: impl FnOnce(&mut NamespaceState) -> MemoryResult<T>) -> MemoryResult<T> {
        let mut state = self
            .state
            .lock()
            .map_err(|_| MemoryError::internal("namespace store lock poisoned"))?;
        f(&mut state)
    }
}

fn namespace_mut<'a>(
    state: &'a mut NamespaceState,
    namespace: &NamespaceName,
) -> MemoryResult<&'a mut LruNamespace> {
    state
        .namespaces
        .get_mut(namespace)
        .ok_or_else(|| no_such_namespace(namespace))
}

#[async_trait]
impl NamespaceStore for InMemoryNamespaceStore {
    fn backend_name(&self) -> &'static str {
        "memory"
    }

    async fn kv_configure(
        &self,
        namespace: &NamespaceName,
        max_entries: usize,
        now: DateTime<Utc>,
    ) -> MemoryResult<(NamespaceStats, Vec<String>)> {
        self.with(|state| {
            let ns = state
                .namespaces
                .entry(namespace.clone())
                .or_insert_with(|| LruNamespace::new(namespace.clone(), max_entries, now));
            let evicted = ns.set_max_entries(max_entries, now);
            Ok((ns.stats(now), evicted))
        })
    }

    async fn kv_put(&self, put: &KvPut) -> MemoryResult<KvPutOutcome> {
        self.with(|state| {
            let ns = state
                .namespaces
                .entry(put.namespace.clone())
                .or_insert_with(|| {
                    LruNamespace::new(put.namespace.clone(), put.default_max_entries, put.now)
                });
            Ok(ns.put(put))
        })
    }

    async fn kv_get(
        &self,
        namespace: &NamespaceName,
        key: &str,
        now: DateTime<Utc>,
    ) -> MemoryResult<KvEntry> {
        self.with(|state| {
            namespace_mut(state, namespace)?
                .get(key, now)
                .ok_or_else(|| no_such_key(namespace, key))
        })
    }

    async fn kv_delete(
        &self,
        namespace: &NamespaceName,
        key: &str,
        now: DateTime<Utc>,
    ) -> MemoryResult<()> {
        self.with(|state| {
            if namespace_mut(state, namespace)?.delete(key, now) {
                Ok(())
            } else {
                Err(no_such_key(namespace, key))
            }
        })
    }

    async fn kv_search(
        &self,
        namespace: &NamespaceName,
        query: &str,
        limit: usize,
        now: DateTime<Utc>,
    ) -> MemoryResult<Vec<(KvEntry, f64)>> {
        self.with(|state| {
            let live = namespace_mut(state, namespace)?.live(now);
            Ok(rank(query, live, limit))
        })
    }

    async fn kv_list(
        &self,
        namespace: &NamespaceName,
        tag: Option<&str>,
        limit: usize,
        now: DateTime<Utc>,
    ) -> MemoryResult<Vec<KvEntry>> {
        self.with(|state| {
            Ok(namespace_mut(state, namespace)?
                .live(now)
                .into_iter()
                .filter(|e| tag.is_none_or(|t| e.tags.iter().any(|x| x == t)))
                .take(limit)
                .collect())
        })
    }

    async fn kv_stats(
        &self,
        namespace: &NamespaceName,
        now: DateTime<Utc>,
    ) -> MemoryResult<NamespaceStats> {
        self.with(|state| Ok(namespace_mut(state, namespace)?.stats(now)))
    }

    async fn upsert_project(&self, project: &Project) -> MemoryResult<Project> {
        self.with(|state| {
            let key = (project.agent_id.clone(), project.project_id.clone());
            let stored = match state.projects.get(&key) {
                Some(existing) => Project {
                    created_at: existing.created_at,
                    ..project.clone()
                },
                None => project.clone(),
            };
            state.projects.insert(key, stored.clone());
            Ok(stored)
        })
    }

    async fn project(
        &self,
        agent: &AgentId,
        project: &ProjectId,
    ) -> MemoryResult<Option<ProjectDetail>> {
        self.with(|state| {
            let Some(found) = state.projects.get(&(agent.clone(), project.clone())) else {
                return Ok(None);
            };
            let sessions: BTreeSet<SessionId> = state
                .sessions
                .iter()
                .filter(|((a, _), p)| a == agent && *p == project)
                .map(|((_, s), _)| s.clone())
                .collect();
            Ok(Some(ProjectDetail {
                project: found.clone(),
                sessions: sessions.into_iter().collect(),
            }))
        })
    }

    async fn projects(&self, agent: &AgentId) -> MemoryResult<Vec<Project>> {
        self.with(|state| {
            let mut found: Vec<Project> = state
                .projects
                .values()
                .filter(|p| p.agent_id == *agent)
                .cloned()
                .collect();
            found.sort_by(|a, b| a.project_id.cmp(&b.project_id));
            Ok(found)
        })
    }

    async fn attach_session(
        &self,
        agent: &AgentId,
        project: &ProjectId,
        session: &SessionId,
        _now: DateTime<Utc>,
    ) -> MemoryResult<()> {
        self.with(|state| {
            if !state
                .projects
                .contains_key(&(agent.clone(), project.clone()))
            {
                return Err(crate::namespaces::no_such_project(
                    "project_id",
                    agent,
                    project,
                ));
            }
            match state.sessions.get(&(agent.clone(), session.clone())) {
                Some(current) if current != project => {
                    Err(session_in_other_project(session, current))
                }
                Some(_) => Ok(()),
                None => {
                    state
                        .sessions
                        .insert((agent.clone(), session.clone()), project.clone());
                    Ok(())
                }
            }
        })
    }

    async fn session_project(
        &self,
        agent: &AgentId,
        session: &SessionId,
    ) -> MemoryResult<Option<ProjectId>> {
        self.with(|state| {
            Ok(state
                .sessions
                .get(&(agent.clone(), session.clone()))
                .cloned())
        })
    }

    async fn isolated_projects(
        &self,
        projects: &[(AgentId, ProjectId)],
    ) -> MemoryResult<Vec<(AgentId, ProjectId)>> {
        self.with(|state| {
            Ok(projects
                .iter()
                .filter(|key| state.projects.get(*key).is_some_and(|p| p.isolated))
                .cloned()
                .collect())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::lru::simple_put;
    use serde_json::json;

    #[tokio::test]
    async fn kv_store_shares_a_namespace_between_nodes_and_bounds_it() {
        let store = InMemoryNamespaceStore::new();
        let ns = NamespaceName::parse("shared").unwrap();
        let now = Utc::now();
        store.kv_configure(&ns, 2, now).await.unwrap();
        let (a, b) = (AgentId::parse("a").unwrap(), AgentId::parse("b").unwrap());
        store
            .kv_put(&simple_put(&ns, &a, "x", json!(1), now))
            .await
            .unwrap();
        store
            .kv_put(&simple_put(&ns, &b, "y", json!(2), now))
            .await
            .unwrap();
        assert_eq!(store.kv_get(&ns, "x", now).await.unwrap().written_by, a);
        let outcome = store
            .kv_put(&simple_put(&ns, &b, "z", json!(3), now))
            .await
            .unwrap();
        assert_eq!(outcome.evicted, vec!["y".to_string()]);
        let missing = NamespaceName::parse("nope").unwrap();
        assert_eq!(
            store.kv_stats(&missing, now).await.unwrap_err().field,
            Some("namespace".into())
        );
        assert_eq!(
            store.kv_get(&ns, "y", now).await.unwrap_err().field,
            Some("key".into())
        );
    }

    #[tokio::test]
    async fn kv_store_sessions_belong_to_one_project() {
        let store = InMemoryNamespaceStore::new();
        let agent = AgentId::parse("a").unwrap();
        let now = Utc::now();
        for (id, isolated) in [("p1", true), ("p2", false)] {
            store
                .upsert_project(&Project {
                    agent_id: agent.clone(),
                    project_id: ProjectId::parse(id).unwrap(),
                    name: id.into(),
                    isolated,
                    created_at: now,
                    updated_at: now,
                })
                .await
                .unwrap();
        }
        let (p1, p2) = (
            ProjectId::parse("p1").unwrap(),
            ProjectId::parse("p2").unwrap(),
        );
        let s = SessionId::parse("s").unwrap();
        store.attach_session(&agent, &p1, &s, now).await.unwrap();
        store.attach_session(&agent, &p1, &s, now).await.unwrap();
        let error = store
            .attach_session(&agent, &p2, &s, now)
            .await
            .unwrap_err();
        assert_eq!(error.code, crate::error::ErrorCode::Conflict);
        assert_eq!(
            store.session_project(&agent, &s).await.unwrap(),
            Some(p1.clone())
        );
        let isolated = store
            .isolated_projects(&[(agent.clone(), p1.clone()), (agent.clone(), p2)])
            .await
            .unwrap();
        assert_eq!(isolated, vec![(agent.clone(), p1.clone())]);
        let detail = store.project(&agent, &p1).await.unwrap().unwrap();
        assert_eq!(detail.sessions, vec![s]);
    }
}

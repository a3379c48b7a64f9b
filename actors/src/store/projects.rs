//! The store of projects and their sessions ([`ProjectStore`]) and its in-memory
//! implementation. The service's SQL stores implement the same trait durably.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::error::{MemoryError, MemoryResult};
use crate::model::{AgentId, SessionId};
use crate::projects::{
    no_such_project, session_in_other_project, Project, ProjectDetail, ProjectId,
};

/// Projects of each agent and the sessions attached to them.
#[async_trait]
pub trait ProjectStore: Send + Sync + 'static {
    /// Short backend name for health and logs (`sqlite`, `postgres`, `memory`).
    fn backend_name(&self) -> &'static str;

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

/// Everything the in-memory project store holds.
#[derive(Default)]
struct ProjectState {
    /// Projects by owner and id.
    projects: HashMap<(AgentId, ProjectId), Project>,
    /// The project of each attached session.
    sessions: HashMap<(AgentId, SessionId), ProjectId>,
}

/// [`ProjectStore`] in memory (tests, file-less library use). One lock makes every
/// operation atomic.
#[derive(Default)]
pub struct InMemoryProjectStore {
    /// The state behind one lock.
    state: Mutex<ProjectState>,
}

impl InMemoryProjectStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn with<T>(&self, f: impl FnOnce(&mut ProjectState) -> MemoryResult<T>) -> MemoryResult<T> {
        let mut state = self
            .state
            .lock()
            .map_err(|_| MemoryError::internal("project store lock poisoned"))?;
        f(&mut state)
    }
}

#[async_trait]
impl ProjectStore for InMemoryProjectStore {
    fn backend_name(&self) -> &'static str {
        "memory"
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
                return Err(no_such_project("project_id", agent, project));
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

    #[tokio::test]
    async fn sessions_belong_to_one_project() {
        let store = InMemoryProjectStore::new();
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

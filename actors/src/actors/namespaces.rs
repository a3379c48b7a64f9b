//! The namespaces actor: owns the [`ProjectStore`] of projects (and their sessions)
//! and the [`KvStore`] of KV namespaces. Writes — including KV gets, which move an entry to the front
//! of its namespace's use order — are handled in mailbox order; pure reads are
//! answered from spawned tasks.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use ractor::{Actor, ActorProcessingErr, ActorRef};

use super::{answer_in_task, injected_fault, Caller, Reply};
use crate::error::MemoryResult;
use crate::kv::{KvEntry, KvPut, KvPutOutcome, NamespaceName, NamespaceStats};
use crate::model::{AgentId, SessionId};
use crate::projects::{Project, ProjectDetail, ProjectId};
use crate::store::kv::KvStore;
use crate::store::projects::ProjectStore;
use crate::supervisor::InjectedFault;

/// Ref of the namespaces actor.
pub type NamespacesRef = ActorRef<NamespacesMsg>;

/// Messages of the namespaces actor.
pub enum NamespacesMsg {
    /// Create a KV namespace or change its bound.
    KvConfigure {
        namespace: NamespaceName,
        max_entries: usize,
        now: DateTime<Utc>,
        reply: Reply<(NamespaceStats, Vec<String>)>,
    },
    /// Write a KV entry (evicting down to the bound).
    KvPut {
        put: Box<KvPut>,
        reply: Reply<KvPutOutcome>,
    },
    /// Read a KV entry (a use).
    KvGet {
        namespace: NamespaceName,
        key: String,
        now: DateTime<Utc>,
        reply: Reply<KvEntry>,
    },
    /// Remove a KV entry.
    KvDelete {
        namespace: NamespaceName,
        key: String,
        now: DateTime<Utc>,
        reply: Reply<()>,
    },
    /// Ranked text search over a namespace.
    KvSearch {
        namespace: NamespaceName,
        query: String,
        limit: usize,
        now: DateTime<Utc>,
        reply: Reply<Vec<(KvEntry, f64)>>,
    },
    /// Every namespace (as stored).
    KvNamespaces { reply: Reply<Vec<NamespaceName>> },
    /// Entries with a tag, most recently used first.
    KvList {
        namespace: NamespaceName,
        tag: Option<String>,
        limit: usize,
        now: DateTime<Utc>,
        reply: Reply<Vec<KvEntry>>,
    },
    /// Counters of a namespace.
    KvStats {
        namespace: NamespaceName,
        now: DateTime<Utc>,
        reply: Reply<NamespaceStats>,
    },
    /// Create or change a project.
    UpsertProject {
        project: Project,
        reply: Reply<Project>,
    },
    /// One project with its sessions.
    Project {
        agent: AgentId,
        project: ProjectId,
        reply: Reply<Option<ProjectDetail>>,
    },
    /// Every project of an agent.
    Projects {
        agent: AgentId,
        reply: Reply<Vec<Project>>,
    },
    /// Attach a session to a project.
    AttachSession {
        agent: AgentId,
        project: ProjectId,
        session: SessionId,
        now: DateTime<Utc>,
        reply: Reply<()>,
    },
    /// The project a session belongs to.
    SessionProject {
        agent: AgentId,
        session: SessionId,
        reply: Reply<Option<ProjectId>>,
    },
    /// Which of these projects are isolated.
    IsolatedProjects {
        projects: Vec<(AgentId, ProjectId)>,
        reply: Reply<Vec<(AgentId, ProjectId)>>,
    },
    /// Test hook: fail the actor as if its state were broken.
    InjectFault,
}

impl From<InjectedFault> for NamespacesMsg {
    fn from(_: InjectedFault) -> Self {
        NamespacesMsg::InjectFault
    }
}

/// Start-up arguments (kept by the supervisor and reused on restart).
#[derive(Clone)]
pub struct NamespacesArgs {
    /// The projects store.
    pub projects: Arc<dyn ProjectStore>,
    /// The KV store.
    pub kv: Arc<dyn KvStore>,
}

/// The actor's state.
pub struct NamespacesState {
    /// The projects store.
    projects: Arc<dyn ProjectStore>,
    /// The KV store.
    kv: Arc<dyn KvStore>,
}

/// The namespaces actor.
#[derive(Clone)]
pub struct NamespacesActor;

impl Actor for NamespacesActor {
    type Msg = NamespacesMsg;
    type State = NamespacesState;
    type Arguments = NamespacesArgs;

    async fn pre_start(
        &self,
        _myself: NamespacesRef,
        args: NamespacesArgs,
    ) -> Result<NamespacesState, ActorProcessingErr> {
        Ok(NamespacesState {
            projects: args.projects,
            kv: args.kv,
        })
    }

    #[tracing::instrument(name = "namespaces", skip_all)]
    async fn handle(
        &self,
        _myself: NamespacesRef,
        message: NamespacesMsg,
        state: &mut NamespacesState,
    ) -> Result<(), ActorProcessingErr> {
        let (projects, store) = (state.projects.clone(), state.kv.clone());
        match message {
            NamespacesMsg::KvConfigure {
                namespace,
                max_entries,
                now,
                reply,
            } => {
                let _ = reply.send(store.kv_configure(&namespace, max_entries, now).await);
            }
            NamespacesMsg::KvPut { put, reply } => {
                let _ = reply.send(store.kv_put(&put).await);
            }
            NamespacesMsg::KvGet {
                namespace,
                key,
                now,
                reply,
            } => {
                let _ = reply.send(store.kv_get(&namespace, &key, now).await);
            }
            NamespacesMsg::KvDelete {
                namespace,
                key,
                now,
                reply,
            } => {
                let _ = reply.send(store.kv_delete(&namespace, &key, now).await);
            }
            NamespacesMsg::UpsertProject { project, reply } => {
                let _ = reply.send(projects.upsert_project(&project).await);
            }
            NamespacesMsg::AttachSession {
                agent,
                project,
                session,
                now,
                reply,
            } => {
                let _ = reply.send(
                    projects
                        .attach_session(&agent, &project, &session, now)
                        .await,
                );
            }
            NamespacesMsg::KvSearch {
                namespace,
                query,
                limit,
                now,
                reply,
            } => answer_in_task(reply, async move {
                store.kv_search(&namespace, &query, limit, now).await
            }),
            NamespacesMsg::KvList {
                namespace,
                tag,
                limit,
                now,
                reply,
            } => answer_in_task(reply, async move {
                store.kv_list(&namespace, tag.as_deref(), limit, now).await
            }),
            NamespacesMsg::KvStats {
                namespace,
                now,
                reply,
            } => answer_in_task(reply, async move { store.kv_stats(&namespace, now).await }),
            NamespacesMsg::KvNamespaces { reply } => {
                answer_in_task(reply, async move { store.kv_namespaces().await })
            }
            NamespacesMsg::Project {
                agent,
                project,
                reply,
            } => answer_in_task(
                reply,
                async move { projects.project(&agent, &project).await },
            ),
            NamespacesMsg::Projects { agent, reply } => {
                answer_in_task(reply, async move { projects.projects(&agent).await })
            }
            NamespacesMsg::SessionProject {
                agent,
                session,
                reply,
            } => answer_in_task(reply, async move {
                projects.session_project(&agent, &session).await
            }),
            NamespacesMsg::IsolatedProjects {
                projects: pairs,
                reply,
            } => answer_in_task(
                reply,
                async move { projects.isolated_projects(&pairs).await },
            ),
            NamespacesMsg::InjectFault => return Err(injected_fault("namespaces")),
        }
        Ok(())
    }
}

/// The typed handle of the namespaces actor (retries while it restarts).
#[derive(Clone)]
pub struct NamespacesHandle(pub(crate) Caller<NamespacesMsg>);

impl NamespacesHandle {
    /// Create a KV namespace or change its bound; its stats and the evicted keys.
    pub async fn kv_configure(
        &self,
        namespace: &NamespaceName,
        max_entries: usize,
        now: DateTime<Utc>,
    ) -> MemoryResult<(NamespaceStats, Vec<String>)> {
        self.0
            .ask(|reply| NamespacesMsg::KvConfigure {
                namespace: namespace.clone(),
                max_entries,
                now,
                reply,
            })
            .await
    }
    /// Write a KV entry (evicting down to the bound).
    pub async fn kv_put(&self, put: &KvPut) -> MemoryResult<KvPutOutcome> {
        self.0
            .ask(|reply| NamespacesMsg::KvPut {
                put: Box::new(put.clone()),
                reply,
            })
            .await
    }
    /// Read a KV entry (a use).
    pub async fn kv_get(
        &self,
        namespace: &NamespaceName,
        key: &str,
        now: DateTime<Utc>,
    ) -> MemoryResult<KvEntry> {
        self.0
            .ask(|reply| NamespacesMsg::KvGet {
                namespace: namespace.clone(),
                key: key.to_string(),
                now,
                reply,
            })
            .await
    }
    /// Remove a KV entry.
    pub async fn kv_delete(
        &self,
        namespace: &NamespaceName,
        key: &str,
        now: DateTime<Utc>,
    ) -> MemoryResult<()> {
        self.0
            .ask(|reply| NamespacesMsg::KvDelete {
                namespace: namespace.clone(),
                key: key.to_string(),
                now,
                reply,
            })
            .await
    }
    /// Ranked text search over a namespace.
    pub async fn kv_search(
        &self,
        namespace: &NamespaceName,
        query: &str,
        limit: usize,
        now: DateTime<Utc>,
    ) -> MemoryResult<Vec<(KvEntry, f64)>> {
        self.0
            .ask(|reply| NamespacesMsg::KvSearch {
                namespace: namespace.clone(),
                query: query.to_string(),
                limit,
                now,
                reply,
            })
            .await
    }
    /// Entries with a tag (all when None), most recently used first.
    pub async fn kv_list(
        &self,
        namespace: &NamespaceName,
        tag: Option<&str>,
        limit: usize,
        now: DateTime<Utc>,
    ) -> MemoryResult<Vec<KvEntry>> {
        self.0
            .ask(|reply| NamespacesMsg::KvList {
                namespace: namespace.clone(),
                tag: tag.map(str::to_string),
                limit,
                now,
                reply,
            })
            .await
    }
    /// Counters of a namespace.
    pub async fn kv_stats(
        &self,
        namespace: &NamespaceName,
        now: DateTime<Utc>,
    ) -> MemoryResult<NamespaceStats> {
        self.0
            .ask(|reply| NamespacesMsg::KvStats {
                namespace: namespace.clone(),
                now,
                reply,
            })
            .await
    }
    /// Every namespace (as stored).
    pub async fn kv_namespaces(&self) -> MemoryResult<Vec<NamespaceName>> {
        self.0
            .ask(|reply| NamespacesMsg::KvNamespaces { reply })
            .await
    }
    /// Create or change a project.
    pub async fn upsert_project(&self, project: &Project) -> MemoryResult<Project> {
        self.0
            .ask(|reply| NamespacesMsg::UpsertProject {
                project: project.clone(),
                reply,
            })
            .await
    }
    /// One project with its sessions.
    pub async fn project(
        &self,
        agent: &AgentId,
        project: &ProjectId,
    ) -> MemoryResult<Option<ProjectDetail>> {
        self.0
            .ask(|reply| NamespacesMsg::Project {
                agent: agent.clone(),
                project: project.clone(),
                reply,
            })
            .await
    }
    /// Every project of an agent.
    pub async fn projects(&self, agent: &AgentId) -> MemoryResult<Vec<Project>> {
        self.0
            .ask(|reply| NamespacesMsg::Projects {
                agent: agent.clone(),
                reply,
            })
            .await
    }
    /// Attach a session to a project.
    pub async fn attach_session(
        &self,
        agent: &AgentId,
        project: &ProjectId,
        session: &SessionId,
        now: DateTime<Utc>,
    ) -> MemoryResult<()> {
        self.0
            .ask(|reply| NamespacesMsg::AttachSession {
                agent: agent.clone(),
                project: project.clone(),
                session: session.clone(),
                now,
                reply,
            })
            .await
    }
    /// The project a session belongs to.
    pub async fn session_project(
        &self,
        agent: &AgentId,
        session: &SessionId,
    ) -> MemoryResult<Option<ProjectId>> {
        self.0
            .ask(|reply| NamespacesMsg::SessionProject {
                agent: agent.clone(),
                session: session.clone(),
                reply,
            })
            .await
    }
    /// Which of these (owner, project) pairs are isolated.
    pub async fn isolated_projects(
        &self,
        projects: &[(AgentId, ProjectId)],
    ) -> MemoryResult<Vec<(AgentId, ProjectId)>> {
        if projects.is_empty() {
            return Ok(Vec::new());
        }
        self.0
            .ask(|reply| NamespacesMsg::IsolatedProjects {
                projects: projects.to_vec(),
                reply,
            })
            .await
    }
}

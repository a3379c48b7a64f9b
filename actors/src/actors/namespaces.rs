//! The namespaces actor: owns the [`NamespaceStore`] of projects (and their sessions)
//! and of KV namespaces. Writes — including KV gets, which move an entry to the front
//! of its namespace's use order — are handled in mailbox order; pure reads are
//! answered from spawned tasks.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

use super::{answer_in_task, injected_fault};
use crate::error::MemoryResult;
use crate::model::{AgentId, SessionId};
use crate::namespaces::{
    KvEntry, KvPut, KvPutOutcome, NamespaceName, NamespaceStats, Project, ProjectDetail, ProjectId,
};
use crate::store::namespaces::NamespaceStore;

/// Handle to the namespaces actor.
pub type NamespacesRef = ActorRef<NamespacesMsg>;
type Reply<T> = RpcReplyPort<MemoryResult<T>>;

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

/// Start-up arguments (kept by the supervisor and reused on restart).
#[derive(Clone)]
pub struct NamespacesArgs {
    /// The projects and KV store.
    pub store: Arc<dyn NamespaceStore>,
}

/// The actor's state.
pub struct NamespacesState {
    /// The projects and KV store.
    store: Arc<dyn NamespaceStore>,
}

/// The namespaces actor.
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
        Ok(NamespacesState { store: args.store })
    }

    #[tracing::instrument(name = "namespaces", skip_all)]
    async fn handle(
        &self,
        _myself: NamespacesRef,
        message: NamespacesMsg,
        state: &mut NamespacesState,
    ) -> Result<(), ActorProcessingErr> {
        let store = state.store.clone();
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
                let _ = reply.send(store.upsert_project(&project).await);
            }
            NamespacesMsg::AttachSession {
                agent,
                project,
                session,
                now,
                reply,
            } => {
                let _ = reply.send(store.attach_session(&agent, &project, &session, now).await);
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
            NamespacesMsg::Project {
                agent,
                project,
                reply,
            } => answer_in_task(reply, async move { store.project(&agent, &project).await }),
            NamespacesMsg::Projects { agent, reply } => {
                answer_in_task(reply, async move { store.projects(&agent).await })
            }
            NamespacesMsg::SessionProject {
                agent,
                session,
                reply,
            } => answer_in_task(reply, async move {
                store.session_project(&agent, &session).await
            }),
            NamespacesMsg::IsolatedProjects { projects, reply } => answer_in_task(
                reply,
                async move { store.isolated_projects(&projects).await },
            ),
            NamespacesMsg::InjectFault => return Err(injected_fault("namespaces")),
        }
        Ok(())
    }
}

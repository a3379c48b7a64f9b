//! Projects on the wire: an agent's named scopes for memories (optionally isolated from
//! its other projects' recall), their request and response types, and the tool
//! functions REST, MCP and the CLI share (`project_put`, `project_list`, and the
//! resource reads and session attachment of `/v1/projects/...`).

use chrono::{DateTime, Utc};
use mnemos_actors::error::MemoryResult;
use mnemos_actors::projects::{Project, ProjectDetail, ProjectId};
use mnemos_actors::runtime::ProjectInput;
use mnemos_actors::Runtime;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::parse::session;
use crate::auth::{Caller, Scope};

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
            agent_id: p.agent_id.local().to_string(),
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
    /// Owner (required unless the API key is bound to one agent, which supplies it).
    pub agent_id: Option<String>,
    /// Name (default on create: the id; omitted: unchanged).
    pub name: Option<String>,
    /// Keep its memories out of other projects' recall (default on create: false; omitted: unchanged).
    pub isolated: Option<bool>,
}

/// MCP `project_put`: create a project or change it, optionally attaching a session.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProjectPutBody {
    /// Owner (required unless the API key is bound to one agent, which supplies it).
    pub agent_id: Option<String>,
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
    /// Owner (required unless the API key is bound to one agent, which supplies it).
    pub agent_id: Option<String>,
}

/// Query naming the owner of a project.
#[derive(Debug, Clone, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ProjectOwnerParam {
    /// Owner (required).
    pub agent_id: Option<String>,
}

/// Body of `PUT /v1/projects/{project_id}/sessions/{session_id}`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AttachSessionBody {
    /// Owner (required unless the API key is bound to one agent, which supplies it).
    pub agent_id: Option<String>,
}

/// An agent's projects.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ProjectsResponse {
    /// In id order.
    pub projects: Vec<ProjectView>,
}

impl ProjectPutRestBody {
    /// The tool body of `PUT /v1/projects/{project_id}`: the path names the project.
    pub fn into_tool_body(self, project_id: String) -> ProjectPutBody {
        ProjectPutBody {
            agent_id: self.agent_id,
            project_id,
            name: self.name,
            isolated: self.isolated,
            session_id: None,
        }
    }
}

/// Create or change a project, attaching a session when one is named.
pub async fn project_put(
    runtime: &Runtime,
    caller: &Caller,
    body: ProjectPutBody,
) -> MemoryResult<ProjectView> {
    caller.require(Scope::Write)?;
    let owner = caller.agent("agent_id", body.agent_id.as_deref())?;
    let project_id = ProjectId::parse(&body.project_id)?;
    let session = session("session_id", body.session_id.as_deref())?;
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
    caller: &Caller,
    body: ProjectListBody,
) -> MemoryResult<ProjectsResponse> {
    caller.require(Scope::Read)?;
    let owner = caller.agent("agent_id", body.agent_id.as_deref())?;
    Ok(ProjectsResponse {
        projects: runtime
            .projects(&owner)
            .await?
            .into_iter()
            .map(Into::into)
            .collect(),
    })
}

/// One of an agent's projects with its sessions.
pub async fn project_get(
    runtime: &Runtime,
    caller: &Caller,
    project_id: &str,
    owner: ProjectOwnerParam,
) -> MemoryResult<ProjectView> {
    caller.require(Scope::Read)?;
    let owner = caller.agent("agent_id", owner.agent_id.as_deref())?;
    let project_id = ProjectId::parse(project_id)?;
    Ok(runtime.project(&owner, &project_id).await?.into())
}

/// Attach a session to a project: the session's memories from now on belong to it.
pub async fn project_attach_session(
    runtime: &Runtime,
    caller: &Caller,
    project_id: &str,
    session_id: &str,
    body: AttachSessionBody,
) -> MemoryResult<ProjectView> {
    caller.require(Scope::Write)?;
    let owner = caller.agent("agent_id", body.agent_id.as_deref())?;
    let project_id = ProjectId::parse(project_id)?;
    let session = mnemos_actors::model::SessionId::parse(session_id)?;
    runtime
        .attach_session(&owner, &project_id, &session)
        .await?;
    Ok(runtime.project(&owner, &project_id).await?.into())
}

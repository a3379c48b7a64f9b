//! Projects: named groups of one agent's sessions, with an isolation flag.
//!
//! A project belongs to one agent (`(agent_id, project_id)` is its key) and groups
//! sessions; memories carry the project they were written in. An `isolated` project's
//! memories are recalled only by requests naming that project.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::{MemoryError, MemoryResult};
use crate::model::{validate_identifier, AgentId, SessionId};

/// Validated project identifier (same alphabet as agent ids), unique per agent.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ProjectId(String);

impl ProjectId {
    /// Validate and wrap a project id; the error names `field`.
    pub fn parse_field(field: &str, raw: &str) -> MemoryResult<Self> {
        validate_identifier(field, raw)?;
        Ok(Self(raw.to_string()))
    }
    /// Validate and wrap a project id; the error names the `project_id` field.
    pub fn parse(raw: &str) -> MemoryResult<Self> {
        Self::parse_field("project_id", raw)
    }
    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ProjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A project of one agent: a named group of sessions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Project {
    /// Owner.
    pub agent_id: AgentId,
    /// Id, unique within the owner's projects.
    pub project_id: ProjectId,
    /// Human-readable name.
    pub name: String,
    /// When true, the project's memories never appear in another project's (or a project-less) recall.
    pub isolated: bool,
    /// When the project was created.
    pub created_at: DateTime<Utc>,
    /// When its name or isolation last changed.
    pub updated_at: DateTime<Utc>,
}

/// A project with the sessions attached to it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProjectDetail {
    /// The project.
    pub project: Project,
    /// Its sessions, in id order.
    pub sessions: Vec<SessionId>,
}

/// The error of a reference to a project the agent does not have.
pub fn no_such_project(field: &str, agent: &AgentId, project: &ProjectId) -> MemoryError {
    MemoryError {
        field: Some(field.into()),
        ..MemoryError::not_found(format!(
            "agent {agent} has no project {project}; create it with PUT /v1/projects/{project}"
        ))
    }
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

//! Projects on the runtime handle: create or change a project, read one with its
//! sessions, and the isolation lookup recall and spreading activation filter by.

use std::collections::HashSet;

use super::Runtime;
use crate::error::{MemoryError, MemoryResult};
use crate::model::{AgentId, Memory};
use crate::projects::{no_such_project, Project, ProjectDetail, ProjectId};

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

/// Create a project of `agent`, or change its name or isolation.
pub(super) async fn put(
    rt: &Runtime,
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
        super::validate::storable_text("name", name)?;
    }
    let now = rt.now();
    let namespaces = &rt.actors().namespaces;
    let current = namespaces
        .project(agent, project_id)
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
    namespaces.upsert_project(&project).await
}

/// One project of `agent` with its sessions; `not_found` (field `project_id`) when it has none by that id.
pub(super) async fn get(
    rt: &Runtime,
    agent: &AgentId,
    project_id: &ProjectId,
) -> MemoryResult<ProjectDetail> {
    rt.actors()
        .namespaces
        .project(agent, project_id)
        .await?
        .ok_or_else(|| no_such_project("project_id", agent, project_id))
}

impl Runtime {
    /// The isolated projects among those of `memories` (one lookup, none when no memory has a project).
    pub(super) async fn isolated_among(
        &self,
        memories: &[Memory],
    ) -> MemoryResult<HashSet<(AgentId, ProjectId)>> {
        let keys: HashSet<(AgentId, ProjectId)> = memories
            .iter()
            .filter_map(|m| m.project_id.clone().map(|p| (m.agent_id.clone(), p)))
            .collect();
        let projects: Vec<(AgentId, ProjectId)> = keys.into_iter().collect();
        Ok(self
            .actors()
            .namespaces
            .isolated_projects(&projects)
            .await?
            .into_iter()
            .collect())
    }
}

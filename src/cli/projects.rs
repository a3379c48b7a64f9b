//! `mnemos projects list|show|put`: an agent's projects over the contract.

use clap::Subcommand;
use mnemos::auth::Caller;
use mnemos::contract::projects::{
    self, ProjectListBody, ProjectOwnerParam, ProjectPutBody, ProjectView, ProjectsResponse,
};
use mnemos_actors::Runtime;

use super::{print, user_error};

/// What `mnemos projects` does.
#[derive(Subcommand)]
pub(crate) enum ProjectsAction {
    /// An agent's projects.
    List {
        /// Owner.
        #[arg(long)]
        agent: String,
    },
    /// One project with its sessions.
    Show {
        /// The project.
        project: String,
        /// Owner.
        #[arg(long)]
        agent: String,
    },
    /// Create a project or change it; optionally attach a session.
    Put {
        /// The project.
        project: String,
        /// Owner.
        #[arg(long)]
        agent: String,
        /// Its name (default on create: the id).
        #[arg(long)]
        name: Option<String>,
        /// Keep its memories out of other projects' recall (true or false).
        #[arg(long)]
        isolated: Option<bool>,
        /// A session to attach to it.
        #[arg(long)]
        session: Option<String>,
    },
}

/// One project as a line of text.
fn project_line(p: &ProjectView) -> String {
    format!(
        "{:<20} {:<24} {}{}",
        p.project_id,
        p.name,
        if p.isolated { "isolated" } else { "open" },
        p.sessions
            .as_ref()
            .map(|s| format!("  sessions: {}", s.join(", ")))
            .unwrap_or_default()
    )
}

/// `mnemos projects …`.
pub(crate) async fn run(
    runtime: &Runtime,
    caller: &Caller,
    action: ProjectsAction,
    json: bool,
) -> anyhow::Result<()> {
    match action {
        ProjectsAction::List { agent } => {
            let body = ProjectListBody {
                agent_id: Some(agent.clone()),
            };
            let found = projects::project_list(runtime, caller, body)
                .await
                .map_err(user_error)?;
            print(json, &found, |found: &ProjectsResponse| {
                if found.projects.is_empty() {
                    return format!("{agent} has no projects");
                }
                found
                    .projects
                    .iter()
                    .map(project_line)
                    .collect::<Vec<_>>()
                    .join("\n")
            });
        }
        ProjectsAction::Show { project, agent } => {
            let owner = ProjectOwnerParam {
                agent_id: Some(agent),
            };
            let found = projects::project_get(runtime, caller, &project, owner)
                .await
                .map_err(user_error)?;
            print(json, &found, project_line);
        }
        ProjectsAction::Put {
            project,
            agent,
            name,
            isolated,
            session,
        } => {
            let body = ProjectPutBody {
                agent_id: Some(agent),
                project_id: project,
                name,
                isolated,
                session_id: session,
            };
            let stored = projects::project_put(runtime, caller, body)
                .await
                .map_err(user_error)?;
            print(json, &stored, |p| format!("stored {}", project_line(p)));
        }
    }
    Ok(())
}

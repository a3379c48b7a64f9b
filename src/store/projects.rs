//! [`ProjectStore`] on either SQL database: projects (per agent, with an isolation
//! flag) and the sessions attached to them. A session belongs to at most one project of
//! its agent; attaching checks that inside one write transaction.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use mnemos_actors::error::MemoryResult;
use mnemos_actors::model::{AgentId, SessionId};
use mnemos_actors::projects::{
    no_such_project, session_in_other_project, Project, ProjectDetail, ProjectId,
};
use mnemos_actors::store::projects::ProjectStore;

use super::dialect::{commit, row, run, Dialect, SqlStore};
use super::rows::{self, Columns};
use super::sql::{self, Arg, Statement};

#[async_trait]
impl<D: Dialect> ProjectStore for SqlStore<D> {
    fn backend_name(&self) -> &'static str {
        D::STORE_NAME
    }

    async fn upsert_project(&self, project: &Project) -> MemoryResult<Project> {
        let statement = Statement::new(
            sql::UPSERT_PROJECT,
            [
                Arg::Text(project.agent_id.as_str()),
                Arg::Text(project.project_id.as_str()),
                Arg::Text(&project.name),
                Arg::Flag(project.isolated),
                Arg::Time(project.created_at),
                Arg::Time(project.updated_at),
            ],
        );
        let row = self
            .row(&statement)
            .await?
            .ok_or_else(|| D::backend_error(sqlx::Error::RowNotFound))?;
        rows::project(&row)
    }

    async fn project(
        &self,
        agent: &AgentId,
        project: &ProjectId,
    ) -> MemoryResult<Option<ProjectDetail>> {
        let key = [Arg::Text(agent.as_str()), Arg::Text(project.as_str())];
        let Some(row) = self.row(&Statement::new(sql::PROJECT, key.clone())).await? else {
            return Ok(None);
        };
        let sessions = self
            .rows(&Statement::new(sql::PROJECT_SESSIONS, key))
            .await?
            .iter()
            .map(|row| SessionId::parse(&row.text("session_id")?))
            .collect::<MemoryResult<Vec<_>>>()?;
        Ok(Some(ProjectDetail {
            project: rows::project(&row)?,
            sessions,
        }))
    }

    async fn projects(&self, agent: &AgentId) -> MemoryResult<Vec<Project>> {
        let statement = Statement::new(sql::PROJECTS, [Arg::Text(agent.as_str())]);
        self.all(&statement, rows::project).await
    }

    async fn attach_session(
        &self,
        agent: &AgentId,
        project: &ProjectId,
        session: &SessionId,
        now: DateTime<Utc>,
    ) -> MemoryResult<()> {
        let mut tx = self.write_transaction().await?;
        let exists = Statement::new(
            sql::PROJECT_EXISTS,
            [Arg::Text(agent.as_str()), Arg::Text(project.as_str())],
        );
        if row::<D>(&mut tx, &exists).await?.is_none() {
            return Err(no_such_project("project_id", agent, project));
        }
        let current = Statement::new(
            sql::SESSION_PROJECT,
            [Arg::Text(agent.as_str()), Arg::Text(session.as_str())],
        );
        if let Some(row) = row::<D>(&mut tx, &current).await? {
            let current = row.text("project_id")?;
            if current != project.as_str() {
                return Err(session_in_other_project(
                    session,
                    &ProjectId::parse(&current)?,
                ));
            }
            return Ok(());
        }
        let attach = Statement::new(
            sql::ATTACH_SESSION,
            [
                Arg::Text(agent.as_str()),
                Arg::Text(session.as_str()),
                Arg::Text(project.as_str()),
                Arg::Time(now),
            ],
        );
        run::<D>(&mut tx, &attach).await?;
        commit(tx).await
    }

    async fn session_project(
        &self,
        agent: &AgentId,
        session: &SessionId,
    ) -> MemoryResult<Option<ProjectId>> {
        let statement = Statement::new(
            sql::SESSION_PROJECT,
            [Arg::Text(agent.as_str()), Arg::Text(session.as_str())],
        );
        self.row(&statement)
            .await?
            .map(|row| ProjectId::parse(&row.text("project_id")?))
            .transpose()
    }

    async fn isolated_projects(
        &self,
        projects: &[(AgentId, ProjectId)],
    ) -> MemoryResult<Vec<(AgentId, ProjectId)>> {
        let mut found = Vec::new();
        for chunk in projects.chunks(400) {
            for row in self.rows(&sql::isolated_projects(chunk)).await? {
                found.push((
                    AgentId::stored(&row.text("agent_id")?)?,
                    ProjectId::parse(&row.text("project_id")?)?,
                ));
            }
        }
        Ok(found)
    }
}

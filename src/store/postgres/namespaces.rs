//! [`KvStore`] and [`ProjectStore`] on PostgreSQL: projects, their sessions, and KV namespaces, with
//! the semantics of the SQLite version.
//!
//! Every KV write (put, get — which moves the entry to the front of the use order —,
//! delete, configure) is one transaction under the store's write lock: the namespace's
//! `clock` hands out the use number, and eviction down to `max_entries` happens in the
//! same transaction as the put, so concurrent puts from any number of replicas never
//! leave the namespace over its bound and never lose a write.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use mnemos_actors::error::{MemoryError, MemoryResult};
use mnemos_actors::kv::{
    no_such_key, no_such_namespace, KvEntry, KvPut, KvPutOutcome, NamespaceName, NamespaceStats,
};
use mnemos_actors::model::{AgentId, SessionId};
use mnemos_actors::policy::lru::{excess, query_terms, rank};
use mnemos_actors::projects::{
    no_such_project, session_in_other_project, Project, ProjectDetail, ProjectId,
};
use mnemos_actors::store::kv::KvStore;
use mnemos_actors::store::projects::ProjectStore;
use sqlx::postgres::{PgConnection, PgRow};
use sqlx::types::Json;
use sqlx::{Postgres, QueryBuilder, Row};

use super::{backend_error, PostgresStore};

const ENTRY_COLUMNS: &str =
    "namespace, key, value, tags, written_by, created_at, updated_at, expires_at, last_used";

/// Most query terms used to pre-select search candidates in SQL.
const MAX_PREFILTER_TERMS: usize = 32;

fn corrupt(e: sqlx::Error) -> MemoryError {
    MemoryError::internal(format!("corrupt namespace row: {e}"))
}

fn entry_from_row(row: &PgRow) -> MemoryResult<KvEntry> {
    let namespace: String = row.try_get("namespace").map_err(corrupt)?;
    let Json(tags): Json<Vec<String>> = row.try_get("tags").map_err(corrupt)?;
    let written_by: String = row.try_get("written_by").map_err(corrupt)?;
    Ok(KvEntry {
        namespace: NamespaceName::parse(&namespace)?,
        key: row.try_get("key").map_err(corrupt)?,
        value: row.try_get("value").map_err(corrupt)?,
        tags,
        written_by: AgentId::parse(&written_by)?,
        created_at: row.try_get("created_at").map_err(corrupt)?,
        updated_at: row.try_get("updated_at").map_err(corrupt)?,
        expires_at: row.try_get("expires_at").map_err(corrupt)?,
        last_used: row.try_get::<i64, _>("last_used").map_err(corrupt)?.max(0) as u64,
    })
}

fn project_from_row(row: &PgRow) -> MemoryResult<Project> {
    let agent: String = row.try_get("agent_id").map_err(corrupt)?;
    let project: String = row.try_get("project_id").map_err(corrupt)?;
    Ok(Project {
        agent_id: AgentId::parse(&agent)?,
        project_id: ProjectId::parse(&project)?,
        name: row.try_get("name").map_err(corrupt)?,
        isolated: row.try_get("isolated").map_err(corrupt)?,
        created_at: row.try_get("created_at").map_err(corrupt)?,
        updated_at: row.try_get("updated_at").map_err(corrupt)?,
    })
}

/// The namespace's bound, or `not_found`.
async fn max_entries_of(conn: &mut PgConnection, namespace: &NamespaceName) -> MemoryResult<usize> {
    let row: Option<(i64,)> =
        sqlx::query_as("SELECT max_entries FROM kv_namespaces WHERE name = $1")
            .bind(namespace.as_str())
            .fetch_optional(&mut *conn)
            .await
            .map_err(backend_error)?;
    row.map(|(max,)| max.max(1) as usize)
        .ok_or_else(|| no_such_namespace(namespace))
}

/// Drop the namespace's expired entries (not evictions).
async fn purge_expired(
    conn: &mut PgConnection,
    namespace: &NamespaceName,
    now: DateTime<Utc>,
) -> MemoryResult<()> {
    sqlx::query(
        "DELETE FROM kv_entries WHERE namespace = $1 AND expires_at IS NOT NULL AND expires_at <= $2",
    )
    .bind(namespace.as_str())
    .bind(now)
    .execute(&mut *conn)
    .await
    .map_err(backend_error)?;
    Ok(())
}

/// Evict least recently used entries until at most `max_entries` remain; returns their keys, oldest first.
async fn evict(
    conn: &mut PgConnection,
    namespace: &NamespaceName,
    max_entries: usize,
) -> MemoryResult<Vec<String>> {
    let (count,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM kv_entries WHERE namespace = $1")
        .bind(namespace.as_str())
        .fetch_one(&mut *conn)
        .await
        .map_err(backend_error)?;
    let surplus = excess(count.max(0) as usize, max_entries);
    if surplus == 0 {
        return Ok(Vec::new());
    }
    let mut evicted: Vec<(i64, String)> = sqlx::query_as(
        "DELETE FROM kv_entries WHERE namespace = $1 AND key IN \
         (SELECT key FROM kv_entries WHERE namespace = $1 ORDER BY last_used LIMIT $2) \
         RETURNING last_used, key",
    )
    .bind(namespace.as_str())
    .bind(surplus as i64)
    .fetch_all(&mut *conn)
    .await
    .map_err(backend_error)?;
    evicted.sort();
    sqlx::query("UPDATE kv_namespaces SET evictions = evictions + $1 WHERE name = $2")
        .bind(evicted.len() as i64)
        .bind(namespace.as_str())
        .execute(&mut *conn)
        .await
        .map_err(backend_error)?;
    Ok(evicted.into_iter().map(|(_, key)| key).collect())
}

async fn stats_of(
    conn: &mut PgConnection,
    namespace: &NamespaceName,
    now: DateTime<Utc>,
) -> MemoryResult<NamespaceStats> {
    let row = sqlx::query(
        "SELECT max_entries, hits, misses, evictions, puts, created_at, \
         (SELECT COUNT(*) FROM kv_entries e WHERE e.namespace = n.name \
          AND (e.expires_at IS NULL OR e.expires_at > $1)) AS entries \
         FROM kv_namespaces n WHERE name = $2",
    )
    .bind(now)
    .bind(namespace.as_str())
    .fetch_optional(&mut *conn)
    .await
    .map_err(backend_error)?
    .ok_or_else(|| no_such_namespace(namespace))?;
    let count = |name: &str| -> MemoryResult<u64> {
        Ok(row.try_get::<i64, _>(name).map_err(corrupt)?.max(0) as u64)
    };
    Ok(NamespaceStats {
        namespace: namespace.clone(),
        entries: count("entries")? as usize,
        max_entries: count("max_entries")? as usize,
        hits: count("hits")?,
        misses: count("misses")?,
        evictions: count("evictions")?,
        puts: count("puts")?,
        created_at: row.try_get("created_at").map_err(corrupt)?,
    })
}

/// Take the next use number of a namespace, bumping `counter` (`hits` or `puts`) with it.
async fn next_use(
    conn: &mut PgConnection,
    namespace: &NamespaceName,
    counter: &'static str,
    now: DateTime<Utc>,
) -> MemoryResult<(u64, usize)> {
    let (clock, max): (i64, i64) = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "UPDATE kv_namespaces SET clock = clock + 1, {counter} = {counter} + 1, updated_at = $1 \
         WHERE name = $2 RETURNING clock, max_entries"
    )))
    .bind(now)
    .bind(namespace.as_str())
    .fetch_optional(&mut *conn)
    .await
    .map_err(backend_error)?
    .ok_or_else(|| no_such_namespace(namespace))?;
    Ok((clock.max(0) as u64, max.max(1) as usize))
}

#[async_trait]
impl KvStore for PostgresStore {
    fn backend_name(&self) -> &'static str {
        "postgres"
    }

    async fn kv_configure(
        &self,
        namespace: &NamespaceName,
        max_entries: usize,
        now: DateTime<Utc>,
    ) -> MemoryResult<(NamespaceStats, Vec<String>)> {
        let mut tx = self.write_transaction().await?;
        sqlx::query(
            "INSERT INTO kv_namespaces (name, max_entries, created_at, updated_at) VALUES ($1, $2, $3, $3) \
             ON CONFLICT (name) DO UPDATE SET max_entries = excluded.max_entries, updated_at = excluded.updated_at",
        )
        .bind(namespace.as_str())
        .bind(max_entries.max(1) as i64)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(backend_error)?;
        purge_expired(&mut tx, namespace, now).await?;
        let evicted = evict(&mut tx, namespace, max_entries.max(1)).await?;
        let stats = stats_of(&mut tx, namespace, now).await?;
        tx.commit().await.map_err(backend_error)?;
        Ok((stats, evicted))
    }

    async fn kv_put(&self, put: &KvPut) -> MemoryResult<KvPutOutcome> {
        let now = put.now;
        let mut tx = self.write_transaction().await?;
        sqlx::query(
            "INSERT INTO kv_namespaces (name, max_entries, created_at, updated_at) VALUES ($1, $2, $3, $3) \
             ON CONFLICT (name) DO NOTHING",
        )
        .bind(put.namespace.as_str())
        .bind(put.default_max_entries.max(1) as i64)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(backend_error)?;
        purge_expired(&mut tx, &put.namespace, put.now).await?;
        let (last_used, max_entries) = next_use(&mut tx, &put.namespace, "puts", put.now).await?;
        let existing: Option<(DateTime<Utc>,)> =
            sqlx::query_as("SELECT created_at FROM kv_entries WHERE namespace = $1 AND key = $2")
                .bind(put.namespace.as_str())
                .bind(&put.key)
                .fetch_optional(&mut *tx)
                .await
                .map_err(backend_error)?;
        let created_at = match &existing {
            Some((at,)) => *at,
            None => put.now,
        };
        sqlx::query(
            "INSERT INTO kv_entries (namespace, key, value, tags, written_by, created_at, updated_at, expires_at, last_used) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
             ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value, tags = excluded.tags, \
             written_by = excluded.written_by, updated_at = excluded.updated_at, \
             expires_at = excluded.expires_at, last_used = excluded.last_used",
        )
        .bind(put.namespace.as_str())
        .bind(&put.key)
        .bind(&put.value)
        .bind(Json(&put.tags))
        .bind(put.written_by.as_str())
        .bind(created_at)
        .bind(now)
        .bind(put.expires_at)
        .bind(last_used as i64)
        .execute(&mut *tx)
        .await
        .map_err(backend_error)?;
        sqlx::query("DELETE FROM kv_entry_tags WHERE namespace = $1 AND key = $2")
            .bind(put.namespace.as_str())
            .bind(&put.key)
            .execute(&mut *tx)
            .await
            .map_err(backend_error)?;
        let mut distinct = put.tags.clone();
        distinct.sort();
        distinct.dedup();
        if !distinct.is_empty() {
            let mut builder: QueryBuilder<Postgres> =
                QueryBuilder::new("INSERT INTO kv_entry_tags (namespace, key, tag) ");
            builder.push_values(&distinct, |mut row, tag| {
                row.push_bind(put.namespace.as_str().to_string())
                    .push_bind(put.key.clone())
                    .push_bind(tag.clone());
            });
            builder
                .build()
                .execute(&mut *tx)
                .await
                .map_err(backend_error)?;
        }
        let evicted = evict(&mut tx, &put.namespace, max_entries).await?;
        tx.commit().await.map_err(backend_error)?;
        Ok(KvPutOutcome {
            entry: KvEntry {
                namespace: put.namespace.clone(),
                key: put.key.clone(),
                value: put.value.clone(),
                tags: put.tags.clone(),
                written_by: put.written_by.clone(),
                created_at,
                updated_at: put.now,
                expires_at: put.expires_at,
                last_used,
            },
            created: existing.is_none(),
            evicted,
        })
    }

    async fn kv_get(
        &self,
        namespace: &NamespaceName,
        key: &str,
        now: DateTime<Utc>,
    ) -> MemoryResult<KvEntry> {
        let mut tx = self.write_transaction().await?;
        max_entries_of(&mut tx, namespace).await?;
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {ENTRY_COLUMNS} FROM kv_entries WHERE namespace = $1 AND key = $2"
        )))
        .bind(namespace.as_str())
        .bind(key)
        .fetch_optional(&mut *tx)
        .await
        .map_err(backend_error)?;
        let found = row.as_ref().map(entry_from_row).transpose()?;
        match found {
            Some(mut entry) if !entry.is_expired(now) => {
                let (last_used, _) = next_use(&mut tx, namespace, "hits", now).await?;
                sqlx::query(
                    "UPDATE kv_entries SET last_used = $1 WHERE namespace = $2 AND key = $3",
                )
                .bind(last_used as i64)
                .bind(namespace.as_str())
                .bind(key)
                .execute(&mut *tx)
                .await
                .map_err(backend_error)?;
                tx.commit().await.map_err(backend_error)?;
                entry.last_used = last_used;
                Ok(entry)
            }
            expired_or_missing => {
                if expired_or_missing.is_some() {
                    sqlx::query("DELETE FROM kv_entries WHERE namespace = $1 AND key = $2")
                        .bind(namespace.as_str())
                        .bind(key)
                        .execute(&mut *tx)
                        .await
                        .map_err(backend_error)?;
                }
                sqlx::query("UPDATE kv_namespaces SET misses = misses + 1 WHERE name = $1")
                    .bind(namespace.as_str())
                    .execute(&mut *tx)
                    .await
                    .map_err(backend_error)?;
                tx.commit().await.map_err(backend_error)?;
                Err(no_such_key(namespace, key))
            }
        }
    }

    async fn kv_delete(
        &self,
        namespace: &NamespaceName,
        key: &str,
        now: DateTime<Utc>,
    ) -> MemoryResult<()> {
        let mut tx = self.write_transaction().await?;
        max_entries_of(&mut tx, namespace).await?;
        let deleted: Option<(Option<DateTime<Utc>>,)> = sqlx::query_as(
            "DELETE FROM kv_entries WHERE namespace = $1 AND key = $2 RETURNING expires_at",
        )
        .bind(namespace.as_str())
        .bind(key)
        .fetch_optional(&mut *tx)
        .await
        .map_err(backend_error)?;
        tx.commit().await.map_err(backend_error)?;
        match deleted {
            Some((expires_at,)) => {
                let expired = match expires_at {
                    Some(at) => at <= now,
                    None => false,
                };
                if expired {
                    Err(no_such_key(namespace, key))
                } else {
                    Ok(())
                }
            }
            None => Err(no_such_key(namespace, key)),
        }
    }

    async fn kv_search(
        &self,
        namespace: &NamespaceName,
        query: &str,
        limit: usize,
        now: DateTime<Utc>,
    ) -> MemoryResult<Vec<(KvEntry, f64)>> {
        let mut conn = self.pool().acquire().await.map_err(backend_error)?;
        max_entries_of(&mut conn, namespace).await?;
        let terms = query_terms(query);
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        // Candidates: live entries whose key, tags or value contain a query term; ranked in
        // Rust. As on SQLite, a query with a non-ASCII word reads every live entry of the
        // namespace instead (it is bounded by max_entries).
        let mut builder: QueryBuilder<Postgres> = QueryBuilder::new(format!(
            "SELECT {ENTRY_COLUMNS} FROM kv_entries WHERE namespace = "
        ));
        builder
            .push_bind(namespace.as_str().to_string())
            .push(" AND (expires_at IS NULL OR expires_at > ")
            .push_bind(now)
            .push(")");
        if terms.iter().all(|t| t.is_ascii()) {
            builder.push(" AND (");
            for (i, term) in terms.iter().take(MAX_PREFILTER_TERMS).enumerate() {
                if i > 0 {
                    builder.push(" OR ");
                }
                builder
                    .push("strpos(lower(key || ' ' || CAST(tags AS text) || ' ' || CAST(value AS text)), ")
                    .push_bind(term.clone())
                    .push(") > 0");
            }
            builder.push(")");
        }
        let rows = builder
            .build()
            .fetch_all(&mut *conn)
            .await
            .map_err(backend_error)?;
        let entries = rows
            .iter()
            .map(entry_from_row)
            .collect::<MemoryResult<Vec<_>>>()?;
        Ok(rank(query, entries, limit))
    }

    async fn kv_list(
        &self,
        namespace: &NamespaceName,
        tag: Option<&str>,
        limit: usize,
        now: DateTime<Utc>,
    ) -> MemoryResult<Vec<KvEntry>> {
        let mut conn = self.pool().acquire().await.map_err(backend_error)?;
        max_entries_of(&mut conn, namespace).await?;
        let mut builder: QueryBuilder<Postgres> = QueryBuilder::new(format!(
            "SELECT {ENTRY_COLUMNS} FROM kv_entries WHERE namespace = "
        ));
        builder
            .push_bind(namespace.as_str().to_string())
            .push(" AND (expires_at IS NULL OR expires_at > ")
            .push_bind(now)
            .push(")");
        if let Some(tag) = tag {
            builder
                .push(" AND key IN (SELECT key FROM kv_entry_tags WHERE namespace = ")
                .push_bind(namespace.as_str().to_string())
                .push(" AND tag = ")
                .push_bind(tag.to_string())
                .push(")");
        }
        builder
            .push(" ORDER BY last_used DESC LIMIT ")
            .push_bind(limit as i64);
        let rows = builder
            .build()
            .fetch_all(&mut *conn)
            .await
            .map_err(backend_error)?;
        rows.iter().map(entry_from_row).collect()
    }

    async fn kv_stats(
        &self,
        namespace: &NamespaceName,
        now: DateTime<Utc>,
    ) -> MemoryResult<NamespaceStats> {
        let mut conn = self.pool().acquire().await.map_err(backend_error)?;
        stats_of(&mut conn, namespace, now).await
    }
}

#[async_trait]
impl ProjectStore for PostgresStore {
    fn backend_name(&self) -> &'static str {
        "postgres"
    }

    async fn upsert_project(&self, project: &Project) -> MemoryResult<Project> {
        let row = sqlx::query(
            "INSERT INTO projects (agent_id, project_id, name, isolated, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (agent_id, project_id) DO UPDATE SET name = excluded.name, \
             isolated = excluded.isolated, updated_at = excluded.updated_at \
             RETURNING agent_id, project_id, name, isolated, created_at, updated_at",
        )
        .bind(project.agent_id.as_str())
        .bind(project.project_id.as_str())
        .bind(&project.name)
        .bind(project.isolated)
        .bind(project.created_at)
        .bind(project.updated_at)
        .fetch_one(self.pool())
        .await
        .map_err(backend_error)?;
        project_from_row(&row)
    }

    async fn project(
        &self,
        agent: &AgentId,
        project: &ProjectId,
    ) -> MemoryResult<Option<ProjectDetail>> {
        let row = sqlx::query(
            "SELECT agent_id, project_id, name, isolated, created_at, updated_at FROM projects \
             WHERE agent_id = $1 AND project_id = $2",
        )
        .bind(agent.as_str())
        .bind(project.as_str())
        .fetch_optional(self.pool())
        .await
        .map_err(backend_error)?;
        let Some(row) = row else {
            return Ok(None);
        };
        let sessions: Vec<(String,)> = sqlx::query_as(
            "SELECT session_id FROM project_sessions WHERE agent_id = $1 AND project_id = $2 ORDER BY session_id",
        )
        .bind(agent.as_str())
        .bind(project.as_str())
        .fetch_all(self.pool())
        .await
        .map_err(backend_error)?;
        Ok(Some(ProjectDetail {
            project: project_from_row(&row)?,
            sessions: sessions
                .iter()
                .map(|(s,)| SessionId::parse(s))
                .collect::<MemoryResult<Vec<_>>>()?,
        }))
    }

    async fn projects(&self, agent: &AgentId) -> MemoryResult<Vec<Project>> {
        let rows = sqlx::query(
            "SELECT agent_id, project_id, name, isolated, created_at, updated_at FROM projects \
             WHERE agent_id = $1 ORDER BY project_id",
        )
        .bind(agent.as_str())
        .fetch_all(self.pool())
        .await
        .map_err(backend_error)?;
        rows.iter().map(project_from_row).collect()
    }

    async fn attach_session(
        &self,
        agent: &AgentId,
        project: &ProjectId,
        session: &SessionId,
        now: DateTime<Utc>,
    ) -> MemoryResult<()> {
        let mut tx = self.write_transaction().await?;
        let exists: Option<(i32,)> =
            sqlx::query_as("SELECT 1 FROM projects WHERE agent_id = $1 AND project_id = $2")
                .bind(agent.as_str())
                .bind(project.as_str())
                .fetch_optional(&mut *tx)
                .await
                .map_err(backend_error)?;
        if exists.is_none() {
            return Err(no_such_project("project_id", agent, project));
        }
        let current: Option<(String,)> = sqlx::query_as(
            "SELECT project_id FROM project_sessions WHERE agent_id = $1 AND session_id = $2",
        )
        .bind(agent.as_str())
        .bind(session.as_str())
        .fetch_optional(&mut *tx)
        .await
        .map_err(backend_error)?;
        match current {
            Some((current,)) if current != project.as_str() => {
                return Err(session_in_other_project(
                    session,
                    &ProjectId::parse(&current)?,
                ))
            }
            Some(_) => return Ok(()),
            None => {}
        }
        sqlx::query(
            "INSERT INTO project_sessions (agent_id, session_id, project_id, attached_at) VALUES ($1, $2, $3, $4)",
        )
        .bind(agent.as_str())
        .bind(session.as_str())
        .bind(project.as_str())
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(backend_error)?;
        tx.commit().await.map_err(backend_error)
    }

    async fn session_project(
        &self,
        agent: &AgentId,
        session: &SessionId,
    ) -> MemoryResult<Option<ProjectId>> {
        let row: Option<(String,)> = sqlx::query_as(
            "SELECT project_id FROM project_sessions WHERE agent_id = $1 AND session_id = $2",
        )
        .bind(agent.as_str())
        .bind(session.as_str())
        .fetch_optional(self.pool())
        .await
        .map_err(backend_error)?;
        row.map(|(p,)| ProjectId::parse(&p)).transpose()
    }

    async fn isolated_projects(
        &self,
        projects: &[(AgentId, ProjectId)],
    ) -> MemoryResult<Vec<(AgentId, ProjectId)>> {
        let mut found = Vec::new();
        for chunk in projects.chunks(400) {
            let mut builder: QueryBuilder<Postgres> = QueryBuilder::new(
                "SELECT agent_id, project_id FROM projects WHERE isolated AND (agent_id, project_id) IN (VALUES ",
            );
            let mut separated = builder.separated(", ");
            for (agent, project) in chunk {
                separated
                    .push("(CAST(")
                    .push_bind_unseparated(agent.as_str().to_string())
                    .push_unseparated(" AS text), CAST(")
                    .push_bind_unseparated(project.as_str().to_string())
                    .push_unseparated(" AS text))");
            }
            builder.push(")");
            let rows: Vec<(String, String)> = builder
                .build_query_as()
                .fetch_all(self.pool())
                .await
                .map_err(backend_error)?;
            for (agent, project) in rows {
                found.push((AgentId::parse(&agent)?, ProjectId::parse(&project)?));
            }
        }
        Ok(found)
    }
}

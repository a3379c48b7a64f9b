//! [`KeyStore`] on either SQL database: the `api_keys` and `audit_log` tables. Identity is
//! the service's own concern (checked before the runtime sees a request), so these
//! tables are read and written here directly rather than through an actor.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use mnemos_actors::error::MemoryResult;
use mnemos_actors::model::{AgentId, TenantId};

use super::dialect::{Dialect, SqlStore};
use super::rows::Columns;
use super::sql::{Arg, Statement};
use crate::auth::keys::{ApiKey, AuditEntry, KeyStore};
use crate::auth::Scope;

/// The columns of a key row, in this order.
const KEY_COLUMNS: &str =
    "id, name, tenant, agent_id, scopes, secret_hash, created_at, last_used_at, expires_at, revoked_at";

/// A key row.
fn key_of(row: &impl Columns) -> MemoryResult<ApiKey> {
    Ok(ApiKey {
        id: row.text("id")?,
        name: row.text("name")?,
        tenant: TenantId::parse(&row.text("tenant")?)?,
        agent: row
            .optional_text("agent_id")?
            .as_deref()
            .map(AgentId::parse)
            .transpose()?,
        scopes: Scope::parse_list("scopes", &row.text("scopes")?)?,
        secret_hash: row.text("secret_hash")?,
        created_at: row.time("created_at")?,
        last_used_at: row.optional_time("last_used_at")?,
        expires_at: row.optional_time("expires_at")?,
        revoked_at: row.optional_time("revoked_at")?,
    })
}

/// An audit row.
fn audit_of(row: &impl Columns) -> MemoryResult<AuditEntry> {
    Ok(AuditEntry {
        at: row.time("at")?,
        actor: row.text("actor")?,
        tenant: row.optional_text("tenant")?,
        action: row.text("action")?,
        target: row.optional_text("target")?,
        detail: row.json("detail")?.unwrap_or_default(),
    })
}

#[async_trait]
impl<D: Dialect> KeyStore for SqlStore<D> {
    async fn create_key(&self, key: &ApiKey) -> MemoryResult<()> {
        let scopes: Vec<&str> = key.scopes.iter().map(|s| s.as_str()).collect();
        let scopes = scopes.join(",");
        let statement = Statement::new(
            format!(
                "INSERT INTO api_keys ({KEY_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
            ),
            [
                Arg::Text(&key.id),
                Arg::Text(&key.name),
                Arg::Text(key.tenant.as_str()),
                Arg::OptionalText(key.agent.as_ref().map(AgentId::as_str)),
                Arg::Text(&scopes),
                Arg::Text(&key.secret_hash),
                Arg::Time(key.created_at),
                Arg::OptionalTime(key.last_used_at),
                Arg::OptionalTime(key.expires_at),
                Arg::OptionalTime(key.revoked_at),
            ],
        );
        self.run_alone(&statement).await?;
        Ok(())
    }

    async fn key(&self, id: &str) -> MemoryResult<Option<ApiKey>> {
        let statement = Statement::new(
            format!("SELECT {KEY_COLUMNS} FROM api_keys WHERE id = $1"),
            [Arg::Text(id)],
        );
        self.row(&statement).await?.as_ref().map(key_of).transpose()
    }

    async fn keys(&self, tenant: Option<&TenantId>) -> MemoryResult<Vec<ApiKey>> {
        let statement = match tenant {
            Some(tenant) => Statement::new(
                format!(
                    "SELECT {KEY_COLUMNS} FROM api_keys WHERE tenant = $1 ORDER BY created_at DESC, id"
                ),
                [Arg::Text(tenant.as_str())],
            ),
            None => Statement::new(
                format!("SELECT {KEY_COLUMNS} FROM api_keys ORDER BY created_at DESC, id"),
                [],
            ),
        };
        self.all(&statement, key_of).await
    }

    async fn revoke_key(&self, id: &str, at: DateTime<Utc>) -> MemoryResult<bool> {
        let statement = Statement::new(
            "UPDATE api_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL",
            [Arg::Time(at), Arg::Text(id)],
        );
        Ok(self.run_alone(&statement).await? > 0)
    }

    async fn touch_key(&self, id: &str, at: DateTime<Utc>) -> MemoryResult<()> {
        let statement = Statement::new(
            "UPDATE api_keys SET last_used_at = $1 WHERE id = $2",
            [Arg::Time(at), Arg::Text(id)],
        );
        self.run_alone(&statement).await?;
        Ok(())
    }

    async fn audit(&self, entry: &AuditEntry) -> MemoryResult<()> {
        let statement = Statement::new(
            "INSERT INTO audit_log (at, actor, tenant, action, target, detail) \
             VALUES ($1, $2, $3, $4, $5, $6)",
            [
                Arg::Time(entry.at),
                Arg::Text(&entry.actor),
                Arg::OptionalText(entry.tenant.as_deref()),
                Arg::Text(&entry.action),
                Arg::OptionalText(entry.target.as_deref()),
                Arg::Json(&entry.detail),
            ],
        );
        self.run_alone(&statement).await?;
        Ok(())
    }

    async fn audit_log(
        &self,
        tenant: Option<&TenantId>,
        limit: usize,
    ) -> MemoryResult<Vec<AuditEntry>> {
        let columns = "at, actor, tenant, action, target, detail";
        let statement = match tenant {
            Some(tenant) => Statement::new(
                format!(
                    "SELECT {columns} FROM audit_log WHERE tenant = $1 ORDER BY seq DESC LIMIT $2"
                ),
                [Arg::Text(tenant.as_str()), Arg::Integer(limit as i64)],
            ),
            None => Statement::new(
                format!("SELECT {columns} FROM audit_log ORDER BY seq DESC LIMIT $1"),
                [Arg::Integer(limit as i64)],
            ),
        };
        self.all(&statement, audit_of).await
    }
}

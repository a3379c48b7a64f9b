//! API keys and the audit log as operations (`/v1/admin/keys`, `/v1/admin/audit`,
//! `mnemos keys …`): wire request in, wire answer out. Only admins manage keys; an admin
//! of the default tenant acting for every agent (or the operator) manages every
//! tenant's keys, any other admin only its own tenant's.

use chrono::{DateTime, Utc};
use mnemos_actors::error::{MemoryError, MemoryResult};
use mnemos_actors::model::{AgentId, TenantId};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::auth::keys::{generate, hash_secret, ApiKey, AuditEntry, KeyStore};
use crate::auth::{Caller, Scope, DEFAULT_TENANT};

/// A key to create.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateKeyBody {
    /// What the key is for (shown in lists and the audit log).
    #[serde(default)]
    pub name: Option<String>,
    /// The tenant it acts in (default: the caller's own).
    #[serde(default)]
    pub tenant: Option<String>,
    /// The one agent it acts as, or `*` for every agent of the tenant.
    pub agent: String,
    /// What it may do: any of `read`, `write`, `admin`.
    pub scopes: Vec<String>,
    /// When it stops working (RFC 3339; default: never).
    #[serde(default)]
    pub expires_at: Option<DateTime<Utc>>,
}

/// A key as listed (never its secret).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct KeyView {
    /// Public id (the middle part of the key).
    pub id: String,
    /// What it is for.
    pub name: String,
    /// The tenant it acts in.
    pub tenant: String,
    /// The one agent it acts as, or `*`.
    pub agent: String,
    /// What it may do.
    pub scopes: Vec<String>,
    /// `active`, `revoked` or `expired`.
    pub status: String,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it was last used (recorded at most once a minute).
    pub last_used_at: Option<DateTime<Utc>>,
    /// When it stops working.
    pub expires_at: Option<DateTime<Utc>>,
    /// When it was revoked.
    pub revoked_at: Option<DateTime<Utc>>,
}

impl KeyView {
    /// The view of `key` at `now`.
    fn of(key: ApiKey, now: DateTime<Utc>) -> Self {
        let status = if key.revoked_at.is_some() {
            "revoked"
        } else if key.expires_at.is_some_and(|at| at <= now) {
            "expired"
        } else {
            "active"
        };
        Self {
            id: key.id,
            name: key.name,
            tenant: key.tenant.to_string(),
            agent: key.agent.map_or_else(|| "*".to_string(), |a| a.to_string()),
            scopes: key.scopes.iter().map(|s| s.as_str().to_string()).collect(),
            status: status.to_string(),
            created_at: key.created_at,
            last_used_at: key.last_used_at,
            expires_at: key.expires_at,
            revoked_at: key.revoked_at,
        }
    }
}

/// A created key: the secret, shown this once, and what was stored.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CreatedKeyResponse {
    /// The whole key to send as `Authorization: Bearer <key>`; it cannot be shown again.
    pub secret: String,
    /// The stored key.
    pub key: KeyView,
}

/// Keys, newest first.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct KeysResponse {
    /// The keys.
    pub keys: Vec<KeyView>,
}

/// Which keys or audit entries to list.
#[derive(Debug, Clone, Default, Deserialize, ToSchema, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct AdminListParams {
    /// Only this tenant's (an admin of one tenant always sees only its own).
    #[serde(default)]
    pub tenant: Option<String>,
    /// Most entries (audit log; default 100, at most 1000).
    #[serde(default)]
    pub limit: Option<usize>,
}

/// A revoked key.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RevokedKeyResponse {
    /// Its id.
    pub revoked: String,
}

/// One audit entry on the wire.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AuditView {
    /// When.
    pub at: DateTime<Utc>,
    /// Who: a key id, or `operator`.
    pub actor: String,
    /// In which tenant.
    pub tenant: Option<String>,
    /// `key.create`, `key.revoke`, `erase`, `auth.denied`, `admin.archive`, ...
    pub action: String,
    /// On what: a key id, an agent, a route.
    pub target: Option<String>,
    /// Details.
    #[schema(value_type = Object)]
    pub detail: serde_json::Value,
}

/// Audit entries, newest first.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AuditResponse {
    /// The entries.
    pub entries: Vec<AuditView>,
}

impl From<AuditEntry> for AuditView {
    fn from(e: AuditEntry) -> Self {
        Self {
            at: e.at,
            actor: e.actor,
            tenant: e.tenant,
            action: e.action,
            target: e.target,
            detail: e.detail,
        }
    }
}

/// True when the caller manages every tenant (the operator, or an admin of the default
/// tenant bound to no agent).
fn server_admin(caller: &Caller) -> bool {
    caller.scopes.contains(&Scope::Admin) && caller.tenant.is_none() && caller.agent.is_none()
}

/// The tenant an admin request acts on: the named one (every tenant's admin only),
/// or the caller's own.
fn admin_tenant(caller: &Caller, named: Option<&str>) -> MemoryResult<Option<TenantId>> {
    caller.require(Scope::Admin)?;
    if caller.agent.is_some() {
        return Err(crate::auth::denied(
            "a key bound to one agent cannot manage keys; use an admin key created with --agent '*'",
        ));
    }
    let own = caller
        .tenant
        .clone()
        .unwrap_or_else(|| TenantId::parse(DEFAULT_TENANT).expect("default is a tenant id"));
    match named {
        None => Ok(caller.tenant.is_some().then_some(own)),
        Some(raw) => {
            let asked = TenantId::parse(raw)?;
            if asked != own && !server_admin(caller) {
                return Err(MemoryError {
                    field: Some("tenant".into()),
                    ..crate::auth::denied(format!("this key administers tenant {own} only"))
                });
            }
            Ok(Some(asked))
        }
    }
}

/// Who the audit log names for `caller`.
pub fn actor(caller: &Caller) -> String {
    caller
        .key_id
        .clone()
        .unwrap_or_else(|| "operator".to_string())
}

/// Record `action` on `target` by `caller` (a failure to record is logged, not raised:
/// the action itself has happened).
pub async fn audit(
    store: &dyn KeyStore,
    caller: &Caller,
    action: &str,
    target: Option<String>,
    detail: serde_json::Value,
    now: DateTime<Utc>,
) {
    let entry = AuditEntry {
        at: now,
        actor: actor(caller),
        tenant: caller.tenant.as_ref().map(|t| t.to_string()),
        action: action.to_string(),
        target,
        detail,
    };
    if let Err(error) = store.audit(&entry).await {
        tracing::warn!(%error, action, "audit entry not recorded");
    }
}

/// Create a key; its secret is in the answer and nowhere else.
pub async fn create_key(
    store: &dyn KeyStore,
    caller: &Caller,
    body: CreateKeyBody,
    now: DateTime<Utc>,
) -> MemoryResult<CreatedKeyResponse> {
    let tenant = match admin_tenant(caller, body.tenant.as_deref())? {
        Some(tenant) => tenant,
        None => TenantId::parse(DEFAULT_TENANT).expect("default is a tenant id"),
    };
    let agent = match body.agent.trim() {
        "*" => None,
        raw => Some(AgentId::parse(raw).map_err(|mut e| {
            e.field = Some("agent".into());
            e
        })?),
    };
    let scopes = Scope::parse_list("scopes", &body.scopes.join(","))?;
    if let Some(at) = body.expires_at.filter(|at| *at <= now) {
        return Err(MemoryError::invalid(
            "expires_at",
            format!("expires_at {at} is not in the future"),
        ));
    }
    let name = body.name.unwrap_or_default();
    if name.chars().count() > 200 || name.chars().any(char::is_control) {
        return Err(MemoryError::invalid(
            "name",
            "a key's name is at most 200 printable characters",
        ));
    }
    let (id, secret, shown) = generate();
    let key = ApiKey {
        id: id.clone(),
        name,
        tenant,
        agent,
        scopes,
        secret_hash: hash_secret(&secret),
        created_at: now,
        last_used_at: None,
        expires_at: body.expires_at,
        revoked_at: None,
    };
    store.create_key(&key).await?;
    let view = KeyView::of(key, now);
    audit(
        store,
        caller,
        "key.create",
        Some(id),
        serde_json::json!({
            "tenant": view.tenant, "agent": view.agent, "scopes": view.scopes,
            "expires_at": view.expires_at,
        }),
        now,
    )
    .await;
    Ok(CreatedKeyResponse {
        secret: shown,
        key: view,
    })
}

/// The keys the caller administers, newest first.
pub async fn list_keys(
    store: &dyn KeyStore,
    caller: &Caller,
    params: AdminListParams,
    now: DateTime<Utc>,
) -> MemoryResult<KeysResponse> {
    let tenant = admin_tenant(caller, params.tenant.as_deref())?;
    let keys = store.keys(tenant.as_ref()).await?;
    Ok(KeysResponse {
        keys: keys.into_iter().map(|k| KeyView::of(k, now)).collect(),
    })
}

/// Revoke key `id` (of a tenant the caller administers); it stops working at once in
/// this process and within seconds in any other.
pub async fn revoke_key(
    store: &dyn KeyStore,
    caller: &Caller,
    id: &str,
    now: DateTime<Utc>,
) -> MemoryResult<RevokedKeyResponse> {
    let tenant = admin_tenant(caller, None)?;
    let no_such = || MemoryError {
        field: Some("id".into()),
        ..MemoryError::not_found(format!("no active key {id}"))
    };
    let key = store.key(id).await?.ok_or_else(no_such)?;
    if tenant.as_ref().is_some_and(|t| *t != key.tenant) {
        // Another tenant's key answers exactly as a key that does not exist.
        return Err(no_such());
    }
    if !store.revoke_key(id, now).await? {
        return Err(no_such());
    }
    audit(
        store,
        caller,
        "key.revoke",
        Some(id.to_string()),
        serde_json::json!({ "tenant": key.tenant.to_string() }),
        now,
    )
    .await;
    Ok(RevokedKeyResponse {
        revoked: id.to_string(),
    })
}

/// The latest audit entries the caller may read, newest first.
pub async fn audit_log(
    store: &dyn KeyStore,
    caller: &Caller,
    params: AdminListParams,
) -> MemoryResult<AuditResponse> {
    let tenant = admin_tenant(caller, params.tenant.as_deref())?;
    let limit = params.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(MemoryError::invalid("limit", "limit is 1 to 1000"));
    }
    let entries = store.audit_log(tenant.as_ref(), limit).await?;
    Ok(AuditResponse {
        entries: entries.into_iter().map(Into::into).collect(),
    })
}

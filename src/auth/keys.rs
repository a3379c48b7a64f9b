//! API keys: what is stored (a hash, never the secret), how a presented key is checked
//! (constant-time, cached), and the audit log of key changes, erasures, admin actions
//! and authorization failures.
//!
//! A key reads `mnm_<id>_<secret>`: the id finds the stored key, the secret (64 hex
//! digits, 256 random bits) is compared by SHA-256 in constant time. A key is shown once,
//! when it is created.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use mnemos_actors::error::MemoryResult;
use mnemos_actors::model::{AgentId, TenantId};
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::limits::{Limiter, RateLimits};
use super::{unauthenticated, Budget, Caller, Scope, Surface};

/// The prefix of every mnemos key.
pub const KEY_PREFIX: &str = "mnm";

/// A stored API key (its secret is only its hash).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApiKey {
    /// Public id (the middle part of the key).
    pub id: String,
    /// What it is for, as its creator named it.
    pub name: String,
    /// The tenant it acts in.
    pub tenant: TenantId,
    /// The one agent it acts as (None: every agent of the tenant).
    pub agent: Option<AgentId>,
    /// What it may do.
    pub scopes: Vec<Scope>,
    /// SHA-256 of the secret, hex.
    #[serde(skip)]
    pub secret_hash: String,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it was last used (updated at most once a minute).
    pub last_used_at: Option<DateTime<Utc>>,
    /// When it stops working (None: never).
    pub expires_at: Option<DateTime<Utc>>,
    /// When it was revoked (None: it was not).
    pub revoked_at: Option<DateTime<Utc>>,
}

/// One entry of the audit log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditEntry {
    /// When.
    pub at: DateTime<Utc>,
    /// Who: a key id, or `operator`.
    pub actor: String,
    /// In which tenant (None: the default tenant or every tenant).
    pub tenant: Option<String>,
    /// What: `key.create`, `key.revoke`, `erase`, `auth.denied`, `admin.*`.
    pub action: String,
    /// On what (a key id, an agent, a route).
    pub target: Option<String>,
    /// Details as JSON.
    pub detail: serde_json::Value,
}

/// Where keys and the audit log are kept (the system of record's `api_keys` and
/// `audit_log` tables).
#[async_trait]
pub trait KeyStore: Send + Sync + 'static {
    /// Store a new key.
    async fn create_key(&self, key: &ApiKey) -> MemoryResult<()>;
    /// The key with this id.
    async fn key(&self, id: &str) -> MemoryResult<Option<ApiKey>>;
    /// Every key (of one tenant), newest first.
    async fn keys(&self, tenant: Option<&TenantId>) -> MemoryResult<Vec<ApiKey>>;
    /// Revoke a key at `at`; false when there is no such key (or it was revoked already).
    async fn revoke_key(&self, id: &str, at: DateTime<Utc>) -> MemoryResult<bool>;
    /// Record that the key was used at `at`.
    async fn touch_key(&self, id: &str, at: DateTime<Utc>) -> MemoryResult<()>;
    /// Append to the audit log.
    async fn audit(&self, entry: &AuditEntry) -> MemoryResult<()>;
    /// The latest audit entries (of one tenant), newest first.
    async fn audit_log(
        &self,
        tenant: Option<&TenantId>,
        limit: usize,
    ) -> MemoryResult<Vec<AuditEntry>>;
}

/// SHA-256 of a secret, hex.
pub fn hash_secret(secret: &str) -> String {
    Sha256::digest(secret.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Equal strings, compared in time that depends only on their length.
fn constant_time_eq(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |diff, (x, y)| diff | (x ^ y))
            == 0
}

/// A fresh key: its id and the whole secret to show once (`mnm_<id>_<secret>`).
pub fn generate() -> (String, String, String) {
    let id = uuid::Uuid::new_v4().simple().to_string()[..12].to_string();
    let secret = format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    );
    let shown = format!("{KEY_PREFIX}_{id}_{secret}");
    (id, secret, shown)
}

/// The (id, secret) of a presented key, or why it is no mnemos key.
fn split_key(token: &str) -> Option<(&str, &str)> {
    let rest = token.strip_prefix(KEY_PREFIX)?.strip_prefix('_')?;
    let (id, secret) = rest.split_once('_')?;
    let hex = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit());
    (hex(id, 12) && hex(secret, 64)).then_some((id, secret))
}

/// How long a verified key is trusted without reading it again (a revocation in another
/// process takes effect within this; in this process at once).
const CACHE_TTL: Duration = Duration::from_secs(5);

/// How often a key's last use is written.
const TOUCH_EVERY: chrono::Duration = chrono::Duration::minutes(1);

/// Checks presented keys against the store, caching what it read.
pub struct Authenticator {
    /// Where keys are.
    store: Arc<dyn KeyStore>,
    /// Keys read lately, by id, with when they were read.
    cache: Mutex<HashMap<String, (ApiKey, Instant)>>,
    /// The request rate and write budgets of every key.
    limiter: Arc<Limiter>,
}

impl Authenticator {
    /// Check keys kept in `store`, each limited by `limits`.
    pub fn new(store: Arc<dyn KeyStore>, limits: RateLimits) -> Self {
        Self {
            store,
            cache: Mutex::new(HashMap::new()),
            limiter: Arc::new(Limiter::new(limits)),
        }
    }

    /// The store of keys.
    pub fn store(&self) -> &Arc<dyn KeyStore> {
        &self.store
    }

    /// Forget every cached key (after a tenant's keys were revoked here).
    pub fn forget_all(&self) {
        self.cache.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// Forget what is cached of key `id` (after it was revoked here).
    pub fn forget(&self, id: &str) {
        self.cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
    }

    /// The caller an `Authorization` header value makes, or 401 saying what is wrong
    /// (missing, malformed, unknown, revoked or expired).
    pub async fn authenticate(
        &self,
        header: Option<&str>,
        surface: Surface,
        now: DateTime<Utc>,
    ) -> MemoryResult<Caller> {
        let Some(header) = header else {
            return Err(unauthenticated(
                "this server needs an API key: send Authorization: Bearer <key> (mnemos keys create makes one)",
            ));
        };
        let token = header
            .strip_prefix("Bearer ")
            .or_else(|| header.strip_prefix("bearer "))
            .map(str::trim)
            .ok_or_else(|| unauthenticated("the Authorization header must read: Bearer <key>"))?;
        let (id, secret) = split_key(token).ok_or_else(|| {
            unauthenticated("that is not a mnemos key (they read mnm_<12 hex>_<64 hex>)")
        })?;
        let key = self.read(id).await?.ok_or_else(|| {
            unauthenticated(format!("no key {id} exists (it may have been deleted)"))
        })?;
        if !constant_time_eq(&hash_secret(secret), &key.secret_hash) {
            return Err(unauthenticated(format!("the secret of key {id} is wrong")));
        }
        if let Some(at) = key.revoked_at {
            return Err(unauthenticated(format!("key {id} was revoked at {at}")));
        }
        if let Some(at) = key.expires_at.filter(|at| *at <= now) {
            return Err(unauthenticated(format!(
                "key {id} expired at {at}; create a new one"
            )));
        }
        if key.last_used_at.is_none_or(|at| now - at >= TOUCH_EVERY) {
            self.touch(&key, now);
        }
        self.limiter.request(&key.id, Instant::now())?;
        Ok(Caller {
            key_id: Some(key.id.clone()),
            tenant: Caller::tenant_of(&key.tenant),
            agent: key.agent.clone(),
            scopes: key.scopes.clone(),
            surface,
            budget: Budget(Some(self.limiter.clone())),
            request_id: None,
        })
    }

    /// Key `id`, from the cache while it is fresh.
    async fn read(&self, id: &str) -> MemoryResult<Option<ApiKey>> {
        if let Some((key, read_at)) = self.cache.lock().unwrap_or_else(|e| e.into_inner()).get(id) {
            if read_at.elapsed() < CACHE_TTL {
                return Ok(Some(key.clone()));
            }
        }
        let key = self.store.key(id).await?;
        if let Some(key) = &key {
            self.cache
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(id.to_string(), (key.clone(), Instant::now()));
        }
        Ok(key)
    }

    /// Record the key's use in the background (the request does not wait for it).
    fn touch(&self, key: &ApiKey, now: DateTime<Utc>) {
        if let Some((cached, _)) = self
            .cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(&key.id)
        {
            cached.last_used_at = Some(now);
        }
        let (store, id) = (self.store.clone(), key.id.clone());
        tokio::spawn(async move {
            if let Err(error) = store.touch_key(&id, now).await {
                tracing::debug!(%error, key = %id, "key use not recorded");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_reads_mnm_id_secret_and_only_its_hash_is_kept() {
        let (id, secret, shown) = generate();
        assert_eq!(split_key(&shown), Some((id.as_str(), secret.as_str())));
        assert_eq!(hash_secret(&secret).len(), 64);
        assert_ne!(hash_secret(&secret), secret);
        assert!(split_key("mnm_short_secret").is_none());
        assert!(split_key(&shown.replace("mnm_", "sk_")).is_none());
        assert!(constant_time_eq("abc", "abc"));
        assert!(!constant_time_eq("abc", "abd"));
        assert!(!constant_time_eq("abc", "abcd"));
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Only the exact key shape is a key; anything else is refused without a panic.
        #[test]
        fn only_the_key_shape_splits(token in any::<String>()) {
            if let Some((id, secret)) = split_key(&token) {
                prop_assert_eq!(&token, &format!("{KEY_PREFIX}_{id}_{secret}"));
            }
            let _ = Scope::parse_list("scopes", &token.chars().take(40).collect::<String>());
        }
    }
}

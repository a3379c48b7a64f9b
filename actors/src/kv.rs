//! KV namespaces: key-value stores named by their callers and shared by every node
//! (agent) of a multi-agent orchestrator that names the same namespace. Each namespace
//! is an ordered LRU bounded by `max_entries` ([`crate::policy::lru`]).

use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::{MemoryError, MemoryResult};
use crate::model::{validate_identifier, AgentId};

/// Validated KV namespace name (same alphabet as agent ids). Namespaces are global:
/// every node naming the same namespace shares it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct NamespaceName(String);

impl NamespaceName {
    /// Validate and wrap a namespace name as a client names it; the error names the
    /// `namespace` field.
    pub fn parse(raw: &str) -> MemoryResult<Self> {
        validate_identifier("namespace", raw)?;
        Ok(Self(raw.to_string()))
    }
    /// The namespace `local` of `tenant` as stored (`tenant/local`; `local` in the
    /// default tenant): KV namespaces are shared by the nodes of one tenant only.
    pub fn qualified(tenant: Option<&crate::model::TenantId>, local: &NamespaceName) -> Self {
        match tenant {
            Some(tenant) => Self(format!(
                "{tenant}{}{}",
                crate::model::TENANT_SEPARATOR,
                local.0
            )),
            None => local.clone(),
        }
    }
    /// A namespace name as stored: `local` or `tenant/local`, each part validated.
    pub fn stored(raw: &str) -> MemoryResult<Self> {
        match raw.split_once(crate::model::TENANT_SEPARATOR) {
            Some((tenant, local)) => {
                validate_identifier("tenant", tenant)?;
                validate_identifier("namespace", local)?;
            }
            None => validate_identifier("namespace", raw)?,
        }
        Ok(Self(raw.to_string()))
    }
    /// The name within its tenant, as clients name it.
    pub fn local(&self) -> &str {
        self.0
            .split_once(crate::model::TENANT_SEPARATOR)
            .map_or(self.0.as_str(), |(_, local)| local)
    }
    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for NamespaceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One entry of a KV namespace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KvEntry {
    /// Namespace it lives in.
    pub namespace: NamespaceName,
    /// Its key (unique in the namespace).
    pub key: String,
    /// Caller's JSON value, stored and returned unchanged.
    pub value: serde_json::Value,
    /// Caller's labels (for `list_by_tag`).
    pub tags: Vec<String>,
    /// The node (agent) that wrote the current value.
    pub written_by: AgentId,
    /// When the key was first written.
    pub created_at: DateTime<Utc>,
    /// When the value was last written.
    pub updated_at: DateTime<Utc>,
    /// When the entry stops being visible (None: never).
    pub expires_at: Option<DateTime<Utc>>,
    /// Position in the namespace's use order (higher: used more recently); a get or put moves it to the front.
    pub last_used: u64,
}

impl KvEntry {
    /// True when the entry's TTL has passed at `now`.
    pub fn is_expired(&self, now: DateTime<Utc>) -> bool {
        self.expires_at.is_some_and(|at| at <= now)
    }
}

/// Counters and bounds of one namespace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NamespaceStats {
    /// The namespace.
    pub namespace: NamespaceName,
    /// Live (unexpired) entries.
    pub entries: usize,
    /// Bound: a put beyond it evicts the least recently used entry.
    pub max_entries: usize,
    /// Gets that found a live entry.
    pub hits: u64,
    /// Gets that found nothing (or an expired entry).
    pub misses: u64,
    /// Entries evicted to stay within `max_entries`.
    pub evictions: u64,
    /// Puts accepted.
    pub puts: u64,
    /// When the namespace was created.
    pub created_at: DateTime<Utc>,
}

/// A put, as handed to a [`crate::store::kv::KvStore`].
#[derive(Debug, Clone)]
pub struct KvPut {
    /// Target namespace (created with `default_max_entries` when it does not exist).
    pub namespace: NamespaceName,
    /// Key.
    pub key: String,
    /// Value.
    pub value: serde_json::Value,
    /// Labels.
    pub tags: Vec<String>,
    /// Writing node.
    pub written_by: AgentId,
    /// Expiry (None: never).
    pub expires_at: Option<DateTime<Utc>>,
    /// Bound of a namespace this put creates.
    pub default_max_entries: usize,
    /// The put's time.
    pub now: DateTime<Utc>,
}

/// What a put did.
#[derive(Debug, Clone, PartialEq)]
pub struct KvPutOutcome {
    /// The stored entry.
    pub entry: KvEntry,
    /// True when the key was new (or had expired).
    pub created: bool,
    /// Keys evicted (least recently used first) to stay within `max_entries`.
    pub evicted: Vec<String>,
}

/// One search hit.
#[derive(Debug, Clone, PartialEq)]
pub struct KvHit {
    /// The entry.
    pub entry: KvEntry,
    /// Relevance (higher is better).
    pub score: f64,
}

/// The error of an operation on a namespace nobody created yet.
pub fn no_such_namespace(namespace: &NamespaceName) -> MemoryError {
    MemoryError {
        field: Some("namespace".into()),
        ..MemoryError::not_found(format!(
            "namespace {namespace} does not exist; a put creates it, or PUT /v1/namespaces/{namespace} with max_entries"
        ))
    }
}

/// The error of a get or delete of a key the namespace does not hold.
pub fn no_such_key(namespace: &NamespaceName, key: &str) -> MemoryError {
    MemoryError {
        field: Some("key".into()),
        ..MemoryError::not_found(format!(
            "namespace {namespace} holds no entry {key:?} (never written, deleted, expired or evicted)"
        ))
    }
}

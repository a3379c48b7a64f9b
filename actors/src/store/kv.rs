//! The store of KV namespaces ([`KvStore`]) and its in-memory implementation. The
//! service's SQL stores implement the same trait durably.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::error::{MemoryError, MemoryResult};
use crate::kv::{
    no_such_key, no_such_namespace, KvEntry, KvPut, KvPutOutcome, NamespaceName, NamespaceStats,
};
use crate::policy::lru::{rank, LruNamespace};

/// KV namespaces shared by the nodes that name them.
///
/// Every write is atomic: after a put, the namespace never holds more than
/// `max_entries` live entries, however many nodes write at once, and no acknowledged
/// put is lost except by a later eviction, delete or overwrite.
#[async_trait]
pub trait KvStore: Send + Sync + 'static {
    /// Short backend name for health and logs (`sqlite`, `postgres`, `memory`).
    fn backend_name(&self) -> &'static str;

    /// Create a namespace bounded by `max_entries`, or change the bound of an existing
    /// one (shrinking evicts least recently used entries at once); returns its stats
    /// and the evicted keys.
    async fn kv_configure(
        &self,
        namespace: &NamespaceName,
        max_entries: usize,
        now: DateTime<Utc>,
    ) -> MemoryResult<(NamespaceStats, Vec<String>)>;
    /// Write an entry (creating the namespace if needed) and evict down to the bound.
    async fn kv_put(&self, put: &KvPut) -> MemoryResult<KvPutOutcome>;
    /// Read an entry and mark it used; `not_found` for a missing namespace or key (a miss).
    async fn kv_get(
        &self,
        namespace: &NamespaceName,
        key: &str,
        now: DateTime<Utc>,
    ) -> MemoryResult<KvEntry>;
    /// Remove an entry; `not_found` for a missing namespace or key.
    async fn kv_delete(
        &self,
        namespace: &NamespaceName,
        key: &str,
        now: DateTime<Utc>,
    ) -> MemoryResult<()>;
    /// Live entries matching `query` ([`crate::policy::lru::rank`]), best first; no use is counted.
    async fn kv_search(
        &self,
        namespace: &NamespaceName,
        query: &str,
        limit: usize,
        now: DateTime<Utc>,
    ) -> MemoryResult<Vec<(KvEntry, f64)>>;
    /// Live entries carrying `tag` (every live entry when None), most recently used first; no use is counted.
    async fn kv_list(
        &self,
        namespace: &NamespaceName,
        tag: Option<&str>,
        limit: usize,
        now: DateTime<Utc>,
    ) -> MemoryResult<Vec<KvEntry>>;
    /// Counters and bounds of a namespace; `not_found` when it does not exist.
    async fn kv_stats(
        &self,
        namespace: &NamespaceName,
        now: DateTime<Utc>,
    ) -> MemoryResult<NamespaceStats>;
    /// Every namespace, by name (as stored: tenant-qualified).
    async fn kv_namespaces(&self) -> MemoryResult<Vec<NamespaceName>>;
}

/// [`KvStore`] in memory (tests, file-less library use). One lock makes every
/// operation atomic.
#[derive(Default)]
pub struct InMemoryKvStore {
    /// Namespaces by name, behind one lock.
    namespaces: Mutex<HashMap<NamespaceName, LruNamespace>>,
}

impl InMemoryKvStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn with<T>(
        &self,
        f: impl FnOnce(&mut HashMap<NamespaceName, LruNamespace>) -> MemoryResult<T>,
    ) -> MemoryResult<T> {
        let mut namespaces = self
            .namespaces
            .lock()
            .map_err(|_| MemoryError::internal("kv store lock poisoned"))?;
        f(&mut namespaces)
    }
}

fn namespace_mut<'a>(
    namespaces: &'a mut HashMap<NamespaceName, LruNamespace>,
    namespace: &NamespaceName,
) -> MemoryResult<&'a mut LruNamespace> {
    namespaces
        .get_mut(namespace)
        .ok_or_else(|| no_such_namespace(namespace))
}

#[async_trait]
impl KvStore for InMemoryKvStore {
    fn backend_name(&self) -> &'static str {
        "memory"
    }

    async fn kv_configure(
        &self,
        namespace: &NamespaceName,
        max_entries: usize,
        now: DateTime<Utc>,
    ) -> MemoryResult<(NamespaceStats, Vec<String>)> {
        self.with(|state| {
            let ns = state
                .entry(namespace.clone())
                .or_insert_with(|| LruNamespace::new(namespace.clone(), max_entries, now));
            let evicted = ns.set_max_entries(max_entries, now);
            Ok((ns.stats(now), evicted))
        })
    }

    async fn kv_put(&self, put: &KvPut) -> MemoryResult<KvPutOutcome> {
        self.with(|state| {
            let ns = state.entry(put.namespace.clone()).or_insert_with(|| {
                LruNamespace::new(put.namespace.clone(), put.default_max_entries, put.now)
            });
            Ok(ns.put(put))
        })
    }

    async fn kv_get(
        &self,
        namespace: &NamespaceName,
        key: &str,
        now: DateTime<Utc>,
    ) -> MemoryResult<KvEntry> {
        self.with(|state| {
            namespace_mut(state, namespace)?
                .get(key, now)
                .ok_or_else(|| no_such_key(namespace, key))
        })
    }

    async fn kv_delete(
        &self,
        namespace: &NamespaceName,
        key: &str,
        now: DateTime<Utc>,
    ) -> MemoryResult<()> {
        self.with(|state| {
            if namespace_mut(state, namespace)?.delete(key, now) {
                Ok(())
            } else {
                Err(no_such_key(namespace, key))
            }
        })
    }

    async fn kv_search(
        &self,
        namespace: &NamespaceName,
        query: &str,
        limit: usize,
        now: DateTime<Utc>,
    ) -> MemoryResult<Vec<(KvEntry, f64)>> {
        self.with(|state| {
            let live = namespace_mut(state, namespace)?.live(now);
            Ok(rank(query, live, limit))
        })
    }

    async fn kv_list(
        &self,
        namespace: &NamespaceName,
        tag: Option<&str>,
        limit: usize,
        now: DateTime<Utc>,
    ) -> MemoryResult<Vec<KvEntry>> {
        self.with(|state| {
            Ok(namespace_mut(state, namespace)?
                .live(now)
                .into_iter()
                .filter(|e| tag.is_none_or(|t| e.tags.iter().any(|x| x == t)))
                .take(limit)
                .collect())
        })
    }

    async fn kv_stats(
        &self,
        namespace: &NamespaceName,
        now: DateTime<Utc>,
    ) -> MemoryResult<NamespaceStats> {
        self.with(|state| Ok(namespace_mut(state, namespace)?.stats(now)))
    }

    async fn kv_namespaces(&self) -> MemoryResult<Vec<NamespaceName>> {
        self.with(|state| {
            let mut names: Vec<NamespaceName> = state.keys().cloned().collect();
            names.sort();
            Ok(names)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::AgentId;
    use crate::policy::lru::simple_put;
    use serde_json::json;

    #[tokio::test]
    async fn kv_store_shares_a_namespace_between_nodes_and_bounds_it() {
        let store = InMemoryKvStore::new();
        let ns = NamespaceName::parse("shared").unwrap();
        let now = Utc::now();
        store.kv_configure(&ns, 2, now).await.unwrap();
        let (a, b) = (AgentId::parse("a").unwrap(), AgentId::parse("b").unwrap());
        store
            .kv_put(&simple_put(&ns, &a, "x", json!(1), now))
            .await
            .unwrap();
        store
            .kv_put(&simple_put(&ns, &b, "y", json!(2), now))
            .await
            .unwrap();
        assert_eq!(store.kv_get(&ns, "x", now).await.unwrap().written_by, a);
        let outcome = store
            .kv_put(&simple_put(&ns, &b, "z", json!(3), now))
            .await
            .unwrap();
        assert_eq!(outcome.evicted, vec!["y".to_string()]);
        let missing = NamespaceName::parse("nope").unwrap();
        assert_eq!(
            store.kv_stats(&missing, now).await.unwrap_err().field,
            Some("namespace".into())
        );
        assert_eq!(
            store.kv_get(&ns, "y", now).await.unwrap_err().field,
            Some("key".into())
        );
    }
}

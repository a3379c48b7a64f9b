//! [`KvStore`] on either SQL database: KV namespaces shared by the nodes of multi-agent
//! orchestrators, bounded by a least-recently-used order that survives restarts.
//!
//! Every KV write (put, get — which moves the entry to the front of the use order —,
//! delete, configure) is one write transaction: the namespace's `clock` hands out the
//! use number, and eviction down to `max_entries` happens in the same transaction as
//! the put, so concurrent puts from any number of nodes, processes or replicas never
//! leave the namespace over its bound and never lose a write.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use mnemos_actors::error::MemoryResult;
use mnemos_actors::kv::{
    no_such_key, no_such_namespace, KvEntry, KvPut, KvPutOutcome, NamespaceName, NamespaceStats,
};
use mnemos_actors::policy::lru::{excess, query_terms, rank};
use mnemos_actors::store::kv::KvStore;

use super::dialect::{commit, one_row, row, rows, run, Dialect, SqlStore};
use super::rows::{self as map, Columns};
use super::sql::{self, Arg, Statement};

/// Most query terms used to pre-select search candidates in SQL.
const MAX_PREFILTER_TERMS: usize = 32;

/// The namespace's bound, or `not_found`.
async fn max_entries_of<D: Dialect>(
    conn: &mut D::Connection,
    namespace: &NamespaceName,
) -> MemoryResult<usize> {
    let statement = Statement::new(sql::NAMESPACE_BOUND, [Arg::Text(namespace.as_str())]);
    match row::<D>(conn, &statement).await? {
        Some(row) => Ok(row.integer("max_entries")?.max(1) as usize),
        None => Err(no_such_namespace(namespace)),
    }
}

/// Drop the namespace's expired entries (not evictions).
async fn purge_expired<D: Dialect>(
    conn: &mut D::Connection,
    namespace: &NamespaceName,
    now: DateTime<Utc>,
) -> MemoryResult<()> {
    let statement = Statement::new(
        sql::PURGE_EXPIRED,
        [Arg::Text(namespace.as_str()), Arg::Time(now)],
    );
    run::<D>(conn, &statement).await?;
    Ok(())
}

/// Evict least recently used entries until at most `max_entries` remain; returns their
/// keys, oldest first.
async fn evict<D: Dialect>(
    conn: &mut D::Connection,
    namespace: &NamespaceName,
    max_entries: usize,
) -> MemoryResult<Vec<String>> {
    let name = Arg::Text(namespace.as_str());
    let count = Statement::new(sql::COUNT_ENTRIES, [name.clone()]);
    let count = one_row::<D>(conn, &count).await?.integer("entries")?;
    let surplus = excess(count.max(0) as usize, max_entries);
    if surplus == 0 {
        return Ok(Vec::new());
    }
    let delete = Statement::new(sql::EVICT, [name.clone(), Arg::Integer(surplus as i64)]);
    let mut evicted = rows::<D>(conn, &delete)
        .await?
        .iter()
        .map(|row| Ok((row.integer("last_used")?, row.text("key")?)))
        .collect::<MemoryResult<Vec<(i64, String)>>>()?;
    evicted.sort();
    let counted = Statement::new(
        sql::COUNT_EVICTIONS,
        [Arg::Integer(evicted.len() as i64), name],
    );
    run::<D>(conn, &counted).await?;
    Ok(evicted.into_iter().map(|(_, key)| key).collect())
}

/// The namespace's counters and live entries at `now`, or `not_found`.
async fn stats_of<D: Dialect>(
    conn: &mut D::Connection,
    namespace: &NamespaceName,
    now: DateTime<Utc>,
) -> MemoryResult<NamespaceStats> {
    let statement = Statement::new(
        sql::NAMESPACE_STATS,
        [Arg::Time(now), Arg::Text(namespace.as_str())],
    );
    let row = row::<D>(conn, &statement)
        .await?
        .ok_or_else(|| no_such_namespace(namespace))?;
    map::namespace_stats(&row, namespace)
}

/// Take the next use number of a namespace, bumping `counter` (`hits` or `puts`) with
/// it; returns it with the namespace's bound.
async fn next_use<D: Dialect>(
    conn: &mut D::Connection,
    namespace: &NamespaceName,
    counter: &'static str,
    now: DateTime<Utc>,
) -> MemoryResult<(u64, usize)> {
    let statement = Statement::new(
        sql::next_use(counter),
        [Arg::Time(now), Arg::Text(namespace.as_str())],
    );
    let row = row::<D>(conn, &statement)
        .await?
        .ok_or_else(|| no_such_namespace(namespace))?;
    Ok((
        row.integer("clock")?.max(0) as u64,
        row.integer("max_entries")?.max(1) as usize,
    ))
}

/// Write an entry with its tags, keeping its creation time when it exists; returns that
/// creation time and whether the entry is new.
async fn write_entry<D: Dialect>(
    conn: &mut D::Connection,
    put: &KvPut,
    last_used: u64,
) -> MemoryResult<(DateTime<Utc>, bool)> {
    let key = [Arg::Text(put.namespace.as_str()), Arg::Text(&put.key)];
    let existing = row::<D>(conn, &Statement::new(sql::ENTRY_CREATED, key.clone())).await?;
    let created_at = match &existing {
        Some(row) => row.time("created_at")?,
        None => put.now,
    };
    let entry = Statement::new(
        sql::PUT_ENTRY,
        [
            Arg::Text(put.namespace.as_str()),
            Arg::Text(&put.key),
            Arg::Json(&put.value),
            Arg::Tags(&put.tags),
            Arg::Text(put.written_by.as_str()),
            Arg::Time(created_at),
            Arg::Time(put.now),
            Arg::OptionalTime(put.expires_at),
            Arg::Integer(last_used as i64),
        ],
    );
    run::<D>(conn, &entry).await?;
    run::<D>(conn, &Statement::new(sql::DELETE_ENTRY_TAGS, key)).await?;
    let mut distinct = put.tags.clone();
    distinct.sort();
    distinct.dedup();
    if !distinct.is_empty() {
        let mut tags = Statement::new(sql::INSERT_ENTRY_TAGS, []);
        tags.values(&distinct, |tag| {
            [
                Arg::Text(put.namespace.as_str()),
                Arg::Text(&put.key),
                Arg::Text(tag),
            ]
        });
        run::<D>(conn, &tags).await?;
    }
    Ok((created_at, existing.is_none()))
}

#[async_trait]
impl<D: Dialect> KvStore for SqlStore<D> {
    fn backend_name(&self) -> &'static str {
        D::STORE_NAME
    }

    async fn kv_configure(
        &self,
        namespace: &NamespaceName,
        max_entries: usize,
        now: DateTime<Utc>,
    ) -> MemoryResult<(NamespaceStats, Vec<String>)> {
        let mut tx = self.write_transaction().await?;
        let configure = Statement::new(
            sql::CONFIGURE_NAMESPACE,
            [
                Arg::Text(namespace.as_str()),
                Arg::Integer(max_entries.max(1) as i64),
                Arg::Time(now),
            ],
        );
        run::<D>(&mut tx, &configure).await?;
        purge_expired::<D>(&mut tx, namespace, now).await?;
        let evicted = evict::<D>(&mut tx, namespace, max_entries.max(1)).await?;
        let stats = stats_of::<D>(&mut tx, namespace, now).await?;
        commit(tx).await?;
        Ok((stats, evicted))
    }

    async fn kv_put(&self, put: &KvPut) -> MemoryResult<KvPutOutcome> {
        let mut tx = self.write_transaction().await?;
        let ensure = Statement::new(
            sql::ENSURE_NAMESPACE,
            [
                Arg::Text(put.namespace.as_str()),
                Arg::Integer(put.default_max_entries.max(1) as i64),
                Arg::Time(put.now),
            ],
        );
        run::<D>(&mut tx, &ensure).await?;
        purge_expired::<D>(&mut tx, &put.namespace, put.now).await?;
        let (last_used, max_entries) =
            next_use::<D>(&mut tx, &put.namespace, "puts", put.now).await?;
        let (created_at, created) = write_entry::<D>(&mut tx, put, last_used).await?;
        let evicted = evict::<D>(&mut tx, &put.namespace, max_entries).await?;
        commit(tx).await?;
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
            created,
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
        max_entries_of::<D>(&mut tx, namespace).await?;
        let entry_key = [Arg::Text(namespace.as_str()), Arg::Text(key)];
        let found = row::<D>(&mut tx, &Statement::new(sql::ENTRY, entry_key.clone()))
            .await?
            .as_ref()
            .map(map::kv_entry)
            .transpose()?;
        match found {
            Some(mut entry) if !entry.is_expired(now) => {
                let (last_used, _) = next_use::<D>(&mut tx, namespace, "hits", now).await?;
                let used = Statement::new(
                    sql::USE_ENTRY,
                    [
                        Arg::Integer(last_used as i64),
                        Arg::Text(namespace.as_str()),
                        Arg::Text(key),
                    ],
                );
                run::<D>(&mut tx, &used).await?;
                commit(tx).await?;
                entry.last_used = last_used;
                Ok(entry)
            }
            expired_or_missing => {
                if expired_or_missing.is_some() {
                    run::<D>(&mut tx, &Statement::new(sql::DELETE_ENTRY, entry_key)).await?;
                }
                let miss = Statement::new(sql::COUNT_MISS, [Arg::Text(namespace.as_str())]);
                run::<D>(&mut tx, &miss).await?;
                commit(tx).await?;
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
        max_entries_of::<D>(&mut tx, namespace).await?;
        let take = Statement::new(
            sql::TAKE_ENTRY,
            [Arg::Text(namespace.as_str()), Arg::Text(key)],
        );
        let deleted = row::<D>(&mut tx, &take).await?;
        commit(tx).await?;
        match deleted {
            Some(row) => {
                let expired = match row.optional_time("expires_at")? {
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
        let mut conn = self.connection().await?;
        max_entries_of::<D>(&mut conn, namespace).await?;
        let terms = query_terms(query);
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        // Candidates: live entries whose key, tags or value contain a query term; ranked
        // in Rust. SQLite's lower() folds ASCII only, so a query with a non-ASCII word
        // reads every live entry of the namespace instead (it is bounded by max_entries).
        let mut statement = Statement::new(
            sql::LIVE_ENTRIES,
            [Arg::Text(namespace.as_str()), Arg::Time(now)],
        );
        if terms.iter().all(|t| t.is_ascii()) {
            statement.push(" AND (");
            for (i, term) in terms.iter().take(MAX_PREFILTER_TERMS).enumerate() {
                if i > 0 {
                    statement.push(" OR ");
                }
                statement
                    .push(D::POSITION)
                    .push(
                        "(lower(key || ' ' || CAST(tags AS text) || ' ' || CAST(value AS text)), ",
                    )
                    .bind(Arg::Text(term))
                    .push(") > 0");
            }
            statement.push(")");
        }
        let entries = rows::<D>(&mut conn, &statement)
            .await?
            .iter()
            .map(map::kv_entry)
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
        let mut conn = self.connection().await?;
        max_entries_of::<D>(&mut conn, namespace).await?;
        let mut statement = Statement::new(
            sql::LIVE_ENTRIES,
            [Arg::Text(namespace.as_str()), Arg::Time(now)],
        );
        if let Some(tag) = tag {
            statement
                .push(" AND key IN (SELECT key FROM kv_entry_tags WHERE namespace = $1 AND tag = ")
                .bind(Arg::Text(tag))
                .push(")");
        }
        statement
            .push(" ORDER BY last_used DESC LIMIT ")
            .bind(Arg::Integer(limit as i64));
        rows::<D>(&mut conn, &statement)
            .await?
            .iter()
            .map(map::kv_entry)
            .collect()
    }

    async fn kv_stats(
        &self,
        namespace: &NamespaceName,
        now: DateTime<Utc>,
    ) -> MemoryResult<NamespaceStats> {
        let mut conn = self.connection().await?;
        stats_of::<D>(&mut conn, namespace, now).await
    }

    async fn kv_namespaces(&self) -> MemoryResult<Vec<NamespaceName>> {
        let rows = self
            .rows(&Statement::new(
                "SELECT name FROM kv_namespaces ORDER BY name",
                [],
            ))
            .await?;
        rows.iter()
            .map(|row| NamespaceName::stored(&row.text("name")?))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sqlite::SqliteStore;
    use mnemos_actors::model::AgentId;
    use mnemos_actors::policy::lru::simple_put;
    use serde_json::json;

    async fn store() -> (SqliteStore, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("kv.db")).await.unwrap();
        (store, dir)
    }

    #[tokio::test]
    async fn kv_sqlite_evicts_in_use_order_and_keeps_it_across_reopen() {
        let (store, dir) = store().await;
        let ns = NamespaceName::parse("team").unwrap();
        let agent = AgentId::parse("n1").unwrap();
        let now = Utc::now();
        store.kv_configure(&ns, 3, now).await.unwrap();
        for key in ["a", "b", "c"] {
            store
                .kv_put(&simple_put(&ns, &agent, key, json!(key), now))
                .await
                .unwrap();
        }
        store.kv_get(&ns, "a", now).await.unwrap();
        store.close().await;
        let store = SqliteStore::open(&dir.path().join("kv.db")).await.unwrap();
        let outcome = store
            .kv_put(&simple_put(&ns, &agent, "d", json!(4), now))
            .await
            .unwrap();
        assert_eq!(outcome.evicted, vec!["b".to_string()]);
        let keys: Vec<String> = store
            .kv_list(&ns, None, 10, now)
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.key)
            .collect();
        assert_eq!(keys, vec!["d", "a", "c"]);
        let stats = store.kv_stats(&ns, now).await.unwrap();
        assert_eq!(
            (stats.entries, stats.hits, stats.evictions, stats.puts),
            (3, 1, 1, 4)
        );
        let mut tagged = simple_put(&ns, &agent, "t", json!({"note": "deploy friday"}), now);
        tagged.tags = vec!["plan".into()];
        store.kv_put(&tagged).await.unwrap();
        let listed = store.kv_list(&ns, Some("plan"), 10, now).await.unwrap();
        assert_eq!(listed.len(), 1);
        let found = store.kv_search(&ns, "deploy", 10, now).await.unwrap();
        assert_eq!(found[0].0.key, "t");
        let accented = simple_put(&ns, &agent, "u", json!("École du Louvre"), now);
        store.kv_put(&accented).await.unwrap();
        let found = store.kv_search(&ns, "école", 10, now).await.unwrap();
        assert_eq!(found[0].0.key, "u");
        assert!(store.kv_get(&ns, "zzz", now).await.is_err());
        assert_eq!(store.kv_stats(&ns, now).await.unwrap().misses, 1);
    }
}

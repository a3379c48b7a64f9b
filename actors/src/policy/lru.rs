//! The ordered LRU of a KV namespace, and the ranking of KV search.
//!
//! Use order is a per-namespace sequence: every get or put of an entry takes the next
//! number (`last_used`), and when a put leaves more than `max_entries` live entries the
//! entries with the lowest numbers go first. Expired entries are dropped before
//! anything live is evicted, and are not counted. [`LruNamespace`] is that state
//! machine in memory (the in-memory store); the SQLite store keeps the same numbers
//! in its rows and uses [`excess`] and [`score`].

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};

use crate::kv::{KvEntry, KvPut, KvPutOutcome, NamespaceName, NamespaceStats};
use crate::model::AgentId;

/// How many entries must go so that `len` entries fit in `max_entries`.
pub fn excess(len: usize, max_entries: usize) -> usize {
    len.saturating_sub(max_entries)
}

/// The text a search matches: the entry's key, its tags, and every string and object
/// key inside its JSON value.
fn value_text(value: &serde_json::Value, out: &mut String) {
    match value {
        serde_json::Value::String(s) => {
            out.push_str(s);
            out.push(' ');
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| value_text(v, out)),
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                out.push_str(k);
                out.push(' ');
                value_text(v, out);
            }
        }
        other => {
            out.push_str(&other.to_string());
            out.push(' ');
        }
    }
}

/// Lower-cased words (letters and digits) of a text.
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// The query words a search looks for (lower-cased, stop-words kept when nothing else is left).
pub fn query_terms(query: &str) -> Vec<String> {
    let all = words(query);
    let meaningful: Vec<String> = all
        .iter()
        .filter(|w| !crate::text::is_stopword(w))
        .cloned()
        .collect();
    let mut terms = if meaningful.is_empty() {
        all
    } else {
        meaningful
    };
    terms.sort();
    terms.dedup();
    terms
}

/// Relevance of an entry to a query (0 when nothing matches). A query equal to the key
/// scores highest; then each query term found in the key (weight 3), in the tags
/// (weight 2) and in the value (weight 1, saturating with repeats), normalised by the
/// number of terms, so entries matching more of the query rank first.
pub fn score(query: &str, terms: &[String], entry: &KvEntry) -> f64 {
    if terms.is_empty() {
        return 0.0;
    }
    let key_lower = entry.key.to_lowercase();
    let key_words = words(&entry.key);
    let tag_words: Vec<String> = entry.tags.iter().flat_map(|t| words(t)).collect();
    let mut text = String::new();
    value_text(&entry.value, &mut text);
    let value_words = words(&text);
    let mut total = 0.0;
    for term in terms {
        let mut s = 0.0;
        if key_words.iter().any(|w| w == term) {
            s += 3.0;
        } else if key_lower.contains(term.as_str()) {
            s += 1.5;
        }
        if tag_words.iter().any(|w| w == term) {
            s += 2.0;
        }
        let tf = value_words.iter().filter(|w| *w == term).count() as f64;
        if tf > 0.0 {
            s += tf / (tf + 1.0) * 2.0;
        }
        total += s;
    }
    let mut relevance = total / terms.len() as f64;
    if relevance > 0.0 && key_lower == query.trim().to_lowercase() {
        relevance += 5.0;
    }
    relevance
}

/// Rank entries for a query: matching entries only, best first, ties by recency of use.
pub fn rank(query: &str, entries: Vec<KvEntry>, limit: usize) -> Vec<(KvEntry, f64)> {
    let terms = query_terms(query);
    let mut scored: Vec<(KvEntry, f64)> = entries
        .into_iter()
        .map(|e| {
            let s = score(query, &terms, &e);
            (e, s)
        })
        .filter(|(_, s)| *s > 0.0)
        .collect();
    scored.sort_by(|a, b| {
        b.1.total_cmp(&a.1)
            .then_with(|| b.0.last_used.cmp(&a.0.last_used))
    });
    scored.truncate(limit);
    scored
}

/// One namespace held in memory: entries, use order and counters.
#[derive(Debug, Clone)]
pub struct LruNamespace {
    /// The namespace's name.
    name: NamespaceName,
    /// Bound on live entries.
    max_entries: usize,
    /// Last use number handed out.
    clock: u64,
    /// Entries by key.
    entries: HashMap<String, KvEntry>,
    /// Keys by use number, oldest first.
    order: BTreeMap<u64, String>,
    /// Gets that found a live entry.
    hits: u64,
    /// Gets that found nothing.
    misses: u64,
    /// Entries evicted.
    evictions: u64,
    /// Puts accepted.
    puts: u64,
    /// Creation time.
    created_at: DateTime<Utc>,
}

impl LruNamespace {
    /// An empty namespace bounded by `max_entries` (at least 1).
    pub fn new(name: NamespaceName, max_entries: usize, now: DateTime<Utc>) -> Self {
        Self {
            name,
            max_entries: max_entries.max(1),
            clock: 0,
            entries: HashMap::new(),
            order: BTreeMap::new(),
            hits: 0,
            misses: 0,
            evictions: 0,
            puts: 0,
            created_at: now,
        }
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    fn remove(&mut self, key: &str) -> Option<KvEntry> {
        let entry = self.entries.remove(key)?;
        self.order.remove(&entry.last_used);
        Some(entry)
    }

    /// Drop expired entries (they are not evictions); returns their keys.
    pub fn purge_expired(&mut self, now: DateTime<Utc>) -> Vec<String> {
        let expired: Vec<String> = self
            .entries
            .values()
            .filter(|e| e.is_expired(now))
            .map(|e| e.key.clone())
            .collect();
        for key in &expired {
            self.remove(key);
        }
        expired
    }

    /// Evict least recently used entries until at most `max_entries` remain.
    fn evict(&mut self) -> Vec<String> {
        let mut evicted = Vec::new();
        while self.entries.len() > self.max_entries {
            let Some((_, key)) = self.order.pop_first() else {
                break;
            };
            self.entries.remove(&key);
            self.evictions += 1;
            evicted.push(key);
        }
        evicted
    }

    /// Write an entry (a use), then evict down to the bound; the written entry is the
    /// most recently used, so it is never the one evicted.
    pub fn put(&mut self, put: &KvPut) -> KvPutOutcome {
        self.purge_expired(put.now);
        let previous = self.remove(&put.key);
        let last_used = self.tick();
        let entry = KvEntry {
            namespace: self.name.clone(),
            key: put.key.clone(),
            value: put.value.clone(),
            tags: put.tags.clone(),
            written_by: put.written_by.clone(),
            created_at: previous.as_ref().map_or(put.now, |p| p.created_at),
            updated_at: put.now,
            expires_at: put.expires_at,
            last_used,
        };
        self.order.insert(last_used, put.key.clone());
        self.entries.insert(put.key.clone(), entry.clone());
        self.puts += 1;
        let evicted = self.evict();
        KvPutOutcome {
            entry,
            created: previous.is_none(),
            evicted,
        }
    }

    /// Read an entry (a use: it moves to the front); counts a hit or a miss.
    pub fn get(&mut self, key: &str, now: DateTime<Utc>) -> Option<KvEntry> {
        if self.entries.get(key).is_some_and(|e| e.is_expired(now)) {
            self.remove(key);
        }
        let Some(mut entry) = self.remove(key) else {
            self.misses += 1;
            return None;
        };
        self.hits += 1;
        entry.last_used = self.tick();
        self.order.insert(entry.last_used, key.to_string());
        self.entries.insert(key.to_string(), entry.clone());
        Some(entry)
    }

    /// Remove an entry; false when it was not there (or had expired).
    pub fn delete(&mut self, key: &str, now: DateTime<Utc>) -> bool {
        self.remove(key).is_some_and(|e| !e.is_expired(now))
    }

    /// Change the bound; shrinking evicts least recently used entries at once.
    pub fn set_max_entries(&mut self, max_entries: usize, now: DateTime<Utc>) -> Vec<String> {
        self.max_entries = max_entries.max(1);
        self.purge_expired(now);
        self.evict()
    }

    /// Live entries, most recently used first (no use is counted).
    pub fn live(&self, now: DateTime<Utc>) -> Vec<KvEntry> {
        self.order
            .values()
            .rev()
            .filter_map(|k| self.entries.get(k))
            .filter(|e| !e.is_expired(now))
            .cloned()
            .collect()
    }

    /// Counters and bounds.
    pub fn stats(&self, now: DateTime<Utc>) -> NamespaceStats {
        NamespaceStats {
            namespace: self.name.clone(),
            entries: self.entries.values().filter(|e| !e.is_expired(now)).count(),
            max_entries: self.max_entries,
            hits: self.hits,
            misses: self.misses,
            evictions: self.evictions,
            puts: self.puts,
            created_at: self.created_at,
        }
    }
}

/// A put for tests and examples: `key` = `value` written by `agent` at `now`.
pub fn simple_put(
    namespace: &NamespaceName,
    agent: &AgentId,
    key: &str,
    value: serde_json::Value,
    now: DateTime<Utc>,
) -> KvPut {
    KvPut {
        namespace: namespace.clone(),
        key: key.to_string(),
        value,
        tags: Vec::new(),
        written_by: agent.clone(),
        expires_at: None,
        default_max_entries: 1000,
        now,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn setup(max: usize) -> (LruNamespace, NamespaceName, AgentId, DateTime<Utc>) {
        let name = NamespaceName::parse("team").unwrap();
        let now = Utc::now();
        (
            LruNamespace::new(name.clone(), max, now),
            name,
            AgentId::parse("node-1").unwrap(),
            now,
        )
    }

    #[test]
    fn kv_put_beyond_the_bound_evicts_the_least_recently_used() {
        let (mut ns, name, agent, now) = setup(3);
        for key in ["a", "b", "c"] {
            assert!(ns
                .put(&simple_put(&name, &agent, key, json!(key), now))
                .evicted
                .is_empty());
        }
        // Reading "a" makes "b" the least recently used.
        assert!(ns.get("a", now).is_some());
        let outcome = ns.put(&simple_put(&name, &agent, "d", json!(4), now));
        assert_eq!(outcome.evicted, vec!["b".to_string()]);
        // Overwriting "c" is a use too: "a" is now the oldest.
        ns.put(&simple_put(&name, &agent, "c", json!("c2"), now));
        let outcome = ns.put(&simple_put(&name, &agent, "e", json!(5), now));
        assert_eq!(outcome.evicted, vec!["a".to_string()]);
        let keys: Vec<String> = ns.live(now).into_iter().map(|e| e.key).collect();
        assert_eq!(keys, vec!["e", "c", "d"]);
        let stats = ns.stats(now);
        assert_eq!((stats.entries, stats.evictions, stats.puts), (3, 2, 6));
        assert_eq!((stats.hits, stats.misses), (1, 0));
    }

    #[test]
    fn kv_gets_count_hits_and_misses_and_overwrites_keep_created_at() {
        let (mut ns, name, agent, now) = setup(10);
        ns.put(&simple_put(&name, &agent, "k", json!(1), now));
        let later = now + chrono::Duration::seconds(5);
        let outcome = ns.put(&simple_put(&name, &agent, "k", json!(2), later));
        assert!(!outcome.created);
        assert_eq!(outcome.entry.created_at, now);
        assert_eq!(outcome.entry.updated_at, later);
        assert_eq!(ns.get("k", later).unwrap().value, json!(2));
        assert!(ns.get("missing", later).is_none());
        let stats = ns.stats(later);
        assert_eq!((stats.hits, stats.misses, stats.entries), (1, 1, 1));
    }

    #[test]
    fn kv_expired_entries_are_misses_and_go_before_live_ones() {
        let (mut ns, name, agent, now) = setup(2);
        let mut put = simple_put(&name, &agent, "short", json!(1), now);
        put.expires_at = Some(now + chrono::Duration::seconds(10));
        ns.put(&put);
        ns.put(&simple_put(&name, &agent, "long", json!(2), now));
        let later = now + chrono::Duration::seconds(11);
        assert_eq!(ns.stats(later).entries, 1);
        // The expired entry makes room; nothing live is evicted.
        let outcome = ns.put(&simple_put(&name, &agent, "new", json!(3), later));
        assert!(outcome.evicted.is_empty());
        assert!(ns.get("short", later).is_none());
        assert_eq!(ns.stats(later).evictions, 0);
    }

    #[test]
    fn kv_shrinking_the_bound_evicts_at_once() {
        let (mut ns, name, agent, now) = setup(5);
        for key in ["a", "b", "c", "d"] {
            ns.put(&simple_put(&name, &agent, key, json!(null), now));
        }
        assert_eq!(ns.set_max_entries(2, now), vec!["a", "b"]);
        assert_eq!(ns.stats(now).entries, 2);
        assert!(ns.delete("c", now));
        assert!(!ns.delete("c", now));
    }

    #[test]
    fn kv_search_ranks_key_matches_first_and_skips_non_matches() {
        let (mut ns, name, agent, now) = setup(10);
        ns.put(&simple_put(
            &name,
            &agent,
            "deploy-plan",
            json!({"steps": "build then ship"}),
            now,
        ));
        ns.put(&simple_put(
            &name,
            &agent,
            "notes",
            json!("the deploy went fine"),
            now,
        ));
        ns.put(&simple_put(&name, &agent, "other", json!({"x": 1}), now));
        let mut tagged = simple_put(&name, &agent, "misc", json!("nothing here"), now);
        tagged.tags = vec!["deploy".into()];
        ns.put(&tagged);
        let ranked = rank("deploy", ns.live(now), 10);
        let keys: Vec<&str> = ranked.iter().map(|(e, _)| e.key.as_str()).collect();
        assert_eq!(keys, vec!["deploy-plan", "misc", "notes"]);
        assert!(rank("zebra", ns.live(now), 10).is_empty());
        assert_eq!(rank("deploy", ns.live(now), 1).len(), 1);
        // An exact key match beats everything.
        let ranked = rank("notes", ns.live(now), 10);
        assert_eq!(ranked[0].0.key, "notes");
    }

    #[test]
    fn kv_excess_is_what_must_go() {
        assert_eq!(excess(5, 3), 2);
        assert_eq!(excess(3, 3), 0);
        assert_eq!(excess(0, 3), 0);
    }
}

//! BM25 keyword search, in process: the postings of every active memory, partitioned
//! by agent (plus the shared pool), kept by the vector actor beside the vector index and
//! rebuilt with it from the system of record. Recall's keyword and feedback retrievers
//! read it instead of the SQL index, which costs a round trip, a join per match and a
//! count per term (3 of recall's 5 ms at 100,000 memories).
//!
//! The scores are the SQL stores' own (`src/store/keyword.rs` calls [`bm25`], [`idf`],
//! [`fold`] and [`best`] from here): the same terms, the same statistics (rows and
//! tokens over the whole index, document frequency per agent partition, a shared
//! memory's terms counted once more in the shared pool), the same floating-point
//! operations in the same order. `src/store/conformance.rs` pins that both give the
//! same hits, order and scores.

use std::collections::HashMap;
use std::sync::RwLock;

use chrono::{DateTime, Utc};

use super::{EmbeddingRecord, KeywordQuery};
use crate::model::{AgentId, MemoryId};
use crate::text::keyword_terms;

/// Term-frequency saturation.
pub const BM25_K1: f64 = 0.9;
/// Length normalisation (0: none, 1: full).
pub const BM25_B: f64 = 0.4;

/// BM25 of one row: `freqs[i]` occurrences of the query's i-th phrase, whose idf is
/// `idf[i]`, in a row of `length` terms, in a collection whose mean length is `avgdl`.
pub fn bm25(freqs: &[f64], idf: &[f64], length: f64, avgdl: f64) -> f64 {
    let mut score = 0.0;
    for (f, idf) in freqs.iter().zip(idf) {
        score += idf
            * ((f * (BM25_K1 + 1.0)) / (f + BM25_K1 * (1.0 - BM25_B + BM25_B * length / avgdl)));
    }
    score
}

/// FTS5's idf for a term found in `hits` of `rows` rows (never below 1e-6).
pub fn idf(rows: i64, hits: i64) -> f64 {
    let idf = (((rows - hits) as f64 + 0.5) / (hits as f64 + 0.5)).ln();
    if idf <= 0.0 {
        1e-6
    } else {
        idf
    }
}

/// Fold a term the way FTS5's `unicode61 remove_diacritics 2` tokenizer does (terms are
/// already lower-case): diacritics dropped, the rest recomposed.
/// ASCII terms (nearly all) come back borrowed.
pub fn fold(term: &str) -> std::borrow::Cow<'_, str> {
    use unicode_normalization::char::is_combining_mark;
    use unicode_normalization::UnicodeNormalization;
    if term.is_ascii() {
        return std::borrow::Cow::Borrowed(term);
    }
    std::borrow::Cow::Owned(
        term.nfd()
            .filter(|c| !is_combining_mark(*c))
            .nfc()
            .collect(),
    )
}

/// The best `limit` hits: highest score first, ties by id (SQLite orders by `bm25()`,
/// the negated score, then id).
pub fn best(mut scored: Vec<(MemoryId, f64)>, limit: usize) -> Vec<(MemoryId, f64)> {
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0 .0.cmp(&b.0 .0)));
    scored.truncate(limit);
    scored
}

/// The text a memory's keyword postings are made of: its title (if any) and content.
pub fn keyword_text(title: Option<&str>, content: &str) -> String {
    match title {
        Some(title) => format!("{title} {content}"),
        None => content.to_string(),
    }
}

/// The distinct folded terms of a question, sorted (a query's phrases).
fn query_terms(text: &str) -> Vec<String> {
    let mut terms: Vec<String> = keyword_terms(text)
        .iter()
        .map(|t| fold(t).into_owned())
        .collect();
    terms.sort();
    terms.dedup();
    terms
}

/// One term's postings in a partition: (slot, occurrences). Slots of removed memories
/// stay until the partition is compacted; searches skip them.
type Postings = Vec<(u32, u32)>;

/// One indexed memory in a partition.
#[derive(Debug)]
struct Doc {
    /// Which memory.
    id: MemoryId,
    /// When it happened (a query's time range filters on it).
    occurred_at: DateTime<Utc>,
    /// Its postings in all, the shared pool's copies included (FTS5's row length).
    length: u32,
}

/// The postings of one agent, or of the shared pool.
#[derive(Debug, Default)]
struct Partition {
    /// Slot → memory; `None` once removed (until compaction renumbers the slots).
    docs: Vec<Option<Doc>>,
    /// Folded term → postings.
    terms: HashMap<Box<str>, Postings>,
    /// Removed slots still named by postings.
    dead: usize,
}

impl Partition {
    /// File `doc` under its `counts` (term → occurrences); returns its slot.
    fn add(&mut self, doc: Doc, counts: &[(&str, u32)]) -> u32 {
        let slot = u32::try_from(self.docs.len()).unwrap_or(u32::MAX);
        self.docs.push(Some(doc));
        for (term, count) in counts {
            match self.terms.get_mut(*term) {
                Some(postings) => postings.push((slot, *count)),
                None => {
                    self.terms.insert((*term).into(), vec![(slot, *count)]);
                }
            }
        }
        slot
    }

    /// Forget `slot`; compacts when removed slots outnumber a third of the live ones.
    /// Returns the old → new slot map when it compacted.
    fn remove(&mut self, slot: u32) -> Option<Vec<u32>> {
        let taken = self
            .docs
            .get_mut(slot as usize)
            .and_then(Option::take)
            .is_some();
        if taken {
            self.dead += 1;
        }
        let live = self.docs.len() - self.dead;
        (self.dead > 64 && self.dead * 3 > live).then(|| self.compact())
    }

    /// Drop removed slots and renumber the rest; returns old slot → new slot
    /// (`u32::MAX` for a removed one).
    fn compact(&mut self) -> Vec<u32> {
        let mut renumber = vec![u32::MAX; self.docs.len()];
        let mut kept = Vec::with_capacity(self.docs.len() - self.dead);
        for (old, doc) in std::mem::take(&mut self.docs).into_iter().enumerate() {
            if let Some(doc) = doc {
                renumber[old] = kept.len() as u32;
                kept.push(Some(doc));
            }
        }
        self.docs = kept;
        self.dead = 0;
        self.terms.retain(|_, postings| {
            postings.retain_mut(|(slot, _)| {
                let new = renumber[*slot as usize];
                *slot = new;
                new != u32::MAX
            });
            !postings.is_empty()
        });
        renumber
    }

    /// The live postings of `term` whose memory is in `range`: (slot, occurrences), and
    /// the term's document frequency (live memories having it, whatever their time).
    fn matches(
        &self,
        term: &str,
        range: Option<&crate::policy::time::TimeRange>,
    ) -> (Vec<(u32, u32)>, i64) {
        let Some(postings) = self.terms.get(term) else {
            return (Vec::new(), 0);
        };
        let mut found = Vec::with_capacity(postings.len());
        let mut frequency = 0i64;
        for &(slot, count) in postings {
            let Some(Some(doc)) = self.docs.get(slot as usize) else {
                continue;
            };
            frequency += 1;
            if range.is_none_or(|r| r.contains(doc.occurred_at)) {
                found.push((slot, count));
            }
        }
        (found, frequency)
    }
}

/// Where one memory is filed.
#[derive(Debug, Clone, Copy)]
struct Place {
    /// Its agent's partition.
    partition: u32,
    /// Its slot there.
    slot: u32,
    /// Its slot in the shared pool, when shared.
    shared: Option<u32>,
    /// Its length (for the collection's token total).
    length: u32,
}

/// Everything behind the lock.
#[derive(Debug, Default)]
struct Inner {
    /// Each indexed memory's place.
    places: HashMap<MemoryId, Place>,
    /// Agent → partition number.
    agents: HashMap<AgentId, u32>,
    /// The partitions, by number.
    partitions: Vec<Partition>,
    /// The shared pool.
    shared: Partition,
    /// Postings in all (FTS5's token total: the mean row length's numerator).
    tokens: u64,
}

impl Inner {
    /// Index one memory (replacing what it had).
    fn upsert(&mut self, entry: &EmbeddingRecord) {
        self.remove(&entry.id);
        let terms = keyword_terms(&entry.text);
        let mut counts: Vec<(String, u32)> = Vec::new();
        {
            let mut by_term: HashMap<String, u32> = HashMap::with_capacity(terms.len());
            for term in &terms {
                *by_term.entry(fold(term).into_owned()).or_insert(0) += 1;
            }
            counts.extend(by_term);
        }
        let counts: Vec<(&str, u32)> = counts.iter().map(|(t, c)| (t.as_str(), *c)).collect();
        let copies = if entry.shared { 2 } else { 1 };
        let length = u32::try_from(terms.len() * copies).unwrap_or(u32::MAX);
        let doc = || Doc {
            id: entry.id.clone(),
            occurred_at: entry.occurred_at,
            length,
        };
        let next = u32::try_from(self.partitions.len()).unwrap_or(u32::MAX);
        let partition = *self.agents.entry(entry.agent_id.clone()).or_insert(next);
        if partition == next {
            self.partitions.push(Partition::default());
        }
        let slot = self.partitions[partition as usize].add(doc(), &counts);
        let shared = entry.shared.then(|| self.shared.add(doc(), &counts));
        self.places.insert(
            entry.id.clone(),
            Place {
                partition,
                slot,
                shared,
                length,
            },
        );
        self.tokens += u64::from(length);
    }

    /// Unindex one memory (nothing if it is not indexed).
    fn remove(&mut self, id: &MemoryId) {
        let Some(place) = self.places.remove(id) else {
            return;
        };
        self.tokens = self.tokens.saturating_sub(u64::from(place.length));
        if let Some(renumber) = self.partitions[place.partition as usize].remove(place.slot) {
            for other in self.places.values_mut() {
                if other.partition == place.partition {
                    other.slot = renumber[other.slot as usize];
                }
            }
        }
        if let Some(slot) = place.shared {
            if let Some(renumber) = self.shared.remove(slot) {
                for other in self.places.values_mut() {
                    if let Some(shared) = other.shared.as_mut() {
                        *shared = renumber[*shared as usize];
                    }
                }
            }
        }
    }

    /// BM25 over the agent's partition (and the shared pool when asked), as the SQL
    /// stores compute it.
    fn search(&self, query: &KeywordQuery) -> Vec<(MemoryId, f64)> {
        let terms = query_terms(&query.text);
        let rows = self.places.len() as i64;
        if terms.is_empty() || query.limit == 0 || rows == 0 {
            return Vec::new();
        }
        let own = self
            .agents
            .get(&query.agent_id)
            .map(|p| &self.partitions[*p as usize]);
        let mut partitions: Vec<Option<&Partition>> = vec![own];
        if query.include_shared {
            partitions.push(Some(&self.shared));
        }
        let phrases = terms.len() * partitions.len();
        let mut idfs = Vec::with_capacity(phrases);
        // Memory → its phrase frequencies (a shared memory of the agent is found in both
        // partitions: one row in SQL, so one set of frequencies here).
        let mut found: HashMap<&MemoryId, (Vec<f64>, u32)> = HashMap::new();
        let range = query.occurred.as_ref();
        for (group, partition) in partitions.iter().enumerate() {
            for (position, term) in terms.iter().enumerate() {
                let phrase = group * terms.len() + position;
                let Some(partition) = partition else {
                    idfs.push(idf(rows, 0));
                    continue;
                };
                let (matches, frequency) = partition.matches(term, range);
                idfs.push(idf(rows, frequency));
                for (slot, count) in matches {
                    let Some(Some(doc)) = partition.docs.get(slot as usize) else {
                        continue;
                    };
                    let entry = found
                        .entry(&doc.id)
                        .or_insert_with(|| (vec![0.0; phrases], doc.length));
                    entry.0[phrase] += f64::from(count);
                }
            }
        }
        let avgdl = self.tokens as f64 / rows as f64;
        let scored = found
            .into_iter()
            .map(|(id, (freqs, length))| {
                (id.clone(), bm25(&freqs, &idfs, f64::from(length), avgdl))
            })
            .collect();
        best(scored, query.limit)
    }
}

/// The in-process keyword index (see the module documentation). Shared by the vector
/// actor's restarts like the vector index, and rebuilt with it.
#[derive(Debug, Default)]
pub struct KeywordIndex {
    /// The postings; searches read, projections write.
    inner: RwLock<Inner>,
}

impl KeywordIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Index `entries` (replacing what they had).
    pub fn upsert(&self, entries: &[EmbeddingRecord]) {
        let mut inner = self.write();
        for entry in entries {
            inner.upsert(entry);
        }
    }

    /// Unindex `ids` (unknown ids are ignored).
    pub fn remove(&self, ids: &[MemoryId]) {
        let mut inner = self.write();
        for id in ids {
            inner.remove(id);
        }
    }

    /// Drop everything (before a rebuild).
    pub fn clear(&self) {
        *self.write() = Inner::default();
    }

    /// BM25 hits of `query`, best first (ties by id), at most `query.limit`.
    pub fn search(&self, query: &KeywordQuery) -> Vec<(MemoryId, f64)> {
        match self.inner.read() {
            Ok(inner) => inner.search(query),
            Err(poisoned) => poisoned.into_inner().search(query),
        }
    }

    /// Memories indexed.
    pub fn len(&self) -> usize {
        match self.inner.read() {
            Ok(inner) => inner.places.len(),
            Err(poisoned) => poisoned.into_inner().places.len(),
        }
    }

    /// True when nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Inner> {
        match self.inner.write() {
            Ok(inner) => inner,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::MemoryType;
    use crate::policy::time::TimeRange;
    use chrono::TimeZone;

    fn entry(id: &str, agent: &str, shared: bool, day: u32, text: &str) -> EmbeddingRecord {
        EmbeddingRecord {
            id: MemoryId(id.into()),
            agent_id: AgentId::parse(agent).unwrap(),
            memory_type: MemoryType::Episodic,
            shared,
            vector: Vec::new(),
            occurred_at: Utc.with_ymd_and_hms(2024, 1, day, 12, 0, 0).unwrap(),
            text: text.into(),
        }
    }

    fn query(agent: &str, text: &str) -> KeywordQuery {
        KeywordQuery {
            agent_id: AgentId::parse(agent).unwrap(),
            include_shared: false,
            text: text.into(),
            occurred: None,
            limit: 10,
        }
    }

    fn ids(hits: &[(MemoryId, f64)]) -> Vec<&str> {
        hits.iter().map(|(id, _)| id.as_str()).collect()
    }

    #[test]
    fn more_matches_and_rarer_terms_score_higher_and_long_rows_lower() {
        let common = idf(1000, 500);
        let rare = idf(1000, 3);
        assert!(rare > common);
        assert_eq!(idf(10, 10), 1e-6);
        let one = bm25(&[1.0, 0.0], &[rare, common], 10.0, 10.0);
        let both = bm25(&[1.0, 1.0], &[rare, common], 10.0, 10.0);
        assert!(both > one);
        let longer = bm25(&[1.0, 0.0], &[rare, common], 40.0, 10.0);
        assert!(longer < one);
        // Repeats saturate: twice the term is worth less than twice the score.
        let twice = bm25(&[2.0, 0.0], &[rare, common], 10.0, 10.0);
        assert!(twice > one && twice < 2.0 * one);
    }

    #[test]
    fn search_stays_with_the_agent_and_ranks_by_bm25() {
        let index = KeywordIndex::new();
        index.upsert(&[
            entry("m1", "alice", false, 1, "the grinder burrs need cleaning"),
            entry(
                "m2",
                "alice",
                false,
                2,
                "coffee grinder, grinder settings: fine",
            ),
            entry("m3", "alice", false, 3, "river run at dawn"),
            entry("m4", "bob", false, 4, "my grinder is broken"),
        ]);
        let hits = index.search(&query("alice", "grinder"));
        assert_eq!(
            ids(&hits),
            ["m2", "m1"],
            "two mentions beat one; bob's stays his"
        );
        assert!(hits[0].1 > hits[1].1);
        assert_eq!(
            ids(&index.search(&query("bob", "grinders"))),
            ["m4"],
            "stems match"
        );
        assert!(index.search(&query("carol", "grinder")).is_empty());
        assert!(
            index.search(&query("alice", "the of")).is_empty(),
            "stop words only"
        );
    }

    #[test]
    fn shared_memories_reach_others_only_when_asked_and_count_once() {
        let index = KeywordIndex::new();
        index.upsert(&[
            entry(
                "m1",
                "alice",
                true,
                1,
                "deploy lock held by the release job",
            ),
            entry("m2", "bob", false, 2, "deploy lock released"),
        ]);
        assert_eq!(ids(&index.search(&query("bob", "deploy lock"))), ["m2"]);
        let mut with_shared = query("bob", "deploy lock");
        with_shared.include_shared = true;
        assert_eq!(ids(&index.search(&with_shared)), ["m2", "m1"]);
        let mut own = query("alice", "deploy lock");
        own.include_shared = true;
        let hits = index.search(&own);
        assert_eq!(ids(&hits), ["m1"], "found in both partitions, one hit");
    }

    #[test]
    fn time_range_filters_and_updates_and_removals_take_effect() {
        let index = KeywordIndex::new();
        index.upsert(&[
            entry("m1", "alice", false, 1, "café visit"),
            entry("m2", "alice", false, 9, "cafe visit again"),
        ]);
        let mut ranged = query("alice", "cafe");
        ranged.occurred = Some(TimeRange {
            start: Utc.with_ymd_and_hms(2024, 1, 5, 0, 0, 0).unwrap(),
            end: Utc.with_ymd_and_hms(2024, 1, 10, 0, 0, 0).unwrap(),
        });
        assert_eq!(ids(&index.search(&ranged)), ["m2"]);
        assert_eq!(
            index.search(&query("alice", "café")).len(),
            2,
            "diacritics fold"
        );
        index.upsert(&[entry("m2", "alice", false, 9, "tea instead")]);
        assert_eq!(ids(&index.search(&query("alice", "cafe"))), ["m1"]);
        assert_eq!(ids(&index.search(&query("alice", "tea"))), ["m2"]);
        index.remove(&[MemoryId("m1".into()), MemoryId("unknown".into())]);
        assert!(index.search(&query("alice", "cafe")).is_empty());
        assert_eq!(index.len(), 1);
    }

    #[test]
    fn compaction_keeps_every_live_memory_findable() {
        let index = KeywordIndex::new();
        let entries: Vec<EmbeddingRecord> = (0..500)
            .map(|n| {
                entry(
                    &format!("m{n:03}"),
                    "alice",
                    n % 2 == 0,
                    1,
                    &format!("note number{n} kept"),
                )
            })
            .collect();
        index.upsert(&entries);
        let removed: Vec<MemoryId> = (0..400)
            .filter(|n| n % 5 != 0)
            .map(|n| MemoryId(format!("m{n:03}")))
            .collect();
        index.remove(&removed);
        assert_eq!(index.len(), 500 - removed.len());
        for n in 0..500 {
            let hits = index.search(&query("alice", &format!("number{n}")));
            let live = n >= 400 || n % 5 == 0;
            assert_eq!(hits.len(), usize::from(live), "memory {n}");
        }
        let mut all = query("alice", "note");
        all.limit = 1000;
        all.include_shared = true;
        assert_eq!(index.search(&all).len(), 500 - removed.len());
    }
}

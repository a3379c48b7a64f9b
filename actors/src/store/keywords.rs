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
//!
//! Each agent's partition also keeps its sessions' memories in id order (creation
//! order), so recall's expansion finds a hit's session neighbours here instead of in a
//! SQL statement and its round trips ([`KeywordIndex::session_neighbours`]).

use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use chrono::{DateTime, Utc};

use super::{EmbeddingRecord, KeywordQuery};
use smallvec::SmallVec;

use crate::hashing::FastMap;
use crate::model::{AgentId, MemoryId, SessionId};
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
        score += term_score(*f, *idf, length, avgdl);
    }
    score
}

/// One phrase's part of [`bm25`]: `f` occurrences of a phrase of `idf` (0 for none).
#[inline]
pub fn term_score(f: f64, idf: f64, length: f64, avgdl: f64) -> f64 {
    idf * ((f * (BM25_K1 + 1.0)) / (f + BM25_K1 * (1.0 - BM25_B + BM25_B * length / avgdl)))
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

/// Bits of a [`Posting`] that hold the occurrence count.
const COUNT_BITS: u32 = 8;
/// The count a posting holds for `SATURATED` or more occurrences (the exact count is in
/// [`Partition::heavy`]).
const SATURATED: u32 = (1 << COUNT_BITS) - 1;
/// Slots one partition can number (the posting's other bits): 16.7 million memories of
/// one agent. Past it the index gives up and recall asks the SQL store.
const MAX_SLOTS: usize = 1 << (32 - COUNT_BITS);

/// One memory's occurrences of a term: `slot << COUNT_BITS | count` (half the size of a
/// (slot, count) pair; postings are most of the index).
type Posting = u32;

/// One term's postings in a partition; up to four inline, because most of an agent's
/// terms are rare and a heap block per term would cost more than its postings. Slots
/// of removed memories stay until the partition is compacted; searches skip them.
type Postings = SmallVec<[Posting; 4]>;

/// A posting of `count` occurrences in `slot`.
fn posting(slot: u32, count: u32) -> Posting {
    slot << COUNT_BITS | count.min(SATURATED)
}

/// A posting's slot.
fn slot_of(posting: Posting) -> u32 {
    posting >> COUNT_BITS
}

/// Number of a term in the index's [`Dictionary`].
type TermId = u32;

/// Every folded term of the index, once, numbered: partitions key their postings by
/// number, so a term that a hundred agents use is one string, not a hundred.
#[derive(Debug, Default)]
struct Dictionary {
    /// Term → its number.
    ids: FastMap<Arc<str>, TermId>,
    /// Number → term (`None`: free, reused by the next new term).
    names: Vec<Option<Arc<str>>>,
    /// Number → partitions whose postings have the term (0: it can be freed).
    uses: Vec<u32>,
    /// Numbers free for reuse.
    free: Vec<TermId>,
}

impl Dictionary {
    /// `term`'s number, numbering it if it is new (with no uses yet).
    fn intern(&mut self, term: &str) -> TermId {
        if let Some(&id) = self.ids.get(term) {
            return id;
        }
        let name: Arc<str> = Arc::from(term);
        let id = match self.free.pop() {
            Some(id) => {
                self.names[id as usize] = Some(name.clone());
                id
            }
            None => {
                self.names.push(Some(name.clone()));
                self.uses.push(0);
                u32::try_from(self.names.len() - 1).unwrap_or(u32::MAX)
            }
        };
        self.ids.insert(name, id);
        id
    }

    /// `term`'s number, if any partition has it.
    fn get(&self, term: &str) -> Option<TermId> {
        self.ids.get(term).copied()
    }

    /// One more partition has postings of `id`.
    fn used(&mut self, id: TermId) {
        self.uses[id as usize] += 1;
    }

    /// One partition less has postings of `id`; the last frees it.
    fn released(&mut self, id: TermId) {
        let uses = &mut self.uses[id as usize];
        *uses = uses.saturating_sub(1);
        if *uses == 0 {
            if let Some(name) = self.names[id as usize].take() {
                self.ids.remove(&*name);
                self.free.push(id);
            }
        }
    }
}

/// One indexed memory in a partition.
#[derive(Debug)]
struct Doc {
    /// Which memory (one allocation shared with its [`Place`] key and the shared pool).
    id: Arc<str>,
    /// When it happened (a query's time range filters on it).
    occurred_at: DateTime<Utc>,
    /// Its postings in all, the shared pool's copies included (FTS5's row length).
    length: u32,
    /// Its agent's partition number (in the shared pool: whose it is).
    owner: u32,
    /// Its session in its agent's partition (the key of [`Partition::sessions`], shared);
    /// always `None` in the shared pool, which keeps no session order.
    session: Option<Arc<str>>,
}

/// The postings of one agent, or of the shared pool.
#[derive(Debug, Default)]
struct Partition {
    /// Slot → memory; `None` once removed (until compaction renumbers the slots).
    docs: Vec<Option<Doc>>,
    /// Term → postings.
    terms: FastMap<TermId, Postings>,
    /// Exact counts of the postings that hold [`SATURATED`]: (term, slot) → occurrences.
    heavy: FastMap<(TermId, u32), u32>,
    /// Removed slots still named by postings.
    dead: usize,
    /// Session → its live memories' ids in id (creation) order: recall's session
    /// neighbours. Empty in the shared pool.
    sessions: FastMap<Arc<str>, BTreeSet<Arc<str>>>,
}

impl Partition {
    /// File `doc` under its `counts` (term → occurrences); returns its slot, or `None`
    /// when the partition has numbered `slot_limit` slots, at most [`MAX_SLOTS`]
    /// (nothing is filed then).
    fn add(
        &mut self,
        doc: Doc,
        counts: &[(TermId, u32)],
        dictionary: &mut Dictionary,
        slot_limit: usize,
    ) -> Option<u32> {
        if self.docs.len() >= slot_limit.min(MAX_SLOTS) {
            return None;
        }
        let slot = u32::try_from(self.docs.len()).ok()?;
        self.docs.push(Some(doc));
        for &(term, count) in counts {
            match self.terms.get_mut(&term) {
                Some(postings) => postings.push(posting(slot, count)),
                None => {
                    let mut postings = Postings::new();
                    postings.push(posting(slot, count));
                    self.terms.insert(term, postings);
                    dictionary.used(term);
                }
            }
            if count >= SATURATED {
                self.heavy.insert((term, slot), count);
            }
        }
        Some(slot)
    }

    /// Forget `slot`; compacts when removed slots outnumber a third of the live ones.
    /// Returns the old → new slot map when it compacted.
    fn remove(&mut self, slot: u32, dictionary: &mut Dictionary) -> Option<Vec<u32>> {
        if let Some(doc) = self.docs.get_mut(slot as usize).and_then(Option::take) {
            self.dead += 1;
            if let Some(session) = &doc.session {
                self.leave_session(session, &doc.id);
            }
        }
        let live = self.docs.len() - self.dead;
        (self.dead > 64 && self.dead * 3 > live).then(|| self.compact(dictionary))
    }

    /// File `id` in `session`'s order; answers the session's shared key for its doc.
    fn join_session(&mut self, session: &str, id: &Arc<str>) -> Arc<str> {
        let key = match self.sessions.get_key_value(session) {
            Some((key, _)) => key.clone(),
            None => Arc::from(session),
        };
        self.sessions
            .entry(key.clone())
            .or_default()
            .insert(id.clone());
        key
    }

    /// Take `id` out of `session`'s order (and the session out of the map once empty).
    fn leave_session(&mut self, session: &str, id: &str) {
        if let Some(ids) = self.sessions.get_mut(session) {
            ids.remove(id);
            if ids.is_empty() {
                self.sessions.remove(session);
            }
        }
    }

    /// The ids filed in `session` just before `seed` (nearest first, at most `radius`),
    /// then just after it (nearest first, at most `radius`); `seed` itself need not be
    /// filed. The SQL stores' `session_neighbours` answer alike.
    fn session_neighbours(&self, session: &str, seed: &str, radius: usize) -> Vec<MemoryId> {
        let Some(ids) = self.sessions.get(session) else {
            return Vec::new();
        };
        let before = ids
            .range::<str, _>((Bound::Unbounded, Bound::Excluded(seed)))
            .rev()
            .take(radius);
        let after = ids
            .range::<str, _>((Bound::Excluded(seed), Bound::Unbounded))
            .take(radius);
        before
            .chain(after)
            .map(|id| MemoryId(id.to_string()))
            .collect()
    }

    /// Drop removed slots and renumber the rest; returns old slot → new slot
    /// (`u32::MAX` for a removed one).
    fn compact(&mut self, dictionary: &mut Dictionary) -> Vec<u32> {
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
        self.terms.retain(|term, postings| {
            postings.retain(|p| {
                let new = renumber[slot_of(*p) as usize];
                *p = posting(new, *p & SATURATED);
                new != u32::MAX
            });
            postings.shrink_to_fit();
            if postings.is_empty() {
                dictionary.released(*term);
            }
            !postings.is_empty()
        });
        self.heavy = std::mem::take(&mut self.heavy)
            .into_iter()
            .filter_map(|((term, slot), count)| {
                let new = renumber[slot as usize];
                (new != u32::MAX).then_some(((term, new), count))
            })
            .collect();
        renumber
    }

    /// The live postings of `term` whose memory is in `range`: (slot, occurrences), and
    /// the term's document frequency (live memories having it, whatever their time).
    fn matches(
        &self,
        term: TermId,
        range: Option<&crate::policy::time::TimeRange>,
    ) -> (Vec<(u32, u32)>, i64) {
        let Some(postings) = self.terms.get(&term) else {
            return (Vec::new(), 0);
        };
        let mut found = Vec::with_capacity(postings.len());
        let mut frequency = 0i64;
        for &p in postings {
            let slot = slot_of(p);
            let Some(Some(doc)) = self.docs.get(slot as usize) else {
                continue;
            };
            frequency += 1;
            if range.is_none_or(|r| r.contains(doc.occurred_at)) {
                let count = match p & SATURATED {
                    SATURATED => self.heavy.get(&(term, slot)).copied().unwrap_or(SATURATED),
                    count => count,
                };
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
    places: FastMap<Arc<str>, Place>,
    /// Agent → partition number.
    agents: FastMap<AgentId, u32>,
    /// The partitions, by number.
    partitions: Vec<Partition>,
    /// The shared pool.
    shared: Partition,
    /// Postings in all (FTS5's token total: the mean row length's numerator).
    tokens: u64,
    /// The terms the partitions' postings are keyed by.
    dictionary: Dictionary,
    /// Set once a partition ran out of slots ([`MAX_SLOTS`]): the postings are then
    /// incomplete, and searches answer `None` so that recall asks the SQL store.
    overflowed: bool,
    /// Slots a partition may number (`None`: [`MAX_SLOTS`]; tests lower it).
    slot_limit: Option<usize>,
}

/// A memory's postings worked out from its record, before the index's lock is taken
/// (the tokenising and stemming is most of an upsert's time).
#[derive(Debug)]
pub struct Prepared {
    /// Which memory.
    id: Arc<str>,
    /// Whose.
    agent_id: AgentId,
    /// Also filed in the shared pool.
    shared: bool,
    /// When it happened.
    occurred_at: DateTime<Utc>,
    /// Folded term → occurrences.
    counts: Vec<(String, u32)>,
    /// Its postings in all (FTS5's row length: a shared memory's count twice).
    length: u32,
    /// Its session, if any (filed in its partition's session order).
    session: Option<Box<str>>,
}

impl Prepared {
    /// Work out `entry`'s postings.
    pub fn of(entry: &EmbeddingRecord) -> Self {
        let mut terms = keyword_terms(&entry.text);
        let length = terms.len();
        for term in terms.iter_mut() {
            if !term.is_ascii() {
                *term = fold(term).into_owned();
            }
        }
        terms.sort_unstable();
        let mut counts: Vec<(String, u32)> = Vec::with_capacity(terms.len());
        for term in terms {
            match counts.last_mut() {
                Some((last, count)) if *last == term => *count += 1,
                _ => counts.push((term, 1)),
            }
        }
        let copies = if entry.shared { 2 } else { 1 };
        Self {
            id: Arc::from(entry.id.as_str()),
            agent_id: entry.agent_id.clone(),
            shared: entry.shared,
            occurred_at: entry.occurred_at,
            counts,
            length: u32::try_from(length * copies).unwrap_or(u32::MAX),
            session: entry.session_id.as_ref().map(|s| s.as_str().into()),
        }
    }
}

impl Inner {
    /// Index one memory (replacing what it had).
    fn upsert(&mut self, entry: Prepared) {
        self.remove(&entry.id);
        let counts: Vec<(TermId, u32)> = entry
            .counts
            .iter()
            .map(|(term, count)| (self.dictionary.intern(term), *count))
            .collect();
        let length = entry.length;
        let next = u32::try_from(self.partitions.len()).unwrap_or(u32::MAX);
        let partition = *self.agents.entry(entry.agent_id.clone()).or_insert(next);
        if partition == next {
            self.partitions.push(Partition::default());
        }
        let own = &mut self.partitions[partition as usize];
        let session = entry
            .session
            .as_deref()
            .map(|session| own.join_session(session, &entry.id));
        let doc = |session: Option<Arc<str>>| Doc {
            id: entry.id.clone(),
            occurred_at: entry.occurred_at,
            length,
            owner: partition,
            session,
        };
        let limit = self.slot_limit.unwrap_or(MAX_SLOTS);
        let Some(slot) = own.add(doc(session), &counts, &mut self.dictionary, limit) else {
            self.overflowed = true;
            return;
        };
        let shared = if entry.shared {
            let Some(slot) = self
                .shared
                .add(doc(None), &counts, &mut self.dictionary, limit)
            else {
                self.overflowed = true;
                return;
            };
            Some(slot)
        } else {
            None
        };
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
    fn remove(&mut self, id: &str) {
        let Some(place) = self.places.remove(id) else {
            return;
        };
        self.tokens = self.tokens.saturating_sub(u64::from(place.length));
        if let Some(renumber) =
            self.partitions[place.partition as usize].remove(place.slot, &mut self.dictionary)
        {
            for other in self.places.values_mut() {
                if other.partition == place.partition {
                    other.slot = renumber[other.slot as usize];
                }
            }
        }
        if let Some(slot) = place.shared {
            if let Some(renumber) = self.shared.remove(slot, &mut self.dictionary) {
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
        let avgdl = self.tokens as f64 / rows as f64;
        let own_number = self.agents.get(&query.agent_id).copied();
        let own = own_number.map(|p| &self.partitions[p as usize]);
        // Each memory's score summed phrase by phrase in the SQL stores' phrase order (the
        // agent's terms, then the shared pool's), skipping the zero terms of phrases it
        // lacks: the same additions in the same order as `bm25`, so the same score.
        // The agent's memories by slot; the shared pool's (other agents') by id.
        let mut dense: Vec<f64> = own.map_or_else(Vec::new, |p| vec![0.0; p.docs.len()]);
        let mut touched: Vec<u32> = Vec::new();
        let mut others: FastMap<&str, f64> = FastMap::default();
        let range = query.occurred.as_ref();
        let mut groups: Vec<(&Partition, bool)> = Vec::with_capacity(2);
        if let Some(own) = own {
            groups.push((own, false));
        }
        if query.include_shared {
            groups.push((&self.shared, true));
        }
        // A term no partition has matches nothing anywhere: it adds to no score.
        let terms: Vec<TermId> = terms
            .iter()
            .filter_map(|term| self.dictionary.get(term))
            .collect();
        for (partition, pool) in groups {
            for &term in &terms {
                let (matches, frequency) = partition.matches(term, range);
                let idf = idf(rows, frequency);
                for (slot, count) in matches {
                    let Some(Some(doc)) = partition.docs.get(slot as usize) else {
                        continue;
                    };
                    let score = term_score(f64::from(count), idf, f64::from(doc.length), avgdl);
                    let own_slot = if !pool {
                        Some(slot)
                    } else if Some(doc.owner) == own_number {
                        // The agent's own shared memory: one row in SQL, one score here.
                        self.places.get(&doc.id).map(|place| place.slot)
                    } else {
                        None
                    };
                    match own_slot {
                        Some(slot) => {
                            let total = &mut dense[slot as usize];
                            if *total == 0.0 {
                                touched.push(slot);
                            }
                            *total += score;
                        }
                        None => *others.entry(&*doc.id).or_insert(0.0) += score,
                    }
                }
            }
        }
        let mut scored: Vec<(&str, f64)> = Vec::with_capacity(touched.len() + others.len());
        if let Some(own) = own {
            for slot in touched {
                if let Some(Some(doc)) = own.docs.get(slot as usize) {
                    scored.push((&*doc.id, dense[slot as usize]));
                }
            }
        }
        scored.extend(others);
        // `best`'s order, before the few kept ids are copied out.
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        scored.truncate(query.limit);
        scored
            .into_iter()
            .map(|(id, score)| (MemoryId(id.to_string()), score))
            .collect()
    }
}

/// A memory whose session neighbours recall's expansion asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSeed {
    /// Whose memory (the neighbours are the agent's own).
    pub agent_id: AgentId,
    /// Which memory.
    pub id: MemoryId,
    /// Its session.
    pub session_id: SessionId,
}

impl SessionSeed {
    /// The seed of `memory`, if it belongs to a session.
    pub fn of(memory: &crate::model::Memory) -> Option<Self> {
        Some(Self {
            agent_id: memory.agent_id.clone(),
            id: memory.id.clone(),
            session_id: memory.session_id.clone()?,
        })
    }
}

/// Session neighbours of seeds named by id ([`KeywordIndex::filed_session_neighbours`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FiledNeighbours {
    /// (seed, neighbour) pairs, as [`KeywordIndex::session_neighbours`] answers them.
    pub pairs: Vec<(MemoryId, MemoryId)>,
    /// Each seed's session as filed, in the order of the seeds (`None`: not filed, or
    /// in no session).
    pub sessions: Vec<Option<String>>,
}

/// A change that reached the index while a load was running, replayed onto the loaded
/// postings before they replace the live ones.
#[derive(Debug)]
enum Change {
    /// Index these (replacing what they had).
    Upsert(Vec<Prepared>),
    /// Unindex these.
    Remove(Vec<MemoryId>),
}

/// The in-process keyword index (see the module documentation). Shared by the vector
/// actor's restarts like the vector index. It loads in the background ([`Self::begin_load`],
/// [`KeywordLoad`], [`Self::finish_load`]) so a restart is not held up by tokenising every
/// memory; until a load is complete [`Self::search`] answers `None` and recall asks the
/// SQL store, which scores alike.
#[derive(Debug, Default)]
pub struct KeywordIndex {
    /// The postings; searches read, projections write.
    inner: RwLock<Inner>,
    /// While a load runs: the changes since it began, in order (`None`: no load).
    journal: Mutex<Option<Vec<Change>>>,
    /// True once a load completed and no other has begun since.
    ready: AtomicBool,
    /// Number of the latest load begun (an older one finishing is discarded).
    generation: AtomicU64,
}

/// Postings being loaded beside the live index (from pages of the system of record).
#[derive(Debug)]
pub struct KeywordLoad {
    /// The load's number.
    generation: u64,
    /// What has been loaded so far.
    inner: Inner,
}

impl KeywordLoad {
    /// Add a page of prepared entries.
    pub fn insert(&mut self, prepared: Vec<Prepared>) {
        for entry in prepared {
            self.inner.upsert(entry);
        }
    }
}

impl KeywordIndex {
    /// An empty index, ready (nothing to load).
    pub fn new() -> Self {
        let index = Self::default();
        index.ready.store(true, Ordering::Release);
        index
    }

    /// Index `entries` (replacing what they had).
    pub fn upsert(&self, entries: &[EmbeddingRecord]) {
        self.insert(entries.iter().map(Prepared::of).collect());
    }

    /// Index entries prepared beforehand (replacing what they had).
    pub fn insert(&self, prepared: Vec<Prepared>) {
        let mut journal = self.journal();
        if let Some(changes) = journal.as_mut() {
            changes.push(Change::Upsert(prepared));
            return;
        }
        let mut inner = self.write();
        for entry in prepared {
            inner.upsert(entry);
        }
    }

    /// Unindex `ids` (unknown ids are ignored).
    pub fn remove(&self, ids: &[MemoryId]) {
        let mut journal = self.journal();
        if let Some(changes) = journal.as_mut() {
            changes.push(Change::Remove(ids.to_vec()));
            return;
        }
        let mut inner = self.write();
        for id in ids {
            inner.remove(id.as_str());
        }
    }

    /// Start loading from scratch: searches answer `None` and changes are journaled until
    /// [`Self::finish_load`] installs what was loaded.
    pub fn begin_load(&self) -> KeywordLoad {
        let mut journal = self.journal();
        let generation = self.generation.fetch_add(1, Ordering::AcqRel) + 1;
        self.ready.store(false, Ordering::Release);
        *journal = Some(Vec::new());
        *self.write() = Inner::default();
        KeywordLoad {
            generation,
            inner: Inner::default(),
        }
    }

    /// Replay the changes journaled since `load` began onto it and make it the live index;
    /// a load overtaken by a newer one is dropped. Returns whether it was installed.
    pub fn finish_load(&self, mut load: KeywordLoad) -> bool {
        let mut journal = self.journal();
        if load.generation != self.generation.load(Ordering::Acquire) {
            return false;
        }
        for change in journal.take().unwrap_or_default() {
            match change {
                Change::Upsert(prepared) => load.insert(prepared),
                Change::Remove(ids) => {
                    for id in ids {
                        load.inner.remove(id.as_str());
                    }
                }
            }
        }
        *self.write() = load.inner;
        self.ready.store(true, Ordering::Release);
        true
    }

    /// True when no load began after `load` (it may still be installed).
    pub fn is_latest(&self, load: &KeywordLoad) -> bool {
        load.generation == self.generation.load(Ordering::Acquire)
    }

    /// Load everything now, from `pages` (a test's or a small store's load).
    pub fn load(&self, pages: impl IntoIterator<Item = Vec<EmbeddingRecord>>) {
        let mut load = self.begin_load();
        for page in pages {
            load.insert(page.iter().map(Prepared::of).collect());
        }
        self.finish_load(load);
    }

    /// True when the postings are complete (no load is running).
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// BM25 hits of `query`, best first (ties by id), at most `query.limit`; `None` while
    /// a load is running or once a partition ran out of slots (ask the SQL store then).
    pub fn search(&self, query: &KeywordQuery) -> Option<Vec<(MemoryId, f64)>> {
        if !self.is_ready() {
            return None;
        }
        let inner = self.read();
        if inner.overflowed {
            return None;
        }
        Some(inner.search(query))
    }

    /// Each seed's session neighbours within `radius` on either side, as (seed,
    /// neighbour) pairs: seeds in the given order (one named twice answers once), each
    /// seed's earlier neighbours nearest first, then its later ones nearest first. The
    /// same pairs as the SQL stores' `session_neighbours_of`, from memory; `None` while a
    /// load is running or once a partition ran out of slots (ask the SQL store then).
    pub fn session_neighbours(
        &self,
        seeds: &[SessionSeed],
        radius: usize,
    ) -> Option<Vec<(MemoryId, MemoryId)>> {
        if !self.is_ready() {
            return None;
        }
        let inner = self.read();
        if inner.overflowed {
            return None;
        }
        let mut pairs = Vec::new();
        let mut answered: Vec<&MemoryId> = Vec::with_capacity(seeds.len());
        for seed in seeds {
            if radius == 0 || answered.contains(&&seed.id) {
                continue;
            }
            answered.push(&seed.id);
            let Some(&partition) = inner.agents.get(&seed.agent_id) else {
                continue;
            };
            let found = inner.partitions[partition as usize].session_neighbours(
                seed.session_id.as_str(),
                seed.id.as_str(),
                radius,
            );
            pairs.extend(found.into_iter().map(|id| (seed.id.clone(), id)));
        }
        Some(pairs)
    }

    /// [`Self::session_neighbours`] of seeds named by id alone, each in the session it
    /// is filed under in its owner's partition, with that session per seed (`None`: not
    /// filed, or in no session) so that the caller can check it against the seeds once
    /// read. Lets recall gather its expansion before its candidates are read back.
    /// `None` while a load is running or once a partition ran out of slots.
    pub fn filed_session_neighbours(
        &self,
        ids: &[MemoryId],
        radius: usize,
    ) -> Option<FiledNeighbours> {
        if !self.is_ready() {
            return None;
        }
        let inner = self.read();
        if inner.overflowed {
            return None;
        }
        let mut found = FiledNeighbours::default();
        for (index, id) in ids.iter().enumerate() {
            let filed = inner.places.get(id.as_str()).and_then(|place| {
                let partition = &inner.partitions[place.partition as usize];
                let doc = partition.docs.get(place.slot as usize)?.as_ref()?;
                Some((partition, doc.session.clone()?))
            });
            let Some((partition, session)) = filed else {
                found.sessions.push(None);
                continue;
            };
            found.sessions.push(Some(session.to_string()));
            if radius == 0 || ids[..index].contains(id) {
                continue;
            }
            let neighbours = partition.session_neighbours(&session, id.as_str(), radius);
            found
                .pairs
                .extend(neighbours.into_iter().map(|n| (id.clone(), n)));
        }
        Some(found)
    }

    /// Memories indexed.
    pub fn len(&self) -> usize {
        self.read().places.len()
    }

    /// True when nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn journal(&self) -> std::sync::MutexGuard<'_, Option<Vec<Change>>> {
        match self.journal.lock() {
            Ok(journal) => journal,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        match self.inner.read() {
            Ok(inner) => inner,
            Err(poisoned) => poisoned.into_inner(),
        }
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
            session_id: None,
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

    fn find(index: &KeywordIndex, query: &KeywordQuery) -> Vec<(MemoryId, f64)> {
        index.search(query).expect("the index is loaded")
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
        let hits = find(&index, &query("alice", "grinder"));
        assert_eq!(
            ids(&hits),
            ["m2", "m1"],
            "two mentions beat one; bob's stays his"
        );
        assert!(hits[0].1 > hits[1].1);
        assert_eq!(
            ids(&find(&index, &query("bob", "grinders"))),
            ["m4"],
            "stems match"
        );
        assert!(find(&index, &query("carol", "grinder")).is_empty());
        assert!(
            find(&index, &query("alice", "the of")).is_empty(),
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
        assert_eq!(ids(&find(&index, &query("bob", "deploy lock"))), ["m2"]);
        let mut with_shared = query("bob", "deploy lock");
        with_shared.include_shared = true;
        assert_eq!(ids(&find(&index, &with_shared)), ["m2", "m1"]);
        let mut own = query("alice", "deploy lock");
        own.include_shared = true;
        let hits = find(&index, &own);
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
        assert_eq!(ids(&find(&index, &ranged)), ["m2"]);
        assert_eq!(
            find(&index, &query("alice", "café")).len(),
            2,
            "diacritics fold"
        );
        index.upsert(&[entry("m2", "alice", false, 9, "tea instead")]);
        assert_eq!(ids(&find(&index, &query("alice", "cafe"))), ["m1"]);
        assert_eq!(ids(&find(&index, &query("alice", "tea"))), ["m2"]);
        index.remove(&[MemoryId("m1".into()), MemoryId("unknown".into())]);
        assert!(find(&index, &query("alice", "cafe")).is_empty());
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
            let hits = find(&index, &query("alice", &format!("number{n}")));
            let live = n >= 400 || n % 5 == 0;
            assert_eq!(hits.len(), usize::from(live), "memory {n}");
        }
        let mut all = query("alice", "note");
        all.limit = 1000;
        all.include_shared = true;
        assert_eq!(find(&index, &all).len(), 500 - removed.len());
    }

    #[test]
    fn counts_past_what_a_posting_holds_score_exactly_and_survive_compaction() {
        let index = KeywordIndex::new();
        let heavy = format!("{} tail", vec!["echo"; 300].join(" "));
        // The fillers first, so that compaction renumbers the two that stay.
        let mut entries: Vec<EmbeddingRecord> = (0..100)
            .map(|n| entry(&format!("x{n:03}"), "alice", false, 1, "filler"))
            .collect();
        entries.push(entry("heavy", "alice", false, 1, &heavy));
        entries.push(entry("light", "alice", false, 1, "echo once tail"));
        index.upsert(&entries);
        let expected = |index: &KeywordIndex| {
            let inner = index.read();
            let rows = inner.places.len() as i64;
            let avgdl = inner.tokens as f64 / rows as f64;
            let idf = idf(rows, 2);
            let length = |id: &str| f64::from(inner.places[id].length);
            assert_eq!(length("heavy"), 301.0);
            (
                bm25(&[300.0], &[idf], length("heavy"), avgdl),
                bm25(&[1.0], &[idf], length("light"), avgdl),
            )
        };
        let check = |index: &KeywordIndex| {
            let hits = find(index, &query("alice", "echo"));
            assert_eq!(ids(&hits), ["heavy", "light"]);
            let (heavy, light) = expected(index);
            assert_eq!(hits[0].1, heavy, "300 occurrences count as 300, not 255");
            assert_eq!(hits[1].1, light);
        };
        check(&index);
        // Removing the fillers compacts the partition: slots are renumbered.
        let fillers: Vec<MemoryId> = (0..100).map(|n| MemoryId(format!("x{n:03}"))).collect();
        index.remove(&fillers);
        assert!(
            index.read().places["heavy"].slot < 100,
            "renumbered by compaction"
        );
        check(&index);
    }

    #[test]
    fn a_term_is_stored_once_for_every_agent_and_freed_with_its_last_posting() {
        let index = KeywordIndex::new();
        let entries: Vec<EmbeddingRecord> = (0..100)
            .map(|n| {
                entry(
                    &format!("m{n:03}"),
                    &format!("agent{}", n % 4),
                    false,
                    1,
                    "zephyr",
                )
            })
            .chain([entry("solo", "agent9", false, 1, "quokka")])
            .chain((0..95).map(|n| entry(&format!("f{n:03}"), "agent9", false, 1, "filler")))
            .collect();
        index.upsert(&entries);
        {
            let inner = index.read();
            let zephyr = inner.dictionary.get("zephyr").expect("interned");
            assert_eq!(inner.dictionary.uses[zephyr as usize], 4, "four partitions");
            assert_eq!(inner.dictionary.ids.len(), 3, "zephyr, quokka, filler");
        }
        // The last posting of "quokka" goes at the next compaction of agent9's partition.
        index.remove(&[MemoryId("solo".into())]);
        let fillers: Vec<MemoryId> = (0..80).map(|n| MemoryId(format!("f{n:03}"))).collect();
        index.remove(&fillers);
        {
            let inner = index.read();
            assert_eq!(inner.dictionary.get("quokka"), None, "freed");
            assert_eq!(inner.dictionary.free.len(), 1, "quokka's number");
            assert!(
                inner.dictionary.get("filler").is_some(),
                "fifteen fillers are left"
            );
        }
        // A new term takes a freed number, and every term is still found.
        index.upsert(&[entry("new", "agent9", false, 1, "axolotl zephyr")]);
        let inner = index.read();
        let axolotl = inner.dictionary.get("axolotl").expect("interned");
        assert!(axolotl < 3, "quokka's freed number was reused: {axolotl}");
        drop(inner);
        assert_eq!(ids(&find(&index, &query("agent9", "axolotl"))), ["new"]);
        assert_eq!(find(&index, &query("agent1", "zephyr")).len(), 10);
        assert_eq!(ids(&find(&index, &query("agent9", "filler")))[0], "f080");
        assert!(find(&index, &query("agent9", "quokka")).is_empty());
    }

    #[test]
    fn a_partition_out_of_slots_makes_searches_ask_the_sql_store() {
        let index = KeywordIndex::new();
        index.write().slot_limit = Some(3);
        let entries: Vec<EmbeddingRecord> = (0..3)
            .map(|n| entry(&format!("m{n}"), "alice", false, 1, "note"))
            .collect();
        index.upsert(&entries);
        assert_eq!(find(&index, &query("alice", "note")).len(), 3);
        index.upsert(&[entry("m3", "alice", false, 1, "note")]);
        assert_eq!(index.search(&query("alice", "note")), None);
        let seed = SessionSeed {
            agent_id: AgentId::parse("alice").unwrap(),
            session_id: SessionId::parse("s1").unwrap(),
            id: MemoryId("m0".into()),
        };
        assert_eq!(index.session_neighbours(&[seed], 1), None);
        assert!(index
            .filed_session_neighbours(&[MemoryId("m0".into())], 1)
            .is_none());
        // A fresh load (a restart) starts over.
        index.load([entries]);
        assert_eq!(find(&index, &query("alice", "note")).len(), 3);
    }

    #[test]
    fn a_load_answers_none_until_done_and_keeps_the_changes_made_meanwhile() {
        let index = KeywordIndex::new();
        index.upsert(&[entry("old", "alice", false, 1, "stale grinder note")]);
        let mut load = index.begin_load();
        assert!(
            index.search(&query("alice", "grinder")).is_none(),
            "ask SQL meanwhile"
        );
        load.insert(vec![
            Prepared::of(&entry("m1", "alice", false, 1, "grinder burrs")),
            Prepared::of(&entry("m2", "alice", false, 2, "grinder settings")),
        ]);
        // Changes committed while the pages were read: replayed in order at the end.
        index.upsert(&[entry("m3", "alice", false, 3, "new grinder")]);
        index.remove(&[MemoryId("m1".into())]);
        index.upsert(&[entry("m2", "alice", false, 2, "kettle settings")]);
        assert!(index.finish_load(load));
        assert_eq!(ids(&find(&index, &query("alice", "grinder"))), ["m3"]);
        assert_eq!(ids(&find(&index, &query("alice", "kettle"))), ["m2"]);
        assert_eq!(index.len(), 2, "what was indexed before the load is gone");

        // A load overtaken by a newer one is dropped; the newer one wins.
        let first = index.begin_load();
        let mut second = index.begin_load();
        second.insert(vec![Prepared::of(&entry(
            "m9", "alice", false, 1, "espresso",
        ))]);
        assert!(!index.is_latest(&first) && index.is_latest(&second));
        assert!(!index.finish_load(first));
        assert!(index.search(&query("alice", "espresso")).is_none());
        assert!(index.finish_load(second));
        assert_eq!(ids(&find(&index, &query("alice", "espresso"))), ["m9"]);
    }
    fn in_session(id: &str, agent: &str, session: &str) -> EmbeddingRecord {
        let mut record = entry(id, agent, false, 1, "turn");
        record.session_id = Some(SessionId::parse(session).unwrap());
        record
    }

    fn seed(agent: &str, id: &str, session: &str) -> SessionSeed {
        SessionSeed {
            agent_id: AgentId::parse(agent).unwrap(),
            id: MemoryId(id.into()),
            session_id: SessionId::parse(session).unwrap(),
        }
    }

    fn pairs(found: Option<Vec<(MemoryId, MemoryId)>>) -> Vec<(String, String)> {
        found
            .expect("the index is loaded")
            .into_iter()
            .map(|(seed, id)| (seed.0, id.0))
            .collect()
    }

    fn pair(seed: &str, id: &str) -> (String, String) {
        (seed.into(), id.into())
    }

    #[test]
    fn session_neighbours_are_the_nearest_by_id_on_each_side_within_the_agents_session() {
        let index = KeywordIndex::new();
        index.upsert(&[
            in_session("m05", "alice", "s1"),
            in_session("m01", "alice", "s1"),
            in_session("m03", "alice", "s1"),
            in_session("m02", "alice", "s2"),
            in_session("m04", "alice", "s1"),
            in_session("m07", "alice", "s1"),
            // Another agent's session of the same name, and a shared memory of theirs.
            in_session("m06", "bob", "s1"),
            entry("m08", "bob", true, 1, "turn"),
            // No session at all.
            entry("m09", "alice", false, 1, "turn"),
        ]);
        assert_eq!(
            pairs(index.session_neighbours(&[seed("alice", "m04", "s1")], 2)),
            [
                pair("m04", "m03"),
                pair("m04", "m01"),
                pair("m04", "m05"),
                pair("m04", "m07")
            ]
        );
        // Radius 1; a seed not filed (say, not indexed yet) still has neighbours; a
        // seed named twice answers once; an unknown agent or session answers nothing.
        assert_eq!(
            pairs(index.session_neighbours(
                &[
                    seed("alice", "m06", "s1"),
                    seed("alice", "m01", "s1"),
                    seed("alice", "m06", "s1"),
                    seed("carol", "m01", "s1"),
                    seed("alice", "m02", "s9"),
                ],
                1
            )),
            [pair("m06", "m05"), pair("m06", "m07"), pair("m01", "m03")]
        );
        assert_eq!(
            pairs(index.session_neighbours(&[seed("bob", "m06", "s1")], 3)),
            Vec::<(String, String)>::new(),
            "bob's session holds only the seed"
        );
        assert!(pairs(index.session_neighbours(&[seed("alice", "m04", "s1")], 0)).is_empty());
    }

    #[test]
    fn seeds_named_by_id_are_looked_up_in_the_session_they_are_filed_under() {
        let index = KeywordIndex::new();
        index.upsert(&[
            in_session("m1", "alice", "s1"),
            in_session("m2", "alice", "s1"),
            in_session("m3", "alice", "s1"),
            in_session("m4", "bob", "s1"),
            in_session("m5", "bob", "s1"),
            entry("m6", "alice", false, 1, "turn"),
        ]);
        let ids: Vec<MemoryId> = ["m2", "m5", "m6", "unknown", "m2"]
            .iter()
            .map(|id| MemoryId((*id).into()))
            .collect();
        let found = index.filed_session_neighbours(&ids, 1).expect("loaded");
        // Each seed in its owner's session; a seed named twice answers once.
        assert_eq!(
            pairs(Some(found.pairs)),
            [pair("m2", "m1"), pair("m2", "m3"), pair("m5", "m4")]
        );
        assert_eq!(
            found.sessions,
            [
                Some("s1".to_string()),
                Some("s1".to_string()),
                None,
                None,
                Some("s1".to_string())
            ]
        );
        // The same pairs as seeds that carry their session.
        assert_eq!(
            index.session_neighbours(&[seed("alice", "m2", "s1"), seed("bob", "m5", "s1")], 1),
            Some(pairs_of(&[("m2", "m1"), ("m2", "m3"), ("m5", "m4")]))
        );
        let mut load = index.begin_load();
        assert!(index.filed_session_neighbours(&ids, 1).is_none());
        load.insert(Vec::new());
        assert!(index.finish_load(load));
        assert_eq!(
            index.filed_session_neighbours(&ids[..1], 1),
            Some(FiledNeighbours {
                pairs: Vec::new(),
                sessions: vec![None]
            })
        );
    }

    fn pairs_of(expected: &[(&str, &str)]) -> Vec<(MemoryId, MemoryId)> {
        expected
            .iter()
            .map(|(seed, id)| (MemoryId((*seed).into()), MemoryId((*id).into())))
            .collect()
    }

    #[test]
    fn session_order_follows_removals_moves_and_compaction() {
        let index = KeywordIndex::new();
        let entries: Vec<EmbeddingRecord> = (0..300)
            .map(|n| in_session(&format!("m{n:03}"), "alice", "s1"))
            .collect();
        index.upsert(&entries);
        // Enough removals to compact the partition (slots renumbered, ids kept).
        let removed: Vec<MemoryId> = (1..200)
            .filter(|n| n % 10 != 0)
            .map(|n| MemoryId(format!("m{n:03}")))
            .collect();
        index.remove(&removed);
        assert_eq!(
            pairs(index.session_neighbours(&[seed("alice", "m100", "s1")], 2)),
            [
                pair("m100", "m090"),
                pair("m100", "m080"),
                pair("m100", "m110"),
                pair("m100", "m120")
            ]
        );
        // Moved to another session: gone from the old order, filed in the new one.
        index.upsert(&[in_session("m110", "alice", "s2")]);
        index.upsert(&[in_session("m500", "alice", "s2")]);
        assert_eq!(
            pairs(index.session_neighbours(&[seed("alice", "m100", "s1")], 1)),
            [pair("m100", "m090"), pair("m100", "m120")]
        );
        assert_eq!(
            pairs(index.session_neighbours(&[seed("alice", "m110", "s2")], 5)),
            [pair("m110", "m500")]
        );
        // The last memory of a session gone: the session is forgotten.
        index.remove(&[MemoryId("m110".into()), MemoryId("m500".into())]);
        assert!(pairs(index.session_neighbours(&[seed("alice", "m110", "s2")], 5)).is_empty());
        let inner = index.inner.read().unwrap();
        assert_eq!(inner.partitions[0].sessions.len(), 1);
    }

    #[test]
    fn session_neighbours_answer_none_while_loading_and_include_the_journaled_changes() {
        let index = KeywordIndex::new();
        index.upsert(&[in_session("m1", "alice", "s1")]);
        let mut load = index.begin_load();
        assert!(index
            .session_neighbours(&[seed("alice", "m2", "s1")], 1)
            .is_none());
        load.insert(vec![
            Prepared::of(&in_session("m1", "alice", "s1")),
            Prepared::of(&in_session("m3", "alice", "s1")),
        ]);
        index.upsert(&[in_session("m4", "alice", "s1")]);
        index.remove(&[MemoryId("m1".into())]);
        assert!(index.finish_load(load));
        assert_eq!(
            pairs(index.session_neighbours(&[seed("alice", "m2", "s1")], 2)),
            [pair("m2", "m3"), pair("m2", "m4")]
        );
    }
}

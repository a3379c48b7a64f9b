//! The row cache: decoded copies of the memories recall reads back by id, so a question
//! does not read and decode its 50 candidates from SQL each time.
//!
//! A copy is never answered unchecked: every read asks the store for the
//! [`RowStamp`]s of the copies it would answer, in the statement that reads what it does
//! not hold, and reads again, whole, every row whose stamp moved or that did not answer
//! one (deleted, or not readable as a stamp). So a copy is exactly what the store holds at the time of the
//! read, whichever process changed the row, as long as every change of a row moves its
//! stamp: edits, status changes and consolidation write the next version, reinforcement
//! adds an access. The one change no stamp sees is a row deleted and written again with
//! the same id, version and access count (an import after an erase), so this process
//! forgets what it holds when it deletes, erases or imports.
//!
//! Bounded by entry count in two generations: a hit moves a copy into the newer one,
//! and when the newer one is full the older one is dropped, so what is not used for a
//! generation goes (an LRU to within a factor of two, without per-entry bookkeeping).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::error::MemoryResult;
use crate::model::{Memory, MemoryId};
use crate::store::{MemoryStore, RowStamp};

/// Decoded memories by id, in two generations of at most half the capacity each (one
/// of one copy when the capacity is one).
#[derive(Debug, Default)]
pub struct RowCache {
    /// Most copies held; 0 turns the cache off.
    capacity: usize,
    /// Copies stored or used since the last rotation.
    newer: HashMap<MemoryId, Memory>,
    /// The generation before: dropped at the next rotation unless used meanwhile.
    older: HashMap<MemoryId, Memory>,
}

impl RowCache {
    /// An empty cache holding at most `capacity` copies (0: off).
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            ..Self::default()
        }
    }

    /// Whether the cache holds anything at all (a capacity of 0 never does).
    pub fn is_on(&self) -> bool {
        self.capacity > 0
    }

    /// Copies held in both generations.
    pub fn len(&self) -> usize {
        self.newer.len() + self.older.len()
    }

    /// Whether no copy is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The held copies of `ids` (moved into the newer generation) and the ids it does
    /// not hold, in the order asked.
    pub fn lookup(&mut self, ids: &[MemoryId]) -> (Vec<Memory>, Vec<MemoryId>) {
        let mut held = Vec::new();
        let mut missing = Vec::new();
        for id in ids {
            if let Some(memory) = self.newer.get(id) {
                held.push(memory.clone());
            } else if let Some(memory) = self.older.remove(id) {
                held.push(memory.clone());
                self.put(memory);
            } else {
                missing.push(id.clone());
            }
        }
        (held, missing)
    }

    /// Hold copies of memories just read from the store.
    pub fn keep(&mut self, memories: &[Memory]) {
        for memory in memories {
            self.older.remove(&memory.id);
            self.put(memory.clone());
        }
    }

    /// Apply a reinforcement the store has just written (one more access, the access
    /// time at least `at`, to the microsecond) to the held copies of `ids`, as the SQL
    /// stores' statement did,
    /// so this process's own reinforcement does not make its copies stale. A copy that
    /// was stale already stays stale: its stamp still differs from the row's.
    pub fn touched(&mut self, ids: &[MemoryId], at: chrono::DateTime<chrono::Utc>) {
        // The SQL stores keep microseconds.
        let at = chrono::SubsecRound::trunc_subsecs(at, 6);
        for id in ids {
            for generation in [&mut self.newer, &mut self.older] {
                if let Some(memory) = generation.get_mut(id) {
                    memory.access_count = memory.access_count.saturating_add(1);
                    memory.last_accessed_at = memory.last_accessed_at.max(at);
                }
            }
        }
    }

    /// Drop the copies of `ids`.
    pub fn forget(&mut self, ids: &[MemoryId]) {
        for id in ids {
            self.newer.remove(id);
            self.older.remove(id);
        }
    }

    /// Drop every copy.
    pub fn clear(&mut self) {
        self.newer.clear();
        self.older.clear();
    }

    /// Put one copy in the newer generation, rotating when it is full.
    fn put(&mut self, memory: Memory) {
        if self.capacity == 0 {
            return;
        }
        if !self.newer.contains_key(&memory.id) {
            if self.newer.len() >= (self.capacity / 2).max(1) {
                self.older = std::mem::take(&mut self.newer);
            }
            if self.newer.len() + self.older.len() >= self.capacity {
                self.older.clear();
            }
        }
        self.newer.insert(memory.id.clone(), memory);
    }
}

/// Which held copies still match their rows' stamps (answered as they are), and the ids
/// to read again: a stamp that moved, or a row that answered none.
pub fn still_current(
    held: Vec<Memory>,
    stamps: &[(MemoryId, RowStamp)],
) -> (Vec<Memory>, Vec<MemoryId>) {
    let stamps: HashMap<&MemoryId, RowStamp> = stamps.iter().map(|(id, s)| (id, *s)).collect();
    let mut current = Vec::with_capacity(held.len());
    let mut stale = Vec::new();
    for memory in held {
        if stamps.get(&memory.id) == Some(&RowStamp::of(&memory)) {
            current.push(memory);
        } else {
            stale.push(memory.id);
        }
    }
    (current, stale)
}

/// The row cache as the episodic actor and its read tasks share it.
pub type SharedRows = Arc<Mutex<RowCache>>;

/// Run `change` on the cache (a poisoned lock only means a panic mid-change: start over empty).
pub fn with_rows<T>(rows: &SharedRows, change: impl FnOnce(&mut RowCache) -> T) -> T {
    let mut guard = rows.lock().unwrap_or_else(|poisoned| {
        let mut guard = poisoned.into_inner();
        guard.clear();
        guard
    });
    change(&mut guard)
}

/// `MemoryStore::get_many` through the cache: one read checks the held copies' stamps
/// and reads what is not held; a copy whose stamp moved is read again in a second.
pub async fn get_many(
    store: &dyn MemoryStore,
    rows: &SharedRows,
    ids: &[MemoryId],
) -> MemoryResult<Vec<Memory>> {
    let (held, missing) = with_rows(rows, |cache| {
        if cache.is_on() {
            cache.lookup(ids)
        } else {
            (Vec::new(), ids.to_vec())
        }
    });
    if held.is_empty() {
        let read = store.get_many(&missing).await?;
        with_rows(rows, |cache| cache.keep(&read));
        return Ok(read);
    }
    let checked: Vec<MemoryId> = held.iter().map(|m| m.id.clone()).collect();
    let (stamps, mut read) = store.stamps_and_memories(&checked, &missing).await?;
    let (mut found, stale) = still_current(held, &stamps);
    if !stale.is_empty() {
        with_rows(rows, |cache| cache.forget(&stale));
        read.extend(store.get_many(&stale).await?);
    }
    with_rows(rows, |cache| cache.keep(&read));
    found.extend(read);
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memory(id: &str) -> Memory {
        let mut memory = crate::testing::memory_fixture("a", id, chrono::DateTime::UNIX_EPOCH);
        memory.id = MemoryId(id.to_string());
        memory
    }

    fn ids(names: &[&str]) -> Vec<MemoryId> {
        names.iter().map(|n| MemoryId(n.to_string())).collect()
    }

    fn held_ids(memories: &[Memory]) -> Vec<&str> {
        memories.iter().map(|m| m.id.as_str()).collect()
    }

    #[test]
    fn held_copies_are_answered_and_the_rest_named_in_the_order_asked() {
        let mut cache = RowCache::new(10);
        cache.keep(&[memory("b"), memory("d")]);
        let (held, missing) = cache.lookup(&ids(&["a", "b", "c", "d"]));
        assert_eq!(held_ids(&held), ["b", "d"]);
        assert_eq!(missing, ids(&["a", "c"]));
    }

    #[test]
    fn a_capacity_of_zero_holds_nothing() {
        let mut cache = RowCache::new(0);
        cache.keep(&[memory("a")]);
        assert!(!cache.is_on());
        assert!(cache.is_empty());
        assert_eq!(cache.lookup(&ids(&["a"])).1, ids(&["a"]));
    }

    #[test]
    fn what_goes_unused_for_a_generation_is_dropped_and_what_is_used_stays() {
        let mut cache = RowCache::new(4);
        cache.keep(&[memory("a"), memory("b")]);
        // The newer generation (2) is full: c rotates a and b into the older one.
        cache.keep(&[memory("c")]);
        // A hit on a brings it back into the newer generation.
        assert_eq!(held_ids(&cache.lookup(&ids(&["a"])).0), ["a"]);
        // Full again: the next copy rotates, dropping b, which nobody used.
        cache.keep(&[memory("d")]);
        let (held, missing) = cache.lookup(&ids(&["a", "b", "c", "d"]));
        assert_eq!(held_ids(&held), ["a", "c", "d"]);
        assert_eq!(missing, ids(&["b"]));
        assert!(cache.len() <= 4);
    }

    #[test]
    fn the_cache_never_holds_more_than_its_capacity() {
        let mut cache = RowCache::new(5);
        for n in 0..100 {
            cache.keep(&[memory(&format!("m{n}"))]);
            assert!(cache.len() <= 5, "{} copies held", cache.len());
        }
        // The latest copies are the ones held.
        assert_eq!(cache.lookup(&ids(&["m99"])).0.len(), 1);
    }

    #[test]
    fn a_capacity_of_one_holds_the_latest_copy() {
        let mut cache = RowCache::new(1);
        cache.keep(&[memory("a"), memory("b")]);
        assert_eq!(cache.len(), 1);
        assert_eq!(cache.lookup(&ids(&["a", "b"])).1, ids(&["a"]));
    }

    #[test]
    fn a_reinforcement_moves_the_held_copy_as_the_store_moves_the_row() {
        let at = chrono::DateTime::UNIX_EPOCH + chrono::Duration::nanoseconds(86_400_000_000_123);
        let row = memory("a");
        let mut cache = RowCache::new(10);
        cache.keep(std::slice::from_ref(&row));
        cache.touched(&ids(&["a", "absent"]), at);
        let held = cache.lookup(&ids(&["a"])).0.remove(0);
        let stored = chrono::DateTime::UNIX_EPOCH + chrono::Duration::microseconds(86_400_000_000);
        assert_eq!(held.access_count, row.access_count + 1);
        assert_eq!(held.last_accessed_at, stored, "kept to the microsecond");
        // An earlier time does not move the access time back.
        cache.touched(&ids(&["a"]), chrono::DateTime::UNIX_EPOCH);
        let held = cache.lookup(&ids(&["a"])).0.remove(0);
        assert_eq!(held.access_count, row.access_count + 2);
        assert_eq!(held.last_accessed_at, stored);
    }

    #[test]
    fn forgotten_and_cleared_copies_are_read_again() {
        let mut cache = RowCache::new(10);
        cache.keep(&[memory("a"), memory("b")]);
        cache.forget(&ids(&["a"]));
        assert_eq!(cache.lookup(&ids(&["a", "b"])).1, ids(&["a"]));
        cache.clear();
        assert!(cache.is_empty());
    }

    #[test]
    fn a_copy_whose_stamp_moved_or_went_missing_is_read_again() {
        let same = memory("same");
        let edited = memory("edited");
        let reinforced = memory("reinforced");
        let deleted = memory("deleted");
        let mut stamps = vec![
            (same.id.clone(), RowStamp::of(&same)),
            (edited.id.clone(), RowStamp::of(&edited)),
            (reinforced.id.clone(), RowStamp::of(&reinforced)),
        ];
        stamps[1].1.version += 1;
        stamps[2].1.access_count += 1;
        let (current, stale) = still_current(vec![same, edited, reinforced, deleted], &stamps);
        assert_eq!(held_ids(&current), ["same"]);
        assert_eq!(stale, ids(&["edited", "reinforced", "deleted"]));
    }
}

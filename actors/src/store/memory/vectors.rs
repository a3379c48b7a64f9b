//! The flat vector index: exact scans of contiguous vectors per partition (an agent's
//! collection, or the shared pool's).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};

use smallvec::SmallVec;

use crate::model::{AgentId, MemoryId};
use crate::store::{Collection, EmbeddingRecord, VectorIndex, VectorQuery};

/// Partition key of the flat index: an agent's collection, or the shared pool's.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PartitionKey {
    /// One agent's private vectors of a collection.
    Agent(AgentId, Collection),
    /// Vectors every agent may see, of a collection.
    Shared(Collection),
}

/// Contiguous vectors of one partition, scanned exactly.
///
/// Each vector is held as one byte per dimension and a scale (scalar quantization: the
/// largest component maps to ±127): a quarter of the floats' memory, which is most of
/// the index's. A score is the query's floats against the dequantized vector: within
/// 1e-3 of the float dot product for dense unit vectors of 256 or more dimensions, 2e-3
/// at 64, 2.5e-3 for sparse ones (pinned by
/// `quantized_scores_stay_within_a_few_thousandths_of_the_float_dot_product`).
#[derive(Debug, Default)]
pub struct FlatPartition {
    /// Ids in slot order (each the allocation of its key in the index's `locations`).
    ids: Vec<Arc<str>>,
    /// Types in slot order (for type filters).
    types: Vec<crate::model::MemoryType>,
    /// `ids.len() × dimension` quantized components, slot after slot.
    codes: Vec<i8>,
    /// Each slot's scale: component = code × scale.
    scales: Vec<f32>,
}

/// `vector` as codes (written into `codes`) and the scale that restores it.
fn quantize(vector: &[f32], codes: &mut [i8]) -> f32 {
    let largest = vector.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    if largest == 0.0 || !largest.is_finite() {
        codes.fill(0);
        return 0.0;
    }
    let step = largest / 127.0;
    for (code, x) in codes.iter_mut().zip(vector) {
        *code = (x / step).round().clamp(-127.0, 127.0) as i8;
    }
    // The scale that gives the restored vector the original's length (within rounding),
    // so a unit vector comes back a unit vector: an HNSW graph built from this index
    // admits only those.
    let length = |squares: f32| squares.sqrt();
    let code_length = length(codes.iter().map(|c| f32::from(*c).powi(2)).sum());
    if code_length == 0.0 {
        return 0.0;
    }
    length(vector.iter().map(|x| x * x).sum()) / code_length
}

/// `vector` as the index holds it (quantized, then restored): what its scores are
/// computed against.
#[cfg(test)]
pub(crate) fn as_stored(vector: &[f32]) -> Vec<f32> {
    let mut codes = vec![0i8; vector.len()];
    let scale = quantize(vector, &mut codes);
    codes.iter().map(|c| f32::from(*c) * scale).collect()
}

/// The dot product of `query` with the vector `codes × scale`.
pub fn dot_codes(query: &[f32], codes: &[i8], scale: f32) -> f32 {
    crate::embedding::lane_dot(query, codes, f32::from) * scale
}

impl FlatPartition {
    /// The vector length of this partition's entries (0 while empty).
    fn dimension(&self) -> usize {
        if self.ids.is_empty() {
            0
        } else {
            self.codes.len() / self.ids.len()
        }
    }

    /// File `record`'s vector under `id` in a new slot; returns the slot.
    fn push(&mut self, id: Arc<str>, record: &EmbeddingRecord) -> u32 {
        let slot = u32::try_from(self.ids.len()).unwrap_or(u32::MAX);
        self.ids.push(id);
        self.types.push(record.memory_type);
        let start = self.codes.len();
        self.codes.resize(start + record.vector.len(), 0);
        self.scales
            .push(quantize(&record.vector, &mut self.codes[start..]));
        slot
    }

    /// Empty `slot` by moving the last vector into it; returns the id that moved
    /// there, if another did.
    fn swap_remove(&mut self, slot: u32) -> Option<Arc<str>> {
        let dimension = self.dimension();
        let slot = slot as usize;
        if slot >= self.ids.len() {
            return None;
        }
        let last = self.ids.len() - 1;
        self.ids.swap_remove(slot);
        self.types.swap_remove(slot);
        self.scales.swap_remove(slot);
        if slot != last {
            self.codes
                .copy_within(last * dimension..(last + 1) * dimension, slot * dimension);
        }
        self.codes.truncate(last * dimension);
        if self.ids.is_empty() {
            // An emptied partition keeps its number but none of its buffers.
            *self = Self::default();
        }
        (slot != last).then(|| self.ids[slot].clone())
    }

    /// The vector stored in `slot`, dequantized.
    fn vector(&self, slot: usize, dimension: usize) -> Vec<f32> {
        let scale = self.scales[slot];
        self.codes[slot * dimension..(slot + 1) * dimension]
            .iter()
            .map(|c| f32::from(*c) * scale)
            .collect()
    }

    /// The dot product of `query` with the vector stored in `slot`.
    fn similarity_at(&self, query: &[f32], slot: u32) -> Option<f32> {
        let dimension = query.len();
        let slot = slot as usize;
        let codes = self.codes.get(slot * dimension..(slot + 1) * dimension)?;
        Some(dot_codes(query, codes, *self.scales.get(slot)?))
    }

    /// Exact top-`limit` by dot product, honouring a type filter.
    pub fn search(
        &self,
        query: &[f32],
        types: &[crate::model::MemoryType],
        limit: usize,
    ) -> Vec<(MemoryId, f32)> {
        let dimension = query.len();
        if dimension == 0 || self.ids.is_empty() || self.dimension() != dimension {
            return Vec::new();
        }
        let mut scored: Vec<(usize, f32)> = self
            .codes
            .chunks_exact(dimension)
            .zip(&self.scales)
            .enumerate()
            .filter(|(slot, _)| types.is_empty() || types.contains(&self.types[*slot]))
            .map(|(slot, (codes, scale))| (slot, dot_codes(query, codes, *scale)))
            .collect();
        let keep = limit.min(scored.len());
        if keep == 0 {
            return Vec::new();
        }
        scored.select_nth_unstable_by(keep - 1, |a, b| b.1.total_cmp(&a.1));
        scored.truncate(keep);
        scored.sort_by(|a, b| b.1.total_cmp(&a.1));
        scored
            .into_iter()
            .map(|(slot, score)| (MemoryId(self.ids[slot].to_string()), score))
            .collect()
    }
}

/// Exact (brute-force) vector index, partitioned by agent and collection.
///
/// Per-agent partitions stay small in practice, where an exact scan is both faster and
/// better than an approximate graph; the service wraps it with HNSW for big partitions.
#[derive(Debug, Default)]
pub struct FlatVectorIndex {
    /// The partitions and where each id is, behind one lock.
    inner: RwLock<FlatInner>,
}

/// Where one memory's vector is: (partition number, slot), its agent's partition first,
/// then the shared pool's when shared.
type Places = SmallVec<[(u32, u32); 2]>;

/// Everything behind the flat index's lock. Each id is one allocation, shared by its
/// key here and its slot in each partition (an id held three times as a `String` was a
/// third of the index's memory at 100,000 memories).
#[derive(Debug, Default)]
struct FlatInner {
    /// Partition key → its number in `partitions`.
    numbers: HashMap<PartitionKey, u32>,
    /// Partitions by number (an emptied one keeps its number, without buffers).
    partitions: Vec<FlatPartition>,
    /// Each indexed id → its places.
    locations: HashMap<Arc<str>, Places>,
}

impl FlatInner {
    /// The partition of `key`, if it was ever filled.
    fn partition(&self, key: &PartitionKey) -> Option<&FlatPartition> {
        let number = *self.numbers.get(key)?;
        self.partitions.get(number as usize)
    }

    /// Unindex `id` (nothing if it is not indexed).
    fn remove(&mut self, id: &str) {
        let Some(places) = self.locations.remove(id) else {
            return;
        };
        for (number, slot) in places {
            let Some(moved) = self.partitions[number as usize].swap_remove(slot) else {
                continue;
            };
            if let Some(place) = self
                .locations
                .get_mut(&*moved)
                .and_then(|places| places.iter_mut().find(|(n, _)| *n == number))
            {
                place.1 = slot;
            }
        }
    }

    /// Index `record` (it must not be indexed).
    fn insert(&mut self, record: &EmbeddingRecord) {
        let id: Arc<str> = Arc::from(record.id.as_str());
        let mut places = Places::new();
        for key in FlatVectorIndex::partitions_of(record) {
            let next = u32::try_from(self.partitions.len()).unwrap_or(u32::MAX);
            let number = *self.numbers.entry(key).or_insert(next);
            if number == next {
                self.partitions.push(FlatPartition::default());
            }
            let slot = self.partitions[number as usize].push(id.clone(), record);
            places.push((number, slot));
        }
        self.locations.insert(id, places);
    }
}

impl FlatVectorIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// The partitions a record is indexed in: its agent's collection, plus the shared pool's when shared.
    pub fn partitions_of(record: &EmbeddingRecord) -> Vec<PartitionKey> {
        let collection = Collection::of(record.memory_type);
        let mut partitions = vec![PartitionKey::Agent(record.agent_id.clone(), collection)];
        if record.shared {
            partitions.push(PartitionKey::Shared(collection));
        }
        partitions
    }
}

impl FlatVectorIndex {
    /// The partitions a query reads: the agent's collections for the wanted types, plus the shared pool's.
    pub fn partitions_for_query(query: &VectorQuery) -> Vec<PartitionKey> {
        let collections: Vec<Collection> = if query.types.is_empty() {
            vec![
                Collection::Semantic,
                Collection::Procedural,
                Collection::Experience,
            ]
        } else {
            let mut c: Vec<Collection> = query.types.iter().map(|t| Collection::of(*t)).collect();
            c.sort();
            c.dedup();
            c
        };
        let mut keys = Vec::new();
        for collection in collections {
            keys.push(PartitionKey::Agent(query.agent_id.clone(), collection));
            if query.include_shared {
                keys.push(PartitionKey::Shared(collection));
            }
        }
        keys
    }

    /// Number of vectors in one partition.
    pub fn partition_len(&self, key: &PartitionKey) -> usize {
        self.read().partition(key).map_or(0, |p| p.ids.len())
    }

    /// Every (id, type, vector) of one partition, the vectors dequantized.
    pub fn partition_entries(
        &self,
        key: &PartitionKey,
    ) -> Vec<(MemoryId, crate::model::MemoryType, Vec<f32>)> {
        let inner = self.read();
        let Some(flat) = inner.partition(key) else {
            return Vec::new();
        };
        let dimension = flat.dimension();
        flat.ids
            .iter()
            .zip(&flat.types)
            .enumerate()
            .map(|(slot, (id, t))| (MemoryId(id.to_string()), *t, flat.vector(slot, dimension)))
            .collect()
    }

    /// Exact search of one partition.
    pub fn search_partition(
        &self,
        key: &PartitionKey,
        vector: &[f32],
        types: &[crate::model::MemoryType],
        limit: usize,
    ) -> Vec<(MemoryId, f32)> {
        self.read()
            .partition(key)
            .map(|p| p.search(vector, types, limit))
            .unwrap_or_default()
    }

    /// Exact similarity of `vector` to each of `ids` that is indexed (in its first partition).
    pub fn similarity_of(&self, vector: &[f32], ids: &[MemoryId]) -> Vec<(MemoryId, f32)> {
        let inner = self.read();
        ids.iter()
            .filter_map(|id| {
                let &(number, slot) = inner.locations.get(id.as_str())?.first()?;
                let score = inner.partitions[number as usize].similarity_at(vector, slot)?;
                Some((id.clone(), score))
            })
            .collect()
    }

    /// The type of an indexed memory, if indexed.
    pub fn contains(&self, id: &MemoryId) -> bool {
        self.read().locations.contains_key(id.as_str())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, FlatInner> {
        self.inner.read().expect("vector index lock poisoned")
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, FlatInner> {
        self.inner.write().expect("vector index lock poisoned")
    }
}

/// Sort hits best first, keep each id once, and cut to `limit`.
pub fn merge_hits(mut hits: Vec<(MemoryId, f32)>, limit: usize) -> Vec<(MemoryId, f32)> {
    hits.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let mut seen = HashSet::new();
    hits.retain(|(id, _)| seen.insert(id.clone()));
    hits.truncate(limit);
    hits
}

impl VectorIndex for FlatVectorIndex {
    fn backend_name(&self) -> &'static str {
        "flat"
    }

    fn upsert(&self, entries: &[EmbeddingRecord]) {
        let mut inner = self.write();
        for entry in entries {
            inner.remove(entry.id.as_str());
            inner.insert(entry);
        }
    }

    fn remove(&self, ids: &[MemoryId]) {
        let mut inner = self.write();
        for id in ids {
            inner.remove(id.as_str());
        }
    }

    fn clear(&self) {
        *self.write() = FlatInner::default();
    }

    fn similarity(&self, vector: &[f32], ids: &[MemoryId]) -> Vec<(MemoryId, f32)> {
        self.similarity_of(vector, ids)
    }

    fn search(&self, query: &VectorQuery) -> Vec<(MemoryId, f32)> {
        let inner = self.read();
        let mut hits: Vec<(MemoryId, f32)> = Vec::new();
        for key in Self::partitions_for_query(query) {
            if let Some(flat) = inner.partition(&key) {
                hits.extend(flat.search(&query.vector, &query.types, query.limit));
            }
        }
        merge_hits(hits, query.limit)
    }

    fn len(&self) -> usize {
        self.read().locations.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embedding::dot;
    use crate::model::MemoryType;
    use chrono::DateTime;

    fn record(
        id: &str,
        agent: &str,
        memory_type: MemoryType,
        shared: bool,
        vector: Vec<f32>,
    ) -> EmbeddingRecord {
        EmbeddingRecord {
            id: MemoryId(id.into()),
            agent_id: AgentId::parse(agent).unwrap(),
            memory_type,
            shared,
            vector,
            occurred_at: DateTime::UNIX_EPOCH,
            text: String::new(),
            session_id: None,
        }
    }

    #[test]
    fn flat_index_isolates_agents_and_honours_shared() {
        let index = FlatVectorIndex::new();
        index.upsert(&[
            record("a1", "alice", MemoryType::Episodic, false, vec![1.0, 0.0]),
            record("b1", "bob", MemoryType::Episodic, false, vec![1.0, 0.0]),
            record("b2", "bob", MemoryType::Semantic, true, vec![0.9, 0.1]),
        ]);
        let query = |include_shared| VectorQuery {
            agent_id: AgentId::parse("alice").unwrap(),
            include_shared,
            types: vec![],
            vector: vec![1.0, 0.0],
            limit: 10,
        };
        let ids: Vec<String> = index
            .search(&query(false))
            .into_iter()
            .map(|(id, _)| id.0)
            .collect();
        assert_eq!(ids, vec!["a1"]);
        let ids: Vec<String> = index
            .search(&query(true))
            .into_iter()
            .map(|(id, _)| id.0)
            .collect();
        assert_eq!(ids, vec!["a1", "b2"]);
    }

    /// A unit vector of `dimension` from a deterministic generator; `sparse` keeps only
    /// every seventh component (like the hashing embedder's few large buckets).
    fn unit_vector(seed: u64, dimension: usize, sparse: bool) -> Vec<f32> {
        let mut state = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let mut vector: Vec<f32> = (0..dimension)
            .map(|i| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let x = (state % 20_000) as f32 / 10_000.0 - 1.0;
                if sparse && i % 7 != 0 {
                    0.0
                } else {
                    x
                }
            })
            .collect();
        let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        vector.iter_mut().for_each(|x| *x /= norm);
        vector
    }

    #[test]
    fn quantized_scores_stay_within_a_few_thousandths_of_the_float_dot_product() {
        // Dense unit vectors (what the model and static embedders produce); fewer
        // dimensions, or a seventh of the components set, put more weight on each code.
        for (dimension, sparse, bound) in [
            (256, false, 1e-3),
            (384, false, 1e-3),
            (64, false, 2e-3),
            (256, true, 2.5e-3),
        ] {
            let mut worst = 0.0f32;
            for seed in 1..200u64 {
                let stored = unit_vector(seed, dimension, sparse);
                let query = unit_vector(seed + 1_000, dimension, sparse);
                let mut codes = vec![0i8; dimension];
                let scale = quantize(&stored, &mut codes);
                worst = worst.max((dot_codes(&query, &codes, scale) - dot(&query, &stored)).abs());
                let itself = dot_codes(&stored, &codes, scale);
                worst = worst.max((itself - 1.0).abs());
                let restored = dot_codes(&as_stored(&stored), &codes, scale);
                assert!((restored - 1.0).abs() < 1e-5, "restored length² {restored}");
            }
            assert!(
                worst < bound,
                "dimension {dimension}, sparse {sparse}: worst error {worst}"
            );
        }
        let mut codes = vec![0i8; 4];
        assert_eq!(quantize(&[0.0; 4], &mut codes), 0.0);
        assert_eq!(dot_codes(&[1.0; 4], &codes, 0.0), 0.0);
    }

    #[test]
    fn a_removed_slot_takes_the_last_vector_whole() {
        let index = FlatVectorIndex::new();
        let vectors: Vec<Vec<f32>> = (0..5).map(|i| unit_vector(i + 1, 256, false)).collect();
        index.upsert(
            &vectors
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    record(
                        &format!("m{i}"),
                        "x",
                        MemoryType::Episodic,
                        false,
                        v.clone(),
                    )
                })
                .collect::<Vec<_>>(),
        );
        index.remove(&[MemoryId("m1".into())]);
        for (i, vector) in vectors.iter().enumerate().filter(|(i, _)| *i != 1) {
            let id = MemoryId(format!("m{i}"));
            let score = index.similarity(vector, std::slice::from_ref(&id));
            assert_eq!(score.len(), 1);
            assert!(
                (score[0].1 - 1.0).abs() < 1e-3,
                "m{i} scores {}",
                score[0].1
            );
        }
        let key = PartitionKey::Agent(AgentId::parse("x").unwrap(), Collection::Experience);
        let entries = index.partition_entries(&key);
        assert_eq!(entries.len(), 4);
        for (id, _, vector) in entries {
            let slot: usize = id.0[1..].parse().unwrap();
            assert!(
                dot(&vector, &vectors[slot]) > 0.999,
                "{} came back changed",
                id.0
            );
        }
    }

    #[test]
    fn an_id_moved_by_a_removal_is_found_in_each_of_its_partitions() {
        let index = FlatVectorIndex::new();
        let vectors: Vec<Vec<f32>> = (0..4).map(|i| unit_vector(i + 7, 64, false)).collect();
        let records: Vec<EmbeddingRecord> = vectors
            .iter()
            .enumerate()
            .map(|(i, v)| record(&format!("s{i}"), "x", MemoryType::Semantic, true, v.clone()))
            .collect();
        index.upsert(&records);
        // s3 moves into s0's slot in x's partition and in the shared pool.
        index.remove(&[MemoryId("s0".into())]);
        let from = |agent: &str, vector: &[f32]| VectorQuery {
            agent_id: AgentId::parse(agent).unwrap(),
            include_shared: true,
            types: vec![],
            vector: vector.to_vec(),
            limit: 1,
        };
        for (i, vector) in vectors.iter().enumerate().skip(1) {
            let id = format!("s{i}");
            for agent in ["x", "y"] {
                let hits = index.search(&from(agent, vector));
                assert_eq!(hits[0].0 .0, id, "{agent} finds {id}");
                assert!((hits[0].1 - 1.0).abs() < 2e-3, "{}", hits[0].1);
            }
            let score = index.similarity(vector, &[MemoryId(id.clone())]);
            assert!((score[0].1 - 1.0).abs() < 2e-3, "{id}: {}", score[0].1);
        }
        // Emptied partitions take vectors again.
        index.remove(&[1, 2, 3].map(|i| MemoryId(format!("s{i}"))));
        assert_eq!(index.len(), 0);
        assert!(index.search(&from("y", &vectors[1])).is_empty());
        index.upsert(&records[..1]);
        assert_eq!(index.search(&from("y", &vectors[0]))[0].0 .0, "s0");
        let shared = PartitionKey::Shared(Collection::Semantic);
        assert_eq!(index.partition_len(&shared), 1);
    }

    #[test]
    fn flat_index_remove_and_reinsert() {
        let index = FlatVectorIndex::new();
        index.upsert(&[
            record("a", "x", MemoryType::Episodic, false, vec![1.0, 0.0]),
            record("b", "x", MemoryType::Episodic, false, vec![0.0, 1.0]),
            record("c", "x", MemoryType::Episodic, false, vec![0.7, 0.7]),
        ]);
        index.remove(&[MemoryId("a".into())]);
        assert_eq!(index.len(), 2);
        let query = VectorQuery {
            agent_id: AgentId::parse("x").unwrap(),
            include_shared: false,
            types: vec![],
            vector: vec![1.0, 0.0],
            limit: 1,
        };
        assert_eq!(index.search(&query)[0].0 .0, "c");
        index.upsert(&[record(
            "b",
            "x",
            MemoryType::Episodic,
            false,
            vec![1.0, 0.0],
        )]);
        assert_eq!(index.search(&query)[0].0 .0, "b");
        assert_eq!(index.len(), 2);
    }
}

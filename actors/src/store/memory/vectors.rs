//! The flat vector index: exact scans of contiguous vectors per partition (an agent's
//! collection, or the shared pool's).

use std::collections::{HashMap, HashSet};
use std::sync::RwLock;

use crate::embedding::dot;
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
#[derive(Debug, Default)]
pub struct FlatPartition {
    /// Ids in slot order.
    pub ids: Vec<MemoryId>,
    /// Types in slot order (for type filters).
    pub types: Vec<crate::model::MemoryType>,
    /// `ids.len() × dimension` floats.
    pub vectors: Vec<f32>,
    /// Slot of each id.
    pub slots: HashMap<MemoryId, usize>,
}

impl FlatPartition {
    fn insert(&mut self, record: &EmbeddingRecord) {
        let dimension = record.vector.len();
        if let Some(&slot) = self.slots.get(&record.id) {
            self.vectors[slot * dimension..(slot + 1) * dimension].copy_from_slice(&record.vector);
            self.types[slot] = record.memory_type;
            return;
        }
        self.slots.insert(record.id.clone(), self.ids.len());
        self.ids.push(record.id.clone());
        self.types.push(record.memory_type);
        self.vectors.extend_from_slice(&record.vector);
    }

    fn remove(&mut self, id: &MemoryId, dimension: usize) -> bool {
        let Some(slot) = self.slots.remove(id) else {
            return false;
        };
        let last = self.ids.len() - 1;
        if slot != last {
            self.ids.swap(slot, last);
            self.types.swap(slot, last);
            for offset in 0..dimension {
                self.vectors
                    .swap(slot * dimension + offset, last * dimension + offset);
            }
            self.slots.insert(self.ids[slot].clone(), slot);
        }
        self.ids.pop();
        self.types.pop();
        self.vectors.truncate(last * dimension);
        true
    }

    /// The dot product of `query` with the vector stored for `id`, if it is here.
    pub fn similarity(&self, query: &[f32], id: &MemoryId) -> Option<f32> {
        let dimension = query.len();
        let slot = *self.slots.get(id)?;
        let vector = self.vectors.get(slot * dimension..(slot + 1) * dimension)?;
        Some(dot(query, vector))
    }

    /// Exact top-`limit` by dot product, honouring a type filter.
    pub fn search(
        &self,
        query: &[f32],
        types: &[crate::model::MemoryType],
        limit: usize,
    ) -> Vec<(MemoryId, f32)> {
        let dimension = query.len();
        if dimension == 0 || self.ids.is_empty() {
            return Vec::new();
        }
        let mut scored: Vec<(usize, f32)> = self
            .vectors
            .chunks_exact(dimension)
            .enumerate()
            .filter(|(slot, _)| types.is_empty() || types.contains(&self.types[*slot]))
            .map(|(slot, vector)| (slot, dot(query, vector)))
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
            .map(|(slot, score)| (self.ids[slot].clone(), score))
            .collect()
    }
}

/// Exact (brute-force) vector index, partitioned by agent and collection.
///
/// Per-agent partitions stay small in practice, where an exact scan is both faster and
/// better than an approximate graph; the service wraps it with HNSW for big partitions.
#[derive(Debug, Default)]
pub struct FlatVectorIndex {
    /// Vectors by partition.
    partitions: RwLock<HashMap<PartitionKey, FlatPartition>>,
    /// Partitions each id lives in (one private, plus the shared pool when shared).
    locations: RwLock<HashMap<MemoryId, Vec<PartitionKey>>>,
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
        self.partitions
            .read()
            .expect("vector index lock poisoned")
            .get(key)
            .map_or(0, |p| p.ids.len())
    }

    /// Every (id, type, vector) of one partition.
    pub fn partition_entries(
        &self,
        key: &PartitionKey,
    ) -> Vec<(MemoryId, crate::model::MemoryType, Vec<f32>)> {
        let partitions = self.partitions.read().expect("vector index lock poisoned");
        let Some(flat) = partitions.get(key) else {
            return Vec::new();
        };
        let dimension = if flat.ids.is_empty() {
            0
        } else {
            flat.vectors.len() / flat.ids.len()
        };
        flat.ids
            .iter()
            .zip(&flat.types)
            .zip(flat.vectors.chunks_exact(dimension.max(1)))
            .map(|((id, t), v)| (id.clone(), *t, v.to_vec()))
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
        let partitions = self.partitions.read().expect("vector index lock poisoned");
        partitions
            .get(key)
            .map(|p| p.search(vector, types, limit))
            .unwrap_or_default()
    }

    /// Exact similarity of `vector` to each of `ids` that is indexed (in its first partition).
    pub fn similarity_of(&self, vector: &[f32], ids: &[MemoryId]) -> Vec<(MemoryId, f32)> {
        let locations = self.locations.read().expect("vector index lock poisoned");
        let partitions = self.partitions.read().expect("vector index lock poisoned");
        ids.iter()
            .filter_map(|id| {
                let key = locations.get(id)?.first()?;
                let score = partitions.get(key)?.similarity(vector, id)?;
                Some((id.clone(), score))
            })
            .collect()
    }

    /// The type of an indexed memory, if indexed.
    pub fn contains(&self, id: &MemoryId) -> bool {
        self.locations
            .read()
            .expect("vector index lock poisoned")
            .contains_key(id)
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
        self.remove(&entries.iter().map(|e| e.id.clone()).collect::<Vec<_>>());
        let mut partitions = self.partitions.write().expect("vector index lock poisoned");
        let mut locations = self.locations.write().expect("vector index lock poisoned");
        for entry in entries {
            let targets = Self::partitions_of(entry);
            for partition in &targets {
                partitions
                    .entry(partition.clone())
                    .or_default()
                    .insert(entry);
            }
            locations.insert(entry.id.clone(), targets);
        }
    }

    fn remove(&self, ids: &[MemoryId]) {
        let mut partitions = self.partitions.write().expect("vector index lock poisoned");
        let mut locations = self.locations.write().expect("vector index lock poisoned");
        for id in ids {
            if let Some(targets) = locations.remove(id) {
                for partition in targets {
                    if let Some(flat) = partitions.get_mut(&partition) {
                        let dimension = if flat.ids.is_empty() {
                            0
                        } else {
                            flat.vectors.len() / flat.ids.len()
                        };
                        flat.remove(id, dimension);
                        if flat.ids.is_empty() {
                            partitions.remove(&partition);
                        }
                    }
                }
            }
        }
    }

    fn clear(&self) {
        self.partitions
            .write()
            .expect("vector index lock poisoned")
            .clear();
        self.locations
            .write()
            .expect("vector index lock poisoned")
            .clear();
    }

    fn similarity(&self, vector: &[f32], ids: &[MemoryId]) -> Vec<(MemoryId, f32)> {
        self.similarity_of(vector, ids)
    }

    fn search(&self, query: &VectorQuery) -> Vec<(MemoryId, f32)> {
        let partitions = self.partitions.read().expect("vector index lock poisoned");
        let mut hits: Vec<(MemoryId, f32)> = Vec::new();
        for key in Self::partitions_for_query(query) {
            if let Some(flat) = partitions.get(&key) {
                hits.extend(flat.search(&query.vector, &query.types, query.limit));
            }
        }
        merge_hits(hits, query.limit)
    }

    fn len(&self) -> usize {
        self.locations
            .read()
            .expect("vector index lock poisoned")
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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

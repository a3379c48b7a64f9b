//! The embedded vector index: exact scans for small partitions, an HNSW graph
//! (`hnsw_rs`) for partitions of at least `vectors.hnsw_threshold` vectors.
//!
//! Memories are partitioned by agent and collection, so most searches touch a few
//! hundred or thousand vectors, where an exact scan is faster and better than a graph.
//! A partition that grows past the threshold gets a graph, built once from its
//! vectors and then extended on every insert. hnsw_rs cannot delete, so removed or
//! replaced entries become tombstones filtered out of searches; a graph whose
//! tombstones pass a third of its points is rebuilt.

use std::collections::{HashMap, HashSet};
use std::sync::RwLock;

use hnsw_rs::anndists::dist::Distance;
use hnsw_rs::hnsw::Hnsw;
use mnemos_actors::model::{MemoryId, MemoryType};
use mnemos_actors::store::memory::{merge_hits, FlatVectorIndex, PartitionKey};
use mnemos_actors::store::{EmbeddingRecord, VectorIndex, VectorQuery};

/// One partition's graph and the bookkeeping hnsw_rs lacks.
struct PartitionGraph {
    /// The graph; point ids are slots into `ids`.
    graph: Hnsw<'static, f32, UnitDot>,
    /// Memory id per slot.
    ids: Vec<MemoryId>,
    /// Memory type per slot (for type filters).
    types: Vec<MemoryType>,
    /// Live slot of each memory.
    live: HashMap<MemoryId, usize>,
    /// Slots removed or replaced.
    tombstones: HashSet<usize>,
}

impl PartitionGraph {
    fn build(entries: Vec<(MemoryId, MemoryType, Vec<f32>)>) -> Self {
        let capacity = (entries.len() * 2).max(1024);
        let graph = Hnsw::new(16, capacity, 16, 200, UnitDot);
        let mut this = Self {
            graph,
            ids: Vec::new(),
            types: Vec::new(),
            live: HashMap::new(),
            tombstones: HashSet::new(),
        };
        let mut batch: Vec<(&Vec<f32>, usize)> = Vec::with_capacity(entries.len());
        for (slot, (id, memory_type, vector)) in entries.iter().enumerate() {
            this.ids.push(id.clone());
            this.types.push(*memory_type);
            this.live.insert(id.clone(), slot);
            if is_unit(vector) {
                batch.push((vector, slot));
            }
        }
        this.graph.parallel_insert(&batch);
        this
    }

    fn insert(&mut self, id: &MemoryId, memory_type: MemoryType, vector: &[f32]) {
        self.remove(id);
        let slot = self.ids.len();
        self.ids.push(id.clone());
        self.types.push(memory_type);
        self.live.insert(id.clone(), slot);
        if is_unit(vector) {
            self.graph.insert_slice((vector, slot));
        }
    }

    fn remove(&mut self, id: &MemoryId) {
        if let Some(slot) = self.live.remove(id) {
            self.tombstones.insert(slot);
        }
    }

    fn needs_rebuild(&self) -> bool {
        self.tombstones.len() * 3 > self.ids.len()
    }

    fn search(&self, vector: &[f32], types: &[MemoryType], limit: usize) -> Vec<(MemoryId, f32)> {
        let filter = |slot: &usize| {
            !self.tombstones.contains(slot)
                && (types.is_empty() || types.contains(&self.types[*slot]))
        };
        let ef = (limit * 4).max(64);
        self.graph
            .search_filter(vector, limit, ef, Some(&filter))
            .into_iter()
            .filter(|n| filter(&n.d_id))
            .map(|n| (self.ids[n.d_id].clone(), 1.0 - n.distance))
            .collect()
    }
}

/// 1 − dot product of unit vectors, clamped at 0 (hnsw_rs's own `DistDot` panics on
/// rounding that puts the dot product of two equal unit vectors a hair above 1).
#[derive(Debug, Clone, Copy, Default)]
struct UnitDot;

impl Distance<f32> for UnitDot {
    fn eval(&self, a: &[f32], b: &[f32]) -> f32 {
        (1.0 - mnemos_actors::embedding::dot(a, b)).max(0.0)
    }
}

/// The graph's distance assumes unit vectors; an all-zero embedding (text with no words) stays exact-scan only.
fn is_unit(vector: &[f32]) -> bool {
    let norm: f32 = vector.iter().map(|x| x * x).sum();
    (norm - 1.0).abs() < 1e-3
}

/// Exact partitions plus HNSW graphs for the large ones.
pub struct HnswVectorIndex {
    /// Every vector, exactly (the truth inside the index; graphs only accelerate).
    flat: FlatVectorIndex,
    /// Graphs of partitions at or above the threshold.
    graphs: RwLock<HashMap<PartitionKey, PartitionGraph>>,
    /// Partition size from which a graph is kept.
    threshold: usize,
}

impl HnswVectorIndex {
    /// An empty index that builds graphs for partitions of `threshold` vectors or more.
    pub fn new(threshold: usize) -> Self {
        Self {
            flat: FlatVectorIndex::new(),
            graphs: RwLock::new(HashMap::new()),
            threshold: threshold.max(1),
        }
    }

    /// Number of partitions that have a graph.
    pub fn graph_count(&self) -> usize {
        self.graphs.read().expect("graph lock poisoned").len()
    }
}

impl VectorIndex for HnswVectorIndex {
    fn backend_name(&self) -> &'static str {
        "hnsw"
    }

    fn upsert(&self, entries: &[EmbeddingRecord]) {
        // Entries leaving a partition (type or sharing changed) must leave its graph too.
        let ids: Vec<MemoryId> = entries.iter().map(|e| e.id.clone()).collect();
        self.remove_from_graphs(&ids);
        self.flat.upsert(entries);
        let mut touched: HashSet<PartitionKey> = HashSet::new();
        let mut graphs = self.graphs.write().expect("graph lock poisoned");
        for entry in entries {
            for key in FlatVectorIndex::partitions_of(entry) {
                if let Some(graph) = graphs.get_mut(&key) {
                    graph.insert(&entry.id, entry.memory_type, &entry.vector);
                } else {
                    touched.insert(key);
                }
            }
        }
        for key in touched {
            if self.flat.partition_len(&key) >= self.threshold {
                let graph = PartitionGraph::build(self.flat.partition_entries(&key));
                graphs.insert(key, graph);
            }
        }
    }

    fn remove(&self, ids: &[MemoryId]) {
        self.remove_from_graphs(ids);
        self.flat.remove(ids);
    }

    fn clear(&self) {
        self.flat.clear();
        self.graphs.write().expect("graph lock poisoned").clear();
    }

    fn search(&self, query: &VectorQuery) -> Vec<(MemoryId, f32)> {
        let graphs = self.graphs.read().expect("graph lock poisoned");
        let mut hits = Vec::new();
        for key in FlatVectorIndex::partitions_for_query(query) {
            match graphs.get(&key) {
                Some(graph) => hits.extend(graph.search(&query.vector, &query.types, query.limit)),
                None => hits.extend(self.flat.search_partition(
                    &key,
                    &query.vector,
                    &query.types,
                    query.limit,
                )),
            }
        }
        merge_hits(hits, query.limit)
    }

    fn similarity(&self, vector: &[f32], ids: &[MemoryId]) -> Vec<(MemoryId, f32)> {
        self.flat.similarity_of(vector, ids)
    }

    fn len(&self) -> usize {
        self.flat.len()
    }
}

impl HnswVectorIndex {
    fn remove_from_graphs(&self, ids: &[MemoryId]) {
        let mut graphs = self.graphs.write().expect("graph lock poisoned");
        if graphs.is_empty() {
            return;
        }
        let mut rebuild = Vec::new();
        for (key, graph) in graphs.iter_mut() {
            for id in ids {
                graph.remove(id);
            }
            if graph.needs_rebuild() {
                rebuild.push(key.clone());
            }
        }
        for key in rebuild {
            let entries: Vec<_> = self
                .flat
                .partition_entries(&key)
                .into_iter()
                .filter(|(id, _, _)| !ids.contains(id))
                .collect();
            if entries.len() >= self.threshold {
                graphs.insert(key, PartitionGraph::build(entries));
            } else {
                graphs.remove(&key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mnemos_actors::embedding::{BuiltinEmbedder, Embedder};
    use mnemos_actors::model::AgentId;

    fn records(agent: &str, texts: &[String]) -> Vec<EmbeddingRecord> {
        let embedder = BuiltinEmbedder::new(64);
        texts
            .iter()
            .enumerate()
            .map(|(n, text)| EmbeddingRecord {
                id: MemoryId(format!("{agent}-{n:05}")),
                agent_id: AgentId::parse(agent).unwrap(),
                memory_type: MemoryType::Episodic,
                shared: false,
                vector: embedder.embed(text).unwrap(),
                occurred_at: chrono::DateTime::UNIX_EPOCH,
                text: text.clone(),
                session_id: None,
            })
            .collect()
    }

    #[test]
    fn large_partitions_get_a_graph_that_finds_the_same_nearest_neighbour() {
        let texts: Vec<String> = (0..400)
            .map(|n| format!("note number {n} about topic {} and item {}", n % 17, n % 23))
            .collect();
        let index = HnswVectorIndex::new(200);
        let flat = FlatVectorIndex::new();
        let entries = records("big", &texts);
        index.upsert(&entries);
        flat.upsert(&entries);
        index.upsert(&records("small", &texts[..10]));
        assert_eq!(index.graph_count(), 1);
        let embedder = BuiltinEmbedder::new(64);
        let mut agreements = 0;
        for probe in 0..20 {
            let query = VectorQuery {
                agent_id: AgentId::parse("big").unwrap(),
                include_shared: false,
                types: vec![],
                vector: embedder.embed(&texts[probe * 13]).unwrap(),
                limit: 5,
            };
            if index.search(&query).first().map(|h| &h.0)
                == flat.search(&query).first().map(|h| &h.0)
            {
                agreements += 1;
            }
        }
        assert!(
            agreements >= 16,
            "graph agreed with the exact scan on {agreements}/20 queries"
        );
    }

    #[test]
    fn a_graph_built_from_the_flat_index_holds_every_vector() {
        // The flat index restores its int8 codes at the original length, so every unit
        // vector passes the graph's check; 64 sparse dimensions would fail it otherwise.
        let texts: Vec<String> = (0..300)
            .map(|n| format!("entry {n} of the set {} with word {}", n % 7, n % 11))
            .collect();
        let index = HnswVectorIndex::new(100);
        index.upsert(&records("a", &texts));
        let graphs = index.graphs.read().unwrap();
        let graph = graphs
            .values()
            .next()
            .expect("a graph for the large partition");
        assert_eq!(graph.graph.get_nb_point(), texts.len());
    }

    #[test]
    fn removed_entries_never_come_back() {
        let texts: Vec<String> = (0..300)
            .map(|n| format!("entry {n} of the set {}", n % 7))
            .collect();
        let index = HnswVectorIndex::new(100);
        let entries = records("a", &texts);
        index.upsert(&entries);
        let removed: Vec<MemoryId> = entries.iter().take(50).map(|e| e.id.clone()).collect();
        index.remove(&removed);
        let query = VectorQuery {
            agent_id: AgentId::parse("a").unwrap(),
            include_shared: false,
            types: vec![],
            vector: entries[0].vector.clone(),
            limit: 20,
        };
        let hits = index.search(&query);
        assert!(!hits.is_empty());
        assert!(hits.iter().all(|(id, _)| !removed.contains(id)));
        assert_eq!(index.len(), 250);
    }
}

//! Clustering of sleep-cycle candidates (pure).
//!
//! Two candidates are linked when their combined affinity reaches
//! [`ClusterParams::threshold`]:
//!
//! ```text
//! affinity = cosine(embeddings)
//!          + tag_bonus  · jaccard(tags)
//!          + edge_bonus · [an association edge joins them]
//!          + time_bonus · exp(−|Δ occurred_at| / time_scale)
//! ```
//!
//! Clusters are the connected components of that link graph (single linkage through
//! union-find, deterministic for a given input order). A component smaller than
//! `min_size` is no cluster; one larger than `max_size` is cut, in time order, into
//! consecutive chunks of at most `max_size` (every chunk of at least `min_size` is kept).
//! Every linked pair is found in one pass, so clustering what is left after a run
//! yields nothing new: the sleep cycle is idempotent.
//!
//! Cost: n²/2 dot products per agent. A cheap bound (cosine plus the largest possible
//! bonus) skips the tag and time terms for pairs that cannot reach the threshold.

use std::collections::{BTreeMap, HashSet};

use chrono::{DateTime, Utc};

use crate::embedding::dot;

/// Parameters of the clustering (config `[cognition]`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClusterParams {
    /// Affinity at or above which two candidates are linked.
    pub threshold: f32,
    /// Weight of the tag overlap (Jaccard) in the affinity.
    pub tag_bonus: f32,
    /// Added when an association edge joins the two candidates.
    pub edge_bonus: f32,
    /// Weight of closeness in time in the affinity.
    pub time_bonus: f32,
    /// Hours over which the time term decays by 1/e.
    pub time_scale_hours: f64,
    /// Smallest group abstracted into knowledge.
    pub min_size: usize,
    /// Largest group given to one abstraction.
    pub max_size: usize,
}

impl Default for ClusterParams {
    fn default() -> Self {
        Self {
            threshold: 0.75,
            tag_bonus: 0.1,
            edge_bonus: 0.15,
            time_bonus: 0.05,
            time_scale_hours: 24.0,
            min_size: 3,
            max_size: 50,
        }
    }
}

/// What the clustering sees of one candidate.
#[derive(Debug, Clone, Copy)]
pub struct ClusterItem<'a> {
    /// L2-normalised embedding.
    pub embedding: &'a [f32],
    /// Tags (lower-cased by the model).
    pub tags: &'a [String],
    /// When it happened.
    pub occurred_at: DateTime<Utc>,
}

fn jaccard(a: &[String], b: &[String]) -> f32 {
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    let shared = a.iter().filter(|t| b.contains(t)).count();
    let union = a.len() + b.len() - shared;
    shared as f32 / union as f32
}

/// Affinity of two candidates (see the module docs); `linked` says whether an edge joins them.
pub fn affinity(
    a: &ClusterItem<'_>,
    b: &ClusterItem<'_>,
    linked: bool,
    params: &ClusterParams,
) -> f32 {
    affinity_of(dot(a.embedding, b.embedding), a, b, linked, params)
}

/// [`affinity`] of two candidates whose embeddings' dot product is `cosine`.
fn affinity_of(
    cosine: f32,
    a: &ClusterItem<'_>,
    b: &ClusterItem<'_>,
    linked: bool,
    params: &ClusterParams,
) -> f32 {
    let mut score = cosine;
    score += params.tag_bonus * jaccard(a.tags, b.tags);
    if linked {
        score += params.edge_bonus;
    }
    let hours = (a.occurred_at - b.occurred_at).num_seconds().unsigned_abs() as f64 / 3600.0;
    score += params.time_bonus * (-hours / params.time_scale_hours.max(1e-6)).exp() as f32;
    score
}

fn find(parent: &mut [usize], mut i: usize) -> usize {
    while parent[i] != i {
        parent[i] = parent[parent[i]];
        i = parent[i];
    }
    i
}

/// Cluster `items`; `edges` holds index pairs (either order) joined by an association.
/// Returns clusters as index lists in time order, clusters ordered by their first member.
pub fn cluster(
    items: &[ClusterItem<'_>],
    edges: &HashSet<(usize, usize)>,
    params: &ClusterParams,
) -> Vec<Vec<usize>> {
    let n = items.len();
    let mut parent: Vec<usize> = (0..n).collect();
    let max_bonus =
        params.tag_bonus.max(0.0) + params.edge_bonus.max(0.0) + params.time_bonus.max(0.0);
    for i in 0..n {
        for j in (i + 1)..n {
            // Only connectivity matters: a pair already in one component adds nothing.
            let (ri, rj) = (find(&mut parent, i), find(&mut parent, j));
            if ri == rj {
                continue;
            }
            let cosine = dot(items[i].embedding, items[j].embedding);
            if cosine + max_bonus < params.threshold {
                continue;
            }
            let linked = edges.contains(&(i, j)) || edges.contains(&(j, i));
            if affinity_of(cosine, &items[i], &items[j], linked, params) >= params.threshold {
                parent[ri.max(rj)] = ri.min(rj);
            }
        }
    }
    let mut components: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for i in 0..n {
        let root = find(&mut parent, i);
        components.entry(root).or_default().push(i);
    }
    let min_size = params.min_size.max(2);
    let max_size = params.max_size.max(min_size);
    let mut clusters = Vec::new();
    for (_, mut members) in components {
        if members.len() < min_size {
            continue;
        }
        members.sort_by_key(|&i| (items[i].occurred_at, i));
        for chunk in members.chunks(max_size) {
            if chunk.len() >= min_size {
                clusters.push(chunk.to_vec());
            }
        }
    }
    clusters.sort_by_key(|c| c.iter().copied().min());
    clusters
}

/// The clusters of `items` ([`cluster`]) cut by group (`group_of[i]` is item i's
/// group, e.g. its project): a cluster never mixes groups, so what is abstracted from
/// it lands in its members' group. Parts smaller than `min_size` are dropped.
pub fn cluster_within_groups<G: Ord>(
    items: &[ClusterItem<'_>],
    edges: &HashSet<(usize, usize)>,
    params: &ClusterParams,
    group_of: &[G],
) -> Vec<Vec<usize>> {
    cluster(items, edges, params)
        .into_iter()
        .flat_map(|members| {
            let mut by_group: BTreeMap<&G, Vec<usize>> = BTreeMap::new();
            for i in members {
                by_group.entry(&group_of[i]).or_default().push(i);
            }
            by_group.into_values()
        })
        .filter(|members| members.len() >= params.min_size)
        .collect()
}

/// Mean of the members' embeddings, L2-normalised (the cluster's centroid).
pub fn centroid(embeddings: &[&[f32]]) -> Vec<f32> {
    let dimension = embeddings.first().map_or(0, |e| e.len());
    let mut sum = vec![0.0f32; dimension];
    for embedding in embeddings {
        for (s, v) in sum.iter_mut().zip(embedding.iter()) {
            *s += v;
        }
    }
    crate::embedding::l2_normalize(&mut sum);
    sum
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Duration;

    fn unit(values: &[f32]) -> Vec<f32> {
        let mut v = values.to_vec();
        crate::embedding::l2_normalize(&mut v);
        v
    }

    #[test]
    fn similar_items_cluster_and_outliers_stay_out() {
        let now = Utc::now();
        let a = unit(&[1.0, 0.05, 0.0]);
        let b = unit(&[1.0, 0.0, 0.05]);
        let c = unit(&[0.95, 0.05, 0.05]);
        let far = unit(&[0.0, 1.0, 0.0]);
        let tags: Vec<String> = Vec::new();
        let items: Vec<ClusterItem> = [&a, &b, &c, &far]
            .iter()
            .enumerate()
            .map(|(i, e)| ClusterItem {
                embedding: e,
                tags: &tags,
                occurred_at: now + Duration::minutes(i as i64),
            })
            .collect();
        let clusters = cluster(&items, &HashSet::new(), &ClusterParams::default());
        assert_eq!(clusters, vec![vec![0, 1, 2]]);
    }

    #[test]
    fn a_cluster_is_cut_by_group_and_small_parts_dropped() {
        let now = Utc::now();
        let vectors: Vec<Vec<f32>> = (0..5).map(|i| unit(&[1.0, 0.01 * i as f32, 0.0])).collect();
        let tags: Vec<String> = Vec::new();
        let items: Vec<ClusterItem> = vectors
            .iter()
            .map(|e| ClusterItem {
                embedding: e,
                tags: &tags,
                occurred_at: now,
            })
            .collect();
        let groups = [Some("a"), Some("a"), Some("a"), None, None];
        let params = ClusterParams::default();
        assert_eq!(cluster(&items, &HashSet::new(), &params).len(), 1);
        assert_eq!(
            cluster_within_groups(&items, &HashSet::new(), &params, &groups),
            vec![vec![0, 1, 2]],
            "the two ungrouped items are fewer than min_size"
        );
    }

    #[test]
    fn tags_edges_and_time_can_tip_a_pair_over_the_threshold() {
        let now = Utc::now();
        let a = unit(&[1.0, 0.9, 0.0]);
        let b = unit(&[1.0, 0.0, 0.9]);
        // cosine ≈ 0.55: too far alone.
        let params = ClusterParams {
            threshold: 0.7,
            min_size: 2,
            ..ClusterParams::default()
        };
        let tags = vec!["trip".to_string()];
        let no_tags: Vec<String> = Vec::new();
        let plain = [
            ClusterItem {
                embedding: &a,
                tags: &no_tags,
                occurred_at: now,
            },
            ClusterItem {
                embedding: &b,
                tags: &no_tags,
                occurred_at: now - Duration::days(30),
            },
        ];
        assert!(cluster(&plain, &HashSet::new(), &params).is_empty());
        let joined: HashSet<(usize, usize)> = [(1, 0)].into_iter().collect();
        let tagged = [
            ClusterItem {
                embedding: &a,
                tags: &tags,
                occurred_at: now,
            },
            ClusterItem {
                embedding: &b,
                tags: &tags,
                occurred_at: now,
            },
        ];
        assert_eq!(cluster(&tagged, &joined, &params), vec![vec![0, 1]]);
    }

    #[test]
    fn large_components_are_cut_in_time_order_and_rerunning_finds_nothing() {
        let now = Utc::now();
        let e = unit(&[1.0, 0.0]);
        let tags: Vec<String> = Vec::new();
        let items: Vec<ClusterItem> = (0..7)
            .map(|i| ClusterItem {
                embedding: &e,
                tags: &tags,
                occurred_at: now - Duration::minutes(i),
            })
            .collect();
        let params = ClusterParams {
            min_size: 2,
            max_size: 3,
            ..ClusterParams::default()
        };
        let clusters = cluster(&items, &HashSet::new(), &params);
        // Time order is reverse index order: [6,5,4], [3,2,1], then [0] alone is dropped.
        assert_eq!(clusters, vec![vec![3, 2, 1], vec![6, 5, 4]]);
        // What was left (item 0) forms no cluster on a second pass.
        assert!(cluster(&items[..1], &HashSet::new(), &params).is_empty());
    }

    #[test]
    fn skipping_pairs_already_joined_finds_the_components_every_pair_would() {
        // A deterministic generator: vectors around a few topics, some tags, some edges,
        // times over a week.
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % 10_000) as f32 / 10_000.0
        };
        let now = Utc::now();
        let topics: Vec<Vec<f32>> = (0..6)
            .map(|_| (0..16).map(|_| next() - 0.5).collect())
            .collect();
        let vectors: Vec<Vec<f32>> = (0..300)
            .map(|i| {
                let topic = &topics[i % topics.len()];
                unit(
                    &topic
                        .iter()
                        .map(|v| v + (next() - 0.5) * 0.6)
                        .collect::<Vec<f32>>(),
                )
            })
            .collect();
        let tag_sets: Vec<Vec<String>> = (0..300)
            .map(|i| match i % 4 {
                0 => vec!["trip".to_string()],
                1 => vec!["trip".to_string(), "work".to_string()],
                _ => Vec::new(),
            })
            .collect();
        let items: Vec<ClusterItem> = (0..300)
            .map(|i| ClusterItem {
                embedding: &vectors[i],
                tags: &tag_sets[i],
                occurred_at: now - Duration::minutes((next() * 10_080.0) as i64),
            })
            .collect();
        let edges: HashSet<(usize, usize)> = (0..120)
            .map(|_| ((next() * 300.0) as usize, (next() * 300.0) as usize))
            .collect();
        let params = ClusterParams {
            min_size: 2,
            max_size: 1_000,
            ..ClusterParams::default()
        };
        // Every pair, no shortcut.
        let mut parent: Vec<usize> = (0..items.len()).collect();
        for i in 0..items.len() {
            for j in (i + 1)..items.len() {
                let linked = edges.contains(&(i, j)) || edges.contains(&(j, i));
                if affinity(&items[i], &items[j], linked, &params) >= params.threshold {
                    let (ri, rj) = (find(&mut parent, i), find(&mut parent, j));
                    parent[ri.max(rj)] = ri.min(rj);
                }
            }
        }
        let mut expected: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for i in 0..items.len() {
            let root = find(&mut parent, i);
            expected.entry(root).or_default().push(i);
        }
        let mut expected: Vec<Vec<usize>> =
            expected.into_values().filter(|c| c.len() >= 2).collect();
        let mut found = cluster(&items, &edges, &params);
        for members in found.iter_mut().chain(expected.iter_mut()) {
            members.sort();
        }
        found.sort();
        expected.sort();
        assert!(
            found.len() > 3,
            "the data forms several clusters: {found:?}"
        );
        assert_eq!(found, expected);
    }

    #[test]
    fn centroid_is_normalised() {
        let a = unit(&[1.0, 0.0]);
        let b = unit(&[0.0, 1.0]);
        let c = centroid(&[&a, &b]);
        assert!((dot(&c, &c) - 1.0).abs() < 1e-5);
        assert!((c[0] - c[1]).abs() < 1e-6);
    }
}

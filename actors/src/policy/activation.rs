//! Spreading activation over the association graph.

use std::collections::{HashMap, VecDeque};

use crate::model::{Association, MemoryId};

/// One activated memory with the path that reached it.
#[derive(Debug, Clone, PartialEq)]
pub struct Activation {
    /// The activated memory.
    pub id: MemoryId,
    /// Activation in 0..1 (the seed has 1).
    pub activation: f64,
    /// Ids from the seed to this memory, both included.
    pub path: Vec<MemoryId>,
}

/// Spread activation from `seed` for at most `depth` hops: a neighbour receives
/// `parent · weight · decay`; the best path to each node wins. Edges are followed in
/// both directions. The seed itself is not returned. Sorted by activation, best first.
pub fn spread(
    seed: &MemoryId,
    edges: &[Association],
    depth: u32,
    decay: f64,
    limit: usize,
) -> Vec<Activation> {
    let mut adjacency: HashMap<&MemoryId, Vec<(&MemoryId, f64)>> = HashMap::new();
    for edge in edges {
        let weight = f64::from(edge.weight.clamp(0.0, 1.0));
        adjacency
            .entry(&edge.from_id)
            .or_default()
            .push((&edge.to_id, weight));
        adjacency
            .entry(&edge.to_id)
            .or_default()
            .push((&edge.from_id, weight));
    }
    let mut best: HashMap<MemoryId, Activation> = HashMap::new();
    let mut queue: VecDeque<(MemoryId, f64, Vec<MemoryId>)> = VecDeque::new();
    queue.push_back((seed.clone(), 1.0, vec![seed.clone()]));
    while let Some((node, activation, path)) = queue.pop_front() {
        if path.len() as u32 > depth {
            continue;
        }
        for (neighbour, weight) in adjacency.get(&node).into_iter().flatten() {
            if *neighbour == seed || path.contains(neighbour) {
                continue;
            }
            let next = activation * weight * decay;
            if next <= 1e-6 {
                continue;
            }
            let improved = best
                .get(*neighbour)
                .is_none_or(|current| next > current.activation);
            if improved {
                let mut next_path = path.clone();
                next_path.push((*neighbour).clone());
                best.insert(
                    (*neighbour).clone(),
                    Activation {
                        id: (*neighbour).clone(),
                        activation: next,
                        path: next_path.clone(),
                    },
                );
                queue.push_back(((*neighbour).clone(), next, next_path));
            }
        }
    }
    let mut result: Vec<Activation> = best.into_values().collect();
    result.sort_by(|a, b| {
        b.activation
            .total_cmp(&a.activation)
            .then_with(|| a.id.cmp(&b.id))
    });
    result.truncate(limit);
    result
}

/// The memories within reach of `seed` over `edges` (followed both ways) with their
/// hop distance, the seed first at 0, then nearest first (ties by id), at most `limit`
/// (the seed included): a neighbourhood a browser can draw.
pub fn hop_distances(seed: &MemoryId, edges: &[Association], limit: usize) -> Vec<(MemoryId, u32)> {
    let mut adjacency: HashMap<&MemoryId, Vec<&MemoryId>> = HashMap::new();
    for edge in edges {
        adjacency
            .entry(&edge.from_id)
            .or_default()
            .push(&edge.to_id);
        adjacency
            .entry(&edge.to_id)
            .or_default()
            .push(&edge.from_id);
    }
    let mut distance: HashMap<&MemoryId, u32> = HashMap::from([(seed, 0)]);
    let mut queue = VecDeque::from([seed]);
    while let Some(node) = queue.pop_front() {
        let next = distance[node] + 1;
        let mut around = adjacency.get(node).cloned().unwrap_or_default();
        around.sort();
        for neighbour in around {
            if !distance.contains_key(neighbour) {
                distance.insert(neighbour, next);
                queue.push_back(neighbour);
            }
        }
    }
    let mut reached: Vec<(MemoryId, u32)> = distance
        .into_iter()
        .map(|(id, hops)| (id.clone(), hops))
        .collect();
    reached.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    reached.truncate(limit);
    reached
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::AgentId;

    fn edge(from: &str, to: &str, weight: f32) -> Association {
        Association {
            agent_id: AgentId::parse("a").unwrap(),
            from_id: MemoryId(from.into()),
            to_id: MemoryId(to.into()),
            relation: "related_to".into(),
            weight,
            created_at: chrono::Utc::now(),
        }
    }

    #[test]
    fn activation_decays_with_depth_and_weight() {
        let edges = vec![
            edge("s", "a", 1.0),
            edge("a", "b", 0.5),
            edge("b", "c", 1.0),
        ];
        let result = spread(&MemoryId("s".into()), &edges, 2, 0.8, 10);
        let ids: Vec<&str> = result.iter().map(|a| a.id.as_str()).collect();
        assert_eq!(ids, vec!["a", "b"]);
        assert!((result[0].activation - 0.8).abs() < 1e-9);
        assert!((result[1].activation - 0.8 * 0.5 * 0.8).abs() < 1e-9);
        assert_eq!(result[1].path.len(), 3);
    }

    #[test]
    fn best_path_wins_and_cycles_terminate() {
        let edges = vec![
            edge("s", "a", 0.2),
            edge("s", "b", 1.0),
            edge("b", "a", 1.0),
            edge("a", "s", 1.0),
        ];
        let result = spread(&MemoryId("s".into()), &edges, 3, 1.0, 10);
        let a = result.iter().find(|x| x.id.as_str() == "a").unwrap();
        assert!((a.activation - 1.0).abs() < 1e-9);
    }

    #[test]
    fn hop_distances_are_breadth_first_both_ways_and_bounded() {
        let id = |s: &str| MemoryId(s.to_string());
        let edge = |a: &str, b: &str| Association {
            agent_id: crate::model::AgentId::parse("a").unwrap(),
            from_id: id(a),
            to_id: id(b),
            relation: "related_to".into(),
            weight: 0.5,
            created_at: chrono::DateTime::<chrono::Utc>::UNIX_EPOCH,
        };
        // s -> a -> b, c -> s (followed backwards), a -> c (c stays at 1).
        let edges = [
            edge("s", "a"),
            edge("a", "b"),
            edge("c", "s"),
            edge("a", "c"),
        ];
        assert_eq!(
            hop_distances(&id("s"), &edges, 10),
            vec![(id("s"), 0), (id("a"), 1), (id("c"), 1), (id("b"), 2)]
        );
        assert_eq!(hop_distances(&id("s"), &edges, 2).len(), 2);
        assert_eq!(
            hop_distances(&id("lonely"), &edges, 10),
            vec![(id("lonely"), 0)]
        );
    }
}

//! Rank fusion: combine ranked lists from independent retrievers into one ranking.

use std::collections::HashMap;

use crate::model::MemoryId;

/// The retrievers recall can fuse; their names appear in `matched_by`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Retriever {
    /// Dense embedding similarity.
    Vector,
    /// BM25 over the full-text index.
    Keyword,
    /// Association-graph neighbours of strong hits.
    Graph,
    /// Time-range match.
    Time,
    /// The request's session working memory.
    Working,
    /// BM25 again, with the query expanded by terms of the best keyword hits (pseudo-relevance feedback).
    Feedback,
}

impl Retriever {
    /// The name used in `matched_by`.
    pub fn as_str(self) -> &'static str {
        match self {
            Retriever::Vector => "vector",
            Retriever::Keyword => "keyword",
            Retriever::Graph => "graph",
            Retriever::Time => "time",
            Retriever::Working => "working",
            Retriever::Feedback => "feedback",
        }
    }
}

/// Pseudo-relevance feedback: the terms that best characterise the top keyword hits
/// `documents` and are not already in `query`: shared by the most documents (at least
/// two when there are several), then most frequent, at most `limit`.
pub fn feedback_terms(query: &str, documents: &[&str], limit: usize) -> Vec<String> {
    use std::collections::{BTreeMap, HashSet};
    let asked: HashSet<String> = crate::text::search_terms(query).into_iter().collect();
    let mut stats: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for document in documents {
        let terms = crate::text::search_terms(document);
        let unique: HashSet<&String> = terms.iter().collect();
        for term in &terms {
            stats.entry(term.clone()).or_default().1 += 1;
        }
        for term in unique {
            stats.entry(term.clone()).or_default().0 += 1;
        }
    }
    let min_documents = if documents.len() > 1 { 2 } else { 1 };
    let mut ranked: Vec<(String, (usize, usize))> = stats
        .into_iter()
        .filter(|(term, (df, _))| {
            *df >= min_documents
                && !asked.contains(term)
                && term.chars().count() > 2
                && !term.chars().all(|c| c.is_ascii_digit())
        })
        .collect();
    ranked.sort_by(|a, b| {
        b.1 .0
            .cmp(&a.1 .0)
            .then(b.1 .1.cmp(&a.1 .1))
            .then(a.0.cmp(&b.0))
    });
    ranked
        .into_iter()
        .take(limit)
        .map(|(term, _)| term)
        .collect()
}

/// Rank a session's working-memory window against a query: items sharing at least
/// one search term with the query, by the number of distinct shared terms, then the
/// most recent first. `items` are (memory id, text), oldest first.
pub fn rank_window(query: &str, items: &[(MemoryId, String)]) -> Vec<(MemoryId, f64)> {
    let wanted: std::collections::HashSet<String> =
        crate::text::search_terms(query).into_iter().collect();
    if wanted.is_empty() {
        return Vec::new();
    }
    let mut scored: Vec<(usize, MemoryId, f64)> = items
        .iter()
        .enumerate()
        .filter_map(|(position, (id, text))| {
            let terms: std::collections::HashSet<String> =
                crate::text::search_terms(text).into_iter().collect();
            let shared = terms.intersection(&wanted).count();
            (shared > 0).then(|| (position, id.clone(), shared as f64))
        })
        .collect();
    scored.sort_by(|a, b| b.2.total_cmp(&a.2).then(b.0.cmp(&a.0)));
    let mut seen = std::collections::HashSet::new();
    scored
        .into_iter()
        .filter(|(_, id, _)| seen.insert(id.clone()))
        .map(|(_, id, score)| (id, score))
        .collect()
}

/// One ranked candidate list from a retriever, best first, with the retriever's raw scores.
#[derive(Debug, Clone)]
pub struct RankedList {
    /// Which retriever produced it.
    pub retriever: Retriever,
    /// Relative trust in this retriever.
    pub weight: f64,
    /// (id, raw score), best first.
    pub hits: Vec<(MemoryId, f64)>,
}

/// A fused candidate.
#[derive(Debug, Clone, PartialEq)]
pub struct FusedHit {
    /// The memory.
    pub id: MemoryId,
    /// Fused score (higher is better).
    pub score: f64,
    /// Retrievers that found it, in `Retriever` order.
    pub matched_by: Vec<Retriever>,
    /// Raw score per retriever that found it.
    pub components: Vec<(Retriever, f64)>,
}

/// Weighted reciprocal rank fusion: score = Σ weight / (k + rank), rank from 1.
/// Ties break by id so the result is deterministic.
pub fn reciprocal_rank_fusion(lists: &[RankedList], k: f64) -> Vec<FusedHit> {
    let mut by_id: HashMap<&MemoryId, FusedHit> = HashMap::new();
    for list in lists {
        for (rank, (id, raw)) in list.hits.iter().enumerate() {
            let entry = by_id.entry(id).or_insert_with(|| FusedHit {
                id: id.clone(),
                score: 0.0,
                matched_by: Vec::new(),
                components: Vec::new(),
            });
            if entry.matched_by.contains(&list.retriever) {
                continue;
            }
            entry.score += list.weight / (k + rank as f64 + 1.0);
            entry.matched_by.push(list.retriever);
            entry.components.push((list.retriever, *raw));
        }
    }
    let mut fused: Vec<FusedHit> = by_id.into_values().collect();
    for hit in &mut fused {
        hit.matched_by.sort();
    }
    fused.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.id.cmp(&b.id)));
    fused
}

/// Greedy diversification over groups (sessions): pick up to `limit` items, each time
/// the best by `score · (1 − penalty)^n`, where n counts the items already picked from
/// its group; items with no group are never penalised. `penalty` 0 keeps the order of
/// `score` (ties keep the input order). Evidence spread over several conversations
/// then reaches the top instead of being crowded out by one conversation's turns.
pub fn diversify<T>(
    mut items: Vec<T>,
    limit: usize,
    penalty: f64,
    score: impl Fn(&T) -> f64,
    group: impl Fn(&T) -> Option<String>,
) -> Vec<T> {
    let keep = (1.0 - penalty.clamp(0.0, 1.0)).max(0.0);
    let mut picked: Vec<T> = Vec::with_capacity(limit.min(items.len()));
    let mut counts: HashMap<String, i32> = HashMap::new();
    while picked.len() < limit && !items.is_empty() {
        let mut best: Option<(usize, f64)> = None;
        for (index, item) in items.iter().enumerate() {
            let seen = group(item).map_or(0, |g| counts.get(&g).copied().unwrap_or(0));
            let value = score(item) * keep.powi(seen);
            if best.is_none_or(|(_, b)| value > b) {
                best = Some((index, value));
            }
        }
        let Some((index, _)) = best else { break };
        let item = items.remove(index);
        if let Some(g) = group(&item) {
            *counts.entry(g).or_default() += 1;
        }
        picked.push(item);
    }
    picked
}

#[cfg(test)]
mod tests {

    #[test]
    fn diversify_spreads_picks_over_groups_and_keeps_order_without_penalty() {
        let items = vec![
            ("a1", 1.0, Some("a")),
            ("a2", 0.95, Some("a")),
            ("a3", 0.9, Some("a")),
            ("b1", 0.8, Some("b")),
            ("n1", 0.5, None),
        ];
        let pick = |penalty: f64, limit: usize| -> Vec<&str> {
            super::diversify(
                items.clone(),
                limit,
                penalty,
                |i| i.1,
                |i| i.2.map(str::to_string),
            )
            .into_iter()
            .map(|i| i.0)
            .collect()
        };
        assert_eq!(pick(0.0, 5), ["a1", "a2", "a3", "b1", "n1"]);
        assert_eq!(pick(0.0, 2), ["a1", "a2"]);
        // 0.95·0.8 = 0.76 < b1's 0.8: the other session comes second.
        assert_eq!(pick(0.2, 3), ["a1", "b1", "a2"]);
        // A heavy penalty lets even an ungrouped weak item ahead of a third turn of "a".
        assert_eq!(pick(0.9, 5), ["a1", "b1", "n1", "a2", "a3"]);
        assert!(pick(0.5, 0).is_empty());
    }

    #[test]
    fn feedback_terms_are_shared_by_the_top_hits_and_new_to_the_query() {
        let documents = [
            "Caroline went to the LGBTQ support group meeting",
            "the support group meeting was about transgender stories",
            "Melanie painted a lake",
        ];
        let terms = feedback_terms("support group", &documents, 5);
        // "meeting" is in two documents and not in the query; query terms and one-offs are not.
        assert_eq!(terms, vec!["meeting".to_string()]);
        assert_eq!(
            feedback_terms("lake", &documents[2..], 2),
            vec!["melanie", "painted"]
        );
    }

    #[test]
    fn the_window_ranks_by_shared_terms_then_recency() {
        let ids: Vec<MemoryId> = (0..4).map(|_| MemoryId::generate()).collect();
        let items = vec![
            (ids[0].clone(), "deploy the billing api".to_string()),
            (ids[1].clone(), "lunch was good".to_string()),
            (ids[2].clone(), "billing api rate limit".to_string()),
            (ids[3].clone(), "the billing dashboard".to_string()),
        ];
        let ranked = rank_window("billing api limits?", &items);
        let order: Vec<&MemoryId> = ranked.iter().map(|(id, _)| id).collect();
        // ids[2] and ids[0] share two terms (newer first); ids[3] one; lunch none.
        assert_eq!(order, vec![&ids[2], &ids[0], &ids[3]]);
        assert!(rank_window("", &items).is_empty());
    }

    use super::*;

    fn id(s: &str) -> MemoryId {
        MemoryId(s.to_string())
    }

    #[test]
    fn agreement_beats_a_single_top_rank() {
        let lists = vec![
            RankedList {
                retriever: Retriever::Vector,
                weight: 1.0,
                hits: vec![(id("a"), 0.9), (id("b"), 0.8)],
            },
            RankedList {
                retriever: Retriever::Keyword,
                weight: 1.0,
                hits: vec![(id("c"), 9.0), (id("b"), 5.0)],
            },
        ];
        let fused = reciprocal_rank_fusion(&lists, 60.0);
        assert_eq!(fused[0].id, id("b"));
        assert_eq!(
            fused[0].matched_by,
            vec![Retriever::Vector, Retriever::Keyword]
        );
        assert_eq!(fused.len(), 3);
    }

    #[test]
    fn empty_lists_fuse_to_nothing() {
        assert!(reciprocal_rank_fusion(&[], 60.0).is_empty());
    }

    #[test]
    fn weights_shift_the_order() {
        let lists = vec![
            RankedList {
                retriever: Retriever::Vector,
                weight: 0.5,
                hits: vec![(id("a"), 0.9)],
            },
            RankedList {
                retriever: Retriever::Keyword,
                weight: 2.0,
                hits: vec![(id("c"), 9.0)],
            },
        ];
        let fused = reciprocal_rank_fusion(&lists, 60.0);
        assert_eq!(fused[0].id, id("c"));
    }
}

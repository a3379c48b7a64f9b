//! Fusion: combine the candidates of independent retrievers into one ranking, spread
//! relevance to neighbours, and recognise who a transcript line is attributed to.

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
    /// Memories naming an entity the question names (the entity index), across sessions.
    Entity,
    /// Memories stating a fact about an entity the question names that held at the
    /// request's `as_of` (recall as of a time), superseded ones included.
    Facts,
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
            Retriever::Entity => "entity",
            Retriever::Facts => "facts",
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

/// Weighted score fusion. Each retriever's raw scores are put on 0..1 by the best score
/// of its list (negative scores count as 0; a list whose best is not positive counts 1
/// for each hit) and added with the retriever's weight. The vector term is special: every
/// candidate, whichever retriever found it, is scored by its exact similarity to the query
/// (`similarity`, falling back to the vector list's own score), divided by the best
/// similarity among the candidates, so a memory the keyword search found just outside the
/// vector list's depth keeps its semantic evidence. Unlike rank fusion, a clear winner
/// stays ahead of a crowd of near-misses. Ties break by id so the result is deterministic.
pub fn score_fusion(lists: &[RankedList], similarity: &HashMap<MemoryId, f64>) -> Vec<FusedHit> {
    let mut by_id: HashMap<&MemoryId, FusedHit> = HashMap::new();
    for list in lists {
        let best = list.hits.iter().map(|(_, raw)| *raw).fold(0.0, f64::max);
        for (id, raw) in &list.hits {
            let entry = by_id.entry(id).or_insert_with(|| FusedHit {
                id: id.clone(),
                score: 0.0,
                matched_by: Vec::new(),
                components: Vec::new(),
            });
            if entry.matched_by.contains(&list.retriever) {
                continue;
            }
            entry.matched_by.push(list.retriever);
            // The vector component is the similarity actually scored, recorded below.
            if list.retriever != Retriever::Vector {
                entry.components.push((list.retriever, *raw));
                let share = if best > 0.0 {
                    (raw / best).max(0.0)
                } else {
                    1.0
                };
                entry.score += list.weight * share;
            }
        }
    }
    if let Some(vector) = lists.iter().find(|l| l.retriever == Retriever::Vector) {
        let found: HashMap<&MemoryId, f64> = vector.hits.iter().map(|(id, s)| (id, *s)).collect();
        let cosine = |id: &MemoryId| similarity.get(id).or_else(|| found.get(id)).copied();
        let best = by_id.keys().filter_map(|id| cosine(id)).fold(0.0, f64::max);
        for (id, hit) in &mut by_id {
            if let Some(value) = cosine(id) {
                if best > 0.0 {
                    hit.score += vector.weight * value.max(0.0) / best;
                }
                hit.components.push((Retriever::Vector, value));
            }
        }
    }
    let mut fused: Vec<FusedHit> = by_id.into_values().collect();
    for hit in &mut fused {
        hit.matched_by.sort();
    }
    sort_fused(&mut fused);
    fused
}

/// Best score first, ties by id.
pub fn sort_fused(fused: &mut [FusedHit]) {
    fused.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.id.cmp(&b.id)));
}

/// A link from a strong hit (the seed) to a memory next to it: an association of the
/// graph, or the neighbouring turn of the same session.
#[derive(Debug, Clone, PartialEq)]
pub struct NeighbourLink {
    /// The strong hit.
    pub seed: MemoryId,
    /// The memory next to it.
    pub neighbour: MemoryId,
    /// Strength of the link (1 for session neighbours, the association's weight otherwise).
    pub weight: f64,
}

/// Spread relevance along links: a neighbour's score becomes at least its own score
/// (`scores`, 0 when absent) plus `share` × its seed's score × the link's weight. Seeds
/// are read before anything spreads, so relevance moves one hop and never cascades.
/// Returns the memories whose score rose, with their new score.
pub fn propagate(
    scores: &HashMap<MemoryId, f64>,
    links: &[NeighbourLink],
    share: f64,
) -> HashMap<MemoryId, f64> {
    let mut lifted: HashMap<MemoryId, f64> = HashMap::new();
    for link in links {
        if link.seed == link.neighbour {
            continue;
        }
        let seed = scores.get(&link.seed).copied().unwrap_or(0.0);
        let own = scores.get(&link.neighbour).copied().unwrap_or(0.0);
        let candidate = own + share * seed * link.weight;
        if candidate > own {
            let entry = lifted.entry(link.neighbour.clone()).or_insert(candidate);
            *entry = entry.max(candidate);
        }
    }
    lifted
}

/// The speaker a memory's content is attributed to, when it is written as a transcript
/// line ("Alice: …", "Dr Smith: …"): a label of one to three words of letters before a
/// colon at the very start (not a URL scheme, not a time such as "10:30").
pub fn speaker_label(content: &str) -> Option<&str> {
    let (label, rest) = content.split_once(':')?;
    let label = label.trim();
    let words: Vec<&str> = label.split_whitespace().collect();
    let wordlike = |w: &&str| {
        w.chars().next().is_some_and(char::is_alphabetic)
            && w.chars()
                .all(|c| c.is_alphabetic() || matches!(c, '\'' | '-' | '.' | '_'))
    };
    let ok = !words.is_empty()
        && words.len() <= 3
        && label.chars().count() <= 40
        && words.iter().all(wordlike)
        && !rest.starts_with("//");
    ok.then_some(label)
}

/// The lower-cased words of a query, for `names_speaker`.
pub fn query_words(query: &str) -> std::collections::HashSet<String> {
    query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Whether the query (its `query_words`) names `speaker`: every word of the label, whole
/// words, any case ("what did alice say" names "Alice"; "Alice's plan" too).
pub fn names_speaker(query_words: &std::collections::HashSet<String>, speaker: &str) -> bool {
    let mut words = speaker
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .peekable();
    words.peek().is_some() && words.all(|w| query_words.contains(&w))
}

/// The question without the words that name `speakers` (and their possessive "'s"):
/// "What books has Alice's brother read?" with speaker "Alice" → "What books has
/// brother read?". Only a capitalised word after the first is taken for a name, so a
/// label that is a common word ("Decision: …") keeps its meaning in "what was the
/// decision on X". None when nothing was removed, or when no meaningful word is left
/// ("And what about Alice?"), so the caller keeps the question as it is.
pub fn without_speakers(query: &str, speakers: &[&str]) -> Option<String> {
    let names: std::collections::HashSet<String> = speakers
        .iter()
        .flat_map(|s| s.split(|c: char| !c.is_alphanumeric()))
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    if names.is_empty() {
        return None;
    }
    let mut removed = false;
    let kept: Vec<&str> = query
        .split_whitespace()
        .enumerate()
        .filter(|(position, token)| {
            let capitalised = token
                .chars()
                .find(|c| c.is_alphanumeric())
                .is_some_and(char::is_uppercase);
            if *position == 0 || !capitalised {
                return true;
            }
            let word = token
                .trim_matches(|c: char| !c.is_alphanumeric())
                .to_lowercase()
                .replace('\u{2019}', "'");
            let word = word.strip_suffix("'s").unwrap_or(&word);
            let named = names.contains(word);
            removed |= named;
            !named
        })
        .map(|(_, token)| token)
        .collect();
    let meaningful = kept.iter().any(|token| {
        token
            .split(|c: char| !c.is_alphanumeric())
            .any(|w| !w.is_empty() && !crate::text::is_stopword(&w.to_lowercase()))
    });
    (removed && meaningful).then(|| kept.join(" "))
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
    fn score_fusion_keeps_magnitudes_and_scores_every_candidate_by_similarity() {
        let lists = vec![
            RankedList {
                retriever: Retriever::Vector,
                weight: 0.6,
                hits: vec![(id("a"), 0.8), (id("b"), 0.4)],
            },
            RankedList {
                retriever: Retriever::Keyword,
                weight: 0.4,
                hits: vec![(id("c"), 10.0), (id("b"), 9.0), (id("d"), 1.0)],
            },
        ];
        // "c" and "d" were not in the vector list; their exact similarity still counts.
        let similarity: HashMap<MemoryId, f64> =
            [(id("c"), 0.6), (id("d"), -0.2)].into_iter().collect();
        let fused = score_fusion(&lists, &similarity);
        let score = |name: &str| fused.iter().find(|h| h.id == id(name)).unwrap().score;
        assert!((score("a") - 0.6).abs() < 1e-9);
        assert!((score("b") - (0.6 * 0.5 + 0.4 * 0.9)).abs() < 1e-9);
        assert!((score("c") - (0.6 * 0.75 + 0.4)).abs() < 1e-9);
        // Negative similarity adds nothing.
        assert!((score("d") - 0.04).abs() < 1e-9);
        let order: Vec<&str> = fused.iter().map(|h| h.id.0.as_str()).collect();
        assert_eq!(order, ["c", "b", "a", "d"]);
        let c = fused.iter().find(|h| h.id == id("c")).unwrap();
        // Found by keyword only; its similarity shows in the components.
        assert_eq!(c.matched_by, vec![Retriever::Keyword]);
        assert!(c.components.contains(&(Retriever::Vector, 0.6)));
        assert!(score_fusion(&[], &HashMap::new()).is_empty());
    }

    #[test]
    fn a_list_without_positive_scores_counts_each_hit_fully() {
        let lists = vec![RankedList {
            retriever: Retriever::Time,
            weight: 0.5,
            hits: vec![(id("a"), 0.0), (id("b"), 0.0)],
        }];
        let fused = score_fusion(&lists, &HashMap::new());
        assert!(fused.iter().all(|h| (h.score - 0.5).abs() < 1e-9));
        assert_eq!(fused[0].id, id("a"));
    }

    #[test]
    fn relevance_spreads_one_hop_along_links() {
        let link = |seed: &str, neighbour: &str, weight: f64| NeighbourLink {
            seed: id(seed),
            neighbour: id(neighbour),
            weight,
        };
        let scores: HashMap<MemoryId, f64> = [(id("s"), 1.0), (id("n"), 0.2), (id("t"), 0.5)]
            .into_iter()
            .collect();
        let links = [
            link("s", "n", 1.0),
            link("s", "new", 0.5),
            link("t", "n", 1.0),
            link("n", "far", 1.0),
            link("s", "s", 1.0),
        ];
        let lifted = propagate(&scores, &links, 0.3);
        // n: own 0.2 + 0.3 · 1.0 (the stronger of its two seeds).
        assert!((lifted[&id("n")] - 0.5).abs() < 1e-9);
        assert!((lifted[&id("new")] - 0.15).abs() < 1e-9);
        // One hop only: "far" hangs off n's own score, not its lifted one.
        assert!((lifted[&id("far")] - 0.06).abs() < 1e-9);
        assert!(!lifted.contains_key(&id("s")));
        assert!(propagate(&scores, &links, 0.0).is_empty());
    }

    #[test]
    fn transcript_lines_name_their_speaker() {
        assert_eq!(speaker_label("Alice: I moved to Tokyo"), Some("Alice"));
        assert_eq!(
            speaker_label("Dr. Jane Smith: hello"),
            Some("Dr. Jane Smith")
        );
        assert_eq!(speaker_label("user: deploy it"), Some("user"));
        assert_eq!(speaker_label("see https://example.com"), None);
        assert_eq!(speaker_label("https://example.com: the docs"), None);
        assert_eq!(speaker_label("The meeting is at 10:30"), None);
        assert_eq!(speaker_label("Note to self"), None);
        assert_eq!(speaker_label("a b c d: too long a label"), None);
        assert_eq!(speaker_label(": empty"), None);
        let words = query_words("What did Alice's team ship in May?");
        assert!(names_speaker(&words, "Alice"));
        assert!(names_speaker(&words, "alice"));
        assert!(!names_speaker(&words, "Bob"));
        assert!(!names_speaker(
            &query_words("what did Jane say"),
            "Dr. Jane Smith"
        ));
        assert!(names_speaker(
            &query_words("what did Jane Smith say, Dr"),
            "Dr. Jane Smith"
        ));
        assert!(!names_speaker(&words, "..."));
    }

    #[test]
    fn questions_lose_the_names_of_the_speakers_they_name() {
        assert_eq!(
            without_speakers("What books has Alice's brother read?", &["Alice"]).as_deref(),
            Some("What books has brother read?")
        );
        assert_eq!(
            without_speakers(
                "What did Dr Smith and Bob plan for May?",
                &["Dr Smith", "Bob"]
            )
            .as_deref(),
            Some("What did and plan for May?")
        );
        assert_eq!(
            without_speakers("Where has ALICE\u{2019}s team camped?", &["Alice"]).as_deref(),
            Some("Where has team camped?")
        );
        // Nothing named, or nothing left to compare: keep the question.
        assert_eq!(
            without_speakers("What books has Bob read?", &["Alice"]),
            None
        );
        assert_eq!(without_speakers("And what about Alice?", &["Alice"]), None);
        assert_eq!(without_speakers("What books has Alice read?", &[]), None);
        // A name inside another word stays.
        assert_eq!(without_speakers("Is Alicemail down?", &["Alice"]), None);
        // A label that is a common word is a name only where it is written as one.
        assert_eq!(
            without_speakers("what was the decision on the database?", &["Decision"]),
            None
        );
        assert_eq!(
            without_speakers("Alice said what about the launch?", &["Alice"]),
            None
        );
    }
}

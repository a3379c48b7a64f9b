//! BM25 as both SQL stores compute it. Each store finds the matches of a query with its
//! own index (FTS5, a GIN-indexed `tsvector`) and reads, in one snapshot, every match's
//! term frequencies and length, each query term's document frequency and the
//! collection statistics; the score is then computed here, with the same floating-point
//! operations in the same order, so both stores return the same hits, order, ties and
//! scores.
//!
//! The formula is FTS5's `bm25()` (idf ln((N − n + 0.5) / (n + 0.5)), floored at 1e-6)
//! with our own constants: FTS5's fixed k1 1.2 / b 0.75 suit long documents, while a
//! memory is a sentence or two. k1 0.9 / b 0.4 (saturate repeats sooner, normalise
//! length less) measured +0.013 any@10 and +0.016 nDCG@10 on the LoCoMo dev set (README).

use mnemos_actors::model::{AgentId, Memory, MemoryId};
use mnemos_actors::store::KeywordQuery;
use mnemos_actors::text::keyword_terms;

/// Prefix of the shared pool's copies of search terms (not a possible agent prefix:
/// those start with `a`).
pub(crate) const SHARED_TERM_PREFIX: &str = "sharedpol";

/// Prefix of an agent's search terms: `a` + 8 hex digits of a stable hash of the id.
/// A collision only merges two agents' posting lists; searches still filter by agent.
pub(crate) fn agent_term_prefix(agent: &AgentId) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in agent.as_str().bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("a{:08x}", hash as u32)
}

/// A memory's postings, with repeats, in the order both stores index them: its title
/// and content terms under its agent's prefix, then again under the shared prefix when
/// the memory is shared. `spell` writes one (prefix, term) as the store stores it.
pub(crate) fn postings(memory: &Memory, spell: impl Fn(&str, &str) -> String) -> Vec<String> {
    let text = match &memory.title {
        Some(title) => format!("{title} {}", memory.content),
        None => memory.content.clone(),
    };
    let terms = keyword_terms(&text);
    let prefix = agent_term_prefix(&memory.agent_id);
    let mut out: Vec<String> = terms.iter().map(|t| spell(&prefix, t)).collect();
    if memory.shared {
        out.extend(terms.iter().map(|t| spell(SHARED_TERM_PREFIX, t)));
    }
    out
}

/// The distinct search terms of a query's text, sorted.
pub(crate) fn query_terms(text: &str) -> Vec<String> {
    let mut terms = keyword_terms(text);
    terms.sort();
    terms.dedup();
    terms
}

/// The phrases a query searches, in the order of SQLite's MATCH expression: each of
/// `terms` under the agent's prefix, then under the shared prefix when the query
/// includes the shared pool. `spell` writes one (prefix, term) as the store matches it.
pub(crate) fn query_phrases(
    query: &KeywordQuery,
    terms: &[String],
    spell: impl Fn(&str, &str) -> String,
) -> Vec<String> {
    let prefix = agent_term_prefix(&query.agent_id);
    let mut phrases: Vec<String> = terms.iter().map(|t| spell(&prefix, t)).collect();
    if query.include_shared {
        phrases.extend(terms.iter().map(|t| spell(SHARED_TERM_PREFIX, t)));
    }
    phrases
}

/// The best `limit` hits: highest score first, ties by id (SQLite orders by `bm25()`,
/// the negated score, then id).
pub(crate) fn best(mut scored: Vec<(MemoryId, f64)>, limit: usize) -> Vec<(MemoryId, f64)> {
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0 .0.cmp(&b.0 .0)));
    scored.truncate(limit);
    scored
}

/// Term-frequency saturation.
pub(crate) const BM25_K1: f64 = 0.9;
/// Length normalisation (0: none, 1: full).
pub(crate) const BM25_B: f64 = 0.4;

/// BM25 of one row: `freqs[i]` occurrences of the query's i-th phrase, whose idf is
/// `idf[i]`, in a row of `length` terms, in a collection whose mean length is `avgdl`.
pub(crate) fn bm25(freqs: &[f64], idf: &[f64], length: f64, avgdl: f64) -> f64 {
    let mut score = 0.0;
    for (f, idf) in freqs.iter().zip(idf) {
        score += idf
            * ((f * (BM25_K1 + 1.0)) / (f + BM25_K1 * (1.0 - BM25_B + BM25_B * length / avgdl)));
    }
    score
}

/// FTS5's idf for a term found in `hits` of `rows` rows (never below 1e-6).
pub(crate) fn idf(rows: i64, hits: i64) -> f64 {
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
pub(crate) fn fold(term: &str) -> std::borrow::Cow<'_, str> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}

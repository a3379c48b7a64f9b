//! BM25 as both SQL stores compute it. Each store finds the matches of a query with its
//! own index (FTS5, a GIN-indexed `tsvector`) and reads, in one snapshot, every match's
//! term frequencies and length, each query term's document frequency and the
//! collection statistics; the score is then computed by `mnemos_actors::store::keywords`
//! (which recall's in-process keyword index also uses), with the same floating-point
//! operations in the same order, so both stores return the same hits, order, ties and
//! scores.
//!
//! The formula is FTS5's `bm25()` (idf ln((N − n + 0.5) / (n + 0.5)), floored at 1e-6)
//! with our own constants: FTS5's fixed k1 1.2 / b 0.75 suit long documents, while a
//! memory is a sentence or two. k1 0.9 / b 0.4 (saturate repeats sooner, normalise
//! length less) measured +0.013 any@10 and +0.016 nDCG@10 on the LoCoMo dev set (README).

use mnemos_actors::model::{AgentId, Memory};
use mnemos_actors::store::keywords::keyword_text;
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
    let text = keyword_text(memory.title.as_deref(), &memory.content);
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

pub(crate) use mnemos_actors::store::keywords::{best, bm25, fold, idf};

//! Which memories a forget query names, and why: forgetting is a write a person may
//! regret, so a query matches the way a person reads it (every word of it), or, when
//! asked, the way recall ranks (a score at or above a threshold), never by one shared
//! keyword ("staging port" must not archive "How to restart staging").

use std::collections::HashSet;

use crate::text::{keyword_terms, search_terms};

/// Why one memory matches a forget query.
#[derive(Debug, Clone, PartialEq)]
pub enum ForgetReason {
    /// The memory holds every searchable word of the query (compared by stem, so
    /// "ports" finds "port"); `words` are the query's words as written.
    AllTerms {
        /// The query's searchable words, as the query wrote them.
        words: Vec<String>,
    },
    /// Recall scored the memory at or above the caller's threshold.
    Score {
        /// Recall's score on 0..1.
        score: f64,
        /// The threshold it passed.
        min_score: f64,
        /// The retrievers that found it.
        matched_by: Vec<String>,
    },
}

impl ForgetReason {
    /// One line a person reads in a dry run.
    pub fn explain(&self) -> String {
        match self {
            Self::AllTerms { words } => {
                format!("contains every word of the query: {}", words.join(", "))
            }
            Self::Score {
                score,
                min_score,
                matched_by,
            } => format!(
                "recall score {score:.3} ≥ min_score {min_score} (found by {})",
                if matched_by.is_empty() {
                    "no retriever".to_string()
                } else {
                    matched_by.join(", ")
                }
            ),
        }
    }
}

/// The query's searchable words (stop words dropped), each once, in order: what every
/// matching memory must contain. Empty when the query holds no searchable word.
pub fn query_words(query: &str) -> Vec<String> {
    let mut seen = HashSet::new();
    search_terms(query)
        .into_iter()
        .filter(|word| seen.insert(word.clone()))
        .collect()
}

/// `Some(reason)` when `text` holds every one of `words` (by keyword stem, as the
/// keyword index compares); `None` otherwise, and for an empty word list.
pub fn all_terms_match(words: &[String], text: &str) -> Option<ForgetReason> {
    if words.is_empty() {
        return None;
    }
    let held: HashSet<String> = keyword_terms(text).into_iter().collect();
    words
        .iter()
        .all(|word| {
            keyword_terms(word)
                .iter()
                .all(|stem| held.contains(stem.as_str()))
        })
        .then(|| ForgetReason::AllTerms {
            words: words.to_vec(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(query: &str) -> Vec<String> {
        query_words(query)
    }

    #[test]
    fn one_shared_keyword_is_not_a_match() {
        let query = words("staging port");
        assert!(all_terms_match(&query, "How to restart staging: stop the pods, then…").is_none());
        assert!(all_terms_match(&query, "The staging DB runs on port 5433").is_some());
    }

    #[test]
    fn words_compare_by_stem_and_stop_words_do_not_count() {
        let query = words("the ports of staging");
        assert_eq!(query, ["ports", "staging"]);
        assert!(all_terms_match(&query, "Staged services use port 80").is_some());
        assert!(all_terms_match(&query, "Port 80 is open").is_none());
    }

    #[test]
    fn numbers_must_match_whole() {
        let query = words("port 5433");
        assert!(all_terms_match(&query, "the DB listens on port 5433").is_some());
        assert!(all_terms_match(&query, "the DB listens on port 54330").is_none());
    }

    #[test]
    fn a_query_of_stop_words_matches_nothing() {
        let query = words("the of and");
        assert!(query.is_empty());
        assert!(all_terms_match(&query, "the cat of the house and the dog").is_none());
    }

    #[test]
    fn reasons_read_as_a_sentence() {
        let all = all_terms_match(&words("wifi password"), "the wifi password is hunter2");
        assert_eq!(
            all.unwrap().explain(),
            "contains every word of the query: wifi, password"
        );
        let scored = ForgetReason::Score {
            score: 0.8123,
            min_score: 0.5,
            matched_by: vec!["vector".into(), "keyword".into()],
        };
        assert_eq!(
            scored.explain(),
            "recall score 0.812 ≥ min_score 0.5 (found by vector, keyword)"
        );
    }
}

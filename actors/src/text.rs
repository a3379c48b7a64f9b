//! Text helpers shared by the keyword index, the built-in embedder and token budgets.

/// A small English stop-list: words too common to carry meaning in search.
const STOPWORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "all",
    "am",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "could",
    "d",
    "did",
    "do",
    "does",
    "doing",
    "down",
    "during",
    "each",
    "few",
    "for",
    "from",
    "further",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "itself",
    "just",
    "ll",
    "m",
    "me",
    "more",
    "most",
    "my",
    "myself",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "re",
    "s",
    "same",
    "she",
    "should",
    "so",
    "some",
    "such",
    "t",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "ve",
    "very",
    "was",
    "we",
    "were",
    "what",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "why",
    "will",
    "with",
    "would",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
];

/// True for words too common to carry meaning in search.
pub fn is_stopword(word: &str) -> bool {
    STOPWORDS.binary_search(&word).is_ok()
}

/// Lower-cased alphanumeric words of `text`, stop words removed: the words of a text
/// that carry its meaning (what feedback terms and working-memory matches compare).
pub fn search_terms(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| w.to_lowercase())
        .filter(|w| !is_stopword(w))
        .collect()
}

/// Names the form of `keyword_terms`. A store records it beside its keyword index and
/// re-derives the index on open when it differs, so an upgrade never searches stems
/// against unstemmed postings.
pub const KEYWORD_TERMS_VERSION: &str = "search-terms+snowball-english";

/// The terms the keyword index holds and a keyword query matches: `search_terms`, each
/// reduced to its English (Snowball) stem, so "camping", "camped" and "camps" find one
/// another. Words with digits are kept whole ("v2", "2023").
pub fn keyword_terms(text: &str) -> Vec<String> {
    static STEMMER: std::sync::LazyLock<rust_stemmers::Stemmer> = std::sync::LazyLock::new(|| {
        rust_stemmers::Stemmer::create(rust_stemmers::Algorithm::English)
    });
    // Stems of words seen lately on this thread: a text's words mostly come back (Zipf),
    // and stemming is most of the cost of indexing one (a reload indexes every memory).
    thread_local! {
        static STEMS: std::cell::RefCell<crate::hashing::FastMap<String, String>> =
            std::cell::RefCell::new(crate::hashing::FastMap::default());
    }
    /// Words remembered per thread before the cache starts over.
    const STEMS_KEPT: usize = 32_768;
    STEMS.with(|stems| {
        let mut stems = stems.borrow_mut();
        search_terms(text)
            .into_iter()
            .map(|word| {
                if word.chars().any(|c| c.is_ascii_digit()) {
                    return word;
                }
                if let Some(stem) = stems.get(&word) {
                    return stem.clone();
                }
                let stem = STEMMER.stem(&word).into_owned();
                if stems.len() >= STEMS_KEPT {
                    stems.clear();
                }
                stems.insert(word, stem.clone());
                stem
            })
            .collect()
    })
}

/// Estimated token count of `text` for budgets, modelled on byte-level BPE
/// tokenizers (GPT-2 family, as used by SmolLM2 and many open models): a run of
/// letters up to 10 long is one token (with its leading space), longer runs add one
/// token per 4 further letters; every digit and every punctuation mark is a token; a
/// non-ASCII character costs about one token per two UTF-8 bytes; each newline or tab
/// is a token, and so is a run of several spaces. On LoCoMo dialogue blocks this lands within 3% of
/// SmolLM2's tokenizer (the test suite checks ±5% against the real one).
pub fn estimate_tokens(text: &str) -> usize {
    let mut tokens = 0usize;
    let mut letters = 0usize;
    let mut spaces = 0usize;
    let flush_letters = |letters: &mut usize, tokens: &mut usize| {
        if *letters > 0 {
            *tokens += if *letters <= 10 {
                1
            } else {
                1 + (*letters - 10).div_ceil(4)
            };
            *letters = 0;
        }
    };
    for c in text.chars() {
        if c.is_ascii_alphabetic() {
            if spaces > 1 {
                tokens += 1;
            }
            spaces = 0;
            letters += 1;
            continue;
        }
        flush_letters(&mut letters, &mut tokens);
        if c == ' ' {
            spaces += 1;
            continue;
        }
        if spaces > 1 {
            tokens += 1;
        }
        spaces = 0;
        if c.is_whitespace() {
            // A newline or tab: one token (counted when the next piece starts).
            spaces = 2;
        } else if c.is_ascii() {
            tokens += 1;
        } else {
            tokens += c.len_utf8().div_ceil(2);
        }
    }
    flush_letters(&mut letters, &mut tokens);
    if spaces > 1 {
        tokens += 1;
    }
    tokens
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_estimate_follows_bpe_pieces() {
        assert_eq!(estimate_tokens(""), 0);
        assert_eq!(estimate_tokens("hello world"), 2);
        // Digits and punctuation are tokens of their own.
        assert_eq!(estimate_tokens("port 5433."), 6);
        // Long words split.
        assert_eq!(estimate_tokens("internationalization"), 4);
        // Each newline is a token; a single space is part of the next word.
        assert_eq!(estimate_tokens("a\n\nb c"), 5);
        assert!(estimate_tokens("café") >= 2);
    }

    #[test]
    fn stoplist_is_sorted_for_binary_search() {
        let mut sorted = STOPWORDS.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, STOPWORDS);
    }

    #[test]
    fn search_terms_drop_stopwords_and_punctuation() {
        assert_eq!(
            search_terms("What is the API rate-limit?"),
            vec!["api", "rate", "limit"]
        );
    }

    #[test]
    fn keyword_terms_share_stems_and_keep_numbers_whole() {
        assert_eq!(keyword_terms("camping"), keyword_terms("camped"));
        assert_eq!(keyword_terms("Researching"), keyword_terms("research"));
        assert_eq!(keyword_terms("the kids' paintings"), vec!["kid", "paint"]);
        assert_eq!(
            keyword_terms("v2 released 2023"),
            vec!["v2", "releas", "2023"]
        );
        assert!(keyword_terms("the and of").is_empty());
    }
}

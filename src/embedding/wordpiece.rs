//! BERT's uncased WordPiece tokenizer, written out so the static embedder can split a
//! text into vocabulary ids in a few microseconds without the `tokenizers` pipeline.
//!
//! It follows what `tokenizer.json` of all-MiniLM-L6-v2 declares: the `BertNormalizer`
//! (drop control characters, spaces around CJK ideographs, strip accents, lowercase),
//! the `BertPreTokenizer` (split on whitespace, each punctuation character a word of
//! its own) and greedy longest-match-first WordPiece with `##` continuations, a word
//! longer than `max_input_chars_per_word` characters being `[UNK]`. The test module
//! checks it against the `tokenizers` crate on the model's own file.

use std::collections::HashMap;

use unicode_categories::UnicodeCategories;
use unicode_normalization::UnicodeNormalization;

/// Prefix of a vocabulary entry that continues a word.
const CONTINUATION: &str = "##";

/// A WordPiece vocabulary: token text → id, whole-word pieces and `##` continuations.
#[derive(Debug, Clone)]
pub struct WordPiece {
    /// Whole-word pieces (no `##`) by text.
    starts: HashMap<String, u32>,
    /// Continuation pieces by their text without the `##`.
    continuations: HashMap<String, u32>,
    /// Id of `[UNK]`, given for a word that no sequence of pieces spells.
    unk: u32,
    /// Words longer than this many characters are `[UNK]` without trying.
    max_chars_per_word: usize,
    /// The longest piece in bytes: the longest prefix worth looking up.
    longest_piece: usize,
}

impl WordPiece {
    /// A tokenizer over `tokens` (index = id); `unk` must be one of them.
    pub fn new(tokens: &[String], unk: u32, max_chars_per_word: usize) -> Self {
        let mut starts = HashMap::with_capacity(tokens.len());
        let mut continuations = HashMap::new();
        let mut longest_piece = 1;
        for (id, token) in tokens.iter().enumerate() {
            let id = u32::try_from(id).unwrap_or(u32::MAX);
            match token.strip_prefix(CONTINUATION) {
                Some(rest) if !rest.is_empty() => {
                    longest_piece = longest_piece.max(rest.len());
                    continuations.entry(rest.to_string()).or_insert(id);
                }
                _ => {
                    longest_piece = longest_piece.max(token.len());
                    starts.entry(token.clone()).or_insert(id);
                }
            }
        }
        Self {
            starts,
            continuations,
            unk,
            max_chars_per_word,
            longest_piece,
        }
    }

    /// The ids of `text`'s pieces, in order, without `[CLS]`/`[SEP]`; at most `limit` ids.
    pub fn encode(&self, text: &str, limit: usize) -> Vec<u32> {
        let mut ids = Vec::new();
        let normalized = normalize(text);
        for word in pre_tokenize(&normalized) {
            if ids.len() >= limit {
                break;
            }
            self.push_word(word, &mut ids);
        }
        ids.truncate(limit);
        ids
    }

    /// Append the pieces of one normalised word (or `[UNK]`).
    fn push_word(&self, word: &str, ids: &mut Vec<u32>) {
        if word.chars().count() > self.max_chars_per_word {
            ids.push(self.unk);
            return;
        }
        let mark = ids.len();
        let mut start = 0;
        while start < word.len() {
            let table = if start == 0 {
                &self.starts
            } else {
                &self.continuations
            };
            let mut end = word.len().min(start + self.longest_piece);
            let mut found = None;
            while end > start {
                if word.is_char_boundary(end) {
                    if let Some(&id) = table.get(&word[start..end]) {
                        found = Some(id);
                        break;
                    }
                }
                end -= 1;
            }
            match found {
                Some(id) => {
                    ids.push(id);
                    start = end;
                }
                None => {
                    ids.truncate(mark);
                    ids.push(self.unk);
                    return;
                }
            }
        }
    }
}

/// `BertNormalizer` with `clean_text`, `handle_chinese_chars`, accent stripping and lower-casing.
fn normalize(text: &str) -> String {
    let mut cleaned = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c == '\0' || c == '\u{fffd}' || is_control(c) {
            continue;
        }
        if is_whitespace(c) {
            cleaned.push(' ');
        } else if is_cjk(c) {
            cleaned.push(' ');
            cleaned.push(c);
            cleaned.push(' ');
        } else {
            cleaned.push(c);
        }
    }
    if cleaned.is_ascii() {
        cleaned.make_ascii_lowercase();
        return cleaned;
    }
    cleaned
        .nfd()
        .filter(|c| !c.is_mark_nonspacing())
        .flat_map(char::to_lowercase)
        .collect()
}

/// `BertPreTokenizer`: words split on whitespace, every punctuation character alone.
fn pre_tokenize(text: &str) -> impl Iterator<Item = &str> {
    let mut words = Vec::new();
    let mut start: Option<usize> = None;
    for (index, c) in text.char_indices() {
        if c.is_whitespace() {
            if let Some(from) = start.take() {
                words.push(&text[from..index]);
            }
        } else if is_punctuation(c) {
            if let Some(from) = start.take() {
                words.push(&text[from..index]);
            }
            words.push(&text[index..index + c.len_utf8()]);
        } else if start.is_none() {
            start = Some(index);
        }
    }
    if let Some(from) = start {
        words.push(&text[from..]);
    }
    words.into_iter()
}

/// Whitespace as BERT sees it: tab, newlines and Unicode white space.
fn is_whitespace(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r') || c.is_whitespace()
}

/// Control characters BERT drops (tab and newlines count as whitespace instead).
/// ASCII, most of what agents write, skips the Unicode table's binary search (in ASCII
/// only the C0 controls and DEL are "other").
fn is_control(c: char) -> bool {
    if matches!(c, '\t' | '\n' | '\r') {
        return false;
    }
    if c.is_ascii() {
        return c.is_ascii_control();
    }
    c.is_other()
}

/// ASCII symbols and Unicode punctuation: each becomes a word of its own. ASCII skips
/// the Unicode table's binary search (ASCII's punctuation is all ASCII punctuation).
fn is_punctuation(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_punctuation();
    }
    c.is_punctuation()
}

/// The CJK ideograph blocks BERT surrounds with spaces.
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF
        | 0x3400..=0x4DBF
        | 0x20000..=0x2A6DF
        | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F
        | 0x2B920..=0x2CEAF
        | 0xF900..=0xFAFF
        | 0x2F800..=0x2FA1F)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toy() -> WordPiece {
        let tokens: Vec<String> = [
            "[PAD]", "[UNK]", "un", "##aff", "##able", "the", "cafe", ",", "run", "##ning", "!",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        WordPiece::new(&tokens, 1, 100)
    }

    #[test]
    fn the_ascii_shortcuts_agree_with_the_unicode_tables() {
        for c in (0u8..=127).map(char::from) {
            let tables_control = !matches!(c, '\t' | '\n' | '\r') && c.is_other();
            assert_eq!(is_control(c), tables_control, "{c:?}");
            let tables_punctuation = c.is_ascii_punctuation() || c.is_punctuation();
            assert_eq!(is_punctuation(c), tables_punctuation, "{c:?}");
        }
        // Beyond ASCII the tables still answer.
        assert!(is_punctuation('«') && is_punctuation('。'));
        assert!(is_control('\u{200b}') && !is_control('é'));
    }

    #[test]
    fn greedy_longest_match_with_continuations() {
        let wp = toy();
        assert_eq!(wp.encode("unaffable", 64), vec![2, 3, 4]);
        assert_eq!(wp.encode("Running!", 64), vec![8, 9, 10]);
        // A word no pieces spell is one [UNK], not a partial spelling.
        assert_eq!(wp.encode("unafx the", 64), vec![1, 5]);
    }

    #[test]
    fn accents_case_and_punctuation_are_normalised() {
        let wp = toy();
        assert_eq!(wp.encode("THE Café,", 64), vec![5, 6, 7]);
        assert_eq!(wp.encode("the\u{200b}\tthe", 64), vec![5, 5]);
    }

    #[test]
    fn the_limit_cuts_pieces_and_long_words_are_unknown() {
        let wp = toy();
        assert_eq!(wp.encode("the the the", 2), vec![5, 5]);
        let long = "a".repeat(101);
        assert_eq!(
            WordPiece::new(&["[UNK]".into()], 0, 100).encode(&long, 8),
            vec![0]
        );
    }

    #[test]
    fn matches_the_tokenizers_crate_on_the_model_vocabulary() {
        let Some(dir) = crate::embedding::test_model_dir() else {
            return;
        };
        let mut reference = tokenizers::Tokenizer::from_file(dir.join("tokenizer.json")).unwrap();
        reference.with_padding(None);
        reference.with_truncation(None).unwrap();
        let vocab = crate::embedding::static_table::vocabulary_of(&dir).unwrap();
        let wp = WordPiece::new(&vocab.tokens, vocab.unk, vocab.max_chars_per_word);
        let samples = [
            "The staging DB runs on port 5433.",
            "Melanie's kids (ages 4 & 7) love the café near Zürich!",
            "fn main() { println!(\"héllo, wörld\"); } // v1.2.3-rc.1",
            "Deploy lock: don't push to main after 17:00 UTC; ask @ops-bot.",
            "日本語のテキストと English mixed — “quoted” text…",
            "  multiple   spaces\tand\nnewlines\r\n",
            "supercalifragilisticexpialidocious antidisestablishmentarianism",
            "/home/alice/src/mnemos/Cargo.toml https://example.com/a?b=c#d",
            "a bell\u{7}, a delete\u{7f} and symbols $+<=>^`|~ in ASCII",
        ];
        for sample in samples {
            let expected = reference.encode(sample, false).unwrap();
            assert_eq!(wp.encode(sample, 10_000), expected.get_ids(), "{sample}");
        }
    }
}

//! Keeping memory consistent (pure): the normalised content hash behind exact
//! deduplication, and the heuristic that recognises a new statement contradicting an
//! old one (a changed value of the same attribute, or a negation).

use crate::text::is_stopword;

/// Hash of content after lower-casing, dropping punctuation and collapsing whitespace,
/// so "I live in Paris." and "i live in  paris" are the same memory.
pub fn normalized_hash(content: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut first = true;
    for word in content
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        if !first {
            hash ^= u64::from(b' ');
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        first = false;
        for c in word.chars().flat_map(char::to_lowercase) {
            let mut buffer = [0u8; 4];
            for byte in c.encode_utf8(&mut buffer).bytes() {
                hash ^= u64::from(byte);
                hash = hash.wrapping_mul(0x0100_0000_01b3);
            }
        }
    }
    format!("{hash:016x}")
}

fn tokens(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric() && c != '.')
        .map(|w| w.trim_matches('.'))
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

const NEGATIONS: &[&str] = &[
    "not", "no", "never", "longer", "don't", "doesn't", "isn't", "aren't", "won't", "stopped",
    "quit", "anymore",
];

/// If `new` contradicts `old`, say how.
///
/// Two shapes are recognised:
/// - **changed value**: both statements share a frame of at least three words (one of
///   them meaningful) around a short differing span ("I live in *Paris*" → "I live in *Tokyo*";
///   "the rate limit is *1000* req/min" → "… *500* req/min");
/// - **negation**: the new statement is the old one with a negation added
///   ("I drink coffee" → "I no longer drink coffee").
pub fn contradiction(old: &str, new: &str) -> Option<String> {
    let a = tokens(old);
    let b = tokens(new);
    if a.is_empty() || b.is_empty() || a == b {
        return None;
    }
    let is_negation = |t: &String| NEGATIONS.contains(&t.as_str()) || t.ends_with("n't");
    let a_core: Vec<&String> = a.iter().filter(|t| !is_negation(t)).collect();
    let b_core: Vec<&String> = b.iter().filter(|t| !is_negation(t)).collect();
    let a_negated = a.iter().any(is_negation);
    let b_negated = b.iter().any(is_negation);
    if a_core == b_core && a_negated != b_negated && a_core.len() >= 2 {
        return Some("negation of the earlier statement".into());
    }
    let prefix = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let suffix = a[prefix..]
        .iter()
        .rev()
        .zip(b[prefix..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let old_span = &a[prefix..a.len() - suffix];
    let new_span = &b[prefix..b.len() - suffix];
    // The shared frame must say which attribute changed: three words or more, one of them meaningful.
    let frame: Vec<&String> = a[..prefix].iter().chain(&a[a.len() - suffix..]).collect();
    let framed = frame.len() >= 3 && frame.iter().any(|t| !is_stopword(t));
    let short = |span: &[String]| (1..=3).contains(&span.len());
    if short(old_span) && short(new_span) && framed && a_negated == b_negated {
        // The differing span must carry a value, not only function words.
        let meaningful = |span: &[String]| span.iter().any(|t| !is_stopword(t));
        if meaningful(old_span) && meaningful(new_span) {
            return Some(format!(
                "changed value: \"{}\" → \"{}\"",
                old_span.join(" "),
                new_span.join(" ")
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_ignores_case_punctuation_and_spacing() {
        assert_eq!(
            normalized_hash("I live in Paris."),
            normalized_hash("i live in   paris")
        );
        assert_ne!(
            normalized_hash("I live in Paris"),
            normalized_hash("I live in Tokyo")
        );
        assert_ne!(normalized_hash("ab c"), normalized_hash("a bc"));
    }

    #[test]
    fn changed_values_are_contradictions() {
        assert!(contradiction("I live in Paris", "I live in Tokyo").is_some());
        assert!(contradiction(
            "The rate limit is 1000 req/min",
            "The rate limit is 500 req/min"
        )
        .is_some());
        assert!(contradiction(
            "Our standup is at 9:30 on Mondays",
            "Our standup is at 10:00 on Mondays"
        )
        .is_some());
        assert!(contradiction(
            "My favourite editor is vim",
            "My favourite editor is VS Code"
        )
        .is_some());
    }

    #[test]
    fn negations_are_contradictions() {
        assert!(contradiction(
            "I drink coffee every morning",
            "I no longer drink coffee every morning"
        )
        .is_some());
        assert!(
            contradiction(
                "The API supports pagination",
                "The API does not support pagination"
            )
            .is_none(),
            "different verb forms are left alone"
        );
        assert!(contradiction("Alice is on the team", "Alice is not on the team").is_some());
    }

    #[test]
    fn compatible_statements_are_not_contradictions() {
        assert!(contradiction("I live in Paris", "I live in Paris").is_none());
        assert!(contradiction("I live in Paris", "I love pastries from Paris").is_none());
        assert!(contradiction(
            "The build uses cargo",
            "Tests run with cargo nextest in CI on every push"
        )
        .is_none());
        assert!(contradiction(
            "I like tea",
            "I like tea and biscuits with friends on sundays"
        )
        .is_none());
    }
}

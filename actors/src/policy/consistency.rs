//! Keeping memory consistent (pure): the normalised content hash behind exact
//! deduplication, and the heuristic that recognises a new statement contradicting an
//! old one (a changed value of the same attribute, or a negation).

use crate::text::is_stopword;

/// Hash of content after lower-casing, dropping punctuation and collapsing whitespace,
/// so "I live in Paris." and "i live in  paris" are the same memory. Symbols that carry
/// meaning stay ("-5" is not "5", "C++" is not "C", "$5k" is not "€5k", 👍 is not 👎),
/// and content with no word or symbol at all hashes as written.
pub fn normalized_hash(content: &str) -> String {
    let mut tokens: Vec<String> = Vec::new();
    let mut word = String::new();
    for c in content.chars() {
        if c.is_alphanumeric() {
            word.extend(c.to_lowercase());
            continue;
        }
        if !word.is_empty() {
            tokens.push(std::mem::take(&mut word));
        }
        if is_meaningful_symbol(c) {
            tokens.push(c.to_string());
        }
    }
    if !word.is_empty() {
        tokens.push(word);
    }
    if tokens.is_empty() && !content.trim().is_empty() {
        tokens.push(content.trim().to_string());
    }
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for (i, token) in tokens.iter().enumerate() {
        if i > 0 {
            hash ^= u64::from(b' ');
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        for byte in token.bytes() {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{hash:016x}")
}

/// A character that changes what a text says (a sign, an operator, a currency, an
/// emoji or other symbol), as opposed to punctuation and spacing.
fn is_meaningful_symbol(c: char) -> bool {
    let code = u32::from(c);
    matches!(c, '+' | '-' | '#' | '$' | '%' | '<' | '>' | '=' | '@' | '&' | '*' | '/' | '~' | '^' | '|' | '£' | '¥' | '°')
        // Currency signs, then letter-like symbols, arrows, maths, dingbats and emoji
        // (CJK punctuation excepted).
        || (0x20A0..=0x20CF).contains(&code)
        || (code >= 0x2100 && !(0x3000..=0x303F).contains(&code) && !c.is_alphanumeric())
}

/// Lower-cased words; dots inside numbers ("1.27") and apostrophes inside words
/// ("don't", typographic or not) stay, so a version or a contraction is one token.
fn tokens(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric() && !matches!(c, '.' | '\'' | '\u{2019}'))
        .map(|w| w.trim_matches(|c| matches!(c, '.' | '\'' | '\u{2019}')))
        .filter(|w| !w.is_empty())
        .map(|w| w.to_lowercase().replace('\u{2019}', "'"))
        .collect()
}

/// Auxiliaries a negation brings along ("I *do* not drink coffee"), left out when a
/// statement is compared with its negation.
const NEGATION_AUXILIARIES: &[&str] = &["do", "does", "did"];

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
    let a_negated = a.iter().any(is_negation);
    let b_negated = b.iter().any(is_negation);
    // The statement without its negation: "isn't" keeps its "is", "won't" its "will".
    let core = |tokens: &[String], negated: bool| -> Vec<String> {
        tokens
            .iter()
            .filter_map(|t| match t.strip_suffix("n't") {
                Some("wo") => Some("will".to_string()),
                Some("ca") => Some("can".to_string()),
                Some(stem) if !stem.is_empty() => Some(stem.to_string()),
                _ if is_negation(t) => None,
                _ => Some(t.clone()),
            })
            .filter(|t| !(negated && NEGATION_AUXILIARIES.contains(&t.as_str())))
            .collect()
    };
    let a_core = core(&a, a_negated);
    let b_core = core(&b, b_negated);
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
    // The shared frame must say which attribute changed: three words or more, one of
    // them meaningful, and the attribute named before the value. A differing span with
    // only function words before it is a different subject or qualifier ("*Alice* lives
    // in Paris" → "*Bob* lives in Paris"; "the *staging* rate limit" → "the *production*
    // rate limit"), two facts that can both hold.
    let frame: Vec<&String> = a[..prefix].iter().chain(&a[a.len() - suffix..]).collect();
    let attribute_first = a[..prefix].iter().any(|t| !is_stopword(t));
    let framed = frame.len() >= 3 && frame.iter().any(|t| !is_stopword(t)) && attribute_first;
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
    fn hash_keeps_signs_operators_currencies_and_emoji() {
        assert_ne!(
            normalized_hash("The threshold is -5"),
            normalized_hash("The threshold is 5")
        );
        assert_ne!(normalized_hash("I use C++"), normalized_hash("I use C"));
        assert_ne!(normalized_hash("Budget $5k"), normalized_hash("Budget €5k"));
        assert_ne!(normalized_hash("👍"), normalized_hash("👎"));
        assert_ne!(normalized_hash("..."), normalized_hash("?!"));
        assert_eq!(normalized_hash("👍 "), normalized_hash(" 👍"));
        assert_eq!(
            normalized_hash("Café au lait."),
            normalized_hash("café AU lait")
        );
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
        // Contractions and "do not" are negations too.
        assert!(contradiction(
            "I drink coffee every morning",
            "I don't drink coffee every morning"
        )
        .is_some());
        assert!(contradiction(
            "I drink coffee every morning",
            "I do not drink coffee every morning"
        )
        .is_some());
        assert!(contradiction("Bob is my manager", "Bob isn\u{2019}t my manager").is_some());
    }

    #[test]
    fn a_different_subject_or_qualifier_is_not_a_changed_value() {
        assert!(contradiction("Alice lives in Paris", "Bob lives in Paris").is_none());
        assert!(contradiction("My sister lives in Tokyo", "My brother lives in Tokyo").is_none());
        assert!(contradiction(
            "The staging rate limit is 1000 req/min",
            "The production rate limit is 1000 req/min"
        )
        .is_none());
        // The same subject with a new value still is one.
        assert!(contradiction("Alice lives in Paris", "Alice lives in Tokyo").is_some());
        assert!(contradiction(
            "Our cluster runs k8s version 1.27",
            "Our cluster runs k8s version 1.29"
        )
        .is_some());
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

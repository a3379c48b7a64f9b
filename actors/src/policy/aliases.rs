//! Aliases a text states, by rules: "Melanie (Mel)", "Mel, short for Melanie",
//! "Robert, aka Bob", "Acme Corporation (ACME)", "Robert, who goes by Bob". The entity
//! index merges such an alias into the entity it names, records the merge in the
//! agent's merge history, and never merges it again once the merge is undone.
//!
//! Pure: the same text and mentions always give the same pairs. Only names the entity
//! rules found are paired, and the alias must be shorter than the name it stands for,
//! so "Lisbon (Portugal)" is no alias (neither is a short form of the other).

use crate::policy::entities::EntityMention;

/// One alias a text states: `alias` stands for `name` (both resolution keys).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatedAlias {
    /// The short form's key ("mel").
    pub alias: String,
    /// The full name's key ("melanie").
    pub name: String,
}

/// Phrases between a full name and its alias ("Robert, aka Bob").
const NAME_THEN_ALIAS: &[&str] = &[
    "aka",
    "a.k.a.",
    "also known as",
    "who goes by",
    "known as",
    "or",
    "nicknamed",
];

/// Phrases between an alias and the full name ("Bob, short for Robert").
const ALIAS_THEN_NAME: &[&str] = &["short for", "is short for"];

/// Whether `alias` may be a short form of `name`: shorter, and its letters a prefix of
/// the name, the name's initials, or a prefix of one of its words.
fn short_form_of(alias: &str, name: &str) -> bool {
    let (a, n): (String, String) = (
        alias.chars().filter(|c| c.is_alphanumeric()).collect(),
        name.chars().filter(|c| c.is_alphanumeric()).collect(),
    );
    if a.is_empty() || a.len() >= n.len() {
        return false;
    }
    let initials: String = name
        .split_whitespace()
        .filter_map(|w| w.chars().next())
        .collect();
    n.starts_with(&a)
        || initials == a
        || name
            .split_whitespace()
            .any(|w| w.len() > a.len() && w.starts_with(&a))
        || (a.len() >= 2 && is_nickname(&a, &n))
}

/// A nickname whose letters are not the name's prefix ("bob" for "robert", "bill" for
/// "william"): its letters after the first are a prefix of the name's after the first
/// vowel-led rhyme. Kept narrow: the last two letters of the alias's stem must occur in
/// the name in order and both start with a consonant.
fn is_nickname(alias: &str, name: &str) -> bool {
    let vowels = |c: char| "aeiou".contains(c);
    let (Some(a0), Some(n0)) = (alias.chars().next(), name.chars().next()) else {
        return false;
    };
    if vowels(a0) || vowels(n0) || alias.len() < 3 {
        return false;
    }
    // "bob" / "robert": "ob" in "obert"; "bill" / "william": "il" in "illiam".
    let rest_alias: String = alias.chars().skip(1).take(2).collect();
    let rest_name: String = name.chars().skip(1).collect();
    rest_name.starts_with(&rest_alias)
}

/// Why two entity keys of one agent may name the same one, when their forms say so:
/// one is a short form of the other ("mel" / "melanie", "bob" / "robert", "acme" /
/// "acme corporation"), one is a word of the other ("smith" / "john smith"), or the
/// same words with initials ("j. smith" / "john smith"). None when nothing does. Only
/// a hint: the entity's contexts must agree too before anyone is asked to merge.
pub fn may_name_the_same(a: &str, b: &str) -> Option<&'static str> {
    if a == b || a.is_empty() || b.is_empty() {
        return None;
    }
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    if short_form_of(short, long) {
        return Some("short form");
    }
    let words = |key: &str| -> Vec<String> {
        key.split_whitespace()
            .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()).to_string())
            .filter(|w| !w.is_empty())
            .collect()
    };
    let (short_words, long_words) = (words(short), words(long));
    if short_words.len() == 1
        && long_words.len() > 1
        && short_words[0].chars().count() >= 3
        && long_words.contains(&short_words[0])
    {
        return Some("a word of the name");
    }
    let initial_of =
        |w: &str, full: &str| w.chars().count() == 1 && full.starts_with(w) || w == full;
    if short_words.len() == long_words.len()
        && short_words.len() > 1
        && short_words
            .iter()
            .zip(&long_words)
            .all(|(s, l)| initial_of(s, l) || initial_of(l, s))
    {
        return Some("initials");
    }
    None
}

/// The aliases `text` states between two of its `mentions`.
pub fn stated_aliases(text: &str, mentions: &[EntityMention]) -> Vec<StatedAlias> {
    let mut out = Vec::new();
    let mut push = |alias: &EntityMention, name: &EntityMention| {
        if alias.key == name.key || !short_form_of(&alias.key, &name.key) {
            return;
        }
        let found = StatedAlias {
            alias: alias.key.clone(),
            name: name.key.clone(),
        };
        if !out.contains(&found) {
            out.push(found);
        }
    };
    let mut ordered: Vec<&EntityMention> = mentions.iter().collect();
    ordered.sort_by_key(|m| m.start);
    for pair in ordered.windows(2) {
        let (first, second) = (pair[0], pair[1]);
        if first.end > second.start || second.start > text.len() {
            continue;
        }
        let between = text[first.end..second.start].trim().to_lowercase();
        let between = between.trim_matches(|c: char| c == ',' || c == '-' || c == '–' || c == '—');
        let between = between.trim();
        // "Melanie (Mel)": the second in parentheses right after the first.
        if between == "(" && text[second.end..].trim_start().starts_with(')') {
            push(second, first);
            continue;
        }
        let between = between.trim_end_matches(',').trim();
        if NAME_THEN_ALIAS.contains(&between) {
            push(second, first);
        } else if ALIAS_THEN_NAME.contains(&between) {
            push(first, second);
        }
    }
    out
}

/// Follow `key` through `aliases` (alias key → name key) to the name it stands for
/// (at most a few hops; a cycle stops where it started).
pub fn resolve<'a>(
    key: &'a str,
    aliases: &'a std::collections::HashMap<String, String>,
) -> &'a str {
    let mut current = key;
    for _ in 0..8 {
        match aliases.get(current) {
            Some(next) if next != key => current = next,
            _ => break,
        }
    }
    current
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_whose_forms_say_they_may_be_one() {
        for (a, b, why) in [
            ("mel", "melanie", Some("short form")),
            ("melanie", "mel", Some("short form")),
            ("bob", "robert", Some("short form")),
            ("acme", "acme corporation", Some("short form")),
            ("smith", "john smith", Some("a word of the name")),
            ("j. smith", "john smith", Some("initials")),
            ("john smith", "jane smith", None),
            ("lisbon", "london", None),
            ("al", "alice smith", Some("short form")),
            ("melanie", "melanie", None),
        ] {
            assert_eq!(may_name_the_same(a, b), why, "{a} / {b}");
        }
    }

    use super::*;
    use crate::policy::entities::extract;
    use std::collections::{HashMap, HashSet};

    fn aliases(text: &str) -> Vec<(String, String)> {
        let mentions = extract(text, &HashSet::new());
        stated_aliases(text, &mentions)
            .into_iter()
            .map(|a| (a.alias, a.name))
            .collect()
    }

    fn pair(alias: &str, name: &str) -> (String, String) {
        (alias.into(), name.into())
    }

    #[test]
    fn stated_aliases_pair_a_short_form_with_its_name() {
        assert_eq!(
            aliases("I met Melanie (Mel) at the studio."),
            [pair("mel", "melanie")]
        );
        assert_eq!(
            aliases("Ask Mel, short for Melanie, about the kiln."),
            [pair("mel", "melanie")]
        );
        assert_eq!(
            aliases("We hired Robert, aka Bob, last spring."),
            [pair("bob", "robert")]
        );
        assert_eq!(
            aliases("The contract with Acme Corporation (AC) was signed."),
            [pair("ac", "acme corporation")]
        );
    }

    #[test]
    fn names_side_by_side_are_not_aliases() {
        for text in [
            "We flew from Lisbon (Portugal) to Berlin.",
            "Melanie and Caroline went to the park.",
            "Caroline, Melanie and Mel met.",
            "Ask Melanie or Caroline.",
        ] {
            assert!(aliases(text).is_empty(), "{text}: {:?}", aliases(text));
        }
    }

    #[test]
    fn resolution_follows_aliases_and_stops_at_cycles() {
        let map: HashMap<String, String> = [
            ("mel".to_string(), "melanie".to_string()),
            ("melly".to_string(), "mel".to_string()),
            ("a".to_string(), "b".to_string()),
            ("b".to_string(), "a".to_string()),
        ]
        .into();
        assert_eq!(resolve("melly", &map), "melanie");
        assert_eq!(resolve("melanie", &map), "melanie");
        assert_eq!(resolve("a", &map), "b");
    }
}

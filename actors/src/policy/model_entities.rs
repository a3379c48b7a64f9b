//! What an inner-thought model says a text names, checked against the text before the
//! entity index believes it. The rules ([`crate::policy::entities::extract`],
//! [`crate::policy::facts::extract_facts`]) always run; a model's answer only adds: a
//! name the rules missed that is really in the text (found on word boundaries, not
//! overlapping a rule's mention), and a relationship between two names of the text
//! with an attribute of [`MODEL_ATTRIBUTES`] that the rules did not already claim.
//! Anything else the model says (a name not in the text, an attribute of its own) is
//! dropped, so a model that invents cannot put words in the memories' mouths.

use serde::{Deserialize, Serialize};

use crate::policy::entities::{entity_key, EntityKind, EntityMention};
use crate::policy::facts::FactClaim;

/// The attributes a model may state relationships with: the rules' own, and a few
/// relationships between people, organisations and places the rules do not find.
pub const MODEL_ATTRIBUTES: [&str; 12] = [
    "lives_in",
    "works_at",
    "uses",
    "owns",
    "likes",
    "prefers",
    "member_of",
    "located_in",
    "part_of",
    "reports_to",
    "married_to",
    "friend_of",
];

/// The kinds a model may give a name (the rules find the others by their shape).
pub const MODEL_KINDS: [EntityKind; 6] = [
    EntityKind::Person,
    EntityKind::Organization,
    EntityKind::Place,
    EntityKind::Product,
    EntityKind::Title,
    EntityKind::Name,
];

/// A model's answer: who and what a text names, and how they relate.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelNamed {
    /// The names, as the model wrote them.
    pub entities: Vec<ModelEntity>,
    /// Relationships between them.
    pub relations: Vec<ModelRelation>,
}

/// One name a model found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelEntity {
    /// The name, as the text writes it (the model's copy of it).
    pub name: String,
    /// What it is (`person`, `organization`, `place`, `product`, `title`, `name`).
    pub kind: String,
}

/// One relationship a model found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRelation {
    /// Who or what it is about (a name of the text).
    pub subject: String,
    /// One of [`MODEL_ATTRIBUTES`].
    pub attribute: String,
    /// The other name.
    pub value: String,
    /// The text says it ended ("no longer works at …").
    #[serde(default)]
    pub ends: bool,
}

/// Byte spans of `needle` in `text`, case-insensitively (ASCII case; other letters
/// must match exactly), on word boundaries.
fn find_word(text: &str, needle: &str) -> Option<(usize, usize)> {
    let needle = needle.trim();
    if needle.is_empty() || needle.len() > text.len() {
        return None;
    }
    let lower_text = text.to_ascii_lowercase();
    let lower_needle = needle.to_ascii_lowercase();
    let boundary = |c: Option<char>| c.is_none_or(|c| !c.is_alphanumeric());
    let mut from = 0;
    while let Some(found) = lower_text[from..].find(&lower_needle) {
        let start = from + found;
        let end = start + lower_needle.len();
        if boundary(text[..start].chars().next_back()) && boundary(text[end..].chars().next()) {
            return Some((start, end));
        }
        from = start + lower_needle.chars().next().map_or(1, char::len_utf8);
    }
    None
}

/// The mentions and claims a model's answer adds to the rules' for `text`: names found
/// in the text outside every rule mention (at their first place), and relationships
/// of an allowed attribute between two names of the text (the rules' or the model's)
/// that the rules did not claim. At most 20 mentions and 10 claims.
pub fn ground(
    text: &str,
    rule_mentions: &[EntityMention],
    rule_claims: &[FactClaim],
    model: &ModelNamed,
) -> (Vec<EntityMention>, Vec<FactClaim>) {
    let mut added: Vec<EntityMention> = Vec::new();
    for entity in model.entities.iter().take(40) {
        let Some(kind) = EntityKind::parse(entity.kind.trim()).filter(|k| MODEL_KINDS.contains(k))
        else {
            continue;
        };
        let name = entity.name.trim();
        // One letter, or no letter at all, is no name; nor is a whole sentence, nor a
        // word such as "we" or "the".
        let words: Vec<&str> = name.split_whitespace().collect();
        if name.chars().filter(|c| c.is_alphabetic()).count() < 2
            || words.len() > 6
            || words
                .iter()
                .all(|w| crate::text::is_stopword(&w.to_lowercase()))
        {
            continue;
        }
        let Some((start, end)) = find_word(text, name) else {
            continue;
        };
        let overlaps = |m: &EntityMention| m.start < end && start < m.end;
        if rule_mentions.iter().any(overlaps) || added.iter().any(overlaps) {
            continue;
        }
        let surface = text[start..end].to_string();
        added.push(EntityMention {
            key: entity_key(&surface),
            surface,
            kind,
            start,
            end,
        });
        if added.len() == 20 {
            break;
        }
    }
    let named = |phrase: &str| -> Option<(String, String)> {
        let key = entity_key(phrase);
        rule_mentions
            .iter()
            .chain(&added)
            .find(|m| m.key == key)
            .map(|m| (m.surface.clone(), m.key.clone()))
    };
    let mut claims: Vec<FactClaim> = Vec::new();
    for relation in model.relations.iter().take(20) {
        let attribute = relation
            .attribute
            .trim()
            .to_lowercase()
            .replace([' ', '-'], "_");
        if !MODEL_ATTRIBUTES.contains(&attribute.as_str()) {
            continue;
        }
        let (Some((subject, subject_key)), Some((value, value_key))) =
            (named(&relation.subject), named(&relation.value))
        else {
            continue;
        };
        if subject_key == value_key {
            continue;
        }
        let said = |c: &FactClaim| {
            c.subject_key == subject_key && c.attribute == attribute && c.value_key == value_key
        };
        if rule_claims.iter().any(said) || claims.iter().any(said) {
            continue;
        }
        let (start, end) = (0, text.len());
        claims.push(FactClaim {
            subject,
            subject_key,
            attribute,
            value,
            value_key,
            value_is_entity: true,
            ends: relation.ends,
            start,
            end,
        });
        if claims.len() == 10 {
            break;
        }
    }
    (added, claims)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn entity(name: &str, kind: &str) -> ModelEntity {
        ModelEntity {
            name: name.into(),
            kind: kind.into(),
        }
    }

    fn relation(subject: &str, attribute: &str, value: &str) -> ModelRelation {
        ModelRelation {
            subject: subject.into(),
            attribute: attribute.into(),
            value: value.into(),
            ends: false,
        }
    }

    #[test]
    fn only_names_in_the_text_outside_the_rules_mentions_are_added() {
        let text = "my sister joined the bakery guild with jean-pierre and Alice.";
        let rules = crate::policy::entities::extract(text, &HashSet::new());
        let model = ModelNamed {
            entities: vec![
                entity("Jean-Pierre", "person"),
                entity("Bakery Guild", "organization"),
                entity("Alice", "person"), // the rules have her already
                entity("Bob", "person"),   // not in the text
                entity("guild", "organization"), // inside a name already added
                entity("bakery", "date"),  // a kind the model may not give
                entity("a", "person"),     // too short to be a name
                entity("and", "person"),   // a word, not a name
            ],
            relations: vec![
                relation("Jean-Pierre", "member of", "bakery guild"),
                relation("Alice", "lives_in", "Paris"), // Paris is not named
                relation("Alice", "hates", "Jean-Pierre"), // not an allowed attribute
                relation("Alice", "friend_of", "Alice"), // itself
            ],
        };
        let (mentions, claims) = ground(text, &rules, &[], &model);
        let found: Vec<(&str, &str, EntityKind)> = mentions
            .iter()
            .map(|m| (m.surface.as_str(), m.key.as_str(), m.kind))
            .collect();
        assert_eq!(
            found,
            [
                ("jean-pierre", "jean-pierre", EntityKind::Person),
                ("bakery guild", "bakery guild", EntityKind::Organization),
            ]
        );
        for mention in &mentions {
            assert_eq!(&text[mention.start..mention.end], mention.surface);
        }
        assert_eq!(claims.len(), 1, "{claims:?}");
        assert_eq!(
            (
                claims[0].subject_key.as_str(),
                claims[0].attribute.as_str(),
                claims[0].value_key.as_str()
            ),
            ("jean-pierre", "member_of", "bakery guild")
        );
    }

    #[test]
    fn a_relationship_the_rules_already_claim_is_not_claimed_twice() {
        let text = "Alice works at Acme Corp.";
        let rules = crate::policy::entities::extract(text, &HashSet::new());
        let rule_claims = crate::policy::facts::extract_facts(text, &rules, None);
        assert!(!rule_claims.is_empty());
        let model = ModelNamed {
            entities: vec![entity("Acme Corp", "organization")],
            relations: vec![relation("alice", "works_at", "acme corp")],
        };
        let (mentions, claims) = ground(text, &rules, &rule_claims, &model);
        assert!(
            mentions.is_empty() && claims.is_empty(),
            "{mentions:?} {claims:?}"
        );
    }

    #[test]
    fn names_are_found_on_word_boundaries_only() {
        assert_eq!(find_word("Annabel met Ann.", "ann"), Some((12, 15)));
        assert_eq!(find_word("Annabel", "ann"), None);
        assert_eq!(find_word("über Zürich", "Zürich"), Some((6, 13)));
        assert_eq!(find_word("", "x"), None);
    }
}

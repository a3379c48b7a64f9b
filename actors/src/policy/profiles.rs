//! Profiles of entities: the sleep cycle keeps one semantic memory for each person,
//! organisation, place or thing the agent's memories name often and state facts about,
//! written from those facts, and rewrites it (keeping the old text in its history) when
//! what they say changes. Pure: the consolidator reads the entities and facts and does
//! what [`plan_profiles`] decides.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};

use crate::model::MemoryId;
use crate::policy::entities::EntityKind;
use crate::policy::facts::Fact;
use crate::store::entities::Entity;

/// The metadata key of a profile memory: `{"entity_id": …, "key": …}` of its entity.
/// The entity index reads no facts or aliases from a memory holding it (a profile
/// repeats facts; it does not state them again).
pub const PROFILE_KEY: &str = "entity_profile";

/// The tag every profile memory carries.
pub const PROFILE_TAG: &str = "profile";

/// Whether an entity of this kind gets a profile: people, organisations, places,
/// products, titles and names; not handles, addresses, paths, versions or dates.
pub fn profiled_kind(kind: EntityKind) -> bool {
    matches!(
        kind,
        EntityKind::Person
            | EntityKind::Organization
            | EntityKind::Place
            | EntityKind::Product
            | EntityKind::Title
            | EntityKind::Name
    )
}

/// One entity that may deserve a profile, with what is known of it.
#[derive(Debug, Clone)]
pub struct ProfileSubject {
    /// The entity.
    pub entity: Entity,
    /// Its merged aliases' keys ("mel" of Melanie).
    pub aliases: Vec<String>,
    /// Its facts over time (it is the subject), from memories outside any project.
    pub facts: Vec<Fact>,
}

/// A profile memory the agent already has.
#[derive(Debug, Clone, PartialEq)]
pub struct ExistingProfile {
    /// The memory.
    pub memory_id: MemoryId,
    /// The entity it profiles.
    pub entity_id: String,
    /// Its text now.
    pub content: String,
}

/// What the sleep cycle does about one profile.
#[derive(Debug, Clone, PartialEq)]
pub enum ProfileAction {
    /// Write a new profile memory of the entity.
    Create {
        /// The entity's id.
        entity_id: String,
        /// The entity's key.
        key: String,
        /// The entity's name, for the title.
        name: String,
        /// The profile's text.
        content: String,
        /// When the newest fact in it began (the profile's `occurred_at`).
        as_of: DateTime<Utc>,
        /// The memories stating its facts (its `derived_from` edges).
        sources: Vec<MemoryId>,
    },
    /// Rewrite a profile whose facts changed.
    Refresh {
        /// The profile memory.
        memory_id: MemoryId,
        /// The new text.
        content: String,
        /// When the newest fact in it began.
        as_of: DateTime<Utc>,
    },
    /// Archive a profile whose entity is gone (merged into another, or no longer named).
    Retire {
        /// The profile memory.
        memory_id: MemoryId,
    },
}

/// The profiles to write, rewrite and retire: an entity of a [`profiled_kind`] named in
/// at least `min_mentions` memories, with facts, gets one; a profile whose text would
/// change is refreshed; a profile of an entity that is no longer there is retired. A
/// profile of an entity now named less often stays (it is not noise that went away).
/// `min_mentions` 0 turns profiles off (nothing created or refreshed, nothing retired).
pub fn plan_profiles(
    subjects: &[ProfileSubject],
    existing: &[ExistingProfile],
    entity_ids: &std::collections::HashSet<String>,
    min_mentions: u64,
) -> Vec<ProfileAction> {
    if min_mentions == 0 {
        return Vec::new();
    }
    let mut by_entity: HashMap<&str, &ExistingProfile> = HashMap::new();
    let mut actions = Vec::new();
    for profile in existing {
        // Two profiles of one entity (two processes raced): keep the first, retire the rest.
        if by_entity
            .insert(profile.entity_id.as_str(), profile)
            .is_some()
            || !entity_ids.contains(&profile.entity_id)
        {
            actions.push(ProfileAction::Retire {
                memory_id: profile.memory_id.clone(),
            });
        }
    }
    for subject in subjects {
        let entity = &subject.entity;
        if subject.facts.is_empty() || !profiled_kind(entity.kind) {
            continue;
        }
        let content = profile_text(&entity.name, entity.kind, &subject.aliases, &subject.facts);
        let as_of = subject
            .facts
            .iter()
            .map(|f| f.valid_to.unwrap_or(f.valid_from).max(f.valid_from))
            .max()
            .unwrap_or(entity.last_seen);
        match by_entity.get(entity.id.as_str()) {
            Some(profile) if profile.content == content => {}
            Some(profile) => actions.push(ProfileAction::Refresh {
                memory_id: profile.memory_id.clone(),
                content,
                as_of,
            }),
            None if entity.mentions >= min_mentions => {
                let mut sources: Vec<MemoryId> = subject
                    .facts
                    .iter()
                    .flat_map(|f| f.sources.iter().cloned())
                    .collect();
                sources.sort();
                sources.dedup();
                sources.truncate(50);
                actions.push(ProfileAction::Create {
                    entity_id: entity.id.clone(),
                    key: entity.key.clone(),
                    name: entity.name.clone(),
                    content,
                    as_of,
                    sources,
                });
            }
            None => {}
        }
    }
    actions
}

/// An attribute in words: `lives_in` → "lives in".
fn attribute_words(attribute: &str) -> String {
    attribute.replace('_', " ")
}

/// A day, for a profile's text.
fn day(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d").to_string()
}

/// The profile's text: the entity's name and kind, its aliases, then per attribute
/// what holds now (since when) and what held before, in words. Deterministic: the same
/// facts give the same text, so an unchanged profile is left alone.
pub fn profile_text(name: &str, kind: EntityKind, aliases: &[String], facts: &[Fact]) -> String {
    let mut head = format!("Profile of {name} ({}", kind.as_str());
    let mut aliases: Vec<&String> = aliases.iter().collect();
    aliases.sort();
    aliases.dedup();
    if !aliases.is_empty() {
        let names: Vec<&str> = aliases.iter().map(|a| a.as_str()).collect();
        head.push_str(&format!("; also called {}", names.join(", ")));
    }
    head.push_str("), from what the memories say:");
    let mut by_attribute: BTreeMap<&str, Vec<&Fact>> = BTreeMap::new();
    for fact in facts {
        by_attribute.entry(&fact.attribute).or_default().push(fact);
    }
    let mut parts = Vec::new();
    for (attribute, mut facts) in by_attribute {
        facts.sort_by(|a, b| a.valid_from.cmp(&b.valid_from).then(a.value.cmp(&b.value)));
        let words = attribute_words(attribute);
        let current: Vec<String> = facts
            .iter()
            .filter(|f| f.valid_to.is_none())
            .map(|f| format!("{} (since {})", f.value, day(f.valid_from)))
            .collect();
        let before: Vec<String> = facts
            .iter()
            .filter_map(|f| {
                let to = f.valid_to?;
                Some(format!(
                    "{} ({} to {})",
                    f.value,
                    day(f.valid_from),
                    day(to)
                ))
            })
            .collect();
        let mut part = if current.is_empty() {
            format!("no longer {words}")
        } else {
            format!("{words} {}", current.join(", "))
        };
        if !before.is_empty() {
            let joiner = if current.is_empty() {
                " "
            } else {
                "; before: "
            };
            part.push_str(joiner);
            part.push_str(&before.join(", "));
        }
        parts.push(part);
    }
    format!("{head} {}.", parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::AgentId;
    use std::collections::HashSet;

    fn at(day: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(&format!("{day}T09:00:00Z"))
            .unwrap()
            .with_timezone(&Utc)
    }

    fn fact(attribute: &str, value: &str, from: &str, to: Option<&str>, source: &str) -> Fact {
        Fact {
            subject_key: "alice".into(),
            subject: "Alice".into(),
            attribute: attribute.into(),
            value: value.into(),
            value_key: value.to_lowercase(),
            value_is_entity: true,
            valid_from: at(from),
            valid_to: to.map(at),
            sources: vec![MemoryId(source.into())],
            closed_by: None,
        }
    }

    fn alice(mentions: u64) -> Entity {
        Entity {
            id: "ent_alice".into(),
            agent_id: AgentId::parse("a").unwrap(),
            key: "alice".into(),
            name: "Alice".into(),
            kind: EntityKind::Person,
            mentions,
            first_seen: at("2023-01-01"),
            last_seen: at("2023-06-01"),
        }
    }

    fn facts() -> Vec<Fact> {
        vec![
            fact("lives_in", "Lisbon", "2023-01-10", Some("2023-06-01"), "m1"),
            fact("lives_in", "Porto", "2023-06-01", None, "m3"),
            fact("works_at", "Acme Corp", "2023-01-12", None, "m2"),
            fact("likes", "jazz", "2022-05-01", Some("2023-02-01"), "m0"),
        ]
    }

    #[test]
    fn a_profile_says_what_holds_now_and_what_held_before() {
        let text = profile_text("Alice", EntityKind::Person, &["ali".into()], &facts());
        assert_eq!(
            text,
            "Profile of Alice (person; also called ali), from what the memories say: \
             no longer likes jazz (2022-05-01 to 2023-02-01); \
             lives in Porto (since 2023-06-01); before: Lisbon (2023-01-10 to 2023-06-01); \
             works at Acme Corp (since 2023-01-12)."
        );
        let mut shuffled = facts();
        shuffled.reverse();
        assert_eq!(
            profile_text("Alice", EntityKind::Person, &["ali".into()], &shuffled),
            text,
            "the order facts arrive in does not change the text"
        );
    }

    #[test]
    fn often_named_entities_with_facts_get_a_profile_refreshed_when_facts_change() {
        let ids: HashSet<String> = ["ent_alice".to_string()].into();
        let subject = ProfileSubject {
            entity: alice(5),
            aliases: Vec::new(),
            facts: facts(),
        };
        let created = plan_profiles(std::slice::from_ref(&subject), &[], &ids, 5);
        let [ProfileAction::Create {
            content,
            sources,
            as_of,
            ..
        }] = created.as_slice()
        else {
            panic!("{created:?}");
        };
        assert_eq!(sources.len(), 4);
        assert_eq!(*as_of, at("2023-06-01"));
        // Too rarely named, or nothing said of it: no profile.
        let rare = ProfileSubject {
            entity: alice(4),
            ..subject.clone()
        };
        assert!(plan_profiles(std::slice::from_ref(&rare), &[], &ids, 5).is_empty());
        let silent = ProfileSubject {
            facts: Vec::new(),
            ..subject.clone()
        };
        assert!(plan_profiles(&[silent], &[], &ids, 5).is_empty());
        let date = ProfileSubject {
            entity: Entity {
                kind: EntityKind::Date,
                ..alice(9)
            },
            ..subject.clone()
        };
        assert!(plan_profiles(&[date], &[], &ids, 5).is_empty());
        assert!(plan_profiles(std::slice::from_ref(&subject), &[], &ids, 0).is_empty());

        // Unchanged: left alone (even when now rarely named); changed: refreshed.
        let existing = ExistingProfile {
            memory_id: MemoryId("p1".into()),
            entity_id: "ent_alice".into(),
            content: content.clone(),
        };
        assert!(plan_profiles(&[rare], std::slice::from_ref(&existing), &ids, 5).is_empty());
        let mut moved = subject.clone();
        moved
            .facts
            .push(fact("lives_in", "Berlin", "2024-01-01", None, "m9"));
        moved.facts[1].valid_to = Some(at("2024-01-01"));
        let refreshed = plan_profiles(&[moved], std::slice::from_ref(&existing), &ids, 5);
        assert!(
            matches!(&refreshed[..], [ProfileAction::Refresh { memory_id, content, .. }]
                if memory_id.0 == "p1" && content.contains("lives in Berlin (since 2024-01-01)")),
            "{refreshed:?}"
        );

        // The entity is gone (merged away, no longer named): its profile retires; a
        // second profile of one entity retires too.
        let retired = plan_profiles(&[], std::slice::from_ref(&existing), &HashSet::new(), 5);
        assert_eq!(
            retired,
            [ProfileAction::Retire {
                memory_id: MemoryId("p1".into())
            }]
        );
        let twin = ExistingProfile {
            memory_id: MemoryId("p2".into()),
            ..existing.clone()
        };
        let deduped = plan_profiles(std::slice::from_ref(&subject), &[existing, twin], &ids, 5);
        assert_eq!(
            deduped,
            [ProfileAction::Retire {
                memory_id: MemoryId("p2".into())
            }]
        );
    }
}

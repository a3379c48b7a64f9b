//! The write path's deduplication and contradiction plan (pure).
//!
//! For a batch of new memories (in order):
//! 1. **Exact duplicates** ([`exact_duplicates`]): same normalised content hash
//!    ([`crate::policy::consistency::normalized_hash`]) and same project as an active
//!    stored memory of the agent, or as an earlier item of the batch.
//! 2. **Near duplicates** ([`near_duplicate`]): the first vector neighbour at or above
//!    `dedup.threshold` of the same type and project, holding the same numbers, whose
//!    text the new one does not contradict (a negation or a changed number leaves the
//!    vectors almost equal).
//! 3. **Contradiction candidates** ([`contradiction_band`]): for knowledge (semantic and
//!    procedural), the neighbours at or above `contradiction.min_similarity`; together
//!    with keyword matches they are checked by [`may_supersede`] and the rule.
//! 4. An exact duplicate of an earlier batch item follows that item wherever it went
//!    ([`redirect_duplicates`]).
//!
//! The same rule is checked once more inside the store's write transaction
//! (`MemoryStore::insert_new_content`), which closes the race between processes.

use std::collections::HashMap;

use crate::model::{AgentId, Memory, MemoryId, MemoryStatus, MemoryType};
use crate::policy::consistency::contradiction;
use crate::projects::ProjectId;

/// Semantic and procedural memories: the lasting knowledge that contradictions replace.
pub fn is_knowledge(memory_type: MemoryType) -> bool {
    matches!(memory_type, MemoryType::Semantic | MemoryType::Procedural)
}

/// The types a new memory's near duplicates and contradictions are looked for among:
/// knowledge against all knowledge, anything else against its own type.
pub fn neighbour_types(memory_type: MemoryType) -> Vec<MemoryType> {
    if is_knowledge(memory_type) {
        vec![MemoryType::Semantic, MemoryType::Procedural]
    } else {
        vec![memory_type]
    }
}

/// For each new memory (`batch[i]` with content hash `hashes[i]`), the memory it exactly
/// duplicates: an active stored memory with the same hash and project (`stored`, as
/// (hash, memory) pairs), else an earlier item of the batch with the same hash and project.
pub fn exact_duplicates(
    batch: &[&Memory],
    hashes: &[String],
    stored: &[(String, Memory)],
) -> Vec<Option<MemoryId>> {
    // A duplicate must be in the same project: projects are separate contexts, and a
    // memory merged into an isolated project's copy would vanish from this one's recall.
    let stored_by_hash: HashMap<(&str, Option<&ProjectId>), &MemoryId> = stored
        .iter()
        .map(|(h, m)| ((h.as_str(), m.project_id.as_ref()), &m.id))
        .collect();
    let mut duplicate_of: Vec<Option<MemoryId>> = vec![None; batch.len()];
    let mut first_in_batch: HashMap<(&str, Option<&ProjectId>), usize> = HashMap::new();
    for (index, hash) in hashes.iter().enumerate() {
        let key = (hash.as_str(), batch[index].project_id.as_ref());
        if let Some(id) = stored_by_hash.get(&key) {
            duplicate_of[index] = Some((*id).clone());
        } else if let Some(first) = first_in_batch.get(&key) {
            duplicate_of[index] = Some(batch[*first].id.clone());
        } else {
            first_in_batch.insert(key, index);
        }
    }
    duplicate_of
}

/// The near duplicate of `new` among its vector neighbours `hits` (best first), read
/// back in `close`: the first at or above `threshold` with the same type and project
/// whose text `new` does not contradict.
pub fn near_duplicate(
    new: &Memory,
    hits: &[(MemoryId, f32)],
    threshold: f32,
    close: &HashMap<MemoryId, Memory>,
) -> Option<MemoryId> {
    hits.iter()
        .find(|(id, similarity)| {
            *similarity >= threshold
                && close.get(id).is_some_and(|old| {
                    old.memory_type == new.memory_type
                        && old.project_id == new.project_id
                        && same_numbers(&old.content, &new.content)
                        && contradiction(&old.content, &new.content).is_none()
                })
        })
        .map(|(id, _)| id.clone())
}

/// Whether two texts hold the same numbers, in the same order. Texts that differ in a
/// number state different facts ("port 5433" and "port 5434", "room 4" and "room 6"),
/// however close their vectors: an embedder reads a number as one faint token.
pub fn same_numbers(a: &str, b: &str) -> bool {
    let numbers = |text: &str| -> Vec<String> {
        text.split(|c: char| !c.is_ascii_digit())
            .filter(|run| !run.is_empty())
            .map(str::to_string)
            .collect()
    };
    numbers(a) == numbers(b)
}

/// The neighbours similar enough to be checked for contradiction.
pub fn contradiction_band(hits: &[(MemoryId, f32)], min_similarity: f32) -> Vec<MemoryId> {
    hits.iter()
        .filter(|(_, similarity)| *similarity >= min_similarity)
        .map(|(id, _)| id.clone())
        .collect()
}

/// Whether stored `old` is a memory that `new` (of `agent`) may supersede: the agent's
/// own active knowledge in the same project, other than `new` itself. Projects are
/// separate contexts: one project's knowledge does not replace another's.
pub fn may_supersede(old: &Memory, new: &Memory, agent: &AgentId) -> bool {
    old.agent_id == *agent
        && old.status == MemoryStatus::Active
        && is_knowledge(old.memory_type)
        && old.id != new.id
        && old.project_id == new.project_id
}

/// An exact duplicate of an earlier item of a batch follows that item wherever it went
/// (the earlier item may itself have turned out a duplicate of a stored memory).
/// `ids` are the batch items' ids, in order.
pub fn redirect_duplicates(ids: &[&MemoryId], duplicate_of: &mut [Option<MemoryId>]) {
    for index in 0..ids.len() {
        let Some(target) = duplicate_of[index].clone() else {
            continue;
        };
        if let Some(first) = ids.iter().position(|id| **id == target) {
            if let Some(redirect) = duplicate_of[first].clone() {
                duplicate_of[index] = Some(redirect);
            }
        }
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn texts_that_differ_in_a_number_are_never_near_duplicates() {
        assert!(same_numbers(
            "The staging DB runs on port 5433",
            "the staging db runs on port 5433!"
        ));
        assert!(!same_numbers(
            "The staging DB runs on port 5433",
            "The staging DB runs on port 5434"
        ));
        assert!(!same_numbers("memory number 4", "memory number 6"));
        assert!(!same_numbers("v1.2 is out", "v1.3 is out"));
        assert!(same_numbers("no numbers here", "none here either"));
    }
    use super::*;
    use crate::policy::consistency::normalized_hash;
    use crate::testing::memory_fixture;

    fn memory(content: &str) -> Memory {
        memory_fixture("alice", content, chrono::Utc::now())
    }

    #[test]
    fn exact_duplicates_of_the_store_and_of_earlier_items_in_the_same_project() {
        let stored = memory("The staging DB runs on port 5433");
        let a = memory("the staging db runs on port 5433.");
        let b = memory("Something new");
        let c = memory("something NEW");
        let mut d = memory("Something new");
        d.project_id = Some(ProjectId::parse("apollo").unwrap());
        let batch = [&a, &b, &c, &d];
        let hashes: Vec<String> = batch.iter().map(|m| normalized_hash(&m.content)).collect();
        let found = exact_duplicates(
            &batch,
            &hashes,
            &[(normalized_hash(&stored.content), stored.clone())],
        );
        assert_eq!(
            found,
            vec![Some(stored.id.clone()), None, Some(b.id.clone()), None],
            "another project's copy is no duplicate"
        );
    }

    #[test]
    fn a_near_duplicate_has_the_type_and_project_and_no_contradiction() {
        let old = memory("The build takes 5 minutes");
        let negated = memory("The build takes 5 minutes");
        let close: HashMap<MemoryId, Memory> = [(old.id.clone(), old.clone())].into();
        let hits = vec![(old.id.clone(), 0.95)];
        assert_eq!(
            near_duplicate(&negated, &hits, 0.92, &close),
            Some(old.id.clone())
        );
        assert_eq!(near_duplicate(&negated, &hits, 0.96, &close), None);
        let changed = memory("The build takes 9 minutes");
        assert_eq!(
            near_duplicate(&changed, &hits, 0.92, &close),
            None,
            "a changed number is a contradiction, not a duplicate"
        );
        let mut semantic = memory("The build takes 5 minutes");
        semantic.memory_type = MemoryType::Semantic;
        assert_eq!(near_duplicate(&semantic, &hits, 0.92, &close), None);
    }

    #[test]
    fn a_duplicate_of_a_duplicate_lands_on_the_stored_memory() {
        let (a, b) = (memory("x"), memory("x"));
        let stored = MemoryId::generate();
        let mut duplicate_of = vec![Some(stored.clone()), Some(a.id.clone())];
        redirect_duplicates(&[&a.id, &b.id], &mut duplicate_of);
        assert_eq!(duplicate_of, vec![Some(stored.clone()), Some(stored)]);
    }

    #[test]
    fn only_own_active_knowledge_of_the_project_is_superseded() {
        let alice = AgentId::parse("alice").unwrap();
        let mut old = memory("I live in Paris");
        old.memory_type = MemoryType::Semantic;
        let mut new = memory("I live in Tokyo");
        new.memory_type = MemoryType::Semantic;
        assert!(may_supersede(&old, &new, &alice));
        assert!(!may_supersede(&new, &new, &alice));
        let mut archived = old.clone();
        archived.status = MemoryStatus::Archived;
        assert!(!may_supersede(&archived, &new, &alice));
        let mut episodic = old.clone();
        episodic.memory_type = MemoryType::Episodic;
        assert!(!may_supersede(&episodic, &new, &alice));
        assert!(!may_supersede(&old, &new, &AgentId::parse("bob").unwrap()));
        assert_eq!(
            contradiction_band(&[(old.id.clone(), 0.7), (new.id.clone(), 0.5)], 0.6),
            vec![old.id.clone()]
        );
        assert_eq!(
            neighbour_types(MemoryType::Procedural),
            vec![MemoryType::Semantic, MemoryType::Procedural]
        );
        assert_eq!(
            neighbour_types(MemoryType::Episodic),
            vec![MemoryType::Episodic]
        );
    }
}

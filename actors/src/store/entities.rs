//! The entity index's reads: who and what an agent's memories name, and where. The
//! index is a projection of the memories (kept from the outbox, rebuildable), so what
//! it answers may trail the latest write by the projector's lag.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::error::MemoryResult;
use crate::model::{AgentId, MemoryId};
use crate::policy::entities::EntityKind;
use crate::policy::facts::FactObservation;

/// An entity of one agent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Entity {
    /// Stable id, derived from the agent and the key (the same after a rebuild).
    pub id: String,
    /// Whose memories name it.
    pub agent_id: AgentId,
    /// The resolution key (lower case).
    pub key: String,
    /// How the first memory naming it wrote it.
    pub name: String,
    /// What it is (the first specific kind seen).
    pub kind: EntityKind,
    /// Mentions in active memories.
    pub mentions: u64,
    /// When the earliest memory naming it happened.
    pub first_seen: DateTime<Utc>,
    /// When the latest one happened.
    pub last_seen: DateTime<Utc>,
}

/// A page of an agent's entities.
#[derive(Debug, Clone, Default)]
pub struct EntityQuery {
    /// Whose.
    pub agent_id: Option<AgentId>,
    /// Keys containing this (lower case); None: all.
    pub search: Option<String>,
    /// Only this kind.
    pub kind: Option<EntityKind>,
    /// Keys after this one (the previous page's last key).
    pub after_key: Option<String>,
    /// Page size.
    pub limit: usize,
}

/// One mention of an entity in a memory.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EntityMentionRef {
    /// The memory.
    pub memory_id: MemoryId,
    /// The words as written.
    pub surface: String,
    /// Byte span in the memory's content.
    pub start: usize,
    /// End of the span.
    pub end: usize,
    /// When the memory happened.
    pub occurred_at: DateTime<Utc>,
    /// Found by the inner-thought model (checked against the text), not by the rules.
    pub by_model: bool,
}

/// Which claims of facts to read (all claims of each subject and attribute they
/// select, so that a timeline can be worked out from them).
#[derive(Debug, Clone)]
pub struct FactQuery {
    /// Whose.
    pub agent_id: AgentId,
    /// Only claims about this subject key.
    pub subject_key: Option<String>,
    /// Only claims of this attribute.
    pub attribute: Option<String>,
    /// Only claims whose value has this key (to find what points at an entity).
    pub value_key: Option<String>,
    /// Most claims read.
    pub limit: usize,
}

/// A merge of one entity's key into another's: by a person (`user`) or because a
/// memory states the alias (`stated`). Undone merges stay in the history.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EntityMerge {
    /// Stable id.
    pub id: String,
    /// The key merged away (now resolved to `name`).
    pub alias: String,
    /// The key it stands for.
    pub name: String,
    /// `user` or `stated`.
    pub origin: String,
    /// The memory stating the alias (`stated` merges).
    pub memory_id: Option<MemoryId>,
    /// When it was made.
    pub created_at: DateTime<Utc>,
    /// When it was undone (split); None while it holds.
    pub undone_at: Option<DateTime<Utc>>,
    /// The project it applies in: a name split off for one project's memories ("alex"
    /// there is "alex (borealis)"); None: everywhere.
    pub project_id: Option<String>,
}

/// An agent's merged aliases in force: everywhere, and per project (a name split off
/// for one project's memories, resolved before the others).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EntityAliases {
    /// Alias key → the key it stands for, in every memory.
    pub global: std::collections::HashMap<String, String>,
    /// Project → (alias key → key), in that project's memories only.
    pub by_project: std::collections::HashMap<String, std::collections::HashMap<String, String>>,
}

impl EntityAliases {
    /// The key `key` resolves to in a memory of `project` (None: outside projects).
    pub fn resolve(&self, key: &str, project: Option<&str>) -> String {
        let scoped = project
            .and_then(|p| self.by_project.get(p))
            .and_then(|aliases| aliases.get(key))
            .map_or(key, String::as_str);
        crate::policy::aliases::resolve(scoped, &self.global).to_string()
    }
}

/// The key of `key` split off for `project`'s memories: "alex (borealis)". No text
/// yields it (a key never ends in a bracket), so it never meets a name of a memory.
pub fn project_key(key: &str, project: &str) -> String {
    format!("{key} ({project})")
}

/// Reads of the entity index, and the merges a person makes or undoes in it.
#[async_trait]
pub trait EntityIndex: Send + Sync + 'static {
    /// A page of the agent's entities in key order.
    async fn entities(&self, query: &EntityQuery) -> MemoryResult<Vec<Entity>>;
    /// One entity of the agent.
    async fn entity(&self, agent: &AgentId, id: &str) -> MemoryResult<Option<Entity>>;
    /// An entity's mentions, newest memory first, at most `limit`.
    async fn mentions(
        &self,
        agent: &AgentId,
        id: &str,
        limit: usize,
    ) -> MemoryResult<Vec<EntityMentionRef>>;
    /// Entities named in the same memories as `id`, with how many memories they share,
    /// most shared first, at most `limit`.
    async fn co_mentioned(
        &self,
        agent: &AgentId,
        id: &str,
        limit: usize,
    ) -> MemoryResult<Vec<(Entity, u64)>>;
    /// Memories of the agent naming any of the entity `keys`, with the key, newest
    /// first, at most `limit`.
    async fn memories_naming(
        &self,
        agent: &AgentId,
        keys: &[String],
        limit: usize,
    ) -> MemoryResult<Vec<(MemoryId, String)>>;
    /// Claims of facts in subject, attribute and time order, at most `query.limit`.
    async fn fact_claims(&self, query: &FactQuery) -> MemoryResult<Vec<FactObservation>>;
    /// The keys of the agent's entities among `candidates` (what a question names),
    /// a merged alias given as the key it stands for.
    async fn known_keys(&self, agent: &AgentId, candidates: &[String])
        -> MemoryResult<Vec<String>>;
    /// Merge entity `id` into entity `into` (its key becomes an alias of `into`'s; what
    /// named it names `into`), recorded at `at` in the agent's merge history.
    async fn merge(
        &self,
        agent: &AgentId,
        id: &str,
        into: &str,
        at: DateTime<Utc>,
    ) -> MemoryResult<EntityMerge>;
    /// Give entity `id`'s name its own entity in `project`'s memories (the same name
    /// for someone else there): recorded at `at` as a merge of the entity's key into
    /// [`project_key`] for that project, undone like any merge.
    async fn split_project(
        &self,
        agent: &AgentId,
        id: &str,
        project: &str,
        at: DateTime<Utc>,
    ) -> MemoryResult<EntityMerge>;
    /// Undo the merge of `alias` into entity `id` (a split): what names the alias
    /// names its own entity again; the merge stays in the history, undone at `at`.
    async fn split(
        &self,
        agent: &AgentId,
        id: &str,
        alias: &str,
        at: DateTime<Utc>,
    ) -> MemoryResult<EntityMerge>;
    /// The agent's merge history (touching `key` when given), oldest first.
    async fn merges(&self, agent: &AgentId, key: Option<&str>) -> MemoryResult<Vec<EntityMerge>>;
    /// Merges of `aliases` were written behind the index's back (an import): forget
    /// what is kept of the agent's aliases and read again what names them.
    async fn merges_imported(&self, agent: &AgentId, aliases: &[String]) -> MemoryResult<()>;
    /// The agent's merged aliases in force, everywhere and per project.
    async fn aliases(&self, agent: &AgentId) -> MemoryResult<EntityAliases>;
}

/// Who and what an upserted memory names and the relationships between them it
/// states, for projections that keep entities ([`crate::store::Projection::holds_entities`]);
/// the projector fills it from the memory itself.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NamedInMemory {
    /// The entities the memory names (none unless it is active).
    pub entities: Vec<NamedEntity>,
    /// Relationships between two of them the memory states ("Bob works at Acme").
    pub relations: Vec<NamedRelation>,
}

/// An entity as a projection keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct NamedEntity {
    /// [`entity_id`] of the agent and key (the SQL index's id).
    pub id: String,
    /// The resolution key.
    pub key: String,
    /// As this memory writes it.
    pub name: String,
    /// Its kind as this mention says it.
    pub kind: String,
}

/// A relationship between two entities, as one memory states it.
#[derive(Debug, Clone, PartialEq)]
pub struct NamedRelation {
    /// The subject's entity id.
    pub from_id: String,
    /// The value's entity id.
    pub to_id: String,
    /// The attribute (`works_at`, `lives_in` …).
    pub attribute: String,
    /// Whether the statement says it ended.
    pub ends: bool,
}

/// What `memory` names and the relationships it states: nothing unless it is active
/// (what recall may see), the same rules as the SQL entity index, without the agent's
/// known names (so a sentence-initial name that only they vouch for is left out);
/// every key resolved through the agent's merged `aliases` (those of the memory's
/// project first), so a merged alias is the entity it stands for there too.
pub fn named_in(memory: &crate::model::Memory, aliases: &EntityAliases) -> NamedInMemory {
    if memory.status != crate::model::MemoryStatus::Active {
        return NamedInMemory::default();
    }
    let agent = &memory.agent_id;
    let project = memory.project_id.as_ref().map(|p| p.as_str());
    let key_of = |key: &str| aliases.resolve(key, project);
    let mentions = crate::policy::entities::extract(&memory.content, &Default::default());
    let mut entities: Vec<NamedEntity> = Vec::new();
    for mention in &mentions {
        let key = key_of(&mention.key);
        let id = entity_id(agent, &key);
        if entities.iter().all(|e| e.id != id) {
            entities.push(NamedEntity {
                id,
                key,
                name: mention.surface.clone(),
                kind: mention.kind.as_str().to_string(),
            });
        }
    }
    let speaker = memory.metadata.get("speaker").and_then(|s| s.as_str());
    let relations = crate::policy::facts::extract_facts(&memory.content, &mentions, speaker)
        .into_iter()
        .filter(|claim| claim.value_is_entity)
        .map(|claim| (key_of(&claim.subject_key), key_of(&claim.value_key), claim))
        .filter(|(subject, value, _)| {
            entities.iter().any(|e| e.key == *subject) && entities.iter().any(|e| e.key == *value)
        })
        .map(|(subject, value, claim)| NamedRelation {
            from_id: entity_id(agent, &subject),
            to_id: entity_id(agent, &value),
            attribute: claim.attribute,
            ends: claim.ends,
        })
        .collect();
    NamedInMemory {
        entities,
        relations,
    }
}

/// The id of the entity `key` of `agent`: a hash of both, so a rebuilt index gives
/// the same ids. 24 hex digits of a 64-bit FNV-1a pair: ids are per agent and keys
/// are few, so collisions are not a concern at this length.
pub fn entity_id(agent: &AgentId, key: &str) -> String {
    fn fnv(bytes: impl Iterator<Item = u8>, seed: u64) -> u64 {
        bytes.fold(seed, |hash, b| {
            (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
    }
    let text = format!("{}\u{0}{key}", agent.as_str());
    let a = fnv(text.bytes(), 0xcbf2_9ce4_8422_2325);
    let b = fnv(text.bytes().rev(), 0x8422_2325_cbf2_9ce4);
    format!("ent_{a:016x}{:08x}", b >> 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entity_ids_are_stable_and_differ_by_agent_and_key() {
        let alice = AgentId::parse("alice").unwrap();
        let bob = AgentId::parse("bob").unwrap();
        assert_eq!(entity_id(&alice, "melanie"), entity_id(&alice, "melanie"));
        assert_ne!(entity_id(&alice, "melanie"), entity_id(&bob, "melanie"));
        assert_ne!(entity_id(&alice, "melanie"), entity_id(&alice, "mel"));
        assert_eq!(entity_id(&alice, "melanie").len(), 4 + 24);
    }

    fn memory(content: &str, status: crate::model::MemoryStatus) -> crate::model::Memory {
        let mut memory = crate::testing::memory_fixture("ana", content, chrono::Utc::now());
        memory.status = status;
        memory
    }

    #[test]
    fn a_memory_names_its_entities_and_the_relationships_between_them() {
        let ana = AgentId::parse("ana").unwrap();
        let named = named_in(
            &memory(
                "Later, Bob joined Acme Corp in Lisbon.",
                crate::model::MemoryStatus::Active,
            ),
            &Default::default(),
        );
        let keys: Vec<&str> = named.entities.iter().map(|e| e.key.as_str()).collect();
        assert_eq!(keys, ["bob", "acme corp", "lisbon"], "{named:?}");
        assert_eq!(named.entities[0].id, entity_id(&ana, "bob"));
        assert_eq!(
            named.relations,
            [NamedRelation {
                from_id: entity_id(&ana, "bob"),
                to_id: entity_id(&ana, "acme corp"),
                attribute: "works_at".into(),
                ends: false,
            }]
        );
        // What recall may not see names nothing in a projection.
        let archived = named_in(
            &memory(
                "Later, Bob joined Acme Corp.",
                crate::model::MemoryStatus::Archived,
            ),
            &Default::default(),
        );
        assert_eq!(archived, NamedInMemory::default());
        // A merged alias is the entity it stands for; a name split off for a project
        // is its own entity in that project's memories.
        let aliases = EntityAliases {
            global: [("bob".to_string(), "robert".to_string())].into(),
            by_project: [(
                "vault".to_string(),
                [("acme corp".to_string(), project_key("acme corp", "vault"))].into(),
            )]
            .into(),
        };
        let merged = named_in(
            &memory(
                "Later, Bob joined Acme Corp.",
                crate::model::MemoryStatus::Active,
            ),
            &aliases,
        );
        assert_eq!(merged.entities[0].key, "robert");
        assert_eq!(merged.entities[0].name, "Bob");
        assert_eq!(merged.relations[0].from_id, entity_id(&ana, "robert"));
        assert_eq!(merged.entities[1].key, "acme corp");
        let mut in_vault = memory(
            "Later, Bob joined Acme Corp.",
            crate::model::MemoryStatus::Active,
        );
        in_vault.project_id = Some(crate::projects::ProjectId::parse("vault").unwrap());
        let scoped = named_in(&in_vault, &aliases);
        assert_eq!(scoped.entities[1].key, "acme corp (vault)");
        assert_eq!(scoped.entities[1].name, "Acme Corp");
        assert_eq!(
            scoped.relations[0].to_id,
            entity_id(&ana, "acme corp (vault)")
        );
    }
}

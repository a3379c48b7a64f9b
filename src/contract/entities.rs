//! Entities as an operation: `GET /v1/entities` (an agent's entities, searched and
//! paged), `GET /v1/entities/{id}` (one entity, the memories naming it, the entities
//! named beside it, what is said of it over time) and `GET /v1/facts` (facts with
//! validity windows, as of a time). The entity index is kept from the outbox, so it may
//! trail the newest write by the projector's interval.

use chrono::{DateTime, Utc};
use mnemos_actors::error::{MemoryError, MemoryResult};
use mnemos_actors::policy::entities::{entity_key, EntityKind};
use mnemos_actors::policy::facts::Fact;
use mnemos_actors::policy::time::TimeRange;
use mnemos_actors::store::entities::{entity_id, Entity, EntityMerge, EntityQuery};
use mnemos_actors::Runtime;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::wire::MemoryView;
use crate::auth::{Caller, Scope};

/// The kinds an entity has, as the wire names them.
const KINDS: &str =
    "person, organization, place, product, title, handle, email, url, path, version, date, name";

/// Query of `GET /v1/entities` and arguments of the MCP tool `entities`.
#[derive(Debug, Clone, Deserialize, utoipa::IntoParams, ToSchema)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct EntitiesParams {
    /// Whose entities (required unless the key is bound to one agent).
    pub agent_id: Option<String>,
    /// Only entities whose name contains this (case-insensitive).
    pub q: Option<String>,
    /// Only this kind (person, organization, place, product, title, handle, email, url, path, version, date, name).
    pub kind: Option<String>,
    /// Page size (1 to 500, default 100).
    pub limit: Option<usize>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// An entity on the wire.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct EntityView {
    /// Stable id (the same after the index is rebuilt).
    pub id: String,
    /// As the first memory naming it wrote it.
    pub name: String,
    /// What it is.
    #[schema(example = "person")]
    pub kind: String,
    /// Mentions in active memories.
    pub mentions: u64,
    /// When the earliest memory naming it happened.
    pub first_seen: DateTime<Utc>,
    /// When the latest one happened.
    pub last_seen: DateTime<Utc>,
}

impl From<Entity> for EntityView {
    fn from(entity: Entity) -> Self {
        Self {
            id: entity.id,
            name: entity.name,
            kind: entity.kind.as_str().to_string(),
            mentions: entity.mentions,
            first_seen: entity.first_seen,
            last_seen: entity.last_seen,
        }
    }
}

/// Answer of `GET /v1/entities`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct EntitiesResponse {
    /// In name order.
    pub entities: Vec<EntityView>,
    /// Pass as `cursor` for the next page; absent on the last.
    pub next_cursor: Option<String>,
}

/// A memory naming an entity.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct EntityMentionView {
    /// The memory.
    pub memory: MemoryView,
    /// The words naming the entity in it.
    pub surface: String,
    /// Byte offset of those words in the memory's content.
    pub start: usize,
    /// Byte offset just past them.
    pub end: usize,
    /// Who found the mention: `rules`, or `model` (the inner-thought model, its words
    /// found in the text).
    #[schema(example = "rules")]
    pub source: &'static str,
}

/// An entity named beside another.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RelatedEntityView {
    /// The entity.
    pub entity: EntityView,
    /// Memories naming both.
    pub shared_memories: u64,
}

/// Answer of `GET /v1/entities/{id}`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct EntityDetailResponse {
    /// The entity.
    pub entity: EntityView,
    /// The memories naming it, newest first (at most `limit`).
    pub memories: Vec<EntityMentionView>,
    /// Entities named in the same memories, most shared first.
    pub related: Vec<RelatedEntityView>,
    /// What the memories say of it over time (it is the subject), per attribute
    /// oldest first; a replaced fact keeps its window.
    pub facts: Vec<FactView>,
    /// Facts of other subjects whose value it is ("Bob works at Acme" on Acme's page).
    pub referenced_by: Vec<FactView>,
    /// Names merged into it that still stand for it ("mel" for Melanie).
    pub aliases: Vec<String>,
    /// Its merge history, oldest first (undone merges included).
    pub merges: Vec<MergeView>,
    /// Other entities that may be this one: their names' forms say so ("mel" /
    /// "melanie", "smith" / "john smith", "j. smith"), with how alike the memories
    /// naming each are; most alike first. Nothing is merged until someone merges.
    pub possibly_same: Vec<SameEntityView>,
}

/// An entity that may be another one.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SameEntityView {
    /// The other entity.
    pub entity: EntityView,
    /// Why its name may be this one's: `short form`, `a word of the name`, `initials`.
    #[schema(example = "short form")]
    pub reason: String,
    /// Cosine similarity (-1..1) of the mean embeddings of the memories naming each
    /// (up to 20 each); 0 when either has none.
    pub similarity: f64,
}

/// A merge on the wire.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct MergeView {
    /// Stable id.
    pub id: String,
    /// The name merged away (a resolution key: lower case).
    pub alias: String,
    /// The entity it stands for, by key.
    pub name: String,
    /// The entity it stands for.
    pub entity_id: String,
    /// `user` (merged through the API) or `stated` (a memory says so: "Melanie (Mel)").
    #[schema(example = "stated")]
    pub origin: String,
    /// The memory stating the alias.
    pub memory_id: Option<String>,
    /// When it was merged.
    pub created_at: DateTime<Utc>,
    /// When it was split again; absent while the merge holds.
    pub undone_at: Option<DateTime<Utc>>,
    /// The project it applies in: a name split off for that project's memories
    /// (`split` with `project_id`); absent: everywhere.
    pub project_id: Option<String>,
}

impl MergeView {
    fn of(merge: EntityMerge, agent: &mnemos_actors::model::AgentId) -> Self {
        Self {
            entity_id: entity_id(agent, &merge.name),
            id: merge.id,
            alias: merge.alias,
            name: merge.name,
            origin: merge.origin,
            memory_id: merge.memory_id.map(|m| m.0),
            created_at: merge.created_at,
            undone_at: merge.undone_at,
            project_id: merge.project_id,
        }
    }
}

/// Body of `POST /v1/entities/{id}/merge` and arguments of the MCP tool `entity_merge`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MergeBody {
    /// Whose entities (required unless the key is bound to one agent).
    pub agent_id: Option<String>,
    /// The entity to merge into (the one that stays).
    pub into: String,
}

/// Body of `POST /v1/entities/{id}/split` and arguments of the MCP tool `entity_split`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SplitBody {
    /// Whose entities (required unless the key is bound to one agent).
    pub agent_id: Option<String>,
    /// The alias to split off the entity (as its merge history names it, any case).
    pub alias: Option<String>,
    /// Or: the project whose memories name someone else by this entity's name; they
    /// get an entity of their own (undone by splitting the name off that entity again).
    pub project_id: Option<String>,
}

/// Arguments of the MCP tools `entity_merge` and `entity_split`: the entity's id with
/// the body.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EntityMergeToolBody {
    /// Whose entities (required unless the key is bound to one agent).
    pub agent_id: Option<String>,
    /// The entity merged away (`entity_merge`) or split (`entity_split`).
    pub id: String,
    /// `entity_merge`: the entity to merge into.
    pub into: Option<String>,
    /// `entity_split`: the alias to split off.
    pub alias: Option<String>,
    /// `entity_split`: or the project whose memories name someone else by this name.
    pub project_id: Option<String>,
}

/// Answer of a merge or a split.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct MergeResponse {
    /// The merge made, or undone.
    pub merge: MergeView,
    /// The entity that stays (merge) or the one split off (split), as it is now.
    pub entity: Option<EntityView>,
}

/// A fact with its validity window.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FactView {
    /// Who or what it is about, as first written ("Alice", "staging DB").
    pub subject: String,
    /// The subject's entity, when the memories name it as one.
    pub subject_entity_id: Option<String>,
    /// What is said of it (`lives_in`, `works_at`, `port`, `likes`, `email` …).
    #[schema(example = "lives_in")]
    pub attribute: String,
    /// The value, as first written.
    pub value: String,
    /// The value's entity, when the value is one (a relationship between entities).
    pub value_entity_id: Option<String>,
    /// When the first memory saying it happened.
    pub valid_from: DateTime<Utc>,
    /// When a later memory replaced or ended it; absent while it holds.
    pub valid_to: Option<DateTime<Utc>>,
    /// Whether it holds now (no `valid_to`).
    pub current: bool,
    /// The memories that say it, oldest first.
    pub source_memory_ids: Vec<String>,
    /// The memory that replaced or ended it.
    pub closed_by_memory_id: Option<String>,
}

impl FactView {
    /// The view of `fact` of `agent`'s facts; `entity_keys` are the keys that are
    /// entities of the agent.
    fn of(
        fact: Fact,
        agent: &mnemos_actors::model::AgentId,
        entity_keys: &std::collections::HashSet<String>,
    ) -> Self {
        let entity = |key: &str| entity_keys.contains(key).then(|| entity_id(agent, key));
        Self {
            subject_entity_id: entity(&fact.subject_key),
            value_entity_id: if fact.value_is_entity {
                entity(&fact.value_key)
            } else {
                None
            },
            subject: fact.subject,
            attribute: fact.attribute,
            value: fact.value,
            current: fact.valid_to.is_none(),
            valid_from: fact.valid_from,
            valid_to: fact.valid_to,
            source_memory_ids: fact.sources.into_iter().map(|id| id.0).collect(),
            closed_by_memory_id: fact.closed_by.map(|id| id.0),
        }
    }
}

/// Query of `GET /v1/facts` and arguments of the MCP tool `facts`.
#[derive(Debug, Clone, Deserialize, utoipa::IntoParams, ToSchema)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct FactsParams {
    /// Whose facts (required unless the key is bound to one agent).
    pub agent_id: Option<String>,
    /// Only facts about this subject (a name, any case: "Alice", "staging DB"; "user"
    /// for what an unattributed "I" said).
    pub subject: Option<String>,
    /// Only this attribute (`lives_in`, `works_at`, `port`, `email` …).
    pub attribute: Option<String>,
    /// Only facts that held at this time: an RFC 3339 instant, a date (2023-03-15), or
    /// a period (March 2023, last week) for those that held at some time in it.
    pub as_of: Option<String>,
    /// Most facts (1 to 500, default 100).
    pub limit: Option<usize>,
}

/// Answer of `GET /v1/facts`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FactsResponse {
    /// By subject, attribute and start.
    pub facts: Vec<FactView>,
    /// More facts matched than `limit`.
    pub truncated: bool,
}

/// Query of `GET /v1/entities/{id}`.
#[derive(Debug, Clone, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct EntityParams {
    /// Whose entity (required unless the key is bound to one agent).
    pub agent_id: Option<String>,
    /// Most memories listed (1 to 500, default 50).
    pub limit: Option<usize>,
}

/// Arguments of the MCP tool `entity` (`GET /v1/entities/{id}` in one body).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EntityBody {
    /// Whose entity (required unless the key is bound to one agent).
    pub agent_id: Option<String>,
    /// The entity's id (from `entities`, or an `*_entity_id` of a fact).
    pub id: String,
    /// Most memories listed (1 to 500, default 50).
    pub limit: Option<usize>,
}

/// The size of a page asked for in `field`: 1 to 500, `default` when not given.
fn page_size(field: &str, raw: Option<usize>, default: usize) -> MemoryResult<usize> {
    let limit = raw.unwrap_or(default);
    if !(1..=500).contains(&limit) {
        return Err(MemoryError::invalid(
            field,
            format!("{field} must be between 1 and 500; got {limit}"),
        ));
    }
    Ok(limit)
}

/// A page of the agent's entities.
pub async fn entities(
    runtime: &Runtime,
    caller: &Caller,
    params: EntitiesParams,
) -> MemoryResult<EntitiesResponse> {
    caller.require(Scope::Read)?;
    let agent = caller.agent("agent_id", params.agent_id.as_deref())?;
    let limit = page_size("limit", params.limit, 100)?;
    let kind = params
        .kind
        .as_deref()
        .map(|k| {
            EntityKind::parse(k).ok_or_else(|| {
                MemoryError::invalid(
                    "kind",
                    format!("unknown entity kind {k:?}; use one of {KINDS}"),
                )
            })
        })
        .transpose()?;
    let search = params
        .q
        .map(|q| q.trim().to_lowercase())
        .filter(|q| !q.is_empty());
    if search.as_ref().is_some_and(|q| q.len() > 200) {
        return Err(MemoryError::invalid("q", "q may hold at most 200 bytes"));
    }
    let after_key = match params.cursor {
        Some(cursor) => Some(decode_cursor(&cursor)?),
        None => None,
    };
    let mut found = runtime
        .entities(&EntityQuery {
            agent_id: Some(agent),
            search,
            kind,
            after_key,
            limit: limit + 1,
        })
        .await?;
    let next_cursor = if found.len() > limit {
        found.truncate(limit);
        found.last().map(|e| encode_cursor(&e.key))
    } else {
        None
    };
    Ok(EntitiesResponse {
        entities: found.into_iter().map(Into::into).collect(),
        next_cursor,
    })
}

/// One entity of the agent with the memories naming it and its related entities.
pub async fn entity(
    runtime: &Runtime,
    caller: &Caller,
    id: String,
    params: EntityParams,
) -> MemoryResult<EntityDetailResponse> {
    caller.require(Scope::Read)?;
    let agent = caller.agent("agent_id", params.agent_id.as_deref())?;
    let limit = page_size("limit", params.limit, 50)?;
    let detail = runtime.entity(&agent, &id, limit).await?;
    let (policy, now) = (runtime.config().retention, runtime.now());
    let keys = entity_keys(
        runtime,
        &agent,
        detail.facts.iter().chain(&detail.referenced_by),
    )
    .await?;
    let view = |facts: Vec<Fact>| -> Vec<FactView> {
        facts
            .into_iter()
            .map(|fact| FactView::of(fact, &agent, &keys))
            .collect()
    };
    let aliases = detail
        .merges
        .iter()
        .filter(|m| m.undone_at.is_none() && m.name == detail.entity.key)
        .map(|m| m.alias.clone())
        .collect();
    let merges = detail
        .merges
        .into_iter()
        .map(|merge| MergeView::of(merge, &agent))
        .collect();
    Ok(EntityDetailResponse {
        aliases,
        merges,
        possibly_same: detail
            .possibly_same
            .into_iter()
            .map(|candidate| SameEntityView {
                entity: candidate.entity.into(),
                reason: candidate.reason.to_string(),
                similarity: (candidate.similarity * 10_000.0).round() / 10_000.0,
            })
            .collect(),
        facts: view(detail.facts),
        referenced_by: view(detail.referenced_by),
        entity: detail.entity.into(),
        memories: detail
            .mentions
            .into_iter()
            .map(|(memory, mention)| EntityMentionView {
                memory: MemoryView::with_retention(memory, &policy, now),
                source: if mention.by_model { "model" } else { "rules" },
                surface: mention.surface,
                start: mention.start,
                end: mention.end,
            })
            .collect(),
        related: detail
            .related
            .into_iter()
            .map(|(entity, shared)| RelatedEntityView {
                entity: entity.into(),
                shared_memories: shared,
            })
            .collect(),
    })
}

/// Merge entity `id` into `body.into`: its name becomes an alias of the other, what
/// named it names the other; the merge is recorded and can be split again.
pub async fn merge(
    runtime: &Runtime,
    caller: &Caller,
    id: String,
    body: MergeBody,
) -> MemoryResult<MergeResponse> {
    caller.require(Scope::Write)?;
    let agent = caller.agent("agent_id", body.agent_id.as_deref())?;
    let merge = runtime.merge_entities(&agent, &id, &body.into).await?;
    let entity = runtime
        .entity(&agent, &body.into, 1)
        .await
        .ok()
        .map(|d| d.entity.into());
    Ok(MergeResponse {
        merge: MergeView::of(merge, &agent),
        entity,
    })
}

/// Split `body.alias` off entity `id` (undo its merge): what names the alias names its
/// own entity again.
pub async fn split(
    runtime: &Runtime,
    caller: &Caller,
    id: String,
    body: SplitBody,
) -> MemoryResult<MergeResponse> {
    caller.require(Scope::Write)?;
    let agent = caller.agent("agent_id", body.agent_id.as_deref())?;
    let merge = match (body.alias, body.project_id) {
        (Some(alias), None) => {
            if alias.trim().is_empty() || alias.len() > 200 {
                return Err(MemoryError::invalid(
                    "alias",
                    "alias must name one of the entity's aliases (1 to 200 bytes)",
                ));
            }
            runtime.split_entity(&agent, &id, &alias).await?
        }
        (None, Some(project)) => {
            let project = mnemos_actors::projects::ProjectId::parse_field("project_id", &project)?;
            runtime
                .split_entity_by_project(&agent, &id, &project)
                .await?
        }
        (Some(_), Some(_)) => return Err(MemoryError::invalid(
            "project_id",
            "give alias (undo a merge) or project_id (split the name off for a project), not both",
        )),
        (None, None) => {
            return Err(MemoryError::invalid(
                "alias",
                "give alias (undo a merge) or project_id (split the name off for a project)",
            ))
        }
    };
    // What was split off: the alias's own entity, or the project's new one.
    let split_off = entity_id(&agent, &merge.alias);
    let split_off = if merge.project_id.is_some() && merge.undone_at.is_none() {
        entity_id(&agent, &merge.name)
    } else {
        split_off
    };
    let entity = runtime
        .entity(&agent, &split_off, 1)
        .await
        .ok()
        .map(|d| d.entity.into());
    Ok(MergeResponse {
        merge: MergeView::of(merge, &agent),
        entity,
    })
}

/// The MCP tools `entity_merge` and `entity_split` in one body.
pub async fn merge_tool(
    runtime: &Runtime,
    caller: &Caller,
    body: EntityMergeToolBody,
    split_off: bool,
) -> MemoryResult<MergeResponse> {
    if split_off {
        split(
            runtime,
            caller,
            body.id,
            SplitBody {
                agent_id: body.agent_id,
                alias: body.alias,
                project_id: body.project_id,
            },
        )
        .await
    } else {
        let value = body
            .into
            .ok_or_else(|| MemoryError::invalid("into", "into is required"))?;
        merge(
            runtime,
            caller,
            body.id,
            MergeBody {
                agent_id: body.agent_id,
                into: value,
            },
        )
        .await
    }
}

/// The keys among `facts`' subjects and entity values that are entities of `agent`.
async fn entity_keys<'a>(
    runtime: &Runtime,
    agent: &mnemos_actors::model::AgentId,
    facts: impl Iterator<Item = &'a Fact>,
) -> MemoryResult<std::collections::HashSet<String>> {
    let mut candidates: Vec<String> = facts
        .flat_map(|f| {
            let value = f.value_is_entity.then(|| f.value_key.clone());
            std::iter::once(f.subject_key.clone()).chain(value)
        })
        .collect();
    candidates.sort();
    candidates.dedup();
    Ok(runtime
        .known_entity_keys(agent, &candidates)
        .await?
        .into_iter()
        .collect())
}

/// When `as_of` asks: an instant, or the period a date or phrase names.
pub(crate) fn as_of_range(raw: &str, now: DateTime<Utc>) -> MemoryResult<TimeRange> {
    if let Ok(at) = DateTime::parse_from_rfc3339(raw.trim()) {
        let at = at.with_timezone(&Utc);
        return Ok(TimeRange {
            start: at,
            end: at + chrono::Duration::microseconds(1),
        });
    }
    mnemos_actors::policy::time::parse_time_query(raw, now).map_err(|message| {
        MemoryError::invalid(
            "as_of",
            format!("as_of must be an RFC 3339 time, a date or a period; {message}"),
        )
    })
}

/// The agent's facts with their validity windows.
pub async fn facts(
    runtime: &Runtime,
    caller: &Caller,
    params: FactsParams,
) -> MemoryResult<FactsResponse> {
    caller.require(Scope::Read)?;
    let agent = caller.agent("agent_id", params.agent_id.as_deref())?;
    let limit = page_size("limit", params.limit, 100)?;
    let subject = params
        .subject
        .as_deref()
        .map(entity_key)
        .filter(|k| !k.is_empty());
    let attribute = params
        .attribute
        .as_deref()
        .map(|a| a.trim().to_lowercase().replace([' ', '-'], "_"))
        .filter(|a| !a.is_empty());
    for (field, value) in [("subject", &subject), ("attribute", &attribute)] {
        if value.as_ref().is_some_and(|v| v.len() > 200) {
            return Err(MemoryError::invalid(
                field,
                format!("{field} may hold at most 200 bytes"),
            ));
        }
    }
    let during = params
        .as_of
        .as_deref()
        .map(|raw| as_of_range(raw, runtime.now()))
        .transpose()?;
    let mut facts = runtime
        .facts(
            &agent,
            subject.as_deref(),
            attribute.as_deref(),
            during.as_ref(),
        )
        .await?;
    let truncated = facts.len() > limit;
    facts.truncate(limit);
    Ok(FactsResponse {
        facts: fact_views(runtime, &agent, facts).await?,
        truncated,
    })
}

/// The wire views of `agent`'s `facts`, their subjects and values linked to the
/// agent's entities.
pub(crate) async fn fact_views(
    runtime: &Runtime,
    agent: &mnemos_actors::model::AgentId,
    facts: Vec<Fact>,
) -> MemoryResult<Vec<FactView>> {
    let keys = entity_keys(runtime, agent, facts.iter()).await?;
    Ok(facts
        .into_iter()
        .map(|fact| FactView::of(fact, agent, &keys))
        .collect())
}

/// The cursor of a page that ends at `key`: the key as hex, so it is opaque and URL-safe.
fn encode_cursor(key: &str) -> String {
    key.bytes().map(|b| format!("{b:02x}")).collect()
}

fn decode_cursor(cursor: &str) -> MemoryResult<String> {
    let bad = || MemoryError::invalid("cursor", "cursor is not a next_cursor of this list");
    if !cursor.len().is_multiple_of(2) || cursor.len() > 2000 {
        return Err(bad());
    }
    let bytes = (0..cursor.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&cursor[i..i + 2], 16).map_err(|_| bad()))
        .collect::<MemoryResult<Vec<u8>>>()?;
    String::from_utf8(bytes).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_garbage_is_refused() {
        for key in ["melanie", "new york city", "ümlaut @x"] {
            assert_eq!(decode_cursor(&encode_cursor(key)).unwrap(), key);
        }
        for bad in ["zz", "abc", "ff"] {
            assert_eq!(
                decode_cursor(bad).unwrap_err().field.as_deref(),
                Some("cursor")
            );
        }
    }
}

//! Entities as an operation: `GET /v1/entities` (an agent's entities, searched and
//! paged) and `GET /v1/entities/{id}` (one entity, the memories naming it, the
//! entities named beside it). The entity index is kept from the outbox, so it may
//! trail the newest write by the projector's interval.

use chrono::{DateTime, Utc};
use mnemos_actors::error::{MemoryError, MemoryResult};
use mnemos_actors::policy::entities::EntityKind;
use mnemos_actors::store::entities::{Entity, EntityQuery};
use mnemos_actors::Runtime;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::wire::MemoryView;
use crate::auth::{Caller, Scope};

/// The kinds an entity has, as the wire names them.
const KINDS: &str =
    "person, organization, place, product, title, handle, email, url, path, version, date, name";

/// Query of `GET /v1/entities`.
#[derive(Debug, Clone, Deserialize, utoipa::IntoParams)]
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
    Ok(EntityDetailResponse {
        entity: detail.entity.into(),
        memories: detail
            .mentions
            .into_iter()
            .map(|(memory, mention)| EntityMentionView {
                memory: MemoryView::with_retention(memory, &policy, now),
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

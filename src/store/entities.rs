//! The entity index on either SQL database: a [`Projection`] of the memories kept from
//! the outbox (the tables `entities`, `entity_mentions`, `entity_index_state` of the
//! same database), and the [`EntityIndex`] reads recall and the entity routes make.
//!
//! Applying an upsert reads the memory itself inside the write transaction, so the
//! index never names a memory that is gone or archived (an erase racing the projector
//! leaves nothing behind), and extraction runs after the write it follows is durable:
//! it never delays an acknowledgement.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use async_trait::async_trait;
use mnemos_actors::error::MemoryResult;
use mnemos_actors::model::{AgentId, MemoryId};
use mnemos_actors::policy::entities::{extract, EntityKind};
use mnemos_actors::store::entities::{
    entity_id, Entity, EntityIndex, EntityMentionRef, EntityQuery,
};
use mnemos_actors::store::{ProjectedChange, Projection};

use super::dialect::{commit, rows, run, Dialect, SqlStore};
use super::rows::Columns;
use super::sql::{Arg, Statement};

/// Entity columns with their mention count, for reads.
const ENTITY_SELECT: &str =
    "SELECT e.id, e.agent_id, e.entity_key, e.name, e.kind, e.first_seen, e.last_seen, \
     (SELECT COUNT(*) FROM entity_mentions m WHERE m.entity_id = e.id) AS mentions \
     FROM entities e";

/// Create an entity (its name, kind and time span are then derived from its mentions).
const INSERT_ENTITY: &str =
    "INSERT INTO entities (id, agent_id, entity_key, name, kind, first_seen, last_seen) \
     VALUES ($1, $2, $3, $4, $5, $6, $6) ON CONFLICT (agent_id, entity_key) DO NOTHING";

/// Derive an entity's name (the earliest mention's words), kind (the most frequent
/// specific kind of its mentions) and time span from its mentions.
const REFRESH_ENTITY: &str = "UPDATE entities SET \
     first_seen = COALESCE((SELECT MIN(m.occurred_at) FROM entity_mentions m WHERE m.entity_id = entities.id), first_seen), \
     last_seen = COALESCE((SELECT MAX(m.occurred_at) FROM entity_mentions m WHERE m.entity_id = entities.id), last_seen), \
     kind = COALESCE((SELECT m.kind FROM entity_mentions m WHERE m.entity_id = entities.id AND m.kind <> 'name' \
         GROUP BY m.kind ORDER BY COUNT(*) DESC, m.kind LIMIT 1), 'name'), \
     name = COALESCE((SELECT m.surface FROM entity_mentions m WHERE m.entity_id = entities.id \
         ORDER BY m.occurred_at, m.memory_id, m.start_at LIMIT 1), name) \
     WHERE id = $1";

/// Record one mention (a repeated apply changes nothing).
const INSERT_MENTION: &str = "INSERT INTO entity_mentions \
     (entity_id, memory_id, agent_id, surface, kind, start_at, end_at, occurred_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING";

/// Entities of an agent that no active memory names any more.
const DELETE_ORPHANS: &str = "DELETE FROM entities WHERE agent_id = $1 AND NOT EXISTS \
     (SELECT 1 FROM entity_mentions m WHERE m.entity_id = entities.id)";

/// The entity index of one SQL database.
pub struct EntityProjection<D: Dialect> {
    /// The database of the memories (and of the index).
    store: SqlStore<D>,
    /// Keys each agent's entities have, as last read or written: a sentence-initial
    /// word matching one is a name. Dropped for an agent whose entities were removed.
    known: Mutex<HashMap<AgentId, HashSet<String>>>,
}

impl<D: Dialect> EntityProjection<D> {
    /// The index in `store`'s database.
    pub fn new(store: SqlStore<D>) -> Self {
        Self {
            store,
            known: Mutex::new(HashMap::new()),
        }
    }

    /// The keys `agent`'s entities have: kept, or read on `conn` (inside the caller's
    /// transaction, or on a pool connection) and kept.
    async fn known_on(
        &self,
        conn: &mut D::Connection,
        agent: &AgentId,
    ) -> MemoryResult<HashSet<String>> {
        if let Some(keys) = self.known.lock().ok().and_then(|k| k.get(agent).cloned()) {
            return Ok(keys);
        }
        let statement = Statement::new(
            "SELECT entity_key FROM entities WHERE agent_id = $1",
            [Arg::Text(agent.as_str())],
        );
        let keys: HashSet<String> = rows::<D>(conn, &statement)
            .await?
            .iter()
            .map(|row| row.text("entity_key"))
            .collect::<MemoryResult<_>>()?;
        if let Ok(mut known) = self.known.lock() {
            known.insert(agent.clone(), keys.clone());
        }
        Ok(keys)
    }
}

/// An entity row as read.
fn entity_row<R: Columns>(row: &R) -> MemoryResult<Entity> {
    Ok(Entity {
        id: row.text("id")?,
        agent_id: AgentId::stored(&row.text("agent_id")?)?,
        key: row.text("entity_key")?,
        name: row.text("name")?,
        kind: EntityKind::parse(&row.text("kind")?).unwrap_or(EntityKind::Name),
        mentions: row.integer("mentions")?.max(0) as u64,
        first_seen: row.time("first_seen")?,
        last_seen: row.time("last_seen")?,
    })
}

#[async_trait]
impl<D: Dialect> Projection for EntityProjection<D> {
    fn name(&self) -> &'static str {
        "entities"
    }

    async fn applied(&self) -> MemoryResult<Option<u64>> {
        let statement = Statement::new(
            "SELECT applied FROM entity_index_state WHERE id = 1",
            None::<Arg>,
        );
        Ok(self
            .store
            .row(&statement)
            .await?
            .map(|row| row.integer("applied"))
            .transpose()?
            .map(|n| n.max(0) as u64))
    }

    async fn apply(&self, changes: &[ProjectedChange], through: Option<u64>) -> MemoryResult<()> {
        // One write transaction: each memory is read in it, so nothing gone or
        // archived is named, and the mark moves with the changes it covers.
        let mut touched: HashSet<AgentId> = HashSet::new();
        let mut refresh: HashSet<String> = HashSet::new();
        let mut tx = self.store.write_transaction().await?;
        let mut learned: Vec<(AgentId, String)> = Vec::new();
        for change in changes {
            let (id, agent) = match change {
                ProjectedChange::UpsertMemory { id, agent_id, .. }
                | ProjectedChange::DeleteMemory { id, agent_id } => (id, agent_id),
                ProjectedChange::UpsertEdge { .. } | ProjectedChange::DeleteEdge { .. } => continue,
            };
            for row in rows::<D>(
                &mut tx,
                &Statement::new(
                    "DELETE FROM entity_mentions WHERE memory_id = $1 RETURNING entity_id",
                    [Arg::Text(&id.0)],
                ),
            )
            .await?
            {
                refresh.insert(row.text("entity_id")?);
            }
            touched.insert(agent.clone());
            if matches!(change, ProjectedChange::DeleteMemory { .. }) {
                continue;
            }
            // The memory as it is now, read in this transaction: gone, archived or
            // another agent's (never) means no mentions.
            let current = rows::<D>(
                &mut tx,
                &Statement::new(
                    "SELECT content, occurred_at FROM memories \
                     WHERE id = $1 AND agent_id = $2 AND status = 'active'",
                    [Arg::Text(&id.0), Arg::Text(agent.as_str())],
                ),
            )
            .await?;
            let Some(row) = current.first() else { continue };
            let (content, occurred_at) = (row.text("content")?, row.time("occurred_at")?);
            let known = self.known_on(&mut tx, agent).await?;
            for mention in extract(&content, &known) {
                let entity = entity_id(agent, &mention.key);
                run::<D>(
                    &mut tx,
                    &Statement::new(
                        INSERT_ENTITY,
                        [
                            Arg::Text(&entity),
                            Arg::Text(agent.as_str()),
                            Arg::Text(&mention.key),
                            Arg::Text(&mention.surface),
                            Arg::Text(mention.kind.as_str()),
                            Arg::Time(occurred_at),
                        ],
                    ),
                )
                .await?;
                run::<D>(
                    &mut tx,
                    &Statement::new(
                        INSERT_MENTION,
                        [
                            Arg::Text(&entity),
                            Arg::Text(&id.0),
                            Arg::Text(agent.as_str()),
                            Arg::Text(&mention.surface),
                            Arg::Text(mention.kind.as_str()),
                            Arg::Integer(mention.start as i64),
                            Arg::Integer(mention.end as i64),
                            Arg::Time(occurred_at),
                        ],
                    ),
                )
                .await?;
                learned.push((agent.clone(), mention.key));
                refresh.insert(entity);
            }
        }
        let mut refresh: Vec<String> = refresh.into_iter().collect();
        refresh.sort();
        for entity in &refresh {
            run::<D>(
                &mut tx,
                &Statement::new(REFRESH_ENTITY, [Arg::Text(entity)]),
            )
            .await?;
        }
        let mut emptied = Vec::new();
        for agent in &touched {
            let removed = run::<D>(
                &mut tx,
                &Statement::new(DELETE_ORPHANS, [Arg::Text(agent.as_str())]),
            )
            .await?;
            if removed > 0 {
                emptied.push(agent.clone());
            }
        }
        if let Some(through) = through {
            run::<D>(
                &mut tx,
                &Statement::new(
                    "INSERT INTO entity_index_state (id, applied) VALUES (1, $1) \
                     ON CONFLICT (id) DO UPDATE SET applied = excluded.applied",
                    [Arg::Integer(through as i64)],
                ),
            )
            .await?;
        }
        commit(tx).await?;
        if let Ok(mut known) = self.known.lock() {
            for (agent, key) in learned {
                if let Some(keys) = known.get_mut(&agent) {
                    keys.insert(key);
                }
            }
            // Entities went away: read the keys again next time.
            for agent in emptied {
                known.remove(&agent);
            }
        }
        Ok(())
    }

    async fn reset(&self) -> MemoryResult<()> {
        let mut tx = self.store.write_transaction().await?;
        for statement in [
            "DELETE FROM entity_mentions",
            "DELETE FROM entities",
            "DELETE FROM entity_index_state",
        ] {
            run::<D>(&mut tx, &Statement::new(statement, None::<Arg>)).await?;
        }
        commit(tx).await?;
        if let Ok(mut known) = self.known.lock() {
            known.clear();
        }
        Ok(())
    }
}

#[async_trait]
impl<D: Dialect> EntityIndex for EntityProjection<D> {
    async fn entities(&self, query: &EntityQuery) -> MemoryResult<Vec<Entity>> {
        let Some(agent) = &query.agent_id else {
            return Ok(Vec::new());
        };
        let mut text = format!("{ENTITY_SELECT} WHERE e.agent_id = $1");
        let mut args = vec![Arg::Text(agent.as_str())];
        let search = query
            .search
            .as_ref()
            .map(|s| format!("%{}%", s.to_lowercase()));
        let kind = query.kind.map(EntityKind::as_str);
        if let Some(search) = &search {
            args.push(Arg::Text(search));
            text.push_str(&format!(" AND e.entity_key LIKE ${}", args.len()));
        }
        if let Some(kind) = kind {
            args.push(Arg::Text(kind));
            text.push_str(&format!(" AND e.kind = ${}", args.len()));
        }
        if let Some(after) = &query.after_key {
            args.push(Arg::Text(after));
            text.push_str(&format!(" AND e.entity_key > ${}", args.len()));
        }
        args.push(Arg::Integer(query.limit.clamp(1, 1000) as i64));
        text.push_str(&format!(" ORDER BY e.entity_key LIMIT ${}", args.len()));
        self.store
            .all(&Statement::new(text, args), entity_row)
            .await
    }

    async fn entity(&self, agent: &AgentId, id: &str) -> MemoryResult<Option<Entity>> {
        let statement = Statement::new(
            format!("{ENTITY_SELECT} WHERE e.agent_id = $1 AND e.id = $2"),
            [Arg::Text(agent.as_str()), Arg::Text(id)],
        );
        self.store
            .row(&statement)
            .await?
            .map(|row| entity_row(&row))
            .transpose()
    }

    async fn mentions(
        &self,
        agent: &AgentId,
        id: &str,
        limit: usize,
    ) -> MemoryResult<Vec<EntityMentionRef>> {
        let statement = Statement::new(
            "SELECT memory_id, surface, start_at, end_at, occurred_at FROM entity_mentions \
             WHERE agent_id = $1 AND entity_id = $2 ORDER BY occurred_at DESC, memory_id LIMIT $3",
            [
                Arg::Text(agent.as_str()),
                Arg::Text(id),
                Arg::Integer(limit.clamp(1, 1000) as i64),
            ],
        );
        self.store
            .all(&statement, |row| {
                Ok(EntityMentionRef {
                    memory_id: MemoryId(row.text("memory_id")?),
                    surface: row.text("surface")?,
                    start: row.integer("start_at")?.max(0) as usize,
                    end: row.integer("end_at")?.max(0) as usize,
                    occurred_at: row.time("occurred_at")?,
                })
            })
            .await
    }

    async fn co_mentioned(
        &self,
        agent: &AgentId,
        id: &str,
        limit: usize,
    ) -> MemoryResult<Vec<(Entity, u64)>> {
        let statement = Statement::new(
            "SELECT other.entity_id AS id, COUNT(DISTINCT other.memory_id) AS shared \
             FROM entity_mentions mine JOIN entity_mentions other \
             ON other.memory_id = mine.memory_id AND other.entity_id <> mine.entity_id \
             WHERE mine.agent_id = $1 AND mine.entity_id = $2 \
             GROUP BY other.entity_id ORDER BY shared DESC, other.entity_id LIMIT $3",
            [
                Arg::Text(agent.as_str()),
                Arg::Text(id),
                Arg::Integer(limit.clamp(1, 100) as i64),
            ],
        );
        let pairs: Vec<(String, u64)> = self
            .store
            .all(&statement, |row| {
                Ok((row.text("id")?, row.integer("shared")?.max(0) as u64))
            })
            .await?;
        let mut out = Vec::with_capacity(pairs.len());
        for (other, shared) in pairs {
            if let Some(entity) = self.entity(agent, &other).await? {
                out.push((entity, shared));
            }
        }
        Ok(out)
    }

    async fn memories_naming(
        &self,
        agent: &AgentId,
        keys: &[String],
        limit: usize,
    ) -> MemoryResult<Vec<(MemoryId, String)>> {
        let mut found: Vec<(MemoryId, String, chrono::DateTime<chrono::Utc>)> = Vec::new();
        for key in keys {
            let entity = entity_id(agent, key);
            let statement = Statement::new(
                "SELECT DISTINCT m.memory_id, m.occurred_at FROM entity_mentions m \
                 WHERE m.agent_id = $1 AND m.entity_id = $2 \
                 ORDER BY m.occurred_at DESC LIMIT $3",
                [
                    Arg::Text(agent.as_str()),
                    Arg::Text(&entity),
                    Arg::Integer(limit.clamp(1, 10_000) as i64),
                ],
            );
            for row in self.store.rows(&statement).await? {
                found.push((
                    MemoryId(row.text("memory_id")?),
                    key.clone(),
                    row.time("occurred_at")?,
                ));
            }
        }
        found.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.0 .0.cmp(&b.0 .0)));
        let mut seen = HashSet::new();
        Ok(found
            .into_iter()
            .filter(|(id, _, _)| seen.insert(id.clone()))
            .take(limit)
            .map(|(id, key, _)| (id, key))
            .collect())
    }

    async fn known_keys(
        &self,
        agent: &AgentId,
        candidates: &[String],
    ) -> MemoryResult<Vec<String>> {
        let known = self
            .known_on(&mut *self.store.connection().await?, agent)
            .await?;
        Ok(candidates
            .iter()
            .filter(|c| known.contains(c.as_str()))
            .cloned()
            .collect())
    }
}

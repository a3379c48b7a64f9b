//! The entity index on either SQL database: a [`Projection`] of the memories kept from
//! the outbox (the tables `entities`, `entity_mentions`, `entity_index_state` of the
//! same database), and the [`EntityIndex`] reads recall and the entity routes make.
//!
//! Applying an upsert reads the memory itself inside the write transaction, so the
//! index never names a memory that is gone or archived (an erase racing the projector
//! leaves nothing behind), and extraction runs after the write it follows is durable:
//! it never delays an acknowledgement.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use mnemos_actors::error::{MemoryError, MemoryResult};
use mnemos_actors::model::{AgentId, MemoryId};
use mnemos_actors::policy::aliases::{stated_aliases, StatedAlias};
use mnemos_actors::policy::entities::{extract, EntityKind};
use mnemos_actors::policy::facts::{extract_facts, FactObservation};
use mnemos_actors::policy::model_entities::{ground, ModelNamed};
use mnemos_actors::policy::profiles::PROFILE_KEY;
use mnemos_actors::store::entities::{
    entity_id, Entity, EntityAliases, EntityIndex, EntityMentionRef, EntityMerge, EntityQuery,
    FactQuery,
};
use mnemos_actors::store::{ProjectedChange, Projection};

use crate::store::dialect::{commit, rows, run, Dialect, SqlStore, WriteTx};
use crate::store::model_entities::NamingQueue;
use crate::store::rows::Columns;
use crate::store::sql::{Arg, Statement};

mod reads;

/// Entity columns with their mention count, for reads.
const ENTITY_SELECT: &str =
    "SELECT e.id, e.agent_id, e.entity_key, e.name, e.kind, e.first_seen, e.last_seen, \
     (SELECT COUNT(*) FROM entity_mentions m WHERE m.entity_id = e.id) AS mentions \
     FROM entities e";

/// Create entities, one row each in the VALUES that follow (their names, kinds and time
/// spans are then derived from their mentions).
const INSERT_ENTITIES: &str =
    "INSERT INTO entities (id, agent_id, entity_key, name, kind, first_seen, last_seen) ";

/// Derive an entity's name (the earliest mention's words, a mention by an alias only
/// when there is no other), kind (the most frequent
/// specific kind of its mentions) and time span from its mentions.
const REFRESH_ENTITY: &str = "UPDATE entities SET \
     first_seen = COALESCE((SELECT MIN(m.occurred_at) FROM entity_mentions m WHERE m.entity_id = entities.id), first_seen), \
     last_seen = COALESCE((SELECT MAX(m.occurred_at) FROM entity_mentions m WHERE m.entity_id = entities.id), last_seen), \
     kind = COALESCE((SELECT m.kind FROM entity_mentions m WHERE m.entity_id = entities.id AND m.kind <> 'name' \
         GROUP BY m.kind ORDER BY COUNT(*) DESC, m.kind LIMIT 1), 'name'), \
     name = COALESCE((SELECT m.surface FROM entity_mentions m WHERE m.entity_id = entities.id \
         ORDER BY m.via_alias, m.occurred_at, m.memory_id, m.start_at LIMIT 1), name) \
     WHERE id = $1";

/// Record one mention (a repeated apply changes nothing).
const INSERT_MENTIONS: &str = "INSERT INTO entity_mentions \
     (entity_id, memory_id, agent_id, surface, kind, start_at, end_at, occurred_at, via_alias, by_model) ";

/// Columns of a merge, for reads.
const MERGE_SELECT: &str = "SELECT id, agent_id, alias_key, name_key, origin, memory_id, \
     created_at, undone_at, project_id FROM entity_merges";

/// Rows per multi-row INSERT: 12 columns each stay far below SQLite's 32,766 bound
/// parameters even for a memory naming thousands of things.
const ROWS_PER_INSERT: usize = 500;

/// Record claims of facts, one row each in the VALUES that follow (a repeated apply
/// changes nothing).
const INSERT_CLAIMS: &str = "INSERT INTO entity_facts \
     (memory_id, ordinal, agent_id, subject_key, subject, attribute, value, value_key, \
      value_is_entity, ends, observed_at, by_model) ";

/// Entities of an agent that no active memory names any more.
const DELETE_ORPHANS: &str = "DELETE FROM entities WHERE agent_id = $1 AND NOT EXISTS \
     (SELECT 1 FROM entity_mentions m WHERE m.entity_id = entities.id)";

/// The entity index of one SQL database.
pub struct EntityProjection<D: Dialect> {
    /// The database of the memories (and of the index).
    store: SqlStore<D>,
    /// Keys each agent's entities have, as last read or written: a sentence-initial
    /// word matching one is a name. Dropped for an agent whose entities were removed.
    known: Mutex<HashMap<AgentId, Arc<HashSet<String>>>>,
    /// Each agent's merged aliases (everywhere and per project), as last read;
    /// dropped whenever a merge is recorded or undone.
    aliases: Mutex<HashMap<AgentId, Arc<EntityAliases>>>,
    /// Where applied memories wait for the inner-thought model to name what they
    /// name (None: the rules alone).
    naming: Option<Arc<NamingQueue>>,
    /// Whether the database holds model answers to read (0: not looked yet, 1: none,
    /// 2: some): a rebuild without the model keeps what it said, and a database it
    /// never saw pays no extra read per memory.
    answers: std::sync::atomic::AtomicU8,
}

/// What one pass over memories did, to finish it in the same transaction.
#[derive(Default)]
struct Pass {
    /// Agents whose entities may have lost their last mention.
    touched: HashSet<AgentId>,
    /// Entities whose name, kind and span are derived again.
    refresh: HashSet<String>,
    /// Keys written, to add to `known` once committed.
    learned: Vec<(AgentId, String)>,
    /// Aliases merged because a memory stated them: what named them is read again.
    merged: Vec<(AgentId, String)>,
    /// Memories read again because a merge or split changed what they name: announced
    /// again through the outbox, so graph projections name the right entities too.
    reannounce: Vec<MemoryId>,
}

impl<D: Dialect> EntityProjection<D> {
    /// The index in `store`'s database.
    pub fn new(store: SqlStore<D>) -> Self {
        Self {
            store,
            known: Mutex::new(HashMap::new()),
            aliases: Mutex::new(HashMap::new()),
            naming: None,
            answers: std::sync::atomic::AtomicU8::new(0),
        }
    }

    /// Whether model answers may exist for the memories indexed (see `answers`).
    async fn reads_answers(&self, conn: &mut D::Connection) -> MemoryResult<bool> {
        use std::sync::atomic::Ordering;
        if self.naming.is_some() {
            return Ok(true);
        }
        match self.answers.load(Ordering::Relaxed) {
            1 => Ok(false),
            2 => Ok(true),
            _ => {
                let any = !rows::<D>(
                    conn,
                    &Statement::new(
                        "SELECT 1 AS one FROM entity_model_answers LIMIT 1",
                        None::<Arg>,
                    ),
                )
                .await?
                .is_empty();
                self.answers
                    .store(if any { 2 } else { 1 }, Ordering::Relaxed);
                Ok(any)
            }
        }
    }

    /// The index that also hands every memory it applies to `queue`, for the model.
    pub fn with_naming(mut self, queue: Arc<NamingQueue>) -> Self {
        self.naming = Some(queue);
        self
    }

    /// Index memory `id` of `agent` again in `tx` (its model answer was just recorded
    /// there) and commit.
    pub(crate) async fn index_again(
        &self,
        mut tx: WriteTx<D>,
        id: &MemoryId,
        agent: &AgentId,
    ) -> MemoryResult<()> {
        let mut pass = Pass::default();
        if let Err(error) = self
            .index_memory(&mut tx, id, agent, false, &mut pass)
            .await
        {
            self.forget_agent(agent);
            return Err(error);
        }
        self.close_pass(tx, pass, agent).await
    }

    /// The keys `agent`'s entities have: kept, or read on `conn` (inside the caller's
    /// transaction, or on a pool connection) and kept. Shared, not copied: an agent
    /// with many entities costs nothing per memory.
    async fn known_on(
        &self,
        conn: &mut D::Connection,
        agent: &AgentId,
    ) -> MemoryResult<Arc<HashSet<String>>> {
        if let Some(keys) = self.known.lock().ok().and_then(|k| k.get(agent).cloned()) {
            return Ok(keys);
        }
        let statement = Statement::new(
            "SELECT entity_key FROM entities WHERE agent_id = $1",
            [Arg::Text(agent.as_str())],
        );
        let keys: Arc<HashSet<String>> = Arc::new(
            rows::<D>(conn, &statement)
                .await?
                .iter()
                .map(|row| row.text("entity_key"))
                .collect::<MemoryResult<_>>()?,
        );
        if let Ok(mut known) = self.known.lock() {
            known.insert(agent.clone(), keys.clone());
        }
        Ok(keys)
    }

    /// `agent`'s merged aliases in force: kept (shared, not copied), or read on `conn`
    /// and kept.
    async fn aliases_on(
        &self,
        conn: &mut D::Connection,
        agent: &AgentId,
    ) -> MemoryResult<Arc<EntityAliases>> {
        if let Some(aliases) = self.aliases.lock().ok().and_then(|a| a.get(agent).cloned()) {
            return Ok(aliases);
        }
        let statement = Statement::new(
            "SELECT alias_key, name_key, project_id FROM entity_merges \
             WHERE agent_id = $1 AND undone_at IS NULL ORDER BY created_at, id",
            [Arg::Text(agent.as_str())],
        );
        let mut aliases = EntityAliases::default();
        for row in rows::<D>(conn, &statement).await? {
            let (alias, name) = (row.text("alias_key")?, row.text("name_key")?);
            match row.optional_text("project_id")? {
                Some(project) => {
                    aliases
                        .by_project
                        .entry(project)
                        .or_default()
                        .insert(alias, name);
                }
                None => {
                    aliases.global.insert(alias, name);
                }
            }
        }
        let aliases = Arc::new(aliases);
        if let Ok(mut cache) = self.aliases.lock() {
            cache.insert(agent.clone(), aliases.clone());
        }
        Ok(aliases)
    }

    /// Forget what is kept of `agent`'s aliases and keys (a merge changed them, or a
    /// transaction that may have changed them failed).
    fn forget_agent(&self, agent: &AgentId) {
        if let Ok(mut cache) = self.aliases.lock() {
            cache.remove(agent);
        }
        if let Ok(mut known) = self.known.lock() {
            known.remove(agent);
        }
    }

    /// Record that `alias` stands for `name` because memory `memory` says so, unless
    /// the alias is merged already or this merge was undone once. True when recorded.
    async fn record_stated(
        &self,
        conn: &mut D::Connection,
        agent: &AgentId,
        stated: &StatedAlias,
        memory: &MemoryId,
        at: DateTime<Utc>,
    ) -> MemoryResult<bool> {
        let seen = rows::<D>(
            conn,
            &Statement::new(
                "SELECT id FROM entity_merges WHERE agent_id = $1 AND project_id IS NULL AND \
                 ((alias_key = $2 AND (name_key = $3 OR undone_at IS NULL)) \
                  OR (alias_key = $3 AND name_key = $2))",
                [
                    Arg::Text(agent.as_str()),
                    Arg::Text(&stated.alias),
                    Arg::Text(&stated.name),
                ],
            ),
        )
        .await?;
        if !seen.is_empty() {
            return Ok(false);
        }
        self.insert_merge(
            conn,
            agent,
            (&stated.alias, &stated.name, None),
            "stated",
            Some(memory),
            at,
        )
        .await?;
        Ok(true)
    }

    /// Insert a merge row (`alias` into `name`, in `project` or everywhere) and drop
    /// the kept aliases of its agent.
    async fn insert_merge(
        &self,
        conn: &mut D::Connection,
        agent: &AgentId,
        (alias, name, project): (&str, &str, Option<&str>),
        origin: &str,
        memory: Option<&MemoryId>,
        at: DateTime<Utc>,
    ) -> MemoryResult<EntityMerge> {
        let id = format!("mrg_{}", uuid::Uuid::now_v7().simple());
        run::<D>(
            conn,
            &Statement::new(
                "INSERT INTO entity_merges (id, agent_id, alias_key, name_key, origin, memory_id, \
                 created_at, project_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                [
                    Arg::Text(&id),
                    Arg::Text(agent.as_str()),
                    Arg::Text(alias),
                    Arg::Text(name),
                    Arg::Text(origin),
                    Arg::OptionalText(memory.map(|m| m.0.as_str())),
                    Arg::Time(at),
                    Arg::OptionalText(project),
                ],
            ),
        )
        .await?;
        self.forget_agent(agent);
        Ok(EntityMerge {
            id,
            alias: alias.to_string(),
            name: name.to_string(),
            origin: origin.to_string(),
            memory_id: memory.cloned(),
            created_at: at,
            undone_at: None,
            project_id: project.map(str::to_string),
        })
    }

    /// Index one memory again in `conn`'s transaction (see [`Self::index_memories`]).
    async fn index_memory(
        &self,
        conn: &mut D::Connection,
        id: &MemoryId,
        agent: &AgentId,
        deleted: bool,
        pass: &mut Pass,
    ) -> MemoryResult<()> {
        self.index_memories(conn, &[(id, agent, deleted)], pass)
            .await
    }

    /// Index memories again in `conn`'s transaction, in order: drop what each named
    /// and stated, then (unless deleted) read it as it is now and record its mentions
    /// (active memories only) and its claims of facts (active, superseded, stale),
    /// every key resolved through the agent's aliases. The drops and reads are one
    /// statement per table for all of them: the projector's batches would otherwise
    /// hold SQLite's one writer for a few statements per memory.
    async fn index_memories(
        &self,
        conn: &mut D::Connection,
        items: &[(&MemoryId, &AgentId, bool)],
        pass: &mut Pass,
    ) -> MemoryResult<()> {
        let ids: Vec<&str> = items.iter().map(|(id, _, _)| id.0.as_str()).collect();
        // What the model said of a memory goes only with the memory itself.
        let deleted: Vec<&str> = items
            .iter()
            .filter(|(_, _, deleted)| *deleted)
            .map(|(id, _, _)| id.0.as_str())
            .collect();
        let mut current: HashMap<String, D::Row> = HashMap::new();
        for chunk in D::LISTS.chunks(&ids, 400) {
            let mut dropped = Statement::new("DELETE FROM entity_mentions WHERE ", []);
            dropped.push_in(D::LISTS, "memory_id", chunk.iter().copied());
            dropped.push(" RETURNING entity_id");
            for row in rows::<D>(conn, &dropped).await? {
                pass.refresh.insert(row.text("entity_id")?);
            }
            let mut claims = Statement::new("DELETE FROM entity_facts WHERE ", []);
            claims.push_in(D::LISTS, "memory_id", chunk.iter().copied());
            run::<D>(conn, &claims).await?;
            // The memories as they are now, read in this transaction: gone, archived
            // or another agent's (never) means no mentions and no claims; a
            // superseded or stale one keeps its claims (a contradiction closes a
            // fact, it does not delete it) but names nothing for recall.
            let mut read = Statement::new(
                "SELECT id, agent_id, content, content_hash, occurred_at, status, metadata, \
                 project_id FROM memories WHERE status IN ('active', 'superseded', 'stale') AND ",
                [],
            );
            read.push_in(D::LISTS, "id", chunk.iter().copied());
            for row in rows::<D>(conn, &read).await? {
                current.insert(row.text("id")?, row);
            }
        }
        for chunk in D::LISTS.chunks(&deleted, 400) {
            let mut answers = Statement::new("DELETE FROM entity_model_answers WHERE ", []);
            answers.push_in(D::LISTS, "memory_id", chunk.iter().copied());
            run::<D>(conn, &answers).await?;
        }
        for (id, agent, deleted) in items {
            pass.touched.insert((*agent).clone());
            if *deleted {
                continue;
            }
            let Some(row) = current.get(&id.0) else {
                continue;
            };
            if row.text("agent_id")? != agent.as_str() {
                continue;
            }
            self.index_row(conn, id, agent, row, pass).await?;
        }
        Ok(())
    }

    /// Record what the stored memory `row` names and states (see [`Self::index_memories`]).
    async fn index_row(
        &self,
        conn: &mut D::Connection,
        id: &MemoryId,
        agent: &AgentId,
        row: &D::Row,
        pass: &mut Pass,
    ) -> MemoryResult<()> {
        let (content, occurred_at) = (row.text("content")?, row.time("occurred_at")?);
        let active = row.text("status")? == "active";
        let metadata = row.json("metadata")?.ok();
        let speaker = metadata
            .as_ref()
            .and_then(|m| m.get("speaker")?.as_str().map(str::to_string));
        // A profile (the sleep cycle's summary of an entity's facts) names the entity
        // but states nothing new: its facts and aliases are its sources'.
        let profile = metadata
            .as_ref()
            .is_some_and(|m| m.get(PROFILE_KEY).is_some());
        let known = self.known_on(conn, agent).await?;
        let mut mentions = extract(&content, &known);
        let rule_count = mentions.len();
        let mut claims = if profile {
            Vec::new()
        } else {
            extract_facts(&content, &mentions, speaker.as_deref())
        };
        let rule_claims = claims.len();
        // What the model said of this very text, when it was asked: names and
        // relationships the text bears out, beyond the rules'.
        if !profile && self.reads_answers(conn).await? {
            let hash = row.text("content_hash")?;
            let answer = rows::<D>(
                conn,
                &Statement::new(
                    "SELECT answer FROM entity_model_answers \
                     WHERE memory_id = $1 AND content_hash = $2 AND outcome = 'ok'",
                    [Arg::Text(&id.0), Arg::Text(&hash)],
                ),
            )
            .await?;
            if let Some(named) = answer
                .first()
                .map(|row| row.text("answer"))
                .transpose()?
                .and_then(|json| serde_json::from_str::<ModelNamed>(&json).ok())
            {
                let (more_mentions, more_claims) = ground(&content, &mentions, &claims, &named);
                mentions.extend(more_mentions);
                claims.extend(more_claims);
            }
        }
        if active && !profile {
            for stated in stated_aliases(&content, &mentions) {
                if self
                    .record_stated(conn, agent, &stated, id, occurred_at)
                    .await?
                {
                    pass.merged.push((agent.clone(), stated.alias));
                }
            }
        }
        let project = row.optional_text("project_id")?;
        let aliases = self.aliases_on(conn, agent).await?;
        let key_of = |key: &str| aliases.resolve(key, project.as_deref());
        // One statement per table for the whole memory (a memory names a few
        // entities; a statement per row held the one SQLite writer many times longer).
        let claim_keys: Vec<(String, String)> = claims
            .iter()
            .map(|claim| {
                let value_key = if claim.value_is_entity {
                    key_of(&claim.value_key)
                } else {
                    claim.value_key.clone()
                };
                (key_of(&claim.subject_key), value_key)
            })
            .collect();
        let claim_rows: Vec<_> = claims.iter().zip(&claim_keys).enumerate().collect();
        for chunk in claim_rows.chunks(ROWS_PER_INSERT) {
            let mut insert = Statement::new(INSERT_CLAIMS, []);
            insert.values(
                chunk.iter().copied(),
                |(ordinal, (claim, (subject_key, value_key)))| {
                    [
                        Arg::Text(&id.0),
                        Arg::Integer(ordinal as i64),
                        Arg::Text(agent.as_str()),
                        Arg::Text(subject_key),
                        Arg::Text(&claim.subject),
                        Arg::Text(&claim.attribute),
                        Arg::Text(&claim.value),
                        Arg::Text(value_key),
                        Arg::Flag(claim.value_is_entity),
                        Arg::Flag(claim.ends),
                        Arg::Time(occurred_at),
                        Arg::Flag(ordinal >= rule_claims),
                    ]
                },
            );
            insert.push(" ON CONFLICT DO NOTHING");
            run::<D>(conn, &insert).await?;
        }
        if !active || mentions.is_empty() {
            return Ok(());
        }
        let named: Vec<(String, String)> = mentions
            .iter()
            .map(|mention| {
                let key = key_of(&mention.key);
                (entity_id(agent, &key), key)
            })
            .collect();
        let rows: Vec<_> = mentions.iter().zip(&named).enumerate().collect();
        for chunk in rows.chunks(ROWS_PER_INSERT) {
            let mut entities = Statement::new(INSERT_ENTITIES, []);
            entities.values(
                chunk.iter().map(|(_, row)| *row),
                |(mention, (entity, key))| {
                    [
                        Arg::Text(entity),
                        Arg::Text(agent.as_str()),
                        Arg::Text(key),
                        Arg::Text(&mention.surface),
                        Arg::Text(mention.kind.as_str()),
                        Arg::Time(occurred_at),
                        Arg::Time(occurred_at),
                    ]
                },
            );
            entities.push(" ON CONFLICT (agent_id, entity_key) DO NOTHING");
            run::<D>(conn, &entities).await?;
            let mut insert = Statement::new(INSERT_MENTIONS, []);
            insert.values(
                chunk.iter().copied(),
                |(place, (mention, (entity, key)))| {
                    [
                        Arg::Text(entity),
                        Arg::Text(&id.0),
                        Arg::Text(agent.as_str()),
                        Arg::Text(&mention.surface),
                        Arg::Text(mention.kind.as_str()),
                        Arg::Integer(mention.start as i64),
                        Arg::Integer(mention.end as i64),
                        Arg::Time(occurred_at),
                        Arg::Flag(*key != mention.key),
                        Arg::Flag(place >= rule_count),
                    ]
                },
            );
            insert.push(" ON CONFLICT DO NOTHING");
            run::<D>(conn, &insert).await?;
        }
        for (entity, key) in named {
            pass.learned.push((agent.clone(), key));
            pass.refresh.insert(entity);
        }
        Ok(())
    }

    /// Memories of `agent` that name any of `keys` or state a fact about them (what a
    /// merge or split must read again).
    async fn memories_with_keys(
        conn: &mut D::Connection,
        agent: &AgentId,
        keys: &[&str],
    ) -> MemoryResult<Vec<MemoryId>> {
        let mut found: Vec<MemoryId> = Vec::new();
        for key in keys {
            let entity = entity_id(agent, key);
            for statement in [
                Statement::new(
                    "SELECT DISTINCT memory_id FROM entity_mentions WHERE entity_id = $1",
                    [Arg::Text(&entity)],
                ),
                Statement::new(
                    "SELECT DISTINCT memory_id FROM entity_facts WHERE agent_id = $1 \
                     AND (subject_key = $2 OR value_key = $2)",
                    [Arg::Text(agent.as_str()), Arg::Text(key)],
                ),
            ] {
                for row in rows::<D>(conn, &statement).await? {
                    let id = MemoryId(row.text("memory_id")?);
                    if !found.contains(&id) {
                        found.push(id);
                    }
                }
            }
        }
        Ok(found)
    }

    /// Read again what named the aliases merged during `pass` (their mentions now go
    /// to the entity they stand for), a few rounds at most.
    async fn follow_merges(&self, conn: &mut D::Connection, pass: &mut Pass) -> MemoryResult<()> {
        for _ in 0..4 {
            let merged = std::mem::take(&mut pass.merged);
            if merged.is_empty() {
                break;
            }
            for (agent, alias) in merged {
                for memory in Self::memories_with_keys(conn, &agent, &[alias.as_str()]).await? {
                    self.index_memory(conn, &memory, &agent, false, pass)
                        .await?;
                    pass.reannounce.push(memory);
                }
            }
        }
        Ok(())
    }

    /// Finish a pass in its transaction: announce the memories a merge or split read
    /// again (a no-op update of one projected column, which the outbox trigger records
    /// with the memory's projected properties), derive the touched entities again and
    /// drop those nothing names. Answers the agents that lost entities.
    async fn finish(conn: &mut D::Connection, pass: &Pass) -> MemoryResult<Vec<AgentId>> {
        let mut announced = HashSet::new();
        for memory in &pass.reannounce {
            if announced.insert(memory) {
                run::<D>(
                    conn,
                    &Statement::new(
                        "UPDATE memories SET session_id = session_id WHERE id = $1",
                        [Arg::Text(&memory.0)],
                    ),
                )
                .await?;
            }
        }
        let mut refresh: Vec<&String> = pass.refresh.iter().collect();
        refresh.sort();
        for entity in refresh {
            run::<D>(conn, &Statement::new(REFRESH_ENTITY, [Arg::Text(entity)])).await?;
        }
        let mut emptied = Vec::new();
        for agent in &pass.touched {
            let removed = run::<D>(
                conn,
                &Statement::new(DELETE_ORPHANS, [Arg::Text(agent.as_str())]),
            )
            .await?;
            if removed > 0 {
                emptied.push(agent.clone());
            }
        }
        Ok(emptied)
    }

    /// After a commit: learn the keys written, forget those of agents that lost some.
    fn committed(&self, pass: Pass, emptied: Vec<AgentId>) {
        if let Ok(mut known) = self.known.lock() {
            for (agent, key) in pass.learned {
                if let Some(keys) = known.get_mut(&agent) {
                    if !keys.contains(&key) {
                        Arc::make_mut(keys).insert(key);
                    }
                }
            }
            // Entities went away: read the keys again next time.
            for agent in emptied {
                known.remove(&agent);
            }
        }
    }

    /// Follow merges, finish and commit `pass`; on failure forget what is kept of
    /// `agent` (the transaction may have changed it).
    async fn close_pass(
        &self,
        mut tx: WriteTx<D>,
        mut pass: Pass,
        agent: &AgentId,
    ) -> MemoryResult<()> {
        let outcome = async {
            self.follow_merges(&mut tx, &mut pass).await?;
            Self::finish(&mut tx, &pass).await
        }
        .await;
        self.forget_agent(agent);
        let emptied = outcome?;
        commit(tx).await?;
        self.forget_agent(agent);
        self.committed(pass, emptied);
        Ok(())
    }

    /// An entity of `agent` by id in `conn`'s transaction, or not found naming `field`.
    async fn entity_on(
        conn: &mut D::Connection,
        agent: &AgentId,
        id: &str,
        field: &str,
    ) -> MemoryResult<Entity> {
        let found = rows::<D>(
            conn,
            &Statement::new(
                format!("{ENTITY_SELECT} WHERE e.agent_id = $1 AND e.id = $2"),
                [Arg::Text(agent.as_str()), Arg::Text(id)],
            ),
        )
        .await?;
        match found.first() {
            Some(row) => entity_row(row),
            None => Err(MemoryError {
                field: Some(field.into()),
                ..MemoryError::not_found(format!("agent {agent} has no entity {id}"))
            }),
        }
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

/// A merge row as read.
fn merge_row<R: Columns>(row: &R) -> MemoryResult<EntityMerge> {
    Ok(EntityMerge {
        id: row.text("id")?,
        alias: row.text("alias_key")?,
        name: row.text("name_key")?,
        origin: row.text("origin")?,
        memory_id: row.optional_text("memory_id")?.map(MemoryId),
        created_at: row.time("created_at")?,
        undone_at: row.optional_time("undone_at")?,
        project_id: row.optional_text("project_id")?,
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
        let mut tx = self.store.write_transaction().await?;
        let mut pass = Pass::default();
        let outcome = async {
            // Each memory once, as its last change in the batch leaves it.
            let mut items: Vec<(&MemoryId, &AgentId, bool)> = Vec::with_capacity(changes.len());
            let mut seen: HashSet<&MemoryId> = HashSet::new();
            for change in changes.iter().rev() {
                let item = match change {
                    ProjectedChange::UpsertMemory { id, agent_id, .. } => (id, agent_id, false),
                    ProjectedChange::DeleteMemory { id, agent_id } => (id, agent_id, true),
                    ProjectedChange::UpsertEdge { .. } | ProjectedChange::DeleteEdge { .. } => {
                        continue
                    }
                };
                if seen.insert(item.0) {
                    items.push(item);
                }
            }
            items.reverse();
            self.index_memories(&mut tx, &items, &mut pass).await?;
            self.follow_merges(&mut tx, &mut pass).await?;
            let emptied = Self::finish(&mut tx, &pass).await?;
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
            Ok::<_, MemoryError>(emptied)
        }
        .await;
        match outcome {
            Ok(emptied) => {
                commit(tx).await?;
                self.committed(pass, emptied);
                if let Some(queue) = &self.naming {
                    queue.push(changes.iter().filter_map(|change| match change {
                        ProjectedChange::UpsertMemory { id, .. } => Some(id.clone()),
                        _ => None,
                    }));
                }
                Ok(())
            }
            Err(error) => {
                // Aliases recorded in the failed transaction are not merged.
                for agent in &pass.touched {
                    self.forget_agent(agent);
                }
                Err(error)
            }
        }
    }

    async fn reset(&self) -> MemoryResult<()> {
        let mut tx = self.store.write_transaction().await?;
        for statement in [
            "DELETE FROM entity_facts",
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
        if let Ok(mut aliases) = self.aliases.lock() {
            aliases.clear();
        }
        Ok(())
    }
}

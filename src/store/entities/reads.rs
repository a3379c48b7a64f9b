//! The entity index's reads and its merges and splits (the [`EntityIndex`] of
//! [`EntityProjection`]); applying the outbox is in the parent module.

use super::*;

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
            "SELECT memory_id, surface, start_at, end_at, occurred_at, by_model FROM entity_mentions \
             WHERE agent_id = $1 AND entity_id = $2 ORDER BY occurred_at DESC, memory_id, start_at LIMIT $3",
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
                    by_model: row.flag("by_model")?,
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

    async fn fact_claims(&self, query: &FactQuery) -> MemoryResult<Vec<FactObservation>> {
        let mut text = String::from(
            "SELECT memory_id, subject_key, subject, attribute, value, value_key, \
             value_is_entity, ends, observed_at FROM entity_facts WHERE agent_id = $1",
        );
        let mut args = vec![Arg::Text(query.agent_id.as_str())];
        for (column, value) in [
            ("subject_key", &query.subject_key),
            ("attribute", &query.attribute),
            ("value_key", &query.value_key),
        ] {
            if let Some(value) = value {
                args.push(Arg::Text(value));
                text.push_str(&format!(" AND {column} = ${}", args.len()));
            }
        }
        args.push(Arg::Integer(query.limit.clamp(1, 100_000) as i64));
        text.push_str(&format!(
            " ORDER BY subject_key, attribute, observed_at, memory_id, ordinal LIMIT ${}",
            args.len()
        ));
        self.store
            .all(&Statement::new(text, args), |row| {
                Ok(FactObservation {
                    subject_key: row.text("subject_key")?,
                    subject: row.text("subject")?,
                    attribute: row.text("attribute")?,
                    value: row.text("value")?,
                    value_key: row.text("value_key")?,
                    value_is_entity: row.flag("value_is_entity")?,
                    ends: row.flag("ends")?,
                    observed_at: row.time("observed_at")?,
                    memory_id: MemoryId(row.text("memory_id")?),
                })
            })
            .await
    }

    async fn known_keys(
        &self,
        agent: &AgentId,
        candidates: &[String],
    ) -> MemoryResult<Vec<String>> {
        let mut conn = self.store.connection().await?;
        let known = self.known_on(&mut conn, agent).await?;
        let aliases = self.aliases_on(&mut *conn, agent).await?;
        let mut out: Vec<String> = Vec::new();
        for candidate in candidates {
            // A merged alias stands for the entity it was merged into.
            let key = aliases.resolve(candidate, None);
            if known.contains(&key) && !out.contains(&key) {
                out.push(key);
            }
        }
        Ok(out)
    }

    async fn merge(
        &self,
        agent: &AgentId,
        id: &str,
        into: &str,
        at: DateTime<Utc>,
    ) -> MemoryResult<EntityMerge> {
        if id == into {
            return Err(MemoryError::invalid(
                "into",
                "an entity cannot be merged into itself; name another entity's id",
            ));
        }
        let mut tx = self.store.write_transaction().await?;
        let alias = Self::entity_on(&mut tx, agent, id, "id").await?;
        let name = Self::entity_on(&mut tx, agent, into, "into").await?;
        let merge = self
            .insert_merge(
                &mut tx,
                agent,
                (&alias.key, &name.key, None),
                "user",
                None,
                at,
            )
            .await?;
        let mut pass = Pass::default();
        pass.merged.push((agent.clone(), alias.key.clone()));
        self.close_pass(tx, pass, agent).await?;
        Ok(merge)
    }

    async fn split(
        &self,
        agent: &AgentId,
        id: &str,
        alias: &str,
        at: DateTime<Utc>,
    ) -> MemoryResult<EntityMerge> {
        let mut tx = self.store.write_transaction().await?;
        let entity = Self::entity_on(&mut tx, agent, id, "id").await?;
        let alias = mnemos_actors::policy::entities::entity_key(alias);
        let found = rows::<D>(
            &mut tx,
            &Statement::new(
                format!(
                    "{MERGE_SELECT} WHERE agent_id = $1 AND alias_key = $2 AND undone_at IS NULL"
                ),
                [Arg::Text(agent.as_str()), Arg::Text(&alias)],
            ),
        )
        .await?;
        let aliases = self.aliases_on(&mut tx, agent).await?;
        // A merge everywhere that (through others) leads to the entity, or a name split
        // off for a project into exactly this entity.
        let undone = found
            .iter()
            .map(merge_row)
            .collect::<MemoryResult<Vec<_>>>()?
            .into_iter()
            .find(|merge| match &merge.project_id {
                Some(_) => merge.name == entity.key,
                None => aliases.resolve(&alias, None) == entity.key,
            });
        let mut merge = match undone {
            Some(merge) => merge,
            _ => {
                return Err(MemoryError {
                    field: Some("alias".into()),
                    ..MemoryError::not_found(format!(
                        "{alias:?} is not merged into entity {id} (its aliases are in its merge history)"
                    ))
                })
            }
        };
        run::<D>(
            &mut tx,
            &Statement::new(
                "UPDATE entity_merges SET undone_at = $1 WHERE id = $2",
                [Arg::Time(at), Arg::Text(&merge.id)],
            ),
        )
        .await?;
        self.forget_agent(agent);
        merge.undone_at = Some(at);
        // Everything naming the entity is read again: the alias's mentions go back to it.
        let mut pass = Pass::default();
        for memory in Self::memories_with_keys(&mut tx, agent, &[entity.key.as_str()]).await? {
            self.index_memory(&mut tx, &memory, agent, false, &mut pass)
                .await?;
            pass.reannounce.push(memory);
        }
        self.close_pass(tx, pass, agent).await?;
        Ok(merge)
    }

    async fn merges_imported(&self, agent: &AgentId, aliases: &[String]) -> MemoryResult<()> {
        self.forget_agent(agent);
        let tx = self.store.write_transaction().await?;
        let mut pass = Pass::default();
        pass.merged
            .extend(aliases.iter().map(|alias| (agent.clone(), alias.clone())));
        self.close_pass(tx, pass, agent).await
    }

    async fn split_project(
        &self,
        agent: &AgentId,
        id: &str,
        project: &str,
        at: DateTime<Utc>,
    ) -> MemoryResult<EntityMerge> {
        let mut tx = self.store.write_transaction().await?;
        let entity = Self::entity_on(&mut tx, agent, id, "id").await?;
        let named_there = rows::<D>(
            &mut tx,
            &Statement::new(
                "SELECT 1 AS one FROM entity_mentions m JOIN memories x ON x.id = m.memory_id \
                 WHERE m.entity_id = $1 AND x.project_id = $2 LIMIT 1",
                [Arg::Text(&entity.id), Arg::Text(project)],
            ),
        )
        .await?;
        if named_there.is_empty() {
            return Err(MemoryError::invalid(
                "project_id",
                format!(
                    "no memory of project {project} names entity {id}: there is nothing to split off"
                ),
            ));
        }
        let scoped = mnemos_actors::store::entities::project_key(&entity.key, project);
        let merge = self
            .insert_merge(
                &mut tx,
                agent,
                (&entity.key, &scoped, Some(project)),
                "user",
                None,
                at,
            )
            .await?;
        // Everything naming the entity is read again: the project's memories now name
        // the split-off entity.
        let mut pass = Pass::default();
        for memory in Self::memories_with_keys(&mut tx, agent, &[entity.key.as_str()]).await? {
            self.index_memory(&mut tx, &memory, agent, false, &mut pass)
                .await?;
            pass.reannounce.push(memory);
        }
        self.close_pass(tx, pass, agent).await?;
        Ok(merge)
    }

    async fn aliases(&self, agent: &AgentId) -> MemoryResult<EntityAliases> {
        let mut conn = self.store.connection().await?;
        Ok(Arc::unwrap_or_clone(
            self.aliases_on(&mut *conn, agent).await?,
        ))
    }

    async fn merges(&self, agent: &AgentId, key: Option<&str>) -> MemoryResult<Vec<EntityMerge>> {
        let statement = match key {
            Some(key) => Statement::new(
                format!(
                    "{MERGE_SELECT} WHERE agent_id = $1 AND (alias_key = $2 OR name_key = $2) \
                     ORDER BY created_at, id LIMIT 1000"
                ),
                [Arg::Text(agent.as_str()), Arg::Text(key)],
            ),
            None => Statement::new(
                format!("{MERGE_SELECT} WHERE agent_id = $1 ORDER BY created_at, id LIMIT 1000"),
                [Arg::Text(agent.as_str())],
            ),
        };
        self.store.all(&statement, merge_row).await
    }
}

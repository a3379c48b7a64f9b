//! Export and import on either SQL database (the `MemoryStore` transfer methods):
//! whole agents and KV namespaces read in a stable order (sorted here, not by the
//! database, whose text collations differ), and imports written in one write
//! transaction per batch with `ON CONFLICT DO NOTHING`, so a record already stored is
//! left as it is and an import can be repeated.

use std::collections::BTreeMap;

use mnemos_actors::error::MemoryResult;
use mnemos_actors::kv::{KvEntry, NamespaceName};
use mnemos_actors::model::{AgentId, MemoryId, SessionId, SessionRecord};
use mnemos_actors::projects::ProjectId;
use mnemos_actors::store::StoredMemory;
use mnemos_actors::transfer::{
    AgentTransfer, ArchiveMark, ImportOutcome, MemoryRecord, NamespaceTransfer, ProjectTransfer,
    SessionTransfer, TransferCounts, TransferRecord,
};

use super::dialect::{commit, row, rows, run, Dialect, SqlStore};
use super::rows::{self as map, Columns};
use super::sql::{self, Arg, Statement};

/// A count column as a u64.
fn count(row: &impl Columns, column: &str) -> MemoryResult<u64> {
    Ok(row.integer(column)?.max(0) as u64)
}

/// `value` as a bound whole number.
fn whole(value: u64) -> Arg<'static> {
    Arg::Integer(i64::try_from(value).unwrap_or(i64::MAX))
}

/// Every agent owning a record of any kind, in id order.
pub(crate) async fn agents<D: Dialect>(store: &SqlStore<D>) -> MemoryResult<Vec<AgentId>> {
    let statement = Statement::new(
        "SELECT agent_id FROM memories UNION SELECT agent_id FROM sessions \
         UNION SELECT agent_id FROM session_archives UNION SELECT agent_id FROM projects \
         UNION SELECT agent_id FROM consolidation_runs WHERE agent_id IS NOT NULL \
         UNION SELECT written_by AS agent_id FROM kv_entries",
        [],
    );
    let mut agents = store
        .all(&statement, |row| AgentId::stored(&row.text("agent_id")?))
        .await?;
    agents.sort();
    agents.dedup();
    Ok(agents)
}

/// How many records of each kind `agent` owns (KV counts 0).
pub(crate) async fn counts<D: Dialect>(
    store: &SqlStore<D>,
    agent: &AgentId,
) -> MemoryResult<TransferCounts> {
    let statement = Statement::new(
        "SELECT (SELECT COUNT(*) FROM memories WHERE agent_id = $1) AS memories, \
         (SELECT COUNT(*) FROM associations WHERE agent_id = $1) AS edges, \
         (SELECT COUNT(*) FROM (SELECT session_id FROM sessions WHERE agent_id = $1 \
          UNION SELECT session_id FROM session_archives WHERE agent_id = $1) AS s) AS sessions, \
         (SELECT COUNT(*) FROM projects WHERE agent_id = $1) AS projects, \
         (SELECT COUNT(*) FROM consolidation_runs WHERE agent_id = $1) AS runs",
        [Arg::Text(agent.as_str())],
    );
    let found = store.row(&statement).await?;
    let Some(found) = found else {
        return Ok(TransferCounts::default());
    };
    Ok(TransferCounts {
        memories: count(&found, "memories")?,
        edges: count(&found, "edges")?,
        sessions: count(&found, "sessions")?,
        projects: count(&found, "projects")?,
        runs: count(&found, "runs")?,
        namespaces: 0,
        kv_entries: 0,
        // Counted by the contract from the entity index, which keeps them.
        entity_merges: 0,
    })
}

/// Everything `agent` owns (see `MemoryStore::export_agent`).
pub(crate) async fn export_agent<D: Dialect>(
    store: &SqlStore<D>,
    agent: &AgentId,
    with_embeddings: bool,
) -> MemoryResult<AgentTransfer> {
    let by_agent = |text: &'static str| Statement::new(text, [Arg::Text(agent.as_str())]);
    let memories = store
        .all_readable(
            &by_agent(sql::AGENT_MEMORIES),
            "memories",
            map::memory_key,
            map::memory,
        )
        .await?;
    let mut versions: BTreeMap<String, Vec<_>> = BTreeMap::new();
    for (id, version) in store
        .all(
            &by_agent(
                "SELECT memory_id, version, content, importance, tags, status, archived_at, reason \
                 FROM memory_versions WHERE memory_id IN (SELECT id FROM memories WHERE agent_id = $1)",
            ),
            |row| Ok((row.text("memory_id")?, map::version(row)?)),
        )
        .await?
    {
        versions.entry(id).or_default().push(version);
    }
    let mut embeddings: BTreeMap<String, Vec<f32>> = BTreeMap::new();
    if with_embeddings {
        embeddings.extend(
            store
                .all(
                    &by_agent(
                        "SELECT memory_id, vector FROM memory_embeddings \
                         WHERE memory_id IN (SELECT id FROM memories WHERE agent_id = $1)",
                    ),
                    |row| Ok((row.text("memory_id")?, row.vector("vector")?)),
                )
                .await?,
        );
    }
    let mut records: Vec<MemoryRecord> = memories
        .into_iter()
        .map(|memory| {
            let mut past = versions.remove(memory.id.as_str()).unwrap_or_default();
            past.sort_by_key(|v| v.version);
            MemoryRecord {
                embedding: embeddings.remove(memory.id.as_str()),
                versions: past,
                memory,
            }
        })
        .collect();
    records.sort_by(|a, b| a.memory.id.cmp(&b.memory.id));

    let mut edges = store
        .all(
            &by_agent(
                "SELECT agent_id, from_id, to_id, relation, weight, created_at \
                 FROM associations WHERE agent_id = $1",
            ),
            map::association,
        )
        .await?;
    edges.sort_by(|a, b| {
        (&a.from_id, &a.to_id, &a.relation).cmp(&(&b.from_id, &b.to_id, &b.relation))
    });

    let mut sessions: BTreeMap<String, SessionTransfer> = BTreeMap::new();
    for found in rows::<D>(
        &mut *store.connection().await?,
        &by_agent(
            "SELECT session_id, last_seq, compacted_through, summary, summarized_at, \
             pending_tokens, compactions, created_at, last_message_at FROM sessions \
             WHERE agent_id = $1",
        ),
    )
    .await?
    {
        let session = session_entry(&mut sessions, agent, found.text("session_id")?)?;
        session.log = Some(map::session_record(&found, agent, &session.session_id)?);
    }
    for found in rows::<D>(
        &mut *store.connection().await?,
        &by_agent(
            "SELECT session_id, archived_through, summary_id FROM session_archives \
             WHERE agent_id = $1",
        ),
    )
    .await?
    {
        let session = session_entry(&mut sessions, agent, found.text("session_id")?)?;
        session.archive = Some(ArchiveMark {
            archived_through: found.time("archived_through")?,
            summary_id: MemoryId(found.text("summary_id")?),
        });
    }
    for found in rows::<D>(
        &mut *store.connection().await?,
        &by_agent(
            "SELECT session_id, seq, role, content, tokens, at FROM session_messages \
             WHERE agent_id = $1",
        ),
    )
    .await?
    {
        let session = session_entry(&mut sessions, agent, found.text("session_id")?)?;
        session.messages.push(map::session_message(&found)?);
    }
    let mut sessions: Vec<SessionTransfer> = sessions.into_values().collect();
    for session in &mut sessions {
        session.messages.sort_by_key(|m| m.seq);
    }
    sessions.sort_by(|a, b| a.session_id.cmp(&b.session_id));

    let mut attached: BTreeMap<String, Vec<(SessionId, chrono::DateTime<chrono::Utc>)>> =
        BTreeMap::new();
    for found in rows::<D>(
        &mut *store.connection().await?,
        &by_agent(
            "SELECT project_id, session_id, attached_at FROM project_sessions WHERE agent_id = $1",
        ),
    )
    .await?
    {
        attached
            .entry(found.text("project_id")?)
            .or_default()
            .push((
                SessionId::parse(&found.text("session_id")?)?,
                found.time("attached_at")?,
            ));
    }
    let mut projects: Vec<ProjectTransfer> = store
        .all(
            &by_agent(
                "SELECT agent_id, project_id, name, isolated, created_at, updated_at \
                 FROM projects WHERE agent_id = $1",
            ),
            map::project,
        )
        .await?
        .into_iter()
        .map(|project| {
            let mut sessions = attached
                .remove(project.project_id.as_str())
                .unwrap_or_default();
            sessions.sort_by(|a, b| a.0.cmp(&b.0));
            ProjectTransfer { project, sessions }
        })
        .collect();
    projects.sort_by(|a, b| a.project.project_id.cmp(&b.project.project_id));

    let mut runs = store
        .all(
            &by_agent("SELECT * FROM consolidation_runs WHERE agent_id = $1"),
            map::run,
        )
        .await?;
    runs.sort_by(|a, b| a.id.cmp(&b.id));

    Ok(AgentTransfer {
        memories: records,
        edges,
        sessions,
        projects,
        runs,
    })
}

/// The session `id` of `agent` in `sessions`, added empty when it is not there yet.
fn session_entry<'a>(
    sessions: &'a mut BTreeMap<String, SessionTransfer>,
    agent: &AgentId,
    id: String,
) -> MemoryResult<&'a mut SessionTransfer> {
    Ok(match sessions.entry(id) {
        std::collections::btree_map::Entry::Occupied(found) => found.into_mut(),
        std::collections::btree_map::Entry::Vacant(slot) => {
            let session_id = SessionId::parse(slot.key())?;
            slot.insert(SessionTransfer {
                agent_id: agent.clone(),
                session_id,
                log: None,
                messages: Vec::new(),
                archive: None,
            })
        }
    })
}

/// Every KV namespace, in name order.
pub(crate) async fn namespaces<D: Dialect>(
    store: &SqlStore<D>,
) -> MemoryResult<Vec<NamespaceTransfer>> {
    let statement = Statement::new(
        "SELECT name, max_entries, clock, hits, misses, evictions, puts, created_at, updated_at \
         FROM kv_namespaces",
        [],
    );
    let mut found = store
        .all(&statement, |row| {
            Ok(NamespaceTransfer {
                name: NamespaceName::stored(&row.text("name")?)?,
                max_entries: count(row, "max_entries")?,
                clock: count(row, "clock")?,
                hits: count(row, "hits")?,
                misses: count(row, "misses")?,
                evictions: count(row, "evictions")?,
                puts: count(row, "puts")?,
                created_at: row.time("created_at")?,
                updated_at: row.time("updated_at")?,
            })
        })
        .await?;
    found.sort_by(|a, b| a.name.as_str().cmp(b.name.as_str()));
    Ok(found)
}

/// The entries of `namespace` in key order (only `writer`'s when given).
pub(crate) async fn kv_entries<D: Dialect>(
    store: &SqlStore<D>,
    namespace: &NamespaceName,
    writer: Option<&AgentId>,
) -> MemoryResult<Vec<KvEntry>> {
    let mut statement = Statement::new(
        "SELECT namespace, key, value, tags, written_by, created_at, updated_at, expires_at, \
         last_used FROM kv_entries WHERE namespace = $1",
        [Arg::Text(namespace.as_str())],
    );
    if let Some(writer) = writer {
        statement
            .push(" AND written_by = ")
            .bind(Arg::Text(writer.as_str()));
    }
    let key = |row: &D::Row| row.text("key").unwrap_or_default();
    let mut entries = store
        .all_readable(&statement, "kv_entries", key, map::kv_entry)
        .await?;
    entries.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(entries)
}

/// The owner of each stored one of `ids`.
pub(crate) async fn owners<D: Dialect>(
    store: &SqlStore<D>,
    ids: &[MemoryId],
) -> MemoryResult<Vec<(MemoryId, AgentId)>> {
    let mut found = Vec::new();
    for chunk in D::LISTS.chunks(ids, 400) {
        let mut statement = Statement::new("SELECT id, agent_id FROM memories WHERE ", []);
        statement.push_in(D::LISTS, "id", chunk.iter().map(MemoryId::as_str));
        found.extend(
            store
                .all(&statement, |row| {
                    Ok((
                        MemoryId(row.text("id")?),
                        AgentId::stored(&row.text("agent_id")?)?,
                    ))
                })
                .await?,
        );
    }
    Ok(found)
}

/// Whether a statement changed a row: written, else already stored.
fn outcome(changed: u64) -> ImportOutcome {
    if changed > 0 {
        ImportOutcome::Written
    } else {
        ImportOutcome::Unchanged
    }
}

/// Write imported records in one write transaction (see `MemoryStore::import_records`).
pub(crate) async fn import<D: Dialect>(
    store: &SqlStore<D>,
    records: &[TransferRecord],
) -> MemoryResult<Vec<ImportOutcome>> {
    let mut tx = store.write_transaction().await?;
    let mut outcomes = Vec::with_capacity(records.len());
    let mut inserted = 0u64;
    for record in records {
        let done = match record {
            TransferRecord::Memory(m) => {
                let exists = Statement::new(
                    "SELECT id FROM memories WHERE id = $1",
                    [Arg::Text(m.memory.id.as_str())],
                );
                if row::<D>(&mut tx, &exists).await?.is_some() {
                    ImportOutcome::Unchanged
                } else {
                    let stored = StoredMemory::new(
                        m.memory.clone(),
                        m.embedding.clone().unwrap_or_default(),
                    );
                    D::insert_records(&mut tx, &[&stored]).await?;
                    for version in &m.versions {
                        let statement = Statement::new(
                            "INSERT INTO memory_versions (memory_id, version, content, importance, \
                             tags, status, archived_at, reason) \
                             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING",
                            sql::version_args(&m.memory.id, version),
                        );
                        run::<D>(&mut tx, &statement).await?;
                    }
                    inserted += 1;
                    ImportOutcome::Written
                }
            }
            TransferRecord::Edge(edge) => {
                let mut ends = Statement::new("SELECT id FROM memories WHERE ", []);
                ends.push_in(D::LISTS, "id", [edge.from_id.as_str(), edge.to_id.as_str()]);
                let found = rows::<D>(&mut tx, &ends).await?.len();
                let wanted = if edge.from_id == edge.to_id { 1 } else { 2 };
                if found < wanted {
                    ImportOutcome::Orphaned
                } else {
                    let statement = Statement::new(
                        "INSERT INTO associations (agent_id, from_id, to_id, relation, weight, created_at) \
                         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
                        sql::edge_args(edge),
                    );
                    outcome(run::<D>(&mut tx, &statement).await?)
                }
            }
            TransferRecord::Session(session) => {
                let agent = session.agent_id.as_str();
                let id = session.session_id.as_str();
                let mut changed = 0;
                if let Some(log) = &session.log {
                    let statement = Statement::new(
                        "INSERT INTO sessions (agent_id, session_id, last_seq, compacted_through, \
                         summary, summarized_at, pending_tokens, compactions, created_at, \
                         last_message_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
                         ON CONFLICT DO NOTHING",
                        [
                            Arg::Text(agent),
                            Arg::Text(id),
                            whole(log.last_seq),
                            whole(log.compacted_through),
                            Arg::OptionalText(log.summary.as_deref()),
                            Arg::OptionalTime(log.summarized_at),
                            whole(log.pending_tokens),
                            Arg::Integer(i64::from(log.compactions)),
                            Arg::Time(log.created_at),
                            Arg::Time(log.last_message_at),
                        ],
                    );
                    changed += run::<D>(&mut tx, &statement).await?;
                }
                for chunk in session.messages.chunks(100) {
                    let mut statement = Statement::new(
                        "INSERT INTO session_messages (agent_id, session_id, seq, role, content, \
                         tokens, at) ",
                        [],
                    );
                    statement.values(chunk, |m| {
                        [
                            Arg::Text(agent),
                            Arg::Text(id),
                            whole(m.seq),
                            Arg::Text(m.role.as_str()),
                            Arg::Text(&m.content),
                            Arg::Integer(i64::from(m.tokens)),
                            Arg::Time(m.at),
                        ]
                    });
                    statement.push(" ON CONFLICT DO NOTHING");
                    changed += run::<D>(&mut tx, &statement).await?;
                }
                if !session.messages.is_empty() {
                    // A session stored already keeps its state, but its log must count
                    // the messages it gained, so the next append takes a fresh number.
                    let statement = Statement::new(
                        format!(
                            "UPDATE sessions SET last_seq = {}(last_seq, \
                             (SELECT MAX(seq) FROM session_messages \
                              WHERE agent_id = $1 AND session_id = $2)) \
                             WHERE agent_id = $1 AND session_id = $2",
                            D::GREATEST
                        ),
                        [Arg::Text(agent), Arg::Text(id)],
                    );
                    run::<D>(&mut tx, &statement).await?;
                }
                if let Some(archive) = &session.archive {
                    let statement = Statement::new(
                        "INSERT INTO session_archives (agent_id, session_id, archived_through, \
                         summary_id) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
                        [
                            Arg::Text(agent),
                            Arg::Text(id),
                            Arg::Time(archive.archived_through),
                            Arg::Text(archive.summary_id.as_str()),
                        ],
                    );
                    changed += run::<D>(&mut tx, &statement).await?;
                }
                outcome(changed)
            }
            TransferRecord::Project(transfer) => {
                let project = &transfer.project;
                let statement = Statement::new(
                    "INSERT INTO projects (agent_id, project_id, name, isolated, created_at, \
                     updated_at) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
                    [
                        Arg::Text(project.agent_id.as_str()),
                        Arg::Text(project.project_id.as_str()),
                        Arg::Text(&project.name),
                        Arg::Flag(project.isolated),
                        Arg::Time(project.created_at),
                        Arg::Time(project.updated_at),
                    ],
                );
                let mut changed = run::<D>(&mut tx, &statement).await?;
                for (session, at) in &transfer.sessions {
                    let statement = Statement::new(
                        "INSERT INTO project_sessions (agent_id, session_id, project_id, \
                         attached_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
                        [
                            Arg::Text(project.agent_id.as_str()),
                            Arg::Text(session.as_str()),
                            Arg::Text(ProjectId::as_str(&project.project_id)),
                            Arg::Time(*at),
                        ],
                    );
                    changed += run::<D>(&mut tx, &statement).await?;
                }
                outcome(changed)
            }
            TransferRecord::EntityMerge(found) => {
                let merge = &found.merge;
                let statement = Statement::new(
                    "INSERT INTO entity_merges (id, agent_id, alias_key, name_key, origin, \
                     memory_id, created_at, undone_at, project_id) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING",
                    [
                        Arg::Text(&merge.id),
                        Arg::Text(found.agent_id.as_str()),
                        Arg::Text(&merge.alias),
                        Arg::Text(&merge.name),
                        Arg::Text(&merge.origin),
                        Arg::OptionalText(merge.memory_id.as_ref().map(|m| m.0.as_str())),
                        Arg::Time(merge.created_at),
                        Arg::OptionalTime(merge.undone_at),
                        Arg::OptionalText(merge.project_id.as_deref()),
                    ],
                );
                outcome(run::<D>(&mut tx, &statement).await?)
            }
            TransferRecord::Run(found) => {
                let statement = Statement::new(
                    "INSERT INTO consolidation_runs (id, agent_id, trigger, started_at, \
                     finished_at, processed, consolidated, forgotten, new_semantic, \
                     new_procedural, report) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
                     ON CONFLICT DO NOTHING",
                    sql::run_args(found),
                );
                outcome(run::<D>(&mut tx, &statement).await?)
            }
            TransferRecord::Namespace(ns) => {
                let statement = Statement::new(
                    "INSERT INTO kv_namespaces (name, max_entries, clock, hits, misses, \
                     evictions, puts, created_at, updated_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING",
                    [
                        Arg::Text(ns.name.as_str()),
                        whole(ns.max_entries),
                        whole(ns.clock),
                        whole(ns.hits),
                        whole(ns.misses),
                        whole(ns.evictions),
                        whole(ns.puts),
                        Arg::Time(ns.created_at),
                        Arg::Time(ns.updated_at),
                    ],
                );
                outcome(run::<D>(&mut tx, &statement).await?)
            }
            TransferRecord::KvEntry(entry) => {
                let namespace = Statement::new(
                    "SELECT name FROM kv_namespaces WHERE name = $1",
                    [Arg::Text(entry.namespace.as_str())],
                );
                if row::<D>(&mut tx, &namespace).await?.is_none() {
                    ImportOutcome::Orphaned
                } else {
                    let statement = Statement::new(
                        "INSERT INTO kv_entries (namespace, key, value, tags, written_by, \
                         created_at, updated_at, expires_at, last_used) \
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING",
                        [
                            Arg::Text(entry.namespace.as_str()),
                            Arg::Text(&entry.key),
                            Arg::Json(&entry.value),
                            Arg::Tags(&entry.tags),
                            Arg::Text(entry.written_by.as_str()),
                            Arg::Time(entry.created_at),
                            Arg::Time(entry.updated_at),
                            Arg::OptionalTime(entry.expires_at),
                            whole(entry.last_used),
                        ],
                    );
                    let written = run::<D>(&mut tx, &statement).await?;
                    if written > 0 {
                        for tag in &entry.tags {
                            let statement = Statement::new(
                                "INSERT INTO kv_entry_tags (namespace, key, tag) \
                                 VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
                                [
                                    Arg::Text(entry.namespace.as_str()),
                                    Arg::Text(&entry.key),
                                    Arg::Text(tag),
                                ],
                            );
                            run::<D>(&mut tx, &statement).await?;
                        }
                        // The namespace's use clock stays ahead of every entry's last use.
                        let statement = Statement::new(
                            format!(
                                "UPDATE kv_namespaces SET clock = {}(clock, $2) WHERE name = $1",
                                D::GREATEST
                            ),
                            [Arg::Text(entry.namespace.as_str()), whole(entry.last_used)],
                        );
                        run::<D>(&mut tx, &statement).await?;
                    }
                    outcome(written)
                }
            }
        };
        outcomes.push(done);
    }
    commit(tx).await?;
    D::inserted(store, inserted);
    Ok(outcomes)
}

/// Every session of `agent` with a message log, in id order.
pub(crate) async fn agent_sessions<D: Dialect>(
    store: &SqlStore<D>,
    agent: &AgentId,
) -> MemoryResult<Vec<SessionRecord>> {
    let statement = Statement::new(
        "SELECT session_id, last_seq, compacted_through, summary, summarized_at, \
         pending_tokens, compactions, created_at, last_message_at FROM sessions \
         WHERE agent_id = $1",
        [Arg::Text(agent.as_str())],
    );
    let mut found = store
        .all(&statement, |row| {
            let session = SessionId::parse(&row.text("session_id")?)?;
            map::session_record(row, agent, &session)
        })
        .await?;
    found.sort_by(|a, b| a.session_id.cmp(&b.session_id));
    Ok(found)
}

/// Delete one session of `agent` with its memories and log, in one write transaction.
pub(crate) async fn clear_session<D: Dialect>(
    store: &SqlStore<D>,
    agent: &AgentId,
    session: &SessionId,
) -> MemoryResult<(Vec<MemoryId>, u64)> {
    let mut tx = store.write_transaction().await?;
    let by_session = |text: &'static str| {
        Statement::new(
            text,
            [Arg::Text(agent.as_str()), Arg::Text(session.as_str())],
        )
    };
    let ids = rows::<D>(
        &mut tx,
        &by_session("SELECT id FROM memories WHERE agent_id = $1 AND session_id = $2"),
    )
    .await?
    .iter()
    .map(|row| Ok(MemoryId(row.text("id")?)))
    .collect::<MemoryResult<Vec<_>>>()?;
    // Edges first, so each leaves its own delete in the outbox for the graph projection.
    run::<D>(
        &mut tx,
        &by_session(
            "DELETE FROM associations WHERE agent_id = $1 AND (from_id IN \
             (SELECT id FROM memories WHERE agent_id = $1 AND session_id = $2) OR to_id IN \
             (SELECT id FROM memories WHERE agent_id = $1 AND session_id = $2))",
        ),
    )
    .await?;
    run::<D>(
        &mut tx,
        &by_session("DELETE FROM memories WHERE agent_id = $1 AND session_id = $2"),
    )
    .await?;
    let messages = run::<D>(
        &mut tx,
        &by_session("DELETE FROM session_messages WHERE agent_id = $1 AND session_id = $2"),
    )
    .await?;
    for text in [
        "DELETE FROM sessions WHERE agent_id = $1 AND session_id = $2",
        "DELETE FROM session_archives WHERE agent_id = $1 AND session_id = $2",
        "DELETE FROM project_sessions WHERE agent_id = $1 AND session_id = $2",
    ] {
        run::<D>(&mut tx, &by_session(text)).await?;
    }
    commit(tx).await?;
    Ok((ids, messages))
}

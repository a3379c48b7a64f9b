//! The episodic storage actor: owns the system of record ([`MemoryStore`]) for every
//! durable memory, its versions and the keyword index, and batches reinforcement.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

use super::{answer_in_task, injected_fault};
use crate::clock::Clock;
use crate::error::MemoryResult;
use crate::model::{
    AgentId, ConsolidationRun, Memory, MemoryId, MemoryVersion, MessageRole, SessionId,
    SessionMessage, SessionRecord,
};
use crate::store::{KeywordQuery, ListQuery, MemoryStore, SessionCompaction, StoredMemory};

/// Handle to the episodic actor.
pub type EpisodicRef = ActorRef<EpisodicMsg>;
type Reply<T> = RpcReplyPort<MemoryResult<T>>;

/// Messages of the episodic actor.
pub enum EpisodicMsg {
    /// Write memories with their embeddings atomically (the acknowledgement point of `remember`).
    Insert {
        records: Vec<StoredMemory>,
        reply: Reply<()>,
    },
    /// Insert the records whose content the agent does not already hold (same hash,
    /// project, active); the others come back as (record id, stored id).
    InsertNewContent {
        records: Vec<StoredMemory>,
        reply: Reply<Vec<(MemoryId, MemoryId)>>,
    },
    /// Read one memory.
    Get {
        id: MemoryId,
        reply: Reply<Option<Memory>>,
    },
    /// Active memories of an agent by normalised content hash.
    FindByContentHash {
        agent: AgentId,
        hashes: Vec<String>,
        reply: Reply<Vec<(String, Memory)>>,
    },
    /// Reinforce now (deduplication counts as an access) and answer when written.
    TouchNow {
        ids: Vec<MemoryId>,
        at: DateTime<Utc>,
        reply: Reply<()>,
    },
    /// Neighbouring memories of several memories in their sessions, as (seed, neighbour)
    /// pairs in the order of `ids`.
    SessionNeighbours {
        ids: Vec<MemoryId>,
        radius: usize,
        reply: Reply<Vec<(MemoryId, MemoryId)>>,
    },
    /// Read several memories.
    GetMany {
        ids: Vec<MemoryId>,
        reply: Reply<Vec<Memory>>,
    },
    /// Browse newest first.
    List {
        query: ListQuery,
        reply: Reply<Vec<Memory>>,
    },
    /// Replace a memory, archiving its previous version.
    Update {
        next: Box<Memory>,
        previous: MemoryVersion,
        embedding: Option<Vec<f32>>,
        reply: Reply<()>,
    },
    /// Delete a memory and everything stored with it.
    Delete { id: MemoryId, reply: Reply<bool> },
    /// Version history of a memory.
    History {
        id: MemoryId,
        reply: Reply<Vec<MemoryVersion>>,
    },
    /// The stored embedding of a memory.
    Embedding {
        id: MemoryId,
        reply: Reply<Option<Vec<f32>>>,
    },
    /// BM25 search.
    KeywordSearch {
        query: KeywordQuery,
        reply: Reply<Vec<(MemoryId, f64)>>,
    },
    /// Every memory of an agent.
    AgentMemories {
        agent: AgentId,
        reply: Reply<Vec<Memory>>,
    },
    /// Number of stored memories.
    Count { reply: Reply<u64> },
    /// Consolidation run log.
    Runs {
        agent: Option<AgentId>,
        limit: usize,
        reply: Reply<Vec<ConsolidationRun>>,
    },
    /// Queue reinforcement of recalled memories (applied in batches, never on the request path).
    Touch {
        ids: Vec<MemoryId>,
        at: DateTime<Utc>,
    },
    /// Apply queued reinforcement now.
    FlushTouches,
    /// Apply queued reinforcement and checkpoint the store (shutdown).
    Flush { reply: Reply<()> },
    /// Append a message to a session's log (the acknowledgement point of a session message).
    AppendMessage {
        agent: AgentId,
        session: SessionId,
        role: MessageRole,
        content: String,
        tokens: u32,
        at: DateTime<Utc>,
        reply: Reply<SessionMessage>,
    },
    /// A session's state and its uncompacted messages (None: no such session).
    SessionLog {
        agent: AgentId,
        session: SessionId,
        reply: Reply<Option<(SessionRecord, Vec<SessionMessage>)>>,
    },
    /// Commit a session compaction atomically; false when it was already compacted that far.
    CommitCompaction {
        compaction: Box<SessionCompaction>,
        reply: Reply<bool>,
    },
    /// Test hook: fail the actor as if its state were broken.
    InjectFault,
}

/// Start-up arguments (kept by the supervisor and reused on restart).
#[derive(Clone)]
pub struct EpisodicArgs {
    /// The system of record.
    pub store: Arc<dyn MemoryStore>,
    /// Time source for reinforcement.
    pub clock: Arc<dyn Clock>,
    /// How often queued reinforcement is written.
    pub touch_flush_interval: Duration,
}

/// The actor's state.
pub struct EpisodicState {
    /// The system of record.
    store: Arc<dyn MemoryStore>,
    /// Reinforcements not yet written, with the latest access time.
    pending_touches: HashSet<MemoryId>,
    /// Latest access time among pending touches.
    pending_touch_at: Option<DateTime<Utc>>,
    /// Timer that sends `FlushTouches`; aborted when the actor stops.
    flush_timer: Option<tokio::task::JoinHandle<()>>,
}

/// The episodic storage actor.
pub struct EpisodicActor;

impl EpisodicState {
    async fn flush_touches(&mut self) -> MemoryResult<()> {
        if self.pending_touches.is_empty() {
            return Ok(());
        }
        let ids: Vec<MemoryId> = self.pending_touches.drain().collect();
        let at = self.pending_touch_at.take().unwrap_or_else(Utc::now);
        self.store.touch(&ids, at).await
    }
}

impl Actor for EpisodicActor {
    type Msg = EpisodicMsg;
    type State = EpisodicState;
    type Arguments = EpisodicArgs;

    async fn pre_start(
        &self,
        myself: EpisodicRef,
        args: EpisodicArgs,
    ) -> Result<EpisodicState, ActorProcessingErr> {
        let timer = myself.send_interval(args.touch_flush_interval, || EpisodicMsg::FlushTouches);
        Ok(EpisodicState {
            store: args.store,
            pending_touches: HashSet::new(),
            pending_touch_at: None,
            flush_timer: Some(timer),
        })
    }

    async fn post_stop(
        &self,
        _myself: EpisodicRef,
        state: &mut EpisodicState,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(timer) = state.flush_timer.take() {
            timer.abort();
        }
        if let Err(error) = state.flush_touches().await {
            tracing::warn!(%error, "could not write pending reinforcements while stopping");
        }
        Ok(())
    }

    #[tracing::instrument(name = "episodic", skip_all)]
    async fn handle(
        &self,
        _myself: EpisodicRef,
        message: EpisodicMsg,
        state: &mut EpisodicState,
    ) -> Result<(), ActorProcessingErr> {
        let store = state.store.clone();
        match message {
            EpisodicMsg::Insert { records, reply } => {
                let _ = reply.send(store.insert(&records).await);
            }
            EpisodicMsg::InsertNewContent { records, reply } => {
                let _ = reply.send(store.insert_new_content(&records).await);
            }
            EpisodicMsg::Update {
                next,
                previous,
                embedding,
                reply,
            } => {
                let _ = reply.send(store.update(&next, &previous, embedding.as_deref()).await);
            }
            EpisodicMsg::Delete { id, reply } => {
                state.pending_touches.remove(&id);
                let _ = reply.send(store.delete(&id).await);
            }
            EpisodicMsg::TouchNow { ids, at, reply } => {
                let _ = reply.send(store.touch(&ids, at).await);
            }
            EpisodicMsg::FindByContentHash {
                agent,
                hashes,
                reply,
            } => answer_in_task(reply, async move {
                store.find_by_content_hash(&agent, &hashes).await
            }),
            EpisodicMsg::SessionNeighbours { ids, radius, reply } => {
                answer_in_task(reply, async move {
                    let memories = store.get_many(&ids).await?;
                    // One lookup per seed, run side by side (the pool bounds how many
                    // reach the database at once), answered in the order of `ids`.
                    let mut lookups = tokio::task::JoinSet::new();
                    for (position, id) in ids.iter().enumerate() {
                        if let Some(memory) = memories.iter().find(|m| m.id == *id).cloned() {
                            let store = store.clone();
                            lookups.spawn(async move {
                                let found = store.session_neighbours(&memory, radius).await;
                                (position, memory.id, found)
                            });
                        }
                    }
                    let mut found = Vec::new();
                    while let Some(done) = lookups.join_next().await {
                        let (position, seed, neighbours) = done.map_err(|e| {
                            crate::error::MemoryError::internal(format!(
                                "session neighbour lookup failed: {e}"
                            ))
                        })?;
                        found.push((position, seed, neighbours?));
                    }
                    found.sort_by_key(|(position, _, _)| *position);
                    Ok(found
                        .into_iter()
                        .flat_map(|(_, seed, neighbours)| {
                            neighbours.into_iter().map(move |n| (seed.clone(), n))
                        })
                        .collect())
                })
            }
            EpisodicMsg::Get { id, reply } => {
                answer_in_task(reply, async move { store.get(&id).await })
            }
            EpisodicMsg::GetMany { ids, reply } => {
                answer_in_task(reply, async move { store.get_many(&ids).await })
            }
            EpisodicMsg::List { query, reply } => {
                answer_in_task(reply, async move { store.list(&query).await })
            }
            EpisodicMsg::Embedding { id, reply } => {
                answer_in_task(reply, async move { store.embedding(&id).await })
            }
            EpisodicMsg::History { id, reply } => {
                answer_in_task(reply, async move { store.history(&id).await })
            }
            EpisodicMsg::KeywordSearch { query, reply } => {
                answer_in_task(reply, async move { store.keyword_search(&query).await })
            }
            EpisodicMsg::AgentMemories { agent, reply } => {
                answer_in_task(reply, async move { store.agent_memories(&agent).await })
            }
            EpisodicMsg::Count { reply } => {
                answer_in_task(reply, async move { store.count().await })
            }
            EpisodicMsg::Runs {
                agent,
                limit,
                reply,
            } => answer_in_task(
                reply,
                async move { store.runs(agent.as_ref(), limit).await },
            ),
            EpisodicMsg::Touch { ids, at } => {
                state.pending_touches.extend(ids);
                state.pending_touch_at = Some(state.pending_touch_at.map_or(at, |t| t.max(at)));
                if state.pending_touches.len() >= 1024 {
                    if let Err(error) = state.flush_touches().await {
                        tracing::warn!(%error, "reinforcement batch failed; dropped");
                    }
                }
            }
            EpisodicMsg::FlushTouches => {
                if let Err(error) = state.flush_touches().await {
                    tracing::warn!(%error, "reinforcement batch failed; dropped");
                }
            }
            EpisodicMsg::Flush { reply } => {
                let touched = state.flush_touches().await;
                let flushed = store.flush().await;
                let _ = reply.send(touched.and(flushed));
            }
            EpisodicMsg::AppendMessage {
                agent,
                session,
                role,
                content,
                tokens,
                at,
                reply,
            } => {
                let _ = reply.send(
                    store
                        .append_session_message(&agent, &session, role, &content, tokens, at)
                        .await,
                );
            }
            EpisodicMsg::SessionLog {
                agent,
                session,
                reply,
            } => answer_in_task(reply, async move {
                let Some(record) = store.session_record(&agent, &session).await? else {
                    return Ok(None);
                };
                let pending = store
                    .session_messages_after(&agent, &session, record.compacted_through)
                    .await?;
                Ok(Some((record, pending)))
            }),
            EpisodicMsg::CommitCompaction { compaction, reply } => {
                let _ = reply.send(store.commit_session_compaction(&compaction).await);
            }
            EpisodicMsg::InjectFault => return Err(injected_fault("episodic")),
        }
        Ok(())
    }
}

//! The write pipeline: `remember`, `remember_batch` and `extract_turn`.
//!
//! validate → put each input in its project → route (type) → hash and embed →
//! deduplicate and find contradiction candidates ([`crate::policy::dedup`]) → store the
//! new records (the acknowledgement point; the store checks the content once more in
//! its transaction) → project (vector index, session windows) → supersede contradicted
//! knowledge → answer, each input with the memory it landed on.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{validate, Runtime};
use crate::error::{ErrorCode, MemoryError, MemoryResult};
use crate::model::{
    AgentId, Association, Memory, MemoryId, MemoryPatch, MemoryStatus, MemoryType, SessionId,
    SourceRef,
};
use crate::policy::consistency::{contradiction, normalized_hash};
use crate::policy::dedup::{
    contradiction_band, exact_duplicates, is_knowledge, may_supersede, near_duplicate,
    neighbour_types, redirect_duplicates,
};
use crate::policy::screening::{self, ScreeningConfig};
use crate::projects::ProjectId;
use crate::store::{EmbeddingRecord, KeywordQuery, StoredMemory, VectorQuery, WorkingItem};

/// One memory to remember (agent given separately).
#[derive(Debug, Clone, Default)]
pub struct RememberInput {
    /// The text.
    pub content: String,
    /// Explicit type; when absent the runtime chooses.
    pub memory_type: Option<MemoryType>,
    /// Optional title.
    pub title: Option<String>,
    /// 0..1; default from config.
    pub importance: Option<f32>,
    /// Labels.
    pub tags: Vec<String>,
    /// Session it belongs to.
    pub session_id: Option<SessionId>,
    /// When it happened; default now.
    pub occurred_at: Option<DateTime<Utc>>,
    /// Visible to other agents asking for shared memories.
    pub shared: bool,
    /// Caller's JSON object.
    pub metadata: Option<serde_json::Value>,
    /// Source file reference.
    pub source: Option<SourceRef>,
    /// Project of the owner it belongs to (default: the project of its session, if any).
    pub project_id: Option<ProjectId>,
    /// −1..1 for affective memories.
    pub valence: Option<f32>,
    /// 0..1 for affective memories.
    pub arousal: Option<f32>,
}

/// Why a memory got its type.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Routing {
    /// The chosen type.
    #[serde(rename = "type")]
    pub memory_type: MemoryType,
    /// A human-readable reason.
    pub reason: String,
}

/// What `remember` did.
#[derive(Debug, Clone, PartialEq)]
pub struct RememberOutcome {
    /// The stored (or existing) memory.
    pub memory: Memory,
    /// How its type was chosen.
    pub routing: Routing,
    /// Set when the input duplicated an existing memory.
    pub deduplicated_into: Option<MemoryId>,
    /// Memories this one replaced.
    pub superseded: Vec<MemoryId>,
}

/// The text a memory is embedded from: its title (if any) and content.
pub fn embedding_text(memory: &Memory) -> String {
    crate::policy::reembed::embedded_text(memory.title.as_deref(), &memory.content)
}

/// The index entry of a memory with `vector`.
pub(super) fn embedding_record(memory: &Memory, vector: Vec<f32>) -> EmbeddingRecord {
    EmbeddingRecord::of(memory, vector)
}

/// Remember one memory.
pub(super) async fn one(
    rt: &Runtime,
    agent: &AgentId,
    input: RememberInput,
) -> MemoryResult<RememberOutcome> {
    let mut outcomes = remember_many(rt, agent, vec![input], "").await?;
    outcomes
        .pop()
        .ok_or_else(|| MemoryError::internal("remember produced no outcome"))
}

/// Remember several memories in one transaction, in order.
pub(super) async fn batch(
    rt: &Runtime,
    agent: &AgentId,
    inputs: Vec<RememberInput>,
) -> MemoryResult<Vec<RememberOutcome>> {
    let limits = &rt.inner.config.limits;
    if inputs.is_empty() {
        return Err(MemoryError::invalid(
            "memories",
            "memories must hold at least one memory",
        ));
    }
    if inputs.len() > limits.max_batch {
        return Err(MemoryError::too_large(
            "memories",
            format!(
                "a batch holds at most {} memories (limits.max_batch); got {}",
                limits.max_batch,
                inputs.len()
            ),
        ));
    }
    remember_many(rt, agent, inputs, "memories").await
}

/// Mine one exchange ([`Runtime::extract_turn`]) and remember what it yields.
pub(super) async fn extract_turn(
    rt: &Runtime,
    agent: &AgentId,
    user: &str,
    assistant: &str,
    session_id: Option<SessionId>,
    budget: usize,
    metadata: Option<serde_json::Value>,
) -> MemoryResult<Vec<RememberOutcome>> {
    let limits = &rt.inner.config.limits;
    for (field, text) in [("user", user), ("assistant", assistant)] {
        validate::storable_text(field, text)?;
        if text.len() > limits.max_content_bytes {
            return Err(MemoryError::too_large(
                field,
                format!(
                    "{field} is {} bytes; the limit is {} (limits.max_content_bytes)",
                    text.len(),
                    limits.max_content_bytes
                ),
            ));
        }
    }
    if user.trim().is_empty() && assistant.trim().is_empty() {
        return Err(MemoryError::invalid(
            "user",
            "give the user's message, the assistant's reply, or both",
        ));
    }
    let thought = rt
        .inner
        .thought
        .extract_exchange(user, assistant, budget)
        .await;
    if let Some(why) = &thought.fallback {
        tracing::debug!(reason = %why, "extract_turn fell back to rules");
    }
    let mut candidates = thought.value;
    candidates.truncate(budget);
    let inputs: Vec<RememberInput> = candidates
        .into_iter()
        // A procedure stitched from a long reply may outgrow the content limit: skip it.
        .filter(|c| c.content.len() <= limits.max_content_bytes)
        .map(|c| {
            tracing::debug!(kind = ?c.kind, reason = %c.reason, "extracted a memory");
            RememberInput {
                content: c.content,
                memory_type: Some(c.memory_type),
                tags: c.tags,
                session_id: session_id.clone(),
                metadata: metadata.clone(),
                ..Default::default()
            }
        })
        .collect();
    if inputs.is_empty() {
        return Ok(Vec::new());
    }
    let outcomes = remember_many(rt, agent, inputs, "").await?;
    let mut seen = HashSet::new();
    Ok(outcomes
        .into_iter()
        .filter(|o| seen.insert(o.memory.id.clone()))
        .collect())
}

/// A batch on its way to the store: each input built into a memory, with its routing,
/// content hash and (while it is new) its embedding, and what it turned out to duplicate.
struct Batch {
    /// The memories as built, in input order, with how their type was chosen.
    built: Vec<(Memory, Routing)>,
    /// Normalised content hash of each (computed once; the store keeps it).
    hashes: Vec<String>,
    /// The memory each input landed on when it is a duplicate.
    duplicate_of: Vec<Option<MemoryId>>,
}

impl Batch {
    /// Point duplicates of earlier items where those items went.
    fn redirect(&mut self) {
        let ids: Vec<&MemoryId> = self.built.iter().map(|(m, _)| &m.id).collect();
        redirect_duplicates(&ids, &mut self.duplicate_of);
    }
}

/// The pipeline of [`one`], [`batch`] and [`extract_turn`]; `batch_field` prefixes the
/// fields of errors (`memories[3].content`).
async fn remember_many(
    rt: &Runtime,
    agent: &AgentId,
    mut inputs: Vec<RememberInput>,
    batch_field: &str,
) -> MemoryResult<Vec<RememberOutcome>> {
    for (index, input) in inputs.iter_mut().enumerate() {
        let field = prefix(batch_field, index);
        validate::remember_input(&rt.inner.config.limits, input, &field)?;
        screen(&rt.inner.config.screening, input, &field)?;
    }
    resolve_projects(rt, agent, &mut inputs, batch_field).await?;
    let now = rt.now();
    let mut built = Vec::with_capacity(inputs.len());
    for input in inputs {
        let (routing, valence, arousal) = route(rt, &input).await;
        built.push((
            build_memory(rt, agent, input, &routing, (valence, arousal), now),
            routing,
        ));
    }
    let hashes: Vec<String> = built
        .iter()
        .map(|(m, _)| normalized_hash(&m.content))
        .collect();
    // Held until this batch is stored: a concurrent write of the same content waits,
    // then finds this one.
    let _same_content = rt
        .inner
        .content_locks
        .acquire(hashes.iter().map(|h| format!("{agent}\u{1f}{h}")).collect())
        .await;
    let actors = rt.actors();
    // Held from embedding until the vectors are stored and indexed (not while
    // superseding, which holds it itself): the model cannot change in between.
    let model_gate = actors.vectors.hold().await;
    // Look up exact duplicates while embedding everything: exact duplicates are rare, the saved round trip is not.
    let texts: Vec<String> = built.iter().map(|(m, _)| embedding_text(m)).collect();
    let (stored, embeddings) = tokio::join!(
        actors.episodic.find_by_content_hash(agent, &hashes),
        actors.vectors.embed(&texts),
    );
    let memories: Vec<&Memory> = built.iter().map(|(m, _)| m).collect();
    let duplicate_of = exact_duplicates(&memories, &hashes, &stored?);
    let mut batch = Batch {
        built,
        hashes,
        duplicate_of,
    };
    let (mut records, checks) = near_duplicates(rt, agent, &mut batch, embeddings?).await?;
    batch.redirect();
    let checks: Vec<(usize, Vec<MemoryId>)> = checks
        .into_iter()
        .filter(|(index, _)| batch.duplicate_of[*index].is_none())
        .collect();
    let mut superseded = find_contradictions(rt, agent, &batch.built, &checks).await?;
    if !records.is_empty() {
        store(rt, agent, &mut batch, &mut records, &mut superseded).await?;
    }
    drop(model_gate);
    let stored: Vec<&Memory> = records.iter().map(|r| &r.memory).collect();
    push_working(rt, agent, &stored, now).await;
    let superseded_by = supersede(rt, agent, &batch.built, superseded, now).await?;
    outcomes(rt, batch, &records, superseded_by, now).await
}

fn prefix(batch_field: &str, index: usize) -> String {
    if batch_field.is_empty() {
        String::new()
    } else {
        format!("{batch_field}[{index}].")
    }
}

/// Put each input in its project: an explicit `project_id` must name one of the
/// agent's projects (and attaches the input's session to it); without one, an input
/// goes to the project its session is attached to, if any.
async fn resolve_projects(
    rt: &Runtime,
    agent: &AgentId,
    inputs: &mut [RememberInput],
    batch_field: &str,
) -> MemoryResult<()> {
    let mut known: HashSet<ProjectId> = HashSet::new();
    let mut session_projects: HashMap<SessionId, Option<ProjectId>> = HashMap::new();
    for (index, input) in inputs.iter_mut().enumerate() {
        let prefix = prefix(batch_field, index);
        if let Some(project) = input.project_id.clone() {
            if !known.contains(&project) {
                rt.project(agent, &project).await.map_err(|e| MemoryError {
                    field: Some(format!("{prefix}project_id")),
                    ..e
                })?;
                known.insert(project.clone());
            }
            if let Some(session) = &input.session_id {
                if session_projects.get(session) != Some(&Some(project.clone())) {
                    rt.attach_session(agent, &project, session)
                        .await
                        .map_err(|e| MemoryError {
                            field: Some(format!("{prefix}session_id")),
                            ..e
                        })?;
                    session_projects.insert(session.clone(), Some(project));
                }
            }
        } else if let Some(session) = &input.session_id {
            let project = match session_projects.get(session) {
                Some(project) => project.clone(),
                None => {
                    let project = rt
                        .actors()
                        .namespaces
                        .session_project(agent, session)
                        .await?;
                    session_projects.insert(session.clone(), project.clone());
                    project
                }
            };
            input.project_id = project;
        }
    }
    Ok(())
}

/// Decide the type: an explicit type wins; otherwise the rules, and the arbiter when they are unsure.
async fn route(rt: &Runtime, input: &RememberInput) -> (Routing, Option<f32>, Option<f32>) {
    // An affective memory gets its feeling from its words unless the caller said it.
    let felt = |memory_type: MemoryType| {
        let found = (memory_type == MemoryType::Affective)
            .then(|| crate::policy::routing::emotion_of(&input.content))
            .flatten();
        (
            input.valence.or(found.map(|(v, _)| v)),
            input.arousal.or(found.map(|(_, a)| a)),
        )
    };
    if let Some(memory_type) = input.memory_type {
        let (valence, arousal) = felt(memory_type);
        return (
            Routing {
                memory_type,
                reason: "explicit type given by the caller".into(),
            },
            valence,
            arousal,
        );
    }
    let decision = crate::policy::routing::route(&input.content);
    let mut routing = Routing {
        memory_type: decision.memory_type,
        reason: decision.reason,
    };
    if decision.ambiguous {
        if let Some(arbiter) = &rt.inner.arbiter {
            let asked = tokio::time::timeout(
                rt.inner.config.arbiter_timeout,
                arbiter.route(&input.content, &MemoryType::ALL),
            )
            .await;
            match asked {
                Ok(Some(memory_type)) => {
                    routing = Routing {
                        memory_type,
                        reason: format!(
                            "arbiter chose {} where the rules were unsure",
                            memory_type.as_str()
                        ),
                    };
                }
                Ok(None) => {}
                Err(_) => tracing::warn!("routing arbiter timed out; the rules decide"),
            }
        }
    }
    let (valence, arousal) = felt(routing.memory_type);
    (routing, valence, arousal)
}

/// Screen a write: redact (or refuse) its secrets, mark prompt injection; what was
/// found goes in its metadata under [`screening::METADATA_KEY`] (a client's own value
/// there is dropped).
fn screen(config: &ScreeningConfig, input: &mut RememberInput, field: &str) -> MemoryResult<()> {
    let mut metadata = match input.metadata.take() {
        Some(serde_json::Value::Object(map)) => map,
        Some(other) => {
            input.metadata = Some(other);
            serde_json::Map::new()
        }
        None => serde_json::Map::new(),
    };
    metadata.remove(screening::METADATA_KEY);
    let found = screening::screen(config, &mut input.content, input.title.as_mut())
        .map_err(|kinds| {
            MemoryError::invalid(
                format!("{field}content"),
                format!(
                    "the text holds a secret ({}); remove it, or let the server redact it (screening.secrets = \"redact\")",
                    kinds.join(", ")
                ),
            )
        })?;
    if let Some(found) = found {
        metadata.insert(screening::METADATA_KEY.to_string(), found);
    }
    if input.metadata.is_none() {
        input.metadata = Some(serde_json::Value::Object(metadata));
    }
    Ok(())
}

fn build_memory(
    rt: &Runtime,
    agent: &AgentId,
    input: RememberInput,
    routing: &Routing,
    affect: (Option<f32>, Option<f32>),
    now: DateTime<Utc>,
) -> Memory {
    Memory {
        id: MemoryId::generate(),
        agent_id: agent.clone(),
        memory_type: routing.memory_type,
        content: input.content,
        title: input.title,
        importance: input
            .importance
            .unwrap_or(rt.inner.config.default_importance),
        tags: input.tags,
        session_id: input.session_id,
        project_id: input.project_id,
        occurred_at: input.occurred_at.unwrap_or(now),
        created_at: now,
        updated_at: now,
        last_accessed_at: now,
        access_count: 0,
        consolidation_level: 0.0,
        valence: affect.0,
        arousal: affect.1,
        status: MemoryStatus::Active,
        shared: input.shared,
        metadata: input.metadata.unwrap_or_else(|| serde_json::json!({})),
        source: input.source,
        version: 1,
    }
}

/// Look for near duplicates of what is not an exact duplicate (marking them in
/// `batch.duplicate_of`): the records to store, and for new knowledge the
/// neighbours to check for contradiction.
async fn near_duplicates(
    rt: &Runtime,
    agent: &AgentId,
    batch: &mut Batch,
    embeddings: Vec<Vec<f32>>,
) -> MemoryResult<(Vec<StoredMemory>, Vec<(usize, Vec<MemoryId>)>)> {
    let mut embeddings: Vec<Option<Vec<f32>>> = embeddings.into_iter().map(Some).collect();
    let fresh: Vec<usize> = (0..batch.built.len())
        .filter(|i| batch.duplicate_of[*i].is_none())
        .collect();
    let vectors: Vec<Vec<f32>> = fresh
        .iter()
        .map(|i| embeddings[*i].take().unwrap_or_default())
        .collect();
    let queries: Vec<VectorQuery> = fresh
        .iter()
        .zip(&vectors)
        .map(|(i, vector)| VectorQuery {
            agent_id: agent.clone(),
            include_shared: false,
            types: neighbour_types(batch.built[*i].0.memory_type),
            vector: vector.clone(),
            limit: 5,
        })
        .collect();
    let neighbours = rt.actors().vectors.search_many(&queries).await?;
    let config = &rt.inner.config;
    // Read back the close hits: a near duplicate must not contradict the new text.
    let close: Vec<MemoryId> = neighbours
        .iter()
        .flatten()
        .filter(|(_, s)| *s >= config.dedup_threshold)
        .map(|(id, _)| id.clone())
        .collect();
    let close: HashMap<MemoryId, Memory> = rt
        .actors()
        .episodic
        .get_many(&close)
        .await?
        .into_iter()
        .map(|m| (m.id.clone(), m))
        .collect();
    let mut records = Vec::new();
    let mut checks = Vec::new();
    for ((index, embedding), hits) in fresh.iter().zip(vectors).zip(&neighbours) {
        let memory = &batch.built[*index].0;
        if let Some(id) = near_duplicate(memory, hits, config.dedup_threshold, &close) {
            batch.duplicate_of[*index] = Some(id);
            continue;
        }
        if is_knowledge(memory.memory_type) {
            checks.push((
                *index,
                contradiction_band(hits, config.contradiction_min_similarity),
            ));
        }
        records.push(StoredMemory::with_hash(
            memory.clone(),
            embedding,
            batch.hashes[*index].clone(),
        ));
    }
    Ok((records, checks))
}

/// For each new knowledge memory, the stored knowledge it contradicts: candidates are
/// its vector neighbours in the similarity band plus its keyword matches; the rule
/// decides, and the arbiter (if any) may confirm a case the rule does not catch.
async fn find_contradictions(
    rt: &Runtime,
    agent: &AgentId,
    built: &[(Memory, Routing)],
    checks: &[(usize, Vec<MemoryId>)],
) -> MemoryResult<Vec<(usize, MemoryId, String)>> {
    let episodic = &rt.actors().episodic;
    let mut found = Vec::new();
    for (index, band) in checks {
        let new = &built[*index].0;
        let query = KeywordQuery {
            agent_id: agent.clone(),
            include_shared: false,
            text: new.content.clone(),
            // Episodic memories share the words too and are filtered out below.
            limit: 20,
            occurred: None,
        };
        let mut candidates: Vec<MemoryId> = band.clone();
        candidates.extend(
            super::recall::search_words(rt, &query)
                .await?
                .into_iter()
                .map(|(id, _)| id),
        );
        candidates.sort();
        candidates.dedup();
        for old in episodic.get_many(&candidates).await? {
            if !may_supersede(&old, new, agent) {
                continue;
            }
            let verdict = match contradiction(&old.content, &new.content) {
                Some(why) => Some(why),
                None if band.contains(&old.id) => arbiter_contradicts(rt, &old, new).await,
                None => None,
            };
            if let Some(why) = verdict {
                found.push((*index, old.id.clone(), why));
            }
        }
    }
    Ok(found)
}

/// The arbiter's word on a contradiction the rule does not see (None without one).
async fn arbiter_contradicts(rt: &Runtime, old: &Memory, new: &Memory) -> Option<String> {
    let arbiter = rt.inner.arbiter.as_ref()?;
    let asked = tokio::time::timeout(
        rt.inner.config.arbiter_timeout,
        arbiter.contradicts(&old.content, &new.content),
    )
    .await;
    matches!(asked, Ok(Some(true))).then(|| "the arbiter judged it replaced".to_string())
}

/// Store the new records. The store checks the content again inside its write
/// transaction: another process sharing the database may have stored the same text
/// since the lookup (the content locks only order this process's writers); such a
/// record becomes a duplicate of the stored one and its supersedes are dropped.
async fn store(
    rt: &Runtime,
    agent: &AgentId,
    batch: &mut Batch,
    records: &mut Vec<StoredMemory>,
    superseded: &mut Vec<(usize, MemoryId, String)>,
) -> MemoryResult<()> {
    let stored_elsewhere = rt.actors().episodic.insert_new_content(records).await?;
    if !stored_elsewhere.is_empty() {
        for (new_id, existing) in &stored_elsewhere {
            if let Some(index) = batch.built.iter().position(|(m, _)| m.id == *new_id) {
                batch.duplicate_of[index] = Some(existing.clone());
                superseded.retain(|(i, _, _)| *i != index);
            }
        }
        records.retain(|r| !stored_elsewhere.iter().any(|(id, _)| *id == r.memory.id));
        batch.redirect();
    }
    rt.inner
        .speakers
        .learn(agent, records.iter().map(|r| &r.memory));
    let entries: Vec<EmbeddingRecord> = records
        .iter()
        .map(|r| embedding_record(&r.memory, r.embedding.clone()))
        .collect();
    rt.actors().vectors.project(&entries, &[]).await;
    Ok(())
}

/// Mirror new session memories into their windows, in one working-store call
/// (one Redis round trip for a whole batch). Best effort: working memory is a cache.
async fn push_working(rt: &Runtime, agent: &AgentId, memories: &[&Memory], now: DateTime<Utc>) {
    let items: Vec<(SessionId, WorkingItem)> = memories
        .iter()
        .filter_map(|memory| {
            Some((
                memory.session_id.clone()?,
                WorkingItem {
                    memory_id: memory.id.clone(),
                    content: memory.content.clone(),
                    at: now,
                },
            ))
        })
        .collect();
    if items.is_empty() {
        return;
    }
    if let Err(error) = rt.actors().working.push_many(agent, &items).await {
        tracing::warn!(%error, "working-memory window not updated");
    }
}

/// Contradicted knowledge is superseded (kept, with history, and linked from the new
/// memory by a `supersedes` edge), never deleted. Answers the ids each input superseded.
async fn supersede(
    rt: &Runtime,
    agent: &AgentId,
    built: &[(Memory, Routing)],
    superseded: Vec<(usize, MemoryId, String)>,
    now: DateTime<Utc>,
) -> MemoryResult<HashMap<usize, Vec<MemoryId>>> {
    let mut superseded_by: HashMap<usize, Vec<MemoryId>> = HashMap::new();
    for (index, old_id, why) in superseded {
        let patch = MemoryPatch {
            status: Some(MemoryStatus::Superseded),
            ..Default::default()
        };
        match super::memories::change(rt, Some(agent), &old_id, patch, "conflict_replace").await {
            Ok(_) => {
                tracing::info!(old = %old_id, new = %built[index].0.id, reason = %why, "memory superseded");
                let edge = Association {
                    agent_id: agent.clone(),
                    from_id: built[index].0.id.clone(),
                    to_id: old_id.clone(),
                    relation: "supersedes".into(),
                    weight: 1.0,
                    created_at: now,
                };
                if let Err(error) = rt.actors().graph.upsert(&edge).await {
                    tracing::warn!(%error, "supersedes edge not recorded");
                }
                superseded_by.entry(index).or_default().push(old_id);
            }
            // Already changed by someone else: leave it.
            Err(error)
                if error.code == ErrorCode::Conflict || error.code == ErrorCode::NotFound => {}
            Err(error) => return Err(error),
        }
    }
    Ok(superseded_by)
}

/// One outcome per input: the new memory, or the one it duplicated (reinforced now:
/// deduplication counts as an access, and read back so the answer shows it).
async fn outcomes(
    rt: &Runtime,
    batch: Batch,
    records: &[StoredMemory],
    mut superseded_by: HashMap<usize, Vec<MemoryId>>,
    now: DateTime<Utc>,
) -> MemoryResult<Vec<RememberOutcome>> {
    let mut targets: Vec<MemoryId> = batch.duplicate_of.iter().flatten().cloned().collect();
    targets.sort();
    targets.dedup();
    let stored_now: HashSet<&MemoryId> = records.iter().map(|r| &r.memory.id).collect();
    targets.retain(|id| !stored_now.contains(id));
    let mut existing: HashMap<MemoryId, Memory> = HashMap::new();
    if !targets.is_empty() {
        let episodic = &rt.actors().episodic;
        episodic.touch_now(&targets, now).await?;
        existing = episodic
            .get_many(&targets)
            .await?
            .into_iter()
            .map(|m| (m.id.clone(), m))
            .collect();
    }
    let by_new_id: HashMap<&MemoryId, &Memory> =
        records.iter().map(|r| (&r.memory.id, &r.memory)).collect();
    let Batch {
        built,
        duplicate_of,
        ..
    } = batch;
    built
        .into_iter()
        .zip(duplicate_of)
        .enumerate()
        .map(|(index, ((memory, routing), duplicate))| match duplicate {
            Some(target) => {
                let found = existing
                    .get(&target)
                    .or_else(|| by_new_id.get(&target).copied())
                    .cloned()
                    .ok_or_else(|| {
                        MemoryError::internal(format!("duplicate target {target} vanished"))
                    })?;
                Ok(RememberOutcome {
                    memory: found,
                    routing,
                    deduplicated_into: Some(target),
                    superseded: Vec::new(),
                })
            }
            None => Ok(RememberOutcome {
                memory,
                routing,
                deduplicated_into: None,
                superseded: superseded_by.remove(&index).unwrap_or_default(),
            }),
        })
        .collect()
}

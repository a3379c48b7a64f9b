//! The recall pipeline, in stages:
//!
//! 1. **plan** — validate; find a time expression in the question (a hint, not a
//!    filter); take the named speakers out of the topic; decide how deep to fetch
//!    ([`crate::policy::recall::fetch_depth`]).
//! 2. **retrieve** — vector (embedded index or a caught-up projection), keyword (BM25),
//!    time (the period's memories) and working memory (the session window) in parallel;
//!    the pseudo-relevance-feedback keyword pass follows the keyword hits within that
//!    concurrency.
//! 3. **score** — every candidate's exact similarity to the question, weighted score
//!    fusion ([`crate::policy::fusion::score_fusion`]), the best candidates read back;
//!    re-embedded once when the candidates name a speaker recall did not know yet.
//! 4. **attribute** — memories attributed to someone the question names are boosted.
//! 5. **expand** — relevance spreads one hop to the strongest hits' association edges
//!    and session neighbours ([`crate::policy::fusion::propagate`]).
//! 6. **rank** — filter by visibility and the request's filters, re-rank
//!    ([`crate::policy::recall::RerankWeights`]), sort, cut (or diversify) to the limit.
//!
//! Reinforcement of what was returned is queued in the episodic actor, never written
//! on the request path.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::projected::ReadSource;
use super::speakers::speaker_of;
use super::{validate, Runtime};
use crate::error::{MemoryError, MemoryResult};
use crate::model::{AgentId, Memory, MemoryId, MemoryStatus, MemoryType, SessionId};
use crate::policy::facts::Fact;
use crate::policy::fusion::{
    feedback_terms, names_speaker, propagate, query_words, rank_window, score_fusion, sort_fused,
    without_speakers, FusedHit, NeighbourLink, RankedList, Retriever,
};
use crate::policy::recall::{
    best_fused_score, fetch_depth, qualifies, reported_score, Audience, HitContext, RerankWeights,
};
use crate::policy::time::{find_time_expression, FoundTime, TimeRange};
use crate::projects::ProjectId;
use crate::store::{KeywordQuery, ListQuery, VectorQuery};

/// A recall request.
#[derive(Debug, Clone)]
pub struct RecallInput {
    /// Whose memories.
    pub agent_id: AgentId,
    /// What to look for.
    pub query: String,
    /// Only these types (empty: all).
    pub types: Vec<MemoryType>,
    /// Results wanted (default 10).
    pub limit: Option<usize>,
    /// Session in focus: its memories rank slightly higher.
    pub session_id: Option<SessionId>,
    /// Only memories with at least one of these tags.
    pub tags: Vec<String>,
    /// Search the shared pool too.
    pub include_shared: bool,
    /// Return per-retriever scores.
    pub debug: bool,
    /// Only memories that occurred in this range (a resolved `time_query`).
    pub time_range: Option<TimeRange>,
    /// The request's "now" for time expressions inside the query (default: the clock).
    pub now: Option<DateTime<Utc>>,
    /// Project in focus: its memories rank slightly higher, and only it sees its memories when it is isolated.
    pub project_id: Option<ProjectId>,
    /// Recall as of this instant or period: only what had happened by its end, and the
    /// facts about the entities the question names that held then, with the memories
    /// stating them (superseded ones too): what the memories said at the time.
    pub as_of: Option<TimeRange>,
}

impl RecallInput {
    /// A plain query: all types, 10 results, shared memories included, no filters.
    pub fn new(agent_id: AgentId, query: impl Into<String>) -> Self {
        Self {
            agent_id,
            query: query.into(),
            types: Vec::new(),
            limit: None,
            session_id: None,
            tags: Vec::new(),
            include_shared: true,
            debug: false,
            time_range: None,
            now: None,
            project_id: None,
            as_of: None,
        }
    }
}

/// The debug component holding a hit's re-ranked score before it is compressed onto
/// 0..1 for callers (`policy::recall::reported_score`): ratios of boosts are exact there.
pub const RANKED_COMPONENT: &str = "ranked";

/// One recalled memory.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecallHit {
    /// The memory.
    pub memory: Memory,
    /// Final score on 0..1 (higher is better; see `policy::recall::reported_score`).
    pub score: f64,
    /// Retention at recall time.
    pub retention: f64,
    /// Retrievers that found it.
    pub matched_by: Vec<&'static str>,
    /// Raw score per retriever, plus [`RANKED_COMPONENT`] (filled when debugging).
    pub components: Option<HashMap<&'static str, f64>>,
}

/// Recall's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct RecallOutcome {
    /// Ranked hits.
    pub hits: Vec<RecallHit>,
    /// Server-side time spent.
    pub took_ms: f64,
    /// Time per stage (vector, keyword, time, fetch), in milliseconds.
    pub timings_ms: Vec<(&'static str, f64)>,
    /// What answered each vector and graph read: a projection, or the embedded
    /// backend with the reason it stood in.
    pub sources: Vec<ReadSource>,
    /// As of a time: the facts about the entities the question names that held then
    /// (empty without `as_of`).
    pub facts: Vec<Fact>,
}

/// Await `work` and measure it in milliseconds.
async fn timed<T>(work: impl std::future::Future<Output = T>) -> (T, f64) {
    let started = Instant::now();
    let output = work.await;
    (output, started.elapsed().as_secs_f64() * 1000.0)
}

/// Milliseconds spent per stage.
#[derive(Debug, Default)]
struct Timings {
    /// Neighbour expansion, all of it.
    expand: f64,
    /// Expansion's first part: the seeds' graph links and session neighbours (beside
    /// `fetch` when gathered early, so not part of `expand` then).
    expand_links: f64,
    /// Expansion's second part: reading the memories it adds, and their similarity
    /// (likewise).
    expand_fetch: f64,
    /// Filtering, re-ranking and cutting the candidates.
    rank: f64,
    /// Embedding the question and the nearest-neighbour search.
    vector: f64,
    /// BM25.
    keyword: f64,
    /// The period's memories.
    time: f64,
    /// The session window.
    working: f64,
    /// The feedback keyword pass.
    feedback: f64,
    /// The entity index.
    entity: f64,
    /// Facts as of a time.
    facts: f64,
    /// Reading candidates back.
    fetch: f64,
    /// Exact similarity of candidates.
    similarity: f64,
}

impl Timings {
    fn stages(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("expand", self.expand),
            ("expand_links", self.expand_links),
            ("expand_fetch", self.expand_fetch),
            ("rank", self.rank),
            ("vector", self.vector),
            ("keyword", self.keyword),
            ("time", self.time),
            ("working", self.working),
            ("feedback", self.feedback),
            ("entity", self.entity),
            ("facts", self.facts),
            ("fetch", self.fetch),
            ("similarity", self.similarity),
        ]
    }
}

/// What the request asks each retriever, worked out before anything is read.
struct Plan<'a> {
    /// The request.
    input: &'a RecallInput,
    /// Results wanted.
    limit: usize,
    /// A time expression found inside the question (a hint: a retriever and a boost).
    hinted: Option<FoundTime>,
    /// The question without the time expression.
    search_text: String,
    /// The question's words, to find the speakers it names.
    asked_words: HashSet<String>,
    /// Similarity compares the topic without the named speakers.
    strips_speakers: bool,
    /// The question names a speaker known from the agent's memories: the speaker boost
    /// will likely reorder the best hits, so the expansion is not gathered early.
    names_speakers: bool,
    /// What the question's vector is embedded from.
    embedded_text: String,
    /// The period of the time retriever: the request's range, else the hinted one.
    time_window: Option<TimeRange>,
    /// Candidates each retriever fetches.
    fetch: usize,
}

/// The ranked lists of the retrievers, the question's vector and who answered.
struct Retrieved {
    /// One list per retriever with a weight above zero.
    lists: Vec<RankedList>,
    /// The question's vector (empty when the vector retriever is weighted out).
    query_vector: Vec<f32>,
    /// What answered the vector and graph reads.
    sources: Vec<ReadSource>,
    /// As of a time: the facts that held then about what the question names.
    held: Vec<Fact>,
    /// As of a time: the no-longer-active memories stating those facts, admitted.
    history: HashSet<MemoryId>,
}

/// The fused candidates and what is known about them.
struct Scored {
    /// Fused hits, best first.
    fused: Vec<FusedHit>,
    /// The candidates read back.
    memories: Vec<Memory>,
    /// Exact similarity of each candidate to the question.
    similarity: HashMap<MemoryId, f64>,
    /// The question's vector the similarities were scored with.
    query_vector: Vec<f32>,
    /// The expansion gathered beside the read-back from the best hits before any
    /// speaker boost (used when they turn out to be the seeds; see [`expand`]).
    early: Option<Gathered>,
}

/// Recall (see the module documentation).
pub(super) async fn recall(rt: &Runtime, input: RecallInput) -> MemoryResult<RecallOutcome> {
    let started = Instant::now();
    // The question is embedded and compared with one model throughout.
    let _model_gate = rt.actors().vectors.hold().await;
    let plan = plan(rt, &input).await?;
    let mut timings = Timings::default();
    let Retrieved {
        lists,
        query_vector,
        mut sources,
        held,
        history,
    } = retrieve(rt, &plan, &mut timings).await?;
    let mut scored = score(rt, &plan, &lists, query_vector, &mut timings).await?;
    // The best similarity among the candidates, to score memories the expansion adds.
    let best_similarity = if scored.similarity.is_empty() {
        lists
            .iter()
            .filter(|l| l.retriever == Retriever::Vector)
            .flat_map(|l| l.hits.iter().map(|(_, s)| *s))
            .fold(0.0, f64::max)
    } else {
        scored.similarity.values().copied().fold(0.0, f64::max)
    };
    boost_attributed(rt, &plan, &mut scored);
    if expands(rt, &scored.fused) {
        let started_expansion = Instant::now();
        sources.push(expand(rt, &plan, &mut scored, best_similarity, &mut timings).await?);
        timings.expand = started_expansion.elapsed().as_secs_f64() * 1000.0;
    }
    let (hits, rank_ms) = timed(rank(rt, &plan, &lists, &scored, &history)).await;
    timings.rank = rank_ms;
    let hits = hits?;
    if !hits.is_empty() {
        let touched: Vec<MemoryId> = hits.iter().map(|h| h.memory.id.clone()).collect();
        rt.actors().episodic.touch_later(touched, rt.now());
    }
    Ok(RecallOutcome {
        hits,
        took_ms: started.elapsed().as_secs_f64() * 1000.0,
        timings_ms: timings.stages(),
        sources,
        facts: held,
    })
}

/// Validate the request and work out what to ask the retrievers.
async fn plan<'a>(rt: &Runtime, input: &'a RecallInput) -> MemoryResult<Plan<'a>> {
    let limits = &rt.inner.config.limits;
    let limit = input.limit.unwrap_or(10);
    validate::limit(limits, limit)?;
    validate::query(limits, &input.query)?;
    validate::tags(&input.tags, limits, "tags")?;
    if let Some(now) = input.now {
        crate::model::check_instant("now", now)?;
    }
    if let Some(as_of) = input.as_of {
        crate::model::check_instant("as_of", as_of.start)?;
        crate::model::check_instant("as_of", as_of.end)?;
    }
    if let Some(project) = &input.project_id {
        rt.project(&input.agent_id, project).await?;
    }
    // A time expression inside the question is a hint (a time retriever and a boost), not a filter.
    let hinted = match input.time_range {
        Some(_) => None,
        None => find_time_expression(&input.query, input.now.unwrap_or_else(|| rt.now())),
    };
    let search_text = hinted
        .as_ref()
        .filter(|found| !found.rest.trim().is_empty())
        .map_or_else(|| input.query.clone(), |found| found.rest.clone());
    // The question's topic without the speakers it names (see `without_speakers`):
    // what the vector retriever and the similarity compare, when the speakers are
    // already known; else the whole question, corrected in `score` once the
    // candidates show who is named.
    let settings = rt.inner.config.recall;
    let strips_speakers = settings.speaker_boost > 0.0 && settings.topic_without_speakers;
    let asked_words = query_words(&input.query);
    let named = if settings.speaker_boost > 0.0 {
        rt.inner.speakers.named(&input.agent_id, &asked_words)
    } else {
        Vec::new()
    };
    let topic_text = if strips_speakers {
        let named: Vec<&str> = named.iter().map(String::as_str).collect();
        without_speakers(&search_text, &named)
    } else {
        None
    };
    let embedded_text = topic_text.unwrap_or_else(|| search_text.clone());
    let time_window = input
        .time_range
        .or(hinted.as_ref().map(|found| found.range));
    let filtered = input.time_range.is_some()
        || input.as_of.is_some()
        || !input.tags.is_empty()
        || !input.types.is_empty();
    Ok(Plan {
        input,
        limit,
        hinted,
        search_text,
        asked_words,
        strips_speakers,
        names_speakers: !named.is_empty(),
        embedded_text,
        time_window,
        fetch: fetch_depth(limit, filtered),
    })
}

/// BM25 hits of `query`: from the vector actor's in-process keyword index, or from the
/// SQL store (which scores alike) while that index is loading.
pub(super) async fn search_words(
    rt: &Runtime,
    query: &KeywordQuery,
) -> MemoryResult<Vec<(MemoryId, f64)>> {
    match rt.actors().vectors.keyword_search(query).await? {
        Some(hits) => Ok(hits),
        None => rt.actors().episodic.keyword_search(query).await,
    }
}

/// Ask every retriever at once (feedback right after the keyword hits).
async fn retrieve(rt: &Runtime, plan: &Plan<'_>, timings: &mut Timings) -> MemoryResult<Retrieved> {
    let input = plan.input;
    let settings = rt.inner.config.recall;
    let episodic = &rt.actors().episodic;
    let vector_query = VectorQuery {
        agent_id: input.agent_id.clone(),
        include_shared: input.include_shared,
        types: input.types.clone(),
        vector: Vec::new(),
        limit: plan.fetch,
    };
    let keyword_query = KeywordQuery {
        agent_id: input.agent_id.clone(),
        include_shared: input.include_shared,
        text: plan.search_text.clone(),
        limit: plan.fetch,
        occurred: input.time_range,
    };
    let time_query = plan.time_window.map(|range| ListQuery {
        agent_id: Some(input.agent_id.clone()),
        memory_type: None,
        status: Some(MemoryStatus::Active),
        tag: None,
        limit: plan.fetch,
        cursor: None,
        occurred: Some(range),
        ..ListQuery::default()
    });
    let (
        (vector_hits, vector_ms),
        ((keyword_hits, feedback_list, feedback_ms), keyword_ms),
        (time_hits, time_ms),
        (window, working_ms),
        (entity_hits, entity_ms),
        ((held, held_hits), held_ms),
    ) = tokio::join!(
        // With the vector retriever weighted out, the question is not even embedded.
        timed(async {
            if settings.vector_weight > 0.0 {
                Some(
                    rt.embed_and_search(&plan.embedded_text, &vector_query)
                        .await,
                )
            } else {
                None
            }
        }),
        // Feedback learns from the keyword hits alone, so it follows them at once, beside
        // the other retrievers (behind a question embedding that takes longer, it is free).
        async {
            let (hits, keyword_ms) = timed(search_words(rt, &keyword_query)).await;
            let (feedback, feedback_ms) = match &hits {
                Ok(hits) => timed(feedback(rt, plan, hits, &keyword_query)).await,
                Err(_) => (Ok(None), 0.0),
            };
            ((hits, feedback, feedback_ms), keyword_ms)
        },
        timed(async {
            match &time_query {
                Some(query) => episodic.list(query).await,
                None => Ok(Vec::new()),
            }
        }),
        timed(session_window(rt, input)),
        timed(entity_candidates(rt, plan)),
        timed(held_facts(rt, plan)),
    );
    timings.facts = held_ms;
    timings.feedback = feedback_ms;
    (
        timings.vector,
        timings.keyword,
        timings.time,
        timings.working,
        timings.entity,
    ) = (vector_ms, keyword_ms, time_ms, working_ms, entity_ms);
    let (query_vector, vector_hits, sources) = match vector_hits {
        Some((hits, source)) => {
            let (query_vector, hits) = hits?;
            (query_vector, hits, vec![source])
        }
        None => (Vec::new(), Vec::new(), Vec::new()),
    };
    let mut lists = vec![
        RankedList {
            retriever: Retriever::Vector,
            weight: settings.vector_weight,
            hits: vector_hits
                .into_iter()
                .map(|(id, s)| (id, f64::from(s)))
                .collect(),
        },
        RankedList {
            retriever: Retriever::Keyword,
            weight: settings.keyword_weight,
            hits: keyword_hits?,
        },
        // The memories of the range, so a query with no matching words still finds them.
        RankedList {
            retriever: Retriever::Time,
            weight: settings.time_weight,
            hits: time_hits?.into_iter().map(|m| (m.id, 1.0)).collect(),
        },
        // What the session is working on right now.
        RankedList {
            retriever: Retriever::Working,
            weight: settings.working_weight,
            hits: rank_window(&plan.search_text, &window),
        },
    ];
    // Who or what the question names, wherever it was said.
    lists.push(RankedList {
        retriever: Retriever::Entity,
        weight: settings.entity_weight,
        hits: entity_hits,
    });
    // As of a time: what the memories said then about who or what the question names.
    let history: HashSet<MemoryId> = held_hits.iter().map(|(id, _)| id.clone()).collect();
    lists.push(RankedList {
        retriever: Retriever::Facts,
        weight: crate::policy::recall::HELD_FACT_WEIGHT,
        hits: held_hits,
    });
    if let Some(feedback) = feedback_list? {
        lists.push(feedback);
    }
    lists.retain(|l| l.weight > 0.0 && (l.retriever != Retriever::Facts || !l.hits.is_empty()));
    Ok(Retrieved {
        lists,
        query_vector,
        sources,
        held,
        history,
    })
}

/// The request session's working-memory window (an extra: recall answers without it).
async fn session_window(rt: &Runtime, input: &RecallInput) -> Vec<(MemoryId, String)> {
    let Some(session) = &input.session_id else {
        return Vec::new();
    };
    if rt.inner.config.recall.working_weight <= 0.0 {
        return Vec::new();
    }
    match rt.actors().working.window(&input.agent_id, session).await {
        Ok(items) => items
            .into_iter()
            .map(|item| (item.memory_id, item.content))
            .collect(),
        Err(error) => {
            tracing::warn!(%error, "working memory unavailable; recall goes on without it");
            Vec::new()
        }
    }
}

/// The memories naming an entity the question names: its words and runs of up to
/// three words that are keys of the agent's entities, speakers the question names left
/// out (their turns are `speaker_boost`'s). An extra: recall answers without it when
/// the index is missing or fails.
async fn entity_candidates(rt: &Runtime, plan: &Plan<'_>) -> Vec<(MemoryId, f64)> {
    let input = plan.input;
    let Some(index) = rt.inner.entities.as_deref() else {
        return Vec::new();
    };
    if rt.inner.config.recall.entity_weight <= 0.0 {
        return Vec::new();
    }
    let speakers: HashSet<String> = rt
        .inner
        .speakers
        .named(&input.agent_id, &plan.asked_words)
        .into_iter()
        .collect();
    let mut candidates = crate::policy::entities::question_keys(&plan.search_text, &speakers);
    if candidates.is_empty() {
        return Vec::new();
    }
    // In a project, a name split off for it is the one the question means.
    if let Some(project) = &input.project_id {
        let scoped: Vec<String> = candidates
            .iter()
            .map(|key| crate::store::entities::project_key(key, project.as_str()))
            .collect();
        candidates.extend(scoped);
    }
    let found = async {
        let keys = index.known_keys(&input.agent_id, &candidates).await?;
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        index
            .memories_naming(&input.agent_id, &keys, plan.fetch)
            .await
    };
    match found.await {
        Ok(found) => found.into_iter().map(|(id, _)| (id, 1.0)).collect(),
        Err(error) => {
            tracing::warn!(%error, "entity index unavailable; recall goes on without it");
            Vec::new()
        }
    }
}

/// Recall as of a time: the facts about the entities the question names (speakers
/// included: "where did Alice live" asks about Alice) that held during `as_of`, and the
/// memories stating them, whatever their status now. An extra like the entity
/// retriever: recall answers without it when there is no index or it fails.
async fn held_facts(rt: &Runtime, plan: &Plan<'_>) -> (Vec<Fact>, Vec<(MemoryId, f64)>) {
    let input = plan.input;
    let (Some(as_of), Some(index)) = (input.as_of, rt.inner.entities.as_deref()) else {
        return (Vec::new(), Vec::new());
    };
    let candidates = crate::policy::entities::question_keys(&plan.search_text, &HashSet::new());
    if candidates.is_empty() {
        return (Vec::new(), Vec::new());
    }
    let found = async {
        let keys = index.known_keys(&input.agent_id, &candidates).await?;
        let mut held = Vec::new();
        for key in keys.iter().take(MAX_AS_OF_SUBJECTS) {
            held.extend(
                super::entities::facts(rt, &input.agent_id, Some(key), None, Some(&as_of)).await?,
            );
        }
        Ok::<_, MemoryError>(held)
    };
    match found.await {
        Ok(held) => {
            let mut seen = HashSet::new();
            let sources = held
                .iter()
                .flat_map(|fact| fact.sources.iter())
                .filter(|id| seen.insert((*id).clone()))
                .map(|id| (id.clone(), 1.0))
                .collect();
            (held, sources)
        }
        Err(error) => {
            tracing::warn!(%error, "entity index unavailable; recall as of a time goes on without its facts");
            (Vec::new(), Vec::new())
        }
    }
}

/// Most entities of one question whose facts recall reads as of a time.
const MAX_AS_OF_SUBJECTS: usize = 8;

/// Pseudo-relevance feedback: search again with the words the best keyword hits share
/// (None when it is off or there are too few hits to learn from).
async fn feedback(
    rt: &Runtime,
    plan: &Plan<'_>,
    keyword_hits: &[(MemoryId, f64)],
    keyword_query: &KeywordQuery,
) -> MemoryResult<Option<RankedList>> {
    let settings = rt.inner.config.recall;
    if settings.feedback_weight <= 0.0 || settings.feedback_terms == 0 {
        return Ok(None);
    }
    let top: Vec<MemoryId> = keyword_hits
        .iter()
        .take(settings.feedback_documents)
        .map(|(id, _)| id.clone())
        .collect();
    if top.len() < 2 {
        return Ok(None);
    }
    let episodic = &rt.actors().episodic;
    let documents = episodic.get_many(&top).await?;
    let texts: Vec<&str> = documents.iter().map(|m| m.content.as_str()).collect();
    let extra = feedback_terms(&plan.search_text, &texts, settings.feedback_terms);
    let hits = if extra.is_empty() {
        Vec::new()
    } else {
        let query = KeywordQuery {
            text: format!("{} {}", plan.search_text, extra.join(" ")),
            ..keyword_query.clone()
        };
        search_words(rt, &query).await?
    };
    Ok(Some(RankedList {
        retriever: Retriever::Feedback,
        weight: settings.feedback_weight,
        hits,
    }))
}

/// Score every candidate by its exact similarity to the question (whichever retriever
/// found it), fuse, and read the best back. When the candidates name a speaker recall
/// did not know when it embedded the question (the first such question after a
/// restart), embed the topic without the name, score again and fuse again.
async fn score(
    rt: &Runtime,
    plan: &Plan<'_>,
    lists: &[RankedList],
    query_vector: Vec<f32>,
    timings: &mut Timings,
) -> MemoryResult<Scored> {
    let scores_similarity = rt.inner.config.recall.vector_weight > 0.0;
    let candidates: Vec<MemoryId> = {
        let mut seen = HashSet::new();
        lists
            .iter()
            .flat_map(|l| l.hits.iter().map(|(id, _)| id))
            .filter(|id| seen.insert(*id))
            .cloned()
            .collect()
    };
    let (similarity, similarity_ms) = timed(async {
        if scores_similarity {
            rt.similarity(&query_vector, &candidates).await
        } else {
            Ok(HashMap::new())
        }
    })
    .await;
    timings.similarity = similarity_ms;
    let mut similarity = similarity?;
    let mut fused = score_fusion(lists, &similarity);
    // Only the best candidates are worth reading back; filters rarely drop many of them.
    fused.truncate(plan.fetch);
    let ids: Vec<MemoryId> = fused.iter().map(|h| h.id.clone()).collect();
    let episodic = &rt.actors().episodic;
    // The expansion's reads need only the seeds' ids: they run beside the read-back.
    let ((memories, fetch_ms), mut early) = tokio::join!(
        timed(episodic.get_many(&ids)),
        gather_early(rt, plan, &fused, &query_vector),
    );
    timings.fetch = fetch_ms;
    let mut memories = memories?;
    rt.inner
        .speakers
        .learn(&plan.input.agent_id, memories.iter());
    let mut query_vector = query_vector;
    if scores_similarity && plan.strips_speakers {
        let mut named_speakers: Vec<&str> = memories
            .iter()
            .filter(|m| attributed(rt, plan, m))
            .filter_map(speaker_of)
            .collect();
        named_speakers.sort_unstable();
        named_speakers.dedup();
        let topic = without_speakers(&plan.search_text, &named_speakers)
            .filter(|topic| *topic != plan.embedded_text);
        if let Some(topic) = topic {
            let (rescored, took) = timed(async {
                let vector = rt.embed_question(&topic).await?;
                let similarity = rt.similarity(&vector, &candidates).await?;
                Ok::<_, MemoryError>((vector, similarity))
            })
            .await;
            timings.similarity += took;
            (query_vector, similarity) = rescored?;
            // Scored again: other candidates, another vector; gather again if expanding.
            early = None;
            fused = score_fusion(lists, &similarity);
            fused.truncate(plan.fetch);
            let known: HashSet<&MemoryId> = memories.iter().map(|m| &m.id).collect();
            let missing: Vec<MemoryId> = fused
                .iter()
                .map(|h| h.id.clone())
                .filter(|id| !known.contains(id))
                .collect();
            if !missing.is_empty() {
                let (more, took) = timed(episodic.get_many(&missing)).await;
                timings.fetch += took;
                memories.extend(more?);
            }
        }
    }
    Ok(Scored {
        fused,
        memories,
        similarity,
        query_vector,
        early,
    })
}

/// Whether recall spreads relevance to neighbours at all (and has hits to spread from).
fn expands(rt: &Runtime, fused: &[FusedHit]) -> bool {
    let settings = rt.inner.config.recall;
    settings.neighbour_weight > 0.0 && settings.expansion_seeds > 0 && !fused.is_empty()
}

/// The seeds' links: the expansion's first read.
struct Linked {
    /// The seeds, strongest first.
    seeds: Vec<MemoryId>,
    /// Gathered early (by id): each seed's session as the links were found with.
    filed_sessions: Option<Vec<Option<String>>>,
    /// Seed → neighbour links.
    links: Vec<NeighbourLink>,
    /// What served the graph read.
    source: ReadSource,
    /// Milliseconds reading the links.
    links_ms: f64,
}

/// The expansion's reads for one list of seeds: their links, the memories those add
/// and their similarity.
struct Gathered {
    /// The seeds' links.
    linked: Linked,
    /// The neighbours that were not candidates yet, read.
    added_memories: Vec<Memory>,
    /// Their similarity to the question.
    added_similarity: HashMap<MemoryId, f64>,
    /// Milliseconds reading what they add.
    fetch_ms: f64,
}

impl Gathered {
    /// True when it was gathered for exactly `seeds`, each in the session it is in.
    fn serves(&self, seeds: &[Memory]) -> bool {
        let Linked {
            seeds: ids,
            filed_sessions: Some(sessions),
            ..
        } = &self.linked
        else {
            return false;
        };
        ids.len() == seeds.len()
            && sessions.len() == seeds.len()
            && seeds.iter().zip(ids).all(|(m, id)| m.id == *id)
            && seeds
                .iter()
                .zip(sessions)
                .all(|(m, filed)| m.session_id.as_ref().map(|s| s.as_str()) == filed.as_deref())
    }
}

/// Read the neighbours `linked` adds to the candidates `fused`, with their similarity.
async fn read_added(
    rt: &Runtime,
    linked: Linked,
    fused: &[FusedHit],
    query_vector: &[f32],
) -> MemoryResult<Gathered> {
    let started = Instant::now();
    let known: HashSet<&MemoryId> = fused.iter().map(|h| &h.id).collect();
    let mut added: Vec<MemoryId> = linked
        .links
        .iter()
        .map(|l| l.neighbour.clone())
        .filter(|id| !known.contains(id))
        .collect();
    added.sort();
    added.dedup();
    let (memories, similarity) = tokio::join!(rt.actors().episodic.get_many(&added), async {
        if rt.inner.config.recall.vector_weight > 0.0 {
            rt.similarity(query_vector, &added).await
        } else {
            Ok(HashMap::new())
        }
    });
    Ok(Gathered {
        linked,
        added_memories: memories?,
        added_similarity: similarity?,
        fetch_ms: started.elapsed().as_secs_f64() * 1000.0,
    })
}

/// The expansion of the best hits before they are read back and boosted (by id, from
/// the in-process session order), or `None` when that order is loading, recall does not
/// expand, the question names a known speaker (the boost would pick other seeds) or a
/// read failed (the expansion then gathers after the read-back, as usual).
async fn gather_early(
    rt: &Runtime,
    plan: &Plan<'_>,
    fused: &[FusedHit],
    query_vector: &[f32],
) -> Option<Gathered> {
    if !expands(rt, fused) || plan.names_speakers {
        return None;
    }
    let settings = rt.inner.config.recall;
    let seeds: Vec<MemoryId> = fused
        .iter()
        .take(settings.expansion_seeds)
        .map(|h| h.id.clone())
        .collect();
    let ((found, source), links_ms) =
        timed(rt.neighbours_by_id(&plan.input.agent_id, &seeds, settings.session_radius)).await;
    let (links, filed_sessions) = found.ok().flatten()?;
    let linked = Linked {
        seeds,
        filed_sessions: Some(filed_sessions),
        links,
        source,
        links_ms,
    };
    read_added(rt, linked, fused, query_vector).await.ok()
}

/// A memory attributed to someone the question names ("what did Alice say …").
fn attributed(rt: &Runtime, plan: &Plan<'_>, memory: &Memory) -> bool {
    rt.inner.config.recall.speaker_boost > 0.0
        && speaker_of(memory).is_some_and(|s| names_speaker(&plan.asked_words, s))
}

/// Multiply the score of every attributed candidate by `1 + recall.speaker_boost`.
fn boost_attributed(rt: &Runtime, plan: &Plan<'_>, scored: &mut Scored) {
    let boost = rt.inner.config.recall.speaker_boost;
    if boost <= 0.0 {
        return;
    }
    let named: HashSet<&MemoryId> = scored
        .memories
        .iter()
        .filter(|m| attributed(rt, plan, m))
        .map(|m| &m.id)
        .collect();
    for hit in &mut scored.fused {
        if named.contains(&hit.id) {
            hit.score *= 1.0 + boost;
        }
    }
    sort_fused(&mut scored.fused);
}

/// Spread relevance one hop from the strongest hits to their association-graph and
/// session neighbours; a neighbour not yet a candidate scores by its own similarity.
/// Answers what served the graph read.
async fn expand(
    rt: &Runtime,
    plan: &Plan<'_>,
    scored: &mut Scored,
    best_similarity: f64,
    timings: &mut Timings,
) -> MemoryResult<ReadSource> {
    let settings = rt.inner.config.recall;
    // The strongest hits, as the memories `score` read back (a hit not read back, say
    // one deleted meanwhile, seeds nothing).
    let seeds: Vec<Memory> = scored
        .fused
        .iter()
        .take(settings.expansion_seeds)
        .filter_map(|h| scored.memories.iter().find(|m| m.id == h.id).cloned())
        .collect();
    // Gathered beside the read-back when the seeds are what it assumed (no boost moved
    // a hit, each seed in the session it is filed under); else gathered now.
    let gathered = match scored.early.take().filter(|early| early.serves(&seeds)) {
        Some(early) => early,
        None => {
            let ((links, source), links_ms) =
                timed(rt.neighbours(&plan.input.agent_id, &seeds, settings.session_radius)).await;
            let linked = Linked {
                seeds: seeds.iter().map(|m| m.id.clone()).collect(),
                filed_sessions: None,
                links: links?,
                source,
                links_ms,
            };
            read_added(rt, linked, &scored.fused, &scored.query_vector).await?
        }
    };
    timings.expand_links = gathered.linked.links_ms;
    timings.expand_fetch = gathered.fetch_ms;
    let Gathered {
        linked:
            Linked {
                links,
                source: graph_source,
                ..
            },
        added_memories,
        added_similarity,
        ..
    } = gathered;
    // A memory the expansion adds scores on its own by its similarity alone.
    let mut scores: HashMap<MemoryId, f64> = scored
        .fused
        .iter()
        .map(|h| (h.id.clone(), h.score))
        .collect();
    for memory in &added_memories {
        let own = match added_similarity.get(&memory.id) {
            Some(value) if best_similarity > 0.0 => {
                settings.vector_weight * value.max(0.0) / best_similarity
            }
            _ => 0.0,
        };
        let boost = if attributed(rt, plan, memory) {
            1.0 + settings.speaker_boost
        } else {
            1.0
        };
        scores.insert(memory.id.clone(), own * boost);
    }
    let lifted = propagate(&scores, &links, settings.neighbour_weight);
    for hit in &mut scored.fused {
        if let Some(score) = lifted.get(&hit.id) {
            hit.score = *score;
            hit.matched_by.push(Retriever::Graph);
            hit.matched_by.sort();
            hit.components.push((Retriever::Graph, *score));
        }
    }
    for memory in &added_memories {
        if let Some(score) = lifted.get(&memory.id) {
            let mut components = vec![(Retriever::Graph, *score)];
            if let Some(value) = added_similarity.get(&memory.id) {
                components.push((Retriever::Vector, *value));
            }
            scored.fused.push(FusedHit {
                id: memory.id.clone(),
                score: *score,
                matched_by: vec![Retriever::Graph],
                components,
            });
        }
    }
    scored.memories.extend(added_memories);
    sort_fused(&mut scored.fused);
    Ok(graph_source)
}

/// Filter the candidates to what the request may see and wants, re-rank, sort and cut
/// to the limit (or pick with the per-session penalty).
async fn rank(
    rt: &Runtime,
    plan: &Plan<'_>,
    lists: &[RankedList],
    scored: &Scored,
    history: &HashSet<MemoryId>,
) -> MemoryResult<Vec<RecallHit>> {
    let input = plan.input;
    let settings = rt.inner.config.recall;
    let isolated = rt.isolated_among(&scored.memories).await?;
    let by_id: HashMap<&MemoryId, &Memory> = scored.memories.iter().map(|m| (&m.id, m)).collect();
    let now = rt.now();
    let best_fused = best_fused_score(lists, plan.time_window.is_some());
    let audience = Audience {
        agent: &input.agent_id,
        include_shared: input.include_shared,
        project: input.project_id.as_ref(),
        session: input.session_id.as_ref(),
        types: &input.types,
        tags: &input.tags,
        time_range: input.time_range,
        as_of: input.as_of,
        history,
    };
    let weights = RerankWeights::default();
    let mut hits: Vec<RecallHit> = scored
        .fused
        .iter()
        .filter_map(|hit| {
            let memory = *by_id.get(&hit.id)?;
            if !audience.admits(memory, &isolated) {
                return None;
            }
            let retention = rt.inner.config.retention.retention(memory, now);
            let relevance = hit.score / best_fused;
            let in_hinted_time = plan
                .hinted
                .as_ref()
                .is_some_and(|found| found.range.contains(memory.occurred_at));
            let score = if settings.rerank {
                let context = HitContext {
                    in_hinted_time,
                    importance: memory.importance,
                    retention,
                    in_session: audience.in_session(memory),
                    in_project: audience.in_project(memory),
                    own: memory.agent_id == input.agent_id,
                };
                weights.score(relevance, &context)
            } else {
                relevance
            };
            if !qualifies(score) {
                return None;
            }
            let mut matched_by: Vec<&'static str> =
                hit.matched_by.iter().map(|r| r.as_str()).collect();
            if (input.time_range.is_some() || in_hinted_time)
                && !hit.matched_by.contains(&Retriever::Time)
            {
                matched_by.push(Retriever::Time.as_str());
            }
            Some(RecallHit {
                memory: memory.clone(),
                score,
                retention,
                matched_by,
                components: input.debug.then(|| {
                    hit.components
                        .iter()
                        .map(|(r, s)| (r.as_str(), *s))
                        .chain([(RANKED_COMPONENT, score)])
                        .collect()
                }),
            })
        })
        .collect();
    hits.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.memory.id.cmp(&b.memory.id))
    });
    if settings.session_diversity > 0.0 {
        hits = crate::policy::fusion::diversify(
            hits,
            plan.limit,
            settings.session_diversity,
            |h| h.score,
            |h| h.memory.session_id.as_ref().map(|s| s.as_str().to_string()),
        );
    } else {
        hits.truncate(plan.limit);
    }
    // What callers see is on 0..1 (the order was decided on the raw score above).
    for hit in &mut hits {
        hit.score = reported_score(hit.score);
    }
    Ok(hits)
}

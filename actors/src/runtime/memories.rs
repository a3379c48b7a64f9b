//! Operations on memories by id: get, list, patch (every change archives the previous
//! state with a reason), delete, forget (archive) and history.

use super::recall::RecallInput;
use super::remember::{embedding_record, embedding_text};
use super::validate::{self, not_found};
use super::Runtime;
use crate::error::{MemoryError, MemoryResult};
use crate::model::{
    apply_patch, version_of, AgentId, Memory, MemoryId, MemoryPatch, MemoryStatus, MemoryVersion,
};
use crate::policy::forget::{self as forget_policy, ForgetReason};
use crate::store::{KeywordQuery, ListQuery};

/// What to forget.
#[derive(Debug, Clone)]
pub enum ForgetTarget {
    /// One memory.
    Id(MemoryId),
    /// Memories a query names (at most `limit`): those holding every word of it, or,
    /// with `min_score`, those recall scores at or above it.
    Query {
        /// The query.
        text: String,
        /// Most memories to forget.
        limit: usize,
        /// Match by recall's score (0..1) instead of by every word.
        min_score: Option<f64>,
    },
}

/// A memory forget archived (or would, on a dry run), and why it matched.
#[derive(Debug, Clone, PartialEq)]
pub struct ForgetMatch {
    /// The memory.
    pub id: MemoryId,
    /// Its text, so a dry run can be read without another request.
    pub content: String,
    /// Why the query named it (`None` when forgotten by id).
    pub reason: Option<ForgetReason>,
}

/// Keyword candidates read for an all-words forget query: the memories holding every
/// word rank first by BM25, so this bounds the work, not the answer, in practice.
const FORGET_CANDIDATES: usize = 1000;

/// One memory, checked against `agent` when one is given (another agent's memory is `not_found`).
pub(super) async fn get(
    rt: &Runtime,
    agent: Option<&AgentId>,
    id: &MemoryId,
) -> MemoryResult<Memory> {
    match rt.actors().episodic.get(id).await? {
        Some(memory) if agent.is_none_or(|a| memory.agent_id == *a) => Ok(memory),
        _ => Err(not_found(id, agent)),
    }
}

/// Browse newest first; returns the page and the cursor of the next page.
pub(super) async fn list(
    rt: &Runtime,
    mut query: ListQuery,
) -> MemoryResult<(Vec<Memory>, Option<MemoryId>)> {
    validate::limit(&rt.inner.config.limits, query.limit)?;
    let page_size = query.limit;
    query.limit = page_size + 1;
    let mut page = rt.actors().episodic.list(&query).await?;
    let next = if page.len() > page_size {
        page.truncate(page_size);
        page.last().map(|m| m.id.clone())
    } else {
        None
    };
    Ok((page, next))
}

/// Check a patch against the limits before anything is read.
fn validate_patch(rt: &Runtime, patch: &MemoryPatch) -> MemoryResult<()> {
    let limits = &rt.inner.config.limits;
    if patch.is_empty() {
        return Err(MemoryError::invalid(
            "body",
            "the patch changes nothing; send at least one field to change",
        ));
    }
    if let Some(content) = &patch.content {
        if content.trim().is_empty() {
            return Err(MemoryError::invalid("content", "content must not be empty"));
        }
        validate::storable_text("content", content)?;
        if content.len() > limits.max_content_bytes {
            return Err(MemoryError::too_large(
                "content",
                format!("content is longer than {} bytes", limits.max_content_bytes),
            ));
        }
    }
    if let Some(Some(title)) = &patch.title {
        validate::storable_text("title", title)?;
    }
    if let Some(importance) = patch.importance {
        if !(0.0..=1.0).contains(&importance) || importance.is_nan() {
            return Err(MemoryError::invalid(
                "importance",
                "importance must be between 0 and 1",
            ));
        }
    }
    if let Some(tags) = &patch.tags {
        validate::tags(tags, limits, "tags")?;
    }
    if let Some(metadata) = &patch.metadata {
        validate::metadata(metadata, limits, "metadata")?;
    }
    Ok(())
}

/// Change a memory, archiving its previous state with `reason` (`update`, `forget`,
/// `conflict_replace`), re-embedding it when its text changed, and keeping the vector
/// index in step with its status, type, sharing and content.
/// Screen a changed memory again, as a write is screened (see `remember::screen`): what
/// is found replaces what its metadata recorded.
pub(super) fn rescreen(
    config: &crate::policy::screening::ScreeningConfig,
    memory: &mut Memory,
) -> MemoryResult<()> {
    use crate::policy::screening::{screen, METADATA_KEY};
    let found = screen(config, &mut memory.content, memory.title.as_mut()).map_err(|kinds| {
        MemoryError::invalid(
            "content",
            format!(
                "the text holds a secret ({}); remove it, or let the server redact it (screening.secrets = \"redact\")",
                kinds.join(", ")
            ),
        )
    })?;
    if let Some(map) = memory.metadata.as_object_mut() {
        map.remove(METADATA_KEY);
        if let Some(found) = found {
            map.insert(METADATA_KEY.to_string(), found);
        }
    }
    Ok(())
}

pub(super) async fn change(
    rt: &Runtime,
    agent: Option<&AgentId>,
    id: &MemoryId,
    patch: MemoryPatch,
    reason: &str,
) -> MemoryResult<Memory> {
    validate_patch(rt, &patch)?;
    let actors = rt.actors();
    let current = get(rt, agent, id).await?;
    let now = rt.now();
    let mut next = apply_patch(&current, &patch, now);
    if patch.content.is_some() || patch.title.is_some() || patch.metadata.is_some() {
        rescreen(&rt.inner.config.screening, &mut next)?;
    }
    let content_changed = next.content != current.content || next.title != current.title;
    let _model_gate = actors.vectors.hold().await;
    let embedding = if content_changed {
        Some(actors.vectors.embed_one(&embedding_text(&next)).await?)
    } else {
        None
    };
    let previous = version_of(&current, reason, now);
    actors
        .episodic
        .update(&next, &previous, embedding.as_deref())
        .await?;
    if next.status == MemoryStatus::Active {
        let vector = match embedding {
            Some(vector) => Some(vector),
            None => actors.episodic.embedding(&next.id).await?,
        };
        if let Some(vector) = vector {
            actors
                .vectors
                .project(&[embedding_record(&next, vector)], &[])
                .await;
        }
    } else {
        actors
            .vectors
            .project(&[], std::slice::from_ref(&next.id))
            .await;
    }
    Ok(next)
}

/// Delete a memory from every store (history included).
pub(super) async fn delete(
    rt: &Runtime,
    agent: Option<&AgentId>,
    id: &MemoryId,
) -> MemoryResult<()> {
    get(rt, agent, id).await?;
    let actors = rt.actors();
    actors.graph.remove_memory(id).await?;
    actors.episodic.delete(id).await?;
    actors.vectors.project(&[], std::slice::from_ref(id)).await;
    Ok(())
}

/// Forget: archive (never delete) one memory or the memories a query names (every
/// word of it, or a recall score ≥ `min_score`). `dry_run` only reports.
pub(super) async fn forget(
    rt: &Runtime,
    agent: &AgentId,
    target: ForgetTarget,
    dry_run: bool,
) -> MemoryResult<Vec<ForgetMatch>> {
    let matches = match target {
        ForgetTarget::Id(id) => {
            let memory = get(rt, Some(agent), &id).await?;
            if memory.status == MemoryStatus::Archived {
                Vec::new()
            } else {
                vec![ForgetMatch {
                    id,
                    content: memory.content,
                    reason: None,
                }]
            }
        }
        ForgetTarget::Query {
            text,
            limit,
            min_score,
        } => {
            validate::query(&rt.inner.config.limits, &text)?;
            validate::limit(&rt.inner.config.limits, limit)?;
            match min_score {
                Some(min_score) => scored_matches(rt, agent, text, limit, min_score).await?,
                None => all_words_matches(rt, agent, text, limit).await?,
            }
        }
    };
    if dry_run {
        return Ok(matches);
    }
    let mut forgotten = Vec::new();
    for found in matches {
        let patch = MemoryPatch {
            status: Some(MemoryStatus::Archived),
            ..Default::default()
        };
        change(rt, Some(agent), &found.id, patch, "forget").await?;
        forgotten.push(found);
    }
    Ok(forgotten)
}

/// The agent's active memories holding every word of `text`, best keyword match first.
async fn all_words_matches(
    rt: &Runtime,
    agent: &AgentId,
    text: String,
    limit: usize,
) -> MemoryResult<Vec<ForgetMatch>> {
    let words = forget_policy::query_words(&text);
    if words.is_empty() {
        return Err(MemoryError::invalid(
            "query",
            "the query holds no searchable word (only stop words or punctuation); name what to forget, or give its id",
        ));
    }
    let query = KeywordQuery {
        agent_id: agent.clone(),
        include_shared: false,
        text,
        limit: FORGET_CANDIDATES,
        occurred: None,
    };
    let candidates: Vec<MemoryId> = rt
        .actors()
        .episodic
        .keyword_search(&query)
        .await?
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    let mut memories = rt.actors().episodic.get_many(&candidates).await?;
    // Keep the keyword ranking: get_many need not answer in order.
    let rank: std::collections::HashMap<&MemoryId, usize> = candidates
        .iter()
        .enumerate()
        .map(|(i, id)| (id, i))
        .collect();
    memories.sort_by_key(|m| rank.get(&m.id).copied().unwrap_or(usize::MAX));
    Ok(memories
        .into_iter()
        .filter(|m| m.agent_id == *agent && m.status == MemoryStatus::Active)
        .filter_map(|m| {
            let searched = match &m.title {
                Some(title) => format!("{title}\n{}", m.content),
                None => m.content.clone(),
            };
            forget_policy::all_terms_match(&words, &searched).map(|reason| ForgetMatch {
                id: m.id,
                content: m.content,
                reason: Some(reason),
            })
        })
        .take(limit)
        .collect())
}

/// The agent's own memories recall scores at or above `min_score`, best first.
async fn scored_matches(
    rt: &Runtime,
    agent: &AgentId,
    text: String,
    limit: usize,
    min_score: f64,
) -> MemoryResult<Vec<ForgetMatch>> {
    let mut input = RecallInput::new(agent.clone(), text);
    input.limit = Some(limit);
    input.include_shared = false;
    let outcome = rt.recall(input).await?;
    Ok(outcome
        .hits
        .into_iter()
        .filter(|hit| {
            hit.score >= min_score
                && hit.memory.agent_id == *agent
                && hit.memory.status == MemoryStatus::Active
        })
        .map(|hit| ForgetMatch {
            id: hit.memory.id,
            content: hit.memory.content,
            reason: Some(ForgetReason::Score {
                score: hit.score,
                min_score,
                matched_by: hit.matched_by.iter().map(|s| s.to_string()).collect(),
            }),
        })
        .collect())
}

/// Version history of a memory, oldest first.
pub(super) async fn history(
    rt: &Runtime,
    agent: Option<&AgentId>,
    id: &MemoryId,
) -> MemoryResult<Vec<MemoryVersion>> {
    get(rt, agent, id).await?;
    rt.actors().episodic.history(id).await
}

//! Inner thought: how the sleep cycle turns a cluster of experiences into knowledge
//! and an idle session into a summary.
//!
//! [`RuleThought`] (provider `none`) works offline and is deterministic: extractive
//! summaries from the sentences nearest the cluster's centroid plus its salient
//! entities. The service adds an OpenAI-compatible provider that asks an LLM for
//! structured output under a hard timeout and falls back to [`RuleThought`] on
//! timeout, error or malformed output; the fallback is reported in [`Thought`].
//! Inner thought only ever proposes text: it cannot delete, forget or archive.

use std::collections::{BTreeMap, HashSet};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::model::{AgentId, MemoryType, SessionId};
use crate::policy::routing::looks_procedural;
use crate::text::{is_stopword, search_terms};

/// One member of a cluster as inner thought sees it.
#[derive(Debug, Clone)]
pub struct DigestMember {
    /// The memory's text.
    pub content: String,
    /// Its tags.
    pub tags: Vec<String>,
    /// When it happened.
    pub occurred_at: DateTime<Utc>,
    /// Cosine similarity to the cluster's centroid (higher: more typical).
    pub centrality: f32,
    /// Its importance, which the abstraction inherits.
    pub importance: f32,
}

/// A cluster handed to inner thought.
#[derive(Debug, Clone)]
pub struct ClusterDigest {
    /// Whose memories.
    pub agent_id: AgentId,
    /// Members in time order.
    pub members: Vec<DigestMember>,
}

/// Lasting knowledge abstracted from a cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Abstraction {
    /// Semantic, or procedural when the cluster is a repeated how-to.
    pub memory_type: MemoryType,
    /// A short title.
    pub title: String,
    /// The knowledge, as a self-contained statement.
    pub content: String,
    /// Tags for the new memory.
    pub tags: Vec<String>,
    /// Importance of the new memory (0..1).
    pub importance: f32,
}

/// An idle session handed to inner thought for its archive summary.
#[derive(Debug, Clone)]
pub struct SessionDigest {
    /// Whose session.
    pub agent_id: AgentId,
    /// Which session.
    pub session_id: SessionId,
    /// Its memories, oldest first: (when, text).
    pub items: Vec<(DateTime<Utc>, String)>,
}

/// An answer of inner thought, with where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Thought<T> {
    /// The answer.
    pub value: T,
    /// Provider that produced it (`none`, `openai`).
    pub provider: &'static str,
    /// Why the configured provider was not used (timeout, error, malformed), if it was not.
    pub fallback: Option<String>,
    /// LLM tokens spent (prompt + completion), 0 offline.
    pub tokens: u64,
}

/// Abstraction and summarisation for the sleep cycle and archival. Infallible by
/// design: a provider that fails answers with its fallback and says so.
#[async_trait]
pub trait InnerThought: Send + Sync + 'static {
    /// Provider name for health and reports.
    fn provider_name(&self) -> &'static str;
    /// Abstract a cluster into one semantic or procedural memory.
    async fn abstract_cluster(&self, cluster: &ClusterDigest) -> Thought<Abstraction>;
    /// Summarise an idle session.
    async fn summarize_session(&self, session: &SessionDigest) -> Thought<String>;
    /// Mine a user/assistant exchange for memories worth keeping (at most `budget`), in
    /// the order said. The default is the offline rules of [`crate::policy::extraction`].
    async fn extract_exchange(
        &self,
        user: &str,
        assistant: &str,
        budget: usize,
    ) -> Thought<Vec<crate::policy::extraction::Candidate>> {
        Thought {
            value: crate::policy::extraction::extract(user, assistant, budget),
            provider: "none",
            fallback: None,
            tokens: 0,
        }
    }
    /// Whether [`InnerThought::name_entities`] asks a model (the entity index then
    /// asks it about every memory, in the background).
    fn names_entities(&self) -> bool {
        false
    }

    /// Who and what `text` names and how they relate, as a model reads it (None: no
    /// model, or it failed, `fallback` saying why: the rules stand alone). What it
    /// says is checked against the text before use ([`crate::policy::model_entities::ground`]).
    async fn name_entities(
        &self,
        text: &str,
    ) -> Thought<Option<crate::policy::model_entities::ModelNamed>> {
        let _ = text;
        Thought {
            value: None,
            provider: "none",
            fallback: None,
            tokens: 0,
        }
    }
}

/// The offline provider (`none`): extractive and rule-based.
#[derive(Debug, Clone, Copy, Default)]
pub struct RuleThought;

/// The first sentence of `text`, trimmed, without its final punctuation.
fn first_sentence(text: &str) -> String {
    let end = text
        .char_indices()
        .find(|&(i, c)| {
            matches!(c, '.' | '!' | '?' | '\n')
                && text[i + c.len_utf8()..]
                    .chars()
                    .next()
                    .is_none_or(char::is_whitespace)
        })
        .map_or(text.len(), |(i, _)| i);
    let sentence = text[..end].trim();
    let mut out: String = sentence.chars().take(240).collect();
    if out.len() < sentence.len() {
        out.push('…');
    }
    out
}

/// Salient entities of several texts: capitalised words that are not sentence starts,
/// then the terms shared by the most texts. At most `limit`, most salient first.
pub fn salient_terms(texts: &[&str], limit: usize) -> Vec<String> {
    let mut names: BTreeMap<String, usize> = BTreeMap::new();
    let mut document_frequency: BTreeMap<String, usize> = BTreeMap::new();
    for text in texts {
        let mut seen_names = HashSet::new();
        let mut at_sentence_start = true;
        for raw in text.split_whitespace() {
            let word = raw.trim_matches(|c: char| !c.is_alphanumeric());
            let starts_upper = word.chars().next().is_some_and(char::is_uppercase);
            if !at_sentence_start
                && starts_upper
                && word.len() > 1
                && !is_stopword(&word.to_lowercase())
                && seen_names.insert(word.to_string())
            {
                *names.entry(word.to_string()).or_default() += 1;
            }
            at_sentence_start = raw.ends_with(['.', '!', '?', ':']);
        }
        let unique: HashSet<String> = search_terms(text)
            .into_iter()
            .filter(|t| t.chars().count() > 2 && !t.chars().all(|c| c.is_ascii_digit()))
            .collect();
        for term in unique {
            *document_frequency.entry(term).or_default() += 1;
        }
    }
    let mut ranked_names: Vec<(String, usize)> = names.into_iter().collect();
    ranked_names.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let mut ranked_terms: Vec<(String, usize)> = document_frequency
        .into_iter()
        .filter(|(_, n)| *n >= 2 || texts.len() == 1)
        .collect();
    ranked_terms.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let mut out: Vec<String> = Vec::new();
    for term in ranked_names
        .into_iter()
        .map(|(t, _)| t)
        .chain(ranked_terms.into_iter().map(|(t, _)| t))
    {
        if out.iter().any(|o| o.eq_ignore_ascii_case(&term)) {
            continue;
        }
        out.push(term);
        if out.len() == limit {
            break;
        }
    }
    out
}

fn span(from: DateTime<Utc>, to: DateTime<Utc>) -> String {
    let (a, b) = (from.format("%Y-%m-%d"), to.format("%Y-%m-%d"));
    if a.to_string() == b.to_string() {
        a.to_string()
    } else {
        format!("{a} to {b}")
    }
}

impl RuleThought {
    /// The offline abstraction of a cluster (also the fallback of every other provider).
    pub fn abstraction(cluster: &ClusterDigest) -> Abstraction {
        let members = &cluster.members;
        let texts: Vec<&str> = members.iter().map(|m| m.content.as_str()).collect();
        let procedural = members.len() >= 2
            && members
                .iter()
                .filter(|m| looks_procedural(&m.content))
                .count()
                * 2
                >= members.len();
        let mut by_centrality: Vec<&DigestMember> = members.iter().collect();
        by_centrality.sort_by(|a, b| b.centrality.total_cmp(&a.centrality));
        let mut sentences: Vec<String> = Vec::new();
        for member in by_centrality {
            let sentence = first_sentence(&member.content);
            if !sentence.is_empty() && !sentences.iter().any(|s| s.eq_ignore_ascii_case(&sentence))
            {
                sentences.push(sentence);
            }
            if sentences.len() == 3 {
                break;
            }
        }
        let terms = salient_terms(&texts, 8);
        let (first, last) = (
            members
                .iter()
                .map(|m| m.occurred_at)
                .min()
                .unwrap_or_default(),
            members
                .iter()
                .map(|m| m.occurred_at)
                .max()
                .unwrap_or_default(),
        );
        let lead = if procedural {
            "Repeated procedure"
        } else {
            "Recurring theme"
        };
        let mut content = format!(
            "{lead} across {} memories ({}): {}.",
            members.len(),
            span(first, last),
            sentences.join("; ")
        );
        if !terms.is_empty() {
            content.push_str(&format!(" Key terms: {}.", terms.join(", ")));
        }
        let mut tag_counts: BTreeMap<&str, usize> = BTreeMap::new();
        for member in members {
            for tag in &member.tags {
                *tag_counts.entry(tag.as_str()).or_default() += 1;
            }
        }
        let mut tags: Vec<String> = tag_counts
            .into_iter()
            .filter(|(_, n)| n * 2 >= members.len())
            .map(|(t, _)| t.to_string())
            .collect();
        tags.push("consolidated".to_string());
        let title = if terms.is_empty() {
            lead.to_string()
        } else {
            format!(
                "{lead}: {}",
                terms.iter().take(3).cloned().collect::<Vec<_>>().join(", ")
            )
        };
        Abstraction {
            memory_type: if procedural {
                MemoryType::Procedural
            } else {
                MemoryType::Semantic
            },
            title,
            content,
            tags,
            importance: members
                .iter()
                .map(|m| m.importance)
                .fold(0.0f32, f32::max)
                .clamp(0.0, 1.0),
        }
    }

    /// The offline summary of a session: its first turn, its most salient turns and its last.
    pub fn summary(session: &SessionDigest) -> String {
        let items = &session.items;
        let (Some(first), Some(last)) = (items.first(), items.last()) else {
            return format!("Session {} held no memories.", session.session_id.as_str());
        };
        let texts: Vec<&str> = items.iter().map(|(_, t)| t.as_str()).collect();
        let terms = salient_terms(&texts, 8);
        let mut picked: Vec<usize> = vec![0];
        let mut scored: Vec<(usize, usize)> = items
            .iter()
            .enumerate()
            .skip(1)
            .take(items.len().saturating_sub(2))
            .map(|(i, (_, text))| {
                let lower = text.to_lowercase();
                (
                    i,
                    terms
                        .iter()
                        .filter(|t| lower.contains(&t.to_lowercase()))
                        .count(),
                )
            })
            .collect();
        scored.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        picked.extend(scored.into_iter().take(3).map(|(i, _)| i));
        if items.len() > 1 {
            picked.push(items.len() - 1);
        }
        picked.sort_unstable();
        picked.dedup();
        let sentences: Vec<String> = picked
            .iter()
            .map(|&i| first_sentence(&items[i].1))
            .collect();
        let mut out = format!(
            "Session {} ({} memories, {}): {}.",
            session.session_id.as_str(),
            items.len(),
            span(first.0, last.0),
            sentences.join(" … ")
        );
        if !terms.is_empty() {
            out.push_str(&format!(" Topics: {}.", terms.join(", ")));
        }
        out
    }
}

#[async_trait]
impl InnerThought for RuleThought {
    fn provider_name(&self) -> &'static str {
        "none"
    }

    async fn abstract_cluster(&self, cluster: &ClusterDigest) -> Thought<Abstraction> {
        Thought {
            value: Self::abstraction(cluster),
            provider: "none",
            fallback: None,
            tokens: 0,
        }
    }

    async fn summarize_session(&self, session: &SessionDigest) -> Thought<String> {
        Thought {
            value: Self::summary(session),
            provider: "none",
            fallback: None,
            tokens: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Duration;

    fn member(text: &str, centrality: f32, at: DateTime<Utc>) -> DigestMember {
        DigestMember {
            content: text.to_string(),
            tags: vec!["travel".into()],
            occurred_at: at,
            centrality,
            importance: 0.4,
        }
    }

    #[test]
    fn abstraction_is_extractive_and_names_entities() {
        let now = Utc::now();
        let cluster = ClusterDigest {
            agent_id: AgentId::parse("a").unwrap(),
            members: vec![
                member("We flew to Lisbon for the conference. It rained.", 0.9, now),
                member(
                    "The Lisbon trip had great food.",
                    0.8,
                    now + Duration::days(1),
                ),
                member(
                    "Back from Lisbon, tired but happy.",
                    0.7,
                    now + Duration::days(2),
                ),
            ],
        };
        let abstraction = RuleThought::abstraction(&cluster);
        assert_eq!(abstraction.memory_type, MemoryType::Semantic);
        assert!(
            abstraction
                .content
                .contains("We flew to Lisbon for the conference"),
            "{}",
            abstraction.content
        );
        assert!(!abstraction.content.contains("It rained"));
        assert!(
            abstraction.content.contains("Key terms: Lisbon"),
            "{}",
            abstraction.content
        );
        assert!(abstraction.tags.contains(&"travel".to_string()));
        assert!(abstraction.tags.contains(&"consolidated".to_string()));
    }

    #[test]
    fn a_repeated_how_to_becomes_procedural() {
        let now = Utc::now();
        let cluster = ClusterDigest {
            agent_id: AgentId::parse("a").unwrap(),
            members: vec![
                member(
                    "Deploy the api: first build the image, then push it",
                    0.9,
                    now,
                ),
                member(
                    "I fixed the outage by running the migration again",
                    0.8,
                    now,
                ),
                member("Restart the worker after every deploy", 0.7, now),
            ],
        };
        assert_eq!(
            RuleThought::abstraction(&cluster).memory_type,
            MemoryType::Procedural
        );
    }

    #[test]
    fn session_summary_keeps_first_and_last_turns() {
        let now = Utc::now();
        let session = SessionDigest {
            agent_id: AgentId::parse("a").unwrap(),
            session_id: SessionId::parse("s1").unwrap(),
            items: (0..6)
                .map(|i| (now + Duration::minutes(i), format!("Turn {i} about Rust.")))
                .collect(),
        };
        let summary = RuleThought::summary(&session);
        assert!(summary.starts_with("Session s1 (6 memories"), "{summary}");
        assert!(summary.contains("Turn 0 about Rust") && summary.contains("Turn 5 about Rust"));
        assert!(summary.contains("Topics: Rust"), "{summary}");
    }
}

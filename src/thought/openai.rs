//! The `openai` inner-thought provider: any OpenAI-compatible chat API (OpenAI,
//! Ollama, vLLM, llama.cpp's server) through async-openai.
//!
//! Every call asks for json_schema structured output, runs under a hard timeout
//! (`inner_thought.timeout_ms`) and is validated; on timeout, transport error or
//! malformed output the offline [`RuleThought`] answers instead and the fallback is
//! reported (run report, `mnemos_llm_calls_total{outcome}`). Token usage is counted in
//! `mnemos_llm_tokens_total`. The model proposes text and types only: nothing it says
//! deletes or archives a memory.

use std::time::Duration;

use async_openai::config::OpenAIConfig;
use async_openai::types::chat::{
    ChatCompletionRequestMessage, ChatCompletionRequestSystemMessage,
    ChatCompletionRequestUserMessage, CreateChatCompletionRequest, ResponseFormat,
    ResponseFormatJsonSchema,
};
use async_openai::Client;
use async_trait::async_trait;
use mnemos_actors::arbiter::Arbiter;
use mnemos_actors::model::MemoryType;
use mnemos_actors::policy::extraction::{self, Candidate, ExtractionKind, Speaker};
use mnemos_actors::policy::model_entities::{ModelNamed, MODEL_ATTRIBUTES, MODEL_KINDS};
use mnemos_actors::thought::{
    Abstraction, ClusterDigest, InnerThought, RuleThought, SessionDigest, Thought,
};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::json;

use crate::config::InnerThoughtSettings;

/// Longest text of one member or turn put into a prompt, in characters.
const MAX_ITEM_CHARS: usize = 400;
/// Most members or turns put into one prompt.
const MAX_ITEMS: usize = 24;

/// The OpenAI-compatible provider, with the offline rules as its fallback.
#[derive(Clone)]
pub struct OpenAiThought {
    /// The API client (base URL and key from settings).
    client: Client<OpenAIConfig>,
    /// Model name.
    model: String,
    /// Hard timeout of one call.
    timeout: Duration,
    /// Most generated tokens per call.
    max_tokens: u32,
    /// Sampling temperature.
    temperature: f32,
    /// Whether the entity index asks this model about every memory.
    entities: bool,
}

/// Why a call's answer was not used.
#[derive(Debug)]
enum CallFailure {
    /// No answer within the timeout.
    Timeout,
    /// The server or the connection failed.
    Error(String),
    /// The answer did not match the schema.
    Malformed(String),
}

impl CallFailure {
    fn outcome(&self) -> &'static str {
        match self {
            CallFailure::Timeout => "timeout",
            CallFailure::Error(_) => "error",
            CallFailure::Malformed(_) => "malformed",
        }
    }

    fn describe(&self, timeout: Duration) -> String {
        match self {
            CallFailure::Timeout => format!("timeout after {} ms", timeout.as_millis()),
            CallFailure::Error(e) => format!("error: {e}"),
            CallFailure::Malformed(e) => format!("malformed answer: {e}"),
        }
    }
}

fn clip(text: &str) -> String {
    clip_to(text, MAX_ITEM_CHARS)
}

/// `text` cut to `max_chars` characters, marked with an ellipsis when cut.
fn clip_to(text: &str, max_chars: usize) -> String {
    let mut out: String = text.chars().take(max_chars).collect();
    if out.len() < text.len() {
        out.push('…');
    }
    out
}

/// The model's abstraction of a cluster.
#[derive(Debug, Deserialize)]
struct AbstractionAnswer {
    /// `semantic` or `procedural`.
    kind: String,
    /// Short title.
    title: String,
    /// The knowledge.
    content: String,
}

/// The model's summary of a session.
#[derive(Debug, Deserialize)]
struct SummaryAnswer {
    /// The summary.
    summary: String,
}

impl OpenAiThought {
    /// A client for `settings` (provider `openai`, validated).
    pub fn new(settings: &InnerThoughtSettings) -> Self {
        let mut config = OpenAIConfig::new().with_api_base(settings.base_url.trim_end_matches('/'));
        let key = if settings.api_key.is_empty() {
            std::env::var("OPENAI_API_KEY").unwrap_or_default()
        } else {
            settings.api_key.clone()
        };
        config = config.with_api_key(key);
        Self {
            client: Client::with_config(config),
            model: settings.model.clone(),
            timeout: Duration::from_millis(settings.timeout_ms),
            max_tokens: settings.max_tokens,
            temperature: settings.temperature,
            entities: settings.entities,
        }
    }

    /// One structured call: returns the parsed answer and the tokens spent.
    async fn ask<T: DeserializeOwned>(
        &self,
        purpose: &'static str,
        system: &str,
        user: String,
        schema: serde_json::Value,
    ) -> Result<(T, u64), CallFailure> {
        // `max_tokens` (deprecated by OpenAI in favour of `max_completion_tokens`) is the
        // field every OpenAI-compatible server (llama.cpp, Ollama, vLLM) understands.
        #[allow(deprecated)]
        let request = CreateChatCompletionRequest {
            model: self.model.clone(),
            messages: vec![
                ChatCompletionRequestMessage::System(ChatCompletionRequestSystemMessage {
                    content: system.into(),
                    name: None,
                }),
                ChatCompletionRequestMessage::User(ChatCompletionRequestUserMessage {
                    content: user.into(),
                    name: None,
                }),
            ],
            max_tokens: Some(self.max_tokens),
            temperature: Some(self.temperature),
            response_format: Some(ResponseFormat::JsonSchema {
                json_schema: ResponseFormatJsonSchema {
                    description: None,
                    name: purpose.to_string(),
                    schema,
                    strict: Some(true),
                },
            }),
            ..Default::default()
        };
        let started = std::time::Instant::now();
        let result = tokio::time::timeout(self.timeout, self.client.chat().create(request)).await;
        metrics::histogram!("mnemos_llm_call_seconds", "purpose" => purpose)
            .record(started.elapsed().as_secs_f64());
        let answer = match result {
            Err(_) => Err(CallFailure::Timeout),
            Ok(Err(error)) => Err(CallFailure::Error(error.to_string())),
            Ok(Ok(response)) => {
                let tokens = response.usage.as_ref().map_or(0, |u| {
                    metrics::counter!("mnemos_llm_tokens_total", "kind" => "prompt", "purpose" => purpose)
                        .increment(u64::from(u.prompt_tokens));
                    metrics::counter!("mnemos_llm_tokens_total", "kind" => "completion", "purpose" => purpose)
                        .increment(u64::from(u.completion_tokens));
                    u64::from(u.total_tokens)
                });
                let text = response
                    .choices
                    .first()
                    .and_then(|c| c.message.content.clone())
                    .unwrap_or_default();
                serde_json::from_str::<T>(text.trim())
                    .map(|parsed| (parsed, tokens))
                    .map_err(|e| CallFailure::Malformed(format!("{e} in {:?}", clip(&text))))
            }
        };
        let outcome = match &answer {
            Ok(_) => "ok",
            Err(failure) => failure.outcome(),
        };
        metrics::counter!("mnemos_llm_calls_total", "purpose" => purpose, "outcome" => outcome)
            .increment(1);
        if let Err(failure) = &answer {
            tracing::warn!(purpose, reason = %failure.describe(self.timeout), "inner thought fell back to rules");
        }
        answer
    }
}

fn validated(text: &str, field: &str, max_chars: usize) -> Result<String, CallFailure> {
    let text = text.trim();
    if text.is_empty() {
        return Err(CallFailure::Malformed(format!("empty {field}")));
    }
    if text.chars().count() > max_chars {
        return Err(CallFailure::Malformed(format!(
            "{field} longer than {max_chars} characters"
        )));
    }
    Ok(text.to_string())
}

#[async_trait]
impl InnerThought for OpenAiThought {
    fn provider_name(&self) -> &'static str {
        "openai"
    }

    fn names_entities(&self) -> bool {
        self.entities
    }

    async fn name_entities(&self, text: &str) -> Thought<Option<ModelNamed>> {
        let kinds: Vec<&str> = MODEL_KINDS.iter().map(|k| k.as_str()).collect();
        let schema = json!({
            "type": "object",
            "properties": {
                "entities": {
                    "type": "array",
                    "maxItems": 10,
                    "items": {
                        "type": "object",
                        "properties": {
                            "name": { "type": "string", "minLength": 1, "maxLength": 80 },
                            "kind": { "type": "string", "enum": kinds }
                        },
                        "required": ["name", "kind"],
                        "additionalProperties": false
                    }
                },
                "relations": {
                    "type": "array",
                    "maxItems": 5,
                    "items": {
                        "type": "object",
                        "properties": {
                            "subject": { "type": "string", "minLength": 1, "maxLength": 80 },
                            "attribute": { "type": "string", "enum": MODEL_ATTRIBUTES },
                            "value": { "type": "string", "minLength": 1, "maxLength": 80 },
                            "ends": { "type": "boolean" }
                        },
                        "required": ["subject", "attribute", "value", "ends"],
                        "additionalProperties": false
                    }
                }
            },
            "required": ["entities", "relations"],
            "additionalProperties": false
        });
        let answer = self
            .ask::<ModelNamed>(
                "name_entities",
                "You list who and what a short text names: people, organisations, places, products, \
                 titles of works, and other proper names, each written exactly as in the text. Then the \
                 relationships the text states between two of those names, with one of the given \
                 attributes (ends is true when the text says the relationship is over). List only what \
                 the text says; an empty list is a good answer. Answer with JSON only.",
                clip_to(text, 4000),
                schema,
            )
            .await;
        match answer {
            Ok((value, tokens)) => Thought {
                value: Some(value),
                provider: "openai",
                fallback: None,
                tokens,
            },
            Err(failure) => Thought {
                value: None,
                provider: "none",
                fallback: Some(failure.describe(self.timeout)),
                tokens: 0,
            },
        }
    }

    async fn abstract_cluster(&self, cluster: &ClusterDigest) -> Thought<Abstraction> {
        let rules = RuleThought::abstraction(cluster);
        let listing: String = cluster
            .members
            .iter()
            .take(MAX_ITEMS)
            .map(|m| {
                format!(
                    "- [{}] {}\n",
                    m.occurred_at.format("%Y-%m-%d"),
                    clip(&m.content)
                )
            })
            .collect();
        let schema = json!({
            "type": "object",
            "properties": {
                "kind": { "type": "string", "enum": ["semantic", "procedural"] },
                "title": { "type": "string", "minLength": 1, "maxLength": 80 },
                "content": { "type": "string", "minLength": 1, "maxLength": 400 }
            },
            "required": ["kind", "title", "content"],
            "additionalProperties": false
        });
        let answer = self
            .ask::<AbstractionAnswer>(
                "abstract_cluster",
                "You consolidate an agent's related memories into one lasting piece of knowledge. \
                 Answer with JSON only. kind is \"procedural\" when the memories repeat how to do something, \
                 otherwise \"semantic\". content is one or two self-contained sentences stating what is true or how to do it.",
                format!("Related memories:\n{listing}"),
                schema,
            )
            .await
            .and_then(|(answer, tokens)| {
                let memory_type = match answer.kind.as_str() {
                    "semantic" => MemoryType::Semantic,
                    "procedural" => MemoryType::Procedural,
                    other => return Err(CallFailure::Malformed(format!("kind {other:?}"))),
                };
                Ok((
                    Abstraction {
                        memory_type,
                        title: validated(&answer.title, "title", 200)?,
                        content: validated(&answer.content, "content", 4000)?,
                        tags: rules.tags.clone(),
                        importance: rules.importance,
                    },
                    tokens,
                ))
            });
        match answer {
            Ok((value, tokens)) => Thought {
                value,
                provider: "openai",
                fallback: None,
                tokens,
            },
            Err(failure) => Thought {
                value: rules,
                provider: "none",
                fallback: Some(failure.describe(self.timeout)),
                tokens: 0,
            },
        }
    }

    async fn extract_exchange(
        &self,
        user: &str,
        assistant: &str,
        budget: usize,
    ) -> Thought<Vec<Candidate>> {
        let schema = json!({
            "type": "object",
            "properties": {
                "memories": {
                    "type": "array",
                    "maxItems": budget,
                    "items": {
                        "type": "object",
                        "properties": {
                            "kind": { "type": "string", "enum": ["preference", "fact", "decision", "procedure"] },
                            "content": { "type": "string", "minLength": 1, "maxLength": 240 },
                            "speaker": { "type": "string", "enum": ["user", "assistant"] }
                        },
                        "required": ["kind", "content", "speaker"],
                        "additionalProperties": false
                    }
                }
            },
            "required": ["memories"],
            "additionalProperties": false
        });
        let answer = self
            .ask::<ExtractionAnswer>(
                "extract_turn",
                "You pick what an assistant should remember long-term from one exchange: the user's \
                 preferences, facts about the user or their work, decisions taken, and procedures (how to \
                 do something, as steps). Each memory is one self-contained sentence in the third person \
                 (\"The user prefers ...\"). Skip greetings, questions and small talk; an exchange with \
                 nothing lasting gives an empty list. Answer with JSON only.",
                format!(
                    "User: {}\n\nAssistant: {}",
                    clip_to(user, 4000),
                    clip_to(assistant, 4000)
                ),
                schema,
            )
            .await
            .and_then(|(answer, tokens)| Ok((Self::candidates(answer, budget)?, tokens)));
        match answer {
            Ok((value, tokens)) => Thought {
                value,
                provider: "openai",
                fallback: None,
                tokens,
            },
            Err(failure) => Thought {
                value: extraction::extract(user, assistant, budget),
                provider: "none",
                fallback: Some(failure.describe(self.timeout)),
                tokens: 0,
            },
        }
    }

    async fn summarize_session(&self, session: &SessionDigest) -> Thought<String> {
        let listing: String = session
            .items
            .iter()
            .take(MAX_ITEMS)
            .map(|(at, text)| format!("- [{}] {}\n", at.format("%Y-%m-%d %H:%M"), clip(text)))
            .collect();
        let schema = json!({
            "type": "object",
            "properties": { "summary": { "type": "string", "minLength": 1, "maxLength": 600 } },
            "required": ["summary"],
            "additionalProperties": false
        });
        let answer = self
            .ask::<SummaryAnswer>(
                "summarize_session",
                "You summarise an agent's finished conversation session for its long-term memory. \
                 Answer with JSON only: a factual summary of what happened and what was decided.",
                format!("Session {}:\n{listing}", session.session_id.as_str()),
                schema,
            )
            .await
            .and_then(|(answer, tokens)| {
                Ok((validated(&answer.summary, "summary", 4000)?, tokens))
            });
        match answer {
            Ok((summary, tokens)) => Thought {
                value: format!("Session {} summary: {summary}", session.session_id.as_str()),
                provider: "openai",
                fallback: None,
                tokens,
            },
            Err(failure) => Thought {
                value: RuleThought::summary(session),
                provider: "none",
                fallback: Some(failure.describe(self.timeout)),
                tokens: 0,
            },
        }
    }
}

/// One memory the model found in an exchange.
#[derive(Debug, Deserialize)]
struct ExtractedAnswer {
    /// preference | fact | decision | procedure.
    kind: String,
    /// Standalone text.
    content: String,
    /// user | assistant.
    speaker: String,
}

/// The model's extraction of an exchange.
#[derive(Debug, Deserialize)]
struct ExtractionAnswer {
    /// What is worth keeping, in the order said.
    memories: Vec<ExtractedAnswer>,
}

impl OpenAiThought {
    /// Candidates from the model's answer; an unknown kind or speaker, or empty text, makes the whole answer malformed.
    fn candidates(answer: ExtractionAnswer, budget: usize) -> Result<Vec<Candidate>, CallFailure> {
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::new();
        for item in answer.memories.into_iter().take(budget) {
            let kind = match item.kind.as_str() {
                "preference" => ExtractionKind::Preference,
                "fact" => ExtractionKind::Fact,
                "decision" => ExtractionKind::Decision,
                "procedure" => ExtractionKind::Procedure,
                other => return Err(CallFailure::Malformed(format!("unknown kind {other:?}"))),
            };
            let speaker = match item.speaker.as_str() {
                "user" => Speaker::User,
                "assistant" => Speaker::Assistant,
                other => return Err(CallFailure::Malformed(format!("unknown speaker {other:?}"))),
            };
            let content = validated(&item.content, "content", 1000)?;
            if !seen.insert(mnemos_actors::policy::consistency::normalized_hash(
                &content,
            )) {
                continue;
            }
            out.push(Candidate {
                kind,
                memory_type: kind.memory_type(),
                content,
                tags: vec![kind.tag().to_string()],
                reason: "llm".into(),
                speaker,
            });
        }
        Ok(out)
    }
}

/// The model's choice of type.
#[derive(Debug, Deserialize)]
struct RouteAnswer {
    /// Chosen type name.
    memory_type: String,
}

/// The model's contradiction verdict.
#[derive(Debug, Deserialize)]
struct ContradictionAnswer {
    /// True when the new statement replaces the old one.
    contradicts: bool,
}

#[async_trait]
impl Arbiter for OpenAiThought {
    async fn route(&self, text: &str, candidates: &[MemoryType]) -> Option<MemoryType> {
        let names: Vec<&str> = candidates.iter().map(|t| t.as_str()).collect();
        let schema = json!({
            "type": "object",
            "properties": { "memory_type": { "type": "string", "enum": names } },
            "required": ["memory_type"],
            "additionalProperties": false
        });
        let (answer, _) = self
            .ask::<RouteAnswer>(
                "route",
                "Classify a memory of an AI agent. semantic: a lasting fact; procedural: how to do something; \
                 episodic: something that happened; affective: a feeling; working: a transient note. Answer with JSON only.",
                clip(text),
                schema,
            )
            .await
            .ok()?;
        candidates
            .iter()
            .copied()
            .find(|t| t.as_str() == answer.memory_type)
    }

    async fn contradicts(&self, old: &str, new: &str) -> Option<bool> {
        let schema = json!({
            "type": "object",
            "properties": { "contradicts": { "type": "boolean" } },
            "required": ["contradicts"],
            "additionalProperties": false
        });
        self.ask::<ContradictionAnswer>(
            "contradicts",
            "Does the NEW statement replace the OLD one (the same attribute now has a different value, or the old one is no longer true)? Answer with JSON only.",
            format!("OLD: {}\nNEW: {}", clip(old), clip(new)),
            schema,
        )
        .await
        .ok()
        .map(|(answer, _)| answer.contradicts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(items: &[(&str, &str, &str)]) -> ExtractionAnswer {
        ExtractionAnswer {
            memories: items
                .iter()
                .map(|(kind, content, speaker)| ExtractedAnswer {
                    kind: kind.to_string(),
                    content: content.to_string(),
                    speaker: speaker.to_string(),
                })
                .collect(),
        }
    }

    #[test]
    fn extracted_memories_get_their_kind_type_and_tag_within_budget() {
        let candidates = OpenAiThought::candidates(
            answer(&[
                ("preference", "The user prefers PostgreSQL.", "user"),
                ("procedure", "To deploy, run make deploy.", "assistant"),
                ("preference", "the user prefers postgresql", "user"),
                ("fact", "The user lives in Lyon.", "user"),
            ]),
            3,
        )
        .unwrap();
        // The repeat (same normalised text) is dropped; the budget cuts the rest.
        assert_eq!(candidates.len(), 2);
        assert_eq!(candidates[0].memory_type, MemoryType::Semantic);
        assert_eq!(candidates[0].tags, ["preference"]);
        assert_eq!(candidates[1].memory_type, MemoryType::Procedural);
        assert_eq!(candidates[1].speaker, Speaker::Assistant);
        assert_eq!(candidates[1].reason, "llm");
    }

    #[test]
    fn an_unknown_kind_or_empty_text_makes_the_answer_malformed() {
        assert!(OpenAiThought::candidates(answer(&[("gossip", "x", "user")]), 8).is_err());
        assert!(OpenAiThought::candidates(answer(&[("fact", "x", "narrator")]), 8).is_err());
        assert!(OpenAiThought::candidates(answer(&[("fact", "  ", "user")]), 8).is_err());
    }
}

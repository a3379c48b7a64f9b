//! Sessions on the runtime handle: a durable message log per (agent, session), its live
//! window, background extraction of each exchange, and compaction (a summary replaces
//! the window; the compacted history becomes an episodic memory tagged `archive_summary`).

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::remember::{embedding_record, embedding_text};
use super::Runtime;
use crate::actors::consolidator::ARCHIVE_SUMMARY_TAG;
use crate::error::{MemoryError, MemoryResult};
use crate::model::{
    AgentId, Memory, MemoryId, MemoryStatus, MemoryType, MessageRole, SessionId, SessionMessage,
    SessionRecord,
};
use crate::policy::session::{
    archive_text, cap_summary, live_window, message_tokens, needs_compaction, session_tokens,
    summary_budget, summary_items,
};
use crate::store::{SessionCompaction, StoredMemory};
use crate::thought::SessionDigest;

/// Tag of the archive memories written by session compaction (besides `archive_summary`).
pub const SESSION_COMPACTION_TAG: &str = "session_compaction";

/// One message to add to a session.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionMessageInput {
    /// Who wrote it.
    pub role: MessageRole,
    /// Its text.
    pub content: String,
    /// When it was said (default: now).
    pub at: Option<DateTime<Utc>>,
}

/// A session as a caller sees it: its live window and where it stands against its budget.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionView {
    /// Whose session.
    pub agent_id: AgentId,
    /// Which session.
    pub session_id: SessionId,
    /// Summary of the compacted part of the conversation, when still live; it comes
    /// before `messages` in a model's context.
    pub summary: Option<String>,
    /// The live window: the newest uncompacted messages, oldest first.
    pub messages: Vec<SessionMessage>,
    /// Live messages older than the window (still in the log, not returned).
    pub beyond_window: usize,
    /// True when the session has been idle past `sessions.ttl_seconds`.
    pub expired: bool,
    /// Messages ever posted.
    pub total_messages: u64,
    /// Messages up to this sequence number are compacted.
    pub compacted_through: u64,
    /// Compactions so far.
    pub compactions: u32,
    /// Estimated tokens of summary + uncompacted messages.
    pub tokens: u64,
    /// The context size the session is budgeted against (`sessions.context_tokens`).
    pub context_tokens: u64,
    /// Compaction starts past this many tokens.
    pub compact_at_tokens: u64,
    /// When the newest message was said.
    pub last_message_at: Option<DateTime<Utc>>,
}

/// The answer to posting messages.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PostedMessages {
    /// The messages as stored (with their sequence numbers).
    pub messages: Vec<SessionMessage>,
    /// The session after the post.
    pub session: SessionView,
    /// A compaction was started in the background (threshold passed or a conversation ended).
    pub compaction_scheduled: bool,
    /// Exchanges handed to extract_turn in the background.
    pub extractions_scheduled: usize,
}

/// What one compaction did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompactionReport {
    /// Whose session.
    pub agent_id: AgentId,
    /// Which session.
    pub session_id: SessionId,
    /// False when there was nothing to compact or another compaction got there first.
    pub compacted: bool,
    /// Why nothing was compacted, if nothing was.
    pub reason: Option<String>,
    /// The archive memory holding the compacted history.
    pub archive_id: Option<MemoryId>,
    /// Messages compacted.
    pub messages: usize,
    /// Messages up to this sequence number are now compacted.
    pub compacted_through: u64,
    /// The summary that replaces them.
    pub summary: Option<String>,
    /// Estimated session tokens before and after.
    pub tokens_before: u64,
    /// Estimated session tokens after (summary + what was not compacted).
    pub tokens_after: u64,
    /// Inner-thought provider that wrote the summary.
    pub inner_thought: &'static str,
    /// Why the configured provider was not used, if it was not.
    pub fallback: Option<String>,
}

impl Runtime {
    /// [`Runtime::post_session_messages`]: validate, append each message, then schedule
    /// the background work.
    pub(super) async fn post_messages(
        &self,
        agent: &AgentId,
        session: &SessionId,
        inputs: Vec<SessionMessageInput>,
    ) -> MemoryResult<PostedMessages> {
        let limits = &self.inner.config.limits;
        if inputs.is_empty() {
            return Err(MemoryError::invalid(
                "messages",
                "give at least one message ({\"role\", \"content\"})",
            ));
        }
        if inputs.len() > limits.max_batch {
            return Err(MemoryError::too_large(
                "messages",
                format!(
                    "{} messages in one request; the limit is {} (limits.max_batch)",
                    inputs.len(),
                    limits.max_batch
                ),
            ));
        }
        for (index, input) in inputs.iter().enumerate() {
            if let Some(at) = input.at {
                crate::model::check_instant(&format!("messages[{index}].at"), at)?;
            }
            let field = format!("messages[{index}].content");
            if input.content.trim().is_empty() {
                return Err(MemoryError::invalid(&field, "a message needs some content"));
            }
            super::validate::storable_text(&field, &input.content)?;
            if input.content.len() > limits.max_content_bytes {
                return Err(MemoryError::too_large(
                    &field,
                    format!(
                        "content is {} bytes; the limit is {} (limits.max_content_bytes)",
                        input.content.len(),
                        limits.max_content_bytes
                    ),
                ));
            }
        }
        let now = self.now();
        let mut stored = Vec::with_capacity(inputs.len());
        for input in inputs {
            let tokens = message_tokens(&input.content);
            let message = self
                .actors()
                .episodic
                .append_message(
                    agent,
                    session,
                    input.role,
                    &input.content,
                    tokens,
                    input.at.unwrap_or(now),
                )
                .await?;
            stored.push(message);
        }
        let (record, pending) = self.session_log(agent, session).await?.ok_or_else(|| {
            MemoryError::internal("a session vanished right after a message was stored")
        })?;
        let settings = &self.inner.config.sessions;

        // Exchanges: each new assistant message answering the user message just before it.
        let mut extractions = 0;
        if settings.extract {
            for message in stored.iter().filter(|m| m.role == MessageRole::Assistant) {
                let previous = pending
                    .iter()
                    .find(|m| m.seq + 1 == message.seq)
                    .or_else(|| stored.iter().find(|m| m.seq + 1 == message.seq));
                if let Some(user) = previous.filter(|m| m.role == MessageRole::User) {
                    self.extract_in_background(
                        agent.clone(),
                        Some(session.clone()),
                        user.content.clone(),
                        message.content.clone(),
                    );
                    extractions += 1;
                }
            }
        }

        let live = live_window(&record, &pending, self.now(), settings);
        let through = if needs_compaction(&record, settings) {
            Some(record.last_seq)
        } else {
            live.stale_through
        };
        let scheduled = match through {
            Some(through) => self.compact_in_background(agent, session, through),
            None => false,
        };
        Ok(PostedMessages {
            messages: stored,
            session: self.view_of(&record, &pending),
            compaction_scheduled: scheduled,
            extractions_scheduled: extractions,
        })
    }

    /// [`Runtime::session`]: the view, and a background compaction of an ended conversation.
    pub(super) async fn view(
        &self,
        agent: &AgentId,
        session: &SessionId,
    ) -> MemoryResult<SessionView> {
        let (record, pending) = self
            .session_log(agent, session)
            .await?
            .ok_or_else(|| session_not_found(agent, session))?;
        let view = self.view_of(&record, &pending);
        if let Some(through) =
            live_window(&record, &pending, self.now(), &self.inner.config.sessions).stale_through
        {
            self.compact_in_background(agent, session, through);
        }
        Ok(view)
    }

    /// [`Runtime::compact_session`]: summarise, commit the archive with the mark, index it.
    pub(super) async fn compact(
        &self,
        agent: &AgentId,
        session: &SessionId,
        through: Option<u64>,
    ) -> MemoryResult<CompactionReport> {
        let (record, pending) = self
            .session_log(agent, session)
            .await?
            .ok_or_else(|| session_not_found(agent, session))?;
        let through = through.unwrap_or(record.last_seq).min(record.last_seq);
        let compacted: Vec<SessionMessage> =
            pending.into_iter().filter(|m| m.seq <= through).collect();
        let tokens_before = session_tokens(&record);
        let mut report = CompactionReport {
            agent_id: agent.clone(),
            session_id: session.clone(),
            compacted: false,
            reason: None,
            archive_id: None,
            messages: 0,
            compacted_through: record.compacted_through,
            summary: record.summary.clone(),
            tokens_before,
            tokens_after: tokens_before,
            inner_thought: self.inner.thought.provider_name(),
            fallback: None,
        };
        let (Some(first), Some(last)) = (compacted.first(), compacted.last()) else {
            report.reason = Some("nothing to compact: every message is already compacted".into());
            return Ok(report);
        };
        let thought = self
            .inner
            .thought
            .summarize_session(&SessionDigest {
                agent_id: agent.clone(),
                session_id: session.clone(),
                items: summary_items(&record, &compacted),
            })
            .await;
        // At most a quarter of the threshold, so the window has room to grow again, and
        // shorter than what it replaces, so compaction never lengthens a session.
        let quarter = (self.inner.config.sessions.compact_at_tokens() / 4).max(16) as usize;
        let summary = cap_summary(
            &thought.value,
            summary_budget(quarter, record.summary.as_deref(), &compacted),
        );
        let now = self.now();
        let (content, truncated) = archive_text(
            &summary,
            &compacted,
            self.inner.config.limits.max_content_bytes,
        );
        // The archive belongs to the session's project: an isolated project's conversation stays in it.
        let project_id = self
            .actors()
            .namespaces
            .session_project(agent, session)
            .await?;
        let archive = Memory {
            id: MemoryId::generate(),
            agent_id: agent.clone(),
            memory_type: MemoryType::Episodic,
            content,
            title: Some(format!(
                "Session {} history, messages {}-{}",
                session.as_str(),
                first.seq,
                last.seq
            )),
            importance: 0.5,
            tags: vec![
                ARCHIVE_SUMMARY_TAG.to_string(),
                SESSION_COMPACTION_TAG.to_string(),
            ],
            session_id: Some(session.clone()),
            project_id,
            occurred_at: first.at,
            created_at: now,
            updated_at: now,
            last_accessed_at: now,
            access_count: 0,
            consolidation_level: 1.0,
            valence: None,
            arousal: None,
            status: MemoryStatus::Active,
            shared: false,
            metadata: serde_json::json!({
                "compaction": {
                    "from_seq": first.seq,
                    "through_seq": last.seq,
                    "messages": compacted.len(),
                    "transcript_truncated": truncated,
                    "inner_thought": thought.provider,
                },
                "session_span": { "from": first.at, "to": last.at },
            }),
            source: None,
            version: 1,
        };
        let _model_gate = self.actors().vectors.hold().await;
        let embedding = self
            .actors()
            .vectors
            .embed_one(&embedding_text(&archive))
            .await?;
        let committed = self
            .actors()
            .episodic
            .commit_compaction(&SessionCompaction {
                archive: StoredMemory::new(archive.clone(), embedding.clone()),
                agent_id: agent.clone(),
                session_id: session.clone(),
                through: last.seq,
                summary: summary.clone(),
                at: last.at,
            })
            .await?;
        report.fallback = thought.fallback;
        if !committed {
            report.reason = Some("another compaction already covered these messages".into());
            return Ok(report);
        }
        self.actors()
            .vectors
            .project(&[embedding_record(&archive, embedding)], &[])
            .await;
        let after = self.session_log(agent, session).await?;
        tracing::info!(
            agent = %agent, session = session.as_str(), messages = compacted.len(),
            through = last.seq, provider = thought.provider, "session compacted"
        );
        report.compacted = true;
        report.archive_id = Some(archive.id);
        report.messages = compacted.len();
        report.compacted_through = last.seq;
        report.summary = Some(summary);
        report.tokens_after = after.map_or(0, |(record, _)| session_tokens(&record));
        Ok(report)
    }

    /// The session's record and uncompacted messages.
    async fn session_log(
        &self,
        agent: &AgentId,
        session: &SessionId,
    ) -> MemoryResult<Option<(SessionRecord, Vec<SessionMessage>)>> {
        self.actors().episodic.session_log(agent, session).await
    }

    fn view_of(&self, record: &SessionRecord, pending: &[SessionMessage]) -> SessionView {
        let settings = &self.inner.config.sessions;
        let live = live_window(record, pending, self.now(), settings);
        SessionView {
            agent_id: record.agent_id.clone(),
            session_id: record.session_id.clone(),
            summary: live.summary,
            messages: live.messages,
            beyond_window: live.beyond_window,
            expired: live.expired,
            total_messages: record.last_seq,
            compacted_through: record.compacted_through,
            compactions: record.compactions,
            tokens: session_tokens(record),
            context_tokens: settings.context_tokens,
            compact_at_tokens: settings.compact_at_tokens(),
            last_message_at: Some(record.last_message_at),
        }
    }

    /// Start a compaction in the background unless one of this session is running;
    /// true when one was started. Failures are logged (the messages stay in the log and
    /// the next post or read tries again).
    fn compact_in_background(&self, agent: &AgentId, session: &SessionId, through: u64) -> bool {
        let key = (agent.clone(), session.clone());
        {
            let Ok(mut running) = self.inner.compacting.lock() else {
                return false;
            };
            if !running.insert(key.clone()) {
                return false;
            }
        }
        let runtime = self.clone();
        self.inner.background.spawn(async move {
            let (agent, session) = &key;
            if let Err(error) = runtime.compact(agent, session, Some(through)).await {
                tracing::warn!(%error, agent = %agent, session = session.as_str(), "session compaction failed; it is retried on the next message");
            }
            if let Ok(mut running) = runtime.inner.compacting.lock() {
                running.remove(&key);
            }
        });
        true
    }

    /// Run extract_turn on one exchange in the background (failures are logged).
    fn extract_in_background(
        &self,
        agent: AgentId,
        session: Option<SessionId>,
        user: String,
        assistant: String,
    ) {
        let runtime = self.clone();
        let budget = self.inner.config.extraction_max_per_turn;
        let provenance = serde_json::json!({
            crate::model::PROVENANCE_KEY: {
                "surface": "session",
                "session_id": session.as_ref().map(|s| s.as_str().to_string()),
            }
        });
        self.inner.background.spawn(async move {
            match runtime
                .extract_turn(&agent, &user, &assistant, session, budget, Some(provenance))
                .await
            {
                Ok(stored) => {
                    tracing::debug!(agent = %agent, stored = stored.len(), "exchange mined")
                }
                Err(error) => {
                    tracing::warn!(%error, agent = %agent, "extract_turn in the background failed")
                }
            }
        });
    }
}

fn session_not_found(agent: &AgentId, session: &SessionId) -> MemoryError {
    MemoryError {
        field: Some("session_id".into()),
        ..MemoryError::not_found(format!(
            "agent {agent} has no session {} (post a message to start one)",
            session.as_str()
        ))
    }
}

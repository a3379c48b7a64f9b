//! Sessions on the wire: a conversation's message log, its live window and its
//! compaction; the request and response types and the operations of
//! `/v1/sessions/{id}/...`, shared by REST and the proxy.

use chrono::{DateTime, Utc};
use mnemos_actors::error::{MemoryError, MemoryResult};
use mnemos_actors::model::{MessageRole, SessionId, SessionMessage};
use mnemos_actors::runtime::{CompactionReport, PostedMessages, SessionMessageInput, SessionView};
use mnemos_actors::Runtime;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::auth::{Caller, Scope};

/// One message to add.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageBody {
    /// `system`, `user`, `assistant` or `tool` (required).
    pub role: String,
    /// The text (required, not empty).
    pub content: String,
    /// When it was said (RFC 3339; default now).
    pub at: Option<DateTime<Utc>>,
}

/// `POST /v1/sessions/{id}/messages`: one message (`role` + `content`) or several (`messages`).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PostMessagesBody {
    /// Owner (required unless the API key is bound to one agent, which supplies it).
    pub agent_id: Option<String>,
    /// Role of a single message.
    pub role: Option<String>,
    /// Text of a single message.
    pub content: Option<String>,
    /// When a single message was said.
    pub at: Option<DateTime<Utc>>,
    /// Several messages, in order (instead of `role`/`content`).
    pub messages: Option<Vec<MessageBody>>,
}

impl PostMessagesBody {
    /// The messages as the runtime takes them, each role checked (`messages[2].role`).
    pub fn into_inputs(self) -> Result<Vec<SessionMessageInput>, MemoryError> {
        let single = self.role.is_some() || self.content.is_some();
        match (single, self.messages) {
            (true, Some(_)) => Err(MemoryError::invalid(
                "messages",
                "give either role + content (one message) or messages (several), not both",
            )),
            (false, None) => Err(MemoryError::invalid(
                "content",
                "give role + content (one message) or messages: [{role, content}]",
            )),
            (true, None) => {
                let role = self.role.ok_or_else(|| {
                    MemoryError::invalid(
                        "role",
                        "role is required: system, user, assistant or tool",
                    )
                })?;
                let content = self
                    .content
                    .ok_or_else(|| MemoryError::invalid("content", "content is required"))?;
                Ok(vec![SessionMessageInput {
                    role: MessageRole::parse(&role)?,
                    content,
                    at: self.at,
                }])
            }
            (false, Some(messages)) => messages
                .into_iter()
                .enumerate()
                .map(|(index, m)| {
                    let role = MessageRole::parse(&m.role).map_err(|mut e| {
                        e.field = Some(format!("messages[{index}].role"));
                        e
                    })?;
                    Ok(SessionMessageInput {
                        role,
                        content: m.content,
                        at: m.at,
                    })
                })
                .collect(),
        }
    }
}

/// A stored session message.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct MessageView {
    /// Position in the session, from 1.
    pub seq: u64,
    /// Who wrote it.
    pub role: String,
    /// Its text.
    pub content: String,
    /// Estimated tokens (text plus the chat template's per-message overhead).
    pub tokens: u32,
    /// When it was said.
    pub at: DateTime<Utc>,
}

impl From<SessionMessage> for MessageView {
    fn from(m: SessionMessage) -> Self {
        Self {
            seq: m.seq,
            role: m.role.as_str().to_string(),
            content: m.content,
            tokens: m.tokens,
            at: m.at,
        }
    }
}

/// A session's live window and budget.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SessionResponse {
    /// Owner.
    pub agent_id: String,
    /// The session.
    pub session_id: String,
    /// Summary of the compacted part of the conversation (comes before `messages`), if live.
    pub summary: Option<String>,
    /// The live window, oldest first: the newest `sessions.window` uncompacted messages.
    pub messages: Vec<MessageView>,
    /// Live messages older than the window (kept in the log, not returned).
    pub beyond_window: usize,
    /// True when the session was idle past `sessions.ttl_seconds` (nothing is live).
    pub expired: bool,
    /// Messages ever posted.
    pub total_messages: u64,
    /// Messages up to this sequence number are compacted into archive memories.
    pub compacted_through: u64,
    /// Compactions so far.
    pub compactions: u32,
    /// Estimated tokens of summary + uncompacted messages.
    pub tokens: u64,
    /// Context size the session is budgeted against.
    pub context_tokens: u64,
    /// Compaction starts past this many tokens.
    pub compact_at_tokens: u64,
    /// When the newest message was said.
    pub last_message_at: Option<DateTime<Utc>>,
}

impl From<SessionView> for SessionResponse {
    fn from(v: SessionView) -> Self {
        Self {
            agent_id: v.agent_id.local().to_string(),
            session_id: v.session_id.as_str().to_string(),
            summary: v.summary,
            messages: v.messages.into_iter().map(MessageView::from).collect(),
            beyond_window: v.beyond_window,
            expired: v.expired,
            total_messages: v.total_messages,
            compacted_through: v.compacted_through,
            compactions: v.compactions,
            tokens: v.tokens,
            context_tokens: v.context_tokens,
            compact_at_tokens: v.compact_at_tokens,
            last_message_at: v.last_message_at,
        }
    }
}

/// Answer of posting messages.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PostMessagesResponse {
    /// The messages as stored, with their sequence numbers.
    pub messages: Vec<MessageView>,
    /// The session after the post.
    pub session: SessionResponse,
    /// A compaction started in the background.
    pub compaction_scheduled: bool,
    /// User → assistant exchanges handed to extract_turn in the background.
    pub extractions_scheduled: usize,
}

impl From<PostedMessages> for PostMessagesResponse {
    fn from(p: PostedMessages) -> Self {
        Self {
            messages: p.messages.into_iter().map(MessageView::from).collect(),
            session: p.session.into(),
            compaction_scheduled: p.compaction_scheduled,
            extractions_scheduled: p.extractions_scheduled,
        }
    }
}

/// `POST /v1/sessions/{id}/compact`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompactBody {
    /// Owner (required unless the API key is bound to one agent, which supplies it).
    pub agent_id: Option<String>,
}

/// What a compaction did.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CompactResponse {
    /// Owner.
    pub agent_id: String,
    /// The session.
    pub session_id: String,
    /// False when there was nothing to compact (see `reason`).
    pub compacted: bool,
    /// Why nothing was compacted.
    pub reason: Option<String>,
    /// The episodic memory (tagged `archive_summary`) holding the compacted history.
    pub archive_id: Option<String>,
    /// Messages compacted.
    pub messages: usize,
    /// Messages up to this sequence number are compacted.
    pub compacted_through: u64,
    /// The summary that now replaces them in the window.
    pub summary: Option<String>,
    /// Estimated session tokens before.
    pub tokens_before: u64,
    /// Estimated session tokens after.
    pub tokens_after: u64,
    /// Inner-thought provider that wrote the summary (`none`, `openai`).
    pub inner_thought: String,
    /// Why the configured provider was not used, if it was not.
    pub fallback: Option<String>,
}

impl From<CompactionReport> for CompactResponse {
    fn from(r: CompactionReport) -> Self {
        Self {
            agent_id: r.agent_id.local().to_string(),
            session_id: r.session_id.as_str().to_string(),
            compacted: r.compacted,
            reason: r.reason,
            archive_id: r.archive_id.map(|id| id.0),
            messages: r.messages,
            compacted_through: r.compacted_through,
            summary: r.summary,
            tokens_before: r.tokens_before,
            tokens_after: r.tokens_after,
            inner_thought: r.inner_thought.to_string(),
            fallback: r.fallback,
        }
    }
}

/// Query of `GET /v1/sessions/{id}/messages`.
#[derive(Debug, Clone, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct SessionParams {
    /// Owner of the session (required).
    pub agent_id: Option<String>,
}

/// Add messages to a session (creating it); compaction and extraction follow in the background.
pub async fn post_messages(
    runtime: &Runtime,
    caller: &Caller,
    session_id: &str,
    body: PostMessagesBody,
) -> MemoryResult<PostMessagesResponse> {
    caller.require(Scope::Write)?;
    let agent = caller.agent("agent_id", body.agent_id.as_deref())?;
    let session = SessionId::parse(session_id)?;
    let inputs = body.into_inputs()?;
    caller.spend_session_writes(session.as_str(), inputs.len())?;
    let posted = runtime
        .post_session_messages(&agent, &session, inputs)
        .await?;
    Ok(posted.into())
}

/// A session's live window: the summary of its compacted part and its newest messages.
pub async fn session_window(
    runtime: &Runtime,
    caller: &Caller,
    session_id: &str,
    params: SessionParams,
) -> MemoryResult<SessionResponse> {
    caller.require(Scope::Read)?;
    let agent = caller.agent("agent_id", params.agent_id.as_deref())?;
    let session = SessionId::parse(session_id)?;
    Ok(runtime.session(&agent, &session).await?.into())
}

/// Compact a session now: a summary replaces its window and the history becomes an episodic memory.
pub async fn compact(
    runtime: &Runtime,
    caller: &Caller,
    session_id: &str,
    body: CompactBody,
) -> MemoryResult<CompactResponse> {
    caller.require(Scope::Write)?;
    let agent = caller.agent("agent_id", body.agent_id.as_deref())?;
    let session = SessionId::parse(session_id)?;
    Ok(runtime
        .compact_session(&agent, &session, None)
        .await?
        .into())
}

//! `mnemos sessions list|show|post|compact`: session logs over the contract.

use clap::Subcommand;
use mnemos::auth::Caller;
use mnemos::contract::lifecycle::{self, SessionSummary};
use mnemos::contract::sessions::{
    self, CompactBody, CompactResponse, PostMessagesBody, PostMessagesResponse, SessionParams,
    SessionResponse,
};
use mnemos_actors::Runtime;

use super::{print, user_error};

/// What `mnemos sessions` does.
#[derive(Subcommand)]
pub(crate) enum SessionsAction {
    /// An agent's sessions (those with a message log).
    List {
        /// Owner.
        #[arg(long)]
        agent: String,
    },
    /// A session's summary and newest messages.
    Show {
        /// The session.
        session: String,
        /// Owner.
        #[arg(long)]
        agent: String,
    },
    /// Add a message to a session (creating it); extraction and compaction follow.
    Post {
        /// The session.
        session: String,
        /// Owner.
        #[arg(long)]
        agent: String,
        /// system, user, assistant or tool.
        #[arg(long, default_value = "user")]
        role: String,
        /// The text.
        content: String,
    },
    /// Compact a session now: a summary replaces its window.
    Compact {
        /// The session.
        session: String,
        /// Owner.
        #[arg(long)]
        agent: String,
    },
}

/// One message as a line of text.
fn message_line(m: &sessions::MessageView) -> String {
    format!(
        "{:>4}  {}  {:<9} {}",
        m.seq,
        m.at.format("%Y-%m-%d %H:%M"),
        m.role,
        m.content
    )
}

/// `mnemos sessions …`.
pub(crate) async fn run(
    runtime: &Runtime,
    caller: &Caller,
    action: SessionsAction,
    json: bool,
) -> anyhow::Result<()> {
    match action {
        SessionsAction::List { agent } => {
            let found = lifecycle::list_sessions(runtime, caller, Some(&agent))
                .await
                .map_err(user_error)?;
            print(json, &found, |found: &Vec<SessionSummary>| {
                if found.is_empty() {
                    return format!("{agent} has no sessions");
                }
                found
                    .iter()
                    .map(|s| {
                        format!(
                            "{:<24} {:>5} messages  {} compaction(s)  last {}",
                            s.session_id,
                            s.messages,
                            s.compactions,
                            s.last_message_at.format("%Y-%m-%d %H:%M")
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            });
        }
        SessionsAction::Show { session, agent } => {
            let params = SessionParams {
                agent_id: Some(agent),
            };
            let view = sessions::session_window(runtime, caller, &session, params)
                .await
                .map_err(user_error)?;
            print(json, &view, |v: &SessionResponse| {
                let mut out = vec![format!(
                    "session {} of {}: {} messages, {} compacted, {} tokens (compacts at {})",
                    v.session_id,
                    v.agent_id,
                    v.total_messages,
                    v.compacted_through,
                    v.tokens,
                    v.compact_at_tokens
                )];
                if let Some(summary) = &v.summary {
                    out.push(format!("summary: {summary}"));
                }
                out.extend(v.messages.iter().map(message_line));
                out.join("\n")
            });
        }
        SessionsAction::Post {
            session,
            agent,
            role,
            content,
        } => {
            let body = PostMessagesBody {
                agent_id: Some(agent),
                role: Some(role),
                content: Some(content),
                at: None,
                messages: None,
            };
            let posted = sessions::post_messages(runtime, caller, &session, body)
                .await
                .map_err(user_error)?;
            print(json, &posted, |p: &PostMessagesResponse| {
                p.messages
                    .iter()
                    .map(|m| format!("posted {}", message_line(m)))
                    .collect::<Vec<_>>()
                    .join("\n")
            });
        }
        SessionsAction::Compact { session, agent } => {
            let body = CompactBody {
                agent_id: Some(agent),
            };
            let done = sessions::compact(runtime, caller, &session, body)
                .await
                .map_err(user_error)?;
            print(json, &done, |c: &CompactResponse| {
                if c.compacted {
                    format!(
                        "compacted {} messages of {} through {} ({} → {} tokens) into {}",
                        c.messages,
                        c.session_id,
                        c.compacted_through,
                        c.tokens_before,
                        c.tokens_after,
                        c.archive_id.as_deref().unwrap_or("-")
                    )
                } else {
                    format!(
                        "nothing compacted: {}",
                        c.reason.as_deref().unwrap_or("nothing to compact")
                    )
                }
            });
        }
    }
    Ok(())
}

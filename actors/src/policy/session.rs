//! Sessions: what of a conversation is live in the window, when it must be compacted,
//! and how its compacted history is written down. Pure: the clock is an argument.

use chrono::{DateTime, Duration, Utc};

use crate::model::{MessageRole, SessionMessage, SessionRecord};
use crate::text::estimate_tokens;

/// Tokens a chat template adds around each message (role markers and separators).
pub const MESSAGE_OVERHEAD_TOKENS: u32 = 4;

/// Tunables of sessions (`[sessions]`).
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSettings {
    /// Most messages the live window returns (the newest ones).
    pub window: usize,
    /// A session idle this long has no live window any more (working memory expires).
    pub ttl: Duration,
    /// The context size of the model the session feeds, in tokens.
    pub context_tokens: u64,
    /// Compact when the session's estimated tokens pass this fraction of `context_tokens`.
    pub compact_at_pct: f64,
    /// Mine each user → assistant exchange for memories (extract_turn) in the background.
    pub extract: bool,
}

impl Default for SessionSettings {
    fn default() -> Self {
        Self {
            window: 50,
            ttl: Duration::hours(24),
            context_tokens: 8192,
            compact_at_pct: 0.5,
            extract: true,
        }
    }
}

impl SessionSettings {
    /// Token count past which a session is compacted.
    pub fn compact_at_tokens(&self) -> u64 {
        (self.context_tokens as f64 * self.compact_at_pct).round() as u64
    }
}

/// Estimated tokens of one message as a chat model sees it: its text plus the template overhead.
pub fn message_tokens(content: &str) -> u32 {
    u32::try_from(estimate_tokens(content))
        .unwrap_or(u32::MAX)
        .saturating_add(MESSAGE_OVERHEAD_TOKENS)
}

/// Estimated tokens the session puts into a model's context: the summary (as one system
/// message) plus every message not compacted yet.
pub fn session_tokens(record: &SessionRecord) -> u64 {
    record.pending_tokens
        + record
            .summary
            .as_deref()
            .map_or(0, |summary| u64::from(message_tokens(summary)))
}

/// True when the session has passed its compaction threshold and has messages to compact.
pub fn needs_compaction(record: &SessionRecord, settings: &SessionSettings) -> bool {
    record.last_seq > record.compacted_through
        && session_tokens(record) > settings.compact_at_tokens()
}

/// What of a session is live: the summary of its compacted part (when still live) and
/// its newest uncompacted messages.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveWindow {
    /// The running summary, when the conversation it summarises has not expired.
    pub summary: Option<String>,
    /// Newest live messages, oldest first, at most `window`.
    pub messages: Vec<SessionMessage>,
    /// Live messages that fell out of the window (older than its newest `window`).
    pub beyond_window: usize,
    /// True when the whole session is idle past its TTL (nothing is live).
    pub expired: bool,
    /// The newest uncompacted message of an ended conversation (before the last gap
    /// longer than the TTL, or everything when expired): compacted without waiting for
    /// the token threshold, so an abandoned conversation still becomes a memory.
    pub stale_through: Option<u64>,
}

/// The live window of a session at `now`. `pending` are its uncompacted messages, oldest
/// first. A gap longer than the TTL between two messages (or between the summary and
/// the next message) ends a conversation: only what follows the last such gap is live,
/// and nothing is when the newest activity is older than the TTL.
pub fn live_window(
    record: &SessionRecord,
    pending: &[SessionMessage],
    now: DateTime<Utc>,
    settings: &SessionSettings,
) -> LiveWindow {
    let last_activity = pending
        .last()
        .map(|m| m.at)
        .into_iter()
        .chain(record.summarized_at)
        .max()
        .unwrap_or(record.last_message_at);
    if now - last_activity > settings.ttl {
        return LiveWindow {
            summary: None,
            messages: Vec::new(),
            beyond_window: 0,
            expired: true,
            stale_through: pending.last().map(|m| m.seq),
        };
    }
    let mut start = 0;
    for index in 1..pending.len() {
        if pending[index].at - pending[index - 1].at > settings.ttl {
            start = index;
        }
    }
    let summary_live = start == 0
        && match (record.summarized_at, pending.first()) {
            (Some(summarized_at), Some(first)) => first.at - summarized_at <= settings.ttl,
            (Some(_), None) => true,
            (None, _) => false,
        };
    let live = &pending[start..];
    let beyond_window = live.len().saturating_sub(settings.window);
    LiveWindow {
        summary: if summary_live {
            record.summary.clone()
        } else {
            None
        },
        messages: live[beyond_window..].to_vec(),
        beyond_window,
        expired: false,
        stale_through: start.checked_sub(1).map(|index| pending[index].seq),
    }
}

/// `summary` cut (at a word) to at most `max_tokens` estimated tokens, so that repeated
/// compactions cannot grow the summary until it alone passes the threshold.
pub fn cap_summary(summary: &str, max_tokens: usize) -> String {
    let summary = summary.trim();
    if estimate_tokens(summary) <= max_tokens {
        return summary.to_string();
    }
    let words: Vec<&str> = summary.split_whitespace().collect();
    let (mut low, mut high) = (0usize, words.len());
    // Largest prefix of words (plus the ellipsis) within the budget.
    while low < high {
        let middle = (low + high).div_ceil(2);
        let candidate = format!("{} …", words[..middle].join(" "));
        if estimate_tokens(&candidate) <= max_tokens {
            low = middle;
        } else {
            high = middle - 1;
        }
    }
    format!("{} …", words[..low].join(" "))
}

/// Most tokens a compaction's summary may take: a quarter of the threshold (`quarter`),
/// and fewer than what it replaces (the previous summary and the compacted messages,
/// each counted as the message it is), so compaction never makes a session longer.
pub fn summary_budget(
    quarter: usize,
    previous: Option<&str>,
    compacted: &[SessionMessage],
) -> usize {
    let replaced: u64 = previous.map_or(0, |s| u64::from(message_tokens(s)))
        + compacted
            .iter()
            .map(|m| u64::from(message_tokens(&m.content)))
            .sum::<u64>();
    // The summary is one message itself: its overhead counts against the budget.
    let room = replaced
        .saturating_sub(u64::from(MESSAGE_OVERHEAD_TOKENS))
        .saturating_sub(1);
    usize::try_from(room)
        .unwrap_or(usize::MAX)
        .min(quarter)
        .max(1)
}

/// One message as a transcript line: `[2026-12-01 05:30] user: text`.
pub fn transcript_line(message: &SessionMessage) -> String {
    format!(
        "[{}] {}: {}",
        message.at.format("%Y-%m-%d %H:%M"),
        message.role.as_str(),
        message.content.trim()
    )
}

/// The archive text of a compaction: the summary first, then the transcript of the
/// compacted messages, cut to `max_bytes` at a line (or character) boundary. Returns the
/// text and whether it was cut (the message log keeps every message either way).
pub fn archive_text(
    summary: &str,
    messages: &[SessionMessage],
    max_bytes: usize,
) -> (String, bool) {
    let mut text = format!("Summary: {}\n\nTranscript:", summary.trim());
    let mut truncated = false;
    for message in messages {
        let line = transcript_line(message);
        if text.len() + 1 + line.len() > max_bytes {
            truncated = true;
            break;
        }
        text.push('\n');
        text.push_str(&line);
    }
    if text.len() > max_bytes {
        let mut cut = max_bytes;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        truncated = true;
    }
    (text, truncated)
}

/// The items inner thought summarises: the previous summary (as the first item, when
/// there is one) and each compacted message as `role: text`.
pub fn summary_items(
    record: &SessionRecord,
    messages: &[SessionMessage],
) -> Vec<(DateTime<Utc>, String)> {
    let previous = record
        .summary
        .as_deref()
        .map(|summary| {
            (
                record.summarized_at.unwrap_or(record.created_at),
                format!("Earlier in this session: {summary}"),
            )
        })
        .into_iter();
    previous
        .chain(
            messages
                .iter()
                .filter(|m| m.role != MessageRole::Tool)
                .map(|m| (m.at, format!("{}: {}", m.role.as_str(), m.content.trim()))),
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{AgentId, SessionId};
    use chrono::TimeZone;

    fn at(minute: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 1, 8, 0, 0).unwrap() + Duration::minutes(minute)
    }

    fn message(seq: u64, minute: i64) -> SessionMessage {
        SessionMessage {
            seq,
            role: if seq % 2 == 1 {
                MessageRole::User
            } else {
                MessageRole::Assistant
            },
            content: format!("message {seq}"),
            tokens: 7,
            at: at(minute),
        }
    }

    fn record(messages: &[SessionMessage]) -> SessionRecord {
        SessionRecord {
            agent_id: AgentId::parse("a").unwrap(),
            session_id: SessionId::parse("s").unwrap(),
            last_seq: messages.last().map_or(0, |m| m.seq),
            compacted_through: 0,
            summary: None,
            summarized_at: None,
            pending_tokens: messages.iter().map(|m| u64::from(m.tokens)).sum(),
            compactions: 0,
            created_at: at(0),
            last_message_at: messages.last().map_or(at(0), |m| m.at),
        }
    }

    fn settings() -> SessionSettings {
        SessionSettings {
            window: 3,
            ttl: Duration::minutes(60),
            context_tokens: 100,
            compact_at_pct: 0.5,
            extract: false,
        }
    }

    #[test]
    fn window_keeps_the_newest_messages() {
        let messages: Vec<_> = (1..=5).map(|i| message(i, i as i64)).collect();
        let live = live_window(&record(&messages), &messages, at(10), &settings());
        assert!(!live.expired);
        assert_eq!(
            live.messages.iter().map(|m| m.seq).collect::<Vec<_>>(),
            [3, 4, 5]
        );
        assert_eq!(live.beyond_window, 2);
        assert_eq!(live.stale_through, None);
    }

    #[test]
    fn a_session_idle_past_its_ttl_has_no_live_window() {
        let messages: Vec<_> = (1..=2).map(|i| message(i, i as i64)).collect();
        let live = live_window(&record(&messages), &messages, at(2 + 61), &settings());
        assert!(live.expired);
        assert!(live.messages.is_empty());
        assert_eq!(live.stale_through, Some(2));
        // Exactly at the TTL it is still live.
        let live = live_window(&record(&messages), &messages, at(2 + 60), &settings());
        assert!(!live.expired);
        assert_eq!(live.messages.len(), 2);
    }

    #[test]
    fn a_gap_longer_than_the_ttl_starts_a_new_conversation() {
        let messages = vec![
            message(1, 0),
            message(2, 1),
            message(3, 200),
            message(4, 201),
        ];
        let mut record = record(&messages);
        record.summary = Some("old".into());
        record.summarized_at = Some(at(0));
        let live = live_window(&record, &messages, at(202), &settings());
        assert_eq!(
            live.messages.iter().map(|m| m.seq).collect::<Vec<_>>(),
            [3, 4]
        );
        assert_eq!(
            live.summary, None,
            "the summary belongs to the old conversation"
        );
        assert_eq!(live.stale_through, Some(2));
    }

    #[test]
    fn the_summary_leads_the_window_while_live() {
        let messages = vec![message(5, 10)];
        let mut record = record(&messages);
        record.compacted_through = 4;
        record.summary = Some("we planned the trip".into());
        record.summarized_at = Some(at(9));
        let live = live_window(&record, &messages, at(11), &settings());
        assert_eq!(live.summary.as_deref(), Some("we planned the trip"));
        // Only a summary, no message since: still live until the TTL.
        let live = live_window(&record, &[], at(30), &settings());
        assert_eq!(live.summary.as_deref(), Some("we planned the trip"));
        assert!(live_window(&record, &[], at(9 + 61), &settings()).expired);
    }

    #[test]
    fn compaction_starts_past_the_threshold_with_something_to_compact() {
        let messages: Vec<_> = (1..=7).map(|i| message(i, i as i64)).collect();
        let mut record = record(&messages);
        assert_eq!(settings().compact_at_tokens(), 50);
        assert!(!needs_compaction(&record, &settings()), "49 tokens");
        record.pending_tokens = 51;
        assert!(needs_compaction(&record, &settings()));
        record.compacted_through = record.last_seq;
        assert!(!needs_compaction(&record, &settings()), "nothing pending");
    }

    #[test]
    fn the_summary_counts_towards_the_session_tokens() {
        let mut record = record(&[]);
        record.summary = Some("a b c".into());
        assert_eq!(session_tokens(&record), u64::from(message_tokens("a b c")));
        assert!(message_tokens("") >= MESSAGE_OVERHEAD_TOKENS);
    }

    #[test]
    fn a_summary_never_outgrows_what_it_replaces() {
        let mut short = vec![message(1, 0), message(2, 1), message(3, 2)];
        for (m, text) in short
            .iter_mut()
            .zip(["We deploy on Tuesdays.", "Noted.", "Thanks!"])
        {
            m.content = text.into();
        }
        let replaced: u32 = short.iter().map(|m| message_tokens(&m.content)).sum();
        let budget = summary_budget(100, None, &short);
        assert!(
            budget as u32 + MESSAGE_OVERHEAD_TOKENS < replaced,
            "{budget} vs {replaced}"
        );
        let long_summary = "a summary that goes on and on about the deploy day and the notes taken";
        let capped = cap_summary(long_summary, budget);
        assert!(message_tokens(&capped) < replaced, "{capped:?}");
        // A long session is bounded by the quarter of the threshold instead.
        let long: Vec<SessionMessage> = (1..=40).map(|i| message(i, i as i64)).collect();
        assert_eq!(summary_budget(100, Some("earlier summary"), &long), 100);
    }

    #[test]
    fn a_summary_is_capped_at_a_word() {
        let long = "word ".repeat(500);
        let capped = cap_summary(&long, 50);
        assert!(estimate_tokens(&capped) <= 50, "{capped}");
        assert!(capped.ends_with("word …"));
        assert_eq!(cap_summary("short one", 50), "short one");
    }

    #[test]
    fn archive_text_is_cut_at_a_line_and_says_so() {
        let messages: Vec<_> = (1..=50).map(|i| message(i, i as i64)).collect();
        let (full, cut) = archive_text("trip", &messages, 64 * 1024);
        assert!(!cut);
        assert!(
            full.starts_with("Summary: trip\n\nTranscript:\n[2026-12-01 08:01] user: message 1")
        );
        assert!(full.ends_with("assistant: message 50"));
        let (short, cut) = archive_text("trip", &messages, 200);
        assert!(cut);
        assert!(short.len() <= 200);
        assert!(short.ends_with(|c: char| c.is_ascii_digit()));
        let (tiny, cut) = archive_text("é".repeat(100).as_str(), &messages, 15);
        assert!(cut && tiny.len() <= 15);
    }

    #[test]
    fn summary_items_carry_the_previous_summary_first_and_skip_tool_output() {
        let mut messages = vec![message(3, 5), message(4, 6)];
        messages.push(SessionMessage {
            role: MessageRole::Tool,
            ..message(5, 7)
        });
        let mut record = record(&messages);
        record.summary = Some("we met".into());
        record.summarized_at = Some(at(4));
        let items = summary_items(&record, &messages);
        assert_eq!(items.len(), 3);
        assert_eq!(items[0].1, "Earlier in this session: we met");
        assert_eq!(items[1].1, "user: message 3");
    }
}

//! Working memory in a map of bounded queues with a TTL.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};

use super::lock_error;
use crate::error::MemoryResult;
use crate::model::{AgentId, SessionId};
use crate::store::{WorkingItem, WorkingStore};

/// A session's window and the time it was last written.
type SessionWindow = (VecDeque<WorkingItem>, DateTime<Utc>);

/// A [`WorkingStore`] in a map of bounded queues with a TTL.
#[derive(Debug)]
pub struct InMemoryWorkingStore {
    /// Window per (agent, session) with the time it was last written.
    sessions: Mutex<HashMap<(AgentId, SessionId), SessionWindow>>,
    /// Items kept per session.
    window: usize,
    /// Idle time after which a session's window expires.
    ttl: Duration,
}

impl InMemoryWorkingStore {
    /// A store keeping `window` items per session for `ttl_seconds` after the last write.
    pub fn new(window: usize, ttl_seconds: u64) -> Self {
        Self {
            sessions: Mutex::new(HashMap::new()),
            window: window.max(1),
            ttl: Duration::seconds(ttl_seconds.min(i64::MAX as u64 / 1000) as i64),
        }
    }
}

#[async_trait]
impl WorkingStore for InMemoryWorkingStore {
    fn backend_name(&self) -> &'static str {
        "memory"
    }

    async fn push(
        &self,
        agent: &AgentId,
        session: &SessionId,
        item: WorkingItem,
        now: DateTime<Utc>,
    ) -> MemoryResult<()> {
        let mut sessions = self.sessions.lock().map_err(lock_error)?;
        let entry = sessions
            .entry((agent.clone(), session.clone()))
            .or_insert_with(|| (VecDeque::new(), now));
        if now - entry.1 > self.ttl {
            entry.0.clear();
        }
        entry.0.push_back(item);
        while entry.0.len() > self.window {
            entry.0.pop_front();
        }
        entry.1 = now;
        Ok(())
    }

    async fn window(
        &self,
        agent: &AgentId,
        session: &SessionId,
        now: DateTime<Utc>,
    ) -> MemoryResult<Vec<WorkingItem>> {
        let sessions = self.sessions.lock().map_err(lock_error)?;
        Ok(match sessions.get(&(agent.clone(), session.clone())) {
            Some((items, last)) if now - *last <= self.ttl => items.iter().cloned().collect(),
            _ => Vec::new(),
        })
    }

    async fn clear(&self, agent: &AgentId, session: &SessionId) -> MemoryResult<usize> {
        let mut sessions = self.sessions.lock().map_err(lock_error)?;
        Ok(sessions
            .remove(&(agent.clone(), session.clone()))
            .map(|(items, _)| items.len())
            .unwrap_or(0))
    }

    async fn sweep(&self, now: DateTime<Utc>) -> MemoryResult<usize> {
        let mut sessions = self.sessions.lock().map_err(lock_error)?;
        let before = sessions.len();
        let ttl = self.ttl;
        sessions.retain(|_, (_, last)| now - *last <= ttl);
        Ok(before - sessions.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::MemoryId;

    #[tokio::test]
    async fn working_store_keeps_a_rolling_window_and_expires() {
        let store = InMemoryWorkingStore::new(2, 60);
        let agent = AgentId::parse("a").unwrap();
        let session = SessionId::parse("s").unwrap();
        let now = Utc::now();
        for n in 0..3 {
            let item = WorkingItem {
                memory_id: MemoryId(n.to_string()),
                content: n.to_string(),
                at: now,
            };
            store.push(&agent, &session, item, now).await.unwrap();
        }
        let window = store.window(&agent, &session, now).await.unwrap();
        assert_eq!(
            window
                .iter()
                .map(|i| i.content.as_str())
                .collect::<Vec<_>>(),
            vec!["1", "2"]
        );
        assert!(store
            .window(&agent, &session, now + Duration::seconds(61))
            .await
            .unwrap()
            .is_empty());
        assert_eq!(store.sweep(now + Duration::seconds(61)).await.unwrap(), 1);
    }
}

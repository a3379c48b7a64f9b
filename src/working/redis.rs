//! Working memory in Redis (`working.backend = "redis"`), degrading to the in-process
//! store while Redis is unreachable.
//!
//! Each session's window is one Redis list, `mnemos:{<agent>}:{<session>}:window`
//! (ids cannot contain braces, so the key is unambiguous; in a Redis Cluster the braces
//! are a hash tag keeping an agent's sessions on one slot): `RPUSH` + `LTRIM` to the
//! newest `window` items + `EXPIRE ttl`, in one `MULTI`/`EXEC`. Redis expires idle
//! windows itself, so `sweep` only sweeps the fallback.
//!
//! Every call runs under `working.timeout_ms`. A failure drops the connection, logs one
//! warning, reports the outage in `/health` and serves from the in-process fallback
//! (working memory is a cache of what SQL holds: an outage loses no acknowledged
//! write). The next call after `RECONNECT_INTERVAL` tries again; on success the
//! windows written meanwhile are copied back into Redis and the flag clears.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use mnemos_actors::error::{MemoryError, MemoryResult};
use mnemos_actors::model::{AgentId, MemoryId, SessionId};
use mnemos_actors::store::memory::InMemoryWorkingStore;
use mnemos_actors::store::{WorkingItem, WorkingStore};
use redis::aio::MultiplexedConnection;
use serde::{Deserialize, Serialize};

/// Least time between two reconnection attempts while Redis is down.
pub const RECONNECT_INTERVAL: Duration = Duration::from_secs(1);

/// The key of a session's window.
pub fn window_key(agent: &AgentId, session: &SessionId) -> String {
    format!(
        "mnemos:{{{}}}:{{{}}}:window",
        agent.as_str(),
        session.as_str()
    )
}

/// A window item as stored in Redis.
#[derive(Debug, Serialize, Deserialize)]
struct StoredItem {
    /// The memory it mirrors.
    id: String,
    /// Its content.
    content: String,
    /// When it entered the window.
    at: DateTime<Utc>,
}

/// Connection state.
struct Link {
    /// The live connection (cheap to clone; multiplexed), None while down.
    connection: Option<MultiplexedConnection>,
    /// Why Redis is considered down, None while up.
    outage: Option<String>,
    /// Last reconnection attempt.
    last_attempt: Option<Instant>,
}

/// [`WorkingStore`] over Redis with an in-process fallback.
pub struct RedisWorkingStore {
    /// Client for `working.url`.
    client: redis::Client,
    /// Connection and outage state.
    link: Mutex<Link>,
    /// Serves while Redis is down; its windows are copied to Redis on recovery.
    fallback: InMemoryWorkingStore,
    /// Sessions written to the fallback during the current outage.
    written_during_outage: Mutex<Vec<(AgentId, SessionId)>>,
    /// Items kept per window.
    window: usize,
    /// Seconds a window lives after its last write.
    ttl_seconds: u64,
    /// Budget of one Redis call.
    timeout: Duration,
}

fn lock_error<T>(_: T) -> MemoryError {
    MemoryError::internal("redis working-store lock poisoned")
}

impl RedisWorkingStore {
    /// A store for `url` (`redis://host:port/db`). Never fails on an unreachable server:
    /// it starts degraded and connects when Redis comes up. A malformed URL is an error
    /// naming `working.url`.
    pub async fn connect(
        url: &str,
        window: usize,
        ttl_seconds: u64,
        timeout: Duration,
    ) -> MemoryResult<Self> {
        let client = redis::Client::open(url).map_err(|error| {
            MemoryError::invalid("working.url", format!("not a Redis URL ({url}): {error}"))
        })?;
        let store = Self {
            client,
            link: Mutex::new(Link {
                connection: None,
                outage: Some("not connected yet".into()),
                last_attempt: None,
            }),
            fallback: InMemoryWorkingStore::new(window, ttl_seconds),
            written_during_outage: Mutex::new(Vec::new()),
            window: window.max(1),
            ttl_seconds: ttl_seconds.max(1),
            timeout,
        };
        if store.connection().await.is_none() {
            tracing::warn!(
                url,
                "Redis is unreachable; working memory runs in-process until it comes back"
            );
        }
        Ok(store)
    }

    /// A live connection, reconnecting (at most once per [`RECONNECT_INTERVAL`]) when down.
    async fn connection(&self) -> Option<MultiplexedConnection> {
        {
            let mut link = self.link.lock().ok()?;
            if let Some(connection) = &link.connection {
                return Some(connection.clone());
            }
            if link
                .last_attempt
                .is_some_and(|at| at.elapsed() < RECONNECT_INTERVAL)
            {
                return None;
            }
            link.last_attempt = Some(Instant::now());
        }
        let attempt =
            tokio::time::timeout(self.timeout, self.client.get_multiplexed_async_connection())
                .await;
        match attempt {
            Ok(Ok(mut connection)) => {
                let ping: Result<Result<String, _>, _> = tokio::time::timeout(
                    self.timeout,
                    redis::cmd("PING").query_async(&mut connection),
                )
                .await;
                if !matches!(ping, Ok(Ok(_))) {
                    self.mark_down("PING failed after connecting");
                    return None;
                }
                self.restore(&mut connection).await;
                let mut link = self.link.lock().ok()?;
                if link.outage.take().is_some() {
                    tracing::info!("Redis is reachable again; working memory is back in Redis");
                }
                link.connection = Some(connection.clone());
                Some(connection)
            }
            Ok(Err(error)) => {
                self.mark_down(&format!("cannot connect: {error}"));
                None
            }
            Err(_) => {
                self.mark_down(&format!("no connection within {:?}", self.timeout));
                None
            }
        }
    }

    /// Record an outage (logging its start once) and drop the connection.
    fn mark_down(&self, why: &str) {
        let Ok(mut link) = self.link.lock() else {
            return;
        };
        link.connection = None;
        if link.outage.is_none() {
            tracing::warn!(
                reason = why,
                "Redis working memory is down; serving from the in-process fallback"
            );
            metrics::counter!("mnemos_working_fallbacks_total").increment(1);
        }
        link.outage = Some(why.to_string());
    }

    /// Copy the windows written to the fallback during the outage back into Redis.
    async fn restore(&self, connection: &mut MultiplexedConnection) {
        let sessions: Vec<(AgentId, SessionId)> = match self.written_during_outage.lock() {
            Ok(mut written) => std::mem::take(&mut *written),
            Err(_) => return,
        };
        let now = Utc::now();
        for (agent, session) in sessions {
            let Ok(items) = self.fallback.window(&agent, &session, now).await else {
                continue;
            };
            for item in items {
                if self
                    .push_redis(connection, &agent, &session, &item)
                    .await
                    .is_err()
                {
                    return;
                }
            }
            let _ = self.fallback.clear(&agent, &session).await;
        }
    }

    async fn push_redis(
        &self,
        connection: &mut MultiplexedConnection,
        agent: &AgentId,
        session: &SessionId,
        item: &WorkingItem,
    ) -> Result<(), String> {
        let key = window_key(agent, session);
        let value = serde_json::to_string(&StoredItem {
            id: item.memory_id.0.clone(),
            content: item.content.clone(),
            at: item.at,
        })
        .map_err(|e| e.to_string())?;
        let mut pipe = redis::pipe();
        pipe.atomic()
            .rpush(&key, value)
            .ignore()
            .ltrim(&key, -(self.window as isize), -1)
            .ignore()
            .expire(&key, self.ttl_seconds as i64)
            .ignore();
        self.run(pipe.query_async::<()>(connection)).await
    }

    /// Run one Redis call under the timeout; an error or timeout is the outage's reason.
    async fn run<T>(
        &self,
        call: impl std::future::Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, String> {
        match tokio::time::timeout(self.timeout, call).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(error.to_string()),
            Err(_) => Err(format!("no answer within {:?}", self.timeout)),
        }
    }

    fn note_fallback_write(&self, agent: &AgentId, session: &SessionId) {
        if let Ok(mut written) = self.written_during_outage.lock() {
            let key = (agent.clone(), session.clone());
            if !written.contains(&key) {
                written.push(key);
            }
        }
    }
}

#[async_trait]
impl WorkingStore for RedisWorkingStore {
    fn backend_name(&self) -> &'static str {
        "redis"
    }

    fn degraded(&self) -> Option<String> {
        self.link
            .lock()
            .map_err(lock_error)
            .ok()
            .and_then(|link| link.outage.clone())
            .map(|why| {
                format!(
                    "Redis unreachable ({why}); working memory is in-process until it reconnects"
                )
            })
    }

    async fn push(
        &self,
        agent: &AgentId,
        session: &SessionId,
        item: WorkingItem,
        now: DateTime<Utc>,
    ) -> MemoryResult<()> {
        if let Some(mut connection) = self.connection().await {
            match self
                .push_redis(&mut connection, agent, session, &item)
                .await
            {
                Ok(()) => return Ok(()),
                Err(why) => self.mark_down(&why),
            }
        }
        self.note_fallback_write(agent, session);
        self.fallback.push(agent, session, item, now).await
    }

    async fn push_many(
        &self,
        agent: &AgentId,
        items: Vec<(SessionId, WorkingItem)>,
        now: DateTime<Utc>,
    ) -> MemoryResult<()> {
        if let Some(mut connection) = self.connection().await {
            // One MULTI for the batch: each item's RPUSH, then each touched window's trim and TTL.
            let mut pipe = redis::pipe();
            pipe.atomic();
            let mut keys: Vec<String> = Vec::new();
            for (session, item) in &items {
                let key = window_key(agent, session);
                let value = serde_json::to_string(&StoredItem {
                    id: item.memory_id.0.clone(),
                    content: item.content.clone(),
                    at: item.at,
                })
                .map_err(|e| MemoryError::internal(e.to_string()))?;
                pipe.rpush(&key, value).ignore();
                if !keys.contains(&key) {
                    keys.push(key);
                }
            }
            for key in &keys {
                pipe.ltrim(key, -(self.window as isize), -1)
                    .ignore()
                    .expire(key, self.ttl_seconds as i64)
                    .ignore();
            }
            match self.run(pipe.query_async::<()>(&mut connection)).await {
                Ok(()) => return Ok(()),
                Err(why) => self.mark_down(&why),
            }
        }
        for (session, item) in items {
            self.note_fallback_write(agent, &session);
            self.fallback.push(agent, &session, item, now).await?;
        }
        Ok(())
    }

    async fn window(
        &self,
        agent: &AgentId,
        session: &SessionId,
        now: DateTime<Utc>,
    ) -> MemoryResult<Vec<WorkingItem>> {
        if let Some(mut connection) = self.connection().await {
            let key = window_key(agent, session);
            let read = self
                .run(
                    redis::cmd("LRANGE")
                        .arg(&key)
                        .arg(0)
                        .arg(-1)
                        .query_async::<Vec<String>>(&mut connection),
                )
                .await;
            match read {
                Ok(values) => {
                    return Ok(values
                        .iter()
                        .filter_map(|v| serde_json::from_str::<StoredItem>(v).ok())
                        .map(|s| WorkingItem {
                            memory_id: MemoryId(s.id),
                            content: s.content,
                            at: s.at,
                        })
                        .collect())
                }
                Err(why) => self.mark_down(&why),
            }
        }
        self.fallback.window(agent, session, now).await
    }

    async fn clear(&self, agent: &AgentId, session: &SessionId) -> MemoryResult<usize> {
        let local = self.fallback.clear(agent, session).await?;
        if let Some(mut connection) = self.connection().await {
            let key = window_key(agent, session);
            let mut pipe = redis::pipe();
            pipe.atomic().llen(&key).del(&key).ignore();
            match self
                .run(pipe.query_async::<(usize,)>(&mut connection))
                .await
            {
                Ok((held,)) => return Ok(held.max(local)),
                Err(why) => self.mark_down(&why),
            }
        }
        Ok(local)
    }

    async fn sweep(&self, now: DateTime<Utc>) -> MemoryResult<usize> {
        // Redis expires its windows itself; this also gives a quiet server a reconnection attempt.
        let _ = self.connection().await;
        self.fallback.sweep(now).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_namespaced_and_unambiguous() {
        let a = window_key(
            &AgentId::parse("a:b").unwrap(),
            &SessionId::parse("c").unwrap(),
        );
        let b = window_key(
            &AgentId::parse("a").unwrap(),
            &SessionId::parse("b:c").unwrap(),
        );
        assert_eq!(a, "mnemos:{a:b}:{c}:window");
        assert_ne!(a, b);
    }
}

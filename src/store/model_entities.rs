//! Asking the inner-thought model who and what each memory names, in the background.
//!
//! The entity index applies the rules in its write transaction as the outbox reaches
//! it; a model call is far too slow for that transaction and must never delay an
//! acknowledgement. So the index hands every memory it applied to this queue, and one
//! task asks the model about each (its own hard timeout), records the answer in
//! `entity_model_answers` (per memory and content hash, so a rebuild never asks again)
//! and indexes the memory once more, the rules' mentions and claims then completed by
//! what the answer adds that the text bears out ([`ground`](mnemos_actors::policy::model_entities::ground)).
//! A failed call records why (`timeout`, `error`, `malformed`) and the rules stand;
//! a timeout or an error is asked again after 5 s, 30 s, 2 and 10 minutes, and once
//! more after the next start. On start, memories
//! with no answer for their current text are queued again, so nothing a crash or a
//! full queue dropped is missed.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use mnemos_actors::error::MemoryResult;
use mnemos_actors::model::{AgentId, MemoryId};
use mnemos_actors::policy::profiles::PROFILE_KEY;
use mnemos_actors::thought::InnerThought;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::dialect::{commit, rows, run, Dialect, SqlStore};
use super::entities::EntityProjection;
use super::rows::Columns;
use super::sql::{Arg, Statement};

/// Most memories waiting for the model; past it the queue is rebuilt by a scan.
const MAX_QUEUED: usize = 100_000;

/// Memories read per page of the scan for memories without an answer.
const SCAN_PAGE: i64 = 500;

/// How long a memory whose call timed out or failed waits before it is asked again,
/// per attempt; after the last it waits for the next start.
const RETRY_AFTER: [std::time::Duration; 4] = [
    std::time::Duration::from_secs(5),
    std::time::Duration::from_secs(30),
    std::time::Duration::from_secs(120),
    std::time::Duration::from_secs(600),
];

/// The memories waiting for the model, shared by the entity index (which adds what it
/// applied) and the task that asks.
#[derive(Default)]
pub struct NamingQueue {
    /// Memory ids in the order they were applied.
    pending: Mutex<VecDeque<MemoryId>>,
    /// Wakes the task when something is added.
    added: Notify,
    /// Set when the queue overflowed (and on start): scan the store for what has no answer.
    rescan: AtomicBool,
    /// Whether the task is scanning or asking (false only while it waits for work).
    working: AtomicBool,
    /// Memories waiting to be asked again after a timeout or an error.
    retrying: AtomicUsize,
    /// Calls made by this queue's task, by outcome, in [`OUTCOMES`] order.
    outcomes: [AtomicU64; OUTCOMES.len()],
}

/// The outcomes of a call to the model, as `mnemos_entity_naming_total{outcome}` names them.
pub const OUTCOMES: [&str; 4] = ["ok", "timeout", "error", "malformed"];

/// What one server's naming task has done and has left, for `/metrics`: kept per
/// queue rather than in the process's recorder, so two runtimes in one process
/// (tests, a program embedding two) each report their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NamingProgress {
    /// Memories queued, being asked, or waiting to be asked again.
    pub waiting: usize,
    /// Calls made, by outcome, in [`OUTCOMES`] order.
    pub outcomes: [u64; OUTCOMES.len()],
}

impl NamingQueue {
    /// A queue that scans the store first.
    pub fn new() -> Arc<Self> {
        let queue = Self::default();
        queue.rescan.store(true, Ordering::SeqCst);
        Arc::new(queue)
    }

    /// Queue `ids` (applied by the entity index); past [`MAX_QUEUED`] they are left
    /// to a scan.
    pub fn push(&self, ids: impl IntoIterator<Item = MemoryId>) {
        let Ok(mut pending) = self.pending.lock() else {
            return;
        };
        for id in ids {
            if pending.len() >= MAX_QUEUED {
                self.rescan.store(true, Ordering::SeqCst);
                break;
            }
            pending.push_back(id);
        }
        drop(pending);
        self.added.notify_one();
    }

    /// The next memory to ask about.
    fn pop(&self) -> Option<MemoryId> {
        self.pending.lock().ok()?.pop_front()
    }

    /// What the task has done and what is left (`mnemos_entity_naming_*` in `/metrics`).
    /// A scan still to run counts as one memory waiting, since it may queue some.
    pub fn progress(&self) -> NamingProgress {
        NamingProgress {
            waiting: self.len()
                + usize::from(self.working.load(Ordering::SeqCst))
                + self.retrying.load(Ordering::SeqCst)
                + usize::from(self.rescan.load(Ordering::SeqCst)),
            outcomes: std::array::from_fn(|i| self.outcomes[i].load(Ordering::Relaxed)),
        }
    }

    /// Count a call that ended with `outcome` (one of [`OUTCOMES`]).
    fn count(&self, outcome: &str) {
        if let Some(i) = OUTCOMES.iter().position(|o| *o == outcome) {
            self.outcomes[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Memories waiting.
    pub fn len(&self) -> usize {
        self.pending.lock().map_or(0, |p| p.len())
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The running task; stop it before the store closes.
pub struct NamingTask {
    /// Cancels the task.
    stop: CancellationToken,
    /// The task.
    handle: tokio::task::JoinHandle<()>,
    /// What it works through, for its progress in `/metrics`.
    queue: Arc<NamingQueue>,
}

impl NamingTask {
    /// The queue the task works through (its [`NamingQueue::progress`]).
    pub fn queue(&self) -> Arc<NamingQueue> {
        self.queue.clone()
    }

    /// Stop asking (a call under way is dropped; its memory is asked again after the
    /// next start) and wait for the task to end.
    pub async fn stop(self) {
        self.stop.cancel();
        let _ = self.handle.await;
    }
}

/// What the task needs.
struct Naming<D: Dialect> {
    /// The database of the memories and of the answers.
    store: SqlStore<D>,
    /// The entity index, which indexes a memory again once its answer is recorded.
    index: Arc<EntityProjection<D>>,
    /// The model.
    thought: Arc<dyn InnerThought>,
    /// What waits.
    queue: Arc<NamingQueue>,
    /// Memories whose call timed out or failed, with when to ask again and how many
    /// times they were asked.
    later: Mutex<Vec<(tokio::time::Instant, MemoryId, usize)>>,
}

/// Start asking `thought` about the memories `queue` receives.
pub fn start<D: Dialect>(
    store: SqlStore<D>,
    index: Arc<EntityProjection<D>>,
    thought: Arc<dyn InnerThought>,
    queue: Arc<NamingQueue>,
) -> NamingTask {
    let stop = CancellationToken::new();
    let naming = Naming {
        store,
        index,
        thought,
        queue: queue.clone(),
        later: Mutex::new(Vec::new()),
    };
    let token = stop.clone();
    let handle = tokio::spawn(async move {
        tokio::select! {
            () = token.cancelled() => {}
            () = naming.run() => {}
        }
    });
    NamingTask {
        stop,
        handle,
        queue,
    }
}

/// The outcome word of a failed call's description ("timeout after 2000 ms" → `timeout`).
fn outcome_of(fallback: Option<&str>) -> &'static str {
    match fallback {
        None => "ok",
        Some(why) if why.starts_with("timeout") => "timeout",
        Some(why) if why.starts_with("malformed") => "malformed",
        Some(_) => "error",
    }
}

impl<D: Dialect> Naming<D> {
    /// Ask about what waits, forever.
    async fn run(&self) {
        loop {
            self.queue.working.store(true, Ordering::SeqCst);
            if self.queue.rescan.swap(false, Ordering::SeqCst) {
                if let Err(error) = self.scan().await {
                    tracing::warn!(%error, "could not list the memories the model has not named yet; trying again");
                    self.queue.rescan.store(true, Ordering::SeqCst);
                    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
                    continue;
                }
            }
            let now = tokio::time::Instant::now();
            let (due, next_retry) = match self.later.lock() {
                Ok(mut later) => {
                    let due: Vec<(MemoryId, usize)> = later
                        .iter()
                        .filter(|(at, _, _)| *at <= now)
                        .map(|(_, id, attempts)| (id.clone(), *attempts))
                        .collect();
                    later.retain(|(at, _, _)| *at > now);
                    self.queue.retrying.store(later.len(), Ordering::SeqCst);
                    (due, later.iter().map(|(at, _, _)| *at).min())
                }
                Err(_) => (Vec::new(), None),
            };
            for (id, attempts) in due {
                self.ask(&id, attempts).await;
            }
            let Some(id) = self.queue.pop() else {
                // Woken by a push or a retry falling due; a minute at most, for a
                // rescan the overflow asked for.
                let wait = next_retry
                    .map_or(std::time::Duration::from_secs(60), |at| {
                        at.saturating_duration_since(now)
                    })
                    .min(std::time::Duration::from_secs(60));
                self.queue.working.store(false, Ordering::SeqCst);
                let _ = tokio::time::timeout(wait, self.queue.added.notified()).await;
                continue;
            };
            self.ask(&id, 0).await;
        }
    }

    /// Ask about memory `id` (asked `attempts` times before in this process); a call
    /// that timed out or failed is asked again later (`RETRY_AFTER`).
    async fn ask(&self, id: &MemoryId, attempts: usize) {
        match self.name(id).await {
            Ok(outcome) if outcome == "timeout" || outcome == "error" => {
                if let Some(delay) = RETRY_AFTER.get(attempts) {
                    if let Ok(mut later) = self.later.lock() {
                        later.push((
                            tokio::time::Instant::now() + *delay,
                            id.clone(),
                            attempts + 1,
                        ));
                        self.queue.retrying.store(later.len(), Ordering::SeqCst);
                    }
                }
            }
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(%error, memory = %id, "could not record what the model names; it is asked again after the next start");
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
        }
    }

    /// Queue every active memory with no answer for its current text (or only one
    /// that timed out or failed).
    async fn scan(&self) -> MemoryResult<()> {
        let mut after = String::new();
        loop {
            let page = self
                .store
                .all(
                    &Statement::new(
                        "SELECT m.id FROM memories m WHERE m.status = 'active' AND m.id > $1 \
                         AND NOT EXISTS (SELECT 1 FROM entity_model_answers a \
                             WHERE a.memory_id = m.id AND a.content_hash = m.content_hash \
                             AND a.outcome IN ('ok', 'malformed')) \
                         ORDER BY m.id LIMIT $2",
                        [Arg::Text(&after), Arg::Integer(SCAN_PAGE)],
                    ),
                    |row| row.text("id"),
                )
                .await?;
            let Some(last) = page.last().cloned() else {
                return Ok(());
            };
            let full = page.len() as i64 == SCAN_PAGE;
            self.queue.push(page.into_iter().map(MemoryId));
            if !full || self.queue.rescan.load(Ordering::SeqCst) {
                return Ok(());
            }
            after = last;
        }
    }

    /// Ask the model about memory `id` (unless it is gone, not active, a profile, or
    /// answered for its text already), record the answer, index the memory again.
    /// Answers the call's outcome (`ok`, `timeout`, `error`, `malformed`; `skipped`
    /// when nothing was asked).
    async fn name(&self, id: &MemoryId) -> MemoryResult<&'static str> {
        let found = self
            .store
            .all(
                &Statement::new(
                    "SELECT m.agent_id, m.content, m.content_hash, m.metadata, \
                     (SELECT COUNT(*) FROM entity_model_answers a WHERE a.memory_id = m.id \
                      AND a.content_hash = m.content_hash AND a.outcome IN ('ok', 'malformed')) AS answered \
                     FROM memories m WHERE m.id = $1 AND m.status = 'active'",
                    [Arg::Text(&id.0)],
                ),
                |row| {
                    let profile = row
                        .json("metadata")?
                        .ok()
                        .is_some_and(|m| m.get(PROFILE_KEY).is_some());
                    Ok((
                        row.text("agent_id")?,
                        row.text("content")?,
                        row.text("content_hash")?,
                        profile || row.integer("answered")? > 0,
                    ))
                },
            )
            .await?;
        let Some((agent, content, hash, done)) = found.into_iter().next() else {
            return Ok("skipped");
        };
        if done {
            return Ok("skipped");
        }
        let thought = self.thought.name_entities(&content).await;
        let outcome = outcome_of(thought.fallback.as_deref());
        self.queue.count(outcome);
        let answer = thought
            .value
            .as_ref()
            .and_then(|named| serde_json::to_string(named).ok())
            .unwrap_or_else(|| "{}".to_string());
        let agent = AgentId::stored(&agent)?;
        let mut tx = self.store.write_transaction().await?;
        run::<D>(
            &mut tx,
            &Statement::new(
                "INSERT INTO entity_model_answers \
                 (memory_id, content_hash, agent_id, provider, outcome, answer, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7) \
                 ON CONFLICT (memory_id, content_hash) DO UPDATE SET provider = excluded.provider, \
                 outcome = excluded.outcome, answer = excluded.answer, created_at = excluded.created_at",
                [
                    Arg::Text(&id.0),
                    Arg::Text(&hash),
                    Arg::Text(agent.as_str()),
                    Arg::Text(thought.provider),
                    Arg::Text(outcome),
                    Arg::Text(&answer),
                    Arg::Time(chrono::Utc::now()),
                ],
            ),
        )
        .await?;
        // The memory may have been erased while the model thought: nothing to index
        // then, and no answer of it may stay.
        let still_there = rows::<D>(
            &mut tx,
            &Statement::new(
                "SELECT 1 AS one FROM memories WHERE id = $1",
                [Arg::Text(&id.0)],
            ),
        )
        .await?;
        if still_there.is_empty() {
            run::<D>(
                &mut tx,
                &Statement::new(
                    "DELETE FROM entity_model_answers WHERE memory_id = $1",
                    [Arg::Text(&id.0)],
                ),
            )
            .await?;
            commit(tx).await?;
            return Ok("skipped");
        }
        if outcome == "ok" {
            self.index.index_again(tx, id, &agent).await?;
        } else {
            commit(tx).await?;
        }
        Ok(outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_call_is_recorded_by_what_went_wrong() {
        assert_eq!(outcome_of(None), "ok");
        assert_eq!(outcome_of(Some("timeout after 2000 ms")), "timeout");
        assert_eq!(outcome_of(Some("malformed answer: eof")), "malformed");
        assert_eq!(outcome_of(Some("error: connection refused")), "error");
    }

    #[test]
    fn an_overflowing_queue_asks_for_a_scan() {
        let queue = NamingQueue::new();
        queue.rescan.store(false, Ordering::SeqCst);
        queue.push((0..MAX_QUEUED + 5).map(|n| MemoryId(n.to_string())));
        assert_eq!(queue.len(), MAX_QUEUED);
        assert!(queue.rescan.load(Ordering::SeqCst));
        assert_eq!(queue.pop(), Some(MemoryId("0".into())));
    }

    #[test]
    fn progress_counts_what_waits_and_each_outcome() {
        let queue = NamingQueue::new();
        // A fresh queue has a scan to run: something may wait.
        assert_eq!(queue.progress().waiting, 1);
        queue.rescan.store(false, Ordering::SeqCst);
        assert_eq!(queue.progress().waiting, 0);
        queue.push([MemoryId("a".into()), MemoryId("b".into())]);
        queue.retrying.store(1, Ordering::SeqCst);
        queue.working.store(true, Ordering::SeqCst);
        assert_eq!(queue.progress().waiting, 4);
        for outcome in ["ok", "ok", "timeout", "malformed", "skipped"] {
            queue.count(outcome);
        }
        assert_eq!(queue.progress().outcomes, [2, 1, 0, 1]);
    }
}

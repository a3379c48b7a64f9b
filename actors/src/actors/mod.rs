//! The actors. Each module has one shape: `XRef`, `XMsg`, `XArgs`, `XState`, reply ports
//! named `reply` carrying `Result<T, MemoryError>`, and `XHandle`, the typed handle
//! everybody else uses to reach the actor (`episodic.get_many(ids)`).
//!
//! A request's failure goes back through its reply port and the actor lives on. An
//! `Err` returned from `handle` (or a panic) means the actor's state is broken: it
//! stops, and the [`crate::supervisor`] restarts it with the same arguments, which
//! hold its store, so a restart loses nothing durable.
//!
//! Each store has exactly one owner: the episodic actor the [`crate::store::MemoryStore`],
//! the vector actor the embedder and the [`crate::store::VectorIndex`], the graph actor
//! the [`crate::store::GraphStore`], the working actor the [`crate::store::WorkingStore`],
//! the namespaces actor the project and KV stores. The consolidator, the projector and
//! the runtime reach them only through their handles.

pub mod cognition;
pub mod consolidator;
pub mod episodic;
pub mod graph;
pub mod namespaces;
pub mod projector;
pub mod vectors;
pub mod working;

use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor::{Message, RpcReplyPort};

use crate::error::{MemoryError, MemoryResult};
use crate::supervisor::{ChildKind, Directory};

/// The reply port of a request: the answer or the request's typed failure.
pub type Reply<T> = RpcReplyPort<MemoryResult<T>>;

/// Run a read on its own task and answer `reply` from there, so slow reads never
/// queue behind each other in the actor's mailbox.
pub(crate) fn answer_in_task<T, F>(reply: Reply<T>, work: F)
where
    T: Send + 'static,
    F: Future<Output = MemoryResult<T>> + Send + 'static,
{
    tokio::spawn(async move {
        let _ = reply.send(work.await);
    });
}

/// The error an actor returns from `handle` when a test injects a fault.
pub(crate) fn injected_fault(actor: &str) -> ractor::ActorProcessingErr {
    format!("fault injected into the {actor} actor").into()
}

/// Calls one child by message, whichever incarnation of it is running: finds its
/// current ref in the [`Directory`] and retries while it is being restarted.
pub struct Caller<M> {
    /// Where the supervisor publishes current refs.
    directory: Arc<Directory>,
    /// Which child this calls.
    kind: ChildKind,
    /// How long finding a live actor (and, by default, its answer) may take.
    call_timeout: Duration,
    /// The child's message type.
    message: PhantomData<fn(M)>,
}

impl<M> Clone for Caller<M> {
    fn clone(&self) -> Self {
        Self {
            directory: self.directory.clone(),
            kind: self.kind,
            call_timeout: self.call_timeout,
            message: PhantomData,
        }
    }
}

impl<M: Message> Caller<M> {
    /// A caller of child `kind` giving up after `call_timeout`.
    pub fn new(directory: Arc<Directory>, kind: ChildKind, call_timeout: Duration) -> Self {
        Self {
            directory,
            kind,
            call_timeout,
            message: PhantomData,
        }
    }

    /// How long finding a live actor may take.
    pub fn call_timeout(&self) -> Duration {
        self.call_timeout
    }

    /// Call the actor, retrying while it is restarting, until the call timeout.
    pub async fn ask<T: Send + 'static>(&self, build: impl Fn(Reply<T>) -> M) -> MemoryResult<T> {
        self.ask_within(None, build).await
    }

    /// [`Self::ask`], but once the message is delivered wait up to `answer_timeout` for
    /// the answer (long-running work such as a sleep cycle). Finding a live actor still
    /// gives up after the call timeout.
    pub async fn ask_within<T: Send + 'static>(
        &self,
        answer_timeout: Option<Duration>,
        build: impl Fn(Reply<T>) -> M,
    ) -> MemoryResult<T> {
        let timeout = self.call_timeout;
        let deadline = Instant::now() + timeout;
        let mut pause = Duration::from_millis(5);
        loop {
            if let Some(actor) = self.directory.actor::<M>(self.kind) {
                let remaining = deadline
                    .saturating_duration_since(Instant::now())
                    .max(Duration::from_millis(1));
                let wait = answer_timeout.unwrap_or(remaining);
                match actor.call(&build, Some(wait)).await {
                    Ok(ractor::rpc::CallResult::Success(result)) => return result,
                    Ok(ractor::rpc::CallResult::Timeout) => {
                        return Err(MemoryError::unavailable(format!(
                            "the {} actor did not answer within {wait:?}; retry later",
                            self.kind.as_str(),
                        )))
                    }
                    // The actor died with our message in its mailbox, or before we sent: retry.
                    Ok(ractor::rpc::CallResult::SenderError) | Err(_) => {}
                }
            }
            if Instant::now() >= deadline {
                return Err(MemoryError::unavailable(format!(
                    "the {} actor is restarting and did not come back within {timeout:?}; retry later",
                    self.kind.as_str(),
                )));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(100));
        }
    }

    /// Send without waiting for an answer, to the running actor; false when none runs.
    pub fn cast(&self, message: M) -> bool {
        self.directory
            .actor::<M>(self.kind)
            .is_some_and(|actor| actor.cast(message).is_ok())
    }

    /// Ask the running actor once, waiting at most `wait`; None when it is down or slow
    /// (health checks must not wait for a restart).
    pub async fn try_ask<T: Send + 'static>(
        &self,
        wait: Duration,
        build: impl FnOnce(Reply<T>) -> M,
    ) -> Option<T> {
        let actor = self.directory.actor::<M>(self.kind)?;
        match actor.call(build, Some(wait)).await {
            Ok(ractor::rpc::CallResult::Success(Ok(value))) => Some(value),
            _ => None,
        }
    }
}

//! The actors. Each module has one shape: `XRef`, `XMsg`, `XArgs`, `XState`, and
//! reply ports named `reply` carrying `Result<T, MemoryError>`.
//!
//! A request's failure goes back through its reply port and the actor lives on. An
//! `Err` returned from `handle` (or a panic) means the actor's state is broken: it
//! stops, and the [`crate::supervisor`] restarts it with the same arguments, which
//! hold the stores, so a restart loses nothing durable.

pub mod cognition;
pub mod consolidator;
pub mod episodic;
pub mod graph;
pub mod namespaces;
pub mod projector;
pub mod vectors;
pub mod working;

use std::future::Future;

use ractor::RpcReplyPort;

use crate::error::MemoryResult;

/// Run a read on its own task and answer `reply` from there, so slow reads never
/// queue behind each other in the actor's mailbox.
pub(crate) fn answer_in_task<T, F>(reply: RpcReplyPort<MemoryResult<T>>, work: F)
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

//! Work the runtime starts after answering (an exchange mined, a session compacted):
//! counted, so a shutdown waits for it instead of dropping it mid-way. A CLI command is
//! a process that ends right after its answer; without this, what it scheduled in the
//! background would die with it.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

/// The count of running background tasks and a signal when it reaches zero.
#[derive(Default)]
pub(crate) struct BackgroundWork {
    /// Tasks started and not yet finished.
    running: AtomicUsize,
    /// Woken each time a task finishes.
    finished: Notify,
}

/// Decrements the count when the task ends, however it ends (panics included).
struct Running(Arc<BackgroundWork>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::AcqRel);
        self.0.finished.notify_waiters();
    }
}

impl BackgroundWork {
    /// Run `work` on the tokio runtime, counted until it ends.
    pub(crate) fn spawn(self: &Arc<Self>, work: impl Future<Output = ()> + Send + 'static) {
        self.running.fetch_add(1, Ordering::AcqRel);
        let guard = Running(self.clone());
        tokio::spawn(async move {
            let _guard = guard;
            work.await;
        });
    }

    /// Tasks running now.
    pub(crate) fn running(&self) -> usize {
        self.running.load(Ordering::Acquire)
    }

    /// Wait until no task runs, or `limit` passes; true when all finished.
    pub(crate) async fn settle(&self, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let notified = self.finished.notified();
            if self.running() == 0 {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.running() == 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn settle_waits_for_running_work_and_counts_panics_as_finished() {
        let work = Arc::new(BackgroundWork::default());
        let (release, wait) = tokio::sync::oneshot::channel::<()>();
        work.spawn(async move {
            let _ = wait.await;
        });
        work.spawn(async { panic!("a failing task still ends") });
        assert!(!work.settle(Duration::from_millis(50)).await);
        release.send(()).unwrap();
        assert!(work.settle(Duration::from_secs(5)).await);
        assert_eq!(work.running(), 0);
    }
}

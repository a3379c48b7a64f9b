//! The injected clock: nothing in the runtime reads the system time directly.

use std::sync::Mutex;

use chrono::{DateTime, Utc};

/// A source of "now".
pub trait Clock: Send + Sync + 'static {
    /// The current time.
    fn now(&self) -> DateTime<Utc>;
}

/// The real clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    // The one place the wall clock is read.
    #[allow(clippy::disallowed_methods)]
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock tests move by hand.
#[derive(Debug)]
pub struct ManualClock {
    /// The time `now()` returns.
    now: Mutex<DateTime<Utc>>,
}

impl ManualClock {
    /// A clock stopped at `now`.
    pub fn new(now: DateTime<Utc>) -> Self {
        Self {
            now: Mutex::new(now),
        }
    }
    /// Move the clock forward.
    pub fn advance(&self, by: chrono::Duration) {
        let mut now = self.now.lock().expect("clock lock poisoned");
        *now += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.now.lock().expect("clock lock poisoned")
    }
}

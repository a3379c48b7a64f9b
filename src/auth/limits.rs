//! Limits per key: a request rate and a write budget per window, and a write budget per
//! session (task) for `extract_turn` and the proxy, whose writes a runaway agent loop
//! would otherwise multiply. Past a limit the answer is 429 `rate_limited` with
//! `Retry-After` (the seconds until the window that refused it ends).
//!
//! Windows are fixed and kept in memory, per process: a restart forgives. The local
//! operator (the CLI, a server without keys) is not limited.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use mnemos_actors::error::{ErrorCode, MemoryError, MemoryResult};

/// The limits (0 means unlimited).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimits {
    /// Length of the request and write window.
    pub window: Duration,
    /// Requests per key per window.
    pub requests: u32,
    /// Memories written per key per window.
    pub writes: u32,
    /// Memories written per key and session (task) per hour, by `extract_turn` and the proxy.
    pub session_writes: u32,
}

/// A fixed window's counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Window {
    /// When it began.
    started: Instant,
    /// What was spent in it.
    spent: u32,
}

/// Spend `n` of `limit` in the window of `length` that holds `now`, or say how long
/// until the window ends (pure: the clock is passed in).
fn charge(
    window: &mut Option<Window>,
    now: Instant,
    length: Duration,
    limit: u32,
    n: u32,
) -> Result<(), Duration> {
    if limit == 0 {
        return Ok(());
    }
    let current = match window {
        Some(w) if now.duration_since(w.started) < length => w,
        _ => window.insert(Window {
            started: now,
            spent: 0,
        }),
    };
    if current.spent.saturating_add(n) > limit && current.spent > 0 {
        return Err(length.saturating_sub(now.duration_since(current.started)));
    }
    if n > limit {
        // One request larger than the whole budget is refused outright (no window helps).
        return Err(length);
    }
    current.spent += n;
    Ok(())
}

/// A 429 whose message ends with the wait, which the HTTP layer sends as `Retry-After`.
pub fn rate_limited(what: &str, wait: Duration) -> MemoryError {
    let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    MemoryError::new(
        ErrorCode::RateLimited,
        format!("{what}; retry after {} s", seconds.max(1)),
    )
}

/// The seconds a `rate_limited` message asks the client to wait (1 when it says none).
pub fn retry_after_seconds(message: &str) -> u64 {
    message
        .rsplit_once("retry after ")
        .and_then(|(_, rest)| rest.strip_suffix(" s"))
        .and_then(|n| n.parse().ok())
        .unwrap_or(1)
}

/// The windows of every key (and key and session).
#[derive(Debug)]
pub struct Limiter {
    /// What is allowed.
    limits: RateLimits,
    /// Request windows by key id.
    requests: Mutex<HashMap<String, Option<Window>>>,
    /// Write windows by key id.
    writes: Mutex<HashMap<String, Option<Window>>>,
    /// Session write windows by (key id, session).
    sessions: Mutex<HashMap<(String, String), Option<Window>>>,
}

/// The session budget's window.
const SESSION_WINDOW: Duration = Duration::from_secs(3600);

/// Most windows kept per map before idle ones are dropped.
const MAX_TRACKED: usize = 100_000;

impl Limiter {
    /// A limiter enforcing `limits`.
    pub fn new(limits: RateLimits) -> Self {
        Self {
            limits,
            requests: Mutex::new(HashMap::new()),
            writes: Mutex::new(HashMap::new()),
            sessions: Mutex::new(HashMap::new()),
        }
    }

    /// Count one request of key `key`.
    pub fn request(&self, key: &str, now: Instant) -> MemoryResult<()> {
        let limits = self.limits;
        spend(
            &self.requests,
            key.to_string(),
            now,
            limits.window,
            limits.requests,
            1,
        )
        .map_err(|wait| {
            rate_limited(
                &format!(
                    "key {key} made more than {} requests in {} s (auth.requests_per_window)",
                    limits.requests,
                    limits.window.as_secs()
                ),
                wait,
            )
        })
    }

    /// Count `n` memories written by key `key`.
    pub fn writes(&self, key: &str, n: u32, now: Instant) -> MemoryResult<()> {
        let limits = self.limits;
        spend(&self.writes, key.to_string(), now, limits.window, limits.writes, n).map_err(
            |wait| {
                rate_limited(
                    &format!(
                        "key {key} is over its write budget of {} memories per {} s (auth.writes_per_window)",
                        limits.writes,
                        limits.window.as_secs()
                    ),
                    wait,
                )
            },
        )
    }

    /// Count `n` memories written by key `key` in session `session`.
    pub fn session_writes(
        &self,
        key: &str,
        session: &str,
        n: u32,
        now: Instant,
    ) -> MemoryResult<()> {
        let limit = self.limits.session_writes;
        spend(
            &self.sessions,
            (key.to_string(), session.to_string()),
            now,
            SESSION_WINDOW,
            limit,
            n,
        )
        .map_err(|wait| {
            rate_limited(
                &format!(
                    "session {session} is over its write budget of {limit} memories per hour (auth.session_writes_per_hour)"
                ),
                wait,
            )
        })
    }
}

/// Charge the window of `id` in `map`, dropping idle windows when the map is large.
fn spend<K: std::hash::Hash + Eq>(
    map: &Mutex<HashMap<K, Option<Window>>>,
    id: K,
    now: Instant,
    length: Duration,
    limit: u32,
    n: u32,
) -> Result<(), Duration> {
    if limit == 0 {
        return Ok(());
    }
    let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
    if map.len() >= MAX_TRACKED {
        map.retain(|_, w| w.is_some_and(|w| now.duration_since(w.started) < length));
    }
    charge(map.entry(id).or_insert(None), now, length, limit, n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_admits_its_limit_then_says_how_long_to_wait() {
        let start = Instant::now();
        let mut window = None;
        let minute = Duration::from_secs(60);
        for _ in 0..3 {
            assert!(charge(&mut window, start, minute, 3, 1).is_ok());
        }
        let wait = charge(&mut window, start + Duration::from_secs(20), minute, 3, 1).unwrap_err();
        assert_eq!(wait, Duration::from_secs(40));
        // The next window starts fresh.
        assert!(charge(&mut window, start + minute, minute, 3, 1).is_ok());
        // Unlimited is unlimited.
        let mut free = None;
        assert!((0..1000).all(|_| charge(&mut free, start, minute, 0, 5).is_ok()));
        // More than the whole budget at once never fits.
        assert_eq!(charge(&mut None, start, minute, 3, 4), Err(minute));
    }

    #[test]
    fn keys_and_sessions_have_their_own_windows() {
        let limiter = Limiter::new(RateLimits {
            window: Duration::from_secs(60),
            requests: 2,
            writes: 5,
            session_writes: 3,
        });
        let now = Instant::now();
        assert!(limiter.request("a", now).is_ok());
        assert!(limiter.request("a", now).is_ok());
        let refused = limiter.request("a", now).unwrap_err();
        assert_eq!(refused.code, ErrorCode::RateLimited);
        assert_eq!(retry_after_seconds(&refused.message), 60);
        assert!(
            limiter.request("b", now).is_ok(),
            "another key is not charged"
        );
        assert!(limiter.writes("a", 5, now).is_ok());
        assert!(limiter.writes("a", 1, now).is_err());
        assert!(limiter.session_writes("a", "s1", 3, now).is_ok());
        assert!(limiter.session_writes("a", "s1", 1, now).is_err());
        assert!(limiter.session_writes("a", "s2", 1, now).is_ok());
        assert_eq!(retry_after_seconds("no hint"), 1);
    }
}

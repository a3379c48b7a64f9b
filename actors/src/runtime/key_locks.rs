//! Per-key write locks: concurrent writes of the same content by the same agent take
//! turns, so the second one sees the first and is deduplicated into it instead of
//! inserting a twin (within this process; the SQL store is the last word across
//! processes).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::OwnedMutexGuard;

/// A lock per key, created on first use and dropped when nobody holds or waits for it.
#[derive(Default)]
pub(crate) struct KeyLocks {
    /// The live locks by key.
    locks: Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>,
}

/// Held locks; released (and forgotten when unused) on drop.
pub(crate) struct KeyGuard {
    /// The map the locks came from, to forget the unused ones.
    locks: Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>,
    /// The held locks with their keys, in acquisition order.
    held: Vec<(String, OwnedMutexGuard<()>)>,
}

impl KeyLocks {
    /// Take the locks of `keys` (duplicates allowed), always in sorted order so two
    /// batches sharing keys cannot deadlock.
    pub(crate) async fn acquire(&self, mut keys: Vec<String>) -> KeyGuard {
        keys.sort();
        keys.dedup();
        let mut held = Vec::with_capacity(keys.len());
        for key in keys {
            let lock = {
                let mut map = self.locks.lock().unwrap_or_else(|e| e.into_inner());
                map.entry(key.clone()).or_default().clone()
            };
            held.push((key, lock.lock_owned().await));
        }
        KeyGuard {
            locks: self.locks.clone(),
            held,
        }
    }

    /// Number of keys with a live lock (for tests).
    #[cfg(test)]
    pub(crate) fn live(&self) -> usize {
        self.locks.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

impl Drop for KeyGuard {
    fn drop(&mut self) {
        let keys: Vec<String> = self.held.iter().map(|(k, _)| k.clone()).collect();
        self.held.clear();
        let mut map = self.locks.lock().unwrap_or_else(|e| e.into_inner());
        for key in keys {
            // Only the map's own reference left: nobody holds it or waits for it.
            if map
                .get(&key)
                .is_some_and(|lock| Arc::strong_count(lock) == 1)
            {
                map.remove(&key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn holders_of_one_key_take_turns_and_unused_keys_are_forgotten() {
        let locks = Arc::new(KeyLocks::default());
        let first = locks
            .acquire(vec!["a".into(), "b".into(), "a".into()])
            .await;
        let waiting = {
            let locks = locks.clone();
            tokio::spawn(async move { locks.acquire(vec!["b".into()]).await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "b is held");
        // Another key is free.
        drop(locks.acquire(vec!["c".into()]).await);
        drop(first);
        let second = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("b is released")
            .unwrap();
        drop(second);
        assert_eq!(locks.live(), 0);
    }
}

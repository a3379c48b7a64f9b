//! Working-memory backends of the service: the in-process store lives in the actors
//! crate; the Redis store (`working.backend = "redis"`) lives here.

pub mod redis;

use std::sync::Arc;
use std::time::Duration;

use mnemos_actors::error::MemoryResult;
use mnemos_actors::store::memory::InMemoryWorkingStore;
use mnemos_actors::store::WorkingStore;

use crate::config::WorkingSettings;

/// The working store the settings ask for (Redis connects here; an unreachable Redis
/// starts degraded, not failed).
pub async fn from_settings(settings: &WorkingSettings) -> MemoryResult<Arc<dyn WorkingStore>> {
    Ok(match settings.backend.as_str() {
        "redis" => Arc::new(
            self::redis::RedisWorkingStore::connect(
                &settings.url,
                settings.window,
                settings.ttl_seconds,
                Duration::from_millis(settings.timeout_ms),
            )
            .await?,
        ),
        _ => Arc::new(InMemoryWorkingStore::new(
            settings.window,
            settings.ttl_seconds,
        )),
    })
}

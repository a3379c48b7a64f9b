//! Validation of [`Settings`], one method per section: what the types alone cannot
//! check, each error naming the key to fix. [`Settings::validate`] calls them in order.

use super::{bad, ConfigError, Settings};

/// Largest `storage.cache_mib`: the pool's four connections at this many MiB each are
/// 4 GiB of page cache, more than any deployment of mnemos needs.
const MAX_CACHE_MIB: u32 = 1024;

/// Largest `storage.row_cache`: about a GiB of decoded memories.
const MAX_ROW_CACHE: usize = 1_000_000;

/// Largest `storage.mmap_mib`: SQLite's own limit (`SQLITE_MAX_MMAP_SIZE`, just under 2 GiB).
const MAX_MMAP_MIB: u64 = 2047;

impl Settings {
    /// `[auth]`: a known mode, and keys whenever the server listens beyond loopback
    /// (unless the operator opted out, which start-up logs as a warning).
    pub(super) fn validate_auth(&self) -> Result<(), ConfigError> {
        match self.auth.mode.as_str() {
            "none" | "keys" => {}
            other => {
                return Err(bad(
                    "auth.mode",
                    format!("unknown mode {other:?}; use \"none\" or \"keys\""),
                ))
            }
        }
        if self.auth.rate_window_seconds == 0 || self.auth.rate_window_seconds > 86_400 {
            return Err(bad(
                "auth.rate_window_seconds",
                "the rate window is 1 to 86400 seconds",
            ));
        }
        let loopback = self
            .server
            .bind
            .parse::<std::net::SocketAddr>()
            .is_ok_and(|a| a.ip().is_loopback());
        if !loopback && !self.auth.keys() && !self.auth.allow_unauthenticated_network {
            return Err(bad(
                "auth.mode",
                format!(
                    "the server would listen on {} without API keys: anyone who reaches it \
                     could read and change every memory. Set auth.mode = \"keys\" (create a \
                     key with `mnemos keys create`), bind a loopback address, or set \
                     auth.allow_unauthenticated_network = true if a trusted proxy in front \
                     authenticates",
                    self.server.bind
                ),
            ));
        }
        Ok(())
    }

    /// `[server]`: the listen address and the body limit.
    pub(super) fn validate_server(&self) -> Result<(), ConfigError> {
        if self.server.bind.parse::<std::net::SocketAddr>().is_err() {
            return Err(bad(
                "server.bind",
                format!(
                    "{:?} is not an address like 127.0.0.1:8077",
                    self.server.bind
                ),
            ));
        }
        if self.server.max_body_bytes < 1024 {
            return Err(bad("server.max_body_bytes", "must be at least 1024"));
        }
        if self.server.max_import_bytes < self.server.max_body_bytes {
            return Err(bad(
                "server.max_import_bytes",
                "must be at least server.max_body_bytes",
            ));
        }
        let key = if self.server.mcp_allowed_hosts.is_some() {
            "server.mcp_allowed_hosts"
        } else {
            "server.allowed_hosts"
        };
        for host in self.server.host_allow_list() {
            let authority = host.trim();
            let parses = authority.parse::<std::net::Ipv6Addr>().is_ok()
                || authority.parse::<axum::http::uri::Authority>().is_ok();
            if authority.is_empty() || authority.contains('/') || !parses {
                return Err(bad(
                    key,
                    format!("{host:?} is not a host name or host:port (such as mnemos.internal or 10.0.0.5:8077)"),
                ));
            }
        }
        for origin in &self.server.allowed_origins {
            let uri = origin.parse::<axum::http::Uri>().ok();
            let shaped = uri.as_ref().is_some_and(|uri| {
                matches!(uri.scheme_str(), Some("http" | "https"))
                    && uri.authority().is_some_and(|a| !a.host().is_empty())
                    && matches!(uri.path(), "" | "/")
                    && uri.query().is_none()
            });
            if !shaped {
                return Err(bad(
                    "server.allowed_origins",
                    format!("{origin:?} is not an origin like https://app.example.com or http://localhost:3000"),
                ));
            }
        }
        let timeouts = [
            ("server.header_timeout_ms", self.server.header_timeout_ms),
            ("server.body_timeout_ms", self.server.body_timeout_ms),
            ("server.idle_timeout_ms", self.server.idle_timeout_ms),
            (
                "server.mcp_session_idle_timeout_ms",
                self.server.mcp_session_idle_timeout_ms,
            ),
        ];
        for (key, value) in timeouts {
            if !(100..=86_400_000).contains(&value) {
                return Err(bad(
                    key,
                    format!("must be between 100 ms and 86400000 ms (a day), got {value}"),
                ));
            }
        }
        if !(1..=1_000_000).contains(&self.server.max_connections) {
            return Err(bad(
                "server.max_connections",
                "must be between 1 and 1000000 (and within the process's open-file limit)",
            ));
        }
        if !(1..=1_000_000).contains(&self.server.mcp_max_sessions) {
            return Err(bad(
                "server.mcp_max_sessions",
                "must be between 1 and 1000000",
            ));
        }
        Ok(())
    }

    /// `[storage]`: a known backend, a PostgreSQL URL when it is `postgres`, a memory map
    /// SQLite can hold, a page cache of at least one MiB, a row cache of at most a GiB or so.
    pub(super) fn validate_storage(&self) -> Result<(), ConfigError> {
        if !(1..=MAX_CACHE_MIB).contains(&self.storage.cache_mib) {
            return Err(bad(
                "storage.cache_mib",
                format!("must be between 1 and {MAX_CACHE_MIB} (MiB per connection)"),
            ));
        }
        if self.storage.row_cache > MAX_ROW_CACHE {
            return Err(bad(
                "storage.row_cache",
                format!("must be at most {MAX_ROW_CACHE} (memories); 0 turns the row cache off"),
            ));
        }
        if self.storage.mmap_mib > MAX_MMAP_MIB {
            return Err(bad(
                "storage.mmap_mib",
                format!("must be at most {MAX_MMAP_MIB} (MiB); 0 turns memory-mapped reads off"),
            ));
        }
        match self.storage.backend.as_str() {
            "sqlite" => {}
            "postgres" => {
                let url = self.storage.url.trim();
                if url.is_empty() {
                    return Err(bad(
                        "storage.url",
                        "must be a postgres:// URL when storage.backend = \"postgres\"",
                    ));
                }
                if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
                    return Err(bad(
                        "storage.url",
                        format!(
                            "{:?} is not a PostgreSQL URL; expected postgres://user@host:5432/database",
                            crate::store::redact_url(url)
                        ),
                    ));
                }
            }
            other => {
                return Err(bad(
                    "storage.backend",
                    format!("unknown backend {other:?}; expected \"sqlite\" or \"postgres\""),
                ));
            }
        }
        Ok(())
    }

    /// `[embedding]`: a known provider, its model directory, the built-in dimension.
    pub(super) fn validate_embedding(&self) -> Result<(), ConfigError> {
        match self.embedding.provider.as_str() {
            "builtin" | "static" => {}
            "local" => {
                if self.embedding.model_dir.as_os_str().is_empty() && self.embedding.model.is_empty() {
                    return Err(bad("embedding.model", "must name a Hugging Face model (sentence-transformers/all-MiniLM-L6-v2), or embedding.model_dir a sentence-transformers directory, when embedding.provider = \"local\""));
                }
                let endpoint = &self.embedding.hub_endpoint;
                if !(endpoint.is_empty() || endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
                    return Err(bad("embedding.hub_endpoint", "must be empty (HF_ENDPOINT or huggingface.co) or an http(s) URL"));
                }
            }
            "openai" => {
                let url = &self.embedding.base_url;
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(bad("embedding.base_url", "must be the http(s) URL of an OpenAI-compatible API ending in /v1 when embedding.provider = \"openai\""));
                }
                if self.embedding.model.trim().is_empty() {
                    return Err(bad("embedding.model", "must name the embedding model when embedding.provider = \"openai\""));
                }
                if self.embedding.dimensions > 65_536 {
                    return Err(bad("embedding.dimensions", "must be 0 (the model's own) to 65536"));
                }
                if !(1..=2048).contains(&self.embedding.batch_size) {
                    return Err(bad("embedding.batch_size", "must be between 1 and 2048"));
                }
                if !(1..=600_000).contains(&self.embedding.timeout_ms) {
                    return Err(bad("embedding.timeout_ms", "must be between 1 and 600000"));
                }
                if self.embedding.max_retries > 20 {
                    return Err(bad("embedding.max_retries", "must be 0 to 20"));
                }
                if self.embedding.max_input_chars == 0 {
                    return Err(bad("embedding.max_input_chars", "must be at least 1"));
                }
            }
            other => {
                return Err(bad(
                    "embedding.provider",
                    format!("unknown provider {other:?}; use \"static\", \"builtin\", \"local\" or \"openai\""),
                ))
            }
        }
        if !(8..=4096).contains(&self.embedding.builtin_dimension) {
            return Err(bad(
                "embedding.builtin_dimension",
                "must be between 8 and 4096",
            ));
        }
        if self.embedding.concurrency > 256 {
            return Err(bad(
                "embedding.concurrency",
                "must be 0 (one per core) to 256",
            ));
        }
        if self.embedding.threads > 256 {
            return Err(bad("embedding.threads", "must be 0 (every core) to 256"));
        }
        if !["auto", "float32", "int8"].contains(&self.embedding.precision.as_str()) {
            return Err(bad(
                "embedding.precision",
                "must be \"auto\" (int8 where the CPU has VNNI), \"float32\" or \"int8\"",
            ));
        }
        if self.embedding.micro_batch_ms > 50 {
            return Err(bad(
                "embedding.micro_batch_ms",
                "must be 0 (off) to 50: it is added to the latency of every small embedding",
            ));
        }
        if !(1..=10_000_000).contains(&self.embedding.max_queued_texts) {
            return Err(bad(
                "embedding.max_queued_texts",
                "must be between 1 and 10000000",
            ));
        }
        if !(1..=600_000).contains(&self.embedding.ms_per_text) {
            return Err(bad("embedding.ms_per_text", "must be between 1 and 600000"));
        }
        Ok(())
    }

    /// `[vectors]`: a known backend, Qdrant's URL and collection, the HNSW threshold.
    pub(super) fn validate_vectors(&self) -> Result<(), ConfigError> {
        match self.vectors.backend.as_str() {
            "embedded" => {}
            "qdrant" => {
                if !(self.vectors.url.starts_with("http://")
                    || self.vectors.url.starts_with("https://"))
                {
                    return Err(bad(
                        "vectors.url",
                        format!(
                            "vectors.backend = \"qdrant\" needs Qdrant's gRPC URL, e.g. http://127.0.0.1:6334 (got {:?})",
                            self.vectors.url
                        ),
                    ));
                }
                if self.vectors.collection.is_empty() || self.vectors.timeout_ms == 0 {
                    return Err(bad(
                        "vectors.collection",
                        "vectors.collection must be set and vectors.timeout_ms at least 1",
                    ));
                }
            }
            other => {
                return Err(bad(
                    "vectors.backend",
                    format!("unknown backend {other:?}; use \"embedded\" or \"qdrant\""),
                ))
            }
        }
        if self.vectors.hnsw_threshold < 100 {
            return Err(bad("vectors.hnsw_threshold", "must be at least 100"));
        }
        Ok(())
    }

    /// `[graph]`: a known backend and the URL its server speaks.
    pub(super) fn validate_graph(&self) -> Result<(), ConfigError> {
        match self.graph.backend.as_str() {
            "sql" => {}
            "falkordb" => {
                if !(self.graph.url.starts_with("redis://")
                    || self.graph.url.starts_with("rediss://"))
                {
                    return Err(bad(
                        "graph.url",
                        format!(
                            "graph.backend = \"falkordb\" needs a redis:// URL of the FalkorDB server (got {:?})",
                            self.graph.url
                        ),
                    ));
                }
                if self.graph.name.is_empty() || self.graph.timeout_ms == 0 {
                    return Err(bad(
                        "graph.name",
                        "graph.name must be set and graph.timeout_ms at least 1",
                    ));
                }
            }
            "neo4j" => {
                if !["bolt://", "bolt+s://", "neo4j://", "neo4j+s://"]
                    .iter()
                    .any(|scheme| self.graph.url.starts_with(scheme))
                {
                    return Err(bad(
                        "graph.url",
                        format!(
                            "graph.backend = \"neo4j\" needs a bolt:// or neo4j:// URI (got {:?})",
                            self.graph.url
                        ),
                    ));
                }
            }
            other => {
                return Err(bad(
                    "graph.backend",
                    format!("unknown backend {other:?}; use \"sql\", \"falkordb\" or \"neo4j\""),
                ))
            }
        }
        Ok(())
    }

    /// `[projector]`: positive intervals, batch and retry delays.
    pub(super) fn validate_projector(&self) -> Result<(), ConfigError> {
        for (key, value) in [
            ("projector.interval_ms", self.projector.interval_ms),
            ("projector.batch", self.projector.batch as u64),
            (
                "projector.retry_initial_ms",
                self.projector.retry_initial_ms,
            ),
            ("projector.retry_max_ms", self.projector.retry_max_ms),
        ] {
            if value == 0 {
                return Err(bad(key, "must be at least 1"));
            }
        }
        Ok(())
    }

    /// `[working]`: a known backend, a Redis URL for `redis`, a positive window and TTL.
    pub(super) fn validate_working(&self) -> Result<(), ConfigError> {
        match self.working.backend.as_str() {
            "memory" => {}
            "redis" => {
                if !(self.working.url.starts_with("redis://")
                    || self.working.url.starts_with("rediss://")
                    || self.working.url.starts_with("unix://"))
                {
                    return Err(bad(
                        "working.url",
                        format!(
                            "working.backend = \"redis\" needs a redis:// URL (got {:?})",
                            self.working.url
                        ),
                    ));
                }
                if self.working.timeout_ms == 0 {
                    return Err(bad("working.timeout_ms", "must be at least 1"));
                }
            }
            other => {
                return Err(bad(
                    "working.backend",
                    format!("unknown backend {other:?}; use \"memory\" or \"redis\""),
                ))
            }
        }
        if self.working.window == 0 {
            return Err(bad("working.window", "must be at least 1"));
        }
        if self.working.ttl_seconds == 0 {
            return Err(bad("working.ttl_seconds", "must be at least 1"));
        }
        Ok(())
    }

    /// `[sessions]` and `[proxy]`: positive sizes, a compaction point in (0, 1], an http(s) upstream.
    pub(super) fn validate_sessions_and_proxy(&self) -> Result<(), ConfigError> {
        for (key, value) in [
            ("sessions.window", self.sessions.window as u64),
            ("sessions.ttl_seconds", self.sessions.ttl_seconds),
            ("sessions.context_tokens", self.sessions.context_tokens),
            ("proxy.context_tokens", self.proxy.context_tokens),
            ("proxy.timeout_seconds", self.proxy.timeout_seconds),
        ] {
            if value == 0 {
                return Err(bad(key, "must be at least 1"));
            }
        }
        if !(self.sessions.compact_at_pct > 0.0 && self.sessions.compact_at_pct <= 1.0) {
            return Err(bad(
                "sessions.compact_at_pct",
                "must be above 0 and at most 1 (0.5 compacts at half the context)",
            ));
        }
        if !self.proxy.memory_budget_pct.is_finite() {
            return Err(bad(
                "proxy.memory_budget_pct",
                "must be a number (0.05 to 0.40)",
            ));
        }
        for (key, url) in [
            ("proxy.upstream_url", &self.proxy.upstream_url),
            ("proxy.embeddings_url", &self.proxy.embeddings_url),
        ] {
            let http = url.starts_with("http://") || url.starts_with("https://");
            if !url.is_empty() && !http {
                return Err(bad(
                    key,
                    "must start with http:// or https:// (e.g. http://127.0.0.1:8080/v1)",
                ));
            }
        }
        Ok(())
    }

    /// `[limits]`, `[extraction]` and `[namespaces]`: positive bounds, a default within the limit.
    pub(super) fn validate_limits(&self) -> Result<(), ConfigError> {
        for (key, value) in [
            ("limits.max_content_bytes", self.limits.max_content_bytes),
            ("limits.max_batch", self.limits.max_batch),
            ("limits.max_result_limit", self.limits.max_result_limit),
            ("limits.max_tags", self.limits.max_tags),
            ("limits.max_metadata_bytes", self.limits.max_metadata_bytes),
            (
                "extraction.max_memories_per_turn",
                self.extraction.max_memories_per_turn,
            ),
            (
                "namespaces.default_max_entries",
                self.namespaces.default_max_entries,
            ),
            (
                "namespaces.max_entries_limit",
                self.namespaces.max_entries_limit,
            ),
            (
                "namespaces.max_value_bytes",
                self.namespaces.max_value_bytes,
            ),
            ("namespaces.max_key_bytes", self.namespaces.max_key_bytes),
        ] {
            if value == 0 {
                return Err(bad(key, "must be at least 1"));
            }
        }
        if self.namespaces.default_max_entries > self.namespaces.max_entries_limit {
            return Err(bad(
                "namespaces.default_max_entries",
                "must not exceed namespaces.max_entries_limit",
            ));
        }
        Ok(())
    }

    /// `[memory]` and `[recall]`: importance in 0..1, weights in 0..10, expansion and cache bounds.
    pub(super) fn validate_recall(&self) -> Result<(), ConfigError> {
        if !(0.0..=1.0).contains(&self.memory.default_importance) {
            return Err(bad("memory.default_importance", "must be between 0 and 1"));
        }
        for (key, weight) in [
            ("recall.vector_weight", self.recall.vector_weight),
            ("recall.keyword_weight", self.recall.keyword_weight),
            ("recall.time_weight", self.recall.time_weight),
            ("recall.neighbour_weight", self.recall.neighbour_weight),
            ("recall.working_weight", self.recall.working_weight),
            ("recall.feedback_weight", self.recall.feedback_weight),
            ("recall.entity_weight", self.recall.entity_weight),
            ("recall.speaker_boost", self.recall.speaker_boost),
        ] {
            if !(0.0..=10.0).contains(&weight) {
                return Err(bad(key, "must be between 0 and 10"));
            }
        }
        if !(0.0..1.0).contains(&self.recall.session_diversity) {
            return Err(bad(
                "recall.session_diversity",
                "must be at least 0 and below 1",
            ));
        }
        if self.recall.vector_weight == 0.0 && self.recall.keyword_weight == 0.0 {
            return Err(bad(
                "recall.keyword_weight",
                "vector and keyword weights cannot both be 0",
            ));
        }
        if self.recall.expansion_seeds > 50 || self.recall.session_radius > 10 {
            return Err(bad(
                "recall.expansion_seeds",
                "expansion_seeds ≤ 50 and session_radius ≤ 10",
            ));
        }
        if self.recall.question_cache > 100_000 {
            return Err(bad(
                "recall.question_cache",
                "must be at most 100000 questions (each keeps up to 1 KiB of text and its vector)",
            ));
        }
        Ok(())
    }

    /// `[dedup]`, `[contradiction]` and `[retention]`: thresholds in range, a positive time scale.
    pub(super) fn validate_similarity(&self) -> Result<(), ConfigError> {
        if !(0.5..=1.0).contains(&self.dedup.threshold) {
            return Err(bad("dedup.threshold", "must be between 0.5 and 1"));
        }
        if !(0.0..1.0).contains(&self.contradiction.min_similarity)
            || self.contradiction.min_similarity >= self.dedup.threshold
        {
            return Err(bad(
                "contradiction.min_similarity",
                "must be in 0..1 and below dedup.threshold",
            ));
        }
        if !(self.retention.scale_days > 0.0 && self.retention.scale_days.is_finite()) {
            return Err(bad(
                "retention.scale_days",
                "must be a positive number of days",
            ));
        }
        Ok(())
    }

    /// `[cognition]` and `[archival]` beyond the schedules: cluster parameters, promotion, lease, idle hours.
    pub(super) fn validate_cognition(&self) -> Result<(), ConfigError> {
        if self.cognition.purge_after_days < 0 {
            return Err(bad(
                "cognition.purge_after_days",
                "must be 0 (never purge) or a number of days",
            ));
        }
        if !(self.cognition.cluster_threshold > 0.0 && self.cognition.cluster_threshold <= 2.0) {
            return Err(bad("cognition.cluster_threshold", "must be in (0, 2]"));
        }
        if self.cognition.min_cluster_size < 2 {
            return Err(bad("cognition.min_cluster_size", "must be at least 2"));
        }
        if self.cognition.max_cluster_size < self.cognition.min_cluster_size {
            return Err(bad(
                "cognition.max_cluster_size",
                "must be at least cognition.min_cluster_size",
            ));
        }
        for (key, value) in [
            (
                "cognition.cluster_tag_bonus",
                self.cognition.cluster_tag_bonus,
            ),
            (
                "cognition.cluster_edge_bonus",
                self.cognition.cluster_edge_bonus,
            ),
            (
                "cognition.cluster_time_bonus",
                self.cognition.cluster_time_bonus,
            ),
        ] {
            if !(0.0..=1.0).contains(&value) {
                return Err(bad(key, "must be in 0..1"));
            }
        }
        if self.cognition.cluster_time_scale_hours.is_nan()
            || self.cognition.cluster_time_scale_hours <= 0.0
        {
            return Err(bad(
                "cognition.cluster_time_scale_hours",
                "must be a positive number of hours",
            ));
        }
        if !(0.0..=1.0).contains(&self.cognition.promote_importance) {
            return Err(bad("cognition.promote_importance", "must be in 0..1"));
        }
        if self.cognition.lease_seconds < 5 {
            return Err(bad("cognition.lease_seconds", "must be at least 5"));
        }
        if self.archival.idle_hours < 0 {
            return Err(bad("archival.idle_hours", "must be 0 or more hours"));
        }
        Ok(())
    }

    /// `[inner_thought]`: a known provider, its URL and model, positive timeout and token budget.
    pub(super) fn validate_inner_thought(&self) -> Result<(), ConfigError> {
        match self.inner_thought.provider.as_str() {
            "none" => {}
            "openai" => {
                if self.inner_thought.base_url.trim().is_empty()
                    || !(self.inner_thought.base_url.starts_with("http://")
                        || self.inner_thought.base_url.starts_with("https://"))
                {
                    return Err(bad(
                        "inner_thought.base_url",
                        "provider \"openai\" needs the http(s) base URL of an OpenAI-compatible API, e.g. http://127.0.0.1:8080/v1",
                    ));
                }
                if self.inner_thought.model.trim().is_empty() {
                    return Err(bad(
                        "inner_thought.model",
                        "provider \"openai\" needs a model name",
                    ));
                }
            }
            other => {
                return Err(bad(
                    "inner_thought.provider",
                    format!("{other:?} is not a provider; use \"none\" or \"openai\""),
                ))
            }
        }
        if self.inner_thought.timeout_ms == 0 {
            return Err(bad("inner_thought.timeout_ms", "must be at least 1"));
        }
        if self.inner_thought.max_tokens == 0 {
            return Err(bad("inner_thought.max_tokens", "must be at least 1"));
        }
        if !(0.0..=2.0).contains(&self.inner_thought.temperature) {
            return Err(bad("inner_thought.temperature", "must be in 0..2"));
        }
        Ok(())
    }

    /// `[supervisor]`: a restart budget, ordered backoffs, a call timeout of at least 100 ms.
    pub(super) fn validate_supervisor(&self) -> Result<(), ConfigError> {
        if self.supervisor.max_restarts == 0 {
            return Err(bad("supervisor.max_restarts", "must be at least 1"));
        }
        if self.supervisor.initial_backoff_ms == 0
            || self.supervisor.max_backoff_ms < self.supervisor.initial_backoff_ms
        {
            return Err(bad(
                "supervisor.max_backoff_ms",
                "backoffs must be positive and max_backoff_ms ≥ initial_backoff_ms",
            ));
        }
        if self.supervisor.call_timeout_ms < 100 {
            return Err(bad("supervisor.call_timeout_ms", "must be at least 100"));
        }
        Ok(())
    }

    /// `[log]`: a tracing filter and a known format.
    pub(super) fn validate_log(&self) -> Result<(), ConfigError> {
        if tracing_subscriber::EnvFilter::try_new(&self.log.level).is_err() {
            return Err(bad(
                "log.level",
                format!("{:?} is not a tracing filter", self.log.level),
            ));
        }
        if !matches!(self.log.format.as_str(), "text" | "json") {
            return Err(bad("log.format", "use \"text\" or \"json\""));
        }
        Ok(())
    }
}

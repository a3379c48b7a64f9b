//! Start-up: open the stores the settings name, start the actor tree, bind the HTTP
//! listener (port 0 works), serve until a shutdown signal, then drain and flush.
//! `connections` serves the router on the listener under the connection limit and the
//! header and idle timeouts.

mod connections;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use mnemos_actors::clock::SystemClock;
use mnemos_actors::embedding::Embedder;
use mnemos_actors::error::MemoryError;
use mnemos_actors::runtime::RuntimeParts;
use mnemos_actors::store::Projection;
use mnemos_actors::Runtime;
use tokio::net::TcpListener;

use crate::auth::keys::Authenticator;
use crate::config::Settings;
use crate::data_dir::DataDirLock;
pub use crate::embedding::PendingEmbedder;
use crate::http::guard::GuardSettings;
use crate::http::identity::Gate;
use crate::router::RouterParts;
use crate::state::AppState;
use crate::store::SystemOfRecord;
use crate::vectors::hnsw::HnswVectorIndex;
use connections::ConnectionLimits;

/// A started runtime with the stores under it.
pub struct Services {
    /// The runtime handle.
    pub runtime: Runtime,
    /// The system of record (`storage.backend`; closed after the runtime stops).
    pub store: Arc<dyn mnemos_actors::store::MemoryStore>,
    /// The same store as opened, for closing its pool.
    record: SystemOfRecord,
    /// The configured embedder, when the stored vectors come from another model: what
    /// `mnemos reindex --reembed` and `POST /v1/admin/reembed` re-embed with.
    pub pending_embedder: Option<PendingEmbedder>,
    /// The task asking the inner-thought model what each memory names (stopped first
    /// on close), when the model does.
    naming: Option<crate::store::model_entities::NamingTask>,
    /// Held for the life of the process so two servers never share a data directory.
    _lock: DataDirLock,
}

/// Which embedder serves the stored vectors: the configured one, or (after the
/// configuration changed) the one that made them, with the configured one pending.
async fn choose_embedder(
    settings: &Settings,
    store: &dyn mnemos_actors::store::MemoryStore,
    allow_unavailable: bool,
) -> anyhow::Result<(Arc<dyn Embedder>, Option<PendingEmbedder>)> {
    let configured = crate::embedding::from_settings(&settings.embedding)
        .await
        .map_err(keyed_error)?;
    let configured_key = mnemos_actors::runtime::model_key(configured.as_ref());
    let spec = crate::embedding::spec_of(&settings.embedding).to_string();
    let stored = store.meta("embedding_model").await.map_err(keyed_error)?;
    let Some(stored) = stored.filter(|stored| *stored != configured_key) else {
        if store
            .meta("embedding_spec")
            .await
            .map_err(keyed_error)?
            .as_deref()
            != Some(spec.as_str())
        {
            store
                .set_meta("embedding_spec", Some(&spec))
                .await
                .map_err(keyed_error)?;
        }
        return Ok((configured, None));
    };
    let pending = PendingEmbedder {
        embedder: configured.clone(),
        spec,
    };
    let recorded = store.meta("embedding_spec").await.map_err(keyed_error)?;
    let stored_spec = recorded
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .or_else(|| crate::embedding::spec_of_model_key(&stored));
    let rebuilt = match stored_spec
        .as_ref()
        .and_then(|spec| crate::embedding::settings_of_spec(spec, &settings.embedding))
    {
        Some(old) => match crate::embedding::from_settings(&old).await {
            Ok(embedder) if mnemos_actors::runtime::model_key(embedder.as_ref()) == stored => {
                Ok(embedder)
            }
            Ok(embedder) => Err(format!(
                "its recorded settings now build {}",
                mnemos_actors::runtime::model_key(embedder.as_ref())
            )),
            Err(error) => Err(error.message),
        },
        None => Err("the data directory does not say how it was built".to_string()),
    };
    match rebuilt {
        Ok(old) => {
            tracing::warn!(
                stored = %stored,
                configured = %configured_key,
                "the stored vectors come from another embedding model than the configured one; \
                 recall and writes use the stored model until `mnemos reindex --reembed` \
                 (or POST /v1/admin/reembed) re-embeds every memory with the configured one"
            );
            Ok((old, Some(pending)))
        }
        Err(why) if allow_unavailable => {
            let stand_in = crate::embedding::UnavailableEmbedder::for_key(&stored)
                .ok_or_else(|| anyhow::anyhow!("embedding_model {stored:?} is unreadable"))?;
            tracing::warn!(stored = %stored, %why, "the stored model cannot be built; only re-embedding works");
            Ok((Arc::new(stand_in), Some(pending)))
        }
        Err(why) => Err(anyhow::anyhow!(
            "embedding.provider: the stored vectors come from {stored}, which this configuration cannot build ({why}), \
             and the configured embedder is {configured_key}; stop here and run `mnemos reindex --reembed` with this \
             configuration to re-embed every memory with {configured_key} (the server can then start), or configure \
             the embedder that made them"
        )),
    }
}

impl Services {
    /// The system of record as opened (maintenance commands such as `mnemos doctor`).
    pub fn record(&self) -> &SystemOfRecord {
        &self.record
    }

    /// Open the data directory and start the runtime, for a process that serves
    /// (`serve`, `mcp`): background work such as a model naming entities runs.
    pub async fn open(settings: &Settings) -> anyhow::Result<Self> {
        Self::open_with(settings, false, true).await
    }

    /// Open for one command that closes again at once (the CLI, `bench`, `eval`):
    /// no background task that would only start to be stopped (a model naming
    /// entities waits for the next server).
    pub async fn open_for_command(settings: &Settings) -> anyhow::Result<Self> {
        Self::open_with(settings, false, false).await
    }

    /// Open for `mnemos reindex --reembed`: the runtime starts even when the stored
    /// vectors' model cannot be built here (nothing but the re-embedding embeds then).
    pub async fn open_for_reembed(settings: &Settings) -> anyhow::Result<Self> {
        Self::open_with(settings, true, false).await
    }

    async fn open_with(
        settings: &Settings,
        allow_unavailable: bool,
        serving: bool,
    ) -> anyhow::Result<Self> {
        let lock = DataDirLock::acquire(&settings.data_dir)?;
        let record = SystemOfRecord::open(settings)
            .await
            .map_err(|e| match e.field {
                Some(field) if !e.message.starts_with(field.as_str()) => {
                    anyhow::anyhow!("{field}: {}", e.message)
                }
                _ => anyhow::Error::msg(e),
            })?;
        let store = record.memories();
        let (embedder, pending_embedder) =
            choose_embedder(settings, store.as_ref(), allow_unavailable).await?;
        let (thought, arbiter) = crate::thought::from_settings(&settings.inner_thought);
        let mut projections = projections(settings, embedder.as_ref()).await?;
        // The entity index lives in the system of record's database, kept like the others.
        // Only a serving process asks the model what its memories name.
        let naming_thought: Arc<dyn mnemos_actors::thought::InnerThought> = if serving {
            thought.clone()
        } else {
            Arc::new(mnemos_actors::thought::RuleThought)
        };
        let (entity_projection, entity_index, naming) = record.entity_index(&naming_thought);
        projections.push(entity_projection);
        let working = crate::working::from_settings(&settings.working)
            .await
            .map_err(keyed_error)?;
        let parts = RuntimeParts {
            memories: store.clone(),
            vectors: Arc::new(HnswVectorIndex::new(settings.vectors.hnsw_threshold)),
            graph: record.graph(),
            working,
            projects: record.projects(),
            kv: record.kv(),
            embedder,
            clock: Arc::new(SystemClock),
            arbiter,
            thought,
            projections,
            entities: Some(entity_index),
        };
        let runtime = Runtime::start(parts, settings.runtime_config())
            .await
            .map_err(|e| anyhow::anyhow!(e.message))?;
        Ok(Self {
            runtime,
            store,
            record,
            pending_embedder,
            naming,
            _lock: lock,
        })
    }

    /// The name of the embedding model the vector index holds vectors of (for reports).
    pub async fn embedder_model(&self) -> String {
        self.runtime
            .health()
            .await
            .index
            .map(|i| i.model)
            .unwrap_or_default()
    }

    /// The queue of memories the inner-thought model is asked about, when it names
    /// entities (its progress goes to `/metrics`).
    pub fn naming_queue(&self) -> Option<Arc<crate::store::model_entities::NamingQueue>> {
        self.naming.as_ref().map(|task| task.queue())
    }

    /// Flush and stop the runtime, then close the store.
    pub async fn close(self) -> anyhow::Result<()> {
        if let Some(naming) = self.naming {
            naming.stop().await;
        }
        let flushed = self.runtime.shutdown().await;
        self.record.close().await;
        flushed.map_err(|e| anyhow::anyhow!(e.message))
    }
}

/// A start-up error naming the settings key at fault (`graph.url: ...`).
fn keyed_error(error: MemoryError) -> anyhow::Error {
    anyhow::anyhow!("{}: {}", error.field.unwrap_or_default(), error.message)
}

/// The external projections the settings name (FalkorDB, Qdrant, Neo4j), in that order.
async fn projections(
    settings: &Settings,
    embedder: &dyn Embedder,
) -> anyhow::Result<Vec<Arc<dyn Projection>>> {
    let mut projections: Vec<Arc<dyn Projection>> = Vec::new();
    if settings.graph.backend == "falkordb" {
        projections.push(Arc::new(
            crate::graph::falkordb::FalkorProjection::new(
                &settings.graph.url,
                &settings.graph.name,
                Duration::from_millis(settings.graph.timeout_ms),
            )
            .map_err(keyed_error)?,
        ));
    }
    if settings.vectors.backend == "qdrant" {
        let qdrant = crate::vectors::qdrant::QdrantProjection::new(
            &settings.vectors.url,
            &settings.vectors.collection,
            embedder.dimension(),
            Duration::from_millis(settings.vectors.timeout_ms),
        )
        .map_err(keyed_error)?;
        // A collection of the wrong shape refuses to start; an unreachable Qdrant
        // only leaves the projection behind until it answers.
        match qdrant.ensure_collection().await {
            Ok(()) => {}
            Err(e) if e.code == mnemos_actors::ErrorCode::InvalidArgument => {
                return Err(keyed_error(e))
            }
            Err(e) => {
                tracing::warn!(error = %e, "Qdrant is unreachable; its projection starts behind")
            }
        }
        projections.push(Arc::new(qdrant));
    }
    if settings.graph.backend == "neo4j" {
        projections.push(Arc::new(
            crate::graph::neo4j::Neo4jProjection::new(
                &settings.graph.url,
                &settings.graph.user,
                &settings.graph.password,
                Duration::from_millis(settings.graph.timeout_ms),
            )
            .map_err(keyed_error)?,
        ));
    }
    Ok(projections)
}

/// The HTTP application: a bound listener and the services behind it.
pub struct Application {
    /// Bound listener.
    listener: TcpListener,
    /// Runtime and stores.
    services: Services,
    /// Settings it was built from.
    settings: Settings,
}

impl Application {
    /// Open the services and bind `server.bind`.
    pub async fn build(settings: Settings) -> anyhow::Result<Self> {
        let started = Instant::now();
        // Whoever built these settings (a file, the environment, a test, a library
        // user), nothing starts on settings that do not hold together.
        settings.validate().map_err(|e| anyhow::anyhow!(e.0))?;
        let services = Services::open(&settings).await?;
        let listener = TcpListener::bind(&settings.server.bind)
            .await
            .with_context(|| format!("server.bind: cannot listen on {}", settings.server.bind))?;
        tracing::info!(
            address = %listener.local_addr()?,
            ready_ms = started.elapsed().as_millis() as u64,
            data_dir = %settings.data_dir.display(),
            "mnemos is ready"
        );
        Ok(Self {
            listener,
            services,
            settings,
        })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound listener has an address")
    }

    /// The runtime handle.
    pub fn runtime(&self) -> Runtime {
        self.services.runtime.clone()
    }

    /// Serve until `shutdown` completes; then stop accepting, let in-flight requests finish
    /// (up to `server.shutdown_grace_seconds`), flush the stores and return.
    pub async fn run_until(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let server = &self.settings.server;
        if server.mcp_allowed_hosts.is_some() {
            tracing::warn!(
                "server.mcp_allowed_hosts is the old name of server.allowed_hosts and now guards \
                 every route; rename it"
            );
        }
        let mcp_sessions = Arc::new(AtomicUsize::new(0));
        let auth = &self.settings.auth;
        let keys = self.services.record.keys();
        let authenticator = auth
            .keys()
            .then(|| Arc::new(Authenticator::new(keys.clone(), auth.rate_limits())));
        if !auth.keys() && auth.allow_unauthenticated_network {
            tracing::warn!(
                bind = %server.bind,
                "auth.allow_unauthenticated_network is set: this server takes requests without API keys \
                 from anyone who can reach it; only run it so behind a proxy that authenticates"
            );
        }
        let state = AppState {
            runtime: self.services.runtime.clone(),
            fault_injection: server.fault_injection,
            metrics: crate::telemetry::metrics_handle(),
            started: Instant::now(),
            project_roots: crate::context::ProjectRoots::new(server.project_roots.clone()),
            mcp_sessions: mcp_sessions.clone(),
            naming: self.services.naming_queue(),
            keys: keys.clone(),
            authenticator: authenticator.clone(),
            public_metrics: auth.public_metrics,
            pending_embedder: self.services.pending_embedder.clone(),
            vector_projection: self.settings.vectors.backend == "qdrant",
        };
        let allowed_hosts = server.host_allow_list().to_vec();
        let end_mcp_sessions = tokio_util::sync::CancellationToken::new();
        let router = crate::router::router(RouterParts {
            proxy: crate::proxy::Proxy::new(self.settings.proxy.clone())?,
            guard: GuardSettings {
                allowed_hosts: allowed_hosts.clone(),
                allowed_origins: server.allowed_origins.clone(),
                max_body_bytes: server.max_body_bytes,
                max_import_bytes: server.max_import_bytes,
                body_timeout: Duration::from_millis(server.body_timeout_ms),
            },
            mcp: crate::mcp::HttpOptions {
                allowed_hosts,
                project_roots: state.project_roots.clone(),
                max_body_bytes: server.max_body_bytes,
                max_sessions: server.mcp_max_sessions,
                session_idle_timeout: Duration::from_millis(server.mcp_session_idle_timeout_ms),
                live_sessions: mcp_sessions,
                shutdown: end_mcp_sessions.clone(),
            },
            identity: Gate {
                authenticator,
                audit: keys,
                public_metrics: auth.public_metrics,
            },
            state,
        });
        let limits = ConnectionLimits {
            header_timeout: Duration::from_millis(server.header_timeout_ms),
            idle_timeout: Duration::from_millis(server.idle_timeout_ms),
            max_connections: server.max_connections,
        };
        let (signalled_tx, signalled_rx) = tokio::sync::watch::channel(false);
        let signal = async move {
            shutdown.await;
            tracing::info!("shutdown requested; draining requests");
            // MCP sessions keep a stream open; end them so the drain is not held up.
            end_mcp_sessions.cancel();
            let _ = signalled_tx.send(true);
        };
        let grace = Duration::from_secs(self.settings.server.shutdown_grace_seconds);
        let serve = connections::serve(self.listener, router, limits, signal);
        let deadline = async move {
            let mut signalled = signalled_rx;
            let _ = signalled.wait_for(|s| *s).await;
            tokio::time::sleep(grace).await;
        };
        tokio::select! {
            () = serve => {}
            () = deadline => tracing::warn!("requests still running after the grace period; stopping anyway"),
        }
        self.services.close().await?;
        tracing::info!("stores flushed; bye");
        Ok(())
    }
}

/// Completes on SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
}

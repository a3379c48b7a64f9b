//! Remote embeddings: any OpenAI-compatible `POST /v1/embeddings` (OpenAI, Ollama,
//! vLLM, TEI, llama-server) through async-openai.
//!
//! Texts go in requests of `embedding.batch_size`; a request that fails with 429, a
//! 5xx, a timeout or a broken connection is retried with exponential backoff (at most
//! `embedding.max_retries` times, each attempt within `embedding.timeout_ms`); other
//! failures (a bad key, an unknown model, a refused input) are not retried and name
//! the setting to fix. Vectors are L2-normalised (not every server does). Empty texts
//! are not sent (servers refuse them) and embed as zero vectors. The dimension is
//! learnt at start from a probe (and checked against `embedding.dimensions` when
//! set), so a data directory of another dimension is refused before anything runs.

use std::time::Duration;

use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::types::embeddings::{CreateEmbeddingRequest, EmbeddingInput};
use async_openai::Client;
use mnemos_actors::embedding::{l2_normalize, Embedder};
use mnemos_actors::error::{ErrorCode, MemoryError, MemoryResult};

use crate::config::EmbeddingSettings;

/// First wait before a retry; doubled per attempt.
const FIRST_BACKOFF: Duration = Duration::from_millis(200);

/// Longest wait between two attempts.
const LONGEST_BACKOFF: Duration = Duration::from_secs(5);

/// The longest one request may take: every attempt (the first and `retries` more)
/// running to `timeout`, and every backoff between them. What a caller waiting for an
/// embedding allows per request, so slow work completes rather than timing out.
pub fn worst_case(timeout: Duration, retries: u32) -> Duration {
    let mut total = timeout.saturating_mul(retries.saturating_add(1));
    let mut backoff = FIRST_BACKOFF;
    for _ in 0..retries {
        total += backoff;
        backoff = (backoff * 2).min(LONGEST_BACKOFF);
    }
    total
}

/// An embedder served by an OpenAI-compatible API.
pub struct OpenAiEmbedder {
    /// The connection and its settings, shared with the tasks that make the requests.
    remote: std::sync::Arc<Remote>,
    /// The runtime the requests run on (embedding is called from blocking threads).
    runtime: tokio::runtime::Handle,
}

/// What a request needs: the client and the settings of the server.
struct Remote {
    /// The API client (base URL and key from the settings).
    client: Client<OpenAIConfig>,
    /// Where requests go, for messages (never holds the key).
    base_url: String,
    /// The `model` of each request.
    model: String,
    /// `dimensions` sent with each request, when set.
    requested_dimensions: Option<u32>,
    /// Length of every vector (learnt from the probe at start).
    dimension: usize,
    /// `openai:<model>:<dimension>`, recorded by stores.
    model_id: String,
    /// Texts per request.
    batch_size: usize,
    /// Budget of one attempt.
    timeout: Duration,
    /// Retries after the first attempt of a request.
    max_retries: u32,
    /// Characters of a text sent at most (longer ones are cut, as the model would).
    max_input_chars: usize,
}

impl std::fmt::Debug for OpenAiEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiEmbedder")
            .field("base_url", &self.remote.base_url)
            .field("model_id", &self.remote.model_id)
            .finish_non_exhaustive()
    }
}

/// Why an attempt failed, and whether another may succeed.
struct AttemptError {
    /// Worth retrying (429, 5xx, timeout, transport).
    transient: bool,
    /// What happened, for the final error.
    message: String,
}

impl OpenAiEmbedder {
    /// Connect to the configured server and learn the dimension with one probe.
    pub async fn connect(settings: &EmbeddingSettings) -> MemoryResult<Self> {
        Ok(Self {
            remote: std::sync::Arc::new(Remote::connect(settings).await?),
            runtime: tokio::runtime::Handle::current(),
        })
    }
}

impl Remote {
    /// Connect to the configured server and learn the dimension with one probe.
    pub async fn connect(settings: &EmbeddingSettings) -> MemoryResult<Self> {
        let base_url = settings.base_url.trim_end_matches('/').to_string();
        let key = if settings.api_key.is_empty() {
            std::env::var("OPENAI_API_KEY").unwrap_or_default()
        } else {
            settings.api_key.clone()
        };
        let config = OpenAIConfig::new()
            .with_api_base(&base_url)
            .with_api_key(key);
        let requested_dimensions = (settings.dimensions > 0).then_some(settings.dimensions);
        let mut embedder = Self {
            client: Client::with_config(config),
            base_url,
            model: settings.model.clone(),
            requested_dimensions,
            dimension: settings.dimensions as usize,
            model_id: String::new(),
            batch_size: settings.batch_size.max(1),
            timeout: Duration::from_millis(settings.timeout_ms.max(1)),
            max_retries: settings.max_retries,
            max_input_chars: settings.max_input_chars.max(1),
        };
        let probe = embedder.request(&["dimension probe".to_string()]).await;
        match probe {
            Ok(vectors) => {
                let found = vectors.first().map_or(0, Vec::len);
                if found == 0 {
                    return Err(MemoryError::invalid(
                        "embedding.model",
                        format!(
                            "{} returned an empty vector for model {}",
                            embedder.base_url, embedder.model
                        ),
                    ));
                }
                if let Some(wanted) = requested_dimensions {
                    if found != wanted as usize {
                        return Err(MemoryError::invalid(
                            "embedding.dimensions",
                            format!(
                                "is {wanted} but {} returns {found}-dimensional vectors for model {} (it may not support `dimensions`); set embedding.dimensions = {found} or 0",
                                embedder.base_url, embedder.model
                            ),
                        ));
                    }
                }
                embedder.dimension = found;
            }
            Err(error) if requested_dimensions.is_some() => {
                tracing::warn!(%error, "embedding server not answering at start; using embedding.dimensions and retrying per request");
            }
            Err(error) => {
                return Err(MemoryError::new(
                    error.code,
                    format!(
                        "{}; mnemos asks the server once at start to learn the vector length (or set embedding.dimensions to start without it)",
                        error.message
                    ),
                ));
            }
        }
        embedder.model_id = format!("openai:{}:{}", embedder.model, embedder.dimension);
        tracing::info!(base_url = %embedder.base_url, model_id = %embedder.model_id, "remote embedder ready");
        Ok(embedder)
    }

    /// Embed `texts` in requests of `batch_size`, each retried on transient failures.
    async fn request(&self, texts: &[String]) -> MemoryResult<Vec<Vec<f32>>> {
        let mut vectors = vec![Vec::new(); texts.len()];
        let sendable: Vec<usize> = (0..texts.len())
            .filter(|&i| !texts[i].trim().is_empty())
            .collect();
        for chunk in sendable.chunks(self.batch_size) {
            let inputs: Vec<String> = chunk
                .iter()
                .map(|&i| texts[i].chars().take(self.max_input_chars).collect())
                .collect();
            let embedded = self.with_retries(inputs).await?;
            for (&index, vector) in chunk.iter().zip(embedded) {
                vectors[index] = vector;
            }
        }
        let dimension = vectors
            .iter()
            .map(Vec::len)
            .find(|&l| l > 0)
            .unwrap_or(self.dimension);
        for vector in &mut vectors {
            if vector.is_empty() {
                *vector = vec![0.0; dimension];
            }
        }
        Ok(vectors)
    }

    /// One request, retried with backoff while it fails transiently.
    async fn with_retries(&self, inputs: Vec<String>) -> MemoryResult<Vec<Vec<f32>>> {
        let mut backoff = FIRST_BACKOFF;
        let mut attempt = 0;
        loop {
            match self.attempt(&inputs).await {
                Ok(vectors) => return Ok(vectors),
                Err(failure) if failure.transient && attempt < self.max_retries => {
                    attempt += 1;
                    metrics::counter!("mnemos_embedding_retries_total").increment(1);
                    tracing::warn!(attempt, error = %failure.message, "embedding request failed; retrying");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(LONGEST_BACKOFF);
                }
                Err(failure) => {
                    let code = if failure.transient {
                        ErrorCode::BackendUnavailable
                    } else {
                        ErrorCode::InvalidArgument
                    };
                    let mut error = MemoryError::new(
                        code,
                        format!(
                            "the embedding server {} (model {}) failed after {} attempt(s): {}",
                            self.base_url,
                            self.model,
                            attempt + 1,
                            failure.message
                        ),
                    );
                    if !failure.transient {
                        error.field = Some("embedding.model".into());
                    }
                    return Err(error);
                }
            }
        }
    }

    /// One attempt within the timeout; vectors in input order, normalised.
    async fn attempt(&self, inputs: &[String]) -> Result<Vec<Vec<f32>>, AttemptError> {
        let request = CreateEmbeddingRequest {
            model: self.model.clone(),
            input: EmbeddingInput::StringArray(inputs.to_vec()),
            encoding_format: None,
            user: None,
            dimensions: self.requested_dimensions,
        };
        let answer = tokio::time::timeout(self.timeout, self.client.embeddings().create(request))
            .await
            .map_err(|_| AttemptError {
                transient: true,
                message: format!(
                    "no answer within {} ms (embedding.timeout_ms)",
                    self.timeout.as_millis()
                ),
            })?
            .map_err(classify)?;
        if answer.data.len() != inputs.len() {
            return Err(AttemptError {
                transient: false,
                message: format!("{} vectors for {} inputs", answer.data.len(), inputs.len()),
            });
        }
        let mut vectors = vec![Vec::new(); inputs.len()];
        for item in answer.data {
            let index = item.index as usize;
            if index >= vectors.len() {
                return Err(AttemptError {
                    transient: false,
                    message: format!("a vector with index {index} for {} inputs", inputs.len()),
                });
            }
            let mut vector = item.embedding;
            l2_normalize(&mut vector);
            vectors[index] = vector;
        }
        if self.dimension > 0 {
            if let Some(bad) = vectors.iter().find(|v| v.len() != self.dimension) {
                return Err(AttemptError {
                    transient: false,
                    message: format!(
                        "a {}-dimensional vector where {} were expected (did the model behind the URL change?)",
                        bad.len(),
                        self.dimension
                    ),
                });
            }
        }
        Ok(vectors)
    }
}

/// Sort an API failure into transient (retry) or not.
fn classify(error: OpenAIError) -> AttemptError {
    match error {
        OpenAIError::ApiError(response) => {
            let status = response.status_code;
            let transient = status.as_u16() == 429 || status.is_server_error();
            let hint = match status.as_u16() {
                401 | 403 => " (check embedding.api_key)",
                404 => " (check embedding.base_url and embedding.model)",
                _ => "",
            };
            AttemptError {
                transient,
                message: format!("{status} {}{hint}", response.api_error.message),
            }
        }
        OpenAIError::Reqwest(e) => AttemptError {
            transient: true,
            message: format!("transport error: {e}"),
        },
        OpenAIError::JSONDeserialize(e, body) => AttemptError {
            transient: false,
            message: format!(
                "the answer is not an embedding list ({e}): {}",
                body.chars().take(200).collect::<String>()
            ),
        },
        other => AttemptError {
            transient: false,
            message: other.to_string(),
        },
    }
}

impl Embedder for OpenAiEmbedder {
    fn model_id(&self) -> &str {
        &self.remote.model_id
    }

    fn dimension(&self) -> usize {
        self.remote.dimension
    }

    /// Called on blocking threads: the requests run on the runtime this embedder was
    /// made on while this thread waits for them.
    fn embed_batch(&self, texts: &[&str]) -> MemoryResult<Vec<Vec<f32>>> {
        let owned: Vec<String> = texts.iter().map(|t| t.to_string()).collect();
        let (sender, receiver) = std::sync::mpsc::channel();
        let remote = self.remote.clone();
        self.runtime.spawn(async move {
            let _ = sender.send(remote.request(&owned).await);
        });
        receiver
            .recv()
            .map_err(|_| MemoryError::unavailable("the embedding request was dropped"))?
    }

    fn parallel_batches(&self) -> bool {
        false
    }

    fn batching_pays(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worst_case_of_a_request_covers_every_attempt_and_backoff() {
        // The defaults: 30 s per attempt, four retries, 0.2 + 0.4 + 0.8 + 1.6 s apart.
        assert_eq!(
            worst_case(Duration::from_secs(30), 4),
            Duration::from_millis(150_000 + 3_000)
        );
        assert_eq!(
            worst_case(Duration::from_secs(2), 0),
            Duration::from_secs(2)
        );
        // Backoff stops growing at its longest.
        assert_eq!(
            worst_case(Duration::from_millis(1), 6),
            Duration::from_millis(7 + 200 + 400 + 800 + 1_600 + 3_200 + 5_000)
        );
    }
}

